"""Every tracker sees every loss term: TaCL's three and biphasic's per-objective losses, in training and validation,
with the perplexity, throughput and diagnostics, reach TensorBoard's event files (read back offline), not only the
console and trainer_state.json."""

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

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
