"""The kvright operator as a process of its own, for tests, demos and benches: ``python -m kvright.operator``
with its environment built from a few settings, its output in a log file, waits that give up when it exits,
and a stop that continues it (should it be paused), sends SIGTERM, then SIGKILL.

A process (rather than kopf's in-process runner) is what can be killed, paused, made to exit, or measured
for CPU and memory; two run side by side, as replicas do in production.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import requests

from kvright_dev.procs import LOOPBACK, dev_environ, free_port, stop_processes, wait_until

__all__ = ["STOP_SECONDS", "OperatorProcess", "operator_settings", "temp_log"]

STOP_SECONDS = 20.0
"""How long the operator may take after SIGTERM before it gets SIGKILL."""
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The operator's own log format (``kvright.operator.main``)."""

T = TypeVar("T")


def operator_settings(
    *,
    reconcile_seconds: float,
    namespace: str | None = None,
    kubeconfig: str | os.PathLike[str] | None = None,
    metrics_port: int = 0,
    health_port: int | None = None,
) -> dict[str, str]:
    """The operator's environment variables: watching ``namespace`` (None: cluster-wide), its sweep every
    ``reconcile_seconds``, with ``kubeconfig`` (None: the environment's). ``/metrics`` on loopback at
    ``metrics_port`` (0: off); ``/healthz`` at ``health_port`` (None: left to the environment, the
    operator's default 8081)."""
    values: dict[str, str] = {}
    if kubeconfig is not None:
        values["KUBECONFIG"] = str(kubeconfig)
    if namespace is not None:
        values["KVRIGHT_NAMESPACES"] = namespace
    values["KVRIGHT_RECONCILE_SECONDS"] = str(reconcile_seconds)
    values["KVRIGHT_METRICS_PORT"] = str(metrics_port)
    if metrics_port:
        values["KVRIGHT_METRICS_ADDRESS"] = LOOPBACK
    if health_port is not None:
        values["KVRIGHT_HEALTH_PORT"] = str(health_port)
    return values


def temp_log(prefix: str) -> Path:
    """A new, empty ``<prefix>*.log`` in the temporary directory, for a log that outlives its run."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=".log")
    os.close(fd)
    return Path(name)


def _argv(debug: Sequence[str] | None) -> list[str]:
    """``python -m kvright.operator`` (logging at LOG_LEVEL); with ``debug``, ``kvright.operator.main``
    logging at INFO and at DEBUG for those loggers."""
    if debug is None:
        return [sys.executable, "-m", "kvright.operator"]
    code = (
        "import logging, sys\n"
        f"logging.basicConfig(level=logging.INFO, format={LOG_FORMAT!r})\n"
        f"for name in {list(debug)!r}:\n"
        "    logging.getLogger(name).setLevel(logging.DEBUG)\n"
        "from kvright.operator import main\n"
        "sys.exit(main())\n"
    )
    return [sys.executable, "-c", code]


class OperatorProcess:
    """The operator, started at construction: this process's environment with :func:`operator_settings`
    and then ``env`` on top (with ``checkout_on_path``, also this checkout first on PYTHONPATH, as
    ``kvright_dev.procs.dev_environ`` does). ``metrics`` serves ``/metrics`` on a free loopback port (else
    it is off); ``health`` serves ``/healthz`` on a free loopback port, so that operators run side by side
    each serve their own (else the port is left to ``env`` and the environment). Output goes to ``log``,
    appended (None: discarded). ``debug``: see :func:`_argv`."""

    def __init__(
        self,
        *,
        reconcile_seconds: float,
        namespace: str | None = None,
        kubeconfig: str | os.PathLike[str] | None = None,
        log: Path | None = None,
        metrics: bool = False,
        health: bool = True,
        debug: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        checkout_on_path: bool = False,
        cwd: Path | None = None,
    ) -> None:
        self.namespace = namespace
        self.metrics_port = free_port() if metrics else 0
        self.log_path = log
        settings = operator_settings(
            reconcile_seconds=reconcile_seconds,
            namespace=namespace,
            kubeconfig=kubeconfig,
            metrics_port=self.metrics_port,
            health_port=free_port() if health else None,
        )
        values = {**settings, **(env or {})}
        environ = dev_environ(values) if checkout_on_path else {**os.environ, **values}
        argv = _argv(debug)
        if log is None:
            self.proc = subprocess.Popen(
                argv, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd
            )
        else:
            with log.open("ab") as out:
                self.proc = subprocess.Popen(argv, env=environ, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exited(self) -> str | None:
        """Why a wait on the operator is pointless (it exited, with what status, and where its log is), or
        None while it runs."""
        code = self.proc.poll()
        if code is None:
            return None
        return f"the operator exited with {code}; " + (f"log: {self.log_path}" if self.log_path else "no log")

    def wait_for(
        self,
        predicate: Callable[[], T | None],
        timeout: float,
        *,
        what: str,
        interval: float = 0.25,
        transient: tuple[type[BaseException], ...] = (Exception,),
    ) -> T:
        """``kvright_dev.procs.wait_until``, giving up at once should the operator exit."""
        return wait_until(
            predicate, timeout, what=what, interval=interval, transient=transient, give_up=self.exited
        )

    def metrics_text(self) -> str:
        """The operator's /metrics (empty when it serves none or does not answer)."""
        if not self.metrics_port:
            return ""
        try:
            return requests.get(f"http://{LOOPBACK}:{self.metrics_port}/metrics", timeout=5).text
        except requests.RequestException:
            return ""

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Continue it (should it be paused: a stopped process cannot act on SIGTERM), SIGTERM, and SIGKILL
        after ``timeout`` s; a no-op once it has exited."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)
        stop_processes([self.proc], timeout=timeout)

    def __enter__(self) -> OperatorProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
