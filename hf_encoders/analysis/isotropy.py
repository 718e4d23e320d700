"""Isotropy: the mean cosine between two tokens drawn from different sentences (Ethayarajh, 2019).

Near 0, representations spread in every direction; near 1 they crowd into a narrow cone, and a high
self-similarity (TaCL Eq. 3) says little about context until it is read against this baseline.

The mean runs over every pair of tokens from different sentences, so it needs no sampling: with u
the unit vectors, the cosines of all ordered pairs sum to |sum u|^2, those within sentence s to
|sum_{u in s} u|^2, and the cross-sentence ones are the difference. A corpus of any size streams
through a hidden-sized vector and three numbers per layer.
"""

import torch

from .similarity import unit_vector_sums


class IsotropyMean:
    """Streams the mean cross-sentence cosine over batches of (..., batch, seq, hidden) hidden states."""

    def __init__(self) -> None:
        self.unit_sum = torch.zeros(())  # sum of every counted unit vector, (..., hidden)
        self.within_sentence = torch.zeros(())  # sum over sentences of |their unit-vector sum|^2, (...)
        self.tokens = 0
        self.within_sentence_pairs = 0  # ordered pairs, the diagonal included

    def update(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> None:
        sums, counts = unit_vector_sums(hidden_states, attention_mask)
        self.unit_sum = self.unit_sum + sums.sum(dim=-2)
        self.within_sentence = self.within_sentence + sums.square().sum(dim=(-2, -1))
        self.tokens += int(counts.sum())
        self.within_sentence_pairs += int(counts.square().sum())

    def value(self) -> torch.Tensor:
        cross_sentence = self.unit_sum.square().sum(dim=-1) - self.within_sentence
        return cross_sentence / (self.tokens**2 - self.within_sentence_pairs)


def isotropy(hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean cosine over all pairs of counted tokens from different sequences of the batch, shape (...)."""
    mean = IsotropyMean()
    mean.update(hidden_states, attention_mask)
    return mean.value()
