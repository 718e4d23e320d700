"""Split documents into sentences, keeping document boundaries (NSP samples both from them).

A deliberately simple splitter: a sentence ends at `.`, `!` or `?` (plus closing quotes or brackets)
followed by whitespace and a capital letter, digit or opening quote. Blank lines end paragraphs and
so sentences; single line breaks inside a paragraph are hard wrapping and are joined.
"""

import re
from collections.abc import Iterable

from datasets import Dataset, IterableDataset

from ..errors import CorpusError

# Longer than a few sentences of prose: a document this long without one boundary is not prose.
MAX_CHARS_WITHOUT_BOUNDARY = 1000

PARAGRAPH_BREAK = re.compile(r"\n\s*\n")  # a blank line, spaces on it or not
_SENTENCE_END = re.compile(r"""[.!?]+["')\]]*(?=\s+["'(\[]?[A-Z0-9])""")
# Words whose final period is not a full stop, compared lower-cased without opening punctuation.
# Not "etc." or "no.": they end sentences as often as not.
_ABBREVIATIONS = frozenset(
    {"e.g.", "i.e.", "cf.", "vs.", "mr.", "mrs.", "ms.", "dr.", "prof.", "st.", "jr.", "sr.", "fig."}
)
_INITIAL = re.compile(r"[A-Z]\.")  # "J. Smith"


def split_sentences(document: str) -> list[str]:
    """The sentences of `document` in order, each on one line with its whitespace collapsed."""
    return [
        sentence
        for paragraph in PARAGRAPH_BREAK.split(document)
        for sentence in _split_paragraph(" ".join(paragraph.split()))
    ]


def documents_to_sentences(
    documents: Dataset | IterableDataset | Iterable[str], source_name: str = "the corpus"
) -> list[list[str]]:
    """Each non-empty document as its list of sentences.

    `documents` is a list of strings or a dataset with a "text" column (what `load_documents` returns).
    Raises `CorpusError` for a document longer than `MAX_CHARS_WITHOUT_BOUNDARY` characters with no
    sentence boundary at all, naming its index and `source_name`: such a corpus is code, tables or
    unpunctuated text, and sentence pairs cut from it would be meaningless.
    """
    if isinstance(documents, (Dataset, IterableDataset)):
        documents = (row["text"] for row in documents)
    split_documents = []
    for index, document in enumerate(documents):
        sentences = split_sentences(document)
        if len(sentences) == 1 and len(sentences[0]) > MAX_CHARS_WITHOUT_BOUNDARY:
            raise CorpusError(
                f"document {index} of {source_name} has {len(sentences[0])} characters and no sentence boundary "
                "(no '.', '!' or '?' before a capitalised word, no blank line); the corpus is probably not prose. "
                "Use a prose corpus, or split the documents into sentences yourself (e.g. one per line, "
                "ending in a full stop)."
            )
        if sentences:
            split_documents.append(sentences)
    return split_documents


def _split_paragraph(text: str) -> list[str]:
    sentences, start = [], 0
    for end in _sentence_ends(text):
        sentences.append(text[start:end])
        start = end
    sentences.append(text[start:])
    return [sentence.strip() for sentence in sentences if sentence.strip()]


def _sentence_ends(text: str) -> Iterable[int]:
    for match in _SENTENCE_END.finditer(text):
        last_word = text[text.rfind(" ", 0, match.start()) + 1 : match.end()].lstrip("\"'([")
        if last_word.lower() not in _ABBREVIATIONS and not _INITIAL.fullmatch(last_word):
            yield match.end()
