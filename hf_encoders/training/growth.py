"""`pretrain --init_from_smaller CKPT`: a model of this package's own families (MAE-LM, biphasic) started from a smaller
checkpoint of its family, widened (and, for the biphasic model, deepened) so that it computes what the checkpoint
computes.

ModernBERT-large was started from ModernBERT-base by center tiling (its weights copied into the middle of the larger
matrices, norms rescaled), which keeps much of what base learnt but not its outputs. Here the width grows by a whole
factor k (hidden size, feed-forward size, attention heads and, for the biphasic model, key-value heads, all k times;
the head size unchanged), as Net2Net widens a network so that it computes the same function:

* every vector of the residual stream is the checkpoint's repeated k times (embeddings, biases and norm weights
  tiled; a LayerNorm or RMSNorm of a vector repeated k times is the norm of the vector, repeated);
* a linear layer writes its output tiled (each head, each feed-forward unit, k times) and reads its tiled input
  through k slices of its weight whose sum is the checkpoint's weight, split by fractions drawn at random per input
  unit, so that the copies get different gradients and grow apart from the first step (even shares would keep them
  equal for ever, under any optimizer);
* a vocabulary projection tied to the input embeddings reads the copies whole, so the norm before it is divided by k.

The biphasic model's pre-norm layers may also grow in number: an added layer copies the layer before it with its
output projections (attention's and the MLP's) zeroed, so that it adds nothing to the residual stream until they
learn (as LLaMA Pro's block expansion). MAE-LM's post-norm layers cannot be the identity, so its depth stays.

The logits are the checkpoint's at initialisation (in eval mode; dropout then acts on each copy separately), and the
encoder's hidden states are the checkpoint's repeated k times, divided by k for a biphasic model with tied
embeddings (whose last norm feeds the tied projection).
"""

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedConfig, PreTrainedModel

from ..models._shared.checkpoint_io import checkpoint_model_type


@dataclass(frozen=True)
class Family:
    widths: tuple[str, ...]  # the config fields that grow k times
    shared: tuple[str, ...]  # the config fields the checkpoint and the larger model must share
    readout_norm: str  # the norm whose output a tied vocabulary projection reads
    layers: str | None = None  # where the layers are, for a family that may grow deeper (pre-norm layers only)
    layer_outputs: tuple[str, ...] = ()  # the projections a layer adds to the residual stream through
    # Config fields that give each head its own value (a slope halved from head to head): the copies of a widened
    # head would get other values, so the tiling keeps the function only where they are 0.
    per_head: tuple[str, ...] = ()


FAMILIES = {
    "mae_lm": Family(
        widths=(
            "hidden_size",
            "num_attention_heads",
            "intermediate_size",
            "decoder_hidden_size",
            "decoder_num_attention_heads",
            "decoder_intermediate_size",
        ),
        # Post-norm layers: no layer is the identity, so the depth stays.
        shared=(
            "num_hidden_layers",
            "decoder_num_hidden_layers",
            "max_position_embeddings",
            "relative_attention_num_buckets",
            "relative_attention_max_distance",
            "decoder_locality_slope",
            "hidden_act",
            "layer_norm_eps",
            "tie_word_embeddings",
        ),
        readout_norm="lm_head.layer_norm",
        per_head=("decoder_locality_slope",),
    ),
    "biphasic": Family(
        widths=("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size"),
        shared=("head_dim", "hidden_act", "rms_norm_eps", "rope_parameters", "tie_word_embeddings"),
        readout_norm="model.norm",
        layers="model.layers",
        layer_outputs=("self_attn.o_proj", "mlp.down_proj"),
    ),
}


def width_factor(source: PreTrainedConfig, target: PreTrainedConfig, checkpoint: str) -> int:
    """k, the one whole factor by which every width field of `target` is `source`'s; a ValueError naming what
    stops the tiling otherwise."""
    family = FAMILIES[target.model_type]
    for field in family.shared:
        if getattr(source, field) != getattr(target, field):
            raise ValueError(
                f"--init_from_smaller {checkpoint} has {field} {getattr(source, field)!r}, the new model "
                f"{getattr(target, field)!r}: the tiling widens a model and keeps its {field}; set it to "
                f"{getattr(source, field)!r} with --config_overrides."
            )
    factor = target.hidden_size // source.hidden_size
    for field in family.per_head:
        if getattr(target, field) and factor > 1:
            raise ValueError(
                f"--init_from_smaller {checkpoint}: {field} {getattr(target, field)!r} gives each head its own value, "
                f"which the widened copies of a head cannot keep; grow a checkpoint built with {field}=0 and pass "
                f"--config_overrides {field}=0."
            )
    for field in family.widths:
        if getattr(target, field) != factor * getattr(source, field):
            shown = ", ".join(f"{name} {getattr(source, name)} -> {getattr(target, name)}" for name in family.widths)
            raise ValueError(
                f"--init_from_smaller {checkpoint}: the tiling widens every width by one whole factor (the head size "
                f"kept), but {shown}; choose a --model_size or --config_overrides whose widths are k times the "
                "checkpoint's."
            )
    if family.layers and target.num_hidden_layers < source.num_hidden_layers:
        raise ValueError(
            f"--init_from_smaller {checkpoint} has {source.num_hidden_layers} layers, the new model "
            f"{target.num_hidden_layers}: the tiling adds layers and never drops one; set num_hidden_layers to "
            f"{source.num_hidden_layers} or more."
        )
    if factor < 2 and target.num_hidden_layers == source.num_hidden_layers:
        raise ValueError(
            f"--init_from_smaller {checkpoint} is as large as the new model (hidden_size {source.hidden_size}, "
            f"{source.num_hidden_layers} layers): continue it with --model_name_or_path instead."
        )
    return factor


def layer_sources(source_layers: int, target_layers: int) -> list[int]:
    """The checkpoint's layer each new layer copies, in order: the added layers spread evenly, each after the layer
    it copies."""
    return [index * source_layers // target_layers for index in range(target_layers)]


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
    if target.config.vocab_size > source.config.vocab_size:
        raise ValueError(
            f"The tokenizer has {target.config.vocab_size} tokens but --init_from_smaller {checkpoint} only "
            f"{source.config.vocab_size} embeddings; use the checkpoint's own tokenizer (leave out --tokenizer_name)."
        )
    if target.config.vocab_size < source.config.vocab_size:
        # Its vocabulary padded for the GPU it trained on, past its tokenizer's: the new model takes every row.
        target.resize_token_embeddings(source.config.vocab_size, mean_resizing=False)
    family = FAMILIES[target.config.model_type]
    tied = target.get_output_embeddings().weight is target.get_input_embeddings().weight
    sources = dict(source.named_parameters())  # a tied weight once, as in the target
    copies = layer_sources(source.config.num_hidden_layers, target.config.num_hidden_layers)
    with torch.no_grad():
        for name, parameter in target.named_parameters():
            source_name, added = name, False
            if family.layers and name.startswith(f"{family.layers}."):
                index, _, rest = name.removeprefix(f"{family.layers}.").partition(".")
                layer = int(index)
                source_name = f"{family.layers}.{copies[layer]}.{rest}"
                added = layer > 0 and copies[layer] == copies[layer - 1]
            module = source.get_submodule(source_name.rpartition(".")[0])
            grown = tiled(sources[source_name], parameter.shape, module, source_name, factor)
            if added and rest.rpartition(".")[0] in family.layer_outputs:
                # An added layer adds nothing to the residual stream yet: the identity, until these learn.
                grown.zero_()
            if tied and name.startswith(f"{family.readout_norm}."):
                grown /= factor  # the tied projection sums the k copies it reads
            parameter.copy_(grown)
    return target
