"""Checks that each model folder's copy of a shared file is identical to its source, as transformers'
utils/check_copies.py does for its "Copied from" code.

A model folder is flat because every checkpoint carries it as remote code, so the helpers the families share
(checkpoint_io.py, loss_utils.py, packed_sequences.py, task_heads.py) are real copies inside each folder: never
symlinks, which checkouts without symlink support (Windows by default) turn into one-line text files. The source of
`hf_encoders/models/<family>/<file>.py` is `hf_encoders/models/<file>.py`: edit the source, then run

    python utils/check_copies.py --fix_and_overwrite

Without the flag the check lists the copies that differ and exits 1; the test suite runs it
(tests/test_check_copies.py). It needs nothing but the standard library.
"""

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "hf_encoders" / "models"


def shared_copies(models: Path = MODELS) -> list[tuple[Path, Path]]:
    """(source, copy) for every file of a model folder named like one of the shared files beside the folders."""
    sources = {path.name: path for path in models.glob("*.py") if path.name != "__init__.py"}
    folders = sorted(path for path in models.iterdir() if path.is_dir())
    return [
        (sources[copy.name], copy) for folder in folders for copy in sorted(folder.glob("*.py")) if copy.name in sources
    ]


def is_stale(source: Path, copy: Path) -> bool:
    return copy.is_symlink() or copy.read_bytes() != source.read_bytes()


def overwrite(source: Path, copy: Path) -> None:
    copy.unlink()  # a symlink must go, not be written through (that would write into its target)
    shutil.copyfile(source, copy)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--fix_and_overwrite", action="store_true", help="rewrite every copy that differs from its source"
    )
    args = parser.parse_args(argv)
    pairs = shared_copies()
    stale = [(source, copy) for source, copy in pairs if is_stale(source, copy)]
    for source, copy in stale:
        problem = "is a symlink, not a copy of" if copy.is_symlink() else "differs from"
        if args.fix_and_overwrite:
            overwrite(source, copy)
            problem = "overwritten with"
        print(f"{copy.relative_to(ROOT)} {problem} {source.relative_to(ROOT)}")
    if stale and not args.fix_and_overwrite:
        print("Edit the source, not the copy, then run `python utils/check_copies.py --fix_and_overwrite`.")
        return 1
    print(f"{len(pairs)} copies of {len({source for source, _ in pairs})} shared files match their sources.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
