"""Weighted mixtures of corpora: `--corpus web.jsonl:0.7,books/:0.3` (or the flag repeated, one source each).

Sources are mixed with `datasets.interleave_datasets`: each next row comes from a source drawn with the normalised
weights, with a seeded generator, so every process and every run draws the same sequence, streamed or not. The
stopping strategy is "all_exhausted": the mixture ends once every source has been read through, a source that runs
out first starting again. So no source is cut short, and the weights hold for the whole mixture, by upsampling the
sources smaller than their share (the usual meaning of mixture weights); "first_exhausted" would instead end the
mixture, and drop the rest of every other source, as soon as the smallest one runs out.

What each source contributed (a single source's rows and size too) is counted from a "source" column added before
interleaving: exactly for a `Dataset`, as rows are read for a stream (`SourceShares`).
"""

import math
from collections import Counter
from dataclasses import dataclass

import pyarrow.compute as pc
from datasets import Dataset, IterableDataset, interleave_datasets

from ..errors import CorpusError
from .corpus import EMBEDDED, load_documents

STOPPING_STRATEGY = "all_exhausted"


@dataclass(frozen=True)
class Source:
    name: str
    weight: float = 1.0


def parse_sources(spec: str | None) -> list[Source]:
    """The sources of `--corpus`: comma-separated `source[:weight]` items (a bare source weighs 1; weights are
    relative). `None` is the embedded corpus."""
    if spec is None:
        return [Source(EMBEDDED)]
    parsed = [_parse_item(item.strip()) for item in spec.split(",")]
    sources = [source for source, _ in parsed]
    weighted = {has_weight for _, has_weight in parsed}
    if len(weighted) > 1:
        raise CorpusError(
            f"--corpus {spec}: some sources have a weight and some not; give each one a weight (e.g. a.jsonl:0.7,"
            "b.jsonl:0.3) or none (equal weights)."
        )
    names = [source.name for source in sources]
    if len(set(names)) < len(names):
        raise CorpusError(f"--corpus {spec}: a source is named twice; name each once, with the sum of its weights.")
    return sources


def _parse_item(item: str) -> tuple[Source, bool]:
    """(source, whether the item gave a weight). A colon followed by a path (C:\\corpus) belongs to the source."""
    name, colon, weight = item.rpartition(":")
    if not colon or "/" in weight or "\\" in weight:
        name, weight = item, None
    if not name:
        raise CorpusError(f"--corpus item {item!r} names no source; write SOURCE or SOURCE:WEIGHT, e.g. web.jsonl:0.7.")
    if weight is None:
        return Source(name), False
    try:
        value = float(weight)
    except ValueError:
        raise CorpusError(
            f"--corpus {item}: {weight!r} is not a number; write SOURCE:WEIGHT with a positive weight, e.g. "
            "web.jsonl:0.7."
        ) from None
    if not (math.isfinite(value) and value > 0):
        raise CorpusError(
            f"--corpus {item}: the weight must be a positive number, not {weight}; leave a source out rather than "
            "weigh it 0."
        )
    return Source(name, value), True


class SourceShares:
    """Rows and their size (characters of "text", or tokens of "input_ids") read from each source of a mixture."""

    def __init__(self, sources: list[Source]):
        self.sources = sources
        self.rows: Counter = Counter()
        self.sizes: Counter = Counter()
        self.unit = "characters"

    def __deepcopy__(self, memo):
        # datasets copies a stream's pipeline when iterating it; every copy in this process adds to one tally.
        return self

    def forget(self) -> None:
        """Count afresh: a stream read again (after a tokenizer was trained on it) would be counted twice."""
        self.rows.clear()
        self.sizes.clear()

    def count_batch(self, batch: dict[str, list]) -> dict[str, list]:
        self.unit = "tokens" if "input_ids" in batch else "characters"
        sizes = batch["input_ids"] if "input_ids" in batch else batch["text"]
        for source, size in zip(batch["source"], sizes):
            self.rows[source] += 1
            self.sizes[source] += len(size)
        return batch

    def count_dataset(self, dataset: Dataset) -> None:
        column = "input_ids" if "input_ids" in dataset.column_names else "text"
        self.unit = "tokens" if column == "input_ids" else "characters"
        measure = pc.list_value_length if column == "input_ids" else pc.utf8_length
        for table in dataset.select_columns(["source", column]).with_format("arrow").iter(batch_size=10_000):
            for row in table.group_by("source").aggregate([(column, "count")]).to_pylist():
                self.rows[row["source"]] += row[f"{column}_count"]
            sized = table.set_column(1, column, measure(table[column]))
            for row in sized.group_by("source").aggregate([(column, "sum")]).to_pylist():
                self.sizes[row["source"]] += row[f"{column}_sum"]

    def lines(self) -> list[str]:
        """Each source with its weight and realised share, e.g. 'web.jsonl: weight 0.7 (70%), read 69.8% ...'."""
        total_weight = sum(source.weight for source in self.sources)
        total_rows, total_size = sum(self.rows.values()) or 1, sum(self.sizes.values()) or 1
        return [
            f"{source.name}: weight {source.weight:g} ({source.weight / total_weight:.1%}), realised "
            f"{self.rows[index] / total_rows:.1%} of rows, {self.sizes[index] / total_size:.1%} of {self.unit}"
            for index, source in enumerate(self.sources)
        ]


def mix(
    parts: list[Dataset | IterableDataset], shares: SourceShares, seed: int, keep_source: bool = False
) -> Dataset | IterableDataset:
    """`parts` (one per source of `shares`, same columns) interleaved with the sources' weights, drawn with `seed`;
    what each source contributed is counted into `shares` (and the "source" column kept with `keep_source`)."""
    tagged = [_with_source(part, index) for index, part in enumerate(parts)]
    total = sum(source.weight for source in shares.sources)
    mixed = interleave_datasets(
        tagged,
        probabilities=[source.weight / total for source in shares.sources],
        seed=seed,
        stopping_strategy=STOPPING_STRATEGY,
    )
    return _counted(mixed, shares, keep_source)


def _counted(
    documents: Dataset | IterableDataset, shares: SourceShares, keep_source: bool = False
) -> Dataset | IterableDataset:
    """`documents` (with their "source" column) counted into `shares`, that column removed unless `keep_source`."""
    if isinstance(documents, Dataset):
        shares.count_dataset(documents)
    else:
        documents = documents.map(shares.count_batch, batched=True)
    return documents if keep_source else documents.remove_columns("source")


def _with_source(part: Dataset | IterableDataset, index: int) -> Dataset | IterableDataset:
    if isinstance(part, Dataset):
        return part.add_column("source", [index] * len(part))
    return part.map(lambda batch: {"source": [index] * len(next(iter(batch.values())))}, batched=True)


def load_corpus(shares: SourceShares, seed: int, keep_source: bool = False, **options) -> Dataset | IterableDataset:
    """The documents of `shares.sources` (`load_documents(source, **options)` each), mixed if there are several;
    what each source contributed is counted into `shares` (a single source too, so a cache records its size). With
    `keep_source`, each document keeps its source's index in a "source" column (what a phase read is counted from)."""
    parts = [load_documents(source.name, **options) for source in shares.sources]
    if len(parts) == 1:
        return _counted(_with_source(parts[0], 0), shares, keep_source)
    return mix(parts, shares, seed, keep_source)
