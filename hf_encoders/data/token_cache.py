"""A pre-tokenized cache: a corpus's packed blocks written once, as an Arrow dataset, for every rank and run to read.

A cache folder holds the blocks (`Dataset.save_to_disk`), `tokenizer/` (the tokenizer that made them) and
`hf_encoders_cache.json`, its fingerprint: what the blocks depend on (the tokenizer's content hash, the block size, the
packing style, whether word boundaries are stored), the package version that wrote it and the corpus report (sources,
weights, realised shares, bad rows skipped). The fingerprint is written last, so a folder without one is an
unfinished cache. A run whose tokenizer, block size or packing differs from the cache's is refused, with what differs.

The whole policy is here: what a run's blocks must match (`run_fingerprint`), how a cache is built (`build_cache`, for
`hf-encoders tokenize` and for the first `pretrain --tokenized_dir` run), and how a run trains from one
(`cached_blocks`). A `recipe` is the run's method's (training/recipe.py), `args` its `PretrainArguments`.
"""

import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path

from datasets import Dataset, IterableDataset, load_from_disk
from transformers import PreTrainedTokenizerBase
from transformers.utils import logging

from ..errors import CorpusError
from ..methods import METHODS, load
from .corpus_report import CorpusReport, run_documents
from .mixtures import parse_sources

logger = logging.get_logger(__name__)

FINGERPRINT_FILE = "hf_encoders_cache.json"
TOKENIZER_FOLDER = "tokenizer"
# What the blocks depend on, in the words of the refusal.
CHECKED = {"tokenizer": "tokenizer (content hash)", "block_size": "block size", "packing": "packing"}


def tokenizer_hash(tokenizer: PreTrainedTokenizerBase) -> str:
    """A hash of what turns text into ids: vocabulary, special tokens and, for a fast tokenizer, its normalizer,
    pre-tokenizer and model (merges included); not its settings (truncation, model_max_length)."""
    content = {"vocab": sorted(tokenizer.get_vocab().items()), "special_tokens": tokenizer.special_tokens_map}
    if tokenizer.is_fast:
        pipeline = json.loads(tokenizer.backend_tokenizer.to_str())
        content.update({part: pipeline.get(part) for part in ("normalizer", "pre_tokenizer", "model")})
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cache_fingerprint(
    tokenizer: PreTrainedTokenizerBase, block_size: int, packing: str, word_starts: bool
) -> dict[str, str | int | bool]:
    """What a run needs its blocks to be made with; `packing` names the style ("BERT-style blocks", ...)."""
    return {
        "tokenizer": tokenizer_hash(tokenizer),
        "block_size": block_size,
        "packing": packing,
        "word_starts": word_starts,
    }


def is_cache(folder: str | Path) -> bool:
    return (Path(folder) / FINGERPRINT_FILE).is_file()


def write_cache(
    folder: str | Path,
    blocks: Dataset | IterableDataset,
    tokenizer: PreTrainedTokenizerBase,
    fingerprint: dict,
    report: CorpusReport,
) -> Dataset:
    """Save `blocks` (a stream is written as it is read), their tokenizer and fingerprint in `folder`; the saved
    blocks, read back."""
    from .. import __version__

    folder = Path(folder)
    require_new_folder(folder)
    building = folder.parent / f".{folder.name}.building"  # a stream's blocks, before save_to_disk copies them
    if isinstance(blocks, IterableDataset):
        blocks = Dataset.from_generator(_rows_of, gen_kwargs={"stream": blocks}, cache_dir=str(building))
    blocks.save_to_disk(str(folder))
    shutil.rmtree(building, ignore_errors=True)
    tokenizer.save_pretrained(folder / TOKENIZER_FOLDER)
    recorded = {**fingerprint, "hf_encoders_version": __version__, "blocks": len(blocks), "corpus": report.to_dict()}
    (folder / FINGERPRINT_FILE).write_text(json.dumps(recorded, indent=1))
    return load_from_disk(str(folder))


def require_new_folder(folder: Path) -> None:
    if folder.is_file() or (folder.exists() and any(folder.iterdir())):
        raise CorpusError(f"{folder}: not empty and not a token cache; pass a new or empty folder for the cache.")


def _rows_of(stream: IterableDataset):
    yield from stream


def read_fingerprint(folder: str | Path) -> dict:
    path = Path(folder) / FINGERPRINT_FILE
    if not path.is_file():
        raise CorpusError(
            f"{folder}: not a token cache (no {FINGERPRINT_FILE}); make one with `hf-encoders tokenize --output_dir "
            f"{folder}`, or pass --corpus to pretrain from text."
        )
    return json.loads(path.read_text())


def recorded_block_size(folder: str | Path) -> int | None:
    """The block size of the cache in `folder`; None where `folder` holds no cache (yet)."""
    return read_fingerprint(folder)["block_size"] if is_cache(folder) else None


def load_cache(folder: str | Path, expected: dict) -> tuple[Dataset, CorpusReport]:
    """The blocks of the cache in `folder` and its corpus report; `CorpusError` naming every difference between the
    cache's fingerprint and `expected` (a run's)."""
    recorded = read_fingerprint(folder)
    differences = [
        f"{words} {recorded.get(key)!r} where this run has {expected[key]!r}"
        for key, words in CHECKED.items()
        if recorded.get(key) != expected[key]
    ]
    if expected["word_starts"] and not recorded.get("word_starts"):
        differences.append("no word boundaries, which whole-word and span masking need (tokenize with --masking)")
    if differences:
        raise CorpusError(
            f"--tokenized_dir {folder} was made with {'; '.join(differences)}. Make a cache with this run's "
            "options (hf-encoders tokenize), or run with the cache's."
        )
    return load_from_disk(str(folder)), CorpusReport.from_dict(recorded["corpus"])


def packing_style(recipe, args) -> str:
    """How a method lays tokens out in a row, as the cache's fingerprint records it."""
    return recipe.packing_style + (", documents kept apart (position_ids)" if args.pack_documents else "")


def run_fingerprint(recipe, args, tokenizer: PreTrainedTokenizerBase) -> dict:
    return cache_fingerprint(tokenizer, args.block_size, packing_style(recipe, args), recipe.needs_word_starts(args))


def build_cache(recipe, args, folder: Path, seed: int) -> CorpusReport:
    """Load the corpus, make the recipe's blocks and write them, with their tokenizer and fingerprint, to `folder`;
    the corpus report."""
    recipe.check_arguments(args)
    require_new_folder(folder)  # before the corpus is tokenized, not after
    documents, report = run_documents(args, seed)
    tokenizer = recipe.build_tokenizer(args, documents)
    if isinstance(documents, IterableDataset):
        report.shares.forget()  # what training the tokenizer read; the blocks are made from a new read
    recipe.check_tokenizer(args, tokenizer)
    blocks = recipe.build_dataset(args, tokenizer, documents)
    written = write_cache(folder, blocks, tokenizer, run_fingerprint(recipe, args, tokenizer), report)
    logger.info(f"Wrote {len(written):,} blocks of {args.block_size} tokens to {folder}.")
    return report


def cached_blocks(recipe, args, training_args):
    """(tokenizer, blocks, corpus report) of `--tokenized_dir`, which the main process builds first if it is not a
    cache yet (the other processes wait, then read it). The run's tokenizer is the one it would have without a cache
    (--tokenizer_name, the checkpoint's), or else the cache's; either way it must be the one the blocks were made with."""
    folder = Path(args.tokenized_dir)
    with training_args.main_process_first(local=False, desc="building the token cache"):
        if training_args.process_index == 0 and not is_cache(folder):
            build_cache(recipe, args, folder, seed=training_args.seed)
    check_cache_method(recipe, folder)
    if args.tokenizer_name is None and not args.starting_checkpoint:
        args = replace(args, tokenizer_name=str(folder / TOKENIZER_FOLDER))
    # Named or saved with the cache or checkpoint, the tokenizer is loaded, never trained: there are no documents.
    tokenizer = recipe.build_tokenizer(args, Dataset.from_dict({"text": []}))
    blocks, report = load_cache(folder, run_fingerprint(recipe, args, tokenizer))
    if args.corpus is not None and parse_sources(args.corpus) != report.sources:
        logger.warning(
            f"--corpus {args.corpus} is not what {folder} was made from "
            f"({','.join(f'{source.name}:{source.weight:g}' for source in report.sources)}); training on the cache."
        )
    return tokenizer, blocks, report


def check_cache_method(recipe, folder: Path) -> None:
    """Refuse a cache laid out for other methods, saying so: its tokenizer differs too (biphasic's adds BOS and EOS),
    but that follows from the method, and the fix is a cache made for this one."""
    packing = read_fingerprint(folder)["packing"]
    if packing.startswith(recipe.packing_style):  # --pack_documents adds to the style; load_cache compares it whole
        return
    makers = [name for name, method in METHODS.items() if packing.startswith(load(method.recipe).packing_style)]
    raise CorpusError(
        f"--tokenized_dir {folder} holds {packing}, made for --method {' or '.join(makers) or 'another method'}; "
        f"--method {recipe.name} trains on {recipe.packing_style}. Make a cache for it: pass a new --tokenized_dir "
        f"folder, which pretrain fills from the corpus first, or run hf-encoders tokenize --method {recipe.name}."
    )
