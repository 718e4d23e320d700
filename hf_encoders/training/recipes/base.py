"""What a pre-training method contributes to `hf-encoders pretrain`: a recipe.

The entry point (training/pretrain.py) owns everything methods share: argument parsing, corpus loading,
the tokenizer, Trainer, checkpoints and the model card. A recipe only says how its method turns documents
into training examples, which model and collator to build, and which callbacks it needs.
"""

from pathlib import Path

from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback

from ...data.tokenizer import load_or_train_tokenizer


class Recipe:
    name: str
    # The model card template in model_cards/ (file stem) and the pipeline tag the card declares.
    card_template: str
    pipeline_tag: str = "fill-mask"

    def build_tokenizer(self, args, documents: Dataset) -> PreTrainedTokenizerBase:
        """The user's tokenizer, or a WordPiece one trained on the corpus. Methods that start from a
        checkpoint (TaCL, biphasic CPT) override this to use the checkpoint's own tokenizer."""
        return load_or_train_tokenizer(args.tokenizer_name, documents["text"], vocab_size=args.vocab_size)

    def build_dataset(self, args, tokenizer: PreTrainedTokenizerBase, documents: Dataset) -> Dataset:
        raise NotImplementedError

    def build_model(self, args, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
        raise NotImplementedError

    def build_collator(self, args, tokenizer: PreTrainedTokenizerBase):
        raise NotImplementedError

    def callbacks(self, args) -> list[TrainerCallback]:
        return []

    def summary_lines(self, args) -> list[str]:
        """Method-specific lines for the model card's training summary (phases, the initial checkpoint, ...)."""
        return [f"- initialised from: {args.init}"] if args.init else []

    def export_encoder(self, trainer, output_dir: Path) -> Path:
        """The checkpoint fine-tuning starts from. Most methods' saved model is it; TaCL exports its student."""
        return output_dir
