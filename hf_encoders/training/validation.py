"""Validation during pre-training: documents held out whole, masked the same way at every evaluation.

Held-out DOCUMENTS, not blocks: packing cuts a document into blocks, and a block of a document whose other blocks
are trained on is not held out. The training documents keep their order, so a run with a validation split trains on
the same sequence of blocks as one without, minus the held-out documents.
"""

import copy

import numpy as np
from datasets import Dataset, IterableDataset

from ..data.corpus import load_documents
from ..data.sentences import split_sentences


def check_validation_arguments(args, training_args) -> None:
    """Refuse a validation set that cannot be made, one nobody evaluates, and an evaluation schedule without a
    validation set; a set that cannot be made first, since no schedule would mend it."""
    if args.validation_split_percentage is not None and args.validation_file is not None:
        raise ValueError("Pass one validation set: --validation_split_percentage or --validation_file, not both.")
    percentage = args.validation_split_percentage
    if percentage is not None and not 0 < percentage <= 50:
        raise ValueError(
            f"--validation_split_percentage {percentage:g} is outside (0, 50]: it is the share of the corpus's "
            "documents held out for validation, e.g. 5."
        )
    if percentage is not None and args.streaming:
        raise ValueError(
            "--validation_split_percentage holds out a share of a corpus of known size; a streamed corpus has "
            "none. Pass --validation_file PATH instead."
        )
    if percentage is not None and args.tokenized_dir is not None:
        raise ValueError(
            "--validation_split_percentage holds out documents of the corpus, which a token cache no longer has: "
            "pass --validation_file PATH (tokenized with the run's tokenizer) with --tokenized_dir."
        )
    has_validation = percentage is not None or args.validation_file is not None
    evaluates = evaluates_during_training(training_args)
    if args.diagnostics_steps is not None:
        check_diagnostics_arguments(args, training_args, has_validation)
    elif has_validation and not evaluates:
        raise ValueError(
            "A validation set is evaluated on Trainer's schedule, which is off: add --eval_strategy steps "
            "--eval_steps N (or --eval_strategy epoch)."
        )
    if evaluates and not has_validation:
        raise ValueError(
            "Trainer's evaluation schedule (--eval_strategy, --eval_on_start) needs a validation set: add "
            "--validation_split_percentage N (held-out documents of the corpus) or --validation_file PATH."
        )


def evaluates_during_training(training_args) -> bool:
    return training_args.eval_strategy != "no" or training_args.eval_on_start


def check_diagnostics_arguments(args, training_args, has_validation: bool) -> None:
    if args.diagnostics_steps < 1 or args.diagnostics_sentences < 1:
        raise ValueError(
            f"--diagnostics_steps ({args.diagnostics_steps}) and --diagnostics_sentences "
            f"({args.diagnostics_sentences}) must be positive."
        )
    if not has_validation:
        raise ValueError(
            "--diagnostics_steps probes sentences the model never trains on, taken from the validation set: add "
            "--validation_split_percentage N or --validation_file PATH."
        )
    if training_args.fsdp or training_args.deepspeed:
        raise ValueError(
            "--diagnostics_steps runs the encoder on the main process alone, which a sharded model (FSDP, DeepSpeed) "
            "cannot do; drop it and run `hf-encoders analyze` on the saved checkpoints."
        )


def probe_sentences(documents: Dataset, count: int) -> list[str]:
    """The first `count` sentences of the validation documents: the probe set of `--diagnostics_steps`."""
    sentences = []
    for document in documents["text"]:  # only as many documents as the probe needs are split
        sentences += split_sentences(document)[: count - len(sentences)]
        if len(sentences) == count:
            break
    if len(sentences) < 2:
        raise ValueError(
            f"The validation set holds {len(sentences)} sentence(s); --diagnostics_steps needs at least 2 to measure "
            "self-similarity and rank. Hold out more documents (--validation_split_percentage) or pass a longer "
            "--validation_file."
        )
    return sentences


def split_validation(
    documents: Dataset | IterableDataset, args, seed: int
) -> tuple[Dataset | IterableDataset, Dataset | IterableDataset | None]:
    """(training documents, validation documents or None) as `--validation_file` or `--validation_split_percentage`
    ask: the held-out documents are drawn with `seed`, so every process of a run holds out the same ones. A split
    needs documents of known number (`check_validation_arguments` refuses it on a stream or a cache)."""
    if args.validation_file is not None:
        return documents, load_documents(args.validation_file, text_column=args.text_column)
    if args.validation_split_percentage is None:
        return documents, None
    count = len(documents)
    held_out = int(np.ceil(count * args.validation_split_percentage / 100))
    if held_out >= count:
        raise ValueError(
            f"The corpus has {count} document(s): too few to hold {args.validation_split_percentage:g}% out and "
            "train on the rest. Use a larger corpus or pass --validation_file PATH."
        )
    is_held_out = np.zeros(count, dtype=bool)
    is_held_out[np.random.default_rng(seed).choice(count, held_out, replace=False)] = True
    return documents.select(np.flatnonzero(~is_held_out)), documents.select(np.flatnonzero(is_held_out))


def check_validation_examples(dataset) -> None:
    """A validation set too short for one example would evaluate nothing, and log no eval_loss."""
    if isinstance(dataset, Dataset) and len(dataset) == 0:
        raise ValueError(
            "The validation documents make no example (a packed block, or TaCL's sentence pair): they are too short. "
            "Hold out more documents (--validation_split_percentage), pass a longer --validation_file, or lower "
            "--block_size."
        )


def validation_size_line(dataset, documents, training_args) -> str:
    """What each evaluation reads, said once at the start: an evaluation of a large set costs minutes."""
    when = f"every {training_args.eval_steps:g} steps" if training_args.eval_strategy == "steps" else "every epoch"
    where = f" from {len(documents):,} held-out documents" if isinstance(documents, Dataset) else ""
    return f"Validation set: {len(dataset):,} examples{where}, evaluated {when}."


def validation_collator(collator):
    """The training collator with its masking epoch (and rate) frozen: masks are a function of (seed, epoch, tokens)
    (data/reproducible_masking.py), so every evaluation masks the validation set identically."""
    frozen = copy.copy(collator)
    frozen.epoch = 0
    # A masking schedule's collator evaluates at its own `mlm_probability`, the schedule's last rate.
    frozen.mlm_probabilities = None
    return frozen
