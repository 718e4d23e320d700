"""LoRA (peft) for every method's task models: the attention projections to adapt, and the task head to train.

`lora_config(model)` returns a `peft.LoraConfig` for `peft.get_peft_model(model, config)`. The adapted modules
follow the LoRA paper and peft's own defaults: the query and value projections of every encoder layer. Where peft
already knows a model type (bert, roberta, llama, ...) its mapping is used as is; this file only adds the types
peft cannot know. TaCL needs no entry: it exports a plain student (bert, roberta, ...) that peft already knows.
peft itself is the optional `lora` extra (`pip install "hf-encoders[lora]"`).
To adapt every linear layer of the encoder instead, pass `target_modules="all-linear"` (peft leaves the head out).

The task head is freshly initialised at fine-tuning, so it is trained in full (`modules_to_save`). peft's
SEQ_CLS task only adds modules named `classifier` or `score`; the biphasic head also has a `dense` layer (EuroBERT's
head), which peft would leave frozen at its random initialisation, so the head is read off the model instead.
"""

from typing import TYPE_CHECKING

from torch import nn

from .methods import METHODS

if TYPE_CHECKING:
    from peft import LoraConfig

# Module names (suffixes, peft's convention) that LoRA adapts by default, per `config.model_type`: our methods'
# (from the method table), then the types a method exports to or trains that peft has no default for.
LORA_TARGET_MODULES: dict[str, list[str]] = {
    **{
        method.model_type: list(method.lora_target_modules) for method in METHODS.values() if method.lora_target_modules
    },
    "modernbert": ["Wqkv"],  # a TaCL student: the fused query/key/value projection
    "eurobert": list(METHODS["biphasic"].lora_target_modules),  # what a biphasic model exports to
}


def import_peft():
    """peft, an optional dependency (the `lora` extra): imported when LoRA is used, not with hf_encoders."""
    try:
        import peft.utils.constants
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] != "peft":  # peft is there, a dependency of it is not
            raise
        raise ModuleNotFoundError('LoRA needs peft: pip install "hf-encoders[lora]"', name="peft") from error
    return peft


def peft_targets() -> dict[str, list[str]]:
    return import_peft().utils.constants.TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING


def lora_target_modules(model_type: str) -> list[str]:
    """The default LoRA targets for a model type: this package's table, then peft's own mapping."""
    targets = LORA_TARGET_MODULES.get(model_type) or peft_targets().get(model_type)
    if targets is None:
        hint = (
            " TaCL trains a plain student: save it with TaclForPreTraining.save_student, load it with "
            "AutoModelForSequenceClassification and call lora_config on that."
            if model_type == "tacl"
            else ""
        )
        raise ValueError(
            f"No default LoRA target modules for model type {model_type!r} (known: "
            f"{', '.join(sorted(LORA_TARGET_MODULES))} and peft's own types). Pass target_modules=[...] with the "
            f"names of its attention projections (or target_modules='all-linear').{hint}"
        )
    return list(targets)


def head_modules(model: nn.Module) -> list[str]:
    """Top-level modules of a task model that hold parameters outside its base model: the task head.

    peft matches `modules_to_save` as name suffixes, so a head name that also ends a module inside the base model
    (a BERT head called `dense` would match every `attention.output.dense`) is an error rather than a silent
    unfreezing of the encoder.
    """
    base = getattr(model, "base_model", model)
    if base is model:  # a base model, or a module that does not say which part is its encoder
        return []
    names = [
        name for name, child in model.named_children() if child is not base and any(True for _ in child.parameters())
    ]
    for name in names:
        clashes = [key for key, _ in base.named_modules() if key.endswith(name)]
        if clashes:
            raise ValueError(
                f"The head module {name!r} of {type(model).__name__} shares its name with {clashes[:3]} in the encoder, "
                "so peft would train those too. Pass modules_to_save=[...] with unambiguous names."
            )
    return names


def lora_config(model: nn.Module, r: int = 8, alpha: int = 16, dropout: float = 0.0, **kwargs) -> "LoraConfig":
    """A `peft.LoraConfig` for a sequence-classification model of any method (mae_lm, biphasic, a TaCL student).

    Target modules come from `model.config.model_type` (see `LORA_TARGET_MODULES`), the fully trained
    `modules_to_save` are the model's task head. Any `LoraConfig` field can be overridden through `kwargs`
    (`target_modules`, `modules_to_save`, `task_type`, ...).
    """
    if kwargs.get("target_modules") is None:
        kwargs["target_modules"] = lora_target_modules(model.config.model_type)
    if "modules_to_save" not in kwargs:
        kwargs["modules_to_save"] = head_modules(model) or None
    kwargs.setdefault("task_type", "SEQ_CLS")
    return import_peft().LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, **kwargs)
