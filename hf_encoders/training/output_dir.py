"""The output folder of `hf-encoders pretrain`: never a mix of two runs' models, and a last line saying what is where.

A folder that held another method's model would keep that method's code beside the new config.json (and
`--push_to_hub` would upload both), so such a folder is refused unless `--overwrite_output_dir` clears what
hf-encoders wrote there before. Files the package never writes are left alone. A folder holding an earlier run's
checkpoints is refused too unless the run resumes from them: a fresh run would save its own beside them.
"""

import shutil
from pathlib import Path

from transformers import PretrainedConfig

from ..families import Family, family_of_model_type

MODELS = Path(__file__).parent.parent / "models"
# What a run writes into its output folder: Trainer's model, tokenizer, state and checkpoints, the model code every
# checkpoint carries, the card, the plots, the sentence-transformers configuration and TaCL's student.
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


def prepare_output_dir(folder: Path, family: Family, overwrite: bool, resuming: bool) -> None:
    """Refuse a folder holding another method's model (with the fix), or clear what a run wrote there before."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--output_dir {folder} is a file; pass a folder (it is created if it does not exist).")
    if not folder.is_dir():
        return
    if overwrite:
        if resuming:
            raise ValueError(
                "--overwrite_output_dir would remove the checkpoints --resume_from_checkpoint resumes from; "
                "drop one of them."
            )
        for pattern in WRITTEN_PATTERNS:
            for path in folder.glob(pattern):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        return
    model_type = saved_model_type(folder)
    if model_type is not None and model_type != family.model_type:
        held = family_of_model_type(model_type)
        raise ValueError(
            f"--output_dir {folder} holds a model of {held.title if held else 'another kind'} ({model_type!r} in "
            f"its config.json), not of {family.title}: its files would stay beside the new model's. Pass a new "
            "--output_dir, or add --overwrite_output_dir to remove what hf-encoders wrote there before."
        )
    checkpoints = sorted(path.name for path in folder.glob("checkpoint-*"))
    if checkpoints and not resuming:
        # A fresh run would save its checkpoints beside the earlier run's, and a later `--resume_from_checkpoint
        # true` takes the highest step, whichever run wrote it.
        raise ValueError(
            f"--output_dir {folder} holds the checkpoints of an earlier run ({', '.join(checkpoints)}). Add "
            "--resume_from_checkpoint true to continue it, --overwrite_output_dir to start afresh (removing them), "
            "or pass a new --output_dir."
        )


def where_line(output_dir: Path, encoder_dir: Path, plots: list[Path]) -> str:
    """The run's last line: the model to fine-tune, its card and its plots."""
    model = str(encoder_dir) if encoder_dir == output_dir else f"{encoder_dir} (training state: {output_dir})"
    shown = ", ".join(str(plot) for plot in plots) or "none"
    return f"hf-encoders pretrain: model in {model}; card {encoder_dir / 'README.md'}; plots {shown}"
