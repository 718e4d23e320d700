"""`NonFiniteLossCallback`: stop at the first NaN/inf loss, before a checkpoint is written from poisoned weights."""

import math

import torch
from transformers import TrainerCallback

from ..errors import NonFiniteLossError

HINTS = (
    "lower the learning rate or lengthen the warmup; keep gradient clipping on (max_grad_norm, default 1.0); "
    "train in bf16 instead of fp16 (fp16 overflows above 65504); check the data for empty or degenerate batches "
    "(a sequence of padding only, labels outside the vocabulary)"
)


class NonFiniteLossCallback(TrainerCallback):
    """Stop a Trainer run at the first NaN/inf training loss, before it writes a checkpoint from poisoned weights: the
    last good checkpoint is kept.

    Why Trainer alone does not: by default (`logging_nan_inf_filter=True`) a non-finite step loss is replaced by the
    running mean before it is logged, so the logs look healthy while the weights, after one optimizer step on NaN
    gradients, are NaN; every later checkpoint then overwrites a good one with garbage.

    How `NonFiniteLossCallback` sees the real loss without a host-device sync per step:

    * `PretrainingTrainer.compute_loss` hands it the loss of every training forward (`record`), which it folds into
      a few device tensors (was one not finite, the first bad step and its value); this launches tiny kernels but
      never waits for the device. Under a plain `Trainer` nothing records, and only the checks below remain;
    * the flag is read (one sync) only when Trainer is about to log, evaluate, save or stop, i.e. when it syncs anyway,
      or every `check_every_n_steps` steps if you ask for it. Between two checks a poisoned run goes on training (it
      never saves); the error still names the first bad step;
    * before a checkpoint is written the weights themselves are checked as well: a step can have a finite loss but
      NaN/inf gradients (an overflow in backward), which only shows in the next step's loss;
    * `on_log` also checks the logged `loss` and `grad_norm`, which covers losses computed outside the model (a custom
      `compute_loss`) when `logging_nan_inf_filter=False`. A non-finite `grad_norm` is not an error with `fp16=True`:
      there the gradient scaler skips such steps by design.

    What happens then: the callback sets `should_save = False` and `should_training_stop = True` and raises
    `NonFiniteLossError` (a `RuntimeError`) from the callback, inside `trainer.train()`. Trainer has no exception handler
    around its loop, so nothing after the raise runs: no checkpoint is written for the bad step, no final save,
    `on_train_end` callbacks (and a script's `trainer.save_model()` after `train()`) are skipped, and the process exits
    with a non-zero status. The newest `checkpoint-*` folder is the last good state; resume from it
    (`resume_from_checkpoint=True`) after changing what the message suggests.

    `check_every_n_steps`: None (default) checks only when Trainer logs, evaluates, saves or stops, adding no
    host-device sync of its own; an integer also checks every that many steps (one sync each), so a run with
    sparse logging stops sooner after the bad step. The error names the first step whose loss was not finite.
    """

    def __init__(self, check_every_n_steps: int | None = None):
        if check_every_n_steps is not None and check_every_n_steps < 1:
            raise ValueError(f"check_every_n_steps must be a positive integer or None, got {check_every_n_steps}.")
        self.check_every_n_steps = check_every_n_steps
        self._reset()

    def _reset(self):
        # Device-side record of the first non-finite loss: seen (bool), its step (int64) and value (float32).
        self._seen = self._first_step = self._first_value = None

    # ---- recording (no sync) ----

    def record(self, loss: torch.Tensor, step: int) -> None:
        """The loss of a training forward of optimizer step `step` (all its micro-batches count)."""
        with torch.no_grad():
            value = loss.detach().float().sum()  # NaN and inf survive the sum; a scalar loss is itself
            if self._seen is None:
                self._seen = torch.zeros((), dtype=torch.bool, device=value.device)
                self._first_step = torch.zeros((), dtype=torch.long, device=value.device)
                self._first_value = torch.zeros((), dtype=torch.float32, device=value.device)
            bad = ~torch.isfinite(value)
            first = bad & ~self._seen
            self._first_step = torch.where(first, torch.full_like(self._first_step, step), self._first_step)
            self._first_value = torch.where(first, value, self._first_value)
            self._seen = self._seen | bad

    def on_train_begin(self, args, state, control, **kwargs):
        self._reset()

    # ---- checking (one sync, only when Trainer is about to act on the state) ----

    def on_step_end(self, args, state, control, model=None, **kwargs):
        # Trainer's own schedule is recomputed here rather than read from `control` alone, so the check happens
        # before a save even when this callback runs before DefaultFlowCallback (which sets the flags).
        step = state.global_step
        last = step >= state.max_steps > 0
        saving = control.should_save or (args.save_strategy == "steps" and (due(step, state.save_steps) or last))
        acting = (
            saving
            or last
            or control.should_log
            or control.should_evaluate
            or control.should_training_stop
            or (args.logging_strategy == "steps" and due(step, state.logging_steps))
            or (args.eval_strategy == "steps" and due(step, state.eval_steps))
            or due(step, self.check_every_n_steps)
        )
        if acting:
            self._check(state, control, model if saving or args.save_strategy == "best" else None)

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        # Trainer logs, evaluates and saves once more after this event (epoch strategies, and the end of training).
        self._check(state, control, model if args.save_strategy != "no" else None)

    def on_log(self, args, state, control, logs=None, **kwargs):
        self._check(state, control)
        logs = logs or {}
        loss = logs.get("loss")
        if isinstance(loss, (int, float)) and not math.isfinite(loss):
            self._stop(control, f"The training loss logged at step {state.global_step} is {loss}.")
        grad_norm = logs.get("grad_norm")
        if isinstance(grad_norm, (int, float)) and not math.isfinite(grad_norm) and not args.fp16:
            self._stop(
                control,
                f"The gradient norm at step {state.global_step} is {grad_norm} (the loss was finite): "
                "the optimizer step has made the weights non-finite.",
            )

    def _check(self, state, control, model=None):
        if self._seen is not None and bool(self._seen):
            step, value = int(self._first_step), float(self._first_value)
            self._stop(
                control, f"The training loss became {value} at step {step} (detected at step {state.global_step})."
            )
        if model is not None and not weights_are_finite(model):
            self._stop(
                control,
                f"The weights became non-finite at or before step {state.global_step} although every "
                "training loss was finite: the gradients overflowed in backward, or the update did.",
            )

    def _stop(self, control, what: str):
        control.should_save = False
        control.should_evaluate = False
        control.should_training_stop = True
        raise NonFiniteLossError(
            f"{what} Training stopped before saving: the newest checkpoint-* folder is the last good state "
            f"(resume from it with resume_from_checkpoint). To fix: {HINTS}."
        )


def weights_are_finite(model: torch.nn.Module) -> bool:
    """Whether every parameter is free of NaN/inf (one host-device sync)."""
    checks = []
    for parameter in model.parameters():
        local = parameter.to_local() if hasattr(parameter, "to_local") else parameter  # a DTensor shard
        if local.is_floating_point() and local.numel():
            checks.append(torch.isfinite(local.detach()).all())
    return bool(torch.stack([check.to(checks[0].device) for check in checks]).all()) if checks else True


def due(step: int, every: int | None) -> bool:
    return bool(every) and step % every == 0
