"""kvright's development tools: the vLLM simulator, load generator, pod runner, demos and the shared
process helpers (Prometheus launcher, free port, wait-until) that tests, demos and benches use.

Not part of the product: the wheel and the chart's image ship only ``capacity`` and ``kvright``, and
product code never imports this package (an import-linter contract in pyproject.toml says so).
"""
