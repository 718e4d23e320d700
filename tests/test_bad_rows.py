"""Malformed JSON Lines rows: named by file and line, or skipped (--skip_bad_rows) and counted, streamed or not."""

import json

import pytest

from hf_encoders.data import CorpusError, load_documents
from hf_encoders.data.bad_rows import SkippedRows

GOOD = [json.dumps({"text": "First good document."}), json.dumps({"text": "Second good document."})]
BAD = {
    "broken JSON": ('{"text": "cut off', r"not valid JSON \(Unterminated string"),
    "no text field": ('{"body": "x"}', r"no field 'text'; the fields are \['body'\]"),
    "text not a string": ('{"text": 7}', "field 'text' holds a JSON number, not a string"),
    "null text": ('{"text": null}', "field 'text' holds a JSON null, not a string"),
    "not an object": ('["text"]', "a JSON array, not an object with a 'text' field"),
}


def corpus_with(tmp_path, *bad_lines):
    """The good rows on lines 1 and 3 (line 2 blank), then the bad ones from line 4."""
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join([GOOD[0], "", GOOD[1], *bad_lines]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_row_is_named_by_file_and_line(tmp_path, kind, streaming):
    line, reason = BAD[kind]
    path = corpus_with(tmp_path, line)
    with pytest.raises(CorpusError, match=rf"corpus.jsonl:4: {reason}.*pass --skip_bad_rows"):
        list(load_documents(path, streaming=streaming))  # a stream stops where it reaches the row


@pytest.mark.parametrize("streaming", [False, True])
def test_skipped_rows_are_dropped_and_counted_once(tmp_path, streaming):
    lines = [BAD[kind][0] for kind in sorted(BAD)]
    skipped = SkippedRows()
    documents = load_documents(corpus_with(tmp_path, *lines), streaming=streaming, skip_bad_rows=True, skipped=skipped)
    for _ in range(2):  # a stream read twice (a second epoch) counts each row once
        assert [row["text"] for row in documents] == ["First good document.", "Second good document."]
    assert len(skipped) == len(BAD)
    assert skipped.locations == {f"{tmp_path / 'corpus.jsonl'}:{number}" for number in range(4, 4 + len(BAD))}
    assert skipped.first_reason.startswith(f"{tmp_path / 'corpus.jsonl'}:4: ")


@pytest.mark.parametrize("streaming", [False, True])
def test_nothing_left_after_skipping_says_how_many_rows_were_bad_and_why(tmp_path, streaming):
    """Not the empty-file error: the source's own count and first reason, though the corpus's tally (a mixture's,
    its other source's bad row first) gets every row."""
    skipped = SkippedRows()
    load_documents(corpus_with(tmp_path, BAD["null text"][0]), streaming=streaming, skip_bad_rows=True, skipped=skipped)
    path = tmp_path / "all_bad.jsonl"
    path.write_text('{"text": 1}\n\n{"body": "x"}\n', encoding="utf-8")
    reason = f"{path}:1: field 'text' holds a JSON number, not a string"
    message = rf"{path}: no document left after skipping 2 bad rows \(--skip_bad_rows\); the first: {reason}\. Fix"
    with pytest.raises(CorpusError, match=message):
        load_documents(path, streaming=streaming, skip_bad_rows=True, skipped=skipped)
    assert skipped.locations == {f"{tmp_path / 'corpus.jsonl'}:4", f"{path}:1", f"{path}:3"}
    (tmp_path / "blank.jsonl").write_text('{"text": "  "}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"blank.jsonl: no non-blank document; the corpus is empty or whitespace"):
        load_documents(tmp_path / "blank.jsonl", streaming=streaming, skip_bad_rows=True)


def test_an_edited_file_is_read_again_not_from_the_datasets_cache(tmp_path):
    path = corpus_with(tmp_path)
    assert len(load_documents(path)) == 2
    path.write_text(GOOD[0] + "\n", encoding="utf-8")
    assert [row["text"] for row in load_documents(path)] == ["First good document."]
