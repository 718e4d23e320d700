"""The bench scripts, run without timing anything: bench/gpu.sh, the one command a lent GPU runs, whose dry run checks,
on any machine, that the package and the benches import and that the plan names every measurement; and
bench/import_time.py, which prints its numbers against their targets."""

import os
import re
import subprocess
import sys
from pathlib import Path

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
    for variant in (
        "",
        "--compile",
        "--attn_implementation flex_attention",
        "--attn_implementation flex_attention --compile",
    ):
        assert f"--batch 32 --length 512 --dtype bfloat16 --repeats 5 {variant}".rstrip() in plan, variant
    assert "bench/long_context.py --layers 12 --hidden 768" in plan


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
    for row in ("`import transformers`", "`import transformers, hf_encoders`", "`hf-encoders --help`"):
        assert row in result.stdout
    assert re.search(r"hf-encoders --help: \d+\.\d\d s \(target <= 1\.5 s, met: (yes|NO)\)", result.stdout)
    assert re.search(r"import hf_encoders adds [+-]\d+\.\d\d s to transformers' \(target <= 0\.5 s", result.stdout)
