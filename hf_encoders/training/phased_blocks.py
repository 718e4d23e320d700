"""The blocks of a `--block_size_schedule` run, planned before it trains.

Each phase's blocks are packed at its length (the recipe's own packing, `Recipe.build_dataset`) from the documents that
follow those the previous phase packed, as many blocks as the phase trains on, and shuffled within the phase. So a
phase never reads again what an earlier one consumed (until the corpus runs out and a new pass over it begins), and
each document is tokenized when a phase reads it. Trainer reads the blocks in this order (`train_sampling_strategy`
"sequential"): step s trains on rows [s * R, (s + 1) * R) of the plan, R being the sequences of a step over all ranks,
so a resumed run skips exactly the rows it trained on (Trainer's resume skips batches by index) and every phase's
micro-batches have one length.
"""

import math
from collections.abc import Callable
from functools import partial

from datasets import Dataset, concatenate_datasets

from .schedules import StepSchedule

# Documents packed first for a phase, before the blocks they gave say how many more the phase needs.
FIRST_DOCUMENTS = 64


def phased_blocks(
    build: Callable[[int, Dataset], Dataset],
    documents: Dataset,
    schedule: StepSchedule,
    max_steps: int,
    rows_per_step: int,
    seed: int,
) -> Dataset:
    """`build(length, documents)` packs documents into blocks of `length` tokens; the plan of every phase of
    `schedule` (values `BlockPhase`) over `max_steps` steps of `rows_per_step` blocks."""
    parts, start = [], 0
    for index, (phase, first, end) in enumerate(schedule.boundaries(max_steps)):
        pack = partial(build, phase.length)
        blocks, start = next_blocks(pack, documents, start, (end - first) * rows_per_step, phase.length)
        parts.append(blocks.shuffle(seed=seed + index))
    return concatenate_datasets(parts)


def next_blocks(build, documents: Dataset, start: int, rows: int, length: int) -> tuple[Dataset, int]:
    """`rows` blocks packed from the documents from index `start` on (wrapping round to the first), and the index of
    the document after the last one read. The blocks of that last read beyond `rows` are left unused."""
    parts, count, read, total = [], 0, 0, len(documents)
    wanted = min(total, FIRST_DOCUMENTS)
    while count < rows:
        end = min(start + wanted, total)
        blocks = build(documents.select(range(start, end)))
        parts.append(blocks)
        count, read, start = count + len(blocks), read + end - start, end % total
        if count == 0 and read >= total:
            raise ValueError(
                f"The corpus packs into no block of {length} tokens; use a larger corpus or shorter blocks in "
                "--block_size_schedule."
            )
        # Enough documents for the blocks still missing, at the rate read so far (a few more, rather than a read
        # more), never more than one pass.
        per_document = count / read
        wanted = total if count == 0 else min(total, math.ceil((rows - count) / per_document * 1.01) + 1)
    return concatenate_datasets(parts).select(range(rows)), start
