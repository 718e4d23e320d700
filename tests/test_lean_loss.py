"""The lean vocabulary loss (models/_shared/loss_utils.py): the chunked linear + cross-entropy gives the loss and gradients of
the plain `cross_entropy(linear(rows).float())`, keeps no logits for backward, and gathers the labelled rows without
a graph break beyond the one read of their count."""

import sys

import pytest
import torch
from torch import nn

from hf_encoders import BiphasicEncoderForPreTraining
from hf_encoders.models._shared.loss_utils import LinearCrossEntropy, labelled_rows_loss
from tests.method_specs import PRETRAINING_METHODS, tiny_pretraining_model
from tests.tiny_models import counting_batch, tiny_biphasic_config

ROWS, HIDDEN, VOCAB = 10, 16, 50


def plain_loss(rows, weight, bias, targets, denominator):
    logits = nn.functional.linear(rows, weight, bias).float()
    return nn.functional.cross_entropy(logits, targets, reduction="sum") / denominator


def loss_and_gradients(loss_function, rows, projection, targets, denominator):
    inputs = [rows, *projection.parameters()]
    loss = loss_function(rows, projection.weight, projection.bias, targets, denominator)
    # A grad_output other than 1, as gradient accumulation's scaling gives: backward must scale the stored gradients.
    return loss, torch.autograd.grad(3 * loss, inputs)


@pytest.mark.parametrize("chunks", [1, 2, 3, 7, 16])  # 3 and 7 do not divide the 10 rows; 16 leaves chunks empty
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("denominator", [None, torch.tensor(25)], ids=["labelled count", "num_items_in_batch"])
def test_chunked_loss_and_gradients_equal_the_plain_ones(chunks, bias, denominator):
    torch.manual_seed(0)
    rows = torch.randn(ROWS, HIDDEN, requires_grad=True)
    projection = nn.Linear(HIDDEN, VOCAB, bias=bias)
    targets = torch.randint(0, VOCAB, (ROWS,))
    denominator = ROWS if denominator is None else denominator
    loss, gradients = loss_and_gradients(
        lambda *inputs: LinearCrossEntropy.apply(*inputs, chunks), rows, projection, targets, denominator
    )
    expected_loss, expected_gradients = loss_and_gradients(plain_loss, rows, projection, targets, denominator)
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-6)
    for gradient, expected in zip(gradients, expected_gradients, strict=True):
        torch.testing.assert_close(gradient, expected, rtol=1e-5, atol=1e-6)


def test_half_precision_inputs_get_gradients_in_their_dtype():
    torch.manual_seed(0)
    rows = torch.randn(ROWS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    projection = nn.Linear(HIDDEN, VOCAB).to(torch.bfloat16)
    targets = torch.randint(0, VOCAB, (ROWS,))
    loss, gradients = loss_and_gradients(
        lambda *inputs: LinearCrossEntropy.apply(*inputs, 3), rows, projection, targets, ROWS
    )
    expected_loss, expected_gradients = loss_and_gradients(plain_loss, rows, projection, targets, ROWS)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, expected_loss)
    for gradient, expected in zip(gradients, expected_gradients, strict=True):
        assert gradient.dtype == torch.bfloat16
        # The weight and bias gradients are summed over the chunks in fp32, so only bf16 rounding separates them.
        torch.testing.assert_close(gradient, expected, rtol=2e-2, atol=4e-3)


def test_no_rows_give_zero_loss_and_zero_gradients():
    rows = torch.randn(0, HIDDEN, requires_grad=True)
    projection = nn.Linear(HIDDEN, VOCAB)
    loss, gradients = loss_and_gradients(
        lambda *inputs: LinearCrossEntropy.apply(*inputs, 1), rows, projection, torch.zeros(0, dtype=torch.long), 1
    )
    assert loss.item() == 0
    assert [gradient.shape for gradient in gradients] == [(0, HIDDEN), (VOCAB, HIDDEN), (VOCAB,)]
    assert not any(gradient.any() for gradient in gradients)


def test_a_batch_without_labels_gives_zero_loss_and_zero_gradients():
    hidden_states = torch.randn(2, 6, HIDDEN, requires_grad=True)
    projection = nn.Linear(HIDDEN, VOCAB)
    loss, _ = labelled_rows_loss(projection, hidden_states, torch.full((2, 6), -100))
    loss.backward()
    assert loss.item() == 0
    for tensor in (hidden_states, projection.weight, projection.bias):
        assert tensor.grad is not None and not tensor.grad.any()


def test_training_fuses_only_with_more_labelled_rows_than_hidden_units():
    """Below that, the logits are smaller than the weight's gradient that fusing would keep instead."""
    hidden_states = torch.randn(2, 12, HIDDEN, requires_grad=True)
    projection = nn.Linear(HIDDEN, VOCAB)
    labels = torch.randint(0, VOCAB, (2, 12))
    _, few = labelled_rows_loss(
        projection, hidden_states, labels.masked_fill(torch.arange(24).view(2, 12) >= HIDDEN, -100)
    )
    _, many = labelled_rows_loss(projection, hidden_states, labels)
    assert few.shape == (HIDDEN, VOCAB) and many is None


def test_training_keeps_no_logits_for_backward():
    """What autograd saves is the size of the rows and the weight, not (rows, vocab) fp32 logits."""
    torch.manual_seed(0)
    hidden_states = torch.randn(4, 64, HIDDEN, requires_grad=True)
    projection = nn.Linear(HIDDEN, 1000)
    labels = torch.randint(0, 1000, (4, 64))
    saved = {}

    def pack(tensor):
        saved[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        _, logits = labelled_rows_loss(projection, hidden_states, labels)
    assert logits is None
    logits_bytes = labels.numel() * projection.out_features * 4
    assert sum(saved.values()) < logits_bytes / 10


def test_evaluation_returns_the_labelled_rows_logits_in_row_major_order():
    torch.manual_seed(0)
    hidden_states = torch.randn(2, 6, HIDDEN)
    projection = nn.Linear(HIDDEN, VOCAB)
    labels = torch.full((2, 6), -100)
    labels[1, 0], labels[0, 4], labels[0, 1] = 3, 4, 5
    with torch.no_grad():
        loss, logits = labelled_rows_loss(projection, hidden_states, labels, labelled_count=3)
    labelled = labels != -100
    torch.testing.assert_close(logits, projection(hidden_states[labelled]))
    torch.testing.assert_close(loss, nn.functional.cross_entropy(logits, labels[labelled]))


def test_tied_weights_get_the_gradient_of_both_uses():
    """The biphasic head is tied to the embeddings: the fused loss's weight gradient adds to the embedding one."""
    torch.manual_seed(0)
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config(tie_word_embeddings=True)).train()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    batch = counting_batch("biphasic-mlm", torch.Generator().manual_seed(0), batch_size=16)
    fused = model(**batch)
    assert fused.logits is None
    fused.loss.backward()
    got = model.lm_head.weight.grad.clone()
    model.zero_grad()
    outputs = model.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], is_causal=False)
    labelled = batch["labels"] != -100
    logits = model.lm_head(outputs.last_hidden_state[labelled])
    nn.functional.cross_entropy(logits.float(), batch["labels"][labelled]).backward()
    torch.testing.assert_close(got, model.lm_head.weight.grad, rtol=1e-5, atol=1e-7)


def unfused_labelled_rows_loss(
    projection,
    hidden_states,
    labels,
    num_items_in_batch=None,
    *,
    transform=None,
    labelled_count=None,
    all_positions,
    target_positions=None,
    target_mask=None,
):
    """The loss before the fused one: boolean-mask gather (which reads the count itself), the whole head, fp32
    cross-entropy."""
    assert not all_positions, "a training step asks for the labelled rows only"
    assert target_positions is None, "counting_batch makes no index tensors"
    labelled = labels != -100
    rows = hidden_states[labelled]
    logits = projection(rows if transform is None else transform(rows))
    loss = nn.functional.cross_entropy(logits.float(), labels[labelled], reduction="sum")
    return loss / (num_items_in_batch if num_items_in_batch is not None else labelled.sum().clamp(min=1)), logits


def training_step(model, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    torch.manual_seed(1)  # the same dropout and MAE-LM encoder masks in both runs
    outputs = model(**batch)
    outputs.loss.backward()
    return outputs, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("method", PRETRAINING_METHODS)
def test_a_training_step_is_unchanged_by_the_fusion(method, monkeypatch):
    model = tiny_pretraining_model(method).train()
    # 16 rows of 16: more labelled positions than the tiny models' 32 hidden units, so the loss runs fused.
    batch = counting_batch(method, torch.Generator().manual_seed(0), batch_size=16)
    fused, fused_gradients = training_step(model, batch)
    assert fused.logits is None, "the training step did not take the fused path"
    monkeypatch.setattr(sys.modules[type(model).__module__], "labelled_rows_loss", unfused_labelled_rows_loss)
    unfused, unfused_gradients = training_step(model, batch)
    torch.testing.assert_close(fused.loss, unfused.loss, rtol=1e-5, atol=1e-6)
    assert fused_gradients.keys() == unfused_gradients.keys()
    for name, gradient in unfused_gradients.items():
        torch.testing.assert_close(fused_gradients[name], gradient, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("grad", [True, False], ids=["training", "evaluation"])
def test_the_labelled_row_gather_breaks_no_graph_when_given_the_count(grad):
    torch.manual_seed(0)
    hidden_states = torch.randn(4, 16, HIDDEN, requires_grad=True)
    transform, projection = nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, VOCAB)
    labels = torch.randint(0, VOCAB, (4, 16)).masked_fill(torch.rand(4, 16) < 0.5, -100)  # ~32 rows: fused
    count = int((labels != -100).sum())
    explain = torch._dynamo.explain(labelled_rows_loss)
    with torch.set_grad_enabled(grad):
        given = explain(projection, hidden_states, labels, transform=transform, labelled_count=count)
        read = explain(projection, hidden_states, labels, transform=transform)
    assert given.graph_break_count == 0, given.break_reasons
    assert read.graph_break_count <= 1, read.break_reasons  # reading the count is the one host sync
