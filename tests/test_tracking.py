"""What PretrainingTrainer measures: every tracker sees every loss term (TaCL's three and biphasic's per-objective
losses, in training and validation, with the perplexity, throughput and diagnostics) in TensorBoard's event files
(read back offline), not only the console and trainer_state.json; the logged terms are those of the model's own
forwards; and the 0.2 measuring callbacks pass themselves on to it."""

import math
from collections import defaultdict

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers.trainer_pt_utils import find_batch_size

from hf_encoders.training.pretrain import build_trainer
from tests.helpers import tiny_run_arguments, tiny_training_arguments
from tests.tiny_models import save_tiny_bert

pytestmark = pytest.mark.usefixtures("one_thread")


MEASURES = {"train/tokens_per_second", "train/self_similarity", "train/effective_rank_with_mask", "eval/perplexity"}


@pytest.mark.parametrize(
    "method,terms",
    [("tacl", {"tacl_loss", "mlm_loss", "nsp_loss"}), ("biphasic", {"clm_loss", "mlm_loss"})],
)
def test_loss_terms_reach_tensorboard(method, terms, tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "runs"))  # transformers 5's place for it
    bert = save_tiny_bert(tmp_path / "bert")
    args = tiny_run_arguments(method, bert, diagnostics_steps=2, diagnostics_sentences=8)
    training_args = tiny_training_arguments(tmp_path / "out", report_to="tensorboard", logging_steps=1)
    build_trainer(args, training_args).train()
    events = EventAccumulator(str(tmp_path / "runs"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {f"train/{term}" for term in terms} | {f"eval/{term}" for term in terms} | MEASURES <= tags, sorted(tags)
    steps = {term: [event.step for event in events.Scalars(f"train/{term}")] for term in terms}
    if method == "biphasic":  # each objective's curve covers its own phase only
        assert steps == {"clm_loss": [1, 2], "mlm_loss": [3, 4]}
    else:
        assert all(seen == [1, 2, 3, 4] for seen in steps.values()), steps


def manual_evaluation(trainer) -> dict[str, float]:
    """`eval_<term>` for `loss` and every `*_loss` field, from forwards of our own over the evaluation's batches,
    each weighted by its rows."""
    model, sums, rows = trainer.model.eval(), defaultdict(float), 0
    with torch.no_grad():
        for batch in trainer.get_eval_dataloader():
            output = model(**trainer._prepare_inputs(batch))
            size = find_batch_size(batch)
            for name, value in output.items():
                if name.endswith("loss") and value is not None:
                    sums[f"eval_{name}"] += value.item() * size
            rows += size
    return {name: total / rows for name, total in sums.items()}


@pytest.mark.parametrize("method", ["tacl", "biphasic", "mae_lm"])
def test_the_logged_terms_are_the_model_forwards(method, tmp_path):
    """Training logs: TaCL's terms add up to Trainer's own `loss` (every micro-batch of two accumulated), biphasic's
    per-objective loss is the window's `loss`. The last evaluation (after the last step, so with the final weights)
    logs the weighted means of a manual evaluation's terms and exp of its language-modelling loss."""
    bert = save_tiny_bert(tmp_path / "bert")
    training_args = tiny_training_arguments(
        tmp_path / "out", max_steps=2, logging_steps=1, eval_steps=1, gradient_accumulation_steps=2
    )
    trainer = build_trainer(tiny_run_arguments(method, bert), training_args)
    trainer.train()
    training_logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(training_logs) == 2
    for step, entry in enumerate(training_logs, start=1):
        if method == "tacl":
            terms = entry["tacl_loss"] + entry["mlm_loss"] + entry["nsp_loss"]
            assert entry["loss"] == pytest.approx(terms, rel=1e-5)
        elif method == "biphasic":  # clm:0.5,mlm:0.5 of 2 steps
            assert entry[("clm", "mlm")[step - 1] + "_loss"] == entry["loss"]
    logged = [entry for entry in trainer.state.log_history if "eval_loss" in entry][-1]
    expected = manual_evaluation(trainer)
    if method == "biphasic":  # the model's output has no terms; the log names the objective it ran with
        expected["eval_mlm_loss"] = expected["eval_loss"]
    assert {name: logged[name] for name in expected} == pytest.approx(expected, rel=1e-5)
    language_modelling = expected["eval_loss" if method == "mae_lm" else "eval_mlm_loss"]
    assert logged["eval_perplexity"] == pytest.approx(math.exp(language_modelling), rel=1e-5)
