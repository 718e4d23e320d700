"""Can the input pipeline feed a GPU? Tokens per second per CPU core of each stage, for every method.

    OMP_NUM_THREADS=1 python bench/input_pipeline.py      # 32 x 512, the embedded corpus, 1 torch thread

(a) tokenize + pack: the corpus streamed from a JSON Lines file (`load_documents(streaming=True)`, bad rows checked)
    through the recipe's `build_dataset`, as `pretrain --streaming` does inside the training loop (or `hf-encoders
    tokenize` once); word starts stored (`--masking whole_word`), as whole-word and span masking need.
(b) collate + mask from the cache: rows fetched from the token cache (`load_from_disk`, as `pretrain --tokenized_dir`
    reads them, 32 random indices at a time, as Trainer's sampler asks) and collated by the method's collator, for each
    masking unit.
(a) and (b) run in this process on one thread (torch's, and the tokenizers library's: TOKENIZERS_PARALLELISM=false)
and are timed in CPU time (`time.process_time`), so they are tokens per second of one core even on a busy machine.
(c) the whole DataLoader (Trainer's: random sampler, the method's collator, `--masking token`) with 0, 1 and 2
    workers: wall-clock tokens/s of batches delivered to the training loop, after the first batch (worker start-up
    excluded); this one depends on how many idle cores the machine has.

Tokens are the blocks' tokens (32 x 512 a batch; TaCL's sentence pairs count their real tokens, not padding).
"""

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import datasets
import torch
from datasets import Dataset
from torch.utils.data import DataLoader, RandomSampler

from hf_encoders.data import embedded_documents, load_documents
from hf_encoders.data.corpus_report import CorpusReport
from hf_encoders.data.masking_units import MASKING_UNITS
from hf_encoders.data.token_cache import run_fingerprint, write_cache
from hf_encoders.data.tokenizer import train_wordpiece_tokenizer
from hf_encoders.methods import METHODS
from hf_encoders.methods.biphasic.conversion import prepare_tokenizer
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.recipe import get_recipe


def tokenize_and_pack(recipe, args, tokenizer, corpus: Path) -> tuple[float, int]:
    """(tokens/s, tokens) of the recipe's blocks made from the streamed corpus, read through once."""
    start = time.process_time()
    blocks = recipe.build_dataset(args, tokenizer, load_documents(corpus, streaming=True))
    tokens = sum(sum(block["attention_mask"]) for block in blocks)
    return tokens / (time.process_time() - start), tokens


def collate_from_cache(collator, cache: Dataset, batch: int, repeats: int, seed: int = 0) -> float:
    """Median tokens/s of fetching `batch` random rows from the cache and collating them, over `repeats` batches."""
    generator = torch.Generator().manual_seed(seed)
    rates = []
    for repeat in range(repeats + 1):  # the first batch warms up
        indices = torch.randint(len(cache), (batch,), generator=generator).tolist()
        start = time.process_time()
        collated = collator(cache.__getitems__(indices))  # what the DataLoader's fetcher does for a batch
        seconds = time.process_time() - start
        if repeat:
            rates.append(int(collated["attention_mask"].sum()) / seconds)
    return statistics.median(rates)


def loader_rate(collator, cache: Dataset, batch: int, batches: int, workers: int) -> float:
    """tokens/s of the batches a DataLoader delivers, from the second batch to the last."""
    loader = DataLoader(
        cache,
        batch_size=batch,
        sampler=RandomSampler(cache, num_samples=batch * (batches + 1), generator=torch.Generator().manual_seed(0)),
        collate_fn=collator,
        num_workers=workers,
        persistent_workers=False,
    )
    iterator = iter(loader)
    next(iterator)
    start, tokens = time.perf_counter(), 0
    for collated in iterator:
        tokens += int(collated["attention_mask"].sum())
    return tokens / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=20, help="batches timed per collator and unit")
    parser.add_argument("--loader_batches", type=int, default=30, help="batches timed per DataLoader")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--workers", default="0,1,2")
    settings = parser.parse_args()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # before the first batch is tokenized: one core
    torch.set_num_threads(1)
    datasets.disable_progress_bars()
    texts = embedded_documents()
    # [SEP] doubles as EOS for the biphasic packing (what its recipe does to a WordPiece tokenizer).
    tokenizer = prepare_tokenizer(train_wordpiece_tokenizer(texts, vocab_size=8000, model_max_length=settings.length))
    workers = [int(count) for count in settings.workers.split(",")]
    print(f"batch {settings.batch} x {settings.length}, 1 torch thread; tokens/s (thousands)")
    header = ["method", "(a) tokenize + pack", *(f"(b) cache + {unit}" for unit in MASKING_UNITS)]
    header += [f"(c) loader, {count} workers" for count in workers]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    with tempfile.TemporaryDirectory() as folder:
        corpus = Path(folder) / "corpus.jsonl"
        corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts), encoding="utf-8")
        for method in settings.methods.split(","):
            recipe = get_recipe(method)
            args = PretrainArguments(method=method, block_size=settings.length, masking="whole_word")
            packing, _ = tokenize_and_pack(recipe, args, tokenizer, corpus)
            blocks = recipe.build_dataset(args, tokenizer, Dataset.from_dict({"text": texts}))
            cache = write_cache(
                Path(folder) / method,
                blocks,
                tokenizer,
                run_fingerprint(recipe, args, tokenizer),
                CorpusReport.for_corpus(None),
            )
            collators = {unit: recipe.build_collator(replace(args, masking=unit), tokenizer) for unit in MASKING_UNITS}
            cells = [packing] + [
                collate_from_cache(collators[unit], cache, settings.batch, settings.repeats) for unit in MASKING_UNITS
            ]
            cells += [
                loader_rate(collators["token"], cache, settings.batch, settings.loader_batches, count)
                for count in workers
            ]
            print(f"| {method} | " + " | ".join(f"{rate / 1000:,.0f}" for rate in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
