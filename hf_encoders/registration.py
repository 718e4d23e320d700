"""Make our model types first-class Auto citizens, from one table per family, without importing them on `import
hf_encoders`.

Each family's configuration class declares `default_auto_map` ({Auto class name: "module.Class"}).
That one table drives both worlds:

* in this process, `register_family` registers the config with `AutoConfig` and every model class
  with its Auto class, so `hf_encoders` users never need `trust_remote_code`;
* in a checkpoint, the config writes the same table as its `auto_map` and `save_pretrained` copies the
  family's flat model folder next to the weights, so a process that never imported us loads any of
  the family's classes with `trust_remote_code=True` (run_glue opens an MLM checkpoint with
  `AutoModelForSequenceClassification`, hence the FULL map, not just the saved class).

Registering needs the classes, and importing a family costs torch and transformers' modeling code (seconds), so
`register_families` defers both: transformers' Auto tables (`_extra_content`, where `register` writes) are made to
register a family the first time a lookup asks for its model type, and a family's classes are marked for
`save_pretrained` as soon as its model folder is imported, however it is imported. Neither transformers nor the
families are imported until they are used; every Auto lookup still sees every family.
"""

import sys
from collections.abc import Callable
from functools import partial
from importlib import import_module
from importlib.abc import MetaPathFinder
from types import ModuleType

from .families import FAMILIES, load

# transformers' modules holding the Auto tables: AutoConfig's, and every AutoModel* class's.
CONFIG_TABLES = "transformers.models.auto.configuration_auto"
MODEL_TABLES = "transformers.models.auto.modeling_auto"


def register_family(config_class) -> None:
    """Register a config and the model classes its `default_auto_map` names, found in the config's model folder."""
    import transformers
    from transformers import AutoConfig

    AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    model_folder = import_module(config_class.__module__.rpartition(".")[0])
    for auto_class_name, model_class in _model_classes(config_class, model_folder):
        getattr(transformers, auto_class_name).register(config_class, model_class, exist_ok=True)


def ship_code_with_checkpoints(config_class, model_folder: ModuleType) -> None:
    """Make `save_pretrained` copy the model folder next to the weights and write the auto_map into config.json."""
    config_class.register_for_auto_class("AutoConfig")
    for auto_class_name, model_class in _model_classes(config_class, model_folder):
        model_class.register_for_auto_class(auto_class_name)


def _ship_folder_code(config_name: str, model_folder: ModuleType) -> None:
    ship_code_with_checkpoints(getattr(model_folder, config_name), model_folder)


def _model_classes(config_class, model_folder: ModuleType):
    for auto_class_name, reference in config_class.default_auto_map.items():
        if auto_class_name != "AutoConfig":
            yield auto_class_name, getattr(model_folder, reference.rpartition(".")[2])


# Model types registered on their first lookup: {model_type: "module:ConfigClass"}.
_unregistered: dict[str, str] = {}


def _register(model_type: str) -> None:
    register_family(load(_unregistered.pop(model_type)))  # popped first: registering writes into these tables


def _register_all() -> None:
    for model_type in list(_unregistered):
        _register(model_type)


class _RegistersOnLookup(dict):
    """An Auto table's `_extra_content` (transformers' dict of registered classes: model type -> config class for
    AutoConfig, config class -> model class for the others) that registers a family of ours when a lookup names its
    model type, and all of them before the table is listed. Lookups of other models import nothing of ours."""

    @staticmethod
    def _before_lookup(key) -> None:
        model_type = key if isinstance(key, str) else getattr(key, "model_type", None)
        if model_type in _unregistered:
            _register(model_type)

    def __contains__(self, key) -> bool:
        self._before_lookup(key)
        return super().__contains__(key)

    def __getitem__(self, key):
        self._before_lookup(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._before_lookup(key)
        return super().get(key, default)

    def keys(self):
        _register_all()
        return super().keys()

    def values(self):
        _register_all()
        return super().values()

    def items(self):
        _register_all()
        return super().items()

    def __iter__(self):
        _register_all()
        return super().__iter__()

    def __len__(self) -> int:
        _register_all()
        return super().__len__()


def _register_on_lookup(table_class_name: str, tables: ModuleType) -> None:
    """Swap `_extra_content` of every Auto table in `tables` (transformers' module) for one that registers us.
    The table class is read from `tables` itself, never imported: configuration_auto loads while auto_factory is
    still half-initialised (`from transformers import AutoModelFor...` imports them in that order)."""
    table_class = getattr(tables, table_class_name)
    for table in vars(tables).values():
        if isinstance(table, table_class) and type(table._extra_content) is dict:
            table._extra_content = _RegistersOnLookup(table._extra_content)


class _AfterImport(MetaPathFinder):
    """Runs callbacks on a module right after it is first imported (a post-import hook, as `wrapt.importer` does):
    it finds nothing itself, it only wraps the loader that the other finders return."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callable[[ModuleType], None]]] = {}

    def find_spec(self, name, path, target=None):
        if name not in self.callbacks:
            return None
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
                continue
            spec = find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader_exec_module = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            loader_exec_module(module)
            callbacks = self.callbacks.pop(name, ())
            if not self.callbacks and self in sys.meta_path:  # nothing left to watch: out of every later import
                sys.meta_path.remove(self)
            for callback in callbacks:
                callback(module)

        spec.loader.exec_module = exec_module  # this spec's own loader instance, made for this import
        return spec


_after_import = _AfterImport()


def when_imported(module_name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call `callback(module)` now if `module_name` is imported, else right after it is."""
    module = sys.modules.get(module_name)
    if module is not None:
        callback(module)
        return
    _after_import.callbacks.setdefault(module_name, []).append(callback)
    if _after_import not in sys.meta_path:
        sys.meta_path.insert(0, _after_import)


def register_families() -> None:
    """Register every family with the Auto classes when transformers' Auto tables load (or now, if they have), each
    family itself on its first lookup; mark its classes for `save_pretrained` when its model folder loads."""
    for family in FAMILIES.values():
        if family.config is not None:
            _unregistered[family.model_type] = family.config
            folder_name, _, config_name = family.config.partition(":")
            when_imported(folder_name, partial(_ship_folder_code, config_name))
    when_imported(CONFIG_TABLES, partial(_register_on_lookup, "_LazyConfigMapping"))
    when_imported(MODEL_TABLES, partial(_register_on_lookup, "_LazyAutoMapping"))
