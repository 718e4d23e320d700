"""hf_encoders.families is deprecated and goes in 0.4: import from the method table, hf_encoders.methods (Method, METHODS, get_method, method_of_model_type)."""

import warnings

from .methods import METHODS as FAMILIES
from .methods import Method as Family
from .methods import get_method as get_family
from .methods import load
from .methods import method_of_model_type as family_of_model_type

__all__ = ["FAMILIES", "Family", "family_of_model_type", "get_family", "load"]

warnings.warn(__doc__, FutureWarning, stacklevel=2)
