"""``python -m bench``: run the planner benchmark and print the machine, timings and ratios."""

from bench.planner import report

raise SystemExit(report())
