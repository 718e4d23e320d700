"""The papers' figures for any set of models, drawn without pyplot so no display or global state is touched."""

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .files import atomic_output
from .report import LayerwiseReport


def plot_layer_curves(reports: Sequence[LayerwiseReport], path: str | os.PathLike) -> Path:
    """One PNG, one panel per diagnostic, a line per model, layers on the x-axis (0 = embeddings).

    Self-similarity is TaCL Fig. 2; the two effective ranks of the same input without and with
    [MASK] (solid, dashed) are MAE-LM Fig. 1a; the rank of the [MASK] positions alone is Fig. 1b.
    """
    figure = Figure(figsize=(11, 8), layout="constrained")
    similarity, rank, mask_rank, isotropy = figure.subplots(2, 2).flat
    for index, report in enumerate(reports):
        color = f"C{index % 10}"  # matplotlib's default cycle, one colour per model
        layers = range(len(report.self_similarity))
        similarity.plot(layers, report.self_similarity, marker="o", color=color, label=report.model)
        rank.plot(layers, report.effective_rank, marker="o", color=color, label=f"{report.model}, w/o [MASK]")
        rank.plot(layers, report.effective_rank_with_mask, marker="s", linestyle="--", color=color, label="w. [MASK]")
        mask_rank.plot(layers, report.mask_effective_rank, marker="o", color=color, label=report.model)
        isotropy.plot(layers, report.isotropy, marker="o", color=color, label=report.model)
    tau = ", ".join(sorted({f"{report.rank_threshold:g}" for report in reports}))
    _label(similarity, "Token self-similarity (TaCL Eq. 3)", "mean cosine within a sentence")
    _label(rank, "Effective rank of real tokens (MAE-LM Fig. 1a)", f"rank at tau = {tau}")
    _label(mask_rank, "Effective rank of [MASK] tokens (MAE-LM Fig. 1b)", f"rank at tau = {tau}")
    _label(isotropy, "Isotropy (Ethayarajh, 2019)", "mean cosine across sentences (0: isotropic)")
    return _save(figure, path)


# What `DiagnosticsCallback` logs: the last layer's value under the plain name, every layer's as "<name>/layer_<l>".
TRAINING_DIAGNOSTICS = {
    "self_similarity": "Token self-similarity (TaCL Eq. 3)",
    "effective_rank": "Effective rank, w/o [MASK] (MAE-LM Fig. 1a)",
    "effective_rank_with_mask": "Effective rank, w. [MASK] (MAE-LM Fig. 1a)",
}
TRAINING_DIAGNOSTICS_UNITS = {
    "self_similarity": "mean cosine within a sentence",
    "effective_rank": "effective rank (dimensions)",
    "effective_rank_with_mask": "effective rank (dimensions)",
}

MAX_STEP_TICKS = 12  # up to this many probes, each one's step is a tick


def plot_training_diagnostics(log_history: Sequence[dict], path: str | os.PathLike) -> Path:
    """One PNG, a panel per diagnostic, training steps on the x-axis and a line per layer (darker: deeper), from
    the `log_history` of a run with `--diagnostics_steps`: how the method reshapes the representations as it trains."""
    entries = [entry for entry in log_history if all(name in entry for name in TRAINING_DIAGNOSTICS)]
    if not entries:
        raise ValueError("The log history holds no diagnostics; train with --diagnostics_steps N.")
    steps = [entry["step"] for entry in entries]
    layers = sum(key.startswith("self_similarity/layer_") for key in entries[-1])
    colours = matplotlib.colormaps["viridis_r"]
    figure = Figure(figsize=(15, 4.5), layout="constrained")
    for axes, (name, title) in zip(figure.subplots(1, len(TRAINING_DIAGNOSTICS)), TRAINING_DIAGNOSTICS.items()):
        for layer in range(layers):
            values = [entry.get(f"{name}/layer_{layer}") for entry in entries]
            label = "layer 0 = embeddings" if layer == 0 else f"layer {layer}"
            axes.plot(steps, values, marker=".", color=colours(layer / max(layers - 1, 1)), label=label)
        axes.set_title(title)
        axes.set_xlabel("training step")
        axes.set_ylabel(TRAINING_DIAGNOSTICS_UNITS[name])
        if len(steps) <= MAX_STEP_TICKS:  # a tick at each probe: values between them were never measured
            axes.set_xticks(steps)
        else:
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        if name.startswith("effective_rank"):  # a count of dimensions
            axes.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        axes.grid(alpha=0.3)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)  # beside the data
    return _save(figure, path)


def plot_similarity_heatmap(
    tokens: Sequence[str], matrix: torch.Tensor, path: str | os.PathLike, *, title: str = ""
) -> Path:
    """The token-by-token cosine similarity of one sentence (TaCL Fig. 3): darker is more similar."""
    size = 3 + 0.3 * len(tokens)
    figure = Figure(figsize=(size + 1, size), layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(matrix.numpy(), cmap="Blues", vmin=min(0.0, float(matrix.min())), vmax=1.0)
    axes.set_xticks(range(len(tokens)), tokens, rotation=90)
    axes.set_yticks(range(len(tokens)), tokens)
    axes.set_title(title)
    figure.colorbar(image, ax=axes, label="cosine similarity")
    return _save(figure, path)


def _label(axes, title: str, ylabel: str) -> None:
    axes.set_title(title)
    axes.set_xlabel("layer (0: embeddings)")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")


def _save(figure: Figure, path: str | os.PathLike) -> Path:
    with atomic_output(path) as temporary:
        # The temporary name does not end in .png, so the format is spelt out.
        figure.savefig(temporary, format="png", dpi=150)
    return Path(path)
