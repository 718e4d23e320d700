"""The command lines of the experiment scripts (reproduce.py, masking_sweep.py) and the settings they share: light to
import, so that gpu.py can check a plan's commands without loading a model library."""

import argparse
from pathlib import Path

from . import RESULTS
from .corpus import DOCUMENTATION_SOURCES
from .tasks import SPLITS

HERE = Path(__file__).parent
EXPERIMENTS = ("T1", "T1-MiniLM", "M", "M-pretrained", "B1", "B2", "B2-equal-budget", "report")
# What `report` collects into results files: the experiments above and U (which masking_sweep.py runs).
COLLECTED = (*EXPERIMENTS[:-1], "U")
# From-scratch models: 4 layers x 256 by default (--layers), blocks of 128 tokens, 16 per batch, the same steps for
# every arm.
SCRATCH_LAYERS = "hidden_size=256,num_hidden_layers=4,num_attention_heads=4,intermediate_size=1024"
# MAE-LM's share of [MASK] tokens kept in the encoder: 1 = MLM with a decoder, 0 = MAE-LM.
DELTAS = (1.0, 0.5, 0.0)
# MAE-LM sweeps: name -> peak learning rate. At 1e-3 (the other arms' rate) every post-LN MAE-LM arm's encoder
# collapsed onto one vector at 4 x 256 and batch 16 (REPORT.md, M), so the claims are tested at --mae-lm-learning-rate.
COLLAPSED_SWEEP = ("m_lr1e-3", 1e-3)
# M-pretrained: a fresh decoder on a pretrained encoder. Unheld, the encoder collapses onto one vector within 300
# steps; held, the decoder alone takes well over 1,000 steps to read it (scan/SCAN.md, sections 8 and 9). The hold is
# the decoder's start, not a share of the run: a longer run trains the two together for longer (half a shorter run).
MP_HOLD_STEPS = 1500


def build_parser() -> argparse.ArgumentParser:
    """reproduce.py's options."""
    parser = common_parser(
        "Reproduce each paper's headline effect at small scale, through the package's public commands."
    )
    parser.add_argument(
        "--only",
        default=",".join(EXPERIMENTS),
        help="comma-separated subset of " + ", ".join(EXPERIMENTS) + " (`report` collects finished runs into "
        "results files and regenerates REPORT.md)",
    )
    parser.add_argument(
        "--collect",
        type=lambda text: [name.strip() for name in text.split(",")],
        default=list(COLLECTED),
        help="the experiments `report` collects, comma-separated (default: every one with runs under --output-dir)",
    )
    parser.add_argument(
        "--label",
        default="",
        help="a variant's name, added to each collected results file's experiment ('GPU' makes 'M, GPU') and figures",
    )
    parser.add_argument(
        "--figures-dir", type=Path, default=HERE / "figures", help="where `--only report` draws figures"
    )
    parser.add_argument(
        "--continue-steps",
        type=int,
        default=500,
        help="steps of the continued pre-training of T1, T1-MiniLM and B2-equal-budget",
    )
    parser.add_argument(
        "--mae-lm-continue-steps",
        type=int,
        default=3000,
        help=f"steps of M-pretrained's arms (a multiple of 10), the encoder held for the first {MP_HOLD_STEPS} (at most half)",
    )
    parser.add_argument(
        "--mp-arm",
        type=float,
        choices=DELTAS,
        help="pre-train only this δ arm of M-pretrained, so that its arms can run side by side (one process each); "
        "a run without it then analyses and fine-tunes them",
    )
    parser.add_argument("--cpt-steps", type=int, default=20, help="steps of B2's two 135M-parameter arms")
    parser.add_argument(
        "--decoder-layers",
        type=int,
        default=2,
        help="M's MAE-LM decoder depth (the paper's is 4, for 12 encoder layers)",
    )
    parser.add_argument(
        "--skip-collapsed-sweep",
        action="store_true",
        help=f"M without its sweep at {COLLAPSED_SWEEP[1]:g} (the rate at which every arm collapsed at 4 x 256)",
    )
    return parser


def common_parser(description: str) -> argparse.ArgumentParser:
    """The options of every experiment script that runs through Runner (this one and masking_sweep.py)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--corpus",
        type=Path,
        default=DOCUMENTATION_SOURCES,
        help="folder of .rst/.rst.txt sources, read once into --output-dir's corpus.jsonl (default: where Debian's "
        "python3.11-doc installs them)",
    )
    parser.add_argument("--output-dir", type=Path, default=HERE / "runs")
    parser.add_argument("--results-dir", type=Path, default=RESULTS, help="where `--only report` writes results files")
    parser.add_argument("--steps", type=int, default=400, help="pre-training steps of every from-scratch arm (M, B1)")
    parser.add_argument("--seed", type=int, default=0, help="pre-training seed of every arm")
    parser.add_argument("--batch-size", type=int, default=16, help="pre-training sequences per step, every arm")
    parser.add_argument("--layers", default=SCRATCH_LAYERS, help="config overrides of the from-scratch encoders' size")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="peak rate of the from-scratch biphasic arms")
    parser.add_argument("--mae-lm-learning-rate", type=float, default=3e-4, help="peak rate of M's from-scratch arms")
    parser.add_argument(
        "--finetune-steps",
        type=int,
        default=2 * SPLITS["train"] // 16,
        help="fine-tuning steps of batch 16 (default: two epochs of the tasks' training examples)",
    )
    parser.add_argument("--finetune-seeds", type=int, default=3, help="fine-tuning seeds per model, task and rate")
    parser.add_argument(
        "--parallel", type=int, default=1, help="pre-training arms and fine-tuning grids run at once (on a GPU: 4-8)"
    )
    return parser


def masking_parser() -> argparse.ArgumentParser:
    """masking_sweep.py's options."""
    parser = common_parser("U: the masking unit (token vs whole word vs SpanBERT span) for MLM and MAE-LM.")
    parser.add_argument(
        "--mae-lm-steps", type=int, help="the MAE-LM arms' steps (default --steps): 400 show M's plateau for less"
    )
    parser.add_argument(
        "--mlm-probability", type=float, help="the MLM arms' masking ratio (default: biphasic's own, 40%%)"
    )
    parser.add_argument(
        "--methods", default=",".join(MASKING_METHODS), help="comma-separated subset of " + ", ".join(MASKING_METHODS)
    )
    parser.add_argument(
        "--units",
        type=lambda text: [unit.strip() for unit in text.split(",")],
        help="comma-separated masking units (default: every one; token is the one every claim compares with)",
    )
    return parser


MASKING_METHODS = ("biphasic", "mae_lm")
