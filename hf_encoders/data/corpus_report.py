"""What a run read from its corpus, for the logs and the model card: each source with its weight and realised share,
and the bad rows skipped. A token cache keeps its report, so a run from the cache states what the cache was made of."""

from dataclasses import dataclass, field

from datasets import Dataset, IterableDataset

from .bad_rows import SkippedRows
from .mixtures import Source, SourceShares, load_corpus, parse_sources


@dataclass
class CorpusReport:
    shares: SourceShares
    skipped: SkippedRows = field(default_factory=SkippedRows)
    # A run whose data changes by phase (training/phased_blocks.py): each phase's name and what its documents were.
    phases: list[tuple[str, SourceShares]] = field(default_factory=list)
    # Documents the run read (after --max_documents) out of those the corpus holds, and of them those held out for
    # validation; None where unknown (a stream is not counted ahead).
    documents: int | None = None
    available: int | None = None
    held_out: int | None = None

    @classmethod
    def for_corpus(cls, spec: str | None) -> "CorpusReport":
        """An empty report for `--corpus spec`, which loading the corpus fills in."""
        return cls(SourceShares(parse_sources(spec)))

    @property
    def sources(self) -> list[Source]:
        return self.shares.sources

    def lines(self) -> list[str]:
        """Lines of the card's training summary: the mixture (if several sources) and the skipped rows (if any)."""
        lines = [f"- source {line}" for line in self.shares.lines()] if len(self.sources) > 1 else []
        if self.documents is not None:
            read = f"{self.documents:,}"
            if self.available is not None and self.available > self.documents:
                read += f" of the corpus's {self.available:,} (--max_documents)"
            held_out = f", {self.held_out:,} of them held out for validation" if self.held_out else ""
            lines.append(f"- documents: {read}{held_out}")
        if len(self.skipped):
            lines.append(
                f"- bad rows skipped (--skip_bad_rows): {len(self.skipped):,}, the first: {self.skipped.first_reason}"
            )
        return lines + [
            f"- {phase}: {sum(shares.rows.values()):,} documents read; {'; '.join(shares.lines())}"
            for phase, shares in self.phases
        ]

    def to_dict(self) -> dict:
        return {
            "sources": [[source.name, source.weight] for source in self.sources],
            "rows": [self.shares.rows[index] for index in range(len(self.sources))],
            "sizes": [self.shares.sizes[index] for index in range(len(self.sources))],
            "unit": self.shares.unit,
            "skipped_rows": len(self.skipped),
            "first_skipped_row": self.skipped.first_reason,
            "documents": self.documents,
            "available": self.available,
            "held_out": self.held_out,
        }

    @classmethod
    def from_dict(cls, recorded: dict) -> "CorpusReport":
        shares = SourceShares([Source(name, weight) for name, weight in recorded["sources"]])
        shares.rows.update(dict(enumerate(recorded["rows"])))
        shares.sizes.update(dict(enumerate(recorded["sizes"])))
        shares.unit = recorded["unit"]
        skipped = SkippedRows()
        skipped.recorded, skipped.first_reason = recorded["skipped_rows"], recorded["first_skipped_row"]
        # A cache written before these were counted has none of them.
        counts = {name: recorded.get(name) for name in ("documents", "available", "held_out")}
        return cls(shares, skipped, **counts)


def run_documents(
    args, seed: int, corpus: str | None = None, keep_source: bool = False
) -> tuple[Dataset | IterableDataset, CorpusReport]:
    """The documents of `--corpus` (or of `corpus`, `--anneal_corpus`; mixed with `seed` if it names several sources;
    bad rows checked) and the report that counts what each source contributed and the rows skipped, as a run reads
    them; `args` are a run's `PretrainArguments`. `keep_source`: each document keeps its source (`load_corpus`)."""
    report = CorpusReport.for_corpus(corpus or args.corpus)
    documents = load_corpus(
        report.shares,
        seed,
        keep_source=keep_source,
        dataset_config=args.dataset_config,
        text_column=args.text_column,
        streaming=args.streaming,
        skip_bad_rows=args.skip_bad_rows,
        skipped=report.skipped,
    )
    counted = isinstance(documents, Dataset)
    report.available = len(documents) if counted else None
    if args.max_documents is not None:
        documents = documents.take(args.max_documents)
    report.documents = len(documents) if counted else None
    return documents, report
