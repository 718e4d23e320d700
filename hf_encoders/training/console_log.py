"""What `pretrain` prints of its logs: every evaluation and the final summary, and about ten training logs a run.
A short run logs about a hundred points (loss_curves.default_logging_steps) for its curve, its trackers and
log_history.json; a dict line for each on the console would bury the warnings between them."""

import math

from transformers import PrinterCallback, ProgressCallback

CONSOLE_LINES = 10


def on_console(state, logs: dict) -> bool:
    """Whether the console prints `logs`: any log but a training one, and a training one every so many logging steps
    (every one when the run logs CONSOLE_LINES times or fewer), and the last."""
    if "loss" not in logs:
        return True
    every = state.logging_steps * max(1, math.ceil(state.max_steps / (CONSOLE_LINES * state.logging_steps)))
    return state.global_step % every == 0 or state.global_step == state.max_steps


class AboutTenLines:
    """Mixed into transformers' printing callbacks: they print what `on_console` keeps."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if on_console(state, logs or {}):
            super().on_log(args, state, control, logs=logs, **kwargs)


class ProgressBarLog(AboutTenLines, ProgressCallback):
    pass


class PrintedLog(AboutTenLines, PrinterCallback):
    pass


def print_about_ten_lines(trainer) -> None:
    """Replace the trainer's printing callback (the progress bar's, or the printer of --disable_tqdm) with ours."""
    for printer, ours in ((ProgressCallback, ProgressBarLog), (PrinterCallback, PrintedLog)):
        if trainer.pop_callback(printer) is not None:
            trainer.add_callback(ours)
