"""`python -m experiments.scan_summary`: the scan's runs (finished or still going) as one JSON file, a
markdown table and three figures.

experiments/scan/results.json: per run, its settings, the held-out masked-LM loss after every evaluation, the
encoder's share of the gradient norm, and the CPU seconds per step (one thread: its speed on a quiet machine).
experiments/scan/table.md: one row per run, with the unigram entropy H and BERT's context-free floor beside.
experiments/figures/scan_eval_loss.png, scan_gradient_share.png: the curves; scan_collapse_probe.png: collapse-probe's.
"""

import argparse
import ast
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from .plateau_scan import FIGURES, RESULTS, ROOT, build_parser, plateaus


def read_run(folder: Path) -> dict | None:
    path = folder / "scan.json"
    record = json.loads(path.read_text()) if path.exists() else from_console_log(folder)
    if record is None:
        return None
    history = record["log_history"]
    evaluations = [(entry["step"], entry["eval_loss"]) for entry in history if "eval_loss" in entry]
    shares = [
        (entry["step"], entry["encoder_gradient_share"]) for entry in history if "encoder_gradient_share" in entry
    ]
    clock = [(entry["step"], entry["cpu_s"]) for entry in history if "cpu_s" in entry and "loss" in entry]
    cpu_per_step = (clock[-1][1] - clock[0][1]) / (clock[-1][0] - clock[0][0]) if len(clock) > 1 else None
    return {
        "settings": record["settings"],
        "finished": record.get("finished", True),
        "wall_s": record["wall_s"],
        "steps_done": history[-1]["step"] if history else 0,
        "cpu_s_per_step": cpu_per_step,
        "eval_loss": evaluations,
        "encoder_gradient_share": shares,
    }


def from_console_log(folder: Path) -> dict | None:
    """A run started before plateau_scan.py recorded as it went: its log history, read back from the dictionaries
    Trainer printed (one per 10 steps; an evaluation's at the step of the entry before it), and its settings from
    the command line kept beside it in NAME.args."""
    console, arguments = folder.with_suffix(".log"), folder.with_suffix(".args")
    if not (console.exists() and arguments.exists()):
        return None
    settings = build_parser().parse_args(["run", folder.name, *arguments.read_text().split()])
    history, step = [], 0
    for line in console.read_text().splitlines():
        if line.startswith("{'loss'"):
            step += 10
        if line.startswith("{'loss'") or line.startswith("{'eval_loss'"):
            entry = {key: float(value) for key, value in ast.literal_eval(line).items()}
            history.append({**entry, "step": step})
    settings = {key: value for key, value in vars(settings).items() if key != "command"}
    return {"settings": settings, "finished": False, "wall_s": None, "log_history": history}


def status(run: dict) -> str:
    if not run["finished"]:
        return " (running)"
    return " (stopped)" if run["steps_done"] < run["settings"]["steps"] else ""


def describe(settings: dict) -> str:
    method = settings["method"] + (f" δ={settings['delta']:g}" if settings["method"] == "mae_lm" else "")
    method += " all-[MASK]" if settings.get("all_mask") else ""
    method += f", encoder held {settings['freeze_encoder_steps']} steps" if settings.get("freeze_encoder_steps") else ""
    adam = (
        ""
        if settings["beta2"] == 0.999
        else f", β2 {settings['beta2']}, eps {settings['eps']}, clip {settings['clip']}"
    )
    return (
        f"{method}, {settings['layers']}, batch {settings['batch']}x{settings['block']}, lr {settings['lr']:g}, "
        f"warm-up {settings['warmup']:g}, {settings['steps']} steps{adam}"
    )


def main() -> None:
    reference = plateaus()
    runs = {folder.name: read_run(folder) for folder in sorted(ROOT.iterdir()) if folder.is_dir()}
    runs = {name: run for name, run in runs.items() if run is not None and not name.startswith("speed")}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "results.json").write_text(json.dumps({"plateaus": reference, "runs": runs}, indent=1))
    entropy, floor = reference["unigram_entropy"], reference["context_free_floor_80_10_10"]
    lines = [
        f"Unigram entropy H = {entropy:.3f} nats (on the held-out pages, the training pages' unigram model scores "
        f"{reference['validation_unigram_cross_entropy']:.3f}); BERT's 80/10/10 context-free floor = {floor:.3f}.",
        "",
        "| run | setting | steps done | CPU s / step | best eval loss (step) | last eval loss | H − last | "
        "encoder gradient share (first → last) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        evaluations, shares = run["eval_loss"], run["encoder_gradient_share"]
        best = min(evaluations, key=lambda pair: pair[1]) if evaluations else None
        last = evaluations[-1][1] if evaluations else None
        lines.append(
            f"| {name} | {describe(run['settings'])} | {run['steps_done']}{status(run)} | "
            + (f"{run['cpu_s_per_step']:.2f}" if run["cpu_s_per_step"] else "")
            + " | "
            + (f"{best[1]:.3f} ({best[0]})" if best else "")
            + " | "
            + (f"{last:.3f} | {entropy - last:+.2f}" if last is not None else " | ")
            + " | "
            + (f"{shares[0][1]:.3g} → {shares[-1][1]:.3g}" if shares else "")
            + " |"
        )
    (RESULTS / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(runs, entropy, floor)
    if (RESULTS / "collapse_probe.json").exists():
        plot_collapse(json.loads((RESULTS / "collapse_probe.json").read_text()))


def plot(runs: dict, entropy: float, floor: float) -> None:
    FIGURES.mkdir(exist_ok=True)
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for name, run in runs.items():
        if run["eval_loss"]:
            steps, losses = zip(*run["eval_loss"])
            axis.plot(steps, losses, marker=".", label=name)
    axis.axhline(entropy, color="black", linestyle="--", label=f"unigram entropy {entropy:.2f}")
    axis.axhline(floor, color="grey", linestyle=":", label=f"80/10/10 context-free floor {floor:.2f}")
    axis.axhline(entropy - 1, color="red", linestyle="-.", label="H − 1 (the target)")
    axis.set(xlabel="step", ylabel="held-out masked-LM loss (nats)", ylim=(entropy - 2, entropy + 1.5))
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(FIGURES / "scan_eval_loss.png", dpi=110)
    figure, axis = plt.subplots(figsize=(7, 4))
    for name, run in runs.items():
        if run["encoder_gradient_share"]:
            steps, shares = zip(*run["encoder_gradient_share"])
            axis.plot(steps, shares, marker=".", label=name)
    axis.set(xlabel="step", ylabel="encoder's share of the gradient norm", yscale="log")
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(FIGURES / "scan_gradient_share.png", dpi=110)


def plot_collapse(curves: dict) -> None:
    """collapse_probe's curves: the encoder's mean-direction energy, and the common mode of its output gradient."""
    figure, (energy_axis, common_axis) = plt.subplots(1, 2, figsize=(11, 4.5))
    for index, (name, curve) in enumerate(curves.items()):
        style = dict(marker=".", label=name, color=f"C{index}")
        energy_axis.plot([p["step"] for p in curve], [p["mean_direction_energy"] for p in curve], **style)
        measured = [point for point in curve if "gradient_common_mode" in point]
        if measured:
            common_axis.plot([p["step"] for p in measured], [p["gradient_common_mode"] for p in measured], **style)
    energy_axis.set(xlabel="step", ylabel="share of energy in the mean direction", ylim=(0, 1.05))
    energy_axis.set_title("encoder's top-layer states", fontsize=9)
    common_axis.set(xlabel="step", ylabel="row-common share", ylim=(0, 1.05))
    common_axis.set_title("gradient reaching the encoder's output", fontsize=9)
    energy_axis.legend(fontsize=7)
    common_axis.legend(fontsize=7)
    figure.suptitle("MAE-LM 2 x 128: does the encoder collapse onto one vector? (collapse-probe)")
    figure.tight_layout()
    figure.savefig(FIGURES / "scan_collapse_probe.png", dpi=110)


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()  # --help, before anything is written
    main()
