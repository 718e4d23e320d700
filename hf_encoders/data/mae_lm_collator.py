"""hf_encoders.data.mae_lm_collator is deprecated and goes in 0.4: import from hf_encoders.methods.mae_lm.collator (or hf_encoders.DataCollatorForMaeLm)."""

import warnings

from ..methods.mae_lm.collator import *  # noqa: F403

warnings.warn(__doc__, FutureWarning, stacklevel=2)
