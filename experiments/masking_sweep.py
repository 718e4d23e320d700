"""U: the masking unit (token vs whole word vs SpanBERT span) for MLM and MAE-LM, fine-tuned on TC and QA.

    python experiments/masking_sweep.py --corpus /usr/share/doc/python3.11/html/_sources --steps 400 \
        --mae-lm-learning-rate 3e-4

SpanBERT reports its gains on span-level tasks (QA, and entity tagging), so the arms are fine-tuned on those two of
the experiments' tasks. Every arm is reproduce.py's from-scratch setting (its corpus, tokenizer, model shape, blocks,
batch and schedule) with `--masking` as the only difference within a method; MAE-LM keeps its paper's δ = 0. Read
the comparison only where MAE-LM's arms are off the unigram plateau (REPORT.md, M): the table says when they are not,
and the MAE-LM arms are then not fine-tuned, as in M. Shares --output-dir with reproduce.py, whose steps are skipped
when done; prints the table for experiments/REPORT.md.
"""

import sys

from report import markdown_table, on_unigram_plateau, score_cells, scores
from reproduce import SCRATCH_LAYERS, Runner, build_parser, prepare, tokenizer

from hf_encoders.data.masking_units import MASKING_UNITS

KINDS = ["tc", "qa"]
METHODS = ("mlm", "mae_lm")


def masking_arm(runner: Runner, method: str, masking: str, learning_rate: float):
    layers = SCRATCH_LAYERS + (",decoder_num_hidden_layers=2" if method == "mae_lm" else "")
    return runner.pretrain(
        f"u_{method}_{masking}", "--method", method, "--masking", masking, *tokenizer(runner),
        "--model_size", "small", "--config_overrides", layers,
        steps=runner.settings.steps, learning_rate=learning_rate,
    )  # fmt: skip


def masking_sweep(runner: Runner) -> list[str]:
    """Pre-train, analyse and fine-tune every (method, unit) arm; the report's lines."""
    learning_rates = {"mlm": runner.settings.mlm_learning_rate, "mae_lm": runner.settings.mae_lm_learning_rate}
    lines = []
    for method in METHODS:
        models = {
            f"{method}_{unit}": masking_arm(runner, method, unit, learning_rates[method]) for unit in MASKING_UNITS
        }
        runner.analyze(f"u_{method}", models)
        plateau = method == "mae_lm" and on_unigram_plateau(runner.root, [path.name for path in models.values()])
        if plateau:
            lines.append(f"{method}: on the unigram plateau at this budget; not fine-tuned (REPORT.md, M).")
            continue
        runner.evaluate(
            f"u_{method}", models, kinds=KINDS, learning_rate=learning_rates[method], seeds=runner.settings.seeds
        )
        table = scores(runner.root, f"u_{method}")
        rows = [[unit, *score_cells(table, path.name, KINDS)] for unit, path in zip(MASKING_UNITS, models.values())]
        lines += ["", f"{method} (test split, mean ± std over {runner.settings.seeds} seeds)", ""]
        lines += markdown_table(["masking", *KINDS], rows)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.description = __doc__.splitlines()[0]
    parser.add_argument("--mlm-learning-rate", type=float, default=1e-3)
    parser.add_argument("--mae-lm-learning-rate", type=float, default=3e-4)
    parser.add_argument("--seeds", type=int, default=1, help="fine-tuning seeds per arm and task")
    settings = parser.parse_args(argv)
    runner = Runner(settings)
    prepare(runner)
    runner.experiment = "U"  # names its steps in timings.json
    print("\n".join(masking_sweep(runner)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
