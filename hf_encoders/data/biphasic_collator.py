"""hf_encoders.data.biphasic_collator is deprecated and goes in 0.4: import from hf_encoders.methods.biphasic.collator (or hf_encoders.DataCollatorForBiphasic)."""

import warnings

from ..methods.biphasic.collator import *  # noqa: F403

warnings.warn(__doc__, FutureWarning, stacklevel=2)
