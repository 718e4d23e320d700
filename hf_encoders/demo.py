"""`hf-encoders demo`: every method on the same token budget, offline, on 2 CPU cores in minutes.

1. a WordPiece tokenizer trained on the embedded corpus (English prose from Python's documentation);
2. pre-training: the BERT MLM baseline, MAE-LM, TaCL continued from the baseline, biphasic CLM->MLM;
3. analysis of every encoder (`hf-encoders analyze`: self-similarity, effective rank, heatmaps);
4. fine-tuning on a downstream task built from corpus sentences: is the word order intact or shuffled?
   (a syntax probe a bag of words cannot solve; pre-training saw the sentences, never the labels);
5. demo_output/REPORT.md: one table and the plots.
"""

import argparse
import random
from pathlib import Path

from datasets import Dataset
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

from .analysis import LayerwiseReport, token_counts, unigram_entropy
from .analysis.command import analyze, corpus_sentences
from .data.corpus import load_documents
from .data.tokenizer import train_wordpiece_tokenizer
from .flag_spellings import accept_dashed_spellings
from .methods import METHODS, get_method
from .metrics import classification_metrics
from .training.arguments import PretrainArguments
from .training.loss_curves import plot_loss_curves
from .training.pretrain import pretrain


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-encoders demo", description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", type=Path, default=Path("demo_output"))
    parser.add_argument("--steps", type=int, default=600, help="pre-training steps per method (same for all)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--block_size", type=int, default=64)
    parser.add_argument("--vocab_size", type=int, default=4000)
    parser.add_argument("--finetune_examples", type=int, default=4000)
    parser.add_argument("--finetune_epochs", type=float, default=5)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of the methods")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def demo_training_arguments(output_dir: Path, settings, **overrides) -> TrainingArguments:
    """The TrainingArguments every demo run shares, pre-training and fine-tuning alike; `overrides` set the rest."""
    defaults = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=settings.batch_size,
        learning_rate=1e-3,
        warmup_steps=0.1,
        weight_decay=0.01,
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        dataloader_pin_memory=False,
        seed=settings.seed,
    )
    return TrainingArguments(**{**defaults, **overrides})


def pretrain_all(settings, tokenizer_dir: Path, names: list[str]) -> dict[str, dict]:
    """Every chosen method, in the table's order; one that continues another's encoder (TaCL) starts from that run."""
    runs = {}
    for name, method in METHODS.items():
        if name not in names:
            continue
        if method.demo_continues and method.demo_continues not in runs:
            raise ValueError(f"demo run {name!r} continues from {method.demo_continues!r}; include it in --methods.")
        output_dir = settings.output_dir / "pretrain" / name
        print(f"\n=== pre-training {method.title} ({settings.steps} steps) ===", flush=True)
        args = PretrainArguments(
            method=name,
            tokenizer_name=str(tokenizer_dir),
            block_size=settings.block_size,
            model_size=None if method.demo_continues else "tiny",  # a continued encoder keeps its own size
            model_name_or_path=runs[method.demo_continues]["path"] if method.demo_continues else None,
        )
        result = pretrain(args, demo_training_arguments(output_dir, settings, max_steps=settings.steps))
        runs[name] = {"path": str(result.encoder_dir), "log_history": result.trainer.state.log_history}
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
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2, trust_remote_code=True)
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
    return f"{loss:.3f} ({below:+.2f}){flag}"


def write_report(settings, runs: dict, analysis: list[LayerwiseReport], accuracies: dict, plateau: float) -> Path:
    by_model = {report.model: report for report in analysis}
    rows = [
        "| method | masked-LM loss, last logged (H − loss) | word-order accuracy | top-layer self-similarity | top-layer "
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
            "the targets in place, so mlm can go about half a nat below H by copying them. At this budget the "
            "post-LN networks (mlm, mae_lm, and tacl, which continues mlm) leave the plateau slowly, and MAE-LM's "
            "encoder collapses onto one vector (experiments/REPORT.md); the pre-LN, rotary biphasic network "
            "leaves it within a few hundred steps.",
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
    settings.output_dir.mkdir(parents=True, exist_ok=True)

    documents = load_documents()
    tokenizer_dir = settings.output_dir / "tokenizer"
    tokenizer = train_wordpiece_tokenizer(documents["text"], vocab_size=settings.vocab_size)
    tokenizer.save_pretrained(tokenizer_dir)
    plateau = unigram_entropy(token_counts(tokenizer, documents["text"]))
    runs = pretrain_all(settings, tokenizer_dir, names)
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
    accuracies = {}
    for label, run in runs.items():
        print(f"\n=== fine-tuning {label} on word order ===", flush=True)
        accuracies[label] = finetune(run["path"], task, settings)
    report = write_report(settings, runs, analysis, accuracies, plateau)
    print(f"\nWrote {report}")
    return 0
