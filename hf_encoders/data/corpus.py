"""Load a pre-training corpus, wherever it lives, as one stripped, non-empty document per "text" row.

A source is the embedded corpus (no download), a local file or directory (plain text with documents
separated by blank lines, JSON Lines, JSON or Parquet), or a dataset name for `datasets.load_dataset`.
"""

import codecs
from pathlib import Path

import datasets
from datasets import Dataset, IterableDataset

from ..errors import CorpusError, hub_unreachable_reason
from .bad_rows import SkippedRows, check_bad_rows, read_jsonl
from .embedded import embedded_documents
from .sentences import PARAGRAPH_BREAK

EMBEDDED = "embedded"
# File suffix -> the `datasets` packaged builder that reads it.
BUILDERS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}
_UTF8_BUILDERS = {"text", "json"}  # they decode their files as UTF-8 (Parquet strings are UTF-8 already)
_UTF8_CHECK_CHUNK_BYTES = 1 << 20
_DOCUMENT_FEATURES = datasets.Features({"text": datasets.Value("string")})


def load_documents(
    source: str | Path | None = None,
    *,
    dataset_config: str | None = None,
    split: str = "train",
    text_column: str = "text",
    streaming: bool = False,
    skip_bad_rows: bool = False,
    skipped: SkippedRows | None = None,
) -> Dataset | IterableDataset:
    """The documents of `source`, one per row in a "text" column, whitespace stripped, empty ones dropped.

    Args:
        source: None or "embedded" for the corpus that ships with Python; a `.txt` file (one document per
            blank-line-separated block), a `.jsonl`/`.json`/`.parquet` file, or a directory of such files
            in one format; otherwise a dataset name for `datasets.load_dataset`.
        dataset_config: the configuration of a dataset loaded by name (e.g. "wikitext-103-raw-v1").
        split: the split of a dataset loaded by name; local files form a single split.
        text_column: the column (JSON field) holding the documents; plain text files have no columns.
        streaming: return an `IterableDataset` that reads lazily instead of a `Dataset`.
        skip_bad_rows: skip a malformed JSON Lines row (broken JSON, no `text_column`, text not a string) instead
            of raising; each one skipped is tallied in `skipped` (data/bad_rows.py).

    Raises:
        CorpusError: the source does not exist, is not UTF-8, lacks `text_column`, holds no
            non-blank document, has a malformed JSON Lines row (naming its file and line) and `skip_bad_rows` is
            off, or is a name that cannot be loaded (offline, say).
    """
    source_skipped = SkippedRows(also=skipped)  # this source's, for the empty-corpus error; a mixture's is `skipped`
    if source is None or source == EMBEDDED:
        documents = Dataset.from_dict({"text": embedded_documents()})
        return documents.to_iterable_dataset() if streaming else documents
    path = Path(source)
    if path.exists():
        files = _corpus_files(path)
        builder = _builder_for(files, path)
        # datasets fails on an empty file with "An error occurred while generating the dataset", naming no file.
        files = [file for file in files if file.stat().st_size]
        if not files:
            what = "the file is empty" if path.is_file() else f"every {'/'.join(BUILDERS)} file in it is empty"
            raise CorpusError(
                f"{path}: {what} (0 bytes), so there is no document to train on; pass a corpus with text."
            )
        raw = _load_files(files, builder, streaming, text_column)
        if "bad_row" in (raw.column_names or ()):  # JSON Lines, read line by line: the text is in "text"
            raw, text_column = check_bad_rows(raw, skip_bad_rows, source_skipped), "text"
    elif path.suffix in BUILDERS:
        raise CorpusError(f"{path}: file does not exist; check the path (relative paths start at {Path.cwd()}).")
    else:
        builder, raw = None, _load_by_name(str(source), dataset_config, split, streaming)
    # Plain text has a single "text" column, and several documents per row until split at blank lines.
    is_plain_text = builder == "text"
    documents = _only_text_column(raw, "text" if is_plain_text else text_column, source)
    documents = _clean(documents, split_on_blank_lines=is_plain_text)
    _require_a_document(documents, source, source_skipped)
    return documents


def _corpus_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(file for file in path.rglob("*") if file.suffix in BUILDERS and file.is_file())


def _builder_for(files: list[Path], path: Path) -> str:
    if not files or any(file.suffix not in BUILDERS for file in files):
        raise CorpusError(f"{path}: not a {'/'.join(BUILDERS)} file, nor a directory holding such files.")
    suffixes = sorted({file.suffix for file in files})
    builders = {BUILDERS[suffix] for suffix in suffixes}
    if len(builders) > 1:
        raise CorpusError(
            f"{path}: mixes {', '.join(suffixes)} files; a directory must hold one format, so move the others out."
        )
    return builders.pop()


def _load_files(files: list[Path], builder: str, streaming: bool, text_column: str) -> Dataset | IterableDataset:
    if builder in _UTF8_BUILDERS:
        for file in files:
            _require_utf8(file)
    if all(file.suffix == ".jsonl" for file in files):
        return read_jsonl(files, text_column, streaming)
    # The text builder's paragraph mode splits on "\n\n" only; `_clean` also splits on lines of spaces.
    options = {"sample_by": "paragraph"} if builder == "text" else {}
    data_files = [str(file) for file in files]
    return datasets.load_dataset(builder, data_files=data_files, split="train", streaming=streaming, **options)


def _require_utf8(file: Path) -> None:
    """Raise `CorpusError` naming the byte offset of the first invalid UTF-8 sequence, reading in chunks."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    bytes_fed = 0
    with file.open("rb") as stream:
        while True:
            chunk = stream.read(_UTF8_CHECK_CHUNK_BYTES)
            # The decoder holds back an incomplete sequence at a chunk's end and prepends it to the next.
            held_back = len(decoder.getstate()[0])
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as error:
                offset = bytes_fed - held_back + error.start
                raise CorpusError(
                    f"{file}: not valid UTF-8 at byte {offset} ({error.reason}); re-encode the file to UTF-8, "
                    f"e.g. `iconv -f latin1 -t utf-8 {file.name} > {file.stem}.utf8{file.suffix}`."
                ) from None
            if not chunk:
                return
            bytes_fed += len(chunk)


def _load_by_name(name: str, config: str | None, split: str, streaming: bool) -> Dataset | IterableDataset:
    try:
        return datasets.load_dataset(name, config, split=split, streaming=streaming)
    except OSError as error:  # ConnectionError offline, FileNotFoundError for an unknown name
        raise CorpusError(
            f"{name!r} is not a local file or directory and cannot be loaded with datasets.load_dataset "
            f"({hub_unreachable_reason()}: {error}). Pass a local {', '.join(BUILDERS)} file or a directory "
            f"of them, or None for the embedded corpus."
        ) from error


def _only_text_column(
    dataset: Dataset | IterableDataset, text_column: str, source: str | Path
) -> Dataset | IterableDataset:
    # A streamed dataset may not know its columns until it reads a row.
    columns = dataset.column_names or list(next(iter(dataset), {}))
    if text_column not in columns:
        raise CorpusError(
            f"{source}: no column {text_column!r}; the columns are {columns}: pass --text_column with the one "
            "holding the text."
        )
    feature = (dataset.features or {}).get(text_column)
    if feature is not None and getattr(feature, "dtype", None) not in ("string", "large_string"):
        raise CorpusError(f"{source}: column {text_column!r} holds {feature}, not text; pick a text column.")
    dataset = dataset.select_columns([text_column])
    return dataset if text_column == "text" else dataset.rename_column(text_column, "text")


def _clean(dataset: Dataset | IterableDataset, split_on_blank_lines: bool) -> Dataset | IterableDataset:
    return dataset.map(
        _clean_batch,
        batched=True,
        remove_columns=["text"],
        fn_kwargs={"split_on_blank_lines": split_on_blank_lines},
        features=_DOCUMENT_FEATURES,  # spelled out, so a streamed dataset still knows its column
    )


def _clean_batch(batch: dict[str, list], split_on_blank_lines: bool) -> dict[str, list[str]]:
    texts = [text for text in batch["text"] if text]  # JSON rows without the field hold None
    if split_on_blank_lines:
        texts = [block for text in texts for block in PARAGRAPH_BREAK.split(text)]
    stripped = (text.strip() for text in texts)
    return {"text": [text for text in stripped if text]}


def _require_a_document(documents: Dataset | IterableDataset, source: str | Path, skipped: SkippedRows) -> None:
    is_empty = len(documents) == 0 if isinstance(documents, Dataset) else next(iter(documents), None) is None
    if is_empty and len(skipped):  # not an empty file: every row was bad
        raise CorpusError(
            f"{source}: no document left after skipping {len(skipped):,} bad rows (--skip_bad_rows); the first: "
            f"{skipped.first_reason}. Fix those rows."
        )
    if is_empty:
        raise CorpusError(
            f"{source}: no non-blank document; the corpus is empty or whitespace only. "
            "Check the path, and text_column for JSON or Parquet files."
        )
