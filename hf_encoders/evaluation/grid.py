"""The grid of the fine-tuning protocol of Gisserot-Boukhlef et al. (2025): every model x task x learning rate x
seed, one fine-tuning run each.

Each finished run is one line of `results.jsonl`, appended only once its metrics exist, so an interrupted grid
leaves no half-written result and a rerun skips what is done: a run is identified by model, task, learning rate,
seed and the protocol settings, so changing e.g. `max_steps` runs the grid again rather than mixing protocols.
A run that fails is recorded with its error (and retried on the next rerun); the grid goes on.
"""

import dataclasses
import hashlib
import json
import logging
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm
from transformers import AutoConfig

from .finetune import RunSettings, fine_tune
from .retrieval import fine_tune_retrieval
from .tasks import Task, load_task

logger = logging.getLogger(__name__)

RESULTS_FILE = "results.jsonl"

# The paper fixes six rates; their values did not survive in our copy of its text, so the grid spans the range
# encoders of 100M-1B parameters are usually fine-tuned in, evenly on a log scale.
DEFAULT_LEARNING_RATES = (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4)
DEFAULT_SEEDS = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class Protocol:
    """What every run of a grid shares (the paper's: up to 1,000 steps or one epoch, batch 32, 10% warmup)."""

    max_steps: int = 1000
    batch_size: int = 32
    warmup_ratio: float = 0.1
    max_length: int = 256
    trust_remote_code: bool = False
    training_overrides: dict = dataclasses.field(default_factory=dict)  # Trainer precision/device options

    def run_settings(self, learning_rate: float, seed: int) -> RunSettings:
        return RunSettings(
            learning_rate=learning_rate,
            seed=seed,
            max_steps=self.max_steps,
            batch_size=self.batch_size,
            warmup_ratio=self.warmup_ratio,
            max_length=self.max_length,
            trust_remote_code=self.trust_remote_code,
            training_overrides=dict(self.training_overrides),
        )

    def identity(self) -> dict:
        """The settings that change a run's result (not where it runs or how precisely it is logged)."""
        return {
            "max_steps": self.max_steps,
            "batch_size": self.batch_size,
            "warmup_ratio": self.warmup_ratio,
            "max_length": self.max_length,
        }


@dataclass(frozen=True)
class Run:
    model: str
    task: str  # the KIND:SOURCE spec as given
    learning_rate: float
    seed: int

    def key(self, protocol: Protocol) -> str:
        return json.dumps([self.model, self.task, self.learning_rate, self.seed, protocol.identity()])

    def folder_name(self) -> str:
        """The run's checkpoint folder: the model's folder name and a digest of its whole path (two TaCL runs'
        models are both `student/`: without it their runs would write into one folder), then the task's."""
        model, task = (Path(text.rstrip("/")).name or text for text in (self.model, self.task.split(":", 1)[1]))
        model += "-" + hashlib.sha1(self.model.encode()).hexdigest()[:8]
        return f"{model}-{self.task.split(':')[0]}-{task}-lr{self.learning_rate:g}-seed{self.seed}"


def read_results(output_dir: Path) -> list[dict]:
    """Every line of results.jsonl; a last line cut short by a crash mid-write is ignored."""
    path = Path(output_dir) / RESULTS_FILE
    if not path.exists():
        return []
    results = []
    for line in path.read_text().splitlines():
        try:
            results.append(json.loads(line))
        except json.JSONDecodeError:
            logger.warning(f"{path}: ignoring a line that is not complete JSON (a run interrupted while writing).")
    return results


def drop_torn_line(path: Path) -> None:
    """A run killed mid-write leaves a last line without its newline: cut it, so that the next result appended
    starts a line of its own instead of joining the torn one."""
    if path.exists() and (text := path.read_text()) and not text.endswith("\n"):
        path.write_text(text[: text.rfind("\n") + 1])


def check_models(models: list[str], trust_remote_code: bool) -> None:
    """Before any run: every MODEL must be a checkpoint Transformers can read (a config.json it knows)."""
    for model in models:
        try:
            AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
        except (OSError, ValueError) as error:
            raise ValueError(
                f"MODEL {model!r} is not a checkpoint Transformers can load ({' '.join(str(error).split())[:200]}); "
                "pass a folder with config.json and weights, or a Hub id (with --trust_remote_code for remote code)."
            ) from error


def run_grid(
    models: list[str],
    task_specs: list[str],
    output_dir: str | Path,
    protocol: Protocol | None = None,
    learning_rates=DEFAULT_LEARNING_RATES,
    seeds=DEFAULT_SEEDS,
    keep_checkpoints: bool = False,
) -> list[dict]:
    """Run what is not finished yet, appending to results.jsonl; returns every finished result of this grid."""
    protocol = protocol or Protocol()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    check_models(models, protocol.trust_remote_code)
    tasks = {spec: load_task(spec) for spec in task_specs}  # every task validated before the first run
    runs = [Run(m, t, lr, s) for m in models for t in task_specs for lr in learning_rates for s in seeds]
    drop_torn_line(output_dir / RESULTS_FILE)
    finished = {record["key"] for record in read_results(output_dir) if record["status"] == "finished"}
    todo = [run for run in runs if run.key(protocol) not in finished]
    if len(todo) < len(runs):
        logger.warning(f"{len(runs) - len(todo)} of {len(runs)} runs already in {output_dir / RESULTS_FILE}: skipped.")
    for run in tqdm(todo, desc="evaluate: runs", unit="run"):
        record = run_one(run, tasks[run.task], protocol, output_dir, keep_checkpoints)
        with open(output_dir / RESULTS_FILE, "a") as results:
            results.write(json.dumps(record) + "\n")  # one write per finished run: no partial result
    keys = {run.key(protocol) for run in runs}
    return [r for r in read_results(output_dir) if r["key"] in keys and r["status"] == "finished"]


def run_one(run: Run, task: Task, protocol: Protocol, output_dir: Path, keep_checkpoints: bool) -> dict:
    record = {
        "key": run.key(protocol),
        "model": run.model,
        "task": run.task,
        "kind": task.kind,
        "learning_rate": run.learning_rate,
        "seed": run.seed,
        "protocol": protocol.identity(),
    }
    folder = output_dir / "runs" / run.folder_name()
    started = time.perf_counter()
    train = fine_tune_retrieval if task.kind == "ir" else fine_tune
    try:
        metrics = train(run.model, task, protocol.run_settings(run.learning_rate, run.seed), folder)
    except Exception as error:  # recorded, and the grid goes on
        logger.error(f"run {run.folder_name()} failed: {error}")
        return {**record, "status": "failed", "error": "".join(traceback.format_exception_only(error)).strip()}
    finally:
        if not keep_checkpoints:
            shutil.rmtree(folder, ignore_errors=True)
    return {**record, "status": "finished", **metrics, "wall_time_s": round(time.perf_counter() - started, 2)}
