"""What resuming a streamed run costs: the time to the first new step, N steps into the stream, with and without the
stream's saved position.

    python bench/stream_resume.py                    # N = 50 and 500
    python bench/stream_resume.py --steps 100,1000

For each N, `hf-encoders pretrain --method mlm --streaming` (a tiny model, so that the data dominates) trains N steps
on a JSONL corpus (the embedded corpus's paragraphs as documents, copied `--copies` times) and saves checkpoint-N. Then the run is resumed twice
from that checkpoint and timed from `train()` to the end of step N + 1:

* restored: the checkpoint's stream position (training/streaming.py), no batch read again;
* replayed: the same checkpoint without it, resumed Trainer's way, reading, tokenizing, packing and collating the N
  batches again before the first new step.

Both include what every resume pays (model, optimizer and RNG state loaded, the loader started); only the replay grows
with N.
"""

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from transformers import TrainerCallback, TrainingArguments
from transformers.utils import logging

from hf_encoders.data import embedded_documents
from hf_encoders.data.sentences import PARAGRAPH_BREAK
from hf_encoders.data.tokenizer import train_wordpiece_tokenizer
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.pretrain import build_trainer
from hf_encoders.training.streaming import stream_state_file

TINY_MODEL = "hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64"


class FirstStepTimer(TrainerCallback):
    """The time from its creation to the end of the first step the run trains."""

    def __init__(self):
        self.start, self.seconds = time.perf_counter(), None

    def on_step_end(self, args, state, control, **kwargs):
        if self.seconds is None:
            self.seconds = time.perf_counter() - self.start


def training_arguments(output_dir: Path, max_steps: int, batch: int) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(output_dir),
        max_steps=max_steps,
        save_steps=max_steps,
        per_device_train_batch_size=batch,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        logging_strategy="no",
        dataloader_pin_memory=False,
    )


def resume_seconds(args: PretrainArguments, checkpoint: Path, steps: int, batch: int) -> float:
    trainer = build_trainer(args, training_arguments(checkpoint.parent, steps + 1, batch), str(checkpoint))
    timer = FirstStepTimer()
    trainer.add_callback(timer)
    trainer.train(resume_from_checkpoint=str(checkpoint))
    return timer.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="50,500", help="the steps N to resume at, comma-separated")
    parser.add_argument("--copies", type=int, default=4, help="copies of the embedded corpus in the streamed file")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--block_size", type=int, default=128)
    options = parser.parse_args()
    logging.set_verbosity_error()  # Trainer's notes on every resume would drown the table
    folder = Path(tempfile.mkdtemp())
    # Paragraphs: the first batch any resume reads and packs (data/packing.py's DOCUMENTS_PER_BATCH documents) is then
    # a small part of the corpus, as in a real one.
    paragraphs = [paragraph for text in embedded_documents() for paragraph in PARAGRAPH_BREAK.split(text)]
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in paragraphs * options.copies))
    tokenizer_dir = folder / "tokenizer"
    train_wordpiece_tokenizer(paragraphs, vocab_size=8000).save_pretrained(tokenizer_dir)
    args = PretrainArguments(
        method="mlm",
        corpus=str(corpus),
        streaming=True,
        tokenizer_name=str(tokenizer_dir),
        block_size=options.block_size,
        config_overrides=TINY_MODEL,
    )
    print(
        f"corpus: {len(paragraphs) * options.copies:,} documents, {corpus.stat().st_size / 1e6:.1f} MB of JSON Lines; "
        f"batch {options.batch} x {options.block_size} tokens"
    )
    print("| resumed at step N | restored: s to first new step | replayed: s to first new step | replay / restored |")
    print("|---|---|---|---|")
    try:
        for steps in (int(step) for step in options.steps.split(",")):
            run = folder / f"run-{steps}"
            build_trainer(args, training_arguments(run, steps, options.batch)).train()
            checkpoint = run / f"checkpoint-{steps}"
            without_position = folder / f"replay-{steps}" / checkpoint.name
            shutil.copytree(checkpoint, without_position)
            stream_state_file(without_position, rank=0).unlink()
            restored = resume_seconds(args, checkpoint, steps, options.batch)
            replayed = resume_seconds(args, without_position, steps, options.batch)
            print(f"| {steps} | {restored:.2f} | {replayed:.2f} | {replayed / restored:.1f} |", flush=True)
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
