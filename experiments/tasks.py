"""Downstream task folders for `hf-encoders evaluate`, built from the documentation's own structure and markup.

- sc (topic): which part of the documentation a paragraph comes from: library reference, C API, what's new, or the
  guides (tutorial, HOWTOs, FAQ, using, extending). Balanced classes.
- tc (code tagging): the words of a paragraph that its source marked as code (``literal`` or :role:`target`),
  tagged B-CODE / I-CODE, every other word O. The markup is gone from the text, so the encoder must recognise code.
- qa (cloze): the context is a paragraph; the question is one of its sentences with one inline-code span replaced
  by "____"; the answer is that span in the context.
- ir (heading retrieval): the query is a section's heading, the relevant passage the section's first paragraph, the
  hard negative another section's paragraph from the same page.

Examples are shuffled with a fixed seed and cut into train / validation / test. The tasks are built from pages that
pre-training never reads (`task_pages`): a test paragraph the encoder pre-trained on would measure recall, not what the
encoder learned to represent.
"""

import itertools
import json
import random
import re
from pathlib import Path

from .corpus import Paragraph, SourceFile

TOPICS = {
    "library": "library",
    "c-api": "c-api",
    "whatsnew": "whatsnew",
    **dict.fromkeys(["tutorial", "howto", "faq", "using", "extending"], "guides"),
}
KINDS = ["sc", "tc", "qa", "ir"]  # the tasks write_task_folders builds, in the order the report tables them
# Every third page is the tasks' (165 of the 494): its headings yield about 960 retrieval examples, the fewest of any kind.
TASK_PAGE_EVERY = 3
SPLITS = {"train": 600, "validation": 150, "test": 150}
MAX_WORDS = 100  # longer paragraphs are cut, so inputs fit 128 tokens mostly
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def task_pages(files: list[SourceFile]) -> tuple[list[SourceFile], list[SourceFile]]:
    """(the pages the tasks are built from, the pages pre-training reads): every TASK_PAGE_EVERY-th page of the sorted
    sources goes to the tasks, so each part of the documentation gives pages to both."""
    tasks = [file for index, file in enumerate(files) if index % TASK_PAGE_EVERY == 0]
    pretraining = [file for index, file in enumerate(files) if index % TASK_PAGE_EVERY != 0]
    return tasks, pretraining


def write_task_folders(files: list[SourceFile], root: Path, seed: int = 0) -> dict[str, Path]:
    """One folder per task kind under `root`, each holding train/validation/test.jsonl; keyed by kind."""
    builders = dict(zip(KINDS, (topic_examples, code_tagging_examples, cloze_examples, heading_examples)))
    folders = {}
    for kind, build in builders.items():
        examples = build(files, random.Random(seed))
        folders[kind] = write_splits(root / kind, examples)
    return folders


def write_splits(folder: Path, examples: list[dict]) -> Path:
    needed = sum(SPLITS.values())
    if len(examples) < needed:
        raise ValueError(f"the corpus yields {len(examples)} examples for {folder.name}, fewer than {needed}.")
    folder.mkdir(parents=True, exist_ok=True)
    start = 0
    for split, size in SPLITS.items():
        rows = examples[start : start + size]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        start += size
    return folder


def truncated(paragraph: Paragraph) -> Paragraph:
    """The paragraph's first MAX_WORDS words, with the code spans that lie inside them."""
    words = paragraph.text.split(" ")
    if len(words) <= MAX_WORDS:
        return paragraph
    text = " ".join(words[:MAX_WORDS])
    return Paragraph(text, [(a, b) for a, b in paragraph.code_spans if b <= len(text)])


def topic_examples(files: list[SourceFile], rng: random.Random) -> list[dict]:
    per_topic: dict[str, list[dict]] = {}
    for file in files:
        if file.topic in TOPICS:
            label = TOPICS[file.topic]
            per_topic.setdefault(label, []).extend({"text": truncated(p).text, "label": label} for p in file.paragraphs)
    share = sum(SPLITS.values()) // len(per_topic)
    examples = [example for rows in per_topic.values() for example in rng.sample(rows, share)]
    rng.shuffle(examples)
    return examples


def code_tagging_examples(files: list[SourceFile], rng: random.Random) -> list[dict]:
    examples = []
    for paragraph in (truncated(p) for file in files for p in file.paragraphs):
        if paragraph.code_spans:
            examples.append(tagged_words(paragraph))
    rng.shuffle(examples)
    return examples


def tagged_words(paragraph: Paragraph) -> dict:
    """Whitespace words of the paragraph; a word is code when it overlaps a code span (B- on a span's first word)."""
    tokens, tags = [], []
    for match in re.finditer(r"\S+", paragraph.text):
        span = next((s for s in paragraph.code_spans if match.start() < s[1] and s[0] < match.end()), None)
        if span is None:
            tags.append("O")
        else:
            tags.append("I-CODE" if tags and tags[-1] != "O" and match.start() > span[0] else "B-CODE")
        tokens.append(match.group())
    return {"tokens": tokens, "tags": tags}


def cloze_examples(files: list[SourceFile], rng: random.Random) -> list[dict]:
    examples = []
    for paragraph in (truncated(p) for file in files for p in file.paragraphs):
        if len(paragraph.text.split()) < 25 or not paragraph.code_spans:
            continue
        start, end = rng.choice(paragraph.code_spans)
        answer = paragraph.text[start:end]
        sentence = next((s for s in sentence_spans(paragraph.text) if s[0] <= start and end <= s[1] + 1), None)
        if sentence is None:  # the code span runs across a sentence end ("e.g. os.path"): no one sentence to blank
            continue
        question = paragraph.text[sentence[0] : start] + "____" + paragraph.text[end : sentence[1]]
        if len(question.split()) < 6:
            continue
        examples.append(
            {
                "question": question,
                "context": paragraph.text,
                "answers": {"text": [answer], "answer_start": [start]},
            }
        )
    rng.shuffle(examples)
    return examples


def sentence_spans(text: str) -> list[tuple[int, int]]:
    bounds = [0] + [m.end() for m in SENTENCE_END.finditer(text)] + [len(text)]
    return list(itertools.pairwise(bounds))


def heading_examples(files: list[SourceFile], rng: random.Random) -> list[dict]:
    examples = []
    for file in files:
        passages = [(section, truncated(section.paragraphs[0]).text) for section in file.sections]
        for section, passage in passages:
            others = [text for other, text in passages if other is not section]
            if len(section.heading.split()) >= 2 and others:
                examples.append({"query": section.heading, "positive": passage, "negative": rng.choice(others)})
    rng.shuffle(examples)
    return examples
