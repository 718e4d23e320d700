"""The command line as a user meets it: a mistyped flag gets the option it is closest to, a truncated flag is refused
with the options it begins (never silently taken for one), errors are one line without the usage dump and name each option by
one spelling, and every command's help is complete."""

import argparse
import re
import shlex
from pathlib import Path

import pytest

from hf_encoders.analysis.command import build_parser as analyze_parser
from hf_encoders.evaluation.command import build_parser as evaluate_parser
from hf_encoders.training.pretrain import pretrain_parser
from hf_encoders_cli import SUBCOMMANDS, CommandParser, OneLineErrors, main

ROOT = Path(__file__).resolve().parents[1]


def error_of(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    "argv,error",
    [
        (
            ["pretrain", "--method", "mlm", "--output_dir", "out", "--lerning_rate", "3"],
            "hf-encoders pretrain: error: unrecognized arguments: --lerning_rate 3; did you mean --learning_rate? "
            "(`hf-encoders pretrain --help` lists the options)\n",
        ),
        (
            ["pretrain", "--method", "mlm", "--output_dir", "out", "--lerning_rate=3", "--blok_size", "4"],
            "hf-encoders pretrain: error: unrecognized arguments: --lerning_rate=3 --blok_size 4; did you mean "
            "--learning_rate for --lerning_rate, --block_size for --blok_size? (`hf-encoders pretrain --help` lists "
            "the options)\n",
        ),
        (
            ["pretrain", "--method", "mlm", "--output_dir", "out", "--text_colum", "body"],
            "hf-encoders pretrain: error: unrecognized arguments: --text_colum body; did you mean --text_column? "
            "(`hf-encoders pretrain --help` lists the options)\n",
        ),
        (
            ["pretrain", "--method", "mlm", "--output_dir", "out", "--warmup", "10"],
            "hf-encoders pretrain: error: unrecognized arguments: --warmup 10; did you mean --warmup_steps? "
            "(`hf-encoders pretrain --help` lists the options)\n",
        ),
        (
            ["pretrain", "--method", "mlm", "--output_dir", "out", "--lr_s", "linear"],
            "hf-encoders pretrain: error: unrecognized arguments: --lr_s linear; did you mean --lr_scheduler_kwargs or "
            "--lr_scheduler_type? (`hf-encoders pretrain --help` lists the options)\n",
        ),
        (
            ["evaluate", "model", "--output_dir", "out", "--task", "sst2", "--learning_rate", "1e-4"],
            "hf-encoders evaluate: error: unrecognized arguments: --learning_rate 1e-4; did you mean --learning_rates? "
            "(`hf-encoders evaluate --help` lists the options)\n",
        ),
        (
            ["analyze", "model", "--lables", "a"],
            "hf-encoders analyze: error: unrecognized arguments: --lables a; did you mean --labels? (`hf-encoders "
            "analyze --help` lists the options)\n",
        ),
        (
            ["pretrian", "--method", "mlm"],
            "hf-encoders: error: argument SUBCOMMAND: invalid choice: 'pretrian' (choose from 'pretrain', 'plan', "
            "'tokenize', 'analyze', 'evaluate', 'export', 'average', 'convert', 'demo'); did you mean pretrain? "
            "(`hf-encoders --help` lists the options)\n",
        ),
        (
            ["evaluate", "model", "--output_dir", "out"],
            "hf-encoders evaluate: error: the following arguments are required: --task (`hf-encoders evaluate --help` "
            "lists the options)\n",
        ),
    ],
    ids=[
        "mistyped",
        "two-mistyped",
        "truncated",
        "warmup",
        "two-options-begun",
        "evaluate",
        "analyze",
        "subcommand",
        "required",
    ],
)
def test_errors_are_one_line_with_the_closest_option_and_no_usage(capsys, argv, error):
    assert error_of(capsys, *argv) == error


@pytest.mark.parametrize("build", [analyze_parser, evaluate_parser, pretrain_parser, lambda: CommandParser()])
def test_no_parser_takes_abbreviations(build):
    """A truncated flag taken silently for the option it begins hides a typo (`--text_colum` read as --text_column)."""
    assert build().allow_abbrev is False


def test_errors_name_each_option_by_one_spelling():
    parser = CommandParser(prog="x")
    parser.add_argument("--output_dir", "--output-dir", required=True)
    assert parser.refined("the following arguments are required: --output_dir/--output-dir") == (
        "the following arguments are required: --output_dir"
    )
    assert parser.refined("argument --output_dir, --output-dir: expected one argument") == (
        "argument --output_dir: expected one argument"
    )


class Captured(Exception):
    def __init__(self, parser):
        self.parser = parser


@pytest.mark.parametrize("subcommand", list(SUBCOMMANDS))
def test_every_commands_help_is_complete(subcommand, monkeypatch):
    """A description that ends its sentence, and a help text for every option."""

    def capture(self, args=None, namespace=None):
        if self.prog != "hf-encoders" and self.add_help:  # not the top-level parser's entry for the subcommand
            raise Captured(self)
        return argparse.ArgumentParser.parse_known_args(self, args, namespace)

    monkeypatch.setattr(OneLineErrors, "parse_known_args", capture, raising=False)
    with pytest.raises(Captured) as captured:
        main([subcommand, "--help"])
    parser = captured.value.parser
    assert parser.description and parser.description.rstrip().endswith("."), parser.description
    helpless = [action.dest for action in parser._actions if not action.help]
    assert helpless == [], f"hf-encoders {subcommand}: options without help"


def documented_commands(page: Path) -> list[list[str]]:
    """The `hf-encoders` commands of a page's bash blocks, continuation lines joined, a `$(...)` as one word."""
    blocks = re.findall(r"^```bash\n(.*?)^```", page.read_text(), flags=re.DOTALL | re.MULTILINE)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [shlex.split(re.sub(r'"\$\(.*?\)"', "MODEL", line))[1:] for line in lines if line.startswith("hf-encoders ")]


def test_the_own_corpus_pages_commands_take_only_real_options():
    commands = documented_commands(ROOT / "docs" / "own_corpus.md")
    assert [command[0] for command in commands] == ["pretrain", "analyze", "evaluate"]
    parsers = {"pretrain": pretrain_parser(), "analyze": analyze_parser(), "evaluate": evaluate_parser()}
    for subcommand, *argv in commands:
        parsers[subcommand].parse_args(argv)  # an unknown option exits with the error
