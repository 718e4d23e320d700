"""Acceptance of the small-run defaults (issue 48): every method pre-trained from scratch with `hf-encoders pretrain`'s
own settings on a corpus the tests never saw, then measured against the unigram plateau, analysed and fine-tuned.

    python -m experiments.small_run_acceptance prepare --root /tmp/acceptance    # corpus, held-out pages, task
    python -m experiments.small_run_acceptance pretrain --root /tmp/acceptance   # every run (--runs: some)
    python -m experiments.small_run_acceptance downstream --root /tmp/acceptance # analyze, evaluate

The corpus is Python 3.11's documentation (experiments/corpus.py) less its language reference, which the package's
embedded corpus holds. Every third page (experiments/tasks.py's `task_pages`) is held out: its text is the validation
file, and its paragraphs make the task (which part of the documentation a paragraph comes from, 4 balanced classes).
Each run passes the CLI no learning rate, warm-up, schedule or vocabulary, only the batch and block of the budget
table in docs/pretraining.md, which the small-run settings set too (one tiny mlm run Trainer's 8 x 128 instead); TaCL
continues the tiny mlm model with its own defaults. A rerun skips the runs, analysis and fine-tuning already finished
under --root. The results go to experiments/scan/small_run_acceptance.json.
"""

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
RESULTS = HERE / "scan" / "small_run_acceptance.json"  # results/ holds the report's experiments only
PER_CLASS = {"train": 375, "validation": 70, "test": 70}  # the smallest class (C API) has 515 held-out paragraphs
HELD_OUT_CHARACTERS = 2000  # of each held-out page: validation blocks enough for a stable loss, evaluated quickly
# The batch and block of the budget table in docs/pretraining.md (the small-run settings' own), and Trainer's.
BUDGET_TABLE = ("--per_device_train_batch_size", "32", "--block_size", "64")
TRAINER_BATCH = ("--per_device_train_batch_size", "8", "--block_size", "128")
PAPER_DECODER = "decoder_locality_slope=0,decoder_value_init_std=0.02"
# (name, method, --model_size, steps, the run it continues, batch and block); the budgets of the table.
RUNS = [
    ("mlm-tiny", "mlm", "tiny", 3000, None, BUDGET_TABLE),
    ("biphasic-tiny", "biphasic", "tiny", 1500, None, BUDGET_TABLE),
    ("tacl-tiny", "tacl", None, 600, "mlm-tiny", BUDGET_TABLE),
    ("mlm-small", "mlm", "small", 600, None, BUDGET_TABLE),
    ("biphasic-small", "biphasic", "small", 600, None, BUDGET_TABLE),
    ("mae_lm-tiny", "mae_lm", "tiny", 1500, None, BUDGET_TABLE),
    # The paper's decoder, without the two options of MAE-LM's tiny size.
    ("mae_lm-tiny-paper-decoder", "mae_lm", "tiny", 1500, None, (*BUDGET_TABLE, "--config_overrides", PAPER_DECODER)),
    ("mlm-tiny-8x128", "mlm", "tiny", 3000, None, TRAINER_BATCH),
]
# The same config and tokenizer as the run, fresh weights: mlm's post-LN BERT, biphasic's pre-LN rotary encoder.
UNTRAINED = {
    "untrained-mlm-tiny": "mlm-tiny",
    "untrained-mlm-small": "mlm-small",
    "untrained-biphasic-tiny": "biphasic-tiny",
    "untrained-biphasic-small": "biphasic-small",
}
FINE_TUNING = [
    "--learning_rates", "1e-4,5e-4", "--seeds", "0,1,2,3", "--max_steps", "300",
    "--per_device_train_batch_size", "8", "--max_length", "128",
]  # fmt: skip


def prepare(root: Path, sources: Path) -> None:
    from .corpus import read_sources
    from .tasks import TOPICS, task_pages, truncated

    files = [file for file in read_sources(sources) if file.topic != "reference"]
    held_out, training = task_pages(files)
    root.mkdir(parents=True, exist_ok=True)
    write_jsonl(root / "train.jsonl", [{"text": page_text(file)} for file in training])
    write_jsonl(root / "held_out.jsonl", [{"text": page_text(file)[:HELD_OUT_CHARACTERS]} for file in held_out])
    rng = random.Random(0)
    per_topic: dict[str, list[str]] = {}
    for file in held_out:
        if file.topic in TOPICS:
            per_topic.setdefault(TOPICS[file.topic], []).extend(truncated(p).text for p in file.paragraphs)
    drawn = {label: rng.sample(texts, sum(PER_CLASS.values())) for label, texts in per_topic.items()}
    start = 0
    for split, size in PER_CLASS.items():
        rows = [
            {"text": text, "label": label} for label, texts in drawn.items() for text in texts[start : start + size]
        ]
        rng.shuffle(rows)
        write_jsonl(root / "topic" / f"{split}.jsonl", rows)
        start += size
    print(f"{len(training)} training pages, {len(held_out)} held out; task classes {sorted(drawn)}")


def page_text(file) -> str:
    return "\n\n".join(paragraph.text for paragraph in file.paragraphs)


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def hf_encoders(arguments: list[str], log: Path) -> dict:
    """Runs `hf-encoders ARGUMENTS` into `log`; its wall and CPU seconds."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    with log.open("w") as output:
        subprocess.run(
            [sys.executable, "-m", "hf_encoders", *arguments], stdout=output, stderr=subprocess.STDOUT, check=True
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"wall_s": round(time.monotonic() - start, 1), "cpu_s": round(cpu, 1)}


def pretrain(
    root: Path, name: str, method: str, size: str | None, steps: int, continues: str | None, batch: tuple
) -> dict:
    output = root / name
    timing = root / f"{name}.timing.json"
    if not timing.exists():
        start = ["--model_name_or_path", str(root / continues)] if continues else ["--model_size", size]
        every = str(steps // 4)
        arguments = ["pretrain", "--method", method, *start, "--corpus", str(root / "train.jsonl")]
        arguments += ["--validation_file", str(root / "held_out.jsonl"), "--output_dir", str(output)]
        arguments += ["--max_steps", str(steps), *batch, "--eval_strategy", "steps", "--eval_steps", every]
        arguments += ["--diagnostics_steps", every, "--save_strategy", "no", "--seed", "0"]
        timing.write_text(json.dumps(hf_encoders(arguments, root / f"{name}.log")))
    return {
        "method": method,
        "size": size or "tiny",
        "steps": steps,
        "continues": continues,
        "batch_and_block": " ".join(batch),
        **json.loads(timing.read_text()),
    }


def encoder_folder(root: Path, name: str) -> Path:
    return root / name / "student" if name.startswith("tacl") else root / name


def save_untrained(root: Path, name: str, shape_of: str) -> None:
    """A copy of run `shape_of`'s folder (config, code, tokenizer) with freshly initialised weights."""
    if (root / name / "model.safetensors").exists():
        return
    import shutil

    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM

    shutil.copytree(
        root / shape_of,
        root / name,
        ignore=shutil.ignore_patterns("*.png", "*.bin", "*.safetensors", "log_history.json", "README.md"),
    )
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(root / name, trust_remote_code=True)
    AutoModelForMaskedLM.from_config(config, trust_remote_code=True).save_pretrained(root / name)


def plateau(root: Path, name: str) -> dict:
    """H of the held-out pages with the model's tokenizer, and the loss on them of the training pages' token
    frequencies (add-one smoothed): what a model that reads no context scores; for mlm also the loss of one that
    reads only the token at the masked position (plateau_scan.context_free_floor)."""
    import math

    from transformers import AutoTokenizer

    from hf_encoders.analysis import token_counts, unigram_entropy

    from .plateau_scan import context_free_floor

    tokenizer = AutoTokenizer.from_pretrained(encoder_folder(root, name))
    read = lambda file: [json.loads(line)["text"] for line in (root / file).open()]  # noqa: E731
    held_out, seen = token_counts(tokenizer, read("held_out.jsonl")), token_counts(tokenizer, read("train.jsonl"))
    total = sum(seen.values()) + len(tokenizer)
    cross = -sum(n * math.log((seen[t] + 1) / total) for t, n in held_out.items()) / sum(held_out.values())
    found = {"unigram_entropy": round(unigram_entropy(held_out), 3), "unigram_cross_entropy": round(cross, 3)}
    if name.startswith("mlm"):  # BERT's 80/10/10 masking: what reading only the shown token is worth
        found["context_free_floor"] = round(context_free_floor(held_out, len(tokenizer)), 3)
    return found


def curves(root: Path, name: str) -> dict:
    """By step, from the run's log_history.json: every evaluation's eval_* losses, and the training diagnostics of
    the top layer (effective rank, self-similarity)."""
    history = json.loads((root / name / "log_history.json").read_text())
    losses: dict[int, dict] = {}
    for entry in history:  # a step's training log, evaluation and summary are separate entries
        losses.setdefault(entry["step"], {}).update(
            {key: round(value, 3) for key, value in entry.items() if key.startswith("eval_") and "loss" in key}
        )
    diagnostics = {
        e["step"]: [e["effective_rank"], round(e["self_similarity"], 3)] for e in history if "self_similarity" in e
    }
    return {"validation": {step: found for step, found in losses.items() if found}, "rank_self_similarity": diagnostics}


def load_results() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {"runs": {}}


def pretrain_all(root: Path, names: list[str]) -> None:
    results = load_results()
    for name, *spec in (spec for spec in RUNS if spec[0] in names):
        print(f"pretrain {name}", flush=True)
        results["runs"].setdefault(name, {}).update(pretrain(root, name, *spec))  # keeps the analysis of a rerun
        log = (root / f"{name}.log").read_text()
        results["runs"][name]["collapse_warnings"] = log.count("top layer has collapsed")
        results["runs"][name].update(curves(root, name))
        results["runs"][name].update(plateau(root, name))
        write(results)


def downstream(root: Path) -> None:
    """The untrained baselines, then `analyze` and `evaluate` of every finished run and baseline."""
    results = load_results()
    for name, shape_of in UNTRAINED.items():
        save_untrained(root, name, shape_of)
    models = [name for name, *_ in RUNS if name in results["runs"]] + list(UNTRAINED)
    folders = [str(encoder_folder(root, name)) for name in models]
    if not (root / "analysis" / "report.json").exists():
        print("analyze", flush=True)
        analysis = ["analyze", *folders, "--labels", *models, "--corpus", str(root / "held_out.jsonl")]
        hf_encoders([*analysis, "--output_dir", str(root / "analysis")], root / "analysis.log")
    for report in json.loads((root / "analysis" / "report.json").read_text())["models"]:
        entry = results["runs"].setdefault(report["model"], {})
        entry.update(
            effective_rank=report["effective_rank"][-1], self_similarity=round(report["self_similarity"][-1], 3)
        )
        entry["hidden_size"] = report["hidden_size"]
    print("evaluate", flush=True)
    evaluation = ["evaluate", *folders, "--labels", *models, "--task", f"sc:{root / 'topic'}", *FINE_TUNING]
    hf_encoders([*evaluation, "--trust_remote_code", "--output_dir", str(root / "evaluate")], root / "evaluate.log")
    results["fine_tuning"] = {"arguments": FINE_TUNING, "chance": 0.25}
    results["fine_tuning"]["results"] = json.loads((root / "evaluate" / "results.json").read_text())
    write(results)


def write(results: dict) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    from .corpus import DOCUMENTATION_SOURCES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["prepare", "pretrain", "downstream"])
    parser.add_argument("--root", type=Path, required=True, help="where the corpus, runs and fine-tuning go")
    parser.add_argument("--sources", type=Path, default=DOCUMENTATION_SOURCES)
    parser.add_argument("--runs", nargs="+", default=[name for name, *_ in RUNS], help="the runs to make (default all)")
    args = parser.parse_args(argv)
    if args.stage == "prepare":
        prepare(args.root, args.sources)
    elif args.stage == "pretrain":
        pretrain_all(args.root, args.runs)
    else:
        downstream(args.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
