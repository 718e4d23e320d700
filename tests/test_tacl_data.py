"""BERT's sentence-pair recipe for NSP and DataCollatorForTacl."""

import random

import pytest
import torch

from hf_encoders import DataCollatorForTacl
from hf_encoders.data import CorpusError, documents_to_sentences, embedded_documents
from hf_encoders.methods.tacl.sentence_pairs import build_sentence_pairs, sample_pairs


def synthetic_lengths(seed, documents=60, max_sentences=30, max_length=12):
    rng = random.Random(seed)
    return [[rng.randint(1, max_length) for _ in range(rng.randint(1, max_sentences))] for _ in range(documents)]


@pytest.mark.parametrize("seed", range(3))
def test_pairs_follow_the_bert_recipe(seed):
    lengths = synthetic_lengths(seed)
    pairs = list(sample_pairs(lengths, max_num_tokens=40, rng=random.Random(seed)))
    covered = {doc: 0 for doc in range(len(lengths))}  # next sentence each document must continue from
    for (doc, a_start, a_end), (b_doc, b_start, b_end), is_random in pairs:
        assert a_start == covered[doc] and a_start < a_end, "chunks walk through the document in order"
        assert b_start < b_end <= len(lengths[b_doc])
        if is_random:
            assert b_doc != doc, "a random B never comes from A's own document"
            covered[doc] = a_end  # the sentences B displaced start the next chunk
        else:
            assert (b_doc, b_start) == (doc, a_end), "an actual next B continues A"
            covered[doc] = b_end
    assert all(covered[doc] == len(lengths[doc]) for doc in covered), "every sentence is used"
    # Half the B segments are random, plus a few more: a chunk of one sentence can only take a random B.
    assert 0.45 < sum(is_random for *_, is_random in pairs) / len(pairs) < 0.7


def chunk_lengths(pairs, lengths):
    """Tokens of each chunk (A plus its own B, or A alone when B was random)."""
    sizes = []
    for (doc, a_start, a_end), (_, _b_start, b_end), is_random in pairs:
        end = a_end if is_random else b_end
        sizes.append(sum(lengths[doc][a_start:end]))
    return sizes


def test_short_sequences_come_from_short_seq_prob():
    lengths = synthetic_lengths(0, documents=80, max_sentences=60, max_length=4)
    full = chunk_lengths(list(sample_pairs(lengths, 64, random.Random(0), short_seq_prob=0.0)), lengths)
    short = chunk_lengths(list(sample_pairs(lengths, 64, random.Random(0), short_seq_prob=1.0)), lengths)
    assert sum(full) / len(full) > 1.5 * sum(short) / len(short)


def test_pairs_need_two_documents():
    with pytest.raises(CorpusError, match="two documents"):
        list(sample_pairs([[5, 6, 7]], 32, random.Random(0)))


@pytest.fixture(scope="module")
def pairs(wordpiece_tokenizer):
    return build_sentence_pairs(documents_to_sentences(embedded_documents()[:20]), wordpiece_tokenizer, max_length=48)


def test_built_pairs_are_bert_inputs(wordpiece_tokenizer, pairs):
    assert set(pairs.column_names) >= {"input_ids", "token_type_ids", "attention_mask", "next_sentence_label"}
    for row in pairs.select(range(50)):
        ids, types = row["input_ids"], row["token_type_ids"]
        assert (
            len(ids) <= 48
            and ids[0] == wordpiece_tokenizer.cls_token_id
            and ids[-1] == wordpiece_tokenizer.sep_token_id
        )
        first_sep = ids.index(wordpiece_tokenizer.sep_token_id)
        assert 0 < first_sep < len(ids) - 2, "both segments are non-empty"
        assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
    assert set(pairs["next_sentence_label"]) == {0, 1}
    again = build_sentence_pairs(documents_to_sentences(embedded_documents()[:20]), wordpiece_tokenizer, max_length=48)
    assert again["input_ids"] == pairs["input_ids"], "the same seed builds the same pairs"


def test_collator_masks_80_10_10_and_passes_pairs_through(wordpiece_tokenizer, pairs):
    examples = pairs.to_list()
    batch = DataCollatorForTacl(wordpiece_tokenizer, seed=0)(examples)
    assert torch.equal(batch["next_sentence_label"], torch.tensor(pairs["next_sentence_label"]))
    width = batch["input_ids"].shape[1]
    expected_types = [row["token_type_ids"] + [0] * (width - len(row["token_type_ids"])) for row in examples]
    assert torch.equal(batch["token_type_ids"], torch.tensor(expected_types))

    special = torch.tensor(
        [row["special_tokens_mask"] + [1] * (width - len(row["special_tokens_mask"])) for row in examples]
    )
    clean = torch.tensor(
        [row["input_ids"] + [wordpiece_tokenizer.pad_token_id] * (width - len(row["input_ids"])) for row in examples]
    )
    anchors = batch["labels"] != -100
    assert not (anchors & special.bool()).any(), "special tokens and padding are never selected"
    assert torch.equal(batch["labels"][anchors], clean[anchors])
    assert 0.13 < anchors.sum() / (special == 0).sum() < 0.17
    replaced = batch["input_ids"][anchors]
    as_mask = (replaced == wordpiece_tokenizer.mask_token_id).float().mean()
    unchanged = (replaced == clean[anchors]).float().mean()
    assert 0.77 < as_mask < 0.83 and 0.08 < unchanged < 0.14  # unchanged: the 10% kept plus random hits on itself
    assert torch.equal(batch["input_ids"][~anchors], clean[~anchors])


def test_collator_without_nsp_labels_and_its_errors(wordpiece_tokenizer, pairs):
    examples = [{"input_ids": row["input_ids"]} for row in pairs.select(range(4))]
    assert "next_sentence_label" not in DataCollatorForTacl(wordpiece_tokenizer)(examples)
    with pytest.raises(ValueError, match="mlm=False"):
        DataCollatorForTacl(wordpiece_tokenizer, mlm=False)
