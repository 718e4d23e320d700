"""`hf-encoders`: one console script, a subcommand per job. Each subcommand owns its parser (pretrain's is
an HfArgumentParser taking every TrainingArguments option), so `hf-encoders SUBCOMMAND --help` is complete;
modules are imported only when their subcommand runs, to keep `--help` fast."""

import argparse
import sys
from importlib import import_module

from .families import FAMILIES

SUBCOMMANDS = {
    "pretrain": (
        "hf_encoders.training.pretrain",
        f"pre-train with {', '.join(FAMILIES)} (mlm: the BERT baseline) on Trainer",
    ),
    "analyze": ("hf_encoders.analysis.command", "self-similarity, effective rank and isotropy per layer, with plots"),
    "export": ("hf_encoders.export", "write a checkpoint that loads with no remote code (TaCL student, EuroBERT)"),
    "convert": ("hf_encoders.convert", "turn a Llama-family causal LM into a biphasic encoder checkpoint"),
    "demo": ("hf_encoders.demo", "pre-train, analyse and fine-tune every method on the embedded corpus"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hf-encoders", description="TaCL, MAE-LM and biphasic encoder pre-training as Transformers models."
    )
    subparsers = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    for name, (_, summary) in SUBCOMMANDS.items():
        subparsers.add_parser(name, help=summary, add_help=False)
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    module_name, _ = SUBCOMMANDS[args.subcommand]
    return import_module(module_name).main(rest)


if __name__ == "__main__":
    sys.exit(main())
