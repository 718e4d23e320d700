"""The tasks `hf-encoders evaluate` fine-tunes on: `KIND:SOURCE`, where SOURCE is a local folder of JSON lines or a
preset naming one of the public data sets of Gisserot-Boukhlef et al. (2025).

Whatever the source, a `Task` holds the same columns (COLUMNS) with labels and tags as integer ids into
`label_names`, so fine-tuning never looks at where the data came from. Local folders are checked line by line
before anything trains, and every problem is one line naming the file, the line or column, and the fix.
"""

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import datasets

KINDS = ("sc", "tc", "qa", "ir")
MAIN_METRIC = {"sc": "accuracy", "tc": "f1", "qa": "f1", "ir": "ndcg@10"}

# A task folder's files; test.jsonl is optional.
SPLIT_FILES = {"train": "train.jsonl", "validation": "validation.jsonl", "test": "test.jsonl"}
# Each kind's columns: (required, optional).
COLUMNS = {
    "sc": (("text", "label"), ("text_pair",)),
    "tc": (("tokens", "tags"), ()),
    "qa": (("question", "context", "answers"), ()),
    "ir": (("query", "positive"), ("negative",)),
}
# The column holding a kind's labels (sc) or per-word tags (tc).
LABEL_COLUMN = {"sc": "label", "tc": "tags"}
# Gisserot-Boukhlef et al. (2025, appendix B) hold 5% of the training set out for validation, and report the official
# validation split.
HELD_OUT_FRACTION = 0.05
HELD_OUT_SEED = 0


@dataclass
class Task:
    kind: str
    name: str
    source: str
    train: datasets.Dataset
    validation: datasets.Dataset
    test: datasets.Dataset | None
    # sc/tc: the name of each label id (sorted strings, or "0", "1", ... for integer labels); None for qa and ir.
    label_names: list[str] | None = None


def chance_score(task: Task) -> float | None:
    """The main metric (0-100) of always answering the most frequent label of the split a report shows (test, else
    validation): what a model that learned nothing scores. None for kinds without such a baseline (tc, qa, ir)."""
    if task.kind != "sc":
        return None
    labels = list((task.test if task.test is not None else task.validation)["label"])
    return 100 * Counter(labels).most_common(1)[0][1] / len(labels)


@dataclass(frozen=True)
class Preset:
    kind: str
    path: str  # the data set's id on the Hub
    config: str | None
    columns: dict[str, str]  # our column -> the data set's
    test_split: str  # reported as test
    validation_split: str | None = None  # None: HELD_OUT_FRACTION of train, as the paper does
    revision: str | None = None
    # Builds our columns from a batch of the data set's rows, where a renaming is not enough (MS MARCO).
    convert: Callable[[dict], dict] | None = None


def msmarco_triples(batch: dict) -> dict:
    """MS MARCO rows -> (query, positive, negative): the first passage a human selected and the first one not
    selected; queries without both are dropped."""
    triples = {"query": [], "positive": [], "negative": []}
    for query, passages in zip(batch["query"], batch["passages"]):
        flagged = list(zip(passages["passage_text"], passages["is_selected"]))
        positives = [text for text, selected in flagged if selected]
        negatives = [text for text, selected in flagged if not selected]
        if positives and negatives:
            triples["query"].append(query)
            triples["positive"].append(positives[0])
            triples["negative"].append(negatives[0])
    return triples


GLUE = "nyu-mll/glue"
PRESETS = {
    "sst2": Preset("sc", GLUE, "sst2", {"text": "sentence", "label": "label"}, test_split="validation"),
    "mnli": Preset(
        "sc", GLUE, "mnli", {"text": "premise", "text_pair": "hypothesis", "label": "label"}, "validation_matched"
    ),
    "qqp": Preset("sc", GLUE, "qqp", {"text": "question1", "text_pair": "question2", "label": "label"}, "validation"),
    # The canonical CoNLL-2003 repository holds a loading script, which datasets no longer runs; the Hub's Parquet
    # conversion of it has the same splits and ClassLabel names.
    "conll2003": Preset(
        "tc",
        "eriktks/conll2003",
        "conll2003",
        {"tokens": "tokens", "tags": "ner_tags"},
        test_split="test",
        validation_split="validation",
        revision="refs/convert/parquet",
    ),
    "squad": Preset("qa", "rajpurkar/squad", None, {c: c for c in COLUMNS["qa"][0]}, "validation"),
    "squad_v2": Preset("qa", "rajpurkar/squad_v2", None, {c: c for c in COLUMNS["qa"][0]}, "validation"),
    "msmarco": Preset("ir", "microsoft/ms_marco", "v1.1", {}, "validation", convert=msmarco_triples),
}


def parse_task(spec: str) -> tuple[str, str]:
    """ "sc:path/to/folder" -> ("sc", "path/to/folder")."""
    kind, colon, source = spec.partition(":")
    if not colon or not source:
        raise ValueError(f"--task {spec!r} is not KIND:SOURCE; write e.g. sc:sst2 or tc:path/to/folder.")
    if kind not in KINDS:
        raise ValueError(f"--task {spec!r}: KIND {kind!r} does not exist; use one of {', '.join(KINDS)}.")
    return kind, source


def load_task(spec: str) -> Task:
    """The task a `KIND:SOURCE` spec names: a local folder if SOURCE is one, else a preset of that kind."""
    kind, source = parse_task(spec)
    folder = Path(source).expanduser()
    if folder.is_dir():
        return load_folder(kind, source, folder)
    preset = PRESETS.get(source)
    if preset is None or preset.kind != kind:
        presets = ", ".join(f"{kind}:{name}" for name, p in PRESETS.items() if p.kind == kind)
        raise ValueError(
            f"--task {spec!r}: {source!r} is neither a folder nor a {kind} preset; give a folder with "
            f"{SPLIT_FILES['train']} and {SPLIT_FILES['validation']}, or one of {presets}."
        )
    return load_preset(kind, source, preset)


# ---- local folders ----


def load_folder(kind: str, source: str, folder: Path) -> Task:
    for split in ("train", "validation"):
        if not (folder / SPLIT_FILES[split]).is_file():
            raise ValueError(
                f"task folder {folder} has no {SPLIT_FILES[split]}; write the {split} examples there, one JSON "
                f"object a line with {columns_phrase(kind)}."
            )
    paths = [folder / name for name in SPLIT_FILES.values() if (folder / name).is_file()]
    lines = {path: read_lines(path) for path in paths}
    check_columns(kind, lines)
    label_names = None
    if kind in LABEL_COLUMN:
        label_names = names_of_labels(kind, lines)
        lines = {
            path: [(number, with_label_ids(kind, row, label_names)) for number, row in rows]
            for path, rows in lines.items()
        }
    splits = {path.name: as_dataset(kind, [row for _, row in rows]) for path, rows in lines.items()}
    return Task(
        kind=kind,
        name=folder.resolve().name,
        source=source,
        train=splits[SPLIT_FILES["train"]],
        validation=splits[SPLIT_FILES["validation"]],
        test=splits.get(SPLIT_FILES["test"]),
        label_names=label_names,
    )


def columns_phrase(kind: str) -> str:
    required, optional = COLUMNS[kind]
    phrase = ", ".join(required)
    return phrase + (f" (optional: {', '.join(optional)})" if optional else "")


def read_lines(path: Path) -> list[tuple[int, dict]]:
    """(line number, JSON object) for each non-blank line."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number} is not JSON ({error.msg}); write one JSON object a line.") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number} is not a JSON object; write one object a line, with keys as columns.")
        rows.append((number, row))
    if not rows:
        raise ValueError(f"{path} has no examples; write one JSON object a line with the task's columns.")
    return rows


def check_columns(kind: str, lines: dict[Path, list[tuple[int, dict]]]) -> None:
    """Every required column on every line, each optional column on all lines or none, and each value's shape."""
    required, optional = COLUMNS[kind]
    first_row = next(iter(lines.values()))[0][1]
    expected = [*required, *(column for column in optional if column in first_row)]
    for path, rows in lines.items():
        for number, row in rows:
            for column in expected:
                if column not in row:
                    raise ValueError(
                        f"{path}:{number} has no column {column!r}; every line of a {kind} task needs "
                        f"{columns_phrase(kind)}, each optional column on all lines of all files or on none."
                    )
            for column in set(optional) - set(expected):
                if column in row:
                    raise ValueError(
                        f"{path}:{number} has column {column!r}, but the first line of the task does not; give it "
                        "on every line of every file, or on none."
                    )
            problem = VALUE_CHECKS[kind](row)
            if problem:
                raise ValueError(f"{path}:{number}: {problem}.")


def is_text(value) -> bool:
    return isinstance(value, str)


def is_label(value) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def check_sc(row: dict) -> str | None:
    if not is_text(row["text"]) or not is_text(row.get("text_pair", "")):
        return "'text' and 'text_pair' must be strings"
    if not is_label(row["label"]):
        return f"'label' is {row['label']!r}; write an integer or a string"
    return None


def check_tc(row: dict) -> str | None:
    tokens, tags = row["tokens"], row["tags"]
    if not isinstance(tokens, list) or not all(is_text(token) for token in tokens):
        return "'tokens' must be a list of words (strings)"
    if not isinstance(tags, list) or not all(is_label(tag) for tag in tags):
        return "'tags' must be a list of integers or strings, one per word"
    if len(tags) != len(tokens):
        return f"'tags' has {len(tags)} tags for {len(tokens)} tokens; give one tag per word"
    return None


def check_qa(row: dict) -> str | None:
    if not is_text(row["question"]) or not is_text(row["context"]):
        return "'question' and 'context' must be strings"
    answers = row["answers"]
    if not isinstance(answers, dict) or not isinstance(answers.get("text"), list):
        return '\'answers\' must be SQuAD\'s {"text": [...], "answer_start": [...]} (both lists empty: no answer)'
    starts = answers.get("answer_start")
    if not isinstance(starts, list) or len(starts) != len(answers["text"]):
        return "'answers' needs one answer_start per text"
    for text, start in zip(answers["text"], starts):
        if not isinstance(start, int) or start < 0 or row["context"][start : start + len(text)] != text:
            return f"answer {text!r} is not at answer_start {start!r} of the context; give its character offset"
    return None


def check_ir(row: dict) -> str | None:
    if not all(is_text(row.get(column, "")) for column in ("query", "positive", "negative")):
        return "'query', 'positive' and 'negative' must be strings"
    return None


VALUE_CHECKS = {"sc": check_sc, "tc": check_tc, "qa": check_qa, "ir": check_ir}


def labels_of(kind: str, row: dict) -> list:
    return row["tags"] if kind == "tc" else [row["label"]]


def names_of_labels(kind: str, lines: dict[Path, list[tuple[int, dict]]]) -> list[str]:
    """Sorted label strings, or "0" ... "max" for integer labels; labels of both types are refused."""
    first_of_type = {}
    for path, rows in lines.items():
        for number, row in rows:
            for label in labels_of(kind, row):
                first_of_type.setdefault(type(label), f"{path}:{number}")
    column = LABEL_COLUMN[kind]
    if len(first_of_type) > 1:
        raise ValueError(
            f"{column!r} mixes types: {first_of_type[int]} has an integer, {first_of_type[str]} a string; write "
            f"every {column!r} of the task as one type (all strings or all integers)."
        )
    labels = {label for rows in lines.values() for _, row in rows for label in labels_of(kind, row)}
    if int not in first_of_type:
        return sorted(labels)
    if min(labels) < 0:
        raise ValueError(f"{column!r} has the negative id {min(labels)}; integer labels are ids 0, 1, 2, ...")
    return [str(label) for label in range(max(labels) + 1)]


def with_label_ids(kind: str, row: dict, label_names: list[str]) -> dict:
    """The row with its label (sc) or tags (tc) as ids into `label_names`; integer labels are their ids already."""
    ids = {name: index for index, name in enumerate(label_names)}

    def to_id(label):
        return ids[label] if isinstance(label, str) else label

    column = LABEL_COLUMN[kind]
    value = [to_id(tag) for tag in row[column]] if kind == "tc" else to_id(row[column])
    return {**row, column: value}


def as_dataset(kind: str, rows: list[dict]) -> datasets.Dataset:
    text = datasets.Value("string")
    features = {
        "sc": {"text": text, "text_pair": text, "label": datasets.Value("int64")},
        "tc": {"tokens": datasets.List(text), "tags": datasets.List(datasets.Value("int64"))},
        "qa": {
            "question": text,
            "context": text,
            "answers": {"text": datasets.List(text), "answer_start": datasets.List(datasets.Value("int32"))},
        },
        "ir": {"query": text, "positive": text, "negative": text},
    }[kind]
    features = {column: feature for column, feature in features.items() if column in rows[0]}
    return datasets.Dataset.from_list(
        [{column: row[column] for column in features} for row in rows], datasets.Features(features)
    )


# ---- presets ----


def load_preset(kind: str, name: str, preset: Preset) -> Task:
    try:
        loaded = datasets.load_dataset(preset.path, preset.config, revision=preset.revision)
    except OSError as error:  # datasets' ConnectionError offline, DatasetNotFoundError without the network
        raise ValueError(
            f"preset {kind}:{name} loads {preset.path} from the Hugging Face Hub, which failed "
            f"({' '.join(str(error).split())[:160]}); connect to the Hub (and unset HF_HUB_OFFLINE), or give a "
            f"local folder {kind}:DIR with {SPLIT_FILES['train']} and {SPLIT_FILES['validation']}."
        ) from error
    label_names = preset_label_names(kind, loaded["train"], preset)
    splits = {
        split: our_columns(loaded[split], preset)
        for split in {"train", preset.test_split, preset.validation_split} - {None}
    }
    train, validation = splits["train"], splits.get(preset.validation_split)
    if validation is None:
        held_out = train.train_test_split(test_size=HELD_OUT_FRACTION, seed=HELD_OUT_SEED)
        train, validation = held_out["train"], held_out["test"]
    return Task(kind, name, name, train, validation, splits[preset.test_split], label_names)


def our_columns(dataset: datasets.Dataset, preset: Preset) -> datasets.Dataset:
    if preset.convert is not None:
        return dataset.map(preset.convert, batched=True, remove_columns=dataset.column_names)
    dataset = dataset.select_columns(list(preset.columns.values()))
    return dataset.rename_columns({theirs: ours for ours, theirs in preset.columns.items() if theirs != ours})


def preset_label_names(kind: str, train: datasets.Dataset, preset: Preset) -> list[str] | None:
    if kind not in LABEL_COLUMN:
        return None
    feature = train.features[preset.columns[LABEL_COLUMN[kind]]]
    return list((feature.feature if kind == "tc" else feature).names)
