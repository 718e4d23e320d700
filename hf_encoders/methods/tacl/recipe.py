"""`hf-encoders pretrain --method tacl --model_name_or_path <encoder>`: TaCL continual pre-training of an encoder.

Data are BERT's sentence pairs (for NSP) cut from the corpus's documents; the model is student + frozen teacher
from the encoder; the three loss terms are logged separately. The output folder is a training state (student and
teacher, `TaclForPreTraining`, with its card); what fine-tuning starts from is `student/` inside it, a plain
checkpoint of the encoder's own type with the student's card.
"""

from pathlib import Path

from ...data.sentences import documents_to_sentences
from ...data.tokenizer import load_tokenizer
from ...models.tacl import TaclForPreTraining
from ...training.recipe import COMMON_OPTIONS, Recipe
from .sentence_pairs import build_sentence_pairs

STUDENT_FOLDER = "student"
# The pretrain options that set TaclConfig fields, by field (unset: the config's default).
CONFIG_OPTIONS = {
    "temperature": "tacl_temperature",
    "tacl_loss_weight": "tacl_loss_weight",
    "mlm_loss_weight": "mlm_loss_weight",
    "nsp_loss_weight": "nsp_loss_weight",
    "use_nsp": "use_nsp",
    "exclude_padding_from_contrast": "exclude_padding_from_contrast",
}


class TaclRecipe(Recipe):
    # An encoder continued as it is, in its own vocabulary: no size, config overrides or tokenizer to train.
    options = (*COMMON_OPTIONS, *CONFIG_OPTIONS.values())
    # The output folder is a training state, which no pipeline runs; its student is a fill-mask model.
    pipeline_tag = None
    encoder_card_template = "tacl_student"
    packing_style = "sentence pairs (BERT's next-sentence prediction)"
    perplexity_loss = "eval_mlm_loss"  # eval_loss adds the contrastive and NSP terms
    no_packed_documents = (
        "TaCL trains on sentence pairs (with next-sentence prediction for BERT students), one pair per row, and its "
        "student and teacher are stock Transformers encoders (BERT, RoBERTa, ModernBERT), whose sdpa and eager "
        "attention in transformers take no packed-sequence mask."
    )

    missing_mask_token_fix = (
        "TaCL continues the encoder in its own vocabulary, so pass --model_name_or_path an encoder (or "
        "--tokenizer_name its tokenizer) with a mask token."
    )

    def check_arguments(self, args) -> None:
        self.require_encoder(args)
        super().check_arguments(args)

    def build_tokenizer(self, args, documents):
        # TaCL continues an encoder: only its own vocabulary fits its embeddings.
        if args.tokenizer_name:
            fix = "Pass --tokenizer_name the folder (or Hub name) of the encoder's tokenizer."
            return load_tokenizer(args.tokenizer_name, fix=fix)
        fix = (
            "TaCL continues a pretrained encoder: pass --model_name_or_path the folder (or Hub name) of one saved "
            "with its tokenizer."
        )
        return load_tokenizer(self.require_encoder(args), fix=fix)

    def build_dataset(self, args, tokenizer, documents):
        sentences = documents_to_sentences(documents, source_name=args.corpus or "the embedded corpus")
        return build_sentence_pairs(
            sentences,
            tokenizer,
            max_length=args.block_size,
            num_proc=args.preprocessing_num_workers,
            word_starts=self.needs_word_starts(args),
        )

    def build_model(self, args, tokenizer):
        encoder = self.require_encoder(args)
        model = TaclForPreTraining.from_encoder(encoder, **self.config_options(args))
        vocab_size = model.config.student_config.vocab_size
        if len(tokenizer) > vocab_size:
            raise ValueError(
                f"The tokenizer has {len(tokenizer)} tokens but the encoder {encoder} only {vocab_size} embeddings; "
                f"use the encoder's own tokenizer (--tokenizer_name {encoder})."
            )
        return model

    @staticmethod
    def config_options(args) -> dict:
        """The TaclConfig fields the command line sets."""
        return {
            field: getattr(args, option)
            for field, option in CONFIG_OPTIONS.items()
            if getattr(args, option) is not None
        }

    def encoder(self, model):
        return model.student

    def export_encoder(self, trainer, output_dir, write_card=None) -> Path:
        """The student, as a plain checkpoint in output_dir/student, with the student's card."""
        student_dir = Path(output_dir) / STUDENT_FOLDER
        trainer.model.save_student(student_dir, tokenizer=trainer.processing_class)
        if write_card is not None:
            write_card(
                student_dir,
                trainer.state,
                template=self.encoder_card_template,
                pipeline_tag="fill-mask",
                subfolder=STUDENT_FOLDER,
            )
        return student_dir

    @staticmethod
    def require_encoder(args) -> str:
        if not args.model_name_or_path:
            raise ValueError(
                "TaCL continues a pretrained encoder: pass --model_name_or_path <checkpoint> (e.g. bert-base-uncased)."
            )
        return args.model_name_or_path
