"""What a pre-training method contributes to `hf-encoders pretrain`: a recipe.

The entry point (training/pretrain.py) owns everything methods share: argument parsing, corpus loading,
the tokenizer, Trainer, checkpoints and the model card. A recipe only says how its method turns documents
into training examples, which model to build, and which callbacks it needs; its collator and card come from
its entry in `hf_encoders.families`.
"""

from pathlib import Path

from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback

from ...data.tokenizer import load_or_train_tokenizer, load_tokenizer
from ...families import Family, load


class Recipe:
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

    def __init__(self, family: Family):
        self.family = family

    @property
    def name(self) -> str:
        return self.family.name

    def build_tokenizer(self, args, documents: Dataset) -> PreTrainedTokenizerBase:
        """`--tokenizer_name`, else the tokenizer saved with `--model_name_or_path` (its embeddings read those ids),
        else a WordPiece one trained on the corpus."""
        if args.tokenizer_name is None and args.model_name_or_path is not None:
            fix = "Pass the folder of a checkpoint saved with its tokenizer, or --tokenizer_name."
            return load_tokenizer(args.model_name_or_path, fix=fix)
        return load_or_train_tokenizer(args.tokenizer_name, documents["text"], vocab_size=args.vocab_size)

    def build_dataset(self, args, tokenizer: PreTrainedTokenizerBase, documents: Dataset) -> Dataset:
        raise NotImplementedError

    def build_model(self, args, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
        raise NotImplementedError

    def build_collator(self, args, tokenizer: PreTrainedTokenizerBase):
        """The family's collator; its own masking ratio unless `--mlm_probability` is given."""
        ratio = {} if args.mlm_probability is None else {"mlm_probability": args.mlm_probability}
        unit = dict(masking=args.masking, max_span_length=args.max_span_length, span_geometric_p=args.span_geometric_p)
        return load(self.family.collator)(tokenizer, pad_to_multiple_of=8, **ratio, **unit)

    def check_arguments(self, args) -> None:
        """Refuse options the method cannot honour, before the corpus is read."""
        if args.from_causal_lm:
            raise ValueError(
                f"--from_causal_lm converts a causal LM for the biphasic method; {self.family.title} cannot start "
                "from one. Drop it, or pass --model_name_or_path a checkpoint of this method's model."
            )
        self.check_config_overrides(args)
        if args.pack_documents and self.no_packed_documents:
            raise ValueError(
                f"--pack_documents cannot be used with {self.family.title}: {self.no_packed_documents} Drop "
                "--pack_documents, or pre-train with --method mae_lm or --method biphasic, whose models keep "
                "attention within each document of a packed row."
            )

    def check_config_overrides(self, args) -> None:
        """Refuse --config_overrides where the model is loaded, not built, and they would be ignored."""
        start = args.from_causal_lm or args.model_name_or_path
        if args.config_overrides and start and not self.overrides_apply_to(start):
            raise ValueError(
                f"--config_overrides shapes a model built from scratch, but {self.family.title} continues {start} "
                "as it is saved, so they would be ignored. Drop --config_overrides (or --model_name_or_path)."
            )

    def overrides_apply_to(self, start: str) -> bool:
        """Whether --config_overrides shape the model started from `start` (a checkpoint or causal LM)."""
        return False

    def check_tokenizer(self, args, tokenizer: PreTrainedTokenizerBase) -> None:
        """Refuse a tokenizer without [MASK] before a model is built for it, in the command line's words."""
        if tokenizer.mask_token is None:
            source = args.tokenizer_name or args.model_name_or_path
            raise ValueError(
                f"The tokenizer of {source} has no mask token, which {self.family.title} needs: "
                f"{self.missing_mask_token_fix}"
            )

    @staticmethod
    def needs_word_starts(args) -> bool:
        """Whether the dataset must carry word boundaries (a `word_starts` column) for the collator."""
        return args.masking != "token"

    def callbacks(self, args) -> list[TrainerCallback]:
        return []

    def summary_lines(self, args) -> list[str]:
        """Method-specific lines for the model card's training summary: how it was masked, where it started, ..."""
        ratio = args.mlm_probability or load(self.family.collator).mlm_probability
        unit = {"token": "tokens", "whole_word": "whole words"}.get(
            args.masking, f"spans of Geometric({args.span_geometric_p}) words, at most {args.max_span_length}"
        )
        lines = [f"- masking ratio: {ratio:.0%}", f"- masking unit: {unit}"]
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
