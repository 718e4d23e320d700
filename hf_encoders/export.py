"""`hf-encoders export CHECKPOINT OUTPUT_DIR`: a checkpoint that stock scripts load with no remote code.

- a TaCL checkpoint exports its student (with its MLM head, and NSP head when present) as a plain
  `bert` / `roberta` / `modernbert` checkpoint;
- a biphasic checkpoint exports to transformers' native `eurobert` classes, where that is exact.

Which families export, and how, is their `exporter` in `hf_encoders.families`.
"""

import argparse
import json
from pathlib import Path

import torch
import transformers
from transformers import AutoTokenizer, EuroBertConfig, PreTrainedModel, PreTrainedTokenizerBase

from .data.tokenizer import load_tokenizer
from .families import FAMILIES, family_of_model_type, load
from .models import biphasic as biphasic_models
from .models.tacl import TaclForPreTraining
from .training.conversion import LLAMA_FIELDS

# The transformers class each biphasic class is exactly equal to (the pre-training model exports its masked LM).
EUROBERT_CLASSES = {
    "BiphasicEncoder": "EuroBertModel",
    "BiphasicEncoderForPreTraining": "EuroBertForMaskedLM",
    "BiphasicEncoderForMaskedLM": "EuroBertForMaskedLM",
    "BiphasicEncoderForSequenceClassification": "EuroBertForSequenceClassification",
    "BiphasicEncoderForTokenClassification": "EuroBertForTokenClassification",
}


def to_eurobert(model: PreTrainedModel) -> PreTrainedModel:
    """A biphasic model as transformers' native EuroBERT class (no remote code needed to load it), with equal
    outputs. EuroBERT is always bidirectional, as every biphasic model is at fine-tuning.

    Exact for the encoder, the (pre-training or masked) LM, token classification, and sequence classification
    with "mean" or "cls" pooling. Note that EuroBERT gives its embedding a `padding_idx`: where pad = EOS,
    further training of the export leaves the EOS row frozen.
    """
    eurobert_class = EUROBERT_CLASSES.get(type(model).__name__)
    if eurobert_class is None:
        raise ValueError(
            f"transformers has no EuroBERT class equivalent to {type(model).__name__}; keep the remote-code checkpoint."
        )
    config = model.config
    pooling = {"mean": "mean", "cls": "bos"}.get(config.classifier_pooling)
    if pooling is None and eurobert_class == "EuroBertForSequenceClassification":
        raise ValueError("EuroBERT has no 'last' pooling; only 'mean' and 'cls' classifiers export exactly.")
    fields = {name: getattr(config, name) for name in (*LLAMA_FIELDS, "rope_parameters", "attention_bias", "mlp_bias")}
    task = {name: getattr(config, name) for name in ("id2label", "label2id", "problem_type")}
    mask = {} if config.mask_token_id is None else {"mask_token_id": config.mask_token_id}
    eurobert_config = EuroBertConfig(**fields, **task, **mask, classifier_pooling=pooling or "mean")
    exported = getattr(transformers, eurobert_class)(eurobert_config).to(model.dtype).eval()
    state = model.state_dict()
    if config.mlp_bias and hasattr(exported, "lm_head"):
        # EuroBERT's LM head takes a bias when the MLP does; ours never has one, so zero is exact.
        state["lm_head.bias"] = torch.zeros_like(exported.lm_head.bias)
    exported.load_state_dict(state, strict=True)
    return exported


def export_biphasic(checkpoint: str, output_dir: Path) -> None:
    # The saved class (encoder, masked LM, a task head) decides which EuroBERT class it becomes.
    saved_class = getattr(biphasic_models, read_config(checkpoint)["architectures"][0])
    to_eurobert(saved_class.from_pretrained(checkpoint)).save_pretrained(output_dir)
    AutoTokenizer.from_pretrained(checkpoint).save_pretrained(output_dir)


def export_student(
    checkpoint: str | Path, output_dir: str | Path, tokenizer: PreTrainedTokenizerBase | str | Path | None = None
) -> Path:
    """Write the student of a TaCL checkpoint (a Trainer output or checkpoint-N folder) as a plain checkpoint of
    its own model type, with the tokenizer, so run_glue / run_qa fine-tune it without trust_remote_code.

    The tokenizer is `tokenizer` (object or path), else the one saved in `checkpoint` (as `hf-encoders pretrain` and
    a Trainer given `processing_class=tokenizer` save it).
    """
    if tokenizer is None:
        if not (Path(checkpoint) / "tokenizer_config.json").exists():
            raise ValueError(
                f"{checkpoint} holds no tokenizer; pass export_student(..., tokenizer=...) the tokenizer of the encoder "
                "TaCL started from (its model card names it), or save it into the checkpoint with "
                "tokenizer.save_pretrained."
            )
        tokenizer = checkpoint
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        tokenizer = load_tokenizer(tokenizer, fix="Pass the tokenizer of the encoder TaCL started from.")
    model = TaclForPreTraining.from_pretrained(checkpoint)
    model.save_student(output_dir, tokenizer=tokenizer)
    return Path(output_dir)


def read_config(checkpoint: str) -> dict:
    config_file = Path(checkpoint) / "config.json"
    if not config_file.exists():
        raise ValueError(
            f"{checkpoint}: no config.json; pass a folder written by save_pretrained or hf-encoders pretrain."
        )
    return json.loads(config_file.read_text())


def export(checkpoint: str, output_dir: str | Path) -> Path:
    model_type = read_config(checkpoint).get("model_type")
    family = family_of_model_type(model_type)
    if family is None or family.exporter is None:
        exporting = ", ".join(name for name, family in FAMILIES.items() if family.exporter)
        why = f" {family.export_note[0].upper()}{family.export_note[1:]}." if family is not None else ""
        raise ValueError(f"{checkpoint} is a {model_type!r} checkpoint; export handles {exporting}.{why}")
    output_dir = Path(output_dir)
    load(family.exporter)(checkpoint, output_dir)
    return output_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hf-encoders export", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a TaCL or biphasic checkpoint folder")
    parser.add_argument("output_dir")
    args = parser.parse_args(argv)
    print(f"Exported to {export(args.checkpoint, args.output_dir)}")
    return 0
