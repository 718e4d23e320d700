"""Live throughput: `tokens_per_second` in every training log counts real tokens (as Trainer's own non-padding count
does) over the time between logs, and `mfu` follows from it, the model's parameters and the peak."""

from itertools import pairwise
from types import SimpleNamespace

import pytest
import torch
from transformers import TrainingArguments

from hf_encoders.training import measures
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.cards import training_summary
from hf_encoders.training.measures import Throughput
from hf_encoders.training.pretrain import build_trainer
from hf_encoders.training.trainer import PretrainingTrainer
from tests.tiny_models import save_tiny_bert

pytestmark = pytest.mark.usefixtures("one_thread")


class Clock:
    """One second passes between two readings, so a window's tokens per second is its token count."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1.0
        return self.now


def test_tokens_per_second_counts_the_real_tokens_between_logs_and_mfu_follows(tmp_path, monkeypatch):
    monkeypatch.setattr(measures.time, "perf_counter", Clock())
    bert = save_tiny_bert(tmp_path / "bert")
    # Short documents in blocks of 64: the last block of each padded batch is shorter, so padding is there to skip.
    args = PretrainArguments(method="mae_lm", tokenizer_name=bert, max_documents=30, block_size=64, peak_tflops=2.0)
    training_args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=6,
        logging_steps=2,
        per_device_train_batch_size=3,
        gradient_accumulation_steps=2,
        include_num_input_tokens_seen="non_padding",  # Trainer's own count, the reference
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = build_trainer(args, training_args)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    seen = [0] + [entry["num_input_tokens_seen"] for entry in logs]
    assert [entry["tokens_per_second"] for entry in logs] == [after - before for before, after in pairwise(seen)]
    parameters = sum(parameter.numel() for parameter in trainer.model.parameters())
    for entry in logs:
        assert entry["mfu"] == pytest.approx(entry["tokens_per_second"] * 6 * parameters / 2e12, abs=1e-4)
    summary = training_summary(trainer.state)
    median = sorted(entry["tokens_per_second"] for entry in logs)[len(logs) // 2]  # 3 logs: the middle one
    assert f"- real tokens per second (median of the logs): {median:,.0f}" in summary
    assert "- model FLOPs utilisation (median of the logs): " in summary


def test_frozen_parameters_count_a_forward_only():
    model = torch.nn.Sequential(torch.nn.Linear(10, 10), torch.nn.Linear(10, 10))
    model[1].requires_grad_(False)
    assert Throughput(model).flops_per_token == 6 * 110 + 2 * 110


def test_a_peak_must_be_positive(tmp_path):
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="--peak_tflops must be positive"):
        PretrainingTrainer(model=model, args=TrainingArguments(tmp_path, report_to="none", use_cpu=True), peak_tflops=0)


def test_evaluation_and_probe_time_is_not_counted_as_training_time(monkeypatch):
    clock = iter([100.0, 110.0])  # train begins; the training log comes 10 s later
    monkeypatch.setattr(measures, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    throughput = Throughput(torch.nn.Linear(2, 2))
    throughput.tokens = torch.tensor(1000)
    assert throughput.pop({"eval_loss": 1.0, "eval_runtime": 6.0}, "cpu", world_size=1) == {}
    measured = throughput.pop({"loss": 1.0, "diagnostics_runtime": 2.0}, "cpu", world_size=1)
    assert measured == {"tokens_per_second": 500.0}  # 1000 tokens in 10 - 6 - 2 seconds
