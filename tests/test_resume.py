"""A run killed between checkpoints and resumed continues exactly: same losses, same final weights, the biphasic
phase and an encoder hold included; a checkpoint left half-written by the kill is never resumed from. A streamed run
resumes from the stream's position saved in the checkpoint, with the batches and masks of the uninterrupted run and
without reading again what it trained on."""

import logging
import os
import signal

import pytest
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from hf_encoders.methods import METHODS, load
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.ema import EmaCallback
from hf_encoders.training.pretrain import build_trainer, pretrain
from hf_encoders.training.resume import last_complete_checkpoint, resolve_resume
from hf_encoders.training.streaming import stream_state_file
from tests.method_specs import TINY_CONFIGS, tiny_run_options
from tests.tiny_models import save_tiny_bert, tiny_tokenizer

MAX_STEPS, SAVE_STEPS, KILLED_AT = 6, 2, 5


class KillAt(TrainerCallback):
    """Dies after optimizer step `step`, between two checkpoints, without Trainer saving anything."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt(f"killed at step {self.step}")


@pytest.fixture(scope="module")
def bert_init(tmp_path_factory):
    """A tiny BERT with NSP head and its tokenizer: what TaCL continues from, and the other runs' tokenizer."""
    return save_tiny_bert(tmp_path_factory.mktemp("bert"))


def method_arguments(method: str, bert_init: str, **overrides) -> PretrainArguments:
    # One tokenizer for both runs: training one on the spot is not reproducible (see build_trainer). Biphasic's phase
    # switch (step 3) comes before the kill.
    settings = dict(max_documents=40, block_size=32, **tiny_run_options(method, bert_init))
    return PretrainArguments(method=method, **{**settings, **overrides})


def training_arguments(output_dir, **overrides) -> TrainingArguments:
    settings = dict(
        output_dir=str(output_dir),
        max_steps=MAX_STEPS,
        save_steps=SAVE_STEPS,
        logging_steps=1,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        report_to="none",
        use_cpu=True,
        seed=0,
        dataloader_pin_memory=False,
        disable_tqdm=True,
    )
    return TrainingArguments(**{**settings, **overrides})


def logged(trainer, key="loss") -> dict[int, float]:
    return {entry["step"]: entry[key] for entry in trainer.state.log_history if key in entry}


def assert_same_weights(trainer, uninterrupted) -> None:
    for (name, before), after in zip(uninterrupted.model.state_dict().items(), trainer.model.state_dict().values()):
        assert torch.equal(before, after), name


# Every method with token masking, and each word unit with two methods (its masks read the packed word starts).
@pytest.mark.parametrize(
    "method, masking",
    [(method, "token") for method in METHODS]
    + [("mlm", "whole_word"), ("tacl", "whole_word"), ("mae_lm", "span"), ("biphasic", "span")],
)
def test_a_killed_run_resumes_exactly(method, masking, bert_init, tmp_path):
    args = method_arguments(method, bert_init, masking=masking)
    uninterrupted = build_trainer(args, training_arguments(tmp_path / "a"))
    uninterrupted.train()

    killed = build_trainer(args, training_arguments(tmp_path / "b"))
    killed.add_callback(KillAt(KILLED_AT))
    with pytest.raises(KeyboardInterrupt):
        killed.train()
    # The kill also caught the next save half-way: weights written, trainer state not yet.
    partial = tmp_path / "b" / f"checkpoint-{KILLED_AT + 1}"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"\0" * 100)

    checkpoint = resolve_resume(True, tmp_path / "b")
    assert checkpoint == str(tmp_path / "b" / "checkpoint-4")
    # As `hf-encoders pretrain --resume_from_checkpoint true` does it: no tokenizer given, the checkpoint's is used.
    resumed_args = (
        method_arguments(method, bert_init, tokenizer_name=None, vocab_size=300, masking=masking)
        if method != "tacl"
        else args
    )  # --vocab_size, read without a tokenizer, is not refused though the resumed run reads the checkpoint's
    resumed = build_trainer(resumed_args, training_arguments(tmp_path / "b"), resume_from_checkpoint=checkpoint)
    resumed.train(resume_from_checkpoint=checkpoint)

    # Steps 1-4 come back with the checkpoint's trainer state; 5 and 6 are trained again and must match exactly.
    assert logged(resumed) == logged(uninterrupted) and sorted(logged(resumed)) == list(range(1, MAX_STEPS + 1))
    assert_same_weights(resumed, uninterrupted)
    if method == "biphasic":
        assert set(logged(resumed, "clm_loss")) == {1, 2, 3} and set(logged(resumed, "mlm_loss")) == {4, 5, 6}


def test_a_killed_run_resumes_its_moving_average_exactly(bert_init, tmp_path):
    """--ema_decay: the average saved in the checkpoint continues as in the uninterrupted run."""
    args = method_arguments("mae_lm", bert_init, ema_decay=0.8)
    uninterrupted = build_trainer(args, training_arguments(tmp_path / "a"))
    uninterrupted.train()
    killed = build_trainer(args, training_arguments(tmp_path / "b"))
    killed.add_callback(KillAt(KILLED_AT))
    with pytest.raises(KeyboardInterrupt):
        killed.train()
    checkpoint = resolve_resume(True, tmp_path / "b")
    resumed = build_trainer(args, training_arguments(tmp_path / "b"), resume_from_checkpoint=checkpoint)
    resumed.train(resume_from_checkpoint=checkpoint)

    assert logged(resumed) == logged(uninterrupted)
    assert_same_weights(resumed, uninterrupted)
    expected, got = (
        next(callback for callback in trainer.callback_handler.callbacks if isinstance(callback, EmaCallback))
        for trainer in (uninterrupted, resumed)
    )
    assert int(got.average.n_averaged) == MAX_STEPS
    for name, value in expected.parameters().items():
        assert torch.equal(got.parameters()[name], value), name


@pytest.mark.parametrize("hold, checkpoint_step", [(3, 2), (2, 2), (3, 4)])
def test_a_run_resumed_inside_or_after_the_encoder_hold_continues_exactly(hold, checkpoint_step, bert_init, tmp_path):
    """MAE-LM continuing an encoder held (`--hold_encoder_steps`), resumed inside the hold, at its last step or
    after it."""
    settings = dict(model_name_or_path=bert_init, hold_encoder_steps=hold, max_documents=40, block_size=32)
    args = PretrainArguments(method="mae_lm", **settings)
    uninterrupted = build_trainer(args, training_arguments(tmp_path / "a"))
    uninterrupted.train()
    checkpoint = str(tmp_path / "a" / f"checkpoint-{checkpoint_step}")
    resumed = build_trainer(args, training_arguments(tmp_path / "b"), resume_from_checkpoint=checkpoint)
    resumed.train(resume_from_checkpoint=checkpoint)
    assert logged(resumed) == logged(uninterrupted)
    assert_same_weights(resumed, uninterrupted)
    assert all(parameter.requires_grad for parameter in resumed.model.parameters())


def test_resuming_inside_a_hold_without_it_is_refused_and_a_hold_the_checkpoint_lacks_warned(
    bert_init, tmp_path, caplog
):
    settings = dict(model_name_or_path=bert_init, max_documents=40, block_size=32)
    checkpoints = {}
    for hold in (3, 1, None):  # at checkpoint-2: inside the hold, past it, never held
        output = tmp_path / f"held_{hold}"
        build_trainer(
            PretrainArguments(method="mae_lm", hold_encoder_steps=hold, **settings),
            training_arguments(output, max_steps=2),
        ).train()
        checkpoints[hold] = str(output / "checkpoint-2")

    def resume(hold, checkpoint, **training):
        arguments = PretrainArguments(method="mae_lm", hold_encoder_steps=hold, **settings)
        build_trainer(arguments, training_arguments(tmp_path / "b", **training), resume_from_checkpoint=checkpoint)

    with pytest.raises(
        ValueError, match=r"\(step 2\) comes from a run that held its encoder for the first 3 steps; pass "
    ):
        resume(None, checkpoints[3])
    # Trainer would rebuild the callback with the checkpoint's 3 steps, whatever the option says.
    with pytest.raises(ValueError, match=r"brings back .*'s hold \(3 steps\), not --hold_encoder_steps 5: pass"):
        resume(5, checkpoints[3], restore_callback_states_from_checkpoint=True)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        resume(None, checkpoints[1])  # the hold ended at step 1: the run continues exactly without it
        assert caplog.text == ""
        resume(5, checkpoints[3])
        resume(4, checkpoints[None])
    assert "held its encoder for 3 steps; this run holds it until step 5" in caplog.text
    assert "trained its encoder from the first step; this run holds it until step 4" in caplog.text


class SignalAt(TrainerCallback):
    """Sends this process SIGTERM during optimizer step `step`, as SLURM or a preemptible cloud would."""

    def __init__(self, step: int):
        self.step = step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step + 1 == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.parametrize("method", ["mae_lm", "biphasic"])
def test_a_preempted_run_saves_after_its_step_and_resumes_exactly(method, bert_init, tmp_path):
    args = method_arguments(method, bert_init)
    uninterrupted = build_trainer(args, training_arguments(tmp_path / "a"))
    uninterrupted.train()

    handler = signal.getsignal(signal.SIGTERM)
    preempted = build_trainer(args, training_arguments(tmp_path / "b"))
    preempted.add_callback(SignalAt(KILLED_AT))
    preempted.train()  # returns: the step under way finishes, a checkpoint is written, training stops
    assert preempted.state.global_step == KILLED_AT and signal.getsignal(signal.SIGTERM) == handler
    assert resolve_resume(True, tmp_path / "b") == str(tmp_path / "b" / f"checkpoint-{KILLED_AT}")

    checkpoint = resolve_resume(True, tmp_path / "b")
    resumed = build_trainer(args, training_arguments(tmp_path / "b"), resume_from_checkpoint=checkpoint)
    resumed.train(resume_from_checkpoint=checkpoint)
    assert logged(resumed) == logged(uninterrupted)
    assert_same_weights(resumed, uninterrupted)


def test_a_run_that_raises_gives_the_signals_back_to_their_handlers(bert_init, tmp_path, monkeypatch):
    def diverged(self, *args, **kwargs):
        raise RuntimeError("the loss is not finite")  # as NonFiniteLossCallback raises, out of trainer.train()

    monkeypatch.setattr(Trainer, "training_step", diverged)
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    with pytest.raises(RuntimeError, match="not finite"):
        pretrain(method_arguments("mae_lm", bert_init), training_arguments(tmp_path))
    # Otherwise the next Ctrl-C would only set the flag of a run that is over.
    assert {number: signal.getsignal(number) for number in handlers} == handlers


def test_partial_checkpoints_are_skipped_and_named(tmp_path):
    (tmp_path / "checkpoint-2").mkdir()
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-10").mkdir()  # numerically last, but half-written
    assert last_complete_checkpoint(tmp_path) == tmp_path / "checkpoint-2"
    with pytest.raises(ValueError, match="not a complete Trainer checkpoint"):
        resolve_resume(str(tmp_path / "checkpoint-10"), tmp_path)
    with pytest.raises(ValueError, match="no complete checkpoint"):
        resolve_resume(True, tmp_path / "checkpoint-10")
    assert resolve_resume(None, tmp_path) is None and resolve_resume("false", tmp_path) is None


@pytest.mark.parametrize("method", list(TINY_CONFIGS))
def test_seeded_masks_depend_on_seed_epoch_and_batch_only(method):
    tokenizer = tiny_tokenizer(eos_token="[SEP]")  # the biphasic collator ends documents with EOS
    collator = load(METHODS[method].collator)(tokenizer, seed=7, mlm_probability=0.5)
    examples = [{"input_ids": list(range(5, 37))}, {"input_ids": list(range(20, 52))}]

    def masked_ids():
        batch = collator(examples)
        return batch.get("mlm_input_ids", batch["input_ids"])

    rng_before = torch.get_rng_state()
    first = masked_ids()
    assert torch.equal(torch.get_rng_state(), rng_before), "seeded masking must not draw from the global RNG"
    torch.manual_seed(123)  # whatever else the process does in between
    assert torch.equal(masked_ids(), first)
    collator.epoch = 1
    assert not torch.equal(masked_ids(), first), "a new epoch draws new masks"


class RecordedBatches:
    """The batches a trainer trains on (its `compute_loss` inputs), and how many its collator made."""

    def __init__(self, trainer):
        self.trained, self.collated = [], 0
        compute_loss, collator = trainer.compute_loss, trainer.data_collator

        def recording_compute_loss(model, inputs, *args, **kwargs):
            self.trained.append({key: inputs[key].clone() for key in ("input_ids", "labels")})
            return compute_loss(model, inputs, *args, **kwargs)

        def counting_collator(examples):
            self.collated += 1
            return collator(examples)

        trainer.compute_loss, trainer.data_collator = recording_compute_loss, counting_collator


def assert_same_batches(got: list[dict], expected: list[dict]) -> None:
    assert len(got) == len(expected)
    for step, (a, b) in enumerate(zip(got, expected)):
        assert all(torch.equal(a[key], b[key]) for key in a), f"batch {step} differs"


# One document packs into 15 blocks: 3 batches of 5 (the checkpoint, step 4, lies in the stream's second pass) or 4
# of 4 (the checkpoint comes at the end of the first pass).
@pytest.mark.parametrize("workers, max_documents, batch_size", [(0, 40, 4), (1, 40, 4), (0, 1, 5), (0, 1, 4)])
def test_a_streamed_run_resumes_from_the_stream_state_without_replay(
    workers, max_documents, batch_size, bert_init, tmp_path
):
    args = method_arguments("mae_lm", bert_init, streaming=True, max_documents=max_documents)
    loading = dict(dataloader_num_workers=workers, per_device_train_batch_size=batch_size)
    uninterrupted = build_trainer(args, training_arguments(tmp_path / "a", **loading))
    expected = RecordedBatches(uninterrupted)
    uninterrupted.train()

    killed = build_trainer(args, training_arguments(tmp_path / "b", **loading))
    killed.add_callback(KillAt(KILLED_AT))
    with pytest.raises(KeyboardInterrupt):
        killed.train()
    checkpoint = resolve_resume(True, tmp_path / "b")
    resumed = build_trainer(args, training_arguments(tmp_path / "b", **loading), resume_from_checkpoint=checkpoint)
    got = RecordedBatches(resumed)
    resumed.train(resume_from_checkpoint=checkpoint)

    saved_at = KILLED_AT - KILLED_AT % SAVE_STEPS
    assert_same_batches(got.trained, expected.trained[saved_at:])
    if workers == 0:  # Trainer's replay would collate the batches it skips again (workers collate out of sight)
        assert got.collated == expected.collated - saved_at
    assert logged(resumed) == logged(uninterrupted)
    assert_same_weights(resumed, uninterrupted)


def test_a_finished_streamed_run_continues_its_stream_with_more_steps(bert_init, tmp_path):
    """Resumed from its last checkpoint with a larger --max_steps: Trainer's epoch for a stream is max_steps steps,
    so the checkpoint says epoch 1.0; the stream and the masks still go on where they were."""
    args = method_arguments("mae_lm", bert_init, streaming=True)
    constant = dict(lr_scheduler_type="constant")  # the schedule would otherwise depend on max_steps
    uninterrupted = build_trainer(args, training_arguments(tmp_path / "a", **constant))
    expected = RecordedBatches(uninterrupted)
    uninterrupted.train()

    build_trainer(args, training_arguments(tmp_path / "b", max_steps=SAVE_STEPS, **constant)).train()
    checkpoint = str(tmp_path / "b" / f"checkpoint-{SAVE_STEPS}")
    continued = build_trainer(args, training_arguments(tmp_path / "b", **constant), resume_from_checkpoint=checkpoint)
    got = RecordedBatches(continued)
    continued.train(resume_from_checkpoint=checkpoint)

    assert_same_batches(got.trained, expected.trained[SAVE_STEPS:])
    assert_same_weights(continued, uninterrupted)


def test_a_streamed_checkpoint_without_its_position_is_replayed_with_a_warning(bert_init, tmp_path, caplog):
    """A checkpoint saved with --save_only_model, or by hf-encoders 0.2, holds no stream position: Trainer's replay."""
    args = method_arguments("mae_lm", bert_init, streaming=True)
    uninterrupted = build_trainer(args, training_arguments(tmp_path / "a"))
    expected = RecordedBatches(uninterrupted)
    uninterrupted.train()

    checkpoint = tmp_path / "a" / f"checkpoint-{SAVE_STEPS * 2}"
    stream_state_file(checkpoint, rank=0).unlink()
    resumed = build_trainer(args, training_arguments(tmp_path / "a"), resume_from_checkpoint=str(checkpoint))
    got = RecordedBatches(resumed)
    with caplog.at_level(logging.WARNING, logger="hf_encoders.training.streaming"):
        resumed.train(resume_from_checkpoint=str(checkpoint))
    assert f"{checkpoint} holds no stream position (stream_state_0.json)" in caplog.text
    assert got.collated == expected.collated  # the skipped batches were collated again
    assert_same_batches(got.trained, expected.trained[SAVE_STEPS * 2 :])


def test_a_streamed_run_makes_its_loaders_without_torchdata_deprecation_warnings(bert_init, tmp_path, recwarn):
    """torchdata's StatefulDataLoader calls torch's deprecated set_vital: a warning on every streamed run, silenced."""
    args = method_arguments("mae_lm", bert_init, streaming=True)
    build_trainer(args, training_arguments(tmp_path / "a", max_steps=SAVE_STEPS)).train()
    checkpoint = str(tmp_path / "a" / f"checkpoint-{SAVE_STEPS}")
    stream_state_file(checkpoint, rank=0).unlink()  # resumed by Trainer's replay, which makes another loader
    continued = build_trainer(args, training_arguments(tmp_path / "a"), resume_from_checkpoint=checkpoint)
    continued.train(resume_from_checkpoint=checkpoint)
    assert not [str(warning.message) for warning in recwarn if "set_vital" in str(warning.message)]
