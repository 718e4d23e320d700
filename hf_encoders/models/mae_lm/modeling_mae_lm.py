"""MAE-LM: masked language modelling on a masked-autoencoder layout (Meng et al., ICLR 2024).

[MASK] tokens never enter the encoder: `MaeLmForMaskedLM` drops them, runs the encoder on the kept tokens
(which keep their ORIGINAL position ids), scatters the states back, and lets a shallow bidirectional decoder
predict the masked tokens from the encoder states plus the [MASK] embedding at the masked positions.
Fine-tuning uses the encoder alone (`MaeLmModel`), so it never sees a [MASK] it was not trained on.

This folder is flat on purpose: it is copied next to every checkpoint and must import nothing but torch,
transformers and its siblings (see hf_encoders/registration.py).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.masking_utils import create_bidirectional_mask, packed_sequence_mask_function
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    MaskedLMOutput,
    SequenceClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import logging

from .checkpoint_io import CheckpointMixin, raise_without_package
from .configuration_mae_lm import MaeLmConfig
from .loss_utils import (
    StandardLogitsOutsideTraining,
    check_labels_shape,
    check_sequence_length,
    first_positions,
    labelled_rows_loss,
)
from .loss_utils import restore_index as compute_restore_index
from .packed_sequences import Unpadded, check_packed_positions, document_index, worth_unpadding
from .relative_attention import (
    DistanceBiasPaths,
    RelativeBias,
    cudnn_nan_free_sdpa,
    flex_attention_unavailable,
    flex_relative_attention,
)
from .task_heads import QuestionAnsweringMixin, TokenClassificationMixin

logger = logging.get_logger(__name__)

# The encoders whose hidden states an MAE-LM encoder reproduces exactly (hf_encoders.methods.mae_lm.conversion
# converts them): post-LN BERT layers with learned absolute positions.
CONVERTIBLE_ENCODERS = ("bert", "roberta", "xlm-roberta")


def relative_position_bucket(relative_position: torch.Tensor, num_buckets: int, max_distance: int) -> torch.Tensor:
    """T5-style bidirectional buckets, exactly as MAE-LM's released code computes them.

    `relative_position` is key position minus query position. Half of the buckets serve each direction;
    within a direction the first quarter of all buckets are exact distances, the rest are log-spaced up to
    `max_distance` and saturate beyond it. The signed bucket is shifted by `num_buckets // 2 - 1` to index an
    embedding table, so one row (the last) is never used: the reference behaves the same way.
    """
    half = num_buckets // 2
    max_exact = half // 2
    distance = relative_position.abs()
    # clamp(min=1) only keeps log() finite on the small distances that torch.where discards anyway.
    log_ratio = torch.log(distance.clamp(min=1).float() / max_exact) / math.log((max_distance - 1) / max_exact)
    large = max_exact + torch.ceil(log_ratio * (half - 1 - max_exact)).long()
    bucket = torch.where(distance < max_exact, distance, large.clamp(max=half - 1))
    return bucket * relative_position.sign() + (half - 1)


def unsupported_attention(implementation: str) -> str:
    return (
        f"MAE-LM cannot run with attn_implementation={implementation!r}: every encoder layer adds a learned relative "
        "position bias, one per head, to the attention scores, which flash attention cannot take. Use 'sdpa' (the "
        "default; its kernels take the bias), 'flex_attention' (the bias as a score_mod) or 'eager'."
    )


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
):
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


class MaeLmAttention(nn.Module):
    def __init__(self, config: MaeLmConfig, hidden_size: int, num_heads: int, dropout: float):
        super().__init__()
        self.config = config
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.scaling = self.head_dim**-0.5
        self.dropout = dropout
        self.is_causal = False
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(hidden_size, hidden_size)
        self.v_proj = nn.Linear(hidden_size, hidden_size)
        self.o_proj = nn.Linear(hidden_size, hidden_size)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | RelativeBias | None,
        unpadded: Unpadded | None = None,
        attention_function: Callable | None = None,
        **kwargs,
    ):
        """`unpadded`: `hidden_states` holds a padded batch's real tokens only, (1, tokens, hidden); attention runs
        on the padded layout, which `attention_mask` describes. `attention_function`: one of relative_attention.py's,
        with a `RelativeBias` as `attention_mask`, in place of the configured implementation."""
        shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        query, key, value = (
            proj(hidden_states).view(shape).transpose(1, 2) for proj in (self.q_proj, self.k_proj, self.v_proj)
        )
        attention_interface: Callable = attention_function or ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        if unpadded is not None:
            attention_interface = partial(unpadded.attend, attention_interface)
        dense_mask = isinstance(attention_mask, torch.Tensor)  # (rows, heads or 1, L, L): sdpa's or eager's
        with cudnn_nan_free_sdpa(query, attention_mask.shape[-1] if dense_mask else 0, masked=dense_mask):
            output, weights = attention_interface(
                self,
                query,
                key,
                value,
                attention_mask,
                scaling=self.scaling,
                dropout=self.dropout if self.training else 0.0,
                **kwargs,
            )
        return self.o_proj(output.reshape(*hidden_states.shape[:-1], -1)), weights


class MaeLmLayer(GradientCheckpointingLayer):
    """A post-LN BERT layer; the decoder builds it with its own width and no dropout."""

    def __init__(
        self,
        config: MaeLmConfig,
        hidden_size: int,
        num_heads: int,
        intermediate_size: int,
        dropout: float,
        attention_dropout: float,
    ):
        super().__init__()
        self.attention = MaeLmAttention(config, hidden_size, num_heads, dropout=attention_dropout)
        self.attention_layer_norm = nn.LayerNorm(hidden_size, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(hidden_size, intermediate_size)
        self.activation = ACT2FN[config.hidden_act]
        self.output = nn.Linear(intermediate_size, hidden_size)
        self.output_layer_norm = nn.LayerNorm(hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs):
        attended, weights = self.attention(hidden_states, attention_mask, **kwargs)
        hidden_states = self.attention_layer_norm(hidden_states + self.dropout(attended))
        transformed = self.output(self.activation(self.intermediate(hidden_states)))
        return self.output_layer_norm(hidden_states + self.dropout(transformed)), weights


class MaeLmEmbeddings(nn.Module):
    """Token + learned absolute position embeddings, then LayerNorm and dropout (no token types, like RoBERTa)."""

    def __init__(self, config: MaeLmConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, position_ids, inputs_embeds=None):
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        return self.dropout(self.layer_norm(inputs_embeds + self.position_embeddings(position_ids)))


class MaeLmPreTrainedModel(CheckpointMixin, PreTrainedModel):
    config_class = MaeLmConfig
    base_model_prefix = "mae_lm"
    supports_gradient_checkpointing = True
    _no_split_modules = ["MaeLmLayer"]
    # The relative position bias is a per-head additive float mask: flash attention cannot take one. flex_attention
    # runs through relative_attention.py (transformers' integration would add head 0's mask to every head).
    _supports_sdpa = True
    _supports_flash_attn = False
    _supports_flex_attn = True
    _supports_attention_backend = False
    # Fine-tuning drops the pre-training decoder and LM head: the only weights a task model may leave unread.
    _keys_to_ignore_on_load_unexpected = [r"^decoder\.", r"^lm_head\."]
    model_description = "an MAE-LM one"
    # Set once the first batch's padding has been compared with config.pad_token_id (warn_if_padding_differs).
    padding_checked = False

    def _init_weights(self, module):
        super()._init_weights(module)
        # The decoder's value and output projections, tagged by MaeLmDecoder (config.decoder_value_init_std).
        std = getattr(module, "init_std", None)
        if std is not None:
            init.normal_(module.weight, mean=0.0, std=std)

    def warn_if_padding_differs(self, input_ids: torch.Tensor | None, attention_mask: torch.Tensor | None) -> None:
        """The token embedding's `padding_idx` is config.pad_token_id: that row never learns. A batch padded with
        another id (a config built without `pad_token_id=tokenizer.pad_token_id`), or one that reads that id as a
        real token, trains around a frozen token, so the first batch is checked, once: a host read on that batch
        only, and none under torch.compile (tested first, so that no compiled graph guards on the flag)."""
        frozen = self.config.pad_token_id
        if torch.compiler.is_compiling() or self.padding_checked or input_ids is None or frozen is None:
            return
        self.padding_checked = True
        attended = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        padded_with = [token for token in input_ids[~attended].unique().tolist() if token != frozen]
        fix = "Build the config with pad_token_id=tokenizer.pad_token_id"
        if padded_with:
            logger.warning(
                f"The batch pads with token id {padded_with[0]} (attention_mask == 0), but config.pad_token_id is "
                f"{frozen}: the embedding of token {frozen}, a real token of this tokenizer, is frozen (padding_idx) "
                f"and never learns. {fix} ({padded_with[0]})."
            )
        elif bool((input_ids[attended] == frozen).any()):
            logger.warning(
                f"Token {frozen}, config.pad_token_id, occurs where attention_mask is 1: its embedding is frozen "
                f"(padding_idx) and never learns. If it is a real token, {fix[0].lower()}{fix[1:]}."
            )

    # transformers' checks for a requested attention implementation, overridden only for a message naming the reason
    # and the alternatives (theirs asks to request support upstream).
    def _flash_attn_can_dispatch(self, flash_attn_version: int, is_init_check: bool = False) -> bool:
        raise ValueError(unsupported_attention(f"flash_attention_{flash_attn_version}"))

    def _flex_attn_can_dispatch(self, is_init_check: bool = False) -> bool:
        unavailable = flex_attention_unavailable()
        if unavailable:
            raise ValueError(unavailable)
        return True

    @classmethod
    def foreign_checkpoint_fix(cls, model_type: str) -> str:
        if model_type in CONVERTIBLE_ENCODERS:
            return (
                "start MAE-LM from that encoder with MaeLmForMaskedLM.from_encoder (or `hf-encoders pretrain --method "
                "mae_lm --model_name_or_path`)"
            )
        return super().foreign_checkpoint_fix(model_type)

    @classmethod
    def misfit_fix(cls) -> str:
        return (
            "Check that it is an MAE-LM checkpoint saved with the same configuration (sizes, vocabulary, decoder "
            "depth), and load it without overriding those sizes."
        )


class MaeLmModel(DistanceBiasPaths, MaeLmPreTrainedModel):
    """The MAE-LM encoder: post-LN layers sharing ONE bucketed relative position bias, computed once per forward
    from `position_ids` (so a compacted input keeps its original distances).

    Which attention adds the bias (see relative_attention.py): 'flex_attention' always uses its kernel; 'sdpa' gives
    sequences longer than `dense_bias_max_length` sdpa over blocks of `query_block_size` queries, whose memory grows
    linearly with the length; shorter ones, and 'eager' at every length, get the whole bias as one mask, which is
    faster where it fits (bench/README.md, "Long context").
    """

    # Read from a fine-tuned checkpoint (pipeline("feature-extraction"), sentence-transformers), the encoder also
    # leaves the task heads unread.
    _keys_to_ignore_on_load_unexpected = [
        *MaeLmPreTrainedModel._keys_to_ignore_on_load_unexpected,
        r"^classifier\.",
        r"^qa_outputs\.",
    ]

    def __init__(self, config: MaeLmConfig):
        super().__init__(config)
        self.embeddings = MaeLmEmbeddings(config)
        self.relative_attention_bias = nn.Embedding(config.relative_attention_num_buckets, config.num_attention_heads)
        self.layers = nn.ModuleList(
            MaeLmLayer(
                config,
                config.hidden_size,
                config.num_attention_heads,
                config.intermediate_size,
                dropout=config.hidden_dropout_prob,
                attention_dropout=config.attention_probs_dropout_prob,
            )
            for _ in range(config.num_hidden_layers)
        )
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def attention_bias(
        self,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        dtype: torch.dtype,
        documents: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(rows, heads, query, key) additive mask: the relative position bias, with padded keys and keys of other
        documents (packed rows, see packed_sequences.py) blocked.

        `position_ids` may be (1, length) when every row has the same positions: the bias is then gathered and
        back-propagated once instead of once per row, and without `attention_mask` it stays (1, heads, L, L) for
        attention to broadcast. Only compacted inputs, whose rows keep different positions, need a bias per row.
        """
        relative = position_ids[:, None, :] - position_ids[:, :, None]
        buckets = relative_position_bucket(
            relative, self.config.relative_attention_num_buckets, self.config.relative_attention_max_distance
        )
        bias = self.relative_attention_bias(buckets).permute(0, 3, 1, 2).to(dtype)
        blocked = None if attention_mask is None else ~attention_mask.bool()[:, None, None, :]
        if documents is not None:
            elsewhere = documents[:, None, :, None] != documents[:, None, None, :]
            blocked = elsewhere if blocked is None else blocked | elsewhere
        if blocked is None:
            return bias
        # masked_fill (not +) so a row whose keys are all padding stays finite instead of overflowing to -inf.
        return bias.masked_fill(blocked, torch.finfo(dtype).min)

    def relative_attention(
        self,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        dtype: torch.dtype,
        documents: torch.Tensor | None,
    ) -> tuple[torch.Tensor | RelativeBias, Callable | None]:
        """(mask, attention function) for every layer, computed once per forward and shared by all of them: the dense
        bias of `attention_bias` and the configured implementation, or a `RelativeBias` and the function of
        relative_attention.py that adds it (see the class)."""

        def relative_bias() -> RelativeBias:
            positions = torch.arange(-(self.config.max_position_embeddings - 1), self.config.max_position_embeddings)
            buckets = relative_position_bucket(
                positions.to(position_ids.device),
                self.config.relative_attention_num_buckets,
                self.config.relative_attention_max_distance,
            )
            key_padding = None if attention_mask is None else ~attention_mask.bool()
            return RelativeBias(
                self.relative_attention_bias(buckets).T,
                position_ids,
                key_padding,
                documents,
                self.config.relative_attention_max_distance,
            )

        return self.distance_bias_attention(
            self.config._attn_implementation,
            position_ids.shape[-1],
            relative_bias,
            lambda: self.attention_bias(position_ids, attention_mask, dtype, documents),
        )

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor
        | None = None,  # accepted for BERT-style tokenizers; MAE-LM has no segment embedding
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        document_ids: torch.Tensor | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        """`position_ids` that restart at 0 inside a row pack several documents into it (transformers' convention);
        attention then stays inside each document. `document_ids` (the document of each position) is for callers
        whose positions have gaps, such as MAE-LM's compacted input, where a restart may have been dropped."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
        if document_ids is None:  # MAE-LM's compacted input pads with real ids; its caller checked the batch
            self.warn_if_padding_differs(input_ids, attention_mask)
        unpad = document_ids is None and worth_unpadding(attention_mask)
        length = (input_ids if input_ids is not None else inputs_embeds).shape[1]
        device = (input_ids if input_ids is not None else inputs_embeds).device
        if position_ids is None:
            check_sequence_length(length, self.config.max_position_embeddings)
            # One row of positions, broadcast over the batch (see attention_bias).
            position_ids = torch.arange(length, device=device)[None]
        elif document_ids is None:
            check_packed_positions(position_ids, attention_mask)
            document_ids = document_index(position_ids)
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions

        hidden_states = self.embeddings(input_ids, position_ids, inputs_embeds)
        mask, attention_function = self.relative_attention(
            position_ids, attention_mask, hidden_states.dtype, document_ids
        )
        # Padding costs the linear layers nothing: they see the real tokens only (see Unpadded). Not in MAE-LM's
        # compacted input (which has `document_ids`): it pads only up to its longest row.
        unpadded = Unpadded(attention_mask) if unpad else None
        if unpadded is not None:
            hidden_states = unpadded.unpad(hidden_states)[None]
        all_hidden_states, all_attentions = [hidden_states], []
        for layer in self.layers:
            hidden_states, weights = layer(
                hidden_states, mask, unpadded=unpadded, attention_function=attention_function, **kwargs
            )
            all_hidden_states.append(hidden_states)
            all_attentions.append(weights)
        if unpadded is not None:
            all_hidden_states = [unpadded.pad(states[0]) for states in all_hidden_states]
        hidden_states = all_hidden_states[-1]
        return BaseModelOutput(
            last_hidden_state=hidden_states,
            hidden_states=tuple(all_hidden_states) if output_hidden_states else None,
            attentions=tuple(all_attentions) if output_attentions else None,
        )


def locality_slopes(slope: float, heads: int) -> torch.Tensor:
    """Each decoder head's slope of the locality bias (`MaeLmConfig.decoder_locality_slope`): slope * 2**-h."""
    return slope * 2.0 ** -torch.arange(heads, dtype=torch.float32)


class MaeLmDecoder(DistanceBiasPaths, nn.Module):
    """The shallow pre-training decoder: bidirectional, no dropout, no relative bias, its own absolute
    positions and embedding LayerNorm. A linear map joins encoder and decoder when their widths differ.

    With `config.decoder_locality_slope`, its attention adds a fixed bias, -slope * |distance| per head, through the
    encoder's machinery for a per-distance bias (relative_attention.py: one (heads, distances) table, read by every
    layer, densely, by query blocks or by flex_attention)."""

    def __init__(self, config: MaeLmConfig):
        super().__init__()
        self.config = config
        width = config.decoder_hidden_size
        self.input_projection = nn.Linear(config.hidden_size, width) if width != config.hidden_size else nn.Identity()
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, width)
        self.layer_norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.layers = nn.ModuleList(
            MaeLmLayer(
                config,
                width,
                config.decoder_num_attention_heads,
                config.decoder_intermediate_size,
                dropout=0.0,
                attention_dropout=0.0,
            )
            for _ in range(config.decoder_num_hidden_layers)
        )
        if config.decoder_value_init_std is not None:
            for layer in self.layers:  # read by MaeLmPreTrainedModel._init_weights
                layer.attention.v_proj.init_std = layer.attention.o_proj.init_std = config.decoder_value_init_std

    def forward(
        self,
        inputs: torch.Tensor,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        document_ids: torch.Tensor | None = None,
        fixed_shapes: bool = False,
    ) -> torch.Tensor:
        """`fixed_shapes`: read nothing from the device, not even whether the mask masks anything (transformers
        would, to leave it out)."""
        hidden_states = self.layer_norm(self.input_projection(inputs) + self.position_embeddings(position_ids))
        # A row that is all padding would make SDPA's boolean mask empty (NaN); it is never scored, so let it
        # attend to everything rather than to nothing.
        attention_mask = attention_mask.masked_fill(~attention_mask.bool().any(-1, keepdim=True), 1)
        attention_function = None
        if self.config.decoder_locality_slope:
            mask, attention_function = self.locality_attention(
                position_ids, attention_mask, document_ids, hidden_states.dtype
            )
        elif self.config._attn_implementation == "flex_attention":
            # The encoder's flex function without a bias: eager on CPU, where transformers' would compile.
            mask = RelativeBias(None, position_ids, ~attention_mask.bool(), document_ids).prepare_flex()
            attention_function = flex_relative_attention
        else:
            mask = create_bidirectional_mask(
                config=self.config,
                inputs_embeds=hidden_states,
                attention_mask=attention_mask,
                and_mask_function=None if document_ids is None else packed_sequence_mask_function(document_ids),
                allow_is_bidirectional_skip=not fixed_shapes,
            )
        for layer in self.layers:
            hidden_states, _ = layer(hidden_states, mask, attention_function=attention_function)
        return hidden_states

    def locality_bias(self, device: torch.device) -> torch.Tensor:
        """(heads, 2 * max_positions - 1): the locality bias of each signed distance, as RelativeBias reads it. The
        distance counts up to relative_attention_max_distance, as the encoder's buckets do, so that query blocks
        gather only the keys nearer than that."""
        positions = self.config.max_position_embeddings
        slopes = locality_slopes(self.config.decoder_locality_slope, self.config.decoder_num_attention_heads)
        distances = torch.arange(-(positions - 1), positions, device=device).abs()
        return -slopes.to(device)[:, None] * distances.clamp(max=self.config.relative_attention_max_distance)

    def locality_attention(
        self,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        document_ids: torch.Tensor | None,
        dtype: torch.dtype,
    ) -> tuple[torch.Tensor | RelativeBias, Callable | None]:
        """(mask, attention function) for every layer, as the encoder's: the locality bias with padding and other
        documents blocked, dense for eager and short sdpa inputs, else a `RelativeBias` for relative_attention.py's
        functions."""
        bias = RelativeBias(
            self.locality_bias(position_ids.device),
            position_ids,
            ~attention_mask.bool(),
            document_ids,
            self.config.relative_attention_max_distance,
        )
        queries = slice(0, position_ids.shape[-1])
        return self.distance_bias_attention(
            self.config._attn_implementation,
            position_ids.shape[-1],
            lambda: bias,
            lambda: bias.block_bias(queries, bias.near_bias(queries), dtype),
        )


class MaeLmLMHead(nn.Module):
    """dense -> GELU -> LayerNorm -> vocabulary projection tied to the input embedding (+ its own bias)."""

    def __init__(self, config: MaeLmConfig):
        super().__init__()
        self.dense = nn.Linear(config.decoder_hidden_size, config.hidden_size)
        self.activation = ACT2FN["gelu"]
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.vocab_projection = nn.Linear(config.hidden_size, config.vocab_size)

    def transform(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Everything before the vocabulary projection, which the training loss fuses with its cross-entropy."""
        return self.layer_norm(self.activation(self.dense(hidden_states)))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.vocab_projection(self.transform(hidden_states))


@dataclass
class MaeLmMaskedLMOutput(MaskedLMOutput):
    """`MaskedLMOutput` plus the encoder's states scattered back to the input layout.

    logits: (batch, length, vocab) in eval and predict mode, with or without labels, and in training without labels.
        In training with labels the vocabulary projection only runs at the labelled positions: (number of labelled
        positions, vocab) in row-major order, or None where it runs fused with the loss (see `labelled_rows_loss`);
        `model.compact_eval_logits = True` gives that compact form in eval too (`StandardLogitsOutsideTraining`).
    encoder_last_hidden_state: (batch, length, hidden), zeros where the encoder saw nothing.
    """

    encoder_last_hidden_state: torch.FloatTensor | None = None


def unmasked_targets_warning(unmasked: int, labelled: int) -> str:
    return (
        f"{unmasked} of the batch's {labelled} masked-LM targets ({unmasked / labelled:.0%}) reach MaeLmForMaskedLM "
        "unmasked: left as they are or replaced by a random token, as DataCollatorForLanguageModeling's default "
        "80/10/10 split does. MAE-LM's encoder never sees the positions it predicts (they are dropped as [MASK]s); "
        "these it reads, so it trains on a different objective, and the unchanged ones can be copied rather than "
        "predicted. Use hf_encoders.DataCollatorForMaeLm, or DataCollatorForLanguageModeling(..., "
        "mask_replace_prob=1.0, random_replace_prob=0.0). (Said once per model.)"
    )


class MaeLmForMaskedLM(StandardLogitsOutsideTraining, MaeLmPreTrainedModel):
    _tied_weights_keys = {"lm_head.vocab_projection.weight": "mae_lm.embeddings.word_embeddings.weight"}
    # Set once this model has warned about targets that reach it unmasked (`unmasked_targets_warning`).
    warned_unmasked_targets = False

    def __init__(self, config: MaeLmConfig):
        super().__init__(config)
        if config.mask_token_id is None:
            raise ValueError("MaeLmConfig.mask_token_id is None; set it to the tokenizer's mask_token_id.")
        self.mae_lm = MaeLmModel(config)
        self.decoder = MaeLmDecoder(config)
        self.lm_head = MaeLmLMHead(config)
        self.post_init()

    @classmethod
    def from_encoder(cls, model_or_path, mask_token_id: int | None = None, **mae_lm_options) -> "MaeLmForMaskedLM":
        """MAE-LM whose encoder is a pretrained BERT, RoBERTa or XLM-R encoder (a loaded model, a folder or a Hub
        name), computing its hidden states, with a fresh decoder and the source's MLM head where it has one; see
        `hf_encoders.methods.mae_lm.conversion.from_encoder` for `mae_lm_options`."""
        try:  # a late import of the package, which checkpoints do not carry (checkpoint_io.raise_without_package)
            from hf_encoders.methods.mae_lm.conversion import from_encoder
        except ModuleNotFoundError as error:
            raise_without_package("Conversion from an encoder", error)
        return from_encoder(cls, model_or_path, mask_token_id, **mae_lm_options)

    def get_input_embeddings(self):
        return self.mae_lm.embeddings.word_embeddings

    def get_output_embeddings(self):
        return self.lm_head.vocab_projection

    def set_output_embeddings(self, new_embeddings):
        self.lm_head.vocab_projection = new_embeddings

    def encoder_input_mask(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, masks_in_encoder: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Which positions the encoder reads: real tokens, minus the [MASK]s. δ is the collator's decision
        (`DataCollatorForMaeLm(mask_in_encoder_fraction=...)`): `masks_in_encoder` marks the [MASK]s that stay;
        without it none does (δ = 0)."""
        masked = input_ids == self.config.mask_token_id
        if masks_in_encoder is not None:
            masked = masked & ~masks_in_encoder.bool()
        return attention_mask.bool() & ~masked

    def encode_kept(
        self, input_ids, keep, kept_positions, kept_mask, restore, position_ids, document_ids=None, **kwargs
    ) -> torch.Tensor:
        """Run the encoder on the kept tokens only (`keep`, (batch, length)): each row's `kept_positions` (rows,
        slots), the filler slots past a row's kept tokens masked out by `kept_mask`, each token with its original
        position id (and document, in packed rows: dropping a document's first token would hide where it starts);
        return the states put back in place by `restore` (`restore_index`), (batch, length, hidden), zeros where the
        encoder read nothing."""
        states = self.mae_lm(
            input_ids=input_ids.gather(1, kept_positions),
            attention_mask=kept_mask.long(),
            position_ids=position_ids.gather(1, kept_positions),
            # Compacted positions have gaps: say which document each one is in rather than let them be read.
            document_ids=(
                kept_positions.new_zeros(kept_positions.shape)
                if document_ids is None
                else document_ids.gather(1, kept_positions)
            ),
            **kwargs,
        ).last_hidden_state
        restored = states.gather(1, restore[..., None].expand(-1, -1, states.shape[-1]))
        return restored * keep[..., None].to(states.dtype)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,  # accepted for BERT-style tokenizers, unused
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        masks_in_encoder: torch.Tensor | None = None,
        kept_positions: torch.Tensor | None = None,
        kept_mask: torch.Tensor | None = None,
        restore_index: torch.Tensor | None = None,
        target_positions: torch.Tensor | None = None,
        target_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> MaeLmMaskedLMOutput:
        r"""
        kept_positions, kept_mask, restore_index, target_positions, target_mask: the fixed-size index tensors
            `DataCollatorForMaeLm` writes (hf_encoders/data/index_tensors.py), with which the forward reads nothing
            back from the device; without them (a stock collator's batch) it counts the kept and labelled tokens on
            the device and reads the counts, once per step. The same loss either way.
        """
        batch_size, length = input_ids.shape
        check_sequence_length(
            length,
            self.config.max_position_embeddings,
            "truncate the input or build the model with a larger position table",
        )
        if labels is not None:
            check_labels_shape(labels, input_ids.shape, "DataCollatorForMaeLm")
        indexed = kept_positions is not None
        self.warn_if_padding_differs(input_ids, attention_mask)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        documents = None
        if position_ids is None:
            position_ids = torch.arange(length, device=input_ids.device)
        else:  # possibly packed: several documents per row (packed_sequences.py)
            check_packed_positions(position_ids, attention_mask, fixed_shapes=indexed)
            documents = document_index(position_ids).expand(batch_size, -1)
        # Compaction gathers each row's kept positions, so every row needs its own (a (1, L) row is broadcast).
        position_ids = position_ids.expand(batch_size, -1)

        keep = self.encoder_input_mask(input_ids, attention_mask, masks_in_encoder)
        label_counts = [None]
        if not indexed:
            # The host reads the sizes the step's shapes follow in one go, the longest kept row and the labelled
            # count, with the count of targets left unmasked: one wait for the device, and one graph break under
            # torch.compile.
            sizes = [keep.sum(-1).max()]
            if labels is not None:
                labelled = labels != -100
                sizes += [labelled.sum(), (labelled & (input_ids != self.config.mask_token_id)).sum()]
            compact_length, *label_counts = torch.stack(sizes).tolist()
            if label_counts and label_counts[1] and not self.warned_unmasked_targets:
                logger.warning(unmasked_targets_warning(label_counts[1], label_counts[0]))
                self.warned_unmasked_targets = True
            kept_positions, kept_mask = first_positions(keep, max(compact_length, 1))
            restore_index = compute_restore_index(keep, kept_positions)
        encoder_states = self.encode_kept(
            input_ids, keep, kept_positions, kept_mask.bool(), restore_index, position_ids, documents, **kwargs
        )
        mask_embedding = self.get_input_embeddings().weight[self.config.mask_token_id]
        decoder_inputs = torch.where(keep[..., None], encoder_states, mask_embedding.to(encoder_states.dtype))
        decoder_states = self.decoder(decoder_inputs, position_ids, attention_mask, documents, fixed_shapes=indexed)

        if labels is None:
            return MaeLmMaskedLMOutput(logits=self.lm_head(decoder_states), encoder_last_hidden_state=encoder_states)

        loss, logits = labelled_rows_loss(
            self.lm_head.vocab_projection,
            decoder_states,
            labels,
            num_items_in_batch,
            transform=self.lm_head.transform,
            labelled_count=label_counts[0],
            all_positions=self.logits_at_all_positions(),
            target_positions=target_positions,
            target_mask=target_mask,
        )
        return MaeLmMaskedLMOutput(loss=loss, logits=logits, encoder_last_hidden_state=encoder_states)


class MaeLmClassificationHead(nn.Module):
    """Position 0 -> dense -> tanh -> out_proj, with dropout before each projection (RoBERTa's head)."""

    def __init__(self, config: MaeLmConfig):
        super().__init__()
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        pooled = torch.tanh(self.dense(self.dropout(hidden_states[:, 0])))
        return self.out_proj(self.dropout(pooled))


class MaeLmForSequenceClassification(MaeLmPreTrainedModel):
    _new_head_prefixes = ("classifier.",)

    def __init__(self, config: MaeLmConfig):
        super().__init__(config)
        self.mae_lm = MaeLmModel(config)
        self.classifier = MaeLmClassificationHead(config)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        **kwargs,
    ):
        outputs = self.mae_lm(
            input_ids, attention_mask, position_ids=position_ids, inputs_embeds=inputs_embeds, **kwargs
        )
        logits = self.classifier(outputs.last_hidden_state)
        loss = self.loss_function(labels, logits, self.config) if labels is not None else None
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class MaeLmForTokenClassification(TokenClassificationMixin, MaeLmPreTrainedModel):
    _new_head_prefixes = ("classifier.",)

    def __init__(self, config: MaeLmConfig):
        super().__init__(config)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.mae_lm = MaeLmModel(config)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()


class MaeLmForQuestionAnswering(QuestionAnsweringMixin, MaeLmPreTrainedModel):
    _new_head_prefixes = ("qa_outputs.",)

    def __init__(self, config: MaeLmConfig):
        super().__init__(config)
        self.mae_lm = MaeLmModel(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()


__all__ = [
    "MaeLmForMaskedLM",
    "MaeLmForQuestionAnswering",
    "MaeLmForSequenceClassification",
    "MaeLmForTokenClassification",
    "MaeLmModel",
    "MaeLmPreTrainedModel",
]
