"""MAE-LM's relative position bias at any length: attention that never holds a (rows, heads, L, L) bias.

The encoder adds a learned per-head bias, `table[bucket(position_k - position_q), head]`, to every score. After
compaction each row has its own positions, so the dense form is a float tensor per row that autograd keeps, with
its gradient: at 8,192 tokens and 12 heads, 3 GiB per row and layer stack. Three paths compute the same attention
(`MaeLmModel.relative_attention` picks one):

- dense (today's, `MaeLmModel.attention_bias`): the whole bias as sdpa's or eager's additive mask. Fastest for
  short sequences, quadratic in memory.
- query blocks (sdpa, long sequences): each block of `query_block_size` queries gets its (rows, heads, block, L)
  bias gathered from the per-distance bias and runs sdpa with it; the block runs under activation checkpointing, so
  backward recomputes the bias instead of keeping it, and memory grows linearly with L. (Buckets are constant beyond
  `relative_attention_max_distance`, which a banded decomposition could exploit, but sdpa takes one additive mask
  per call: the far keys would still need a materialised bias, or two kernels merged through their log-sum-exps,
  which sdpa does not return. Query blocks need neither.)
- flex_attention: the bias is a `score_mod` and padding and documents a `BlockMask`, so nothing of size L x L
  exists outside the kernel. On CUDA the kernel is compiled once per process (transformers' flex integration); on
  other devices flex_attention runs eagerly, which is correct but builds the full score matrix, and torch refuses its
  backward on CPU. The bias table's gradient comes from the compiled backward's atomic adds: it is not
  deterministic on GPU (run-to-run differences at rounding level).

This file belongs to MAE-LM's flat model folder: it imports only torch and transformers.
"""

from dataclasses import dataclass, field
from functools import partial

import torch
from torch.nn import functional
from torch.utils.checkpoint import checkpoint
from transformers.utils import is_torch_greater_or_equal

# FlexAttention with gradients flowing to a captured bias tensor.
FLEX_MIN_TORCH = "2.6"


def flex_attention_unavailable() -> str | None:
    """Why this torch cannot run MAE-LM's flex_attention path, or None when it can."""
    if is_torch_greater_or_equal(FLEX_MIN_TORCH):
        return None
    return (
        f"MAE-LM's attn_implementation='flex_attention' needs torch >= {FLEX_MIN_TORCH} (FlexAttention with gradients "
        f"to its learned relative bias); this is torch {torch.__version__}. Upgrade torch, or use 'sdpa' (the "
        "default)."
    )


@dataclass
class RelativeBias:
    """What every encoder layer's attention needs to add the relative bias itself, in place of a dense mask.

    distance_bias: (heads, 2 * max_positions - 1), the bias of each signed distance key - query, shifted by
        max_positions - 1 (gathered once per forward from the bucket table, so the table gets its gradient through it);
        None for attention without a bias (the decoder's).
    positions: (rows or 1, L) position ids, compacted ones included.
    key_padding: (rows, L) bool, True at padded keys; None without padding.
    documents: (rows, L) document index of each position (packed rows); None for one document per row.
    saturation: a distance from which every bucket is the last of its direction (`relative_attention_max_distance`);
        query blocks gather the bias only for keys nearer than that (see `block_bias`).
    """

    distance_bias: torch.Tensor | None
    positions: torch.Tensor
    key_padding: torch.Tensor | None
    documents: torch.Tensor | None
    saturation: int | None = None
    _block_mask: object = field(default=None, init=False, repr=False)

    @property
    def offset(self) -> int:
        return (self.distance_bias.shape[-1] - 1) // 2

    def block_mask(self, rows: int, length: int, device: torch.device):
        """FlexAttention's `BlockMask` for padding and documents, built by the first layer and reused by the others;
        None when every query may see every key."""
        if self.key_padding is None and self.documents is None:
            return None
        if self._block_mask is None:
            from torch.nn.attention.flex_attention import create_block_mask

            key_padding, documents = self.key_padding, self.documents

            def mask_mod(row, head, query_index, key_index):
                allowed = query_index >= 0  # True, shaped as the indices
                if key_padding is not None:
                    allowed = allowed & ~key_padding[row, key_index]
                if documents is not None:
                    allowed = allowed & (documents[row, query_index] == documents[row, key_index])
                return allowed

            # Compiled on CUDA (the lean path); elsewhere eagerly, where compiling costs more than it saves.
            self._block_mask = create_block_mask(
                mask_mod, rows, None, length, length, device=device, _compile=device.type == "cuda"
            )
        return self._block_mask

    def blocked(self, queries: slice) -> torch.Tensor | None:
        """(rows, 1, block, L) bool, True where a query of the block may not see a key; None when all may."""
        blocked = None if self.key_padding is None else self.key_padding[:, None, None, :]
        if self.documents is not None:
            elsewhere = self.documents[:, None, queries, None] != self.documents[:, None, None, :]
            blocked = elsewhere if blocked is None else blocked | elsewhere
        return blocked

    def block_bias(self, queries: slice, dtype: torch.dtype) -> torch.Tensor:
        """(rows, heads, block, L) additive mask for one block of queries, as `MaeLmModel.attention_bias` builds it
        for all of them.

        Only keys within `saturation` indices of the block are gathered by distance: positions rise by at least one
        per index inside a document (compacted ones too), so a key farther away in index is at least that far in
        position, where its bucket is the last of its direction; keys of other documents and padding are blocked
        anyway. The rest of the row is that last bucket's bias, on each side, which is cheaper to fill and to
        back-propagate (a sum) than a gather."""
        length = self.positions.shape[-1]
        near = slice(max(0, queries.start - self.saturation), min(length, queries.stop + self.saturation))
        distance = self.positions[:, None, near] - self.positions[:, queries, None] + self.offset
        bias = self.distance_bias[:, distance].transpose(0, 1)
        rows, heads, block, _ = bias.shape
        farthest_before, farthest_after = self.distance_bias[:, 0], self.distance_bias[:, -1]
        bias = torch.cat(
            [
                farthest_before[None, :, None, None].expand(rows, heads, block, near.start),
                bias,
                farthest_after[None, :, None, None].expand(rows, heads, block, length - near.stop),
            ],
            dim=-1,
        ).to(dtype)
        blocked = self.blocked(queries)
        # masked_fill (not +) so a row whose keys are all blocked stays finite, as in the dense path.
        return bias if blocked is None else bias.masked_fill(blocked, torch.finfo(dtype).min)


def query_blocks_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: RelativeBias,
    scaling: float,
    dropout: float = 0.0,
    block_size: int = 512,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """An attention interface function: sdpa over blocks of queries, each with its bias recomputed in backward.
    Returns (rows, L, heads, head_dim) and no weights. Checkpointing restores the random state, so attention dropout
    drops the same weights when a block is recomputed."""

    def attend_block(block_query, key, value, distance_bias, queries):
        bias = RelativeBias(distance_bias, *fields).block_bias(queries, block_query.dtype)
        return functional.scaled_dot_product_attention(
            block_query, key, value, attn_mask=bias, dropout_p=dropout, scale=scaling
        )

    fields = (attention_mask.positions, attention_mask.key_padding, attention_mask.documents, attention_mask.saturation)
    length = query.shape[-2]
    outputs = []
    for start in range(0, length, block_size):
        queries = slice(start, min(start + block_size, length))
        outputs.append(
            checkpoint(
                attend_block,
                query[:, :, queries],
                key,
                value,
                attention_mask.distance_bias,
                queries,
                use_reentrant=False,
            )
        )
    return torch.cat(outputs, dim=2).transpose(1, 2).contiguous(), None


def flex_relative_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: RelativeBias,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """An attention interface function: FlexAttention with the relative bias as a `score_mod` over each row's own
    positions and a `BlockMask` for padding and documents. Returns (rows, L, heads, head_dim) and no weights."""
    from torch.nn.attention.flex_attention import flex_attention

    if dropout > 0:
        raise ValueError(
            "FlexAttention has no attention dropout: build the model with attention_probs_dropout_prob=0.0 to train "
            "with attn_implementation='flex_attention', or use 'sdpa'."
        )
    rows, _, length, _ = query.shape
    bias = attention_mask
    positions = bias.positions.expand(rows, -1)

    def score_mod(score, row, head, query_index, key_index):
        distance = positions[row, key_index] - positions[row, query_index] + bias.offset
        return score + bias.distance_bias[head, distance].to(score.dtype)

    on_cuda = query.device.type == "cuda"
    if on_cuda:
        from transformers.integrations.flex_attention import compile_friendly_flex_attention

        flex_attention = partial(compile_friendly_flex_attention, training=module.training)
    output = flex_attention(
        query,
        key,
        value,
        score_mod=None if bias.distance_bias is None else score_mod,
        block_mask=bias.block_mask(rows, length, query.device),
        scale=scaling,
    )
    return output.transpose(1, 2).contiguous(), None
