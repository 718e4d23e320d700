"""From a pretrained BERT-family encoder to an MAE-LM whose encoder is that encoder
(`MaeLmForMaskedLM.from_encoder`, and `pretrain --method mae_lm --model_name_or_path <encoder>`).

MAE-LM's encoder is a post-LN BERT layer stack with two differences, both neutral at the start: a relative position
bias shared by the layers, which starts at zero, and no token-type embedding, whose type-0 row is folded into the
position embeddings (the word embeddings stay the LM head's tied projection). RoBERTa counts positions from
`padding_idx + 1`, so its table is read from that row on. With those, the MAE-LM encoder computes the source's hidden
states; the decoder is new, and the LM head is the source's MLM head where the checkpoint has one.

Like the causal-LM conversion (conversion.py), this lives in the package, never in the model folder checkpoints carry.
"""

import torch
from torch import nn
from transformers import AutoModelForMaskedLM, AutoTokenizer, PreTrainedConfig, PreTrainedModel
from transformers.utils import logging

from ...models._shared.checkpoint_io import check_encoder_weights, load_encoder_config, quiet_loading
from ...models.mae_lm import MaeLmConfig, MaeLmForMaskedLM
from ...models.mae_lm.modeling_mae_lm import CONVERTIBLE_ENCODERS
from ...training.model_sizes import check_config_fields

logger = logging.get_logger(__name__)

# MaeLmConfig fields that ARE the source encoder: read from its config, never chosen.
ENCODER_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps", "initializer_range", "pad_token_id",
    "tie_word_embeddings",
)  # fmt: skip
FIXED_BY_SOURCE = (*ENCODER_FIELDS, "max_position_embeddings")
# The modules of a BERT-family layer (transformers' names) that each MAE-LM layer module takes.
LAYER_MODULES = {
    "attention.q_proj": "attention.self.query",
    "attention.k_proj": "attention.self.key",
    "attention.v_proj": "attention.self.value",
    "attention.o_proj": "attention.output.dense",
    "attention_layer_norm": "attention.output.LayerNorm",
    "intermediate": "intermediate.dense",
    "output": "output.dense",
    "output_layer_norm": "output.LayerNorm",
}


def from_encoder(cls, model_or_path, mask_token_id: int | None = None, **mae_lm_options) -> MaeLmForMaskedLM:
    """`cls` (MaeLmForMaskedLM) whose encoder is a BERT-family encoder: a loaded model, a folder or a Hub name.

    `mask_token_id` defaults to the mask token of the tokenizer saved with the checkpoint; a loaded model has none, so
    pass it then. `mae_lm_options` are the
    MaeLmConfig fields the source does not fix: the decoder's shape (default: a third of the encoder's depth, the
    paper's base ratio), the relative-bias buckets, `classifier_dropout`.
    Architectures other than CONVERTIBLE_ENCODERS, and a checkpoint missing encoder weights, are refused.
    """
    check_config_fields(mae_lm_options, MaeLmConfig)
    fixed = sorted(set(mae_lm_options) & set(FIXED_BY_SOURCE))
    if fixed:
        raise ValueError(
            f"{', '.join(fixed)} come from the source encoder and cannot be changed while converting it; "
            "leave them out (the decoder's shape is set with decoder_* options)."
        )
    loaded = isinstance(model_or_path, PreTrainedModel)
    source_config = model_or_path.config if loaded else load_source_config(model_or_path)
    check_convertible(source_config)
    if loaded:
        source, has_head = model_or_path, has_mlm_head(model_or_path)
    else:
        source, has_head = load_source(model_or_path)
        if mask_token_id is None:
            mask_token_id = tokenizer_mask_token_id(model_or_path)
    if mask_token_id is None:
        raise ValueError("Pass mask_token_id: the [MASK] id of the encoder's tokenizer, which MAE-LM's decoder reads.")
    config = mae_lm_config_from_encoder(source_config, mask_token_id, **mae_lm_options)
    model = cls(config).to(device=source.device, dtype=source.dtype)
    copy_encoder(source.base_model, model.mae_lm, position_offset(source_config))
    if has_head:
        copy_mlm_head(source, model.lm_head)
    else:
        name = type(source).__name__ if loaded else str(model_or_path)
        logger.warning(
            f"{name} has no pretrained MLM head: MAE-LM's LM head starts freshly initialised (as its decoder does), so "
            "the loss starts at chance level (a run resumed from its checkpoint then loads the head it has trained)."
        )
    return model.train(source.training)


def load_source_config(name_or_path) -> PreTrainedConfig:
    return load_encoder_config(
        name_or_path, f"the folder of a {'/'.join(CONVERTIBLE_ENCODERS)} checkpoint or the Hub name of one"
    )


def check_convertible(config: PreTrainedConfig) -> None:
    """A ValueError, before any weight is read, for what the MAE-LM encoder cannot compute exactly."""
    model_type = config.model_type
    if model_type == MaeLmConfig.model_type:
        raise ValueError(
            "This is already an MAE-LM checkpoint, nothing to convert: load it with MaeLmForMaskedLM.from_pretrained "
            "(pretrain --method mae_lm --model_name_or_path continues it)."
        )
    if model_type not in CONVERTIBLE_ENCODERS:
        architectures = ", ".join(getattr(config, "architectures", None) or [])
        raise ValueError(
            f"Cannot start MAE-LM from a {model_type!r} model ({architectures}): from_encoder maps the encoders "
            f"{', '.join(CONVERTIBLE_ENCODERS)} (post-LN BERT layers with absolute positions), including TaCL's "
            "student/ and the mlm baseline of hf-encoders. Other architectures (ModernBERT, DeBERTa, Llama-family, "
            "biphasic, ...) compute what MAE-LM's encoder cannot; pre-train a MaeLmConfig model from scratch instead."
        )
    position_type = getattr(config, "position_embedding_type", "absolute")
    if position_type != "absolute" or config.is_decoder or getattr(config, "add_cross_attention", False):
        raise ValueError(
            f"This {model_type} uses position_embedding_type={position_type!r}, is_decoder={config.is_decoder}: MAE-LM "
            "starts only from a bidirectional encoder with absolute positions."
        )


def load_source(name_or_path) -> tuple[PreTrainedModel, bool]:
    """(the encoder as AutoModelForMaskedLM, whether its checkpoint holds an MLM head). Missing, unexpected or
    mis-shaped encoder weights are an error; a pooler or an NSP head is ignored, a missing MLM head is fresh."""
    with quiet_loading():  # its loading report would repeat what is checked (and warned by from_encoder) here
        source, info = AutoModelForMaskedLM.from_pretrained(name_or_path, output_loading_info=True)
    prefix = f"{source.base_model_prefix}."

    def in_encoder(key: str) -> bool:
        return key.removeprefix(prefix).startswith(("embeddings.", "encoder."))

    check_encoder_weights(name_or_path, source, info, in_encoder)
    return source, not any(not in_encoder(key) for key in info["missing_keys"])


def has_mlm_head(model: PreTrainedModel) -> bool:
    return model is not model.base_model and model.get_output_embeddings() is not None


def tokenizer_mask_token_id(name_or_path) -> int | None:
    try:
        return AutoTokenizer.from_pretrained(name_or_path).mask_token_id
    except (OSError, ValueError) as error:
        raise ValueError(
            f"{str(name_or_path)!r} has no loadable tokenizer ({error}), so its [MASK] id is unknown: save the "
            "tokenizer with the checkpoint, or pass mask_token_id."
        ) from error


def position_offset(config: PreTrainedConfig) -> int:
    """The position-table row of the first token: RoBERTa-style embeddings count from padding_idx + 1."""
    return 0 if config.model_type == "bert" else config.pad_token_id + 1


def mae_lm_config_from_encoder(source: PreTrainedConfig, mask_token_id: int, **mae_lm_options) -> MaeLmConfig:
    fields = {name: getattr(source, name) for name in ENCODER_FIELDS}
    defaults = {"decoder_num_hidden_layers": max(1, source.num_hidden_layers // 3)}
    return MaeLmConfig(
        **fields,
        max_position_embeddings=source.max_position_embeddings - position_offset(source),
        mask_token_id=mask_token_id,
        **{**defaults, **mae_lm_options},
    )


@torch.no_grad()
def copy_encoder(source: nn.Module, target: nn.Module, offset: int) -> None:
    """The source base model's weights into MAE-LM's encoder (`MaeLmModel`), in place."""
    embeddings, own = source.embeddings, target.embeddings
    own.word_embeddings.weight.copy_(embeddings.word_embeddings.weight)
    # Every token is type 0 in MAE-LM: that row is added to each position once and for all.
    positions = embeddings.position_embeddings.weight[offset : offset + own.position_embeddings.num_embeddings]
    own.position_embeddings.weight.copy_(positions + embeddings.token_type_embeddings.weight[0])
    own.layer_norm.load_state_dict(embeddings.LayerNorm.state_dict())
    # A zero bias leaves the attention scores the source's; training learns it from there.
    target.relative_attention_bias.weight.zero_()
    for source_layer, layer in zip(source.encoder.layer, target.layers, strict=True):
        for name, source_name in LAYER_MODULES.items():
            layer.get_submodule(name).load_state_dict(source_layer.get_submodule(source_name).state_dict())


@torch.no_grad()
def copy_mlm_head(source: PreTrainedModel, head: nn.Module) -> None:
    """BERT's `cls.predictions` or RoBERTa's `lm_head` (dense, activation, LayerNorm, tied projection + bias) into
    MaeLmLMHead, whose activation is GELU like theirs."""
    if hasattr(source, "cls"):
        transform = source.cls.predictions.transform
        dense, layer_norm = transform.dense, transform.LayerNorm
    else:
        dense, layer_norm = source.lm_head.dense, source.lm_head.layer_norm
    if getattr(source.config, "hidden_act", "gelu") != "gelu" and hasattr(source, "cls"):
        logger.warning(
            f"The source's MLM head uses {source.config.hidden_act}, MAE-LM's GELU: the carried-over head computes "
            "a slightly different function until training adapts it."
        )
    head.dense.load_state_dict(dense.state_dict())
    head.layer_norm.load_state_dict(layer_norm.state_dict())
    projection = source.get_output_embeddings()
    head.vocab_projection.bias.copy_(projection.bias)
    if not source.config.tie_word_embeddings:  # tied, it IS the word embeddings, copied with the encoder
        head.vocab_projection.weight.copy_(projection.weight)
