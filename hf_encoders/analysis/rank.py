"""The tau-effective rank of a representation matrix, MAE-LM Sec. 2.2 (after Cai et al., 2021).

    rank_tau(H) = min k such that sigma_1^2 + ... + sigma_k^2 >= tau * (sigma_1^2 + ... + sigma_d^2)

with sigma_i the singular values of H (n tokens x d dimensions), largest first. Like the paper, H is
NOT centered: the rank counts the directions that carry the representations' energy, the mean
direction included.

A corpus never needs H in memory: the eigenvalues of the Gram matrix G = H^T H (d x d) are exactly
the sigma_i^2, and G is a sum over tokens, so it accumulates batch by batch in float64.
"""

import torch


def rank_from_squared_singular_values(squared_singular_values: torch.Tensor, threshold: float) -> torch.Tensor:
    """The smallest k whose k largest values hold `threshold` of the total, over the last dimension."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must lie in (0, 1], got {threshold}.")
    # eigvalsh of a rank-deficient Gram matrix returns tiny negative values; they hold no energy.
    energies = squared_singular_values.double().clamp(min=0).sort(dim=-1, descending=True).values
    cumulative = energies.cumsum(dim=-1)
    needed = threshold * cumulative[..., -1:]
    # k - 1 is the index of the first prefix sum that reaches the target (the full sum always does,
    # as threshold <= 1). An all-zero matrix has rank 0.
    k = torch.searchsorted(cumulative, needed).squeeze(-1) + 1
    return k.where(cumulative[..., -1] > 0, 0)


def effective_rank(matrix: torch.Tensor, threshold: float = 0.9) -> torch.Tensor:
    """rank_tau of a (..., n, d) matrix, one value per leading index (a 0-d tensor for one matrix)."""
    singular_values = torch.linalg.svdvals(torch.as_tensor(matrix, dtype=torch.float64))
    return rank_from_squared_singular_values(singular_values.square(), threshold)


class GramAccumulator:
    """Streams H^T H over batches of (..., n, d) rows, so rank_tau of all rows seen costs d x d memory."""

    def __init__(self) -> None:
        self.gram = torch.zeros(())
        self.rows = 0

    def update(self, rows: torch.Tensor) -> None:
        rows = rows.double()
        self.gram = self.gram + rows.mT @ rows
        self.rows += rows.shape[-2]

    def effective_rank(self, threshold: float = 0.9) -> torch.Tensor:
        return rank_from_squared_singular_values(torch.linalg.eigvalsh(self.gram), threshold)
