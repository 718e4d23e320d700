"""Tokenizing documents and packing them into blocks, against hand-worked and plain-Python references."""

import pytest
from datasets import Dataset, IterableDataset

from hf_encoders.data import (
    embedded_documents,
    pack_bert_style,
    pack_llama_style,
    tokenize_documents,
    train_wordpiece_tokenizer,
)

CLS, SEP, BOS, EOS = 2, 3, 5, 6
HAND_DOCUMENTS = Dataset.from_dict({"input_ids": [[10, 11, 12], [13, 14], [15, 16, 17, 18]]})


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece_tokenizer(embedded_documents()[:20], vocab_size=600)


@pytest.fixture(scope="module")
def documents():
    return Dataset.from_dict({"text": embedded_documents()[:40]})


@pytest.fixture(scope="module")
def tokenized(documents, tokenizer):
    return tokenize_documents(documents, tokenizer)


def reference_blocks(documents, block_size, document_prefix=(), document_suffix=(), block_prefix=(), block_suffix=()):
    """What packing means, in plain Python: stream, cut, drop the tail, wrap."""
    stream = []
    for ids in documents:
        stream += [*document_prefix, *ids, *document_suffix]
    length = block_size - len(block_prefix) - len(block_suffix)
    cuts = [stream[start : start + length] for start in range(0, len(stream), length)]
    return [[*block_prefix, *cut, *block_suffix] for cut in cuts if len(cut) == length]


def test_tokenize_documents_without_special_tokens(documents, tokenizer, tokenized):
    assert tokenized.column_names == ["input_ids"]
    expected = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in documents["text"]]
    assert tokenized["input_ids"] == expected


def test_tokenize_documents_in_parallel_gives_the_same_ids(documents, tokenizer, tokenized):
    assert tokenize_documents(documents, tokenizer, num_proc=2)["input_ids"] == tokenized["input_ids"]


def test_tokenize_a_stream(documents, tokenizer, tokenized):
    streamed = tokenize_documents(documents.to_iterable_dataset(), tokenizer)
    assert isinstance(streamed, IterableDataset)
    assert [row["input_ids"] for row in streamed] == tokenized["input_ids"]


def test_bert_style_by_hand():
    blocks = pack_bert_style(HAND_DOCUMENTS, 4, cls_id=CLS, sep_id=SEP, separator_id=SEP)
    # stream 10 11 12 SEP 13 14 SEP 15 16 17 18 SEP, cut in twos
    assert blocks["input_ids"] == [
        [CLS, 10, 11, SEP],
        [CLS, 12, SEP, SEP],
        [CLS, 13, 14, SEP],
        [CLS, SEP, 15, SEP],
        [CLS, 16, 17, SEP],
        [CLS, 18, SEP, SEP],
    ]
    assert blocks["special_tokens_mask"][1] == [1, 0, 1, 1]
    assert blocks["attention_mask"] == [[1, 1, 1, 1]] * 6


def test_llama_style_by_hand():
    blocks = pack_llama_style(HAND_DOCUMENTS, 4, eos_id=EOS, bos_id=BOS)
    # stream BOS 10 11 12 EOS BOS 13 14 EOS BOS 15 16 17 18 EOS: the last three tokens are dropped
    assert blocks["input_ids"] == [[BOS, 10, 11, 12], [EOS, BOS, 13, 14], [EOS, BOS, 15, 16]]
    assert blocks["special_tokens_mask"] == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]]
    without_bos = pack_llama_style(HAND_DOCUMENTS, 4, eos_id=EOS)  # 12 tokens: nothing to drop
    assert without_bos["input_ids"] == [[10, 11, 12, EOS], [13, 14, EOS, 15], [16, 17, 18, EOS]]


@pytest.mark.parametrize("separator_id", [None, SEP])
def test_bert_style_matches_the_reference(tokenized, separator_id):
    blocks = pack_bert_style(tokenized, 64, cls_id=CLS, sep_id=SEP, separator_id=separator_id)
    suffix = () if separator_id is None else (separator_id,)
    expected = reference_blocks(tokenized["input_ids"], 64, (), suffix, (CLS,), (SEP,))
    assert len(expected) > 100 and blocks["input_ids"] == expected
    assert blocks.column_names == ["input_ids", "attention_mask", "special_tokens_mask"]
    assert all(mask[0] == mask[-1] == 1 and sum(mask) >= 2 for mask in blocks["special_tokens_mask"])


@pytest.mark.parametrize("bos_id", [None, BOS])
def test_llama_style_matches_the_reference(tokenized, bos_id):
    blocks = pack_llama_style(tokenized, 50, eos_id=EOS, bos_id=bos_id)
    prefix = () if bos_id is None else (bos_id,)
    expected = reference_blocks(tokenized["input_ids"], 50, prefix, (EOS,))
    assert len(expected) > 100 and blocks["input_ids"] == expected
    assert all(len(block) == 50 for block in blocks["input_ids"])


def test_packing_a_stream_matches_packing_a_dataset(tokenized):
    streamed = pack_bert_style(tokenized.to_iterable_dataset(), 32, cls_id=CLS, sep_id=SEP)
    assert [row["input_ids"] for row in streamed] == pack_bert_style(tokenized, 32, cls_id=CLS, sep_id=SEP)["input_ids"]


def test_block_too_small_for_bert_style():
    with pytest.raises(ValueError, match="block_size=2 leaves no room"):
        pack_bert_style(HAND_DOCUMENTS, 2, cls_id=CLS, sep_id=SEP)


def test_missing_special_token_id():
    with pytest.raises(ValueError, match="eos_id is None"):
        pack_llama_style(HAND_DOCUMENTS, 8, eos_id=None)
