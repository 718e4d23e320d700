"""What 0.3 moved keeps its 0.2 name for one release, with a FutureWarning saying where it is now."""

import warnings

from .methods.method import load


def moved_attribute(module: str, name: str, moved: dict[str, str]):
    """For a module's `__getattr__`: the object `moved[name]` ("package.module:attribute") refers to, with a warning;
    an AttributeError for a name that never was the module's."""
    if name not in moved:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new = moved[name].replace(":", ".")
    warnings.warn(f"{module}.{name} is deprecated and goes in 0.4: use {new}.", FutureWarning, stacklevel=3)
    return load(moved[name])
