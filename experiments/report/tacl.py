"""T1 (TaCL, Fig. 2 and Table 1): TaCL against the same TaCL run with its contrastive term weighted 0, from a start
whose MLM head is trained (T1), and from all-MiniLM-L6-v2 (T1-MiniLM)."""

from .results import Results
from .rules import (
    Claim,
    compare,
    downstream_point,
    learned_or_void,
    measure_point,
    pending_point,
    verdict,
)
from .tables import markdown_table, mean_of, per_seed, provenance_lines, score_cell

T1_KINDS = ["sc", "tc", "qa"]

SOURCE = (
    "TaCL §3.2.2, Fig. 2: “at the top layer (layer 12), TaCL’s self-similarity becomes notably lower than BERT’s”; "
    "§3.1.1, Table 1: “on most sequence-level classification tasks in GLUE, TaCL outperforms BERT and BERT+MT” and "
    "“on all token-level benchmarks (SQuAD, NER, and CWS), TaCL consistently and notably surpasses other baselines”"
)
RULE = (
    "Void unless both arms' validation MLM loss is 0.5 nats below the unigram entropy. (1) Self-similarity: TaCL's "
    "top layer below the MLM arm's. Fig. 2 compares TaCL with the BERT it started from; the MLM arm, the same start "
    "continued for the same steps on the same sentence pairs, masks and head with the contrastive term weighted 0, is "
    "the control (as BERT+MT is Table 1's), and the start's value stands beside it. (2) Downstream: TaCL above the MLM "
    "arm on more of sc, tc, qa than below, each at its best rate."
)
RULES = {"T1": (SOURCE, RULE), "T1-MiniLM": (SOURCE, RULE + " Its MLM arm must be that control to be judged.")}

# How the MLM arm ran: only TaCL at weight 0 differs from TaCL by the contrastive term alone.
CONTROLLED_MLM_ARM = "tacl_weight_0"


def t1(found: Results):
    return tacl_claim(found, "T1", "B1's MLM-only arm (its MLM head trained)")


def t1_minilm(found: Results):
    return tacl_claim(found, "T1-MiniLM", "all-MiniLM-L6-v2 (no MLM head: a fresh one)")


def tacl_claim(found: Results, claim_id: str, start_name: str):
    """The claim's summary row and its section."""
    arms = found.arms
    mlm, tacl = arms["mlm"], arms["tacl"]
    losses = {name: arms[name].per_seed("validation_loss") for name in ("mlm", "tacl")}
    void = learned_or_void(losses, found.entropy)
    similarity = {name: arm.layer_measure("self_similarity") for name, arm in arms.items()}
    points = [
        measure_point(
            "self-similarity",
            compare(similarity["mlm"], similarity["tacl"]),  # the paper expects TaCL's lower
            f"top layer TaCL {similarity['tacl'].mean:.3f}, MLM {similarity['mlm'].mean:.3f}, start "
            f"{similarity['start'].mean:.3f}",
        )
    ]
    tacl_scores, mlm_scores = tacl.scores(), mlm.scores()
    if all(kind in tacl_scores and kind in mlm_scores for kind in T1_KINDS):
        comparisons = {kind: compare(tacl_scores[kind].estimate, mlm_scores[kind].estimate) for kind in T1_KINDS}
        points.append(downstream_point("downstream", comparisons))
    else:
        points.append(pending_point("downstream", "not fine-tuned"))
    controlled = found.setup.get("mlm_arm") == CONTROLLED_MLM_ARM
    judged = void or verdict(points)
    if not controlled:
        judged = f"uncontrolled: its MLM arm is {found.setup.get('mlm_arm_text')}, not TaCL at weight 0 (by the rules: {judged})"
    seeds = len(found.seeds)
    numbers = (
        f"from {start_name}, {seeds} pre-training seed{'s' if seeds > 1 else ''}; top-layer self-similarity start "
        f"{similarity['start'].mean:.3f}, MLM {similarity['mlm'].mean:.3f}, TaCL {similarity['tacl'].mean:.3f}; "
        f"validation MLM loss MLM {mean_of(mlm.measure('validation_loss'), 2)}, TaCL "
        f"{mean_of(tacl.measure('validation_loss'), 2)} (unigram {found.entropy:.2f})"
    )
    claim = Claim(
        found.label(claim_id),
        "TaCL lowers the top layer's self-similarity and fine-tunes better",
        numbers,
        points,
        judged,
    )
    return [claim], section(found, found.label(claim_id), start_name)


def section(found: Results, claim_id: str, start_name: str) -> list[str]:
    setup = found.setup
    rows = []
    for name, arm in found.arms.items():
        scores = arm.scores()
        rows.append(
            [
                name,
                per_seed(arm.per_seed("validation_loss")),
                per_seed([seed["self_similarity"][-1] for seed in arm.per_seed("analysis")]),
                per_seed([seed["rank_clean"][-1] for seed in arm.per_seed("analysis") if "rank_clean" in seed]),
                *(score_cell(scores, kind) for kind in T1_KINDS),
            ]
        )
    units = {score.estimate.describe() for arm in found.arms.values() for score in arm.scores().values()}
    return [
        f"## {claim_id} — TaCL against MLM continuation from {start_name}",
        "",
        f"{setup.get('steps')} continued steps at a peak rate of {setup.get('peak_rate'):g}, batch "
        f"{setup.get('batch')} × {setup.get('block')} tokens, {len(found.seeds)} pre-training seed(s). "
        f"{setup.get('arms_text', '')} Fine-tuned at {setup.get('finetune_rate'):g}. Scores: mean and 95% interval "
        f"over {' / '.join(sorted(units)) or 'nothing yet'}.",
        "",
        *provenance_lines(found),
        *markdown_table(
            [
                "arm",
                "validation loss per seed",
                "self-similarity (top) per seed",
                "rank clean (top) per seed",
                *T1_KINDS,
            ],
            rows,
        ),
        "",
        *(f"![{name}](figures/{name})" for name in found.data.get("figures", [])),
        "",
    ]
