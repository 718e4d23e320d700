"""`hf-encoders pretrain`: any method on Trainer, every `TrainingArguments` option on the command line.

    hf-encoders pretrain --method mae-lm --output_dir out/mae --max_steps 1000 --per_device_train_batch_size 32
"""

import json
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from transformers import HfArgumentParser, Trainer, TrainingArguments

from ..cards import write_model_card
from ..data.corpus import load_documents
from .arguments import PretrainArguments
from .hub import CompleteUploadCallback, push_output_dir
from .loss_curves import plot_loss_curves
from .recipes import get_recipe


def check_mask_token(model, tokenizer) -> None:
    """Model and tokenizer must agree on [MASK], or every "masked" position silently trains on a real token."""
    config_id = getattr(model.config, "mask_token_id", None)
    if config_id is not None and config_id != tokenizer.mask_token_id:
        raise ValueError(
            f"The model's config.mask_token_id ({config_id}) differs from the tokenizer's mask_token_id "
            f"({tokenizer.mask_token_id}); set config.mask_token_id = tokenizer.mask_token_id."
        )


@dataclass
class PretrainResult:
    trainer: Trainer
    output_dir: Path
    encoder_dir: Path  # what fine-tuning loads: output_dir itself, or TaCL's exported student


def pretrain(args: PretrainArguments, training_args: TrainingArguments) -> PretrainResult:
    recipe = get_recipe(args.method)
    documents = load_documents(args.corpus, dataset_config=args.dataset_config, text_column=args.text_column, streaming=args.streaming)
    if args.max_documents is not None:
        documents = documents.take(args.max_documents)
    tokenizer = recipe.build_tokenizer(args, documents)
    model = recipe.build_model(args, tokenizer)
    check_mask_token(model, tokenizer)
    write_card = partial(
        write_model_card, recipe=recipe, args=args, model_id=training_args.hub_model_id,
        tokens_per_step=training_args.train_batch_size * args.block_size,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=recipe.build_dataset(args, tokenizer, documents),
        data_collator=recipe.build_collator(args, tokenizer),
        processing_class=tokenizer,
        callbacks=[*recipe.callbacks(args), CompleteUploadCallback(write_card)],
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model()
    output_dir = Path(training_args.output_dir)
    log_history = trainer.state.log_history
    (output_dir / "log_history.json").write_text(json.dumps(log_history, indent=1))
    plot_loss_curves({args.method: log_history}, output_dir / "loss_curve.png")
    write_card(output_dir, trainer.state)
    if training_args.push_to_hub:
        push_output_dir(trainer)
    return PretrainResult(trainer, output_dir, recipe.export_encoder(trainer, output_dir))


def main(argv: list[str] | None = None) -> int:
    parser = HfArgumentParser((PretrainArguments, TrainingArguments), prog="hf-encoders pretrain")
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1 and argv[0].endswith(".json"):
        args, training_args = parser.parse_json_file(argv[0])
    else:
        args, training_args = parser.parse_args_into_dataclasses(argv)
    pretrain(args, training_args)
    return 0
