"""The report's figures: plotted from the runs, or copied from `hf-encoders analyze`'s output, into
experiments/figures/ and linked from REPORT.md."""

import json
import shutil
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from hf_encoders.evaluation.report import Cell

from ..tasks import KINDS
from .runs import held_steps
from .verdicts import LEARNING_MARGIN


def copy_figure(source: Path, figures: Path, name: str) -> str:
    if source.exists():
        shutil.copyfile(source, figures / name)
    return figure_link(name)


def figure_link(name: str) -> str:
    return f"![{name}](figures/{name})"


def plot_delta_sweep(models: dict, table: dict, figures: Path, sweep: str = "m") -> Path:
    path = figures / f"{sweep}_delta_sweep.png"
    values = [float(label.removeprefix("delta_")) for label in models]
    # A second panel for the fine-tuning scores, when the arms were fine-tuned (not on the unigram plateau).
    figure, axes = plt.subplots(1, 2 if table else 1, figsize=(9 if table else 5, 3.5), squeeze=False)
    left = axes[0, 0]
    left.plot(values, [m["effective_rank"][-1] for m in models.values()], "o-", label="clean input")
    left.plot(values, [m["effective_rank_with_mask"][-1] for m in models.values()], "s--", label="with [MASK]")
    left.set(xlabel="δ ([MASK] share kept in the encoder)", ylabel="top-layer rank_0.9 of real tokens")
    left.legend()
    if table:
        right = axes[0, 1]
        for kind in KINDS:
            right.plot(values, [table[f"{sweep}_{label}"][kind][0] for label in models], "o-", label=kind)
        right.set(xlabel="δ", ylabel="downstream score (test)")
        right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def plot_validation_curves(root: Path, runs: dict[str, str], entropy: float, path: Path) -> Path:
    """Each run's validation loss over its steps (legend -> run), the unigram entropy and the learning margin drawn
    across, the steps that held the first run's encoder shaded."""
    figure, axis = plt.subplots(figsize=(6, 3.5))
    for legend, run in runs.items():
        history = json.loads((root / "pretrain" / run / "log_history.json").read_text())
        points = [(entry["step"], entry["eval_loss"]) for entry in history if "eval_loss" in entry]
        axis.plot(*zip(*points), "o-", label=legend)
    held = held_steps(root, next(iter(runs.values())))
    if held:
        axis.axvspan(0, held, color="0.9", label="encoder held")
    axis.axhline(entropy, color="k", linestyle=":", label="unigram entropy")
    axis.axhline(entropy - LEARNING_MARGIN, color="k", linestyle="--", linewidth=0.8, label="learned (−0.5 nats)")
    axis.set(xlabel="step", ylabel="validation MLM loss (nats)")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def plot_rate_grid(cells: dict[tuple[str, str], Cell], path: Path) -> Path:
    """Per task, each arm's validation mean (± std over every seed) at each fine-tuning rate."""
    arms = list(dict.fromkeys(arm for arm, _ in cells))
    figure, axes = plt.subplots(1, len(KINDS), figsize=(3.2 * len(KINDS), 3.2))
    for axis, kind in zip(axes, KINDS):
        for arm in arms:
            by_rate = cells[arm, kind].validation_by_rate
            means = [statistics.fmean(values) for values in by_rate.values()]
            stds = [statistics.stdev(values) if len(values) > 1 else 0 for values in by_rate.values()]
            axis.errorbar(list(by_rate), means, yerr=stds, marker="o", capsize=3, label=arm)
        axis.set(xscale="log", xlabel="fine-tuning rate", title=f"{kind} ({cells[arms[0], kind].metric})")
    axes[0].set_ylabel("validation score (0-100)")
    axes[0].legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
