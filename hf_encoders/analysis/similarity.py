"""Token self-similarity, TaCL Eq. 3: how alike the tokens of one sequence look to the model.

    s(x) = 1 / (n (n - 1)) * sum_{i != j} cosine(h_i, h_j)

With unit vectors u_i = h_i / |h_i|, the sum over ordered pairs i != j is |sum_i u_i|^2 - n, so s(x)
costs one sum over the sequence instead of an n x n matrix. Every function here takes
`hidden_states` of shape (..., batch, seq, hidden) and a (batch, seq) mask of the tokens to count:
leading dimensions (e.g. one per layer) come back as leading dimensions of the result.
"""

import torch
import torch.nn.functional as F


def similarity_matrix(token_vectors: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every pair of tokens of one sequence, (seq, hidden) -> (seq, seq): TaCL Fig. 3."""
    unit = F.normalize(token_vectors.double(), dim=-1)
    return unit @ unit.mT


def unit_vector_sums(hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sequence: the sum of its counted tokens' unit vectors (..., batch, hidden) and their number (batch,)."""
    mask = attention_mask.to(device=hidden_states.device, dtype=torch.float64)
    unit = F.normalize(hidden_states.double(), dim=-1)
    return (unit * mask[..., None]).sum(dim=-2), mask.sum(dim=-1)


def sequence_self_similarity(hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """s(x) of every sequence, shape (..., batch); NaN for a sequence with fewer than two tokens (no pairs)."""
    sums, counts = unit_vector_sums(hidden_states, attention_mask)
    pairs = counts * (counts - 1)
    return (sums.square().sum(dim=-1) - counts) / pairs.where(pairs > 0, torch.nan)


def self_similarity(hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of s(x) over the sequences that have at least two tokens, shape (...): TaCL Fig. 2."""
    return sequence_self_similarity(hidden_states, attention_mask).nanmean(dim=-1)


class SelfSimilarityMean:
    """Streams `self_similarity` over batches: a running mean of s(x) over every sequence seen."""

    def __init__(self) -> None:
        self.total = torch.zeros(())
        self.sequences = 0

    def update(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> None:
        per_sequence = sequence_self_similarity(hidden_states, attention_mask)
        self.total = self.total + per_sequence.nansum(dim=-1)
        # Every leading slice (layer) has the same mask, hence the same sequences with pairs.
        self.sequences += int((attention_mask.sum(dim=-1) > 1).sum())

    def value(self) -> torch.Tensor:
        return self.total / self.sequences
