"""`pretrain --init_from_smaller CKPT`: a model of this package's own families (MAE-LM, biphasic) started from a smaller
checkpoint of its family, widened so that it computes what the checkpoint computes.

ModernBERT-large was started from ModernBERT-base by center tiling (its weights copied into the middle of the larger
matrices, norms rescaled), which keeps much of what base learnt but not its outputs. Here the width grows by a whole
factor k (hidden size, feed-forward size, attention heads and, for the biphasic model, key-value heads, all k times;
the head size and the depth unchanged), as Net2Net widens a network so that it computes the same function:

* every vector of the residual stream is the checkpoint's repeated k times (embeddings, biases and norm weights
  tiled; a LayerNorm or RMSNorm of a vector repeated k times is the norm of the vector, repeated);
* a linear layer writes its output tiled (each head, each feed-forward unit, k times) and reads its tiled input
  through k slices of its weight whose sum is the checkpoint's weight, split by fractions drawn at random per input
  unit, so that the copies get different gradients and grow apart from the first step (even shares would keep them
  equal for ever, under any optimizer);
* a vocabulary projection tied to the input embeddings reads the copies whole, so the norm before it is divided by k.

The logits are the checkpoint's at initialisation (in eval mode; dropout then acts on each copy separately), and the
encoder's hidden states are the checkpoint's repeated k times, divided by k for a biphasic model with tied
embeddings (whose last norm feeds the tied projection).
"""

import torch
from torch import nn
from transformers import PreTrainedConfig, PreTrainedModel

from ..models._shared.checkpoint_io import checkpoint_model_type

# {model_type: (the width fields that grow k times, the fields the checkpoint and the larger model must share, the
# norm whose output a tied vocabulary projection reads)}
FAMILIES = {
    "mae_lm": (
        (
            "hidden_size",
            "num_attention_heads",
            "intermediate_size",
            "decoder_hidden_size",
            "decoder_num_attention_heads",
            "decoder_intermediate_size",
        ),
        (
            "num_hidden_layers",
            "decoder_num_hidden_layers",
            "max_position_embeddings",
            "relative_attention_num_buckets",
            "relative_attention_max_distance",
            "hidden_act",
            "layer_norm_eps",
            "tie_word_embeddings",
        ),
        "lm_head.layer_norm",
    ),
    "biphasic": (
        ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size"),
        ("num_hidden_layers", "head_dim", "hidden_act", "rms_norm_eps", "rope_parameters", "tie_word_embeddings"),
        "model.norm",
    ),
}


def width_factor(source: PreTrainedConfig, target: PreTrainedConfig, checkpoint: str) -> int:
    """k, the one whole factor by which every width field of `target` is `source`'s; a ValueError naming what
    stops the tiling otherwise."""
    widths, shared, _ = FAMILIES[target.model_type]
    for field in shared:
        if getattr(source, field) != getattr(target, field):
            raise ValueError(
                f"--init_from_smaller {checkpoint} has {field} {getattr(source, field)!r}, the new model "
                f"{getattr(target, field)!r}: the tiling widens a model and keeps its {field}; set it to "
                f"{getattr(source, field)!r} with --config_overrides."
            )
    factor = target.hidden_size // source.hidden_size
    for field in widths:
        if getattr(target, field) != factor * getattr(source, field):
            shown = ", ".join(f"{name} {getattr(source, name)} -> {getattr(target, name)}" for name in widths)
            raise ValueError(
                f"--init_from_smaller {checkpoint}: the tiling widens every width by one whole factor (the head size "
                f"kept), but {shown}; choose a --model_size or --config_overrides whose widths are k times the "
                "checkpoint's."
            )
    if factor < 2:
        raise ValueError(
            f"--init_from_smaller {checkpoint} is as wide as the new model (hidden_size {source.hidden_size}): "
            "continue it with --model_name_or_path instead."
        )
    return factor


def split_fractions(factor: int, size: int) -> torch.Tensor:
    """(factor, size) shares of each input unit, positive and summing to 1 over the copies, random so that the
    copies learn apart (drawn from torch's generator, which `set_seed` seeds)."""
    draws = 0.5 + torch.rand(factor, size, dtype=torch.float64)
    return draws / draws.sum(0)


def tiled(weight: torch.Tensor, target_shape: torch.Size, module: nn.Module, name: str, factor: int) -> torch.Tensor:
    """`weight` of `module` widened to `target_shape`: each dimension that grows is tiled, but a linear layer's
    input dimension, which is split."""
    grown = weight.detach().double()
    for dim, (size, wanted) in enumerate(zip(weight.shape, target_shape)):
        if size == wanted:
            continue
        if wanted != factor * size:
            raise ValueError(f"{name}: {tuple(weight.shape)} does not tile into {tuple(target_shape)}.")
        if isinstance(module, nn.Linear) and name.endswith("weight") and dim == 1:
            grown = torch.cat([grown * share for share in split_fractions(factor, size)], dim=1)
        else:
            grown = torch.cat([grown] * factor, dim=dim)
    return grown


def grow_into(target: PreTrainedModel, checkpoint: str) -> PreTrainedModel:
    """`target` (a new model of a family in FAMILIES) with the weights of the smaller `checkpoint` of its class,
    widened so that its logits are the checkpoint's."""
    model_type = checkpoint_model_type(checkpoint, {})
    if model_type != target.config.model_type:
        raise ValueError(
            f"--init_from_smaller {checkpoint} is a {model_type!r} checkpoint; this run builds a "
            f"{target.config.model_type!r} model: pass a checkpoint of the method's own model."
        )
    factor = width_factor(type(target.config).from_pretrained(checkpoint), target.config, checkpoint)
    source = type(target).from_pretrained(checkpoint)
    if target.config.vocab_size != source.config.vocab_size:
        # A vocabulary padded for the GPU it trained on (pretrain pads the new model's on CUDA): take its rows.
        target.resize_token_embeddings(source.config.vocab_size, mean_resizing=False)
    readout = FAMILIES[target.config.model_type][2]
    tied = target.get_output_embeddings().weight is target.get_input_embeddings().weight
    targets = dict(target.named_parameters())  # a tied weight once, as in the source
    with torch.no_grad():
        for name, weight in source.named_parameters():
            module = source.get_submodule(name.rpartition(".")[0])
            grown = tiled(weight, targets[name].shape, module, name, factor)
            if tied and name.startswith(f"{readout}."):
                grown /= factor  # the tied projection sums the k copies it reads
            targets[name].copy_(grown)
    return target
