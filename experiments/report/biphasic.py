"""B1 and B2 (paper 004): CLM then MLM against MLM alone at equal budget, and MLM continued from a causal LM."""

import statistics
from pathlib import Path

from hf_encoders.evaluation.report import Cell

from ..tasks import KINDS
from .figures import copy_figure, figure_link, plot_rate_grid
from .runs import analysis, final_eval_loss, pooled_cells, pretraining_seed_roots, trained_steps, unigram_entropy
from .tables import interval, markdown_table
from .verdicts import LEARNING_MARGIN, VERDICTS, learned_or_void, task_wins

B1_ARMS = ("clm_then_mlm", "mlm_only")  # compared downstream
PHASE_ARMS = (*B1_ARMS, "clm_only")  # pre-trained and analysed


def b1(root: Path, figures: Path):
    roots = pretraining_seed_roots(root, "b1")
    if not roots:
        return None
    cells = pooled_cells(roots, "b1", {f"b1_{arm}": arm for arm in B1_ARMS})
    pfs, mlm = B1_ARMS
    entropy = unigram_entropy(roots[0])
    losses = {arm: [final_eval_loss(seed_root, f"b1_{arm}") for seed_root in roots] for arm in PHASE_ARMS}
    wins, clear = task_wins(cells, pfs, mlm, KINDS)
    steadier = [kind for kind in KINDS if rate_spread(cells[pfs, kind]) < rate_spread(cells[mlm, kind])]
    compared = {arm: losses[arm] for arm in B1_ARMS}
    verdict = learned_or_void(compared, entropy) or VERDICTS[(len(wins) >= 3) + (len(steadier) >= 3)]
    rates = cells[pfs, "sc"].validation_by_rate
    fine_tunings = len(next(iter(rates.values())))
    row = (
        "| B1 | Paper 004 (PFS, Fig. 5): at equal budget, CLM 25% → MLM 75% beats MLM 100% downstream and is less "
        f"sensitive to the fine-tuning rate | CLM→MLM beats MLM on {wins_text(wins, clear)}, moves less over the rate "
        f"grid on {len(steadier)}/4 ({', '.join(steadier) or 'none'}); "
        f"{losses_text(losses[pfs], losses[mlm], entropy)}, {len(roots)} pre-training seeds | {verdict} |"
    )
    analyses = [analysis(seed_root, "b1") or {} for seed_root in roots]
    section = [
        "## B1 — CLM → MLM against MLM and CLM alone (same biphasic architecture, one WSD schedule)",
        "",
        f"{len(roots)} pre-training seeds, each arm fine-tuned at rates {', '.join(f'{rate:g}' for rate in rates)}: "
        f"{fine_tunings} runs per arm, task and rate over the pre-training × fine-tuning seeds. Verdict rule: void "
        f"unless every compared arm's validation loss is at least {LEARNING_MARGIN} nats below the unigram entropy; "
        "then one point for a better test mean on 3 of 4 tasks, one for a smaller fall of the validation mean from "
        "the best rate to the worst on 3 of 4 (paper 004's Fig. 5: CLM-pretrained models are less sensitive to the "
        "learning rate).",
        "",
        *seed_arms_table(PHASE_ARMS, losses, entropy, analyses),
        "",
        "The validation loss is the objective of the arm's last phase (CLM's for clm_only), so it compares the two "
        "MLM-ending arms only. CLM alone is not fine-tuned (2-core budget). Downstream, test split at the best rate, "
        "mean and 95% confidence interval over every pre-training × fine-tuning seed (Student t); the fall over the "
        "rate grid is in validation points:",
        "",
        *markdown_table(
            ["arm", *(f"{kind} (fall over rates)" for kind in KINDS)],
            [
                [arm, *(f"{interval(cells[arm, kind])} ({rate_spread(cells[arm, kind]):.1f})" for kind in KINDS)]
                for arm in B1_ARMS
            ],
        ),
        "",
        figure_link(plot_rate_grid(cells, figures / "b1_rate_grid.png").name),
        copy_figure(roots[0] / "analysis" / "b1" / "layer_curves.png", figures, "b1_layer_curves.png"),
        "",
    ]
    return row, section


def seed_arms_table(arms, losses: dict[str, list[float]], entropy: float, analyses: list[dict]) -> list[str]:
    """Per arm, each pre-training seed's validation loss (and its distance below the unigram entropy) and the top
    layer's self-similarity and rank from each seed's analysis."""
    return markdown_table(
        ["arm", "validation loss per seed (unigram − loss)", "self-similarity (top)", "rank clean (top)"],
        [
            [
                arm,
                ", ".join(f"{loss:.3f} ({entropy - loss:+.2f})" for loss in losses[arm]),
                ", ".join(f"{a[arm]['self_similarity'][-1]:.3f}" for a in analyses if arm in a),
                ", ".join(str(a[arm]["effective_rank"][-1]) for a in analyses if arm in a),
            ]
            for arm in arms
        ],
    )


B2_STARTS = ("clm_only", "mlm_only")  # B1's arms, each continued with MLM


def b2_equal_budget(root: Path, figures: Path):
    """Paper 004's section 5 at our scale: B1's CLM-only and MLM-only arms, equal in size, tokens and decayed
    schedule, each continued with MLM for the same steps (reproduce.py's B2-equal-budget)."""
    roots = pretraining_seed_roots(root, "b2e")
    if not roots:
        return None
    arms = [f"cpt_{start}" for start in B2_STARTS]
    cells = pooled_cells(roots, "b2e", {f"b2e_{arm}": arm for arm in arms})
    from_clm, from_mlm = arms
    entropy = unigram_entropy(roots[0])
    losses = {arm: [final_eval_loss(seed_root, f"b2e_{arm}") for seed_root in roots] for arm in arms}
    starting = [final_eval_loss(seed_root, "b1_mlm_only") for seed_root in roots]
    wins, clear = task_wins(cells, from_clm, from_mlm, KINDS)
    verdict = learned_or_void(losses, entropy) or VERDICTS[(len(wins) >= 2) + (len(wins) >= 3)]
    steps = trained_steps(roots[0], f"b2e_{from_clm}")
    row = (
        "| B2, equal budget | Paper 004 (CPT, section 5): continuing a CLM-pretrained model with MLM beats continuing "
        f"an MLM-pretrained model of equal training with MLM | from CLM beats from MLM on {wins_text(wins, clear)}; "
        f"{losses_text(losses[from_clm], losses[from_mlm], entropy)}, {len(roots)} pre-training seeds | {verdict} |"
    )
    analyses = [analysis(seed_root, "b2e") or {} for seed_root in roots]
    section = [
        "## B2 at equal budget — MLM continued from B1's CLM-only and MLM-only arms",
        "",
        f"Each pre-training seed's B1 CLM-only and MLM-only arms (the same architecture, tokens and decayed WSD "
        f"schedule) continued with MLM (40% masking, every masked token [MASK]) for {steps} steps at a peak rate of "
        "1e-3, WSD again; then fine-tuned on every task at 1e-3 and 3e-3, the rate chosen per task by the validation "
        "mean. Verdict rule: void unless both continued arms' validation MLM loss is at least "
        f"{LEARNING_MARGIN} nats below the unigram entropy; then reproduced if the CLM start's test mean is higher on 3 "
        "of 4 tasks, partly on 2, not reproduced on fewer.",
        "",
        *seed_arms_table(arms, losses, entropy, analyses),
        "",
        f"Before the continuation, the MLM-only start was at {', '.join(f'{loss:.3f}' for loss in starting)} "
        "(B1's table); the CLM-only start had never seen a masked token. Downstream, test split at the best rate, "
        "mean and 95% confidence interval over every pre-training × fine-tuning seed (Student t):",
        "",
        *markdown_table(
            ["arm", *(f"{kind} ({cells[from_clm, kind].metric})" for kind in KINDS)],
            [[arm, *(interval(cells[arm, kind]) for kind in KINDS)] for arm in arms],
        ),
        "",
    ]
    return row, section


def b2(root: Path, figures: Path):
    if not (root / "pretrain" / "b2_scratch" / "log_history.json").exists():
        return None
    cpt, scratch = final_eval_loss(root, "b2_cpt"), final_eval_loss(root, "b2_scratch")
    # Both arms read SmolLM2's vocabulary (the scratch arm takes the converted model's tokenizer).
    entropy = unigram_entropy(root, root / "smollm2_encoder")
    void = learned_or_void({"from scratch": [scratch], "from SmolLM2-135M": [cpt]}, entropy)
    row = (
        "| B2 | Paper 004 (CPT): MLM continued from a causal LM beats MLM from scratch at equal MLM steps | held-out "
        f"masked-LM loss: from SmolLM2-135M {cpt:.3f}, from scratch {scratch:.3f} (unigram {entropy:.2f}) | "
        f"{void or VERDICTS[2 if cpt < scratch else 0]} |"
    )
    return row, []


def rate_spread(cell: Cell) -> float:
    """How far the validation mean falls from the best fine-tuning rate to the worst: paper 004's Fig. 5 stability."""
    means = [statistics.fmean(values) for values in cell.validation_by_rate.values()]
    return max(means) - min(means)


def wins_text(wins: list[str], clear: list[str]) -> str:
    """ "N/4 tasks (the tasks won; intervals apart on M: those whose intervals do not overlap)"."""
    return f"{len(wins)}/4 tasks ({', '.join(wins) or 'none'}; intervals apart on {len(clear)}: {', '.join(clear) or 'none'})"


def losses_text(first: list[float], second: list[float], entropy: float) -> str:
    """Two arms' validation MLM losses, each a mean over pre-training seeds, beside the unigram entropy."""
    return (
        f"validation MLM loss {statistics.fmean(first):.2f} vs {statistics.fmean(second):.2f} (unigram {entropy:.2f})"
    )
