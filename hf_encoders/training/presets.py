"""Presets: `hf-encoders pretrain --preset NAME` runs a paper's model size and training settings; the small-run
presets (`<method>-tiny`, `<method>-small`) are what a model built from scratch gets when the command line sets
neither a preset nor its optimisation (learning rate, warm-up, schedule).

A preset is a table of option values, each with the table or section of the paper it comes from. It enters the
pretrain parser as defaults (`parser.set_defaults`), so the layers are, lowest first: the parser's own defaults, the
preset, the CUDA fast path's defaults (training/fast_path.py), the flags given. Every flag given that differs from
the preset is logged as an override and named on the model card. The presets themselves live in each method's
folder (`methods/<name>/presets.py`), reached through the method table (`Method.presets`, `Method.small_runs`).
"""

import math
import os
from dataclasses import dataclass, field
from typing import Any

# TrainingArguments' own per_device_train_batch_size, for a preset that sets none.
TRAINER_MICRO_BATCH = 8
# The options that set a run's optimisation: given any of them, a small-run preset stays out of the way, since its
# warm-up and schedule belong to its own rate.
OPTIMISATION_OPTIONS = ("learning_rate", "warmup_steps", "lr_scheduler_type", "lr_scheduler_kwargs")


@dataclass(frozen=True)
class Sourced:
    """A preset's value and where in the paper it comes from."""

    value: Any
    source: str


@dataclass(frozen=True)
class Preset:
    """One paper's pre-training run: `options` are pretrain's (PretrainArguments and TrainingArguments fields),
    `config` the model's config fields (entering as --config_overrides, field by field), `batch_size` the sequences
    per optimizer step over all GPUs, from which the gradient accumulation of a run on N GPUs follows. `model` is the
    pre-training model class the plan sizes ("module:Class"), `frozen` one that runs forward only (TaCL's teacher)."""

    name: str
    method: str
    paper: str
    summary: str
    model: str | None = None
    batch_size: Sourced | None = None  # None: the run's own batch (a small-run preset)
    options: dict[str, Sourced] = field(default_factory=dict)
    config: dict[str, Sourced] = field(default_factory=dict)
    frozen: str | None = None
    # Options the run must be given, with the reason (CPT continues a causal LM the preset cannot name).
    needs: dict[str, str] = field(default_factory=dict)

    def value(self, option: str, default=None):
        return self.options[option].value if option in self.options else default

    def config_overrides(self) -> str | None:
        return ",".join(f"{key}={item.value}" for key, item in self.config.items()) or None

    def accumulation(self, micro_batch: int, world_size: int) -> int:
        """Micro-batches per optimizer step that reach the paper's batch on `world_size` processes (at least)."""
        return max(1, math.ceil(self.batch_size.value / (micro_batch * world_size)))

    def defaults(self, given: dict, world_size: int) -> dict:
        """The parser defaults this preset sets, with the gradient accumulation for `world_size` processes at the
        micro-batch given (else the preset's)."""
        values = {option: item.value for option, item in self.options.items()}
        values.update(method=self.method, preset=self.name)
        if given.keys() & BLOCK_SIZE_FROM:
            values.pop("block_size", None)
        if self.config:
            values["config_overrides"] = self.config_overrides()
        if self.batch_size is None:
            return values
        micro_batch = given.get(
            "per_device_train_batch_size", values.get("per_device_train_batch_size", TRAINER_MICRO_BATCH)
        )
        values["gradient_accumulation_steps"] = self.accumulation(micro_batch, world_size)
        return values


# The options that decide a run's block size themselves (a schedule of lengths, a token cache's blocks): a preset's
# --block_size is then left out.
BLOCK_SIZE_FROM = {"block_size_schedule", "tokenized_dir"}


def presets(small: bool = True) -> dict[str, Preset]:
    """Every method's presets by name, in the method table's order: the papers', then (with `small`) the small-run
    ones."""
    from ..methods import METHODS, load

    found = [preset for method in METHODS.values() if method.presets for preset in load(method.presets).values()]
    if small:
        found += [
            small_run_preset(method.name, size, values)
            for method in METHODS.values()
            if method.small_runs
            for size, values in load(method.small_runs).items()
        ]
    return {preset.name: preset for preset in found}


def small_run_preset(method: str, size: str, values: dict[str, Sourced]) -> Preset:
    return Preset(
        name=f"{method}-{size}",
        method=method,
        paper="the small-run defaults of a model built from scratch",
        summary=f"a --model_size {size} model from scratch on a small budget",
        options={"model_size": Sourced(size, "the preset's size"), **values},
    )


def get_preset(name: str) -> Preset:
    known = presets()
    if name not in known:
        raise ValueError(f"Unknown --preset {name!r}; choose one of {', '.join(known)}.")
    return known[name]


def small_run(given: dict) -> Preset | None:
    """The small-run preset a run gets (None if none): one that builds its model from scratch, with neither --preset
    nor an optimisation option given, of a method and --model_size (tiny when left out) that has one."""
    from ..methods import get_method
    from .model_sizes import DEFAULT_MODEL_SIZE

    starts = ("preset", "model_name_or_path", "from_causal_lm", *OPTIMISATION_OPTIONS)
    if "method" not in given or any(option in given for option in starts):
        return None
    name = f"{get_method(given['method']).name}-{given.get('model_size') or DEFAULT_MODEL_SIZE}"
    return presets().get(name)


def world_size_from_environment() -> int:
    """The number of processes a launcher (torchrun, accelerate) starts, read before TrainingArguments exist."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def merged_config_overrides(preset: str | None, given: str | None) -> str | None:
    """The preset's config fields with those `--config_overrides` gives in their place, field by field (an entry
    that is not KEY=VALUE kept as given, for the parser of overrides to refuse)."""
    from .model_sizes import config_override_entries

    entries = {_key(item): item for item in config_override_entries(preset)}
    entries.update({_key(item): item for item in config_override_entries(given)})
    return ",".join(entries.values()) or None


def _key(item: str) -> str:
    return item.partition("=")[0].strip()


def overrides(preset: Preset, args, training_args) -> list[str]:
    """What this run sets otherwise than `preset`: each option, config field and the batch, with the preset's
    value beside the run's."""
    found = []
    for option, item in preset.options.items():
        value = getattr(args, option) if hasattr(args, option) else getattr(training_args, option)
        if value != item.value:
            shown = getattr(value, "value", value)  # an enum's (lr_scheduler_type) as the command line spells it
            found.append(f"{option}={shown} (preset: {item.value})")
    from .model_sizes import config_override_pairs

    run_config = dict(config_override_pairs(args.config_overrides))
    # None under a preset with config fields: the run continues a saved model, whose size the preset does not set.
    for key, item in preset.config.items() if args.config_overrides is not None else ():
        if run_config.get(key) != str(item.value):
            found.append(f"{key}={run_config.get(key, 'the default')} (preset: {item.value})")
    for key in sorted(run_config.keys() - preset.config.keys()):
        found.append(f"{key}={run_config[key]} (not set by the preset)")
    batch = training_args.per_device_train_batch_size * training_args.world_size
    batch *= training_args.gradient_accumulation_steps
    if preset.batch_size is not None and batch != preset.batch_size.value:
        found.append(f"batch of {batch} sequences per step (preset: {preset.batch_size.value})")
    return found


def card_lines(args, training_args) -> list[str]:
    """The model card's lines naming the preset a run used and what the run set otherwise."""
    if not args.preset:
        return []
    preset = get_preset(args.preset)
    changed = overrides(preset, args, training_args)
    return [
        f"- preset: {preset.name} ({preset.summary}; {preset.paper})",
        f"- overrides of the preset: {'; '.join(changed) if changed else 'none'}",
    ]


# Where the small-run settings were measured: docs/pretraining.md, "Small runs from scratch".
MEASURED = "measured on a held-out corpus (docs/pretraining.md, Small runs from scratch)"


def small_run_settings(learning_rate: float, source: str = MEASURED) -> dict[str, Sourced]:
    """A small run's settings: its peak rate, batches of 32 blocks of 64 tokens, 10% warm-up, linear decay and a
    2,000-token vocabulary (a small model's output layer is most of its compute, and a smaller vocabulary leaves the
    unigram entropy as it is)."""
    return {
        "learning_rate": Sourced(learning_rate, source),
        # The batch the settings were measured with: Trainer's 8 x 128 gives a step half the tokens, and a tiny model
        # then learns too little in the same steps to fine-tune above chance.
        "per_device_train_batch_size": Sourced(32, MEASURED),
        "block_size": Sourced(64, MEASURED),
        "warmup_steps": Sourced(0.1, MEASURED + " (a fraction of the run's steps)"),
        "lr_scheduler_type": Sourced("linear", MEASURED),
        "vocab_size": Sourced(2000, MEASURED),
    }
