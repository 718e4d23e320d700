"""The experiments' corpus reader and task builders (experiments/corpus.py, experiments/tasks.py) on a hand-written
reStructuredText page: prose kept, code and directives' arguments dropped, inline code remembered as spans."""

import random

import pytest

from experiments import corpus, tasks

PAGE = """\
:mod:`json` --- JSON encoder and decoder
========================================

.. module:: json
   :synopsis: Encode and decode the JSON format.

The :mod:`json` module exposes an API familiar to users of the ``marshal`` module and its friends.

Encoding basic Python object hierarchies::

    >>> import json
    >>> json.dumps(['foo', {'bar': ('baz', None, 1.0, 2)}])

.. function:: dumps(obj)

   Serialize *obj* to a JSON formatted string using this :ref:`conversion table <py-to-json-table>` for all values.

Basic usage
-----------

* A bullet item that is prose too, long enough to be kept by the reader.
"""


def test_prose_is_kept_with_its_inline_code_and_everything_else_is_dropped():
    sections = corpus.parse_rst(PAGE)
    assert [section.heading for section in sections] == ["", "json --- JSON encoder and decoder", "Basic usage"]
    paragraphs = [p for section in sections for p in section.paragraphs]
    assert [p.text for p in paragraphs] == [
        "The json module exposes an API familiar to users of the marshal module and its friends.",
        "Serialize obj to a JSON formatted string using this conversion table for all values.",
        "A bullet item that is prose too, long enough to be kept by the reader.",
    ]
    first = paragraphs[0]
    assert [first.text[a:b] for a, b in first.code_spans] == ["json", "marshal"]
    second = paragraphs[1]  # a :ref: role is a span too, its title kept and its target dropped
    assert [second.text[a:b] for a, b in second.code_spans] == ["conversion table"]


def test_code_words_are_tagged_and_cloze_answers_are_their_spans():
    paragraph = corpus.parse_rst(PAGE)[1].paragraphs[0]
    tagged = tasks.tagged_words(paragraph)
    assert [word for word, tag in zip(tagged["tokens"], tagged["tags"]) if tag != "O"] == ["json", "marshal"]
    assert set(tagged["tags"]) == {"O", "B-CODE"}
    long = corpus.clean_paragraph(
        "Call ``json.dumps`` to serialize an object. The :func:`loads` function reads a document back, and the "
        "``indent`` argument of the encoder pretty-prints nested arrays and objects for people to read."
    )
    page = corpus.SourceFile("library", [corpus.Section("Basic usage", [long])])
    example = tasks.cloze_examples([page], random.Random(0))[0]
    start, answer = example["answers"]["answer_start"][0], example["answers"]["text"][0]
    assert example["context"][start : start + len(answer)] == answer
    assert example["question"].replace("____", answer) in example["context"]
    # A code span that runs across a sentence end has no one sentence to blank: the paragraph gives no example.
    across = corpus.clean_paragraph(
        "The rules of this module are many and they are all listed in the next section of this page, which says "
        "what each one does and when it applies: call ``it. Then`` with care, because it reads the whole file."
    )
    page = corpus.SourceFile("library", [corpus.Section("Basic usage", [across])])
    assert tasks.cloze_examples([page], random.Random(0)) == []


def test_a_missing_sources_folder_says_where_debian_puts_it_and_an_empty_one_what_to_pass(tmp_path):
    with pytest.raises(ValueError) as refused:
        corpus.read_sources(tmp_path / "absent")
    assert str(refused.value) == (
        f"{tmp_path / 'absent'} does not exist; pass the documentation's _sources folder (Debian's `apt-get install "
        "python3.11-doc` puts it in /usr/share/doc/python3.11/html/_sources)."
    )
    (tmp_path / "notes.txt").write_text("not a source")
    with pytest.raises(ValueError) as refused:
        corpus.read_sources(tmp_path)
    assert (
        str(refused.value) == f"{tmp_path} holds no .rst or .rst.txt files; pass the documentation's _sources folder."
    )
