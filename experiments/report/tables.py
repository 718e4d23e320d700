"""Markdown for the report: tables, score cells and intervals."""

from hf_encoders.evaluation.report import SCORE_RANGE, Cell

from .verdicts import bounds


def markdown_table(header: list[str], rows: list[list]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(map(str, row)) + " |" for row in rows),
    ]


def score_cells(table: dict, label: str, kinds: list[str]) -> list[str]:
    """ "mean ± std" of each task, or blanks where the model was not evaluated (yet)."""
    return [
        f"{table[label][kind][0]:.3g} ± {spread(table[label][kind][1])}" if label in table else "" for kind in kinds
    ]


def spread(std: float | None) -> str:
    return "n/a" if std is None else f"{std:.2g}"  # evaluate has no spread over one seed


def interval(cell: Cell) -> str:
    """Mean [95% interval], the interval shown within the scores' range 0-100 as evaluate's REPORT.md shows it."""
    low, high = bounds(cell)
    return f"{cell.mean:.1f} [{max(low, SCORE_RANGE[0]):.1f}, {min(high, SCORE_RANGE[1]):.1f}]"
