"""`hf-encoders analyze MODEL [MODEL ...]`: the diagnostics of several encoders over one corpus.

Writes into --output-dir:
- report.json: the settings and one `LayerwiseReport` per model;
- layer_curves.png: every per-layer diagnostic, the models overlaid (TaCL Fig. 2, MAE-LM Fig. 1a-b);
- similarity_<model>.png: the last layer's token similarity matrix of one sentence (TaCL Fig. 3).
report.json comes last, so a folder holding it holds a finished analysis.
"""

import argparse
import itertools
import json
import re
from pathlib import Path

import torch
from transformers import AutoModel, PreTrainedTokenizerBase

from ..data.corpus import load_documents
from ..data.sentences import split_sentences
from ..data.tokenizer import load_tokenizer
from .files import atomic_output
from .plots import plot_layer_curves, plot_similarity_heatmap
from .report import LayerwiseReport, layerwise_report, token_similarity_matrix


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-encoders analyze", description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", metavar="MODEL", help="checkpoint folder for AutoModel and AutoTokenizer")
    parser.add_argument(
        "--corpus", help="file, folder or dataset name (default: English prose from Python's own documentation)"
    )
    parser.add_argument("--max-sentences", type=int, default=2000, help="analyse the corpus's first N sentences")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128, help="truncate sentences to this many tokens")
    parser.add_argument("--mask-probability", type=float, default=0.15, help="share of real tokens masked")
    parser.add_argument("--rank-threshold", type=float, default=0.9, help="tau of the effective rank")
    parser.add_argument("--heatmap-text", help="sentence of the heatmaps (default: the corpus's first of 8+ words)")
    parser.add_argument(
        "--labels", nargs="+", metavar="LABEL", help="names of the models in plots and report (default: folder names)"
    )
    parser.add_argument("--output-dir", type=Path, default=Path("analysis"))
    parser.add_argument("--seed", type=int, default=0, help="seed of the [MASK] positions")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--trust-remote-code", action="store_true", help="run modelling code shipped by a checkpoint")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    sentences = corpus_sentences(args.corpus, args.max_sentences)
    if not sentences:
        parser.error("the corpus holds no sentences")
    heatmap_text = args.heatmap_text or _first_long_sentence(sentences)
    if args.labels is not None and len(args.labels) != len(args.models):
        parser.error(f"--labels names {len(args.labels)} model(s) but {len(args.models)} MODEL path(s) were given")

    # Every tokenizer first: a mistyped path fails in seconds, not after the models before it were analysed.
    tokenizers = [
        load_tokenizer(
            path,
            fix="Pass checkpoint folders holding their tokenizer (as hf-encoders pretrain writes them) or Hub names.",
            trust_remote_code=args.trust_remote_code,
        )
        for path in args.models
    ]
    reports = [
        analyse_checkpoint(path, tokenizer, label, sentences, heatmap_text, args)
        for path, tokenizer, label in zip(args.models, tokenizers, args.labels or _labels(args.models))
    ]
    plot_layer_curves(reports, args.output_dir / "layer_curves.png")
    settings = {
        "corpus": args.corpus,
        "sentences": len(sentences),
        "max_length": args.max_length,
        "mask_probability": args.mask_probability,
        "rank_threshold": args.rank_threshold,
        "seed": args.seed,
        "heatmap_text": heatmap_text,
    }
    with atomic_output(args.output_dir / "report.json") as temporary:
        temporary.write_text(json.dumps({"settings": settings, "models": [r.to_dict() for r in reports]}, indent=2))
    print(f"Wrote report.json, layer_curves.png and {len(reports)} heatmap(s) to {args.output_dir}")
    return 0


def analyse_checkpoint(
    path: str,
    tokenizer: PreTrainedTokenizerBase,
    label: str,
    sentences: list[str],
    heatmap_text: str,
    args: argparse.Namespace,
) -> LayerwiseReport:
    """The report of one checkpoint, and its heatmap; the model is freed on return, before the next one loads."""
    model = AutoModel.from_pretrained(path, trust_remote_code=args.trust_remote_code).to(args.device)
    report = layerwise_report(
        model,
        tokenizer,
        sentences,
        name=label,
        batch_size=args.batch_size,
        max_length=args.max_length,
        mask_probability=args.mask_probability,
        rank_threshold=args.rank_threshold,
        seed=args.seed,
    )
    tokens, matrix = token_similarity_matrix(model, tokenizer, heatmap_text, max_length=args.max_length)
    heatmap = args.output_dir / f"similarity_{_slug(label)}.png"
    plot_similarity_heatmap(tokens, matrix, heatmap, title=f"{label}, last layer")
    return report


def corpus_sentences(source: str | None, limit: int) -> list[str]:
    """The first `limit` sentences of the corpus, kept in memory so every model reads the same ones."""
    documents = load_documents(source, streaming=True)  # read no further than the sentences needed
    sentences = (sentence for document in documents for sentence in split_sentences(document["text"]))
    return list(itertools.islice(sentences, limit))


def _first_long_sentence(sentences: list[str], words: int = 8) -> str:
    """A heatmap of a heading shows little: the first sentence of `words` words or more, else the first."""
    return next((sentence for sentence in sentences if len(sentence.split()) >= words), sentences[0])


def _labels(paths: list[str]) -> list[str]:
    """Checkpoint folder names, or the full paths when two folders share a name."""
    names = [Path(path).name or path for path in paths]
    return names if len(set(names)) == len(names) else paths


def _slug(label: str) -> str:
    return re.sub(r"[^\w.-]+", "_", label).strip("_")
