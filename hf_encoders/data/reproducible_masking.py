"""Masks a resumed run draws exactly as the uninterrupted run did.

A collator with `seed` set masks each batch with a generator seeded from (seed, epoch, the batch's token ids):
the masks are a pure function of what is being masked. One generator carried through the run cannot give that:
Trainer 5.23 collates the first batch of a resumed run before it restores the RNG state, accelerate's loader
collates one batch ahead of training, and dataloader workers each mask with their own copy of the collator, so
no single generator state is "the state at the checkpoint". Masking stays dynamic across epochs through
`epoch`, which `MaskingEpochCallback` advances (before each epoch's loader, hence its workers, is created).
"""

import hashlib

import torch
from transformers import DataCollatorForLanguageModeling, TrainerCallback


def batch_seed(seed: int, epoch: int, input_ids: torch.Tensor) -> int:
    digest = hashlib.blake2b(
        input_ids.cpu().contiguous().numpy().tobytes(), digest_size=8, key=f"{seed}:{epoch}".encode()
    )
    return int.from_bytes(digest.digest(), "little") >> 1  # manual_seed takes a non-negative int64


class ReproducibleMaskingMixin:
    """Put before `DataCollatorForLanguageModeling` in the bases; takes effect when `seed` is set."""

    epoch = 0

    def torch_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
        if self.seed is not None:
            self.generator = torch.Generator().manual_seed(batch_seed(self.seed, self.epoch, inputs))
        return super().torch_mask_tokens(inputs, special_tokens_mask=special_tokens_mask, offset_mapping=offset_mapping)


class ReproducibleDataCollatorForLanguageModeling(ReproducibleMaskingMixin, DataCollatorForLanguageModeling):
    """The stock BERT collator (80/10/10) with reproducible masks, for the plain MLM baseline."""


class MaskingEpochCallback(TrainerCallback):
    """Tells a reproducible collator which epoch it is masking, so each epoch draws fresh masks."""

    def __init__(self, collator: ReproducibleMaskingMixin):
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        # state.epoch is the float count of completed epochs (restored from the checkpoint on resume).
        self.collator.epoch = int(state.epoch + 1e-9) if state.epoch else 0
