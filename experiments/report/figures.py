"""The report's figures, drawn from a results file when a run collects it (REPORT.md links them by name; the
analysis's own figures are copied by collect.py)."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from ..tasks import KINDS
from .results import Results
from .rules import LEARNING_MARGIN

DELTA_EXPERIMENTS = {"M": "m", "M-pretrained": "mp"}


def draw_figures(data: dict, figures: Path) -> None:
    """Every figure `data`'s numbers make, added to its `figures` list."""
    found = Results(Path(), data)
    drawn = []
    if found.name in DELTA_EXPERIMENTS:
        drawn.append(delta_sweep(found, figures / f"{DELTA_EXPERIMENTS[found.name]}_delta_sweep.png"))
        if any(arm.has("validation_curve") for arm in found.arms.values()):
            drawn.append(validation_curves(found, figures / f"{DELTA_EXPERIMENTS[found.name]}_validation_loss.png"))
    if found.name == "B1":
        drawn.append(rate_grid(found, figures / "b1_rate_grid.png"))
    data["figures"] = [*data.get("figures", []), *(path.name for path in drawn if path is not None)]


def delta_sweep(found: Results, path: Path) -> Path:
    """Top-layer rank of real tokens over δ (clean input and with [MASK]), and the test scores where fine-tuned."""
    arms = {float(name.removeprefix("delta_")): arm for name, arm in found.arms.items() if name.startswith("delta_")}
    deltas = sorted(arms)
    scored = all(arm.scores() for arm in arms.values())
    figure, axes = plt.subplots(1, 2 if scored else 1, figsize=(9 if scored else 5, 3.5), squeeze=False)
    left = axes[0, 0]
    for key, style, label in (("rank_clean", "o-", "clean input"), ("rank_with_mask", "s--", "with [MASK]")):
        left.plot(deltas, [arms[delta].layer_measure(key).mean for delta in deltas], style, label=label)
    left.set(xlabel="δ ([MASK] share kept in the encoder)", ylabel="top-layer rank_0.9 of real tokens")
    left.legend()
    if scored:
        right = axes[0, 1]
        for kind in KINDS:
            right.plot(deltas, [arms[delta].scores()[kind].estimate.mean for delta in deltas], "o-", label=kind)
        right.set(xlabel="δ", ylabel="downstream score (test)")
        right.legend()
    return saved(figure, path)


def validation_curves(found: Results, path: Path) -> Path:
    """Each arm's validation loss over its steps, the unigram entropy and the learning margin drawn across, the steps
    that held the encoder shaded."""
    figure, axis = plt.subplots(figsize=(6, 3.5))
    for name, arm in found.arms.items():
        for curve in arm.per_seed("validation_curve")[:1]:
            axis.plot(*zip(*curve), "o-", label=name)
    held = found.setup.get("hold_encoder_steps")
    if held:
        axis.axvspan(0, held, color="0.9", label="encoder held")
    axis.axhline(found.entropy, color="k", linestyle=":", label="unigram entropy")
    axis.axhline(found.entropy - LEARNING_MARGIN, color="k", linestyle="--", linewidth=0.8, label="learned (−0.5 nats)")
    axis.set(xlabel="step", ylabel="validation MLM loss (nats)")
    axis.legend(fontsize=8)
    return saved(figure, path)


def rate_grid(found: Results, path: Path) -> Path | None:
    """Per task, each arm's validation mean at each fine-tuning rate, one line per pre-training seed."""
    arms = {name: arm.scores() for name, arm in found.arms.items() if arm.scores()}
    if not arms:
        return None
    figure, axes = plt.subplots(1, len(KINDS), figsize=(3.2 * len(KINDS), 3.2))
    for axis, kind in zip(axes, KINDS):
        for index, (name, scores) in enumerate(arms.items()):
            for seed, by_rate in enumerate(scores[kind].validation_by_rate if kind in scores else []):
                rates = sorted(by_rate)
                axis.plot(
                    rates, [by_rate[rate] for rate in rates], "o-", color=f"C{index}", label=name if seed == 0 else None
                )
        axis.set(xscale="log", xlabel="fine-tuning rate", title=kind)
    axes[0].set_ylabel("validation score (0-100)")
    axes[0].legend(fontsize="small")
    return saved(figure, path)


def saved(figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
