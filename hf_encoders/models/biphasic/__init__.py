from .configuration_biphasic import BiphasicConfig
from .modeling_biphasic import (
    BiphasicEncoder,
    BiphasicEncoderForMaskedLM,
    BiphasicEncoderForPreTraining,
    BiphasicEncoderForQuestionAnswering,
    BiphasicEncoderForSequenceClassification,
    BiphasicEncoderForTokenClassification,
    BiphasicPreTrainedModel,
)
