"""M1 and M2 (MAE-LM, Fig. 1, 4, 5): the share δ of [MASK] tokens kept in the encoder, from scratch and from
all-MiniLM-L6-v2, with mae_lm_probe.py's account of why the ranks are what they are."""

import json
import statistics
from pathlib import Path

from ..tasks import KINDS
from .figures import copy_figure, figure_link, plot_delta_sweep, plot_validation_curves
from .runs import (
    analysis,
    experiment_root,
    final_eval_loss,
    held_steps,
    minilm_path,
    peak_rate,
    pooled_cells,
    scores,
    trained_steps,
    unigram_entropy,
)
from .tables import interval, markdown_table, score_cells
from .verdicts import LEARNING_MARGIN, VERDICTS, learned_or_void

DELTA_LABELS = [f"delta_{delta}" for delta in ("0.0", "0.5", "1.0")]


def deltas(root: Path):
    """M from scratch: the δ arms' analysis, their fine-tuning scores, and the void verdict unless every arm learned."""
    models = analysis(root, "m")
    if models is None:
        return None
    losses = {label: final_eval_loss(root, f"m_{label}") for label in DELTA_LABELS}
    return models, scores(root, "m"), delta_void(losses, unigram_entropy(root))


def m1(root: Path, figures: Path):
    root = experiment_root(root, "m")
    found = deltas(root)
    if found is None:
        return None
    models, table, void = found
    mlm, mae = models["delta_1.0"], models["delta_0.0"]
    verdict = void or VERDICTS[m1_points(models)]
    row = (
        "| M1 | MAE-LM (Fig. 1, 5): an MLM model's real tokens use fewer dimensions when [MASK] is in the input; "
        "MAE-LM closes the gap and its real tokens use at least as many | top-layer rank_0.9 of real tokens, "
        f"MLM (δ=1): {mlm['effective_rank'][-1]} clean / {mlm['effective_rank_with_mask'][-1]} with [MASK]; "
        f"MAE-LM (δ=0): {mae['effective_rank'][-1]} / {mae['effective_rank_with_mask'][-1]} (of 256) | {verdict} |"
    )
    section = [
        "## M1, M2 — MAE-LM and the share δ of [MASK] tokens kept in the encoder",
        "",
        "δ = 1 is MLM on MAE-LM's layout (every [MASK] enters the encoder, the decoder still predicts), δ = 0 is "
        "MAE-LM. Same architecture, data, steps and seed. M1's rule: one point for a positive clean − with-[MASK] gap "
        "in the MLM model, one for MAE-LM's clean rank ≥ MLM's. M2's rule: one point each for rank and downstream "
        "mean (the tasks' scores averaged) not increasing with δ. Both rules are void, and the verdict says so, unless "
        f"every arm's validation loss is at least {LEARNING_MARGIN} nats below the unigram entropy; when every arm is "
        "within 0.2 nats of it (on the plateau, its encoder unused) the script skips their fine-tuning, which would "
        "measure nothing.",
        "",
        *markdown_table(
            ["δ", "rank clean (per layer)", "rank with [MASK] (per layer)", "self-similarity (top)", *KINDS],
            [
                [
                    label.removeprefix("delta_"),
                    model["effective_rank"],
                    model["effective_rank_with_mask"],
                    f"{model['self_similarity'][-1]:.3f}",
                    *score_cells(table, "m_" + label, KINDS),
                ]
                for label, model in models.items()
            ],
        ),
        "",
        "Why the ranks are what they are (`experiments/mae_lm_probe.py`, 64 blocks of 128 tokens from the corpus's "
        "last pages): the top layer's rank of real tokens uncentered and centered, the share of their energy in the "
        "mean direction, the masked-LM loss with the encoder's states and with each replaced by their mean (how much "
        "the decoder reads the encoder), and the share of the gradient's norm that reaches the encoder's layers.",
        "",
        *probe_lines(root, "m"),
        copy_figure(root / "analysis" / "m" / "layer_curves.png", figures, "m_layer_curves.png"),
        figure_link(plot_delta_sweep(models, table, figures).name),
        "",
        *collapsed_sweep_lines(root),
    ]
    return row, section


def m2(root: Path, figures: Path):
    root = experiment_root(root, "m")
    found = deltas(root)
    if found is None:
        return None
    models, table, void = found
    numbers, verdict = m2_rule(models, table, "m")
    row = (
        "| M2 | MAE-LM (Fig. 4): the more [MASK] tokens the encoder sees (δ from 0 to 1), the lower the real tokens' "
        f"rank and the downstream score | {numbers} | {void or verdict} |"
    )
    return row, []


def m1_points(models: dict) -> int:
    """M1's rule: one point for a positive clean − with-[MASK] rank gap in the MLM layout (δ = 1), one for MAE-LM's
    (δ = 0) clean rank at least the MLM layout's; top layer, real tokens."""
    mlm, mae = models["delta_1.0"], models["delta_0.0"]
    gap = mlm["effective_rank"][-1] - mlm["effective_rank_with_mask"][-1]
    return (gap > 0) + (mae["effective_rank"][-1] >= mlm["effective_rank"][-1])


def m2_rule(models: dict, table: dict, sweep: str) -> tuple[str, str]:
    """M2's numbers for the summary row and its verdict: one point for the top layer's rank not rising with δ, one for
    the downstream mean not rising either; pending while the arms are not fine-tuned (`table` empty)."""
    ranks = [models[label]["effective_rank"][-1] for label in DELTA_LABELS]
    numbers = f"δ = 0 / 0.5 / 1: rank {ranks[0]} / {ranks[1]} / {ranks[2]}"
    if not table:
        return numbers + ", not fine-tuned", "pending"
    downstream = [downstream_mean(table, f"{sweep}_{label}") for label in DELTA_LABELS]
    numbers += f", mean downstream {downstream[0]:.3f} / {downstream[1]:.3f} / {downstream[2]:.3f}"
    points = int(ranks[0] >= ranks[1] >= ranks[2]) + (downstream[0] >= downstream[1] >= downstream[2])
    return numbers, VERDICTS[points]


def delta_void(losses: dict[str, float], entropy: float) -> str | None:
    """M1's and M2's void verdict unless every δ arm (its label -> validation loss) is LEARNING_MARGIN nats below the
    unigram entropy, as for every other claim."""
    return learned_or_void({f"δ = {label.removeprefix('delta_')}": [loss] for label, loss in losses.items()}, entropy)


def probe_lines(root: Path, sweep: str) -> list[str]:
    path = root / "analysis" / sweep / "probe.json"
    if not path.exists():
        return []
    header = ["δ", "rank uncentered", "rank centered", "mean-direction energy", "MLM loss", "MLM loss, encoder ablated"]
    rows = [
        [
            name.rsplit("delta_", 1)[-1],
            p["rank_uncentered"],
            p["rank_centered"],
            f"{p['mean_direction_energy']:.3f}",
            f"{p['masked_lm_loss']:.3f}",
            f"{p['masked_lm_loss_encoder_ablated']:.3f}",
            f"{p['encoder_gradient_share']:.2g}",
            *(f"{p[key]:.3f}" if key in p else "" for key in VIEW_KEYS),
            *attention_cells(p),
        ]
        for name, p in json.loads(path.read_text()).items()
    ]
    views = ["MLM loss, δ = 0.5 input: [MASK]s the encoder saw", "… and those it did not"]
    attention = [
        "decoder attention of a masked position to the 2 tokens each side, per layer (uniform)",
        "its entropy, nats (uniform)",
    ]
    return [*markdown_table([*header, "encoder's gradient share", *views, *attention], rows), ""]


def attention_cells(probe: dict) -> list[str]:
    """mae_lm_probe.py's decoder attention per layer, its share on the neighbours and its entropy, each beside uniform
    attention's; blank for probes older than the measure."""
    if "decoder_neighbour_attention" not in probe:
        return ["", ""]
    return [
        f"{', '.join(f'{value:.3f}' for value in probe[measure])} ({probe[uniform]:.3f})"
        for measure, uniform in (
            ("decoder_neighbour_attention", "neighbour_attention_if_uniform"),
            ("decoder_attention_entropy", "attention_entropy_if_uniform"),
        )
    ]


# mae_lm_probe.py's loss split by whether the encoder saw the [MASK] (half of them kept in its input).
VIEW_KEYS = ("masked_lm_loss_seen_by_encoder", "masked_lm_loss_unseen_by_encoder")


def collapsed_sweep_lines(root: Path) -> list[str]:
    """The same sweep at the other arms' learning rate (1e-3), where every arm collapsed."""
    models = analysis(root, "m_lr1e-3")
    if models is None:
        return []
    return [
        "### The same sweep at a peak learning rate of 1e-3",
        "",
        *markdown_table(
            ["δ", "rank clean (per layer)", "self-similarity (top)", "validation MLM loss"],
            [
                [
                    label.removeprefix("delta_"),
                    model["effective_rank"],
                    f"{model['self_similarity'][-1]:.3f}",
                    f"{final_eval_loss(root, 'm_lr1e-3_' + label):.3f}",
                ]
                for label, model in models.items()
            ],
        ),
        "",
        *probe_lines(root, "m_lr1e-3"),
    ]


def downstream_mean(table: dict, label: str) -> float:
    return statistics.mean(mean for mean, _ in table[label].values())


def m_pretrained(root: Path, figures: Path):
    """M1 and M2 on all-MiniLM-L6-v2 continued as MAE-LM (reproduce.py's M-pretrained): two rows, one section."""
    root = experiment_root(root, "mp")
    models = analysis(root, "mp")
    if models is None:
        return None
    table = scores(root, "mp")
    entropy = unigram_entropy(root, minilm_path())
    losses = {label: final_eval_loss(root, f"mp_{label}") for label in DELTA_LABELS}
    evaluated = all(f"mp_{label}" in table for label in DELTA_LABELS)
    arms = {f"δ = {label.removeprefix('delta_')}": f"mp_{label}" for label in DELTA_LABELS}
    rows = pretrained_rows(models, table if evaluated else {}, losses, entropy)
    cells = pooled_cells([root], "mp", {f"mp_{label}": label for label in DELTA_LABELS}) if evaluated else {}
    section = [
        "## M1, M2 from a pretrained start — all-MiniLM-L6-v2 continued as MAE-LM with δ = 0, 0.5, 1",
        "",
        "Each arm's encoder starts as all-MiniLM-L6-v2 itself (`MaeLmForMaskedLM.from_encoder`: the same hidden "
        "states, every layer), with a new decoder and LM head (MiniLM has no MLM head); "
        f"{' / '.join(str(trained_steps(root, f'mp_{label}')) for label in DELTA_LABELS)} steps (δ = 0 / 0.5 / 1), "
        f"{held_text(root, list(arms.values()))}, at a peak rate of "
        f"{peak_rate(root, 'mp_delta_0.0'):.2g}, batch 16, one pre-training seed. "
        "The rules are M1's and M2's above; both are void unless every arm's validation loss is at least "
        f"{LEARNING_MARGIN} nats below the unigram entropy of the corpus in MiniLM's vocabulary ({entropy:.2f} nats). "
        "Scores: mean and 95% confidence interval over the fine-tuning seeds.",
        "",
        *markdown_table(
            [
                "arm",
                "validation loss",
                "rank clean (per layer)",
                "rank with [MASK] (per layer)",
                "self-similarity (per layer)",
                *KINDS,
            ],
            [
                [
                    label,
                    f"{losses[label]:.3f}" if label in losses else "",
                    model["effective_rank"],
                    model["effective_rank_with_mask"],
                    "[" + ", ".join(f"{v:.2f}" for v in model["self_similarity"]) + "]",
                    *(interval(cells[label, kind]) if (label, kind) in cells else "" for kind in KINDS),
                ]
                for label, model in models.items()
            ],
        ),
        "",
        *probe_lines(root, "mp"),
        figure_link(plot_validation_curves(root, arms, entropy, figures / "mp_validation_loss.png").name),
        copy_figure(root / "analysis" / "mp" / "layer_curves.png", figures, "mp_layer_curves.png"),
        figure_link(
            plot_delta_sweep(
                {label: models[label] for label in DELTA_LABELS}, table if evaluated else {}, figures, "mp"
            ).name
        ),
        "",
    ]
    return "\n".join(rows), section


def held_text(root: Path, runs: list[str]) -> str:
    held = [held_steps(root, run) or 0 for run in runs]
    if set(held) == {0}:
        return "the encoder trained from the first step"
    if len(set(held)) > 1:
        return f"the encoder held still for the first {' / '.join(map(str, held))} steps"
    return f"the encoder held still for the first {held[0]} steps (`--hold_encoder_steps`) in every arm"


def pretrained_rows(models: dict, table: dict, losses: dict[str, float], entropy: float) -> list[str]:
    """M1's and M2's summary rows for the pretrained start: their rules, void unless every arm learned; `table` is
    empty until the arms are fine-tuned."""
    void = delta_void(losses, entropy)
    mlm, mae = models["delta_1.0"], models["delta_0.0"]
    numbers, m2_verdict = m2_rule(models, table, "mp")
    validation_losses = " / ".join(f"{loss:.2f}" for loss in losses.values())
    return [
        "| M1, pretrained start | MAE-LM (Fig. 1, 5) on all-MiniLM-L6-v2 continued: the MLM layout's (δ=1) real tokens "
        "use fewer dimensions with [MASK] in the input; MAE-LM's (δ=0) use at least as many | top-layer rank_0.9, "
        f"δ=1: {mlm['effective_rank'][-1]} clean / {mlm['effective_rank_with_mask'][-1]} with [MASK]; δ=0: "
        f"{mae['effective_rank'][-1]} / {mae['effective_rank_with_mask'][-1]}; validation loss (δ = 0 / 0.5 / 1) "
        f"{validation_losses} vs unigram {entropy:.2f} | {void or VERDICTS[m1_points(models)]} |",
        "| M2, pretrained start | MAE-LM (Fig. 4) on all-MiniLM-L6-v2 continued: the more [MASK] the encoder sees, "
        f"the lower the real tokens' rank and the downstream score | {numbers} | {void or m2_verdict} |",
    ]
