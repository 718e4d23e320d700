"""M1 and M2 (MAE-LM §2.2, §4.3, §4.4; Fig. 1a, 4, 5a): the share δ of [MASK] tokens kept in the encoder, from
scratch (M) and from all-MiniLM-L6-v2 (M-pretrained), with mae_lm_probe.py's account of why the ranks are what they
are."""

import statistics

from ..tasks import KINDS
from .results import Arm, Results
from .rules import Claim, compare, downstream_point, learned_or_void, measure_point, pending_point, verdict
from .tables import layers, markdown_table, per_seed, provenance_lines, score_cell

DELTAS = ("0.0", "0.5", "1.0")
MLM_LAYOUT, MAE_LM = "delta_1.0", "delta_0.0"

M1_SOURCE = (
    "MAE-LM §2.2, Fig. 1a: “It generally holds that rank_0.9(H̃^l) < rank_0.9(H^l), and the gap is more prominent in "
    "deeper layers” (H̃: the input without [MASK]; H: the input with 15% [MASK], its [MASK] positions included); §4.4, "
    "Fig. 5a: “MAE-LM closes the gap caused by [MASK] tokens in vanilla MLM pretraining”"
)
M1_RULE = (
    "Void unless every δ arm's validation loss is 0.5 nats below the unigram entropy. (1) The MLM layout (δ = 1): the "
    "top layer's rank_0.9 of the clean input below that of the input with 15% [MASK] (every position, the [MASK]s "
    "included). (2) MAE-LM (δ = 0): its top layer's clean rank above the MLM layout's clean rank. A rank measured on "
    "one pre-training seed has no spread: its direction is reported and does not count."
)
M2_SOURCE = (
    "MAE-LM §4.3, Fig. 4: “There is a clear trend that including a higher portion of [MASK] tokens in the encoder "
    "degrades its performance”"
)
M2_RULE = (
    "Void as M1. One point, downstream (Fig. 4 is GLUE and SQuAD only): δ = 0 above δ = 1 on more tasks than below, "
    "each at its best rate. The real tokens' rank over δ is our extension of the claim: reported, not judged."
)
RULES = {"M1": (M1_SOURCE, M1_RULE), "M2": (M2_SOURCE, M2_RULE)}


def delta_arms(found: Results) -> dict[str, Arm]:
    return {delta: found.arm(f"delta_{delta}") for delta in DELTAS}


def delta_void(found: Results) -> str | None:
    losses = {f"δ = {delta}": arm.per_seed("validation_loss") for delta, arm in delta_arms(found).items()}
    return learned_or_void(losses, found.entropy)


def m1_claim(found: Results, claim_id: str) -> Claim:
    mlm, mae = found.arm(MLM_LAYOUT), found.arm(MAE_LM)
    clean, masked = mlm.layer_measure("rank_clean"), mlm.layer_measure("rank_with_mask")
    mae_clean = mae.layer_measure("rank_clean")
    points = [
        measure_point(
            "the MLM layout's gap",
            compare(masked, clean),
            f"δ = 1 top-layer rank {clean.mean:.0f} clean, {masked.mean:.0f} with [MASK]",
        ),
        measure_point(
            "MAE-LM closes it",
            compare(mae_clean, clean),
            f"clean rank δ = 0 {mae_clean.mean:.0f}, δ = 1 {clean.mean:.0f}",
        ),
    ]
    width = found.setup.get("hidden_size")
    numbers = (
        f"top-layer rank_0.9 of real tokens{f' (of {width})' if width else ''}, δ = 1: {clean.mean:.0f} clean / "
        f"{masked.mean:.0f} with [MASK]; δ = 0: {mae_clean.mean:.0f} / {mae.layer_measure('rank_with_mask').mean:.0f}; "
        f"{losses_text(found)}"
    )
    statement = "MLM's real tokens use more dimensions with [MASK] in the input; MAE-LM's use as many without it"
    return Claim(found.label(claim_id), statement, numbers, points, delta_void(found) or verdict(points))


def m2_claim(found: Results, claim_id: str) -> Claim:
    mae, mlm = found.arm(MAE_LM), found.arm(MLM_LAYOUT)
    ranks = [arm.layer_measure("rank_clean").mean for arm in delta_arms(found).values()]
    extension = f"our extension, not judged: top-layer rank {' / '.join(f'{rank:.0f}' for rank in ranks)}"
    mae_scores, mlm_scores = mae.scores(), mlm.scores()
    kinds = [kind for kind in KINDS if kind in mae_scores and kind in mlm_scores]
    if kinds:
        point = downstream_point(
            "downstream", {kind: compare(mae_scores[kind].estimate, mlm_scores[kind].estimate) for kind in kinds}
        )
        means = [
            statistics.fmean(arm.scores()[kind].estimate.mean for kind in kinds) for arm in delta_arms(found).values()
        ]
        numbers = f"mean over {', '.join(kinds)} {' / '.join(f'{mean:.1f}' for mean in means)}; {extension}"
    else:
        point = pending_point("downstream", "not fine-tuned")
        numbers = f"not fine-tuned; {extension}"
    numbers = f"δ = 0 / 0.5 / 1: {numbers}"
    statement = "the more [MASK] the encoder sees (δ from 0 to 1), the lower the downstream scores"
    return Claim(found.label(claim_id), statement, numbers, [point], delta_void(found) or verdict([point]))


def losses_text(found: Results) -> str:
    losses = [statistics.fmean(arm.per_seed("validation_loss")) for arm in delta_arms(found).values()]
    return (
        f"validation loss δ = 0 / 0.5 / 1 {' / '.join(f'{loss:.2f}' for loss in losses)} (unigram {found.entropy:.2f})"
    )


def m_from_scratch(found: Results):
    """M1 and M2 from scratch: two rows, one section."""
    claims = [m1_claim(found, "M1"), m2_claim(found, "M2")]
    setup = found.setup
    lines = [
        f"## {found.label('M')} — MAE-LM from scratch, δ = 0 / 0.5 / 1",
        "",
        "δ = 1 is MLM on MAE-LM's layout (every [MASK] enters the encoder, the decoder still predicts); δ = 0 is "
        f"MAE-LM; `mlm`, where present, is BERT's post-LN encoder of the same size without a decoder. {setup_text(setup)}",
        "",
        *provenance_lines(found),
        *arm_table(found),
        *probe_lines(found),
        *(f"![{name}](figures/{name})" for name in found.data.get("figures", [])),
        "",
    ]
    return claims, lines


def collapsed_sweep(found: Results):
    """M's sweep at the rate at which every arm collapsed: a section, no claim."""
    return [], [
        f"### {found.label('M')} at a peak learning rate of {found.setup['peak_rate']:g}",
        "",
        *provenance_lines(found),
        *arm_table(found),
        *probe_lines(found),
    ]


def m_pretrained(found: Results):
    """M1 and M2 from all-MiniLM-L6-v2: two rows, one section; the start's own numbers stand in its table."""
    claims = [m1_claim(found, "M1, pretrained start"), m2_claim(found, "M2, pretrained start")]
    lines = [
        f"## {found.label('M, pretrained start')} — all-MiniLM-L6-v2 continued as MAE-LM with δ = 0, 0.5, 1",
        "",
        "Each arm's encoder starts as all-MiniLM-L6-v2 itself (`MaeLmForMaskedLM.from_encoder`: the same hidden states, "
        f"every layer), with a new decoder and LM head (MiniLM has no MLM head). {setup_text(found.setup)} The start's "
        "row is MiniLM itself, fine-tuned the same way.",
        "",
        *provenance_lines(found),
        *arm_table(found),
        *probe_lines(found),
        *(f"![{name}](figures/{name})" for name in found.data.get("figures", [])),
        "",
    ]
    return claims, lines


def setup_text(setup: dict) -> str:
    parts = [
        f"{setup['steps']} steps per arm" if "steps" in setup else "",
        f"the encoder held still for the first {setup['hold_encoder_steps']} (`--hold_encoder_steps`)"
        if setup.get("hold_encoder_steps")
        else "",
        f"peak rate {setup['peak_rate']:g}" if "peak_rate" in setup else "",
        f"batch {setup['batch']} × {setup['block']} tokens" if "batch" in setup else "",
        f"{setup['layers']}" if "layers" in setup else "",
        f"fine-tuned at {setup['finetune_rate']:g}" if "finetune_rate" in setup else "",
    ]
    return "; ".join(part for part in parts if part) + "."


def arm_table(found: Results) -> list[str]:
    rows = []
    for name, arm in found.arms.items():
        analysis = arm.per_seed("analysis")
        first = analysis[0] if analysis else {}
        scores = arm.scores()
        rows.append(
            [
                name,
                per_seed(arm.per_seed("validation_loss")),
                layers(first["rank_clean"]) if "rank_clean" in first else "",
                layers(first["rank_with_mask"]) if "rank_with_mask" in first else "",
                layers(first["self_similarity"], 2) if "self_similarity" in first else "",
                *(score_cell(scores, kind) for kind in KINDS),
            ]
        )
    header = ["arm", "validation loss", "rank clean (per layer)", "rank with [MASK] (per layer)", "self-similarity"]
    units = {score.estimate.describe() for arm in found.arms.values() for score in arm.scores().values()}
    note = f"Scores: mean and 95% interval over {' / '.join(sorted(units))}." if units else "Not fine-tuned."
    return [*markdown_table([*header, *KINDS], rows), "", note, ""]


PROBE_COLUMNS = {
    "rank_uncentered": ("rank uncentered", "{}"),
    "rank_centered": ("rank centered", "{}"),
    "mean_direction_energy": ("mean-direction energy", "{:.3f}"),
    "masked_lm_loss": ("MLM loss", "{:.3f}"),
    "masked_lm_loss_encoder_ablated": ("MLM loss, encoder ablated", "{:.3f}"),
    "encoder_gradient_share": ("encoder's gradient share", "{:.2g}"),
    "masked_lm_loss_seen_by_encoder": ("MLM loss, half the [MASK]s in the encoder: those it saw", "{:.3f}"),
    "masked_lm_loss_unseen_by_encoder": ("… and those it did not", "{:.3f}"),
}
VIEWS = {"delta_0": "δ = 0 (every [MASK] out of the encoder)", "own": "its own δ"}


def probe_lines(found: Results) -> list[str]:
    """mae_lm_probe.py's measures per arm and view: δ = 0's (every arm read as MAE-LM reads) and the arm's own δ."""
    rows = []
    for name, arm in found.arms.items():
        for probe in arm.probes()[:1]:
            for view, measures in probe.items():
                if view == "delta_0" and arm.name != MAE_LM and "own" not in probe:
                    label = VIEWS[view] + ", not the arm's own"
                else:
                    label = VIEWS[view] + (f" ({measures['delta']:g})" if "delta" in measures else "")
                rows.append(
                    [
                        name,
                        label,
                        *(
                            form.format(measures[key]) if measures.get(key) is not None else ""
                            for key, (_, form) in PROBE_COLUMNS.items()
                        ),
                        attention(measures),
                    ]
                )
    if not rows:
        return []
    header = ["arm", "view", *(title for title, _ in PROBE_COLUMNS.values())]
    header.append("decoder attention of a masked position to the 2 tokens each side, per layer (uniform)")
    return [
        "Why the ranks are what they are (`python -m experiments.mae_lm_probe`, 64 blocks of 128 tokens from the "
        "corpus's last pages): the top layer's rank of real tokens uncentered and centered, the share of their energy "
        "in the mean direction, the masked-LM loss with the encoder's states and with each replaced by their mean "
        "(how much the decoder reads the encoder), and the share of the gradient's norm that reaches the encoder's "
        "layers. Each arm is read with every [MASK] out of its encoder (δ = 0's view) and, where probed so, in its "
        "own δ; a δ = 1 or δ = 0.5 arm read in δ = 0's view is out of the distribution it trained on.",
        "",
        *markdown_table(header, rows),
        "",
    ]


def attention(measures: dict) -> str:
    if "decoder_neighbour_attention" not in measures:
        return ""
    values = ", ".join(f"{value:.3f}" for value in measures["decoder_neighbour_attention"])
    return f"{values} ({measures['neighbour_attention_if_uniform']:.3f})"
