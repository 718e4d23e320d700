"""The rules every claim's verdict shares: the points it scores, when its arms learned too little for it to count, and
when one arm's fine-tuning scores beat another's beyond what the seeds explain."""

from hf_encoders.evaluation.report import Cell

VERDICTS = {2: "reproduced", 1: "partly", 0: "not reproduced"}

# How far below the unigram entropy a compared arm's validation loss must be for its verdict to count.
LEARNING_MARGIN = 0.5


def learned_or_void(losses: dict[str, list[float]], entropy: float) -> str | None:
    """The void verdict when a compared arm's validation loss (any pre-training seed) is not LEARNING_MARGIN nats
    below the unigram entropy: its encoder is not yet what the claim is about. Pending while an arm has no finished run,
    whose loss nobody has checked."""
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


def bounds(cell: Cell) -> tuple[float, float]:
    """The 95% interval of the cell's mean; the mean itself for one seed, which has none."""
    return cell.confidence_interval or (cell.mean, cell.mean)


def task_wins(cells: dict[tuple[str, str], Cell], winner: str, loser: str, kinds: list[str]):
    """(the kinds where the winner's test mean is higher, those of them where the intervals are apart too)."""
    wins = [kind for kind in kinds if cells[winner, kind].mean > cells[loser, kind].mean]
    return wins, intervals_apart(cells, winner, loser, wins)


def intervals_apart(cells: dict[tuple[str, str], Cell], winner: str, loser: str, kinds: list[str]) -> list[str]:
    """The kinds where the winner's 95% interval lies wholly above the loser's: a win the seeds cannot explain."""
    return [kind for kind in kinds if bounds(cells[winner, kind])[0] > bounds(cells[loser, kind])[1]]
