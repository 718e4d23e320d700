"""The MODELs `analyze` and `evaluate` load: folders `hf-encoders pretrain` writes that hold no model to load as they
are, and the folder to pass instead (said before they finish the others); and loading a model with only the weights
a checkpoint should have had and lacks reported."""

from pathlib import Path

from transformers.utils import logging as hf_logging

from .methods.tacl.recipe import STUDENT_FOLDER
from .training.resume import last_complete_checkpoint

logger = hf_logging.get_logger(__name__)


def model_folder_fix(model: str) -> str | None:
    """Why the local folder `model` is no model to load, naming the one to pass; None for any other (a checkpoint,
    a Hub id, a path loading reports in its own words)."""
    folder = Path(model)
    if not folder.is_dir():
        return None
    student = folder / STUDENT_FOLDER
    if (student / "config.json").is_file():
        return (
            f"{model} is a TaCL training state (student and teacher), not an encoder: pass {student}, the encoder "
            "it trained."
        )
    if (folder / "config.json").is_file():
        return None
    checkpoint = last_complete_checkpoint(folder)
    if checkpoint is not None:
        return (
            f"{model} holds the checkpoints of a run stopped before its final model: pass {checkpoint}, or finish "
            "the run first (hf-encoders pretrain ... --resume_from_checkpoint true)."
        )
    # Else loading would report a missing tokenizer package (sentencepiece) instead of the missing model.
    inside = sorted(path.name for path in folder.iterdir() if (path / "config.json").is_file())
    return f"{model} holds no model (no config.json)" + (
        f"; the models inside it: {', '.join(str(folder / name) for name in inside)}." if inside else "."
    )


def usable_models(models: list[str]) -> tuple[list[str], list[str]]:
    """(the models to go on with, one fix per other model); refused at once if no model is usable."""
    fixes = {model: fix for model in models if (fix := model_folder_fix(model))}
    if len(fixes) == len(models):
        raise ValueError(" ".join(fixes.values()))
    return [model for model in models if model not in fixes], list(fixes.values())


def skipped_models_error(done: str, fixes: list[str]) -> ValueError:
    """The error a command raises after finishing the usable models: what it did, then each fix."""
    return ValueError(f"{done}; skipped {len(fixes)} MODEL(s): {' '.join(fixes)}")


def load_model(auto_class, model_path: str, **options):
    """`auto_class.from_pretrained(model_path, **options)` without transformers' LOAD REPORT table and progress bar.
    The table lists what is expected whenever a model is built from another's checkpoint: the pre-training head left
    behind (an encoder or a task model loaded from a masked LM), a task head that is new by design, and a pooler,
    which BERT's own masked LM never had (a classifier starts it afresh, analysis reads no pooler). So only encoder
    weights the checkpoint lacks, or holds in another shape, are reported: those start from random values."""
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        model, info = auto_class.from_pretrained(model_path, output_loading_info=True, **options)
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    # A task model's encoder weights are under its base model's prefix (`bert.`); a bare encoder's are all its own.
    encoder = "" if model.base_model is model else model.base_model_prefix + "."
    lacking = [*info["missing_keys"], *(key for key, *_ in info["mismatched_keys"])]
    lacking = sorted(
        key for key in lacking if key.startswith(encoder) and "pooler" not in key.removeprefix(encoder).split(".")
    )
    if lacking:
        logger.warning(
            f"{model_path} lacks encoder weights {lacking[:6]}{' ...' if len(lacking) > 6 else ''}, which start from "
            "random values: is it a complete checkpoint of this model?"
        )
    return model
