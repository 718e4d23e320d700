"""hf_encoders.data.errors is deprecated and goes in 0.4: import from hf_encoders.errors (or hf_encoders.data)."""

import warnings

from ..errors import *  # noqa: F403

warnings.warn(__doc__, FutureWarning, stacklevel=2)
