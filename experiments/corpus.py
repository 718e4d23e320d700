"""The experiments' corpus: the prose of Python's full documentation, read from its reStructuredText sources.

Debian ships them in `python3.11-doc` (`apt-get install python3.11-doc`, then
`/usr/share/doc/python3.11/html/_sources`). Any folder of `.rst` / `.rst.txt` files works. Each source file becomes
a list of sections (heading, paragraphs); markup is stripped, code blocks, tables and directives' arguments are
dropped, and inline code (``literal`` and :role:`target`) is remembered as character spans, which the token
classification task tags.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

# Directives whose indented body is code or data, not prose.
CODE_DIRECTIVES = re.compile(
    r"\.\. (code-block|sourcecode|doctest|testcode|testoutput|productionlist|literalinclude|"
    r"highlight|index|raw|csv-table|list-table|table|toctree|only|ifconfig|audit-event)"
)
HEADING_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+:.])\1{2,}\s*$")
BULLET = re.compile(r"^(\* |- |\+ |#\. |\d+\. )")
# :role:`title <target>` and :role:`~target` / :role:`!target`; ``literal``; `text <url>`_; *emphasis*, **strong**;
# a field (":synopsis: text") opens a directive's options, not prose.
ROLE = re.compile(r":[\w:-]+:`[~!]?([^`<]+?)(?:\s*<[^`]*>)?`")
LITERAL = re.compile(r"``(.+?)``")
LINK = re.compile(r"`([^`<]+?)\s*(?:<[^`]*>)?`_{1,2}")
EMPHASIS = re.compile(r"\*{1,2}([^*\s][^*]*?)\*{1,2}")
FIELD = re.compile(r"^:[\w-]+:(\s|$)")
FOOTNOTE = re.compile(r"\s*\[#?[\w-]*\]_")
DOCUMENTATION_SOURCES = Path("/usr/share/doc/python3.11/html/_sources")  # `apt-get install python3.11-doc`


@dataclass
class Paragraph:
    text: str
    code_spans: list[tuple[int, int]] = field(default_factory=list)  # character spans of inline code in `text`


@dataclass
class Section:
    heading: str
    paragraphs: list[Paragraph] = field(default_factory=list)


@dataclass
class SourceFile:
    topic: str  # the documentation's part: library, reference, tutorial, c-api, howto, whatsnew, ...
    sections: list[Section]

    @property
    def paragraphs(self) -> list[Paragraph]:
        return [paragraph for section in self.sections for paragraph in section.paragraphs]


def read_sources(folder: Path) -> list[SourceFile]:
    """Every source file under `folder` (sorted, so the corpus is the same on every machine) that holds prose."""
    if not folder.is_dir():
        raise ValueError(
            f"{folder} does not exist; pass the documentation's _sources folder (Debian's `apt-get install "
            f"python3.11-doc` puts it in {DOCUMENTATION_SOURCES})."
        )
    paths = sorted(path for path in folder.rglob("*") if path.name.endswith((".rst", ".rst.txt")))
    if not paths:
        raise ValueError(f"{folder} holds no .rst or .rst.txt files; pass the documentation's _sources folder.")
    files = []
    for path in paths:
        relative = path.relative_to(folder)
        topic = relative.parts[0] if len(relative.parts) > 1 else "top"
        sections = [section for section in parse_rst(path.read_text(errors="replace")) if section.paragraphs]
        if sections:
            files.append(SourceFile(topic, sections))
    return files


def parse_rst(source: str) -> list[Section]:
    """Sections of prose paragraphs; a paragraph is a block of lines of equal indentation between blank lines."""
    lines = source.splitlines()
    sections = [Section(heading="")]
    skip_deeper_than = None  # inside a literal block or code directive: skip lines indented deeper than this
    block: list[str] = []
    block_indent = 0

    def close_block() -> None:
        nonlocal skip_deeper_than
        if not block:
            return
        text = " ".join(line.strip() for line in block)
        if text.endswith("::") or CODE_DIRECTIVES.match(text):
            skip_deeper_than = block_indent
        if not text.startswith(".. "):
            # "For example::" introduces a literal block; the prose keeps one colon.
            paragraph = clean_paragraph(BULLET.sub("", text).removesuffix(":"))
            if paragraph is not None:
                sections[-1].paragraphs.append(paragraph)
        elif not CODE_DIRECTIVES.match(text):
            skip_deeper_than = None  # a prose directive (note, function, ...): its body is prose
        block.clear()

    for index, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if skip_deeper_than is not None and (not line.strip() or indent > skip_deeper_than):
            continue
        skip_deeper_than = None
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if HEADING_UNDERLINE.match(following) and line.strip() and not HEADING_UNDERLINE.match(line):
            close_block()
            heading = clean_paragraph(line.strip(), min_words=1)
            sections.append(Section(heading.text if heading else ""))
            continue
        if not line.strip() or HEADING_UNDERLINE.match(line) or (block and indent != block_indent):
            close_block()
            if not line.strip() or HEADING_UNDERLINE.match(line):
                continue
        if not block:
            block_indent = indent
        block.append(line)
    close_block()
    return sections


def clean_paragraph(text: str, min_words: int = 8) -> Paragraph | None:
    """Markup stripped, inline code remembered; None for what is not prose (tables, prompts, short fragments)."""
    if (
        text.startswith((">>>", "+-", "|", "=="))
        or FIELD.match(text)
        or sum(c.isalpha() or c.isspace() for c in text) < 0.8 * len(text)
    ):
        return None
    text = FOOTNOTE.sub("", text)
    spans = []
    pieces = []
    position = 0
    cursor = 0
    # One pass over the inline markup, in order, so every code span's offsets refer to the cleaned text.
    pattern = re.compile("|".join(f"(?:{p.pattern})" for p in (ROLE, LITERAL, LINK, EMPHASIS)))
    for match in pattern.finditer(text):
        pieces.append(text[cursor : match.start()])
        position += match.start() - cursor
        inner = next(group for group in match.groups() if group is not None).strip()
        if match.group(0).startswith((":", "``")):
            spans.append((position, position + len(inner)))
        pieces.append(inner)
        position += len(inner)
        cursor = match.end()
    pieces.append(text[cursor:])
    cleaned = "".join(pieces)
    if len(cleaned.split()) < min_words or "`" in cleaned:
        return None
    return Paragraph(cleaned, spans)
