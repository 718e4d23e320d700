"""hf-encoders: TaCL, MAE-LM and biphasic CLM->MLM pre-training as first-class Transformers models.

Importing this package registers every model type with the Auto classes, so checkpoints we write load
without `trust_remote_code` here and with it anywhere else. The import itself is light: the public names below
are imported on first use, and each family registers when an Auto class first looks it up (registration.py), so
`hf-encoders --help` and `import hf_encoders` load neither torch nor datasets nor matplotlib.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from .families import FAMILIES, Family
from .registration import register_families

if TYPE_CHECKING:  # what type checkers and IDEs read; at run time, __getattr__ imports these on first use
    from .data.biphasic_collator import DataCollatorForBiphasic
    from .data.mae_lm_collator import DataCollatorForMaeLm
    from .data.tacl_collator import DataCollatorForTaCL, DataCollatorForTacl
    from .lora import LORA_TARGET_MODULES, lora_config
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
    from .training.callbacks import (
        CheckpointBranchCallback,
        CompleteUploadCallback,
        DiagnosticsCallback,
        EncoderHoldCallback,
        LossTermsCallback,
        NonFiniteLossCallback,
        PerplexityCallback,
        PhaseScheduleCallback,
        PreemptionCallback,
        TaclLossLoggingCallback,
        ThroughputCallback,
    )

# {module: the public names it holds}, imported by __getattr__ on first use.
_LAZY_NAMES = {
    ".data.biphasic_collator": ("DataCollatorForBiphasic",),
    ".data.mae_lm_collator": ("DataCollatorForMaeLm",),
    ".data.tacl_collator": ("DataCollatorForTaCL", "DataCollatorForTacl"),
    ".lora": ("LORA_TARGET_MODULES", "lora_config"),
    ".models.biphasic": (
        "BiphasicConfig",
        "BiphasicEncoder",
        "BiphasicEncoderForMaskedLM",
        "BiphasicEncoderForPreTraining",
        "BiphasicEncoderForQuestionAnswering",
        "BiphasicEncoderForSequenceClassification",
        "BiphasicEncoderForTokenClassification",
    ),
    ".models.mae_lm": (
        "MaeLmConfig",
        "MaeLmForMaskedLM",
        "MaeLmForQuestionAnswering",
        "MaeLmForSequenceClassification",
        "MaeLmForTokenClassification",
        "MaeLmModel",
    ),
    ".models.tacl": ("TaclConfig", "TaclForPreTraining"),
    ".training.callbacks": (
        "CheckpointBranchCallback",
        "CompleteUploadCallback",
        "DiagnosticsCallback",
        "EncoderHoldCallback",
        "LossTermsCallback",
        "NonFiniteLossCallback",
        "PerplexityCallback",
        "PhaseScheduleCallback",
        "PreemptionCallback",
        "TaclLossLoggingCallback",
        "ThroughputCallback",
    ),
}
_MODULE_OF = {name: module for module, names in _LAZY_NAMES.items() for name in names}

__all__ = sorted(["FAMILIES", "Family", "register_families", *_MODULE_OF])
__version__ = "0.2.0"


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


register_families()
