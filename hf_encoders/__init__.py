"""hf-encoders: TaCL, MAE-LM and biphasic CLM->MLM pre-training as first-class Transformers models.

Importing this package registers every model type with the Auto classes, so checkpoints we write load
without `trust_remote_code` here and with it anywhere else.
"""

from .models.mae_lm import (
    MaeLmConfig,
    MaeLmForMaskedLM,
    MaeLmForQuestionAnswering,
    MaeLmForSequenceClassification,
    MaeLmForTokenClassification,
    MaeLmModel,
)
from .models.mae_lm import modeling_mae_lm
from .models.tacl import TaclConfig, TaclForPreTraining
from .models.tacl import modeling_tacl
from .data.tacl_collator import DataCollatorForTaCL
from .data.mae_lm_collator import DataCollatorForMaeLm
from .models.biphasic import (
    BiphasicConfig,
    BiphasicEncoder,
    BiphasicEncoderForMaskedLM,
    BiphasicEncoderForPreTraining,
    BiphasicEncoderForQuestionAnswering,
    BiphasicEncoderForSequenceClassification,
    BiphasicEncoderForTokenClassification,
)
from .models.biphasic import modeling_biphasic
from .data.biphasic_collator import DataCollatorForBiphasic
from .training.phases import PhaseScheduleCallback
from .registration import register_family

register_family(MaeLmConfig, modeling_mae_lm)
register_family(TaclConfig, modeling_tacl)
register_family(BiphasicConfig, modeling_biphasic)

__version__ = "0.1.0"
