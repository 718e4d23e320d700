"""MAE-LM's relative position bias at any length: attention that never holds a (rows, heads, L, L) bias.

The encoder adds a learned per-head bias, `table[bucket(position_k - position_q), head]`, to every score. After
compaction each row has its own positions, so the dense form is a float tensor per row that autograd keeps, with
its gradient: at 8,192 tokens and 12 heads, 3 GiB per row and layer stack. Three paths compute the same attention
(`MaeLmModel.relative_attention` picks one):

- dense (today's, `MaeLmModel.attention_bias`): the whole bias as sdpa's or eager's additive mask. Fastest for
  short sequences, quadratic in memory.
- query blocks (sdpa, long sequences): each block of `query_block_size` queries gets a (rows, heads, block, L)
  bias and runs sdpa with it. What each block gathers by distance (the keys near it, see `RelativeBias.near_bias`)
  is gathered once per forward and shared by every layer, so its backward (a scatter into the per-distance bias)
  runs once per forward, not once per layer; the rest of the block's bias, and sdpa, run under activation
  checkpointing, so backward rebuilds the (rows, heads, block, L) mask instead of keeping it, and memory grows
  linearly with L. (Buckets are constant beyond `relative_attention_max_distance`, which a banded decomposition
  could exploit further, but sdpa takes one additive mask per call: the far keys would still need a materialised
  bias, or two kernels merged through their log-sum-exps, which sdpa does not return. Query blocks need neither.)
- flex_attention: the bias is a `score_mod` reading the per-distance bias, and padding and documents one
  `BlockMask`, both built once per forward and shared by every layer, so nothing of size L x L exists outside the
  kernel and the bias's gradient accumulates into 2 * max_positions - 1 entries per head. On CUDA the kernel is
  compiled (transformers' flex integration, or the model's own torch.compile) and runs on flex's Triton backend,
  the one whose backward takes a gradient for a captured bias; on other devices flex_attention runs eagerly, which
  is correct but builds the full score matrix, and torch refuses its backward on CPU. The bias's gradient comes
  from the compiled backward's atomic adds: it is not deterministic on GPU (run-to-run differences at rounding
  level). flex_attention has no attention dropout.

On CUDA, sdpa with a mask avoids the cuDNN kernel at key lengths of 64 past a multiple of 128, where its backward
returns NaN query gradients on torch 2.11 and later (pytorch/pytorch#196678; `cudnn_nan_free_sdpa`).

This file belongs to MAE-LM's flat model folder: it imports only torch and transformers.
"""

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch
from torch.nn import functional
from torch.nn.attention import SDPBackend, sdpa_kernel
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


def flex_kernel_options() -> dict:
    """flex_attention's kernel options: the Triton backend, whose backward gives the captured per-distance bias its
    gradient (the experimental FLASH backend has no backward for a score_mod that captures a tensor). Empty on a torch
    that predates backend selection, where Triton is the only backend."""
    from torch.nn.attention import flex_attention

    options = getattr(flex_attention, "FlexKernelOptions", None)
    return {"BACKEND": "TRITON"} if options is not None and "BACKEND" in options.__annotations__ else {}


# sdpa's kernels but cuDNN's, for `cudnn_nan_free_sdpa`.
NOT_CUDNN = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def cudnn_nan_free_sdpa(query: torch.Tensor, key_length: int, masked: bool):
    """A context in which sdpa with a mask cannot pick the cuDNN kernel where its backward returns NaN query
    gradients (CUDA, key length 64 past a multiple of 128: pytorch/pytorch#196678, torch 2.11 on); a no-op
    elsewhere, so every other call keeps sdpa's own choice."""
    if masked and query.is_cuda and key_length % 128 == 64:
        return sdpa_kernel(NOT_CUDNN)
    return contextlib.nullcontext()


@dataclass
class RelativeBias:
    """What every encoder layer's attention needs to add the relative bias itself, in place of a dense mask. Built once
    per forward and passed to every layer, so what it derives (the flex `score_mod` and `BlockMask`, the query blocks'
    near biases) is derived once and shared by all of them.

    distance_bias: (heads, 2 * max_positions - 1), the bias of each signed distance key - query, shifted by
        max_positions - 1 (gathered once per forward from the bucket table, so the table gets its gradient through it);
        None for attention without a bias (the decoder's).
    positions: (rows or 1, L) position ids, compacted ones included.
    key_padding: (rows, L) bool, True at padded keys; None without padding.
    documents: (rows, L) document index of each position (packed rows); None for one document per row.
    saturation: a distance from which every bucket is the last of its direction (`relative_attention_max_distance`);
        query blocks gather the bias only for keys nearer than that (see `near_bias`).
    """

    distance_bias: torch.Tensor | None
    positions: torch.Tensor
    key_padding: torch.Tensor | None
    documents: torch.Tensor | None
    saturation: int | None = None
    # Set by `gather_query_blocks`: the query blocks' size and each block's `near_bias`.
    query_block_size: int | None = field(default=None, init=False)
    near_biases: list[torch.Tensor] = field(default_factory=list, init=False, repr=False)
    _block_mask: object = field(default=None, init=False, repr=False)
    _score_mod: object = field(default=None, init=False, repr=False)

    @property
    def offset(self) -> int:
        return (self.distance_bias.shape[-1] - 1) // 2

    def block_mask(self):
        """FlexAttention's `BlockMask` for padding and documents, built once (`prepare_flex`) and reused by every layer;
        None when every query may see every key."""
        if self.key_padding is None and self.documents is None:
            return None
        if self._block_mask is None:
            from torch.nn.attention.flex_attention import create_block_mask

            key_padding, documents = self.key_padding, self.documents
            rows, length = (key_padding if key_padding is not None else documents).shape

            def mask_mod(row, head, query_index, key_index):
                allowed = query_index >= 0  # True, shaped as the indices
                if key_padding is not None:
                    allowed = allowed & ~key_padding[row, key_index]
                if documents is not None:
                    allowed = allowed & (documents[row, query_index] == documents[row, key_index])
                return allowed

            # Compiled on CUDA (the lean path); elsewhere eagerly, where compiling costs more than it saves.
            device = self.positions.device
            self._block_mask = create_block_mask(
                mask_mod, rows, None, length, length, device=device, _compile=device.type == "cuda"
            )
        return self._block_mask

    def score_mod(self):
        """FlexAttention's `score_mod`, built once (`prepare_flex`): each score plus the bias of its signed distance in
        positions (None without a bias). It reads `distance_bias`, whose gradient the kernel accumulates."""
        if self.distance_bias is None:
            return None
        if self._score_mod is None:
            positions, distance_bias, offset = self.positions, self.distance_bias, self.offset
            if positions.shape[0] == 1:  # every row has the same positions
                shared = positions[0]

                def add_relative_bias(score, row, head, query_index, key_index):
                    distance = shared[key_index] - shared[query_index] + offset
                    return score + distance_bias[head, distance].to(score.dtype)

            else:

                def add_relative_bias(score, row, head, query_index, key_index):
                    distance = positions[row, key_index] - positions[row, query_index] + offset
                    return score + distance_bias[head, distance].to(score.dtype)

            self._score_mod = add_relative_bias
        return self._score_mod

    def prepare_flex(self) -> "RelativeBias":
        """Build the `score_mod` and the `BlockMask` now, before the layers: every layer reads the same ones, and a
        layer compiled on its own (regional compilation) sees them built, so one compiled layer serves all."""
        self.score_mod()
        self.block_mask()
        return self

    def near_keys(self, queries: slice) -> slice:
        """The keys within `saturation` indices of a block of queries: the only ones whose bias depends on their
        distance. Positions rise by at least one per index inside a document (compacted ones too), so a key farther
        away in index is at least that far in position, where its bucket is the last of its direction; keys of other
        documents and padding are blocked anyway."""
        length = self.positions.shape[-1]
        return slice(max(0, queries.start - self.saturation), min(length, queries.stop + self.saturation))

    def near_bias(self, queries: slice) -> torch.Tensor:
        """(rows, heads, block, near keys) bias of a block of queries for its `near_keys`, gathered by distance."""
        near = self.near_keys(queries)
        distance = self.positions[:, None, near] - self.positions[:, queries, None] + self.offset
        return self.distance_bias[:, distance].transpose(0, 1)

    def query_blocks(self) -> list[slice]:
        length = self.positions.shape[-1]
        size = self.query_block_size
        return [slice(start, min(start + size, length)) for start in range(0, length, size)]

    def gather_query_blocks(self, block_size: int) -> "RelativeBias":
        """Gather every block's `near_bias` now, before the layers (outside any layer's activation checkpointing),
        for `query_blocks_attention` in every layer: their backward, a scatter into `distance_bias`, then runs once
        per forward instead of once per layer."""
        self.query_block_size = block_size
        self.near_biases = [self.near_bias(queries) for queries in self.query_blocks()]
        return self

    def block_bias(self, queries: slice, near_bias: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """(rows, heads, block, L) additive mask for one block of queries, as `MaeLmModel.attention_bias` builds it for
        all of them: `near_bias` (this block's `near_bias`) for the near keys, the last bucket's bias of each
        direction for the rest of the row (cheaper to fill and to back-propagate, a sum, than a gather), and padding
        and other documents blocked."""
        length = self.positions.shape[-1]
        near = self.near_keys(queries)
        rows, heads, block, _ = near_bias.shape
        farthest_before, farthest_after = self.distance_bias[:, 0], self.distance_bias[:, -1]
        bias = torch.cat(
            [
                farthest_before[None, :, None, None].expand(rows, heads, block, near.start),
                near_bias,
                farthest_after[None, :, None, None].expand(rows, heads, block, length - near.stop),
            ],
            dim=-1,
        ).to(dtype)
        blocked = self.blocked(queries)
        # masked_fill (not +) so a row whose keys are all blocked stays finite, as in the dense path.
        return bias if blocked is None else bias.masked_fill(blocked, torch.finfo(dtype).min)

    def blocked(self, queries: slice) -> torch.Tensor | None:
        """(rows, 1, block, L) bool, True where a query of the block may not see a key; None when all may."""
        blocked = None if self.key_padding is None else self.key_padding[:, None, None, :]
        if self.documents is not None:
            elsewhere = self.documents[:, None, queries, None] != self.documents[:, None, None, :]
            blocked = elsewhere if blocked is None else blocked | elsewhere
        return blocked


def query_blocks_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: RelativeBias,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """An attention interface function: sdpa over the blocks of queries of `attention_mask` (`gather_query_blocks`),
    each block's (rows, heads, block, L) bias built from the near bias every layer shares, and rebuilt in backward
    rather than kept. Returns (rows, L, heads, head_dim) and no weights. Checkpointing restores the random state, so
    attention dropout drops the same weights when a block is recomputed."""
    bias = attention_mask

    def attend_block(block_query, key, value, near_bias, distance_bias, queries):
        block = RelativeBias(distance_bias, *fields).block_bias(queries, near_bias, block_query.dtype)
        with cudnn_nan_free_sdpa(block_query, key.shape[-2], masked=True):
            return functional.scaled_dot_product_attention(
                block_query, key, value, attn_mask=block, dropout_p=dropout, scale=scaling
            )

    fields = (bias.positions, bias.key_padding, bias.documents, bias.saturation)
    outputs = [
        checkpoint(
            attend_block,
            query[:, :, queries],
            key,
            value,
            near_bias,
            bias.distance_bias,
            queries,
            use_reentrant=False,
        )
        for queries, near_bias in zip(bias.query_blocks(), bias.near_biases, strict=True)
    ]
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
    bias = attention_mask
    kernel = {}
    if query.device.type == "cuda":
        from transformers.integrations.flex_attention import compile_friendly_flex_attention

        flex_attention = partial(compile_friendly_flex_attention, training=module.training)
        kernel = {"kernel_options": flex_kernel_options()}
    output = flex_attention(
        query,
        key,
        value,
        score_mod=bias.score_mod(),
        block_mask=bias.block_mask(),
        scale=scaling,
        **kernel,
    )
    return output.transpose(1, 2).contiguous(), None


class DistanceBiasPaths:
    """The attention path of a layer stack that adds a per-distance bias (the encoder's relative bias, the decoder's
    locality bias), chosen once per forward and shared by every layer: flex_attention's, query blocks for sdpa past
    `dense_bias_max_length` tokens, else a dense additive mask with the configured implementation."""

    dense_bias_max_length = 1024
    query_block_size = 512

    def distance_bias_attention(
        self,
        implementation: str,
        length: int,
        relative_bias: Callable[[], RelativeBias],
        dense_bias: Callable[[], torch.Tensor],
    ) -> tuple[torch.Tensor | RelativeBias, Callable | None]:
        """(mask, attention function) for every layer: `relative_bias()` prepared for flex_attention or query blocks,
        or `dense_bias()` and None (the configured implementation)."""
        if implementation == "flex_attention":
            return relative_bias().prepare_flex(), flex_relative_attention
        if implementation == "sdpa" and length > self.dense_bias_max_length:
            return relative_bias().gather_query_blocks(self.query_block_size), query_blocks_attention
        return dense_bias(), None
