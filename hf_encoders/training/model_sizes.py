"""Model sizes for `--model_size` and the `--config_overrides` syntax shared by every recipe."""

import difflib

from transformers import PreTrainedConfig

TRUE, FALSE = ("true", "1", "y", "yes"), ("false", "0", "n", "no")
# The preset of a model built from scratch without --model_size.
DEFAULT_MODEL_SIZE = "tiny"


def config_override_pairs(text: str | None) -> list[tuple[str, str]]:
    """The entries of `--config_overrides` as (key, value) strings, as written: no field checked, no value cast (an
    entry without '=' has the value '', for `parse_config_overrides` to refuse)."""
    return [
        (key.strip(), value.strip())
        for key, _, value in (item.partition("=") for item in config_override_entries(text))
    ]


def config_override_entries(text: str | None) -> list[str]:
    """The comma-separated entries of `--config_overrides`, stripped, empty ones dropped."""
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def parse_config_overrides(text: str | None, config_class: type[PreTrainedConfig]) -> dict:
    """'hidden_size=128,dropout=0.0,tie_word_embeddings=false' -> dict, as run_mlm.py's `update_from_string` reads
    it: each key must be a field of `config_class` (a typo is an error, not a stray field), each value is cast to
    the type of that field's default."""
    defaults = config_class().to_dict()
    overrides = {}
    for item in config_override_entries(text):
        key, separator, value = (part.strip() for part in item.partition("="))
        if not separator or not key:
            raise ValueError(
                f"--config_overrides entry {item!r} is not KEY=VALUE; write e.g. 'hidden_size=128,num_hidden_layers=4'."
            )
        check_config_fields([key], config_class, defaults)
        overrides[key] = _cast(key, value, defaults[key])
    return overrides


def check_config_fields(keys, config_class: type[PreTrainedConfig], defaults: dict | None = None) -> None:
    """A ValueError naming each key that is not a field of `config_class`, its close matches and the valid fields
    (those the model adds to PreTrainedConfig's own)."""
    defaults = config_class().to_dict() if defaults is None else defaults
    unknown = [key for key in keys if key not in defaults]
    if unknown:
        own = sorted(set(defaults) - set(PreTrainedConfig().to_dict()))
        guesses = {key: difflib.get_close_matches(key, defaults, n=3) for key in unknown}
        named = "; ".join(
            f"{key!r} (did you mean {' or '.join(guesses[key])}?)" if guesses[key] else repr(key) for key in unknown
        )
        raise ValueError(f"{config_class.__name__} has no field {named}. Its fields: {', '.join(own)}.")


def _cast(key: str, value: str, default):
    """`value` as the type of the field's `default` (a guess among bool, int, float, str where it is None)."""
    if default is None:
        return _typed(value)
    expected = type(default)
    if expected is bool and value.lower() in TRUE + FALSE:
        return value.lower() in TRUE
    if expected in (int, float, str):
        try:
            return expected(value)
        except ValueError:
            pass
    raise ValueError(
        f"--config_overrides {key}={value}: {key} takes a{'n' if expected is int else ''} {expected.__name__} "
        f"(its default is {default!r})."
    )


def _typed(value: str) -> int | float | bool | str:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def sized_config_kwargs(
    presets: dict[str, dict], model_size: str | None, overrides: str | None, config_class: type[PreTrainedConfig]
) -> dict:
    """The config fields of a model built from scratch: the `model_size` preset (tiny when None) and the overrides."""
    model_size = model_size or DEFAULT_MODEL_SIZE
    if model_size not in presets:
        raise ValueError(f"Unknown --model_size {model_size!r}; choose one of {', '.join(presets)}.")
    return {**presets[model_size], **parse_config_overrides(overrides, config_class)}
