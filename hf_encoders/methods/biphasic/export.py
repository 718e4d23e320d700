"""A biphasic checkpoint as transformers' native EuroBERT classes, where that is exact: `hf-encoders export` of a
biphasic checkpoint, which stock scripts then load with no remote code."""

from pathlib import Path

import torch
import transformers
from transformers import AutoTokenizer, EuroBertConfig, PreTrainedModel

from ...export import read_config
from ...models import biphasic as biphasic_models
from .conversion import LLAMA_FIELDS

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
