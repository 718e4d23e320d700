"""What a pre-training method contributes to `hf-encoders pretrain`: a recipe (`methods/<name>/recipe.py`).

The entry point (training/pretrain.py) owns everything methods share: argument parsing, corpus loading,
the tokenizer, Trainer, checkpoints and the model card. A recipe only says how its method turns documents
into training examples, which model to build, and which callbacks it needs; its collator and card come from
its entry in the method table (`hf_encoders.methods`).
"""

from dataclasses import fields
from pathlib import Path

from datasets import Dataset
from transformers import AutoConfig, PreTrainedConfig, PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback

from ..data.mixtures import parse_sources
from ..data.packing import pack_bert_style, tokenize_documents
from ..data.tokenizer import load_or_train_tokenizer, load_tokenizer
from ..methods import METHODS, Method, get_method, load
from .arguments import PretrainArguments
from .ema import EMA_FOLDER, check_ema_decay
from .model_sizes import config_override_pairs, parse_config_overrides
from .schedules import parse_block_size_schedule, parse_mlm_probability_schedule

# Encoders whose position ids start after the padding index (transformers' RoBERTa family): they cover fewer tokens
# than max_position_embeddings, as TaclForPreTraining.max_sequence_length counts.
POSITIONS_AFTER_PADDING = ("roberta", "xlm-roberta", "camembert", "data2vec-text")


def position_table_length(encoder: str) -> int | None:
    """The longest input the position table of the checkpoint `encoder` covers, read from its config alone (no weights
    load); None where its config says none or cannot be read (the model's own loading then names what is wrong)."""
    try:
        config = AutoConfig.from_pretrained(encoder)
    except (OSError, ValueError):
        return None
    limit = getattr(config, "max_position_embeddings", None)
    if limit is not None and config.model_type in POSITIONS_AFTER_PADDING:
        limit -= config.pad_token_id + 1
    return limit


def block_length_words(args) -> str:
    """The longest block of the run, as the options given say it."""
    if args.block_size_schedule:
        return f"--block_size_schedule's longest block ({args.block_size} tokens)"
    return f"--block_size {args.block_size}"


# The options every method reads: the corpus, validation, measuring and output options `pretrain` handles itself, and
# the tokenizer, block and masking options every recipe passes on (the span options only with --masking span).
COMMON_OPTIONS = (
    "method",
    "preset",
    "corpus",
    "dataset_config",
    "text_column",
    "streaming",
    "max_documents",
    "tokenizer_name",
    "model_name_or_path",
    "attn_implementation",
    "block_size",
    "mlm_probability",
    "mlm_probability_schedule",
    "batch_size_warmup_tokens",
    "block_size_schedule",
    "anneal_corpus",
    "anneal_fraction",
    "masking",
    "mask_count",
    "max_span_length",
    "span_geometric_p",
    "validation_split_percentage",
    "validation_file",
    "diagnostics_steps",
    "diagnostics_sentences",
    "peak_tflops",
    "overwrite_output_dir",
    "preprocessing_num_workers",
    "keep_optimizer_state",
    "tokenized_dir",
    "skip_bad_rows",
    "fp8",
    "ema_decay",
)


def get_recipe(name: str) -> "Recipe":
    """The recipe of `--method NAME`, its module imported only now."""
    method = get_method(name)
    return load(method.recipe)(method)


def options_set(args: PretrainArguments) -> list[str]:
    """The options given a value other than their default, in the order `--help` lists them."""
    return [option.name for option in fields(args) if getattr(args, option.name) != option.default]


class Recipe:
    # The PretrainArguments fields the method reads; `pretrain` refuses any other the user sets, with the reason
    # (`unread_options`), as transformers' run_mlm.py refuses options that would be ignored.
    options: tuple[str, ...] = (
        *COMMON_OPTIONS,
        "vocab_size",
        "model_size",
        "config_overrides",
        "pad_vocab_to_multiple_of",
    )
    # The config class --config_overrides shape (None: the method takes none).
    config_class: type[PreTrainedConfig] | None = None
    # The card template of the model `encoder` picks out (None: the method's own card).
    encoder_card_template: str | None = None
    # The pipeline tag the output folder's model card declares.
    pipeline_tag: str | None = "fill-mask"
    # The evaluation log's language-modelling loss, whose exp is `eval_perplexity`.
    perplexity_loss = "eval_loss"
    # What stops `--pack_documents`, if anything: the model must keep attention within each packed document.
    no_packed_documents: str | None = None
    # How `build_dataset` lays tokens out in a row, in a token cache's fingerprint (a cache fits the recipes that
    # lay them out alike: mlm and mae_lm).
    packing_style = "its own rows"
    # Whether the model's positions are rotary (RoPE θ), which a --block_size_schedule may set per phase.
    rotary_positions = False
    # The command-line fix for a tokenizer without [MASK].
    missing_mask_token_fix = (
        "pass --tokenizer_name a tokenizer that has one, or leave --tokenizer_name out to train a WordPiece tokenizer "
        "(with [MASK]) on the corpus."
    )

    def __init__(self, method: Method):
        self.method = method

    @property
    def name(self) -> str:
        return self.method.name

    def build_tokenizer(self, args, documents: Dataset) -> PreTrainedTokenizerBase:
        """`--tokenizer_name`, else the tokenizer saved with `--model_name_or_path` or `--init_from_smaller` (its
        embeddings read those ids), else a WordPiece one trained on the corpus."""
        checkpoint = args.model_name_or_path or args.init_from_smaller
        if args.tokenizer_name is None and checkpoint is not None:
            fix = "Pass the folder of a checkpoint saved with its tokenizer, or --tokenizer_name."
            return load_tokenizer(checkpoint, fix=fix)
        trained = {} if args.vocab_size is None else {"vocab_size": args.vocab_size}  # else train_wordpiece_tokenizer's
        return load_or_train_tokenizer(args.tokenizer_name, documents["text"], **trained)

    def build_dataset(self, args, tokenizer: PreTrainedTokenizerBase, documents: Dataset) -> Dataset:
        raise NotImplementedError

    def build_model(self, args, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
        raise NotImplementedError

    def build_collator(self, args, tokenizer: PreTrainedTokenizerBase):
        """The method's collator; its own masking ratio unless `--mlm_probability` is given, or with
        `--mlm_probability_schedule` every rate of the schedule (and the last one for evaluation)."""
        ratio = {} if args.mlm_probability is None else {"mlm_probability": args.mlm_probability}
        if args.mlm_probability_schedule:
            schedule = parse_mlm_probability_schedule(args.mlm_probability_schedule)
            ratio = {"mlm_probability": schedule.phases[-1][0], "mlm_probabilities": schedule.values}
        unit = dict(
            masking=args.masking,
            mask_count=args.mask_count,
            max_span_length=args.max_span_length,
            span_geometric_p=args.span_geometric_p,
        )
        return load(self.method.collator)(tokenizer, pad_to_multiple_of=8, **ratio, **unit)

    def check_arguments(self, args) -> None:
        """Refuse options the method cannot honour, or would ignore, before the corpus is read."""
        unread = self.unread_options(args)
        for option in options_set(args):
            if option in unread:
                raise ValueError(unread[option])
        if args.ema_decay is not None:
            check_ema_decay(args.ema_decay)
        if args.config_overrides and self.config_class is not None:  # a mistyped field fails before the corpus is read
            parse_config_overrides(args.config_overrides, self.config_class)
        if args.mlm_probability_schedule:
            parse_mlm_probability_schedule(args.mlm_probability_schedule)
        if args.block_size_schedule or args.anneal_corpus or args.anneal_fraction is not None:
            self.check_planned_data(args)
        self.check_position_table(args)
        if args.batch_size_warmup_tokens is not None and args.batch_size_warmup_tokens < 1:
            raise ValueError(
                f"--batch_size_warmup_tokens must be a positive number of tokens, got {args.batch_size_warmup_tokens}."
            )

    def check_planned_data(self, args) -> None:
        """What a run whose data changes by phase (training/phased_blocks.py) cannot run with, before the corpus is
        read."""
        option = "--block_size_schedule" if args.block_size_schedule else "--anneal_corpus"
        if (args.anneal_corpus is None) != (args.anneal_fraction is None):
            raise ValueError(
                "--anneal_corpus and --anneal_fraction go together: the corpus of the annealing phase and the fraction "
                "of max_steps, at the end, it trains on (e.g. --anneal_corpus books/ --anneal_fraction 0.1)."
            )
        if args.anneal_fraction is not None and not 0 < args.anneal_fraction < 1:
            raise ValueError(f"--anneal_fraction must lie in (0, 1), got {args.anneal_fraction}.")
        if args.anneal_corpus is not None:
            parse_sources(args.anneal_corpus)
        if args.streaming:
            raise ValueError(
                f"{option} plans each phase's blocks from a corpus it can index, which a stream is not; drop "
                f"--streaming (or {option})."
            )
        if args.tokenized_dir is not None:
            raise ValueError(
                f"{option} packs each phase's blocks from its own documents, but a token cache holds blocks made "
                f"once; drop --tokenized_dir (or {option})."
            )
        if not args.block_size_schedule:
            return
        schedule = parse_block_size_schedule(args.block_size_schedule)
        with_theta = [str(phase) for phase, _ in schedule.phases if phase.rope_theta is not None]
        if with_theta and not self.rotary_positions:
            raise ValueError(
                f"--block_size_schedule sets a RoPE θ ({', '.join(with_theta)}), but {self.method.title}'s model has no "
                "rotary position embeddings (biphasic's has); drop the θ, writing LENGTH:FRACTION items."
            )

    def check_position_table(self, args) -> None:
        """Refuse, before the corpus is read, a block longer than the position table of the checkpoint continued (or
        of --config_overrides' max_position_embeddings): else the model fails at its first step, or indexes past its
        table. A model built from scratch gets a table for its longest block, and a rotary model whose
        --block_size_schedule sets a new RoPE θ is being extended past its table on purpose."""
        schedule = parse_block_size_schedule(args.block_size_schedule) if args.block_size_schedule else None
        if self.rotary_positions and schedule and any(phase.rope_theta is not None for phase, _ in schedule.phases):
            return
        limit, table = None, None
        if args.starting_checkpoint:
            limit, table = (
                position_table_length(args.starting_checkpoint),
                f"{args.starting_checkpoint}'s position table",
            )
        overridden = dict(config_override_pairs(args.config_overrides))
        if overridden.get("max_position_embeddings") and self.overrides_apply_to_run(args):
            limit = int(overridden["max_position_embeddings"])
            table = "the position table of --config_overrides max_position_embeddings"
        if limit is not None and args.block_size > limit:
            fix = (
                f"keep every block of --block_size_schedule at {limit} tokens or less"
                if args.block_size_schedule
                else f"pass --block_size {limit} or less for this model"
            )
            raise ValueError(f"{block_length_words(args)} is longer than the {limit} positions {table} covers; {fix}.")

    def overrides_apply_to_run(self, args) -> bool:
        return not args.starting_checkpoint or self.overrides_apply_to(args.starting_checkpoint)

    def check_resume(self, args, training_args, checkpoint: str) -> None:
        """Refuse to resume `checkpoint` with options that would not continue it exactly (a method's own rules)."""

    def unread_options(self, args) -> dict[str, str]:
        """Every option this run does not read, with the message refusing it: those the method never reads, and
        those other options make moot (a size preset when continuing a checkpoint, ...)."""
        title, start = self.method.title, args.starting_checkpoint
        unread = {
            option.name: self.read_elsewhere(option.name)
            for option in fields(PretrainArguments)
            if option.name not in self.options
        }
        if "init_from_smaller" in unread:
            unread["init_from_smaller"] = (
                f"--init_from_smaller tiles a smaller checkpoint of this package's own models into a larger one, so "
                f"that it computes the same outputs; {title}'s model has no such tiling. Drop it, or pre-train with "
                f"--method {' or '.join(name for name in METHODS if 'init_from_smaller' in get_recipe(name).options)}."
            )
        if "from_causal_lm" in unread:
            unread["from_causal_lm"] = (
                f"--from_causal_lm converts a causal LM for the biphasic method; {title} cannot start from one. Drop "
                "it, or pass --model_name_or_path a checkpoint of this method's model."
            )
        if self.no_packed_documents:
            unread["pack_documents"] = (
                f"--pack_documents cannot be used with {title}: {self.no_packed_documents} Drop --pack_documents, or "
                "pre-train with --method mae_lm or --method biphasic, whose models keep attention within each document "
                "of a packed row."
            )
        # Moot in this run: setdefault keeps the reason of an option the method never reads.
        if start:
            start_option = "--from_causal_lm" if args.from_causal_lm else "--model_name_or_path"
            unread.setdefault(
                "model_size",
                f"--model_size sizes a model built from scratch, but {title} continues {start}, whose size is "
                f"saved with it. Drop --model_size (or {start_option}).",
            )
            unread.setdefault(
                "pad_vocab_to_multiple_of",
                f"--pad_vocab_to_multiple_of pads the vocabulary of a model built from scratch, but {title} continues "
                f"{start}, whose vocabulary is saved with it. Drop --pad_vocab_to_multiple_of (or {start_option}).",
            )
            if not self.overrides_apply_to(start):
                unread.setdefault(
                    "config_overrides",
                    f"--config_overrides shapes a model built from scratch, but {title} continues {start} as it is "
                    f"saved, so they would be ignored. Drop --config_overrides (or {start_option}).",
                )
        if args.init_from_smaller:
            unread.setdefault(
                "pad_vocab_to_multiple_of",
                f"--pad_vocab_to_multiple_of pads the vocabulary of a model built from scratch, but this run keeps the "
                f"vocabulary of {args.init_from_smaller}, so that the grown model's outputs are its own. Drop "
                "--pad_vocab_to_multiple_of (or --init_from_smaller).",
            )
        if start and args.init_from_smaller:
            unread.setdefault(
                "init_from_smaller",
                f"--init_from_smaller starts a new, larger model from a smaller checkpoint, but this run continues "
                f"{start}: pass one starting point.",
            )
        if args.tokenizer_name or start or args.init_from_smaller:
            unread.setdefault(
                "vocab_size",
                f"--vocab_size sizes a tokenizer trained on the corpus, but this run uses the tokenizer of "
                f"{args.tokenizer_name or start or args.init_from_smaller}. Drop --vocab_size (or --tokenizer_name, to "
                "train one).",
            )
        if args.masking != "span":
            for option in ("max_span_length", "span_geometric_p"):
                unread[option] = f"--{option} shapes the spans of --masking span, not --masking {args.masking}."
        if args.mlm_probability_schedule:
            unread["mlm_probability"] = (
                "--mlm_probability is moot with --mlm_probability_schedule, which sets the ratio of every step; drop "
                "--mlm_probability, or put its ratio in the schedule."
            )
        if args.diagnostics_steps is None:
            unread["diagnostics_sentences"] = (
                "--diagnostics_sentences sets how many sentences --diagnostics_steps probes; add --diagnostics_steps N "
                "or drop it."
            )
        return unread

    def read_elsewhere(self, option: str) -> str:
        """The message refusing an option this method never reads, naming the methods that do."""
        readers = [name for name in METHODS if option in get_recipe(name).options]
        return (
            f"{self.method.title} does not read --{option}; only --method {' or '.join(readers)} does. Drop "
            f"--{option}, or pre-train with {'that method' if len(readers) == 1 else 'one of those'}."
        )

    def overrides_apply_to(self, start: str) -> bool:
        """Whether --config_overrides shape the model started from `start` (a checkpoint or causal LM)."""
        return False

    def check_tokenizer(self, args, tokenizer: PreTrainedTokenizerBase) -> None:
        """Refuse a tokenizer without [MASK] before a model is built for it, in the command line's words."""
        if tokenizer.mask_token is None:
            source = args.tokenizer_name or args.model_name_or_path
            raise ValueError(
                f"The tokenizer of {source} has no mask token, which {self.method.title} needs: "
                f"{self.missing_mask_token_fix}"
            )

    @staticmethod
    def needs_word_starts(args) -> bool:
        """Whether the dataset must carry word boundaries (a `word_starts` column) for the collator."""
        return args.masking != "token"

    def tokenized(self, args, tokenizer: PreTrainedTokenizerBase, documents: Dataset) -> Dataset:
        """The documents tokenized for packing, with word boundaries when the masking unit needs them."""
        return tokenize_documents(
            documents, tokenizer, num_proc=args.preprocessing_num_workers, word_starts=self.needs_word_starts(args)
        )

    def callbacks(self, args) -> list[TrainerCallback]:
        return []

    def summary_lines(self, args) -> list[str]:
        """Method-specific lines for the model card's training summary: how it was masked, where it started, ..."""
        ratio = args.mlm_probability or load(self.method.collator).mlm_probability
        unit = {"token": "tokens", "whole_word": "whole words"}.get(
            args.masking, f"spans of Geometric({args.span_geometric_p}) words, at most {args.max_span_length}"
        )
        count = "exact per row" if args.mask_count == "exact" else "a coin per token"
        ratio_line = f"- masking ratio: {ratio:.0%} ({count})"
        if args.mlm_probability_schedule:
            ratio_line = f"- masking ratio (rate:fraction of steps): {args.mlm_probability_schedule}"
        lines = [ratio_line, f"- masking unit: {unit}"]
        if args.ema_decay is not None:
            lines.append(
                f"- exponential moving average of the weights kept during training (decay {args.ema_decay}), saved "
                f"as its own model in the folder {EMA_FOLDER}/ of the training output"
            )
        if args.init_from_smaller:
            lines.append(
                f"- initialised from the smaller {args.init_from_smaller}, grown so that its outputs were "
                "unchanged (its weights tiled)"
            )
        if args.block_size_schedule:
            lines.append(f"- block size by phase (length:fraction of steps[:RoPE θ]): {args.block_size_schedule}")
        if args.anneal_corpus:
            lines.append(f"- annealing corpus, for the last {args.anneal_fraction:.0%} of steps: {args.anneal_corpus}")
        if args.batch_size_warmup_tokens is not None:
            lines.append(f"- batch-size warm-up: over the first {args.batch_size_warmup_tokens:,} tokens")
        return lines + ([f"- initialised from: {args.starting_checkpoint}"] if args.starting_checkpoint else [])

    def card_variables(self, args) -> dict[str, str]:
        """Variables of the method's card template that depend on the run (biphasic: which phases it ran)."""
        return {}

    def encoder(self, model: PreTrainedModel) -> PreTrainedModel:
        """The model `export_encoder` writes, out of the model trained (TaCL: its student)."""
        return model

    def export_encoder(self, trainer, output_dir: Path, write_card=None) -> Path:
        """The checkpoint fine-tuning starts from. Most methods' saved model is it; TaCL exports its student (and
        gives it its own card with `write_card(folder, state, template=..., pipeline_tag=...)`)."""
        return output_dir


class BertBlocksRecipe(Recipe):
    """A recipe that trains on BERT-style packed blocks (mlm and mae_lm, so that they compare on the same data)."""

    packing_style = "BERT-style blocks ([CLS] ... [SEP], documents separated by [SEP])"

    def build_dataset(self, args, tokenizer, documents):
        return pack_bert_style(
            self.tokenized(args, tokenizer, documents),
            args.block_size,
            cls_id=tokenizer.cls_token_id,
            sep_id=tokenizer.sep_token_id,
            separator_id=tokenizer.sep_token_id,
            num_proc=args.preprocessing_num_workers,
            pack_documents=args.pack_documents,
        )
