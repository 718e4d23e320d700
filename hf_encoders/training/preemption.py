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
        self.number = 0  # its number (on every rank, the one another rank received), for the exit status 128 + it
        self._previous = {}

    def on_train_begin(self, args, state, control, **kwargs):
        self.received, self.number = None, 0
        if threading.current_thread() is threading.main_thread():  # Python sets handlers from the main thread only
            self._previous = {number: signal.signal(number, self._handle) for number in self.SIGNALS}

    def _handle(self, number, frame):
        self.received, self.number = signal.Signals(number).name, number
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
            number = reduced_over_ranks(
                torch.tensor([self.number], device=args.device), torch.distributed.ReduceOp.MAX
            ).item()
            if number and not requested:
                self.received, self.number = "a signal to another rank", number
            requested = bool(number)
        return requested

    def on_train_end(self, args, state, control, **kwargs):
        self.restore_handlers()

    def restore_handlers(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}
