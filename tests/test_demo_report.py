"""The demo's table says what confounds each row, reads each row's masked-LM loss against the corpus's unigram entropy
(marking a row on its plateau), and sends readers to the controlled experiments."""

from argparse import Namespace
from collections import Counter

import pytest
from scipy.stats import entropy
from transformers import tokenization_utils_base
from transformers.testing_utils import CaptureLogger

from hf_encoders.analysis import LayerwiseReport, token_counts, unigram_entropy
from hf_encoders.demo import write_report
from hf_encoders.methods import METHODS
from tests.tiny_models import tiny_tokenizer


def test_every_row_names_what_else_differs_from_the_baseline(tmp_path):
    settings = Namespace(steps=10, batch_size=2, block_size=8, output_dir=tmp_path)
    # The first method logs an MLM term beside its whole loss (as TaCL and biphasic do): the term is what is read.
    runs = {name: {"log_history": [{"loss": 5.0 + i}]} for i, name in enumerate(METHODS)}
    first = next(iter(METHODS))
    runs[first]["log_history"] = [{"loss": 9.0, "mlm_loss": 4.9}, {"eval_loss": 9.5}, {"loss": 9.0, "mlm_loss": 5.0}]
    layers = dict(
        hidden_size=64,
        sentences=3,
        real_tokens=20,
        mask_tokens=3,
        rank_threshold=0.9,
        self_similarity=[0.5],
        isotropy=[0.1],
        effective_rank=[7],
        effective_rank_with_mask=[6],
        mask_effective_rank=[2],
    )
    analysis = [LayerwiseReport(model=name, **layers) for name in METHODS]
    text = write_report(settings, runs, analysis, dict.fromkeys(METHODS, 0.75), plateau=5.6).read_text()

    rows = {line.split(" | ")[0].removeprefix("| "): line for line in text.splitlines() if line.startswith("| ")}
    # 0.60 below H: off the plateau; 0.40, 1.40, 2.40 above it (the margin is 0.5): on it.
    cells = [
        "5.000 (0.60 below H)",
        *(f"{5.0 + i:.3f} ({i - 0.6:.2f} above H) — **on its plateau**" for i in range(1, 4)),
    ]
    for cell, (name, method) in zip(cells, METHODS.items()):
        assert rows[name] == f"| {name} | {cell} | 0.750 | 0.500 | 7 / 6 (of 64) | {method.demo_confounds} |"
    assert "H = 5.60 nats" in text
    assert len({method.demo_confounds for method in METHODS.values()}) == len(METHODS)
    assert "experiments/REPORT.md" in text


def test_the_unigram_entropy_is_that_of_the_token_frequencies():
    tokenizer = tiny_tokenizer(cls_sep_template=True)
    texts = ["w5 w6 w5 w7", "w5 w8"]
    counts = token_counts(tokenizer, texts)
    assert counts == Counter({5: 3, 6: 1, 7: 1, 8: 1})  # the template's [CLS] and [SEP] are left out
    assert unigram_entropy(counts) == pytest.approx(entropy([3, 1, 1, 1]))


def test_counting_whole_documents_gives_no_sequence_length_warning():
    """The demo's first line was transformers' "Token indices sequence length is longer than ..." warning: the counts
    tokenize whole documents, and no model ever reads them whole."""
    tokenizer = tiny_tokenizer()
    tokenizer.model_max_length = 4
    with CaptureLogger(tokenization_utils_base.logger) as captured:
        counts = token_counts(tokenizer, ["w5 w6 w7 w8 w9 w10 w11"])
    assert sum(counts.values()) == 7 and captured.out == ""
