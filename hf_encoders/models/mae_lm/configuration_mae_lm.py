"""MAE-LM configuration (Meng et al., ICLR 2024: "Representation Deficiency in Masked Language Modeling").

Field names follow BERT so that every BERT-literate tool reads them; the MAE-LM additions are the shared
relative position bias and the shallow decoder. The δ knob of the paper's Fig. 4 (which [MASK]s stay in the
encoder input) is a masking decision, hence the collator's (`DataCollatorForMaeLm(mask_in_encoder_fraction=...)`).
"""

from transformers import PreTrainedConfig
from transformers.utils import logging

logger = logging.get_logger(__name__)


def delta_moved_warning(delta: float) -> str:
    return (
        f"This MAE-LM config carries mask_in_encoder_fraction={delta} (δ), which hf-encoders 0.2 and earlier kept in the "
        "model. δ is now the collator's: pass DataCollatorForMaeLm(..., mask_in_encoder_fraction=...) or "
        "`hf-encoders pretrain --mask_in_encoder_fraction ...`; the model keeps no [MASK] in its encoder input "
        "unless the batch's `masks_in_encoder` says so. The field is dropped from the config."
    )


class MaeLmConfig(PreTrainedConfig):
    r"""
    Args:
        relative_attention_num_buckets (`int`, defaults to 32):
            T5-style bidirectional buckets of the relative position bias shared by all encoder layers
            (paper, Table 3: base 32, base++ 64, large++ 128).
        relative_attention_max_distance (`int`, defaults to 128):
            Distance beyond which all relative positions share a bucket (large++: 256).
        decoder_num_hidden_layers (`int`, defaults to 4):
            Depth of the pre-training decoder (1/6-1/3 of the encoder in the paper). Never used in fine-tuning.
        decoder_hidden_size, decoder_num_attention_heads, decoder_intermediate_size (`int`, optional):
            Decoder shape; default to the encoder's. A linear projection joins encoder and decoder when
            the widths differ.
        decoder_locality_slope (`float`, defaults to 0.0):
            A fixed bias `-slope * |i - j|` on the decoder's attention scores (ALiBi's form), head h's slope being
            `decoder_locality_slope * 2**-h` and the distance counted up to `relative_attention_max_distance`, so
            that from the first step a masked position attends to the kept tokens beside it. 0 leaves the paper's
            decoder, which has no positional bias.
        decoder_value_init_std (`float`, optional):
            Standard deviation of the decoder attention's value and output projections at initialisation (default:
            `initializer_range`, the paper's). Larger, the neighbours' states that attention brings to a masked
            position reach the LM head at once, rather than through two near-zero projections.
        The two decoder options are what lets a small MAE-LM learn from scratch (docs/pretraining.md, "Small runs
        from scratch"): without them the decoder settles on the token frequencies, which need no encoder, before it
        learns to read the encoder, and the encoder collapses.
    """

    model_type = "mae_lm"
    # One table, read by hf_encoders' registration and written into every checkpoint's config.json, so
    # any of these classes loads with `trust_remote_code=True` in a process that never imported us.
    default_auto_map = {
        "AutoConfig": "configuration_mae_lm.MaeLmConfig",
        "AutoModel": "modeling_mae_lm.MaeLmModel",
        "AutoModelForPreTraining": "modeling_mae_lm.MaeLmForMaskedLM",
        "AutoModelForMaskedLM": "modeling_mae_lm.MaeLmForMaskedLM",
        "AutoModelForSequenceClassification": "modeling_mae_lm.MaeLmForSequenceClassification",
        "AutoModelForTokenClassification": "modeling_mae_lm.MaeLmForTokenClassification",
        "AutoModelForQuestionAnswering": "modeling_mae_lm.MaeLmForQuestionAnswering",
    }
    # Trainer's predictions hold the logits alone, as a stock masked LM's do, not the encoder states beside them.
    keys_to_ignore_at_inference = ["encoder_last_hidden_state"]

    vocab_size: int = 32768
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    layer_norm_eps: float = 1e-5
    initializer_range: float = 0.02
    pad_token_id: int | None = 0
    mask_token_id: int | None = 4
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    decoder_num_hidden_layers: int = 4
    decoder_hidden_size: int | None = None
    decoder_num_attention_heads: int | None = None
    decoder_intermediate_size: int | None = None
    decoder_locality_slope: float = 0.0
    decoder_value_init_std: float | None = None
    classifier_dropout: float | None = None
    tie_word_embeddings: bool = True

    def __post_init__(self, **kwargs):
        # Configs written before δ moved to the collator carry it; it is run state, so they load without it.
        delta = kwargs.pop("mask_in_encoder_fraction", 0.0)
        if delta:
            logger.warning_once(delta_moved_warning(delta))
        self.decoder_hidden_size = self.decoder_hidden_size or self.hidden_size
        self.decoder_num_attention_heads = self.decoder_num_attention_heads or self.num_attention_heads
        self.decoder_intermediate_size = self.decoder_intermediate_size or self.intermediate_size
        super().__post_init__(**kwargs)
        self.auto_map = {**self.default_auto_map, **(getattr(self, "auto_map", None) or {})}
        self.validate_architecture()

    def validate_architecture(self):
        # Plain ValueErrors (not `@strict`'s own error types) so callers catch one documented type.
        for width, heads, part in (
            (self.hidden_size, self.num_attention_heads, "hidden_size/num_attention_heads"),
            (
                self.decoder_hidden_size,
                self.decoder_num_attention_heads,
                "decoder_hidden_size/decoder_num_attention_heads",
            ),
        ):
            if width % heads:
                raise ValueError(
                    f"{part}: {width} is not divisible by {heads} heads; pick a head count that divides it."
                )
        if self.relative_attention_num_buckets < 4 or self.relative_attention_num_buckets % 2:
            raise ValueError(
                f"relative_attention_num_buckets must be an even number >= 4 (half per direction), "
                f"got {self.relative_attention_num_buckets}."
            )
        if self.decoder_locality_slope < 0:
            raise ValueError(
                f"decoder_locality_slope must be >= 0 (0: no locality bias), got {self.decoder_locality_slope}."
            )
        if self.decoder_value_init_std is not None and self.decoder_value_init_std <= 0:
            raise ValueError(
                f"decoder_value_init_std must be > 0 (or None for initializer_range), got "
                f"{self.decoder_value_init_std}."
            )
        exact = self.relative_attention_num_buckets // 4
        if self.relative_attention_max_distance - 1 <= exact:
            raise ValueError(
                f"relative_attention_max_distance ({self.relative_attention_max_distance}) must exceed "
                f"relative_attention_num_buckets // 4 + 1 ({exact + 1}) so that log-spaced buckets exist."
            )


__all__ = ["MaeLmConfig"]
