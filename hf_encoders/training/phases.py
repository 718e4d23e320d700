"""hf_encoders.training.phases is deprecated and goes in 0.4: import from hf_encoders.methods.biphasic.phases (or hf_encoders.PhaseScheduleCallback)."""

import warnings

from ..methods.biphasic.phases import *  # noqa: F403

warnings.warn(__doc__, FutureWarning, stacklevel=2)
