"""utils/check_copies.py: each model folder holds real copies of the shared files, each its source in
hf_encoders/models/_shared/ under a first line naming that source, and the check fails (naming the copy) when one
differs, lacks its banner or is a symlink."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path("utils") / "check_copies.py"
MODELS = Path("hf_encoders") / "models"
SOURCES = MODELS / "_shared"
BANNER = "# Copied from hf_encoders/models/_shared/{}; edit the source, then run `python utils/check_copies.py --fix_and_overwrite`.\n"


def check_copies(root: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / SCRIPT), *flags], capture_output=True, text=True, cwd=root)


def imported_shared_files() -> set[Path]:
    """What the check must cover, read from the model code rather than from the folders: every shared file that a
    model folder's modules import as a sibling (`from .loss_utils import ...`)."""
    shared = {path.stem for path in (ROOT / SOURCES).glob("*.py")} - {"__init__"}
    return {
        folder / f"{name}.py"
        for folder in (ROOT / MODELS).iterdir()
        if folder.is_dir() and folder.name != "_shared"
        for module in folder.glob("*.py")
        for name in re.findall(r"^from \.(\w+) import", module.read_text(), re.MULTILINE)
        if name in shared
    }


def test_the_repository_holds_real_copies_of_their_sources_under_a_banner():
    result = check_copies(ROOT)
    assert result.returncode == 0, result.stdout
    expected = imported_shared_files()
    assert f"{len(expected)} copies of {len({path.name for path in expected})} shared files match" in result.stdout
    for path in expected:
        assert path.is_file() and not path.is_symlink()
        text = path.read_text()
        assert text == BANNER.format(path.name) + (ROOT / SOURCES / path.name).read_text(), path
    assert [path for path in (ROOT / "hf_encoders").rglob("*") if path.is_symlink()] == []


def test_an_edited_unbannered_or_linked_copy_fails_the_check_until_overwritten(tmp_path):
    (tmp_path / "utils").mkdir()
    shutil.copy(ROOT / SCRIPT, tmp_path / SCRIPT)
    shutil.copytree(ROOT / MODELS, tmp_path / MODELS, ignore=shutil.ignore_patterns("__pycache__"))
    models = tmp_path / MODELS
    edited = models / "mae_lm" / "loss_utils.py"
    edited.write_text(edited.read_text() + "\n# edited in the copy instead of the source\n")
    unbannered = models / "biphasic" / "task_heads.py"
    unbannered.write_text((models / "_shared" / "task_heads.py").read_text())
    linked = models / "tacl" / "checkpoint_io.py"
    linked.unlink()
    linked.symlink_to(Path("..") / "_shared" / "checkpoint_io.py")
    sources = {path.name: path.read_text() for path in (models / "_shared").glob("*.py")}

    failed = check_copies(tmp_path)
    assert failed.returncode == 1
    assert failed.stdout.splitlines() == [
        "hf_encoders/models/biphasic/task_heads.py does not start with the banner naming its source, "
        "hf_encoders/models/_shared/task_heads.py",
        "hf_encoders/models/mae_lm/loss_utils.py differs from hf_encoders/models/_shared/loss_utils.py",
        "hf_encoders/models/tacl/checkpoint_io.py is a symlink, not a copy of hf_encoders/models/_shared/checkpoint_io.py",
        "Edit the source, not the copy, then run `python utils/check_copies.py --fix_and_overwrite`.",
    ]

    fixed = check_copies(tmp_path, "--fix_and_overwrite")
    assert fixed.returncode == 0, fixed.stdout
    for copy in (edited, unbannered, linked):
        assert not copy.is_symlink() and copy.read_text() == BANNER.format(copy.name) + sources[copy.name]
    assert {path.name: path.read_text() for path in (models / "_shared").glob("*.py")} == sources  # untouched
    assert check_copies(tmp_path).returncode == 0
