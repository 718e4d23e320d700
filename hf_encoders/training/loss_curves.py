"""Loss curves from Trainer's `log_history`, as a PNG next to the numbers."""

import math
from dataclasses import fields
from pathlib import Path

from matplotlib.figure import Figure
from transformers import TrainingArguments

FEW_POINTS = 5  # a training term logged this few times gets markers
# The points a run of known length logs when --logging_steps is not given: enough for a curve.
CURVE_POINTS = 100
TRAINER_LOGGING_STEPS = next(option.default for option in fields(TrainingArguments) if option.name == "logging_steps")


def default_logging_steps(max_steps: int) -> int:
    """The logging interval of a run of `max_steps` steps whose user gave none: Trainer's (every 500 steps) would
    give a run of a few hundred steps one or two points and no curve, so a shorter run logs about CURVE_POINTS times
    (every step if it has fewer); a longer one keeps Trainer's interval."""
    return max(1, min(TRAINER_LOGGING_STEPS, math.ceil(max_steps / CURVE_POINTS)))


def loss_series(log_history: list[dict], evaluation: bool = False) -> dict[str, tuple[list[int], list[float]]]:
    """Every logged training loss term ("loss", "mlm_loss", "clm_loss", "tacl_loss", ...) by step; with
    `evaluation`, every validation one ("eval_loss", "eval_mlm_loss", ...)."""
    series: dict[str, tuple[list[int], list[float]]] = {}
    for entry in log_history:
        for key, value in entry.items():
            logged = key.startswith("eval_") if evaluation else not key.startswith(("eval_", "train_"))
            if key.endswith("loss") and logged and isinstance(value, (int, float)):
                steps, values = series.setdefault(key, ([], []))
                steps.append(entry["step"])
                values.append(float(value))
    return series


def wants_log_axis(values: list[float]) -> bool:
    """A log axis only where the values span more than a decade (TaCL's contrastive loss ends near 0.1, its NSP loss
    near 0.7); over a narrow range it would label ticks 8.6x10^0 and flatten the curves."""
    return bool(values) and min(values) > 0 and max(values) / min(values) > 10


def plot_loss_curves(curves: dict[str, list[dict]], path: Path, title: str = "Pre-training loss") -> Path:
    """A panel per run (one axis for one run), a line per loss term. `curves` maps a run's label to its Trainer
    log_history. Runs get panels of their own: on one axis, several runs' losses near the same value hide each other."""
    # A bare Figure, not pyplot's: no backend to choose, no global figure list to close it from.
    figure = Figure(figsize=(9, 1 + 3.5 * len(curves)), layout="constrained")
    axes = figure.subplots(len(curves), 1, squeeze=False)
    for axis, (label, log_history) in zip(axes[:, 0], curves.items()):
        plot_run(axis, log_history)
        axis.set_title(title if len(curves) == 1 else f"{title}: {label}")
    path = Path(path)
    figure.savefig(path.with_suffix(".tmp.png"))
    return path.with_suffix(".tmp.png").replace(path)


def plot_run(axis, log_history: list[dict]) -> None:
    """One run's training and validation loss terms on `axis`, labelled, with the legend beside the data."""
    drawn: list[float] = []
    for evaluation in (False, True):
        series = loss_series(log_history, evaluation)
        for term, (steps, values) in series.items():
            # A total goes wide and pale beneath its terms: where one term is the whole loss (biphasic's clm_loss,
            # then mlm_loss) it equals the total step for step and would hide it.
            total = term in ("loss", "eval_loss") and len(series) > 1
            style = dict(linewidth=6, alpha=0.35, zorder=1) if total else dict(linewidth=1.3, zorder=2)
            if evaluation:
                style.update(linestyle="--", marker="o", markersize=3)
            elif len(steps) <= FEW_POINTS:  # a line through one or two points is too short to see
                style.update(marker="o", markersize=4)
            axis.plot(steps, values, label=f"{term} (validation)" if evaluation else term, **style)
            drawn += values
    wide = wants_log_axis(drawn)
    axis.set(xlabel="step", ylabel="loss (log scale)" if wide else "loss", yscale="log" if wide else "linear")
    axis.grid(alpha=0.3)
    if axis.lines:  # a run shorter than --logging_steps logged no loss
        axis.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
