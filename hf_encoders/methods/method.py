"""`Method`: what the rest of the package needs to know about one pre-training method, declared in its folder."""

from dataclasses import dataclass
from importlib import import_module


@dataclass(frozen=True)
class Method:
    # The one spelling of the method: `--method`, `hf_encoders/methods/<name>/`, `model_cards/<name>.md`, the tests'
    # ids.
    name: str
    # How prose names it (the demo's report, messages).
    title: str
    # `model_type` of the checkpoints it writes.
    model_type: str
    # "module:attribute" references, imported when used (`load`): a method's dependencies load only when it runs.
    recipe: str
    collator: str
    # Our configuration class, whose `default_auto_map` names the model classes to register; None for a method
    # trained on a stock Transformers model (the MLM baseline).
    config: str | None = None
    # Modules LoRA adapts by default (peft's suffix convention); None where peft's own table knows the model type.
    lora_target_modules: tuple[str, ...] | None = None
    # `export(checkpoint, output_dir)` writing a checkpoint that needs no remote code; None where none is needed
    # or possible, and `export_note` says why.
    exporter: str | None = None
    export_note: str = "its checkpoints load without remote code already"
    # In the demo, the method whose freshly trained encoder this method continues (TaCL needs a pretrained one).
    demo_continues: str | None = None
    # What else differs from the demo's MLM baseline row besides the objective: the demo runs each method as it is
    # usually set up, so its table must say which differences confound a comparison (experiments/ controls them).
    demo_confounds: str = "none: this is the baseline"
    # "module:attribute" of its papers' presets ({name: Preset}, `pretrain --preset NAME`, `plan`), and of its
    # small-run option values by --model_size ({size: {option: Sourced}}); None where it has none.
    presets: str | None = None
    small_runs: str | None = None

    @property
    def card_template(self) -> str:
        return self.name


def load(reference: str):
    """The object a "package.module:attribute" reference names."""
    module, _, attribute = reference.partition(":")
    return getattr(import_module(module), attribute)
