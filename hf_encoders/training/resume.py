"""Resuming: only from a checkpoint Trainer finished writing.

Trainer 5.23 writes `checkpoint-N` in place (weights, optimizer, scheduler, RNG state, then trainer_state.json),
and `get_last_checkpoint` picks the highest N whatever its state, so a run killed while saving would resume from
a half-written folder. `trainer_state.json` is written after everything `resume_from_checkpoint` reads, so a
folder without it is partial and skipped.
"""

import re
import shutil
from pathlib import Path

from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

CHECKPOINT_PATTERN = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")


def complete_checkpoints(output_dir: str | Path) -> list[Path]:
    """The checkpoint-N folders of `output_dir` that Trainer finished writing, by step."""
    complete = [
        (int(match.group(1)), path)
        for path in Path(output_dir).glob(f"{PREFIX_CHECKPOINT_DIR}-*")
        if (match := CHECKPOINT_PATTERN.match(path.name)) and (path / "trainer_state.json").is_file()
    ]
    return [path for _, path in sorted(complete)]


def last_complete_checkpoint(output_dir: str | Path) -> Path | None:
    complete = complete_checkpoints(output_dir)
    return complete[-1] if complete else None


# What Trainer saves of the optimizer in a checkpoint (optimizer.pt; a folder or one file per rank under FSDP).
OPTIMIZER_STATE = "optimizer*"


def drop_optimizer_state(checkpoint: Path) -> int:
    """Remove the optimizer state of `checkpoint`; returns the bytes freed."""
    freed = 0
    for path in checkpoint.glob(OPTIMIZER_STATE):
        files = [path] if path.is_file() else [file for file in path.rglob("*") if file.is_file()]
        freed += sum(file.stat().st_size for file in files)
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return freed


def check_optimizer_state(checkpoint: str) -> None:
    """A checkpoint whose optimizer state a finished run dropped cannot be continued exactly: Trainer would start a
    new optimizer without a word."""
    if not any(Path(checkpoint).glob(OPTIMIZER_STATE)):
        raise ValueError(
            f"{checkpoint} holds no optimizer state: it is the last checkpoint of a finished run, which drops it "
            "unless --keep_optimizer_state. Continue its model with a new optimizer instead: --model_name_or_path "
            f"{checkpoint}, in a new --output_dir."
        )


def resolve_resume(resume_from_checkpoint: str | bool | None, output_dir: str | Path) -> str | None:
    """`True` / "true" (HfArgumentParser passes a string) means the last COMPLETE checkpoint in `output_dir`."""
    if resume_from_checkpoint in (None, False, "false", "False", ""):
        return None
    if resume_from_checkpoint in (True, "true", "True"):
        checkpoint = last_complete_checkpoint(output_dir)
        if checkpoint is None:
            raise ValueError(
                f"--resume_from_checkpoint asks to resume, but {output_dir} holds no complete checkpoint "
                "(a checkpoint-N folder with trainer_state.json); start without it or pass a checkpoint path."
            )
        return str(checkpoint)
    if not (Path(resume_from_checkpoint) / "trainer_state.json").is_file():
        raise ValueError(
            f"{resume_from_checkpoint} is not a complete Trainer checkpoint (no trainer_state.json): it was "
            "interrupted while being written or is not a checkpoint folder; resume from an earlier checkpoint-N."
        )
    return str(resume_from_checkpoint)
