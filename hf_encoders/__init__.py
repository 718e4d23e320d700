"""hf-encoders: TaCL, MAE-LM and biphasic CLM->MLM pre-training as first-class Transformers models.

Importing this package registers every model type with the Auto classes, so checkpoints we write load
without `trust_remote_code` here and with it anywhere else.
"""

from .data.biphasic_collator import DataCollatorForBiphasic
from .data.mae_lm_collator import DataCollatorForMaeLm
from .data.tacl_collator import DataCollatorForTaCL
from .lora import LORA_TARGET_MODULES, lora_config
from .models.biphasic import (
    BiphasicConfig,
    BiphasicEncoder,
    BiphasicEncoderForMaskedLM,
    BiphasicEncoderForPreTraining,
    BiphasicEncoderForQuestionAnswering,
    BiphasicEncoderForSequenceClassification,
    BiphasicEncoderForTokenClassification,
    modeling_biphasic,
)
from .models.mae_lm import (
    MaeLmConfig,
    MaeLmForMaskedLM,
    MaeLmForQuestionAnswering,
    MaeLmForSequenceClassification,
    MaeLmForTokenClassification,
    MaeLmModel,
    modeling_mae_lm,
)
from .models.tacl import TaclConfig, TaclForPreTraining, modeling_tacl
from .registration import register_family
from .training.hub import CompleteUploadCallback
from .training.numerics import NonFiniteLossCallback
from .training.phases import PhaseScheduleCallback

register_family(MaeLmConfig, modeling_mae_lm)
register_family(TaclConfig, modeling_tacl)
register_family(BiphasicConfig, modeling_biphasic)

__version__ = "0.1.0"
