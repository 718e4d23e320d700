"""experiments/reproduce.py outlives a session: an arm cut short resumes from its last complete checkpoint, a finished
one is skipped, and every step's wall time is recorded with the load beside it (experiments/wall_time.py). The
`hf-encoders` commands are replaced by a stand-in that writes what the real one would."""

import argparse
import functools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from experiments import options, reproduce, wall_time
from experiments.report import runs


class FakeCommands:
    """Stands in for `subprocess.run` of `hf-encoders pretrain`: each call does what the next entry of `outcomes`
    says ("preempted": a complete checkpoint-4 and no final model, "partial": a checkpoint-8 cut off while being
    written, "finished": the final log_history.json), and remembers its arguments."""

    def __init__(self, outcomes: list[str]):
        self.outcomes, self.calls = list(outcomes), []

    def __call__(self, command, check, env):
        arguments = command[command.index("hf_encoders") + 1 :]
        self.calls.append(arguments)
        output = Path(arguments[arguments.index("--output_dir") + 1])
        outcome = self.outcomes.pop(0)
        if outcome == "preempted":
            (output / "checkpoint-4").mkdir(parents=True)
            (output / "checkpoint-4" / "trainer_state.json").write_text("{}")
        elif outcome == "partial":
            (output / "checkpoint-8").mkdir(parents=True)
        elif outcome == "failed":
            return subprocess.CompletedProcess(command, 2)
        else:
            output.mkdir(parents=True, exist_ok=True)
            (output / "log_history.json").write_text("[]")
        return subprocess.CompletedProcess(command, 143 if outcome == "preempted" else 0)


def settings(folder: Path, *arguments: str) -> argparse.Namespace:
    """reproduce.py's settings at their defaults, into `folder`, with `arguments` on top."""
    return reproduce.build_parser().parse_args(["--output-dir", str(folder), *arguments])


@pytest.fixture
def runner(tmp_path):
    runner = reproduce.Runner(settings(tmp_path))
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
    runner.settings = settings(runner.root, "--seed", "1", "--steps", "1500", "--continue-steps", "500")

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
        # The step has not run to its end.
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


def test_a_failed_command_stops_the_script_with_its_exit_status(runner, monkeypatch):
    monkeypatch.setattr(reproduce.subprocess, "run", FakeCommands(["failed"]))
    with pytest.raises(subprocess.CalledProcessError) as failed:
        pretrain(runner)
    assert failed.value.returncode == 2


def test_an_arm_whose_steps_its_validations_do_not_divide_is_refused_before_it_runs(b1_runner, calls):
    with pytest.raises(SystemExit, match=r"arm: 45 steps do not divide into its 10 validations, .* multiple of 10"):
        b1_runner.pretrain("arm", "--method", "mae_lm", steps=45, evaluations=10)
    assert calls == []
    b1_runner.pretrain("arm", "--method", "mae_lm", steps=50, evaluations=10)
    assert calls[0][calls[0].index("--eval_steps") + 1] == "5"


@pytest.mark.parametrize("experiment", ["T1", "T1-MiniLM"])
def test_t1s_mlm_arm_is_the_tacl_run_with_its_contrastive_term_weighted_0(b1_runner, calls, monkeypatch, experiment):
    monkeypatch.setattr(reproduce, "minilm_path", lambda: "minilm")
    if experiment == "T1":
        reproduce.t1(b1_runner)
        b1_arm, mlm, tacl, analyze, *evaluates = calls
        assert b1_arm[b1_arm.index("--phases") + 1] == "mlm:1.0"  # B1's MLM-only arm: skipped by hf_encoders when done
        start, prefix = str(b1_runner.root / "pretrain" / "b1_mlm_only"), "t1h"
    else:
        reproduce.t1_minilm(b1_runner)
        mlm, tacl, analyze, *evaluates = calls  # seed 1: MiniLM itself is fine-tuned in seed 0's folder only
        start, prefix = "minilm", "t1"
    for arm in (mlm, tacl):
        assert arm[:5] == ("pretrain", "--method", "tacl", "--model_name_or_path", start)
        assert arm[arm.index("--max_steps") + 1] == "500" and arm[arm.index("--seed") + 1] == "1"
    assert mlm[mlm.index("--tacl_loss_weight") + 1] == "0" and "--tacl_loss_weight" not in tacl
    # The two arms differ in that weight and their output folder only.
    assert [a for a in mlm if a not in tacl] == [
        "--tacl_loss_weight",
        "0",
        str(b1_runner.root / "pretrain" / f"{prefix}_mlm"),
    ]
    students = [str(b1_runner.root / "pretrain" / f"{prefix}_{arm}" / "student") for arm in ("mlm", "tacl")]
    assert analyze[1:4] == (start, *students)
    fine_tuned = [evaluate[1] for evaluate in evaluates]
    assert fine_tuned == ([start] if experiment == "T1" else []) + students


@pytest.mark.parametrize("cuda", [False, True])
def test_an_evaluate_grid_that_grew_runs_again_and_one_that_did_not_is_skipped(runner, monkeypatch, cuda):
    """evaluate itself skips the runs it finished (results.jsonl); the script must call it again, one model at a time,
    when the grid has more tasks, rates or seeds than the model's results.json, and not when the grid is the same.
    Where there is a GPU the fine-tuning runs on it."""
    calls = []

    def evaluating(command, check, env):
        calls.append(command)
        output = Path(command[command.index("--output_dir") + 1])
        rates = command[command.index("--learning_rates") + 1].split(",")
        seeds = len(command[command.index("--seeds") + 1].split(","))
        tasks = [command[index + 1] for index, argument in enumerate(command) if argument == "--task"]
        cells = [
            {"task": task, "validation_by_rate": {str(float(rate)): [50.0] * seeds for rate in rates}} for task in tasks
        ]
        output.mkdir(parents=True, exist_ok=True)
        (output / "results.json").write_text(json.dumps({"cells": cells}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(reproduce.subprocess, "run", evaluating)
    monkeypatch.setattr(reproduce, "cuda_available", lambda: cuda)
    one, two = {"a": runner.root / "a"}, {"a": runner.root / "a", "b": runner.root / "b"}
    grids = [(one, (1e-4, 1e-3), 2), (one, (1e-4, 1e-3), 2), (one, (1e-4, 1e-3, 1e-2), 2)]
    grids += [(one, (1e-4, 1e-3, 1e-2), 3), (two, (1e-4, 1e-3, 1e-2), 3), (two, (1e-4, 1e-3, 1e-2), 3)]
    for models, rates, seeds in grids:
        runner.settings.finetune_seeds = seeds
        runner.evaluate("grid", models, kinds=["sc"], learning_rates=rates)
    runner.evaluate("grid", two, kinds=["sc", "tc"], learning_rates=(1e-4, 1e-3, 1e-2))  # a task more
    runner.evaluate("grid", two, kinds=["sc", "tc"], learning_rates=(1e-4, 1e-3, 1e-2))
    ran = [
        (
            c[c.index("--learning_rates") + 1],
            c[c.index("--seeds") + 1],
            Path(c[c.index("evaluate") + 1]).name,
            c.count("--task"),
        )
        for c in calls
    ]
    assert ran == [
        ("0.0001,0.001", "0,1", "a", 1),
        ("0.0001,0.001,0.01", "0,1", "a", 1),
        ("0.0001,0.001,0.01", "0,1,2", "a", 1),
        ("0.0001,0.001,0.01", "0,1,2", "b", 1),
        ("0.0001,0.001,0.01", "0,1,2", "a", 2),
        ("0.0001,0.001,0.01", "0,1,2", "b", 2),
    ]
    # Each model into its own folder; on a GPU without --use_cpu.
    assert [Path(c[c.index("--output_dir") + 1]).relative_to(runner.root).as_posix() for c in calls[-2:]] == [
        "evaluate/grid/a",
        "evaluate/grid/b",
    ]
    assert all(("--use_cpu" in c) != cuda for c in calls)


def test_b2_at_equal_budget_continues_b1s_clm_and_mlm_arms_alike_with_mlm(b1_runner, calls):
    reproduce.b2_equal_budget(b1_runner)
    clm_arm, from_clm, mlm_arm, from_mlm, analyze, *evaluates = calls
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
    assert analyze[1:3] == tuple(continued) and [evaluate[1] for evaluate in evaluates] == continued
    assert all(evaluate[evaluate.index("--learning_rates") + 1] == "0.001,0.003" for evaluate in evaluates)


@pytest.mark.parametrize("steps,held", [(1000, "500"), (3000, "1500"), (6000, "1500")])
def test_m_pretrained_holds_every_arms_encoder_for_1500_steps_at_most_half_and_differs_only_in_delta(
    b1_runner, calls, monkeypatch, steps, held
):
    monkeypatch.setattr(reproduce, "minilm_path", lambda: "minilm")
    monkeypatch.setattr(b1_runner, "probe", lambda name, models: calls.append(("probe", *map(str, models.values()))))
    b1_runner.settings.mae_lm_continue_steps = steps
    reproduce.m_pretrained(b1_runner)
    arms, (analyze, probe), evaluates = calls[:3], calls[3:5], calls[5:]
    for arm in arms:
        option = {name: arm[arm.index(name) + 1] for name in ("--max_steps", "--hold_encoder_steps", "--eval_steps")}
        assert option == {"--max_steps": str(steps), "--hold_encoder_steps": held, "--eval_steps": str(steps // 10)}
        assert arm[arm.index("--model_name_or_path") + 1] == "minilm"
    folders = [str(b1_runner.root / "pretrain" / f"mp_delta_{delta}") for delta in ("1.0", "0.5", "0.0")]
    assert [[a for a in arm if a not in arms[0]] for arm in arms[1:]] == [["0.5", folders[1]], ["0.0", folders[2]]]
    assert analyze[1:5] == ("minilm", *folders) and probe[1:] == tuple(folders)
    assert [evaluate[1] for evaluate in evaluates] == ["minilm", *folders]  # the start's own scores beside the arms


def test_m_pretrained_with_one_arm_named_pretrains_that_arm_only(b1_runner, calls, monkeypatch):
    monkeypatch.setattr(reproduce, "minilm_path", lambda: "minilm")
    b1_runner.settings = settings(
        b1_runner.root, "--corpus", "docs", "--mp-arm", "0.5", "--mae-lm-continue-steps", "600"
    )
    reproduce.m_pretrained(b1_runner)
    (arm,) = calls  # no analysis, probe or fine-tuning: the other arms may still be running
    assert arm[arm.index("--mask_in_encoder_fraction") + 1] == "0.5" and arm[-1].endswith("mp_delta_0.5")
    with pytest.raises(SystemExit):  # only the experiment's own arms
        reproduce.build_parser().parse_args(["--corpus", "docs", "--mp-arm", "0.25"])


def test_m_and_u_mae_lm_arms_train_the_same_scratch_model_and_differ_in_masking_steps_and_rate(b1_runner, calls):
    from experiments import masking_sweep

    b1_runner.settings.mae_lm_steps, b1_runner.settings.mae_lm_learning_rate = 400, 5e-4
    b1_runner.settings.mlm_probability = None
    reproduce.mae_lm_arm(b1_runner, "m_delta_0.5", "--mask_in_encoder_fraction", "0.5", learning_rate=1e-3)
    masking_sweep.masking_arm(b1_runner, "mae_lm", "span")
    m_arm, u_arm = calls

    def option(arm, name):
        return arm[arm.index(name) + 1]

    for arm in (m_arm, u_arm):
        assert option(arm, "--method") == "mae_lm" and option(arm, "--model_size") == "small"
        assert option(arm, "--config_overrides") == f"{options.SCRATCH_LAYERS},decoder_num_hidden_layers=2"
    assert (option(m_arm, "--max_steps"), option(m_arm, "--learning_rate")) == ("1500", "0.001")
    assert (option(u_arm, "--max_steps"), option(u_arm, "--learning_rate")) == ("400", "0.0005")
    assert option(m_arm, "--mask_in_encoder_fraction") == "0.5" and option(u_arm, "--masking") == "span"
    assert option(u_arm, "--output_dir").endswith("u_mae_lm_span")


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


def test_the_report_of_a_folder_without_from_scratch_arms_trains_their_tokenizer_for_the_unigram_entropy(
    tmp_path, monkeypatch
):
    # Only continued arms ran here (M-pretrained in MiniLM's vocabulary): the set-up still states the entropy in the
    # from-scratch vocabulary, which the carried-over from-scratch claims are judged against.
    texts = [f"the {word} module reads a file and writes {word} records" for word in ("json", "csv", "os", "io")]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    reports = []
    monkeypatch.setattr(reproduce, "write_report", lambda results_dir, *rest: reports.append(results_dir))
    # --corpus left at its default, which need not exist: the folder's corpus.jsonl is read instead.
    reproduce.main(["--only", "report", "--output-dir", str(tmp_path), "--results-dir", str(tmp_path / "results")])
    assert reports == [tmp_path / "results"]
    assert runs.unigram_entropy(tmp_path) > 0  # the trained vocabulary tokenizes the corpus


def test_m_trains_bert_of_the_same_size_beside_the_delta_arms_and_probes_each_in_its_own_delta(
    b1_runner, calls, monkeypatch
):
    probed = []
    monkeypatch.setattr(
        reproduce.mae_lm_probe, "main", lambda corpus, output, checkpoints, deltas: probed.append(deltas)
    )
    monkeypatch.setattr(reproduce, "on_unigram_plateau", lambda root, runs: True)  # not fine-tuned
    b1_runner.settings.skip_collapsed_sweep = True
    reproduce.m_mae_lm(b1_runner)
    *arms, analyze = calls
    methods = [arm[arm.index("--method") + 1] for arm in arms]
    assert methods == ["mae_lm", "mae_lm", "mae_lm", "mlm"]
    control = arms[-1]
    assert control[control.index("--config_overrides") + 1] == options.SCRATCH_LAYERS
    assert control[control.index("--learning_rate") + 1] == "0.0003"  # the δ arms' rate
    assert analyze[analyze.index("--labels") + 1 : analyze.index("--corpus")] == (
        "delta_1.0",
        "delta_0.5",
        "delta_0.0",
        "mlm",
    )
    assert probed == [[1.0, 0.5, 0.0]]


def test_b1_fine_tunes_clm_alone_too_over_the_rate_grid(b1_runner, calls):
    reproduce.b1_pfs(b1_runner)
    arms, evaluates = calls[:3], calls[4:]
    assert [arm[arm.index("--phases") + 1] for arm in arms] == ["clm:0.25,mlm:0.75", "mlm:1.0", "clm:1.0"]
    assert [evaluate[1] for evaluate in evaluates] == [str(arm[arm.index("--output_dir") + 1]) for arm in arms]
    assert all(call[call.index("--learning_rates") + 1] == "0.0001,0.0003,0.001,0.003,0.01" for call in evaluates)


@pytest.mark.parametrize("ratio", [None, 0.15])
def test_the_masking_sweep_runs_every_unit_at_another_ratio_and_fine_tunes_a_random_init_floor(
    b1_runner, calls, monkeypatch, ratio
):
    from experiments import masking_sweep

    monkeypatch.setattr(masking_sweep, "on_unigram_plateau", lambda root, runs: False)
    b1_runner.settings.mlm_probability, b1_runner.settings.mae_lm_steps = ratio, 400
    b1_runner.settings.units = ["token", "whole_word", "span"]
    masking_sweep.masking_sweep(b1_runner, ["biphasic"])
    outputs = [Path(call[call.index("--output_dir") + 1]).name for call in calls if call[0] == "pretrain"]
    prefix = "u" if ratio is None else "u15"
    token = "b1_mlm_only" if ratio is None else f"{prefix}_biphasic_token"  # at its own 40%, B1's arm is the token arm
    units = [token, f"{prefix}_biphasic_whole_word", f"{prefix}_biphasic_span"]
    assert outputs == [*units, *(f"{unit}_token_eval" for unit in units), "u_random_init"]
    pretrains = [call for call in calls if call[0] == "pretrain"]
    assert all(("--mlm_probability" in call) == (ratio is not None) for call in pretrains[:6])
    floor = pretrains[-1]
    assert floor[floor.index("--max_steps") + 1] == "1" and floor[floor.index("--learning_rate") + 1] == "0.0"
    evaluated = [
        Path(call[call.index("--output_dir") + 1]).relative_to(b1_runner.root).as_posix()
        for call in calls
        if call[0] == "evaluate"
    ]
    assert evaluated[-1] == "evaluate/u_random_init/random_init"
    assert evaluated[:3] == [f"evaluate/{prefix}_biphasic/biphasic_{unit}" for unit in ("token", "whole_word", "span")]


def test_the_tasks_come_from_every_third_page_and_pretraining_never_reads_them(tmp_path, monkeypatch):
    from experiments import corpus, tasks

    pages = [
        corpus.SourceFile("library", [corpus.Section(f"page {index}", [corpus.Paragraph(f"text {index}")])])
        for index in range(7)
    ]
    task_files, pretraining_files = tasks.task_pages(pages)
    assert task_files == [pages[0], pages[3], pages[6]] and pretraining_files == [
        pages[1],
        pages[2],
        pages[4],
        pages[5],
    ]
    written = []
    monkeypatch.setattr(reproduce, "read_sources", lambda folder: pages)
    monkeypatch.setattr(reproduce, "write_task_folders", lambda files, root: written.append(files))
    reproduce.prepare(reproduce.Runner(settings(tmp_path)))
    read = [json.loads(line)["text"] for line in (tmp_path / "corpus.jsonl").read_text().splitlines()]
    assert written == [task_files] and read == ["text 1", "text 2", "text 4", "text 5"]
