"""Make our model types first-class Auto citizens, from one table per family.

Each family's configuration class declares `default_auto_map` ({Auto class name: "module.Class"}).
That one table drives both worlds:

* in this process, `register_family` registers the config with `AutoConfig` and every model class
  with its Auto class, so `hf_encoders` users never need `trust_remote_code`;
* in a checkpoint, the config writes the same table as its `auto_map` and `save_pretrained` copies the
  family's flat model folder next to the weights, so a process that never imported us loads any of
  the family's classes with `trust_remote_code=True` (run_glue opens an MLM checkpoint with
  `AutoModelForSequenceClassification`, hence the FULL map, not just the saved class).
"""

from types import ModuleType

import transformers
from transformers import AutoConfig, PreTrainedConfig


def register_family(config_class: type[PreTrainedConfig], modeling_module: ModuleType) -> None:
    AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    config_class.register_for_auto_class("AutoConfig")
    for auto_class_name, reference in config_class.default_auto_map.items():
        if auto_class_name == "AutoConfig":
            continue
        model_class = getattr(modeling_module, reference.split(".")[-1])
        getattr(transformers, auto_class_name).register(config_class, model_class, exist_ok=True)
        # Makes save_pretrained copy the model folder and write the auto_map into config.json.
        model_class.register_for_auto_class(auto_class_name)
