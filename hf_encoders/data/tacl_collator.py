"""hf_encoders.data.tacl_collator is deprecated and goes in 0.4: import from hf_encoders.methods.tacl.collator (or hf_encoders.DataCollatorForTacl)."""

import warnings

from ..methods.tacl.collator import *  # noqa: F403
from ..methods.tacl.collator import DataCollatorForTacl

DataCollatorForTaCL = DataCollatorForTacl

warnings.warn(__doc__, FutureWarning, stacklevel=2)
