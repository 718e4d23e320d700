"""`KIND:SOURCE` tasks of `hf-encoders evaluate`: local folders of JSON lines and the paper's presets (their Hub data
sets replaced by small local `DatasetDict`s of the same shape), and every bad input as one line naming the fix."""

import datasets
import pytest

from hf_encoders.evaluation import tasks
from hf_encoders.evaluation.tasks import KINDS, PRESETS, load_task, parse_task
from tests.task_folders import write_split_files

SC_ROWS = {
    "train": [
        {"text": "a good film", "label": "positive"},
        {"text": "a dull film", "label": "negative"},
        {"text": "fine acting", "label": "positive", "extra": 1},
    ],
    "validation": [{"text": "so dull", "label": "negative"}, {"text": "neutral", "label": "neutral"}],
}
TC_ROWS = {
    "train": [{"tokens": ["anna", "lives", "in", "paris"], "tags": ["B-PER", "O", "O", "B-LOC"]}],
    "validation": [{"tokens": ["john", "smith"], "tags": ["B-PER", "I-PER"]}],
    "test": [{"tokens": ["rome"], "tags": ["B-LOC"]}],
}
QA_ROW = {
    "question": "where",
    "context": "the cat sat on the mat",
    "answers": {"text": ["the mat"], "answer_start": [15]},
}
QA_ROWS = {
    "train": [QA_ROW],
    "validation": [{**QA_ROW, "answers": {"text": [], "answer_start": []}}],
}
IR_ROWS = {
    "train": [{"query": "cats", "positive": "cats sit on mats", "negative": "dogs run"}],
    "validation": [{"query": "dogs", "positive": "dogs run", "negative": "cats sit on mats"}],
}


def test_parse_task():
    assert parse_task("sc:some/folder") == ("sc", "some/folder")
    assert parse_task("qa:C:/data") == ("qa", "C:/data")


@pytest.mark.parametrize("spec", ["xx:sst2", "SC:sst2"])
def test_unknown_kind_names_the_kinds(spec):
    with pytest.raises(ValueError, match=f"KIND '{spec.split(':')[0]}' does not exist; use one of sc, tc, qa, ir"):
        load_task(spec)


@pytest.mark.parametrize("spec", ["sst2", "sc:"])
def test_a_spec_without_kind_and_source_is_refused(spec):
    with pytest.raises(ValueError, match="is not KIND:SOURCE"):
        parse_task(spec)


def test_sc_folder_maps_sorted_string_labels_to_ids(tmp_path):
    task = load_task(f"sc:{write_split_files(tmp_path / 'reviews', SC_ROWS)}")
    assert (task.kind, task.name, task.test) == ("sc", "reviews", None)
    assert task.label_names == ["negative", "neutral", "positive"]
    assert task.train["label"] == [2, 0, 2]
    assert task.validation["label"] == [0, 1]
    assert task.train.column_names == ["text", "label"]  # our columns only, no text_pair where none was given


def test_sc_folder_with_integer_labels_and_pairs(tmp_path):
    rows = {
        "train": [{"text": "a", "text_pair": "b", "label": 2}, {"text": "c", "text_pair": "d", "label": 0}],
        "validation": [{"text": "e", "text_pair": "f", "label": 1}],
    }
    task = load_task(f"sc:{write_split_files(tmp_path / 'pairs', rows)}")
    assert task.label_names == ["0", "1", "2"]
    assert task.train["label"] == [2, 0]
    assert task.validation["text_pair"] == ["f"]


def test_tc_qa_and_ir_folders(tmp_path):
    tc = load_task(f"tc:{write_split_files(tmp_path / 'ner', TC_ROWS)}")
    assert tc.label_names == ["B-LOC", "B-PER", "I-PER", "O"]
    assert tc.train["tags"] == [[1, 3, 3, 0]]
    assert tc.test["tokens"] == [["rome"]]
    qa = load_task(f"qa:{write_split_files(tmp_path / 'qa', QA_ROWS)}")
    assert qa.label_names is None
    assert qa.train[0]["answers"] == {"text": ["the mat"], "answer_start": [15]}
    assert qa.validation[0]["answers"] == {"text": [], "answer_start": []}
    ir = load_task(f"ir:{write_split_files(tmp_path / 'ir', IR_ROWS)}")
    assert ir.validation["negative"] == ["cats sit on mats"]


@pytest.mark.parametrize("missing", ["train", "validation"])
def test_a_folder_without_a_split_file_names_it(tmp_path, missing):
    folder = write_split_files(tmp_path / "reviews", {k: v for k, v in SC_ROWS.items() if k != missing})
    with pytest.raises(ValueError, match=f"task folder .*reviews has no {missing}.jsonl; write the {missing} examples"):
        load_task(f"sc:{folder}")


def test_a_missing_column_names_the_file_line_and_column(tmp_path):
    rows = {**SC_ROWS, "validation": [{"text": "so dull", "label": "negative"}, {"text": "no label"}]}
    folder = write_split_files(tmp_path / "reviews", rows)
    with pytest.raises(ValueError, match=r"validation\.jsonl:2 has no column 'label'; every line of a sc task needs"):
        load_task(f"sc:{folder}")


def test_an_optional_column_on_some_lines_only_is_refused(tmp_path):
    rows = {**SC_ROWS, "validation": [{"text": "a", "label": "negative", "text_pair": "b"}]}
    with pytest.raises(ValueError, match=r"validation\.jsonl:1 has column 'text_pair', but the first line"):
        load_task(f"sc:{write_split_files(tmp_path / 'reviews', rows)}")


@pytest.mark.parametrize("kind", ["sc", "tc"])
def test_labels_of_mixed_types_are_refused(tmp_path, kind):
    if kind == "sc":
        rows = {**SC_ROWS, "validation": [{"text": "so dull", "label": 0}]}
    else:
        rows = {**TC_ROWS, "test": [{"tokens": ["rome"], "tags": [1]}]}
    column = tasks.LABEL_COLUMN[kind]
    with pytest.raises(
        ValueError, match=rf"'{column}' mixes types: .*jsonl:1 has an integer, .*train\.jsonl:1 a string"
    ):
        load_task(f"{kind}:{write_split_files(tmp_path / 'mixed', rows)}")


@pytest.mark.parametrize(
    ("kind", "row", "message"),
    [
        ("tc", {"tokens": ["a", "b"], "tags": ["O"]}, "'tags' has 1 tags for 2 tokens"),
        ("tc", {"tokens": "a b", "tags": ["O"]}, "'tokens' must be a list of words"),
        ("sc", {"text": "a", "label": 1.5}, "'label' is 1.5; write an integer or a string"),
        ("qa", {**QA_ROW, "answers": {"text": ["mat"], "answer_start": [3]}}, "answer 'mat' is not at answer_start 3"),
        ("ir", {"query": "q", "positive": ["p"]}, "'query', 'positive' and 'negative' must be strings"),
    ],
)
def test_bad_values_name_the_line(tmp_path, kind, row, message):
    folder = write_split_files(tmp_path / "bad", {"train": [row], "validation": [row]})
    with pytest.raises(ValueError, match=rf"train\.jsonl:1: {message}"):
        load_task(f"{kind}:{folder}")


def test_a_line_that_is_not_json_is_named(tmp_path):
    folder = write_split_files(tmp_path / "bad", SC_ROWS)
    (folder / "train.jsonl").write_text('{"text": "a", "label": 0}\n\n{"text": "b", label: 1}\n')
    with pytest.raises(ValueError, match=r"train\.jsonl:3 is not JSON"):
        load_task(f"sc:{folder}")


def test_an_unknown_preset_lists_the_presets_of_its_kind():
    with pytest.raises(ValueError, match=r"'sst3' is neither a folder nor a sc preset; .* sc:sst2, sc:mnli, sc:qqp"):
        load_task("sc:sst3")


def test_a_preset_of_another_kind_is_refused():
    with pytest.raises(ValueError, match=r"'sst2' is neither a folder nor a tc preset; .* tc:conll2003"):
        load_task("tc:sst2")


def test_a_preset_offline_says_it_needs_the_hub_or_a_local_folder(monkeypatch, tmp_path):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    with pytest.raises(
        ValueError, match=r"preset sc:sst2 loads nyu-mll/glue from the Hugging Face Hub, which failed"
    ) as error:
        load_task("sc:sst2")
    assert "or give a local folder sc:DIR with train.jsonl and validation.jsonl" in str(error.value)
    assert "\n" not in str(error.value)


def fake_hub(monkeypatch, splits: dict[str, datasets.Dataset]):
    """datasets.load_dataset answering with these splits, recording what it was asked for."""
    calls = []

    def load_dataset(path, name=None, revision=None):
        calls.append((path, name, revision))
        return datasets.DatasetDict(splits)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_sst2_preset_holds_out_5_percent_of_train_and_reports_the_official_validation(monkeypatch):
    features = datasets.Features(
        {
            "sentence": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["negative", "positive"]),
            "idx": datasets.Value("int32"),
        }
    )
    rows = [{"sentence": f"s{i}", "label": i % 2, "idx": i} for i in range(100)]
    calls = fake_hub(
        monkeypatch,
        {
            "train": datasets.Dataset.from_list(rows, features=features),
            "validation": datasets.Dataset.from_list(rows[:7], features=features),
        },
    )
    task = load_task("sc:sst2")
    assert calls == [("nyu-mll/glue", "sst2", None)]
    assert (task.name, task.label_names) == ("sst2", ["negative", "positive"])
    assert (len(task.train), len(task.validation), len(task.test)) == (95, 5, 7)
    assert set(task.train.column_names) == {"text", "label"}
    assert set(task.train["text"]).isdisjoint(task.validation["text"])
    assert load_task("sc:sst2").validation["text"] == task.validation["text"]  # the same held-out set every run


def test_conll2003_preset_keeps_its_splits_and_tag_names(monkeypatch):
    names = ["O", "B-PER", "I-PER"]
    features = datasets.Features(
        {"tokens": datasets.List(datasets.Value("string")), "ner_tags": datasets.List(datasets.ClassLabel(names=names))}
    )
    split = datasets.Dataset.from_list([{"tokens": ["john", "smith"], "ner_tags": [1, 2]}], features=features)
    calls = fake_hub(monkeypatch, {"train": split, "validation": split, "test": split})
    task = load_task("tc:conll2003")
    assert calls == [("eriktks/conll2003", "conll2003", "refs/convert/parquet")]
    assert task.label_names == names
    assert task.test["tags"] == [[1, 2]]
    assert set(task.validation.column_names) == {"tokens", "tags"}


def test_msmarco_preset_builds_query_positive_negative(monkeypatch):
    passages = [
        {"is_selected": [0, 1, 0], "passage_text": ["no", "yes", "neither"], "url": ["u"] * 3},
        {"is_selected": [0, 0], "passage_text": ["a", "b"], "url": ["u"] * 2},  # no positive: dropped
    ]
    rows = [{"query": f"q{i}", "passages": passages[i % 2], "query_id": i} for i in range(40)]
    fake_hub(monkeypatch, {"train": datasets.Dataset.from_list(rows), "validation": datasets.Dataset.from_list(rows)})
    task = load_task("ir:msmarco")
    assert task.test[0] == {"query": "q0", "positive": "yes", "negative": "no"}
    assert len(task.test) == 20 and len(task.train) + len(task.validation) == 20


def test_every_preset_has_a_known_kind_and_maps_our_columns():
    for name, preset in PRESETS.items():
        assert preset.kind in KINDS, name
        required, optional = tasks.COLUMNS[preset.kind]
        assert preset.convert or set(required) <= set(preset.columns) <= set(required) | set(optional), name
