"""The blocks of a run whose data changes by phase (`--block_size_schedule`, `--anneal_corpus`), planned before it trains.

Each phase's blocks are packed at its length (the recipe's own packing, `Recipe.build_dataset`) from its corpus (the
run's, or the annealing phase's mixture), reading on from the document after those an earlier phase read from that
corpus: as many blocks as the phase trains on, shuffled within the phase. So a phase never reads again what an earlier
one consumed (until a corpus runs out and a new pass over it begins), and each document is tokenized when a phase
reads it. Trainer reads the blocks in this order (`train_sampling_strategy` "sequential"): step s trains on rows
[s * R, (s + 1) * R) of the plan, R being the sequences of a step over all ranks, so a resumed run skips exactly the
rows it trained on (Trainer's resume skips batches by index) and every phase's micro-batches have one length.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from datasets import Dataset, concatenate_datasets

# Documents packed first for a phase, before the blocks they gave say how many more the phase needs.
FIRST_DOCUMENTS = 64


@dataclass
class DataPhase:
    """Steps [first, end) of a run: blocks of `length` tokens from corpus number `corpus`."""

    length: int
    corpus: int
    first: int
    end: int
    read: list[range] = field(default_factory=list)  # the documents of its corpus the phase read (the plan fills it)

    def __str__(self) -> str:
        return f"steps {self.first + 1}-{self.end} ({self.length}-token blocks)"


def data_phases(lengths: list[tuple[int, int, int]], anneal_start: int | None) -> list[DataPhase]:
    """The phases of (length, first step, end step) spans, split at `anneal_start` (the first step of the annealing
    corpus, number 1; None: no annealing corpus)."""
    phases = []
    for length, first, end in lengths:
        if anneal_start is None or end <= anneal_start:
            phases.append(DataPhase(length, 0, first, end))
        elif first >= anneal_start:
            phases.append(DataPhase(length, 1, first, end))
        else:
            phases += [DataPhase(length, 0, first, anneal_start), DataPhase(length, 1, anneal_start, end)]
    return phases


def phased_blocks(
    build: Callable[[int, Dataset], Dataset],
    corpora: list[Dataset],
    phases: list[DataPhase],
    rows_per_step: int,
    seed: int,
) -> Dataset:
    """`build(length, documents)` packs documents into blocks of `length` tokens; the plan of `phases` (each one's
    `read` filled in), `rows_per_step` blocks a step."""
    parts, starts = [], [0] * len(corpora)
    for index, phase in enumerate(phases):
        rows = (phase.end - phase.first) * rows_per_step
        pack = partial(build, phase.length)
        blocks, starts[phase.corpus], phase.read = next_blocks(
            pack, corpora[phase.corpus], starts[phase.corpus], rows, phase.length
        )
        parts.append(blocks.shuffle(seed=seed + index))
    return concatenate_datasets(parts)


def next_blocks(build, documents: Dataset, start: int, rows: int, length: int) -> tuple[Dataset, int, list[range]]:
    """`rows` blocks packed from the documents from index `start` on (wrapping round to the first), the index of the
    document after the last one read, and the documents read. The blocks of the last read beyond `rows` go unused."""
    parts, read, count, total = [], [], 0, len(documents)
    wanted = min(total, FIRST_DOCUMENTS)
    while count < rows:
        end = min(start + wanted, total)
        blocks = build(documents.select(range(start, end)))
        parts.append(blocks)
        read.append(range(start, end))
        count, start = count + len(blocks), end % total
        documents_read = sum(map(len, read))
        if count == 0 and documents_read >= total:
            raise ValueError(
                f"The corpus packs into no block of {length} tokens; use a larger corpus or shorter blocks in "
                "--block_size_schedule."
            )
        # Enough documents for the blocks still missing at the rate read so far, a few more rather than a read more.
        wanted = total if count == 0 else min(total, math.ceil((rows - count) * documents_read / count * 1.01) + 1)
    return concatenate_datasets(parts).select(range(rows)), start, read
