"""What masking costs: each method's collator, per batch and per masking unit, against the training step it feeds.

    python bench/masking.py                  # 32 blocks of 512 tokens, --model_size small models
    python bench/masking.py --steps 0        # the collators only

Everything is what `hf-encoders pretrain --method M --model_size small --block_size 512 --masking U` builds, on the
embedded corpus with a WordPiece tokenizer trained on it: the recipe's dataset (packed blocks with word starts;
TaCL's sentence pairs, up to 512 tokens), collator (biphasic: both views, as under its phase schedule) and model. The
collators mask rows already read, so the time is the collator's alone (padding, masking, replacement); the step is
bench/run.py's training step (forward, backward, AdamW) on the token-masked batch. Target: the collator takes at most
5% of the step, so the data never starves the model even when the collator runs in the training process.
"""

import argparse
import statistics
import tempfile
import time
from dataclasses import replace

import torch
from datasets import Dataset
from run import TimedStep  # bench/run.py: the script's own folder is on sys.path
from transformers import BertConfig, BertForPreTraining

from hf_encoders.data import embedded_documents
from hf_encoders.data.masking_units import MASKING_UNITS
from hf_encoders.data.tokenizer import train_wordpiece_tokenizer
from hf_encoders.methods import METHODS
from hf_encoders.methods.biphasic.conversion import prepare_tokenizer
from hf_encoders.methods.mae_lm.recipe import SIZES
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.recipe import get_recipe


def collate_seconds(collate, rows: list[dict], batch: int, repeats: int) -> float:
    """Median seconds per batch over `repeats` batches (after one warm-up), taken in turn from the rows."""
    batches = [
        [rows[(start + i) % len(rows)] for i in range(batch)] for start in range(0, (repeats + 1) * batch, batch)
    ]
    collate(batches[0])
    times = []
    for examples in batches[1:]:
        start = time.perf_counter()
        collate(examples)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def model_for(recipe, args: PretrainArguments, tokenizer, folder: str):
    """The recipe's model; TaCL continues a BERT of the same size, saved for it."""
    if recipe.name == "tacl":
        shape = SIZES[args.model_size]
        keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
        config = BertConfig(
            vocab_size=len(tokenizer), max_position_embeddings=args.block_size, **{k: shape[k] for k in keys}
        )
        BertForPreTraining(config).save_pretrained(folder)
        args = replace(args, model_name_or_path=folder)
    model = recipe.build_model(args, tokenizer)
    if recipe.name == "biphasic":
        model.objective = "mlm"  # the phase it spends most steps in
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--model_size", default="small")
    parser.add_argument("--repeats", type=int, default=10, help="batches timed per collator and unit")
    parser.add_argument("--steps", type=int, default=2, help="training steps timed per method (0: none)")
    parser.add_argument("--methods", default=",".join(METHODS))
    settings = parser.parse_args()
    settings.device, settings.dtype = "cpu", "float32"
    texts = embedded_documents()
    # [SEP] doubles as EOS for the biphasic packing (what its recipe does to a WordPiece tokenizer).
    tokenizer = prepare_tokenizer(train_wordpiece_tokenizer(texts, vocab_size=8000, model_max_length=settings.length))
    documents = Dataset.from_dict({"text": texts})
    print(
        f"batch {settings.batch} x {settings.length}, --model_size {settings.model_size}, torch threads "
        f"{torch.get_num_threads()}; collators: median of {settings.repeats} batches, steps: median of {settings.steps}"
    )
    print("| method | " + " | ".join(f"{unit} ms/batch" for unit in MASKING_UNITS) + " | step s | worst share |")
    print("|---|" + "---|" * (len(MASKING_UNITS) + 2))
    for method in settings.methods.split(","):
        recipe = get_recipe(method)
        args = PretrainArguments(method=method, model_size=settings.model_size, block_size=settings.length)
        rows = recipe.build_dataset(replace(args, masking="whole_word"), tokenizer, documents).to_list()
        collators = {unit: recipe.build_collator(replace(args, masking=unit), tokenizer) for unit in MASKING_UNITS}
        seconds = [collate_seconds(collators[unit], rows, settings.batch, settings.repeats) for unit in MASKING_UNITS]
        step = float("nan")
        if settings.steps:
            with tempfile.TemporaryDirectory() as folder:
                model = model_for(recipe, args, tokenizer, folder)
            timed = TimedStep(model, collators["token"](rows[: settings.batch]), settings)
            timed()  # warm-up: allocator, AdamW state
            step = statistics.median(timed() for _ in range(settings.steps))
        cells = " | ".join(f"{1000 * value:.1f}" for value in seconds)
        print(f"| {method} | {cells} | {step:.2f} | {max(seconds) / step:.1%} |", flush=True)


if __name__ == "__main__":
    main()
