"""U: the masking unit (token vs whole word vs SpanBERT span) for MLM and MAE-LM, fine-tuned on TC and QA, beside a
random-init encoder of the same shape.

    python -m experiments.masking_sweep --corpus /usr/share/doc/python3.11/html/_sources --output-dir runs/b1_s0 \
        --steps 1500 --mae-lm-steps 400
    python -m experiments.masking_sweep ... --mlm-probability 0.15 --methods biphasic   # SpanBERT's ratio

SpanBERT reports its gains on span-level tasks (QA, and entity tagging), so the arms are fine-tuned on those two of
the experiments' tasks. The MLM arms are B1's MLM-only arm (experiments/reproduce.py: the biphasic architecture in the
off-plateau setting of experiments/scan/SCAN.md) with `--masking` as the only difference; at its own 40% the token arm
is B1's own run when they share --output-dir, at another --mlm-probability every unit runs (experiment "U, 15%" and
so on). The MAE-LM arms are M's from-scratch setting with its paper's δ = 0; they are fine-tuned only off the unigram
plateau (REPORT.md, M). The random-init arm is the biphasic encoder as initialised, fine-tuned the same way: the floor
every arm must clear. Steps already done in --output-dir are skipped; `python -m experiments.reproduce --only report`
collects the arms into a results file.
"""

import sys
from pathlib import Path

from hf_encoders.data.masking_units import MASKING_UNITS

from .options import MASKING_METHODS, masking_parser
from .report.masking import RANDOM_INIT, TOKEN_EVAL_SUFFIX, masking_runs, ratio_suffix
from .report.masking import U_KINDS as KINDS
from .reproduce import (
    PHASES,
    SCRATCH_FINETUNE_RATE,
    Runner,
    biphasic_arm,
    mae_lm_arm,
    on_unigram_plateau,
    prepare,
    random_init,
)


def masking_arm(runner: Runner, method: str, masking: str):
    ratio = runner.settings.mlm_probability
    name = masking_runs(ratio)[method][masking]  # at 40%, biphasic's token arm is B1's MLM-only run, the same command
    if method == "biphasic":
        options = ["--masking", masking] if masking != "token" else []
        if ratio is not None:
            options += ["--mlm_probability", str(ratio)]
        return biphasic_arm(runner, name, "--phases", PHASES["mlm_only"], *options)
    return mae_lm_arm(
        runner, name, "--masking", masking,
        steps=runner.settings.mae_lm_steps, learning_rate=runner.settings.mae_lm_learning_rate,
    )  # fmt: skip


def token_masked_validation(runner: Runner, unit: str, model: Path) -> Path:
    """A biphasic arm's held-out MLM loss under token masking: each unit's own validation loss answers a different
    question (40% of tokens in spans are harder to predict than 40% scattered), this one the same for every unit. One
    step at a learning rate of 0 moves no weight, then evaluates the held-out documents and masks of the token arm
    (the same --seed draws both)."""
    ratio = runner.settings.mlm_probability
    options = ["--mlm_probability", str(ratio)] if ratio is not None else []
    return runner.pretrain(
        f"{masking_runs(ratio)['biphasic'][unit]}{TOKEN_EVAL_SUFFIX}", "--method", "biphasic", "--model_name_or_path",
        str(model), "--phases", PHASES["mlm_only"], *options, steps=1, learning_rate=0.0,
    )  # fmt: skip


def masking_sweep(runner: Runner, methods: list[str]) -> None:
    """Pre-train, analyse and fine-tune every (method, unit) arm and the random-init floor; the report reads them."""
    suffix, units = ratio_suffix(runner.settings.mlm_probability), runner.settings.units
    for method in methods:
        arms = {
            f"{method}_{unit}": lambda method=method, unit=unit: masking_arm(runner, method, unit) for unit in units
        }
        models = dict(zip(arms, runner.concurrently(*arms.values())))
        runner.analyze(f"u{suffix}_{method}", models)
        validated = models.values()
        if method == "biphasic":  # judged on the same task for every unit
            validated = [token_masked_validation(runner, unit, models[f"biphasic_{unit}"]) for unit in units]
        if on_unigram_plateau(runner.root, [path.name for path in validated]):
            print(f"{method}: on the unigram plateau at this budget; not fine-tuned (REPORT.md, M).")
            continue
        runner.evaluate(f"u{suffix}_{method}", models, kinds=KINDS, learning_rates=(SCRATCH_FINETUNE_RATE,))
    runner.evaluate(
        f"u_{RANDOM_INIT}", {RANDOM_INIT: random_init(runner)}, kinds=KINDS, learning_rates=(SCRATCH_FINETUNE_RATE,)
    )


def main(argv: list[str] | None = None) -> int:
    settings = masking_parser().parse_args(argv)
    settings.units = settings.units or list(MASKING_UNITS)
    if unknown := set(settings.units) - set(MASKING_UNITS):
        raise SystemExit(f"--units: unknown {sorted(unknown)}; choose from {', '.join(MASKING_UNITS)}")
    methods = [method.strip() for method in settings.methods.split(",")]
    if unknown := set(methods) - set(MASKING_METHODS):
        raise SystemExit(f"--methods: unknown {sorted(unknown)}; choose from {', '.join(MASKING_METHODS)}")
    runner = Runner(settings)
    prepare(runner)
    runner.experiment = "U"  # names its steps in timings.json
    masking_sweep(runner, methods)
    print("Done: `python -m experiments.reproduce --only report --output-dir <its parent>` collects it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
