"""Errors of a training run that the `hf-encoders` script reports as one line (the data pipeline's are in data/errors.py;
both kinds name what to do). Kept free of heavy imports: the script reads it before any subcommand loads."""


class NonFiniteLossError(RuntimeError):
    """A training loss, gradient norm or weight became NaN or inf; the run was stopped before saving it."""
