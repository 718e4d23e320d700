from .configuration_mae_lm import MaeLmConfig
from .modeling_mae_lm import (
    MaeLmForMaskedLM,
    MaeLmForQuestionAnswering,
    MaeLmForSequenceClassification,
    MaeLmForTokenClassification,
    MaeLmModel,
    MaeLmPreTrainedModel,
)
