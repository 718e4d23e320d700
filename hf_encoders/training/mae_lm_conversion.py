"""hf_encoders.training.mae_lm_conversion is deprecated and goes in 0.4: import from hf_encoders.methods.mae_lm.conversion."""

import warnings

from ..methods.mae_lm.conversion import *  # noqa: F403

warnings.warn(__doc__, FutureWarning, stacklevel=2)
