"""A BERT-style WordPiece tokenizer trained on the spot, or a saved one loaded with `AutoTokenizer`."""

from collections.abc import Iterable
from pathlib import Path

from transformers import AutoTokenizer, BertTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from ..errors import TokenizerLoadError, hub_unreachable_reason


def train_wordpiece_tokenizer(
    texts: Iterable[str], vocab_size: int = 8000, lowercase: bool = True, model_max_length: int = 512
) -> PreTrainedTokenizerFast:
    """Train a WordPiece vocabulary on `texts` inside BERT's tokenization pipeline.

    The result is a fast `BertTokenizer` with [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4, the
    "[CLS] A [SEP]" / "[CLS] A [SEP] B [SEP]" templates (token_type_ids 1 on B), offsets, and a
    `save_pretrained` folder that `AutoTokenizer.from_pretrained` reloads unchanged.
    """
    # BertTokenizer's constructor lays out the whole pipeline (BertNormalizer, BertPreTokenizer, the
    # templates, the WordPiece decoder) around a vocabulary of just the five special tokens in the order
    # above; training keeps both and learns the rest of the vocabulary.
    blueprint = BertTokenizer(do_lower_case=lowercase, model_max_length=model_max_length)
    tokenizer = blueprint.train_new_from_iterator(texts, vocab_size=vocab_size, show_progress=False)
    if len(tokenizer) == len(blueprint):
        raise ValueError("train_wordpiece_tokenizer got no text to learn from; pass a non-empty corpus.")
    return tokenizer


def load_or_train_tokenizer(name_or_path: str | None, texts: Iterable[str], **train_kwargs) -> PreTrainedTokenizerBase:
    """Load the tokenizer at `name_or_path` with `AutoTokenizer`, or train one on `texts` when it is None.

    `texts` and `train_kwargs` (see `train_wordpiece_tokenizer`) are only used for training.
    Raises `TokenizerLoadError` when `name_or_path` cannot be loaded.
    """
    if name_or_path is None:
        return train_wordpiece_tokenizer(texts, **train_kwargs)
    return load_tokenizer(name_or_path, fix="Pass such a folder, or None to train a WordPiece tokenizer on the corpus.")


def hub_shaped(name_or_path: str) -> bool:
    """Whether `name_or_path` may name a Hub repository ("name" or "owner/name"), not only a local path."""
    return not name_or_path.startswith((".", "/", "~")) and name_or_path.count("/") <= 1


def load_tokenizer(name_or_path: str, fix: str, **load_kwargs) -> PreTrainedTokenizerBase:
    """`AutoTokenizer.from_pretrained`, or a `TokenizerLoadError` naming the path, the reason and `fix`."""
    try:
        return AutoTokenizer.from_pretrained(name_or_path, **load_kwargs)
    except (OSError, ValueError) as error:  # OSError: no such files; ValueError: files it cannot build from
        where = "it is not a folder written by save_pretrained (with tokenizer.json)"
        if not Path(name_or_path).exists():
            if not hub_shaped(name_or_path):
                raise TokenizerLoadError(
                    f"cannot load a tokenizer from {name_or_path!r}: no such folder. {fix}"
                ) from error
            where = "no such folder"
        raise TokenizerLoadError(
            f"cannot load a tokenizer from {name_or_path!r}: {where} and {hub_unreachable_reason()} ({error}). {fix}"
        ) from error
