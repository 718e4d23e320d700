"""T1 (TaCL, Fig. 2-3): TaCL against MLM continuation of the same start, from all-MiniLM-L6-v2 and from a start whose
MLM head is trained."""

import statistics
from dataclasses import dataclass
from pathlib import Path

from .figures import copy_figure
from .runs import (
    analysis,
    final_eval_loss,
    minilm_path,
    pooled_cells,
    pretraining_seed_roots,
    trained_steps,
    unigram_entropy,
)
from .tables import interval, markdown_table
from .verdicts import LEARNING_MARGIN, VERDICTS, learned_or_void, task_wins


@dataclass(frozen=True)
class TaclComparison:
    """A T1 claim: TaCL against MLM continuation of one start, equal steps, pooled over pre-training seeds."""

    claim: str  # its id in the summary table
    experiment: str  # its analysis/ and evaluate/ folder name
    title: str
    statement: str  # the paper's statement, for the summary table
    start: str  # the starting model's label in the analysis
    start_name: str  # how the summary row names it
    start_folder: str  # the name of the folder fine-tuned as the start
    tokenizer: str | None  # whose vocabulary the unigram entropy is in (None: the from-scratch tokenizer)
    setting: str  # how the arms were run, for the section

    @property
    def runs(self) -> dict[str, str]:
        """Arm -> its pre-training run (reproduce.py names them after the experiment)."""
        return {arm: f"{self.experiment}_{arm}" for arm in ("mlm", "tacl")}

    @property
    def labels(self) -> dict[str, str]:
        """Fine-tuned folder, or the run folder a TaCL student sits in -> arm."""
        return {self.start_folder: self.start, **{run: arm for arm, run in self.runs.items()}}


T1 = TaclComparison(
    claim="T1",
    experiment="t1",
    title="T1 — TaCL vs MLM continuation of all-MiniLM-L6-v2",
    statement="TaCL (Fig. 2-3): continued from the same BERT, TaCL gives top-layer tokens a lower self-similarity than "
    "MLM-only continuation, and better downstream scores",
    start="minilm",
    start_name="MiniLM",
    start_folder="model",
    tokenizer="minilm",
    setting="MiniLM is a sentence encoder without an MLM head, so both arms start with a fresh one. The MLM arm is "
    "`--method mlm`; fine-tuned at 1e-4",
)

T1_TRAINED_HEAD = TaclComparison(
    claim="T1, trained head",
    experiment="t1h",
    title="T1 from a start with a trained MLM head — B1's MLM-only arm continued with TaCL and with MLM",
    statement="TaCL (Fig. 2-3), from a start whose MLM head is trained as the paper's BERT's is: TaCL gives a lower "
    "top-layer self-similarity than MLM-only continuation, and better downstream scores",
    start="start",
    start_name="the start (B1's MLM-only arm)",
    start_folder="b1_mlm_only",
    tokenizer=None,
    setting="The start is each pre-training seed's B1 MLM-only arm (biphasic, off the plateau, its MLM head trained). "
    "The MLM arm is the same TaCL run with its contrastive term weighted 0 (`--tacl_loss_weight 0`): the same "
    "sentence pairs, masks and head, so only the contrastive term differs; fine-tuned at 1e-3, one of B1's two best "
    "rates",
)

T1_KINDS = ["sc", "tc", "qa"]


def t1(root: Path, figures: Path):
    return tacl_comparison(root, figures, T1)


def t1_trained_head(root: Path, figures: Path):
    return tacl_comparison(root, figures, T1_TRAINED_HEAD)


def tacl_comparison(root: Path, figures: Path, spec: TaclComparison):
    roots = pretraining_seed_roots(root, spec.experiment)
    if not roots:
        return None
    cells = pooled_cells(roots, spec.experiment, spec.labels)
    analyses = [analysis(seed_root, spec.experiment) for seed_root in roots]
    arms = [spec.start, "mlm", "tacl"]
    similarity = {arm: [models[arm]["self_similarity"][-1] for models in analyses] for arm in arms}
    mean_similarity = {arm: statistics.fmean(values) for arm, values in similarity.items()}
    entropy = unigram_entropy(roots[0], minilm_path() if spec.tokenizer == "minilm" else None)
    losses = {arm: [final_eval_loss(seed_root, run) for seed_root in roots] for arm, run in spec.runs.items()}
    better, clear = task_wins(cells, "tacl", "mlm", T1_KINDS)
    points = (mean_similarity["tacl"] < mean_similarity["mlm"]) + (len(better) >= 2)
    verdict = learned_or_void(losses, entropy) or VERDICTS[points]
    below_start = "below" if mean_similarity["tacl"] < mean_similarity[spec.start] else "not below"
    row = (
        f"| {spec.claim} | {spec.statement} | top-layer self-similarity (mean over {len(roots)} pre-training seeds): "
        f"{spec.start_name} {mean_similarity[spec.start]:.3f}, MLM {mean_similarity['mlm']:.3f}, TaCL "
        f"{mean_similarity['tacl']:.3f} ({below_start} the start); TaCL beats MLM on {len(better)}/3 tasks "
        f"({', '.join(better) or 'none'}; intervals apart on {len(clear)}); validation MLM loss {statistics.fmean(losses['mlm']):.2f} / "
        f"{statistics.fmean(losses['tacl']):.2f} (unigram {entropy:.2f}) | {verdict} |"
    )
    steps = trained_steps(roots[0], spec.runs["tacl"])
    name = spec.experiment
    section = [
        f"## {spec.title}",
        "",
        f"{steps} continued steps at a peak rate of 1e-4, {len(roots)} pre-training seeds. {spec.setting}. Verdict "
        f"rule: void unless both arms' validation MLM loss is at least {LEARNING_MARGIN} nats below the unigram "
        "entropy in the start's vocabulary; then one point for a lower top-layer self-similarity than MLM (mean over "
        "pre-training seeds), one for a better test mean on 2 of 3 tasks. Scores: mean and 95% confidence interval "
        "over every pre-training × fine-tuning seed.",
        "",
        *markdown_table(
            ["model", "validation loss per seed", "self-similarity (top) per seed", *T1_KINDS],
            [
                [
                    arm,
                    ", ".join(f"{loss:.3f}" for loss in losses.get(arm, [])),
                    ", ".join(f"{value:.3f}" for value in similarity[arm]),
                    *(interval(cells[arm, kind]) for kind in T1_KINDS),
                ]
                for arm in arms
            ],
        ),
        "",
        copy_figure(roots[0] / "analysis" / name / "layer_curves.png", figures, f"{name}_layer_curves.png"),
        copy_figure(roots[0] / "analysis" / name / "similarity_mlm.png", figures, f"{name}_similarity_mlm.png"),
        copy_figure(roots[0] / "analysis" / name / "similarity_tacl.png", figures, f"{name}_similarity_tacl.png"),
        "",
    ]
    return row, section
