"""Offline metrics against hand-worked examples and independent computations (label counts, one-hot covariance).

The definitions are those of the package's own implementations before it delegated to scikit-learn and seqeval
(union of the labels seen, 0 where undefined); the numbers were bit-identical on 580 varied cases when it did.
"""

import warnings

import numpy as np
import pytest
from transformers import EvalPrediction

from hf_encoders.metrics import (
    accuracy,
    classification_metrics,
    f1,
    matthews_correlation,
    normalize_squad_answer,
    squad_metrics,
)

# Confusion: TP=2 (0, 3), FP=1 (1), FN=1 (4), TN=2 (2, 5).
BINARY_PREDICTIONS = [1, 1, 0, 1, 0, 0]
BINARY_REFERENCES = [1, 0, 0, 1, 1, 0]


def test_accuracy():
    assert accuracy(BINARY_PREDICTIONS, BINARY_REFERENCES) == pytest.approx(4 / 6)


def test_binary_f1_by_hand():
    # precision = recall = 2/3
    assert f1(BINARY_PREDICTIONS, BINARY_REFERENCES) == pytest.approx(2 / 3)
    # as the positive class, 0 has TP=2, FP=1 (4), FN=1 (1)
    assert f1(BINARY_PREDICTIONS, BINARY_REFERENCES, positive_label=0) == pytest.approx(2 / 3)


def test_macro_f1_by_hand():
    predictions = [0, 0, 1, 2, 2, 2]
    references = [0, 1, 1, 2, 2, 0]
    # label 0: TP 1, FP 1, FN 1 -> 1/2;  label 1: TP 1, FP 0, FN 1 -> 2/3;  label 2: TP 2, FP 1, FN 0 -> 4/5
    assert f1(predictions, references, average="macro") == pytest.approx((1 / 2 + 2 / 3 + 4 / 5) / 3)


def test_f1_of_a_label_never_predicted_nor_true_is_zero():
    assert f1([0, 0], [0, 0]) == 0.0


def test_binary_f1_of_one_label_among_three():
    # label 1: TP 1 (1), FP 1 (3), FN 1 (0); scikit-learn's average="binary" would refuse the third label
    assert f1([0, 1, 2, 1], [1, 1, 2, 0]) == pytest.approx(1 / 2)


def label_f1(predictions, references, label):
    """F1 of one label from its counts: 2 TP / (predicted + true), 0 where the label is neither."""
    predictions, references = np.asarray(predictions), np.asarray(references)
    true_positives = np.sum((predictions == label) & (references == label))
    predicted_plus_true = np.sum(predictions == label) + np.sum(references == label)
    return 2 * true_positives / predicted_plus_true if predicted_plus_true else 0.0


@pytest.mark.parametrize("num_labels", [2, 5])
def test_f1_matches_the_label_counts(num_labels):
    rng = np.random.default_rng(num_labels)
    references = rng.integers(0, num_labels, size=120)
    predictions = np.where(rng.random(120) < 0.5, references, rng.integers(0, num_labels + 1, size=120))
    labels = np.union1d(predictions, references)  # includes a label never true: it scores 0 and still counts
    expected_macro = np.mean([label_f1(predictions, references, label) for label in labels])
    assert f1(predictions, references, average="macro") == pytest.approx(expected_macro, rel=1e-12)
    assert f1(predictions, references) == pytest.approx(label_f1(predictions, references, 1), rel=1e-12)


def test_metrics_of_a_single_class():
    assert accuracy([2, 2, 2], [2, 2, 2]) == 1.0
    assert f1([2, 2, 2], [2, 2, 2], average="macro") == 1.0
    assert f1([2, 2, 2], [2, 2, 2]) == 0.0  # the positive label 1 is neither predicted nor true


def test_f1_rejects_an_unknown_average():
    with pytest.raises(ValueError, match="average='micro'"):
        f1([1], [1], average="micro")


def test_binary_matthews_correlation_by_hand():
    # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (4 - 1) / sqrt(3*3*3*3)
    assert matthews_correlation(BINARY_PREDICTIONS, BINARY_REFERENCES) == pytest.approx(1 / 3)


def one_hot_covariance_mcc(predictions, references):
    """MCC as the correlation of one-hot label indicator matrices (Gorodkin 2004), computed directly."""
    labels = sorted(set(predictions) | set(references))
    x = np.array([[p == label for label in labels] for p in predictions], dtype=float)
    y = np.array([[r == label for label in labels] for r in references], dtype=float)
    x, y = x - x.mean(axis=0), y - y.mean(axis=0)
    return np.sum(x * y) / np.sqrt(np.sum(x * x) * np.sum(y * y))


def test_multiclass_matthews_correlation_matches_the_covariance_definition():
    rng = np.random.default_rng(0)
    references = rng.integers(0, 4, size=200)
    predictions = np.where(rng.random(200) < 0.6, references, rng.integers(0, 4, size=200))
    expected = one_hot_covariance_mcc(predictions.tolist(), references.tolist())
    assert matthews_correlation(predictions, references) == pytest.approx(expected)


def test_matthews_correlation_is_zero_where_undefined_and_says_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert matthews_correlation([1, 1, 1], [0, 1, 0]) == 0.0
        assert matthews_correlation([1, 1, 1], [1, 1, 1]) == 0.0


def test_mismatched_lengths_are_rejected():
    with pytest.raises(ValueError, match="got 2 and 3"):
        accuracy([1, 0], [1, 0, 1])


@pytest.mark.parametrize(
    ("text", "normalized"),
    [("The Cat!", "cat"), ("  an apple,  a day ", "apple day"), ("Denver Broncos.", "denver broncos"), ("the", "")],
)
def test_squad_normalisation(text, normalized):
    assert normalize_squad_answer(text) == normalized


def test_squad_exact_match_and_f1_by_hand():
    predictions = ["Denver Broncos", "the cat sat", "Broncos of Denver", "Paris"]
    gold_answers = [["Denver Broncos"], ["a cat sat on the mat", "Cat sat."], ["Denver Broncos"], ["London"]]
    # exact: 1, 1 (second gold), 0, 0.  F1: 1, 1, 2*(2/3)*1/(2/3+1) = 0.8, 0.
    scores = squad_metrics(predictions, gold_answers)
    assert scores["exact_match"] == pytest.approx(50.0)
    assert scores["f1"] == pytest.approx(100 * (1 + 1 + 0.8 + 0) / 4)


def test_squad_f1_takes_the_best_gold_answer():
    # "sat on mat" against "a cat sat on the mat": P = 3/3, R = 3/4 -> 6/7; against "dog": 0.
    assert squad_metrics(["sat on mat"], [["dog", "a cat sat on the mat"]])["f1"] == pytest.approx(100 * 6 / 7)


def test_squad_needs_gold_answers_for_every_prediction():
    with pytest.raises(ValueError, match="gold answers per prediction"):
        squad_metrics(["a", "b"], [["a"], []])


def logits_for(labels, num_labels=2):
    return np.eye(num_labels)[labels]


def test_classification_metrics():
    predictions, references = [0, 0, 1, 2, 2, 2], np.array([0, 1, 1, 2, 2, 0])
    scores = classification_metrics(EvalPrediction(logits_for(predictions, num_labels=3), references))
    assert scores == pytest.approx(
        {
            "accuracy": 4 / 6,
            "f1_macro": (1 / 2 + 2 / 3 + 4 / 5) / 3,
            "matthews_correlation": one_hot_covariance_mcc(predictions, references.tolist()),
        }
    )


def test_classification_metrics_accept_a_tuple_of_model_outputs():
    # Models that return more than logits hand Trainer a tuple whose first item is the logits.
    logits, hidden = logits_for(BINARY_PREDICTIONS), np.zeros((6, 3, 4))
    scores = classification_metrics(EvalPrediction((logits, hidden), np.array(BINARY_REFERENCES)))
    assert scores["accuracy"] == pytest.approx(4 / 6)
