"""`hf-encoders analyze MODEL [MODEL ...]`: the diagnostics of several encoders over one corpus.

Writes into --output_dir (`analyze()` is the same from Python):
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
from transformers import AutoModel

from hf_encoders_cli import CommandParser

from ..data.corpus import load_documents
from ..data.sentences import split_sentences
from ..data.tokenizer import load_tokenizer
from ..flag_spellings import accept_dashed_spellings
from ..model_folders import load_model, skipped_models_error, usable_models
from .files import atomic_output
from .plots import plot_layer_curves, plot_similarity_heatmap
from .report import LayerwiseReport, layerwise_report, token_similarity_matrix


def build_parser() -> argparse.ArgumentParser:
    # Options left out fall back to analyze()'s defaults: one place states them.
    parser = CommandParser(
        prog="hf-encoders analyze", description=__doc__.splitlines()[0], argument_default=argparse.SUPPRESS
    )
    parser.add_argument("models", nargs="+", metavar="MODEL", help="checkpoint folder for AutoModel and AutoTokenizer")
    parser.add_argument(
        "--corpus", help="file, folder or dataset name (default: English prose from Python's own documentation)"
    )
    parser.add_argument(
        "--text_column", help="the field holding the text in jsonl/parquet/datasets corpora (default: text)"
    )
    parser.add_argument("--max_sentences", type=int, help="analyse the corpus's first N sentences")
    parser.add_argument("--batch_size", type=int, help="sentences per forward pass")
    parser.add_argument("--max_length", type=int, help="truncate sentences to this many tokens")
    parser.add_argument("--mask_probability", type=float, help="share of real tokens masked")
    parser.add_argument("--rank_threshold", type=float, help="tau of the effective rank")
    parser.add_argument("--heatmap_text", help="sentence of the heatmaps (default: the corpus's first of 8+ words)")
    parser.add_argument(
        "--labels", nargs="+", metavar="LABEL", help="names of the models in plots and report (default: folder names)"
    )
    parser.add_argument(
        "--output_dir", type=Path, default=Path("analysis"), help="where report.json and the plots are written"
    )
    parser.add_argument("--seed", type=int, help="seed of the [MASK] positions")
    parser.add_argument("--device", help="default: cuda where available, else cpu")
    parser.add_argument("--trust_remote_code", action="store_true", help="run modelling code shipped by a checkpoint")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(accept_dashed_spellings(argv, parser))
    reports = analyze(**vars(args))
    print(f"Wrote report.json, layer_curves.png and {len(reports)} heatmap(s) to {args.output_dir}")
    return 0


def analyze(
    models: list[str],
    output_dir: str | Path,
    *,
    corpus: str | None = None,
    text_column: str = "text",
    labels: list[str] | None = None,
    max_sentences: int = 2000,
    batch_size: int = 32,
    max_length: int = 128,
    mask_probability: float = 0.15,
    rank_threshold: float = 0.9,
    heatmap_text: str | None = None,
    seed: int = 0,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> list[LayerwiseReport]:
    """The diagnostics of `models` (checkpoint folders or Hub names) over the first `max_sentences` sentences of
    `corpus` (its `text_column` field, in jsonl, parquet and datasets corpora), one `LayerwiseReport` each; writes
    report.json, layer_curves.png and one heatmap per model into `output_dir`. `seed` fixes the [MASK] positions;
    `labels` name the models (default: their folder names)."""
    if labels is not None and len(labels) != len(models):
        raise ValueError(f"--labels names {len(labels)} model(s) but {len(models)} MODEL path(s) were given.")
    given = dict(zip(models, labels or _labels(models)))
    models, fixes = usable_models(models)
    labels = [given[model] for model in models]
    sentences = corpus_sentences(corpus, max_sentences, text_column)
    if not sentences:
        raise ValueError(f"the corpus {corpus or '(the embedded one)'} holds no sentences; pass --corpus another one.")
    heatmap_text = heatmap_text or _first_long_sentence(sentences)
    output_dir = Path(output_dir)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    settings = {
        "corpus": corpus,
        "sentences": len(sentences),
        "max_length": max_length,
        "mask_probability": mask_probability,
        "rank_threshold": rank_threshold,
        "seed": seed,
        "heatmap_text": heatmap_text,
    }
    # Every tokenizer first: a mistyped path fails in seconds, not after the models before it were analysed.
    tokenizers = [
        load_tokenizer(
            path,
            fix="Pass checkpoint folders holding their tokenizer (as hf-encoders pretrain writes them) or Hub names.",
            trust_remote_code=trust_remote_code,
        )
        for path in models
    ]
    reports = []
    for path, tokenizer, label in zip(models, tokenizers, labels):
        model = load_model(AutoModel, path, trust_remote_code=trust_remote_code).to(device)
        reports.append(
            layerwise_report(
                model,
                tokenizer,
                sentences,
                name=label,
                batch_size=batch_size,
                max_length=max_length,
                mask_probability=mask_probability,
                rank_threshold=rank_threshold,
                seed=seed,
            )
        )
        tokens, matrix = token_similarity_matrix(model, tokenizer, heatmap_text, max_length=max_length)
        heatmap = output_dir / f"similarity_{_slug(label)}.png"
        plot_similarity_heatmap(tokens, matrix, heatmap, title=f"{label}, last layer")
        del model  # freed before the next one loads
    plot_layer_curves(reports, output_dir / "layer_curves.png")
    with atomic_output(output_dir / "report.json") as temporary:
        temporary.write_text(json.dumps({"settings": settings, "models": [r.to_dict() for r in reports]}, indent=2))
    if fixes:  # after the others are analysed: their work is kept
        raise skipped_models_error(f"analysed {len(reports)} model(s) into {output_dir}", fixes)
    return reports


def corpus_sentences(source: str | None, limit: int, text_column: str = "text") -> list[str]:
    """The first `limit` sentences of the corpus, kept in memory so every model reads the same ones."""
    # Streamed: read no further than the sentences needed.
    documents = load_documents(source, text_column=text_column, streaming=True)
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
