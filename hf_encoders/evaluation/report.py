"""What a grid's results say: per model x task, the best learning rate by validation mean and mean ± std over seeds
at that rate (REPORT.md, results.json), and the seeds of every rate as a strip plot per task (the stability picture
Gisserot-Boukhlef et al., 2025, study)."""

import json
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from matplotlib.figure import Figure
from scipy import stats

from .tasks import MAIN_METRIC

# Every score is reported on 0-100, as Gisserot-Boukhlef et al. (2025) report them; the SQuAD metrics already are
# (as the official script).
ALREADY_PERCENT = {"qa"}
SCALE_NOTE = (
    "Scores are on 0-100 (accuracy, entity F1, SQuAD F1 and nDCG@10 in percent, as Gisserot-Boukhlef et al., 2025, "
    "report them)."
)
SCORE_RANGE = (0.0, 100.0)


@dataclass
class Cell:
    """One model on one task: validation scores by rate (a list over seeds), the best rate, and what is reported."""

    model: str
    task: str
    metric: str
    validation_by_rate: dict[float, list[float]]
    best_rate: float
    reported_split: str  # "test" when the task has one, else "validation" (the scores the rate was chosen on)
    reported: list[float]  # over seeds, at the best rate

    @property
    def mean(self) -> float:
        return statistics.fmean(self.reported)

    @property
    def std(self) -> float | None:
        """Spread over seeds; None for one seed, which has none."""
        return statistics.stdev(self.reported) if len(self.reported) > 1 else None

    @property
    def confidence_interval(self) -> tuple[float, float] | None:
        """95% interval of the mean over seeds (Student t, n - 1 degrees of freedom); None for one seed."""
        if self.std is None:
            return None
        if self.std == 0:  # scipy's interval of a zero scale is (nan, nan), with a RuntimeWarning
            return self.mean, self.mean
        low, high = stats.t.interval(0.95, len(self.reported) - 1, loc=self.mean, scale=stats.sem(self.reported))
        return float(low), float(high)


def summarize(results: list[dict]) -> list[Cell]:
    """A cell per (model, task) present in `results` (finished runs), in the order they first appear."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for record in results:
        groups.setdefault((record["model"], record["task"]), []).append(record)
    return [cell_of(model, task, records) for (model, task), records in groups.items()]


def cell_of(model: str, task: str, records: list[dict]) -> Cell:
    metric = MAIN_METRIC[records[0]["kind"]]
    by_rate: dict[float, list[dict]] = {}
    for record in sorted(records, key=lambda r: (r["learning_rate"], r["seed"])):
        by_rate.setdefault(record["learning_rate"], []).append(record)
    points = 1 if records[0]["kind"] in ALREADY_PERCENT else 100
    validation = {rate: [points * r["validation"][metric] for r in runs] for rate, runs in by_rate.items()}
    best_rate = max(validation, key=lambda rate: statistics.fmean(validation[rate]))
    split = "test" if all("test" in r for r in by_rate[best_rate]) else "validation"
    reported = [points * r[split][metric] for r in by_rate[best_rate]]
    return Cell(model, task, metric, validation, best_rate, split, reported)


def task_label(spec: str) -> str:
    """'sc:/data/tasks/topic' -> 'sc:topic'; a preset ('sc:sst2') stays as it is."""
    kind, source = spec.split(":", 1)
    return f"{kind}:{Path(source.rstrip('/')).name or source}"


def short_names(models: list[str]) -> dict[str, str]:
    """A checkpoint's folder name, or its whole path where two folders share a name."""
    names = {model: Path(model.rstrip("/")).name or model for model in models}
    repeated = {name for name in names.values() if list(names.values()).count(name) > 1}
    return {model: model if name in repeated else name for model, name in names.items()}


def write_report(
    results: list[dict],
    output_dir: Path,
    protocol: dict,
    poolings: dict[str, str],
    labels: dict[str, str] | None = None,
    chances: dict[str, float | None] | None = None,
) -> Path:
    """REPORT.md, results.json and one PNG per task in `output_dir`; returns REPORT.md's path. `labels` name the
    models (default: their folder names); `chances` give a task's score of a model that learned nothing."""
    output_dir = Path(output_dir)
    cells = summarize(results)
    models = list(dict.fromkeys(cell.model for cell in cells))
    names = {model: labels[model] for model in models} if labels else short_names(models)
    tasks = list(dict.fromkeys(cell.task for cell in cells))
    plots = {task: plot_task(task, [c for c in cells if c.task == task], names, output_dir) for task in tasks}
    (output_dir / "results.json").write_text(json.dumps(summary_json(cells, protocol), indent=1))
    lines = ["# Fine-tuning evaluation (the protocol of Gisserot-Boukhlef et al., 2025)", ""]
    lines += comparison_table(cells, names, tasks)
    lines += chance_lines(tasks, chances or {})
    lines += ["", "## Per model and task", ""]
    lines += detail_table(cells, names)
    lines += ["", "## Stability", ""]
    lines += [f"![{task_label(task)}]({plots[task].name})" for task in tasks]
    lines += ["", *protocol_section(protocol, poolings, names, results)]
    path = output_dir / "REPORT.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def comparison_table(cells: list[Cell], names: dict[str, str], tasks: list[str]) -> list[str]:
    """Models as rows, tasks as columns: mean ± std over seeds at each cell's best rate."""
    by_key = {(cell.model, cell.task): cell for cell in cells}
    header = [f"{task_label(task)} ({by_key_first(cells, task).metric})" for task in tasks]
    lines = ["| model | " + " | ".join(header) + " |", "|---|" + "---|" * len(tasks)]
    for model, name in names.items():
        scores = [format_score(by_key[model, task]) if (model, task) in by_key else "-" for task in tasks]
        lines.append(f"| {name} | " + " | ".join(scores) + " |")
    note = (
        "Mean ± standard deviation over seeds (n/a for one seed) and, in brackets, the 95% confidence interval of the "
        "mean over the seeds (Student t), at the learning rate with the best validation mean; on the test split "
        f"where the task has one, else on validation (marked *). {SCALE_NOTE} An interval is shown clipped to that "
        "range (with few seeds Student t's reaches beyond it; results.json keeps its unclipped bounds)."
    )
    return [*lines, "", note]


def chance_lines(tasks: list[str], chances: dict[str, float | None]) -> list[str]:
    """The chance level of each task that has one, so that a score at it reads as nothing learned."""
    known = [f"{task_label(task)} {chances[task]:.2f}" for task in tasks if chances.get(task) is not None]
    if not known:
        return []
    return [
        "",
        f"Chance, the score of always answering the most frequent label of the split shown: {', '.join(known)}. "
        "A model at chance has learned nothing the task needs.",
    ]


def by_key_first(cells: list[Cell], task: str) -> Cell:
    return next(cell for cell in cells if cell.task == task)


def format_score(cell: Cell) -> str:
    """'mean ± std (low–high)', the interval clipped to the scores' range, every number with the decimals that show
    the std's first significant digit (at least 2), so a non-zero spread never reads 0.00."""
    marker = "*" if cell.reported_split == "validation" else ""
    if cell.std is None:
        return f"{cell.mean:.2f} ± n/a{marker}"
    decimals = 2 if cell.std == 0 else max(2, -math.floor(math.log10(cell.std)))
    low, high = (min(max(bound, SCORE_RANGE[0]), SCORE_RANGE[1]) for bound in cell.confidence_interval)
    numbers = [f"{number:.{decimals}f}" for number in (cell.mean, cell.std, low, high)]
    return "{} ± {} ({}–{})".format(*numbers) + marker


def detail_table(cells: list[Cell], names: dict[str, str]) -> list[str]:
    lines = [
        "| model | task | metric | best rate | seeds | validation mean at each rate |",
        "|---|---|---|---|---|---|",
    ]
    for cell in cells:
        rates = ", ".join(f"{rate:g}: {statistics.fmean(v):.2f}" for rate, v in cell.validation_by_rate.items())
        lines.append(
            f"| {names[cell.model]} | {task_label(cell.task)} | {cell.metric} | {cell.best_rate:g} | {len(cell.reported)} | {rates} |"
        )
    return lines


def protocol_section(protocol: dict, poolings: dict[str, str], names: dict[str, str], results: list[dict]) -> list[str]:
    rates = sorted({r["learning_rate"] for r in results})
    seeds = sorted({r["seed"] for r in results})
    lines = [
        "## Protocol",
        "",
        f"Every model is fine-tuned on every task for up to {protocol['max_steps']} steps or one epoch, whichever "
        f"comes first, with batch {protocol['batch_size']}, {protocol['warmup_ratio']:.0%} linear warmup then linear "
        f"decay, inputs truncated to {protocol['max_length']} tokens, at learning rates "
        f"{', '.join(f'{rate:g}' for rate in rates)} and seeds {', '.join(map(str, seeds))} "
        f"({len(results)} finished runs). The rate is chosen on the validation mean of the main metric (SC accuracy, "
        "TC entity F1, QA F1, IR nDCG@10). A mean's 95% confidence interval is Student t's over the seeds at the "
        "chosen rate: mean ± t(0.975, seeds - 1) x standard deviation / sqrt(seeds); it leaves out the rate's "
        "selection on the same seeds.",
        "",
        "Heads and pooling:",
        "",
    ]
    lines += [f"- {names[model]}: {pooling}" for model, pooling in poolings.items() if model in names]
    wall_time = sum(r["wall_time_s"] for r in results)
    return [*lines, "", f"Wall time of the {len(results)} runs, summed: {wall_time / 60:.1f} min."]


def summary_json(cells: list[Cell], protocol: dict) -> dict:
    return {
        "protocol": protocol,
        "cells": [
            {
                **asdict(cell),
                "validation_by_rate": {f"{rate:g}": v for rate, v in cell.validation_by_rate.items()},
                "mean": cell.mean,
                "std": cell.std,
                "confidence_interval_95": cell.confidence_interval,
            }
            for cell in cells
        ],
    }


def plot_task(task: str, cells: list[Cell], names: dict[str, str], output_dir: Path) -> Path:
    """One strip per model and rate: each seed's validation score as a dot, the mean as a bar."""
    figure = Figure(figsize=(max(5, 1.2 * sum(len(c.validation_by_rate) for c in cells)), 4))
    axis = figure.subplots()
    ticks, labels, position = [], [], 0.0
    for index, cell in enumerate(cells):
        for rate, values in cell.validation_by_rate.items():
            axis.scatter([position] * len(values), values, color=f"C{index}", alpha=0.7, s=18)
            axis.hlines(statistics.fmean(values), position - 0.3, position + 0.3, color=f"C{index}")
            ticks.append(position)
            labels.append(f"{names[cell.model]}\n{rate:g}" + (" (best)" if rate == cell.best_rate else ""))
            position += 1
        position += 0.5  # a gap between models
    axis.set_xticks(ticks, labels, fontsize="x-small")
    label = task_label(task)
    axis.set(ylabel=f"validation {cells[0].metric} (0-100)", title=f"{label}: seeds per model and learning rate")
    figure.tight_layout()
    path = output_dir / f"stability_{label.replace(':', '_')}.png"
    figure.savefig(path)
    return path
