"""`hf-encoders pretrain`: any method on Trainer, every `TrainingArguments` option on the command line.

hf-encoders pretrain --method mae_lm --output_dir out/mae --max_steps 1000 --per_device_train_batch_size 32
"""

import argparse
import json
import math
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from functools import partial
from pathlib import Path

import datasets
import torch
from datasets import Dataset, IterableDataset
from tqdm.contrib.logging import logging_redirect_tqdm
from transformers import (
    HfArgumentParser,
    PreTrainedTokenizerBase,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import is_torch_optimi_available, logging

from ..analysis import plot_training_diagnostics
from ..data.corpus_report import CorpusReport, run_documents
from ..data.mixtures import SourceShares
from ..data.token_cache import cached_blocks
from ..methods import get_method
from .arguments import TRAINER_OPTION_HELP, HfCommandParser, PretrainArguments
from .cards import model_lines, write_model_card
from .console_log import print_about_ten_lines
from .diagnostics import DiagnosticsCallback
from .ema import EMA_FOLDER, EmaCallback
from .fast_path import (
    Device,
    attention_dropout_given,
    check_fp8_run,
    choose_attention,
    drop_attention_dropout,
    enable_fp8,
    this_device,
    training_defaults,
    vocab_multiple,
)
from .hub import push_output_dir
from .hub_callbacks import CheckpointBranchCallback, CompleteUploadCallback
from .loss_curves import default_logging_steps, plot_loss_curves
from .masking_epoch import MaskingEpochCallback
from .numerics import NonFiniteLossCallback
from .output_dir import prepare_output_dir, where_line
from .phased_blocks import data_phases, phased_blocks
from .plan import as_run, gpu_key, make_plan
from .preemption import PreemptionCallback
from .presets import (
    BLOCK_SIZE_FROM,
    Preset,
    card_lines,
    get_preset,
    merged_config_overrides,
    overrides,
    small_run,
    world_size_from_environment,
)
from .recipe import get_recipe
from .resume import check_optimizer_state, drop_optimizer_state, resolve_resume
from .schedules import (
    BatchSizeWarmupCallback,
    MlmProbabilityScheduleCallback,
    RopeThetaScheduleCallback,
    StepSchedule,
    check_warmup_accumulation,
    parse_block_size_schedule,
    parse_mlm_probability_schedule,
)
from .sentence_transformers_config import write_sentence_transformers_config
from .streaming import StreamingPretrainingTrainer, stream_for_this_rank
from .trainer import PretrainingTrainer
from .validation import (
    check_validation_arguments,
    check_validation_examples,
    evaluates_during_training,
    probe_sentences,
    split_validation,
    validation_collator,
    validation_size_line,
)

logger = logging.get_logger(__name__)


def check_mask_token(model, tokenizer) -> None:
    """Model and tokenizer must agree on [MASK], or every "masked" position silently trains on a real token."""
    config_id = getattr(model.config, "mask_token_id", None)
    if config_id is not None and config_id != tokenizer.mask_token_id:
        raise ValueError(
            f"The model's config.mask_token_id ({config_id}) differs from the tokenizer's mask_token_id "
            f"({tokenizer.mask_token_id}); set config.mask_token_id = tokenizer.mask_token_id."
        )


def check_pad_token(encoder, tokenizer) -> None:
    """Model and tokenizer must agree on padding: the embedding row of config.pad_token_id never learns, so any
    other id there freezes a real token (a checkpoint continued with another tokenizer)."""
    config_id = getattr(encoder.config, "pad_token_id", None)
    if config_id is not None and tokenizer.pad_token_id is not None and config_id != tokenizer.pad_token_id:
        raise ValueError(
            f"The model's pad_token_id ({config_id}) differs from the tokenizer's ({tokenizer.pad_token_id}), so "
            f"token {config_id}'s embedding would stay frozen; pass --tokenizer_name the tokenizer the checkpoint "
            "was trained with."
        )


def set_attn_implementation(model, implementation: str | None) -> None:
    """`--attn_implementation` on the model built or loaded, as from_pretrained's `attn_implementation` sets it (every
    sub-model included: TaCL's student and teacher). The model refuses one it cannot run, with its reason."""
    if implementation is None:
        return
    try:
        model.set_attn_implementation(implementation)
    except ImportError as error:  # a kernel whose package is missing (flash-attn): bad input for this machine
        raise ValueError(f"--attn_implementation {implementation}: {error}") from error


def flex_attention_dropout(model) -> float:
    """The attention dropout that MAE-LM's flex_attention path refuses (0 for a model without that path)."""
    from ..models.mae_lm.modeling_mae_lm import MaeLmAttention

    return max((module.dropout for module in model.modules() if isinstance(module, MaeLmAttention)), default=0.0)


def fit_model_to_device(model, args: PretrainArguments, device: Device) -> None:
    """What the run's device changes in the model (training/fast_path.py): the vocabulary of a model built from
    scratch padded (64 on CUDA; a model grown from a smaller checkpoint keeps its vocabulary, and so its outputs), and the attention implementation, flex_attention for MAE-LM on CUDA, which trains
    without attention dropout."""
    multiple = vocab_multiple(device, args.pad_vocab_to_multiple_of)
    if multiple > 1 and not args.starting_checkpoint and not args.init_from_smaller:
        # mean_resizing off: the model is new, its new rows are initialised as the others were.
        model.resize_token_embeddings(pad_to_multiple_of=multiple, mean_resizing=False)
    choice = choose_attention(
        args.method,
        device,
        args.attn_implementation,
        flex_attention_dropout(model),
        attention_dropout_given(args.config_overrides),
    )
    if choice.message:
        logger.warning(choice.message)
    if choice.without_attention_dropout:
        drop_attention_dropout(model)
    set_attn_implementation(model, choice.implementation)


def check_optimizer(training_args: TrainingArguments) -> None:
    """Refuse, before the corpus is read, an optimizer whose package is missing: StableAdamW (ModernBERT's, through
    transformers' `--optim stable_adamw`) comes from torch-optimi, the `stable` extra."""
    if training_args.optim == "stable_adamw" and not is_torch_optimi_available():
        raise ValueError("--optim stable_adamw needs torch-optimi: pip install 'hf-encoders[stable]'.")


def prefer_aten_random_numbers(training_args: TrainingArguments) -> None:
    """A compiled CPU run draws dropout's random numbers with aten, as eager does: inductor's own CPU kernels draw
    them more slowly (bench/README.md, "torch.compile through the pretrain command"). On a GPU, inductor's generator,
    fused into its kernels, is the fast one and stays."""
    if training_args.torch_compile and training_args.device.type == "cpu":
        import torch._inductor.config  # here, as it is slow to import and only a compiled run needs it

        torch._inductor.config.fallback_random = True


@dataclass
class PretrainResult:
    trainer: Trainer
    output_dir: Path
    encoder_dir: Path  # what fine-tuning loads: output_dir itself, or TaCL's exported student
    plots: list[Path] = field(default_factory=list)
    stopped_by: str | None = None  # the signal that stopped the run before its end (SIGINT, SIGTERM)
    stop_signal: int = 0  # its number
    average_dir: Path | None = None  # the moving average of the weights, with --ema_decay

    @property
    def preempted(self) -> bool:
        return self.stopped_by is not None

    @property
    def exit_status(self) -> int:
        """0 for a finished run; 128 + the signal's number for a stopped one, as the shell says of a command a signal
        ended (130 for Ctrl-C), so that `pretrain ... && evaluate ...` does not go on without a final model."""
        return 128 + self.stop_signal if self.preempted else 0

    def summary(self) -> str:
        """The run's last line: where the model to fine-tune, its card and its plots are."""
        if self.preempted:
            return (
                f"hf-encoders pretrain: stopped early, no final model; {self.output_dir} holds the checkpoint to "
                "continue from with --resume_from_checkpoint true."
            )
        return where_line(self.output_dir, self.encoder_dir, self.plots, self.average_dir)


def card_writer(
    recipe, args: PretrainArguments, training_args: TrainingArguments, corpus_report: CorpusReport, model, tokenizer
):
    """(output_dir, TrainerState) -> README.md, for the final save and for every Hub push."""
    sequences_per_step = (
        training_args.train_batch_size * training_args.world_size * training_args.gradient_accumulation_steps
    )
    block_size = args.block_size
    if args.block_size_schedule:  # the mean over the phases
        block_size = sum(
            phase.length * fraction for phase, fraction in parse_block_size_schedule(args.block_size_schedule).phases
        )
    return partial(
        write_model_card,
        recipe=recipe,
        args=args,
        model_id=training_args.hub_model_id,
        tokens_per_step=round(sequences_per_step * block_size),
        corpus_report=corpus_report,
        training_args=training_args,
        model_facts=model_lines(recipe.encoder(model), model, tokenizer),
        run_lines=card_lines(args, training_args),
    )


def shared_tokenizer(recipe, args: PretrainArguments, training_args: TrainingArguments, documents):
    """One tokenizer for every rank. Training one is not reproducible (tokenizers' WordPiece trainer breaks
    frequency ties in hash order), so under DDP the main process trains it and the others read its copy."""
    if args.tokenizer_name is not None or args.starting_checkpoint or training_args.world_size == 1:
        return recipe.build_tokenizer(args, documents)
    folder = Path(training_args.output_dir) / "tokenizer"
    with training_args.main_process_first(local=False, desc="training the tokenizer"):
        if training_args.process_index == 0:
            recipe.build_tokenizer(args, documents).save_pretrained(folder)
        return recipe.build_tokenizer(replace(args, tokenizer_name=str(folder)), documents)


@dataclass
class TrainingData:
    tokenizer: PreTrainedTokenizerBase
    train_dataset: Dataset | IterableDataset
    validation_documents: Dataset | IterableDataset | None
    corpus_report: CorpusReport


def training_data(recipe, args: PretrainArguments, training_args: TrainingArguments) -> TrainingData:
    """The run's tokenizer, training examples and validation documents: from `--tokenized_dir` (made first if it is
    not a cache yet), or tokenized from `--corpus` (a mixture of sources, if it names several), planned phase by phase
    when the data changes by phase (`--block_size_schedule`, `--anneal_corpus`)."""
    if args.tokenized_dir is not None:
        tokenizer, blocks, report = cached_blocks(recipe, args, training_args)
        _, validation_documents = split_validation(None, args, seed=training_args.seed)
        return TrainingData(tokenizer, blocks, validation_documents, report)
    planned = bool(args.block_size_schedule or args.anneal_corpus)
    documents, report = run_documents(args, training_args.seed, keep_source=planned)
    with map_bars_for(documents):
        return tokenized_data(recipe, args, training_args, documents, report, planned)


def tokenized_data(
    recipe, args: PretrainArguments, training_args: TrainingArguments, documents, report: CorpusReport, planned: bool
) -> TrainingData:
    documents, validation_documents = split_validation(documents, args, seed=training_args.seed)
    if isinstance(validation_documents, Dataset) and args.validation_file is None:
        report.held_out = len(validation_documents)
    tokenizer = shared_tokenizer(recipe, args, training_args, documents)
    recipe.check_tokenizer(args, tokenizer)
    if args.streaming:  # after the tokenizer, which a run trains on the whole corpus whatever its number of ranks
        documents = stream_for_this_rank(documents, training_args)
    if planned:
        examples = planned_blocks(recipe, args, training_args, tokenizer, documents, report)
    else:
        examples = recipe.build_dataset(args, tokenizer, documents)
    check_training_examples(examples, documents, tokenizer, args)
    return TrainingData(tokenizer, examples, validation_documents, report)


# Fewer documents than this are tokenised and packed in seconds: datasets' bar for each pass over them is noise.
MAP_BARS_FROM_DOCUMENTS = 10_000


@contextmanager
def map_bars_for(documents: Dataset | IterableDataset):
    """datasets' progress bars while `documents` are split, tokenised and packed: off for a short corpus, kept for a
    long one (a stream is tokenised as training reads it, with no bar of its own)."""
    quiet = isinstance(documents, Dataset) and len(documents) < MAP_BARS_FROM_DOCUMENTS
    enabled = not datasets.are_progress_bars_disabled()
    if quiet:
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        if quiet and enabled:
            datasets.enable_progress_bars()


def check_schedule_run(args: PretrainArguments, training_args: TrainingArguments) -> None:
    """What the schedules need of the Trainer options, before the corpus is read."""
    if args.batch_size_warmup_tokens is not None:
        check_warmup_accumulation(training_args.gradient_accumulation_steps)
    if not (args.block_size_schedule or args.anneal_corpus):
        return
    if training_args.max_steps <= 0:
        raise ValueError("--block_size_schedule and --anneal_corpus plan their phases in steps: pass --max_steps.")
    if training_args.train_sampling_strategy not in ("random", "sequential"):
        raise ValueError(
            f"A run whose data changes by phase orders its blocks itself (shuffled within each phase); drop "
            f"--train_sampling_strategy {training_args.train_sampling_strategy}."
        )


def planned_blocks(
    recipe, args: PretrainArguments, training_args: TrainingArguments, tokenizer, documents, report: CorpusReport
) -> Dataset:
    """The blocks of every phase of `--block_size_schedule` and `--anneal_corpus`, in the order the run trains on them
    (phased_blocks.py); what each phase's documents were is added to `report`."""
    max_steps = training_args.max_steps
    training_args.train_sampling_strategy = "sequential"
    seed = training_args.data_seed if training_args.data_seed is not None else training_args.seed
    lengths = [(args.block_size, 0, max_steps)]
    if args.block_size_schedule:
        schedule = parse_block_size_schedule(args.block_size_schedule)
        lengths = [(phase.length, first, end) for phase, first, end in schedule.boundaries(max_steps)]
    corpora, reports, anneal_start = [documents], [report], None
    if args.anneal_corpus:
        anneal = StepSchedule(((args.corpus, 1 - args.anneal_fraction), (args.anneal_corpus, args.anneal_fraction)))
        anneal.check_steps(max_steps)
        anneal_start = anneal.switch_steps(max_steps)[0]
        anneal_documents, anneal_report = run_documents(args, seed, corpus=args.anneal_corpus, keep_source=True)
        corpora.append(anneal_documents)
        reports.append(anneal_report)
    phases = data_phases(lengths, anneal_start)
    rows_per_step = (
        training_args.per_device_train_batch_size * training_args.world_size * training_args.gradient_accumulation_steps
    )
    blocks = phased_blocks(
        lambda length, chunk: recipe.build_dataset(
            replace(args, block_size=length, block_size_schedule=None), tokenizer, chunk
        ),
        corpora,
        phases,
        rows_per_step,
        seed,
    )
    for phase in phases:
        shares = SourceShares(reports[phase.corpus].sources)
        read = corpora[phase.corpus].select([index for span in phase.read for index in span])
        shares.count_dataset(read)
        report.phases.append((str(phase), shares))
        logger.info(f"{phase}: {sum(shares.rows.values()):,} documents read; {'; '.join(shares.lines())}")
    return blocks


def check_training_examples(examples, documents, tokenizer, args: PretrainArguments) -> None:
    """A corpus too short for one training example, refused in numbers the user can act on (else torch's sampler
    refuses it at the first step: "num_samples should be a positive integer value")."""
    if not isinstance(examples, Dataset) or len(examples) > 0:  # a stream's length is unknown until it is read
        return
    encoded = tokenizer(list(documents["text"]), add_special_tokens=False, verbose=False)["input_ids"]
    tokens = sum(map(len, encoded))
    raise ValueError(
        f"The corpus gave {tokens:,} tokens in {len(documents):,} training document(s), which make 0 training "
        f"examples of --block_size {args.block_size}: pass a smaller --block_size, or more text (a larger corpus, "
        "a larger --max_documents, or fewer rows left out by --skip_bad_rows)."
    )


def diagnostics_callbacks(args: PretrainArguments, tokenizer, validation_documents) -> list[TrainerCallback]:
    """With --diagnostics_steps, the probe of the validation set's first sentences."""
    if args.diagnostics_steps is None:
        return []
    probe = probe_sentences(validation_documents, args.diagnostics_sentences)
    return [DiagnosticsCallback(args.diagnostics_steps, tokenizer, probe, max_length=args.block_size)]


def schedule_callbacks(args: PretrainArguments) -> list[TrainerCallback]:
    """The schedules every method can train with (training/schedules.py)."""
    callbacks: list[TrainerCallback] = []
    if args.mlm_probability_schedule:
        callbacks.append(MlmProbabilityScheduleCallback(parse_mlm_probability_schedule(args.mlm_probability_schedule)))
    first_length = args.block_size
    if args.block_size_schedule:
        schedule = parse_block_size_schedule(args.block_size_schedule)
        first_length = schedule.phases[0][0].length
        if any(phase.rope_theta is not None for phase, _ in schedule.phases):
            callbacks.append(RopeThetaScheduleCallback(schedule))
    if args.batch_size_warmup_tokens is not None:
        callbacks.append(BatchSizeWarmupCallback(args.batch_size_warmup_tokens, first_length))
    return callbacks


def build_trainer(
    args: PretrainArguments,
    training_args: TrainingArguments,
    resume_from_checkpoint: str | None = None,
    choose_logging_steps: bool = False,
) -> Trainer:
    """Everything `pretrain` trains with: corpus, tokenizer, model, data, collator and callbacks of the method. With
    `choose_logging_steps` (a run of epochs whose user gave no --logging_steps), the logging interval is chosen from
    the run's length once the data is known (loss_curves.default_logging_steps)."""
    recipe = get_recipe(args.method)
    recipe.check_arguments(args)  # the options as given, before a resumed run reads its own tokenizer
    if resume_from_checkpoint is not None:
        recipe.check_resume(args, training_args, resume_from_checkpoint)
    if resume_from_checkpoint is not None and args.tokenizer_name is None and args.starting_checkpoint is None:
        # A tokenizer trained on the spot cannot be trained again identically (tokenizers' WordPiece trainer breaks
        # frequency ties in hash order), so a resumed run reads the one Trainer saved with the checkpoint.
        args = replace(args, tokenizer_name=resume_from_checkpoint)
    if training_args.fp16 and not torch.cuda.is_available():
        raise ValueError(
            "--fp16 has no effect on CPU (accelerate runs such a run in fp32 without a word); use --bf16, which CPUs "
            "autocast, or drop --fp16."
        )
    check_optimizer(training_args)
    device = this_device(use_cpu=training_args.device.type != "cuda")
    if args.fp8:
        check_fp8_run(device, training_args)
    prefer_aten_random_numbers(training_args)
    if training_args.device.type == "cpu":  # nothing to pin memory for: torch would warn at every dataloader
        training_args.dataloader_pin_memory = False
    check_validation_arguments(args, training_args)
    check_schedule_run(args, training_args)
    log_preset(args, training_args)
    with training_args.main_process_first(local=False, desc="preparing the output folder"):
        if training_args.process_index == 0:
            prepare_output_dir(
                Path(training_args.output_dir),
                recipe.method,
                overwrite=args.overwrite_output_dir,
                resume_checkpoint=resume_from_checkpoint,
            )
    if resume_from_checkpoint is not None:
        check_optimizer_state(resume_from_checkpoint)
    set_seed(training_args.seed)  # before the model is built, so two runs with one seed start from the same weights
    data = training_data(recipe, args, training_args)
    tokenizer, validation_documents = data.tokenizer, data.validation_documents
    model = recipe.build_model(args, tokenizer)
    fit_model_to_device(model, args, device)
    check_mask_token(model, tokenizer)
    check_pad_token(recipe.encoder(model), tokenizer)
    if getattr(model.config, "pad_token_id", None) is None:  # TaCL's: else Trainer sets it, with a warning
        model.config.pad_token_id = tokenizer.pad_token_id
    # The saved tokenizer states the length the model's position table takes: a new table's, or at most the table of
    # a checkpoint continued (a tokenizer converted from GGUF says 10^30; RoBERTa's says 512 of a 514-row table).
    positions = recipe.encoder(model).config.max_position_embeddings
    starts_new = not args.starting_checkpoint
    tokenizer.model_max_length = positions if starts_new else min(tokenizer.model_max_length, positions)
    collator = recipe.build_collator(args, tokenizer)
    # Masks from (seed, epoch, batch): a resumed run masks exactly as the uninterrupted one (data/reproducible_masking).
    collator.seed = training_args.data_seed if training_args.data_seed is not None else training_args.seed
    eval_dataset = None
    if evaluates_during_training(training_args):
        eval_dataset = recipe.build_dataset(args, tokenizer, validation_documents)
        check_validation_examples(eval_dataset)
        if training_args.process_index == 0 and isinstance(eval_dataset, Dataset):
            logger.warning(validation_size_line(eval_dataset, validation_documents, training_args))
    trainer_class = StreamingPretrainingTrainer if args.streaming else PretrainingTrainer
    trainer = trainer_class(
        model=model,
        args=training_args,
        train_dataset=data.train_dataset,
        eval_dataset=eval_dataset,
        data_collator=collator,
        eval_data_collator=validation_collator(collator),
        processing_class=tokenizer,
        perplexity_loss=recipe.perplexity_loss,
        peak_tflops=args.peak_tflops,
        callbacks=[
            *recipe.callbacks(args),
            *schedule_callbacks(args),
            *diagnostics_callbacks(args, tokenizer, validation_documents),
            *([] if args.ema_decay is None else [EmaCallback(args.ema_decay, resume_from=resume_from_checkpoint)]),
            MaskingEpochCallback(collator),
            NonFiniteLossCallback(),
            PreemptionCallback(),
            CompleteUploadCallback(card_writer(recipe, args, training_args, data.corpus_report, model, tokenizer)),
        ],
    )
    if choose_logging_steps and not args.streaming:  # Trainer refuses a stream without --max_steps
        training_args.logging_steps = default_logging_steps(epoch_run_steps(trainer))
    print_about_ten_lines(trainer)
    trainer.corpus_report = data.corpus_report  # for the final card, and the log of what the run read
    if training_args.push_to_hub:  # Trainer has created the repository, and knows its id, by now
        write_card = partial(
            card_writer(recipe, args, training_args, data.corpus_report, model, tokenizer),
            model_id=trainer.hub_model_id,
        )
        trainer.add_callback(CheckpointBranchCallback(trainer.hub_model_id, write_card))
    return trainer


def epoch_run_steps(trainer: Trainer) -> int:
    """The optimizer steps of a run of --num_train_epochs, as Trainer counts them: its training dataloader's batches
    (on this rank) in steps of --gradient_accumulation_steps, times the epochs."""
    args = trainer.args
    batches = len(trainer.get_train_dataloader())
    return math.ceil(args.num_train_epochs * math.ceil(batches / args.gradient_accumulation_steps))


def save_average(trainer: Trainer, recipe, output_dir: Path, write_card) -> Path | None:
    """The moving average of a run with --ema_decay, as a model of its own in OUTPUT_DIR/ema/: the encoder that
    fine-tuning loads (TaCL's student), its code, the tokenizer and a card that says what the weights are."""
    ema = next((callback for callback in trainer.callback_handler.callbacks if isinstance(callback, EmaCallback)), None)
    if ema is None:
        return None
    folder = output_dir / EMA_FOLDER
    recipe.encoder(ema.average.module).save_pretrained(folder)
    trainer.processing_class.save_pretrained(folder)
    note = (
        f"- **weights: the exponential moving average of the training weights** (decay {ema.decay}, over "
        f"{int(ema.average.n_averaged)} optimizer steps), not the last step's, which the parent folder holds"
    )
    write_card(folder, trainer.state, template=recipe.encoder_card_template, subfolder=EMA_FOLDER, note=note)
    return folder


@contextmanager
def one_progress_bar():
    """The console during training: the training bar alone, each log line on its own line. Our and transformers' log
    lines are written through tqdm, which lifts the bar first (else a warning, a collapse or a signal, is glued to
    the end of the bar's line); transformers' own bars (a checkpoint's "Writing model shards") are off, since a bar
    opened under the training bar moves the cursor up with escape sequences (`^[[A` in a log)."""
    bars = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        with logging_redirect_tqdm([logging.get_logger("hf_encoders"), logging.get_logger()]):
            yield
    finally:
        if bars:
            logging.enable_progress_bar()


def pretrain(
    args: PretrainArguments, training_args: TrainingArguments, choose_logging_steps: bool = False
) -> PretrainResult:
    """The run, to its end or to a signal (see PreemptionCallback); `choose_logging_steps`: see build_trainer."""
    recipe = get_recipe(args.method)
    checkpoint = resolve_resume(training_args.resume_from_checkpoint, training_args.output_dir)
    trainer = build_trainer(
        args, training_args, resume_from_checkpoint=checkpoint, choose_logging_steps=choose_logging_steps
    )
    preemption = next(
        callback for callback in trainer.callback_handler.callbacks if isinstance(callback, PreemptionCallback)
    )
    try:
        with one_progress_bar():
            trainer.train(resume_from_checkpoint=checkpoint)
    finally:  # a run that raises skips on_train_end, whose restore would otherwise never come
        preemption.restore_handlers()
    output_dir = Path(training_args.output_dir)
    if preemption.received:
        # Not the end of training: no final model, card or push; the checkpoint just saved is where it resumes.
        return PretrainResult(
            trainer, output_dir, output_dir, stopped_by=preemption.received, stop_signal=preemption.number
        )
    trainer.save_model()
    encoder_dir, average_dir = output_dir, None
    plots = [output_dir / "loss_curve.png"]
    if trainer.is_world_process_zero():  # under DDP every rank gets here; one writes
        log_history = trainer.state.log_history
        (output_dir / "log_history.json").write_text(json.dumps(log_history, indent=1))
        plot_loss_curves({recipe.name: log_history}, plots[0])
        if any("self_similarity" in entry for entry in log_history):  # none if the data ran out before a probe
            plots.append(output_dir / "diagnostics.png")
            plot_training_diagnostics(log_history, plots[-1])
        for line in trainer.corpus_report.lines():  # at the end: a stream's shares are counted as it is read
            logger.warning(line.removeprefix("- "))
        write_card = card_writer(
            recipe, args, training_args, trainer.corpus_report, trainer.model, trainer.processing_class
        )
        write_card(output_dir, trainer.state)
        # Before the push, so that what the output folder's card describes (TaCL: a training state and its
        # student/ subfolder) is what the Hub receives.
        encoder_dir = recipe.export_encoder(trainer, output_dir, write_card)
        # A model trained from scratch has seen inputs of block_size tokens only (BERT's position embeddings beyond
        # are untrained); one continued from a checkpoint keeps the limit it came with.
        max_seq_length = None if args.starting_checkpoint else args.block_size
        write_sentence_transformers_config(encoder_dir, recipe.encoder(trainer.model), max_seq_length=max_seq_length)
        average_dir = save_average(trainer, recipe, output_dir, write_card)
        if average_dir is not None:
            write_sentence_transformers_config(
                average_dir, recipe.encoder(trainer.model), max_seq_length=max_seq_length
            )
        if not args.keep_optimizer_state:
            # Only continuing this finished run would read it, and it is twice the model's size.
            final_checkpoint = output_dir / f"{PREFIX_CHECKPOINT_DIR}-{trainer.state.global_step}"
            if freed := drop_optimizer_state(final_checkpoint):
                logger.warning(
                    f"Dropped the optimizer state of {final_checkpoint} ({freed / 2**20:,.1f} MiB): the run is over and "
                    "its model is saved; --keep_optimizer_state keeps it to train the run on later."
                )
        if training_args.push_to_hub:
            push_output_dir(trainer)
    return PretrainResult(trainer, output_dir, encoder_dir, plots, average_dir=average_dir)


def pretrain_parser(add_help: bool = True) -> HfArgumentParser:
    parser = HfCommandParser(
        (PretrainArguments, TrainingArguments),
        prog="hf-encoders pretrain",
        description="Pre-train an encoder with --method mlm, mae_lm, tacl or biphasic on Trainer: this package's "
        "options first, then every TrainingArguments option.",
        add_help=add_help,
    )
    for action in parser._actions:  # argparse keeps no public table of its options
        action.help = TRAINER_OPTION_HELP.get(action.dest, action.help)
    return parser


def given_options(argv: list[str]) -> dict:
    """The options `argv` gives, with their values, as the pretrain parser reads them (`--flag=value`, a bare
    boolean flag), and nothing else: parsed with every default suppressed."""
    parser = pretrain_parser(add_help=False)
    for action in parser._actions:
        action.default, action.required = argparse.SUPPRESS, False
    given, _ = parser.parse_known_args(argv)
    return vars(given)


def parse_arguments(argv: list[str], device: Device | None = None) -> tuple[PretrainArguments, TrainingArguments]:
    """The run's arguments (read_command_line)."""
    args, training_args, _ = read_command_line(argv, device)
    return args, training_args


def read_command_line(
    argv: list[str], device: Device | None = None
) -> tuple[PretrainArguments, TrainingArguments, dict]:
    """The command line (or one JSON file of options) over the defaults of its layers, lowest first: the parser's,
    the preset's (`--preset`, or a model from scratch's small-run preset: training/presets.py), the fast settings of
    `device` (default: the one the run trains on; training/fast_path.py); and the options it gave, by name."""
    parser = pretrain_parser()
    if any(argument == "--init" or argument.startswith("--init=") for argument in argv):
        parser.error(
            "--init was split in two: --model_name_or_path (a checkpoint to continue, e.g. the encoder TaCL "
            "continues) and --from_causal_lm (biphasic: a causal LM to convert)."
        )
    if any(argument in ("-h", "--help") for argument in argv):
        parser.parse_args(argv)  # prints the help and exits
    from_json = len(argv) == 1 and argv[0].endswith(".json")
    given = json.loads(Path(argv[0]).read_text()) if from_json else given_options(argv)
    if "output_dir" not in given:  # Trainer would pick ./trainer_output without a word
        parser.error("--output_dir is required: the folder the model, its card and its plots are written to.")
    preset = chosen_preset(given)
    device = device or this_device(use_cpu=given.get("use_cpu", False))
    if given.get("fp8"):
        enable_fp8(device, given)
    defaults = {
        **(preset.defaults(given, world_size_from_environment()) if preset else {}),
        **training_defaults(device, fp8=given.get("fp8", False)),
    }
    max_steps = given.get("max_steps", defaults.get("max_steps", -1))
    if max_steps > 0 and "logging_steps" not in given:  # a run of epochs chooses once its data is known
        defaults["logging_steps"] = default_logging_steps(max_steps)
    if from_json:
        args, training_args = parser.parse_dict({**defaults, **given})
    else:
        parser.set_defaults(**defaults)
        if preset:
            for action in parser._actions:  # argparse keeps no public table of its options
                action.required = action.required and action.dest != "method"
        args, training_args = parser.parse_args_into_dataclasses(argv)
    if preset:
        args = fit_preset(preset, given, args, training_args)
    return args, training_args, given


def chosen_preset(given: dict) -> Preset | None:
    """The preset of this run: `--preset`, else the small-run preset of a model built from scratch (None if none)."""
    if "preset" not in given:
        return small_run(given)
    preset = get_preset(given["preset"])
    if "method" in given and get_method(given["method"]).name != preset.method:
        raise ValueError(
            f"--preset {preset.name} trains --method {preset.method}, not {given['method']}: drop --method, or "
            "choose a preset of that method (hf-encoders plan --list)."
        )
    for option, why in preset.needs.items():
        if option not in given:
            raise ValueError(f"--preset {preset.name} needs --{option}: {why}.")
    return preset


def fit_preset(preset: Preset, given: dict, args: PretrainArguments, training_args: TrainingArguments):
    """The arguments with the preset's config fields under those `--config_overrides` gives, and without the preset
    values this run makes moot (a tokenizer's size when --tokenizer_name is given, ...), each said in the log."""
    if preset.config and "config_overrides" in given:
        args = replace(args, config_overrides=merged_config_overrides(preset.config_overrides(), args.config_overrides))
    unread = get_recipe(args.method).unread_options(args)
    defaults = {option.name: option.default for option in fields(PretrainArguments)}
    for option in sorted(preset.options.keys() & unread.keys() - given.keys()):
        reason = unread[option].split(" Drop ")[0]  # the advice to drop it is for a flag given, not a preset's value
        logger.warning(f"The preset's --{option} {preset.value(option)} is left out: {reason}")
        args = replace(args, **{option: defaults[option]})
    if "block_size" in preset.options.keys() - given.keys() and given.keys() & BLOCK_SIZE_FROM:
        decided_by = " and ".join(f"--{option}" for option in sorted(given.keys() & BLOCK_SIZE_FROM))
        logger.warning(f"The preset's --block_size {preset.value('block_size')} is left out: {decided_by} sets it.")
    if preset.config and "config_overrides" in unread and "config_overrides" not in given:
        logger.warning(f"The preset's model shape is left out: this run continues {args.starting_checkpoint} as it is.")
        args = replace(args, config_overrides=None)
    return args


def log_preset(args: PretrainArguments, training_args: TrainingArguments) -> None:
    """The start of a run's log: the preset it runs and what it overrides, and for a paper's preset its plan."""
    if not args.preset:
        return
    preset = get_preset(args.preset)
    changed = overrides(preset, args, training_args)
    logger.warning(
        f"Preset {preset.name} ({preset.paper}); "
        + (f"overridden: {'; '.join(changed)}." if changed else "no overrides.")
    )
    # A paper's run: what it costs, as `hf-encoders plan` says; not for a saved model continued (CPT), whose size the
    # preset does not know.
    if preset.batch_size is not None and (args.config_overrides or not preset.config):
        name = torch.cuda.get_device_name() if training_args.device.type == "cuda" else ""
        run = as_run(preset, args, training_args)
        logger.warning(make_plan(run, training_args.world_size, gpu_key(name)).line())


def main(argv: list[str] | None = None) -> int:
    args, training_args, given = read_command_line(sys.argv[1:] if argv is None else argv)
    choose_logging_steps = training_args.max_steps <= 0 and "logging_steps" not in given
    result = pretrain(args, training_args, choose_logging_steps=choose_logging_steps)
    if result.preempted:  # here, not in `pretrain`: a caller such as the demo resumes its own way
        logger.warning(
            f"Stopped by {result.stopped_by} after step {result.trainer.state.global_step}, with a complete "
            f"checkpoint in {result.output_dir}; continue with --resume_from_checkpoint true."
        )
    if result.trainer.is_world_process_zero():
        print(result.summary())
    # A process group left for the interpreter's exit can abort it: gloo's threads still hold work whose tensors need
    # the interpreter (SIGABRT, "terminate called without an active exception", pytorch/pytorch#190489), and torchrun
    # then reports a finished run as failed. Destroyed only here, after success: while another rank may still be in
    # a collective (a failed run), destroying it would hang. The barrier keeps a rank from tearing its group down
    # while rank 0 still writes the final model, the card and the plots.
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return result.exit_status
