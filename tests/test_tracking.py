"""Every tracker sees every loss term: TaCL's three and biphasic's per-objective losses reach TensorBoard's event files
(read back offline), not only the console and trainer_state.json."""

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers import TrainingArguments

from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.pretrain import build_trainer
from tests.tiny_models import save_tiny_bert

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(
    "method,terms",
    [("tacl", {"tacl_loss", "mlm_loss", "nsp_loss"}), ("biphasic", {"clm_loss", "mlm_loss"})],
)
def test_loss_terms_reach_tensorboard(method, terms, tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "runs"))  # transformers 5's place for it
    bert = save_tiny_bert(tmp_path / "bert")
    start = {"model_name_or_path": bert} if method == "tacl" else {"tokenizer_name": bert, "phases": "clm:0.5,mlm:0.5"}
    args = PretrainArguments(method=method, max_documents=40, block_size=32, config_overrides=None, **start)
    training_args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        report_to="tensorboard",
        max_steps=4,
        logging_steps=1,
        per_device_train_batch_size=4,
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    build_trainer(args, training_args).train()
    events = EventAccumulator(str(tmp_path / "runs"))
    events.Reload()
    logged = {tag.removeprefix("train/") for tag in events.Tags()["scalars"]}
    assert terms <= logged, f"TensorBoard got {sorted(logged)}"
    steps = {term: [event.step for event in events.Scalars(f"train/{term}")] for term in terms}
    if method == "biphasic":  # each objective's curve covers its own phase only
        assert steps == {"clm_loss": [1, 2], "mlm_loss": [3, 4]}
    else:
        assert all(seen == [1, 2, 3, 4] for seen in steps.values()), steps
