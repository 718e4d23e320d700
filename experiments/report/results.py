"""The results files under experiments/results/: what every finished experiment leaves behind (losses, ranks,
similarities, fine-tuning scores per seed; no weights), and the estimates the rules read from them.

One JSON file per experiment:

- `experiment`, `provenance` (`source`: "run", with the commit and command that produced it, or "transcribed", with
  the commit and the REPORT.md table its numbers were copied from when the runs themselves were gone), `setup`
  (steps, batch, sizes, task pages, fine-tuning protocol: what the report's set-up and limits state) and
  `pretraining_seeds`;
- `unigram_entropy`: the corpus's in the arms' vocabulary, the line a masked-LM loss must clear;
- `arms`: per arm, lists with one entry per pre-training seed (in `pretraining_seeds` order): `validation_loss`,
  `analysis` (per layer, the top layer last: `self_similarity`, `rank_clean`, `rank_with_mask`), `probe`
  (mae_lm_probe.py's measures per view), and `scores` per task kind: `runs` (every fine-tuning run:
  pre-training seed, rate, fine-tuning seed, validation and test score on 0-100) or, transcribed, `pooled` (mean and
  95% interval over runs whose per-seed scores were not kept). An arm may carry its own `provenance`.
- `timings`: the wall-time rows of its steps; `figures`: the figures under experiments/figures/ it drew.
"""

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from scipy import stats

from .. import RESULTS

# How many pre-training seeds a measure's values stand for, or which other unit they are.
PRETRAINING_SEEDS = "pre-training seeds"
FINE_TUNING_SEEDS = "fine-tuning seeds of one pre-training seed"
POOLED = "runs pooled over pre-training and fine-tuning seeds"
ONE_SEED = "one pre-training seed"


@dataclass(frozen=True)
class Estimate:
    """One arm's value of one measure: the mean, the values it is the mean of (one per `unit`), and its 95% interval
    (Student t over those values, or as transcribed)."""

    mean: float
    values: tuple[float, ...] = ()
    interval: tuple[float, float] | None = None
    unit: str = ONE_SEED
    count: int = 1  # how many units: pre-training seeds, fine-tuning runs, or pooled runs

    @property
    def spread(self) -> float | None:
        """Largest minus smallest value: how far apart the units land; None with fewer than two."""
        return max(self.values) - min(self.values) if len(self.values) > 1 else None

    def describe(self) -> str:
        """'2 pre-training seeds', '3 fine-tuning seeds of one pre-training seed', ..."""
        return f"{self.count} {self.unit}" if self.unit != ONE_SEED else ONE_SEED


def student_interval(values: list[float]) -> tuple[float, float] | None:
    """95% interval of the mean (Student t, n - 1 degrees of freedom); None for fewer than two values."""
    if len(values) < 2:
        return None
    mean, sem = statistics.fmean(values), stats.sem(values)
    if sem == 0:
        return mean, mean
    low, high = stats.t.interval(0.95, len(values) - 1, loc=mean, scale=sem)
    return float(low), float(high)


def over_seeds(values: list[float]) -> Estimate:
    """A measure taken once per pre-training seed (a loss, a rank, a similarity)."""
    unit = PRETRAINING_SEEDS if len(values) > 1 else ONE_SEED
    return Estimate(statistics.fmean(values), tuple(values), student_interval(values), unit, len(values))


@dataclass(frozen=True)
class Score:
    """One arm on one task: the rate chosen on the validation mean, and the test estimate at that rate."""

    estimate: Estimate
    best_rate: float | None = None
    # Per pre-training seed: rate -> the validation mean over its fine-tuning seeds (paper 004's Fig. 5 picture).
    validation_by_rate: list[dict[float, float]] = field(default_factory=list)


def score(entry: dict) -> Score:
    """A task's score from an arm's `scores` entry. Fine-tuning runs: the rate with the best validation mean over
    every run; at it, each pre-training seed's mean test score over its fine-tuning seeds, and the interval over
    those means (over the fine-tuning runs where one pre-training seed ran). Transcribed: the pooled numbers."""
    if "pooled" in entry:
        pooled = entry["pooled"]
        interval = tuple(pooled["interval"]) if pooled.get("interval") else None
        return Score(Estimate(pooled["mean"], (), interval, pooled.get("over", POOLED), pooled["runs"]))
    runs = entry["runs"]
    rates = sorted({run["rate"] for run in runs})
    best = max(rates, key=lambda rate: statistics.fmean(run["validation"] for run in runs if run["rate"] == rate))
    seeds = sorted({run["pretraining_seed"] for run in runs})
    chosen = [run for run in runs if run["rate"] == best]
    by_rate = [
        {
            rate: statistics.fmean(
                run["validation"] for run in runs if run["pretraining_seed"] == seed and run["rate"] == rate
            )
            for rate in rates
            if any(run["pretraining_seed"] == seed and run["rate"] == rate for run in runs)
        }
        for seed in seeds
    ]
    if len(seeds) > 1:
        means = [statistics.fmean(run["test"] for run in chosen if run["pretraining_seed"] == seed) for seed in seeds]
        estimate = Estimate(
            statistics.fmean(means), tuple(means), student_interval(means), PRETRAINING_SEEDS, len(seeds)
        )
    else:
        tests = [run["test"] for run in chosen]
        estimate = Estimate(
            statistics.fmean(tests), tuple(tests), student_interval(tests), FINE_TUNING_SEEDS, len(tests)
        )
    return Score(estimate, best, by_rate)


@dataclass(frozen=True)
class Arm:
    """One arm of an experiment as its results file holds it."""

    name: str
    data: dict

    def has(self, key: str) -> bool:
        return bool(self.data.get(key))

    def per_seed(self, key: str) -> list:
        return list(self.data.get(key) or [])

    def measure(self, key: str) -> Estimate:
        """A per-seed scalar (`validation_loss`, ...) over the pre-training seeds."""
        return over_seeds(self.per_seed(key))

    def layer_measure(self, key: str, layer: int = -1) -> Estimate:
        """An analysis measure (`self_similarity`, `rank_clean`, `rank_with_mask`) at one layer, the top by default,
        over the pre-training seeds."""
        return over_seeds([seed[key][layer] for seed in self.per_seed("analysis")])

    def layers(self, key: str) -> list[list]:
        """An analysis measure per layer, one list per pre-training seed."""
        return [seed[key] for seed in self.per_seed("analysis")]

    def scores(self) -> dict[str, Score]:
        return {kind: score(entry) for kind, entry in (self.data.get("scores") or {}).items()}

    def probes(self) -> list[dict]:
        return self.per_seed("probe")


@dataclass(frozen=True)
class Results:
    """One experiment's results file."""

    path: Path
    data: dict

    @property
    def name(self) -> str:
        return self.data["experiment"]

    @property
    def base(self) -> str:
        """The experiment an 'M, GPU' or 'U, 15%' file is a variant of: 'M', 'U'."""
        return self.name.split(", ")[0]

    @property
    def variant(self) -> str:
        """What sets this file apart from its experiment's plain one ('GPU', '15%'); '' for the plain one."""
        return self.name.partition(", ")[2]

    def label(self, claim_id: str) -> str:
        """A claim's id as this variant judges it: 'M1' -> 'M1 [GPU]'."""
        return f"{claim_id} [{self.variant}]" if self.variant else claim_id

    @property
    def provenance(self) -> dict:
        return self.data["provenance"]

    @property
    def setup(self) -> dict:
        return self.data.get("setup", {})

    @property
    def entropy(self) -> float:
        return self.data["unigram_entropy"]

    @property
    def seeds(self) -> list[int]:
        return self.data.get("pretraining_seeds", [0])

    @property
    def arms(self) -> dict[str, Arm]:
        return {name: Arm(name, data) for name, data in self.data["arms"].items()}

    def arm(self, name: str) -> Arm | None:
        data = self.data["arms"].get(name)
        return Arm(name, data) if data is not None else None

    @property
    def timings(self) -> list[list]:
        return self.data.get("timings", [])

    @property
    def transcribed(self) -> bool:
        return self.provenance.get("source") == "transcribed"


def load(directory: Path = RESULTS) -> dict[str, Results]:
    """Every results file under `directory`, by experiment."""
    found = {}
    for path in sorted(Path(directory).glob("*.json")):
        data = json.loads(path.read_text())
        found[data["experiment"]] = Results(path, data)
    return found


def save(data: dict, directory: Path = RESULTS) -> Path:
    """Write one experiment's results file, its numbers rounded so that the file stays small and readable."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{file_stem(data['experiment'])}.json"
    path.write_text(json.dumps(rounded(data), indent=1, ensure_ascii=False) + "\n")
    return path


def file_stem(experiment: str) -> str:
    """'U, 15%' -> 'U-15pct': an experiment's name as its results file's name."""
    return experiment.replace(", ", "-").replace("%", "pct").replace(" ", "-")


def rounded(value, digits: int = 6):
    """Floats to `digits` significant digits, everywhere in a JSON-like value (NaN becomes None)."""
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {key: rounded(item, digits) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(item, digits) for item in value]
    return value
