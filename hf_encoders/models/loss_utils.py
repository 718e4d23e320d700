"""The masked/causal LM loss and the input checks every model family of hf-encoders shares.

Like checkpoint_io.py, this file is symlinked into each flat model folder and copied into every checkpoint.
"""

from collections.abc import Callable

import torch
from torch import nn

TRUNCATE = "truncate the input (e.g. tokenizer(..., truncation=True, max_length=...))"


def labelled_rows_loss(
    project: Callable[[torch.Tensor], torch.Tensor],
    hidden_states: torch.Tensor,
    labels: torch.Tensor,
    num_items_in_batch: torch.Tensor | int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, logits) with the vocabulary projection `project` run on the labelled positions only (labels != -100):
    `logits` is (number of labelled positions, vocab) in row-major order.

    The cross-entropy is summed in fp32 and divided by Trainer's `num_items_in_batch` when given (it counts the
    targets across gradient-accumulation steps), else by this batch's labelled count, clamped so that a batch
    without targets gives 0 rather than NaN.
    """
    labelled = labels != -100
    logits = project(hidden_states[labelled])
    loss = nn.functional.cross_entropy(logits.float(), labels[labelled], reduction="sum")
    denominator = num_items_in_batch if num_items_in_batch is not None else labelled.sum().clamp(min=1)
    return loss / denominator, logits


def check_labels_shape(labels: torch.Tensor, input_shape: torch.Size, collator: str) -> None:
    """One target per input position (-100 where there is none), as the family's collator builds them."""
    if labels.shape != input_shape:
        raise ValueError(
            f"labels must have the shape of the input (batch, length) = {tuple(input_shape)}, got "
            f"{tuple(labels.shape)}: one target per position (-100 where there is none), as {collator} builds them."
        )


def check_sequence_length(length: int, max_position_embeddings: int, fix: str = TRUNCATE) -> None:
    """A position table cannot index past its end: say so before an index error deep inside the embedding."""
    if length > max_position_embeddings:
        raise ValueError(f"Sequence length {length} exceeds max_position_embeddings={max_position_embeddings}; {fix}.")
