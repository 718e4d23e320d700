"""Batches for biphasic CLM -> MLM training, as a `DataCollatorForLanguageModeling`.

A phase schedule cannot tell the collator which phase it is in: with `dataloader_num_workers > 0` the collator
runs in worker processes that never see a flag flipped in the main process, and batches are collated ahead of
the step that uses them (worker prefetching, Trainer's gradient-accumulation prefetch). So by default the
collator builds BOTH views of every batch and the model, in the main process, uses the one its current
objective asks for (see `PhaseScheduleCallback`). Masking a batch costs little next to a training step.
"""

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from transformers import DataCollatorForLanguageModeling
from transformers.data.data_collator import pad_without_fast_tokenizer_warning

from ...data import index_tensors
from ...data.reproducible_masking import ReproducibleMaskingMixin, pad_like, take_word_starts
from ...models._shared.packed_sequences import ends_document
from ...models.biphasic.configuration_biphasic import OBJECTIVES


def next_token_labels(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor | None = None
) -> torch.Tensor:
    """labels[i] = input_ids[i + 1] where both positions are real tokens of one document, else -100.

    The one place biphasic CLM labels are shifted; the model never shifts again. Padding is read from the
    attention mask, not from pad_token_id: with pad = EOS the EOS ending each document must stay a target.
    Packed rows (`position_ids` restarting at 0) never predict a document's first token from the previous one.
    """
    labels = torch.full_like(input_ids, -100)
    real = attention_mask.bool()
    labels[:, :-1] = input_ids[:, 1:].masked_fill(~(real[:, :-1] & real[:, 1:]), -100)
    return labels if position_ids is None else labels.masked_fill(ends_document(position_ids), -100)


@dataclass
class DataCollatorForBiphasic(ReproducibleMaskingMixin, DataCollatorForLanguageModeling):
    """Pads examples (dicts with "input_ids", or lists of ids; packed fixed-size blocks need no padding) and builds:

    * `objective=None` (default, for `PhaseScheduleCallback`): `input_ids` (clean) and `labels` (next-token) for
      CLM, plus `mlm_input_ids` and `mlm_labels` for MLM, read by `BiphasicEncoderForPreTraining`;
    * `objective="clm"`: `input_ids` and next-token `labels`;
    * `objective="mlm"`: masked `input_ids` and `labels`, as the parent (for `BiphasicEncoderForMaskedLM`).

    MLM selects `mlm_probability` (the paper's 0.40) of the real, non-special tokens and by default replaces every
    one with the mask token, as the paper's code does; `mask_replace_prob` / `random_replace_prob` give the
    BERT-style split. A `special_tokens_mask` column (as packing writes) is honoured, else the tokenizer's special
    ids are never masked. `masking="whole_word"` or `"span"` masks whole words or SpanBERT spans (every one
    [MASK]ed, as the paper's code does), still `mlm_probability` of the tokens. Only PyTorch tensors are produced.
    Each view also gets its labelled positions as fixed-size index tensors (data/index_tensors.py: `labelled_*`, and
    `mlm_labelled_*` beside `mlm_labels`), which the model reads instead of counting on the device.
    """

    objective: str | None = None
    index_tensors: bool = True
    mlm_probability: float = 0.4  # the paper's default (it sweeps 20-50%)
    mask_replace_prob: float = 1.0
    random_replace_prob: float = 0.0

    def __post_init__(self):
        if self.objective is not None and self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be None (both views) or one of {OBJECTIVES}, got {self.objective!r}.")
        if self.return_tensors != "pt":
            raise ValueError(
                f"DataCollatorForBiphasic produces PyTorch tensors only; got return_tensors={self.return_tensors!r}."
            )
        if self.tokenizer.pad_token is None:
            raise ValueError(
                f"The tokenizer {type(self.tokenizer).__name__} has no pad token. Llama-style tokenizers pad with "
                "EOS (the paper's choice): tokenizer.pad_token = tokenizer.eos_token."
            )
        if self.objective != "clm" and self.tokenizer.mask_token is None:
            raise ValueError(
                f"The tokenizer {type(self.tokenizer).__name__} has no mask token, which the MLM phase needs. Add one "
                "with tokenizer.add_special_tokens({'mask_token': '<|mask|>'}) and resize the model's embeddings "
                "(hf_encoders.methods.biphasic.conversion.prepare_tokenizer adds it)."
            )
        self.mlm = self.objective != "clm"
        super().__post_init__()
        self.special_ids = torch.tensor(self.tokenizer.all_special_ids)

    def torch_call(self, examples: list[Mapping | list[int]]) -> dict[str, torch.Tensor]:
        examples = [example if isinstance(example, Mapping) else {"input_ids": example} for example in examples]
        examples, word_starts = take_word_starts(examples)
        batch = pad_without_fast_tokenizer_warning(
            self.tokenizer, examples, return_tensors="pt", pad_to_multiple_of=self.pad_to_multiple_of
        )
        special_tokens_mask = batch.pop("special_tokens_mask", None)
        offset_mapping = batch.pop("offset_mapping", None)
        input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
        if self.objective != "mlm":
            batch["labels"] = next_token_labels(input_ids, attention_mask, batch.get("position_ids"))
        if self.objective != "clm":
            # Vectorised special-token lookup (the parent's fallback is a Python loop per row); padding never counts.
            if special_tokens_mask is None:
                special_tokens_mask = torch.isin(input_ids, self.special_ids)
            never_masked = special_tokens_mask.bool() | ~attention_mask.bool()
            masked_ids, mlm_labels = self.torch_mask_tokens(
                input_ids.clone(),
                special_tokens_mask=never_masked,
                offset_mapping=offset_mapping,
                word_starts=pad_like(word_starts, input_ids, self.tokenizer.padding_side),
                position_ids=batch.get("position_ids"),
            )
            prefix = "" if self.objective == "mlm" else "mlm_"
            batch.update({prefix + "input_ids": masked_ids, prefix + "labels": mlm_labels})
            self.with_index_tensors(batch, labels=prefix + "labels", prefix=prefix)
        if self.objective != "mlm" and self.index_tensors:
            # Next-token labels cover every real token but the last of each document: every position is a slot.
            length = input_ids.shape[1]
            batch.update(index_tensors.labelled_index(batch["labels"], length))
        return batch
