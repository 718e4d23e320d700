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
from .registration import register_family

register_family(MaeLmConfig, modeling_mae_lm)

__version__ = "0.1.0"
