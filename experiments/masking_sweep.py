"""U: the masking unit (token vs whole word vs SpanBERT span) for MLM and MAE-LM, fine-tuned on TC and QA.

    python experiments/masking_sweep.py --corpus /usr/share/doc/python3.11/html/_sources --output-dir runs/b1_s0 \
        --steps 1500 --seeds 3

SpanBERT reports its gains on span-level tasks (QA, and entity tagging), so the arms are fine-tuned on those two of
the experiments' tasks. The MLM arms are B1's MLM-only arm (experiments/reproduce.py: the biphasic architecture in the
off-plateau setting of experiments/scan/SCAN.md, 40% masking) with `--masking` as the only difference, so its token
arm is B1's own run when they share --output-dir. The MAE-LM arms are M's from-scratch setting with its paper's δ = 0;
they are read only where they are off the unigram plateau (REPORT.md, M): the table says when they are not, and they
are then not fine-tuned, as in M. Steps already done in --output-dir are skipped; prints the table for
experiments/REPORT.md.
"""

import sys

from report import markdown_table, on_unigram_plateau, score_cells, scores
from reproduce import SCRATCH_LAYERS, Runner, biphasic_arm, build_parser, prepare, tokenizer

from hf_encoders.data.masking_units import MASKING_UNITS

KINDS = ["tc", "qa"]
METHODS = ("biphasic", "mae_lm")
FINETUNE_RATE = 3e-4  # the from-scratch experiments' fine-tuning rate (REPORT.md, set-up)


def masking_arm(runner: Runner, method: str, masking: str):
    if method == "biphasic":
        if masking == "token":  # B1's MLM-only arm, the same command
            return biphasic_arm(runner, "b1_mlm_only", "--phases", "mlm:1.0")
        return biphasic_arm(runner, f"u_biphasic_{masking}", "--phases", "mlm:1.0", "--masking", masking)
    return runner.pretrain(
        f"u_mae_lm_{masking}", "--method", "mae_lm", "--masking", masking, *tokenizer(runner),
        "--model_size", "small", "--config_overrides", f"{SCRATCH_LAYERS},decoder_num_hidden_layers=2",
        steps=runner.settings.steps, learning_rate=runner.settings.mae_lm_learning_rate,
    )  # fmt: skip


def masking_sweep(runner: Runner, methods: list[str]) -> list[str]:
    """Pre-train, analyse and fine-tune every (method, unit) arm; the report's lines."""
    lines = []
    for method in methods:
        models = {f"{method}_{unit}": masking_arm(runner, method, unit) for unit in MASKING_UNITS}
        runner.analyze(f"u_{method}", models)
        if on_unigram_plateau(runner.root, [path.name for path in models.values()]):
            lines.append(f"{method}: on the unigram plateau at this budget; not fine-tuned (REPORT.md, M).")
            continue
        seeds = runner.settings.seeds
        runner.evaluate(f"u_{method}", models, kinds=KINDS, learning_rates=(FINETUNE_RATE,), seeds=seeds)
        table = scores(runner.root, f"u_{method}")
        rows = [[unit, *score_cells(table, path.name, KINDS)] for unit, path in zip(MASKING_UNITS, models.values())]
        lines += ["", f"{method} (test split, mean ± std over {seeds} seeds)", ""]
        lines += markdown_table(["masking", *KINDS], rows)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.description = __doc__.splitlines()[0]
    parser.add_argument("--mae-lm-learning-rate", type=float, default=3e-4)
    parser.add_argument("--seeds", type=int, default=3, help="fine-tuning seeds per arm and task")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ", ".join(METHODS))
    settings = parser.parse_args(argv)
    methods = [method.strip() for method in settings.methods.split(",")]
    if unknown := set(methods) - set(METHODS):
        raise SystemExit(f"--methods: unknown {sorted(unknown)}; choose from {', '.join(METHODS)}")
    runner = Runner(settings)
    prepare(runner)
    runner.experiment = "U"  # names its steps in timings.json
    print("\n".join(masking_sweep(runner, methods)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
