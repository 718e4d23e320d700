"""Unpadded fine-tuning: padding tokens are dropped before the first layer and the layout restored at the end, so a
padded batch costs what its real tokens cost and the stock scripts see nothing different."""

import pytest
import torch

from hf_encoders import (
    BiphasicEncoder,
    BiphasicEncoderForQuestionAnswering,
    BiphasicEncoderForSequenceClassification,
    BiphasicEncoderForTokenClassification,
    MaeLmForQuestionAnswering,
    MaeLmForSequenceClassification,
    MaeLmForTokenClassification,
    MaeLmModel,
)
from hf_encoders.models._shared.packed_sequences import Unpadded
from tests.tiny_models import VOCAB_SIZE, tiny_biphasic_config, tiny_mae_lm_config

MODELS = [
    (MaeLmModel, tiny_mae_lm_config, {}),
    (MaeLmForSequenceClassification, tiny_mae_lm_config, {}),
    (MaeLmForTokenClassification, tiny_mae_lm_config, {}),
    (MaeLmForQuestionAnswering, tiny_mae_lm_config, {}),
    (BiphasicEncoder, tiny_biphasic_config, {}),
    (BiphasicEncoder, tiny_biphasic_config, {"is_causal": True}),
    (BiphasicEncoderForSequenceClassification, tiny_biphasic_config, {}),
    (BiphasicEncoderForTokenClassification, tiny_biphasic_config, {}),
    (BiphasicEncoderForQuestionAnswering, tiny_biphasic_config, {}),
]


def padded_batch() -> dict[str, torch.Tensor]:
    """Three rows of 10, 6 and 3 real tokens, right-padded as the stock scripts pad."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, VOCAB_SIZE, (3, 10), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    for row, length in ((1, 6), (2, 3)):
        attention_mask[row, length:] = 0
        input_ids[row, length:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def real_tokens(row: int, batch: dict) -> torch.Tensor:
    return batch["input_ids"][row][batch["attention_mask"][row].bool()][None]


def per_row(output, attention_mask: torch.Tensor) -> list[torch.Tensor]:
    """Each row's outputs: on its real tokens for per-token outputs, the row's own for sequence classification."""
    if hasattr(output, "start_logits"):
        values = torch.stack([output.start_logits, output.end_logits], -1)
    else:
        values = output.logits if hasattr(output, "logits") else output.last_hidden_state
    if values.dim() == 2 and values.shape[1] != attention_mask.shape[1]:  # (batch, labels)
        return list(values)
    return [row[real.bool()] for row, real in zip(values, attention_mask)]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize(("model_class", "config", "options"), MODELS)
def test_a_padded_row_gets_the_outputs_and_gradients_it_gets_alone(model_class, config, options, attention):
    torch.manual_seed(0)
    model = model_class(config(attn_implementation=attention)).eval()
    batch = padded_batch()
    together = per_row(model(**batch, **options), batch["attention_mask"])
    torch.stack([values.pow(2).sum() for values in together]).sum().backward()
    batched = [parameter.grad.clone() for parameter in model.parameters() if parameter.grad is not None]
    model.zero_grad()
    for row, values in enumerate(together):
        ids = real_tokens(row, batch)
        (alone,) = per_row(model(input_ids=ids, **options), torch.ones_like(ids))
        torch.testing.assert_close(values, alone, rtol=1e-5, atol=1e-5)
        alone.pow(2).sum().backward()
    alone_grads = [parameter.grad for parameter in model.parameters() if parameter.grad is not None]
    for got, expected in zip(batched, alone_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("model_class", [MaeLmModel, BiphasicEncoder])
def test_the_layout_is_restored_with_zeros_on_padding_in_every_returned_layer(model_class):
    config = tiny_mae_lm_config() if model_class is MaeLmModel else tiny_biphasic_config()
    batch = padded_batch()
    output = model_class(config).eval()(**batch, output_hidden_states=True)
    assert output.last_hidden_state.shape[:2] == batch["input_ids"].shape
    for states in (output.last_hidden_state, *output.hidden_states):
        assert states.shape[:2] == batch["input_ids"].shape
        assert states[~batch["attention_mask"].bool()].abs().max() == 0


def test_unpadded_layers_see_only_the_real_tokens():
    """What makes padding free: every linear layer of the stack runs on as many rows as there are real tokens."""
    model = MaeLmModel(tiny_mae_lm_config()).eval()
    batch = padded_batch()
    rows_seen = []
    model.layers[0].intermediate.register_forward_hook(lambda module, inputs, output: rows_seen.append(inputs[0].shape))
    model(**batch)
    assert rows_seen == [torch.Size([1, int(batch["attention_mask"].sum()), 32])]


def test_unpadded_round_trip():
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    values = torch.arange(6.0).view(2, 3, 1)
    unpadded = Unpadded(mask)
    assert unpadded.unpad(values).flatten().tolist() == [0.0, 1.0, 4.0, 5.0]
    assert unpadded.pad(unpadded.unpad(values)).flatten().tolist() == [0.0, 1.0, 0.0, 0.0, 4.0, 5.0]
