"""Sentence splitting, and documents as lists of sentences for next-sentence prediction."""

import pytest
from datasets import Dataset

from hf_encoders.data import CorpusError, documents_to_sentences, embedded_documents, split_sentences
from hf_encoders.data.sentences import MAX_CHARS_WITHOUT_BOUNDARY


@pytest.mark.parametrize(
    ("document", "sentences"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("It ended. 42 began.", ["It ended.", "42 began."]),
        ('He said "stop." Then he left.', ['He said "stop."', "Then he left."]),
        ('First (done.) "Quoted" next.', ["First (done.)", '"Quoted" next.']),
        ("No capital. then no split.", ["No capital. then no split."]),
        ("Version 3.11 is out. Good.", ["Version 3.11 is out.", "Good."]),
        ("Wait... What?! Yes.", ["Wait...", "What?!", "Yes."]),
    ],
)
def test_split_at_sentence_ends(document, sentences):
    assert split_sentences(document) == sentences


@pytest.mark.parametrize(
    "sentence",
    [
        "Use a container, e.g. A list or a tuple.",
        "Pass the text, i.e. The document itself.",
        "Mr. Smith met Dr. Jones at St. Paul's.",
        "J. R. R. Tolkien wrote it.",
        "Compare (cf. Section 3) the results.",
    ],
)
def test_abbreviations_and_initials_do_not_end_sentences(sentence):
    assert split_sentences(sentence) == [sentence]


def test_wrapped_lines_join_and_blank_lines_end_paragraphs():
    document = "A sentence wrapped\n   over lines\nhere\n\nA heading\n \nBody text. More."
    assert split_sentences(document) == ["A sentence wrapped over lines here", "A heading", "Body text.", "More."]


def test_blank_document_has_no_sentences():
    assert split_sentences(" \n\n \t") == []


def test_documents_to_sentences_keeps_document_boundaries_and_drops_empty_documents():
    documents = ["One. Two.", "   ", "Three"]
    expected = [["One.", "Two."], ["Three"]]
    assert documents_to_sentences(documents) == expected
    assert documents_to_sentences(Dataset.from_dict({"text": documents})) == expected


def test_short_document_without_boundary_is_one_sentence():
    document = "x" * MAX_CHARS_WITHOUT_BOUNDARY
    assert documents_to_sentences([document]) == [[document]]


def test_long_document_without_boundary_names_document_source_and_fix():
    documents = ["Fine. Prose.", "def f(x): return x " * 100]
    with pytest.raises(CorpusError) as raised:
        documents_to_sentences(documents, source_name="code.jsonl")
    message = str(raised.value)
    assert "document 1 of code.jsonl" in message and "not prose" in message
    assert "split the documents into sentences" in message


def test_embedded_corpus_splits_into_many_sentences():
    documents = documents_to_sentences(embedded_documents(), source_name="the embedded corpus")
    assert len(documents) == len(embedded_documents())
    assert sum(map(len, documents)) > 3000
    assert all("\n" not in sentence for document in documents for sentence in document)
