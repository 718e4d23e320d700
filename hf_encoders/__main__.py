"""`python -m hf_encoders` (and `torchrun -m hf_encoders`): the `hf-encoders` script."""

from hf_encoders_cli import console

console()
