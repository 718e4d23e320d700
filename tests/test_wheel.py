"""A wheel built from the repository carries every file of the package, among them the model folders' real copies of
the shared files (which every checkpoint copies next to its weights) and the model cards (which `pretrain` renders)."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from hf_encoders.families import FAMILIES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hf_encoders"


def build_wheel(tmp_path: Path) -> zipfile.ZipFile:
    """`pip wheel` of a copy of what the build reads, so that no build/ or egg-info lands in the checkout and no
    stale file of an earlier build/lib slips in; offline, with the test environment's setuptools. Links stay links,
    as a checkout has them."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / "hf_encoders", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "--no-index"]
    built = subprocess.run(
        [*command, "--disable-pip-version-check", "-q", "-w", str(tmp_path / "dist")], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    return zipfile.ZipFile(wheel)


def test_the_wheel_carries_the_model_folders_and_the_cards(tmp_path):
    wheel = build_wheel(tmp_path)
    names = set(wheel.namelist())
    package_files = {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert package_files - names == set()

    cards = {"tacl_student", *(family.card_template for family in FAMILIES.values())}
    assert {f"hf_encoders/model_cards/{card}.md" for card in cards} <= names

    shared = {path.name: path.read_bytes() for path in (PACKAGE / "models").glob("*.py") if path.name != "__init__.py"}
    copies = [name for name in names if name.count("/") == 3 and name.startswith("hf_encoders/models/")]
    carried = {name for name in copies if name.rpartition("/")[2] in shared}
    folders = {path.name for path in (PACKAGE / "models").iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert {name.split("/")[2] for name in carried} == folders
    for name in carried:
        assert wheel.read(name) == shared[name.rpartition("/")[2]], f"{name} is not its source's content"
