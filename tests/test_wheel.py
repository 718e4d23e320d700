"""A wheel built from the repository carries every file of the package, among them the model folders' real copies of
the shared files (which every checkpoint copies next to its weights), the console script beside the package, and the
model cards of the repository's top folder model_cards/ (which `pretrain` renders), where importlib.resources finds
them once the wheel is installed."""

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from hf_encoders.methods import METHODS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hf_encoders"
CARDS = ROOT / "model_cards"


def build_wheel(tmp_path: Path) -> Path:
    """`pip wheel` of a copy of what the build reads, so that no build/ or egg-info lands in the checkout and no
    stale file of an earlier build/lib slips in; offline, with the test environment's setuptools. Links stay links,
    as a checkout has them."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "hf_encoders_cli.py"):
        shutil.copy(ROOT / name, source / name)
    for folder in (PACKAGE, CARDS):
        shutil.copytree(folder, source / folder.name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "--no-index"]
    built = subprocess.run(
        [*command, "--disable-pip-version-check", "-q", "-w", str(tmp_path / "dist")], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    return wheel


def test_the_wheel_carries_the_package_the_script_and_the_cards(tmp_path):
    wheel = zipfile.ZipFile(build_wheel(tmp_path))
    names = set(wheel.namelist())
    package_files = {
        path.relative_to(ROOT).as_posix(): path
        for path in [*PACKAGE.rglob("*"), ROOT / "hf_encoders_cli.py"]
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert set(package_files) - names == set()
    # The model folders' copies of the shared files among them, as the repository has them (banner and all).
    for name, path in package_files.items():
        assert wheel.read(name) == path.read_bytes(), f"{name} is not the repository's"
    (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    assert "hf-encoders = hf_encoders_cli:console" in wheel.read(entry_points).decode()

    cards = {"tacl_student", "average", *(method.card_template for method in METHODS.values())}
    for card in cards:
        assert wheel.read(f"hf_encoders/model_cards/{card}.md") == (CARDS / f"{card}.md").read_bytes()
    assert [name for name in names if name.startswith("model_cards/")] == [], "one copy, inside the package"


FIND_CARDS = """
import json
from importlib import resources
from hf_encoders.training.cards import TEMPLATES
print(json.dumps([str(TEMPLATES), sorted(path.name for path in resources.files("hf_encoders.model_cards").iterdir())]))
"""


def test_the_installed_wheel_finds_its_cards_as_package_data(tmp_path):
    target = tmp_path / "site"
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check"]
    installed = subprocess.run(
        [*command, "-q", "--target", str(target), str(build_wheel(tmp_path))],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    environment = {"PYTHONPATH": str(target), "HF_HUB_OFFLINE": "1", "PATH": ""}
    found = subprocess.run(
        [sys.executable, "-c", FIND_CARDS], cwd=tmp_path, env=environment, capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr[-3000:]
    templates, cards = json.loads(found.stdout.splitlines()[-1])
    assert Path(templates) == target / "hf_encoders" / "model_cards"
    assert {f"{method.card_template}.md" for method in METHODS.values()} <= set(cards)
    # The installed script, as `python -m hf_encoders` runs it.
    usage = subprocess.run(
        [sys.executable, "-m", "hf_encoders", "--help"], cwd=tmp_path, env=environment, capture_output=True, text=True
    )
    assert usage.returncode == 0 and "SUBCOMMAND" in usage.stdout, usage.stderr[-3000:]
