"""Biphasic encoder: one Llama-style network trained with causal LM, then masked LM (Gisserot-Boukhlef et al., 2025).

The two phases differ only in the attention mask: `is_causal=True` (next-token loss) or False (masked-token loss).
Everything else is transformers' Llama: `LlamaModel.forward` already builds a bidirectional mask when called with
`is_causal=False` and passes the flag down to SDPA/flash attention, so this file adds the objective switch, a loss
whose vocabulary projection runs on labelled positions only, the task heads, the conversion from a causal LM
and the export to transformers' native EuroBERT. State-dict keys are exactly LlamaForCausalLM's (`model.embed_tokens`,
`model.layers.N...`, `model.norm`, `lm_head`), so Llama, SmolLM2, Mistral and Qwen2 checkpoints load unchanged.

Labels are already aligned with the position that predicts them in BOTH objectives: DataCollatorForBiphasic shifts
CLM labels (labels[i] = input_ids[i + 1]) and nothing here shifts again.

This folder is flat on purpose: it is copied next to every checkpoint and must import nothing but torch,
transformers and its siblings (see hf_encoders/registration.py).
"""

import copy
from pathlib import Path

import torch
import transformers
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    EuroBertConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import (
    BaseModelOutputWithPast,
    CausalLMOutput,
    MaskedLMOutput,
    SequenceClassifierOutput,
)
from transformers.models.llama.modeling_llama import (
    LlamaDecoderLayer,
    LlamaModel,
    LlamaPreTrainedModel,
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
)
from transformers.utils import logging

from .checkpoint_io import CheckpointMixin
from .configuration_biphasic import OBJECTIVES, BiphasicConfig
from .task_heads import QuestionAnsweringMixin, TokenClassificationMixin

logger = logging.get_logger(__name__)

# The model types whose causal LM is exactly this network. Anything else (GPT-2's absolute positions and LayerNorm,
# BERT, mixture-of-experts, Gemma's shifted norms, Qwen3's q/k norms) has weights or maths this network lacks.
CONVERTIBLE_CAUSAL_LMS = ("llama", "mistral", "qwen2")
# Llama fields copied verbatim from a converted checkpoint's config.
LLAMA_FIELDS = (
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps",
    "attention_dropout", "tie_word_embeddings", "pad_token_id", "bos_token_id", "eos_token_id",
)


class BiphasicPreTrainedModel(CheckpointMixin, LlamaPreTrainedModel):
    config_class = BiphasicConfig
    base_model_prefix = "model"
    family_description = "a biphasic one"
    # The transformers class `to_eurobert` exports to, where the export is exact.
    eurobert_class: str | None = None

    @classmethod
    def foreign_checkpoint_fix(cls, model_type: str) -> str:
        if model_type in CONVERTIBLE_CAUSAL_LMS:
            return "convert it with BiphasicEncoderForPreTraining.from_causal_lm (or `hf-encoders convert --from-causal-lm`)"
        return super().foreign_checkpoint_fix(model_type)

    @classmethod
    def misfit_fix(cls) -> str:
        return (
            f"{super().misfit_fix()} A Llama-family causal LM is converted with "
            "BiphasicEncoderForPreTraining.from_causal_lm instead."
        )

    def to_eurobert(self) -> PreTrainedModel:
        """The same network as transformers' native EuroBERT class (no remote code needed to load it), with equal
        outputs. EuroBERT is always bidirectional, as every biphasic model is at fine-tuning.

        Exact for the encoder, the (pre-training or masked) LM, token classification, and sequence classification
        with "mean" or "cls" pooling. Note that EuroBERT gives its embedding a `padding_idx`: where pad = EOS,
        further training of the export leaves the EOS row frozen.
        """
        if self.eurobert_class is None:
            raise ValueError(f"transformers has no EuroBERT class equivalent to {type(self).__name__}; keep the remote-code checkpoint.")
        pooling = {"mean": "mean", "cls": "bos"}.get(self.config.classifier_pooling)
        if pooling is None and self.eurobert_class == "EuroBertForSequenceClassification":
            raise ValueError("EuroBERT has no 'last' pooling; only 'mean' and 'cls' classifiers export exactly.")
        fields = {name: getattr(self.config, name) for name in (*LLAMA_FIELDS, "rope_parameters", "attention_bias", "mlp_bias")}
        task = {name: getattr(self.config, name) for name in ("id2label", "label2id", "problem_type")}
        mask = {} if self.config.mask_token_id is None else {"mask_token_id": self.config.mask_token_id}
        config = EuroBertConfig(**fields, **task, **mask, classifier_pooling=pooling or "mean")
        exported = getattr(transformers, self.eurobert_class)(config).to(self.dtype).eval()
        state = self.state_dict()
        if self.config.mlp_bias and hasattr(exported, "lm_head"):
            # EuroBERT's LM head takes a bias when the MLP does; ours never has one, so zero is exact.
            state["lm_head.bias"] = torch.zeros_like(exported.lm_head.bias)
        exported.load_state_dict(state, strict=True)
        return exported


class BiphasicEncoder(BiphasicPreTrainedModel, LlamaModel):
    """Llama's decoder stack used as an encoder: bidirectional unless called with `is_causal=True`."""

    eurobert_class = "EuroBertModel"
    _keys_to_ignore_on_load_unexpected = [r"^lm_head\."]

    def __init__(self, config: BiphasicConfig):
        # LlamaModel.__init__ is skipped only because it gives the embedding `padding_idx=pad_token_id`: with
        # pad = EOS (the paper's Llama-3 setup) that would freeze the EOS row that separates packed documents.
        PreTrainedModel.__init__(self, config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config, index) for index in range(config.num_hidden_layers))
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
        **kwargs,
    ) -> BaseModelOutputWithPast:
        length = (input_ids if input_ids is not None else inputs_embeds).shape[1]
        if length > self.config.max_position_embeddings:
            raise ValueError(
                f"Sequence length {length} exceeds max_position_embeddings={self.config.max_position_embeddings}; "
                "truncate the input (e.g. tokenizer(..., truncation=True, max_length=...))."
            )
        # `is_causal` picks create_causal_mask or create_bidirectional_mask and reaches the attention kernels.
        return super().forward(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
            inputs_embeds=inputs_embeds, is_causal=is_causal, **kwargs,
        )


class BiphasicLanguageModel(BiphasicPreTrainedModel):
    """Encoder + vocabulary projection; the common part of the pre-training and fill-mask models."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    eurobert_class = "EuroBertForMaskedLM"

    def __init__(self, config: BiphasicConfig):
        super().__init__(config)
        self.model = BiphasicEncoder(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self._label_alignment_checked: set[bool] = set()  # the objectives (is_causal) whose labels passed
        self.post_init()

    def language_model_loss(self, input_ids, labels, is_causal, num_items_in_batch=None, **encoder_inputs):
        """(loss, logits, encoder outputs). With labels, the vocabulary projection runs only where a label is
        set and `logits` is (number of labelled positions, vocab) in row-major order; without, it covers every
        position. The loss is summed and divided by Trainer's `num_items_in_batch` when given, else by this
        batch's labelled count (so a batch without targets gives 0, not NaN)."""
        if labels is not None:
            shape = (input_ids if input_ids is not None else encoder_inputs["inputs_embeds"]).shape[:2]
            if labels.shape != shape:
                raise ValueError(
                    f"labels must have the shape of the input (batch, length) = {tuple(shape)}, got {tuple(labels.shape)}: "
                    "one target per position (-100 where there is none), as DataCollatorForBiphasic builds them."
                )
            if not is_causal and self.config.mask_token_id is None:
                raise ValueError(
                    "Masked-LM training needs config.mask_token_id, the [MASK] id the collator writes, but it is None "
                    "(a converted causal LM has none). Add a mask token to the tokenizer and the model with "
                    "hf_encoders.training.conversion.prepare_tokenizer(tokenizer) and "
                    "fit_model_to_tokenizer(model, tokenizer)."
                )
        outputs = self.model(input_ids=input_ids, is_causal=is_causal, **encoder_inputs)
        hidden_states = outputs.last_hidden_state
        if labels is None:
            return None, self.lm_head(hidden_states), outputs
        labelled = labels != -100
        if is_causal not in self._label_alignment_checked and input_ids is not None:
            self.check_label_alignment(input_ids, labels, labelled, is_causal)
        logits = self.lm_head(hidden_states[labelled])
        loss = nn.functional.cross_entropy(logits.float(), labels[labelled], reduction="sum")
        denominator = num_items_in_batch if num_items_in_batch is not None else labelled.sum().clamp(min=1)
        return loss / denominator, logits, outputs

    def check_label_alignment(self, input_ids, labels, labelled, is_causal: bool) -> None:
        """Refuse labels that all equal their own position's input: what stock DataCollatorForLanguageModeling
        (mlm=False) makes for Llama, which shifts inside the model. Here they would train the identity map (CLM) or
        predict unmasked tokens (MLM), silently. Checked on the first batch with targets of each objective only,
        because reading the answer makes the host wait for the device; a run keeps its collator."""
        targets = labels[labelled]
        if not targets.numel():
            return
        if bool((targets == input_ids[labelled]).all()):
            raise ValueError(
                "Every label equals the input token at its own position. Biphasic models expect labels aligned "
                "with the predicting position: next-token labels for CLM (labels[i] = input_ids[i + 1]) and masked "
                "inputs for MLM. Use hf_encoders.DataCollatorForBiphasic."
            )
        self._label_alignment_checked.add(is_causal)

    @classmethod
    def from_causal_lm(cls, model_or_path, mask_token_id: int | None = None, **load_kwargs):
        """Convert a Llama-family causal LM (a loaded model, a folder, a Hub name, or a `.gguf` file) into this class.

        Llama, SmolLM2 and Mistral convert as they are; Qwen2's q/k/v biases go through `attention_bias` (with a zero
        o_proj bias). In clm mode the result computes the source model's logits. A sliding window becomes the
        position limit, since within it sliding and full causal attention agree. Other architectures are refused.
        `load_kwargs` go to `AutoModelForCausalLM.from_pretrained` (e.g. `dtype`).
        """
        if isinstance(model_or_path, PreTrainedModel):
            source = model_or_path
            config = biphasic_config_from_causal_lm(source.config, mask_token_id)
        else:
            path, gguf = causal_lm_location(model_or_path)
            try:
                source_config = AutoConfig.from_pretrained(path, **gguf)
            except OSError as error:
                place = "There is no such file or folder" if not Path(path).exists() else "It holds no loadable config"
                raise ValueError(
                    f"Cannot load a causal LM from {str(model_or_path)!r}. {place}, and it did not load as a Hub model "
                    f"either ({error}). Pass a Llama-family causal LM's folder, `.gguf` file or Hub name (with network "
                    "access, or already in the local cache)."
                ) from error
            # The architecture is checked from the config alone, before any weight is read.
            config = biphasic_config_from_causal_lm(source_config, mask_token_id)
            source = AutoModelForCausalLM.from_pretrained(path, **gguf, **load_kwargs)
        state = source.state_dict()
        model = cls(config).to(device=source.device, dtype=source.dtype)
        if config.attention_bias:
            for index, layer in enumerate(model.model.layers):
                # Qwen2 biases q, k and v only; a zero o_proj bias computes the same function.
                state.setdefault(f"model.layers.{index}.self_attn.o_proj.bias", torch.zeros_like(layer.self_attn.o_proj.bias))
        result = model.load_state_dict(state, strict=False)
        if result.missing_keys or result.unexpected_keys:
            raise ValueError(
                f"{type(source).__name__} does not map onto {cls.__name__} (missing: {result.missing_keys[:8]}, "
                f"unexpected: {result.unexpected_keys[:8]}); only LlamaForCausalLM-shaped checkpoints convert."
            )
        return model.train(source.training)


def causal_lm_location(name_or_path) -> tuple[str, dict]:
    """(folder or Hub name, extra from_pretrained kwargs): a `.gguf` file becomes its folder plus `gguf_file`."""
    path = Path(name_or_path)
    if path.suffix == ".gguf" and path.is_file():
        return str(path.parent), {"gguf_file": path.name}
    return str(name_or_path), {}


def biphasic_config_from_causal_lm(source, mask_token_id: int | None = None) -> BiphasicConfig:
    """The BiphasicConfig of a Llama-family causal LM's config, or a ValueError naming what cannot be represented."""
    model_type = getattr(source, "model_type", None)
    if model_type == BiphasicConfig.model_type:
        raise ValueError(
            "This is already a biphasic checkpoint, nothing to convert: load it with "
            "BiphasicEncoderForPreTraining.from_pretrained (or any biphasic class)."
        )
    if model_type not in CONVERTIBLE_CAUSAL_LMS:
        raise ValueError(
            f"Cannot convert a {model_type!r} model ({', '.join(getattr(source, 'architectures', None) or [])}): "
            f"from_causal_lm takes Llama-family causal LMs ({', '.join(CONVERTIBLE_CAUSAL_LMS)}: RMSNorm, SwiGLU, "
            "RoPE, LlamaForCausalLM weight names). Other architectures (GPT-2, BERT, mixture-of-experts, ...) have "
            "weights this encoder lacks; pre-train a BiphasicConfig model from scratch instead."
        )
    rope = copy.deepcopy(source.rope_parameters)
    if "rope_type" not in rope:
        raise ValueError(f"{model_type} uses per-layer RoPE parameters {rope}, which BiphasicEncoder cannot represent.")
    # A field the source leaves unset keeps our default (head_dim is derived), except special ids: None is the answer.
    fields = {name: getattr(source, name, None) for name in LLAMA_FIELDS}
    fields = {name: value for name, value in fields.items() if value is not None or name.endswith("token_id")}
    window = getattr(source, "sliding_window", None)
    if model_type == "qwen2" and not source.use_sliding_window:
        window = None
    if window is not None and window < fields["max_position_embeddings"]:
        logger.warning(f"{model_type} attends within a sliding window of {window}: converting with max_position_embeddings={window}.")
        fields["max_position_embeddings"] = window
    return BiphasicConfig(
        **fields,
        rope_parameters=rope,
        attention_bias=model_type == "qwen2" or getattr(source, "attention_bias", False),
        mlp_bias=getattr(source, "mlp_bias", False),
        mask_token_id=mask_token_id,
    )


class BiphasicEncoderForPreTraining(BiphasicLanguageModel):
    """CLM or MLM on the same weights and LM head; `objective` per call, else `config.objective`.

    Phase-scheduled training feeds both views in every batch (see DataCollatorForBiphasic): `input_ids`/`labels`
    (clean tokens, next-token labels) for CLM and `mlm_input_ids`/`mlm_labels` for MLM; the objective chosen in
    the main process (by PhaseScheduleCallback) picks one, so data-loader workers never need to know the phase.
    A single-view batch (just `input_ids`/`labels`) is used as it is by either objective.
    """

    # The loss is a per-batch mean: Trainer's `num_items_in_batch` counts `labels`, which in a two-view batch are
    # the CLM labels even in the MLM phase; Trainer then scales for gradient accumulation itself.
    accepts_loss_kwargs = False

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
        **kwargs,
    ) -> CausalLMOutput | MaskedLMOutput:
        objective = objective or self.config.objective
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}.")
        if objective == "mlm" and mlm_input_ids is not None:
            input_ids, labels = mlm_input_ids, mlm_labels
        loss, logits, outputs = self.language_model_loss(
            input_ids, labels, is_causal=objective == "clm", attention_mask=attention_mask,
            position_ids=position_ids, inputs_embeds=inputs_embeds, **kwargs,
        )
        output_class = CausalLMOutput if objective == "clm" else MaskedLMOutput
        return output_class(loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions)


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
        **kwargs,
    ) -> MaskedLMOutput:
        loss, logits, outputs = self.language_model_loss(
            input_ids, labels, is_causal=False, num_items_in_batch=num_items_in_batch, attention_mask=attention_mask,
            position_ids=position_ids, inputs_embeds=inputs_embeds, **kwargs,
        )
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions)


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
    eurobert_class = "EuroBertForSequenceClassification"

    def __init__(self, config: BiphasicConfig):
        super().__init__(config)
        self.model = BiphasicEncoder(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.GELU()
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, inputs_embeds=None, labels=None, token_type_ids=None, **kwargs):
        outputs = self.model(input_ids, attention_mask, position_ids=position_ids, inputs_embeds=inputs_embeds, **kwargs)
        pooled = pool(outputs.last_hidden_state, attention_mask, self.config.classifier_pooling)
        logits = self.classifier(self.activation(self.dense(pooled)))
        loss = self.loss_function(labels, logits, self.config) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions)


class BiphasicEncoderForTokenClassification(TokenClassificationMixin, BiphasicPreTrainedModel):
    _keys_to_ignore_on_load_unexpected = [r"^lm_head\."]
    _new_head_prefixes = ("classifier.",)
    eurobert_class = "EuroBertForTokenClassification"

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
    "BiphasicPreTrainedModel",
    "BiphasicEncoder",
    "BiphasicEncoderForPreTraining",
    "BiphasicEncoderForMaskedLM",
    "BiphasicEncoderForSequenceClassification",
    "BiphasicEncoderForTokenClassification",
    "BiphasicEncoderForQuestionAnswering",
]
