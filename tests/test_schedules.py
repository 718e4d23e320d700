"""Schedules by training step (training/schedules.py): the masking rate and the batch-size warm-up are in force at
the steps they name, logged, and a run interrupted inside a schedule's switch step resumes with the batches, losses
and weights of the uninterrupted run."""

import pytest
import torch
from transformers import AutoConfig

from hf_encoders.data.corpus_report import run_documents
from hf_encoders.methods import METHODS, load
from hf_encoders.models.mae_lm.modeling_mae_lm import relative_position_bucket
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.phased_blocks import data_phases, phased_blocks
from hf_encoders.training.pretrain import build_trainer
from hf_encoders.training.recipe import get_recipe
from hf_encoders.training.resume import resolve_resume
from hf_encoders.training.schedules import (
    BATCHES_BY_MLM_PROBABILITY,
    BatchSizeWarmupCallback,
    BlockPhase,
    StepSchedule,
    parse_block_size_schedule,
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


@pytest.mark.parametrize(
    "options, training, message",
    [
        (WARMUP, {}, r"pass --gradient_accumulation_steps 2 or more \(got 1\)"),
        ({"block_size_schedule": "16:0.5,32:0.5"}, {"max_steps": -1}, "plan their phases in steps: pass --max_steps"),
        ({"block_size_schedule": "16:0.5,32:0.5"}, {"train_sampling_strategy": "group_by_length"}, "drop --train_samp"),
    ],
)
def test_a_schedule_the_trainer_options_cannot_run_is_refused_before_the_corpus_is_read(
    options, training, message, bert, tmp_path
):
    args = method_arguments("mae_lm", bert, corpus=str(tmp_path / "missing.txt"), **options)
    with pytest.raises(ValueError, match=message):
        build_trainer(args, training_arguments(tmp_path, **training))


def test_a_run_killed_in_the_warmups_last_step_resumes_exactly(bert, tmp_path):
    """The warm-up's last step (the third) and the first full one (the fourth), trained again after the kill."""
    args = method_arguments("mae_lm", bert, **WARMUP)
    uninterrupted, expected, resumed, got = resume_inside_the_switch(args, tmp_path, **ACCUMULATING)
    assert_same_batches(got.trained, expected.trained[1 + 1 :])
    assert logged(resumed) == logged(uninterrupted)
    assert logged(resumed, "batch_size") == logged(uninterrupted, "batch_size")
    assert_same_weights(resumed, uninterrupted)


# ---- block size (and RoPE θ) by phase ----


def test_a_block_schedule_names_lengths_and_rope_thetas():
    schedule = parse_block_size_schedule("128:0.9, 512:0.1:160000")
    assert schedule.phases == ((BlockPhase(128), 0.9), (BlockPhase(512, 160000.0), 0.1))
    assert [phase.length for phase, _, _ in schedule.boundaries(100)] == [128, 512]
    assert PretrainArguments(method="mlm", block_size_schedule="64:0.5,256:0.5").block_size == 256
    with pytest.raises(ValueError, match="--block_size 128 is moot with --block_size_schedule, which sets the length"):
        PretrainArguments(method="mlm", block_size=128, block_size_schedule="64:0.5,256:0.5")


@pytest.mark.parametrize(
    "text, message",
    [
        ("128:0.9,512:0.2", r"--block_size_schedule fractions must sum to 1 \(they cover max_steps\), got 1.1"),
        ("128", "'128' is not LENGTH:FRACTION or LENGTH:FRACTION:ROPE_THETA; write e.g. '128:0.9,512:0.1:160000'"),
        ("128:0.5:1e4:2,512:0.5", "is not LENGTH:FRACTION or LENGTH:FRACTION:ROPE_THETA"),
        ("1:1", "the length must be 2 tokens or more"),
        ("128:1:-5", "θ positive"),
    ],
)
def test_a_bad_block_schedule_is_refused_in_one_line(text, message):
    with pytest.raises(ValueError, match=message) as error:
        parse_block_size_schedule(text)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "method, options, message",
    [
        # tests/tiny_models.py's BERT has a position table of 512 rows.
        (
            "mlm",
            {"model_name_or_path": "bert"},
            "--block_size_schedule's longest block \\(1024 tokens\\) is longer than ",
        ),
        (
            "tacl",
            {"model_name_or_path": "bert"},
            "longer than the 512 positions .*'s position table covers; keep every block of --block_size_schedule at 512",
        ),
        ("mae_lm", {"model_name_or_path": "bert"}, "longer than the 512 positions .*'s position table covers"),
        ("mlm", {"config_overrides": "max_position_embeddings=600"}, "--config_overrides max_position_embeddings"),
        ("mae_lm", {"block_size_schedule": "32:0.5,64:0.5:1e5"}, "MAE-LM's model has no rotary position embeddings"),
        ("biphasic", {"streaming": True}, "a stream is not; drop --streaming"),
        ("mlm", {"tokenized_dir": "cache/"}, "a token cache holds blocks made once; drop --tokenized_dir"),
    ],
)
def test_a_block_schedule_the_model_or_data_cannot_take_is_refused_before_tokenising(bert, method, options, message):
    options = {"block_size_schedule": "32:0.5,1024:0.5", **options}
    options = {name: bert if value == "bert" else value for name, value in options.items()}
    with pytest.raises(ValueError, match=message) as error:
        get_recipe(method).check_arguments(PretrainArguments(method=method, **options))
    assert "\n" not in str(error.value)
    # Within the table, the same run is accepted.
    if options.get("model_name_or_path"):
        get_recipe(method).check_arguments(
            PretrainArguments(method=method, **{**options, "block_size_schedule": "32:0.5,64:0.5"})
        )


def test_mae_lm_relative_buckets_cover_a_longer_block_without_change():
    """Distances past relative_attention_max_distance share the last bucket of their direction, so a block longer
    than the run's first one reads only buckets the model already has (and trained)."""
    config = TINY_CONFIGS["mae_lm"]()
    buckets, max_distance = config.relative_attention_num_buckets, config.relative_attention_max_distance
    longer = 4 * max_distance
    distances = torch.arange(-(longer - 1), longer)
    got = relative_position_bucket(distances, buckets, max_distance)
    assert got.min() >= 0 and got.max() < buckets
    far = distances.abs() >= max_distance
    assert set(got[far & (distances > 0)].tolist()) == {
        relative_position_bucket(torch.tensor(max_distance), buckets, max_distance).item()
    }
    assert set(got[far & (distances < 0)].tolist()) == {
        relative_position_bucket(torch.tensor(-max_distance), buckets, max_distance).item()
    }


def test_each_phase_packs_the_documents_after_those_the_previous_read():
    """A toy packing (one block per document, its index repeated): each phase reads on from where the last stopped,
    wrapping round once the corpus runs out, and trains on as many blocks as its steps take."""
    from datasets import Dataset

    documents = Dataset.from_dict({"text": [str(index) for index in range(100)]})
    reads = []

    def build(length, chunk):
        reads.append([int(text) for text in chunk["text"]])
        return Dataset.from_dict({"input_ids": [[int(text)] * length for text in chunk["text"]]})

    phases = data_phases([(4, 0, 2), (8, 2, 4)], anneal_start=None)
    plan = phased_blocks(build, [documents], phases, rows_per_step=20, seed=0)
    first, second = plan.select(range(40)), plan.select(range(40, 80))
    assert {len(row) for row in first["input_ids"]} == {4} and {len(row) for row in second["input_ids"]} == {8}
    assert sorted(row[0] for row in first["input_ids"]) == list(range(40))
    # The first phase read 64 documents (FIRST_DOCUMENTS), the second reads on from there, then a new pass.
    assert sorted(row[0] for row in second["input_ids"]) == [*range(4), *range(64, 100)]
    assert reads == [list(range(64)), list(range(64, 100)), list(range(6))]
    assert [phase.read for phase in phases] == [[range(64)], [range(64, 100), range(6)]]
    assert [row[0] for row in first["input_ids"]] != list(range(40))  # shuffled within the phase


def test_the_annealing_start_splits_the_length_phases():
    phases = data_phases([(16, 0, 3), (32, 3, 6)], anneal_start=2)
    assert [(phase.length, phase.corpus, phase.first, phase.end) for phase in phases] == [
        (16, 0, 0, 2),
        (16, 1, 2, 3),
        (32, 1, 3, 6),
    ]
    assert str(phases[1]) == "steps 3-3 (16-token blocks)"


def block_lengths(recorded: RecordedBatches) -> list[int]:
    return [batch["input_ids"].shape[1] for batch in recorded.trained]


def test_a_run_killed_in_the_length_switch_step_resumes_exactly(bert, tmp_path):
    args = method_arguments("mae_lm", bert, block_size_schedule="16:0.5,32:0.5")
    uninterrupted, expected, resumed, got = resume_inside_the_switch(args, tmp_path)
    assert block_lengths(expected) == [16] * 3 + [32] * 3
    assert_same_batches(got.trained, expected.trained[SAVE_STEPS:])
    assert logged(resumed) == logged(uninterrupted)
    assert_same_weights(resumed, uninterrupted)


# ---- the annealing phase's corpus ----


@pytest.fixture
def anneal_corpus(tmp_path):
    """Two sources of ten documents each, mixed 0.7 / 0.3."""
    words = "the model reads every document of the annealing corpus once before it starts again from the first"
    for name in ("a", "b"):
        (tmp_path / f"{name}.txt").write_text("\n\n".join(f"{name} {index} {words} {words}" for index in range(10)))
    return f"{tmp_path / 'a.txt'}:0.7,{tmp_path / 'b.txt'}:0.3"


def rows(dataset) -> set[tuple]:
    return {tuple(row) for row in dataset["input_ids"]}


def test_the_annealing_corpus_takes_over_for_the_last_fraction_and_each_phase_reports_its_shares(
    bert, anneal_corpus, tmp_path
):
    args = method_arguments("mae_lm", bert, anneal_corpus=anneal_corpus, anneal_fraction=0.5)
    trainer = build_trainer(args, training_arguments(tmp_path))
    recipe, tokenizer = get_recipe("mae_lm"), trainer.processing_class
    main_documents, _ = run_documents(args, seed=0)
    anneal_documents, anneal_report = run_documents(args, seed=0, corpus=anneal_corpus)
    main_blocks = rows(recipe.build_dataset(args, tokenizer, main_documents))
    anneal_blocks = rows(recipe.build_dataset(args, tokenizer, anneal_documents))
    plan = trainer.train_dataset
    assert trainer.args.train_sampling_strategy == "sequential" and len(plan) == MAX_STEPS * 4
    assert rows(plan.select(range(12))) <= main_blocks and rows(plan.select(range(12, 24))) <= anneal_blocks
    # Each phase's realised shares: the annealing phase read its whole corpus once, so the mixture's own count.
    phases = trainer.corpus_report.phases
    assert [name for name, _ in phases] == ["steps 1-3 (32-token blocks)", "steps 4-6 (32-token blocks)"]
    assert phases[1][1].lines() == anneal_report.shares.lines()
    card_line = trainer.corpus_report.lines()[-1]
    assert card_line.startswith(f"- steps 4-6 (32-token blocks): {len(anneal_documents)} documents read; ")
    assert "a.txt: weight 0.7 (70.0%), realised" in card_line


def test_an_annealing_corpus_needs_its_fraction_and_steps(bert, anneal_corpus, tmp_path):
    recipe = get_recipe("mlm")
    with pytest.raises(ValueError, match="--anneal_corpus and --anneal_fraction go together"):
        recipe.check_arguments(PretrainArguments(method="mlm", anneal_corpus=anneal_corpus))
    with pytest.raises(ValueError, match=r"--anneal_fraction must lie in \(0, 1\), got 1.0"):
        recipe.check_arguments(PretrainArguments(method="mlm", anneal_corpus=anneal_corpus, anneal_fraction=1.0))
    args = method_arguments("mlm", bert, anneal_corpus=anneal_corpus, anneal_fraction=0.01)
    with pytest.raises(ValueError, match=r"With max_steps=6, the phases .* get no step"):
        build_trainer(args, training_arguments(tmp_path))


def test_a_run_killed_in_the_annealing_switch_step_resumes_exactly(bert, anneal_corpus, tmp_path):
    args = method_arguments("mlm", bert, anneal_corpus=anneal_corpus, anneal_fraction=0.5)
    uninterrupted, expected, resumed, got = resume_inside_the_switch(args, tmp_path)
    assert_same_batches(got.trained, expected.trained[SAVE_STEPS:])
    assert logged(resumed) == logged(uninterrupted)
    assert_same_weights(resumed, uninterrupted)


def test_a_run_with_every_schedule_killed_where_they_all_switch_resumes_exactly(bert, anneal_corpus, tmp_path):
    """Biphasic (CLM for two steps, then MLM) whose masking rate, block length, RoPE θ and corpus all switch at the
    fourth step, inside a batch-size warm-up of micro-batches of 2 x 16 tokens: 1, 1, 1, 2, 2, 3 of 4."""
    schedules = dict(block_size_schedule="16:0.5,32:0.5:40000", anneal_corpus=anneal_corpus, anneal_fraction=0.5)
    args = method_arguments("biphasic", bert, mlm_probability_schedule=RATES, **WARMUP, **schedules)
    uninterrupted, expected, resumed, got = resume_inside_the_switch(args, tmp_path, **ACCUMULATING)
    assert block_lengths(expected) == [16] * (1 + 1 + 1) + [32] * (2 + 2 + 3)
    assert_same_batches(got.trained, expected.trained[1 + 1 :])
    for key in ("loss", "mlm_probability", "rope_theta", "batch_size"):
        assert logged(resumed, key) == logged(uninterrupted, key), key
    assert logged(resumed, "batch_size") == {1: 2, 2: 2, 3: 2, 4: 4, 5: 4, 6: 6}
    assert logged(resumed, "rope_theta") == {**dict.fromkeys([1, 2, 3], 10000.0), **dict.fromkeys([4, 5, 6], 40000.0)}
    assert_same_weights(resumed, uninterrupted)
    # A checkpoint is a model of the θ it was trained with: the model's own in the first phase, then the schedule's.
    for step, theta in ((2, 10000.0), (4, 40000.0)):
        saved = AutoConfig.from_pretrained(tmp_path / "a" / f"checkpoint-{step}", trust_remote_code=True)
        assert saved.rope_parameters["rope_theta"] == theta
    rotary = resumed.model.model.rotary_emb
    half = rotary.inv_freq.numel()
    assert torch.allclose(rotary.inv_freq, 1 / 40000.0 ** (torch.arange(0, 2 * half, 2) / (2 * half)))
