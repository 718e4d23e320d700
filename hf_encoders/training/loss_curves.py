"""Loss curves from Trainer's `log_history`, as a PNG next to the numbers."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


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


def plot_loss_curves(curves: dict[str, list[dict]], path: Path, title: str = "Pre-training loss") -> Path:
    """One axis; a line per (run, loss term). `curves` maps a run's label to its Trainer log_history."""
    figure, axis = plt.subplots(figsize=(7, 4))
    for label, log_history in curves.items():
        for term, (steps, values) in loss_series(log_history).items():
            axis.plot(steps, values, label=label if term == "loss" else f"{label}: {term}")
        for term, (steps, values) in loss_series(log_history, evaluation=True).items():
            axis.plot(steps, values, linestyle="--", marker="o", markersize=3, label=f"{label}: {term} (validation)")
    # Log scale: the terms of one run (TaCL's contrastive loss ends near 0.1, NSP near 0.7) differ by decades.
    axis.set(xlabel="step", ylabel="loss (log scale)", title=title, yscale="log")
    if axis.lines:  # a run shorter than --logging_steps logged no loss
        axis.legend(fontsize="small")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path.with_suffix(".tmp.png"))
    plt.close(figure)
    return path.with_suffix(".tmp.png").replace(path)
