"""From the run folders an experiment leaves (pre-training logs, analyses, probes, fine-tuning records, timings) to
its results file: what is committed under experiments/results/ and outlives the machine that ran it."""

import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from hf_encoders.evaluation.grid import read_results
from hf_encoders.evaluation.tasks import MAIN_METRIC

from ..wall_time import RECORD_LABELS, Measurement
from .runs import analysis, final_eval_loss, trained_steps

# evaluate's metrics are on 0-1 except SQuAD's, which the official script already gives on 0-100.
ALREADY_PERCENT = {"qa"}


def provenance(command: list[str] | None = None) -> dict:
    """Where a run's numbers come from: the commit (marked when the tree had uncommitted changes), the command and
    the machine."""
    root = Path(__file__).parents[2]

    def git(*arguments):
        found = subprocess.run(["git", *arguments], cwd=root, capture_output=True, text=True)
        return found.stdout.strip() if found.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += " (with uncommitted changes)"
    return {
        "source": "run",
        "commit": commit,
        "command": " ".join(["python -m experiments." + Path(sys.argv[0]).stem, *(command or sys.argv[1:])]),
        "device": device(),
        "date": datetime.date.today().isoformat(),
    }


def device() -> str:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"{os.cpu_count()} CPU cores"


def analysis_entries(root: Path, name: str, labels: list[str]) -> dict[str, dict]:
    """`hf-encoders analyze`'s per-layer measures of each label, in the results file's terms."""
    models = analysis(root, name) or {}
    return {
        label: {
            "self_similarity": models[label]["self_similarity"],
            "rank_clean": models[label]["effective_rank"],
            "rank_with_mask": models[label]["effective_rank_with_mask"],
        }
        for label in labels
        if label in models
    }


def score_runs(root: Path, experiment: str, arm_of, pretraining_seed: int) -> dict[str, dict[str, list[dict]]]:
    """Every finished fine-tuning run under evaluate/EXPERIMENT (one folder per model): arm (`arm_of(model path)`, None to skip) -> task kind
    -> runs, each score on 0-100."""
    found: dict[str, dict[str, list[dict]]] = {}
    records = [
        record
        for results in sorted((root / "evaluate" / experiment).rglob("results.jsonl"))
        for record in read_results(results.parent)
    ]
    for record in records:
        arm = arm_of(Path(record["model"]))
        if record["status"] != "finished" or arm is None:
            continue
        kind = record["kind"]
        metric, scale = MAIN_METRIC[kind], 1 if kind in ALREADY_PERCENT else 100
        found.setdefault(arm, {}).setdefault(kind, []).append(
            {
                "pretraining_seed": pretraining_seed,
                "rate": record["learning_rate"],
                "seed": record["seed"],
                "validation": scale * record["validation"][metric],
                "test": scale * record["test"][metric],
            }
        )
    return found


def labelled(labels: dict[str, str]):
    """arm_of for score_runs: a fine-tuned folder's name, or that of the run folder a TaCL student sits in."""
    return lambda model: labels.get(model.name, labels.get(model.parent.name))


class Collector:
    """One experiment's results file, filled arm by arm, seed folder by seed folder."""

    def __init__(self, experiment: str, setup: dict, entropy: float, seeds: list[int]):
        self.data = {
            "experiment": experiment,
            "provenance": provenance(),
            "setup": setup,
            "pretraining_seeds": seeds,
            "unigram_entropy": entropy,
            "arms": {},
            "timings": [],
            "figures": [],
        }

    def arm(self, name: str) -> dict:
        return self.data["arms"].setdefault(name, {})

    def add_loss(self, name: str, root: Path, run: str, key: str = "validation_loss") -> None:
        if (root / "pretrain" / run / "log_history.json").exists():
            arm = self.arm(name)
            arm.setdefault(key, []).append(final_eval_loss(root, run))
            if key == "validation_loss":
                arm["steps"] = trained_steps(root, run)

    def add_curve(self, name: str, root: Path, run: str) -> None:
        """The run's validation loss at every evaluation: (step, loss) pairs."""
        history = json.loads((root / "pretrain" / run / "log_history.json").read_text())
        curve = [
            [entry["step"], entry.get("eval_mlm_loss", entry["eval_loss"])] for entry in history if "eval_loss" in entry
        ]
        self.arm(name).setdefault("validation_curve", []).append(curve)

    def add_analysis(self, root: Path, analysis_name: str, arms: dict[str, str]) -> None:
        """arms: label in the analysis -> arm."""
        for label, entry in analysis_entries(root, analysis_name, list(arms)).items():
            self.arm(arms[label]).setdefault("analysis", []).append(entry)

    def add_probe(self, root: Path, analysis_name: str, arms: dict[str, str]) -> None:
        """mae_lm_probe.py's measures (analysis/NAME/probe.json): checkpoint folder name -> arm."""
        path = root / "analysis" / analysis_name / "probe.json"
        if path.exists():
            for folder, views in json.loads(path.read_text()).items():
                if folder in arms:
                    self.arm(arms[folder]).setdefault("probe", []).append(views)

    def add_scores(self, root: Path, experiment: str, arm_of, pretraining_seed: int) -> None:
        for arm, kinds in score_runs(root, experiment, arm_of, pretraining_seed).items():
            scores = self.arm(arm).setdefault("scores", {})
            for kind, runs in kinds.items():
                scores.setdefault(kind, {"runs": []})["runs"].extend(runs)

    def add_timings(self, timings: dict[str, dict], experiment: str) -> None:
        self.data["timings"] += timing_rows(timings, experiment)

    def add_figure(self, source: Path, figures: Path, name: str) -> None:
        if source.exists():
            figures.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, figures / name)
            self.data["figures"].append(name)


def timing_rows(timings: dict[str, dict], experiment: str) -> list[list]:
    """The wall-time rows of `experiment`'s steps (reproduce.py's timings.json): step, wall and CPU minutes, the load
    beside it, and whether it ran alone."""
    rows = []
    for step, entry in timings.items():
        if not isinstance(entry, dict) or entry.get("experiment") != experiment or "load_average" not in entry:
            continue
        measurement = Measurement(**{key: value for key, value in entry.items() if key not in RECORD_LABELS})
        status = "alone" if measurement.alone else "shared"
        if measurement.sessions > 1:
            status += f", {measurement.sessions} sessions"
        if not entry.get("finished", True):
            status += ", unfinished"
        rows.append(
            [
                experiment,
                step,
                round(measurement.seconds / 60, 1),
                round(measurement.cpu_seconds / 60, 1),
                round(measurement.others_load, 2),
                measurement.other_processes,
                status,
            ]
        )
    return rows
