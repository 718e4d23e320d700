"""Our model types as first-class Auto citizens, through transformers' public registration API (as its documentation
for custom models, and peft, do): `import hf_encoders` runs `register_methods`.

Each method's configuration class declares `default_auto_map` ({Auto class name: "module.Class"}). That one table
drives both worlds:

* in this process, the config is registered with `AutoConfig` and every model class with its Auto class, so
  `hf_encoders` users never need `trust_remote_code`;
* in a checkpoint, the config writes the same table as its `auto_map` and `save_pretrained` copies the method's flat
  model folder next to the weights (`register_for_auto_class`), so a process that never imported us loads any of the
  method's classes with `trust_remote_code=True` (run_glue opens an MLM checkpoint with
  `AutoModelForSequenceClassification`, hence the FULL map, not just the saved class).
"""

from importlib import import_module

import transformers

from .methods import METHODS, load


def register(config_class) -> None:
    """Register a config and the model classes its `default_auto_map` names, found in the config's model folder, and
    mark them all for `save_pretrained` to ship the folder and write the auto_map."""
    transformers.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    config_class.register_for_auto_class("AutoConfig")
    model_folder = import_module(config_class.__module__.rpartition(".")[0])
    for auto_class_name, reference in config_class.default_auto_map.items():
        if auto_class_name == "AutoConfig":
            continue
        model_class = getattr(model_folder, reference.rpartition(".")[2])
        getattr(transformers, auto_class_name).register(config_class, model_class, exist_ok=True)
        model_class.register_for_auto_class(auto_class_name)


def register_methods() -> None:
    """Register every method that has a model of its own (mlm trains transformers' BERT, which needs none)."""
    for method in METHODS.values():
        if method.config is not None:
            register(load(method.config))
