"""`hf-encoders average CKPT [CKPT ...] --output_dir OUT [--weights W ...]`: the (weighted) mean of checkpoints of one
model, tensor by tensor, as a checkpoint that loads as each of them does (code, tokenizer and a card).

Checkpoint averaging (the mean of a run's last checkpoints, or of runs from one start) needs every checkpoint to be
one architecture in one vocabulary: the same model type and class, the same configuration, the same tokenizer and
the same tensors. Anything else is refused, with what differs.
"""

import shutil
from pathlib import Path

import torch
from huggingface_hub import ModelCard, ModelCardData
from transformers import PreTrainedModel

from hf_encoders_cli import CommandParser

from .data.tokenizer import load_tokenizer
from .export import read_config
from .training.cards import TEMPLATES, hub_reference

# config.json fields that say where or with what a checkpoint was saved, not what it is.
PROVENANCE_FIELDS = ("_name_or_path", "transformers_version", "dtype", "torch_dtype")
# What sentence-transformers reads beside the weights (training/sentence_transformers_config.py): the first
# checkpoint's is the average's.
SENTENCE_TRANSFORMERS_FILES = ("modules.json", "config_sentence_transformers.json", "sentence_bert_config.json")


def check_weights(checkpoints: list[str], weights: list[float] | None) -> list[float]:
    """The weights of the checkpoints, equal when none are given."""
    if weights is None:
        return [1.0] * len(checkpoints)
    if len(weights) != len(checkpoints):
        raise ValueError(
            f"--weights gives {len(weights)} weights for {len(checkpoints)} checkpoints: give one per checkpoint, in "
            "the same order, or none for the plain mean."
        )
    if any(weight <= 0 for weight in weights):
        raise ValueError(
            f"--weights must all be positive, got {' '.join(map(str, weights))}: leave out a checkpoint rather than "
            "weigh it 0."
        )
    return weights


def model_class(config: dict, checkpoint: str) -> type[PreTrainedModel]:
    """The class a checkpoint's config.json names (`architectures`): hf-encoders' or transformers' own."""
    import transformers

    import hf_encoders  # registers every method's model with the Auto classes, and holds their classes

    name = (config.get("architectures") or [""])[0]
    found = getattr(hf_encoders, name, None) or getattr(transformers, name, None)
    if found is None:
        raise ValueError(
            f"{checkpoint}: config.json names no model class hf-encoders or transformers has ({name}); pass folders "
            "written by save_pretrained or hf-encoders pretrain."
        )
    return found


def check_one_architecture(checkpoints: list[str], configs: list[dict]) -> None:
    first, reference = checkpoints[0], configs[0]
    for checkpoint, config in zip(checkpoints[1:], configs[1:]):
        for field, what in (("model_type", "a {!r} checkpoint"), ("architectures", "a {} model")):
            if config.get(field) != reference.get(field):
                ours, theirs = (
                    ", ".join(value) if isinstance(value, list) else value
                    for value in (reference.get(field), config.get(field))
                )
                raise ValueError(
                    f"{first} is {what.format(ours)} and {checkpoint} {what.format(theirs)}: average checkpoints of "
                    "one model type and class."
                )
        fields = sorted((set(config) | set(reference)) - set(PROVENANCE_FIELDS))
        differing = [field for field in fields if config.get(field) != reference.get(field)]
        if differing:
            shown = ", ".join(f"{field} ({reference.get(field)!r} vs {config.get(field)!r})" for field in differing)
            raise ValueError(
                f"{first} and {checkpoint} differ in {shown}: average checkpoints of one architecture and size."
            )


def check_one_vocabulary(checkpoints: list[str]):
    """The checkpoints' tokenizer, which must be one: an embedding row means its token only in its own vocabulary."""
    fix = "Average checkpoints saved with their tokenizer (hf-encoders pretrain saves it in every checkpoint)."
    tokenizers = [load_tokenizer(checkpoint, fix=fix) for checkpoint in checkpoints]
    vocabulary = tokenizers[0].get_vocab()
    for checkpoint, tokenizer in zip(checkpoints[1:], tokenizers[1:]):
        if tokenizer.get_vocab() != vocabulary:
            raise ValueError(
                f"{checkpoints[0]} and {checkpoint} have different vocabularies, so their embedding rows stand for "
                "different tokens: average checkpoints trained with one tokenizer."
            )
    return tokenizers[0]


def average_checkpoints(checkpoints: list[str], output_dir: str | Path, weights: list[float] | None = None) -> Path:
    """Write the weighted mean of `checkpoints` (weights relative: normalised to sum to 1) to `output_dir`."""
    weights = check_weights(checkpoints, weights)
    output_dir = Path(output_dir)
    if any(output_dir.resolve() == Path(checkpoint).resolve() for checkpoint in checkpoints):
        raise ValueError(f"--output_dir {output_dir} is one of the checkpoints averaged: write the average elsewhere.")
    configs = [read_config(checkpoint) for checkpoint in checkpoints]
    check_one_architecture(checkpoints, configs)
    tokenizer = check_one_vocabulary(checkpoints)
    cls = model_class(configs[0], checkpoints[0])

    model = cls.from_pretrained(checkpoints[0])
    reference = model.state_dict()
    total = sum(weights)
    # Accumulated in float64, whatever the checkpoints' dtype; integer buffers (position ids) are the first's.
    summed = {
        name: tensor.double() * (weights[0] / total) for name, tensor in reference.items() if tensor.is_floating_point()
    }
    for checkpoint, weight in zip(checkpoints[1:], weights[1:]):
        state = cls.from_pretrained(checkpoint).state_dict()  # loaded strictly: one config, so the same tensors
        for name, tensor in summed.items():
            tensor.add_(state[name].double(), alpha=weight / total)
    with torch.no_grad():
        for name, tensor in summed.items():
            reference[name].copy_(tensor)  # state_dict() shares the model's storage: this writes the model
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    copy_sentence_transformers_config(Path(checkpoints[0]), output_dir)
    write_average_card(output_dir, configs[0], checkpoints, weights)
    return output_dir


def copy_sentence_transformers_config(source: Path, output_dir: Path) -> None:
    for name in SENTENCE_TRANSFORMERS_FILES:
        if (source / name).is_file():
            shutil.copy(source / name, output_dir / name)
    for folder in source.glob("*_Pooling"):
        shutil.copytree(folder, output_dir / folder.name, dirs_exist_ok=True)


def write_average_card(output_dir: Path, config: dict, checkpoints: list[str], weights: list[float]) -> Path:
    sources = [hub_reference(checkpoint) for checkpoint in checkpoints]
    card_data = ModelCardData(
        library_name="transformers",
        license="apache-2.0",
        tags=["hf-encoders", config["model_type"], "checkpoint-average"],
        base_model=[source for source in sources if source] or None,
    )
    card = ModelCard.from_template(
        card_data,
        template_str=(TEMPLATES / "average.md").read_text(encoding="utf-8"),
        model_id=output_dir.name,
        model_type=config["model_type"],
        sources=[(checkpoint, f"{weight / sum(weights):.4g}") for checkpoint, weight in zip(checkpoints, weights)],
        weighted=len(set(weights)) > 1,
        remote_code="auto_map" in config,
    )
    path = output_dir / "README.md"
    card.save(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(
        prog="hf-encoders average",
        description="The (weighted) mean of checkpoints of one model, tensor by tensor, as a checkpoint that loads as "
        "each of them does (code, tokenizer and a card).",
    )
    parser.add_argument("checkpoints", nargs="+", metavar="CKPT", help="checkpoint folders of one model")
    parser.add_argument("--output_dir", required=True, help="the folder the average is written to")
    parser.add_argument(
        "--weights",
        nargs="+",
        type=float,
        metavar="W",
        help="a positive weight per checkpoint, in order (relative: normalised to sum to 1); default equal",
    )
    args = parser.parse_args(argv)
    output_dir = average_checkpoints(args.checkpoints, args.output_dir, args.weights)
    print(f"Averaged {len(args.checkpoints)} checkpoints into {output_dir}")
    return 0
