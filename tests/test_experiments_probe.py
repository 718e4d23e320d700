"""experiments/mae_lm_probe.py against computations done again by hand: the masked-LM loss split by whether the
encoder saw the [MASK], and the decoder attention a masked position gives its neighbours."""

import math
from pathlib import Path

import pytest


@pytest.fixture
def probed():
    """A tiny MAE-LM and a batch for mae_lm_probe: the model, the input with every target [MASK]ed, the labels and
    where the targets are."""
    import torch

    from hf_encoders import MaeLmForMaskedLM
    from tests.tiny_models import MASK_TOKEN_ID, counting_batch, tiny_mae_lm_config

    torch.manual_seed(0)
    model = MaeLmForMaskedLM(tiny_mae_lm_config()).eval()
    batch = counting_batch("mae_lm", torch.Generator().manual_seed(0))
    labels = batch["labels"]
    masked = labels != -100
    return model, batch["input_ids"].masked_fill(masked, MASK_TOKEN_ID), labels, masked


def test_the_probe_splits_the_loss_by_whether_the_encoder_saw_the_mask_and_the_halves_match_the_models_loss(probed):
    import torch

    from experiments import mae_lm_probe

    model, corrupted, labels, masked = probed
    with torch.no_grad():
        # Every [MASK] seen, or none: the empty half is NaN (the mean of nothing), not a loss of 0.
        _, unseen = mae_lm_probe.losses_by_encoder_view(model, corrupted, labels, masked)
        seen, _ = mae_lm_probe.losses_by_encoder_view(model, corrupted, labels, torch.zeros_like(masked))
        assert unseen != unseen and seen != seen
        # Half and half: the two means, weighted by their counts, make the loss of that mixed input.
        half = masked & (torch.arange(masked.shape[1]) % 2 == 0)
        seen, unseen = mae_lm_probe.losses_by_encoder_view(model, corrupted, labels, half)
        mixed = model(corrupted, labels=labels, masks_in_encoder=half).loss.item()
        count = half.sum().item()
        assert (seen * count + unseen * (masked.sum().item() - count)) / masked.sum().item() == pytest.approx(mixed)


def test_the_probe_measures_how_much_of_a_masked_positions_decoder_attention_goes_to_its_neighbours(probed):
    import torch

    from experiments import mae_lm_probe

    model, corrupted, labels, masked = probed
    inputs = []
    model.decoder.layers[0].register_forward_pre_hook(lambda module, args: inputs.append(args[0]))
    measured = mae_lm_probe.neighbour_attention(model, corrupted, labels)
    # The first layer's attention computed by hand from what the layer read: softmax(q k^T / sqrt(d)) per head.
    attention = model.decoder.layers[0].attention
    heads = (*inputs[-1].shape[:2], attention.num_heads, attention.head_dim)
    query, key = (
        projection(inputs[-1]).view(heads).transpose(1, 2) for projection in (attention.q_proj, attention.k_proj)
    )
    weights = torch.softmax(query @ key.transpose(-1, -2) * attention.head_dim**-0.5, dim=-1)
    positions = torch.arange(corrupted.shape[1])
    near = [(i, j) for i in positions.tolist() for j in positions.tolist() if 1 <= abs(i - j) <= 2]
    share = torch.zeros(corrupted.shape)
    for i, j in near:
        share[:, i] += weights[:, :, i, j].mean(1)
    assert measured["decoder_neighbour_attention"][0] == pytest.approx(share[masked].mean().item(), rel=1e-5)
    entropy = -(weights * weights.log()).sum(-1).mean(1)
    assert measured["decoder_attention_entropy"][0] == pytest.approx(entropy[masked].mean().item(), rel=1e-5)
    assert len(measured["decoder_neighbour_attention"]) == len(model.decoder.layers)
    # Without queries and keys every layer attends uniformly, so it gives the neighbours the uniform share.
    with torch.no_grad():
        for layer in model.decoder.layers:
            for projection in (layer.attention.q_proj, layer.attention.k_proj):
                projection.weight.zero_()
                projection.bias.zero_()
    uniform = mae_lm_probe.neighbour_attention(model, corrupted, labels)
    assert uniform["decoder_neighbour_attention"] == pytest.approx(
        [uniform["neighbour_attention_if_uniform"]] * len(model.decoder.layers)
    )
    counts = torch.tensor([sum(1 for j in positions.tolist() if 1 <= abs(i - j) <= 2) for i in positions.tolist()])
    expected = (counts / len(positions)).expand_as(masked)[masked].mean().item()
    assert uniform["neighbour_attention_if_uniform"] == pytest.approx(expected)
    assert uniform["decoder_attention_entropy"] == pytest.approx([math.log(len(positions))] * len(model.decoder.layers))
    assert uniform["attention_entropy_if_uniform"] == pytest.approx(math.log(len(positions)))
    assert model.config._attn_implementation != "eager"  # the probe put the model's attention back as it was


def test_a_corpus_too_short_for_the_probes_blocks_says_so(tmp_path):
    from experiments import mae_lm_probe
    from tests.tiny_models import save_tiny_mae_lm

    folder = save_tiny_mae_lm(tmp_path / "mae_lm")
    with pytest.raises(ValueError) as refused:
        mae_lm_probe.probe(Path(folder), ["the cat sat"] * 2, blocks=2, length=8)  # 5 tokens each
    assert str(refused.value) == (
        f"The probed documents hold 10 tokens of {folder}'s tokenizer, fewer than the 2 blocks of 6 the probe reads; "
        "give it a corpus whose last 40 documents are longer."
    )


def test_the_encoder_ablation_feeds_the_decoder_the_mean_state_and_puts_the_encoder_back(probed):
    import torch

    from experiments import mae_lm_probe
    from hf_encoders.models._shared.loss_utils import first_positions, restore_index

    model, corrupted, labels, masked = probed
    with torch.no_grad():
        trained = model(corrupted, labels=labels).loss.item()
        keep = ~masked  # δ = 0: the encoder reads the real tokens only
        positions = torch.arange(corrupted.shape[1]).expand_as(corrupted)
        kept = first_positions(keep, int(keep.sum(-1).max()))
        index = (keep, *kept, restore_index(keep, kept[0]))
        states = model.encode_kept(corrupted, *index, positions)
        with mae_lm_probe.encoder_ablated(model):
            ablated = model.encode_kept(corrupted, *index, positions)
            ablated_loss = model(corrupted, labels=labels).loss.item()
        after = model(corrupted, labels=labels).loss.item()
    read = states.abs().sum(-1) > 0
    assert torch.allclose(ablated[read], states[read].mean(0).expand_as(ablated[read]), atol=1e-6)
    assert torch.equal(ablated[~read], states[~read])
    assert ablated_loss != pytest.approx(trained)
    assert after == trained  # the trained encoder is back for whatever is measured next
    assert "encode_kept" not in vars(model)


def test_the_probes_attention_measures_read_the_trained_encoder_not_the_ablated_one(tmp_path, monkeypatch):
    from experiments import mae_lm_probe
    from tests.tiny_models import save_tiny_mae_lm

    folder = save_tiny_mae_lm(tmp_path / "mae_lm")
    measure = mae_lm_probe.neighbour_attention
    ablated_when_measured = []

    def recording(model, *args, **kwargs):
        ablated_when_measured.append("encode_kept" in vars(model))
        return measure(model, *args, **kwargs)

    monkeypatch.setattr(mae_lm_probe, "neighbour_attention", recording)
    measured = mae_lm_probe.probe(Path(folder), ["the cat sat on the mat"] * 4, blocks=2, length=8)["delta_0"]
    assert ablated_when_measured == [False]
    assert measured["masked_lm_loss_encoder_ablated"] != pytest.approx(measured["masked_lm_loss"])


def test_an_arm_trained_with_masks_in_its_encoder_is_probed_in_its_own_view_too(tmp_path):
    import torch
    from transformers import AutoTokenizer

    from experiments import mae_lm_probe
    from hf_encoders import MaeLmForMaskedLM
    from tests.tiny_models import save_tiny_mae_lm

    folder = Path(save_tiny_mae_lm(tmp_path / "mae_lm"))
    texts = ["the cat sat on the mat"] * 4
    assert set(mae_lm_probe.probe(folder, texts, blocks=2, length=8)) == {"delta_0"}  # MAE-LM's own view is δ = 0's
    views = mae_lm_probe.probe(folder, texts, delta=1.0, blocks=2, length=8)
    # δ = 1 keeps every [MASK] in the encoder: its loss, computed here from the same blocks, is the MLM layout's.
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = MaeLmForMaskedLM.from_pretrained(folder).eval()
    ids = tokenizer("\n\n".join(texts), add_special_tokens=False)["input_ids"]
    _, corrupted, labels = mae_lm_probe.masked_blocks(tokenizer, ids, 2, 8, torch.Generator().manual_seed(0))
    with torch.no_grad():
        every_mask_in = model(corrupted, labels=labels, masks_in_encoder=labels != -100).loss.item()
        none_in = model(corrupted, labels=labels).loss.item()
    assert views["own"]["delta"] == 1.0
    assert views["own"]["masked_lm_loss"] == pytest.approx(every_mask_in)
    assert views["delta_0"]["masked_lm_loss"] == pytest.approx(none_in)
    assert every_mask_in != pytest.approx(none_in)
