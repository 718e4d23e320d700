"""Masks a resumed run draws exactly as the uninterrupted run did.

A collator with `seed` set masks each batch with a generator seeded from (seed, epoch, the batch's token ids):
the masks are a pure function of what is being masked. One generator carried through the run cannot give that:
Trainer 5.23 collates the first batch of a resumed run before it restores the RNG state, accelerate's loader
collates one batch ahead of training, and dataloader workers each mask with their own copy of the collator, so
no single generator state is "the state at the checkpoint". Masking stays dynamic across epochs through
`epoch`, which `MaskingEpochCallback` advances (before each epoch's loader, hence its workers, is created).
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch
from transformers import DataCollatorForLanguageModeling
from transformers.data.data_collator import pad_without_fast_tokenizer_warning, to_numpy

from . import index_tensors, masking_units

# The key of a batch masked at every rate of a schedule: {rate: the batch masked at that rate}.
BATCHES_BY_MLM_PROBABILITY = "batches_by_mlm_probability"


def batch_seed(seed: int, epoch: int, input_ids: torch.Tensor) -> int:
    digest = hashlib.blake2b(
        input_ids.cpu().contiguous().numpy().tobytes(), digest_size=8, key=f"{seed}:{epoch}".encode()
    )
    return int.from_bytes(digest.digest(), "little") >> 1  # manual_seed takes a non-negative int64


@dataclass
class ReproducibleMaskingMixin:
    """Put before `DataCollatorForLanguageModeling` in the bases; takes effect when `seed` is set.

    Also the masking unit (data/masking_units.py): `masking="token"` (the default), `"whole_word"` and `"span"`
    (which read word boundaries from a `word_starts` column or, as transformers' own `whole_word_mask=True` does, from
    `offset_mapping`), the replacement ([MASK], random, unchanged) chosen once per unit; `whole_word_mask=True` means
    `masking="whole_word"`. And how many tokens a row masks: `mask_count="exact"` (the default) masks
    floor(mlm_probability x maskable tokens + u) per row, u uniform in [0, 1) and drawn from the seeded generator;
    `"per_token"` draws a coin per token (per word), as the parent does: with `masking="token"` it is the parent's
    masking.
    """

    masking: str | None = None  # None: "token", or "whole_word" with whole_word_mask=True
    mask_count: str = "exact"
    # Whether batches carry the fixed-size index tensors of data/index_tensors.py: the method collators' models read
    # them; stock models (the MLM baseline's BertForMaskedLM) would not accept them.
    index_tensors: bool = False
    max_span_length: int = 10  # SpanBERT's cap, in words
    span_geometric_p: float = 0.2  # SpanBERT's p: mean span 3.8 words

    epoch = 0
    # A masking-rate schedule's rates (training/schedules.py): each batch is masked at every one of them, and the
    # trainer keeps the masks of the rate of the step it trains the batch in. None: `mlm_probability` alone.
    mlm_probabilities: tuple[float, ...] | None = None

    def __post_init__(self):
        self.masking = check_masking(self, self.masking)
        # Ours masks the words (and keeps the replacement split, which the parent would force to all [MASK]).
        self.whole_word_mask = False
        super().__post_init__()

    def __call__(self, features, return_tensors=None):
        if not self.mlm_probabilities:
            return super().__call__(features, return_tensors)
        rate = self.mlm_probability
        try:
            masked = {}
            for scheduled in self.mlm_probabilities:
                self.mlm_probability = scheduled
                masked[scheduled] = super().__call__(features, return_tensors)
        finally:
            self.mlm_probability = rate
        return {BATCHES_BY_MLM_PROBABILITY: masked}

    def reseed(self, inputs: torch.Tensor) -> None:
        """Seed `self.generator` for this batch. A collator that overrides `torch_mask_tokens` calls it first and
        draws every random number from `self.generator`."""
        if self.seed is not None:
            self.generator = torch.Generator().manual_seed(batch_seed(self.seed, self.epoch, inputs))

    def counts_exactly(self) -> bool:
        """Whether each row masks an exact count: with `mask_count="exact"`, and with spans, which always do."""
        return self.mask_count == "exact" or self.masking == "span"

    def uses_parent_masking(self) -> bool:
        return self.masking == "token" and self.mask_count == "per_token"

    def torch_call(self, examples):
        examples, word_starts = take_word_starts(examples)
        if self.masking == "token" or not self.mlm:  # the parent pads and calls torch_mask_tokens
            return self.with_index_tensors(super().torch_call(examples))
        batch = pad_without_fast_tokenizer_warning(
            self.tokenizer, examples, return_tensors="pt", pad_to_multiple_of=self.pad_to_multiple_of
        )
        special_tokens_mask = batch.pop("special_tokens_mask", None)
        offset_mapping = batch.pop("offset_mapping", None)
        batch["input_ids"], batch["labels"] = self.torch_mask_tokens(
            batch["input_ids"],
            special_tokens_mask=special_tokens_mask,
            offset_mapping=offset_mapping,
            word_starts=pad_like(word_starts, batch["input_ids"], self.tokenizer.padding_side),
            position_ids=batch.get("position_ids"),
        )
        return self.with_index_tensors(batch)

    def with_index_tensors(self, batch, labels: str = "labels", prefix: str = ""):
        """`batch` with the labelled positions of `batch[labels]` (data/index_tensors.py) under `prefix`-ed names,
        where this collator makes them."""
        if not (self.index_tensors and self.mlm):
            return batch
        index_tensors.check_positions(batch)
        slots = index_tensors.labelled_slots(batch[labels].shape[1], self.mlm_probability, self.counts_exactly())
        tensors = index_tensors.labelled_index(batch[labels], slots)
        batch.update({prefix + name: tensor for name, tensor in tensors.items()})
        return batch

    def torch_mask_tokens(
        self, inputs, special_tokens_mask=None, offset_mapping=None, word_starts=None, position_ids=None
    ):
        self.reseed(inputs)
        if self.uses_parent_masking():
            return super().torch_mask_tokens(
                inputs, special_tokens_mask=special_tokens_mask, offset_mapping=offset_mapping
            )
        if special_tokens_mask is None:
            special_tokens_mask = torch.isin(inputs, torch.tensor(self.tokenizer.all_special_ids))
        maskable = ~special_tokens_mask.bool()
        if self.masking == "token":
            masked = masking_units.choose_exact(maskable, self.mlm_probability, self.generator)
            return self.replace_units(inputs, masked, torch.arange(inputs.shape[1]).expand_as(inputs))
        if word_starts is None:
            word_starts = offsets_word_starts(offset_mapping, special_tokens_mask, self.masking)
        starts = masking_units.word_starts_in(word_starts, maskable, position_ids)
        if self.masking == "whole_word":
            choose = masking_units.exact_whole_words if self.mask_count == "exact" else masking_units.whole_words
            masked = choose(starts, maskable, self.mlm_probability, self.generator)
            unit_starts = starts
        else:
            masked, unit_starts = masking_units.spans(
                starts,
                maskable,
                self.mlm_probability,
                self.generator,
                p=self.span_geometric_p,
                max_span_length=self.max_span_length,
                position_ids=position_ids,
            )
        return self.replace_units(inputs, masked, masking_units.unit_index(unit_starts))

    def replace_units(self, inputs: torch.Tensor, masked: torch.Tensor, units: torch.Tensor):
        """The parent's 80/10/10 (or the collator's split), decided once per unit (`units`: each position's unit's
        first position)."""
        labels = inputs.masked_fill(~masked, -100)
        draws = torch.rand(inputs.shape, generator=self.generator).gather(1, units)
        replaced = masked & (draws < self.mask_replace_prob)
        randomised = masked & ~replaced & (draws < self.mask_replace_prob + self.random_replace_prob)
        inputs = inputs.masked_fill(replaced, self.tokenizer.mask_token_id)
        random_words = torch.randint(len(self.tokenizer), inputs.shape, generator=self.generator)
        return torch.where(randomised, random_words, inputs), labels


@dataclass
class ReproducibleDataCollatorForLanguageModeling(ReproducibleMaskingMixin, DataCollatorForLanguageModeling):
    """The stock BERT collator (80/10/10) with reproducible masks, for the plain MLM baseline."""


def check_masking(collator, masking: str | None) -> str:
    """The masking unit `masking` and transformers' `whole_word_mask` ask for together, or a ValueError naming the fix."""
    if collator.whole_word_mask:
        if masking not in (None, "whole_word"):
            raise ValueError(
                f"whole_word_mask=True asks for whole words but masking={masking!r} for another unit; pass one of "
                "them (whole_word_mask=True means masking='whole_word')."
            )
        masking = "whole_word"
    if collator.mask_count not in masking_units.MASK_COUNTS:
        raise ValueError(
            f"Unknown mask_count {collator.mask_count!r}; choose one of {', '.join(masking_units.MASK_COUNTS)}."
        )
    masking = masking or "token"
    if masking not in masking_units.MASKING_UNITS:
        raise ValueError(f"Unknown masking {masking!r}; choose one of {', '.join(masking_units.MASKING_UNITS)}.")
    if masking == "token" and collator.mask_count == "per_token":
        return masking
    if collator.return_tensors != "pt":
        raise ValueError(
            f"masking={masking!r} with mask_count={collator.mask_count!r} produces PyTorch tensors only; pass "
            "return_tensors='pt', or mask_count='per_token' for masking='token'."
        )
    if masking == "token":
        return masking
    if not collator.tokenizer.is_fast:
        raise ValueError(
            f"masking={masking!r} reads word boundaries from a fast tokenizer's word ids, which "
            f"{type(collator.tokenizer).__name__} (a slow tokenizer) has none of; load the tokenizer with "
            "AutoTokenizer.from_pretrained(name) (fast by default, use_fast=True), or use masking='token'."
        )
    if masking == "span":
        if collator.max_span_length < 1:
            raise ValueError(f"max_span_length must be at least 1 word, got {collator.max_span_length}.")
        if not 0 < collator.span_geometric_p <= 1:
            raise ValueError(f"span_geometric_p must lie in (0, 1], got {collator.span_geometric_p}.")
    return masking


def take_word_starts(examples: list[Mapping]) -> tuple[list[Mapping], list | None]:
    """Examples without their `word_starts` column (the tokenizer cannot pad it), and the column."""
    if not isinstance(examples[0], Mapping) or "word_starts" not in examples[0]:
        return examples, None
    rest = [{key: value for key, value in example.items() if key != "word_starts"} for example in examples]
    return rest, [list(example["word_starts"]) for example in examples]


def pad_like(word_starts: list | None, input_ids: torch.Tensor, padding_side: str) -> torch.Tensor | None:
    if word_starts is None:
        return None
    padded = torch.zeros(input_ids.shape, dtype=torch.bool)
    for row, starts in enumerate(word_starts):
        if padding_side == "left":
            padded[row, input_ids.shape[1] - len(starts) :] = torch.tensor(starts, dtype=torch.bool)
        else:
            padded[row, : len(starts)] = torch.tensor(starts, dtype=torch.bool)
    return padded


def offsets_word_starts(offset_mapping, special_tokens_mask, masking: str) -> torch.Tensor:
    """Word starts from `offset_mapping`, transformers' way (a token starts a word when it does not touch the
    previous one), for features made as `whole_word_mask=True` expects them."""
    if offset_mapping is None:
        raise ValueError(
            f"masking={masking!r} needs word boundaries in the features: a `word_starts` column (as "
            "hf_encoders.data.tokenize_documents(..., word_starts=True), the packing functions and "
            "build_sentence_pairs(..., word_starts=True) write, or hf_encoders.data.word_start_mask(encoding.word_ids(i)) "
            "per example) or `offset_mapping` (tokenizer(..., return_offsets_mapping=True)). With your own Trainer, "
            "pass remove_unused_columns=False so that the column reaches the collator."
        )
    _, continues_word = DataCollatorForLanguageModeling._calc_word_ids_and_prob_mask(
        to_numpy(offset_mapping), to_numpy(special_tokens_mask)
    )
    return torch.from_numpy(~continues_word)


@dataclass
class MethodMaskingCollator(ReproducibleDataCollatorForLanguageModeling):
    """A pre-training method's masked-LM collator: refuses, when built, what could only fail mid-run, and writes the
    fixed-size index tensors its model reads (data/index_tensors.py; `index_tensors=False` leaves them out)."""

    method_title: ClassVar[str]  # completes "..., which MAE-LM needs"
    missing_mask_token_fix: ClassVar[str]
    index_tensors: bool = True

    def __post_init__(self):
        if not self.mlm:
            raise ValueError(f"{type(self).__name__} is a masked-LM collator; it cannot run with mlm=False.")
        if self.tokenizer.mask_token is None:
            raise ValueError(
                f"The tokenizer {type(self.tokenizer).__name__} has no mask token, which {self.method_title} needs: "
                f"{self.missing_mask_token_fix}"
            )
        super().__post_init__()
