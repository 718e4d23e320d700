"""`hf-encoders pretrain --method tacl --init <encoder>`: TaCL continual pre-training of an existing encoder.

Data are BERT's sentence pairs (for NSP) cut from the corpus's documents; the model is student + frozen teacher
from `--init`; the three loss terms are logged separately; what fine-tuning starts from is the exported student,
a plain checkpoint of the encoder's own type.
"""

import shutil
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase, TrainerCallback

from ...data.sentence_pairs import build_sentence_pairs
from ...data.sentences import documents_to_sentences
from ...data.tacl_collator import DataCollatorForTaCL
from ...data.tokenizer import load_tokenizer
from ...models.tacl import TaclForPreTraining
from .base import Recipe


class TaclLossLoggingCallback(TrainerCallback):
    """Adds `tacl_loss`, `mlm_loss` and `nsp_loss` (their means since the previous log) to every training log.

    The model keeps running sums of the terms (`TaclForPreTraining.pop_loss_terms`); this callback moves them
    into the log dict and into `state.log_history` (trainer_state.json, loss curves). Trainer runs callbacks in
    order and puts `report_to` integrations before user callbacks, so for TensorBoard / W&B to see the terms too,
    insert this one first: `trainer.callback_handler.callbacks.insert(0, TaclLossLoggingCallback())`.
    """

    def on_log(self, args, state, control, model=None, logs=None, **kwargs):
        if logs is None or "loss" not in logs or not hasattr(model, "pop_loss_terms"):
            return
        terms = model.pop_loss_terms()
        if terms and torch.distributed.is_available() and torch.distributed.is_initialized():
            # `loss` is already the mean over ranks; average the terms alike so that they still add up to it.
            values = torch.tensor(list(terms.values()), device=next(model.parameters()).device)
            torch.distributed.all_reduce(values)
            terms = dict(zip(terms, (values / torch.distributed.get_world_size()).tolist()))
        logs.update(terms)
        state.log_history[-1].update(terms)


def export_student(
    checkpoint: str | Path, output_dir: str | Path, tokenizer: PreTrainedTokenizerBase | str | Path | None = None
) -> Path:
    """Write the student of a TaCL checkpoint (a Trainer output or checkpoint-N folder) as a plain checkpoint of
    its own model type, with the tokenizer, so run_glue / run_qa fine-tune it without trust_remote_code.

    The tokenizer is `tokenizer` (object or path), else the one saved in `checkpoint`, else the one of the
    encoder TaCL started from.
    """
    model = TaclForPreTraining.from_pretrained(checkpoint)
    if tokenizer is None:
        saved_with_tokenizer = (Path(checkpoint) / "tokenizer_config.json").exists()
        tokenizer = checkpoint if saved_with_tokenizer else model.config.student_name_or_path
        if tokenizer is None:
            raise ValueError(
                f"{checkpoint} holds no tokenizer and does not name its initial encoder; pass the tokenizer."
            )
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        tokenizer = load_tokenizer(tokenizer, fix="Pass the tokenizer of the encoder TaCL started from.")
    model.save_student(output_dir, tokenizer=tokenizer)
    return Path(output_dir)


class TaclRecipe(Recipe):
    name = "tacl"
    card_template = "tacl"

    def build_tokenizer(self, args, documents):
        # TaCL continues an encoder: only its own vocabulary fits its embeddings.
        if args.tokenizer_name:
            fix = "Pass --tokenizer_name the folder (or Hub name) of the encoder's tokenizer."
            return load_tokenizer(args.tokenizer_name, fix=fix)
        fix = (
            "TaCL continues a pretrained encoder: pass --init the folder (or Hub name) of one saved with its tokenizer."
        )
        return load_tokenizer(self.require_init(args), fix=fix)

    def build_dataset(self, args, tokenizer, documents):
        sentences = documents_to_sentences(documents, source_name=args.corpus or "the embedded corpus")
        return build_sentence_pairs(
            sentences, tokenizer, max_length=args.block_size, num_proc=args.preprocessing_num_workers
        )

    def build_model(self, args, tokenizer):
        model = TaclForPreTraining.from_encoder(self.require_init(args))
        vocab_size = model.config.student_config.vocab_size
        if len(tokenizer) > vocab_size:
            raise ValueError(
                f"The tokenizer has {len(tokenizer)} tokens but the encoder {args.init} only {vocab_size} embeddings; "
                f"use the encoder's own tokenizer (--tokenizer_name {args.init})."
            )
        return model

    def build_collator(self, args, tokenizer):
        return DataCollatorForTaCL(tokenizer, mlm_probability=args.mlm_probability or 0.15, pad_to_multiple_of=8)

    def callbacks(self, args):
        return [TaclLossLoggingCallback()]

    def export_encoder(self, trainer, output_dir):
        """The student, as a plain checkpoint in output_dir/student, with the model card written next to it."""
        student_dir = Path(output_dir) / "student"
        trainer.model.save_student(student_dir, tokenizer=trainer.processing_class)
        if (Path(output_dir) / "README.md").exists():
            shutil.copy(Path(output_dir) / "README.md", student_dir / "README.md")
        return student_dir

    @staticmethod
    def require_init(args) -> str:
        if not args.init:
            raise ValueError("TaCL continues a pretrained encoder: pass --init <checkpoint> (e.g. bert-base-uncased).")
        return args.init
