"""Why an MAE-LM encoder's real tokens use the rank they do: measures `hf-encoders analyze` does not take.

For each MAE-LM pre-training checkpoint (encoder, decoder and LM head), on blocks of the corpus, in two views: every
[MASK] removed from the encoder's input (δ = 0's view, whatever δ the model trained with; the rank there is of the
clean input's real tokens), and, for a model trained with δ > 0, its own δ (that share of the [MASK]s kept in the
encoder input; the rank there is of every position the encoder read, [MASK]s included, as MAE-LM's H):
- the top layer's rank_0.9 of real tokens uncentered (MAE-LM's definition) and centered, and the share of their
  energy in the mean direction: a large shared offset (post-LN bias) lowers the uncentered rank by itself;
- the masked-LM loss with the encoder's states, and with every encoder state replaced by their mean: the gap is how
  much the decoder reads the encoder; a decoder that predicts from positions and the [MASK] embedding alone (the
  decoder "taking over") leaves the encoder nothing to learn;
- the share of the loss's gradient norm that reaches the encoder's layers: with δ = 0 the encoder reaches the loss
  only through the decoder's attention (no residual path at a masked position), so its share is far smaller;
- the masked-LM loss with half the [MASK]s kept in the encoder input (δ = 0.5), at those the encoder saw and at those
  it did not: one decoder, one budget, so the gap is what the encoder's own state at a masked position is worth against
  the context the decoder gathers from the kept tokens alone;
- per decoder layer, the share of a masked position's attention that goes to its nearest neighbours and the entropy of
  that attention, each beside uniform attention's: with δ = 0 the decoder can predict a masked token only by gathering
  its context, and the neighbours are where most of it is.
"""

import argparse
import json
import math
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import AutoTokenizer

from hf_encoders.analysis.rank import effective_rank
from hf_encoders.models.mae_lm import MaeLmForMaskedLM

PROBED_DOCUMENTS = 40  # the corpus's last documents: 64 blocks of 128 tokens, read once per measure


def probe(
    checkpoint: Path, texts: list[str], delta: float = 0.0, blocks: int = 64, length: int = 128, seed: int = 0
) -> dict:
    """The measures in δ = 0's view (every [MASK] out of the encoder, as MAE-LM reads) and, for an arm trained with
    δ > 0, in its own view (that share of the [MASK]s kept in the encoder input, as it trained): view -> measures."""
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = MaeLmForMaskedLM.from_pretrained(checkpoint).eval()
    model.compact_eval_logits = True  # only losses are read: the vocabulary is projected at labelled positions only
    ids = tokenizer("\n\n".join(texts), add_special_tokens=False)["input_ids"]
    if len(ids) < blocks * (length - 2):
        raise ValueError(
            f"The probed documents hold {len(ids)} tokens of {checkpoint}'s tokenizer, fewer than the {blocks} blocks "
            f"of {length - 2} the probe reads; give it a corpus whose last {PROBED_DOCUMENTS} documents are longer."
        )
    generator = torch.Generator().manual_seed(seed)
    input_ids, corrupted, labels = masked_blocks(tokenizer, ids, blocks, length, generator)
    draws = torch.rand(input_ids.shape, generator=generator)
    seen = (draws < 0.5) & (labels != -100)
    with torch.no_grad():
        clean_states = model.mae_lm(input_ids).last_hidden_state.flatten(0, 1)
        seen_loss, unseen_loss = losses_by_encoder_view(model, corrupted, labels, seen)
    views = {
        "delta_0": {
            **view_measures(model, corrupted, labels, None, clean_states),
            "masked_lm_loss_seen_by_encoder": seen_loss,
            "masked_lm_loss_unseen_by_encoder": unseen_loss,
        }
    }
    if delta > 0:
        kept = (draws < delta) & (labels != -100)  # the collator's draw: each [MASK] stays with probability δ
        views["own"] = {"delta": delta, **view_measures(model, corrupted, labels, kept)}
    return views


def view_measures(model, corrupted, labels, masks_in_encoder, states=None) -> dict:
    """One view's measures: the top layer's rank of what the encoder read (uncentered and centered; `states` if
    given, else the encoder's states at every position it read), the share of their energy in the mean direction,
    the masked-LM loss with the encoder and with its states replaced by their mean, the encoder's share of the
    gradient, and the decoder's attention around a masked position."""
    model.zero_grad(set_to_none=True)
    output = model(corrupted, labels=labels, masks_in_encoder=masks_in_encoder)
    output.loss.backward()
    if states is None:
        read = model.encoder_input_mask(corrupted, torch.ones_like(corrupted), masks_in_encoder)
        states = output.encoder_last_hidden_state.detach()[read]
    states = states.double()
    with torch.no_grad(), encoder_ablated(model):
        ablated_loss = model(corrupted, labels=labels, masks_in_encoder=masks_in_encoder).loss.item()
    mean = states.mean(0)
    return {
        "rank_uncentered": int(effective_rank(states)),
        "rank_centered": int(effective_rank(states - mean)),
        "mean_direction_energy": float(mean.square().sum() / states.square().sum(-1).mean()),
        "masked_lm_loss": output.loss.item(),
        "masked_lm_loss_encoder_ablated": ablated_loss,
        "encoder_gradient_share": gradient_share(model, "mae_lm.layers."),
        **neighbour_attention(model, corrupted, labels, masks_in_encoder=masks_in_encoder),
    }


def masked_blocks(tokenizer, ids: list[int], rows: int, length: int, generator: torch.Generator) -> tuple:
    """(input_ids, corrupted, labels): the first `rows` blocks of `ids`, each [CLS] ... [SEP], 15% of the inner tokens
    replaced by [MASK] (MAE-LM's masking), drawn from `generator`."""
    body = torch.tensor(ids[: rows * (length - 2)]).view(rows, length - 2)
    cls, sep = torch.full((rows, 1), tokenizer.cls_token_id), torch.full((rows, 1), tokenizer.sep_token_id)
    input_ids = torch.cat([cls, body, sep], dim=1)
    masked = torch.rand(input_ids.shape, generator=generator) < 0.15
    masked[:, [0, -1]] = False
    return input_ids, input_ids.masked_fill(masked, tokenizer.mask_token_id), input_ids.masked_fill(~masked, -100)


def neighbour_attention(model, corrupted, labels, reach: int = 2, masks_in_encoder=None) -> dict:
    """Per decoder layer, the share of a masked position's attention (mean over heads and masked positions) that goes
    to the positions at most `reach` away (not itself), and the share uniform attention would give them; and the
    entropy of that attention (nats), beside uniform attention's: near it, attention that leaves the neighbours at
    their uniform share is spread evenly, not fixed on other tokens."""
    captured = []
    hooks = [
        layer.attention.register_forward_hook(lambda module, inputs, output: captured.append(output[1]))
        for layer in model.decoder.layers
    ]
    implementation = model.config._attn_implementation
    model.set_attn_implementation("eager")  # SDPA returns no attention weights
    try:
        with torch.no_grad():  # labels: under compact_eval_logits (probe sets it) only their positions are projected
            model(corrupted, labels=labels, masks_in_encoder=masks_in_encoder)
    finally:
        model.set_attn_implementation(implementation)
        for hook in hooks:
            hook.remove()
    length = corrupted.shape[1]
    distance = (torch.arange(length)[:, None] - torch.arange(length)[None, :]).abs()
    near = ((distance >= 1) & (distance <= reach)).to(captured[0].dtype)  # (query, key)
    masked = labels != -100
    return {
        "decoder_neighbour_attention": [float((weights * near).sum(-1).mean(1)[masked].mean()) for weights in captured],
        "neighbour_attention_if_uniform": float((near.sum(-1) / length).expand_as(masked)[masked].mean()),
        "decoder_attention_entropy": [
            float(-(weights * weights.clamp_min(1e-30).log()).sum(-1).mean(1)[masked].mean()) for weights in captured
        ],
        "attention_entropy_if_uniform": math.log(length),
    }


def losses_by_encoder_view(model, corrupted, labels, seen) -> tuple[float, float]:
    """The model's masked-LM loss at the labelled positions whose [MASK] stays in the encoder input (`seen`), and at
    the others (NaN for a half without one), one forward per half."""
    labelled = labels != -100
    return tuple(
        model(corrupted, labels=labels.masked_fill(~half, -100), masks_in_encoder=seen).loss.item()
        if (half & labelled).any()
        else float("nan")
        for half in (seen, ~seen)
    )


def gradient_share(model, prefix: str) -> float:
    """||gradient of the parameters under `prefix`|| / ||gradient of all parameters||."""
    norms = {
        name: parameter.grad.norm() ** 2 for name, parameter in model.named_parameters() if parameter.grad is not None
    }
    return float(sum(v for k, v in norms.items() if k.startswith(prefix)) / sum(norms.values())) ** 0.5


@contextmanager
def encoder_ablated(model):
    """The model with each of its encoder's output states replaced by the mean of the batch's states (positions the
    encoder did not read stay zero, as in the model), its own encoder put back on leaving: the measures after the
    ablation read the trained model."""
    encode_kept = model.encode_kept

    def encode(*args, **kwargs):
        states = encode_kept(*args, **kwargs)
        read = states.abs().sum(-1, keepdim=True) > 0
        mean = states.sum((0, 1)) / read.sum()
        return torch.where(read, mean, states)

    model.encode_kept = encode
    try:
        yield model
    finally:
        del model.encode_kept  # the instance attribute hid the class's method; removing it restores the method


def main(corpus: Path, output: Path, checkpoints: list[Path], deltas: list[float] | None = None) -> None:
    """Probe every checkpoint (trained with the δ at the same place in `deltas`, 0 where not given) into `output`."""
    texts = [json.loads(line)["text"] for line in corpus.open()]
    deltas = deltas or [0.0] * len(checkpoints)
    results = {
        checkpoint.name: probe(checkpoint, texts[-PROBED_DOCUMENTS:], delta)
        for checkpoint, delta in zip(checkpoints, deltas)
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "corpus",
        type=Path,
        help=f"JSON lines with a `text` field (reproduce.py's corpus.jsonl); its last "
        f"{PROBED_DOCUMENTS} documents are probed",
    )
    parser.add_argument("output", type=Path, help="the JSON file the measures go to")
    parser.add_argument("checkpoints", type=Path, nargs="+", help="MAE-LM pre-training output folders")
    parser.add_argument(
        "--deltas",
        type=lambda text: [float(value) for value in text.split(",")],
        help="each checkpoint's training δ, comma-separated, for its own view beside δ = 0's (default: 0 for all)",
    )
    settings = parser.parse_args()
    main(settings.corpus, settings.output, settings.checkpoints, settings.deltas)
