"""Training features every family supports through Transformers' own switches: gradient checkpointing
(`GradientCheckpointingLayer`) and the attention implementations (eager, sdpa)."""

import pytest
import torch

from hf_encoders import BiphasicEncoderForPreTraining, MaeLmForMaskedLM, TaclForPreTraining
from tests.tiny_models import MASK_TOKEN_ID, sample_batch, tiny_biphasic_config, tiny_mae_lm_config, tiny_tacl_config

# Dropout off, so that checkpointing's recomputed forward is the same function as the first one.
FAMILIES = {
    "mae_lm": lambda: MaeLmForMaskedLM(tiny_mae_lm_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
    "biphasic": lambda: BiphasicEncoderForPreTraining(tiny_biphasic_config()),
    "tacl": lambda: TaclForPreTraining(
        tiny_tacl_config(student_config=tiny_tacl_config().student_config.to_dict() | {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
    ),
}


def training_batch(family: str) -> dict:
    batch = sample_batch()
    batch["labels"] = torch.where(batch["input_ids"] == MASK_TOKEN_ID, 7, -100)
    if family == "tacl":
        batch["next_sentence_label"] = torch.tensor([0, 1])
    return batch


def gradients(model, batch) -> dict[str, torch.Tensor]:
    model.zero_grad()
    model(**batch).loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_gradient_checkpointing_gives_the_same_gradients(family):
    torch.manual_seed(0)
    model = FAMILIES[family]().train()
    batch = training_batch(family)
    plain = gradients(model, batch)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    checkpointed_layers = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False)]
    assert checkpointed_layers, "no layer switched to gradient checkpointing"
    checkpointed = gradients(model, batch)
    assert plain.keys() == checkpointed.keys() and plain
    for name, gradient in plain.items():
        torch.testing.assert_close(checkpointed[name], gradient, msg=name)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_eager_and_sdpa_train_alike(family):
    torch.manual_seed(0)
    model = FAMILIES[family]().train()
    batch = training_batch(family)
    losses = {}
    for implementation in ("eager", "sdpa"):
        model.set_attn_implementation(implementation)
        losses[implementation] = model(**batch).loss
    torch.testing.assert_close(losses["eager"], losses["sdpa"])
