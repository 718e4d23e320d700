"""Outputs appear whole or not at all, so a crashed run never leaves a report that looks finished."""

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path` for the caller to write; move it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A random name rather than tempfile.mkstemp, whose private 0600 mode the output would keep.
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
