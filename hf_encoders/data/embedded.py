"""English prose that ships with Python itself, so demos and tests need no download.

Two sources, both part of every CPython installation:

* pydoc's topic help (what `help("if")` prints): about 65k words of the language reference;
* the module docstrings of the pure-Python standard library that are real prose.

Docstrings are read from the source files, never by importing the modules: importing the
whole standard library would run import-time side effects in the caller's process (`this` prints,
`antigravity` opens a browser, `readline` takes over the terminal) and load hundreds of modules.
"""

import ast
import functools
import inspect
import re
import sys
import sysconfig
import tokenize
from pathlib import Path
from pydoc_data.topics import topics as pydoc_topics

from .sentences import split_sentences

# A docstring counts as prose when it is long, mostly words (not a table, diagram or code listing)
# and has several sentences (not a list of function signatures).
_MIN_DOCSTRING_CHARS = 400
_MIN_LETTER_FRACTION = 0.85
_MIN_SENTENCES = 3

_TOKENS_BEFORE_CODE = {tokenize.ENCODING, tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE}
_STDLIB = Path(sysconfig.get_path("stdlib"))

# reST heading underlines ("******", "======") are decoration, not text.
_RULE_LINE = re.compile(r"^[ \t]*([=*~^#+-])\1{2,}[ \t]*$", re.MULTILINE)


def embedded_documents() -> list[str]:
    """The embedded corpus in a fixed order, one document per entry: pydoc topics, then module docstrings."""
    return list(_embedded_documents())


@functools.lru_cache(maxsize=1)
def _embedded_documents() -> tuple[str, ...]:
    # Cached as a tuple: callers get list copies, which they may change without changing the cache.
    documents = [_drop_rule_lines(pydoc_topics[name]) for name in sorted(pydoc_topics)]
    documents += [doc for doc in map(_module_docstring, sorted(sys.stdlib_module_names)) if _is_prose(doc)]
    return tuple(documents)


def _module_docstring(module_name: str) -> str:
    """The docstring of a pure-Python standard-library module or package, "" if it has none."""
    for source in (_STDLIB / f"{module_name}.py", _STDLIB / module_name / "__init__.py"):
        if source.is_file():
            return _drop_rule_lines(_leading_docstring(source))
    return ""  # a C extension, a built-in or another platform's module


def _leading_docstring(source: Path) -> str:
    # Reads tokens only up to the first statement: parsing whole modules with `ast` costs seconds.
    with source.open("rb") as stream:
        for token in tokenize.tokenize(stream.readline):
            if token.type not in _TOKENS_BEFORE_CODE:
                is_docstring = token.type == tokenize.STRING
                return inspect.cleandoc(ast.literal_eval(token.string)) if is_docstring else ""
    return ""


def _is_prose(text: str) -> bool:
    if len(text) < _MIN_DOCSTRING_CHARS:
        return False
    letters = sum(char.isalpha() or char.isspace() for char in text)
    return letters / len(text) >= _MIN_LETTER_FRACTION and len(split_sentences(text)) >= _MIN_SENTENCES


def _drop_rule_lines(text: str) -> str:
    return _RULE_LINE.sub("", text).strip()
