"""The experiments at GPU scale, in one device call of under 8 minutes: the plan, what the call carries, and the steps.

    python -m experiments.gpu prepare    # here, on CPU: corpus, tokenizer and task folders into experiments/runs/gpu
    bash experiments/gpu.sh --dry-run    # anywhere: the plan, the commands' options checked, the carried size
    bash experiments/gpu.sh              # on the GPU: parts i and ii; results files under $OUT/results
    bash experiments/gpu.sh --only iii   # B1 and B2 at equal budget, three pre-training seeds: a call of its own

The device call: `bash experiments/gpu.sh` with carry ["experiments/runs/gpu", ".whl"] and a time limit of 540 s (the
steps' limits add up to 435 s; installing the wheels and the import check take about half a minute more).
Each part's runs go under $OUT/runs (a device call returns what is under $OUT); each part ends with a collect step
that writes its results files (experiment "…, GPU") into $OUT/results and figures into $OUT/figures, whatever became
of its runs, so a part cut by its time limit still returns what finished. Copy them into experiments/results/ and
experiments/figures/ and regenerate REPORT.md (`python -m experiments.report`).

Sizing, from bench/README.md's H200 numbers at base size (12 x 768, batch 32 x 512): BERT's MLM step runs 293k tokens/s,
MAE-LM's at 15% 180k (0.16 of the GEMM peak counted as useful FLOPs), biphasic MLM 236k. The encoders here are 12-20
times smaller per token (12 x 256 with a 4-layer decoder: about 67 MFLOP a token forward and backward, against MAE-LM
base's 690), but small matrices run at a fraction of base size's MFU: four arms side by side are budgeted at 200k
tokens/s each, a quarter of what pure FLOP scaling promises. Fine-tuning is 75 steps of 16 x 128 per run: budgeted at
5 s a run with its start-up, run by one `hf-encoders evaluate` per model side by side.
"""

import argparse
import contextlib
import os
import shlex
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
PREPARED = HERE / "runs" / "gpu"  # the corpus, tokenizer and task folders the call carries
CARRY_LIMIT = 64 * 2**20  # what one device call carries, in bytes
WHEELS = HERE.parent / ".whl"

# Part i, M in the paper's layout: a post-LN encoder with a 4-layer decoder (MAE-LM's base: 12 x 768 and 4 x 768).
# 12 x 256 keeps the paper's depths at a width this call can train; the peak rate is below the 1e-3 at which every
# post-LN arm collapsed at 4 x 256 (REPORT.md, M), with 10% warm-up.
M_LAYERS = "hidden_size=256,num_hidden_layers=12,num_attention_heads=4,intermediate_size=1024"
M_OPTIONS = [
    *("--steps", "1000", "--batch-size", "128", "--layers", M_LAYERS, "--decoder-layers", "4"),
    *("--mae-lm-learning-rate", "5e-4", "--skip-collapsed-sweep", "--parallel", "4"),
]
# Parts ii and iii: the biphasic encoder at 6 x 384 (grouped-query attention, 2 key-value heads), WSD at 1e-3, as B1.
B_LAYERS = "hidden_size=384,num_hidden_layers=6,num_attention_heads=6,intermediate_size=1536"
B_OPTIONS = ["--steps", "1000", "--batch-size", "128", "--layers", B_LAYERS, "--continue-steps", "300"]
PRETRAINING_SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Step:
    """Commands run side by side (each a module of experiments with its options), under one time limit."""

    part: str
    name: str
    limit_s: int
    commands: tuple[tuple[str, ...], ...]
    settles: str = ""
    scale: str = ""  # its budget beside the paper's


def plan(out: Path, parts: list[str]) -> list[Step]:
    """The steps of `parts`, in the order that settles most first; runs under OUT/runs, results under OUT/results."""
    runs, results = out / "runs", out / "results"
    collected = ["--results-dir", str(results), "--figures-dir", str(out / "figures"), "--label", "GPU"]
    m_root, b_root = str(runs / "m"), runs / "b"
    steps = {
        "i": [
            Step(
                "i",
                "M from scratch: δ = 0 / 0.5 / 1 and BERT of the same size, 1,000 steps x 128 x 128 (16.4M tokens "
                "each), analysed, probed in both views, fine-tuned on sc/tc/qa/ir x 3 seeds",
                230,
                (("reproduce", "--only", "M", "--output-dir", m_root, *M_OPTIONS),),
                "M1 and M2 from scratch, void on CPU: whether the MLM control leaves the plateau in this layout, and "
                "then whether MAE-LM's encoder does",
                "16.4M tokens an arm, 5 times the CPU runs'; MAE-LM base trained 1.3e11 (8,000 times more) at 12 x 768",
            ),
            Step("i", "collect M", 25, (("reproduce", "--only", "report", "--collect", "M", "--output-dir", m_root, *M_OPTIONS, *collected),)),
        ],
        "ii": [
            Step(
                "ii",
                "U at 40% and at 15% side by side: token against span (biphasic, 1,000 steps x 128 x 128, 16.4M tokens "
                "each; at 40% the token arm is B1's MLM-only arm of seed 0), and the random-init floor, fine-tuned on "
                "tc/qa x 3 seeds",
                160,
                tuple(
                    (
                        "masking_sweep", "--output-dir", str(b_root / folder), *B_OPTIONS[:6], "--methods", "biphasic",
                        "--units", "token,span", "--parallel", "2", *ratio,
                    )
                    for folder, ratio in (("b1_s0", ()), ("u15", ("--mlm-probability", "0.15")))
                ),
                "U, void on CPU (the span arm stayed on the plateau): token against span at SpanBERT's 15% and at 40%",
                "16.4M tokens an arm, 5 times the CPU runs'; the textbook gives no SpanBERT budget",
            ),
            Step("ii", "collect U", 20, (("reproduce", "--only", "report", "--collect", "U", "--output-dir", str(b_root), *B_OPTIONS, *collected),)),
        ],
        "iii": [
            Step(
                "iii",
                "B1 and B2 at equal budget, pre-training seeds 0 / 1 / 2 side by side: CLM → MLM, MLM, CLM (1,000 "
                "steps x 128 x 128), CLM and MLM continued 300 steps; every arm fine-tuned over B1's 5 rates, one "
                "fine-tuning seed per pre-training seed",
                390,
                tuple(
                    (
                        "reproduce", "--only", "B1,B2-equal-budget", "--seed", str(seed), "--output-dir",
                        str(b_root / f"b1_s{seed}"), *B_OPTIONS, "--finetune-seeds", "1", "--parallel", "3",
                    )
                    for seed in PRETRAINING_SEEDS
                ),
                "B1's stability (Fig. 5: CLM-only never fine-tuned on CPU) and B1 / B2 at equal budget over three "
                "pre-training seeds, intervals over the seeds",
                "16.4M tokens an arm (+4.9M continued); paper 004 trained 1.0e11 (6,000 times more) at 610M parameters",
            ),
            Step(
                "iii",
                "collect B1 and B2 at equal budget",
                30,
                (("reproduce", "--only", "report", "--collect", "B1,B2-equal-budget", "--output-dir", str(b_root), *B_OPTIONS, "--finetune-seeds", "1", *collected),),
            ),
        ],
    }  # fmt: skip
    return [step for part in parts for step in steps[part]]


def module_parser(module: str) -> argparse.ArgumentParser:
    """The option parser of experiments.MODULE."""
    from .options import build_parser, masking_parser

    return build_parser() if module == "reproduce" else masking_parser()


def check(steps: list[Step]) -> None:
    """Every command's options parse as its script reads them: a misspelt option fails here, not on the device."""
    for step in steps:
        for module, *options in step.commands:
            try:
                module_parser(module).parse_args(options)
            except SystemExit:
                raise SystemExit(f"{step.name}: `{module}` refuses its options {shlex.join(options)}") from None


def carried_bytes() -> int:
    return sum(
        path.stat().st_size
        for root in (PREPARED, WHEELS)
        if root.exists()
        for path in root.rglob("*")
        if path.is_file()
    )


def print_plan(steps: list[Step], out: Path) -> None:
    total = sum(step.limit_s for step in steps)
    print(f"plan (results under {out}/results; at most {total} s, {total / 60:.1f} min):")
    for step in steps:
        print(f"  [{step.part}] {step.name} (at most {step.limit_s} s)")
        if step.settles:
            print(f"      settles: {step.settles}")
        if step.scale:
            print(f"      scale: {step.scale}")
        for module, *options in step.commands:
            print(f"      python -m experiments.{module} {shlex.join(options)}")
    size = carried_bytes()
    prepared = (PREPARED / "corpus.jsonl").exists() and (PREPARED / "tokenizer").exists()
    print(
        f"carried: {PREPARED.relative_to(HERE.parent)} ({'prepared' if prepared else 'not prepared here: run `python -m experiments.gpu prepare`'}) "
        f"and .whl/, {size / 2**20:.1f} MiB of {CARRY_LIMIT / 2**20:.0f}"
    )
    if size > CARRY_LIMIT:
        raise SystemExit(f"the carried folders hold {size / 2**20:.1f} MiB, more than a device call carries")


def prepare() -> None:
    """The corpus (pre-training pages), task folders (held-out pages) and tokenizer every part reads, built here on CPU
    once: the device call carries them, and each part's seed folders link to them."""
    from .reproduce import Runner, build_parser, tokenizer
    from .reproduce import prepare as prepare_runs

    runner = Runner(build_parser().parse_args(["--output-dir", str(PREPARED)]))
    prepare_runs(runner)
    tokenizer(runner)
    print(f"Prepared {PREPARED} ({carried_bytes() / 2**20:.1f} MiB with .whl/)")


def link_prepared(steps: list[Step]) -> None:
    """Each output folder of the plan starts with links to the prepared corpus, tasks and tokenizer, so that no part
    builds them again on the device."""
    for step in steps:
        for _, *options in step.commands:
            folder = Path(options[options.index("--output-dir") + 1])
            folder.mkdir(parents=True, exist_ok=True)
            for name in ("corpus.jsonl", "tasks", "tokenizer"):
                if not (folder / name).exists():
                    (folder / name).symlink_to(PREPARED / name)


def run(steps: list[Step], out: Path) -> int:
    """Each step's commands side by side under its time limit, logs under OUT/logs; a step cut or failed does not stop
    the next (each part's collect step returns what finished). The status is 1 if any step failed."""
    import subprocess

    if not (PREPARED / "corpus.jsonl").exists():
        raise SystemExit(f"{PREPARED} is not prepared: run `python -m experiments.gpu prepare` and carry it.")
    link_prepared(steps)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    status = 0
    for index, step in enumerate(steps):
        print(f"== [{step.part}] {step.name}", flush=True)
        logs = [out / "logs" / f"{index:02d}_{number}.log" for number in range(len(step.commands))]
        # Each command in a session of its own: at the time limit its whole group goes, the pre-training and
        # fine-tuning processes it started included, so that the next step has the GPU to itself.
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", f"experiments.{module}", *options],
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            for (module, *options), log in zip(step.commands, logs)
        ]
        deadline = time.monotonic() + step.limit_s
        codes = [stopped(process, deadline) for process in processes]
        if any(codes):
            status = 1
            print(f"   ended with {codes} ({TIMED_OUT}: its time limit); see {', '.join(map(str, logs))}", flush=True)
    return status


TIMED_OUT = 124


def stopped(process, deadline: float) -> int:
    """The process's exit status, or TIMED_OUT once its group has been stopped at `deadline`."""
    import subprocess

    try:
        return process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for signal_number, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal_number)
            try:
                process.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        return TIMED_OUT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("prepare", "plan", "run"))
    parser.add_argument("--only", default="i,ii", help="comma-separated parts: i, ii, iii (default i,ii: one call)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/hf-encoders-experiments"), help="the device's $OUT")
    settings = parser.parse_args(argv)
    parts = [part.strip() for part in settings.only.split(",")]
    if unknown := set(parts) - {"i", "ii", "iii"}:
        raise SystemExit(f"--only: unknown parts {sorted(unknown)}; choose from i, ii, iii")
    if settings.command == "prepare":
        prepare()
        return 0
    steps = plan(settings.out, parts)
    check(steps)
    print_plan(steps, settings.out)
    return run(steps, settings.out) if settings.command == "run" else 0


if __name__ == "__main__":
    sys.exit(main())
