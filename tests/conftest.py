"""Shared fixtures. The control-plane fixtures live in tests/fixtures/cluster.py (``cluster``, ``kube``,
``namespace``) and the Prometheus one in tests/fixtures/prometheus.py (``prometheus``); they are imported
here so every test can request them. Polling, ports and Prometheus itself come from kvright_dev.procs and
kvright_dev.prometheus."""

from __future__ import annotations

import os

import pytest

from kvright_dev.procs import sigterm_interrupts
from tests.fixtures.cluster import cluster, kube, namespace, request_cluster_for_marked, tools_dir
from tests.fixtures.prometheus import prometheus

__all__ = ["cluster", "kube", "namespace", "prometheus"]


def pytest_configure(config: pytest.Config) -> None:
    # SIGTERM (a CI timeout, `kill` of make test's process group) ends the session as Ctrl-C does, through
    # every fixture's teardown: the control planes, Prometheus and vLLM servers it started stop with it.
    sigterm_interrupts()
    # The pinned kubectl and helm from `make tools` come first on PATH, so subprocesses use them
    # rather than whatever version the machine has.
    if tools_dir().is_dir():
        os.environ["PATH"] = f"{tools_dir()}{os.pathsep}{os.environ.get('PATH', '')}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    request_cluster_for_marked(items)
