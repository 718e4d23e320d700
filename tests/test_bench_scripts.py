"""The bench scripts, run without timing anything: bench/gpu.sh, the one command a lent GPU runs, whose dry run checks,
on any machine, that the package and the benches import and that the plan names every measurement;
bench/import_time.py, which prints its numbers against their targets; and bench/run.py's memory measure."""

import argparse
import gc
import importlib.util
import os
import re
import subprocess
import sys
import weakref
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_script_dry_run_checks_imports_and_prints_the_plan(tmp_path):
    result = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu.sh"), "--dry-run"],
        env={**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    plan = result.stdout
    assert "-m pytest -q -m gpu tests/test_gpu.py" in plan
    assert "bench/run.py --layers 12 --hidden 768 --batch 32 --length 512 --dtype bfloat16 --repeats 5" in plan
    assert "bench/long_context.py --layers 12 --hidden 768" in plan
    limits = [int(seconds) for seconds in re.findall(r"\(at most (\d+) s\)", plan)]
    assert len(limits) == 3 and sum(limits) <= 8 * 60, "the plan must fit one device call (10 minutes) with its start"


def test_the_gpu_script_stops_on_a_transformers_too_old(tmp_path):
    """A stand-in transformers 5.17 (the GPU image's) first on the path: the script names the fix and stops."""
    fake = tmp_path / "site" / "transformers"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('__version__ = "5.17.0"\n')
    result = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu.sh"), "--dry-run"],
        env={**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path), "PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert "transformers 5.17.0 is too old: carry transformers>=5.23 in .whl/" in result.stdout + result.stderr


def test_the_import_time_script_prints_both_numbers_against_their_targets():
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "import_time.py"), "--repeats", "1"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    for row in (
        "`hf-encoders --help`",
        "`import torch, transformers' Auto and Llama modeling`",
        "`import hf_encoders`",
    ):
        assert row in result.stdout
    assert re.search(r"hf-encoders --help: \d+\.\d\d s \(target <= 1\.5 s, met: (yes|NO)\)", result.stdout)
    assert re.search(r"import hf_encoders adds [+-]\d+\.\d\d s to the frameworks' \(target <= 0\.5 s", result.stdout)


def test_measuring_what_a_step_saves_for_backward_leaves_no_activation_alive():
    """bench/run.py's measure once kept every measured forward's activations (a pack hook that returns its tensor makes
    a reference cycle through autograd's C++ nodes): on an H200 the peak memory grew by ~15 GiB a comparison."""
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    settings = argparse.Namespace(
        layers=1, hidden=64, batch=2, length=16, device="cpu", dtype="float32", attn_implementation="sdpa"
    )
    comparison = next(row for row in bench.comparisons(settings) if row.name.startswith("biphasic CLM"))
    step = bench.TimedStep(comparison.ours(), comparison.ours_batch(), settings)
    outputs = []
    for module in step.model.modules():
        module.register_forward_hook(
            lambda _module, _inputs, output: (
                outputs.append(weakref.ref(output)) if isinstance(output, torch.Tensor) else None
            )
        )
    saved_mib, _ = step.saved_for_backward_mib()
    del step
    gc.collect()
    assert saved_mib > 0 and len(outputs) > 10
    assert [output for output in outputs if output() is not None] == []
