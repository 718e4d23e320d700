"""Masks a resumed run draws exactly as the uninterrupted run did.

A collator with `seed` set masks each batch with a generator seeded from (seed, epoch, the batch's token ids):
the masks are a pure function of what is being masked. One generator carried through the run cannot give that:
Trainer 5.23 collates the first batch of a resumed run before it restores the RNG state, accelerate's loader
collates one batch ahead of training, and dataloader workers each mask with their own copy of the collator, so
no single generator state is "the state at the checkpoint". Masking stays dynamic across epochs through
`epoch`, which `MaskingEpochCallback` advances (before each epoch's loader, hence its workers, is created).
"""

import hashlib
from dataclasses import dataclass
from typing import ClassVar

import torch
from transformers import DataCollatorForLanguageModeling


def batch_seed(seed: int, epoch: int, input_ids: torch.Tensor) -> int:
    digest = hashlib.blake2b(
        input_ids.cpu().contiguous().numpy().tobytes(), digest_size=8, key=f"{seed}:{epoch}".encode()
    )
    return int.from_bytes(digest.digest(), "little") >> 1  # manual_seed takes a non-negative int64


class ReproducibleMaskingMixin:
    """Put before `DataCollatorForLanguageModeling` in the bases; takes effect when `seed` is set."""

    epoch = 0

    def reseed(self, inputs: torch.Tensor) -> None:
        """Seed `self.generator` for this batch. A collator that overrides `torch_mask_tokens` calls it first and
        draws every random number from `self.generator`."""
        if self.seed is not None:
            self.generator = torch.Generator().manual_seed(batch_seed(self.seed, self.epoch, inputs))

    def torch_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
        self.reseed(inputs)
        return super().torch_mask_tokens(inputs, special_tokens_mask=special_tokens_mask, offset_mapping=offset_mapping)


class ReproducibleDataCollatorForLanguageModeling(ReproducibleMaskingMixin, DataCollatorForLanguageModeling):
    """The stock BERT collator (80/10/10) with reproducible masks, for the plain MLM baseline."""


@dataclass
class MethodMaskingCollator(ReproducibleDataCollatorForLanguageModeling):
    """A pre-training method's masked-LM collator: refuses, when built, what could only fail mid-run."""

    method_title: ClassVar[str]  # completes "..., which MAE-LM needs"
    missing_mask_token_fix: ClassVar[str]

    def __post_init__(self):
        if not self.mlm:
            raise ValueError(f"{type(self).__name__} is a masked-LM collator; it cannot run with mlm=False.")
        if self.tokenizer.mask_token is None:
            raise ValueError(
                f"The tokenizer {type(self.tokenizer).__name__} has no mask token, which {self.method_title} needs: "
                f"{self.missing_mask_token_fix}"
            )
        super().__post_init__()
