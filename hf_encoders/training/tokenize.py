"""`hf-encoders tokenize`: tokenize and pack a corpus once into a token cache (data/token_cache.py), which
`hf-encoders pretrain --tokenized_dir DIR` then trains from on every rank, without a tokenizer pass over the corpus.

hf-encoders tokenize --method mae_lm --corpus web.jsonl:0.7,books.jsonl:0.3 --tokenizer_name bert-base-uncased \\
    --block_size 512 --output_dir cache/web-books-512

The blocks are the ones `pretrain` would make with the same options: same recipe, same tokenizer (trained on the
corpus when no --tokenizer_name is given, and saved in the cache for the runs to use).
"""

import copy
from dataclasses import MISSING, dataclass, field, fields, make_dataclass, replace
from pathlib import Path

from datasets import Dataset, IterableDataset
from transformers import HfArgumentParser, PreTrainedTokenizerBase
from transformers.utils import logging

from ..data.corpus_report import CorpusReport
from ..data.errors import CorpusError
from ..data.mixtures import load_corpus, parse_sources
from ..data.token_cache import (
    TOKENIZER_FOLDER,
    cache_fingerprint,
    is_cache,
    load_cache,
    read_fingerprint,
    require_new_folder,
    write_cache,
)
from ..families import FAMILIES
from .arguments import PretrainArguments
from .recipes import get_recipe

logger = logging.get_logger(__name__)

# The options of `pretrain` that decide the blocks; `tokenize` takes these (and where to write, and the seed).
BLOCK_OPTIONS = (
    "method",
    "corpus",
    "dataset_config",
    "text_column",
    "streaming",
    "skip_bad_rows",
    "max_documents",
    "tokenizer_name",
    "vocab_size",
    "model_name_or_path",
    "from_causal_lm",
    "block_size",
    "masking",
    "pack_documents",
    "preprocessing_num_workers",
)


@dataclass
class _CacheFolder:
    output_dir: str = field(metadata={"help": "Required. The new (or empty) folder the token cache is written to."})
    seed: int = field(default=42, metadata={"help": "Seed of a mixture's draws (pretrain's --seed)."})


# pretrain's own fields (help and defaults), the required ones first (a dataclass lists them so).
_FIELDS = [*(f for f in fields(PretrainArguments) if f.name in BLOCK_OPTIONS), *fields(_CacheFolder)]
TokenizeArguments = make_dataclass(
    "TokenizeArguments",
    [(f.name, f.type, copy.copy(f)) for f in sorted(_FIELDS, key=lambda f: f.default is not MISSING)],
)


def packing_style(recipe, args) -> str:
    """How a method lays tokens out in a row, as the cache's fingerprint records it."""
    return recipe.packing_style + (", documents kept apart (position_ids)" if args.pack_documents else "")


def run_fingerprint(recipe, args, tokenizer: PreTrainedTokenizerBase) -> dict:
    return cache_fingerprint(tokenizer, args.block_size, packing_style(recipe, args), recipe.needs_word_starts(args))


def run_documents(args: PretrainArguments, seed: int) -> tuple[Dataset | IterableDataset, CorpusReport]:
    """The documents of `--corpus` (mixed with `seed` if it names several sources; bad rows checked) and the report
    that counts what each source contributed and the rows skipped, as a run reads them."""
    report = CorpusReport.for_corpus(args.corpus)
    documents = load_corpus(
        report.shares,
        seed,
        dataset_config=args.dataset_config,
        text_column=args.text_column,
        streaming=args.streaming,
        skip_bad_rows=args.skip_bad_rows,
        skipped=report.skipped,
    )
    if args.max_documents is not None:
        documents = documents.take(args.max_documents)
    return documents, report


def build_cache(recipe, args: PretrainArguments, folder: Path, seed: int) -> CorpusReport:
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


def cached_blocks(recipe, args: PretrainArguments, training_args):
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
    makers = [name for name in FAMILIES if packing.startswith(get_recipe(name).packing_style)]
    raise CorpusError(
        f"--tokenized_dir {folder} holds {packing}, made for --method {' or '.join(makers) or 'another method'}; "
        f"--method {recipe.name} trains on {recipe.packing_style}. Make a cache for it: pass a new --tokenized_dir "
        f"folder, which pretrain fills from the corpus first, or run hf-encoders tokenize --method {recipe.name}."
    )


def main(argv: list[str] | None = None) -> int:
    parser = HfArgumentParser(TokenizeArguments, prog="hf-encoders tokenize")
    (options,) = parser.parse_args_into_dataclasses(argv)
    folder = Path(options.output_dir)
    if is_cache(folder):
        parser.error(f"{folder} holds a token cache already; pass a new folder, or delete that one first.")
    args = PretrainArguments(**{name: getattr(options, name) for name in BLOCK_OPTIONS})
    report = build_cache(get_recipe(args.method), args, folder, seed=options.seed)
    for line in report.lines():
        print(line.removeprefix("- "))
    print(f"hf-encoders tokenize: wrote the token cache {folder}; train from it with --tokenized_dir {folder}.")
    return 0
