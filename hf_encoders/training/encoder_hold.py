"""hf_encoders.training.encoder_hold is deprecated and goes in 0.4: import from hf_encoders.methods.mae_lm.encoder_hold (or hf_encoders.EncoderHoldCallback)."""

import warnings

from ..methods.mae_lm.encoder_hold import *  # noqa: F403

warnings.warn(__doc__, FutureWarning, stacklevel=2)
