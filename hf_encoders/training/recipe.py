"""What a pre-training method contributes to `hf-encoders pretrain`: a recipe (`methods/<name>/recipe.py`).

The entry point (training/pretrain.py) owns everything methods share: argument parsing, corpus loading,
the tokenizer, Trainer, checkpoints and the model card. A recipe only says how its method turns documents
into training examples, which model to build, and which callbacks it needs; its collator and card come from
its entry in the method table (`hf_encoders.methods`).
"""

from dataclasses import fields
from pathlib import Path

from datasets import Dataset
from transformers import PreTrainedConfig, PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback

from ..data.packing import pack_bert_style, tokenize_documents
from ..data.tokenizer import load_or_train_tokenizer, load_tokenizer
from ..methods import METHODS, Method, get_method, load
from .arguments import PretrainArguments
from .model_sizes import parse_config_overrides

# The options every method reads: the corpus, validation, measuring and output options `pretrain` handles itself, and
# the tokenizer, block and masking options every recipe passes on (the span options only with --masking span).
COMMON_OPTIONS = (
    "method",
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
    "tokenized_dir",
    "skip_bad_rows",
    "fp8",
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
    # The pipeline tag the output folder's model card declares.
    pipeline_tag: str | None = "fill-mask"
    # The evaluation log's language-modelling loss, whose exp is `eval_perplexity`.
    perplexity_loss = "eval_loss"
    # What stops `--pack_documents`, if anything: the model must keep attention within each packed document.
    no_packed_documents: str | None = None
    # How `build_dataset` lays tokens out in a row, in a token cache's fingerprint (a cache fits the recipes that
    # lay them out alike: mlm and mae_lm).
    packing_style = "its own rows"
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
        """`--tokenizer_name`, else the tokenizer saved with `--model_name_or_path` (its embeddings read those ids),
        else a WordPiece one trained on the corpus."""
        if args.tokenizer_name is None and args.model_name_or_path is not None:
            fix = "Pass the folder of a checkpoint saved with its tokenizer, or --tokenizer_name."
            return load_tokenizer(args.model_name_or_path, fix=fix)
        trained = {} if args.vocab_size is None else {"vocab_size": args.vocab_size}  # else train_wordpiece_tokenizer's
        return load_or_train_tokenizer(args.tokenizer_name, documents["text"], **trained)

    def build_dataset(self, args, tokenizer: PreTrainedTokenizerBase, documents: Dataset) -> Dataset:
        raise NotImplementedError

    def build_model(self, args, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
        raise NotImplementedError

    def build_collator(self, args, tokenizer: PreTrainedTokenizerBase):
        """The method's collator; its own masking ratio unless `--mlm_probability` is given."""
        ratio = {} if args.mlm_probability is None else {"mlm_probability": args.mlm_probability}
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
        if args.config_overrides and self.config_class is not None:  # a mistyped field fails before the corpus is read
            parse_config_overrides(args.config_overrides, self.config_class)

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
        if args.tokenizer_name or start:
            unread.setdefault(
                "vocab_size",
                f"--vocab_size sizes a tokenizer trained on the corpus, but this run uses the tokenizer of "
                f"{args.tokenizer_name or start}. Drop --vocab_size (or --tokenizer_name, to train one).",
            )
        if args.masking != "span":
            for option in ("max_span_length", "span_geometric_p"):
                unread[option] = f"--{option} shapes the spans of --masking span, not --masking {args.masking}."
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
        lines = [f"- masking ratio: {ratio:.0%} ({count})", f"- masking unit: {unit}"]
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
