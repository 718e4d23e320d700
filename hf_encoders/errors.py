"""The errors hf-encoders raises for what a user can fix, which the `hf-encoders` script reports as one line: bad
input is a `ValueError` whose message names the fix (these subclasses say which input), and a run stopped by a NaN
loss is a `NonFiniteLossError`."""

from huggingface_hub import is_offline_mode


class CorpusError(ValueError):
    """A corpus that cannot be used as given; the message names the file or option at fault and the fix."""


class TokenizerLoadError(ValueError):
    """A tokenizer name or path that cannot be loaded; the message says what to pass instead."""


class NonFiniteLossError(RuntimeError):
    """A training loss, gradient norm or weight became NaN or inf; the run was stopped before saving it."""


def hub_unreachable_reason() -> str:
    """Why a name that is not a local path could not be fetched from the Hub, for an error message."""
    if is_offline_mode():
        return "HF_HUB_OFFLINE is set, so nothing is downloaded"
    return "it is not on the Hugging Face Hub under that name, or there is no network"
