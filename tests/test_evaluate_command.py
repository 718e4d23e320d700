"""`hf-encoders evaluate` end to end: two tiny checkpoints (our MAE-LM and a stock BERT) on local sc, tc, qa and ir
folders, then a rerun that finds everything done, and the command's bad input."""

import json
import logging
from collections import Counter
from pathlib import Path

import pytest
import torch

from hf_encoders.evaluation import grid as grid_module
from hf_encoders.evaluation.finetune import fine_tune, protocol_arguments
from hf_encoders.evaluation.grid import RESULTS_FILE, Protocol
from hf_encoders_cli import main
from tests.task_folders import write_ir_folder, write_task_folders
from tests.tiny_models import save_tiny_bert, save_tiny_mae_lm

pytestmark = pytest.mark.usefixtures("one_thread")

FAST = ["--max_steps", "2", "--per_device_train_batch_size", "8", "--max_length", "64", "--use_cpu"]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    torch.manual_seed(0)
    models = [save_tiny_mae_lm(root / "mae_lm"), save_tiny_bert(root / "bert")]
    folders = write_task_folders(root / "tasks")
    tasks = [f"{kind}:{folder}" for kind, folder in folders.items()] + [write_ir_folder(root / "tasks" / "ir")]
    arguments = [*models, *[item for task in tasks for item in ("--task", task)], "--output_dir", str(root / "out")]
    arguments += ["--learning_rates", "1e-3", "--seeds", "0", *FAST]
    assert main(["evaluate", *arguments]) == 0
    return root / "out", arguments


def test_every_model_runs_every_kind_and_the_report_compares_them(grid):
    output_dir, _ = grid
    records = [json.loads(line) for line in (output_dir / RESULTS_FILE).read_text().splitlines()]
    assert len(records) == 2 * 4 and all(r["status"] == "finished" and r["steps"] == 2 for r in records)
    assert {r["kind"] for r in records} == {"sc", "tc", "qa", "ir"}
    main_metrics = {"sc": "accuracy", "tc": "f1", "qa": "f1", "ir": "ndcg@10"}
    assert all(main_metrics[r["kind"]] in r["validation"] and "test" in r for r in records)
    report = (output_dir / "REPORT.md").read_text()
    assert "| model | sc:sc (accuracy) | tc:tc (f1) | qa:qa (f1) | ir:ir (ndcg@10) |" in report
    assert "| mae_lm |" in report and "| bert |" in report
    for kind in main_metrics:
        assert (output_dir / f"stability_{kind}_{kind}.png").stat().st_size > 0
    assert "mean of the last hidden states" in report, "the report says how IR embeds"
    assert not (output_dir / "runs").exists() or not any((output_dir / "runs").iterdir())
    summary = json.loads((output_dir / "results.json").read_text())
    assert len(summary["cells"]) == 8 and summary["protocol"]["max_steps"] == 2


def test_a_rerun_skips_every_finished_run(grid, caplog):
    output_dir, arguments = grid
    before = (output_dir / RESULTS_FILE).read_text()
    with caplog.at_level(logging.WARNING, logger="hf_encoders.evaluation.grid"):
        assert main(["evaluate", *arguments]) == 0
    assert "8 of 8 runs already" in caplog.text
    assert (output_dir / RESULTS_FILE).read_text() == before


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda args: [*args, "--task", "xx:folder"], "xx"),
        (lambda args: ["/nowhere/model", *args[1:]], "/nowhere/model"),
        (lambda args: [*args, "--seeds", ""], "--seeds"),
    ],
    ids=["unknown-kind", "not-a-checkpoint", "no-seeds"],
)
def test_bad_input_is_named_before_any_run(grid, change, message, tmp_path):
    _, arguments = grid
    arguments = [a if a != str(grid[0]) else str(tmp_path / "out") for a in arguments]
    with pytest.raises(ValueError, match=message):
        main(["evaluate", *change(arguments)])
    assert not (tmp_path / "out" / RESULTS_FILE).exists()


def test_a_training_state_is_named_with_the_folder_to_pass_after_the_others_are_evaluated(grid, tmp_path):
    output_dir, arguments = grid
    state = tmp_path / "tacl"
    (state / "student").mkdir(parents=True)
    (state / "student" / "config.json").write_text("{}")
    with pytest.raises(ValueError) as refused:
        main(["evaluate", str(state), *arguments])
    assert str(refused.value) == (
        f"evaluated 2 model(s) into {output_dir / 'REPORT.md'}; skipped 1 MODEL(s): {state} is a TaCL training state "
        f"(student and teacher), not an encoder: pass {state / 'student'}, the encoder it trained."
    )


def test_ctrl_c_stops_cleanly_with_every_finished_run_kept(grid, tmp_path, monkeypatch, capsys):
    _, arguments = grid
    arguments = [a if a != str(grid[0]) else str(tmp_path / "out") for a in arguments]
    finished = []

    def ctrl_c_on_the_second_run(*args, **kwargs):
        if finished:
            raise KeyboardInterrupt
        finished.append(fine_tune(*args, **kwargs))
        return finished[-1]

    monkeypatch.setattr(grid_module, "fine_tune", ctrl_c_on_the_second_run)
    assert main(["evaluate", *arguments]) == 130
    results = tmp_path / "out" / RESULTS_FILE
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"hf-encoders evaluate: stopped. {results} keeps the 1 finished run(s); the same command again continues "
        "from there, skipping them."
    )
    assert [json.loads(line)["status"] for line in results.read_text().splitlines()] == ["finished"]


def test_labels_name_the_rows_and_the_report_gives_the_chance_level(grid, tmp_path):
    output_dir, arguments = grid
    assert main(["evaluate", *arguments, "--labels", "MAE", "BERT"]) == 0  # every run is done: the report alone
    report = (output_dir / "REPORT.md").read_text()
    assert "| MAE |" in report and "| BERT |" in report and "| mae_lm |" not in report
    sc_folder = next(a.split(":", 1)[1] for a in arguments if a.startswith("sc:"))
    split = Path(sc_folder) / ("test.jsonl" if (Path(sc_folder) / "test.jsonl").exists() else "validation.jsonl")
    labels = [json.loads(line)["label"] for line in split.read_text().splitlines() if line.strip()]
    chance = 100 * Counter(labels).most_common(1)[0][1] / len(labels)
    assert (
        f"Chance, the score of always answering the most frequent label of the split shown: sc:sc {chance:.2f}. "
        in report
    )
    with pytest.raises(ValueError, match=r"--labels names 1 model\(s\) but 2 MODEL\(s\) were given"):
        main(["evaluate", *arguments, "--labels", "one"])


def test_fine_tuning_logs_a_few_lines_per_run_never_one_per_step():
    settings = Protocol().run_settings(learning_rate=1e-4, seed=0)
    for steps, interval in ((2, 10), (30, 10), (1000, 100)):
        assert protocol_arguments(settings, steps, Path("x"))["logging_steps"] == interval
