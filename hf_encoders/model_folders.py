"""Folders `hf-encoders pretrain` writes that hold no model to load as they are, and the folder to pass instead:
what `analyze` and `evaluate` say about such a MODEL before they finish the others."""

from pathlib import Path

from .methods.tacl.recipe import STUDENT_FOLDER
from .training.resume import last_complete_checkpoint


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
