"""Schedules by training step (training/schedules.py): the masking rate and the batch-size warm-up are in force at
the steps they name, logged, and a run interrupted inside a schedule's switch step resumes with the batches, losses
and weights of the uninterrupted run."""

import pytest
import torch

from hf_encoders.methods import METHODS, load
from hf_encoders.training.pretrain import build_trainer
from hf_encoders.training.resume import resolve_resume
from hf_encoders.training.schedules import (
    BATCHES_BY_MLM_PROBABILITY,
    BatchSizeWarmupCallback,
    StepSchedule,
    parse_mlm_probability_schedule,
)
from tests.method_specs import TINY_CONFIGS
from tests.test_resume import (
    MAX_STEPS,
    SAVE_STEPS,
    KillAt,
    RecordedBatches,
    assert_same_batches,
    assert_same_weights,
    logged,
    method_arguments,
    training_arguments,
)
from tests.tiny_models import tiny_tokenizer

# Over MAX_STEPS = 6: the second phase starts at step index 3 (the run's 4th step).
RATES = "0.5:0.5,0.15:0.5"


def test_a_schedule_covers_max_steps_in_order():
    schedule = parse_mlm_probability_schedule("0.3:0.25, 0.15:0.5,0.05:0.25")
    assert schedule.boundaries(10) == [(0.3, 0, 3), (0.15, 3, 8), (0.05, 8, 10)]  # 2.5 rounds up
    assert [schedule.value_at(step, 10) for step in range(10)] == [0.3] * 3 + [0.15] * 5 + [0.05] * 2
    assert schedule.switch_steps(10) == [3, 8] and schedule.values == (0.3, 0.15, 0.05)
    assert parse_mlm_probability_schedule("0.3:0.5,0.15:0.25,0.3:0.25").values == (0.3, 0.15)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "0.3:0.9,0.15:0.2",
            r"The --mlm_probability_schedule fractions must sum to 1 \(they cover max_steps\), got 1.1",
        ),
        ("0.3:0.5", "fractions must sum to 1 .*got 0.5: 0.3:0.5"),
        ("0.3,0.15", "--mlm_probability_schedule '0.3' is not RATE:FRACTION; write e.g. '0.3:0.9,0.15:0.1'"),
        ("1.5:1", r"the rate '1.5' must be a number in \(0, 1\)"),
        ("high:1", r"the rate 'high' must be a number in \(0, 1\)"),
        ("0.3:0,0.15:1", r"0.3:0 must have a fraction of max_steps in \(0, 1\]"),
        (" , ", "names no phase"),
    ],
)
def test_a_bad_schedule_is_refused_in_one_line(text, message):
    with pytest.raises(ValueError, match=message) as error:
        parse_mlm_probability_schedule(text)
    assert "\n" not in str(error.value)


def test_a_phase_without_a_step_is_refused():
    with pytest.raises(ValueError, match=r"With max_steps=4, the phases \[\(0.15, 4\)\] of 0.5:0.99,0.15:0.01 get no"):
        StepSchedule(((0.5, 0.99), (0.15, 0.01))).check_steps(4)


@pytest.mark.parametrize("method", list(TINY_CONFIGS))
def test_the_collator_masks_each_batch_at_every_rate_as_a_collator_of_that_rate_would(method):
    """Each rate's masks are those a collator with that rate alone draws: a function of (seed, epoch, batch)."""
    tokenizer = tiny_tokenizer(eos_token="[SEP]")
    collator_class = load(METHODS[method].collator)
    scheduled = collator_class(tokenizer, seed=7, mlm_probability=0.15, mlm_probabilities=(0.5, 0.15))
    examples = [{"input_ids": list(range(5, 37))}, {"input_ids": list(range(20, 52))}]
    batches = scheduled(examples)[BATCHES_BY_MLM_PROBABILITY]
    assert list(batches) == [0.5, 0.15] and scheduled.mlm_probability == 0.15
    for rate, batch in batches.items():
        alone = collator_class(tokenizer, seed=7, mlm_probability=rate)(examples)
        assert batch.keys() == alone.keys()
        assert all(torch.equal(batch[key], alone[key]) for key in batch), rate


def labelled_share(batch: dict) -> float:
    labels = batch["labels"]
    return (labels != -100).sum().item() / labels.numel()


def test_each_step_trains_on_the_masks_of_its_rate_and_logs_it(bert, tmp_path):
    args = method_arguments("mlm", bert, mlm_probability_schedule=RATES)
    trainer = build_trainer(args, training_arguments(tmp_path, dataloader_num_workers=1))
    recorded = RecordedBatches(trainer)
    trainer.train()
    assert logged(trainer, "mlm_probability") == {1: 0.5, 2: 0.5, 3: 0.5, 4: 0.15, 5: 0.15, 6: 0.15}
    shares = [labelled_share(batch) for batch in recorded.trained]
    assert min(shares[:3]) > 0.35 and max(shares[3:]) < 0.25, shares
    # Evaluation masks at the last rate, whatever the step.
    assert trainer.eval_data_collator.mlm_probability == 0.15 and trainer.eval_data_collator.mlm_probabilities is None


def resume_inside_the_switch(args, tmp_path, **training):
    """The uninterrupted run, and the run killed in the schedule's switch step (its 4th) and resumed from its last
    checkpoint (step 2): both trainers and the batches each trained on."""
    uninterrupted = build_trainer(args, training_arguments(tmp_path / "a", **training))
    expected = RecordedBatches(uninterrupted)
    uninterrupted.train()
    killed = build_trainer(args, training_arguments(tmp_path / "b", **training))
    killed.add_callback(KillAt(4))
    with pytest.raises(KeyboardInterrupt):
        killed.train()
    checkpoint = resolve_resume(True, tmp_path / "b")
    assert checkpoint == str(tmp_path / "b" / f"checkpoint-{SAVE_STEPS}")
    resumed = build_trainer(args, training_arguments(tmp_path / "b", **training), resume_from_checkpoint=checkpoint)
    got = RecordedBatches(resumed)
    resumed.train(resume_from_checkpoint=checkpoint)
    return uninterrupted, expected, resumed, got


@pytest.mark.parametrize(
    "method, options, training",
    [
        ("mae_lm", {}, {"dataloader_num_workers": 1}),
        ("biphasic", {}, {}),  # CLM for 2 steps, then MLM at each rate
        ("tacl", {}, {}),
        ("mae_lm", {"streaming": True}, {}),
    ],
)
def test_a_run_killed_in_the_masking_switch_step_resumes_exactly(method, options, training, bert, tmp_path):
    args = method_arguments(method, bert, mlm_probability_schedule=RATES, **options)
    uninterrupted, expected, resumed, got = resume_inside_the_switch(args, tmp_path, **training)
    assert_same_batches(got.trained, expected.trained[SAVE_STEPS:])
    assert logged(resumed) == logged(uninterrupted)
    assert logged(resumed, "mlm_probability") == logged(uninterrupted, "mlm_probability")
    assert_same_weights(resumed, uninterrupted)


def test_the_warmup_grows_the_micro_batches_linearly_in_tokens():
    """G = 4 micro-batches of 64 tokens, warmed up over 256 tokens: a step at τ tokens takes 1 + floor(3τ/256)."""
    callback = BatchSizeWarmupCallback(tokens=256, block_size=32)
    callback.accumulation = 4
    steps, trained = [], 0
    for _ in range(6):  # the rule, step by step
        steps.append(min(4, 1 + 3 * trained // 256))
        trained += steps[-1] * 64
    callback.micro_batches = callback.warmup_steps(tokens_per_micro_batch=64)
    assert [callback.micro_batches_at(step) for step in range(6)] == steps == [1, 1, 2, 4, 4, 4]


WARMUP = dict(batch_size_warmup_tokens=256)  # with block_size 32 and 2 x 1 sequences a micro-batch: 1, 1, 2, 4, ...
ACCUMULATING = dict(per_device_train_batch_size=2, gradient_accumulation_steps=4)


@pytest.mark.parametrize("method", ["mae_lm", "biphasic"])
def test_a_warmup_step_trains_on_its_first_micro_batches_with_their_mean_loss(method, bert, tmp_path):
    """Step 1 takes one micro-batch of four: with SGD (whose step, unlike Adam's, scales with the gradient), it leaves
    the weights a run of one micro-batch a step leaves, so the loss is that micro-batch's, not a quarter of it."""
    plain = dict(optim="sgd", lr_scheduler_type="constant", max_steps=1)
    one_phase = {"phases": "mlm:1.0"} if method == "biphasic" else {}  # (biphasic's model divides by the count)
    warmed = build_trainer(
        method_arguments(method, bert, **WARMUP, **one_phase),
        training_arguments(tmp_path / "a", **ACCUMULATING, **plain),
    )
    recorded = RecordedBatches(warmed)
    warmed.train()
    single = build_trainer(
        method_arguments(method, bert, **one_phase),
        training_arguments(tmp_path / "b", per_device_train_batch_size=2, **plain),
    )
    single.train()
    assert len(recorded.trained) == 1 and recorded.collated >= 4  # the other three read, not trained on
    assert logged(warmed) == pytest.approx(logged(single), rel=1e-6)
    assert_same_weights(warmed, single)


def test_the_warmup_trains_the_micro_batches_it_names_and_logs_the_batch(bert, tmp_path):
    trainer = build_trainer(method_arguments("mae_lm", bert, **WARMUP), training_arguments(tmp_path, **ACCUMULATING))
    recorded = RecordedBatches(trainer)
    trainer.train()
    assert len(recorded.trained) == 1 + 1 + 2 + 4 * 3 and recorded.collated >= 4 * MAX_STEPS
    assert logged(trainer, "batch_size") == {1: 2, 2: 2, 3: 4, 4: 8, 5: 8, 6: 8}


def test_the_warmup_needs_gradient_accumulation(bert, tmp_path):
    trainer = build_trainer(method_arguments("mae_lm", bert, **WARMUP), training_arguments(tmp_path))
    with pytest.raises(ValueError, match="pass --gradient_accumulation_steps 2 or more \\(got 1\\)"):
        trainer.train()


@pytest.mark.parametrize("method", ["mae_lm", "biphasic"])
def test_a_run_killed_in_the_warmups_last_step_resumes_exactly(method, bert, tmp_path):
    """The warm-up's last step (the third) and the first full one (the fourth), trained again after the kill; with
    a masking schedule switching at the same step."""
    args = method_arguments(method, bert, mlm_probability_schedule=RATES, **WARMUP)
    uninterrupted, expected, resumed, got = resume_inside_the_switch(args, tmp_path, **ACCUMULATING)
    assert_same_batches(got.trained, expected.trained[1 + 1 :])
    assert logged(resumed) == logged(uninterrupted)
    assert logged(resumed, "batch_size") == logged(uninterrupted, "batch_size")
    assert_same_weights(resumed, uninterrupted)
