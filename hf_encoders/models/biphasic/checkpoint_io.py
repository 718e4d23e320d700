# Copied from hf_encoders/models/_shared/checkpoint_io.py; edit the source, then run `python utils/check_copies.py --fix_and_overwrite`.
"""Checkpoint reading and writing shared by every model of hf-encoders: a strict `from_pretrained`, and a
`save_pretrained` that writes the same checkpoint whether or not the model is sharded by FSDP2.

Each model folder must stay flat (it is copied next to the weights and loaded with `trust_remote_code` where
hf_encoders is not installed), so it cannot import a common module. Each folder therefore holds a copy of this file
(utils/check_copies.py keeps them equal to it), which `save_pretrained` copies into every checkpoint. It also holds `raise_without_package`, for the late imports through which a model class reaches the conversions that
the package keeps out of the checkpoints.
"""

import sys
from contextlib import contextmanager
from pathlib import Path

from transformers import AutoConfig, PreTrainedConfig
from transformers.utils import logging


class CheckpointMixin:
    """Put before `PreTrainedModel` in the bases. Loading refuses, with a `ValueError` that names the fix: another
    model's checkpoint, a corrupt weights file, and any missing, unexpected or mis-shaped weight beyond what the
    class declares it may leave unread (`_keys_to_ignore_on_load_unexpected`) or initialise (`_new_head_prefixes`).
    The reference implementations load with `strict=False`, so a misnamed key silently trains from random weights.
    """

    model_description: str  # completes "holds a 'bert' model, not ...": "an MAE-LM one", "a TaCL training state"
    # Parameter-name prefixes of a task head's fresh weights: the only weights that may be missing.
    _new_head_prefixes: tuple[str, ...] = ()
    # Whether `ignore_mismatched_sizes=True` may re-initialise mis-shaped weights (a head with a new label count).
    _allow_ignore_mismatched_sizes = True

    @classmethod
    def foreign_checkpoint_fix(cls, model_type: str) -> str:
        return "load it with its own model's class (the Auto classes read config.json)"

    @classmethod
    def misfit_fix(cls) -> str:
        return "Check that it was saved with the same configuration, and load it without overriding its sizes."

    def after_strict_load(self) -> None:
        """Runs on the loaded model (e.g. TaCL re-freezes its teacher: loading creates parameters that train)."""

    def save_pretrained(self, save_directory, *args, **kwargs):
        """transformers' `save_pretrained`, also for a model sharded by FSDP2 (what Trainer's `save_model` calls, with
        the gathered `state_dict`). `fully_shard` swaps the instance's class for `FSDP<Name>`, a subclass torch
        defines on the fly; transformers would write that class into `architectures` and `auto_map` and copy ITS
        module, torch's FSDP file, instead of the model folder. So save under the model's own class."""
        sharded_class = type(self)
        own_class = unsharded_class(sharded_class)
        if own_class is sharded_class:
            return super().save_pretrained(save_directory, *args, **kwargs)
        self.__class__ = own_class
        try:
            return super().save_pretrained(save_directory, *args, **kwargs)
        finally:
            self.__class__ = sharded_class

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        want_loading_info = kwargs.pop("output_loading_info", False)
        checkpoint = args[0] if args else kwargs.get("pretrained_model_name_or_path")
        found = checkpoint_model_type(checkpoint, kwargs)
        if found is not None and found != cls.config_class.model_type:
            raise ValueError(
                f"{str(checkpoint)!r} holds a {found!r} model, not {cls.model_description} (model_type "
                f"{cls.config_class.model_type!r}), so its weights cannot fill {cls.__name__}: {cls.foreign_checkpoint_fix(found)}."
            )
        # Transformers raises a bare RuntimeError on shape mismatches: collect them to report with the rest.
        tolerate_mismatch = kwargs.pop("ignore_mismatched_sizes", False) and cls._allow_ignore_mismatched_sizes
        try:
            model, info = super().from_pretrained(
                *args, output_loading_info=True, ignore_mismatched_sizes=True, **kwargs
            )
        except Exception as error:
            if type(error).__name__ != "SafetensorError":
                raise
            raise unreadable_weights_error(checkpoint, kwargs, error) from error
        problems = {
            "missing": [key for key in info["missing_keys"] if not key.startswith(cls._new_head_prefixes)],
            "unexpected": list(info["unexpected_keys"]),
            "mis-shaped": []
            if tolerate_mismatch
            else [
                f"{key}: checkpoint {tuple(saved)} vs model {tuple(built)}"
                for key, saved, built in info["mismatched_keys"]
            ],
        }
        if any(problems.values()):
            details = "; ".join(f"{kind}: {sorted(keys)[:8]}" for kind, keys in problems.items() if keys)
            raise ValueError(
                f"The checkpoint {str(checkpoint)!r} does not fit {cls.__name__} ({details}). {cls.misfit_fix()}"
            )
        model.after_strict_load()
        return (model, info) if want_loading_info else model


@contextmanager
def quiet_loading():
    """transformers' loading output silenced (its LOAD REPORT table, and "This checkpoint seem corrupted" for an
    encoder saved without its MLM head), where the caller checks the loading info and says what matters itself."""
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)


def load_encoder_config(name_or_path, what_to_pass: str) -> PreTrainedConfig:
    """The config of the encoder to start from; where none loads, a ValueError saying whether the folder exists and
    what to pass instead (`what_to_pass`, completing "Pass ...")."""
    try:
        return AutoConfig.from_pretrained(name_or_path)
    except OSError as error:
        exists = Path(str(name_or_path)).exists()
        place = "The folder holds no loadable config.json" if exists else "There is no such folder"
        raise ValueError(
            f"Cannot load an encoder from {str(name_or_path)!r}. {place}, and it did not load as a Hub model either "
            f"({error}). Pass {what_to_pass}."
        ) from error


def check_encoder_weights(name_or_path, model, loading_info: dict, in_encoder) -> None:
    """A ValueError when `loading_info` (from `from_pretrained(..., output_loading_info=True)`) shows encoder weights
    missing, unexpected or mis-shaped; `in_encoder(key)` tells encoder keys from heads and poolers, which a checkpoint
    may lack or carry unused."""
    problems = {
        "missing": [key for key in loading_info["missing_keys"] if in_encoder(key)],
        "unexpected": [key for key in loading_info["unexpected_keys"] if in_encoder(key)],
        "mis-shaped": [str(entry) for entry in loading_info["mismatched_keys"]],
    }
    if any(problems.values()):
        details = "; ".join(f"{kind}: {sorted(keys)[:8]}" for kind, keys in problems.items() if keys)
        raise ValueError(
            f"{str(name_or_path)!r} does not fit {type(model).__name__} ({details}); is it a complete encoder checkpoint?"
        )


def unsharded_class(model_class: type) -> type:
    """The class FSDP2 derived `model_class` from (its bases are `(FSDPModule, own class)`), else `model_class`."""
    # Not imported: where nothing imported FSDP nothing is sharded, and some torch builds lack torch.distributed.
    fsdp = sys.modules.get("torch.distributed.fsdp")
    if fsdp is not None and issubclass(model_class, fsdp.FSDPModule):
        return next(base for base in model_class.__bases__ if base is not fsdp.FSDPModule)
    return model_class


def checkpoint_model_type(checkpoint, load_kwargs: dict) -> str | None:
    """The `model_type` in a checkpoint's config.json, read before any weight; None where there is nothing to read
    (no path, no config.json: `from_pretrained` then reports what is missing in its own words)."""
    if checkpoint is None:
        return None
    hub_names = ("cache_dir", "force_download", "local_files_only", "token", "revision", "subfolder")
    hub_kwargs = {name: load_kwargs[name] for name in hub_names if name in load_kwargs}
    try:
        config_dict, _ = PreTrainedConfig.get_config_dict(checkpoint, **hub_kwargs)
    except (OSError, ValueError):
        return None
    return config_dict.get("model_type")


def unreadable_weights_error(checkpoint, load_kwargs: dict, error: Exception) -> ValueError:
    """safetensors' bare "Error while deserializing header" as an error naming the file and the fix."""
    folder = Path(str(checkpoint), load_kwargs.get("subfolder") or "")
    files = sorted(str(path) for path in folder.glob("*.safetensors")) if folder.is_dir() else []
    where = " or ".join(files) if files else f"the weights of {str(checkpoint)!r}"
    return ValueError(
        f"Cannot read {where} ({type(error).__name__}: {error}): the weights file is corrupt or truncated (an "
        "interrupted download or save, or not a safetensors file); re-download or re-save the checkpoint."
    )


def raise_without_package(purpose: str, error: ModuleNotFoundError):
    """Raise the error of a failed late import of the hf-encoders package, in a model class's conversion classmethod.

    Conversion is a tool of the package (transformers keeps such code in convert_*.py scripts), which checkpoints do
    not carry, so a model file imports it inside the classmethod, in a `try` block: transformers' check of a remote
    file's imports skips `try` blocks, and the file loads where the package is not installed. There, this says what
    to install; where the package is there and a dependency of it is not, it raises that error as it is."""
    if (error.name or "").partition(".")[0] != "hf_encoders":
        raise error
    raise ImportError(f"{purpose} is a tool of the hf-encoders package: `pip install hf-encoders`.") from error
