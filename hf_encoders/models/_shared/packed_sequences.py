"""Transformers' packed-sequence convention, shared by the encoders of hf-encoders.

Several documents share one row when its `position_ids` restart at 0: `DataCollatorWithFlattening` emits this
layout (one row, no attention mask) and varlen flash attention reads it. Attention must then stay inside each
document, so that a document gets the states it would get alone.

Like checkpoint_io.py, this file is copied into each flat model folder, and from there into every checkpoint.
"""

import torch


def document_index(position_ids: torch.Tensor) -> torch.Tensor:
    """The index of the document each position belongs to, counted along the row: a new one starts at every 0."""
    return (position_ids == 0).cumsum(-1)


def may_read_device(fixed_shapes: bool = False) -> bool:
    """Whether a forward may wait for the device to read a value: not under torch.compile (a graph break), nor with
    `fixed_shapes`, a batch carrying a collator's fixed-size index tensors (hf_encoders/data/index_tensors.py), which
    the collator checked on the host."""
    return not (fixed_shapes or torch.compiler.is_compiling())


def restarts_inside(position_ids: torch.Tensor, fixed_shapes: bool = False) -> bool:
    """Whether some row holds more than one document. Where the device may not be read (`may_read_device`), assume
    so: the packed mask is also right for a row with a single document."""
    return not may_read_device(fixed_shapes) or bool((position_ids[..., 1:] == 0).any())


def check_packed_positions(
    position_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, fixed_shapes: bool = False
) -> None:
    """Refuse `position_ids` that fall without restarting at 0, or that restart at 0 inside a row (a packed row) whose
    first position is not 0: such rows would silently mix documents. Padding is ignored, so left-padded rows pass;
    gaps are allowed, since MAE-LM runs its encoder on the kept tokens at their original positions.

    Skipped where the device may not be read (`may_read_device`): under torch.compile, where reading the answer would
    break the graph, and for a batch whose collator checked it on the host; eager runs check every other batch.
    """
    if not may_read_device(fixed_shapes):
        return
    real = torch.ones_like(position_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    positions, real = torch.broadcast_tensors(position_ids, real)  # (1, length) positions serve every row
    follows_real = shift_right(real, False) & real
    restarts = positions == 0
    falls = follows_real & (positions <= shift_right(positions, -1)) & ~restarts
    packed_row = (follows_real & restarts).any(-1, keepdim=True)
    late_start = real & ~follows_real & ~restarts & packed_row
    wrong = falls | late_start
    if bool(wrong.any()):
        row, column = (index.item() for index in wrong.nonzero()[0])
        raise ValueError(
            f"position_ids[{row}, {column}] = {positions[row, column].item()}: a packed row's positions must start "
            "at 0 and rise within each document, restarting at 0 where the next document begins (the "
            "layout DataCollatorWithFlattening and `hf-encoders pretrain --pack_documents` write). Pass "
            "position_ids in that layout, or none at all."
        )


def ends_document(position_ids: torch.Tensor) -> torch.Tensor:
    """Where the next position starts a new document: a next-token label there would cross documents."""
    starts = position_ids == 0
    return torch.cat([starts[..., 1:], torch.zeros_like(starts[..., :1])], dim=-1)


def shift_right(values: torch.Tensor, fill) -> torch.Tensor:
    """`values` moved one position to the right along the row, `fill` entering at position 0."""
    return torch.cat([torch.full_like(values[..., :1], fill), values[..., :-1]], dim=-1)


class Unpadded:
    """Where the real tokens of a padded (batch, length) layout are. Models drop the padding before their first
    layer, so the linear layers cost what the real tokens cost, and restore the (batch, length) layout around the
    attention kernel (per row, which on CPU is much cheaper than one long row with a block-diagonal mask) and at
    the end. Varlen flash attention needs no restoring: it reads the documents from `position_ids`."""

    def __init__(self, attention_mask: torch.Tensor):
        self.batch_size, self.length = attention_mask.shape
        self.index = attention_mask.flatten().nonzero().squeeze(-1)

    def unpad(self, padded: torch.Tensor) -> torch.Tensor:
        """(batch, length, ...) -> (real tokens, ...)."""
        return padded.flatten(0, 1).index_select(0, self.index)

    def pad(self, tokens: torch.Tensor) -> torch.Tensor:
        """(real tokens, ...) -> (batch, length, ...), zeros where the padding was."""
        padded = tokens.new_zeros(self.batch_size * self.length, *tokens.shape[1:])
        return padded.index_copy(0, self.index, tokens).view(self.batch_size, self.length, *tokens.shape[1:])

    def attend(self, attention, module, query, key, value, attention_mask, **kwargs):
        """Call `attention` (an attention interface function) with the (1, heads, real tokens, head_dim) query, key
        and value laid out padded, and return its output for the real tokens, (1, real tokens, heads, head_dim),
        with its weights."""
        query, key, value = (self.pad(states[0].transpose(0, 1)).transpose(1, 2) for states in (query, key, value))
        output, weights = attention(module, query, key, value, attention_mask, **kwargs)
        return self.unpad(output)[None], weights


def worth_unpadding(attention_mask: torch.Tensor | None, fixed_shapes: bool = False) -> bool:
    """Whether a batch has padding to drop. Never where the device may not be read (`may_read_device`): the
    real-token count is data-dependent."""
    return attention_mask is not None and may_read_device(fixed_shapes) and not bool(attention_mask.all())
