"""U (SpanBERT, the textbook's §11.5): token, whole-word and span masking, and a random-init encoder of the same shape
as the floor every arm must clear."""

from .results import Results
from .rules import Claim, compare, downstream_point, learned_or_void, pending_point, verdict
from .tables import markdown_table, per_seed, provenance_lines, score_cell


def ratio_suffix(ratio: float | None) -> str:
    """'' at the MLM arms' own ratio (40%), '15' at --mlm-probability 0.15: what their run names carry."""
    return "" if ratio is None else f"{round(100 * ratio)}"


def masking_runs(ratio: float | None = None) -> dict[str, dict[str, str]]:
    """The masking sweep's runs (experiments/masking_sweep.py): method -> masking unit -> run. At the MLM arms' own
    ratio their token arm is B1's MLM-only run; at another every unit has a run of its own."""
    suffix = ratio_suffix(ratio)
    units = ("token", "whole_word", "span")
    biphasic = {unit: f"u{suffix}_biphasic_{unit}" for unit in units}
    if ratio is None:
        biphasic["token"] = "b1_mlm_only"
    return {"biphasic": biphasic, "mae_lm": {unit: f"u{suffix}_mae_lm_{unit}" for unit in units}}


MASKING_RUNS = masking_runs()
U_KINDS = ["tc", "qa"]
# The run that measures a biphasic arm's held-out loss under token masking is named after the arm with this suffix.
TOKEN_EVAL_SUFFIX = "_token_eval"
RANDOM_INIT = "random_init"

SOURCE = (
    "The textbook §11.5 (SpanBERT, Joshi et al., 2020): question answering and other span tasks “involve the "
    "identification and classification of longer phrases. This suggests that a span-oriented masked learning "
    "objective might provide improved performance on such tasks”"
)
RULE = (
    "Void unless every MLM arm's validation loss under token masking (the same task for every unit) is 0.5 nats below "
    "the unigram entropy. One point: span masking above token masking on more of tc and qa than below. The random-init "
    "row is the floor a pre-trained arm must clear to have learned anything the task uses."
)
RULES = {"U": (SOURCE, RULE)}


def u_masking(found: Results):
    arms = found.arms
    token, span = arms["biphasic_token"], arms["biphasic_span"]
    units = [name for name in arms if name.startswith("biphasic_")]
    void = learned_or_void({name: arms[name].per_seed("token_masked_validation_loss") for name in units}, found.entropy)
    span_scores, token_scores = span.scores(), token.scores()
    kinds = [kind for kind in U_KINDS if kind in span_scores and kind in token_scores]
    if kinds:
        point = downstream_point(
            "downstream", {kind: compare(span_scores[kind].estimate, token_scores[kind].estimate) for kind in kinds}
        )
    else:
        point = pending_point("downstream", "not fine-tuned")
    losses = ", ".join(
        f"{name.removeprefix('biphasic_')} {per_seed(arms[name].per_seed('token_masked_validation_loss'), 2)}"
        for name in units
    )
    numbers = f"MLM (biphasic, 40%) validation loss under token masking: {losses} (unigram {found.entropy:.2f})"
    if not void and kinds:
        means = "; ".join(
            f"{kind}: "
            + ", ".join(
                f"{name.removeprefix('biphasic_')} {arms[name].scores()[kind].estimate.mean:.1f}" for name in units
            )
            for kind in kinds
        )
        numbers += f"; test means {means}"
    claim = Claim(
        "U",
        "masking spans rather than tokens helps span tasks (QA, tagging)",
        numbers,
        [point],
        void or verdict([point]),
    )
    return [claim], section(found)


def section(found: Results) -> list[str]:
    rows = []
    for name, arm in found.arms.items():
        method, _, unit = name.partition("_") if name != RANDOM_INIT else (RANDOM_INIT, "", "")
        if method == "mae":  # "mae_lm_token"
            method, unit = "mae_lm", name.removeprefix("mae_lm_")
        analysis = arm.per_seed("analysis")
        scores = arm.scores()
        rows.append(
            [
                method,
                unit,
                arm.data.get("steps", ""),
                ", ".join(f"{loss:.3f} ({found.entropy - loss:+.2f})" for loss in arm.per_seed("validation_loss")),
                ", ".join(
                    f"{loss:.3f} ({found.entropy - loss:+.2f})" for loss in arm.per_seed("token_masked_validation_loss")
                ),
                per_seed([seed["self_similarity"][-1] for seed in analysis if "self_similarity" in seed]),
                per_seed([seed["rank_clean"][-1] for seed in analysis if "rank_clean" in seed]),
                *(score_cell(scores, kind) for kind in U_KINDS),
            ]
        )
    units = {score.estimate.describe() for arm in found.arms.values() for score in arm.scores().values()}
    header = [
        "method",
        "masking",
        "steps",
        "validation loss (unigram − loss)",
        "under token masking",
        "self-similarity (top)",
        "rank clean (top)",
        *U_KINDS,
    ]
    return [
        f"## {found.label('U')} — the masking unit: token, whole word, span",
        "",
        f"{found.setup.get('text', '')} Scores: mean and 95% interval over {' / '.join(sorted(units)) or 'nothing yet'}.",
        "",
        *provenance_lines(found),
        *markdown_table(header, rows),
        "",
    ]
