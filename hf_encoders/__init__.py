"""hf-encoders: TaCL, MAE-LM and biphasic CLM->MLM pre-training as first-class Transformers models.

Importing this package registers every model type with the Auto classes (transformers' public `register` API,
registration.py), so checkpoints we write load without `trust_remote_code` here and with it anywhere else. The
model classes are imported by that registration; the collators, callbacks and LoRA helper on first use, so that the
import does not pay for Trainer, datasets or accelerate. The `hf-encoders` script lives outside the package
(hf_encoders_cli.py), so that its `--help` imports none of this.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from ._moved import moved_attribute
from .methods import METHODS, Method
from .models.biphasic import (
    BiphasicConfig,
    BiphasicEncoder,
    BiphasicEncoderForMaskedLM,
    BiphasicEncoderForPreTraining,
    BiphasicEncoderForQuestionAnswering,
    BiphasicEncoderForSequenceClassification,
    BiphasicEncoderForTokenClassification,
)
from .models.mae_lm import (
    MaeLmConfig,
    MaeLmForMaskedLM,
    MaeLmForQuestionAnswering,
    MaeLmForSequenceClassification,
    MaeLmForTokenClassification,
    MaeLmModel,
)
from .models.tacl import TaclConfig, TaclForPreTraining
from .registration import register_methods

if TYPE_CHECKING:  # what type checkers and IDEs read; at run time, __getattr__ imports these on first use
    from .lora import LORA_TARGET_MODULES, lora_config
    from .methods.biphasic.collator import DataCollatorForBiphasic
    from .methods.biphasic.phases import PhaseScheduleCallback
    from .methods.mae_lm.collator import DataCollatorForMaeLm
    from .methods.mae_lm.encoder_hold import EncoderHoldCallback
    from .methods.tacl.collator import DataCollatorForTacl
    from .training.callbacks import (
        CheckpointBranchCallback,
        CompleteUploadCallback,
        DiagnosticsCallback,
        EmaCallback,
        NonFiniteLossCallback,
        PreemptionCallback,
    )
    from .training.schedules import BatchSizeWarmupCallback, MlmProbabilityScheduleCallback, RopeThetaScheduleCallback

# {module: the public names it holds}, imported by __getattr__ on first use.
_LAZY_NAMES = {
    ".lora": ("LORA_TARGET_MODULES", "lora_config"),
    ".methods.biphasic.collator": ("DataCollatorForBiphasic",),
    ".methods.biphasic.phases": ("PhaseScheduleCallback",),
    ".methods.mae_lm.collator": ("DataCollatorForMaeLm",),
    ".methods.mae_lm.encoder_hold": ("EncoderHoldCallback",),
    ".methods.tacl.collator": ("DataCollatorForTacl",),
    ".training.callbacks": (
        "CheckpointBranchCallback",
        "CompleteUploadCallback",
        "DiagnosticsCallback",
        "EmaCallback",
        "NonFiniteLossCallback",
        "PreemptionCallback",
    ),
    ".training.schedules": ("BatchSizeWarmupCallback", "MlmProbabilityScheduleCallback", "RopeThetaScheduleCallback"),
}
_MODULE_OF = {name: module for module, names in _LAZY_NAMES.items() for name in names}
# The 0.2 spellings, which go in 0.4, by what they are now.
_MOVED = {
    "FAMILIES": "hf_encoders.methods:METHODS",
    "Family": "hf_encoders.methods:Method",
    "register_families": "hf_encoders.registration:register_methods",
    "DataCollatorForTaCL": "hf_encoders.methods.tacl.collator:DataCollatorForTacl",
}

__all__ = sorted(
    [
        "METHODS",
        "Method",
        "BiphasicConfig",
        "BiphasicEncoder",
        "BiphasicEncoderForMaskedLM",
        "BiphasicEncoderForPreTraining",
        "BiphasicEncoderForQuestionAnswering",
        "BiphasicEncoderForSequenceClassification",
        "BiphasicEncoderForTokenClassification",
        "MaeLmConfig",
        "MaeLmForMaskedLM",
        "MaeLmForQuestionAnswering",
        "MaeLmForSequenceClassification",
        "MaeLmForTokenClassification",
        "MaeLmModel",
        "TaclConfig",
        "TaclForPreTraining",
        *_MODULE_OF,
    ]
)
__version__ = "0.3.0"


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        return moved_attribute(__name__, name, _MOVED)
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


register_methods()
