"""Corpus loading: the embedded corpus, local files in every supported format, and each bad input."""

import json
import re
import sys

import datasets
import huggingface_hub.constants
import pytest
from datasets import Dataset, IterableDataset

from hf_encoders.data import CorpusError, corpus, embedded_documents, load_documents


@pytest.fixture
def offline_hub(monkeypatch):
    """Offline for this test whatever the environment says, so a Hub lookup fails at once."""
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def texts(dataset):
    return [row["text"] for row in dataset]


# The embedded corpus


def test_embedded_corpus_is_large_clean_and_deterministic():
    documents = embedded_documents()
    assert len(documents) > 100
    assert sum(len(document.split()) for document in documents) > 60_000
    assert documents == embedded_documents()
    assert all(document == document.strip() and document for document in documents)
    underline = re.compile(r"^\*{3,}$", re.MULTILINE)  # reST heading decoration, dropped
    assert not any(underline.search(document) for document in documents)


def test_embedded_corpus_holds_pydoc_topics_then_module_docstrings():
    documents = embedded_documents()
    assert documents[0].startswith('The "assert" statement')
    assert any(document.startswith("Command-line parsing library") for document in documents)  # argparse


def test_embedded_corpus_imports_no_standard_library_module():
    embedded_documents()
    assert "antigravity" not in sys.modules and "this" not in sys.modules and "turtle" not in sys.modules


def test_embedded_corpus_hands_out_copies():
    embedded_documents().clear()
    assert embedded_documents()


@pytest.mark.parametrize("source", [None, "embedded"])
def test_load_documents_defaults_to_the_embedded_corpus(source):
    documents = load_documents(source)
    assert isinstance(documents, Dataset) and documents.column_names == ["text"]
    assert documents["text"] == embedded_documents()


def test_embedded_corpus_streams():
    documents = load_documents(streaming=True)
    assert isinstance(documents, IterableDataset)
    assert texts(documents.take(3)) == embedded_documents()[:3]


# Local files


def test_text_file_has_one_document_per_blank_line_separated_block(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(
        "  First document,\nwrapped over two lines.\n\n"
        "Second document.\n \t\n"  # a "blank" line holding spaces still separates
        "Third document.\n\n\n\n\nFourth document.\n\n",
        encoding="utf-8",
    )
    assert texts(load_documents(path)) == [
        "First document,\nwrapped over two lines.",
        "Second document.",
        "Third document.",
        "Fourth document.",
    ]


def test_text_file_with_windows_line_ends(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"One.\r\nStill one.\r\n\r\nTwo.\r\n")
    assert texts(load_documents(str(path))) == ["One.\nStill one.", "Two."]


def test_jsonl_file_uses_the_text_column_and_drops_blank_rows(tmp_path):
    path = write_jsonl(
        tmp_path / "corpus.jsonl",
        [{"body": " Kept. ", "id": 1}, {"body": "   ", "id": 2}, {"body": "Also kept.", "id": 4}],
    )
    documents = load_documents(path, text_column="body")
    assert documents.column_names == ["text"]
    assert texts(documents) == ["Kept.", "Also kept."]


def test_json_array_file(tmp_path):
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps([{"text": "One."}, {"text": "Two."}]), encoding="utf-8")
    assert texts(load_documents(path)) == ["One.", "Two."]


def test_parquet_file(tmp_path):
    path = tmp_path / "corpus.parquet"
    Dataset.from_dict({"content": ["One.", "", "Two."], "score": [1, 2, 3]}).to_parquet(path)
    assert texts(load_documents(path, text_column="content")) == ["One.", "Two."]


def test_directory_of_files_in_path_order(tmp_path):
    (tmp_path / "b.txt").write_text("From b.", encoding="utf-8")
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "c.txt").write_text("From c.\n\nAlso c.", encoding="utf-8")
    (tmp_path / "a.txt").write_text("From a.", encoding="utf-8")
    (tmp_path / "notes.md").write_text("Not part of the corpus.", encoding="utf-8")
    assert texts(load_documents(tmp_path)) == ["From a.", "From b.", "From c.", "Also c."]


def test_local_file_streams(tmp_path):
    path = write_jsonl(tmp_path / "corpus.jsonl", [{"text": "One."}, {"text": " "}, {"text": "Two."}])
    documents = load_documents(path, streaming=True)
    assert isinstance(documents, IterableDataset) and documents.column_names == ["text"]
    assert texts(documents) == ["One.", "Two."]


# Bad input: each a CorpusError (a ValueError) that names the file and the problem


def test_missing_file(tmp_path):
    path = tmp_path / "missing.jsonl"
    with pytest.raises(CorpusError, match=r"missing.jsonl: file does not exist"):
        load_documents(path)


def test_unsupported_file_type(tmp_path):
    path = tmp_path / "corpus.csv"
    path.write_text("text\nhello\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"corpus.csv: not a \.txt/\.jsonl/\.json/\.parquet file"):
        load_documents(path)


def test_directory_without_corpus_files(tmp_path):
    with pytest.raises(CorpusError, match="nor a directory holding such files"):
        load_documents(tmp_path)


def test_directory_mixing_formats(tmp_path):
    (tmp_path / "a.txt").write_text("One.", encoding="utf-8")
    write_jsonl(tmp_path / "b.jsonl", [{"text": "Two."}])
    with pytest.raises(CorpusError, match=r"mixes \.jsonl, \.txt files"):
        load_documents(tmp_path)


@pytest.mark.parametrize("suffix", [".txt", ".jsonl"])
def test_invalid_utf8_names_the_file_and_byte_offset(tmp_path, suffix):
    path = tmp_path / f"latin1{suffix}"
    path.write_bytes('{"text": "café"}\n'.encode("latin-1"))
    with pytest.raises(CorpusError) as raised:
        load_documents(path)
    message = str(raised.value)
    assert f"latin1{suffix}: not valid UTF-8 at byte 13" in message and "re-encode" in message


@pytest.mark.parametrize(
    ("content", "offset"),
    [
        ("abé ok".encode() + b"\xff", 7),  # a valid "é" straddles the first 3-byte chunk boundary
        (b"ab\xc3A ok", 2),  # an invalid sequence starts in one chunk and fails in the next
    ],
)
def test_invalid_utf8_offset_is_exact_across_read_chunks(tmp_path, monkeypatch, content, offset):
    monkeypatch.setattr(corpus, "_UTF8_CHECK_CHUNK_BYTES", 3)
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    with pytest.raises(CorpusError, match=f"at byte {offset} "):
        load_documents(path)


def test_truncated_utf8_at_end_of_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"Fine." + "é".encode()[:1])
    with pytest.raises(CorpusError, match="at byte 5"):
        load_documents(path)


def test_missing_text_column_lists_the_columns(tmp_path):
    path = write_jsonl(tmp_path / "corpus.jsonl", [{"body": "One.", "id": 1}])
    with pytest.raises(CorpusError, match=r"corpus.jsonl:1: no field 'text'; the fields are \['body', 'id'\]"):
        load_documents(path)


def test_a_missing_text_column_names_the_option_as_the_command_line_spells_it(tmp_path):
    jsonl = write_jsonl(tmp_path / "corpus.jsonl", [{"body": "One."}])
    with pytest.raises(CorpusError) as refused:
        load_documents(jsonl, text_column="content")
    assert str(refused.value) == (
        f"{jsonl}:1: no field 'content'; the fields are ['body'] (pass --text_column with the one holding the text); "
        "fix or delete that line, or pass --skip_bad_rows to skip such rows and count them."
    )
    parquet = tmp_path / "corpus.parquet"
    Dataset.from_dict({"body": ["One."]}).to_parquet(parquet)
    with pytest.raises(CorpusError) as refused:
        load_documents(parquet, text_column="content")
    assert str(refused.value) == (
        f"{parquet}: no column 'content'; the columns are ['body']: pass --text_column with the one holding the text."
    )
    assert "text_column=" not in str(refused.value)


def test_analyze_reads_the_text_column_it_is_given(tmp_path):
    from hf_encoders.analysis.command import build_parser, corpus_sentences

    path = write_jsonl(tmp_path / "corpus.jsonl", [{"body": "One sentence here. Another one there."}])
    assert corpus_sentences(str(path), 10, "body") == ["One sentence here.", "Another one there."]
    assert build_parser().parse_args(["model", "--text_column", "body"]).text_column == "body"


def test_text_column_that_is_not_text(tmp_path):
    path = write_jsonl(tmp_path / "corpus.jsonl", [{"body": "One.", "id": 1}])
    with pytest.raises(CorpusError, match=r"corpus.jsonl:1: field 'id' holds a JSON number, not a string"):
        load_documents(path, text_column="id")


@pytest.mark.parametrize(
    ("name", "content"), [("blank.txt", " \n\n\t\n"), ("blank.jsonl", '{"text": " "}\n{"text": ""}\n')]
)
@pytest.mark.parametrize("streaming", [False, True])
def test_empty_corpus(tmp_path, name, content, streaming):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CorpusError, match=f"{name}: no non-blank document"):
        load_documents(path, streaming=streaming)


@pytest.mark.parametrize("streaming", [False, True])
def test_dataset_name_that_cannot_be_loaded_offline(offline_hub, streaming):
    with pytest.raises(CorpusError) as raised:
        load_documents("someone/some-corpus", streaming=streaming)
    message = str(raised.value)
    assert "'someone/some-corpus' is not a local file or directory" in message
    assert "HF_HUB_OFFLINE is set" in message and "Pass a local .txt" in message


def test_corpus_errors_are_value_errors():
    assert issubclass(CorpusError, ValueError)


def test_empty_files_are_named_instead_of_datasets_generation_error(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(CorpusError, match=r"empty.txt: the file is empty \(0 bytes\)"):
        load_documents(tmp_path / "empty.txt")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "a.jsonl").write_text("")
    with pytest.raises(CorpusError, match=r"folder: every .txt/.jsonl/.json/.parquet file in it is empty"):
        load_documents(tmp_path / "folder")
    # An empty file beside a real one is skipped, not fatal.
    (tmp_path / "folder" / "b.jsonl").write_text('{"text": "One document."}\n')
    assert load_documents(tmp_path / "folder")["text"] == ["One document."]
