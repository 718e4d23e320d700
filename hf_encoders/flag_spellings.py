"""One spelling for every flag: hf-encoders' commands spell their options with underscores (`--output_dir`), as
`hf-encoders pretrain` (HfArgumentParser) and transformers' example scripts do. The dashed spellings `analyze`,
`demo` and `convert` used before (`--output-dir`, `--from-causal-lm`) still work, with a deprecation warning."""

import sys
import warnings
from argparse import ArgumentParser

# The dashed flags already warned about in this process: one warning each, however often a command runs.
warned: set[str] = set()


def accept_dashed_spellings(argv: list[str] | None, parser: ArgumentParser) -> list[str]:
    """`argv` with every dashed spelling of one of `parser`'s options replaced by the underscored one, warning once
    per dashed flag."""
    argv = sys.argv[1:] if argv is None else argv
    # argparse keeps no public table of its options.
    known = {option for action in parser._actions for option in action.option_strings}
    spelled = []
    for position, argument in enumerate(argv):
        if argument == "--":  # what follows is positional
            return [*spelled, *argv[position:]]
        flag, equals, value = argument.partition("=")
        underscored = "--" + flag.removeprefix("--").replace("-", "_")
        if flag.startswith("--") and underscored != flag and underscored in known:
            if flag not in warned:
                warned.add(flag)
                warnings.warn(
                    f"{flag} is deprecated and will be removed: spell it {underscored}, as every hf-encoders "
                    "command does.",
                    FutureWarning,
                    stacklevel=2,
                )
            argument = underscored + equals + value
        spelled.append(argument)
    return spelled
