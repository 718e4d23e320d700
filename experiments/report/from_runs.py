"""Each experiment's results file from the run folders under an --output-dir (and its seed folders: one
`reproduce.py --seed N --output-dir runs/..._sN` each), as reproduce.py and gpu.sh leave them."""

from pathlib import Path

from .collect import Collector, labelled
from .masking import RANDOM_INIT, TOKEN_EVAL_SUFFIX, masking_runs
from .runs import data_root, final_eval_loss, folders_of, minilm_path, unigram_entropy

DELTAS = ("0.0", "0.5", "1.0")
PHASE_ARMS = ("clm_then_mlm", "mlm_only", "clm_only")


def seed_roots(root: Path, marker: str) -> list[Path]:
    """The folders under `root` (itself included) holding `marker` (a path inside a run folder): one per pre-training
    seed of the experiment."""
    return [folder for folder in folders_of(root) if (folder / marker).exists()]


def collect_runs(root: Path, setups: dict[str, dict], timings: dict, figures: Path) -> list[dict]:
    """A results dict for every experiment with finished runs under `root`; `setups`: experiment -> its set-up as the
    report states it (reproduce.py's settings), `timings`: every step's record, `figures`: where figures go."""
    builders = {
        "T1": t1_results,
        "T1-MiniLM": t1_minilm_results,
        "M": m_results,
        "M-lr1e-3": m_collapsed_results,
        "M-pretrained": mp_results,
        "B1": b1_results,
        "B2": b2_results,
        "B2-equal-budget": b2e_results,
    }
    found = []
    for experiment, build in builders.items():
        if experiment in setups and (collector := build(root, setups[experiment], figures)) is not None:
            collector.add_timings(timings, TIMING_NAMES.get(experiment, experiment))
            found.append(collector.data)
    if "U" in setups:
        for collector in u_results(root, setups["U"]):
            collector.add_timings(timings, "U")
            found.append(collector.data)
    return found


# The experiment names reproduce.py records in timings.json, where they differ from the results' names.
TIMING_NAMES = {"M-lr1e-3": "M"}


def tacl_results(experiment, roots, setup, start_folder, start_label, prefix, entropy, figures) -> Collector:
    collector = Collector(experiment, setup, entropy, list(range(len(roots))))
    labels = {start_folder: "start", f"{prefix}_mlm": "mlm", f"{prefix}_tacl": "tacl"}
    for index, root in enumerate(roots):
        for arm in ("mlm", "tacl"):
            collector.add_loss(arm, root, f"{prefix}_{arm}")
        collector.add_analysis(root, prefix, {start_label: "start", "mlm": "mlm", "tacl": "tacl"})
        collector.add_scores(root, prefix, labelled(labels), index)
    for name in ("layer_curves", "similarity_mlm", "similarity_tacl"):
        collector.add_figure(roots[0] / "analysis" / prefix / f"{name}.png", figures, f"{prefix}_{name}.png")
    return collector


def t1_results(root: Path, setup: dict, figures: Path) -> Collector | None:
    roots = seed_roots(root, "evaluate/t1h")
    if not roots:
        return None
    entropy = unigram_entropy(data_root(root))
    return tacl_results("T1", roots, setup, "b1_mlm_only", "start", "t1h", entropy, figures)


def t1_minilm_results(root: Path, setup: dict, figures: Path) -> Collector | None:
    roots = seed_roots(root, "evaluate/t1")
    if not roots:
        return None
    entropy = unigram_entropy(roots[0], minilm_path())
    return tacl_results("T1-MiniLM", roots, setup, Path(minilm_path()).name, "minilm", "t1", entropy, figures)


def delta_results(experiment, root, sweep, setup, entropy, extra_arms: dict[str, str]) -> Collector:
    """M's arms (from scratch, or `sweep` "mp" from MiniLM): each δ's loss, analysis, probe and scores, and the arms
    in `extra_arms` (label -> its run folder, or None for a model with no run of its own)."""
    collector = Collector(experiment, setup, entropy, [0])
    runs = {f"delta_{delta}": f"{sweep}_delta_{delta}" for delta in DELTAS}
    runs |= {label: run for label, run in extra_arms.items() if run}
    for label, run in runs.items():
        collector.add_loss(label, root, run)
        if sweep == "mp":
            collector.add_curve(label, root, run)
    labels = [*extra_arms, *(f"delta_{delta}" for delta in DELTAS)]
    collector.add_analysis(root, sweep, {label: label for label in labels})
    collector.add_probe(root, sweep, {run: label for label, run in runs.items()})
    folders = {run: label for label, run in runs.items()} | {
        Path(minilm_path()).name: label for label, run in extra_arms.items() if run is None
    }
    collector.add_scores(root, sweep, labelled(folders), 0)
    return collector


def m_results(root: Path, setup: dict, figures: Path) -> Collector | None:
    root = next(iter(seed_roots(root, "analysis/m/report.json")), None)
    if root is None:
        return None
    collector = delta_results("M", root, "m", setup, unigram_entropy(data_root(root)), {"mlm": "m_mlm"})
    collector.add_figure(root / "analysis" / "m" / "layer_curves.png", figures, "m_layer_curves.png")
    return collector


def m_collapsed_results(root: Path, setup: dict, figures: Path) -> Collector | None:
    root = next(iter(seed_roots(root, "analysis/m_lr1e-3/report.json")), None)
    if root is None:
        return None
    return delta_results("M-lr1e-3", root, "m_lr1e-3", setup, unigram_entropy(data_root(root)), {})


def mp_results(root: Path, setup: dict, figures: Path) -> Collector | None:
    root = next(iter(seed_roots(root, "analysis/mp/report.json")), None)
    if root is None:
        return None
    collector = delta_results("M-pretrained", root, "mp", setup, unigram_entropy(root, minilm_path()), {"minilm": None})
    collector.add_figure(root / "analysis" / "mp" / "layer_curves.png", figures, "mp_layer_curves.png")
    return collector


def seeded_results(experiment: str, roots: list[Path], setup: dict, prefix: str, arms: tuple) -> Collector:
    """An experiment whose arms (run PREFIX_ARM, analysed and fine-tuned as PREFIX) ran once per seed folder."""
    collector = Collector(experiment, setup, unigram_entropy(data_root(roots[0])), list(range(len(roots))))
    for index, seed_root in enumerate(roots):
        for arm in arms:
            collector.add_loss(arm, seed_root, f"{prefix}_{arm}")
        collector.add_analysis(seed_root, prefix, {arm: arm for arm in arms})
        collector.add_scores(seed_root, prefix, labelled({f"{prefix}_{arm}": arm for arm in arms}), index)
    return collector


def b1_results(root: Path, setup: dict, figures: Path) -> Collector | None:
    roots = seed_roots(root, "evaluate/b1")
    if not roots:
        return None
    collector = seeded_results("B1", roots, setup, "b1", PHASE_ARMS)
    collector.add_figure(roots[0] / "analysis" / "b1" / "layer_curves.png", figures, "b1_layer_curves.png")
    return collector


def b2e_results(root: Path, setup: dict, figures: Path) -> Collector | None:
    roots = seed_roots(root, "evaluate/b2e")
    if not roots:
        return None
    collector = seeded_results("B2-equal-budget", roots, setup, "b2e", ("cpt_clm_only", "cpt_mlm_only"))
    starts = [
        final_eval_loss(seed_root, "b1_mlm_only")
        for seed_root in roots
        if (seed_root / "pretrain" / "b1_mlm_only").exists()
    ]
    collector.data["start_validation_loss"] = {"mlm_only": starts}
    return collector


def b2_results(root: Path, setup: dict, figures: Path) -> Collector | None:
    if not (root / "pretrain" / "b2_scratch" / "log_history.json").exists():
        return None
    # Both arms read SmolLM2's vocabulary (the scratch arm takes the converted model's tokenizer).
    collector = Collector("B2", setup, unigram_entropy(root, root / "smollm2_encoder"), [0])
    collector.add_loss("from_smollm2", root, "b2_cpt")
    collector.add_loss("from_scratch", root, "b2_scratch")
    return collector


def u_results(root: Path, setup: dict) -> list[Collector]:
    """U at every masking ratio the sweep ran under `root`: "U" at the MLM arms' own 40%, "U, 15%" and so on."""
    found = []
    for folder in folders_of(root):
        for analysed in sorted((folder / "analysis").glob("u*_biphasic")):
            suffix = analysed.name.removeprefix("u").removesuffix("_biphasic").strip("_")
            ratio = int(suffix) / 100 if suffix else None
            name = "U" if ratio is None else f"U, {suffix}%"
            found.append(masking_results(folder, name, ratio, {**setup, "mlm_probability": ratio or 0.4}))
    return found


def masking_results(root: Path, name: str, ratio: float | None, setup: dict) -> Collector:
    collector = Collector(name, setup, unigram_entropy(data_root(root)), [0])
    suffix = "" if ratio is None else f"{round(100 * ratio)}"
    for method, runs in masking_runs(ratio).items():
        arms = {f"{method}_{unit}": run for unit, run in runs.items()}
        for arm, run in arms.items():
            collector.add_loss(arm, root, run)
            if method == "biphasic":
                collector.add_loss(arm, root, run + TOKEN_EVAL_SUFFIX, key="token_masked_validation_loss")
        collector.add_analysis(root, f"u{suffix}_{method}", {arm: arm for arm in arms})
        collector.add_scores(root, f"u{suffix}_{method}", labelled({run: arm for arm, run in arms.items()}), 0)
    collector.add_scores(root, f"u_{RANDOM_INIT}", labelled({f"u_{RANDOM_INIT}": RANDOM_INIT}), 0)
    # An arm that never ran at this ratio (MAE-LM's, when --methods left it out) has nothing to show.
    collector.data["arms"] = {arm: data for arm, data in collector.data["arms"].items() if data}
    return collector
