"""`python -m experiments.report`: REPORT.md regenerated from the results files alone (no run, no model)."""

import argparse
from pathlib import Path

from .document import write_report
from .results import RESULTS

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument(
    "--results-dir", type=Path, default=RESULTS, help="the results files (default: experiments/results)"
)
parser.add_argument(
    "--output-dir", type=Path, default=Path(__file__).parents[1], help="where REPORT.md goes (default: experiments/)"
)
settings = parser.parse_args()
write_report(settings.results_dir, settings.output_dir)
