"""Biphasic encoder: one Llama-style network trained with causal LM, then masked LM (Gisserot-Boukhlef et al., 2025).

The two phases differ only in the attention mask: `is_causal=True` (next-token loss) or False (masked-token loss).
Everything else is transformers' Llama: `LlamaModel.forward` already builds a bidirectional mask when called with
`is_causal=False` and passes the flag down to SDPA/flash attention, so this file adds the objective switch, a loss
whose vocabulary projection runs on labelled positions only, and the task heads. Conversion from a causal LM and
export to transformers' native EuroBERT live in the hf-encoders package (methods/biphasic/conversion.py, export.py), not
in this file that every checkpoint carries. State-dict keys are exactly LlamaForCausalLM's (`model.embed_tokens`,
`model.layers.N...`, `model.norm`, `lm_head`), so Llama, SmolLM2, Mistral and Qwen2 checkpoints load unchanged.

Labels are already aligned with the position that predicts them in BOTH objectives: DataCollatorForBiphasic shifts
CLM labels (labels[i] = input_ids[i + 1]) and nothing here shifts again.

This folder is flat on purpose: it is copied next to every checkpoint and must import nothing but torch,
transformers and its siblings (see hf_encoders/registration.py).
"""

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask, packed_sequence_mask_function
from transformers.modeling_outputs import (
    BaseModelOutputWithPast,
    CausalLMOutput,
    MaskedLMOutput,
    SequenceClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.llama.modeling_llama import (
    LlamaAttention,
    LlamaDecoderLayer,
    LlamaModel,
    LlamaPreTrainedModel,
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
    eager_attention_forward,
)

from .checkpoint_io import CheckpointMixin, raise_without_package
from .configuration_biphasic import OBJECTIVES, BiphasicConfig
from .loss_utils import (
    StandardLogitsOutsideTraining,
    check_labels_shape,
    check_sequence_length,
    labelled_rows_loss,
)
from .packed_sequences import (
    Unpadded,
    check_packed_positions,
    document_index,
    ends_document,
    restarts_inside,
    worth_unpadding,
)
from .task_heads import QuestionAnsweringMixin, TokenClassificationMixin

# The model types whose causal LM is exactly this network (hf_encoders.methods.biphasic.conversion converts them). Anything
# else (GPT-2's absolute positions and LayerNorm, BERT, mixture-of-experts, Gemma's shifted norms, Qwen3's q/k norms)
# has weights or maths this network lacks.
CONVERTIBLE_CAUSAL_LMS = ("llama", "mistral", "qwen2")


class BiphasicPreTrainedModel(CheckpointMixin, LlamaPreTrainedModel):
    config_class = BiphasicConfig
    base_model_prefix = "model"
    model_description = "a biphasic one"

    @classmethod
    def foreign_checkpoint_fix(cls, model_type: str) -> str:
        if model_type in CONVERTIBLE_CAUSAL_LMS:
            return "convert it with `hf-encoders convert --from_causal_lm` (or BiphasicEncoderForPreTraining.from_causal_lm)"
        return super().foreign_checkpoint_fix(model_type)

    @classmethod
    def misfit_fix(cls) -> str:
        return (
            f"{super().misfit_fix()} A Llama-family causal LM is converted with "
            "BiphasicEncoderForPreTraining.from_causal_lm instead."
        )

    def to_eurobert(self) -> PreTrainedModel:
        """This network as transformers' native EuroBERT class, with equal outputs
        (`hf_encoders.methods.biphasic.export.to_eurobert`)."""
        try:  # a late import of the package, which checkpoints do not carry (checkpoint_io.raise_without_package)
            from hf_encoders.methods.biphasic.export import to_eurobert
        except ModuleNotFoundError as error:
            raise_without_package("Export to EuroBERT", error)
        return to_eurobert(self)


class BiphasicAttention(LlamaAttention):
    """Llama's attention (same weights and names), which also takes an unpadded batch: the projections and RoPE run
    on the real tokens, (1, tokens, hidden), and the attention kernel on the padded layout (see `Unpadded`)."""

    def forward(
        self, hidden_states, position_embeddings, attention_mask=None, unpadded: Unpadded | None = None, **kwargs
    ):
        if unpadded is None:
            return super().forward(hidden_states, position_embeddings, attention_mask, **kwargs)
        hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        query, key, value = (
            projection(hidden_states).view(hidden_shape).transpose(1, 2)
            for projection in (self.q_proj, self.k_proj, self.v_proj)
        )
        query, key = apply_rotary_pos_emb(query, key, *position_embeddings)
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        output, weights = unpadded.attend(
            attention,
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.attention_dropout if self.training else 0.0,
            scaling=self.scaling,
            **kwargs,
        )
        return self.o_proj(output.reshape(*hidden_states.shape[:-1], -1)), weights


class BiphasicEncoder(BiphasicPreTrainedModel, LlamaModel):
    """Llama's decoder stack used as an encoder: bidirectional unless called with `is_causal=True`."""

    # The LM head, and (read from a fine-tuned checkpoint: pipeline("feature-extraction"), sentence-transformers) the
    # task heads.
    _keys_to_ignore_on_load_unexpected = [r"^lm_head\.", r"^dense\.", r"^classifier\.", r"^qa_outputs\."]

    def __init__(self, config: BiphasicConfig):
        # LlamaModel.__init__ is skipped only because it gives the embedding `padding_idx=pad_token_id`: with
        # pad = EOS (the paper's Llama-3 setup) that would freeze the EOS row that separates packed documents.
        PreTrainedModel.__init__(self, config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config, index) for index in range(config.num_hidden_layers))
        for index, layer in enumerate(self.layers):  # the layer class stays Llama's: FSDP wraps layers by its name
            layer.self_attn = BiphasicAttention(config, index)
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config=config)
        self.gradient_checkpointing = False
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,  # accepted for BERT-style tokenizers; there are no segments
        is_causal: bool = False,
        fixed_shapes: bool = False,
        **kwargs,
    ) -> BaseModelOutputWithPast:
        """`fixed_shapes`: the batch carries a collator's index tensors (hf_encoders/data/index_tensors.py), which
        checked it on the host: nothing is read back from the device (packed_sequences.may_read_device)."""
        batch_size, length = (input_ids if input_ids is not None else inputs_embeds).shape[:2]
        check_sequence_length(length, self.config.max_position_embeddings)
        if position_ids is not None:
            check_packed_positions(position_ids, attention_mask, fixed_shapes)
        packed = position_ids is not None and restarts_inside(position_ids, fixed_shapes)
        # Padding costs the linear layers nothing: they see the real tokens only (see Unpadded).
        unpadded = Unpadded(attention_mask) if worth_unpadding(attention_mask, fixed_shapes) else None
        # With fixed shapes the mask is built here too: transformers' own would read whether it can be skipped.
        if packed or unpadded is not None or (fixed_shapes and attention_mask is not None):
            if inputs_embeds is None:
                input_ids, inputs_embeds = None, self.embed_tokens(input_ids)
            attention_mask = self.attention_mask_of(
                inputs_embeds, attention_mask, position_ids, packed, is_causal, may_skip=not fixed_shapes
            )
        if unpadded is not None:
            if position_ids is None:
                position_ids = torch.arange(length, device=inputs_embeds.device)[None]
            position_ids = unpadded.unpad(position_ids.expand(batch_size, -1))[None]
            inputs_embeds = unpadded.unpad(inputs_embeds)[None]
        # `is_causal` picks create_causal_mask or create_bidirectional_mask and reaches the attention kernels.
        outputs = super().forward(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            is_causal=is_causal,
            **({} if unpadded is None else {"unpadded": unpadded}),
            **kwargs,
        )
        if unpadded is not None:
            outputs.last_hidden_state = unpadded.pad(outputs.last_hidden_state[0])
            if outputs.hidden_states is not None:
                outputs.hidden_states = tuple(unpadded.pad(states[0]) for states in outputs.hidden_states)
        return outputs

    def attention_mask_of(
        self, inputs_embeds, attention_mask, position_ids, packed: bool, is_causal: bool, may_skip: bool = True
    ):
        """The (batch, length) layout's mask, built before unpadding changes the layout, and for packed rows
        (position_ids restarting at 0, see packed_sequences.py) one where each document attends to itself only: built
        here because LlamaModel detects packing for causal masks without padding only. Flash attention gets a 2D mask
        or none, and finds packed documents in `position_ids` itself. `may_skip`: transformers may leave out a mask
        that masks nothing, which it reads from the device to find out."""
        documents = document_index(position_ids).expand(len(inputs_embeds), -1) if packed else None
        arguments = dict(
            config=self.config,
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            and_mask_function=None if documents is None else packed_sequence_mask_function(documents),
        )
        if is_causal:
            # position_ids=None keeps transformers' own packing detection out: over three or more documents without
            # padding it lets a document see part of the previous one (transformers 5.23-5.24; tested here).
            return create_causal_mask(**arguments, cache=None, position_ids=None, allow_is_causal_skip=may_skip)
        return create_bidirectional_mask(**arguments, allow_is_bidirectional_skip=may_skip)


def copies_its_input(labels: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Whether some label is set and every set label equals the input at its own position: what stock
    DataCollatorForLanguageModeling (mlm=False) makes for Llama, which shifts inside the model. Here such labels would
    train the identity map (CLM) or predict unmasked tokens (MLM), silently."""
    labelled = labels != -100
    return labelled.any() & ((labels == input_ids) | ~labelled).all()


class BiphasicLanguageModel(StandardLogitsOutsideTraining, BiphasicPreTrainedModel):
    """Encoder + vocabulary projection; the common part of the pre-training and fill-mask models.

    Their logits are (batch, length, vocab) except in training with labels, where the projection runs only where a
    label is set (`StandardLogitsOutsideTraining`)."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config: BiphasicConfig):
        super().__init__(config)
        self.model = BiphasicEncoder(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def check_targets(self, labels, input_ids, inputs_embeds, is_causal: bool) -> None:
        """Refuse, before the encoder runs, labels this model cannot train on."""
        if labels is None:
            return
        check_labels_shape(
            labels, (input_ids if input_ids is not None else inputs_embeds).shape[:2], "DataCollatorForBiphasic"
        )
        if not is_causal and self.config.mask_token_id is None:
            raise ValueError(
                "Masked-LM training needs config.mask_token_id, the [MASK] id the collator writes, but it is None (a "
                "converted causal LM has none). Add a mask token to the tokenizer, grow the embeddings and record its "
                "id: tokenizer.add_special_tokens({'mask_token': '<|mask|>'}); "
                "model.resize_token_embeddings(len(tokenizer)); model.config.mask_token_id = tokenizer.mask_token_id."
            )

    def label_summary(self, labels, input_ids) -> torch.Tensor:
        """[labelled count, whether the labels copy their input (`copies_its_input`)], which forward reads with one
        `.tolist()`: one wait for the device per step, and the only graph break under torch.compile (in forward
        itself, since a break inside a called function also breaks its caller)."""
        copies = labels.new_zeros(()) if input_ids is None else copies_its_input(labels, input_ids)
        return torch.stack([(labels != -100).sum(), copies.to(labels.dtype)])

    def vocabulary_loss(
        self, hidden_states, labels, label_summary: list[int] | None, num_items_in_batch=None, index_tensors=None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(loss, logits). In training with labels, the vocabulary projection runs only where a label is set, mostly
        fused with the loss and without logits (see `labelled_rows_loss`); otherwise it covers every position, and
        without labels the loss is None. `index_tensors`: the collator's (target_positions, target_mask), with
        which nothing is read from the device (and `label_summary` is None: the collator built the labels)."""
        if labels is None:
            return None, self.lm_head(hidden_states)
        if index_tensors is not None:
            return labelled_rows_loss(
                self.lm_head,
                hidden_states,
                labels,
                num_items_in_batch,
                all_positions=self.logits_at_all_positions(),
                target_positions=index_tensors[0],
                target_mask=index_tensors[1],
            )
        labelled_count, copies_input = label_summary
        # A few MLM targets may all be left unmasked by chance (BERT's 10% split); a wrong collator fills batches.
        if copies_input and labelled_count >= 8:
            raise ValueError(
                "Every label equals the input token at its own position. Biphasic models expect labels aligned "
                "with the predicting position: next-token labels for CLM (labels[i] = input_ids[i + 1]) and masked "
                "inputs for MLM. Use hf_encoders.DataCollatorForBiphasic."
            )
        return labelled_rows_loss(
            self.lm_head,
            hidden_states,
            labels,
            num_items_in_batch,
            labelled_count=labelled_count,
            all_positions=self.logits_at_all_positions(),
        )

    @classmethod
    def from_causal_lm(cls, model_or_path, mask_token_id: int | None = None, **load_kwargs):
        """This class from a Llama-family causal LM (a loaded model, a folder, a Hub name or a `.gguf` file); see
        `hf_encoders.methods.biphasic.conversion.from_causal_lm`."""
        try:  # a late import of the package, which checkpoints do not carry (checkpoint_io.raise_without_package)
            from hf_encoders.methods.biphasic.conversion import from_causal_lm
        except ModuleNotFoundError as error:
            raise_without_package("Conversion from a causal LM", error)
        return from_causal_lm(cls, model_or_path, mask_token_id, **load_kwargs)


class BiphasicEncoderForPreTraining(BiphasicLanguageModel):
    """CLM or MLM on the same weights and LM head: `objective` per call, else the model's `objective` attribute.

    `objective` is training state, not part of the checkpoint: `PhaseScheduleCallback` sets it on the model before
    every step and a loaded model starts as an encoder ("mlm"). Phase-scheduled training feeds both views in every
    batch (see DataCollatorForBiphasic): `input_ids`/`labels` (clean tokens, next-token labels) for CLM and
    `mlm_input_ids`/`mlm_labels` for MLM; the objective, chosen in the main process, picks one, so data-loader
    workers never need to know the phase. A single-view batch (just `input_ids`/`labels`) is used as it is by
    either objective.
    """

    # The loss is a per-batch mean: Trainer's `num_items_in_batch` counts `labels`, which in a two-view batch are
    # the CLM labels even in the MLM phase; Trainer then scales for gradient accumulation itself.
    accepts_loss_kwargs = False
    objective: str = "mlm"

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        mlm_input_ids: torch.LongTensor | None = None,
        mlm_labels: torch.LongTensor | None = None,
        objective: str | None = None,
        token_type_ids: torch.Tensor | None = None,  # accepted for BERT-style tokenizers, unused
        target_positions: torch.Tensor | None = None,
        target_mask: torch.Tensor | None = None,
        mlm_target_positions: torch.Tensor | None = None,
        mlm_target_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> CausalLMOutput | MaskedLMOutput:
        r"""
        target_positions, target_mask (and the MLM view's `mlm_`-named ones): the fixed-size index tensors
            `DataCollatorForBiphasic` writes (hf_encoders/data/index_tensors.py), with which the forward reads
            nothing back from the device; without them it reads the labelled count, once per step. The same loss
            either way.
        """
        objective = objective or self.objective
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}.")
        if objective == "mlm" and mlm_input_ids is not None:
            input_ids, labels = mlm_input_ids, mlm_labels
            target_positions, target_mask = mlm_target_positions, mlm_target_mask
        is_causal = objective == "clm"
        self.check_targets(labels, input_ids, inputs_embeds, is_causal)
        if is_causal and labels is not None and position_ids is not None:
            labels = labels.masked_fill(ends_document(position_ids), -100)  # packed rows: never across documents
        index_tensors = None if target_positions is None else (target_positions, target_mask)
        label_summary = None
        if labels is not None and index_tensors is None:
            label_summary = self.label_summary(labels, input_ids).tolist()
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            is_causal=is_causal,
            fixed_shapes=index_tensors is not None,
            **kwargs,
        )
        loss, logits = self.vocabulary_loss(
            outputs.last_hidden_state, labels, label_summary, index_tensors=index_tensors
        )
        output_class = CausalLMOutput if is_causal else MaskedLMOutput
        return output_class(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class BiphasicEncoderForMaskedLM(BiphasicLanguageModel):
    """Always bidirectional masked LM (fill-mask, MLM fine-tuning); same weights as the pre-training model."""

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        token_type_ids: torch.Tensor | None = None,  # accepted for BERT-style tokenizers, unused
        num_items_in_batch: torch.Tensor | int | None = None,
        target_positions: torch.Tensor | None = None,
        target_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> MaskedLMOutput:
        r"""
        target_positions, target_mask: `DataCollatorForBiphasic(objective="mlm")`'s fixed-size index tensors
            (see `BiphasicEncoderForPreTraining.forward`).
        """
        self.check_targets(labels, input_ids, inputs_embeds, is_causal=False)
        index_tensors = None if target_positions is None else (target_positions, target_mask)
        label_summary = None
        if labels is not None and index_tensors is None:
            label_summary = self.label_summary(labels, input_ids).tolist()
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            fixed_shapes=index_tensors is not None,
            **kwargs,
        )
        loss, logits = self.vocabulary_loss(
            outputs.last_hidden_state,
            labels,
            label_summary,
            num_items_in_batch=num_items_in_batch,
            index_tensors=index_tensors,
        )
        return MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


def pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, pooling: str) -> torch.Tensor:
    """(batch, hidden) from (batch, length, hidden): mean over real tokens, the first position, or the last real token."""
    if attention_mask is None:
        attention_mask = torch.ones(hidden_states.shape[:2], dtype=torch.long, device=hidden_states.device)
    if pooling == "cls":
        return hidden_states[:, 0]
    if pooling == "last":
        # Last real position, whichever side the padding is on.
        last = attention_mask.shape[1] - 1 - attention_mask.flip(-1).argmax(-1)
        return hidden_states[torch.arange(hidden_states.shape[0], device=hidden_states.device), last]
    weights = attention_mask[..., None].to(hidden_states.dtype)
    return (hidden_states * weights).sum(1) / weights.sum(1)


class BiphasicEncoderForSequenceClassification(BiphasicPreTrainedModel):
    """Pooled states (config.classifier_pooling, mean by default as in the paper) -> dense -> GELU -> classifier:
    EuroBERT's head and parameter names, so the export is exact."""

    _keys_to_ignore_on_load_unexpected = [r"^lm_head\."]
    _new_head_prefixes = ("dense.", "classifier.")

    def __init__(self, config: BiphasicConfig):
        super().__init__(config)
        self.model = BiphasicEncoder(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.GELU()
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        token_type_ids=None,
        **kwargs,
    ):
        outputs = self.model(
            input_ids, attention_mask, position_ids=position_ids, inputs_embeds=inputs_embeds, **kwargs
        )
        pooled = pool(outputs.last_hidden_state, attention_mask, self.config.classifier_pooling)
        logits = self.classifier(self.activation(self.dense(pooled)))
        loss = self.loss_function(labels, logits, self.config) if labels is not None else None
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class BiphasicEncoderForTokenClassification(TokenClassificationMixin, BiphasicPreTrainedModel):
    _keys_to_ignore_on_load_unexpected = [r"^lm_head\."]
    _new_head_prefixes = ("classifier.",)

    def __init__(self, config: BiphasicConfig):
        super().__init__(config)
        self.model = BiphasicEncoder(config)
        self.dropout = nn.Identity()  # as EuroBERT's token classifier, which the export must equal
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()


class BiphasicEncoderForQuestionAnswering(QuestionAnsweringMixin, BiphasicPreTrainedModel):
    _keys_to_ignore_on_load_unexpected = [r"^lm_head\."]
    _new_head_prefixes = ("qa_outputs.",)

    def __init__(self, config: BiphasicConfig):
        super().__init__(config)
        self.model = BiphasicEncoder(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()


__all__ = [
    "BiphasicEncoder",
    "BiphasicEncoderForMaskedLM",
    "BiphasicEncoderForPreTraining",
    "BiphasicEncoderForQuestionAnswering",
    "BiphasicEncoderForSequenceClassification",
    "BiphasicEncoderForTokenClassification",
    "BiphasicPreTrainedModel",
]
