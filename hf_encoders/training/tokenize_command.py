"""`hf-encoders tokenize`: tokenize and pack a corpus once into a token cache (data/token_cache.py, which holds its
format and policy), which `hf-encoders pretrain --tokenized_dir DIR` then trains from on every rank, without a
tokenizer pass over the corpus.

hf-encoders tokenize --method mae_lm --corpus web.jsonl:0.7,books.jsonl:0.3 --tokenizer_name bert-base-uncased \\
    --block_size 512 --output_dir cache/web-books-512

The blocks are the ones `pretrain` would make with the same options: same recipe, same tokenizer (trained on the
corpus when no --tokenizer_name is given, and saved in the cache for the runs to use).
"""

import copy
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from pathlib import Path

from ..data.token_cache import build_cache, is_cache
from .arguments import HfCommandParser, PretrainArguments
from .recipe import get_recipe

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


def main(argv: list[str] | None = None) -> int:
    parser = HfCommandParser(
        TokenizeArguments,
        prog="hf-encoders tokenize",
        description="Tokenize and pack a corpus once into a token cache, which `hf-encoders pretrain --tokenized_dir "
        "DIR` trains from without a tokenizer pass; the blocks are the ones pretrain would make with the same options.",
    )
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
