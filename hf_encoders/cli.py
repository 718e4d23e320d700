"""hf_encoders.cli is deprecated and goes in 0.4: the `hf-encoders` script is the module hf_encoders_cli, and
`python -m hf_encoders` (or `torchrun -m hf_encoders`) runs it."""

import warnings

from hf_encoders_cli import SUBCOMMANDS, console, main

__all__ = ["SUBCOMMANDS", "console", "main"]

warnings.warn(__doc__, FutureWarning, stacklevel=2)

if __name__ == "__main__":
    console()
