"""Validation during pre-training: held-out documents, a validation loss per objective and a perplexity, the same
masks at every evaluation, and the papers' diagnostics on held-out sentences during the run."""

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from datasets import Dataset
from transformers import AutoModel, AutoTokenizer, TrainingArguments

from hf_encoders.analysis import layerwise_report
from hf_encoders.data.corpus import load_documents
from hf_encoders.methods import METHODS
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.pretrain import build_trainer, pretrain
from hf_encoders.training.validation import (
    check_validation_arguments,
    check_validation_examples,
    probe_sentences,
    split_validation,
)
from hf_encoders_cli import main
from tests.helpers import tiny_run_arguments, tiny_training_arguments

pytestmark = pytest.mark.usefixtures("one_thread")

EVAL_TERMS = {"tacl": {"eval_tacl_loss", "eval_mlm_loss", "eval_nsp_loss"}}


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_logs_a_validation_loss_per_objective_and_a_perplexity(method, bert, tmp_path):
    trainer = build_trainer(tiny_run_arguments(method, bert), tiny_training_arguments(tmp_path))
    trainer.train()
    evaluations = [entry for entry in trainer.state.log_history if "eval_loss" in entry]
    assert [entry["step"] for entry in evaluations] == [2, 4]
    for entry in evaluations:
        if method == "tacl":  # the three terms, weighted by rows as Trainer weighs eval_loss, add up to it
            assert EVAL_TERMS["tacl"] <= set(entry)
            total = sum(entry[term] for term in EVAL_TERMS["tacl"])
            assert total == pytest.approx(entry["eval_loss"], rel=1e-5)
            assert entry["eval_perplexity"] == pytest.approx(math.exp(entry["eval_mlm_loss"]))
        elif method == "biphasic":  # the masked-LM perplexity, of the MLM phase only; the CLM phase's is a causal LM's
            masked_lm = entry.get("eval_mlm_loss")
            assert entry.get("eval_perplexity") == (None if masked_lm is None else pytest.approx(math.exp(masked_lm)))
        else:
            assert entry["eval_perplexity"] == pytest.approx(math.exp(entry["eval_loss"]))
    if method == "biphasic":  # the objective each evaluation ran with: CLM in the first half, MLM after
        assert evaluations[0]["eval_clm_loss"] == evaluations[0]["eval_loss"] and "eval_mlm_loss" not in evaluations[0]
        assert evaluations[1]["eval_mlm_loss"] == evaluations[1]["eval_loss"] and "eval_clm_loss" not in evaluations[1]


def test_the_validation_masks_do_not_move_with_the_training_epoch(bert, tmp_path):
    trainer = build_trainer(tiny_run_arguments("mae_lm", bert), tiny_training_arguments(tmp_path))
    first = trainer.evaluate()["eval_loss"]
    trainer.data_collator.epoch = 3  # what MaskingEpochCallback does at the start of the fourth epoch
    assert trainer.evaluate()["eval_loss"] == first
    # ... although the training collator masks the same blocks differently in that epoch.
    blocks = [trainer.eval_dataset[index] for index in range(3)]
    masked_in_epoch_3 = trainer.data_collator(blocks)["labels"]
    trainer.data_collator.epoch = 0
    assert not torch.equal(trainer.data_collator(blocks)["labels"], masked_in_epoch_3)


def test_mae_lm_keeps_the_same_masks_in_its_encoder_at_every_evaluation(bert, tmp_path):
    """δ > 0: the evaluation collator decides which [MASK]s stay in the encoder, from the frozen epoch's seed, so
    every evaluation scores the same inputs, whatever the training epoch and the global RNG."""
    args = tiny_run_arguments("mae_lm", bert, mask_in_encoder_fraction=0.5)
    trainer = build_trainer(args, tiny_training_arguments(tmp_path))
    blocks = [trainer.eval_dataset[index] for index in range(3)]
    kept = trainer.eval_data_collator(blocks)["masks_in_encoder"]
    assert kept.any()
    first = trainer.evaluate()["eval_loss"]
    trainer.data_collator.epoch = 3
    torch.manual_seed(1)  # the RNG the model drew δ from before it became the collator's
    assert trainer.evaluate()["eval_loss"] == first
    assert torch.equal(trainer.eval_data_collator(blocks)["masks_in_encoder"], kept)


def test_held_out_documents_are_whole_documents_drawn_by_seed_and_training_keeps_its_order():
    texts = [f"Document number {index}." for index in range(30)]
    documents = Dataset.from_dict({"text": texts})
    args = SimpleNamespace(validation_file=None, validation_split_percentage=10, text_column="text")
    training, validation = (list(part["text"]) for part in split_validation(documents, args, seed=0))
    assert len(validation) == 3 and len(training) == 27
    assert sorted(training + validation) == sorted(texts)
    assert training == [text for text in texts if text not in validation]  # the training order is the corpus's
    assert list(split_validation(documents, args, seed=0)[1]["text"]) == validation
    assert list(split_validation(documents, args, seed=1)[1]["text"]) != validation


def test_a_validation_file_is_read_as_a_corpus(tmp_path):
    (tmp_path / "validation.txt").write_text("First held-out document.\n\nSecond one.\n")
    documents = Dataset.from_dict({"text": ["Training text."]})
    args = SimpleNamespace(validation_file=str(tmp_path / "validation.txt"), validation_split_percentage=None)
    args.text_column = "text"
    training, validation = split_validation(documents, args, seed=0)
    assert training is documents and list(validation["text"]) == ["First held-out document.", "Second one."]


def schedule(eval_strategy="steps", eval_on_start=False, fsdp="", deepspeed=None):
    return SimpleNamespace(eval_strategy=eval_strategy, eval_on_start=eval_on_start, fsdp=fsdp, deepspeed=deepspeed)


@pytest.mark.parametrize(
    "options,training,message",
    [
        ({"validation_split_percentage": 0}, schedule(), r"--validation_split_percentage 0 is outside \(0, 50\]"),
        ({"validation_split_percentage": 51}, schedule(), r"--validation_split_percentage 51 is outside \(0, 50\]"),
        ({"validation_file": "v.txt"}, schedule(), "Pass one validation set"),
        ({}, schedule("no"), "evaluated on Trainer's schedule, which is off: add --eval_strategy steps"),
        ({"validation_split_percentage": None}, schedule(), "evaluation schedule .* needs a validation set"),
        (
            {"validation_split_percentage": None},
            schedule("no", eval_on_start=True),
            r"\(--eval_strategy, --eval_on_start\) needs a validation set",
        ),
        ({"diagnostics_steps": 0}, schedule(), r"--diagnostics_steps \(0\) and --diagnostics_sentences"),
        ({"diagnostics_steps": 5, "diagnostics_sentences": 0}, schedule(), "must be positive"),
        (
            {"diagnostics_steps": 5, "validation_split_percentage": None},
            schedule("no"),
            "--diagnostics_steps probes sentences the model never trains on",
        ),
        ({"diagnostics_steps": 5}, schedule(fsdp="full_shard"), "a sharded model \\(FSDP, DeepSpeed\\) cannot"),
    ],
)
def test_bad_validation_and_diagnostics_options_are_refused_with_the_fix(options, training, message):
    args = PretrainArguments(**{"method": "mae_lm", "validation_split_percentage": 5, **options})
    with pytest.raises(ValueError, match=message):
        check_validation_arguments(args, training)


def test_diagnostics_alone_need_no_evaluation_schedule():
    args = PretrainArguments(method="mae_lm", validation_file="v.txt", diagnostics_steps=5)
    check_validation_arguments(args, schedule("no"))  # no error: the validation set feeds the probe


def test_a_corpus_too_small_to_split_is_named():
    args = SimpleNamespace(validation_file=None, validation_split_percentage=20, text_column="text")
    with pytest.raises(ValueError, match=r"has 1 document\(s\): too few to hold 20% out"):
        split_validation(Dataset.from_dict({"text": ["One document."]}), args, seed=0)


@pytest.mark.parametrize(
    "source,message",
    [
        (["--streaming"], r"a streamed corpus has none\. Pass --validation_file PATH instead\.$"),
        (["--tokenized_dir", "CACHE"], r"which a token cache no longer has: pass --validation_file PATH"),
    ],
)
def test_a_split_that_cannot_be_made_is_refused_before_the_schedule_is_asked_for(source, message, tmp_path):
    """Without --eval_strategy too: asking for it first sent the user to add it, only to be refused again."""
    source = [str(tmp_path / "cache") if argument == "CACHE" else argument for argument in source]
    argv = ["pretrain", "--method", "mlm", "--validation_split_percentage", "5", "--output_dir", str(tmp_path / "out")]
    with pytest.raises(ValueError, match=message):
        main([*argv, *source])
    assert not (tmp_path / "out").exists()  # refused before anything was read or written


def test_a_validation_set_too_short_for_one_example_is_named():
    with pytest.raises(ValueError, match="The validation documents make no example"):
        check_validation_examples(Dataset.from_dict({"input_ids": []}))


def test_a_probe_set_needs_two_sentences():
    with pytest.raises(ValueError, match="The validation set holds 1 sentence"):
        probe_sentences(Dataset.from_dict({"text": ["Only this sentence."]}), 128)


def test_diagnostics_are_logged_equal_an_offline_analysis_and_do_not_change_training(bert, tmp_path):
    args = tiny_run_arguments("mae_lm", bert, diagnostics_steps=3, diagnostics_sentences=16)
    without = replace(args, diagnostics_steps=None, diagnostics_sentences=PretrainArguments.diagnostics_sentences)
    training = dict(max_steps=4, logging_steps=1, eval_strategy="no", eval_steps=100)
    result = pretrain(args, tiny_training_arguments(tmp_path / "probed", **training))
    history = result.trainer.state.log_history
    probed = [entry for entry in history if "self_similarity" in entry]
    assert [entry["step"] for entry in probed] == [3, 4]  # every 3 steps, and the last
    assert (result.output_dir / "diagnostics.png").stat().st_size > 10_000

    # The last probe measured the saved encoder: an offline analysis of the checkpoint gives the same numbers.
    encoder = AutoModel.from_pretrained(result.output_dir)
    sentences = probe_sentences(split_validation(*documents_of(args))[1], 16)
    report = layerwise_report(encoder, AutoTokenizer.from_pretrained(bert), sentences, max_length=32, progress=False)
    last = probed[-1]
    for name in ("self_similarity", "effective_rank", "effective_rank_with_mask"):
        per_layer = [last[f"{name}/layer_{layer}"] for layer in range(len(getattr(report, name)))]
        assert per_layer == pytest.approx(getattr(report, name), rel=1e-6)
        assert last[name] == per_layer[-1]

    # The same held-out documents, on an evaluation schedule that never comes: only the probe differs.
    plain = build_trainer(
        without, tiny_training_arguments(tmp_path / "plain", **{**training, "eval_strategy": "steps"})
    )
    plain.train()
    losses = [entry["loss"] for entry in history if "loss" in entry]
    assert losses == [entry["loss"] for entry in plain.state.log_history if "loss" in entry]


def documents_of(args: PretrainArguments):
    """What pretrain splits: the embedded corpus's first `max_documents`, with the run's seed (TrainingArguments')."""
    return load_documents(None).take(args.max_documents), args, TrainingArguments("unused").seed
