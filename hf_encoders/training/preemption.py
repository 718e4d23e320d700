"""`PreemptionCallback`: on SIGTERM or SIGINT, save a complete checkpoint after the current step and stop."""

import signal
import threading

import torch
from transformers import TrainerCallback
from transformers.utils import logging

from .measures import reduced_over_ranks

logger = logging.get_logger(__name__)


class PreemptionCallback(TrainerCallback):
    """On SIGTERM (what SLURM and preemptible clouds send before they kill a job) or SIGINT (Ctrl-C): finish the
    optimizer step under way, save a complete checkpoint and stop, so `trainer.train()` returns normally and
    `resume_from_checkpoint` continues exactly. A second signal gets the handler that was there before (the default
    kills). Under torchrun every rank stops after the same step: each step the flag is reduced over the ranks (one
    integer), since the signal may reach them on either side of a step boundary. A run that raises out of
    `trainer.train()` (a non-finite loss, a refusal) never reaches `on_train_end`: call `restore_handlers()` then, or
    the next Ctrl-C only stops a run that is over (`pretrain` does).
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.received: str | None = None  # the name of the signal that stopped the run
        self._previous = {}

    def on_train_begin(self, args, state, control, **kwargs):
        self.received = None
        if threading.current_thread() is threading.main_thread():  # Python sets handlers from the main thread only
            self._previous = {number: signal.signal(number, self._handle) for number in self.SIGNALS}

    def _handle(self, number, frame):
        self.received = signal.Signals(number).name
        signal.signal(number, self._previous.get(number, signal.SIG_DFL))
        # Said at once: a slow step can take a while, and a user who hears nothing presses Ctrl-C again.
        again = " (Ctrl-C again stops at once, without it)" if number == signal.SIGINT else ""
        logger.warning(
            f"{self.received} received: training stops after the current step and saves a checkpoint to resume "
            f"from{again}."
        )

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop_requested(args):
            control.should_save = True
            control.should_training_stop = True

    def stop_requested(self, args) -> bool:
        requested = self.received is not None
        if args.world_size > 1:
            flag = reduced_over_ranks(
                torch.tensor([int(requested)], device=args.device), torch.distributed.ReduceOp.MAX
            )
            if flag.item() and not requested:
                self.received = "a signal to another rank"
            requested = bool(flag.item())
        return requested

    def on_train_end(self, args, state, control, **kwargs):
        self.restore_handlers()

    def restore_handlers(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}
