"""Sentence pairs for next-sentence prediction, by the original BERT recipe (Google's create_pretraining_data.py).

Each document is cut into chunks of whole sentences that fill a target length (the full length, or with
probability `short_seq_prob` a random shorter one, to narrow the gap between pre-training and short fine-tuning
inputs). A chunk is split at a random sentence boundary into A and B; with probability `random_next_prob` (and
always when the chunk is one sentence) B is replaced by sentences from ANOTHER document, and the sentences it
displaced are put back to start the next chunk. Label 1 means B is random, the Transformers convention.

The pairing works on per-sentence token counts; the tokenizer then encodes each (A, B) text pair itself, so
every model's own special tokens and segment ids come out right (BERT, RoBERTa, ModernBERT, ...). One
departure from Google: an over-long pair loses tokens from the end of its longer segment, where Google drops
them from a random end.
"""

import random
from collections.abc import Iterator

from datasets import Dataset
from transformers import PreTrainedTokenizerBase

from ...data.masking_units import word_start_mask
from ...errors import CorpusError

# A sentence span: (document index, first sentence, end sentence), end excluded.
Span = tuple[int, int, int]


def sample_pairs(
    sentence_lengths: list[list[int]],
    max_num_tokens: int,
    rng: random.Random,
    short_seq_prob: float = 0.1,
    random_next_prob: float = 0.5,
) -> Iterator[tuple[Span, Span, int]]:
    """(A span, B span, is_random_next) for every pair BERT's recipe cuts from documents given as token counts
    per sentence. A random B always comes from a different document, so there must be at least two."""
    if len(sentence_lengths) < 2:
        raise CorpusError("Next-sentence prediction needs at least two documents to draw random second segments from.")
    for doc_index, lengths in enumerate(sentence_lengths):
        target = max_num_tokens if rng.random() >= short_seq_prob else rng.randint(2, max_num_tokens)
        chunk_start, chunk_length, i = 0, 0, 0
        while i < len(lengths):
            chunk_length += lengths[i]
            if i == len(lengths) - 1 or chunk_length >= target:
                a_end = rng.randint(chunk_start + 1, i) if i > chunk_start else chunk_start + 1
                a = (doc_index, chunk_start, a_end)
                if i == chunk_start or rng.random() < random_next_prob:
                    yield (
                        a,
                        random_segment(sentence_lengths, doc_index, target - sum(lengths[chunk_start:a_end]), rng),
                        1,
                    )
                    i = a_end - 1  # the chunk's unused sentences start the next chunk
                else:
                    yield a, (doc_index, a_end, i + 1), 0
                chunk_start, chunk_length = i + 1, 0
            i += 1


def random_segment(sentence_lengths: list[list[int]], doc_index: int, target_length: int, rng: random.Random) -> Span:
    """Sentences from a random point of a random OTHER document, at least one, until `target_length` tokens."""
    other = rng.randrange(len(sentence_lengths) - 1)
    other += other >= doc_index  # skip the current document: uniform over the others
    lengths = sentence_lengths[other]
    start = rng.randrange(len(lengths))
    end, length = start + 1, lengths[start]
    while end < len(lengths) and length < target_length:
        length += lengths[end]
        end += 1
    return other, start, end


def build_sentence_pairs(
    documents: list[list[str]],
    tokenizer: PreTrainedTokenizerBase,
    max_length: int = 256,
    short_seq_prob: float = 0.1,
    random_next_prob: float = 0.5,
    seed: int = 0,
    num_proc: int | None = None,
    word_starts: bool = False,
) -> Dataset:
    """Tokenized sentence pairs with `next_sentence_label`, ready for `DataCollatorForTacl`.

    `documents` is a list of documents, each a list of sentences (what `documents_to_sentences` returns).
    `max_length` counts the special tokens. Columns: input_ids, attention_mask, special_tokens_mask,
    token_type_ids (when the tokenizer makes them) and next_sentence_label; with `word_starts=True` also
    word_starts (1 on each word's first token, from the fast tokenizer's word ids) for whole-word and span masking.
    """
    max_num_tokens = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    if max_num_tokens < 2:
        raise ValueError(f"max_length={max_length} leaves no room for two segments next to the special tokens.")
    flat = [sentence for document in documents for sentence in document]
    counts = [len(ids) for ids in tokenizer(flat, add_special_tokens=False, verbose=False)["input_ids"]]
    # Sentences with no tokens (stray punctuation the tokenizer drops) and documents left empty are skipped.
    sentences, lengths, position = [], [], 0
    for document in documents:
        kept = [
            (sentence, count) for sentence, count in zip(document, counts[position : position + len(document)]) if count
        ]
        position += len(document)
        if kept:
            sentences.append([sentence for sentence, _ in kept])
            lengths.append([count for _, count in kept])

    def text(span: Span) -> str:
        doc_index, start, end = span
        return " ".join(sentences[doc_index][start:end])

    rng = random.Random(seed)
    columns = {"text_a": [], "text_b": [], "next_sentence_label": []}
    for a, b, is_random in sample_pairs(lengths, max_num_tokens, rng, short_seq_prob, random_next_prob):
        columns["text_a"].append(text(a))
        columns["text_b"].append(text(b))
        columns["next_sentence_label"].append(is_random)
    return Dataset.from_dict(columns).map(
        _encode_pairs,
        batched=True,
        remove_columns=["text_a", "text_b"],
        fn_kwargs={"tokenizer": tokenizer, "max_length": max_length, "word_starts": word_starts},
        num_proc=num_proc,
    )


def _encode_pairs(
    batch: dict[str, list], tokenizer: PreTrainedTokenizerBase, max_length: int, word_starts: bool
) -> dict:
    encoding = tokenizer(
        batch["text_a"],
        batch["text_b"],
        truncation="longest_first",
        max_length=max_length,
        return_special_tokens_mask=True,
    )
    if word_starts:
        encoding["word_starts"] = [
            word_start_mask(encoding.word_ids(i), encoding.sequence_ids(i)) for i in range(len(encoding["input_ids"]))
        ]
    return encoding
