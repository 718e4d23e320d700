"""Weights averaged: `pretrain --ema_decay` keeps the moving average the definition gives and writes it as a model
of its own; `hf-encoders average` writes the (weighted) mean of checkpoints, and refuses checkpoints that are not of
one architecture."""

from dataclasses import replace

import pytest
import torch
from transformers import AutoModel, TrainerCallback

from hf_encoders.training.ema import EMA_FOLDER, EmaCallback
from hf_encoders.training.pretrain import build_trainer, pretrain
from tests.helpers import tiny_run_arguments, tiny_training_arguments

DECAY = 0.75


class WeightsAfterEachStep(TrainerCallback):
    def __init__(self):
        self.steps = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.steps.append({name: p.detach().double().clone() for name, p in model.named_parameters()})


def ema_of(trainer) -> EmaCallback:
    return next(callback for callback in trainer.callback_handler.callbacks if isinstance(callback, EmaCallback))


@pytest.mark.parametrize("method", ["mae_lm", "tacl"])
def test_the_moving_average_is_the_definitions(bert, tmp_path, method):
    args = tiny_run_arguments(method, bert, ema_decay=DECAY, validation_split_percentage=None)
    trainer = build_trainer(args, tiny_training_arguments(tmp_path, eval_strategy="no", max_steps=3))
    recorded = WeightsAfterEachStep()
    trainer.add_callback(recorded)
    trainer.train()

    # By hand: the first step's weights, then ema = decay * ema + (1 - decay) * weights after each step.
    expected = dict(recorded.steps[0])
    for weights in recorded.steps[1:]:
        expected = {name: DECAY * expected[name] + (1 - DECAY) * weights[name] for name in expected}
    average = ema_of(trainer).parameters()
    assert set(average) == set(expected)
    for name, value in average.items():
        torch.testing.assert_close(value.double(), expected[name], rtol=0, atol=1e-6, msg=name)
    moved = [name for name in expected if not torch.equal(recorded.steps[-1][name], recorded.steps[0][name])]
    assert moved and any(not torch.allclose(average[name].double(), recorded.steps[-1][name]) for name in moved)
    assert all(p.device == next(trainer.model.parameters()).device for p in average.values())


def test_the_average_is_saved_as_its_own_model(bert, tmp_path):
    args = tiny_run_arguments("mae_lm", bert, ema_decay=DECAY, validation_split_percentage=None)
    result = pretrain(args, tiny_training_arguments(tmp_path, eval_strategy="no", max_steps=3))
    folder = tmp_path / EMA_FOLDER
    loaded = AutoModel.from_pretrained(folder, trust_remote_code=True)  # the encoder, as fine-tuning loads it
    average = ema_of(result.trainer).parameters()
    for name, value in loaded.state_dict().items():
        assert torch.equal(value, average[f"mae_lm.{name}"]), name
    assert (folder / "tokenizer_config.json").is_file() and (folder / "modeling_mae_lm.py").is_file()
    card = (folder / "README.md").read_text()
    assert f"exponential moving average of the training weights** (decay {DECAY}, over 3 optimizer steps)" in card
    assert f"(decay {DECAY}), saved as its own model in the folder ema/" in (tmp_path / "README.md").read_text()


def test_a_bad_decay_is_refused(bert, tmp_path):
    with pytest.raises(ValueError, match=r"--ema_decay must lie in \(0, 1\), got 1.0"):
        build_trainer(tiny_run_arguments("mae_lm", bert, ema_decay=1.0), tiny_training_arguments(tmp_path))


def test_resuming_without_the_average_or_with_another_decay_is_refused(bert, tmp_path):
    args = tiny_run_arguments("mae_lm", bert, validation_split_percentage=None)
    training = tiny_training_arguments(tmp_path / "a", eval_strategy="no", max_steps=2, save_strategy="steps")
    build_trainer(args, training).train()
    checkpoint = str(tmp_path / "a" / "checkpoint-2")
    with pytest.raises(ValueError, match=r"holds no ema\.safetensors: it was saved by a run without --ema_decay"):
        build_trainer(replace(args, ema_decay=DECAY), training, resume_from_checkpoint=checkpoint).train(
            resume_from_checkpoint=checkpoint
        )
    training = tiny_training_arguments(tmp_path / "b", eval_strategy="no", max_steps=2, save_strategy="steps")
    build_trainer(replace(args, ema_decay=DECAY), training).train()
    checkpoint = str(tmp_path / "b" / "checkpoint-2")
    with pytest.raises(ValueError, match=r"with --ema_decay 0\.75, not 0\.5: resume with --ema_decay 0\.75"):
        build_trainer(replace(args, ema_decay=0.5), training, resume_from_checkpoint=checkpoint).train(
            resume_from_checkpoint=checkpoint
        )
