"""Benchmarks with their own command (``python -m bench``, ``make bench``).

Results are ratios measured side by side on the machine that runs them, never timed assertions in tests.
"""
