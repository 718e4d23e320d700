"""Make our model types first-class Auto citizens, from one table per family.

Each family's configuration class declares `default_auto_map` ({Auto class name: "module.Class"}).
That one table drives both worlds:

* in this process, `register_families` registers the config with `AutoConfig` and every model class
  with its Auto class, so `hf_encoders` users never need `trust_remote_code`;
* in a checkpoint, the config writes the same table as its `auto_map` and `save_pretrained` copies the
  family's flat model folder next to the weights, so a process that never imported us loads any of
  the family's classes with `trust_remote_code=True` (run_glue opens an MLM checkpoint with
  `AutoModelForSequenceClassification`, hence the FULL map, not just the saved class).
"""

from importlib import import_module

import transformers
from transformers import AutoConfig, PreTrainedConfig

from .families import FAMILIES, load


def register_family(config_class: type[PreTrainedConfig]) -> None:
    """Register a config and the model classes its `default_auto_map` names, found in the config's model folder."""
    AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    config_class.register_for_auto_class("AutoConfig")
    model_folder = import_module(config_class.__module__.rpartition(".")[0])
    for auto_class_name, reference in config_class.default_auto_map.items():
        if auto_class_name == "AutoConfig":
            continue
        model_class = getattr(model_folder, reference.rpartition(".")[2])
        getattr(transformers, auto_class_name).register(config_class, model_class, exist_ok=True)
        # Makes save_pretrained copy the model folder and write the auto_map into config.json.
        model_class.register_for_auto_class(auto_class_name)


def register_families() -> None:
    for family in FAMILIES.values():
        if family.config is not None:
            register_family(load(family.config))
