"""The evaluation grid and its report, with the fine-tuning itself replaced by a deterministic stand-in: how many
runs, what a rerun skips, how an interrupted or failing grid continues, which rate is chosen, what the report says.
(tests/test_evaluation_finetune.py and tests/test_retrieval.py train for real.)"""

import json
import math
import statistics
import warnings

import pytest
from scipy import stats

from hf_encoders.evaluation import grid
from hf_encoders.evaluation.grid import RESULTS_FILE, Protocol, read_results, run_grid
from hf_encoders.evaluation.report import Cell, cell_of, format_score, summarize, write_report
from hf_encoders.evaluation.tasks import Task


def score(model: str, learning_rate: float, seed: int, split: str) -> float:
    """Model "b" is better; rate 2e-5 is best on validation for both, and the test scores differ from validation."""
    base = {"a": 0.6, "b": 0.8, "student": 0.7}[model.rsplit("/", 1)[-1]]
    rate_bonus = {1e-5: 0.0, 2e-5: 0.05, 5e-5: -0.1}[learning_rate]
    return base + rate_bonus + 0.01 * seed + (0.02 if split == "test" else 0.0)


class StandIn:
    """Records the runs it is asked for; fails on request, as a real run can."""

    def __init__(self, fail_on=None):
        self.calls, self.fail_on = [], fail_on

    def __call__(self, model, task, settings, output_dir):
        self.calls.append((model, task.name, settings.learning_rate, settings.seed))
        if self.fail_on and self.fail_on(model, settings):
            raise RuntimeError("CUDA out of memory (stand-in)")
        output_dir.mkdir(parents=True)
        (output_dir / "model.safetensors").write_text("weights")
        return {
            "steps": settings.max_steps,
            **{
                split: {"accuracy": score(model, settings.learning_rate, settings.seed, split)}
                for split in ("validation", "test")
            },
        }


@pytest.fixture
def stand_in(monkeypatch, tmp_path):
    models = [str(tmp_path / "a"), str(tmp_path / "b")]
    monkeypatch.setattr(grid, "check_models", lambda models, trust_remote_code: None)
    monkeypatch.setattr(grid, "load_task", lambda spec: Task("sc", "topic", spec, None, None, None, ["x", "y"]))

    def install(fail_on=None):
        fake = StandIn(fail_on)
        monkeypatch.setattr(grid, "fine_tune", fake)
        return fake

    return models, install


RATES, SEEDS = (1e-5, 2e-5, 5e-5), (0, 1)
PROTOCOL = Protocol(max_steps=7)


def test_the_grid_runs_every_model_task_rate_and_seed_once(stand_in, tmp_path):
    models, install = stand_in
    fake = install()
    results = run_grid(models, ["sc:topic"], tmp_path / "out", PROTOCOL, RATES, SEEDS)
    assert len(fake.calls) == len(results) == 2 * 3 * 2
    assert sorted(fake.calls) == sorted((m, "topic", r, s) for m in models for r in RATES for s in SEEDS)
    assert not any((tmp_path / "out" / "runs").iterdir()), "checkpoints are deleted once the metrics are recorded"

    rerun = install()
    assert len(run_grid(models, ["sc:topic"], tmp_path / "out", PROTOCOL, RATES, SEEDS)) == 12
    assert rerun.calls == [], "a rerun skips every finished run"

    changed = install()
    run_grid(models, ["sc:topic"], tmp_path / "out", Protocol(max_steps=8), RATES, SEEDS)
    assert len(changed.calls) == 12, "another protocol is another grid, not a finished one"


def test_an_interrupted_grid_continues_where_it_stopped(stand_in, tmp_path):
    models, install = stand_in
    install()
    run_grid(models, ["sc:topic"], tmp_path / "out", PROTOCOL, RATES, SEEDS)
    lines = (tmp_path / "out" / RESULTS_FILE).read_text().splitlines()
    # Killed during the 6th run's write: five whole lines and a torn one.
    (tmp_path / "out" / RESULTS_FILE).write_text("\n".join(lines[:5]) + "\n" + lines[5][:20])
    fake = install()
    results = run_grid(models, ["sc:topic"], tmp_path / "out", PROTOCOL, RATES, SEEDS)
    assert len(fake.calls) == 7 and len(results) == 12


def test_a_failed_run_is_recorded_the_grid_goes_on_and_a_rerun_retries_it(stand_in, tmp_path):
    models, install = stand_in
    install(fail_on=lambda model, settings: model.endswith("b") and settings.learning_rate == 5e-5)
    results = run_grid(models, ["sc:topic"], tmp_path / "out", PROTOCOL, RATES, SEEDS, keep_checkpoints=True)
    assert len(results) == 10
    failed = [r for r in read_results(tmp_path / "out") if r["status"] == "failed"]
    assert len(failed) == 2 and all("CUDA out of memory" in r["error"] and "validation" not in r for r in failed)
    assert len(list((tmp_path / "out" / "runs").iterdir())) == 10, "--keep_checkpoints keeps the finished runs'"

    retry = install()
    assert len(run_grid(models, ["sc:topic"], tmp_path / "out", PROTOCOL, RATES, SEEDS)) == 12
    assert sorted(retry.calls) == [(models[1], "topic", 5e-5, 0), (models[1], "topic", 5e-5, 1)]


def test_two_models_with_one_folder_name_keep_their_runs_apart(stand_in, tmp_path):
    _, install = stand_in
    students = [str(tmp_path / run / "student") for run in ("tacl_a", "tacl_b")]  # what two TaCL runs export
    fake = install()
    results = run_grid(students, ["sc:topic"], tmp_path / "out", PROTOCOL, RATES[:1], SEEDS[:1], keep_checkpoints=True)
    assert [r["model"] for r in results] == students and len(fake.calls) == 2
    assert len(list((tmp_path / "out" / "runs").iterdir())) == 2, "one checkpoint folder per model"


def test_the_best_rate_is_chosen_on_validation_and_test_is_reported(stand_in, tmp_path):
    models, install = stand_in
    install()
    results = run_grid(models, ["sc:topic"], tmp_path / "out", PROTOCOL, RATES, SEEDS)
    cells = {cell.model: cell for cell in summarize(results)}
    for model in models:
        cell = cells[model]
        assert cell.best_rate == 2e-5 and cell.reported_split == "test"
        expected = [score(model, 2e-5, seed, "test") for seed in SEEDS]
        assert cell.mean == pytest.approx(100 * statistics.fmean(expected))  # on 0-100
        assert cell.std == pytest.approx(100 * statistics.stdev(expected))


def test_the_report_tables_plots_and_summary(stand_in, tmp_path):
    models, install = stand_in
    install()
    results = run_grid(models, ["sc:topic"], tmp_path / "out", PROTOCOL, RATES, SEEDS)
    report = write_report(results, tmp_path / "out", PROTOCOL.identity(), {m: "its own head" for m in models})
    text = report.read_text()
    # On 0-100; the 95% interval of two seeds' mean is mean ± t(0.975, 1) x std / sqrt(2), with t(0.975, 1) = 12.706.
    half_width = 12.7062 * 0.7071 / math.sqrt(2)
    assert f"| a | 67.50 ± 0.71 ({67.5 - half_width:.2f}–{67.5 + half_width:.2f}) |" in text
    assert f"| b | 87.50 ± 0.71 ({87.5 - half_width:.2f}–{87.5 + half_width:.2f}) |" in text
    assert "Scores are on 0-100" in text and "Student t" in text
    assert "stability_sc_topic.png" in text and (tmp_path / "out" / "stability_sc_topic.png").stat().st_size > 0
    assert "up to 7 steps" in text and "- b: its own head" in text
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [cell["best_rate"] for cell in summary["cells"]] == [2e-5, 2e-5]


def test_one_seed_has_no_spread(stand_in, tmp_path):
    models, install = stand_in
    install()
    results = run_grid(models[:1], ["sc:topic"], tmp_path / "out", PROTOCOL, RATES, [0])
    cell = summarize(results)[0]
    assert cell.std is None and cell.confidence_interval is None
    text = write_report(results, tmp_path / "out", PROTOCOL.identity(), {models[0]: "its own head"}).read_text()
    assert f"| a | {100 * score(models[0], 2e-5, 0, 'test'):.2f} ± n/a |" in text


def test_every_kind_reports_on_one_scale():
    def records(kind, values):
        return [
            {
                "kind": kind,
                "learning_rate": 1e-5,
                "seed": seed,
                "validation": dict.fromkeys(("accuracy", "f1", "ndcg@10"), value),
            }
            for seed, value in enumerate(values)
        ]

    assert cell_of("m", "sc:x", records("sc", [0.5, 0.7])).reported == pytest.approx([50, 70])
    assert cell_of("m", "ir:x", records("ir", [0.25])).reported == pytest.approx([25])
    assert cell_of("m", "qa:x", records("qa", [81.0, 83.0])).reported == pytest.approx([81, 83])  # SQuAD's percent


def test_seeds_that_agree_have_an_interval_of_their_mean():
    cell = Cell("a", "sc:topic", "accuracy", {2e-5: [50.0] * 3}, 2e-5, "test", [50.0] * 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy warns (and returns nan) for a zero scale
        assert cell.confidence_interval == (50.0, 50.0)
        assert format_score(cell) == "50.00 ± 0.00 (50.00–50.00)"


def two_seed_cell(scores: list[float]) -> Cell:
    return Cell("a", "sc:topic", "accuracy", {2e-5: scores}, 2e-5, "test", scores)


def student_t_interval(scores: list[float]) -> tuple[float, float]:
    half_width = stats.t.ppf(0.975, len(scores) - 1) * statistics.stdev(scores) / math.sqrt(len(scores))
    return statistics.fmean(scores) - half_width, statistics.fmean(scores) + half_width


@pytest.mark.parametrize("scores", [[95.0, 100.0], [2.0, 0.0]])
def test_an_interval_beyond_the_score_range_is_shown_clipped_and_kept_whole_in_the_summary(scores):
    low, high = student_t_interval(scores)
    assert low < 0 or high > 100  # two seeds' t(0.975, 1) = 12.7 reaches past the range
    cell = two_seed_cell(scores)
    assert cell.confidence_interval == pytest.approx((low, high))
    shown = f"{statistics.fmean(scores):.2f} ± {statistics.stdev(scores):.2f} ({max(low, 0):.2f}–{min(high, 100):.2f})"
    assert format_score(cell) == shown and ("(0.00–" in shown or "–100.00)" in shown)


def test_a_small_spread_shows_its_first_significant_digit_in_every_number():
    scores = [50.0, 50.004]  # std 0.0028, which two decimals round to 0.00 beside an interval 0.05 wide
    low, high = student_t_interval(scores)
    shown = f"50.002 ± {statistics.stdev(scores):.3f} ({low:.3f}–{high:.3f})"
    assert format_score(two_seed_cell(scores)) == shown and " ± 0.003 " in shown
