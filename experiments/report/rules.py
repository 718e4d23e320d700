"""The rules every claim's verdict shares: when an arm learned too little for its claim to count, when a difference
between two arms is more than the seeds explain (the noise margin), and how a claim's points make its verdict.

A point compares two arms on one measure in the direction the paper states. It counts, for or against the paper,
only beyond the noise margin:
- where both arms have a value per unit (pre-training seed, or fine-tuning run where one pre-training seed ran),
  the difference of their means must exceed the larger of the two arms' spreads (largest minus smallest value): with
  two seeds each, every seed of one arm lies beyond every seed of the other;
- where only intervals are known (numbers transcribed from a report whose per-seed scores are gone), the two 95%
  intervals must not overlap;
- a measure taken on one pre-training seed (a rank, a similarity) has no spread to judge it by: its direction is
  reported, and the point does not count.
A downstream point compares the arms task by task and goes to the side that wins more tasks beyond the margin.
"""

from dataclasses import dataclass

from .results import Estimate

# How far below the unigram entropy an arm's validation loss must be for its claim to count.
LEARNING_MARGIN = 0.5

FOR, AGAINST, WITHIN_NOISE, DIRECTION_ONLY, PENDING = "for", "against", "within noise", "direction only", "pending"


@dataclass(frozen=True)
class Comparison:
    """Two arms on one measure, the first in the position the paper expects to be higher."""

    difference: float  # expected-higher minus expected-lower
    state: str  # FOR, AGAINST, WITHIN_NOISE or DIRECTION_ONLY
    margin: str  # what the difference was judged against


def compare(expected_higher: Estimate, expected_lower: Estimate) -> Comparison:
    """Judge `expected_higher - expected_lower` against the noise margin (the module's docstring)."""
    difference = expected_higher.mean - expected_lower.mean
    sign = FOR if difference > 0 else AGAINST
    spreads = [expected_higher.spread, expected_lower.spread]
    if None not in spreads and expected_higher.unit == expected_lower.unit:
        spread = max(spreads)
        state = sign if abs(difference) > spread else WITHIN_NOISE
        return Comparison(difference, state, f"spread over {expected_higher.describe()} {spread:.3g}")
    intervals = [expected_higher.interval, expected_lower.interval]
    if None not in intervals:
        (high_low, high_high), (low_low, low_high) = intervals
        apart = high_low > low_high or low_low > high_high
        return Comparison(
            difference, sign if apart else WITHIN_NOISE, "95% intervals " + ("apart" if apart else "overlap")
        )
    return Comparison(difference, DIRECTION_ONLY, "no spread: one pre-training seed")


@dataclass(frozen=True)
class Point:
    """One of a claim's points: its name, its state, and the numbers behind it in words."""

    name: str
    state: str
    detail: str
    direction: int = 0  # where no margin is known: +1 the paper's way, -1 against it

    def text(self) -> str:
        return f"{self.name}: {self.state} ({self.detail})"


def measure_point(name: str, comparison: Comparison, detail: str) -> Point:
    """A point from one comparison; direction-only comparisons say which way they went."""
    if comparison.state == DIRECTION_ONLY:
        way = "the paper's way" if comparison.difference > 0 else "against the paper"
        return Point(
            name, DIRECTION_ONLY, f"{detail}; {way}, {comparison.margin}", 1 if comparison.difference > 0 else -1
        )
    return Point(name, comparison.state, f"{detail}; {comparison.margin}")


def downstream_point(name: str, comparisons: dict[str, Comparison]) -> Point:
    """One point from per-task comparisons: for the side that wins more tasks beyond the noise margin."""
    wins = [kind for kind, comparison in comparisons.items() if comparison.state == FOR]
    losses = [kind for kind, comparison in comparisons.items() if comparison.state == AGAINST]
    if len(wins) > len(losses):
        state = FOR
    elif len(losses) > len(wins):
        state = AGAINST
    elif all(comparison.state == DIRECTION_ONLY for comparison in comparisons.values()):
        state = DIRECTION_ONLY
    else:
        state = WITHIN_NOISE
    within = [kind for kind in comparisons if kind not in wins + losses]
    detail = "; ".join(
        f"{label} {', '.join(kinds)}"
        for label, kinds in (("for on", wins), ("against on", losses), ("within noise on", within))
        if kinds
    )
    return Point(name, state, detail)


def pending_point(name: str, why: str) -> Point:
    return Point(name, PENDING, why)


VERDICTS = {
    "consistent": "every point in the paper's direction beyond the noise margin",
    "partly consistent": "some points in the paper's direction beyond the margin, none against, the rest within noise "
    "or pending",
    "mixed": "points beyond the margin both ways",
    "contrary": "a point against the paper beyond the margin, none for it",
    "not shown": "no point beyond the margin (within noise, or one pre-training seed where no spread is known)",
}


def verdict(points: list[Point]) -> str:
    """The claim's verdict from its points (VERDICTS says what each word means)."""
    judged = [point for point in points if point.state != PENDING]
    if not judged:
        return "pending: " + "; ".join(point.detail for point in points)
    states = [point.state for point in judged]
    if FOR in states and AGAINST in states:
        return "mixed"
    if AGAINST in states:
        return "contrary"
    if FOR in states:
        return "consistent" if len(judged) == len(points) and set(states) == {FOR} else "partly consistent"
    directions = [point.direction for point in judged if point.state == DIRECTION_ONLY]
    if directions:
        return (
            f"not shown: one pre-training seed, no spread to judge by (in direction {directions.count(1)} of "
            f"{len(directions)} the paper's way)"
        )
    return "not shown"


def learned_or_void(losses: dict[str, list[float]], entropy: float) -> str | None:
    """The void verdict when a compared arm's validation loss (any pre-training seed) is not LEARNING_MARGIN nats
    below the unigram entropy: its encoder is not yet what the claim is about. Pending while an arm has no finished
    run, whose loss nobody has checked."""
    unfinished = [arm for arm, values in losses.items() if not values]
    if unfinished:
        return f"pending: {', '.join(unfinished)} not finished"
    stuck = [
        f"{arm}{f' seed {index}' if len(values) > 1 else ''} ({loss:.2f})"
        for arm, values in losses.items()
        for index, loss in enumerate(values)
        if loss > entropy - LEARNING_MARGIN
    ]
    if not stuck:
        return None
    return f"void: {', '.join(stuck)} not {LEARNING_MARGIN} nats below the unigram entropy ({entropy:.2f})"


@dataclass(frozen=True)
class Claim:
    """One row of the summary: the claim's id, what it says in short, our numbers, its points and its verdict."""

    id: str
    statement: str
    numbers: str
    points: list[Point]
    verdict: str
    evidence: str = ""  # what the numbers stand on: seeds, intervals, provenance

    def row(self) -> list[str]:
        if self.verdict.startswith("void"):
            points = "not judged: an arm did not learn"
        else:
            points = "; ".join(point.text() for point in self.points) or "none"
        judged = self.verdict.startswith(("void", "pending")) or not self.evidence
        return [
            self.id,
            self.statement,
            self.numbers,
            points,
            self.verdict if judged else f"{self.verdict} ({self.evidence})",
        ]
