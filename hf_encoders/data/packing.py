"""Tokenize documents and pack them into fixed-size blocks, BERT style or Llama style.

Both styles stream the documents of a `Dataset.map` batch into one token sequence, cut it into equal
blocks and drop the short tail, as `run_mlm.py`'s `group_texts` does. They differ in where special
tokens go:

* BERT style: every block is [CLS] + block_size - 2 corpus tokens + [SEP]; documents may be separated
  by a separator token (usually [SEP]) inside the stream.
* Llama style: documents are joined with EOS (and optionally started with BOS) and the stream is cut
  into blocks of exactly block_size tokens with nothing added at block edges.

Blocks come in "input_ids", "attention_mask" (all ones) and "special_tokens_mask" (1 on the inserted
tokens, which `DataCollatorForLanguageModeling` then never masks), and "word_starts" when the tokenized documents
have it (`tokenize_documents(..., word_starts=True)`), for whole-word and span masking.

With `pack_documents=True` (`hf-encoders pretrain --pack_documents`), every document keeps its own positions:
blocks also carry "position_ids" restarting at 0 where a document starts (transformers' packed-sequence
convention), so models that honour it attend within each document only. BERT style then wraps each document
(not each block) in [CLS] ... [SEP]. A document cut at a block's end continues at the start of the next block,
with positions restarting there: every block is full, so no compute goes to padding.
"""

from itertools import chain

from datasets import Dataset, IterableDataset
from transformers import PreTrainedTokenizerBase

from .masking_units import word_start_mask

# Documents per `map` batch; each batch loses at most one short tail of less than a block.
DOCUMENTS_PER_BATCH = 1000


def tokenize_documents(
    dataset: Dataset | IterableDataset,
    tokenizer: PreTrainedTokenizerBase,
    num_proc: int | None = None,
    text_column: str = "text",
    word_starts: bool = False,
) -> Dataset | IterableDataset:
    """Replace each document with its "input_ids", without special tokens (packing adds those).

    `word_starts=True` adds a "word_starts" column (1 on each word's first token, from the fast tokenizer's word
    ids), which packing carries into the blocks for whole-word and span masking (data/masking_units.py).
    `num_proc` parallelises a `Dataset`; an `IterableDataset` is tokenized lazily as it is read.
    """
    parallelism = {"num_proc": num_proc} if isinstance(dataset, Dataset) else {}
    return dataset.map(
        _tokenize_batch,
        batched=True,
        remove_columns=dataset.column_names or [text_column],
        fn_kwargs={"tokenizer": tokenizer, "text_column": text_column, "word_starts": word_starts},
        **parallelism,
    )


def pack_bert_style(
    tokenized: Dataset | IterableDataset,
    block_size: int,
    *,
    cls_id: int,
    sep_id: int,
    separator_id: int | None = None,
    num_proc: int | None = None,
    pack_documents: bool = False,
) -> Dataset | IterableDataset:
    """Blocks of [CLS] + (block_size - 2) tokens + [SEP]; `separator_id` (if any) ends each document. With
    `pack_documents`, [CLS] document [SEP] per document instead, with positions restarting for each."""
    _require_ids(cls_id=cls_id, sep_id=sep_id)
    if pack_documents:
        return _pack(
            tokenized, block_size, num_proc, document_prefix=(cls_id,), document_suffix=(sep_id,), restart=True
        )
    return _pack(
        tokenized,
        block_size,
        num_proc,
        document_suffix=() if separator_id is None else (separator_id,),
        block_prefix=(cls_id,),
        block_suffix=(sep_id,),
    )


def pack_llama_style(
    tokenized: Dataset | IterableDataset,
    block_size: int,
    *,
    eos_id: int,
    bos_id: int | None = None,
    num_proc: int | None = None,
    pack_documents: bool = False,
) -> Dataset | IterableDataset:
    """Blocks of block_size tokens cut from documents joined by EOS, each started with BOS if `bos_id`; with
    `pack_documents`, positions restart for each document."""
    _require_ids(eos_id=eos_id)
    return _pack(
        tokenized,
        block_size,
        num_proc,
        document_prefix=() if bos_id is None else (bos_id,),
        document_suffix=(eos_id,),
        restart=pack_documents,
    )


def _tokenize_batch(
    batch: dict[str, list], tokenizer: PreTrainedTokenizerBase, text_column: str, word_starts: bool
) -> dict:
    # verbose=False: documents longer than the model's maximum are expected, packing cuts them up.
    encoding = tokenizer(
        batch[text_column],
        add_special_tokens=False,
        return_attention_mask=False,
        return_token_type_ids=False,
        verbose=False,
    )
    if not word_starts:
        return encoding
    if not tokenizer.is_fast:
        raise ValueError(
            f"Word boundaries come from a fast tokenizer's word ids, which {type(tokenizer).__name__} (a slow "
            "tokenizer) has none of; load it with AutoTokenizer.from_pretrained(name), or mask tokens."
        )
    return {
        "input_ids": encoding["input_ids"],
        "word_starts": [word_start_mask(encoding.word_ids(i)) for i in range(len(encoding["input_ids"]))],
    }


def _require_ids(**ids: int | None) -> None:
    for name, token_id in ids.items():
        if token_id is None:
            raise ValueError(f"{name} is None: the tokenizer lacks that special token; add it or pass an id.")


def _pack(
    tokenized: Dataset | IterableDataset,
    block_size: int,
    num_proc: int | None,
    *,
    document_prefix: tuple[int, ...] = (),
    document_suffix: tuple[int, ...],
    block_prefix: tuple[int, ...] = (),
    block_suffix: tuple[int, ...] = (),
    restart: bool = False,
) -> Dataset | IterableDataset:
    tokens_per_block = block_size - len(block_prefix) - len(block_suffix)
    if tokens_per_block < 1:
        raise ValueError(f"block_size={block_size} leaves no room for text between the block's special tokens.")
    wrapping = len(document_prefix) + len(document_suffix)
    if restart and block_size <= wrapping:
        raise ValueError(
            f"--pack_documents with block_size={block_size}: each document takes {wrapping} special tokens, which "
            "leaves no room for its text in a block. Pass a larger --block_size."
        )
    parallelism = {"num_proc": num_proc} if isinstance(tokenized, Dataset) else {}
    return tokenized.map(
        _pack_batch,
        batched=True,
        batch_size=DOCUMENTS_PER_BATCH,
        remove_columns=tokenized.column_names or ["input_ids"],
        fn_kwargs={
            "tokens_per_block": tokens_per_block,
            "document_prefix": document_prefix,
            "document_suffix": document_suffix,
            "block_prefix": block_prefix,
            "block_suffix": block_suffix,
            "restart": restart,
        },
        **parallelism,
    )


def _pack_batch(
    batch: dict[str, list],
    tokens_per_block: int,
    document_prefix: tuple[int, ...],
    document_suffix: tuple[int, ...],
    block_prefix: tuple[int, ...],
    block_suffix: tuple[int, ...],
    restart: bool,
) -> dict[str, list[list[int]]]:
    documents = [(*document_prefix, *ids, *document_suffix) for ids in batch["input_ids"]]
    stream = list(chain.from_iterable(documents))
    starts = range(0, len(stream) - tokens_per_block + 1, tokens_per_block)  # drops the short tail
    blocks = [[*block_prefix, *stream[start : start + tokens_per_block], *block_suffix] for start in starts]
    # Marks every id we insert, wherever it occurs (also a "[SEP]" spelled out in the text itself).
    special_ids = {*document_prefix, *document_suffix, *block_prefix, *block_suffix}
    packed = {
        "input_ids": blocks,
        "attention_mask": [[1] * len(block) for block in blocks],
        "special_tokens_mask": [[int(token in special_ids) for token in block] for block in blocks],
    }
    if "word_starts" in batch:  # every inserted special token is a word of its own
        around = [(1,) * len(part) for part in (document_prefix, document_suffix, block_prefix, block_suffix)]
        word_stream = list(chain.from_iterable((*around[0], *flags, *around[1]) for flags in batch["word_starts"]))
        packed["word_starts"] = [
            [*around[2], *word_stream[start : start + tokens_per_block], *around[3]] for start in starts
        ]
    if restart:  # no block prefix or suffix here: blocks are plain slices of the stream
        positions = list(chain.from_iterable(range(len(document)) for document in documents))
        packed["position_ids"] = [_restarted(positions[start : start + tokens_per_block]) for start in starts]
    return packed


def _restarted(positions: list[int]) -> list[int]:
    """A block's positions, the document cut at its start counted again from 0 (only its first piece began at 0)."""
    first_start = positions.index(0) if 0 in positions else len(positions)
    return [*range(first_start), *positions[first_start:]]
