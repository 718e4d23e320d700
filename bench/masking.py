"""What masking costs: each family's collator, per batch and per masking unit, against the training step it feeds.

    python bench/masking.py                  # 32 x 512 blocks of the embedded corpus; steps at bench/run.py's CPU shape
    python bench/masking.py --steps 0        # the collators only

The collators mask real packed blocks (a WordPiece tokenizer trained on the embedded corpus, blocks with word starts,
as `hf-encoders pretrain --masking` builds them), from rows already read, so the time is the collator's alone: padding,
masking, replacement. The step is bench/run.py's training step (forward, backward, AdamW) of the family's model at the
same batch shape: MAE-LM, TaCL and biphasic (MLM) as bench/run.py builds them, the MLM baseline as its anchor
BertForMaskedLM. Target: the collator takes at most 5% of the step, so a data-loader worker keeps ahead of training.
"""

import argparse
import statistics
import time

import torch
from datasets import Dataset
from run import TimedStep, comparisons  # bench/run.py: the script's own folder is on sys.path

from hf_encoders.data import embedded_documents, pack_bert_style, pack_llama_style, tokenize_documents
from hf_encoders.data.masking_units import MASKING_UNITS
from hf_encoders.data.tokenizer import train_wordpiece_tokenizer
from hf_encoders.families import FAMILIES, load

# The step each family's collator feeds: the bench/run.py comparison whose model it is (mlm: that row's anchor).
STEP_ROWS = {
    "mlm": ("MAE-LM vs BertForMaskedLM, 15% masked", "anchor"),
    "mae_lm": ("MAE-LM vs BertForMaskedLM, 15% masked", "ours"),
    "tacl": ("TaCL vs BertForPreTraining", "ours"),
    "biphasic": ("biphasic MLM vs EuroBertForMaskedLM, 40% masked", "ours"),
}


def packed_rows(tokenizer, length: int, llama_style: bool) -> list[dict]:
    tokenized = tokenize_documents(Dataset.from_dict({"text": embedded_documents()}), tokenizer, word_starts=True)
    if llama_style:
        blocks = pack_llama_style(tokenized, length, eos_id=tokenizer.sep_token_id)
    else:
        ids = dict(cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id, separator_id=tokenizer.sep_token_id)
        blocks = pack_bert_style(tokenized, length, **ids)
    return blocks.to_list()


def collator(family: str, tokenizer, masking: str):
    options = {"objective": "mlm"} if family == "biphasic" else {}
    return load(FAMILIES[family].collator)(tokenizer, pad_to_multiple_of=8, seed=0, masking=masking, **options)


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


def step_seconds(family: str, settings) -> float:
    name, side = STEP_ROWS[family]
    row = next(comparison for comparison in comparisons(settings) if comparison.name == name)
    torch.manual_seed(0)
    step = TimedStep(getattr(row, side)(), getattr(row, f"{side}_batch")(), settings)
    step()  # warm-up: allocator, AdamW state
    return statistics.median(step() for _ in range(settings.steps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=10, help="batches timed per collator and unit")
    parser.add_argument("--steps", type=int, default=2, help="training steps timed per family (0: none)")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--families", default=",".join(FAMILIES))
    settings = parser.parse_args()
    settings.device, settings.dtype = "cpu", "float32"
    tokenizer = train_wordpiece_tokenizer(embedded_documents(), vocab_size=8000, model_max_length=settings.length)
    rows = {style: packed_rows(tokenizer, settings.length, style) for style in (False, True)}
    print(
        f"batch {settings.batch} x {settings.length}, torch threads {torch.get_num_threads()}, collators: median of "
        f"{settings.repeats} batches; steps: {settings.layers} layers x {settings.hidden}, median of {settings.steps}"
    )
    print("| family | " + " | ".join(f"{unit} ms/batch" for unit in MASKING_UNITS) + " | step s | worst share |")
    print("|---|" + "---|" * (len(MASKING_UNITS) + 2))
    for family in settings.families.split(","):
        family_rows = rows[family == "biphasic"]
        seconds = [
            collate_seconds(collator(family, tokenizer, unit), family_rows, settings.batch, settings.repeats)
            for unit in MASKING_UNITS
        ]
        step = step_seconds(family, settings) if settings.steps else float("nan")
        cells = " | ".join(f"{1000 * value:.1f}" for value in seconds)
        print(f"| {family} | {cells} | {step:.2f} | {max(seconds) / step:.1%} |", flush=True)


if __name__ == "__main__":
    main()
