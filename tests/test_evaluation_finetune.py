"""One fine-tuning run of the protocol of Gisserot-Boukhlef et al. (2025) (`hf_encoders.evaluation.finetune`): SC, TC and QA on small local task
folders, on a tiny MAE-LM, a tiny biphasic encoder (a tokenizer without [CLS]) and a tiny stock BERT; scores against
computations that do not go through the run (the saved model's own predictions, hand-written tags, hand-built
logits)."""

import json
import math

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer

from hf_encoders import BiphasicEncoderForPreTraining, TaclForPreTraining
from hf_encoders.evaluation.finetune import (
    QaWindows,
    QuestionAnswering,
    RunSettings,
    answer_texts,
    fine_tune,
    first_subtoken_labels,
    pooling_of,
)
from hf_encoders.evaluation.tasks import load_task
from hf_encoders.metrics import entity_f1, squad_v2_metrics
from tests.task_folders import SPLIT_SIZES, write_task_folders
from tests.tiny_models import (
    save_tiny_bert,
    save_tiny_mae_lm,
    tiny_biphasic_config,
    tiny_tacl_config,
    tiny_tokenizer,
)

pytestmark = pytest.mark.usefixtures("one_thread")

BATCH = 8
SETTINGS = dict(learning_rate=1e-3, seed=0, batch_size=BATCH, max_length=64, training_overrides={"use_cpu": True})


@pytest.fixture(scope="module")
def task_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("tasks")
    write_task_folders(root)
    return root


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoints")
    torch.manual_seed(0)
    save_tiny_mae_lm(root / "mae_lm")
    BiphasicEncoderForPreTraining(tiny_biphasic_config(classifier_pooling="cls")).save_pretrained(root / "biphasic")
    tiny_tokenizer("llama").save_pretrained(root / "biphasic")
    TaclForPreTraining(tiny_tacl_config()).save_pretrained(root / "tacl")
    return {
        "mae_lm": str(root / "mae_lm"),
        "biphasic": str(root / "biphasic"),
        "bert": save_tiny_bert(root / "bert"),
        "tacl": str(root / "tacl"),
    }


def qa_windows(model_path, task):
    """How many windows run_qa.py's tokenization makes of the training set: question first, context truncated
    with a quarter of max_length as stride."""
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    encoded = tokenizer(
        list(task.train["question"]),
        list(task.train["context"]),
        truncation="only_second",
        max_length=64,
        stride=16,
        return_overflowing_tokens=True,
    )
    return len(encoded["input_ids"])


def predicted_labels(model_class, folder, encoded) -> np.ndarray:
    model = model_class.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(**encoded).logits.argmax(-1).numpy()


@pytest.mark.parametrize("model_type", ["mae_lm", "biphasic", "bert"])
def test_sc_run_scores_what_the_saved_model_predicts(model_type, checkpoints, task_folders, tmp_path):
    task = load_task(f"sc:{task_folders / 'sc'}")
    result = fine_tune(checkpoints[model_type], task, RunSettings(**SETTINGS), tmp_path)
    assert result["steps"] == math.ceil(SPLIT_SIZES["train"] / BATCH)  # one epoch is fewer than max_steps
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    encoded = tokenizer(list(task.validation["text"]), padding=True, return_tensors="pt")
    predicted = predicted_labels(AutoModelForSequenceClassification, tmp_path, encoded)
    labels = np.asarray(task.validation["label"])
    true_positives = np.sum((predicted == 1) & (labels == 1))
    precision_recall_sum = np.sum(predicted == 1) + np.sum(labels == 1)
    assert result["validation"]["accuracy"] == pytest.approx(np.mean(predicted == labels))
    assert result["validation"]["f1"] == pytest.approx(
        2 * true_positives / precision_recall_sum if true_positives else 0
    )
    assert set(result["test"]) == {"accuracy", "f1", "matthews_correlation"}
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["id2label"] == {"0": "even", "1": "odd"}
    if model_type == "biphasic":
        assert config["classifier_pooling"] == "mean"  # the paper's pooling, over the checkpoint's "cls"


@pytest.mark.parametrize("model_type", ["mae_lm", "biphasic", "bert"])
def test_tc_run_scores_entities_of_first_sub_token_predictions(model_type, checkpoints, task_folders, tmp_path):
    task = load_task(f"tc:{task_folders / 'tc'}")
    result = fine_tune(checkpoints[model_type], task, RunSettings(**SETTINGS, max_steps=2), tmp_path)
    assert result["steps"] == 2  # max_steps is fewer than the epoch's 3
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    encoded = tokenizer(list(task.validation["tokens"]), is_split_into_words=True, padding=True, return_tensors="pt")
    predicted = predicted_labels(AutoModelForTokenClassification, tmp_path, encoded)
    predicted_tags = []
    for row, tokens in enumerate(task.validation["tokens"]):
        first_positions = [encoded.word_ids(row).index(word) for word in range(len(tokens))]
        predicted_tags.append([task.label_names[predicted[row, position]] for position in first_positions])
    true_tags = [[task.label_names[tag] for tag in tags] for tags in task.validation["tags"]]
    assert result["validation"] == pytest.approx(
        {
            **entity_f1(predicted_tags, true_tags),
            "accuracy": np.mean(np.concatenate(predicted_tags) == np.concatenate(true_tags)),
        }
    )
    assert set(result["test"]) == {"precision", "recall", "f1", "accuracy"}


@pytest.mark.parametrize("model_type", ["mae_lm", "biphasic", "bert"])
def test_qa_run_trains_on_answer_spans_and_scores_squad_v2(model_type, checkpoints, task_folders, tmp_path):
    task = load_task(f"qa:{task_folders / 'qa'}")
    result = fine_tune(checkpoints[model_type], task, RunSettings(**SETTINGS), tmp_path)
    assert result["steps"] == math.ceil(qa_windows(checkpoints[model_type], task) / BATCH)
    for split in ("validation", "test"):
        assert set(result[split]) == {"exact_match", "f1"}
        assert 0 <= result[split]["exact_match"] <= result[split]["f1"] <= 100


@pytest.mark.parametrize("model_type", ["biphasic", "bert"])
def test_qa_training_positions_point_at_the_answer(model_type, checkpoints, task_folders):
    task = load_task(f"qa:{task_folders / 'qa'}")
    tokenizer = AutoTokenizer.from_pretrained(checkpoints[model_type])
    recipe = QuestionAnswering(task, tokenizer, max_length=64)
    features = recipe.train_features(task.train)
    example_of_window = recipe.windows(task.train[:])["overflow_to_sample_mapping"]
    no_answer = 0  # BERT's [CLS] opens every window; the biphasic tokenizer has no [CLS], so position 0 stands in
    pointed = 0
    for window, example in enumerate(example_of_window):
        start, end = features[window]["start_positions"], features[window]["end_positions"]
        answers = task.train[example]["answers"]["text"]
        if (start, end) == (no_answer, no_answer):
            continue
        pointed += 1
        assert tokenizer.decode(features[window]["input_ids"][start : end + 1]) == answers[0]
    assert pointed >= sum(1 for answers in task.train["answers"] if answers["text"]) > 0


def test_a_question_longer_than_the_window_is_cut_to_half_of_it(checkpoints, task_folders):
    """A question of 100 tokens in windows of 64 (stride 16) made tokenizers panic; it keeps its first 32 tokens and
    every window still reaches the answer's context."""
    task = load_task(f"qa:{task_folders / 'qa'}")
    tokenizer = AutoTokenizer.from_pretrained(checkpoints["bert"])
    recipe = QuestionAnswering(task, tokenizer, max_length=64)
    long_question = " ".join(["w7 w8"] * 50)
    batch = {"question": [long_question], "context": [task.train[0]["context"]]}
    windows = recipe.windows(batch)
    question_tokens = [sum(1 for s in windows.sequence_ids(w) if s == 0) for w in range(len(windows["input_ids"]))]
    assert question_tokens == [32] * len(question_tokens)
    first_32 = tokenizer(long_question, add_special_tokens=False)["input_ids"][:32]
    assert windows["input_ids"][0][1:33] == first_32
    context_ids = tokenizer(task.train[0]["context"], add_special_tokens=False)["input_ids"]
    seen = [
        i
        for w in range(len(question_tokens))
        for i, s in zip(windows["input_ids"][w], windows.sequence_ids(w))
        if s == 1
    ]
    assert set(seen) == set(context_ids)


def test_a_checkpoint_without_the_head_is_refused(checkpoints, task_folders, tmp_path):
    task = load_task(f"sc:{task_folders / 'sc'}")
    with pytest.raises(
        ValueError, match=r"'.*tacl' \(tacl\) has no sequence classification head: .*hf-encoders export"
    ):
        fine_tune(checkpoints["tacl"], task, RunSettings(**SETTINGS), tmp_path)


def test_pooling_of_each_model_type(checkpoints):
    assert pooling_of(checkpoints["biphasic"]) == "mean pooling (Gisserot-Boukhlef et al., 2025)"
    assert pooling_of(checkpoints["bert"]) == "the model's own head ([CLS] pooler)"
    assert pooling_of(checkpoints["mae_lm"]) == "the model's own head (first token, dense + tanh)"


def test_first_sub_token_labels():
    # "anna" "lives" "constantinople": the last word in three sub-tokens, [CLS] and [SEP] around them
    assert first_subtoken_labels([None, 0, 1, 2, 2, 2, None], [5, 0, 7]) == [-100, 5, 0, 7, -100, -100, -100]


# ---- metrics on hand-written cases ----


@pytest.mark.parametrize(
    ("tags", "iob2_tags"),
    [
        (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),
        # IOB1: I- after O or another type starts an entity; B- only separates two of one type.
        (["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"], ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"]),
        (["B-PER", "I-LOC", "I-LOC"], ["B-PER", "B-LOC", "I-LOC"]),
        # Plain tags (no prefix) chunk runs of one type, whatever their spelling.
        (["PER", "PER", "O", "LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),
        (["WORK_OF-ART", "WORK_OF-ART"], ["B-WORK_OF-ART", "I-WORK_OF-ART"]),
    ],
)
def test_entities_chunk_iob1_iob2_and_plain_tags_alike(tags, iob2_tags):
    assert entity_f1([tags], [iob2_tags]) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    split = ["B-" + tag.removeprefix("I-").removeprefix("B-") if tag != "O" else tag for tag in iob2_tags]
    if split != iob2_tags:  # every word its own entity: a multi-word entity no longer matches
        assert entity_f1([tags], [split])["f1"] < 1


def test_entity_f1_by_hand():
    references = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "I-ORG", "O", "B-PER"]]
    predictions = [["B-PER", "I-PER", "O", "B-PER"], ["B-ORG", "I-ORG", "O", "O", "B-PER"]]
    # true: PER 0-1, LOC 3, ORG 0-2, PER 4; predicted: PER 0-1, PER 3, ORG 0-1, PER 4; right: PER 0-1 and PER 4
    assert entity_f1(predictions, references) == pytest.approx({"precision": 0.5, "recall": 0.5, "f1": 0.5})
    assert entity_f1([["O"]], [["O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    # entities predicted where there are none: precision 0, recall undefined (0)
    assert entity_f1([["B-PER", "O"]], [["O", "O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    with pytest.raises(ValueError, match="sentence 0 has 1 predicted tags for 2 words"):
        entity_f1([["O"]], [["O", "O"]])


def test_squad_v2_metrics_by_hand():
    predictions = ["", "the mat", "", "cat", "on a mat"]
    # an unanswerable question (no gold, or golds that normalise to nothing) scores 100 only for an empty prediction
    gold = [[], ["mat"], ["mat"], ["the"], ["the mat", "sat on the mat"]]
    # exact: 1, 1 (normalised), 0, 0, 0; f1: 1, 1, 0, 0, and "on mat" vs "sat on mat": 2 * (1 * 2/3) / (1 + 2/3)
    scores = squad_v2_metrics(predictions, gold)
    assert scores["exact_match"] == pytest.approx(100 * 2 / 5)
    assert scores["f1"] == pytest.approx(100 * (2 + 0.8) / 5)


# ---- QA post-processing on hand-built logits ----

# Context "red fox jumps high" in two windows of five positions: [CLS] q w w w (overlapping at "jumps").
CONTEXT = "red fox jumps high"
WINDOWS = QaWindows(
    example=[0, 0],
    offsets=[
        [None, None, (0, 3), (4, 7), (8, 13)],
        [None, None, (8, 13), (14, 18), None],
    ],
    null_index=[0, 0],
)


def logits(*values):
    return np.array(values, dtype=float)


def test_the_best_span_over_windows_wins():
    starts = np.stack([logits(0, 9, 1, 2, 0), logits(0, 9, 3, 1, 0)])  # position 1 is the question: never a start
    ends = np.stack([logits(0, 0, 0, 2, 1), logits(0, 0, 1, 4, 9)])  # position 4 of window 2 is padding
    # window 1: best "fox" 2+2=4; window 2: "jumps high" 3+4=7 beats "jumps" 3+1 and "high" 1+4
    assert answer_texts([CONTEXT], WINDOWS, starts, ends, allow_no_answer=False) == ["jumps high"]


# The same context in one window.
ONE_WINDOW = QaWindows(example=[0], offsets=[[None, None, (0, 3), (4, 7), (8, 13)]], null_index=[0])


def test_answers_too_long_reversed_or_outside_the_context_are_skipped():
    starts, ends = logits(0, 0, 5, 0, 1)[None], logits(0, 0, 2, 0, 5)[None]
    # "red fox jumps" 5+5=10 is 3 tokens; within 2 tokens "red" 5+2=7 beats "jumps" 1+5 and "red fox" 5+0
    assert answer_texts([CONTEXT], ONE_WINDOW, starts, ends, allow_no_answer=False) == ["red fox jumps"]
    assert answer_texts([CONTEXT], ONE_WINDOW, starts, ends, allow_no_answer=False, max_answer_tokens=2) == ["red"]
    starts, ends = logits(0, 20, 1, 0, 9)[None], logits(0, 20, 8, 0, 2)[None]
    # the question (position 1) 40 and the reversed "jumps".."red" 9+8 lose to "jumps" 9+2=11
    assert answer_texts([CONTEXT], ONE_WINDOW, starts, ends, allow_no_answer=False) == ["jumps"]


def test_no_answer_wins_when_the_lowest_null_score_beats_the_best_span():
    starts = np.stack([logits(4, 0, 2, 0, 0), logits(1, 0, 3, 0, 0)])
    ends = np.stack([logits(4, 0, 2, 0, 0), logits(1, 0, 3, 0, 0)])
    # best span "jumps" in window 2 (3+3=6) over "red" in window 1 (2+2); null scores 8 and 2: the lowest loses
    assert answer_texts([CONTEXT], WINDOWS, starts, ends, allow_no_answer=True) == ["jumps"]
    starts[1, 0] = ends[1, 0] = 3.5  # now the lowest null score is 7, over the span's 6
    assert answer_texts([CONTEXT], WINDOWS, starts, ends, allow_no_answer=True) == [""]
    assert answer_texts([CONTEXT], WINDOWS, starts, ends, allow_no_answer=False) == ["jumps"]
