"""The integer index tensors a training forward reads instead of sizes it would wait for the device to count.

A collator knows on the host where it put every mask. It passes that on as index tensors whose sizes follow the batch
shape and the masking rate only, with a validity mask where a row holds fewer: a forward then gathers with them, no
`.item()`, `nonzero`, boolean indexing or sync, and under torch.compile the step is one graph for every batch.

* `target_positions` / `target_mask`, (batch, slots): each row's labelled positions in order, then filler slots
  (`target_mask` 0) at positions whose label the loss ignores. With exact mask counts
  (data/masking_units.py) a row labels at most ceil(rate x length) tokens, so that many slots always suffice.
* MAE-LM's `kept_positions` / `kept_mask`, (batch, kept slots): the positions the encoder reads, in order, then
  filler slots; `restore_index`, (batch, length): for every kept position, its slot (0 elsewhere), to put the
  encoder's states back in place.

A batch whose rows hold more than the planned slots (per-token coins, unusual rows) gets more, rounded up to a
multiple of 8: it still reads nothing from the device, and under torch.compile it compiles once more. Batches without
these tensors (a stock collator's) take the models' other path, which counts on the device and reads the count.
"""

import math

import torch

from ..models._shared.loss_utils import first_positions, restore_index
from ..models._shared.packed_sequences import check_packed_positions

LABELLED = ("target_positions", "target_mask")
KEPT = ("kept_positions", "kept_mask", "restore_index")
SLOT_MULTIPLE = 8


def planned_positions(chosen: torch.Tensor, slots: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`first_positions` with `slots` grown (rounded up to `SLOT_MULTIPLE`, at most the length) where a row holds
    more chosen positions: read on the host, where the collator's tensors are."""
    most = int(chosen.sum(1).max()) if len(chosen) else 0
    if most > slots:
        slots = math.ceil(most / SLOT_MULTIPLE) * SLOT_MULTIPLE
    return first_positions(chosen, min(slots, chosen.shape[1]))


def labelled_slots(length: int, rate: float, exact: bool) -> int:
    """Slots for the labelled positions of a row of `length`: ceil(rate x length) with exact counts, else all."""
    return math.ceil(rate * length) if exact else length


def labelled_index(labels: torch.Tensor, slots: int) -> dict[str, torch.Tensor]:
    positions, mask = planned_positions(labels != -100, slots)
    return dict(zip(LABELLED, (positions, mask)))


def kept_slots(length: int, rate: float, in_encoder_fraction: float) -> int:
    """Slots for MAE-LM's kept positions in a full row of `length` holding its two special tokens ([CLS], [SEP]).

    m = floor(rate (L - 2) + u) tokens are masked, floor(δ m + u') of them stay, so the encoder reads fewer than
    L - rate (1 - δ) (L - 2) + 2 tokens; a row with padding reads fewer still. Rounded up to a multiple of 8."""
    bound = length - rate * (1 - in_encoder_fraction) * (length - 2) + 2
    return min(length, math.ceil(bound / SLOT_MULTIPLE) * SLOT_MULTIPLE)


def kept_index(keep: torch.Tensor, slots: int) -> dict[str, torch.Tensor]:
    positions, mask = planned_positions(keep, slots)
    return dict(zip(KEPT, (positions, mask, restore_index(keep, positions))))


def check_positions(batch) -> None:
    """The packed-position check a forward given these tensors skips, run here on the host, where it waits for
    nothing (see packed_sequences.check_packed_positions)."""
    if batch.get("position_ids") is not None:
        check_packed_positions(batch["position_ids"], batch.get("attention_mask"))
