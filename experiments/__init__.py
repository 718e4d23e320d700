"""The small-scale evidence for the papers' headline claims: a research package beside hf_encoders, not shipped in its
wheel. Its front door is experiments/README.md; each script runs as a module from the repository's root
(`python -m experiments.reproduce`, `python -m experiments.report`, ...)."""

from pathlib import Path

RESULTS = Path(__file__).parent / "results"  # every experiment's results file, committed
