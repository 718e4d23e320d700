"""experiments/REPORT.md from the finished runs: one row per claim with our numbers and a verdict computed by the
rule stated beside it, the figures (copied to experiments/figures/), wall times, and findings.md verbatim.

`document` assembles the report from the claims' modules (`tacl`, `mae_lm`, `biphasic`, `masking`); `runs` reads what
the runs left on disk, `verdicts` holds the rules every claim shares, `tables` and `figures` draw them."""

from .document import write_report

__all__ = ["write_report"]
