"""Every pre-training method of hf-encoders: one folder each, and this table of them.

A method's folder holds all of it but the model folder its checkpoints carry (`hf_encoders/models/<name>/`): its
entry here (`METHOD`, in the folder's `__init__.py`), collator, recipe (how `hf-encoders pretrain --method NAME`
trains it) and whatever else only it uses (conversions, callbacks, export). The CLI, registration with the Auto
classes, the demo, LoRA, export, the bench and the tests' method lists all read this table, so adding a method is a
method folder, a model folder, a card and its line here (CONTRIBUTING.md, "Adding a method"). The entries name
their classes as "module:attribute", imported when used.
"""

from . import biphasic, mae_lm, mlm, tacl
from .method import Method, load

# In the order the CLI, the demo and the tests list them.
METHODS: dict[str, Method] = {
    method.name: method
    for method in (
        mlm.METHOD,
        mae_lm.METHOD,
        tacl.METHOD,
        biphasic.METHOD,
    )
}


def get_method(name: str) -> Method:
    """The method `--method NAME` names; `mae-lm` is read as `mae_lm`, since command lines favour hyphens."""
    method = METHODS.get(name.replace("-", "_"))
    if method is None:
        raise ValueError(f"Unknown --method {name!r}; choose one of {', '.join(METHODS)}.")
    return method


def method_of_model_type(model_type: str | None) -> Method | None:
    return next((method for method in METHODS.values() if method.model_type == model_type), None)


__all__ = ["METHODS", "Method", "get_method", "load", "method_of_model_type"]
