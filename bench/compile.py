"""`hf-encoders pretrain --torch_compile` against the same run in eager mode, per pre-training method.

Each method pre-trains the same model on the same batches twice, eager and compiled, with the pretrain command's
Trainer, and the per-step time is the median over the steps after warm-up (the first `--warmup_steps` steps, where
torch.compile builds its graphs, are left out). The eager run goes once before and once after the compiled one, and
the ratio is compiled / the mean of the two: on a shared machine the speed drifts by 10% between runs minutes apart.
The target (issue 13) is below 1.0 on CPU. Also printed: how long warm-up took, which is mostly compilation.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/compile.py            # CPU: the recipes' small size, batch 8 x 128
"""

import argparse
import functools
import itertools
import statistics
import tempfile
import time
from pathlib import Path

from transformers import BertConfig, BertForPreTraining, TrainerCallback, TrainingArguments

from hf_encoders.data.embedded import embedded_documents
from hf_encoders.data.tokenizer import train_wordpiece_tokenizer
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.pretrain import build_trainer

# TaCL continues a BERT: this one has the other recipes' small size.
SMALL_BERT = dict(hidden_size=256, num_hidden_layers=6, num_attention_heads=4, intermediate_size=1024)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default="mae_lm,biphasic,tacl")
    parser.add_argument("--warmup_steps", type=int, default=10)
    parser.add_argument("--timed_steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    return parser


class StepClock(TrainerCallback):
    """Records when each step ends (Trainer logs no wall time)."""

    def __init__(self):
        self.ended = {}

    def on_step_end(self, args, state, control, **kwargs):
        self.ended[state.global_step] = time.perf_counter()


def run(method: str, compiled: bool, folder: Path, tokenizer: Path, bert: Path, settings) -> tuple[float, float]:
    """(seconds per step after warm-up, seconds of warm-up) of one run."""
    args = PretrainArguments(
        method=method,
        tokenizer_name=str(tokenizer),
        block_size=settings.length,
        # TaCL continues the BERT; the others build a small model.
        **({"model_name_or_path": str(bert)} if method == "tacl" else {"model_size": "small"}),
        phases="mlm:1.0" if method == "biphasic" else None,
    )
    training_args = TrainingArguments(
        output_dir=str(folder / f"{method}-{'compiled' if compiled else 'eager'}"),
        max_steps=settings.warmup_steps + settings.timed_steps,
        per_device_train_batch_size=settings.batch,
        torch_compile=compiled,
        save_strategy="no",
        eval_strategy="no",
        report_to=[],
        logging_steps=10_000,
        dataloader_num_workers=0,
        seed=0,
        use_cpu=True,
    )
    # The pretrain command's trainer, trained without its final save and export.
    trainer = build_trainer(args, training_args)
    clock = StepClock()
    trainer.add_callback(clock)
    started = time.perf_counter()
    trainer.train()
    timed = [clock.ended[step] for step in range(settings.warmup_steps, training_args.max_steps + 1)]
    per_step = statistics.median(later - earlier for earlier, later in itertools.pairwise(timed))
    return per_step, clock.ended[settings.warmup_steps] - started


def main() -> None:
    settings = build_parser().parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        tokenizer = train_wordpiece_tokenizer(embedded_documents(), vocab_size=8000)
        tokenizer.save_pretrained(folder / "tokenizer")
        bert = BertForPreTraining(BertConfig(vocab_size=len(tokenizer), **SMALL_BERT))
        bert.save_pretrained(folder / "bert")
        tokenizer.save_pretrained(folder / "bert")
        print(
            f"small size, batch {settings.batch} x {settings.length}; warm-up {settings.warmup_steps} steps, "
            f"median of {settings.timed_steps} timed steps"
        )
        print("| method | eager s/step, before / after | compiled s/step | ratio | target | met | compiled warm-up s |")
        print("|---|---|---|---|---|---|---|")
        for method in settings.methods.split(","):
            # The same run but for `compiled`: eager before and after the compiled one.
            measure = functools.partial(
                run, method, folder=folder, tokenizer=folder / "tokenizer", bert=folder / "bert", settings=settings
            )
            before, _ = measure(compiled=False)
            compiled, warm_up = measure(compiled=True)
            after, _ = measure(compiled=False)
            ratio = compiled / statistics.mean([before, after])
            print(
                f"| {method} | {before:.3f} / {after:.3f} | {compiled:.3f} | {ratio:.2f} | < 1.0 "
                f"| {'yes' if ratio < 1 else 'no'} | {warm_up:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
