"""Child program of tests/test_stock_scripts.py, run in an interpreter that cannot import hf_encoders: on each
checkpoint it is given, the calls run_glue.py, run_qa.py, run_ner.py and run_mlm.py make (transformers' PyTorch
example scripts as of v5.x), the pipelines on their outputs, and AutoTokenizer on every folder; then a JSON report
for the parent.

Usage: stock_script_child.py JOB_JSON RESULTS_JSON

JOB_JSON holds "data" (the GLUE pairs, QA examples and NER examples), "work_dir" and "runs": [name, checkpoint path,
trust_remote_code, tasks] each.
"""

import contextlib
import io
import json
import logging
import os
import sys
from itertools import chain

import numpy as np
import torch
import transformers
from datasets import Dataset
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
    default_data_collator,
    pipeline,
    set_seed,
)

MAX_LENGTH, DOC_STRIDE, BLOCK_SIZE = 24, 8, 16
TEXT = "the cat sat on the mat"
# Every warning logged, by transformers or by a checkpoint's own code (transformers_modules.*), for the checks to read.
LOGS = []


class KeepLogs(logging.Handler):
    def emit(self, record):
        LOGS.append(f"{record.name}: {record.getMessage()}")


logging.getLogger().addHandler(KeepLogs(level=logging.WARNING))
transformers.utils.logging.disable_default_handler()
transformers.utils.logging.enable_propagation()


def arguments(run_dir, name):
    return TrainingArguments(
        output_dir=f"{run_dir}/{name}",
        max_steps=3,
        per_device_train_batch_size=4,
        per_device_eval_batch_size=3,
        learning_rate=1e-3,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
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
        "class": type(model).__name__,
        "module": type(model).__module__,
        "encoder_missing": [key for key in info["missing_keys"] if key.startswith(prefix)],
        "head_missing": sorted(key for key in info["missing_keys"] if not key.startswith(prefix)),
    }
    return tokenizer, model, report


def as_tuple(predictions):
    return predictions if isinstance(predictions, tuple) else (predictions,)  # QA predicts (start, end) logits


def fine_tune(run_dir, name, auto_class, remote, model, tokenizer, collator, datasets, compute_metrics=None):
    """Trainer's train, evaluate, predict and save_model, then the saved folder reloaded and predicting again."""
    train, evaluation, test = datasets
    set_seed(0)
    trainer = Trainer(
        model=model,
        args=arguments(run_dir, name),
        train_dataset=train,
        eval_dataset=evaluation,
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=compute_metrics,
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
    again = Trainer(
        model=reloaded, args=arguments(run_dir, name + "-reloaded"), processing_class=tokenizer, data_collator=collator
    )
    reloaded_predictions = again.predict(test).predictions
    pairs = list(zip(as_tuple(prediction.predictions), as_tuple(reloaded_predictions)))
    report["reload_max_abs_diff"] = max(float(np.abs(a - b).max()) for a, b in pairs)
    report["prediction_shapes"] = [list(a.shape) for a, _ in pairs]
    report["saved_files"] = sorted(os.listdir(saved))
    report["tokenizer"] = tokenizer_report(saved, remote)
    return report, prediction


def tokenizer_report(path, remote):
    """AutoTokenizer as the scripts and pipelines call it, then without trust_remote_code (stdin is closed: a prompt
    reads nothing): the class, whether it tokenizes as the tokenizer's own class does (which reads no config.json),
    and what each call printed and logged."""
    own_ids = PreTrainedTokenizerFast.from_pretrained(path)(TEXT)["input_ids"]
    report = {}
    for name, kwargs in (("scripts", {"trust_remote_code": remote}), ("plain", {})):
        LOGS.clear()
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
        report[name] = {
            "class": type(tokenizer).__name__,
            "same_ids": tokenizer(TEXT)["input_ids"] == own_ids,
            "printed": printed.getvalue(),
            "logs": list(LOGS),
        }
    with open(os.path.join(path, "tokenizer_config.json")) as file:
        report["saved_class"] = json.load(file)["tokenizer_class"]
    return report


def pipeline_report(saved):
    """pipeline("feature-extraction") and ("text-classification") on a fine-tuned classifier, against the Auto
    classes' outputs computed by hand."""
    tokenizer = AutoTokenizer.from_pretrained(saved, trust_remote_code=True)
    encoded = tokenizer(TEXT, return_tensors="pt")
    features = np.array(pipeline("feature-extraction", model=saved, trust_remote_code=True)(TEXT))
    classified = pipeline("text-classification", model=saved, trust_remote_code=True)(TEXT)[0]
    with torch.no_grad():
        states = AutoModel.from_pretrained(saved, trust_remote_code=True).eval()(**encoded).last_hidden_state
        classifier = AutoModelForSequenceClassification.from_pretrained(saved, trust_remote_code=True).eval()
        probabilities = classifier(**encoded).logits.softmax(-1)[0]
    return {
        "feature_shape": list(features.shape),
        "feature_max_abs_diff": float(np.abs(features - states.numpy()).max()),
        "label": classified["label"],
        "expected_label": classifier.config.id2label[int(probabilities.argmax())],
        "score_abs_diff": abs(classified["score"] - float(probabilities.max())),
    }


def fill_mask_report(saved, tokenizer):
    """pipeline("fill-mask") on a run_mlm.py output, against the masked LM's logits computed by hand."""
    text = f"the cat sat on the {tokenizer.mask_token}"
    top = pipeline("fill-mask", model=saved, trust_remote_code=True)(text, top_k=3)
    model = AutoModelForMaskedLM.from_pretrained(saved, trust_remote_code=True).eval()
    encoded = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        logits = model(**encoded).logits
    expected = logits[encoded["input_ids"] == tokenizer.mask_token_id][0].softmax(-1).topk(3)
    return {
        "tokens": [candidate["token"] for candidate in top],
        "expected_tokens": expected.indices.tolist(),
        "score_abs_diff": max(abs(c["score"] - s) for c, s in zip(top, expected.values.tolist())),
    }


def accuracy(prediction):
    logits, labels = prediction
    predicted = np.argmax(logits, axis=-1)
    keep = labels != -100
    return {"accuracy": float((predicted[keep] == labels[keep]).mean())}


def glue(data, run_dir, path, remote):
    # run_glue.py with --train_file/--validation_file: sentence1/sentence2/label columns.
    label_list = sorted({label for *_, label in data["glue"]})
    raw = Dataset.from_dict(
        {
            "sentence1": [a for a, _, _ in data["glue"]],
            "sentence2": [b for _, b, _ in data["glue"]],
            "label": [label_list.index(label) for *_, label in data["glue"]],
        }
    )
    tokenizer, model, report = load(
        AutoModelForSequenceClassification, path, remote, num_labels=len(label_list), finetuning_task="mrpc"
    )
    model.config.label2id = {label: i for i, label in enumerate(label_list)}
    model.config.id2label = dict(enumerate(label_list))
    encoded = raw.map(
        lambda batch: tokenizer(batch["sentence1"], batch["sentence2"], truncation=True, max_length=MAX_LENGTH),
        batched=True,
    )
    result, _ = fine_tune(
        run_dir,
        "glue",
        AutoModelForSequenceClassification,
        remote,
        model,
        tokenizer,
        DataCollatorWithPadding(tokenizer),
        (encoded, encoded, encoded),
        accuracy,
    )
    result["token_type_ids_fed"] = "token_type_ids" in encoded.column_names
    result["pipelines"] = pipeline_report(f"{run_dir}/glue/final")
    return {**report, **result, "label_list": label_list}


def qa(data, run_dir, path, remote):
    # run_qa.py's prepare_train_features / prepare_validation_features, simplified (no unanswerable questions).
    raw = Dataset.from_dict(
        {
            "id": [str(i) for i in range(len(data["qa"]))],
            "question": [e["question"] for e in data["qa"]],
            "context": [e["context"] for e in data["qa"]],
            "answers": [{"text": [e["answer"]], "answer_start": [e["context"].index(e["answer"])]} for e in data["qa"]],
        }
    )
    tokenizer, model, report = load(AutoModelForQuestionAnswering, path, remote)
    assert tokenizer.padding_side == "right"

    def windows(batch):
        return tokenizer(
            [q.lstrip() for q in batch["question"]],
            batch["context"],
            truncation="only_second",
            max_length=MAX_LENGTH,
            stride=DOC_STRIDE,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding="max_length",
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
        run_dir,
        "qa",
        AutoModelForQuestionAnswering,
        remote,
        model,
        tokenizer,
        default_data_collator,
        (train, train, validation),
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
                    best[feature["example_id"]] = (float(score), context[offsets[s][0] : offsets[e][1]])
    answered = [s for s, e in zip(train["start_positions"], train["end_positions"]) if 0 < s <= e]
    return {
        **report,
        **result,
        "examples": len(raw),
        "train_features": len(train),
        "validation_features": len(validation),
        "windows_with_answer": len(answered),
        "answered_examples": len(best),
    }


def ner(data, run_dir, path, remote):
    # run_ner.py with string tags: label list from the data, labels on the first sub-token of each word.
    label_list = sorted({tag for _, tags in data["ner"] for tag in tags})
    label_to_id = {label: i for i, label in enumerate(label_list)}
    raw = Dataset.from_dict({"tokens": [w for w, _ in data["ner"]], "ner_tags": [t for _, t in data["ner"]]})
    tokenizer, model, report = load(
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
        run_dir,
        "ner",
        AutoModelForTokenClassification,
        remote,
        model,
        tokenizer,
        DataCollatorForTokenClassification(tokenizer),
        (encoded, encoded, encoded),
        accuracy,
    )
    labelled = sum(sum(label != -100 for label in labels) for labels in encoded["labels"])
    return {
        **report,
        **result,
        "label_list": label_list,
        "labelled_tokens": labelled,
        "words": sum(len(words) for words, _ in data["ner"]),
    }


def masked_accuracy(eval_preds):
    # run_mlm.py's compute_metrics (its evaluate.load("accuracy") is this mean): flatten, keep the labelled positions.
    preds, labels = eval_preds
    labels, preds = labels.reshape(-1), preds.reshape(-1)
    mask = labels != -100
    return {"accuracy": float((preds[mask] == labels[mask]).mean())}


def argmax_logits(logits, labels):
    # run_mlm.py's preprocess_logits_for_metrics.
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits.argmax(dim=-1)


def accuracy_by_hand(model, blocks, collator, batch_size):
    """run_mlm's accuracy without Trainer: each batch masked as Trainer's evaluation masks it (the same seeded
    collator, the same batches), predicted from the logits the model gives without labels (the fill-mask path)."""
    columns = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in blocks.column_names]
    right = total = 0
    model.eval()
    for start in range(0, len(blocks), batch_size):
        batch = collator([{name: blocks[i][name] for name in columns} for i in range(start, start + batch_size)])
        labels = batch.pop("labels")
        with torch.no_grad():
            predicted = model(**batch).logits.argmax(-1)
        labelled = labels != -100
        right += int((predicted[labelled] == labels[labelled]).sum())
        total += int(labelled.sum())
    return right / total


def mlm(data, run_dir, path, remote):
    # run_mlm.py without --line_by_line: texts concatenated into blocks, DataCollatorForLanguageModeling with its
    # default 80/10/10 split, accuracy over the masked positions from the argmax of the logits.
    tokenizer, model, report = load(AutoModelForMaskedLM, path, remote)
    texts = [a for a, _, _ in data["glue"]] + [e["context"] for e in data["qa"]]
    tokenized = Dataset.from_dict({"text": texts}).map(
        lambda batch: tokenizer(batch["text"], return_special_tokens_mask=True), batched=True, remove_columns=["text"]
    )

    def group_texts(examples):
        concatenated = {k: list(chain(*examples[k])) for k in examples}
        total_length = len(concatenated["input_ids"]) // BLOCK_SIZE * BLOCK_SIZE
        return {k: [t[i : i + BLOCK_SIZE] for i in range(0, total_length, BLOCK_SIZE)] for k, t in concatenated.items()}

    blocks = tokenized.map(group_texts, batched=True)
    blocks = blocks.select(range(len(blocks) // 3 * 3))  # whole evaluation batches, for the computation by hand

    def trainer_for(collator, name):
        return Trainer(
            model=model,
            args=arguments(run_dir, name),
            train_dataset=blocks,
            eval_dataset=blocks,
            processing_class=tokenizer,
            data_collator=collator,
            compute_metrics=masked_accuracy,
            preprocess_logits_for_metrics=argmax_logits,
        )

    LOGS.clear()
    set_seed(0)
    trainer = trainer_for(DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15), "mlm")
    report["train_loss"] = trainer.train().training_loss
    report["eval_metrics"] = trainer.evaluate()
    report["unmasked_warnings"] = [line for line in LOGS if "reach MaeLmForMaskedLM unmasked" in line]
    # Evaluation again, masked from a seed, so that the accuracy can be computed by hand on the same masks.
    seeded = trainer_for(DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=0), "mlm-seeded")
    report["seeded_accuracy"] = seeded.evaluate()["eval_accuracy"]
    seeded_collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=0)
    report["accuracy_by_hand"] = accuracy_by_hand(model, blocks, seeded_collator, batch_size=3)
    saved = f"{run_dir}/mlm/final"
    trainer.save_model(saved)
    report["saved_files"] = sorted(os.listdir(saved))
    report["fill_mask"] = fill_mask_report(saved, tokenizer)
    report["tokenizer"] = tokenizer_report(saved, remote)
    return report


def main(job_path: str, results_path: str) -> None:
    with open(job_path) as file:
        job = json.load(file)
    runners = {"glue": glue, "qa": qa, "ner": ner, "mlm": mlm}
    results = {}
    for name, path, remote, tasks in job["runs"]:
        run_dir = f"{job['work_dir']}/{name}"
        results[name] = {task: runners[task](job["data"], run_dir, path, remote) for task in tasks}
        results[name]["tokenizer"] = tokenizer_report(path, remote)
    # The parent checks it: the stock-script calls must not have imported hf_encoders behind the checkpoint's back.
    results["hf_encoders_imported"] = "hf_encoders" in sys.modules
    with open(results_path, "w") as file:
        json.dump(results, file)


if __name__ == "__main__":
    main(*sys.argv[1:])
