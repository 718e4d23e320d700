"""Evaluation metrics from scikit-learn and seqeval, which compute offline (`evaluate.load` needs the network).

Key names follow `evaluate`'s glue, squad, squad_v2 and seqeval metrics, so the numbers and `Trainer` logs read the
same as `run_glue.py` / `run_qa.py` / `run_ner.py` output. Only SQuAD's scoring is written here: its official script
is not a library.
"""

import re
import string
import warnings
from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from seqeval.metrics.sequence_labeling import precision_recall_fscore_support as entity_precision_recall_f1
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
from transformers import EvalPrediction


def accuracy(predictions: ArrayLike, references: ArrayLike) -> float:
    predictions, references = _paired(predictions, references)
    return float(accuracy_score(references, predictions))


def f1(predictions: ArrayLike, references: ArrayLike, *, average: str = "binary", positive_label=1) -> float:
    """F1 of `positive_label` ("binary"), or the unweighted mean over every label seen ("macro").

    A label that is predicted or true but never both scores 0 (zero_division=0).
    """
    predictions, references = _paired(predictions, references)
    if average == "binary":
        # scikit-learn's "binary" refuses a third label; the F1 of one label is defined whatever the others are.
        return float(f1_score(references, predictions, labels=[positive_label], average="micro", zero_division=0))
    if average == "macro":
        return float(f1_score(references, predictions, average="macro", zero_division=0))
    raise ValueError(f"average={average!r}; use 'binary' or 'macro'.")


def matthews_correlation(predictions: ArrayLike, references: ArrayLike) -> float:
    """Matthews correlation coefficient in its multi-class form (Gorodkin's R_K); 0 where undefined."""
    predictions, references = _paired(predictions, references)
    with warnings.catch_warnings():
        # One label on both sides leaves MCC undefined (0 here, as in scikit-learn); its confusion-matrix shape
        # warning adds nothing to that.
        warnings.filterwarnings("ignore", "A single label was found", UserWarning)
        return float(matthews_corrcoef(references, predictions))


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


def entity_f1(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """Entity-level micro "precision", "recall" and "f1" over sentences of IOB tags, as seqeval's default mode
    computes them for `run_ner.py`: an entity counts when its type and both ends match. 0 where undefined.

    A tag without a "B-"/"I-" prefix ("PER", or an integer id's name) is read as "I-" of that type, so plain IO tags
    chunk runs of one type (seqeval would split "PER" into the prefix "P" and the type "ER")."""
    if len(predictions) != len(references) or not predictions:
        raise ValueError(f"need one reference tag list per prediction; got {len(references)} for {len(predictions)}.")
    for sentence, (predicted_tags, true_tags) in enumerate(zip(predictions, references)):
        if len(predicted_tags) != len(true_tags):
            raise ValueError(
                f"sentence {sentence} has {len(predicted_tags)} predicted tags for {len(true_tags)} words."
            )
    precision, recall, f1_score, _ = entity_precision_recall_f1(
        _iob_sentences(references), _iob_sentences(predictions), average="micro", zero_division=0
    )
    return {"precision": float(precision), "recall": float(recall), "f1": float(f1_score)}


def classification_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
    """A `Trainer` `compute_metrics` for any classification head: accuracy, macro F1 and MCC."""
    # Models that return more than logits hand Trainer a tuple whose first item is the logits.
    logits = eval_prediction.predictions
    predictions = np.argmax(logits[0] if isinstance(logits, tuple) else logits, axis=-1)
    labels = eval_prediction.label_ids
    return {
        "accuracy": accuracy(predictions, labels),
        "f1_macro": f1(predictions, labels, average="macro"),
        "matthews_correlation": matthews_correlation(predictions, labels),
    }


_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _paired(predictions: ArrayLike, references: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    predictions, references = np.asarray(predictions).ravel(), np.asarray(references).ravel()
    if len(predictions) != len(references) or len(predictions) == 0:
        raise ValueError(
            f"need as many predictions as references, at least one; got {len(predictions)} and {len(references)}."
        )
    return predictions, references


def _iob_sentences(sentences: Sequence[Sequence[str]]) -> list[list[str]]:
    return [[tag if tag == "O" or tag[:2] in ("B-", "I-") else f"I-{tag}" for tag in tags] for tags in sentences]


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
