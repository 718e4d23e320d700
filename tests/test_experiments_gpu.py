"""experiments/gpu.sh and its plan (experiments/gpu.py): the dry run prints a plan whose every command its script
accepts and that fits one device call, and a step cut at its limit takes everything it started with it."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments import gpu

ROOT = Path(__file__).parents[1]
DEVICE_CALL_S = 8 * 60


def test_the_default_plan_fits_one_device_call_and_each_part_ends_by_collecting_its_results(tmp_path):
    steps = gpu.plan(tmp_path, ["i", "ii"])
    # Installing the carried wheels and the import check take about half a minute besides the steps.
    assert sum(step.limit_s for step in steps) + 30 <= DEVICE_CALL_S
    for part in ("i", "ii", "iii"):
        *_, collect = gpu.plan(tmp_path, [part])
        (command,) = collect.commands
        assert command[:3] == ("reproduce", "--only", "report")
        assert command[command.index("--results-dir") + 1] == str(tmp_path / "results")
        assert command[command.index("--label") + 1] == "GPU"


def test_a_misspelt_option_in_the_plan_fails_the_dry_run_not_the_device_call(tmp_path):
    step = gpu.Step("i", "M", 10, (("reproduce", "--only", "M", "--stepz", "10"),))
    with pytest.raises(SystemExit, match=r"M: `reproduce` refuses its options --only M --stepz 10"):
        gpu.check([step])


def test_the_dry_run_checks_every_commands_options_and_prints_the_plan_on_a_machine_without_a_gpu(tmp_path):
    environment = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(ROOT / "experiments" / "gpu.sh"), "--dry-run", "--only", "i,ii,iii"],
        env=environment,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "plan (results under" in done.stdout and "python -m experiments.reproduce --only M" in done.stdout
    assert "MiB of 64" in done.stdout
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_each_output_folder_of_the_plan_links_to_the_prepared_corpus_tasks_and_tokenizer(tmp_path, monkeypatch):
    prepared = tmp_path / "prepared"
    for name in ("tasks", "tokenizer"):
        (prepared / name).mkdir(parents=True)
    (prepared / "corpus.jsonl").write_text("{}\n")
    monkeypatch.setattr(gpu, "PREPARED", prepared)
    steps = gpu.plan(tmp_path / "out", ["i"])
    gpu.link_prepared(steps)
    folder = tmp_path / "out" / "runs" / "m"
    assert (folder / "corpus.jsonl").resolve() == prepared / "corpus.jsonl"
    assert sorted(path.name for path in folder.iterdir()) == ["corpus.jsonl", "tasks", "tokenizer"]


def test_a_step_cut_at_its_limit_stops_the_processes_it_started_too(tmp_path):
    child = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        f"open({str(child)!r}, 'w').write(str(subprocess.Popen(['sleep', '60']).pid))\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    while not child.exists() or not child.read_text():
        time.sleep(0.05)
    assert gpu.stopped(process, time.monotonic() + 0.5) == gpu.TIMED_OUT
    # The pre-training or fine-tuning a step started does not hold the GPU past its limit: gone, or a zombie left to
    # the init process.
    stat = Path(f"/proc/{child.read_text()}/stat")
    deadline = time.monotonic() + 5
    while stat.exists() and stat.read_text().split()[2] != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not stat.exists() or stat.read_text().split()[2] == "Z"
