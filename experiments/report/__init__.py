"""experiments/REPORT.md from the results files under experiments/results/: one row per claim with our numbers, its
points and a verdict computed by the rule stated beside the paper's sentence, each experiment's section, the limits,
findings.md and the wall times.

`results` reads the results files and the estimates the rules use; `rules` holds the rules every claim shares; the
claims' modules (`tacl`, `mae_lm`, `biphasic`, `masking`) judge them and `document` assembles the report. `collect`
and `from_runs` turn an experiment's run folders into its results file (`runs` reads those folders), `figures` draws
from a results file, `tables` formats."""

from .document import write_report

__all__ = ["write_report"]
