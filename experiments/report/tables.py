"""Markdown for the report: tables, estimates with their intervals, per-seed values."""

from .results import Estimate, Score

SCORE_RANGE = (0.0, 100.0)


def markdown_table(header: list[str], rows: list[list]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(map(str, row)) + " |" for row in rows),
    ]


def with_interval(estimate: Estimate, digits: int = 1, clip: tuple[float, float] | None = None) -> str:
    """'mean [low, high]', or the mean alone where there is no interval; scores are shown clipped to 0-100."""
    if estimate.interval is None:
        return f"{estimate.mean:.{digits}f}"
    low, high = estimate.interval
    if clip:
        low, high = max(low, clip[0]), min(high, clip[1])
    return f"{estimate.mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def score_cell(scores: dict[str, Score], kind: str) -> str:
    """A task's test score, its interval clipped to the scores' range; blank where the arm was not fine-tuned."""
    return with_interval(scores[kind].estimate, clip=SCORE_RANGE) if kind in scores else ""


def per_seed(values: list, digits: int = 3) -> str:
    """Each pre-training seed's value, comma-separated."""
    return ", ".join(f"{value:.{digits}f}" if isinstance(value, float) else str(value) for value in values)


def layers(values: list, digits: int | None = None) -> str:
    """A per-layer list as '[a, b, ...]' (floats to `digits` decimals); 'top: a' where only the top layer was kept."""
    if len(values) == 1:
        return f"top: {values[0] if digits is None else f'{values[0]:.{digits}f}'}"
    if digits is None:
        return "[" + ", ".join(str(value) for value in values) + "]"
    return "[" + ", ".join(f"{value:.{digits}f}" for value in values) + "]"


def mean_of(estimate: Estimate, digits: int = 3) -> str:
    return f"{estimate.mean:.{digits}f}"


def provenance_lines(found) -> list[str]:
    """Where a results file's numbers come from: a run (its commit, machine and command) or a transcription (the
    commit and table they were copied from), and any arm whose numbers came otherwise."""
    lines = [provenance_text(found.provenance)]
    for name, arm in found.arms.items():
        if "provenance" in arm.data:
            text = provenance_text(arm.data["provenance"])
            lines.append(f"The {name} row was {text[0].lower()}{text[1:]}")
    return [" ".join(lines), ""]


def provenance_text(provenance: dict) -> str:
    if provenance.get("source") == "transcribed":
        text = f"Transcribed at commit {provenance['commit']} from {provenance['from']}: the runs are gone."
    else:
        text = f"Run at commit {provenance['commit']} on {provenance['device']}: {provenance['command']}."
    return f"{text} {provenance['note']}" if provenance.get("note") else text
