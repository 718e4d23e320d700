"""`hf-encoders demo`: every method on the same token budget, offline, on 2 CPU cores in minutes.

1. a WordPiece tokenizer trained on the embedded corpus (English prose from Python's documentation);
2. pre-training: the BERT MLM baseline, MAE-LM, TaCL continued from the baseline, biphasic CLM->MLM;
3. analysis of every encoder (`hf-encoders analyze`: self-similarity, effective rank, heatmaps);
4. fine-tuning on a downstream task built from corpus sentences: is the word order intact or shuffled?
   (a syntax probe a bag of words cannot solve; pre-training saw the sentences, never the labels);
5. demo_output/REPORT.md: one table and the plots.

One Ctrl-C stops the whole demo, saying what is kept; running the same command again continues where it stopped
(each finished stage kept, an interrupted pre-training resumed from its checkpoint), `--restart` starts afresh.
"""

import json
import random
import shutil
from pathlib import Path

from datasets import Dataset
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

from hf_encoders_cli import demo_parser as build_parser

from .analysis import LayerwiseReport, token_counts, unigram_entropy
from .analysis.command import analyze, corpus_sentences
from .data.corpus import load_documents
from .data.tokenizer import train_wordpiece_tokenizer
from .flag_spellings import accept_dashed_spellings
from .methods import METHODS, get_method
from .metrics import classification_metrics
from .model_folders import load_model
from .training.arguments import PretrainArguments
from .training.loss_curves import plot_loss_curves
from .training.pretrain import pretrain
from .training.resume import last_complete_checkpoint

# What the demo writes into --output_dir, all that --restart removes: files of the user's stay.
STATE = "demo_state.json"
WRITTEN = (STATE, "tokenizer", "pretrain", "analysis", "loss_curves.png", "REPORT.md")
# Options that change nothing a stage computes: a run may continue an earlier one whatever they are.
NOT_COMPARED = ("output_dir", "methods", "restart")


class DemoState:
    """What the demo has finished in its folder (demo_state.json), so that running it again continues there: the
    settings it ran with, whether the tokenizer is trained, each finished pre-training's encoder and each
    fine-tuning's accuracy. Written whole after each stage, by a rename, so a Ctrl-C never leaves half of it."""

    def __init__(self, settings):
        self.path = settings.output_dir / STATE
        self.settings = {key: value for key, value in vars(settings).items() if key not in NOT_COMPARED}
        self.data = {"settings": self.settings, "tokenizer": False, "pretrained": {}, "accuracies": {}}

    def load(self) -> "DemoState":
        """The folder's earlier state, refused if it ran with other settings (its stages would mix with this
        run's) or if the folder holds a demo's files but no state."""
        folder = self.path.parent
        if not self.path.is_file():
            if any((folder / name).exists() for name in WRITTEN):
                raise ValueError(
                    f"{folder} holds files of an earlier demo but no {STATE} saying which stages it finished; add "
                    "--restart to start afresh (removing what the demo wrote there), or pass a new --output_dir."
                )
            return self
        earlier = json.loads(self.path.read_text())
        differ = [key for key, value in self.settings.items() if earlier["settings"].get(key) != value]
        if differ:
            given = ", ".join(f"--{key} {earlier['settings'].get(key)}" for key in differ)
            raise ValueError(
                f"{folder} holds a demo run with {given}: pass the same to continue it, or add --restart to start "
                "afresh with these settings."
            )
        self.data = earlier
        return self

    def save(self) -> None:
        partial = self.path.with_suffix(".json.partial")
        partial.write_text(json.dumps(self.data, indent=1))
        partial.replace(self.path)

    def stopped_line(self, names: list[str], steps: int) -> str:
        """The demo's last line after a Ctrl-C: what is kept, and how to go on."""
        kept = ["the tokenizer"] if self.data["tokenizer"] else []
        for name in names:
            checkpoint = last_complete_checkpoint(self.path.parent / "pretrain" / name)
            if name in self.data["pretrained"]:
                tuned = name in self.data["accuracies"]
                kept.append(f"{name} pre-trained{' and fine-tuned' if tuned else ''}")
            elif checkpoint is not None:
                step = json.loads((checkpoint / "trainer_state.json").read_text())["global_step"]
                kept.append(f"{name}'s pre-training at step {step} of {steps} ({checkpoint})")
        return (
            f"hf-encoders demo: stopped. Kept in {self.path.parent}: {'; '.join(kept) or 'nothing yet'}. Run the "
            "same command again to continue from there, or add --restart to start afresh."
        )


class Stopped(Exception):
    """A stage stopped by Ctrl-C (or SIGTERM) with what it did saved."""


def restart(output_dir: Path) -> None:
    """Remove what the demo wrote into `output_dir` before (and only that)."""
    for name in WRITTEN:
        path = output_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def demo_training_arguments(output_dir: Path, settings, **overrides) -> TrainingArguments:
    """The TrainingArguments every demo run shares, pre-training and fine-tuning alike; `overrides` set the rest."""
    defaults = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=settings.batch_size,
        learning_rate=2e-3,
        warmup_steps=0.1,
        weight_decay=0.01,
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        dataloader_pin_memory=False,
        seed=settings.seed,
    )
    return TrainingArguments(**{**defaults, **overrides})


def pretrain_all(settings, tokenizer_dir: Path, names: list[str], state: DemoState) -> dict[str, dict]:
    """Every chosen method, in the table's order; one that continues another's encoder (TaCL) starts from that run.
    A pre-training finished before is kept, one stopped before resumes from its last checkpoint."""
    for name, method in METHODS.items():
        if name in names and method.demo_continues and method.demo_continues not in names:
            raise ValueError(f"demo run {name!r} continues from {method.demo_continues!r}; include it in --methods.")
    runs = {}
    for name, method in METHODS.items():
        if name not in names:
            continue
        output_dir = settings.output_dir / "pretrain" / name
        if name in state.data["pretrained"]:
            print(f"\n=== pre-training {method.title}: finished in an earlier run, kept ===", flush=True)
            log_history = json.loads((output_dir / "log_history.json").read_text())
            runs[name] = {"path": state.data["pretrained"][name], "log_history": log_history}
            continue
        checkpoint = last_complete_checkpoint(output_dir)
        resumed = f", resumed from {checkpoint.name}" if checkpoint else ""
        print(f"\n=== pre-training {method.title} ({settings.steps} steps{resumed}) ===", flush=True)
        args = PretrainArguments(
            method=name,
            tokenizer_name=str(tokenizer_dir),
            block_size=settings.block_size,
            model_size=None if method.demo_continues else "tiny",  # a continued encoder keeps its own size
            model_name_or_path=runs[method.demo_continues]["path"] if method.demo_continues else None,
        )
        training_args = demo_training_arguments(
            output_dir,
            settings,
            max_steps=settings.steps,
            resume_from_checkpoint=str(checkpoint) if checkpoint else None,
        )
        result = pretrain(args, training_args)
        if result.preempted:  # its checkpoint is saved: the next run resumes it
            raise Stopped
        runs[name] = {"path": str(result.encoder_dir), "log_history": result.trainer.state.log_history}
        state.data["pretrained"][name] = runs[name]["path"]
        state.save()
    return runs


def word_order_task(sentences: list[str], seed: int) -> Dataset:
    """Label 1: a sentence as written; label 0: the same sentence with its words shuffled."""
    rng = random.Random(seed)
    texts, labels = [], []
    for sentence in sentences:
        words = sentence.split()
        if len(words) < 5:
            continue
        shuffled = words[:]
        while shuffled == words:
            rng.shuffle(shuffled)
        keep = rng.random() < 0.5
        texts.append(sentence if keep else " ".join(shuffled))
        labels.append(int(keep))
    return Dataset.from_dict({"text": texts, "label": labels})


def finetune(path: str, task: Dataset, settings) -> float:
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = load_model(AutoModelForSequenceClassification, path, num_labels=2, trust_remote_code=True)
    encoded = task.map(
        lambda batch: tokenizer(batch["text"], truncation=True, max_length=settings.block_size), batched=True
    )
    split = encoded.train_test_split(test_size=0.25, seed=settings.seed)
    trainer = Trainer(
        model=model,
        args=demo_training_arguments(
            Path(path) / "finetune",
            settings,
            num_train_epochs=settings.finetune_epochs,
            learning_rate=5e-4,
            eval_strategy="no",
            per_device_eval_batch_size=64,
        ),
        train_dataset=split["train"],
        eval_dataset=split["test"],
        processing_class=tokenizer,
        compute_metrics=classification_metrics,
    )
    trainer.train()
    return trainer.evaluate()["eval_accuracy"]


# A masked-LM loss less than this far below the unigram entropy is not read as a model using context.
PLATEAU_MARGIN = 0.5


def masked_lm_loss(log_history: list[dict]) -> float:
    """The last logged masked-LM loss: TaCL's and biphasic's MLM term, the whole loss of the others."""
    entry = [entry for entry in log_history if "loss" in entry][-1]
    return entry.get("mlm_loss", entry["loss"])


def loss_cell(loss: float, plateau: float) -> str:
    below = plateau - loss
    flag = " — **on its plateau**" if below < PLATEAU_MARGIN else ""
    return f"{loss:.3f} ({abs(below):.2f} {'below' if below >= 0 else 'above'} H){flag}"


def write_report(settings, runs: dict, analysis: list[LayerwiseReport], accuracies: dict, plateau: float) -> Path:
    by_model = {report.model: report for report in analysis}
    rows = [
        "| method | masked-LM loss, last logged | word-order accuracy | top-layer self-similarity | top-layer "
        "effective rank (clean / with [MASK]) | what else differs from mlm |",
        "|---|---|---|---|---|---|",
    ]
    for label, run in runs.items():
        layers = by_model[label]
        rows.append(
            f"| {label} | {loss_cell(masked_lm_loss(run['log_history']), plateau)} | {accuracies[label]:.3f} | "
            f"{layers.self_similarity[-1]:.3f} | "
            f"{layers.effective_rank[-1]} / {layers.effective_rank_with_mask[-1]} (of {layers.hidden_size}) | "
            f"{get_method(label).demo_confounds} |"
        )
    tokens = settings.steps * settings.batch_size * settings.block_size
    text = "\n".join(
        [
            "# hf-encoders demo",
            "",
            f"Every method pre-trained for {settings.steps} steps × {settings.batch_size} × {settings.block_size} tokens "
            f"(about {tokens:,} tokens) on English prose embedded from Python's documentation, tiny models, CPU.",
            "TaCL continues from the MLM baseline. The downstream task tells intact corpus sentences from word-shuffled "
            "ones (accuracy on a held-out 25% of the labelled examples; chance is 0.5).",
            "",
            *rows,
            "",
            f"H = {plateau:.2f} nats is the unigram entropy of the corpus in the demo's tokenizer: the masked-LM loss of "
            "a model that reads no context and predicts how frequent each token is. A row less than "
            f"{PLATEAU_MARGIN} nats below it is marked as on its plateau: its encoder is not yet shown to read "
            "context, so its other columns say little about its method. BERT's 80/10/10 masking leaves a tenth of "
            "the targets in place, so mlm can go about half a nat below H by copying them. At the demo's default "
            "budget the pre-LN, rotary biphasic network leaves the plateau within a few hundred steps, MAE-LM (with "
            "the decoder options of its tiny size: a locality bias and larger value projections in its decoder) and "
            "mlm within the run; with fewer steps they may not (docs/pretraining.md, small runs). TaCL's row is its "
            "MLM term, which its contrastive term pulls back above the baseline it continues.",
            "",
            "Self-similarity is TaCL's Eq. 3 (lower = more discriminative tokens); effective rank is MAE-LM's rank at "
            "τ = 0.9 of the real-token representations.",
            "",
            "Read the rows as a smoke test, not as evidence for or against a method: the models are tiny, trained "
            "once and briefly, and each row differs from the baseline in more than its method (last column). The "
            "papers' claims, each at equal budget with the confounds removed, are tested in the repository's "
            "experiments/REPORT.md.",
            "",
            "![loss curves](loss_curves.png)",
            "",
            "![per-layer diagnostics](analysis/layer_curves.png)",
            "",
            *[f"![{label} similarity](analysis/similarity_{label}.png)" for label in runs],
            "",
        ]
    )
    path = settings.output_dir / "REPORT.md"
    path.write_text(text)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    settings = parser.parse_args(accept_dashed_spellings(argv, parser))
    names = [get_method(name.strip()).name for name in settings.methods.split(",")]
    if settings.restart:
        restart(settings.output_dir)
    settings.output_dir.mkdir(parents=True, exist_ok=True)
    state = DemoState(settings).load()
    try:
        run_demo(settings, names, state)
    except (KeyboardInterrupt, Stopped):
        print(f"\n{state.stopped_line(names, settings.steps)}", flush=True)
        return 130  # the shell's code for a run ended by Ctrl-C
    return 0


def run_demo(settings, names: list[str], state: DemoState) -> None:
    documents = load_documents()
    tokenizer_dir = settings.output_dir / "tokenizer"
    if state.data["tokenizer"]:  # never trained again: training one is not reproducible, and the models use it
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    else:
        tokenizer = train_wordpiece_tokenizer(documents["text"], vocab_size=settings.vocab_size)
        tokenizer.save_pretrained(tokenizer_dir)
        state.data["tokenizer"] = True
        state.save()
    plateau = unigram_entropy(token_counts(tokenizer, documents["text"]))
    runs = pretrain_all(settings, tokenizer_dir, names, state)
    plot_loss_curves(
        {label: run["log_history"] for label, run in runs.items()}, settings.output_dir / "loss_curves.png"
    )

    print("\n=== analysis ===", flush=True)
    analysis = analyze(
        [run["path"] for run in runs.values()],
        settings.output_dir / "analysis",
        labels=list(runs),
        max_sentences=400,
        trust_remote_code=True,
    )

    task = word_order_task(corpus_sentences(None, settings.finetune_examples), settings.seed)
    accuracies = state.data["accuracies"]
    for label, run in runs.items():
        if label in accuracies:
            print(f"\n=== fine-tuning {label} on word order: finished in an earlier run, kept ===", flush=True)
            continue
        print(f"\n=== fine-tuning {label} on word order ===", flush=True)
        accuracies[label] = finetune(run["path"], task, settings)
        state.save()
    report = write_report(settings, runs, analysis, accuracies, plateau)
    print(f"\nWrote {report}")
