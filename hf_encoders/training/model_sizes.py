"""Model sizes for `--model_size` and the `--config_overrides` syntax shared by every recipe."""


def parse_config_overrides(text: str | None) -> dict[str, int | float | bool | str]:
    """'hidden_size=128,dropout=0.0,tie_word_embeddings=false' -> typed dict (run_mlm.py's syntax)."""
    overrides = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        key, separator, value = item.partition("=")
        if not separator or not key:
            raise ValueError(
                f"--config_overrides entry {item!r} is not KEY=VALUE; write e.g. 'hidden_size=128,num_hidden_layers=4'."
            )
        overrides[key.strip()] = _typed(value.strip())
    return overrides


def _typed(value: str) -> int | float | bool | str:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def sized_config_kwargs(presets: dict[str, dict], model_size: str, overrides: str | None) -> dict:
    if model_size not in presets:
        raise ValueError(f"Unknown --model_size {model_size!r}; choose one of {', '.join(presets)}.")
    return {**presets[model_size], **parse_config_overrides(overrides)}
