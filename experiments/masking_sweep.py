"""U: the masking unit (token vs whole word vs SpanBERT span) for MLM and MAE-LM, fine-tuned on TC and QA.

    python -m experiments.masking_sweep --corpus /usr/share/doc/python3.11/html/_sources --output-dir runs/b1_s0 \
        --steps 1500 --mae-lm-steps 400 --seeds 3

SpanBERT reports its gains on span-level tasks (QA, and entity tagging), so the arms are fine-tuned on those two of
the experiments' tasks. The MLM arms are B1's MLM-only arm (experiments/reproduce.py: the biphasic architecture in the
off-plateau setting of experiments/scan/SCAN.md, 40% masking) with `--masking` as the only difference, so its token
arm is B1's own run when they share --output-dir. The MAE-LM arms are M's from-scratch setting with its paper's δ = 0;
they are read only where they are off the unigram plateau (REPORT.md, M): the table says when they are not, and they
are then not fine-tuned, as in M. Steps already done in --output-dir are skipped; REPORT.md's U section tables
the arms (`reproduce.py --only report`).
"""

import sys
from pathlib import Path

from hf_encoders.data.masking_units import MASKING_UNITS

from .report.masking import MASKING_RUNS, TOKEN_EVAL_SUFFIX
from .report.masking import U_KINDS as KINDS
from .reproduce import PHASES, Runner, biphasic_arm, common_parser, mae_lm_arm, on_unigram_plateau, prepare

METHODS = ("biphasic", "mae_lm")
FINETUNE_RATE = 3e-4  # the from-scratch experiments' fine-tuning rate (REPORT.md, set-up)


def masking_arm(runner: Runner, method: str, masking: str):
    name = MASKING_RUNS[method][masking]  # biphasic's token arm is B1's MLM-only run, the same command
    if method == "biphasic":
        return biphasic_arm(
            runner, name, "--phases", PHASES["mlm_only"], *(["--masking", masking] if masking != "token" else [])
        )
    return mae_lm_arm(
        runner, name, "--masking", masking,
        steps=runner.settings.mae_lm_steps, learning_rate=runner.settings.mae_lm_learning_rate,
    )  # fmt: skip


def token_masked_validation(runner: Runner, unit: str, model: Path) -> Path:
    """A biphasic arm's held-out MLM loss under token masking: each unit's own validation loss answers a different
    question (40% of tokens in spans are harder to predict than 40% scattered), this one the same for every unit. One
    step at a learning rate of 0 moves no weight, then evaluates the held-out documents and masks of B1's token arm
    (the same --seed draws both)."""
    return runner.pretrain(
        f"{MASKING_RUNS['biphasic'][unit]}{TOKEN_EVAL_SUFFIX}", "--method", "biphasic", "--model_name_or_path",
        str(model), "--phases", PHASES["mlm_only"], steps=1, learning_rate=0.0,
    )  # fmt: skip


def masking_sweep(runner: Runner, methods: list[str]) -> None:
    """Pre-train, analyse and fine-tune every (method, unit) arm; REPORT.md's U section reads them."""
    for method in methods:
        models = {f"{method}_{unit}": masking_arm(runner, method, unit) for unit in MASKING_UNITS}
        runner.analyze(f"u_{method}", models)
        validated = models.values()
        if method == "biphasic":  # judged on the same task for every unit
            validated = [token_masked_validation(runner, unit, models[f"biphasic_{unit}"]) for unit in MASKING_UNITS]
        if on_unigram_plateau(runner.root, [path.name for path in validated]):
            print(f"{method}: on the unigram plateau at this budget; not fine-tuned (REPORT.md, M).")
            continue
        seeds = runner.settings.seeds
        runner.evaluate(f"u_{method}", models, kinds=KINDS, learning_rates=(FINETUNE_RATE,), seeds=seeds)


def main(argv: list[str] | None = None) -> int:
    parser = common_parser(__doc__.splitlines()[0])
    parser.add_argument("--mae-lm-learning-rate", type=float, default=3e-4)
    parser.add_argument(
        "--mae-lm-steps", type=int, help="the MAE-LM arms' steps (default --steps): 400 show M's plateau for less"
    )
    parser.add_argument("--seeds", type=int, default=3, help="fine-tuning seeds per arm and task")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ", ".join(METHODS))
    settings = parser.parse_args(argv)
    methods = [method.strip() for method in settings.methods.split(",")]
    if unknown := set(methods) - set(METHODS):
        raise SystemExit(f"--methods: unknown {sorted(unknown)}; choose from {', '.join(METHODS)}")
    runner = Runner(settings)
    prepare(runner)
    runner.experiment = "U"  # names its steps in timings.json
    masking_sweep(runner, methods)
    print("Done: `python -m experiments.reproduce --only report --steps 1500 --output-dir <its parent>` tables it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
