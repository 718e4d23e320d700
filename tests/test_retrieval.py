"""Retrieval: `fine_tune_retrieval` trains on mean pooling through sentence-transformers and scores what an independent
computation of the rankings gives; and every encoder folder `hf-encoders pretrain` writes loads in
`SentenceTransformer(path, trust_remote_code=True)` with mean pooling, in a process that never imported hf_encoders."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from hf_encoders.evaluation.finetune import RunSettings
from hf_encoders.evaluation.retrieval import fine_tune_retrieval
from hf_encoders.evaluation.tasks import load_task
from hf_encoders.training.pretrain import pretrain
from tests.helpers import fresh_interpreter, tiny_run_arguments, tiny_training_arguments
from tests.task_folders import write_ir_folder

pytestmark = pytest.mark.usefixtures("one_thread")

METHODS = ("mlm", "mae_lm", "biphasic", "tacl")
BLOCK_SIZE = 32  # tiny_run_arguments'


def mean_embeddings(folder, texts: list[str], max_length: int = 256) -> np.ndarray:
    """The mean of the base model's last hidden states over the real tokens, computed without sentence-transformers."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        states = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
    return ((states * mask).sum(1) / mask.sum(1)).numpy()


def ranking_metrics(queries: np.ndarray, passages: np.ndarray, relevant: np.ndarray) -> dict[str, float]:
    """Cosine ranking of every passage for each query, whose one relevant passage is `relevant[query]`."""
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    passages = passages / np.linalg.norm(passages, axis=1, keepdims=True)
    scores = queries @ passages.T
    rank = 1 + (scores > scores[np.arange(len(queries)), relevant][:, None]).sum(axis=1)
    reciprocal = 1.0 / rank
    return {
        "mrr@10": np.mean(np.where(rank <= 10, reciprocal, 0.0)),
        "ndcg@10": np.mean(np.where(rank <= 10, 1.0 / np.log2(rank + 1), 0.0)),
        "map@100": np.mean(np.where(rank <= 100, reciprocal, 0.0)),  # one relevant passage: precision at its rank
        "recall@1": np.mean(rank <= 1),
        "recall@10": np.mean(rank <= 10),
    }


def expected_metrics(folder, split) -> dict[str, float]:
    passages = list(dict.fromkeys(text for row in split for text in (row["positive"], row.get("negative")) if text))
    relevant = np.array([passages.index(row["positive"]) for row in split])
    queries = mean_embeddings(folder, list(split["query"]))
    return ranking_metrics(queries, mean_embeddings(folder, passages), relevant)


@pytest.fixture(scope="module")
def encoders(bert, tmp_path_factory) -> dict[str, Path]:
    """The encoder folder of a two-step `hf-encoders pretrain` run of each method, written where sentence-transformers
    cannot be imported: writing its configuration must not need it."""
    folders = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "sentence_transformers", None)
        for method in METHODS:
            output_dir = tmp_path_factory.mktemp(method)
            arguments = tiny_run_arguments(method, bert, validation_split_percentage=None)
            result = pretrain(arguments, tiny_training_arguments(output_dir, max_steps=2, eval_strategy="no"))
            folders[method] = result.encoder_dir
    return folders


@pytest.mark.parametrize(
    "model,negatives,test,max_steps",
    [("mae_lm", True, True, 1000), ("bert", False, False, 2)],
    ids=["mae_lm-hard-negatives-test-split", "stock-bert-pairs-capped-steps"],
)
def test_retrieval_scores_what_the_rankings_of_the_mean_pooled_model_give(
    model, negatives, test, max_steps, encoders, bert, tmp_path, monkeypatch
):
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    texts_per_row = []  # what the loss sees: (query, positive) or (query, positive, negative)
    forward = MultipleNegativesRankingLoss.forward

    def counting_forward(loss, sentence_features, labels):
        texts_per_row.append(len(sentence_features))
        return forward(loss, sentence_features, labels)

    monkeypatch.setattr(MultipleNegativesRankingLoss, "forward", counting_forward)
    task = load_task(write_ir_folder(tmp_path / "ir", negatives=negatives, test=test))
    overrides = {"use_cpu": True, "disable_tqdm": True}
    settings = RunSettings(
        1e-4, seed=0, batch_size=8, max_steps=max_steps, trust_remote_code=True, training_overrides=overrides
    )
    checkpoint = bert if model == "bert" else encoders[model]
    before = mean_embeddings(checkpoint, list(task.validation["query"])[:2])
    result = fine_tune_retrieval(str(checkpoint), task, settings, tmp_path / "run")

    assert result["steps"] == min(max_steps, 40 // 8)  # one epoch of 40 pairs, unless max_steps comes first
    assert texts_per_row == [3 if negatives else 2] * result["steps"]
    assert ("test" in result) == test
    trained = tmp_path / "run"  # the fine-tuned model, saved there
    assert not np.allclose(mean_embeddings(trained, list(task.validation["query"])[:2]), before), "it trained"
    for split in ("validation", "test") if test else ("validation",):
        expected = expected_metrics(trained, getattr(task, split))
        assert result[split] == pytest.approx(expected, abs=1e-9), split
    assert result["validation"]["recall@10"] > 0.5  # the queries are words of their passage: learnable


def test_retrieval_refuses_another_kind(tmp_path):
    task = load_task(write_ir_folder(tmp_path / "ir"))
    task.kind = "sc"
    with pytest.raises(ValueError, match="fine_tune_retrieval runs ir tasks; sc tasks run through fine_tune"):
        fine_tune_retrieval("unused", task, RunSettings(learning_rate=1e-4, seed=0), tmp_path / "run")


LOAD_EVERY_FOLDER = """
import json, logging, sys, warnings

records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(f"{record.name}: {record.getMessage()}")
logging.getLogger().addHandler(Keep(level=logging.WARNING))
import transformers
transformers.utils.logging.disable_default_handler()
transformers.utils.logging.enable_propagation()  # transformers' warnings reach the root logger, and Keep
from sentence_transformers import SentenceTransformer

results = {}
for folder in json.loads(sys.argv[1]):
    records.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = SentenceTransformer(folder, trust_remote_code=True)
        embeddings = model.encode(json.loads(sys.argv[2]))
    results[folder] = {
        "logs": list(records),
        "warnings": [str(warning.message) for warning in caught],
        "modules": [type(module).__name__ for module in model],
        "pooling": model[1].pooling_mode,
        "max_seq_length": model.max_seq_length,
        "similarity": model.similarity_fn_name,
        "embeddings": embeddings.tolist(),
    }
print(json.dumps({"results": results, "hf_encoders_imported": "hf_encoders" in sys.modules}))
"""

TEXTS = ["The assert statement is a convenient way", "to insert debugging assertions into a program"]


def unused_weights(log: str) -> tuple[set[str], set[str]]:
    """(status, key) rows of transformers' load report: the statuses it gives and the keys it lists."""
    rows = [[cell.strip() for cell in line.split("|")] for line in log.splitlines() if line.count("|") >= 2]
    rows = [row for row in rows if row[1] in ("UNEXPECTED", "MISSING", "MISMATCH")]
    return {row[1] for row in rows}, {row[0] for row in rows}


def test_every_method_loads_in_sentence_transformers_with_mean_pooling(encoders, tmp_path):
    folders = [str(encoders[method]) for method in METHODS]
    completed = fresh_interpreter(LOAD_EVERY_FOLDER, [json.dumps(folders), json.dumps(TEXTS)], tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    loaded = json.loads(completed.stdout.splitlines()[-1])
    assert not loaded["hf_encoders_imported"], "the checkpoints must load as where hf-encoders is not installed"
    for method, folder in zip(METHODS, folders):
        result = loaded["results"][folder]
        assert result["modules"] == ["Transformer", "Pooling"] and result["pooling"] == "mean", method
        assert result["similarity"] == "cosine", method
        # Trained from scratch on 32-token blocks; TaCL continues an encoder and keeps its limit (its position table).
        assert result["max_seq_length"] == (512 if method == "tacl" else BLOCK_SIZE), method
        expected = mean_embeddings(folder, TEXTS)
        np.testing.assert_allclose(np.array(result["embeddings"]), expected, rtol=1e-5, atol=1e-5, err_msg=method)
        assert result["warnings"] == [], method
        if method in ("mae_lm", "biphasic"):  # our encoders leave their pre-training heads unread without a word
            assert result["logs"] == [], method
        else:
            # Stock BERT checkpoints: transformers 5 reports every checkpoint weight the base model leaves unread, here
            # the MLM (and NSP) head; nothing missing (no random pooler) and nothing else.
            (log,) = result["logs"]
            statuses, keys = unused_weights(log)
            assert log.startswith("transformers.modeling_utils:") and statuses == {"UNEXPECTED"}, (method, log)
            assert keys and all(key.startswith("cls.") for key in keys), (method, keys)
