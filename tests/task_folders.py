"""Small local task folders for `hf-encoders evaluate` (train.jsonl, validation.jsonl, test.jsonl), learnable by tiny
models: shared by the fine-tuning, retrieval and command tests."""

import json
import random
from pathlib import Path

from hf_encoders.data import embedded_documents

WORDS = [f"w{i}" for i in range(5, 64)]  # every word is in the biphasic tokenizer's vocabulary
NAMES = set(WORDS[:10])  # the TC task's entities
SPLIT_SIZES = {"train": 24, "validation": 8, "test": 8}


def write_split_files(folder: Path, splits: dict[str, list[dict]]) -> Path:
    """One JSON-lines file per split, as a user's task folder has them."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def sc_example(rng):
    words = rng.sample(WORDS, 6)
    return {"text": " ".join(words), "label": "even" if WORDS.index(words[0]) % 2 == 0 else "odd"}


def tc_example(rng):
    tokens = rng.sample(WORDS[:20], 6)
    tags = [
        "O" if word not in NAMES else ("I-PER" if i and tokens[i - 1] in NAMES else "B-PER")
        for i, word in enumerate(tokens)
    ]
    return {"tokens": tokens, "tags": tags}


def qa_example(rng, answerable=True):
    words = [rng.choice(WORDS) for _ in range(30)]
    first = rng.randrange(26)
    context = " ".join(words)
    answer = " ".join(words[first : first + 2])
    start = len(" ".join(words[:first])) + (1 if first else 0)
    answers = {"text": [answer], "answer_start": [start]} if answerable else {"text": [], "answer_start": []}
    return {"question": " ".join(rng.sample(WORDS, 3)), "context": context, "answers": answers}


EXAMPLES = {
    "sc": sc_example,
    "tc": tc_example,
    "qa": lambda rng: qa_example(rng, answerable=rng.random() > 0.25),  # SQuAD v2: some questions have no answer
}


def write_task_folders(root: Path) -> dict[str, Path]:
    """An sc, tc and qa folder under `root` (SPLIT_SIZES examples per split), keyed by kind."""
    rng = random.Random(0)
    return {
        kind: write_split_files(
            root / kind, {split: [example(rng) for _ in range(size)] for split, size in SPLIT_SIZES.items()}
        )
        for kind, example in EXAMPLES.items()
    }


def ir_rows() -> list[dict]:
    """Passages of 12 words from the embedded corpus, each queried by 4 of its words, with the next passage as the
    hard negative: learnable, and every query has one relevant passage."""
    words = " ".join(embedded_documents()[:40]).split()
    passages = [" ".join(words[start : start + 12]) for start in range(0, 12 * 71, 12)]
    return [
        {"query": " ".join(passage.split()[3:7]), "positive": passage, "negative": passages[index + 1]}
        for index, passage in enumerate(passages[:-1])
    ]


def write_ir_folder(folder: Path, negatives: bool = True, test: bool = True) -> str:
    rows = ir_rows() if negatives else [{k: v for k, v in row.items() if k != "negative"} for row in ir_rows()]
    splits = {"train": rows[:40], "validation": rows[40:60], **({"test": rows[60:70]} if test else {})}
    write_split_files(folder, splits)
    return f"ir:{folder}"
