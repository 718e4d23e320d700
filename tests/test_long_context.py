"""Long context: MAE-LM's relative bias without an L x L tensor (query blocks under sdpa, a score_mod under
flex_attention), each path against today's dense bias with eager attention; TaCL's contrast in chunks of anchors
against the whole contrast."""

import copy

import pytest
import torch
import torch.nn.attention.flex_attention as torch_flex

from hf_encoders import MaeLmForMaskedLM, MaeLmModel
from hf_encoders.models.mae_lm import relative_attention
from hf_encoders.models.tacl import modeling_tacl
from hf_encoders.models.tacl.modeling_tacl import token_contrastive_loss
from tests.tiny_models import MASK_TOKEN_ID, tiny_mae_lm_config

# Dropout off (flex_attention has none).
CONFIG = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def use_path(model, path: str):
    """Switch `model` (with its copy of the encoder) to one of the attention paths; query blocks of 7 queries from
    any length, so that the tiny batches below span several blocks and a partial last one."""
    model.set_attn_implementation(
        {"dense eager": "eager", "dense sdpa": "sdpa", "flex": "flex_attention"}.get(path, "sdpa")
    )
    if path == "query blocks":
        encoder = model.mae_lm if isinstance(model, MaeLmForMaskedLM) else model
        encoder.dense_bias_max_length, encoder.query_block_size = 0, 7
        if isinstance(model, MaeLmForMaskedLM):
            model.decoder.dense_bias_max_length, model.decoder.query_block_size = 0, 7
    return model


@pytest.fixture
def flex_backward_on_cpu(monkeypatch):
    """torch refuses flex_attention's backward on CPU (its fused backward is GPU-only), although the eager reference
    implementation behind the check computes it: lift the check to test the score_mod's gradient here."""
    monkeypatch.setattr(torch_flex, "_validate_device", lambda *tensors: None)


def packed_padded_batch():
    """Three rows: two documents each (positions restart at 15), the last two padded, [MASK]s everywhere, about 30%
    of them kept in the encoder input (δ = 0.3, as DataCollatorForMaeLm decides it)."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 60, (3, 40), generator=generator)
    masked = torch.rand(3, 40, generator=generator) < 0.3
    attention_mask = torch.ones_like(ids)
    attention_mask[1, 30:] = attention_mask[2, 20:] = 0
    positions = torch.cat([torch.arange(15), torch.arange(25)]).expand(3, -1)
    return {
        "input_ids": ids.masked_fill(masked, MASK_TOKEN_ID),
        "attention_mask": attention_mask,
        "position_ids": positions,
        "labels": torch.where(masked & attention_mask.bool(), ids, -100),
        "masks_in_encoder": masked & (torch.rand(3, 40, generator=generator) < 0.3),
    }


def step(model, batch):
    """Loss, encoder states and every gradient."""
    model.zero_grad()
    output = model(**batch)
    output.loss.backward()
    gradients = {
        name: parameter.grad.clone() for name, parameter in model.named_parameters() if parameter.grad is not None
    }
    return output.loss.detach(), output.encoder_last_hidden_state.detach(), gradients


@pytest.mark.parametrize("path", ["dense sdpa", "query blocks", "flex"])
def test_every_attention_path_trains_as_the_dense_eager_bias(path, flex_backward_on_cpu):
    """Padding, packed documents, compaction and δ in one batch: same loss, encoder states and gradients (the bias
    table's among them) as eager attention with the whole bias."""
    torch.manual_seed(0)
    base = MaeLmForMaskedLM(tiny_mae_lm_config(**CONFIG))
    batch = packed_padded_batch()
    loss, states, gradients = step(use_path(copy.deepcopy(base), "dense eager"), batch)
    path_loss, path_states, path_gradients = step(use_path(copy.deepcopy(base), path), batch)
    torch.testing.assert_close(path_loss, loss)
    torch.testing.assert_close(path_states, states)
    assert path_gradients.keys() == gradients.keys()
    assert gradients["mae_lm.relative_attention_bias.weight"].abs().sum() > 0
    for name, gradient in gradients.items():
        torch.testing.assert_close(path_gradients[name], gradient, msg=name)


@pytest.mark.parametrize("path", ["dense sdpa", "query blocks", "flex"])
def test_every_attention_path_trains_the_decoders_locality_bias_as_the_dense_eager_one(path, flex_backward_on_cpu):
    """The decoder's locality bias (config.decoder_locality_slope) on the same batch: same loss and gradients."""
    torch.manual_seed(0)
    base = MaeLmForMaskedLM(tiny_mae_lm_config(**CONFIG, decoder_locality_slope=1.0))
    batch = packed_padded_batch()
    loss, _, gradients = step(use_path(copy.deepcopy(base), "dense eager"), batch)
    path_loss, _, path_gradients = step(use_path(copy.deepcopy(base), path), batch)
    torch.testing.assert_close(path_loss, loss)
    for name, gradient in gradients.items():
        torch.testing.assert_close(path_gradients[name], gradient, msg=name)


@pytest.mark.parametrize("path", ["query blocks", "flex"])
def test_every_attention_path_encodes_a_padded_batch_as_the_dense_bias(path):
    """The fine-tuning layout (padding dropped before the layers, attention per padded row): same states at the
    real tokens, in inference, where flex_attention runs on CPU as it is."""
    torch.manual_seed(0)
    dense = MaeLmModel(tiny_mae_lm_config(**CONFIG)).eval()
    ids = torch.randint(5, 60, (2, 30))
    attention_mask = torch.ones_like(ids)
    attention_mask[1, 17:] = 0
    with torch.no_grad():
        expected = dense(input_ids=ids, attention_mask=attention_mask).last_hidden_state
        states = use_path(copy.deepcopy(dense), path)(input_ids=ids, attention_mask=attention_mask).last_hidden_state
    real = attention_mask.bool()
    torch.testing.assert_close(states[real], expected[real])


def largest_saved_tensor(model, batch) -> int:
    """The most elements of one tensor autograd keeps for backward during the forward."""
    largest = [0]

    def pack(tensor):
        largest[0] = max(largest[0], tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(**batch)
    return largest[0]


@pytest.mark.parametrize("decoder_locality_slope", [0.0, 1.0])
def test_query_blocks_keep_nothing_the_size_of_the_bias_for_backward(decoder_locality_slope):
    """The dense path keeps (rows, heads, L, L) for backward; query blocks keep no tensor of even L x L elements, in
    the encoder nor, with its locality bias, in the decoder."""
    config = tiny_mae_lm_config(**CONFIG, max_position_embeddings=256, decoder_locality_slope=decoder_locality_slope)
    length = 192
    ids = torch.randint(5, 60, (1, length))
    batch = {"input_ids": ids.masked_fill(torch.rand(1, length) < 0.15, MASK_TOKEN_ID), "labels": ids}
    torch.manual_seed(0)
    model = MaeLmForMaskedLM(config).train()
    assert largest_saved_tensor(model, batch) >= config.num_attention_heads * (0.7 * length) ** 2
    assert largest_saved_tensor(use_path(model, "query blocks"), batch) < length * length


def test_query_blocks_gather_each_blocks_bias_once_per_forward_for_every_layer(monkeypatch):
    """The near bias of each block is gathered once, before the layers, and its scatter back into the per-distance
    bias runs once in backward: before, every layer gathered it again, and again when its block was recomputed."""
    gathered = []
    near_bias = relative_attention.RelativeBias.near_bias
    monkeypatch.setattr(
        relative_attention.RelativeBias,
        "near_bias",
        lambda self, queries: gathered.append(queries) or near_bias(self, queries),
    )
    torch.manual_seed(0)
    model = use_path(MaeLmForMaskedLM(tiny_mae_lm_config(**CONFIG, num_hidden_layers=3)), "query blocks").train()
    batch = packed_padded_batch()
    model(**batch).loss.backward()
    blocks = -(-int((batch["input_ids"] != MASK_TOKEN_ID).sum(-1).max()) // 7)  # the compacted rows' blocks of 7
    assert len(gathered) == blocks


def test_flex_attention_gives_every_layer_the_same_score_mod_and_block_mask(monkeypatch):
    """One `score_mod` and one `BlockMask` per forward (of the encoder; the decoder has its own mask)."""
    calls = []
    flex = torch_flex.flex_attention

    def recording_flex(*args, score_mod=None, block_mask=None, **kwargs):
        calls.append((score_mod, block_mask))
        return flex(*args, score_mod=score_mod, block_mask=block_mask, **kwargs)

    monkeypatch.setattr(torch_flex, "flex_attention", recording_flex)
    model = use_path(MaeLmForMaskedLM(tiny_mae_lm_config(**CONFIG, num_hidden_layers=3)), "flex").eval()
    with torch.no_grad():
        model(**packed_padded_batch())
    encoder = calls[: model.config.num_hidden_layers]
    assert len(calls) == model.config.num_hidden_layers + model.config.decoder_num_hidden_layers
    assert all(score_mod is encoder[0][0] and mask is encoder[0][1] for score_mod, mask in encoder)
    assert encoder[0][0] is not None and encoder[0][1] is not None


def test_flex_attention_refuses_attention_dropout_in_training():
    model = use_path(MaeLmForMaskedLM(tiny_mae_lm_config(attention_probs_dropout_prob=0.1)), "flex").train()
    batch = packed_padded_batch()
    with pytest.raises(ValueError, match=r"attention_probs_dropout_prob=0.0 .*or use 'sdpa'"):
        model(**batch)


def test_flex_attention_on_a_torch_without_it_names_the_version_needed(monkeypatch):
    monkeypatch.setattr(relative_attention, "is_torch_greater_or_equal", lambda version: False)
    model = MaeLmForMaskedLM(tiny_mae_lm_config())
    with pytest.raises(ValueError, match=r"needs torch >= 2\.6 .*this is torch .*use 'sdpa'"):
        model.set_attn_implementation("flex_attention")


def contrast_inputs(hidden: int = 16):
    generator = torch.Generator().manual_seed(0)
    student = torch.randn(3, 50, hidden, generator=generator, requires_grad=True)
    teacher = torch.randn(3, 50, hidden, generator=generator)
    anchors = torch.rand(3, 50, generator=generator) < 0.2
    key_mask = torch.ones(3, 50, dtype=torch.bool)
    key_mask[2, 35:] = False
    anchors &= key_mask
    return student, teacher, anchors, key_mask


@pytest.mark.parametrize("with_key_mask", [False, True])
def test_tacl_contrast_in_chunks_of_anchors_equals_the_whole_contrast(with_key_mask, monkeypatch):
    """Chunks of 4 anchor slots per row (several chunks, rows with fewer anchors than others): the same loss and
    student gradient as the (anchors, length) scores at once, with and without padding in the denominator."""
    student, teacher, anchors, key_mask = contrast_inputs()
    key_mask = key_mask if with_key_mask else None
    whole = token_contrastive_loss(student, teacher, anchors, 0.05, key_mask)
    (whole_gradient,) = torch.autograd.grad(whole, student)
    monkeypatch.setattr(modeling_tacl, "CONTRAST_CHUNK_SCORES", 4 * 3 * 50)
    chunked = token_contrastive_loss(student, teacher, anchors, 0.05, key_mask)
    (chunked_gradient,) = torch.autograd.grad(chunked, student)
    assert anchors.sum(-1).max() > 8  # three chunks or more
    torch.testing.assert_close(chunked, whole)
    torch.testing.assert_close(chunked_gradient, whole_gradient)


@pytest.mark.parametrize("chunked", [False, True])
def test_tacl_contrast_in_chunks_keeps_no_scores_for_backward(chunked, monkeypatch):
    """States 4 wide, so that the (anchors, length) scores outsize them: only the whole contrast keeps those."""
    student, teacher, anchors, key_mask = contrast_inputs(hidden=4)
    if chunked:
        monkeypatch.setattr(modeling_tacl, "CONTRAST_CHUNK_SCORES", 4 * 3 * 50)
    largest = [0]

    def pack(tensor):
        largest[0] = max(largest[0], tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        token_contrastive_loss(student, teacher, anchors, 0.05, key_mask)
    scores = int(anchors.sum()) * anchors.shape[1]
    assert scores > student.numel()
    assert (largest[0] <= student.numel()) == chunked, largest[0]
