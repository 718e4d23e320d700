# Copied from hf_encoders/models/_shared/loss_utils.py; edit the source, then run `python utils/check_copies.py --fix_and_overwrite`.
"""The masked/causal LM loss and the input checks every model of hf-encoders shares. Like checkpoint_io.py, this
file is copied into each flat model folder, and from there into every checkpoint."""

import math
from collections.abc import Callable

import torch
from torch import nn

TRUNCATE = "truncate the input (e.g. tokenizer(..., truncation=True, max_length=...))"

# Fp32 logits one chunk of the fused loss may hold (256 MiB): 2,048 rows of a 32k vocabulary.
LOGITS_PER_CHUNK = 2**26


class LinearCrossEntropy(torch.autograd.Function):
    """sum_i cross_entropy(rows_i @ weight.T + bias, targets_i) / denominator, without (rows, vocab) logits.

    Liger's FusedLinearCrossEntropy in plain torch: the rows are taken in `chunks` pieces; each piece's logits are
    computed in fp32 (from the matmul in the input dtype, as `linear(...).float()` would), scored, and turned at
    once into that piece's share of the gradients of rows, weight and bias, so only one piece of logits is ever
    alive. The gradients are what backward returns, scaled by the incoming gradient: the same matmuls as an unfused
    forward + backward, and what autograd keeps is the size of the inputs rather than of the logits. Weight and
    bias gradients are summed over the pieces in fp32 and returned in the parameters' dtypes.
    """

    @staticmethod
    def forward(ctx, rows, weight, bias, targets, denominator, chunks: int, ignores: bool = False):
        """`ignores`: some targets may be -100 (rows that score nothing, as filler slots of fixed-size index
        tensors)."""
        needs_rows, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        loss = rows.new_zeros((), dtype=torch.float32)
        grad_rows = []
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if needs_weight else None
        grad_bias = torch.zeros_like(bias, dtype=torch.float32) if needs_bias else None
        for piece, piece_targets in zip(rows.tensor_split(chunks), targets.tensor_split(chunks)):
            scored = piece_targets != -100 if ignores else None
            if ignores:
                piece_targets = piece_targets.clamp(min=0)
            log_probabilities = nn.functional.linear(piece, weight, bias).float().log_softmax(-1)
            target_scores = log_probabilities.gather(1, piece_targets[:, None])
            loss -= (target_scores if scored is None else target_scores.masked_fill(~scored[:, None], 0)).sum()
            # d loss / d logits = (softmax - one_hot(target)) / denominator, built in the log-probabilities' memory.
            grad_logits = log_probabilities.exp_()
            grad_logits.scatter_add_(1, piece_targets[:, None], grad_logits.new_full((len(piece_targets), 1), -1.0))
            if scored is not None:
                grad_logits.masked_fill_(~scored[:, None], 0)
            grad_logits /= denominator
            if needs_bias:
                grad_bias += grad_logits.sum(0)
            grad_logits = grad_logits.to(piece.dtype)  # the matmuls run in the input dtype, as linear's backward
            if needs_rows:
                grad_rows.append(grad_logits @ weight)
            if needs_weight:
                grad_weight += grad_logits.T @ piece
        ctx.save_for_backward(
            torch.cat(grad_rows).to(rows.dtype) if needs_rows else None,
            grad_weight.to(weight.dtype) if needs_weight else None,
            grad_bias.to(bias.dtype) if needs_bias else None,
        )
        return loss / denominator

    @staticmethod
    def backward(ctx, grad_loss):
        grads = tuple(None if grad is None else grad * grad_loss for grad in ctx.saved_tensors)
        return *grads, None, None, None, None


def first_positions(chosen: torch.Tensor, slots: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions, mask), both (rows, slots): each row's `chosen` positions in order, then its other positions,
    cut at `slots`; `mask` marks the chosen ones. The fixed-size form of a boolean selection (collators build it for
    the labelled positions, data/index_tensors.py; MAE-LM for the positions its encoder reads)."""
    # A stable sort on "not chosen" lists each row's chosen positions first, in order.
    positions = torch.sort((~chosen).to(torch.int8), dim=-1, stable=True).indices[:, :slots]
    return positions, chosen.gather(1, positions)


def restore_index(chosen: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """(rows, length): the slot of `positions` (`first_positions`'s) that holds each chosen position, 0 elsewhere;
    gathering slot states with it puts them back in place."""
    slots = torch.arange(positions.shape[1], device=positions.device).expand_as(positions)
    return torch.zeros_like(chosen, dtype=torch.long).scatter(1, positions, slots).masked_fill(~chosen, 0)


def labelled_rows_loss(
    projection: Callable[[torch.Tensor], torch.Tensor],
    hidden_states: torch.Tensor,
    labels: torch.Tensor,
    num_items_in_batch: torch.Tensor | int | None = None,
    *,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    labelled_count: int | None = None,
    all_positions: bool = False,
    target_positions: torch.Tensor | None = None,
    target_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(loss, logits) of the vocabulary head `transform` then `projection`, run on the labelled positions only
    (labels != -100). `transform` (e.g. dense -> GELU -> LayerNorm) may be None; `projection` is the final
    projection to the vocabulary.

    With `all_positions` (eval and predict mode, see `StandardLogitsOutsideTraining`) the head runs on every position
    and logits is (batch, length, vocab), as stock `*ForMaskedLM` heads return them; the loss still reads the
    labelled rows only. Otherwise, in training (gradients enabled, `projection` a plain `nn.Linear`, more labelled
    rows than hidden units) the projection and the cross-entropy run fused in chunks (`LinearCrossEntropy`) and logits
    is None, as transformers' Llama returns none under Liger's fused loss; else logits is (number of labelled
    positions, vocab) in row-major order.

    The cross-entropy is summed in fp32 and divided by Trainer's `num_items_in_batch` when given (it counts the
    targets across gradient-accumulation steps), else by this batch's labelled count, clamped so that a batch
    without targets gives 0 rather than NaN. The host waits for the device once, to read that count, unless the
    caller passes it as `labelled_count`; the gather itself has no data-dependent shape for torch.compile to break on.

    With a collator's fixed-size `target_positions` / `target_mask` (batch, slots) (data/index_tensors.py) the
    host reads nothing: the rows are every row's slots, the filler ones scoring nothing, and compact logits are
    (batch x slots, vocab), a filler slot's row wherever a row has fewer labels than slots. The loss is the same sum
    over the same labelled positions.
    """
    ignores = target_positions is not None
    if ignores:
        targets = labels.gather(1, target_positions).masked_fill(~target_mask.bool(), -100).flatten()
        rows_bound = targets.numel()
        denominator = num_items_in_batch if num_items_in_batch is not None else target_mask.sum().clamp(min=1)

        def select(states: torch.Tensor) -> torch.Tensor:
            index = target_positions[..., None].expand(-1, -1, states.shape[-1])
            return states.gather(1, index).flatten(0, 1)
    else:
        labelled = labels.flatten() != -100
        count = int(labelled.sum()) if labelled_count is None else labelled_count
        # A stable sort on "not labelled" lists the labelled positions first, in row-major order.
        order = torch.argsort(~labelled, stable=True)[:count]
        targets = labels.flatten().index_select(0, order)
        denominator = num_items_in_batch if num_items_in_batch is not None else max(count, 1)
        # Under torch.compile the choice to fuse (below) follows the positions that may carry a label, a static shape:
        # a choice on the count would guard on it and compile again whenever the count crossed the threshold.
        rows_bound = labels.numel() if torch.compiler.is_compiling() else count

        def select(states: torch.Tensor) -> torch.Tensor:
            return states.flatten(0, -2).index_select(0, order)

    if all_positions:
        logits = projection(hidden_states if transform is None else transform(hidden_states))
        return nn.functional.cross_entropy(select(logits).float(), targets, reduction="sum") / denominator, logits
    rows = select(hidden_states)
    if transform is not None:
        rows = transform(rows)
    # Fusing keeps the weight's gradient (vocab x hidden) for backward instead of the logits (count x vocab), so it
    # pays off only with more labelled rows than hidden units. A subclass of Linear (a quantized layer) computes
    # something else from its weight.
    if torch.is_grad_enabled() and type(projection) is nn.Linear and rows_bound > projection.in_features:
        # As few chunks as keep each within LOGITS_PER_CHUNK, since each chunk adds a pass over the weight's gradient.
        chunks = max(1, math.ceil(rows_bound * projection.out_features / LOGITS_PER_CHUNK))
        loss = LinearCrossEntropy.apply(rows, projection.weight, projection.bias, targets, denominator, chunks, ignores)
        return loss, None
    logits = projection(rows)
    loss = nn.functional.cross_entropy(logits.float(), targets, reduction="sum")
    return loss / denominator, logits


class StandardLogitsOutsideTraining:
    """A masked-LM head whose training loss reads the labelled positions only (`labelled_rows_loss`).

    In training mode its logits are compact, (labelled positions, vocab), or None where the projection ran fused
    with the loss. In eval and predict mode they are (batch, length, vocab), with labels or without, as every stock
    `*ForMaskedLM` returns them: run_mlm.py's metrics index them with the labels' mask. Setting
    `model.compact_eval_logits = True` keeps the compact form in eval too, for metrics that read the labelled rows
    only at a large vocabulary. It is the run's choice, set on the model object, so a checkpoint's config never
    carries it (ModernBERT's `sparse_prediction` is a config field, which a saved checkpoint then imposes on its users).
    """

    compact_eval_logits: bool = False

    def logits_at_all_positions(self) -> bool:
        return not (self.training or self.compact_eval_logits)


def check_labels_shape(labels: torch.Tensor, input_shape: torch.Size, collator: str) -> None:
    """One target per input position (-100 where there is none), as the method's collator builds them."""
    if labels.shape != input_shape:
        raise ValueError(
            f"labels must have the shape of the input (batch, length) = {tuple(input_shape)}, got "
            f"{tuple(labels.shape)}: one target per position (-100 where there is none), as {collator} builds them."
        )


def check_sequence_length(length: int, max_position_embeddings: int, fix: str = TRUNCATE) -> None:
    """A position table cannot index past its end: say so before an index error deep inside the embedding."""
    if length > max_position_embeddings:
        raise ValueError(f"Sequence length {length} exceeds max_position_embeddings={max_position_embeddings}; {fix}.")
