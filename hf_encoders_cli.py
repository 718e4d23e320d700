"""`hf-encoders`: one console script, a subcommand per job. Each subcommand owns its parser (pretrain's is an
HfArgumentParser taking every TrainingArguments option), so `hf-encoders SUBCOMMAND --help` is complete.

This module ships beside the `hf_encoders` package, not inside it: `import hf_encoders` registers every model with
transformers' Auto classes (torch and transformers' modeling code, seconds), and Python runs a package's
`__init__` before any module in it, so a script inside the package would pay that for `hf-encoders --help`. Here a
subcommand's module is imported only when that subcommand runs. `python -m hf_encoders` runs the same script.

`main` raises, for Python callers; `console`, the installed script, turns an error into one line and exit code 2.
"""

import argparse
import difflib
import os
import re
import sys
from importlib import import_module
from pathlib import Path

# {subcommand: (the module whose `main(argv)` runs it, the line `hf-encoders --help` gives it)}.
SUBCOMMANDS = {
    "pretrain": (
        "hf_encoders.training.pretrain",
        "pre-train an encoder on Trainer: --method mlm (the BERT baseline), mae_lm, tacl or biphasic",
    ),
    "plan": (
        "hf_encoders.training.plan",
        "a paper preset's parameters, tokens, FLOPs, GPU-hours and memory before a run (--list: the presets)",
    ),
    "tokenize": (
        "hf_encoders.training.tokenize_command",
        "tokenize and pack a corpus once into a cache that pretrain --tokenized_dir trains from",
    ),
    "analyze": ("hf_encoders.analysis.command", "self-similarity, effective rank and isotropy per layer, with plots"),
    "evaluate": (
        "hf_encoders.evaluation.command",
        "fine-tune checkpoints with the protocol of 'Should We Still Pretrain Encoders with Masked Language Modeling?' "
        "(SC/TC/QA/IR x rates x seeds) and report",
    ),
    "export": ("hf_encoders.export", "write a checkpoint that loads with no remote code (TaCL student, EuroBERT)"),
    "average": (
        "hf_encoders.average",
        "the (weighted) mean of checkpoints of one model, written as a checkpoint with code, tokenizer and card",
    ),
    "convert": (
        "hf_encoders.methods.biphasic.convert",
        "turn a Llama-family causal LM into a biphasic encoder checkpoint",
    ),
    "demo": ("hf_encoders.demo", "pre-train, analyse and fine-tune every method on the embedded corpus"),
}


class OneLineErrors:
    """An argparse parser's errors as hf-encoders gives them: one line saying what to fix, without the usage (pretrain's
    runs to a hundred lines and more), then where the options are listed. No abbreviations: a truncated flag
    (`--text_colum`) is refused with the options it begins, not silently taken for one of them; a mistyped flag gets
    the option it is closest to; every option is named by its first spelling alone (`--output_dir`, not
    `--output_dir/--output-dir`). Mixed into `argparse.ArgumentParser` and transformers' `HfArgumentParser`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {self.refined(message)} (`{self.prog} --help` lists the options)\n")

    def spellings(self) -> dict[str, str]:
        """{every long option string: the first spelling of its option}."""
        return {
            option: action.option_strings[0]
            for action in self._actions  # argparse keeps no public table of its options
            for option in action.option_strings
            if option.startswith("--")
        }

    def refined(self, message: str) -> str:
        spellings = self.spellings()
        if message.startswith("unrecognized arguments: "):
            flags = [item.partition("=")[0] for item in message.split()[2:] if item.startswith("--")]
            guesses = {flag: guess for flag in flags if (guess := self.closest(flag, spellings))}
            if len(guesses) == 1:
                message += f"; did you mean {next(iter(guesses.values()))}?"
            elif guesses:
                message += "; did you mean " + ", ".join(f"{guess} for {flag}" for flag, guess in guesses.items()) + "?"
        elif choice := re.match(r"(.*invalid choice: '([^']*)' \(choose from (.*)\))$", message):
            choices = [item.strip(" '") for item in choice.group(3).split(",")]
            guesses = difflib.get_close_matches(choice.group(2), choices, n=1)
            message = choice.group(1) + (f"; did you mean {guesses[0]}?" if guesses else "")
        # One spelling per option: "--output_dir/--output-dir" and "--output_dir, --output-dir" name one option.
        for option, spelling in spellings.items():
            if option != spelling:
                message = re.sub(rf"(/|, ){re.escape(option)}(?![\w-])", "", message)
        return message

    @staticmethod
    def closest(flag: str, spellings: dict[str, str]) -> str | None:
        """The options a truncated flag begins (`--lr_s`: `--lr_scheduler_kwargs or --lr_scheduler_type`), when it
        begins a few; else the option a mistyped flag is closest to, if one is close (difflib's similarity of 0.6 or more)."""
        begun = sorted({spelling for option, spelling in spellings.items() if option.startswith(flag)})
        if 0 < len(begun) <= 3:
            return " or ".join(begun)
        guesses = difflib.get_close_matches(flag, sorted(set(spellings.values())), n=1)
        return guesses[0] if guesses else None


class CommandParser(OneLineErrors, argparse.ArgumentParser):
    """The parser of every hf-encoders command that is not pretrain's or tokenize's (`HfArgumentParser`s)."""


# The methods in the method table's order (tests/test_fast_import.py holds them to it), named here so that
# `hf-encoders demo --help` imports none of the package.
DEMO_METHODS = ("mlm", "mae_lm", "tacl", "biphasic")


def demo_parser() -> argparse.ArgumentParser:
    """The demo's options; here, not in hf_encoders.demo, so that `--help` answers at once."""
    parser = CommandParser(
        prog="hf-encoders demo",
        description="Every method on the same token budget, offline, on 2 CPU cores in minutes. One Ctrl-C stops it "
        "and says what is kept; the same command again continues from there.",
    )
    parser.add_argument(
        "--output_dir", type=Path, default=Path("demo_output"), help="where the models and REPORT.md are written"
    )
    parser.add_argument("--steps", type=int, default=1000, help="pre-training steps per method (same for all)")
    parser.add_argument("--batch_size", type=int, default=32, help="sequences per step, pre-training and fine-tuning")
    parser.add_argument("--block_size", type=int, default=64, help="tokens per pre-training sequence")
    parser.add_argument("--vocab_size", type=int, default=2000, help="size of the WordPiece tokenizer trained first")
    parser.add_argument(
        "--finetune_examples", type=int, default=4000, help="sentences of the word-order task (a quarter held out)"
    )
    parser.add_argument("--finetune_epochs", type=float, default=5, help="fine-tuning epochs per method")
    parser.add_argument("--methods", default=",".join(DEMO_METHODS), help="comma-separated subset of the methods")
    parser.add_argument("--seed", type=int, default=0, help="seed of every run")
    parser.add_argument(
        "--restart",
        action="store_true",
        help="start afresh: remove what an earlier demo wrote into --output_dir (else the demo continues it)",
    )
    return parser


# Subcommands whose parser builds without the package: their `--help` is answered here, at once.
LIGHT_PARSERS = {"demo": demo_parser}


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(
        prog="hf-encoders",
        description="TaCL, MAE-LM and biphasic encoder pre-training as Transformers models.",
    )
    # Read by `console` wherever it stands on the command line; declared here for --help.
    parser.add_argument("--debug", action="store_true", help="show an error's traceback (or set HF_ENCODERS_DEBUG=1)")
    subparsers = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    for name, (_, summary) in SUBCOMMANDS.items():
        subparsers.add_parser(name, help=summary, add_help=False)
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.subcommand in LIGHT_PARSERS and any(argument in ("-h", "--help") for argument in rest):
        LIGHT_PARSERS[args.subcommand]().parse_args(rest)  # prints the help and exits
    module_name, _ = SUBCOMMANDS[args.subcommand]
    return import_module(module_name).main(rest)


def console() -> None:
    """The `hf-encoders` script. Bad input (a corpus, an option, a checkpoint: the package raises `ValueError`s whose
    message names the fix), a file the run cannot read or write, or a NaN loss ends it with that message on one
    line and exit code 2, not a traceback; `--debug` or `HF_ENCODERS_DEBUG=1` shows the traceback."""
    argv = [argument for argument in sys.argv[1:] if argument != "--debug"]
    debug = len(argv) < len(sys.argv) - 1 or os.environ.get("HF_ENCODERS_DEBUG", "0") not in ("", "0")
    try:
        sys.exit(main(argv))
    except KeyboardInterrupt:  # a command that stops cleanly on Ctrl-C returns; this is a second one, or another
        if debug:
            raise
        print("\nhf-encoders: stopped by Ctrl-C.", file=sys.stderr)
        sys.exit(130)
    except Exception as error:
        if debug or not one_line_error(error):
            raise
        print(f"hf-encoders: error: {' '.join(str(error).split())}", file=sys.stderr)
        sys.exit(2)


def one_line_error(error: Exception) -> bool:
    """Whether `error` is one the script reports as one line: bad input, a file, a NaN loss."""
    if isinstance(error, (ValueError, OSError)):
        return True
    errors = sys.modules.get("hf_encoders.errors")  # imported by now if the package raised it: never import it here
    return errors is not None and isinstance(error, errors.NonFiniteLossError)


if __name__ == "__main__":
    console()
