"""The kvright operator in-process for the end-to-end tests (kopf's KopfRunner), one way for every module.

``operator_in(kubeconfig, namespace, prometheus_url)`` sets the operator's environment (one namespace,
metrics port 0, a short reconcile period, Prometheus), runs it, and yields an :class:`OperatorLog`: its
recent log lines (KopfRunner's own output is readable only after it stops) and its count of finished
reconciles per object. On the way out it deletes the namespace's LLMDeployments while the operator still
runs, so it sees the deletes and forgets their metrics.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import subprocess
from collections.abc import Iterator

import pytest

from kvright_dev.procs import WaitFailed, wait_until


class Collect(logging.Handler):
    """Keeps the operator's recent log lines, readable while it runs."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.lines: collections.deque[str] = collections.deque(maxlen=400)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


class Reconciles(logging.Handler):
    """Counts the operator's finished reconciles per object, from its "reconciled NS/NAME: ..." debug line:
    the positive signal a test waits for before it asserts that nothing happened."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.counts: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if isinstance(record.msg, str) and record.msg.startswith("reconciled ") and isinstance(args, tuple):
            self.counts[f"{args[0]}/{args[1]}"] += 1


class OperatorLog:
    """What a test reads of the operator in-process: its recent log lines (calling it) and how many
    reconciles of an object it has finished."""

    def __init__(self, lines: Collect, reconciles: Reconciles) -> None:
        self._lines = lines
        self._reconciles = reconciles

    def __call__(self) -> str:
        return "\n".join(self._lines.lines)

    def reconciles(self, namespace: str, name: str) -> int:
        return self._reconciles.counts[f"{namespace}/{name}"]


def _kubectl(kubeconfig: str, *args: str) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout if done.returncode == 0 else ""


#: The reasons of the events the feedback loop posts when it moves the plan (kvright.reasons).
MOVE_REASONS = frozenset(
    {
        "TPOTAboveSLO", "TTFTAboveSLO", "TPOTWellBelowSLO", "RequestsWaiting", "QueueWithHeadroom",
        "KVCachePreempting", "NoTraffic", "ReplanFP8KVCache", "ReplanLargerTP", "DemandRising",
    }
)  # fmt: skip


def move_events(kubeconfig: str, namespace: str, name: str) -> list[str]:
    """``REASON: message`` of every plan-moving event about the LLMDeployment ``name``."""
    out = _kubectl(
        kubeconfig,
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        f"involvedObject.name={name}",
        "-o",
        "json",
    )
    items = json.loads(out or "{}").get("items") or []
    return [f"{e['reason']}: {e['message']}" for e in items if e.get("reason") in MOVE_REASONS]


@contextlib.contextmanager
def operator_in(
    kubeconfig: str, namespace: str, prometheus_url: str, *, reconcile_seconds: str = "3"
) -> Iterator[OperatorLog]:
    from kopf.testing import KopfRunner

    env = {
        "KUBECONFIG": kubeconfig,
        "KVRIGHT_NAMESPACES": namespace,
        "KVRIGHT_METRICS_PORT": "0",
        "KVRIGHT_RECONCILE_SECONDS": reconcile_seconds,
        "KVRIGHT_PROMETHEUS_URL": prometheus_url,
    }
    handler, reconciles = Collect(), Reconciles()
    operator_log = logging.getLogger("kvright.operator")
    level = operator_log.level
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        logging.getLogger().addHandler(handler)
        operator_log.addHandler(reconciles)
        operator_log.setLevel(logging.DEBUG)
        try:
            args = ["run", "--standalone", "--namespace", namespace, "-m", "kvright.operator"]
            with KopfRunner(args, timeout=60):
                yield OperatorLog(handler, reconciles)
                _kubectl(kubeconfig, "delete", "llmdeployments", "--all", "-n", namespace, "--wait=false")
                listing = ("get", "llmdeployments", "-n", namespace, "-o", "name")
                with contextlib.suppress(WaitFailed):
                    wait_until(
                        lambda: not _kubectl(kubeconfig, *listing),
                        30, what="the LLMDeployments to be gone", interval=0.5,
                    )  # fmt: skip
        finally:
            logging.getLogger().removeHandler(handler)
            operator_log.removeHandler(reconciles)
            operator_log.setLevel(level)
