"""What `hf-encoders pretrain --diagnostics_steps N` costs: one probe of the encoder against one training step.

HF_HUB_OFFLINE=1 .venv/bin/python bench/diagnostics.py --model_size small --block_size 128 --batch 16

For each method: the median time of a training step (a short run after a warm-up run) and of one probe (the encoder
twice over `--diagnostics_sentences` held-out sentences, with and without [MASK], plus the per-layer ranks); the
overhead of a run that probes every N steps is probe / (N x step).
"""

import argparse
import statistics
import time

import torch
from transformers import TrainingArguments

from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.callbacks import DiagnosticsCallback
from hf_encoders.training.pretrain import build_trainer

EVERY = (100, 1000)


def seconds_per_step(trainer, steps: int) -> float:
    started = time.perf_counter()
    trainer.train()
    return (time.perf_counter() - started) / steps


def measure(method: str, options) -> tuple[float, float]:
    args = PretrainArguments(
        method=method,
        model_size=options.model_size,
        block_size=options.block_size,
        max_documents=400,
        vocab_size=8000,
        validation_split_percentage=10,
        diagnostics_steps=10**9,  # the callback is built (and its probe set chosen); it never fires in the timed run
        diagnostics_sentences=options.diagnostics_sentences,
        phases="mlm:1.0" if method == "biphasic" else None,
    )
    training = TrainingArguments(
        output_dir="/tmp/bench-diagnostics",
        max_steps=options.steps,
        per_device_train_batch_size=options.batch,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
    )
    trainer = build_trainer(args, training)
    probe = next(
        callback for callback in trainer.callback_handler.callbacks if isinstance(callback, DiagnosticsCallback)
    )
    seconds_per_step(trainer, options.steps)  # warm-up: allocator, kernels, first batches
    step = seconds_per_step(trainer, options.steps)
    probes = []
    for _ in range(3):
        started = time.perf_counter()
        probe.measure(trainer.model)
        probes.append(time.perf_counter() - started)
    return step, statistics.median(probes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="mae_lm,biphasic")
    parser.add_argument("--model_size", default="small")
    parser.add_argument("--block_size", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--diagnostics_sentences", type=int, default=128)
    options = parser.parse_args()
    columns = ["method", "s/step", "s/probe", "probe / step", *(f"overhead every {n} steps" for n in EVERY)]
    print(f"| {' | '.join(columns)} |", "|---" * len(columns) + "|", sep="\n")
    for method in options.methods.split(","):
        step, probe = measure(method, options)
        overheads = " | ".join(f"{probe / (n * step):.2%}" for n in EVERY)
        print(f"| {method} | {step:.3f} | {probe:.3f} | {probe / step:.2f} | {overheads} |", flush=True)


if __name__ == "__main__":
    main()
