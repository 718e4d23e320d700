"""TaCL configuration (Su et al., Findings of NAACL 2022: "TaCL: Improving BERT Pre-training with Token-aware
Contrastive Learning").

TaCL is a way of continuing to train an existing encoder, not an architecture: the config holds the student's
own config (BERT, RoBERTa, ModernBERT, ...) as a nested sub-config, plus the few knobs of the objective.
"""

import copy

from transformers import AutoConfig, PreTrainedConfig
from transformers.configuration_utils import SubConfigSpec
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

# Students whose pre-training class carries a next-sentence-prediction head, so NSP is on by default.
NSP_MODEL_TYPES = ("bert",)


class TaclConfig(PreTrainedConfig):
    r"""
    Args:
        student_config (`dict` or `PreTrainedConfig`, *optional*):
            The encoder's own configuration. The teacher is a frozen copy of the same encoder. Defaults to a
            `BertConfig`.
        temperature (`float`, defaults to 0.01):
            τ of Eq. 1: cosine similarities are divided by it before the softmax.
        use_nsp (`bool`, *optional*):
            Add next-sentence prediction (needs a student with an NSP head, i.e. BERT). Defaults to on for BERT
            students and off otherwise.
        tacl_loss_weight, mlm_loss_weight, nsp_loss_weight (`float`, default to 1.0):
            Weights of the three terms of Eq. 2 (the paper sums them unweighted).
        exclude_padding_from_contrast (`bool`, defaults to `True`):
            Eq. 1's denominator runs over the sequence's n real tokens, so padding is not a negative. `False`
            reproduces the reference code, which pads every sequence to 256 and keeps the padding as negatives.
            Without padding in the batch the two modes are identical.
    """

    model_type = "tacl"
    sub_configs_defaults = {"student_config": SubConfigSpec(config_class=AutoConfig, model_type="bert")}
    # TaCL checkpoints are pre-training states (student + teacher); fine-tuning starts from `save_student`'s
    # plain checkpoint, so the only Auto class is the pre-training one.
    default_auto_map = {
        "AutoConfig": "configuration_tacl.TaclConfig",
        "AutoModelForPreTraining": "modeling_tacl.TaclForPreTraining",
    }

    student_config: dict | PreTrainedConfig | None = None
    temperature: float = 0.01
    use_nsp: bool | None = None
    tacl_loss_weight: float = 1.0
    mlm_loss_weight: float = 1.0
    nsp_loss_weight: float = 1.0
    exclude_padding_from_contrast: bool = True

    def __post_init__(self, **kwargs):
        # hf-encoders 0.2 and earlier recorded the encoder a run started from, which is run state (the model card
        # says it), not what the model is; such a config loads without it.
        kwargs.pop("student_name_or_path", None)
        self.check_student_type_is_known()
        if isinstance(self.student_config, PreTrainedConfig):
            # Initialising a config resets its sub-configs' attention implementation to None. Often the config given
            # is the very student being wrapped, whose layers would then dispatch with no implementation (a warning,
            # and a graph break in every layer under torch.compile): work on a copy.
            self.student_config = copy.deepcopy(self.student_config)
        super().__post_init__(**kwargs)
        if self.use_nsp is None:
            self.use_nsp = self.student_config.model_type in NSP_MODEL_TYPES
        self.auto_map = {**self.default_auto_map, **(getattr(self, "auto_map", None) or {})}
        self.validate_architecture()

    def check_student_type_is_known(self):
        """A TaCL checkpoint ships TaCL's code only. A student of a model type transformers does not know (this
        package's own biphasic encoder) is parsed only where that type is registered; say so instead of transformers'
        list of every model type."""
        student_type = self.student_config.get("model_type") if isinstance(self.student_config, dict) else None
        if student_type is not None and student_type not in CONFIG_MAPPING:
            raise ValueError(
                f"This TaCL checkpoint's student is a {student_type!r} model, a type transformers does not know. "
                "If it is one of hf-encoders' own models, `pip install hf-encoders` and `import hf_encoders` before "
                "loading (that registers it); to share the trained encoder, export the student instead "
                "(`hf-encoders export CHECKPOINT OUT`), which writes a checkpoint carrying its own code."
            )

    def validate_architecture(self):
        # The student's own config does not check this (BERT's attention only fails when the model is built).
        student = self.student_config
        hidden_size, heads = getattr(student, "hidden_size", None), getattr(student, "num_attention_heads", None)
        if hidden_size and heads and getattr(student, "head_dim", None) is None and hidden_size % heads:
            raise ValueError(
                f"student_config: hidden_size ({hidden_size}) is not divisible by num_attention_heads ({heads}); "
                f"pick a head count that divides it."
            )
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive (the paper uses 0.01), got {self.temperature}.")
        for name in ("tacl_loss_weight", "mlm_loss_weight", "nsp_loss_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}.")
        if self.use_nsp and self.student_config.model_type not in NSP_MODEL_TYPES:
            raise ValueError(
                f"use_nsp=True needs a student with a next-sentence-prediction head ({', '.join(NSP_MODEL_TYPES)}); "
                f"a {self.student_config.model_type} student has none. Pass use_nsp=False."
            )


__all__ = ["TaclConfig"]
