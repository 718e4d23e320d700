"""U (SpanBERT, the textbook's §11.5): token, whole-word and span masking (masking_sweep.py's runs)."""

from pathlib import Path

from .runs import analysis, finished_losses, folders_of, pooled_cells, trained_steps, unigram_entropy
from .tables import interval, markdown_table
from .verdicts import LEARNING_MARGIN, VERDICTS, learned_or_void

# The masking sweep's runs (experiments/masking_sweep.py): method -> masking unit -> run; biphasic's token arm is B1's.
MASKING_RUNS = {
    "biphasic": {"token": "b1_mlm_only", "whole_word": "u_biphasic_whole_word", "span": "u_biphasic_span"},
    "mae_lm": {unit: f"u_mae_lm_{unit}" for unit in ("token", "whole_word", "span")},
}

U_KINDS = ["tc", "qa"]

# The run that measures a biphasic arm's held-out loss under token masking is named after the arm with this suffix.
TOKEN_EVAL_SUFFIX = "_token_eval"


def u_masking(root: Path, figures: Path):
    """U: token vs whole-word vs span masking (masking_sweep.py), its rows where its runs finished."""
    roots = [folder for folder in folders_of(root) if (folder / "analysis" / "u_biphasic" / "report.json").exists()]
    if not roots:
        return None
    entropy = unigram_entropy(roots[0])
    units = {run: unit for unit, run in MASKING_RUNS["biphasic"].items()}
    scores = {method: fine_tuning_scores(roots, method) for method in MASKING_RUNS}
    cells = scores["biphasic"]
    losses = {
        (method, unit): finished_losses(roots, run)
        for method, runs in MASKING_RUNS.items()
        for unit, run in runs.items()
    }
    # Each unit's own validation loss answers a different question; under token masking it is the same for every unit.
    token_losses = {unit: finished_losses(roots, run + TOKEN_EVAL_SUFFIX) for run, unit in units.items()}
    if cells:
        span_wins = [kind for kind in U_KINDS if cells["span", kind].mean > cells["token", kind].mean]
        compared = {f"biphasic {unit}": token_losses[unit] for unit in units.values()}
        verdict = learned_or_void(compared, entropy) or VERDICTS[len(span_wins)]
        numbers = "; ".join(
            f"{kind}: " + ", ".join(f"{unit} {cells[unit, kind].mean:.1f}" for unit in units.values())
            for kind in U_KINDS
        )
    else:
        verdict, numbers = "pending", "not fine-tuned yet"
    row = (
        "| U | SpanBERT (the textbook's §11.5): masking spans of words rather than single tokens helps span-level "
        f"tasks (QA, tagging) | MLM (biphasic, off the plateau), test means {numbers} | {verdict} |"
    )
    rows = []
    for method, runs in MASKING_RUNS.items():
        for unit in runs:
            if losses[method, unit]:
                unit_token_losses = token_losses[unit] if method == "biphasic" else []  # MLM's arms only
                rows.append(
                    masking_row(
                        roots[0], method, unit, losses[method, unit], unit_token_losses, entropy, scores[method]
                    )
                )
    section = [
        "## U — the masking unit: token, whole word, span",
        "",
        "`--masking` is the only difference within a method. MLM is B1's MLM-only biphasic arm (40% masking, the "
        "off-plateau setting), so its token row is B1's run; MAE-LM is M's from-scratch setting with δ = 0 (15%), "
        "fine-tuned only off the unigram plateau. Span: Geometric(0.2) words, at most 10, the ratio met in tokens. "
        "Each arm's validation loss is under its own masking; MLM's also under token masking (its arm's weights, B1's "
        "held-out masks), the same task for every unit. Verdict rule: void unless every MLM arm's validation loss "
        "under token masking is at least "
        f"{LEARNING_MARGIN} nats below the unigram entropy ({entropy:.2f}); then one point each for span's test mean "
        "above token's on TC and on QA. Scores: mean and 95% interval over the fine-tuning seeds, one learning rate "
        "(3e-4).",
        "",
        *markdown_table(
            [
                "method",
                "masking",
                "steps",
                "validation loss (unigram − loss)",
                "under token masking",
                "self-similarity (top)",
                "rank clean (top)",
                *U_KINDS,
            ],
            rows,
        ),
        "",
    ]
    return row, section


def fine_tuning_scores(roots: list[Path], method: str) -> dict:
    """(unit, task kind) -> a method's fine-tuning scores pooled over the pre-training seeds; empty where its arms were
    not fine-tuned (MAE-LM's, on the unigram plateau)."""
    evaluated = [folder for folder in roots if (folder / "evaluate" / f"u_{method}" / "results.json").exists()]
    units = {run: unit for unit, run in MASKING_RUNS[method].items()}
    return pooled_cells(evaluated, f"u_{method}", units) if evaluated else {}


def masking_row(root: Path, method: str, unit: str, losses, token_losses, entropy: float, cells: dict) -> list:
    """One arm of the masking sweep: its losses per seed (under its own masking and under token masking), the top
    layer's diagnostics and its scores where fine-tuned."""
    diagnostics = (analysis(root, f"u_{method}") or {}).get(f"{method}_{unit}")
    return [
        method,
        unit,
        trained_steps(root, MASKING_RUNS[method][unit]),
        *(", ".join(f"{loss:.3f} ({entropy - loss:+.2f})" for loss in values) for values in (losses, token_losses)),
        *(
            [f"{diagnostics['self_similarity'][-1]:.3f}", diagnostics["effective_rank"][-1]]
            if diagnostics
            else ["", ""]
        ),
        *(interval(cells[unit, kind]) if (unit, kind) in cells else "" for kind in U_KINDS),
    ]
