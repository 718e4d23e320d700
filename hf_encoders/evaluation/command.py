"""`hf-encoders evaluate` and its Python twin `evaluate()`: the fine-tuning protocol of *Should We Still Pretrain
Encoders with Masked Language Modeling?* (Gisserot-Boukhlef et al., 2025), over any checkpoints.

hf-encoders evaluate MODEL [MODEL ...] --task KIND:SOURCE [--task ...] --output_dir DIR
"""

import argparse
import logging
import sys
from pathlib import Path

from hf_encoders_cli import CommandParser

from ..model_folders import skipped_models_error, usable_models
from .finetune import pooling_of
from .grid import DEFAULT_LEARNING_RATES, DEFAULT_SEEDS, RESULTS_FILE, Protocol, read_results, run_grid
from .report import write_report
from .retrieval import RETRIEVAL_POOLING
from .tasks import KINDS, chance_score, load_task

logger = logging.getLogger(__name__)


def evaluate(
    models: list[str],
    tasks: list[str],
    output_dir: str | Path,
    protocol: Protocol | None = None,
    learning_rates=DEFAULT_LEARNING_RATES,
    seeds=DEFAULT_SEEDS,
    keep_checkpoints: bool = False,
    labels: list[str] | None = None,
) -> Path:
    """Fine-tune every model on every task at every rate and seed (what is not in results.jsonl yet), then write
    REPORT.md, results.json and the stability plots in `output_dir`. Returns REPORT.md's path. `labels` name the
    models in the report (default: their folder names)."""
    protocol = protocol or Protocol()
    if not models or not tasks:
        raise ValueError("evaluate needs at least one MODEL and one --task KIND:SOURCE.")
    if labels is not None and len(labels) != len(models):
        raise ValueError(f"--labels names {len(labels)} model(s) but {len(models)} MODEL(s) were given.")
    named = dict(zip(models, labels)) if labels else None
    models, fixes = usable_models(models)
    results = run_grid(models, tasks, output_dir, protocol, learning_rates, seeds, keep_checkpoints)
    if not results:
        raise ValueError(f"no run finished; the errors are in {Path(output_dir) / 'results.jsonl'}.")
    kinds = {task.split(":", 1)[0] for task in tasks}
    poolings = {model: heads_and_pooling(model, kinds, protocol.trust_remote_code) for model in models}
    chances = {task: chance_score(load_task(task)) for task in tasks if task.startswith("sc:")}
    report = write_report(results, Path(output_dir), protocol.identity(), poolings, named, chances)
    if fixes:  # after the others are evaluated: their runs are kept
        raise skipped_models_error(f"evaluated {len(models)} model(s) into {report}", fixes)
    return report


def heads_and_pooling(model: str, kinds: set[str], trust_remote_code: bool) -> str:
    parts = []
    if kinds - {"ir"}:
        parts.append(f"SC/TC/QA: {pooling_of(model, trust_remote_code)}")
    if "ir" in kinds:
        parts.append(f"IR: {RETRIEVAL_POOLING}")
    return "; ".join(parts)


def comma_separated(cast):
    def parse(text: str):
        try:
            return tuple(cast(item) for item in text.split(",") if item.strip())
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from error

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="hf-encoders evaluate",
        description="Fine-tune checkpoints with the protocol of 'Should We Still Pretrain Encoders with Masked "
        "Language Modeling?' (Gisserot-Boukhlef et al., 2025: rates x seeds, best rate on validation) and write "
        "REPORT.md, results.jsonl, results.json and stability plots. Ctrl-C stops it with every finished run kept.",
    )
    parser.add_argument("models", nargs="+", metavar="MODEL", help="checkpoint folders or Hub ids")
    parser.add_argument(
        "--task",
        dest="tasks",
        action="append",
        required=True,
        metavar="KIND:SOURCE",
        help=f"KIND is one of {', '.join(KINDS)}; SOURCE a folder with train.jsonl and validation.jsonl (optionally "
        "test.jsonl) or a preset (sc:sst2, sc:mnli, sc:qqp, tc:conll2003, qa:squad, qa:squad_v2, ir:msmarco)",
    )
    parser.add_argument(
        "--output_dir",
        required=True,
        type=Path,
        help="where results.jsonl, REPORT.md and the plots are written; a rerun skips the runs finished there",
    )
    parser.add_argument(
        "--labels", nargs="+", metavar="LABEL", help="names of the models in the report (default: folder names)"
    )
    parser.add_argument(
        "--learning_rates",
        type=comma_separated(float),
        default=DEFAULT_LEARNING_RATES,
        help=f"comma-separated; the best on validation is reported (default: {','.join(map(str, DEFAULT_LEARNING_RATES))})",
    )
    parser.add_argument(
        "--seeds",
        type=comma_separated(int),
        default=DEFAULT_SEEDS,
        help=f"comma-separated; a run per seed at every rate (default: {','.join(map(str, DEFAULT_SEEDS))})",
    )
    parser.add_argument("--max_steps", type=int, default=1000, help="capped at one epoch, as in the paper")
    parser.add_argument("--per_device_train_batch_size", type=int, default=32, help="fine-tuning batch size")
    parser.add_argument(
        "--warmup_ratio", type=float, default=0.1, help="share of the steps the learning rate warms up over"
    )
    parser.add_argument("--max_length", type=int, default=256, help="tokens per input (longer inputs are truncated)")
    parser.add_argument(
        "--trust_remote_code", action="store_true", help="run modelling code shipped by a checkpoint (ours need it)"
    )
    parser.add_argument("--keep_checkpoints", action="store_true", help="keep each run's fine-tuned model")
    precision = parser.add_mutually_exclusive_group()
    precision.add_argument("--bf16", action="store_true", help="fine-tune in bfloat16 mixed precision")
    precision.add_argument("--fp16", action="store_true", help="fine-tune in float16 mixed precision (GPU)")
    parser.add_argument("--use_cpu", action="store_true", help="train on the CPU even where a GPU is available")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.learning_rates or not args.seeds:
        raise ValueError("--learning_rates and --seeds each need at least one value, e.g. --seeds 0,1,2.")
    if args.max_steps < 1 or args.per_device_train_batch_size < 1 or not 0 <= args.warmup_ratio < 1:
        raise ValueError("--max_steps and --per_device_train_batch_size must be at least 1, --warmup_ratio in [0, 1).")
    overrides = {name: True for name in ("bf16", "fp16", "use_cpu") if getattr(args, name)}
    protocol = Protocol(
        max_steps=args.max_steps,
        batch_size=args.per_device_train_batch_size,
        warmup_ratio=args.warmup_ratio,
        max_length=args.max_length,
        trust_remote_code=args.trust_remote_code,
        training_overrides=overrides,
    )
    try:
        report = evaluate(
            args.models,
            args.tasks,
            args.output_dir,
            protocol,
            args.learning_rates,
            args.seeds,
            args.keep_checkpoints,
            labels=args.labels,
        )
    except KeyboardInterrupt:  # results.jsonl gains a line per finished run only: it holds every one of them
        finished = sum(record["status"] == "finished" for record in read_results(args.output_dir))
        print(
            f"\nhf-encoders evaluate: stopped. {args.output_dir / RESULTS_FILE} keeps the {finished} finished run(s); "
            "the same command again continues from there, skipping them.",
            file=sys.stderr,
        )
        return 130  # the shell's code for a run ended by Ctrl-C
    print(f"Wrote {report}")
    return 0
