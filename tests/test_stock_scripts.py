"""What run_glue.py, run_qa.py, run_ner.py and run_mlm.py do to a checkpoint, on a pre-training checkpoint of every
method, in a fresh process that never imports hf_encoders (offline, cwd outside the repository, empty PYTHONPATH,
stdin closed). The harness follows transformers' PyTorch example scripts as of v5.x (upstream main, early 2026):

AutoConfig(num_labels, finetuning_task) -> fast AutoTokenizer (offsets, overflowing windows with a stride, word ids)
-> AutoModelFor{SequenceClassification,QuestionAnswering,TokenClassification}(config=config) -> Trainer(train,
evaluate, predict, save_model) -> reload from the saved folder with the same Auto class and equal predictions;
run_mlm.py's blocks, stock 80/10/10 masking and accuracy from preprocess_logits_for_metrics' argmax; the fill-mask,
feature-extraction and text-classification pipelines on the fine-tuned outputs; AutoTokenizer on every folder.

MAE-LM and biphasic checkpoints load through their own code (trust_remote_code); TaCL's student, exported with
`hf-encoders export`, and the biphasic model exported to native EuroBERT load without it.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hf_encoders.data.tokenizer import train_wordpiece_tokenizer
from tests.method_specs import METHOD_SPECS, specs_with

# The child's data (it builds its `datasets` from these); the tokenizer is trained on the same text.
GLUE_PAIRS = [
    ("the cat sat on the mat", "a cat was sitting on the mat", "equivalent"),
    ("the dog ran in the park", "the weather was cold in winter", "not_equivalent"),
    ("paris is the capital of france", "the capital of france is paris", "equivalent"),
    ("she bought a red car", "he sold his old bicycle", "not_equivalent"),
    ("the river flows to the sea", "water from the river reaches the sea", "equivalent"),
    ("birds sing in the morning", "the market opens at noon", "not_equivalent"),
]
QA_EXAMPLES = [
    dict(
        question="where did the cat sit",
        context="on a quiet morning in the small town the old grey cat sat on the warm mat near the kitchen door "
        "while the dog ran in the park and the birds sang in the tall trees by the river",
        answer="on the warm mat",
    ),
    dict(
        question="what is the capital of france",
        context="paris is the capital of france and the river seine flows through the city to the sea",
        answer="paris",
    ),
    dict(
        question="what did she buy",
        context="after a long week at work she went to the market in the town and bought a red car from an old "
        "man who had kept it in his garage for many years",
        answer="a red car",
    ),
    dict(
        question="when do birds sing",
        context="birds sing in the morning and the market opens at noon when the weather is warm",
        answer="in the morning",
    ),
]
NER_EXAMPLES = [
    (["anna", "lives", "in", "paris"], ["B-PER", "O", "O", "B-LOC"]),
    (["the", "river", "seine", "flows", "through", "paris"], ["O", "O", "B-LOC", "O", "O", "B-LOC"]),
    (["john", "smith", "bought", "a", "car", "in", "london"], ["B-PER", "I-PER", "O", "O", "O", "O", "B-LOC"]),
    (["mary", "sang", "in", "the", "morning"], ["B-PER", "O", "O", "O", "O"]),
]

# One child per method runs the three stock-script paths and writes a JSON report for the parent to check.
CHILD = Path(__file__).with_name("stock_script_child.py")


@pytest.fixture(scope="module")
def tokenizer():
    texts = [a for a, _, _ in GLUE_PAIRS] + [b for _, b, _ in GLUE_PAIRS]
    texts += [e["question"] for e in QA_EXAMPLES] + [e["context"] for e in QA_EXAMPLES]
    texts += [" ".join(words) for words, _ in NER_EXAMPLES]
    return train_wordpiece_tokenizer(texts, vocab_size=300, model_max_length=64)


def run_child(runs, tmp_path):
    job = {
        "runs": [(name, str(path), remote, tasks) for name, path, remote, tasks, *_ in runs],
        "work_dir": str(tmp_path / "work"),
        "data": {"glue": GLUE_PAIRS, "qa": QA_EXAMPLES, "ner": NER_EXAMPLES},
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    shutil.copy(CHILD, tmp_path / "child.py")  # out of tests/, which would otherwise lead its sys.path
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
        "HF_DATASETS_CACHE": str(tmp_path / "datasets"),
        "PYTHONPATH": "",
        "TOKENIZERS_PARALLELISM": "false",
    }
    completed = subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "job.json"), str(tmp_path / "results.json")],
        cwd=outside,
        env=env,
        stdin=subprocess.DEVNULL,  # a prompt for remote code reads nothing, as in a script or a CI job
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads((tmp_path / "results.json").read_text())


@pytest.mark.parametrize("method", sorted(specs_with("stock_checkpoints")))
def test_stock_script_calls_on_a_pretraining_checkpoint(method, tokenizer, tmp_path):
    torch.manual_seed(0)
    runs = METHOD_SPECS[method].stock_checkpoints(tokenizer, tmp_path)
    results = run_child(runs, tmp_path)
    assert results.pop("hf_encoders_imported") is False
    classes = {"glue": "SequenceClassification", "qa": "QuestionAnswering", "ner": "TokenClassification"}
    head_prefixes = {"glue": ("classifier.", "dense."), "qa": ("qa_outputs.",), "ner": ("classifier.",)}
    for name, _path, remote, tasks, class_prefix, module_prefix in runs:
        assert sorted(results[name]) == sorted([*tasks, "tokenizer"])
        check_tokenizer_loading(results[name].pop("tokenizer"), remote, name)
        for task in tasks:
            report = results[name][task]
            where = f"{name}/{task}"
            check_tokenizer_loading(report["tokenizer"], remote, where)
            if task == "mlm":
                check_run_mlm(report, name, class_prefix, module_prefix)
                continue
            # The class the Auto class picked: the checkpoint's own code for our models, transformers' otherwise.
            assert report["class"] == report["reloaded_class"] == class_prefix + classes[task], where
            assert report["module"].startswith(module_prefix) and report["reloaded_module"].startswith(module_prefix), (
                where
            )
            # The encoder came from the pre-training checkpoint; only the new task head was initialised.
            assert report["encoder_missing"] == [], where
            assert report["head_missing"] and all(k.startswith(head_prefixes[task]) for k in report["head_missing"]), (
                where
            )
            assert report["train_loss"] > 0 and report["train_loss"] == report["train_loss"], where  # finite, trained
            assert "eval_loss" in report["eval_metrics"] and "test_runtime" in report["predict_metrics"], where
            # save_model wrote weights, tokenizer and (for remote code) the model's code; the reload predicts the same.
            assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(report["saved_files"]), where
            assert any(f.endswith(".py") for f in report["saved_files"]) == remote, where
            assert report["reload_max_abs_diff"] < 1e-5, where
            if task in ("glue", "ner"):
                assert {"eval_accuracy", "eval_loss"} <= set(report["eval_metrics"]), where
                assert {"test_accuracy", "test_loss"} <= set(report["predict_metrics"]), where
                assert list(report["reloaded_id2label"].values()) == report["label_list"], where
            if task == "glue":
                assert report["token_type_ids_fed"], where  # a BERT-style pair: the column every model must accept
                assert report["prediction_shapes"] == [[len(GLUE_PAIRS), 2]], where
                pipelines = report["pipelines"]  # on the fine-tuned classifier
                assert pipelines["feature_shape"][:2] == [1, pipelines["feature_shape"][1]], where
                assert pipelines["feature_shape"][2] == 32 and pipelines["feature_max_abs_diff"] < 1e-5, where
                assert pipelines["label"] == pipelines["expected_label"] in report["label_list"], where
                assert pipelines["score_abs_diff"] < 1e-5, where
            if task == "qa":
                assert report["train_features"] > report["examples"], f"{where}: no context overflowed into windows"
                assert report["validation_features"] == report["train_features"], where
                assert report["windows_with_answer"] >= report["examples"], where
                assert report["answered_examples"] == report["examples"], where
                # Unlabelled windows (as run_qa's prediction features): start and end logits, no loss.
                assert report["prediction_shapes"] == [[report["validation_features"], 24]] * 2, where
                assert "test_loss" not in report["predict_metrics"], where
            if task == "ner":
                assert report["labelled_tokens"] == report["words"], where


def check_tokenizer_loading(report, remote, where):
    """AutoTokenizer as the scripts and pipelines call it gives the saved stock class, silently. Without
    trust_remote_code it tokenizes the same, but transformers 5.x reads config.json through AutoConfig first, so a
    checkpoint with its own code still gets the remote-code prompt (README says so; if this fails, transformers no
    longer asks: update README)."""
    scripts, plain = report["scripts"], report["plain"]
    assert scripts["class"] == report["saved_class"] and scripts["same_ids"], where
    assert scripts["printed"] == "" and scripts["logs"] == [], where
    assert plain["class"] == report["saved_class"] and plain["same_ids"], where
    if remote:
        assert "Do you wish to run the custom code?" in plain["printed"], where
    else:
        assert plain["printed"] == "" and plain["logs"] == [], where


def check_run_mlm(report, name, class_prefix, module_prefix):
    """run_mlm.py on the pre-training checkpoint: a masked LM with every weight, trained, evaluated with accuracy over
    the masked positions (equal to the accuracy computed by hand from the unlabelled logits), saved, and filled in by
    pipeline("fill-mask")."""
    where = f"{name}/mlm"
    assert report["class"] == class_prefix + "MaskedLM" and report["module"].startswith(module_prefix), where
    assert report["encoder_missing"] == [] and report["head_missing"] == [], where
    assert report["train_loss"] > 0 and report["train_loss"] == report["train_loss"], where
    assert {"eval_loss", "eval_accuracy"} <= set(report["eval_metrics"]), where
    assert 0 <= report["eval_metrics"]["eval_accuracy"] <= 1, where
    assert report["seeded_accuracy"] == pytest.approx(report["accuracy_by_hand"], abs=1e-12), where
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(report["saved_files"]), where
    fill_mask = report["fill_mask"]
    assert fill_mask["tokens"] == fill_mask["expected_tokens"] and fill_mask["score_abs_diff"] < 1e-5, where
    # The stock collator leaves about a fifth of the targets unmasked: MAE-LM says so, once per model.
    if name == "mae_lm":
        (warning,) = report["unmasked_warnings"]
        assert "DataCollatorForMaeLm" in warning, warning
    else:
        assert report["unmasked_warnings"] == [], where
