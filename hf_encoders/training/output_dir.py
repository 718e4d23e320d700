"""The output folder of `hf-encoders pretrain`: never a mix of two runs' models, and a last line saying what is where.

A folder that held another method's model would keep that method's code beside the new config.json (and
`--push_to_hub` would upload both), so such a folder is refused unless `--overwrite_output_dir` clears what
hf-encoders wrote there before. Files the package never writes are left alone. A folder holding an earlier run's
checkpoints is refused too unless the run resumes from one of them.
"""

import json
import shutil
from pathlib import Path

from transformers import PretrainedConfig
from transformers.utils import logging

from ..methods import Method, method_of_model_type
from .resume import complete_checkpoints

logger = logging.get_logger(__name__)

MODELS = Path(__file__).parent.parent / "models"
# What a run writes into its output folder: Trainer's model, tokenizer, state and checkpoints, the model code every
# checkpoint carries, the card, the plots, the sentence-transformers configuration, TaCL's student and the moving
# average of the weights (--ema_decay).
WRITTEN_PATTERNS = (
    "config.json",
    "generation_config.json",
    "model*.safetensors*",
    "pytorch_model*.bin*",
    "training_args.bin",
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "chat_template.*",
    "README.md",
    "log_history.json",
    "loss_curve.png",
    "diagnostics.png",
    "modules.json",
    "config_sentence_transformers.json",
    "sentence_bert_config.json",
    "1_Pooling",
    "checkpoint-*",
    "student",
    "ema",
    "runs",
    *sorted({path.name for path in MODELS.glob("*/*.py")} - {"__init__.py"}),
)


def saved_model_type(folder: Path) -> str | None:
    """The model type a folder's model (or, before its final save, its last checkpoint) declares."""
    configs = [folder / "config.json", *sorted(folder.glob("checkpoint-*/config.json"))]
    for config in configs:
        if config.is_file():
            return PretrainedConfig.get_config_dict(str(config.parent))[0].get("model_type")
    return None


def prepare_output_dir(folder: Path, method: Method, overwrite: bool, resume_checkpoint: str | None) -> None:
    """Refuse a folder holding another method's model, or checkpoints of a run this one does not continue (with the
    fix), or clear what a run wrote there before."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--output_dir {folder} is a file; pass a folder (it is created if it does not exist).")
    if not folder.is_dir():
        return
    if overwrite:
        if resume_checkpoint is not None:
            raise ValueError(
                "--overwrite_output_dir would remove the checkpoints --resume_from_checkpoint resumes from; "
                "drop one of them."
            )
        for pattern in WRITTEN_PATTERNS:
            for path in folder.glob(pattern):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        return
    model_type = saved_model_type(folder)
    if model_type is not None and model_type != method.model_type:
        held = method_of_model_type(model_type)
        raise ValueError(
            f"--output_dir {folder} holds a model of {held.title if held else 'another kind'} ({model_type!r} in "
            f"its config.json), not of {method.title}: its files would stay beside the new model's. Pass a new "
            "--output_dir, or add --overwrite_output_dir to remove what hf-encoders wrote there before."
        )
    check_earlier_checkpoints(folder, resume_checkpoint)


def check_earlier_checkpoints(folder: Path, resume_checkpoint: str | None) -> None:
    """Refuse the checkpoints of a run this one does not continue: its own would be saved beside them, and
    `--resume_from_checkpoint true` takes the highest step, whichever run wrote it. One interrupted while being written
    does not count: no run resumes from it, and the run that reaches its step writes over it."""
    complete = complete_checkpoints(folder)
    if not complete:
        return
    held = complete[-1].name if len(complete) == 1 else f"{len(complete)} checkpoints up to {complete[-1].name}"
    if resume_checkpoint is None:
        raise ValueError(
            f"--output_dir {folder} holds the checkpoints of an earlier run ({held}). Add --resume_from_checkpoint "
            "true to continue it, --overwrite_output_dir to start afresh (removing what hf-encoders wrote there), or "
            "pass a new --output_dir."
        )
    if Path(resume_checkpoint).resolve().parent != folder.resolve():
        raise ValueError(
            f"--output_dir {folder} holds the checkpoints of another run ({held}) than the one this run resumes from "
            f"({resume_checkpoint}); resume into a new --output_dir, or remove them."
        )
    resumed_step = trained_step(Path(resume_checkpoint))
    later = [checkpoint.name for checkpoint in complete if trained_step(checkpoint) > resumed_step]
    if later:  # going back to an earlier checkpoint is a way to leave a diverged run: allowed, and said
        logger.warning(
            f"Resuming from {resume_checkpoint}, an earlier checkpoint than {', '.join(later)}: each stays until this "
            "run saves the same step over it, and --resume_from_checkpoint true takes the highest step meanwhile."
        )


def trained_step(checkpoint: Path) -> int:
    return json.loads((checkpoint / "trainer_state.json").read_text())["global_step"]


def where_line(output_dir: Path, encoder_dir: Path, plots: list[Path], average_dir: Path | None = None) -> str:
    """The run's last line: the model to fine-tune, its card, its plots and the moving average (--ema_decay)."""
    model = str(encoder_dir) if encoder_dir == output_dir else f"{encoder_dir} (training state: {output_dir})"
    shown = ", ".join(str(plot) for plot in plots) or "none"
    average = "" if average_dir is None else f"; moving average in {average_dir}"
    return f"hf-encoders pretrain: model in {model}; card {encoder_dir / 'README.md'}; plots {shown}{average}"
