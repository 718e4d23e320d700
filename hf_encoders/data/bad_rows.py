"""JSON Lines read line by line, so that a malformed row is reported by its file and line, or skipped and counted.

`datasets`' json builder reads a whole file with pyarrow, and a broken line deep inside it fails with pyarrow's
error, naming neither the file nor the line. Here every non-blank line becomes a row holding either its text or, in
a "bad_row" column, where it is and what is wrong with it: broken JSON, not an object, no text field, or a field
that is not a string. `check_bad_rows` then stops at the first one (one line naming file:line and the fix) or, with
`skip=True`, drops them and tallies them in `SkippedRows`. Rows stay lazy when streamed: a stream stops when it
reaches the bad row, not before it starts.
"""

import json
from pathlib import Path

import datasets
import pyarrow.compute as pc
from datasets import Dataset, IterableDataset

from ..errors import CorpusError

# How JSON calls what json.loads returns, for the messages.
JSON_TYPES = {
    bool: "boolean",
    int: "number",
    float: "number",
    list: "array",
    dict: "object",
    str: "string",
    type(None): "null",
}
ROW_FEATURES = datasets.Features({"text": datasets.Value("string"), "bad_row": datasets.Value("string")})
SKIP_HINT = "fix or delete that line, or pass --skip_bad_rows to skip such rows and count them."


class SkippedRows:
    """Where the skipped rows were ("file:line"), each once however often a stream is read again, and how many a
    token cache's corpus had (`recorded`). A source's own tally can pass each row on to the whole corpus's (`also`)."""

    def __init__(self, also: "SkippedRows | None" = None):
        self.locations: set[str] = set()
        self.first_reason: str | None = None
        self.recorded = 0
        self.also = also

    def add(self, reason: str) -> None:
        self.first_reason = self.first_reason or reason
        self.locations.add(reason.split(": ", 1)[0])
        if self.also is not None:
            self.also.add(reason)

    def __len__(self) -> int:
        return len(self.locations) + self.recorded

    def __deepcopy__(self, memo):
        # datasets copies a stream's pipeline when iterating it; every copy in this process adds to one tally.
        return self


def read_jsonl(files: list[Path], text_column: str, streaming: bool) -> Dataset | IterableDataset:
    """Rows {"text", "bad_row"} of JSON Lines `files`, blank lines left out; `bad_row` is None for a good row."""
    # The files' sizes and times are in the arguments, so that `Dataset.from_generator`'s cache follows their edits.
    kwargs = {
        "files": [str(file) for file in files],
        "text_column": text_column,
        "versions": [(file.stat().st_size, file.stat().st_mtime_ns) for file in files],
    }
    if streaming:
        # gen_kwargs lists are sharded between DataLoader workers: both lists are per file, in the same order.
        return IterableDataset.from_generator(_rows, features=ROW_FEATURES, gen_kwargs=kwargs)
    return Dataset.from_generator(_rows, features=ROW_FEATURES, gen_kwargs=kwargs)


def _rows(files: list[str], text_column: str, versions: list):
    for file in files:
        with open(file, encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    yield _row(line, f"{file}:{number}", text_column)


def _row(line: str, where: str, text_column: str) -> dict:
    try:
        value = json.loads(line.rstrip("\r\n"))  # a newline inside a cut-off string is no error of its own
    except json.JSONDecodeError as error:
        return _bad(f"{where}: not valid JSON ({error.msg}: column {error.colno})")
    if not isinstance(value, dict):
        return _bad(f"{where}: a JSON {JSON_TYPES[type(value)]}, not an object with a {text_column!r} field")
    if text_column not in value:
        return _bad(
            f"{where}: no field {text_column!r}; the fields are {list(value)} (pass --text_column with the one "
            "holding the text)"
        )
    text = value[text_column]
    if not isinstance(text, str):
        return _bad(f"{where}: field {text_column!r} holds a JSON {JSON_TYPES[type(text)]}, not a string")
    return {"text": text, "bad_row": None}


def _bad(reason: str) -> dict:
    return {"text": None, "bad_row": reason}


def check_bad_rows(
    rows: Dataset | IterableDataset, skip: bool, skipped: SkippedRows | None = None
) -> Dataset | IterableDataset:
    """`rows` without their "bad_row" column: stop at the first bad row, or (`skip`) drop them, tallied in `skipped`.

    A `Dataset` is checked at once (with pyarrow, no Python loop over good rows); a stream row by row as it is read.
    """
    skipped = SkippedRows() if skipped is None else skipped
    if isinstance(rows, IterableDataset):
        checked = rows.filter(_keep_row, input_columns="bad_row", fn_kwargs={"skip": skip, "skipped": skipped})
        return checked.remove_columns("bad_row")
    reasons = pc.drop_null(rows.data.column("bad_row"))
    if len(reasons) == 0:
        return rows.remove_columns("bad_row")
    if not skip:
        raise CorpusError(f"{reasons[0].as_py()}; {SKIP_HINT}")
    for reason in reasons.to_pylist():
        skipped.add(reason)
    good = pc.invert(rows.data.column("bad_row").is_valid()).to_numpy(zero_copy_only=False).nonzero()[0]
    return rows.select(good).remove_columns("bad_row")


def _keep_row(reason: str | None, skip: bool, skipped: SkippedRows) -> bool:
    if reason is None:
        return True
    if not skip:
        raise CorpusError(f"{reason}; {SKIP_HINT}")
    skipped.add(reason)
    return False
