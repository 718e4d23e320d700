"""From a causal LM's checkpoint to a biphasic encoder checkpoint (`hf-encoders convert --from-causal-lm PATH OUT`),
and the tokenizer fixes biphasic training needs, shared with the biphasic recipe."""

from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..data.tokenizer import load_tokenizer
from ..models.biphasic import BiphasicEncoderForPreTraining
from ..models.biphasic.modeling_biphasic import causal_lm_location

# The paper's spelling (Llama-3's <|reserved_special_token_0|> renamed); added where a vocabulary has no mask.
MASK_TOKEN = "<|mask|>"


def prepare_tokenizer(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """In place: an EOS to join packed documents, pad = EOS (the paper's choice) and a mask token for MLM.

    A WordPiece tokenizer trained on the spot has no EOS; its [SEP] takes the role. A causal LM's vocabulary
    usually has no mask token: `MASK_TOKEN` is added, so the model needs `fit_model_to_tokenizer` afterwards.
    """
    if tokenizer.eos_token is None:
        if tokenizer.sep_token is None:
            raise ValueError(
                f"The tokenizer {type(tokenizer).__name__} has neither EOS nor [SEP] to separate packed documents."
            )
        tokenizer.eos_token = tokenizer.sep_token
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.mask_token is None:
        tokenizer.add_special_tokens({"mask_token": MASK_TOKEN})
    return tokenizer


def fit_model_to_tokenizer(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    """Grow the embeddings (and LM head) to cover tokens the tokenizer added, and copy its special ids."""
    if len(tokenizer) > model.config.vocab_size:
        model.resize_token_embeddings(len(tokenizer))
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "mask_token_id"):
        setattr(model.config, name, getattr(tokenizer, name))
    return model


def load_causal_lm_tokenizer(name_or_path: str) -> PreTrainedTokenizerBase:
    """The tokenizer of a causal LM folder, Hub name or `.gguf` file, prepared for biphasic training."""
    location, gguf = causal_lm_location(name_or_path)
    fix = "Pass a Llama-family causal LM's folder, `.gguf` file or Hub name (biphasic --init, or convert)."
    return prepare_tokenizer(load_tokenizer(location, fix=fix, **gguf))


def convert_causal_lm(name_or_path: str, out_dir: str | Path, **load_kwargs) -> Path:
    """Write a `BiphasicEncoderForPreTraining` checkpoint (weights, config with the full auto_map, model code,
    tokenizer with pad and mask tokens) converted from a Llama-family causal LM. Returns `out_dir`.

    `load_kwargs` go to `AutoModelForCausalLM.from_pretrained` (e.g. `dtype`). Unsupported architectures raise
    a ValueError before any weight is read.
    """
    model = BiphasicEncoderForPreTraining.from_causal_lm(name_or_path, **load_kwargs)
    tokenizer = load_causal_lm_tokenizer(name_or_path)
    fit_model_to_tokenizer(model, tokenizer)
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
