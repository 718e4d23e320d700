"""Weights averaged: `pretrain --ema_decay` keeps the moving average the definition gives and writes it as a model
of its own; `hf-encoders average` writes the (weighted) mean of checkpoints, and refuses checkpoints that are not of
one architecture."""

import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer, TrainerCallback

from hf_encoders import BiphasicEncoderForPreTraining, MaeLmForMaskedLM, MaeLmForSequenceClassification
from hf_encoders.average import average_checkpoints
from hf_encoders.data import embedded_documents, train_wordpiece_tokenizer
from hf_encoders.training.ema import EMA_FOLDER, EmaCallback
from hf_encoders.training.pretrain import build_trainer, pretrain
from hf_encoders_cli import console, main
from tests.helpers import model_folder_files, tiny_run_arguments, tiny_training_arguments
from tests.tiny_models import corpus_tokenizer, tiny_biphasic_config, tiny_mae_lm_config

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


def test_the_average_is_saved_as_its_own_model_and_in_every_checkpoint(bert, tmp_path):
    args = tiny_run_arguments("mae_lm", bert, ema_decay=DECAY, validation_split_percentage=None)
    training = tiny_training_arguments(tmp_path, eval_strategy="no", max_steps=3, save_strategy="steps", save_steps=1)
    result = pretrain(args, training)
    folder = tmp_path / EMA_FOLDER
    assert result.summary().endswith(f"; moving average in {folder}")
    loaded = AutoModel.from_pretrained(folder, trust_remote_code=True)  # the encoder, as fine-tuning loads it
    average = ema_of(result.trainer).parameters()
    for name, value in loaded.state_dict().items():
        assert torch.equal(value, average[f"mae_lm.{name}"]), name
    assert (folder / "tokenizer_config.json").is_file() and (folder / "modeling_mae_lm.py").is_file()
    card = (folder / "README.md").read_text()
    assert f"exponential moving average of the training weights** (decay {DECAY}, over 3 optimizer steps)" in card
    assert f"(decay {DECAY}), saved as its own model in the folder ema/" in (tmp_path / "README.md").read_text()
    in_checkpoint = load_file(tmp_path / "checkpoint-3" / "ema.safetensors")
    assert set(in_checkpoint) == set(average)
    assert all(torch.equal(in_checkpoint[name], value) for name, value in average.items())

    # A run's last checkpoints, averaged: what `hf-encoders average` is for.
    checkpoints = [str(tmp_path / f"checkpoint-{step}") for step in (2, 3)]
    assert main(["average", *checkpoints, "--output_dir", str(tmp_path / "last-two")]) == 0
    averaged = AutoModelForMaskedLM.from_pretrained(tmp_path / "last-two", trust_remote_code=True)
    ends = [MaeLmForMaskedLM.from_pretrained(checkpoint).get_input_embeddings().weight for checkpoint in checkpoints]
    torch.testing.assert_close(averaged.get_input_embeddings().weight, (ends[0] + ends[1]) / 2)


def test_a_bad_decay_is_refused(bert, tmp_path):
    with pytest.raises(ValueError, match=r"--ema_decay must lie in \(0, 1\), got 1.0"):
        build_trainer(tiny_run_arguments("mae_lm", bert, ema_decay=1.0), tiny_training_arguments(tmp_path))


def test_a_sharded_run_is_refused():
    with pytest.raises(ValueError, match="--ema_decay averages whole weights on each device, and FSDP shards them"):
        EmaCallback(DECAY).on_train_begin(SimpleNamespace(fsdp=["full_shard"]), None, None, model=torch.nn.Linear(2, 2))


def test_resuming_without_the_average_or_with_another_decay_is_refused(bert, tmp_path):
    args = tiny_run_arguments("mae_lm", bert, validation_split_percentage=None)
    training = tiny_training_arguments(
        tmp_path / "a", eval_strategy="no", max_steps=1, save_strategy="steps", save_steps=1
    )
    build_trainer(args, training).train()
    checkpoint = str(tmp_path / "a" / "checkpoint-1")
    with pytest.raises(ValueError, match=r"holds no ema\.safetensors: it was saved by a run without --ema_decay"):
        build_trainer(replace(args, ema_decay=DECAY), training, resume_from_checkpoint=checkpoint).train(
            resume_from_checkpoint=checkpoint
        )
    training = tiny_training_arguments(
        tmp_path / "b", eval_strategy="no", max_steps=1, save_strategy="steps", save_steps=1
    )
    build_trainer(replace(args, ema_decay=DECAY), training).train()
    checkpoint = str(tmp_path / "b" / "checkpoint-1")
    with pytest.raises(ValueError, match=r"with --ema_decay 0\.75, not 0\.5: resume with --ema_decay 0\.75"):
        build_trainer(replace(args, ema_decay=0.5), training, resume_from_checkpoint=checkpoint).train(
            resume_from_checkpoint=checkpoint
        )


# ---- hf-encoders average ----


@pytest.fixture(scope="module")
def tokenizer():
    return corpus_tokenizer()


def save_mae_lm(folder, tokenizer, seed: int, model_class=None, **overrides) -> str:
    torch.manual_seed(seed)
    config = tiny_mae_lm_config(vocab_size=len(tokenizer), **overrides)
    (model_class or MaeLmForMaskedLM)(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def mae_lm_checkpoints(tmp_path_factory, tokenizer):
    folder = tmp_path_factory.mktemp("checkpoints")
    return [save_mae_lm(folder / f"seed{seed}", tokenizer, seed) for seed in range(3)]


def test_the_average_is_the_weighted_mean_and_loads(mae_lm_checkpoints, tmp_path):
    output = tmp_path / "average"
    argv = ["average", *mae_lm_checkpoints, "--output_dir", str(output), "--weights", "1", "2", "5"]
    assert main(argv) == 0

    # By hand, from the files: (1 a + 2 b + 5 c) / 8.
    saved = [load_file(Path(checkpoint) / "model.safetensors") for checkpoint in mae_lm_checkpoints]
    averaged = load_file(output / "model.safetensors")
    assert set(averaged) == set(saved[0])
    for name, value in averaged.items():
        expected = (saved[0][name].double() + 2 * saved[1][name].double() + 5 * saved[2][name].double()) / 8
        torch.testing.assert_close(value.double(), expected, rtol=0, atol=1e-7, msg=name)
    assert not torch.equal(
        saved[0]["mae_lm.embeddings.word_embeddings.weight"], saved[1]["mae_lm.embeddings.word_embeddings.weight"]
    )

    assert model_folder_files(MaeLmForMaskedLM) <= {path.name for path in output.iterdir()}
    encoder = AutoModel.from_pretrained(output, trust_remote_code=True)
    masked_lm = AutoModelForMaskedLM.from_pretrained(output, trust_remote_code=True)
    assert torch.equal(encoder.embeddings.word_embeddings.weight, averaged["mae_lm.embeddings.word_embeddings.weight"])
    assert masked_lm.get_output_embeddings().weight is masked_lm.get_input_embeddings().weight
    assert (
        AutoTokenizer.from_pretrained(output).get_vocab()
        == AutoTokenizer.from_pretrained(mae_lm_checkpoints[0]).get_vocab()
    )
    card = (output / "README.md").read_text()
    assert "weighted mean of the weights of 3 checkpoints of one mae_lm" in card
    assert f"| {mae_lm_checkpoints[2]} | 0.625 |" in card and "checkpoint-average" in card


def test_equal_weights_by_default(mae_lm_checkpoints, tmp_path):
    average_checkpoints(mae_lm_checkpoints[:2], tmp_path)
    saved = [load_file(Path(checkpoint) / "model.safetensors") for checkpoint in mae_lm_checkpoints[:2]]
    for name, value in load_file(tmp_path / "model.safetensors").items():
        torch.testing.assert_close(value, (saved[0][name] + saved[1][name]) / 2, msg=name)


# What the second checkpoint is, beside an MAE-LM masked LM: (its weights, the refusal).
REFUSALS = {
    "another model type": (
        None,
        r"is a 'mae_lm' checkpoint and .* a 'biphasic' checkpoint: average checkpoints of one",
    ),
    "another class": (
        None,
        "is a MaeLmForMaskedLM model and .* a MaeLmForSequenceClassification model: average checkpoints of one",
    ),
    "another size": (
        None,
        r"differ in decoder_hidden_size \(32 vs 64\), hidden_size \(32 vs 64\): average checkpoints of one architecture and size",
    ),
    "another vocabulary": (None, "have different vocabularies, so their embedding rows stand for different tokens"),
    "too few weights": ([1.0], "--weights gives 1 weights for 2 checkpoints: give one per checkpoint"),
    "a zero weight": ([1.0, 0.0], r"--weights must all be positive, got 1\.0 0\.0"),
}


def second_checkpoint(kind: str, folder, tokenizer) -> str:
    if kind == "another model type":
        BiphasicEncoderForPreTraining(tiny_biphasic_config(vocab_size=len(tokenizer))).save_pretrained(folder)
        return str(folder)
    if kind == "another class":
        return save_mae_lm(folder, tokenizer, 1, MaeLmForSequenceClassification)
    if kind == "another size":
        return save_mae_lm(folder, tokenizer, 1, hidden_size=64)
    if kind == "another vocabulary":
        other = train_wordpiece_tokenizer(embedded_documents()[40:80], vocab_size=len(tokenizer))
        assert len(other) == len(tokenizer)  # one config: only the vocabularies differ
        return save_mae_lm(folder, other, 1)
    return save_mae_lm(folder, tokenizer, 1)


@pytest.mark.parametrize("kind", list(REFUSALS))
def test_checkpoints_not_of_one_architecture_or_bad_weights_are_refused(kind, mae_lm_checkpoints, tokenizer, tmp_path):
    weights, message = REFUSALS[kind]
    second = second_checkpoint(kind, tmp_path / "second", tokenizer)
    with pytest.raises(ValueError, match=message):
        average_checkpoints([mae_lm_checkpoints[0], second], tmp_path / "average", weights)
    assert not (tmp_path / "average").exists()


def test_the_script_refuses_in_one_line(mae_lm_checkpoints, tmp_path, monkeypatch, capsys):
    argv = ["hf-encoders", "average", *mae_lm_checkpoints[:2], "--output_dir", str(tmp_path), "--weights", "1", "-1"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        console()
    assert exit_info.value.code == 2
    assert (
        capsys.readouterr().err
        == "hf-encoders: error: --weights must all be positive, got 1.0 -1.0: leave out a checkpoint rather than weigh it 0.\n"
    )
