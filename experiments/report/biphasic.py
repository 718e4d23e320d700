"""B1 and B2 (Should We Still Pretrain Encoders with Masked Language Modeling?, Gisserot-Boukhlef et al., 2025):
CLM then MLM against MLM alone at equal steps (Fig. 6), CLM against MLM over the fine-tuning rate grid (Fig. 5), MLM
continued from a CLM model against from an MLM model (Fig. 8), and the conversion of a causal LM (a check)."""

import statistics

from ..tasks import KINDS
from .results import Arm, Results, over_seeds
from .rules import (
    LEARNING_MARGIN,
    Claim,
    compare,
    downstream_point,
    learned_or_void,
    pending_point,
    verdict,
)
from .tables import markdown_table, per_seed, provenance_lines, score_cell

B1_SOURCE = (
    "Paper 004 §4, Fig. 6: “combining CLM and MLM consistently improves downstream performance compared to MLM-only "
    "training. In particular, the 25%-75% split reliably surpasses the MLM baseline”"
)
B1_RULE = (
    "Void unless both arms' validation MLM loss is 0.5 nats below the unigram entropy. One point: CLM 25% → MLM 75% "
    "above MLM alone (same steps, one WSD schedule) on more tasks than below, each arm at its best rate."
)
STABILITY_SOURCE = (
    "Paper 004 §3, Fig. 5: “models pretrained with CLM demonstrate lower sensitivity to learning rate choices than "
    "those pretrained with MLM”"
)
STABILITY_RULE = (
    "Void unless both arms' validation loss is 0.5 nats below the unigram entropy. One point, CLM-only against "
    "MLM-only over the fine-tuning rate grid: per task and pre-training seed, the median over the grid's rates of the "
    "fall of the validation mean below the best rate's (one diverged rate moves a median of five by one place, not "
    "by its size); CLM's smaller on more tasks than larger, beyond the noise margin."
)
B2E_SOURCE = (
    "Paper 004 §5, Fig. 8: “MLM CPT on a CLM-pretrained model outperforms MLM-only training”; “the MLM-adapted CLM "
    "model consistently achieves superior downstream performance”"
)
B2E_RULE = (
    "Void unless both continued arms' validation MLM loss is 0.5 nats below the unigram entropy. One point: MLM "
    "continued from the CLM-only arm above MLM continued from the MLM-only arm (equal size, tokens and decayed "
    "schedule, then equal MLM steps) on more tasks than below."
)
B2_CHECK = (
    "Not a claim of paper 004, a check of the conversion it builds on: SmolLM2-135M converted to an encoder, "
    f"continued with MLM, must end {LEARNING_MARGIN} nats below the unigram entropy; the same architecture from "
    "scratch at the same steps is shown beside it, unjudged."
)
RULES = {
    "B1": (B1_SOURCE, B1_RULE),
    "B1, stability": (STABILITY_SOURCE, STABILITY_RULE),
    "B2, equal budget": (B2E_SOURCE, B2E_RULE),
    "B2": (
        "Paper 004 §2 (CPT): “Training is initialized from models pretrained using either CLM or MLM and is then "
        "continued with MLM”",
        B2_CHECK,
    ),
}

B1_ARMS = ("clm_then_mlm", "mlm_only")


def b1(found: Results):
    """B1's two rows (downstream, Fig. 6; stability, Fig. 5) and its section."""
    arms = found.arms
    pfs, mlm = arms["clm_then_mlm"], arms["mlm_only"]
    void = learned_or_void({name: arms[name].per_seed("validation_loss") for name in B1_ARMS}, found.entropy)
    downstream = scores_point(pfs, mlm)
    losses = f"validation MLM loss {loss(pfs):.2f} vs {loss(mlm):.2f} (unigram {found.entropy:.2f})"
    seeds = f"{len(found.seeds)} pre-training seed{'s' if len(found.seeds) > 1 else ''}"
    downstream_claim = Claim(
        found.label("B1"),
        "CLM 25% → MLM 75% beats MLM alone downstream at equal steps",
        f"{means_text(pfs, mlm)}; {losses}; {seeds}",
        [downstream],
        void or verdict([downstream]),
    )
    clm = arms["clm_only"]
    stability = stability_point(clm, arms["mlm_only"])
    stability_void = learned_or_void(
        {"clm_only": clm.per_seed("validation_loss"), "mlm_only": mlm.per_seed("validation_loss")}, found.entropy
    )
    stability_claim = Claim(
        found.label("B1, stability"),
        "CLM-pretrained models are less sensitive to the fine-tuning rate than MLM-pretrained ones",
        stability_numbers(clm, mlm, found),
        [stability],
        stability_void or verdict([stability]),
    )
    section = [
        f"## {found.label('B1')} — CLM → MLM against MLM and CLM alone (one biphasic architecture, one WSD schedule)",
        "",
        f"{found.setup.get('text', '')} Fine-tuned at rates {', '.join(f'{rate:g}' for rate in found.setup.get('finetune_rates', []))}; "
        "each arm's test score at its best rate per task.",
        "",
        *provenance_lines(found),
        *seed_arms_table(found),
        "",
        "The validation loss is the objective of the arm's last phase (CLM's for clm_only).",
        "",
        *scores_table(found),
        *stability_table(found),
        *(f"![{name}](figures/{name})" for name in found.data.get("figures", [])),
        "",
    ]
    return [downstream_claim, stability_claim], section


def loss(arm: Arm) -> float:
    return statistics.fmean(arm.per_seed("validation_loss"))


def scores_point(expected_higher: Arm, expected_lower: Arm):
    higher, lower = expected_higher.scores(), expected_lower.scores()
    kinds = [kind for kind in KINDS if kind in higher and kind in lower]
    if not kinds:
        return pending_point("downstream", "not fine-tuned")
    return downstream_point(
        "downstream", {kind: compare(higher[kind].estimate, lower[kind].estimate) for kind in kinds}
    )


def means_text(first: Arm, second: Arm) -> str:
    """Test means per task, first arm against second."""
    one, two = first.scores(), second.scores()
    kinds = [kind for kind in KINDS if kind in one and kind in two]
    if not kinds:
        return "not fine-tuned"
    pairs = ", ".join(f"{kind} {one[kind].estimate.mean:.1f} vs {two[kind].estimate.mean:.1f}" for kind in kinds)
    return f"test means {pairs}"


def rate_sensitivity(by_rate: dict[float, float]) -> float:
    """Median over the grid's rates of the fall of the validation mean below the best rate's (points)."""
    best = max(by_rate.values())
    return statistics.median(best - value for value in by_rate.values())


def sensitivity(arm: Arm, kind: str):
    """The rate sensitivity of `arm` on `kind` over its pre-training seeds; None without the rate grid per seed."""
    scores = arm.scores()
    if kind not in scores or not scores[kind].validation_by_rate:
        return None
    by_seed = scores[kind].validation_by_rate
    if any(len(rates) < 3 for rates in by_seed):  # a median fall needs a grid, not one or two rates
        return None
    return over_seeds([rate_sensitivity(rates) for rates in by_seed])


def stability_point(clm: Arm, mlm: Arm):
    measured = {kind: (sensitivity(clm, kind), sensitivity(mlm, kind)) for kind in KINDS}
    measured = {kind: pair for kind, pair in measured.items() if None not in pair}
    if not measured:
        why = "CLM-only not fine-tuned over the rate grid" if not clm.scores() else "no rate grid per pre-training seed"
        return pending_point("rate sensitivity", why)
    # The paper expects MLM's fall to be the larger.
    return downstream_point(
        "rate sensitivity", {kind: compare(mlm_value, clm_value) for kind, (clm_value, mlm_value) in measured.items()}
    )


def stability_numbers(clm: Arm, mlm: Arm, found: Results) -> str:
    cells = []
    for kind in KINDS:
        pair = (sensitivity(clm, kind), sensitivity(mlm, kind))
        if None not in pair:
            cells.append(f"{kind} {pair[0].mean:.1f} vs {pair[1].mean:.1f}")
    if not cells:
        return "CLM-only not fine-tuned (only CLM → MLM and MLM alone were, at this budget)"
    return "median fall below the best rate, CLM-only vs MLM-only (validation points): " + ", ".join(cells)


def seed_arms_table(found: Results) -> list[str]:
    """Per arm, each pre-training seed's validation loss (and its distance below the unigram entropy) and the top
    layer's self-similarity and rank."""
    rows = []
    for name, arm in found.arms.items():
        analysis = arm.per_seed("analysis")
        rows.append(
            [
                name,
                ", ".join(f"{value:.3f} ({found.entropy - value:+.2f})" for value in arm.per_seed("validation_loss")),
                per_seed([seed["self_similarity"][-1] for seed in analysis if "self_similarity" in seed]),
                per_seed([seed["rank_clean"][-1] for seed in analysis if "rank_clean" in seed]),
            ]
        )
    header = ["arm", "validation loss per seed (unigram − loss)", "self-similarity (top)", "rank clean (top)"]
    return markdown_table(header, rows)


def scores_table(found: Results) -> list[str]:
    fine_tuned = {name: arm.scores() for name, arm in found.arms.items() if arm.scores()}
    if not fine_tuned:
        return []
    units = {score.estimate.describe() for scores in fine_tuned.values() for score in scores.values()}
    return [
        f"Test scores at each arm's best rate: mean and 95% interval over {' / '.join(sorted(units))}.",
        "",
        *markdown_table(
            ["arm", *KINDS],
            [[name, *(score_cell(scores, kind) for kind in KINDS)] for name, scores in fine_tuned.items()],
        ),
        "",
    ]


def stability_table(found: Results) -> list[str]:
    rows = []
    for name, arm in found.arms.items():
        values = [sensitivity(arm, kind) for kind in KINDS]
        if any(value is not None for value in values):
            rows.append(
                [
                    name,
                    *(
                        "" if value is None else f"{value.mean:.1f} ({per_seed(list(value.values), 1)})"
                        for value in values
                    ),
                ]
            )
    if not rows:
        return []
    return [
        "Rate sensitivity: the median fall of the validation mean below the best rate over the grid, points (per "
        "pre-training seed in brackets).",
        "",
        *markdown_table(["arm", *KINDS], rows),
        "",
    ]


def b2_equal_budget(found: Results):
    arms = found.arms
    from_clm, from_mlm = arms["cpt_clm_only"], arms["cpt_mlm_only"]
    void = learned_or_void({name: arm.per_seed("validation_loss") for name, arm in arms.items()}, found.entropy)
    point = scores_point(from_clm, from_mlm)
    seeds = f"{len(found.seeds)} pre-training seed{'s' if len(found.seeds) > 1 else ''}"
    claim = Claim(
        found.label("B2, equal budget"),
        "MLM continued from a CLM model beats MLM continued from an MLM model of equal training",
        f"{means_text(from_clm, from_mlm)}; validation MLM loss {loss(from_clm):.2f} vs {loss(from_mlm):.2f} "
        f"(unigram {found.entropy:.2f}); {seeds}",
        [point],
        void or verdict([point]),
    )
    start = found.data.get("start_validation_loss", {})
    section = [
        f"## {found.label('B2, equal budget')} — MLM continued from B1's CLM-only and MLM-only arms",
        "",
        f"{found.setup.get('text', '')}",
        "",
        *provenance_lines(found),
        *seed_arms_table(found),
        "",
        f"Before the continuation, the MLM-only start was at {per_seed(start.get('mlm_only', []))}; the CLM-only start "
        "had never seen a masked token.",
        "",
        *scores_table(found),
    ]
    return [claim], section


def b2(found: Results):
    """B2: a check that the conversion of a causal LM serves MLM at once; no verdict on paper 004."""
    converted, scratch = (
        statistics.fmean(found.arm(name).per_seed("validation_loss")) for name in ("from_smollm2", "from_scratch")
    )
    passed = converted < found.entropy - LEARNING_MARGIN
    claim = Claim(
        found.label("B2"),
        "a causal LM converted to an encoder serves MLM at once (a check, not a claim of the paper)",
        f"held-out masked-LM loss after {found.setup.get('steps')} MLM steps: from SmolLM2-135M {converted:.3f}, from "
        f"scratch {scratch:.3f} (unigram {found.entropy:.2f})",
        [],
        "check passed"
        if passed
        else f"check failed: the converted model is not {LEARNING_MARGIN} nats below the entropy",
    )
    section = [
        f"## {found.label('B2')} — SmolLM2-135M converted and continued with MLM (a check)",
        "",
        f"{found.setup.get('steps')} MLM steps at batch {found.setup.get('batch')} × {found.setup.get('block')} and "
        f"{found.setup.get('peak_rate'):g}, from the converted model and from scratch in the same architecture; the "
        "unigram entropy is in SmolLM2's vocabulary.",
        "",
        *provenance_lines(found),
    ]
    return [claim], section
