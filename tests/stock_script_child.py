"""Child program of tests/test_stock_scripts.py, run in an interpreter that cannot import hf_encoders: on each
checkpoint it is given, the calls run_glue.py, run_qa.py and run_ner.py make, then a JSON report for the parent.

Usage: stock_script_child.py JOB_JSON RESULTS_JSON

JOB_JSON holds "data" (the GLUE pairs, QA examples and NER examples), "work_dir" and "runs": [name, checkpoint path,
trust_remote_code, tasks] each.
"""

import json
import os
import sys

import numpy as np
from datasets import Dataset
from transformers import (
    AutoConfig,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
    Trainer,
    TrainingArguments,
    default_data_collator,
    set_seed,
)

MAX_LENGTH, DOC_STRIDE = 24, 8


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
    return report, prediction


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


def main(job_path: str, results_path: str) -> None:
    with open(job_path) as file:
        job = json.load(file)
    runners = {"glue": glue, "qa": qa, "ner": ner}
    results = {}
    for name, path, remote, tasks in job["runs"]:
        run_dir = f"{job['work_dir']}/{name}"
        results[name] = {task: runners[task](job["data"], run_dir, path, remote) for task in tasks}
    # The parent checks it: the stock-script calls must not have imported hf_encoders behind the checkpoint's back.
    results["hf_encoders_imported"] = "hf_encoders" in sys.modules
    with open(results_path, "w") as file:
        json.dump(results, file)


if __name__ == "__main__":
    main(*sys.argv[1:])
