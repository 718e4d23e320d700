"""Biphasic encoder configuration (Gisserot-Boukhlef et al., 2025: "Should We Still Pretrain Encoders with Masked
Language Modeling?").

One Llama-style network trained first with causal LM, then with masked LM, on the same weights. The field names
are Llama's, so a `LlamaConfig` maps onto this one field by field and any Llama-family checkpoint loads with no
key mapping. Defaults are the paper's 210M model (EuroBERT-style, Llama-3 vocabulary, context 2,048, RoPE θ 10,000).
"""

from transformers import PreTrainedConfig
from transformers.modeling_rope_utils import RopeParameters

OBJECTIVES = ("clm", "mlm")
POOLINGS = ("mean", "cls", "last")

# The paper's sizes (its Appendix A; EuroBERT shapes). Every other field keeps its default.
PRESETS = {
    "210m": dict(num_hidden_layers=12, hidden_size=768, intermediate_size=3072, num_attention_heads=12, num_key_value_heads=12),
    "610m": dict(num_hidden_layers=26, hidden_size=1152, intermediate_size=4096, num_attention_heads=18, num_key_value_heads=6),
    "1b": dict(num_hidden_layers=28, hidden_size=1728, intermediate_size=5120, num_attention_heads=18, num_key_value_heads=6),
}


class BiphasicConfig(PreTrainedConfig):
    r"""
    Llama's fields (`vocab_size` ... `tie_word_embeddings`, `rope_parameters` or the legacy `rope_theta`), plus:

    Args:
        mask_token_id (`int`, *optional*, defaults to 128002):
            The [MASK] id (`<|mask|>` in the paper's Llama-3 vocabulary). None for a converted causal LM whose
            tokenizer has none yet.
        objective (`str`, defaults to `"mlm"`):
            What `BiphasicEncoderForPreTraining` trains when `forward` is not told: `"clm"` (causal mask, next-token
            loss) or `"mlm"` (bidirectional mask, masked-token loss). `PhaseScheduleCallback` sets it per step.
        mlm_probability (`float`, defaults to 0.4):
            The masking ratio of the MLM phase (the paper sweeps 20-50%; 40% is its default). Recorded here so a
            checkpoint says how it was trained; `DataCollatorForBiphasic` applies it.
        classifier_pooling (`str`, defaults to `"mean"`):
            Sequence classification pooling: `"mean"` over real tokens (the paper), `"cls"` the first position (BOS;
            use right padding), or `"last"` the last real token.
    """

    model_type = "biphasic"
    # One table, read by hf_encoders' registration and written into every checkpoint's config.json, so
    # any of these classes loads with `trust_remote_code=True` in a process that never imported us.
    default_auto_map = {
        "AutoConfig": "configuration_biphasic.BiphasicConfig",
        "AutoModel": "modeling_biphasic.BiphasicEncoder",
        "AutoModelForPreTraining": "modeling_biphasic.BiphasicEncoderForPreTraining",
        "AutoModelForMaskedLM": "modeling_biphasic.BiphasicEncoderForMaskedLM",
        "AutoModelForSequenceClassification": "modeling_biphasic.BiphasicEncoderForSequenceClassification",
        "AutoModelForTokenClassification": "modeling_biphasic.BiphasicEncoderForTokenClassification",
        "AutoModelForQuestionAnswering": "modeling_biphasic.BiphasicEncoderForQuestionAnswering",
    }

    vocab_size: int = 128256
    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    hidden_act: str = "silu"
    max_position_embeddings: int = 2048
    initializer_range: float = 0.02
    rms_norm_eps: float = 1e-5
    rope_parameters: RopeParameters | dict | None = None
    attention_bias: bool = False
    attention_dropout: float = 0.0
    mlp_bias: bool = False
    tie_word_embeddings: bool = False
    pad_token_id: int | None = 128001
    bos_token_id: int | None = 128000
    eos_token_id: int | list[int] | None = 128001
    mask_token_id: int | None = 128002
    objective: str = "mlm"
    mlm_probability: float = 0.4
    classifier_pooling: str = "mean"

    def __post_init__(self, **kwargs):
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None:
            # Derived, so the heads must tile the hidden size; an explicit head_dim (Mistral-style) need not.
            if self.hidden_size % self.num_attention_heads:
                raise ValueError(
                    f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                    f"({self.num_attention_heads}); pick a head count that divides it, or set head_dim explicitly."
                )
            self.head_dim = self.hidden_size // self.num_attention_heads
        # The parent turns a legacy `rope_theta` kwarg into `rope_parameters` (θ defaults to 10,000).
        super().__post_init__(**kwargs)
        self.auto_map = {**self.default_auto_map, **(getattr(self, "auto_map", None) or {})}
        self.validate_architecture()

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "BiphasicConfig":
        """The paper's "210m", "610m" or "1b" model, with any field overridden."""
        if name not in PRESETS:
            raise ValueError(f"Unknown preset {name!r}; choose one of {', '.join(PRESETS)}.")
        return cls(**{**PRESETS[name], **overrides})

    def validate_architecture(self):
        # Plain ValueErrors, like every config of this package, so callers catch one documented type.
        # head_dim need not be hidden_size / heads (Mistral-style checkpoints set it), but RoPE rotates pairs.
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {self.head_dim}.")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of num_key_value_heads "
                f"({self.num_key_value_heads}) for grouped-query attention."
            )
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}.")
        if self.classifier_pooling not in POOLINGS:
            raise ValueError(f"classifier_pooling must be one of {POOLINGS}, got {self.classifier_pooling!r}.")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"mlm_probability must lie strictly between 0 and 1, got {self.mlm_probability}.")
        for name in ("pad_token_id", "bos_token_id", "mask_token_id"):
            token_id = getattr(self, name)
            if token_id is not None and not 0 <= token_id < self.vocab_size:
                raise ValueError(f"{name}={token_id} is outside the vocabulary (vocab_size={self.vocab_size}).")


__all__ = ["BiphasicConfig"]
