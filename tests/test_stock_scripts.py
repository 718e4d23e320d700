"""What run_glue.py, run_qa.py and run_ner.py do to a checkpoint, on a pre-training checkpoint of every family, in a
fresh process that never imports hf_encoders (offline, cwd outside the repository, empty PYTHONPATH):

AutoConfig(num_labels, finetuning_task) -> fast AutoTokenizer (offsets, overflowing windows with a stride, word ids)
-> AutoModelFor{SequenceClassification,QuestionAnswering,TokenClassification}(config=config) -> Trainer(train,
evaluate, predict, save_model) -> reload from the saved folder with the same Auto class and equal predictions.

MAE-LM and biphasic checkpoints load through their own code (trust_remote_code); TaCL's student, exported with
`hf-encoders export`, and the biphasic model exported to native EuroBERT load without it.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import BertConfig

from hf_encoders import BiphasicEncoderForPreTraining, MaeLmForMaskedLM, TaclForPreTraining
from hf_encoders.cli import main as cli_main
from hf_encoders.data.tokenizer import train_wordpiece_tokenizer
from tests.tiny_models import tiny_biphasic_config, tiny_mae_lm_config, tiny_tacl_config

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

# One child per family runs the three stock-script paths and writes a JSON report for the parent to check.
CHILD_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    from datasets import Dataset
    from transformers import (
        AutoConfig, AutoModelForQuestionAnswering, AutoModelForSequenceClassification, AutoModelForTokenClassification,
        AutoTokenizer, DataCollatorForTokenClassification, DataCollatorWithPadding, Trainer, TrainingArguments,
        default_data_collator, set_seed,
    )

    job = json.load(open(sys.argv[1]))
    data, work = job["data"], job["work_dir"]
    MAX_LENGTH, DOC_STRIDE = 24, 8


    def arguments(name):
        return TrainingArguments(
            output_dir=f"{run_dir}/{name}", max_steps=3, per_device_train_batch_size=4, per_device_eval_batch_size=3,
            learning_rate=1e-3, report_to="none", use_cpu=True, save_strategy="no", disable_tqdm=True, seed=0,
        )


    def load(auto_class, path, remote, **config_kwargs):
        # The three scripts' loading sequence (a fast tokenizer is required by run_qa and run_ner).
        set_seed(0)  # the scripts seed before loading, so the new head starts the same every run
        config = AutoConfig.from_pretrained(path, trust_remote_code=remote, **config_kwargs)
        tokenizer = AutoTokenizer.from_pretrained(path, use_fast=True, trust_remote_code=remote)
        assert tokenizer.is_fast, type(tokenizer)
        model, info = auto_class.from_pretrained(path, config=config, trust_remote_code=remote, output_loading_info=True)
        prefix = model.base_model_prefix + "."
        report = {
            "class": type(model).__name__, "module": type(model).__module__,
            "encoder_missing": [key for key in info["missing_keys"] if key.startswith(prefix)],
            "head_missing": sorted(key for key in info["missing_keys"] if not key.startswith(prefix)),
        }
        return config, tokenizer, model, report


    def fine_tune(name, auto_class, path, remote, model, tokenizer, collator, train, evaluation, test, compute_metrics=None):
        set_seed(0)
        trainer = Trainer(
            model=model, args=arguments(name), train_dataset=train, eval_dataset=evaluation,
            processing_class=tokenizer, data_collator=collator, compute_metrics=compute_metrics,
        )
        report = {"train_loss": trainer.train().training_loss}
        report["eval_metrics"] = sorted(trainer.evaluate())
        prediction = trainer.predict(test)
        report["predict_metrics"] = sorted(prediction.metrics)
        saved = f"{run_dir}/{name}/final"
        trainer.save_model(saved)
        reloaded = auto_class.from_pretrained(saved, trust_remote_code=remote)
        report["reloaded_class"] = type(reloaded).__name__
        report["reloaded_module"] = type(reloaded).__module__
        report["reloaded_id2label"] = {str(k): v for k, v in reloaded.config.id2label.items()}
        again = Trainer(model=reloaded, args=arguments(name + "-reloaded"), processing_class=tokenizer, data_collator=collator)
        reloaded_predictions = again.predict(test).predictions
        as_tuple = lambda p: p if isinstance(p, tuple) else (p,)  # QA predicts (start_logits, end_logits)
        pairs = list(zip(as_tuple(prediction.predictions), as_tuple(reloaded_predictions)))
        report["reload_max_abs_diff"] = max(float(np.abs(a - b).max()) for a, b in pairs)
        report["prediction_shapes"] = [list(a.shape) for a, _ in pairs]
        report["saved_files"] = sorted(os.listdir(saved))
        return report, prediction


    def accuracy(prediction):
        logits, labels = prediction
        predicted = np.argmax(logits, axis=-1)
        keep = labels != -100
        return {"accuracy": float((predicted[keep] == labels[keep]).mean())}


    def glue(path, remote):
        # run_glue.py with --train_file/--validation_file: sentence1/sentence2/label columns.
        label_list = sorted({label for *_, label in data["glue"]})
        raw = Dataset.from_dict({
            "sentence1": [a for a, _, _ in data["glue"]], "sentence2": [b for _, b, _ in data["glue"]],
            "label": [label_list.index(label) for *_, label in data["glue"]],
        })
        config, tokenizer, model, report = load(
            AutoModelForSequenceClassification, path, remote, num_labels=len(label_list), finetuning_task="mrpc"
        )
        model.config.label2id = {label: i for i, label in enumerate(label_list)}
        model.config.id2label = {i: label for i, label in enumerate(label_list)}
        encoded = raw.map(
            lambda batch: tokenizer(batch["sentence1"], batch["sentence2"], truncation=True, max_length=MAX_LENGTH),
            batched=True,
        )
        result, _ = fine_tune(
            "glue", AutoModelForSequenceClassification, path, remote, model, tokenizer, DataCollatorWithPadding(tokenizer),
            encoded, encoded, encoded, accuracy,
        )
        result["token_type_ids_fed"] = "token_type_ids" in encoded.column_names
        return {**report, **result, "label_list": label_list}


    def qa(path, remote):
        # run_qa.py's prepare_train_features / prepare_validation_features, simplified (no unanswerable questions).
        raw = Dataset.from_dict({
            "id": [str(i) for i in range(len(data["qa"]))],
            "question": [e["question"] for e in data["qa"]],
            "context": [e["context"] for e in data["qa"]],
            "answers": [{"text": [e["answer"]], "answer_start": [e["context"].index(e["answer"])]} for e in data["qa"]],
        })
        config, tokenizer, model, report = load(AutoModelForQuestionAnswering, path, remote)
        assert tokenizer.padding_side == "right"

        def windows(batch):
            return tokenizer(
                [q.lstrip() for q in batch["question"]], batch["context"], truncation="only_second", max_length=MAX_LENGTH,
                stride=DOC_STRIDE, return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length",
            )

        def prepare_train_features(batch):
            features = windows(batch)
            sample_mapping = features.pop("overflow_to_sample_mapping")
            offset_mapping = features.pop("offset_mapping")
            features["start_positions"], features["end_positions"] = [], []
            for i, offsets in enumerate(offset_mapping):
                cls_index = features["input_ids"][i].index(tokenizer.cls_token_id)
                sequence_ids = features.sequence_ids(i)
                answers = batch["answers"][sample_mapping[i]]
                start_char = answers["answer_start"][0]
                end_char = start_char + len(answers["text"][0])
                token_start = sequence_ids.index(1)
                token_end = len(sequence_ids) - 1 - sequence_ids[::-1].index(1)
                if not (offsets[token_start][0] <= start_char and offsets[token_end][1] >= end_char):
                    features["start_positions"].append(cls_index)
                    features["end_positions"].append(cls_index)
                    continue
                while token_start < len(offsets) and offsets[token_start][0] <= start_char:
                    token_start += 1
                features["start_positions"].append(token_start - 1)
                while offsets[token_end][1] >= end_char:
                    token_end -= 1
                features["end_positions"].append(token_end + 1)
            return features

        def prepare_validation_features(batch):
            features = windows(batch)
            sample_mapping = features.pop("overflow_to_sample_mapping")
            features["example_id"] = []
            for i in range(len(features["input_ids"])):
                sequence_ids = features.sequence_ids(i)
                features["example_id"].append(batch["id"][sample_mapping[i]])
                features["offset_mapping"][i] = [
                    o if sequence_ids[k] == 1 else None for k, o in enumerate(features["offset_mapping"][i])
                ]
            return features

        train = raw.map(prepare_train_features, batched=True, remove_columns=raw.column_names)
        validation = raw.map(prepare_validation_features, batched=True, remove_columns=raw.column_names)
        result, prediction = fine_tune(
            "qa", AutoModelForQuestionAnswering, path, remote, model, tokenizer, default_data_collator,
            train, train, validation,
        )
        # postprocess_qa_predictions, simplified: the best valid span of any window of each example.
        start_logits, end_logits = prediction.predictions
        best = {}
        for i, feature in enumerate(validation):
            offsets = feature["offset_mapping"]
            for s in np.argsort(start_logits[i])[::-1][:20]:
                for e in np.argsort(end_logits[i])[::-1][:20]:
                    if offsets[s] is None or offsets[e] is None or e < s or e - s + 1 > 30:
                        continue
                    score = start_logits[i][s] + end_logits[i][e]
                    context = raw[int(feature["example_id"])]["context"]
                    if score > best.get(feature["example_id"], (-np.inf, ""))[0]:
                        best[feature["example_id"]] = (float(score), context[offsets[s][0]:offsets[e][1]])
        answered = [s for s, e in zip(train["start_positions"], train["end_positions"]) if 0 < s <= e]
        return {
            **report, **result, "examples": len(raw), "train_features": len(train), "validation_features": len(validation),
            "windows_with_answer": len(answered), "answered_examples": len(best),
        }


    def ner(path, remote):
        # run_ner.py with string tags: label list from the data, labels on the first sub-token of each word.
        label_list = sorted({tag for _, tags in data["ner"] for tag in tags})
        label_to_id = {label: i for i, label in enumerate(label_list)}
        raw = Dataset.from_dict({"tokens": [w for w, _ in data["ner"]], "ner_tags": [t for _, t in data["ner"]]})
        config, tokenizer, model, report = load(
            AutoModelForTokenClassification, path, remote, num_labels=len(label_list), finetuning_task="ner"
        )
        model.config.label2id = dict(label_to_id)
        model.config.id2label = dict(enumerate(label_list))

        def tokenize_and_align_labels(batch):
            encoded = tokenizer(batch["tokens"], truncation=True, max_length=MAX_LENGTH, is_split_into_words=True)
            encoded["labels"] = []
            for i, tags in enumerate(batch["ner_tags"]):
                previous, label_ids = None, []
                for word in encoded.word_ids(batch_index=i):
                    label_ids.append(-100 if word is None or word == previous else label_to_id[tags[word]])
                    previous = word
                encoded["labels"].append(label_ids)
            return encoded

        encoded = raw.map(tokenize_and_align_labels, batched=True, remove_columns=raw.column_names)
        result, _ = fine_tune(
            "ner", AutoModelForTokenClassification, path, remote, model, tokenizer,
            DataCollatorForTokenClassification(tokenizer), encoded, encoded, encoded, accuracy,
        )
        labelled = sum(sum(label != -100 for label in labels) for labels in encoded["labels"])
        return {**report, **result, "label_list": label_list, "labelled_tokens": labelled,
                "words": sum(len(words) for words, _ in data["ner"])}


    results = {}
    for name, path, remote, tasks in job["runs"]:
        run_dir = f"{work}/{name}"
        runners = {"glue": glue, "qa": qa, "ner": ner}
        results[name] = {task: runners[task](path, remote) for task in tasks}
    results["hf_encoders_imported"] = "hf_encoders" in sys.modules
    assert "hf_encoders" not in sys.modules, "the fresh process imported hf_encoders"
    json.dump(results, open(sys.argv[2], "w"))
    """
)


@pytest.fixture(scope="module")
def tokenizer():
    texts = [a for a, _, _ in GLUE_PAIRS] + [b for _, b, _ in GLUE_PAIRS]
    texts += [e["question"] for e in QA_EXAMPLES] + [e["context"] for e in QA_EXAMPLES]
    texts += [" ".join(words) for words, _ in NER_EXAMPLES]
    return train_wordpiece_tokenizer(texts, vocab_size=300, model_max_length=64)


def special_ids(tokenizer):
    return dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)


def build_checkpoints(family, tokenizer, root):
    """The pre-training checkpoint of `family` (model + tokenizer), and the runs the child does on it:
    (name, path, trust_remote_code, tasks, expected model class prefix, module prefix)."""
    torch.manual_seed(0)
    pretrained = root / family
    if family == "mae_lm":
        model = MaeLmForMaskedLM(tiny_mae_lm_config(**special_ids(tokenizer), mask_token_id=tokenizer.mask_token_id))
        model.save_pretrained(pretrained)
        tokenizer.save_pretrained(pretrained)
        return [("mae_lm", pretrained, True, ("glue", "qa", "ner"), "MaeLmFor", "transformers_modules.")]
    if family == "biphasic":
        config = tiny_biphasic_config(
            **special_ids(tokenizer),
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
            mask_token_id=tokenizer.mask_token_id,
        )
        BiphasicEncoderForPreTraining(config).save_pretrained(pretrained)
        tokenizer.save_pretrained(pretrained)
        # `hf-encoders export` to native EuroBERT: sequence and token classification without remote code.
        assert cli_main(["export", str(pretrained), str(root / "eurobert")]) == 0
        return [
            ("biphasic", pretrained, True, ("glue", "qa", "ner"), "BiphasicEncoderFor", "transformers_modules."),
            ("eurobert", root / "eurobert", False, ("glue", "ner"), "EuroBertFor", "transformers.models.eurobert."),
        ]
    student = BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        **special_ids(tokenizer),
    )
    TaclForPreTraining(tiny_tacl_config(student_config=student)).save_pretrained(pretrained)
    tokenizer.save_pretrained(pretrained)
    assert cli_main(["export", str(pretrained), str(root / "student")]) == 0  # `hf-encoders export CKPT OUT`
    return [("tacl_student", root / "student", False, ("glue", "qa", "ner"), "BertFor", "transformers.models.bert.")]


def run_child(runs, tmp_path):
    job = {
        "runs": [(name, str(path), remote, tasks) for name, path, remote, tasks, *_ in runs],
        "work_dir": str(tmp_path / "work"),
        "data": {"glue": GLUE_PAIRS, "qa": QA_EXAMPLES, "ner": NER_EXAMPLES},
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    (tmp_path / "child.py").write_text(CHILD_SCRIPT)
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
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads((tmp_path / "results.json").read_text())


@pytest.mark.parametrize("family", ["mae_lm", "biphasic", "tacl"])
def test_stock_script_calls_on_a_pretraining_checkpoint(family, tokenizer, tmp_path):
    runs = build_checkpoints(family, tokenizer, tmp_path)
    results = run_child(runs, tmp_path)
    assert results.pop("hf_encoders_imported") is False
    classes = {"glue": "SequenceClassification", "qa": "QuestionAnswering", "ner": "TokenClassification"}
    head_prefixes = {"glue": ("classifier.", "dense."), "qa": ("qa_outputs.",), "ner": ("classifier.",)}
    for name, _path, remote, tasks, class_prefix, module_prefix in runs:
        assert sorted(results[name]) == sorted(tasks)
        for task in tasks:
            report = results[name][task]
            where = f"{name}/{task}"
            # The class the Auto class picked: the checkpoint's own code for remote families, transformers' otherwise.
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
