"""TaCL: token-aware contrastive continual pre-training of any Transformers encoder (Su et al., 2022).

A student (the encoder with its own MLM head, and NSP head for BERT) keeps training on MLM (+ NSP) plus the
token-aware contrastive term of Eq. 1: the student's last-layer vector at each masked position must be closer,
in cosine similarity, to the teacher's vector at the same position of the CLEAN text than to the teacher's
vectors at the sequence's other positions. The teacher is a frozen copy of the student's encoder taken at
initialisation: always in eval mode, run without autograd, never seen by the optimizer.

This folder is flat on purpose: it is copied next to every checkpoint and must import nothing but torch,
transformers and its siblings (see hf_encoders/registration.py).
"""

import contextlib
import copy
from dataclasses import dataclass

import torch
import torch.utils.checkpoint
from torch import nn
from transformers import (
    AutoModelForMaskedLM,
    AutoModelForPreTraining,
    PreTrainedModel,
)
from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING
from transformers.utils import ModelOutput, logging

from .checkpoint_io import CheckpointMixin, check_encoder_weights, load_encoder_config, quiet_loading
from .configuration_tacl import TaclConfig
from .loss_utils import StandardLogitsOutsideTraining, check_labels_shape, labelled_rows_loss

logger = logging.get_logger(__name__)

# Above this many (anchor, position) scores a batch's contrast runs in chunks of anchors (16 MiB of fp32 scores).
CONTRAST_CHUNK_SCORES = 1 << 22


@torch.compiler.assume_constant_result  # torch 2.11's dynamo cannot trace it: a graph break at every contrast
def autocast_available(device_type: str) -> bool:
    return torch.amp.is_autocast_available(device_type)


def full_precision(device_type: str) -> contextlib.AbstractContextManager:
    """Autocast switched off, on a device that has it (bf16/fp16 training); nothing to switch off elsewhere."""
    return torch.autocast(device_type, enabled=False) if autocast_available(device_type) else contextlib.nullcontext()


def token_contrastive_loss(
    student_states: torch.Tensor,
    teacher_states: torch.Tensor,
    anchors: torch.Tensor,
    temperature: float,
    key_mask: torch.Tensor | None = None,
    anchor_count: int | None = None,
) -> torch.Tensor:
    """Eq. 1, averaged over anchors: -log softmax_j(cos(s_i, t_j) / τ)[j = i] for every anchor i.

    student_states, teacher_states: (batch, length, hidden); anchors: (batch, length) bool; key_mask:
    (batch, length) bool of the teacher positions allowed in the denominator (None: all of them). Negatives
    come from the anchor's own sequence only. Computed in fp32, with autocast (bf16/fp16 training) switched off
    here: with τ = 0.01 a cosine's rounding error is multiplied by 100, and bf16 resolves cosines near 1 only to
    ~0.004 (0.4 in the logits), so the similar states TaCL works on would be scored mostly by rounding noise.
    A batch without anchors gives 0. `anchor_count` (the number of anchors) spares the host a wait for the device
    when the caller has read it already; the anchors are gathered without a data-dependent shape otherwise.

    The (anchors, length) scores grow with the square of the length; past `CONTRAST_CHUNK_SCORES` of them (long
    sequences) `chunked_contrastive_loss` computes the same sum in chunks, keeping only its inputs for backward.
    """
    if anchor_count is None:
        anchor_count = int(anchors.sum())
    if anchor_count * anchors.shape[1] > CONTRAST_CHUNK_SCORES:
        return chunked_contrastive_loss(student_states, teacher_states, anchors, temperature, key_mask) / anchor_count
    # A stable sort on "not an anchor" lists the anchors first, in row-major order.
    flat = torch.argsort(~anchors.flatten(), stable=True)[:anchor_count]
    batch_index, position = flat // anchors.shape[1], flat % anchors.shape[1]
    with full_precision(student_states.device.type):
        student = nn.functional.normalize(student_states.float(), dim=-1)
        teacher = nn.functional.normalize(teacher_states.float(), dim=-1)
        # (anchors, length): each anchor's student vector against every teacher vector of its sequence. Only the
        # anchor rows are scored; the batched matmul keeps the teacher states unduplicated.
        scores = torch.bmm(student, teacher.transpose(1, 2))[batch_index, position] / temperature
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask[batch_index], float("-inf"))
    return nn.functional.cross_entropy(scores, position, reduction="sum") / max(anchor_count, 1)


def chunked_contrastive_loss(
    student_states: torch.Tensor,
    teacher_states: torch.Tensor,
    anchors: torch.Tensor,
    temperature: float,
    key_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """The SUM over anchors of `token_contrastive_loss`'s terms, with memory linear in the length: each row's anchors
    are listed first (padded to the row with most) and scored by `slotted_contrastive_loss`. One wait for the device
    (the most anchors in a row)."""
    most_in_a_row = int(anchors.sum(-1).max())
    # A stable sort on "not an anchor" lists each row's anchors first, in order.
    slots = torch.argsort(~anchors, dim=-1, stable=True)[:, :most_in_a_row]
    targets = slots.masked_fill(~anchors.gather(1, slots), -100)  # slots past a row's anchors score nothing
    return slotted_contrastive_loss(student_states, teacher_states, slots, targets, temperature, key_mask)


def slotted_contrastive_loss(
    student_states: torch.Tensor,
    teacher_states: torch.Tensor,
    slots: torch.Tensor,
    targets: torch.Tensor,
    temperature: float,
    key_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """The SUM over anchors of `token_contrastive_loss`'s terms, the anchors given per row: `slots` (rows, slots) their
    positions, `targets` the same with -100 at the slots past a row's anchors, which score nothing. Above
    `CONTRAST_CHUNK_SCORES` scores, chunks of slots across all rows are scored against their own row's teacher states
    under activation checkpointing, so no (anchors, length) score matrix is kept for backward and the one being
    computed holds at most about that many scores. Every size follows the shapes: nothing is read from the device."""
    rows, length = student_states.shape[:2]

    def chunk_loss(student, teacher, chunk_slots, chunk_targets):
        anchor_states = student.gather(1, chunk_slots[..., None].expand(-1, -1, student.shape[-1]))
        scores = torch.bmm(anchor_states, teacher.transpose(1, 2)) / temperature
        if key_mask is not None:
            # The lowest finite score rather than -inf: a padding slot of a row without real keys would give NaN
            # gradients even though its term is ignored.
            scores = scores.masked_fill(~key_mask[:, None, :], torch.finfo(scores.dtype).min)
        return nn.functional.cross_entropy(scores.flatten(0, 1), chunk_targets.flatten(), reduction="sum")

    with full_precision(student_states.device.type):
        student = nn.functional.normalize(student_states.float(), dim=-1)
        teacher = nn.functional.normalize(teacher_states.float(), dim=-1)
        chunk = max(1, CONTRAST_CHUNK_SCORES // (rows * length))
        if slots.shape[1] <= chunk:
            return chunk_loss(student, teacher, slots, targets)
        return sum(
            torch.utils.checkpoint.checkpoint(
                chunk_loss,
                student,
                teacher,
                slots[:, start : start + chunk],
                targets[:, start : start + chunk],
                use_reentrant=False,
            )
            for start in range(0, slots.shape[1], chunk)
        )


@dataclass
class TaclForPreTrainingOutput(ModelOutput):
    """
    loss: weighted sum of the three terms (Eq. 2), each a mean (over anchors, or over sequences for NSP).
    logits: MLM prediction scores, (batch, length, vocab) in eval and predict mode and without labels. In training
        with labels the vocabulary projection only runs at the anchors: (anchors, vocab) in row-major order, or
        None where it runs fused with the loss (see `labelled_rows_loss`); `model.compact_eval_logits = True` gives
        that compact form in eval too (`StandardLogitsOutsideTraining`).
    seq_relationship_logits: (batch, 2) NSP scores, when NSP is used.
    tacl_loss, mlm_loss, nsp_loss: the terms of Eq. 2 before weighting (nsp_loss is None when NSP is off).
    last_hidden_state: the student's last layer (batch, length, hidden).
    teacher_last_hidden_state: the teacher's last layer on the clean text, when labels are given.
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    seq_relationship_logits: torch.FloatTensor | None = None
    tacl_loss: torch.FloatTensor | None = None
    mlm_loss: torch.FloatTensor | None = None
    nsp_loss: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    teacher_last_hidden_state: torch.FloatTensor | None = None


def mlm_head_layout(student: PreTrainedModel) -> str:
    """How the student's MLM head is laid out, so it can run on the anchors' states alone."""
    if hasattr(student, "cls"):
        return "bert"  # cls.predictions (+ cls.seq_relationship): BERT and its relatives
    if hasattr(student, "head") and isinstance(getattr(student, "decoder", None), nn.Linear):
        return "modernbert"  # head (dense, act, norm) then decoder
    if hasattr(student, "lm_head") and not hasattr(student, "decoder"):
        return "lm_head"  # RoBERTa, XLM-R, EuroBERT, ...
    raise ValueError(
        f"TaCL contrasts the encoder's last hidden state at the masked positions and runs the MLM head on those "
        f"states; {type(student).__name__} has no head of a known layout (BERT's `cls`, ModernBERT's `head` + "
        "`decoder`, or an `lm_head` reading the encoder output). An encoder that drops masked tokens (MAE-LM) "
        "cannot be a TaCL student."
    )


def fresh_heads_warning(name_or_path, fresh: list[str]) -> str:
    """What starting `fresh` (missing non-encoder weights) from scratch means: which head, which loss at chance."""
    heads = {part: [] for part in ("MLM head", "NSP head", "pooler")}
    for key in fresh:
        heads["NSP head" if "seq_relationship" in key else "pooler" if "pooler." in key else "MLM head"].append(key)
    heads = {part: keys for part, keys in heads.items() if keys}
    # BERT's NSP head reads the pooler, so either one fresh puts NSP at chance.
    losses = [loss for loss, parts in (("MLM", {"MLM head"}), ("NSP", {"NSP head", "pooler"})) if parts & set(heads)]
    named = "; ".join(f"{part}: {keys[:4]}{' ...' if len(keys) > 4 else ''}" for part, keys in heads.items())
    return (
        f"{name_or_path} has no pretrained {' and '.join(heads)} ({named}): TaCL trains "
        f"{'them' if len(heads) > 1 else 'it'} from scratch, so the {' and '.join(losses)} loss starts at chance level."
    )


class TaclForPreTraining(CheckpointMixin, StandardLogitsOutsideTraining, PreTrainedModel):
    """Student + frozen teacher. Pass `student` to wrap an already loaded model (what `from_encoder` does);
    otherwise both are built from `config.student_config` (and filled by `from_pretrained`)."""

    config_class = TaclConfig
    supports_gradient_checkpointing = True
    # The student's attention implementation decides; these only let `from_pretrained` pass the choice on.
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    # The loss is a sum of per-batch means (anchors for TaCL and MLM, sequences for NSP), so Trainer must not
    # pass `num_items_in_batch`; it then divides the loss by the gradient-accumulation steps itself.
    accepts_loss_kwargs = False
    model_description = "a TaCL training state"
    # A re-initialised teacher is never acceptable, so `ignore_mismatched_sizes` does not apply.
    _allow_ignore_mismatched_sizes = False

    @classmethod
    def foreign_checkpoint_fix(cls, model_type: str) -> str:
        return (
            "to start TaCL from an encoder checkpoint use TaclForPreTraining.from_encoder; a checkpoint of another "
            "model loads with its own class (the Auto classes read config.json)"
        )

    @classmethod
    def misfit_fix(cls) -> str:
        return (
            "Check that it is a TaCL checkpoint and load it with the same configuration it was saved with. To start "
            "TaCL from a plain encoder checkpoint use TaclForPreTraining.from_encoder."
        )

    def after_strict_load(self) -> None:
        # Loading replaces the parameters, and the new ones require gradients again.
        self.teacher.requires_grad_(False)

    def __init__(self, config: TaclConfig, student: PreTrainedModel | None = None):
        super().__init__(config)
        if student is None:
            auto_class = AutoModelForPreTraining if config.use_nsp else AutoModelForMaskedLM
            student = auto_class.from_config(config.student_config)
        config.student_config = student.config
        self.head_layout = mlm_head_layout(student)
        if config.use_nsp and not hasattr(getattr(student, "cls", None), "seq_relationship"):
            raise ValueError(
                f"use_nsp=True but {type(student).__name__} has no NSP head; build it with AutoModelForPreTraining."
            )
        self.student = student
        self.teacher = copy.deepcopy(student.base_model)
        if getattr(self.teacher, "pooler", None) is not None:
            self.teacher.pooler = None  # the contrast reads token states only
        self.teacher.requires_grad_(False)
        self.teacher.eval()
        self.post_init()

    # The student's embeddings are the model's (what PEFT and accelerate's FSDP2 preparation look up).
    def get_input_embeddings(self) -> nn.Module:
        return self.student.get_input_embeddings()

    def get_output_embeddings(self) -> nn.Module | None:
        return self.student.get_output_embeddings()

    def resize_token_embeddings(self, *args, **kwargs):
        # transformers' resize would grow the student's vocabulary only, leaving the teacher unable to read new ids.
        raise ValueError(
            "TaCL's student and teacher must share one vocabulary, so a TaclForPreTraining is not resized. Add the "
            "tokens to the encoder first (AutoModelForMaskedLM.from_pretrained(...).resize_token_embeddings(n), "
            "save it), then start TaCL from it with TaclForPreTraining.from_encoder."
        )

    @classmethod
    def from_encoder(cls, name_or_path: str, **tacl_options) -> "TaclForPreTraining":
        """Student and teacher from one pretrained encoder checkpoint; `tacl_options` are `TaclConfig` fields.

        A checkpoint without an MLM (or NSP) head, such as a sentence-embedding BERT, gets a freshly initialised
        one and a warning. Any other missing, unexpected or mis-shaped encoder weight is an error.
        """
        student_config = load_encoder_config(
            name_or_path,
            "the folder of an encoder checkpoint (config.json + weights) or the Hub name of one (with network access, "
            "or already in the local cache)",
        )
        if type(student_config) not in MODEL_FOR_MASKED_LM_MAPPING:
            architectures = ", ".join(getattr(student_config, "architectures", None) or [])
            raise ValueError(
                f"{str(name_or_path)!r} is a {student_config.model_type!r} model ({architectures}) with no masked-LM "
                "form: TaCL continues an encoder pre-trained with MLM (BERT, RoBERTa, ModernBERT, ...). Pass such an "
                "encoder; to turn a Llama-family causal LM into an encoder use BiphasicEncoderForPreTraining.from_causal_lm."
            )
        config = cls.config_class(student_config=student_config, **tacl_options)
        auto_class = AutoModelForPreTraining if config.use_nsp else AutoModelForMaskedLM
        # transformers' loading report would repeat what is checked and said below.
        with quiet_loading():
            student, info = auto_class.from_pretrained(
                name_or_path, config=config.student_config, output_loading_info=True
            )
        # Heads and the pooler sit outside the encoder proper: a checkpoint may lack them or carry unused ones.
        # Keys come with or without the base model's prefix, depending on the checkpoint's own class.
        encoder_parts = tuple(f"{name}." for name, _ in student.base_model.named_children() if name != "pooler")

        def in_encoder(key: str) -> bool:
            return key.removeprefix(f"{student.base_model_prefix}.").startswith(encoder_parts)

        check_encoder_weights(name_or_path, student, info, in_encoder)
        fresh = sorted(key for key in info["missing_keys"] if not in_encoder(key))
        if fresh:
            logger.warning(fresh_heads_warning(name_or_path, fresh))
        return cls(config, student=student)

    def max_sequence_length(self) -> int | None:
        """The longest input the student's position embeddings cover; None for a student without the field.
        RoBERTa-style embeddings start counting positions after the padding index, so they cover fewer tokens."""
        limit = getattr(self.config.student_config, "max_position_embeddings", None)
        padding_idx = getattr(getattr(self.student.base_model, "embeddings", None), "padding_idx", None)
        if limit is not None and padding_idx is not None:
            limit -= padding_idx + 1
        return limit

    def train(self, mode: bool = True):
        # The teacher gives fixed targets: never dropout (the reference code left it in train mode).
        super().train(mode)
        self.teacher.eval()
        return self

    def mlm_head(self) -> tuple[nn.Module | None, nn.Module]:
        """The student's own MLM head as (transform, projection to the vocabulary), so that the training loss can
        fuse the projection with its cross-entropy. A RoBERTa-style `lm_head` keeps its last Linear inside its
        forward: there the whole head is the projection, and it runs unfused."""
        if self.head_layout == "bert":
            return self.student.cls.predictions.transform, self.student.cls.predictions.decoder
        if self.head_layout == "modernbert":
            return self.student.head, self.student.decoder
        return None, self.student.lm_head

    def mlm_logits(self, states: torch.Tensor) -> torch.Tensor:
        """The student's own MLM head on `states` (..., hidden)."""
        transform, projection = self.mlm_head()
        return projection(states if transform is None else transform(states))

    def save_student(self, save_directory, tokenizer=None, **save_kwargs) -> None:
        """Write the student, with its MLM head (and NSP head when present), as a plain checkpoint of its own
        model type (bert, roberta, modernbert, ...) that stock scripts fine-tune without trust_remote_code."""
        self.student.save_pretrained(save_directory, **save_kwargs)
        if tokenizer is not None:
            tokenizer.save_pretrained(save_directory)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        target_positions: torch.Tensor | None = None,
        target_mask: torch.Tensor | None = None,
    ) -> TaclForPreTrainingOutput:
        r"""
        labels: the MLM targets; positions with labels != -100 are the anchors (whatever the collator did to
            their input: [MASK], random or unchanged). The teacher reads the clean text, rebuilt as labels at the
            anchors and input_ids elsewhere, so the output of any MLM collator works.
        next_sentence_label: 0 when segment B follows A, 1 when B is random (needed when `config.use_nsp`).
        target_positions, target_mask: the anchors as fixed-size index tensors (hf_encoders/data/index_tensors.py,
            which `DataCollatorForTacl` writes): the forward then reads nothing back from the device. Without them it
            counts the anchors on the device and reads the count, once per step. The same loss either way.
        """
        limit = self.max_sequence_length()
        if limit is not None and input_ids.shape[1] > limit:
            raise ValueError(
                f"Sequence length {input_ids.shape[1]} exceeds the {self.config.student_config.model_type} student's "
                f"position table (max_position_embeddings={self.config.student_config.max_position_embeddings}: at most "
                f"{limit} tokens); truncate the input (build_sentence_pairs(..., max_length={limit}) or "
                f"tokenizer(..., truncation=True, max_length={limit}))."
            )
        encoder_inputs = {"attention_mask": attention_mask}
        if token_type_ids is not None:  # only BERT-style encoders take segment ids
            encoder_inputs["token_type_ids"] = token_type_ids
        encoded = self.student.base_model(input_ids=input_ids, **encoder_inputs)
        states = encoded.last_hidden_state
        seq_relationship_logits = (
            self.student.cls.seq_relationship(encoded.pooler_output) if self.config.use_nsp else None
        )
        if labels is None:
            return TaclForPreTrainingOutput(
                logits=self.mlm_logits(states),
                seq_relationship_logits=seq_relationship_logits,
                last_hidden_state=states,
            )
        check_labels_shape(labels, input_ids.shape, "DataCollatorForTacl")
        if self.config.use_nsp and next_sentence_label is None:
            raise ValueError(
                "use_nsp=True needs next_sentence_label: feed sentence pairs through DataCollatorForTacl, "
                "or build the model with use_nsp=False."
            )

        anchors = labels != -100
        # Without index tensors, the one wait for the device per step (and the one graph break under torch.compile):
        # the anchor count, which the contrastive and MLM losses' shapes follow.
        anchor_count = int(anchors.sum().tolist()) if target_positions is None else None
        with torch.no_grad():
            clean_ids = torch.where(anchors, labels, input_ids)
            teacher_states = self.teacher(input_ids=clean_ids, **encoder_inputs).last_hidden_state
        key_mask = None
        if self.config.exclude_padding_from_contrast and attention_mask is not None:
            key_mask = attention_mask.bool()
        if target_positions is None:
            tacl_loss = token_contrastive_loss(
                states, teacher_states, anchors, self.config.temperature, key_mask, anchor_count=anchor_count
            )
        else:
            targets = target_positions.masked_fill(~target_mask.bool(), -100)
            tacl_loss = slotted_contrastive_loss(
                states, teacher_states, target_positions, targets, self.config.temperature, key_mask
            ) / target_mask.sum().clamp(min=1)

        transform, projection = self.mlm_head()
        mlm_loss, logits = labelled_rows_loss(
            projection,
            states,
            labels,
            transform=transform,
            labelled_count=anchor_count,
            all_positions=self.logits_at_all_positions(),
            target_positions=target_positions,
            target_mask=target_mask,
        )
        loss = self.config.tacl_loss_weight * tacl_loss + self.config.mlm_loss_weight * mlm_loss
        nsp_loss = None
        if self.config.use_nsp:
            nsp_loss = nn.functional.cross_entropy(seq_relationship_logits.float(), next_sentence_label.view(-1))
            loss = loss + self.config.nsp_loss_weight * nsp_loss
        return TaclForPreTrainingOutput(
            loss=loss,
            logits=logits,
            seq_relationship_logits=seq_relationship_logits,
            tacl_loss=tacl_loss,
            mlm_loss=mlm_loss,
            nsp_loss=nsp_loss,
            last_hidden_state=states,
            teacher_last_hidden_state=teacher_states,
        )


__all__ = ["TaclForPreTraining", "TaclForPreTrainingOutput", "token_contrastive_loss"]
