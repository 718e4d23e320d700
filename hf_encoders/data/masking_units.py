"""What a masked-LM collator masks as one unit: a token (BERT), a whole word, or a SpanBERT span of whole words.

Word boundaries come from the fast tokenizer's word ids (any tokenizer model: WordPiece, BPE, SentencePiece), carried
to the collator as a `word_starts` column: 1 on the first token of every word, which `word_start_mask` computes and
packing (data/packing.py) and TaCL's sentence pairs (methods/tacl/sentence_pairs.py) keep. A unit never contains a special token or
padding and never crosses one, nor a document start in a packed row (`position_ids` restarting at 0): every document
a packed row holds is ended or started by a special token, so no word or span runs from one document into the next.

Every unit meets the ratio in tokens, exactly in expectation. By default (`mask_count="exact"`) each row masks
floor(ratio x maskable tokens + u) tokens, u uniform in [0, 1) (`exact_counts`): BERT's rule
(`create_pretraining_data.py`) and fairseq's (`MaskTokensDataset`), which gives every batch of full rows the same
shapes. `mask_count="per_token"` draws one coin per token (per word), as transformers' stock collator does.
* tokens: that many of the maskable tokens, uniformly (`choose_exact`);
* whole words: words in random order, each taken whole if it still fits in the count and skipped if not, as BERT's
  `create_masked_lm_predictions` does, so a row masks the count exactly unless only words too long to fit are left
  (`exact_whole_words`); with `per_token`, each word is chosen with probability `ratio`;
* spans: spans are added until the row has its count, the last one cut where the count is reached (as SpanBERT's
  code does), with either `mask_count`. A span starts at a word drawn uniformly among the unmasked ones and runs over
  ℓ ~ Geometric(p) words, ℓ <= max_span_length: SpanBERT's Geo(0.2) truncated at 10 and renormalised, whose mean
  is the paper's 3.8 words (clipping, mass above 10 moved onto 10, would give 4.5).

Every random number comes from the generator passed in, so masks stay a function of (seed, epoch, batch).
"""

import math
from typing import NamedTuple

import numpy as np
import torch

MASKING_UNITS = ("token", "whole_word", "span")
MASK_COUNTS = ("exact", "per_token")


def word_start_mask(word_ids: list[int | None], sequence_ids: list[int | None] | None = None) -> list[int]:
    """1 where a token starts a word, from a fast tokenizer's `encoding.word_ids(i)` (and `sequence_ids(i)` for a pair,
    whose second text counts its words from 0 again); special tokens (word id None) are words of their own."""
    keys = word_ids if sequence_ids is None else list(zip(sequence_ids, word_ids))
    return [
        int(i == 0 or word_id is None or key != keys[i - 1]) for i, (word_id, key) in enumerate(zip(word_ids, keys))
    ]


def run_starts(maskable: torch.Tensor, position_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Where a run of maskable tokens begins: after a special token or padding, at a row's or a document's start."""
    previous = torch.nn.functional.pad(maskable[:, :-1], (1, 0), value=False)
    starts = maskable & ~previous
    if position_ids is not None:
        starts |= maskable & (position_ids.expand_as(maskable) == 0)
    return starts


def word_starts_in(
    word_starts: torch.Tensor, maskable: torch.Tensor, position_ids: torch.Tensor | None = None
) -> torch.Tensor:
    """The maskable tokens that start a word: the tokenizer's starts, and every run start (a block may begin
    in the middle of a word cut at the previous block's end; its piece counts as a word)."""
    return maskable & (word_starts.bool() | run_starts(maskable, position_ids))


def unit_index(starts: torch.Tensor) -> torch.Tensor:
    """For every position, the position of the last unit start at or before it (0 before the first)."""
    positions = torch.arange(starts.shape[1]).expand_as(starts)
    return torch.where(starts, positions, 0).cummax(dim=1).values


def whole_words(starts: torch.Tensor, maskable: torch.Tensor, ratio: float, generator) -> torch.Tensor:
    """Each word masked with probability `ratio`, all its tokens together."""
    chosen = starts & (torch.rand(starts.shape, generator=generator) < ratio)
    return chosen.gather(1, unit_index(starts)) & maskable


def exact_counts(candidates: torch.Tensor, ratio: float, generator) -> torch.Tensor:
    """floor(ratio x candidates + u) per row, u uniform in [0, 1): the count's expectation is ratio x candidates
    exactly, and it never exceeds the candidates (ratio <= 1)."""
    draws = torch.rand(candidates.shape, generator=generator, dtype=torch.float64)
    return (candidates.double() * ratio + draws).floor().long()


def choose_exact(candidates: torch.Tensor, ratio: float, generator) -> torch.Tensor:
    """`exact_counts` of each row's `candidates` (bool), chosen uniformly among them."""
    counts = exact_counts(candidates.sum(1), ratio, generator)
    # Candidates draw from [0, 1), the others rank after them all.
    scores = torch.rand(candidates.shape, generator=generator).masked_fill(~candidates, 2.0)
    ranks = scores.argsort(1).argsort(1)
    return ranks < counts[:, None]


def exact_whole_words(starts: torch.Tensor, maskable: torch.Tensor, ratio: float, generator) -> torch.Tensor:
    """Whole words meeting `exact_counts` of each row's maskable tokens, BERT's way: words in random order, each taken
    if it fits in what is left of the count, skipped if not."""
    counts = exact_counts(maskable.sum(1), ratio, generator)
    units = unit_index(starts)
    sizes = torch.zeros(starts.shape, dtype=torch.long).scatter_add(1, units, maskable.long())
    scores = torch.rand(starts.shape, generator=generator).masked_fill(~starts, 2.0)
    order = scores.argsort(1)  # each row's words in random order, then the other positions
    ordered_sizes = sizes.gather(1, order)
    # Every word before the first that overflows is taken, vectorised; only the rest is walked one word at a time.
    fits = ordered_sizes.cumsum(1) <= counts[:, None]
    prefix = fits.long().cumprod(1).bool()
    chosen = torch.zeros(starts.shape, dtype=torch.bool).scatter(1, order, prefix)
    taken = (ordered_sizes * prefix).sum(1)
    word_counts = starts.sum(1)
    for row in (taken < counts).nonzero().squeeze(1).tolist():
        count, target = int(taken[row]), int(counts[row])
        for slot in range(int(prefix[row].sum()) + 1, int(word_counts[row])):
            size = int(ordered_sizes[row, slot])
            if count + size <= target:
                chosen[row, order[row, slot]] = True
                count += size
                if count == target:
                    break
    return chosen.gather(1, units) & maskable


def span_length_distribution(p: float, max_span_length: int) -> torch.Tensor:
    """P(ℓ = 1 .. max_span_length) for ℓ ~ Geometric(p) truncated at max_span_length and renormalised."""
    lengths = torch.arange(max_span_length, dtype=torch.float64)
    weights = p * (1 - p) ** lengths
    return weights / weights.sum()


def spans(
    starts: torch.Tensor,
    maskable: torch.Tensor,
    ratio: float,
    generator,
    p: float = 0.2,
    max_span_length: int = 10,
    position_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SpanBERT's spans: (masked, span_starts), span_starts marking each span's first token (the unit its
    replacement is chosen for). A span stops at the end of its run of maskable tokens (see `run_starts`)."""
    batch_size, length = starts.shape
    targets = exact_counts(maskable.sum(1), ratio, generator).tolist()
    cumulative = span_length_distribution(p, max_span_length).cumsum(0)
    # Enough draws for most rows (each span masks at least one token; some starts are rejected); more if not.
    draws = torch.rand(batch_size, max(targets, default=0) * 2 + 8, 2, generator=generator, dtype=torch.float64)

    masked = np.zeros((batch_size, length), dtype=bool)
    span_starts = np.zeros((batch_size, length), dtype=bool)
    runs = run_starts(maskable, position_ids).cumsum(1)
    for row in range(batch_size):
        word_positions = starts[row].nonzero().squeeze(1)
        if targets[row] == 0 or len(word_positions) == 0:
            continue
        words = _Words(
            word_positions.tolist(), _word_ends(word_positions, maskable[row]), runs[row, word_positions].tolist()
        )
        drawn = _spans_drawn(draws[row], generator, cumulative)
        _mask_row(words, targets[row], drawn, masked[row], span_starts[row])
    return torch.from_numpy(masked), torch.from_numpy(span_starts)


class _Words(NamedTuple):
    """A row's words: first position, one past the last, and the run of maskable tokens each lies in."""

    positions: list[int]
    ends: list[int]
    runs: list[int]


def _spans_drawn(first_draws: torch.Tensor, generator, cumulative: torch.Tensor):
    """(span length, start draw) pairs: the row's share of the batch's draws, then fresh ones while needed."""
    draws = first_draws
    while True:
        lengths = torch.searchsorted(cumulative, draws[:, 0].contiguous()).clamp(max=len(cumulative) - 1) + 1
        yield from zip(lengths.tolist(), draws[:, 1].tolist())
        draws = torch.rand(len(first_draws), 2, generator=generator, dtype=torch.float64)


def _word_ends(word_positions: torch.Tensor, maskable_row: torch.Tensor) -> list[int]:
    """One past each word's last token: the next word's start, or the end of its run of maskable tokens."""
    length = torch.tensor([len(maskable_row)])
    next_starts = torch.cat([word_positions[1:], length])
    run_ends = torch.cat([(~maskable_row).nonzero().squeeze(1), length])
    first_not_maskable_after = run_ends[torch.searchsorted(run_ends, word_positions)]
    return torch.minimum(next_starts, first_not_maskable_after).tolist()


def _mask_row(words: _Words, target: int, drawn, masked: np.ndarray, span_starts: np.ndarray) -> None:
    word_count = len(words.positions)
    word_masked = [False] * word_count
    unmasked_words, count = word_count, 0
    while count < target and unmasked_words:
        span_length, start_draw = next(drawn)
        first = math.floor(start_draw * word_count)
        if word_masked[first]:
            continue  # rejected: the start is uniform over the words still unmasked
        span_starts[words.positions[first]] = True
        for word in range(first, min(first + span_length, word_count)):
            if words.runs[word] != words.runs[first]:
                break  # a span never crosses a special token, padding or a document start
            if word_masked[word]:
                continue
            start = words.positions[word]
            end = min(words.ends[word], start + target - count)
            masked[start:end] = True
            count += end - start
            word_masked[word] = True
            unmasked_words -= 1
            if count >= target:
                break
