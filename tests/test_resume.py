"""A run killed between checkpoints and resumed continues exactly: same losses, same final weights, the biphasic
phase included; a checkpoint left half-written by the kill is never resumed from."""

import os
import signal

import pytest
import torch
from transformers import TrainerCallback, TrainingArguments

from hf_encoders.families import FAMILIES, load
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.pretrain import build_trainer
from hf_encoders.training.resume import last_complete_checkpoint, resolve_resume
from tests.family_specs import tiny_run_options
from tests.tiny_models import TINY_CONFIGS, save_tiny_bert, tiny_tokenizer

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
    options = {**tiny_run_options(method, bert_init), **overrides}
    return PretrainArguments(method=method, max_documents=40, vocab_size=300, block_size=32, **options)


def training_arguments(output_dir) -> TrainingArguments:
    return TrainingArguments(
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


def logged(trainer, key="loss") -> dict[int, float]:
    return {entry["step"]: entry[key] for entry in trainer.state.log_history if key in entry}


# Every family with token masking, and each word unit with two families (its masks read the packed word starts).
@pytest.mark.parametrize(
    "method, masking",
    [(method, "token") for method in FAMILIES]
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
        method_arguments(method, bert_init, tokenizer_name=None, masking=masking) if method != "tacl" else args
    )
    resumed = build_trainer(resumed_args, training_arguments(tmp_path / "b"), resume_from_checkpoint=checkpoint)
    resumed.train(resume_from_checkpoint=checkpoint)

    # Steps 1-4 come back with the checkpoint's trainer state; 5 and 6 are trained again and must match exactly.
    assert logged(resumed) == logged(uninterrupted) and sorted(logged(resumed)) == list(range(1, MAX_STEPS + 1))
    for (name, before), after in zip(uninterrupted.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(before, after), name
    if method == "biphasic":
        assert set(logged(resumed, "clm_loss")) == {1, 2, 3} and set(logged(resumed, "mlm_loss")) == {4, 5, 6}


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
    for (name, before), after in zip(uninterrupted.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(before, after), name


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


@pytest.mark.parametrize("family", list(TINY_CONFIGS))
def test_seeded_masks_depend_on_seed_epoch_and_batch_only(family):
    tokenizer = tiny_tokenizer(eos_token="[SEP]")  # the biphasic collator ends documents with EOS
    collator = load(FAMILIES[family].collator)(tokenizer, seed=7, mlm_probability=0.5)
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
