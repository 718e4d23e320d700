"""experiments/reproduce.py outlives a session: an arm cut short resumes from its last complete checkpoint, a finished
one is skipped, and every step's wall time is recorded with the load beside it (experiments/wall_time.py). The
`hf-encoders` commands are replaced by a stand-in that writes what the real one would."""

import argparse
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import scipy.stats

# The experiments are scripts, not a package: their folder goes on the path, as `python experiments/...` puts it.
sys.path.insert(0, str(Path(__file__).parents[1] / "experiments"))
import report
import reproduce
import wall_time

from hf_encoders.evaluation.tasks import MAIN_METRIC
from hf_encoders.training.encoder_hold import HOLD_SUMMARY


class FakeCommands:
    """Stands in for `subprocess.run` of `hf-encoders pretrain`: each call does what the next entry of `outcomes`
    says ("preempted": a complete checkpoint-4 and no final model, "partial": a checkpoint-8 cut off while being
    written, "finished": the final log_history.json), and remembers its arguments."""

    def __init__(self, outcomes: list[str]):
        self.outcomes, self.calls = list(outcomes), []

    def __call__(self, command, check, env):
        arguments = command[command.index("hf_encoders.cli") + 1 :]
        self.calls.append(arguments)
        output = Path(arguments[arguments.index("--output_dir") + 1])
        outcome = self.outcomes.pop(0)
        if outcome == "preempted":
            (output / "checkpoint-4").mkdir(parents=True)
            (output / "checkpoint-4" / "trainer_state.json").write_text("{}")
        elif outcome == "partial":
            (output / "checkpoint-8").mkdir(parents=True)
        else:
            output.mkdir(parents=True, exist_ok=True)
            (output / "log_history.json").write_text("[]")
        return subprocess.CompletedProcess(command, 0)


@pytest.fixture
def runner(tmp_path):
    settings = argparse.Namespace(output_dir=tmp_path, seed=0)
    runner = reproduce.Runner(settings)
    runner.experiment = "M"
    return runner


@pytest.fixture
def calls():
    """The arguments of every `hf-encoders` command a runner made (see b1_runner)."""
    return []


@pytest.fixture
def b1_runner(runner, calls, monkeypatch):
    """A runner for experiments that start from B1's arms (pre-training seed 1, 1,500 steps, 500 continued), whose
    commands are recorded in `calls` instead of run: each counts as done."""
    runner.settings = argparse.Namespace(
        output_dir=runner.root, seed=1, steps=1500, continue_steps=500, finetune_steps=75, mp_arm=None
    )

    def recording(done, *arguments, checkpoints=None):
        calls.append(arguments)
        return done.parent

    monkeypatch.setattr(runner, "hf_encoders", recording)
    (runner.root / "tokenizer").mkdir()
    (runner.root / "tokenizer" / "tokenizer.json").write_text("{}")  # B1's, already trained
    return runner


def pretrain(runner):
    return runner.pretrain("arm", "--method", "mae_lm", steps=40)


def test_an_interrupted_arm_resumes_from_its_last_complete_checkpoint(runner, monkeypatch):
    commands = FakeCommands(["partial", "preempted", "finished"])
    monkeypatch.setattr(reproduce.subprocess, "run", commands)
    for _ in range(2):  # two sessions end without a final model: the script stops and says how to go on
        with pytest.raises(SystemExit, match="stopped before it finished; run the same command again to resume"):
            pretrain(runner)
        # The preempted command exited normally, but the step has not run to its end.
        assert json.loads((runner.root / "timings.json").read_text())["pretrain/arm"]["finished"] is False
    assert pretrain(runner) == runner.root / "pretrain" / "arm"
    first, second, third = commands.calls
    assert first[first.index("--save_strategy") + 1] == "steps" and first[first.index("--save_steps") + 1] == "4"
    # Only a checkpoint Trainer finished writing is resumed from; the partial checkpoint-8 is not one.
    assert "--resume_from_checkpoint" not in first and "--resume_from_checkpoint" not in second
    assert third[-2:] == ["--resume_from_checkpoint", "true"]
    pretrain(runner)  # finished: skipped, nothing runs
    assert len(commands.calls) == 3
    # One record for the step, adding up its three sessions.
    timings = json.loads((runner.root / "timings.json").read_text())
    assert list(timings) == ["pretrain/arm"]
    assert timings["pretrain/arm"]["experiment"] == "M" and timings["pretrain/arm"]["sessions"] == 3
    assert timings["pretrain/arm"]["finished"] is True


def test_an_arm_whose_steps_its_validations_do_not_divide_is_refused_before_it_runs(b1_runner, calls):
    with pytest.raises(SystemExit, match=r"arm: 45 steps do not divide into its 10 validations, .* multiple of 10"):
        b1_runner.pretrain("arm", "--method", "mae_lm", steps=45, evaluations=10)
    assert calls == []
    b1_runner.pretrain("arm", "--method", "mae_lm", steps=50, evaluations=10)
    assert calls[0][calls[0].index("--eval_steps") + 1] == "5"


def test_t1_from_a_trained_head_continues_b1s_mlm_arm_with_and_without_the_contrastive_term(b1_runner, calls):
    reproduce.t1_trained_head(b1_runner)
    b1_arm, mlm, tacl, analyze, evaluate = calls
    start = str(b1_runner.root / "pretrain" / "b1_mlm_only")
    assert b1_arm[b1_arm.index("--phases") + 1] == "mlm:1.0"  # B1's MLM-only arm: skipped by hf_encoders when done
    for arm in (mlm, tacl):
        assert arm[:5] == ("pretrain", "--method", "tacl", "--model_name_or_path", start)
        assert arm[arm.index("--max_steps") + 1] == "500" and arm[arm.index("--seed") + 1] == "1"
    assert mlm[mlm.index("--tacl_loss_weight") + 1] == "0" and "--tacl_loss_weight" not in tacl
    students = [str(b1_runner.root / "pretrain" / run / "student") for run in ("t1h_mlm", "t1h_tacl")]
    assert analyze[1:4] == (start, *students) and evaluate[1:4] == (start, *students)


def test_an_evaluate_grid_that_grew_runs_again_and_one_that_did_not_is_skipped(runner, monkeypatch):
    """evaluate itself skips the runs it finished (results.jsonl); the script must call it again when the grid has
    more models, rates or seeds than the results.json it left, and not when the grid is the same."""
    calls = []

    def evaluating(command, check, env):
        calls.append(command)
        output = Path(command[command.index("--output_dir") + 1])
        rates = command[command.index("--learning_rates") + 1].split(",")
        seeds = len(command[command.index("--seeds") + 1].split(","))
        models = command[command.index("evaluate") + 1 : command.index("--task")]
        cells = [
            {"model": model, "validation_by_rate": {str(float(rate)): [50.0] * seeds for rate in rates}}
            for model in models
        ]
        output.mkdir(parents=True, exist_ok=True)
        (output / "results.json").write_text(json.dumps({"cells": cells}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(reproduce.subprocess, "run", evaluating)
    runner.settings.finetune_steps = 75
    one, two = {"a": runner.root / "a"}, {"a": runner.root / "a", "b": runner.root / "b"}
    grids = [(one, (1e-4, 1e-3), 2), (one, (1e-4, 1e-3), 2), (one, (1e-4, 1e-3, 1e-2), 2)]
    grids += [(one, (1e-4, 1e-3, 1e-2), 3), (two, (1e-4, 1e-3, 1e-2), 3), (two, (1e-4, 1e-3, 1e-2), 3)]
    for models, rates, seeds in grids:
        runner.evaluate("grid", models, kinds=["sc"], learning_rates=rates, seeds=seeds)
    ran = [
        (c[c.index("--learning_rates") + 1], c[c.index("--seeds") + 1], c.count(str(runner.root / "b"))) for c in calls
    ]
    assert ran == [
        ("0.0001,0.001", "0,1", 0),
        ("0.0001,0.001,0.01", "0,1", 0),
        ("0.0001,0.001,0.01", "0,1,2", 0),
        ("0.0001,0.001,0.01", "0,1,2", 1),
    ]


def test_b2_at_equal_budget_continues_b1s_clm_and_mlm_arms_alike_with_mlm(b1_runner, calls):
    reproduce.b2_equal_budget(b1_runner)
    clm_arm, from_clm, mlm_arm, from_mlm, analyze, evaluate = calls
    assert clm_arm[clm_arm.index("--phases") + 1] == "clm:1.0" and mlm_arm[mlm_arm.index("--phases") + 1] == "mlm:1.0"
    for start, continued in (("b1_clm_only", from_clm), ("b1_mlm_only", from_mlm)):
        assert continued[continued.index("--model_name_or_path") + 1] == str(b1_runner.root / "pretrain" / start)
        assert continued[continued.index("--phases") + 1] == "mlm:1.0"
        assert (
            continued[continued.index("--max_steps") + 1] == "500" and continued[continued.index("--seed") + 1] == "1"
        )
        decay = json.loads(continued[continued.index("--lr_scheduler_kwargs") + 1])
        assert decay == {"num_decay_steps": 50, "decay_type": "linear"}
    # The two continuations differ in their start and their output folder only.
    continued = [str(b1_runner.root / "pretrain" / f"b2e_cpt_{start}") for start in ("clm_only", "mlm_only")]
    assert [a for a in from_clm if a not in from_mlm] == [
        str(b1_runner.root / "pretrain" / "b1_clm_only"),
        continued[0],
    ]
    assert analyze[1:3] == tuple(continued) and evaluate[1:3] == tuple(continued)
    assert evaluate[evaluate.index("--learning_rates") + 1] == "0.001,0.003"


@pytest.mark.parametrize("steps,held", [(1000, "500"), (3000, "1500"), (6000, "1500")])
def test_m_pretrained_holds_every_arms_encoder_for_1500_steps_at_most_half_and_differs_only_in_delta(
    b1_runner, calls, monkeypatch, steps, held
):
    monkeypatch.setattr(reproduce, "minilm_path", lambda: "minilm")
    monkeypatch.setattr(b1_runner, "probe", lambda name, models: calls.append(("probe", *map(str, models.values()))))
    b1_runner.settings.mae_lm_continue_steps = steps
    reproduce.m_pretrained(b1_runner)
    *arms, analyze, probe, evaluate = calls
    assert len(arms) == 3
    for arm in arms:
        option = {name: arm[arm.index(name) + 1] for name in ("--max_steps", "--hold_encoder_steps", "--eval_steps")}
        assert option == {"--max_steps": str(steps), "--hold_encoder_steps": held, "--eval_steps": str(steps // 10)}
        assert arm[arm.index("--model_name_or_path") + 1] == "minilm"
    folders = [str(b1_runner.root / "pretrain" / f"mp_delta_{delta}") for delta in ("1.0", "0.5", "0.0")]
    assert [[a for a in arm if a not in arms[0]] for arm in arms[1:]] == [["0.5", folders[1]], ["0.0", folders[2]]]
    assert analyze[1:5] == ("minilm", *folders) and probe[1:] == tuple(folders) and evaluate[1:4] == tuple(folders)


def test_m_pretrained_with_one_arm_named_pretrains_that_arm_only(b1_runner, calls, monkeypatch):
    monkeypatch.setattr(reproduce, "minilm_path", lambda: "minilm")
    b1_runner.settings = reproduce.build_parser().parse_args(
        ["--corpus", "docs", "--output-dir", str(b1_runner.root), "--mp-arm", "0.5", "--mae-lm-continue-steps", "600"]
    )
    reproduce.m_pretrained(b1_runner)
    (arm,) = calls  # no analysis, probe or fine-tuning: the other arms may still be running
    assert arm[arm.index("--mask_in_encoder_fraction") + 1] == "0.5" and arm[-1].endswith("mp_delta_0.5")
    with pytest.raises(SystemExit):  # only the experiment's own arms
        reproduce.build_parser().parse_args(["--corpus", "docs", "--mp-arm", "0.25"])


def test_sessions_add_up_with_the_load_weighted_by_time():
    first = wall_time.Measurement(seconds=100, cpu_seconds=90, load_average=1.0, other_processes=0)
    later = wall_time.Measurement(seconds=300, cpu_seconds=290, load_average=3.0, other_processes=2)
    total = later.after(first.as_dict())
    assert (total.seconds, total.cpu_seconds, total.sessions, total.other_processes) == (400, 380, 2, 2)
    assert total.load_average == pytest.approx((100 * 1.0 + 300 * 3.0) / 400)


@pytest.mark.parametrize(
    "load_average,other_processes,alone",
    [(1.3, 0, True), (1.6, 0, False), (1.0, 1, False)],
)
def test_a_step_ran_alone_when_others_added_under_half_a_core(load_average, other_processes, alone):
    # One core kept busy (CPU seconds = wall seconds): the load beyond 1 is the others'.
    measurement = wall_time.Measurement(
        seconds=60, cpu_seconds=60, load_average=load_average, other_processes=other_processes
    )
    assert measurement.others_load == pytest.approx(max(0.0, load_average - 1.0))
    assert measurement.alone is alone


def test_busy_processes_are_those_beside_the_run_that_used_a_fifth_of_a_core(monkeypatch):
    """Between two samples 10 s apart: a process that used 5 CPU seconds counts, one that used 1 does not, and this
    process (the run itself) never does."""
    seconds = iter([0.0, 0.0, 10.0])  # created (and first sample) at 0 s, second sample at 10 s
    monkeypatch.setattr(wall_time.time, "monotonic", lambda: next(seconds))
    used = {"first": {11: 0.0, 12: 0.0, os.getpid(): 0.0}, "second": {11: 5.0, 12: 1.0, os.getpid(): 10.0}}
    sample = iter(["first", "second"])

    def processes(attributes):
        cpu = used[next(sample)]
        return [
            SimpleNamespace(info={"pid": pid, "cpu_times": SimpleNamespace(user=t, system=0.0)})
            for pid, t in cpu.items()
        ]

    monkeypatch.setattr(wall_time.psutil, "process_iter", processes)
    assert wall_time.OtherProcesses().busy() == 1


def test_measuring_counts_the_cpu_time_of_a_finished_child():
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    with wall_time.measuring(interval=0.05) as measurement:
        subprocess.run([sys.executable, "-c", busy], check=True)
    assert measurement.cpu_seconds >= 0.3 and measurement.seconds >= measurement.cpu_seconds / 2
    assert measurement.loads and measurement.load_average >= 0


def test_a_running_step_reports_its_time_so_far_including_its_running_subprocess():
    busy = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass"
    samples = []
    with wall_time.measuring(
        interval=0.02, on_sample=lambda m: samples.append((m.seconds, m.cpu_seconds)), sample_every=0.1
    ) as m:
        subprocess.run([sys.executable, "-c", busy], check=True)
    assert samples, "no sample while the step ran"
    # The child's CPU time shows before the child has ended (then only psutil sees it, not getrusage).
    assert max(cpu for _, cpu in samples) >= 0.1
    assert all(seconds <= m.seconds for seconds, _ in samples) and m.cpu_seconds >= 0.6


def test_a_session_killed_mid_step_keeps_the_time_it_had_recorded(runner, monkeypatch):
    monkeypatch.setattr(reproduce, "measuring", functools.partial(wall_time.measuring, interval=0.02))
    monkeypatch.setattr(reproduce.Runner, "SAMPLE_EVERY", 0.05)

    class Killed(BaseException):
        """What the session's end does to the script: nothing after it runs."""

    def killed_after_a_record(command, check, env):
        deadline = time.monotonic() + 10
        while not runner.timings_path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise Killed

    monkeypatch.setattr(reproduce.subprocess, "run", killed_after_a_record)
    with pytest.raises(Killed):
        pretrain(runner)
    killed = json.loads(runner.timings_path.read_text())["pretrain/arm"]
    assert killed["experiment"] == "M" and killed["sessions"] == 1 and killed["seconds"] > 0
    assert killed["finished"] is False
    monkeypatch.setattr(reproduce.subprocess, "run", FakeCommands(["finished"]))
    pretrain(runner)
    resumed = json.loads(runner.timings_path.read_text())["pretrain/arm"]
    assert resumed["sessions"] == 2 and resumed["seconds"] >= killed["seconds"] and resumed["finished"] is True


def test_arms_run_side_by_side_never_lose_or_tear_each_others_timings(tmp_path):
    """Three M-pretrained arms, one process each, rewrite one timings.json every minute. Unlocked, a reader saw it
    half-written (JSONDecodeError) and a writer dropped another's record; threads race the same way, faster."""
    runners = [reproduce.Runner(argparse.Namespace(output_dir=tmp_path, seed=0)) for _ in range(3)]
    failures = []

    def arm(index):
        try:
            for count in range(60):
                runners[index].write_timing(f"pretrain/arm_{index}", {"experiment": "M", "seconds": count})
                assert f"pretrain/arm_{index}" in runners[(index + 1) % 3].timings  # read between the writers
        except Exception as error:  # a thread's error must reach the test
            failures.append(error)

    threads = [threading.Thread(target=arm, args=(index,)) for index in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert {step: entry["seconds"] for step, entry in runners[0].timings.items()} == {
        f"pretrain/arm_{index}": 59 for index in range(3)
    }


def test_the_report_tables_every_step_and_older_totals(tmp_path):
    timings = {
        "T1": 600,  # an experiment's total, as timings.json held it before per-step records
        "pretrain/m_delta_0.0": {
            "experiment": "M", "seconds": 120, "cpu_seconds": 120, "load_average": 2.5, "other_processes": 1,
            "sessions": 2,
        },
    }  # fmt: skip
    measured = {"seconds": 60, "cpu_seconds": 60, "load_average": 1.0, "other_processes": 0, "sessions": 1}
    timings["pretrain/m_delta_0.5"] = {"experiment": "M", "finished": True, **measured}
    timings["pretrain/m_delta_1.0"] = {"experiment": "M", "finished": False, **measured}
    lines = report.wall_time_lines(timings)
    assert "| T1 | T1 | 10.0 |  |  |  | not recorded |" in lines
    assert "| M | pretrain/m_delta_0.0 | 2.0 | 2.0 | 1.50 | 1 | shared, 2 sessions |" in lines
    assert "| M | pretrain/m_delta_0.5 | 1.0 | 1.0 | 0.00 | 0 | alone |" in lines
    assert (
        "| M | pretrain/m_delta_1.0 | 1.0 | 1.0 | 0.00 | 0 | alone, unfinished (running, or cut and not resumed yet) |"
        in (lines)
    )
    # The set-up's totals count finished steps only: M is 0.0's 2 minutes and 0.5's 1, not 1.0's minute so far.
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"text": "a page"}) + "\n")
    settings = argparse.Namespace(steps=1500, continue_steps=500, cpt_steps=20, finetune_steps=75)
    setup = "\n".join(report.setup_lines(tmp_path, timings, settings, {"M": 1}))
    assert "pre-training + analysis + fine-tuning, finished steps: T1 10 min, M 3 min;" in setup


def fake_mp_runs(root: Path, losses: dict[str, float]) -> None:
    """What M-pretrained leaves for the report besides the corpus: the analysis and each arm's log (no fine-tuning
    yet). Ranks fall with δ and the δ = 1 arm loses rank when [MASK] enters: both rules' rank points hold."""
    ranks = {"minilm": ([50, 60], [50, 55]), "delta_0.0": ([40, 70], [40, 70]), "delta_0.5": ([40, 65], [40, 60])}
    ranks["delta_1.0"] = ([40, 60], [40, 45])
    models = [
        {"model": label, "effective_rank": clean, "effective_rank_with_mask": masked, "self_similarity": [0.3, 0.4]}
        for label, (clean, masked) in ranks.items()
    ]
    (root / "analysis" / "mp").mkdir(parents=True)
    (root / "analysis" / "mp" / "report.json").write_text(json.dumps({"models": models}))
    for label, loss in losses.items():
        (root / "pretrain" / f"mp_{label}").mkdir(parents=True)
        history = [{"loss": 9.0, "learning_rate": 1.99333e-4, "step": 10}, {"eval_loss": loss, "step": 20}]
        (root / "pretrain" / f"mp_{label}" / "log_history.json").write_text(json.dumps(history))
        card = f"## Training\n- [MASK]s kept in the encoder input (δ): 0%\n{HOLD_SUMMARY.format(steps=10)}\n"
        (root / "pretrain" / f"mp_{label}" / "README.md").write_text(card)


@pytest.mark.parametrize("stuck_loss", [None, 0.3])
def test_pretrained_mae_lm_verdicts_count_only_arms_below_the_unigram_entropy(tmp_path, stuck_loss):
    root = tmp_path / "runs"
    root.mkdir()
    (root / "corpus.jsonl").write_text("".join(json.dumps({"text": "the json module " * n}) + "\n" for n in (3, 5)))
    entropy = report.unigram_entropy(root, report.minilm_tokenizer())
    losses = {"delta_0.0": 0.5, "delta_0.5": 0.5, "delta_1.0": 0.5}
    if stuck_loss is not None:  # δ = 0.5 ends 0.3 nats below the entropy: not learning enough to compare
        losses["delta_0.5"] = entropy - stuck_loss
    fake_mp_runs(root, losses)
    (tmp_path / "figures").mkdir()
    rows, section = report.m_pretrained(root, tmp_path / "figures")
    m1_row, m2_row = rows.splitlines()
    if stuck_loss is None:
        assert m1_row.endswith("| reproduced |") and m2_row.endswith("| pending |")
        assert "rank 70 / 65 / 60, downstream pending" in m2_row
        # Fine-tuned: scores fall with δ on every task, so both of M2's points hold.
        cells = [
            {"model": str(root / "pretrain" / f"mp_{label}"), "task": f"{kind}:folder", "mean": score, "std": 0.01}
            for label, score in (("delta_0.0", 0.7), ("delta_0.5", 0.6), ("delta_1.0", 0.5))
            for kind in report.KINDS
        ]
        # evaluate's runs: δ = 0 scores 70, 71, 72 on sc's test split over three seeds (mean 71, std 1).
        records = [
            {"model": str(root / "pretrain" / "mp_delta_0.0"), "task": f"sc:{root}/tasks/sc", "kind": "sc"}
            | {"learning_rate": 1e-4, "seed": seed, "status": "finished"}
            | {"validation": {"accuracy": 0.5}, "test": {"accuracy": 0.70 + 0.01 * seed}}
            for seed in range(3)
        ]
        (root / "evaluate" / "mp").mkdir(parents=True)
        (root / "evaluate" / "mp" / "results.json").write_text(json.dumps({"cells": cells}))
        (root / "evaluate" / "mp" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        rows, section = report.m_pretrained(root, tmp_path / "figures")
        assert rows.splitlines()[1].endswith("mean downstream 0.700 / 0.600 / 0.500 | reproduced |")
        low, high = scipy.stats.t.interval(0.95, 2, loc=71.0, scale=scipy.stats.sem([70.0, 71.0, 72.0]))
        sc = f"| 71.0 [{low:.1f}, {high:.1f}] |"
        assert any(line.startswith("| delta_0.0 | 0.500 |") and sc in line for line in section)
        assert "Scores: mean and 95% confidence interval over the fine-tuning seeds." in "\n".join(section)
    else:
        void = f"| void: δ = 0.5 ({entropy - stuck_loss:.2f}) not 0.5 nats below the unigram entropy ({entropy:.2f}) |"
        assert m1_row.endswith(void) and m2_row.endswith(void)
    assert any(line.startswith("| minilm |  | [50, 60] | [50, 55] |") for line in section)
    held = "20 / 20 / 20 steps (δ = 0 / 0.5 / 1), the encoder held still for the first 10 steps "
    assert any(held + "(`--hold_encoder_steps`) in every arm, at a peak rate of 0.0002," in line for line in section)
    assert (tmp_path / "figures" / "mp_delta_sweep.png").exists()
    assert "![mp_validation_loss.png](figures/mp_validation_loss.png)" in section
    assert (tmp_path / "figures" / "mp_validation_loss.png").exists()


def fake_seed_folder(root, experiment, losses, validation, test_score, kinds=report.KINDS) -> None:
    """One pre-training seed's folder of `experiment`: each run's log (`losses`: run -> validation loss), the analysis
    of each run (labelled as reproduce.py labels it, without the experiment's prefix), and evaluate's records of every
    folder in `validation` (folder -> rate -> validation score) on every task kind, two fine-tuning seeds; scores on
    evaluate's 0-1 scale, 0-100 for qa; `test_score(folder, seed)` gives the test score."""
    for run, loss in losses.items():
        (root / "pretrain" / run).mkdir(parents=True)
        history = [{"loss": 9.0, "step": 10}, {"eval_loss": loss, "step": 20}]
        (root / "pretrain" / run / "log_history.json").write_text(json.dumps(history))
    models = [
        {"model": arm, "effective_rank": [30, 20], "effective_rank_with_mask": [30, 20], "self_similarity": [0.3, 0.4]}
        for arm in (run.removeprefix(f"{experiment}_") for run in losses)
    ]
    (root / "analysis" / experiment).mkdir(parents=True)
    (root / "analysis" / experiment / "report.json").write_text(json.dumps({"models": models}))
    records = []
    for folder, by_rate in validation.items():
        for kind in kinds:
            metric, scale = MAIN_METRIC[kind], 1 if kind == "qa" else 0.01
            for rate, score in by_rate.items():
                for seed in (0, 1):
                    record = {"model": str(root / folder), "task": f"{kind}:{root}/tasks/{kind}", "kind": kind}
                    record |= {"learning_rate": rate, "seed": seed, "status": "finished"}
                    record |= {
                        "validation": {metric: scale * score},
                        "test": {metric: scale * test_score(folder, seed)},
                    }
                    records.append(record)
    (root / "evaluate" / experiment).mkdir(parents=True)
    (root / "evaluate" / experiment / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (root / "evaluate" / experiment / "results.json").write_text("{}")


@pytest.mark.parametrize("stuck", [False, True])
def test_b1_pools_every_pretraining_and_fine_tuning_seed_and_compares_the_fall_over_rates(tmp_path, monkeypatch, stuck):
    monkeypatch.setattr(report, "unigram_entropy", lambda root, tokenizer_path=None: 6.0)
    # CLM -> MLM: best at 1e-4, 2 points lower at 1e-3; MLM alone: 10 points lower at its worse rate.
    validation = {"clm_then_mlm": {1e-4: 80.0, 1e-3: 78.0}, "mlm_only": {1e-4: 60.0, 1e-3: 70.0}}
    tests = {}
    for index in (0, 1):
        losses = {"b1_clm_then_mlm": 5.0, "b1_mlm_only": 5.8 if stuck and index == 1 else 5.2, "b1_clm_only": 4.0}
        tests[index] = {"clm_then_mlm": [81.0 + index, 83.0 + index], "mlm_only": [71.0 - index, 70.0]}
        folders = {f"pretrain/b1_{arm}": by_rate for arm, by_rate in validation.items()}
        fake_seed_folder(
            tmp_path / "runs" / f"b1_s{index}", "b1", losses, folders,
            lambda folder, seed, i=index: tests[i][folder.removeprefix("pretrain/b1_")][seed],
        )  # fmt: skip
    (tmp_path / "figures").mkdir()
    row, section = report.b1(tmp_path / "runs", tmp_path / "figures")
    if stuck:
        assert row.endswith("| void: mlm_only seed 1 (5.80) not 0.5 nats below the unigram entropy (6.00) |")
        return
    assert "CLM→MLM beats MLM on 4/4 tasks (sc, tc, qa, ir; intervals apart on 4: sc, tc, qa, ir)" in row
    assert "moves less over the rate grid on 4/4" in row and "2 pre-training seeds" in row
    assert row.endswith("| reproduced |")
    # Every pre-training x fine-tuning seed at the best rate, with Student's interval computed here independently.
    pooled = [81.0, 83.0, 82.0, 84.0]
    low, high = scipy.stats.t.interval(0.95, 3, loc=statistics.fmean(pooled), scale=scipy.stats.sem(pooled))
    expected = f"{statistics.fmean(pooled):.1f} [{low:.1f}, {high:.1f}] (2.0)"
    assert any(line.startswith("| clm_then_mlm |") and line.count(expected) == 4 for line in section)
    assert any(line.startswith("| mlm_only |") and "(10.0)" in line for line in section)
    assert "| clm_only | 4.000 (+2.00), 4.000 (+2.00) | 0.400, 0.400 | 20, 20 |" in section
    assert (tmp_path / "figures" / "b1_rate_grid.png").exists()


@pytest.mark.parametrize("case", ["clm start ahead", "clm start behind", "stuck"])
def test_b2_at_equal_budget_pools_both_seeds_and_counts_the_tasks_the_clm_start_wins(tmp_path, monkeypatch, case):
    monkeypatch.setattr(report, "unigram_entropy", lambda root, tokenizer_path=None: 6.0)
    # Two rates for the CLM start, one for the MLM start: validation picks one per arm and task.
    validation = {"pretrain/b2e_cpt_clm_only": {1e-3: 60.0, 3e-3: 70.0}, "pretrain/b2e_cpt_mlm_only": {1e-3: 70.0}}
    ahead = case != "clm start behind"
    for index in (0, 1):
        losses = {"b2e_cpt_clm_only": 4.8, "b2e_cpt_mlm_only": 5.7 if case == "stuck" else 5.1, "b1_mlm_only": 5.2}

        def test_score(folder, seed, index=index):
            from_clm = folder.endswith("clm_only")
            return (80.0 if from_clm == ahead else 70.0) + index + seed

        fake_seed_folder(tmp_path / "runs" / f"b1_s{index}", "b2e", losses, validation, test_score)
    row, section = report.b2_equal_budget(tmp_path / "runs", tmp_path / "figures")
    if case == "stuck":
        assert row.endswith("| void: cpt_mlm_only seed 0 (5.70), cpt_mlm_only seed 1 (5.70) not 0.5 nats below the "
                            "unigram entropy (6.00) |")  # fmt: skip
        return
    wins = "4/4 tasks (sc, tc, qa, ir; intervals apart on 4" if ahead else "0/4 tasks (none; intervals apart on 0"
    assert f"from CLM beats from MLM on {wins}" in row and "2 pre-training seeds" in row
    assert "validation MLM loss 4.80 vs 5.10 (unigram 6.00)" in row
    assert row.endswith("| reproduced |" if ahead else "| not reproduced |")
    assert "continued with MLM (40% masking, every masked token [MASK]) for 20 steps" in section[2]
    assert "the MLM-only start was at 5.200, 5.200" in " ".join(section)
    # Every pre-training x fine-tuning seed, Student's interval computed here independently.
    pooled = [80.0, 81.0, 81.0, 82.0] if ahead else [70.0, 71.0, 71.0, 72.0]
    low, high = scipy.stats.t.interval(0.95, 3, loc=statistics.fmean(pooled), scale=scipy.stats.sem(pooled))
    expected = f"{statistics.fmean(pooled):.1f} [{low:.1f}, {high:.1f}]"
    assert any(line.startswith("| cpt_clm_only |") and line.count(expected) == 4 for line in section)


def test_a_claim_without_runs_keeps_its_rows_and_section_from_the_previous_report():
    previous = "\n".join(
        [
            "| id | the paper's statement | our numbers | verdict |",
            "|---|---|---|---|",
            "| M1 | rank | 1 / 2 | partly |",
            "| M1, pretrained start | rank | 3 | void |",
            "| M2 | sweep | 4 | partly |",
            "| T1 | similarity | 0.3 | partly |",
            "",
            "## T1 — TaCL",
            "t1 text",
            "## M1, M2 — MAE-LM",
            "m text",
            "### The same sweep at 1e-3",
            "more m text",
            "## What we found",
            "## Wall time",
            "| experiment | step | wall min | CPU min | others' load (cores) | other busy processes |  |",
            "| T1 | t1_s0/pretrain/t1_mlm | 41.6 | 22.5 | 3.26 | 4 | shared |",
        ]
    )
    rows, section = report.carried_over(previous, "m1")
    assert rows == "| M1 | rank | 1 / 2 | partly |"
    assert section == ["## M1, M2 — MAE-LM", "m text", "### The same sweep at 1e-3", "more m text"]
    assert report.carried_over(previous, "m2") == ("| M2 | sweep | 4 | partly |", [])
    # The wall-time table's rows also open with an experiment's name; only the summary table's are claims.
    assert report.carried_over(previous, "t1") == ("| T1 | similarity | 0.3 | partly |", ["## T1 — TaCL", "t1 text"])
    assert report.carried_over(previous, "b2") is None


def test_a_carried_claims_wall_times_stay_in_the_table_and_the_totals_unless_its_steps_ran_again(tmp_path):
    header = "| experiment | step | wall min | CPU min | others' load (cores) | other busy processes |  |"
    previous = "\n".join(
        [
            "## Wall time",
            "",
            header,
            "|---|---|---|---|---|---|---|",
            "| T1 | t1_s0/pretrain/t1_mlm | 41.6 | 22.5 | 3.26 | 4 | shared |",
            "| T1 | t1_s0/evaluate/t1 | 61.4 | 48.0 | 1.86 | 3 | shared |",
            "| M-pretrained | mp6000/pretrain/mp_delta_0.0 | 41.1 | 33.6 | 1.71 | 4 | shared, unfinished (running) |",
            "| M-pretrained | mp6000/pretrain/mp_delta_1.0 | 49.1 | 24.6 | 3.33 | 4 | shared, unfinished (running) |",
            "| B1 | b1_s0/pretrain/b1_mlm_only | 23.9 | 14.5 | 3.25 | 4 | shared |",
        ]
    )
    # This regeneration has M-pretrained's 0.0 arm running again; T1 and M-pretrained are carried, B1 is not.
    measured = {"seconds": 600, "cpu_seconds": 600, "load_average": 1.0, "other_processes": 0, "sessions": 1}
    timings = {"mp6000/pretrain/mp_delta_0.0": {"experiment": "M-pretrained", "finished": False, **measured}}
    carried = report.carried_wall_times(previous, {"T1", "M-pretrained"}, timings)
    assert carried == [
        ["T1", "t1_s0/pretrain/t1_mlm", "41.6", "22.5", "3.26", "4", "shared"],
        ["T1", "t1_s0/evaluate/t1", "61.4", "48.0", "1.86", "3", "shared"],
        ["M-pretrained", "mp6000/pretrain/mp_delta_1.0", "49.1", "24.6", "3.33", "4", "shared, unfinished (running)"],
    ]
    lines = report.wall_time_lines(timings, carried)
    assert lines[-4:] == [
        "| M-pretrained | mp6000/pretrain/mp_delta_0.0 | 10.0 | 10.0 | 0.00 | 0 | "
        "alone, unfinished (running, or cut and not resumed yet) |",
        "| T1 | t1_s0/pretrain/t1_mlm | 41.6 | 22.5 | 3.26 | 4 | shared |",
        "| T1 | t1_s0/evaluate/t1 | 61.4 | 48.0 | 1.86 | 3 | shared |",
        "| M-pretrained | mp6000/pretrain/mp_delta_1.0 | 49.1 | 24.6 | 3.33 | 4 | shared, unfinished (running) |",
    ]
    # The totals count the carried finished steps (T1: 41.6 + 61.4 minutes) and no unfinished one.
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"text": "a page"}) + "\n")
    settings = argparse.Namespace(steps=1500, continue_steps=500, cpt_steps=20, finetune_steps=75)
    setup = "\n".join(report.setup_lines(tmp_path, timings, settings, {"T1": 3}, carried))
    assert "pre-training + analysis + fine-tuning, finished steps: T1 103 min;" in setup
    assert report.carried_wall_times("no wall-time section", {"T1"}, timings) == []


# Each T1 claim's fine-tuned folders (its start, then the MLM and TaCL arms) in a seed folder.
T1_FOLDERS = {
    "t1": ("minilm/model", "pretrain/t1_mlm", "pretrain/t1_tacl/student"),
    "t1h": ("pretrain/b1_mlm_only", "pretrain/t1h_mlm/student", "pretrain/t1h_tacl/student"),
}


@pytest.mark.parametrize("spec", [report.T1, report.T1_TRAINED_HEAD], ids=["T1", "trained head"])
@pytest.mark.parametrize("tacl_similarity", [0.35, 0.45])
def test_t1_pools_seeds_and_says_whether_tacl_goes_below_the_starting_similarity(
    tmp_path, monkeypatch, tacl_similarity, spec
):
    monkeypatch.setattr(report, "unigram_entropy", lambda root, tokenizer_path=None: 6.0)
    start, mlm, tacl = T1_FOLDERS[spec.experiment]
    validation = {folder: {1e-4: 50.0} for folder in (start, mlm, tacl)}
    scores = {start: 40.0, mlm: 45.0, tacl: 47.0}
    for index in (0, 1):
        root = tmp_path / "runs" / f"seed_{index}"
        losses = {spec.runs["mlm"]: 5.0, spec.runs["tacl"]: 5.2}
        fake_seed_folder(
            root, spec.experiment, losses, validation, lambda f, seed: scores[f] + seed, kinds=report.T1_KINDS
        )
        similarity = {spec.start: 0.4, "mlm": 0.5, "tacl": tacl_similarity + 0.01 * index}
        models = [{"model": arm, "self_similarity": [0.2, value]} for arm, value in similarity.items()]
        (root / "analysis" / spec.experiment / "report.json").write_text(json.dumps({"models": models}))
    (tmp_path / "figures").mkdir()
    row, section = report.tacl_comparison(tmp_path / "runs", tmp_path / "figures", spec)
    below = "below" if tacl_similarity < 0.4 else "not below"
    assert row.startswith(f"| {spec.claim} |")
    assert f"{spec.start_name} 0.400, MLM 0.500, TaCL {tacl_similarity + 0.005:.3f} ({below} the start)" in row
    # 47.5 against 45.5 with every seed within ±0.5: the intervals are apart on every task.
    assert "TaCL beats MLM on 3/3 tasks (sc, tc, qa; intervals apart on 3)" in row and row.endswith("| reproduced |")
    # 2 pre-training x 2 fine-tuning seeds: 47, 48, 47, 48; the two TaCL students told apart by their run folders.
    low, high = scipy.stats.t.interval(0.95, 3, loc=47.5, scale=scipy.stats.sem([47, 48, 47, 48]))
    assert any(
        line.startswith("| tacl | 5.200, 5.200 |") and f"47.5 [{low:.1f}, {high:.1f}]" in line for line in section
    )
    assert any(line.startswith("| mlm | 5.000, 5.000 |") and "45.5 [" in line for line in section)


def test_the_masking_sweep_compares_span_with_token_masking_and_lists_mae_lm_on_its_plateau(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "unigram_entropy", lambda root, tokenizer_path=None: 6.0)
    root = tmp_path / "runs" / "b1_s0"
    runs = report.MASKING_RUNS["biphasic"]
    validation = {f"pretrain/{run}": {3e-4: 50.0} for run in runs.values()}
    scores = {"token": 40.0, "whole_word": 42.0, "span": 45.0}
    # Under its own masking span's loss is near the entropy (a harder task); under token masking every unit learned.
    losses = {run: 5.0 for run in runs.values()} | {runs["span"]: 6.2}
    losses |= {run + report.TOKEN_EVAL_SUFFIX: 5.1 for run in runs.values()}
    losses |= {run: 6.1 for run in report.MASKING_RUNS["mae_lm"].values()}
    unit_of = {f"pretrain/{run}": unit for unit, run in runs.items()}
    fake_seed_folder(
        root,
        "u_biphasic",
        losses,
        validation,
        lambda folder, seed: scores[unit_of[folder]] + seed,
        kinds=report.U_KINDS,
    )
    for method in report.MASKING_RUNS:
        models = [{"model": f"{method}_{unit}", "self_similarity": [0.5], "effective_rank": [7]} for unit in runs]
        (root / "analysis" / f"u_{method}").mkdir(parents=True, exist_ok=True)
        (root / "analysis" / f"u_{method}" / "report.json").write_text(json.dumps({"models": models}))
    row, section = report.u_masking(tmp_path / "runs", tmp_path)
    assert (
        "tc: token 40.5, whole_word 42.5, span 45.5; qa: token 40.5, whole_word 42.5, span 45.5 | reproduced |" in row
    )
    low, high = scipy.stats.t.interval(0.95, 1, loc=45.5, scale=scipy.stats.sem([45, 46]))
    scores_cell = f"45.5 [{low:.1f}, {high:.1f}]"
    span = f"| biphasic | span | 20 | 6.200 (-0.20) | 5.100 (+0.90) | 0.500 | 7 | {scores_cell} | {scores_cell} |"
    assert span in section
    assert "| mae_lm | whole_word | 20 | 6.100 (-0.10) |  | 0.500 | 7 |  |  |" in section
    # An interval reaching past the scores' range 0-100 is shown within it.
    assert report.interval(SimpleNamespace(mean=99.0, confidence_interval=(97.0, 101.0))) == "99.0 [97.0, 100.0]"


@pytest.fixture
def probed():
    """A tiny MAE-LM and a batch for mae_lm_probe: the model, the input with every target [MASK]ed, the labels and
    where the targets are."""
    import torch

    from hf_encoders import MaeLmForMaskedLM
    from tests.tiny_models import MASK_TOKEN_ID, counting_batch, tiny_mae_lm_config

    torch.manual_seed(0)
    model = MaeLmForMaskedLM(tiny_mae_lm_config()).eval()
    batch = counting_batch("mae_lm", torch.Generator().manual_seed(0))
    labels = batch["labels"]
    masked = labels != -100
    return model, batch["input_ids"].masked_fill(masked, MASK_TOKEN_ID), labels, masked


def test_the_probe_splits_the_loss_by_whether_the_encoder_saw_the_mask_and_the_halves_match_the_models_loss(probed):
    import mae_lm_probe
    import torch

    model, corrupted, labels, masked = probed
    with torch.no_grad():
        # Every [MASK] seen, or none: the empty half is NaN (the mean of nothing), not a loss of 0.
        _, unseen = mae_lm_probe.losses_by_encoder_view(model, corrupted, labels, masked)
        seen, _ = mae_lm_probe.losses_by_encoder_view(model, corrupted, labels, torch.zeros_like(masked))
        assert unseen != unseen and seen != seen
        # Half and half: the two means, weighted by their counts, make the loss of that mixed input.
        half = masked & (torch.arange(masked.shape[1]) % 2 == 0)
        seen, unseen = mae_lm_probe.losses_by_encoder_view(model, corrupted, labels, half)
        mixed = model(corrupted, labels=labels, masks_in_encoder=half).loss.item()
        count = half.sum().item()
        assert (seen * count + unseen * (masked.sum().item() - count)) / masked.sum().item() == pytest.approx(mixed)


def test_the_probe_measures_how_much_of_a_masked_positions_decoder_attention_goes_to_its_neighbours(probed):
    import mae_lm_probe
    import torch

    model, corrupted, labels, masked = probed
    inputs = []
    model.decoder.layers[0].register_forward_pre_hook(lambda module, args: inputs.append(args[0]))
    measured = mae_lm_probe.neighbour_attention(model, corrupted, labels)
    # The first layer's attention computed by hand from what the layer read: softmax(q k^T / sqrt(d)) per head.
    attention = model.decoder.layers[0].attention
    heads = (*inputs[-1].shape[:2], attention.num_heads, attention.head_dim)
    query, key = (
        projection(inputs[-1]).view(heads).transpose(1, 2) for projection in (attention.q_proj, attention.k_proj)
    )
    weights = torch.softmax(query @ key.transpose(-1, -2) * attention.head_dim**-0.5, dim=-1)
    positions = torch.arange(corrupted.shape[1])
    near = [(i, j) for i in positions.tolist() for j in positions.tolist() if 1 <= abs(i - j) <= 2]
    share = torch.zeros(corrupted.shape)
    for i, j in near:
        share[:, i] += weights[:, :, i, j].mean(1)
    assert measured["decoder_neighbour_attention"][0] == pytest.approx(share[masked].mean().item(), rel=1e-5)
    entropy = -(weights * weights.log()).sum(-1).mean(1)
    assert measured["decoder_attention_entropy"][0] == pytest.approx(entropy[masked].mean().item(), rel=1e-5)
    assert len(measured["decoder_neighbour_attention"]) == len(model.decoder.layers)
    # Without queries and keys every layer attends uniformly, so it gives the neighbours the uniform share.
    with torch.no_grad():
        for layer in model.decoder.layers:
            for projection in (layer.attention.q_proj, layer.attention.k_proj):
                projection.weight.zero_()
                projection.bias.zero_()
    uniform = mae_lm_probe.neighbour_attention(model, corrupted, labels)
    assert uniform["decoder_neighbour_attention"] == pytest.approx(
        [uniform["neighbour_attention_if_uniform"]] * len(model.decoder.layers)
    )
    counts = torch.tensor([sum(1 for j in positions.tolist() if 1 <= abs(i - j) <= 2) for i in positions.tolist()])
    expected = (counts / len(positions)).expand_as(masked)[masked].mean().item()
    assert uniform["neighbour_attention_if_uniform"] == pytest.approx(expected)
    assert uniform["decoder_attention_entropy"] == pytest.approx([math.log(len(positions))] * len(model.decoder.layers))
    assert uniform["attention_entropy_if_uniform"] == pytest.approx(math.log(len(positions)))
    assert model.config._attn_implementation != "eager"  # the probe put the model's attention back as it was


def test_the_probe_table_shows_the_neighbour_attention_where_the_probe_measured_it(tmp_path):
    measured = {"rank_uncentered": 150, "rank_centered": 160, "mean_direction_energy": 0.05, "masked_lm_loss": 6.0}
    measured |= {"masked_lm_loss_encoder_ablated": 6.4, "encoder_gradient_share": 0.46}
    attention = {"decoder_neighbour_attention": [0.1234, 0.3], "neighbour_attention_if_uniform": 0.0311}
    attention |= {"decoder_attention_entropy": [4.8, 2.5], "attention_entropy_if_uniform": 4.852}
    probes = {"mp_delta_0.0": measured | attention, "mp_delta_1.0": measured}  # the second from an older probe
    (tmp_path / "analysis" / "mp").mkdir(parents=True)
    (tmp_path / "analysis" / "mp" / "probe.json").write_text(json.dumps(probes))
    header, _, with_attention, without, _ = report.probe_lines(tmp_path, "mp")
    assert header.endswith(
        "| decoder attention of a masked position to the 2 tokens each side, per layer (uniform) "
        "| its entropy, nats (uniform) |"
    )
    measured_cells = "| 0.123, 0.300 (0.031) | 4.800, 2.500 (4.852) |"
    assert with_attention == f"| 0.0 | 150 | 160 | 0.050 | 6.000 | 6.400 | 0.46 |  |  {measured_cells}"
    assert without == "| 1.0 | 150 | 160 | 0.050 | 6.000 | 6.400 | 0.46 |  |  |  |  |"


def test_the_report_of_a_folder_without_from_scratch_arms_trains_their_tokenizer_for_the_unigram_entropy(
    tmp_path, monkeypatch
):
    # Only continued arms ran here (M-pretrained in MiniLM's vocabulary): the set-up still states the entropy in the
    # from-scratch vocabulary, which the carried-over from-scratch claims are judged against.
    texts = [f"the {word} module reads a file and writes {word} records" for word in ("json", "csv", "os", "io")]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    reports = []
    monkeypatch.setattr(reproduce, "write_report", lambda root, *rest: reports.append(report.data_root(root)))
    reproduce.main(["--corpus", str(tmp_path / "sources"), "--only", "report", "--output-dir", str(tmp_path)])
    assert reports == [tmp_path]
    assert report.unigram_entropy(tmp_path) > 0  # the trained vocabulary tokenizes the corpus
