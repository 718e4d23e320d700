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


# What bench/gpu.sh must measure in its one call (issue 44): every method and its anchor at base size, 512 and 1,024
# tokens, bf16, eager and compiled; MAE-LM on flex_attention against sdpa from 512 to 8,192 tokens; a profile of
# MAE-LM's and BERT's steps; the GPU tests.
BASE = "--layers 12 --hidden 768 --dtype bfloat16"
ROWS = [
    "TaCL vs BertForPreTraining",
    "MAE-LM vs BertForMaskedLM, 15% masked (ours on flex_attention)",
    "MAE-LM vs BertForMaskedLM, 40% masked (ours on flex_attention)",
    "biphasic MLM vs EuroBertForMaskedLM, 40% masked",
    "biphasic CLM vs LlamaForCausalLM",
    "fine-tuning, padded: MaeLmForSequenceClassification vs RobertaForSequenceClassification",
]


def gpu_plan(tmp_path) -> str:
    result = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu.sh"), "--dry-run"],
        env={**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def plan_steps(plan: str) -> dict[str, tuple[int, str, str]]:
    """step name -> (time limit, command, the rows it lists)."""
    steps = re.split(r"\n  (?=\S)", plan.split("\n", 2)[2])
    parsed = {}
    for step in steps:
        head, _, rows = step.partition("\n")
        name, limit, command = re.fullmatch(r"(.+) \(at most (\d+) s\): (.+)", head.strip()).groups()
        parsed[name] = int(limit), command, rows
    return parsed


def test_the_gpu_script_plans_every_measurement_within_one_call(tmp_path):
    steps = plan_steps(gpu_plan(tmp_path))
    assert sum(limit for limit, _, _ in steps.values()) <= 8 * 60, "the plan must fit one device call with its start"
    benches = {name: (command, rows) for name, (_, command, rows) in steps.items() if "bench/run.py" in command}
    for length, batch in ((512, 32), (1024, 16)):
        for compiled in (False, True):
            [(command, rows)] = [
                (command, rows)
                for command, rows in benches.values()
                if f"--batch {batch} --length {length}" in command and ("--compile" in command) == compiled
            ]
            assert BASE in command
            for row in ROWS:
                assert row in rows, (length, compiled, row)
            if not compiled:  # the reference without a target, eager only
                assert "MAE-LM vs ModernBertForMaskedLM, 15% masked" in rows
    [long_context] = [(command, rows) for _, command, rows in steps.values() if "bench/long_context.py" in command]
    for model in ("BertForMaskedLM", "MAE-LM", "MAE-LM flex_attention"):
        assert f"    {model} at 512, 1,024, 2,048, 4,096, 8,192 tokens" in long_context[1]
    commands = " ".join(command for _, command, _ in steps.values())
    assert (
        f"bench/profile_step.py {BASE.replace(' --dtype bfloat16', '')} --batch 32 --length 512 --dtype bfloat16"
        in commands
    )
    assert "-m pytest -q -m gpu tests/test_gpu.py -k 'flex or cudnn'" in commands
    assert "-m pytest -q -m gpu tests/test_gpu.py -k 'not (flex or cudnn)'" in commands
    # The most important first: flex_attention's correctness, then the 512-token tables.
    assert list(steps)[:3] == [
        "flex_attention against the dense eager bias (GPU tests)",
        "seq 512, eager",
        "seq 512, compiled",
    ]


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


def test_the_step_profile_counts_the_values_read_back_per_step():
    """bench/profile_step.py's host waits: two `.item()` reads a step, over three profiled steps, are two a step."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import profile_step
    finally:
        sys.path.remove(str(ROOT / "bench"))
    values = torch.randn(64, 64)

    def step():
        return (values @ values).sum().item() + values.max().item()

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as recorded:
        for _ in range(3):
            step()
    measured = profile_step.summary(recorded.key_averages(), steps=3, on_gpu=False)
    assert measured["scalar_reads"] == 2
    assert (measured["synchronizations"], measured["copies_to_host"]) == (0, 0)
    shares = dict(measured["top"])
    assert "aten::mm" in shares and 0 < sum(shares.values()) <= 1
