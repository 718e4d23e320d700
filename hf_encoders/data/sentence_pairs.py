"""hf_encoders.data.sentence_pairs is deprecated and goes in 0.4: import from hf_encoders.methods.tacl.sentence_pairs."""

import warnings

from ..methods.tacl.sentence_pairs import *  # noqa: F403

warnings.warn(__doc__, FutureWarning, stacklevel=2)
