"""Evaluation metrics computed offline with numpy (`evaluate.load` needs the network).

Definitions and key names follow `evaluate`'s glue, squad, squad_v2 and seqeval metrics, so the numbers and
`Trainer` logs read the same as `run_glue.py` / `run_qa.py` / `run_ner.py` output.
"""

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike
from transformers import EvalPrediction


def accuracy(predictions: ArrayLike, references: ArrayLike) -> float:
    predictions, references = _paired(predictions, references)
    return float(np.mean(predictions == references))


def f1(predictions: ArrayLike, references: ArrayLike, *, average: str = "binary", positive_label=1) -> float:
    """F1 of `positive_label` ("binary"), or the unweighted mean over every label seen ("macro").

    A label that is predicted or true but never both scores 0, as in scikit-learn with zero_division=0.
    """
    predictions, references = _paired(predictions, references)
    if average == "binary":
        return _label_f1(predictions, references, positive_label)
    if average == "macro":
        labels = np.union1d(predictions, references)
        return float(np.mean([_label_f1(predictions, references, label) for label in labels]))
    raise ValueError(f"average={average!r}; use 'binary' or 'macro'.")


def matthews_correlation(predictions: ArrayLike, references: ArrayLike) -> float:
    """Matthews correlation coefficient in its multi-class form (Gorodkin's R_K); 0 where undefined."""
    predictions, references = _paired(predictions, references)
    labels, label_indices = np.unique(np.concatenate([predictions, references]), return_inverse=True)
    confusion = np.zeros((len(labels), len(labels)))
    np.add.at(confusion, (label_indices[len(predictions) :], label_indices[: len(predictions)]), 1)
    samples, correct = confusion.sum(), np.trace(confusion)
    predicted_per_label, true_per_label = confusion.sum(axis=0), confusion.sum(axis=1)
    covariance = correct * samples - true_per_label @ predicted_per_label
    predicted_spread = samples**2 - predicted_per_label @ predicted_per_label
    true_spread = samples**2 - true_per_label @ true_per_label
    scale = np.sqrt(predicted_spread * true_spread)
    return float(covariance / scale) if scale else 0.0


def pearson(predictions: ArrayLike, references: ArrayLike) -> float:
    """Pearson correlation; NaN when either side is constant, where it is undefined (as in scipy)."""
    predictions, references = _paired(predictions, references, dtype=float)
    x, y = predictions - predictions.mean(), references - references.mean()
    scale = np.sqrt((x @ x) * (y @ y))
    return float(x @ y / scale) if scale else float("nan")


def spearman(predictions: ArrayLike, references: ArrayLike) -> float:
    """Spearman rank correlation: Pearson on ranks, tied values sharing their average rank."""
    predictions, references = _paired(predictions, references, dtype=float)
    return pearson(_average_ranks(predictions), _average_ranks(references))


def normalize_squad_answer(text: str) -> str:
    """The official SQuAD v1.1 normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_metrics(predictions: Sequence[str], gold_answers: Sequence[Sequence[str]]) -> dict[str, float]:
    """SQuAD v1.1 "exact_match" and "f1" in percent, each the best over a question's gold answers."""
    if len(predictions) != len(gold_answers) or not all(gold_answers):
        raise ValueError(
            f"need a non-empty list of gold answers per prediction; got {len(gold_answers)} lists "
            f"for {len(predictions)} predictions."
        )
    questions = list(zip(predictions, gold_answers))
    exact_match = [max(_squad_exact_match(prediction, gold) for gold in golds) for prediction, golds in questions]
    overlap_f1 = [max(_squad_f1(prediction, gold) for gold in golds) for prediction, golds in questions]
    return {"exact_match": 100 * float(np.mean(exact_match)), "f1": 100 * float(np.mean(overlap_f1))}


def squad_v2_metrics(predictions: Sequence[str], gold_answers: Sequence[Sequence[str]]) -> dict[str, float]:
    """SQuAD v2.0 "exact_match" and "f1" in percent: as `squad_metrics`, where a question whose gold answers are
    empty (after normalisation) is unanswerable and scores 100 exactly when the prediction is empty too."""
    if len(predictions) != len(gold_answers) or not predictions:
        raise ValueError(
            f"need one list of gold answers per prediction; got {len(gold_answers)} for {len(predictions)}."
        )
    exact_match, overlap_f1 = [], []
    for prediction, golds in zip(predictions, gold_answers):
        golds = [gold for gold in golds if normalize_squad_answer(gold)]
        if golds:
            exact_match.append(max(_squad_exact_match(prediction, gold) for gold in golds))
            overlap_f1.append(max(_squad_f1(prediction, gold) for gold in golds))
        else:
            abstained = float(not normalize_squad_answer(prediction))
            exact_match.append(abstained)
            overlap_f1.append(abstained)
    return {"exact_match": 100 * float(np.mean(exact_match)), "f1": 100 * float(np.mean(overlap_f1))}


def entity_spans(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The entities of one sentence's IOB or IOB2 tags, as (type, first, last) word positions, chunked as seqeval's
    default mode does: "B-X" starts an entity, "I-X" continues one of type X or starts one (after "O" or another
    type, as IOB1 allows), "O" is outside. A tag without a "B-"/"I-" prefix ("PER", or an integer id's name) is
    read as "I-" of that type, so plain IO tags chunk runs of one type."""
    spans, start, current = set(), 0, None
    for position, tag in enumerate([*tags, "O"]):
        prefix, entity_type = _iob_parts(tag)
        continues = prefix == "I" and entity_type == current
        if current is not None and not continues:
            spans.add((current, start, position - 1))
            current = None
        if entity_type is not None and not continues:
            start, current = position, entity_type
    return spans


def entity_f1(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """Entity-level micro "precision", "recall" and "f1" over sentences of IOB tags (seqeval's default mode, as
    `run_ner.py` reports them): an entity counts when its type and both ends match. 0 where undefined."""
    if len(predictions) != len(references) or not predictions:
        raise ValueError(f"need one reference tag list per prediction; got {len(references)} for {len(predictions)}.")
    predicted = true = correct = 0
    for sentence, (predicted_tags, true_tags) in enumerate(zip(predictions, references)):
        if len(predicted_tags) != len(true_tags):
            raise ValueError(
                f"sentence {sentence} has {len(predicted_tags)} predicted tags for {len(true_tags)} words."
            )
        predicted_spans, true_spans = entity_spans(predicted_tags), entity_spans(true_tags)
        predicted, true, correct = (
            predicted + len(predicted_spans),
            true + len(true_spans),
            correct + len(predicted_spans & true_spans),
        )
    precision = correct / predicted if predicted else 0.0
    recall = correct / true if true else 0.0
    f1_score = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1_score}


# What GLUE reports per task, under `evaluate`'s key names; a task not listed reports accuracy.
GLUE_TASKS = ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "mnli_matched", "mnli_mismatched", "qnli", "rte", "wnli")
_GLUE_METRICS = {
    "cola": {"matthews_correlation": matthews_correlation},
    "stsb": {"pearson": pearson, "spearmanr": spearman},
    "mrpc": {"accuracy": accuracy, "f1": f1},
    "qqp": {"accuracy": accuracy, "f1": f1},
}


def glue_metrics(task_name: str) -> Callable[[EvalPrediction], dict[str, float]]:
    """A `Trainer` `compute_metrics` that reports what GLUE reports for `task_name` (e.g. "cola", "stsb")."""
    if task_name not in GLUE_TASKS:
        raise ValueError(f"unknown GLUE task {task_name!r}; use one of {', '.join(GLUE_TASKS)}.")
    metrics = _GLUE_METRICS.get(task_name, {"accuracy": accuracy})
    is_regression = task_name == "stsb"

    def compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
        predictions = _predictions(eval_prediction, is_regression)
        return {name: metric(predictions, eval_prediction.label_ids) for name, metric in metrics.items()}

    return compute_metrics


def classification_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
    """A `Trainer` `compute_metrics` for any classification head: accuracy, macro F1 and MCC."""
    predictions, labels = _predictions(eval_prediction, is_regression=False), eval_prediction.label_ids
    return {
        "accuracy": accuracy(predictions, labels),
        "f1_macro": f1(predictions, labels, average="macro"),
        "matthews_correlation": matthews_correlation(predictions, labels),
    }


_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _paired(predictions: ArrayLike, references: ArrayLike, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    predictions = np.asarray(predictions, dtype=dtype).ravel()
    references = np.asarray(references, dtype=dtype).ravel()
    if len(predictions) != len(references) or len(predictions) == 0:
        raise ValueError(
            f"need as many predictions as references, at least one; got {len(predictions)} and {len(references)}."
        )
    return predictions, references


def _label_f1(predictions: np.ndarray, references: np.ndarray, label) -> float:
    true_positives = np.sum((predictions == label) & (references == label))
    predicted_plus_true = np.sum(predictions == label) + np.sum(references == label)
    return float(2 * true_positives / predicted_plus_true) if predicted_plus_true else 0.0


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts_tie_group = np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]])
    group_starts = np.flatnonzero(starts_tie_group)
    group_ends = np.append(group_starts[1:], len(values))
    # A group at sorted positions start..end-1 holds the 1-based ranks start+1..end, averaging (start+end+1)/2.
    group_ranks = (group_starts + group_ends + 1) / 2
    ranks = np.empty(len(values))
    ranks[order] = group_ranks[np.cumsum(starts_tie_group) - 1]
    return ranks


def _iob_parts(tag: str) -> tuple[str, str | None]:
    """("B" or "I", entity type), or ("O", None) outside an entity."""
    if tag == "O":
        return "O", None
    if tag[:2] in ("B-", "I-"):
        return tag[0], tag[2:]
    return "I", tag


def _squad_exact_match(prediction: str, gold: str) -> float:
    return float(normalize_squad_answer(prediction) == normalize_squad_answer(gold))


def _squad_f1(prediction: str, gold: str) -> float:
    prediction_tokens = normalize_squad_answer(prediction).split()
    gold_tokens = normalize_squad_answer(gold).split()
    common = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(prediction_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _predictions(eval_prediction: EvalPrediction, is_regression: bool) -> np.ndarray:
    # Models that return more than logits hand Trainer a tuple whose first item is the logits.
    logits = eval_prediction.predictions
    logits = logits[0] if isinstance(logits, tuple) else logits
    return np.asarray(logits) if is_regression else np.argmax(logits, axis=-1)
