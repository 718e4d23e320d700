"""From a causal LM's checkpoint to a biphasic encoder (`hf-encoders convert --from_causal_lm PATH OUT`, and biphasic
`pretrain --from_causal_lm`), and the tokenizer fixes biphasic training needs.

This is the package's side of the biphasic method: checkpoints carry the model folder only, so the conversion lives
here, as transformers keeps its `convert_*.py` scripts beside (not inside) the modeling files.
"""

import copy
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging

from ...data.tokenizer import load_tokenizer
from ...models.biphasic import BiphasicConfig, BiphasicEncoderForPreTraining
from ...models.biphasic.modeling_biphasic import CONVERTIBLE_CAUSAL_LMS

logger = logging.get_logger(__name__)

# The paper's spelling (Llama-3's <|reserved_special_token_0|> renamed); added where a vocabulary has no mask.
MASK_TOKEN = "<|mask|>"
# Llama fields copied verbatim between a causal LM's config, ours and EuroBERT's.
LLAMA_FIELDS = (
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps",
    "attention_dropout", "tie_word_embeddings", "pad_token_id", "bos_token_id", "eos_token_id",
)  # fmt: skip


def from_causal_lm(cls, model_or_path, mask_token_id: int | None = None, **load_kwargs) -> PreTrainedModel:
    """Convert a Llama-family causal LM (a loaded model, a folder, a Hub name, or a `.gguf` file) into the biphasic
    class `cls` (what `BiphasicEncoderForPreTraining.from_causal_lm` calls).

    Llama, SmolLM2 and Mistral convert as they are; Qwen2's q/k/v biases go through `attention_bias` (with a zero
    o_proj bias). In clm mode the result computes the source model's logits. A sliding window becomes the
    position limit, since within it sliding and full causal attention agree. Other architectures are refused.
    `load_kwargs` go to `AutoModelForCausalLM.from_pretrained` (e.g. `dtype`).
    """
    if isinstance(model_or_path, PreTrainedModel):
        source = model_or_path
        config = biphasic_config_from_causal_lm(source.config, mask_token_id)
    else:
        path, gguf = causal_lm_location(model_or_path)
        try:
            source_config = AutoConfig.from_pretrained(path, **gguf)
        except OSError as error:
            place = "There is no such file or folder" if not Path(path).exists() else "It holds no loadable config"
            raise ValueError(
                f"Cannot load a causal LM from {str(model_or_path)!r}. {place}, and it did not load as a Hub model "
                f"either ({error}). Pass a Llama-family causal LM's folder, `.gguf` file or Hub name (with network "
                "access, or already in the local cache)."
            ) from error
        # The architecture is checked from the config alone, before any weight is read.
        config = biphasic_config_from_causal_lm(source_config, mask_token_id)
        source = AutoModelForCausalLM.from_pretrained(path, **gguf, **load_kwargs)
    state = source.state_dict()
    model = cls(config).to(device=source.device, dtype=source.dtype)
    if config.attention_bias:
        for index, layer in enumerate(model.model.layers):
            # Qwen2 biases q, k and v only; a zero o_proj bias computes the same function.
            state.setdefault(
                f"model.layers.{index}.self_attn.o_proj.bias", torch.zeros_like(layer.self_attn.o_proj.bias)
            )
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(
            f"{type(source).__name__} does not map onto {cls.__name__} (missing: {result.missing_keys[:8]}, "
            f"unexpected: {result.unexpected_keys[:8]}); only LlamaForCausalLM-shaped checkpoints convert."
        )
    return model.train(source.training)


def causal_lm_location(name_or_path) -> tuple[str, dict]:
    """(folder or Hub name, extra from_pretrained kwargs): a `.gguf` file becomes its folder plus `gguf_file`."""
    path = Path(name_or_path)
    if path.suffix == ".gguf" and path.is_file():
        return str(path.parent), {"gguf_file": path.name}
    return str(name_or_path), {}


def biphasic_config_from_causal_lm(source, mask_token_id: int | None = None) -> BiphasicConfig:
    """The BiphasicConfig of a Llama-family causal LM's config, or a ValueError naming what cannot be represented."""
    model_type = getattr(source, "model_type", None)
    if model_type == BiphasicConfig.model_type:
        raise ValueError(
            "This is already a biphasic checkpoint, nothing to convert: load it with "
            "BiphasicEncoderForPreTraining.from_pretrained (or any biphasic class)."
        )
    if model_type not in CONVERTIBLE_CAUSAL_LMS:
        raise ValueError(
            f"Cannot convert a {model_type!r} model ({', '.join(getattr(source, 'architectures', None) or [])}): "
            f"from_causal_lm takes Llama-family causal LMs ({', '.join(CONVERTIBLE_CAUSAL_LMS)}: RMSNorm, SwiGLU, "
            "RoPE, LlamaForCausalLM weight names). Other architectures (GPT-2, BERT, mixture-of-experts, ...) have "
            "weights this encoder lacks; pre-train a BiphasicConfig model from scratch instead."
        )
    rope = copy.deepcopy(source.rope_parameters)
    if "rope_type" not in rope:
        raise ValueError(f"{model_type} uses per-layer RoPE parameters {rope}, which BiphasicEncoder cannot represent.")
    # A field the source leaves unset keeps our default (head_dim is derived), except special ids: None is the answer.
    fields = {name: getattr(source, name, None) for name in LLAMA_FIELDS}
    fields = {name: value for name, value in fields.items() if value is not None or name.endswith("token_id")}
    window = getattr(source, "sliding_window", None)
    if model_type == "qwen2" and not source.use_sliding_window:
        window = None
    if window is not None and window < fields["max_position_embeddings"]:
        logger.warning(
            f"{model_type} attends within a sliding window of {window}: converting with max_position_embeddings={window}."
        )
        fields["max_position_embeddings"] = window
    return BiphasicConfig(
        **fields,
        rope_parameters=rope,
        attention_bias=model_type == "qwen2" or getattr(source, "attention_bias", False),
        mlp_bias=getattr(source, "mlp_bias", False),
        mask_token_id=mask_token_id,
    )


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
        # Said, as it changes the vocabulary: the saved tokenizer has one more token, whose embedding starts untrained.
        logger.warning(
            f"The tokenizer has no mask token, which MLM needs: added {MASK_TOKEN} as token {tokenizer.mask_token_id} "
            "(its embedding is new and learns during the MLM phase)."
        )
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
    fix = "Pass a Llama-family causal LM's folder, `.gguf` file or Hub name (biphasic --from_causal_lm, or convert)."
    return prepare_tokenizer(load_tokenizer(location, fix=fix, **gguf))


def convert_causal_lm(name_or_path: str, out_dir: str | Path, **load_kwargs) -> Path:
    """Write a `BiphasicEncoderForPreTraining` checkpoint (weights, config with the full auto_map, model code,
    tokenizer with pad and mask tokens) converted from a Llama-family causal LM. Returns `out_dir`.

    `load_kwargs` go to `AutoModelForCausalLM.from_pretrained` (e.g. `dtype`). Unsupported architectures raise
    a ValueError before any weight is read.
    """
    model = from_causal_lm(BiphasicEncoderForPreTraining, name_or_path, **load_kwargs)
    tokenizer = load_causal_lm_tokenizer(name_or_path)
    fit_model_to_tokenizer(model, tokenizer)
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
