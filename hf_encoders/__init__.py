"""hf-encoders: TaCL, MAE-LM and biphasic CLM->MLM pre-training as first-class Transformers models.

Importing this package registers every model type with the Auto classes, so checkpoints we write load
without `trust_remote_code` here and with it anywhere else.
"""

from .data.biphasic_collator import DataCollatorForBiphasic
from .data.mae_lm_collator import DataCollatorForMaeLm
from .data.tacl_collator import DataCollatorForTaCL, DataCollatorForTacl
from .families import FAMILIES, Family
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
from .registration import register_families
from .training.callbacks import (
    CheckpointBranchCallback,
    CompleteUploadCallback,
    DiagnosticsCallback,
    LossTermsCallback,
    NonFiniteLossCallback,
    PerplexityCallback,
    PhaseScheduleCallback,
    PreemptionCallback,
    TaclLossLoggingCallback,
    ThroughputCallback,
)

register_families()

__version__ = "0.2.0"
