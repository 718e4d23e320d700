"""One fine-tuning run of the protocol of Gisserot-Boukhlef et al. (2025) on a sequence classification (sc), token
classification (tc) or extractive QA (qa) task, on any checkpoint Transformers loads.

The head is the checkpoint's own, from the Auto classes (biphasic checkpoints classify on mean pooling, as in the
paper); the preprocessing is what run_glue.py, run_ner.py and run_qa.py do; training is `Trainer` with the
protocol's schedule (up to `max_steps` or one epoch, warmup then linear decay); the scores are the package's offline
metrics on the validation split and, when the task has one, the test split.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import numpy as np
import torch
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
from transformers.utils import logging as hf_logging

from ..metrics import accuracy, entity_f1, f1, matthews_correlation, squad_metrics, squad_v2_metrics
from ..model_folders import load_model
from .tasks import Task

logger = hf_logging.get_logger(__name__)

HEADS = {
    "sc": AutoModelForSequenceClassification,
    "tc": AutoModelForTokenClassification,
    "qa": AutoModelForQuestionAnswering,
}
HEAD_NAMES = {"sc": "sequence classification", "tc": "token classification", "qa": "question answering"}
# The loss ignores this label: special tokens, a word's later sub-tokens.
IGNORED = -100
# run_qa.py's post-processing defaults: candidates per end, and the longest answer in tokens.
N_BEST = 20
MAX_ANSWER_TOKENS = 30


@dataclass
class RunSettings:
    learning_rate: float
    seed: int
    max_steps: int = 1000
    batch_size: int = 32
    warmup_ratio: float = 0.1
    max_length: int = 256
    trust_remote_code: bool = False
    # Trainer precision and device options (bf16, use_cpu, ...), passed to TrainingArguments over the protocol's.
    training_overrides: dict = field(default_factory=dict)

    def steps_for(self, examples: int) -> int:
        """`max_steps` or one epoch of `examples`, whichever is fewer (one device), said once per task."""
        epoch = math.ceil(examples / self.batch_size)
        if epoch < self.max_steps:
            logger.warning_once(
                f"--max_steps {self.max_steps} is more than one epoch of this task's {examples} training examples at "
                f"batch {self.batch_size}: its runs take {epoch} steps (the protocol: up to max_steps or one epoch)."
            )
        return min(self.max_steps, epoch)


def fine_tune(model_path: str, task: Task, settings: RunSettings, output_dir: Path) -> dict:
    """Fine-tune `model_path` on `task` once; the model and tokenizer are saved in `output_dir`.

    Returns {"steps": optimizer steps, "validation": {metric: value}, "test": {...} (when the task has a test split)}.
    Steps are `settings.max_steps` or one epoch of the training features, whichever is fewer.
    """
    if task.kind not in HEADS:
        raise ValueError(f"fine_tune runs {', '.join(HEADS)} tasks; {task.kind} tasks run through fine_tune_retrieval.")
    config = AutoConfig.from_pretrained(model_path, trust_remote_code=settings.trust_remote_code)
    check_head(model_path, config, task.kind)
    tokenizer = load_finetune_tokenizer(model_path, task.kind, settings.trust_remote_code)
    recipe = FINETUNE_RECIPES[task.kind](
        task, tokenizer, max_length=usable_length(settings.max_length, tokenizer, config)
    )
    train = recipe.train_features(task.train)
    steps = settings.steps_for(len(train))
    set_seed(settings.seed)  # the new head's initial weights are part of what the seed varies
    model = load_model(
        HEADS[task.kind], model_path, trust_remote_code=settings.trust_remote_code, **recipe.model_options(config)
    )
    trainer = Trainer(
        model=model,
        args=finetune_training_arguments(settings, steps, output_dir),
        train_dataset=train,
        data_collator=recipe.collator,
        processing_class=tokenizer,
    )
    trainer.train()
    trainer.save_model()
    result = {"steps": trainer.state.global_step, "validation": recipe.evaluate(trainer, task.validation)}
    if task.test is not None:
        result["test"] = recipe.evaluate(trainer, task.test)
    return result


def pooling_of(model_path: str, trust_remote_code: bool = False) -> str:
    """How the checkpoint's sequence classification reads a sequence, in words for the report (TC and QA score
    every token, so pooling is a question for SC only)."""
    config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    if config.model_type == "biphasic":
        return "mean pooling (Gisserot-Boukhlef et al., 2025)"
    if config.model_type == "tacl":
        return "none: a TaCL training state has no task heads (`hf-encoders export` its student)"
    own_heads = {
        "bert": "[CLS] pooler",
        "mae_lm": "first token, dense + tanh",
        "roberta": "<s> token, dense + tanh",
        "xlm-roberta": "<s> token, dense + tanh",
        "electra": "first token, dense + GELU",
    }
    pooling = getattr(config, "classifier_pooling", None) or getattr(config, "clf_pooling", None)
    described = own_heads.get(config.model_type) or (f"{pooling} pooling" if pooling else config.model_type)
    return f"the model's own head ({described})"


def check_head(model_path: str, config, kind: str) -> None:
    """Refuse a checkpoint whose model has no head of this kind, before loading any weights."""
    head = HEADS[kind]
    # What the Auto class itself consults: its table of config classes (Transformers' own and those registered, as
    # hf_encoders registers its models), then a remote-code checkpoint's auto_map.
    if type(config) in head._model_mapping or head.__name__ in (getattr(config, "auto_map", None) or {}):
        return
    raise ValueError(
        f"{model_path!r} ({config.model_type}) has no {HEAD_NAMES[kind]} head: {head.__name__} cannot load it; "
        f"evaluate {kind} tasks on a checkpoint whose model has one (a TaCL training state: `hf-encoders export` "
        "it and evaluate the exported student)."
    )


def load_finetune_tokenizer(model_path: str, kind: str, trust_remote_code: bool):
    # Words of a TC task are tokenized one by one; byte-level BPE (RoBERTa, GPT-2) then needs the space before each
    # word it would see in running text, as run_ner.py does. WordPiece ignores the option.
    options = {"add_prefix_space": True} if kind == "tc" else {}
    tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=trust_remote_code, **options)
    if not tokenizer.is_fast:
        raise ValueError(
            f"the tokenizer of {model_path!r} is not a fast (Rust) one; {kind} needs its word ids and offsets: save "
            "the checkpoint with a `tokenizer.json`."
        )
    if tokenizer.pad_token is None:
        raise ValueError(
            f"the tokenizer of {model_path!r} has no pad token, so batches cannot be padded; set one "
            "(tokenizer.pad_token = ...) matching config.pad_token_id and save it with the checkpoint."
        )
    return tokenizer


def usable_length(requested: int, tokenizer, config) -> int:
    """The requested sequence length, never beyond the tokenizer's limit or the model's position table."""
    limits = [requested, tokenizer.model_max_length, getattr(config, "max_position_embeddings", None)]
    return min(limit for limit in limits if limit)


def protocol_arguments(settings: RunSettings, steps: int, output_dir: Path) -> dict:
    """The TrainingArguments every run of the protocol shares, fine-tuning and retrieval alike."""
    return dict(
        output_dir=str(output_dir),
        learning_rate=settings.learning_rate,
        seed=settings.seed,
        per_device_train_batch_size=settings.batch_size,
        max_steps=steps,
        warmup_steps=math.ceil(settings.warmup_ratio * steps),
        lr_scheduler_type="linear",
        save_strategy="no",
        # A few lines per run, never one per step: a grid runs many of them.
        logging_steps=max(10, steps // 10),
        report_to=[],
        # Pinned memory serves an accelerator; without one, torch warns at every dataloader.
        dataloader_pin_memory=torch.accelerator.is_available(),
    )


def finetune_training_arguments(settings: RunSettings, steps: int, output_dir: Path) -> TrainingArguments:
    protocol = protocol_arguments(settings, steps, output_dir)
    protocol.update(per_device_eval_batch_size=settings.batch_size, eval_strategy="no")
    return TrainingArguments(**{**protocol, **settings.training_overrides})


def logits_of(predictions):
    # Models returning more than logits hand Trainer a tuple whose first item is the logits.
    return predictions[0] if isinstance(predictions, tuple) else predictions


class FinetuneRecipe:
    """How one kind of task becomes model inputs, and how predictions become scores."""

    collator = None

    def __init__(self, task: Task, tokenizer, max_length: int):
        self.task, self.tokenizer, self.max_length = task, tokenizer, max_length

    def model_options(self, config) -> dict:
        return {}

    def train_features(self, dataset: datasets.Dataset) -> datasets.Dataset:
        return dataset.map(self.tokenize, batched=True, remove_columns=dataset.column_names)

    def tokenize(self, batch: dict) -> dict:
        raise NotImplementedError

    def evaluate(self, trainer: Trainer, dataset: datasets.Dataset) -> dict[str, float]:
        raise NotImplementedError


class LabelledFinetuneRecipe(FinetuneRecipe):
    def model_options(self, config) -> dict:
        names = self.task.label_names
        # num_labels follows from id2label; passing both warns when the checkpoint's saved head had another count.
        return {
            "id2label": dict(enumerate(names)),
            "label2id": {name: index for index, name in enumerate(names)},
        }


class SequenceClassification(LabelledFinetuneRecipe):
    def __init__(self, task: Task, tokenizer, max_length: int):
        super().__init__(task, tokenizer, max_length)
        self.collator = DataCollatorWithPadding(tokenizer)

    def model_options(self, config) -> dict:
        options = super().model_options(config)
        # Gisserot-Boukhlef et al. (2025) classify biphasic encoders on mean-pooled states, whatever pooling the
        # checkpoint was saved with.
        return {**options, "classifier_pooling": "mean"} if config.model_type == "biphasic" else options

    def tokenize(self, batch: dict) -> dict:
        features = self.tokenizer(batch["text"], batch.get("text_pair"), truncation=True, max_length=self.max_length)
        return {**features, "labels": batch["label"]}

    def evaluate(self, trainer: Trainer, dataset: datasets.Dataset) -> dict[str, float]:
        predicted = logits_of(trainer.predict(self.train_features(dataset)).predictions).argmax(-1)
        labels = np.asarray(list(dataset["label"]))
        average = "binary" if len(self.task.label_names) == 2 else "macro"
        return {
            "accuracy": accuracy(predicted, labels),
            "f1": f1(predicted, labels, average=average),
            "matthews_correlation": matthews_correlation(predicted, labels),
        }


def first_subtoken_labels(word_ids: list[int | None], tags: list[int]) -> list[int]:
    """Each word's tag on its first sub-token; IGNORED on its later sub-tokens and on special tokens."""
    labels, previous = [], None
    for word in word_ids:
        labels.append(tags[word] if word is not None and word != previous else IGNORED)
        previous = word
    return labels


class TokenClassification(LabelledFinetuneRecipe):
    def __init__(self, task: Task, tokenizer, max_length: int):
        super().__init__(task, tokenizer, max_length)
        self.collator = DataCollatorForTokenClassification(tokenizer)

    def tokenize(self, batch: dict) -> dict:
        features = self.tokenizer(
            batch["tokens"], is_split_into_words=True, truncation=True, max_length=self.max_length
        )
        labels = [first_subtoken_labels(features.word_ids(row), tags) for row, tags in enumerate(batch["tags"])]
        return {**features, "labels": labels}

    def evaluate(self, trainer: Trainer, dataset: datasets.Dataset) -> dict[str, float]:
        # Scored on the words the model saw (a word cut off by max_length has no prediction), as run_ner.py does.
        output = trainer.predict(self.train_features(dataset))
        predicted, labels = logits_of(output.predictions).argmax(-1), output.label_ids
        names = self.task.label_names
        predicted_tags, true_tags = [], []
        for predicted_row, label_row in zip(predicted, labels):
            scored = label_row != IGNORED
            predicted_tags.append([names[i] for i in predicted_row[scored]])
            true_tags.append([names[i] for i in label_row[scored]])
        scored = labels != IGNORED
        return {**entity_f1(predicted_tags, true_tags), "accuracy": accuracy(predicted[scored], labels[scored])}


@dataclass
class QaWindows:
    """Where each window of tokens the contexts were cut into came from."""

    example: list[int]  # the example (question) of each window
    offsets: list[list[tuple[int, int] | None]]  # each token's character span in the context; None outside it
    null_index: list[int]  # the position whose start and end logits score "no answer"


def null_index(input_ids: list[int], tokenizer) -> int:
    """Where a window points when it holds no answer: [CLS] where the tokenizer has one, else position 0."""
    cls = tokenizer.cls_token_id
    return input_ids.index(cls) if cls is not None and cls in input_ids else 0


def answer_positions(
    sequence_ids: list[int | None], offsets: list[tuple[int, int]], answers: dict, no_answer: int
) -> tuple[int, int]:
    """Start and end token of the first answer in this window, or (no_answer, no_answer) if it is not wholly in it."""
    if not answers["text"]:
        return no_answer, no_answer
    first_char = answers["answer_start"][0]
    end_char = first_char + len(answers["text"][0])
    context = [position for position, sequence in enumerate(sequence_ids) if sequence == 1]
    if offsets[context[0]][0] > first_char or offsets[context[-1]][1] < end_char:
        return no_answer, no_answer
    start = max(position for position in context if offsets[position][0] <= first_char)
    end = min(position for position in context if offsets[position][1] >= end_char)
    return start, end


def answer_texts(
    contexts: list[str],
    windows: QaWindows,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    allow_no_answer: bool,
    n_best: int = N_BEST,
    max_answer_tokens: int = MAX_ANSWER_TOKENS,
) -> list[str]:
    """Each example's answer: the best-scoring span (start + end logit) over its windows among the n-best starts and
    ends, inside the context and at most `max_answer_tokens` long; "" (no answer) where `allow_no_answer` and the
    lowest null score of its windows beats that span, or where no span qualifies."""
    best = [(-math.inf, "")] * len(contexts)
    null_score = [math.inf] * len(contexts)
    for window, example in enumerate(windows.example):
        starts, ends, offsets = start_logits[window], end_logits[window], windows.offsets[window]
        null = windows.null_index[window]
        null_score[example] = min(null_score[example], starts[null] + ends[null])
        for start in np.argsort(starts)[::-1][:n_best]:
            for end in np.argsort(ends)[::-1][:n_best]:
                if offsets[start] is None or offsets[end] is None or not 0 <= end - start < max_answer_tokens:
                    continue
                score = starts[start] + ends[end]
                if score > best[example][0]:
                    best[example] = (score, contexts[example][offsets[start][0] : offsets[end][1]])
    return [
        "" if allow_no_answer and null_score[example] > score else text for example, (score, text) in enumerate(best)
    ]


class QuestionAnswering(FinetuneRecipe):
    def __init__(self, task: Task, tokenizer, max_length: int):
        super().__init__(task, tokenizer, max_length)
        self.collator = default_data_collator  # windows are padded to max_length already
        # run_qa.py's stride is 128 of 384 tokens; short windows overlap by a quarter instead.
        self.stride = min(128, max_length // 4)
        # SQuAD v2: some questions have no answer, so predicting none is allowed and scored.
        splits = [split for split in (task.train, task.validation, task.test) if split is not None]
        self.version_2 = any(not answers["text"] for split in splits for answers in split["answers"])

    def windows(self, batch: dict):
        """Question first, then as much context as fits, in overlapping windows; padded to max_length."""
        return self.tokenizer(
            self.shortened([question.lstrip() for question in batch["question"]]),
            batch["context"],
            truncation="only_second",
            max_length=self.max_length,
            stride=self.stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding="max_length",
        )

    def shortened(self, questions: list[str]) -> list[str]:
        """Each question cut to its first max_length // 2 tokens (BERT's max_query_length), so a window always has
        room for more context than the `stride` it overlaps by: tokenizers panics otherwise."""
        offsets = self.tokenizer(
            questions,
            add_special_tokens=False,
            truncation=True,
            max_length=self.max_length // 2,
            return_offsets_mapping=True,
        )["offset_mapping"]
        return [question[: spans[-1][1]] if spans else question for question, spans in zip(questions, offsets)]

    def tokenize(self, batch: dict) -> dict:
        encoded = self.windows(batch)
        starts, ends = [], []
        for window, example in enumerate(encoded.pop("overflow_to_sample_mapping")):
            no_answer = null_index(encoded["input_ids"][window], self.tokenizer)
            positions = answer_positions(
                encoded.sequence_ids(window), encoded["offset_mapping"][window], batch["answers"][example], no_answer
            )
            starts.append(positions[0])
            ends.append(positions[1])
        encoded.pop("offset_mapping")
        return {**encoded, "start_positions": starts, "end_positions": ends}

    def evaluate(self, trainer: Trainer, dataset: datasets.Dataset) -> dict[str, float]:
        encoded = self.windows(dataset[:])
        windows = QaWindows(
            example=encoded.pop("overflow_to_sample_mapping"),
            offsets=[
                [span if sequence == 1 else None for span, sequence in zip(spans, encoded.sequence_ids(window))]
                for window, spans in enumerate(encoded.pop("offset_mapping"))
            ],
            null_index=[null_index(input_ids, self.tokenizer) for input_ids in encoded["input_ids"]],
        )
        start_logits, end_logits = trainer.predict(datasets.Dataset.from_dict(dict(encoded))).predictions[:2]
        predicted = answer_texts(list(dataset["context"]), windows, start_logits, end_logits, self.version_2)
        gold = [answers["text"] for answers in dataset["answers"]]
        return (squad_v2_metrics if self.version_2 else squad_metrics)(predicted, gold)


FINETUNE_RECIPES = {"sc": SequenceClassification, "tc": TokenClassification, "qa": QuestionAnswering}
