"""hf_encoders.training.conversion is deprecated and goes in 0.4: import from hf_encoders.methods.biphasic.conversion."""

import warnings

from ..methods.biphasic.conversion import *  # noqa: F403

warnings.warn(__doc__, FutureWarning, stacklevel=2)
