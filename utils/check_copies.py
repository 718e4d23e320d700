"""Checks that each model folder's copy of a shared file is its source under a one-line banner, as transformers'
utils/check_copies.py does for its "Copied from" code.

A model folder is flat because every checkpoint carries it as remote code, so the helpers the models share
(checkpoint_io.py, loss_utils.py, packed_sequences.py, task_heads.py) are real copies inside each folder: never
symlinks, which checkouts without symlink support (Windows by default) turn into one-line text files. The source of
`hf_encoders/models/<name>/<file>.py` is `hf_encoders/models/_shared/<file>.py`; the copy is its source under a first
line naming it (`banner`), so that go-to-definition landing in a copy says where to edit. Edit the source, then run

    python utils/check_copies.py --fix_and_overwrite

Without the flag the check lists the copies that differ and exits 1; the test suite runs it
(tests/test_check_copies.py). It needs nothing but the standard library.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "hf_encoders" / "models"
SOURCES = MODELS / "_shared"
FIX = "python utils/check_copies.py --fix_and_overwrite"


def banner(source: Path) -> str:
    """The first line of every copy of `source`."""
    return f"# Copied from {source.relative_to(ROOT).as_posix()}; edit the source, then run `{FIX}`.\n"


def shared_copies(models: Path = MODELS) -> list[tuple[Path, Path]]:
    """(source, copy) for every file of a model folder named like one of the shared sources."""
    sources = {path.name: path for path in (models / "_shared").glob("*.py") if path.name != "__init__.py"}
    folders = sorted(path for path in models.iterdir() if path.is_dir() and not path.name.startswith("_"))
    return [
        (sources[copy.name], copy) for folder in folders for copy in sorted(folder.glob("*.py")) if copy.name in sources
    ]


def problem(source: Path, copy: Path) -> str | None:
    """What is wrong with `copy`, completing "<copy> ... <source>"; None where it is the source under its banner."""
    if copy.is_symlink():
        return "is a symlink, not a copy of"
    first_line, _, rest = copy.read_text().partition("\n")
    if first_line + "\n" != banner(source):
        return "does not start with the banner naming its source,"
    return None if rest == source.read_text() else "differs from"


def overwrite(source: Path, copy: Path) -> None:
    copy.unlink()  # a symlink must go, not be written through (that would write into its target)
    copy.write_text(banner(source) + source.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--fix_and_overwrite", action="store_true", help="rewrite every copy that differs from its source"
    )
    args = parser.parse_args(argv)
    pairs = shared_copies()
    stale = [(source, copy, found) for source, copy in pairs if (found := problem(source, copy))]
    for source, copy, found in stale:
        if args.fix_and_overwrite:
            overwrite(source, copy)
            found = "overwritten with"
        print(f"{copy.relative_to(ROOT)} {found} {source.relative_to(ROOT)}")
    if stale and not args.fix_and_overwrite:
        print(f"Edit the source, not the copy, then run `{FIX}`.")
        return 1
    print(f"{len(pairs)} copies of {len({source for source, _ in pairs})} shared files match their sources.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
