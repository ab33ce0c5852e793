"""Processes on loopback for tests, demos and benches: the one free-port helper, the one wait-until loop
and the one server launcher (start, wait for a readiness URL, stop), each bounded in time.

Everything binds to and polls 127.0.0.1 only. A wait lasts at most ``MAX_WAIT_SECONDS`` and polls at
most ``1 / MIN_INTERVAL_SECONDS`` times a second; a stop sends SIGTERM, waits, then SIGKILLs. Errors name
what was waited for, the last value seen, and for a server its command and the tail of its log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import TypeVar

import requests

from kvright_dev.ports import LOOPBACK, free_port

__all__ = [
    "LOOPBACK",
    "LoopbackServer",
    "ServerFailed",
    "WaitFailed",
    "answers_200",
    "dev_environ",
    "free_port",
    "sigterm_interrupts",
    "stop_processes",
    "wait_until",
]

MAX_WAIT_SECONDS = 3600.0
"""No wait in a test, demo or bench lasts longer than an hour."""
MIN_INTERVAL_SECONDS = 0.01
"""Polls are at least this far apart (at most 100 a second)."""
STOP_SECONDS = 30.0
"""How long a stopped process may take after SIGTERM before it gets SIGKILL."""
ROOT = Path(__file__).resolve().parents[1]
"""The folder holding ``kvright_dev`` (the checkout): child Pythons need it on their path, since the
wheel does not ship this package."""

T = TypeVar("T")


class WaitFailed(RuntimeError):
    """``wait_until`` ran out of time or gave up; the message names what it waited for and why."""


class ServerFailed(WaitFailed):
    """A server exited, or did not answer its readiness URL, before its deadline."""


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    *,
    what: str,
    interval: float = 0.25,
    transient: tuple[type[BaseException], ...] = (Exception,),
    give_up: Callable[[], str | None] | None = None,
) -> T:
    """Call ``predicate`` until it returns something truthy (not None, False, 0 or empty), and return that.

    An exception of a ``transient`` type is a value to report, not a reason to stop (an API server
    restarting, a port not yet open). ``give_up`` is asked before each poll; a non-empty answer (say,
    "exited with status 1") ends the wait at once. Raises WaitFailed after ``timeout`` seconds naming
    ``what`` and the last value or exception seen.
    """
    if not 0 < timeout <= MAX_WAIT_SECONDS:
        raise ValueError(f"timeout {timeout!r} s is outside (0, {MAX_WAIT_SECONDS:g}]")
    interval = max(interval, MIN_INTERVAL_SECONDS)
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        reason = give_up() if give_up is not None else None
        if reason:
            raise WaitFailed(f"gave up waiting for {what}: {reason}; last seen: {last!r}"[:2000])
        try:
            value = predicate()
        except transient as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitFailed(f"timed out after {timeout:g} s waiting for {what}; last seen: {last!r}"[:2000])
        time.sleep(min(interval, left))


def answers_200(url: str, *, timeout: float = 2.0) -> bool:
    """True when a GET of ``url`` answers 200; connection errors count as False."""
    try:
        return requests.get(url, timeout=timeout).status_code == 200
    except requests.RequestException:
        return False


def stop_processes(procs: Iterable[subprocess.Popen[bytes]], *, timeout: float = STOP_SECONDS,
                   group: bool = False) -> None:
    """SIGTERM every live process (its whole process group when ``group``), give them ``timeout``
    seconds together to exit, then SIGKILL what is left: with ``group``, also what is left of the group
    once its leader is gone (a vLLM API server that exits leaves its engine and worker processes)."""
    procs = list(procs)
    live = [p for p in procs if p.poll() is None]

    def send(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)

    for proc in live:
        send(proc, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in live:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            send(proc, signal.SIGKILL)
            proc.wait(10)
    if group:
        for proc in procs:
            while signalable(-proc.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            send(proc, signal.SIGKILL)


def signalable(target: int) -> bool:
    """Whether a signal to ``target`` reaches a process: a process id, or ``-pgid`` for any process left in
    that process group (``kill(2)``'s convention); one this user may not signal still exists."""
    try:
        os.kill(target, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def sigterm_interrupts() -> None:
    """Make SIGTERM end this process as Ctrl-C does: a KeyboardInterrupt, so ``finally`` blocks, context
    managers and pytest's fixture teardown run and stop the servers it started. Those run in process
    groups of their own (out of reach of a signal to the caller's group), and Python's default for
    SIGTERM is to die without running any of that, leaving control planes and vLLM servers behind
    (a CI timeout, ``kill`` of a make target's group). Call it from the main thread."""
    signal.signal(signal.SIGTERM, _interrupt)


def dev_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with the checkout first on PYTHONPATH (so a child's
    ``python -m kvright_dev...`` imports), plus ``extra``."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def _tail(path: Path, lines: int) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


class LoopbackServer:
    """One server process on 127.0.0.1: its output goes to ``log_path`` (appended, so a restart keeps
    the first run's lines), it is ready when ``url + ready_path`` answers 200, and ``stop`` ends it
    (its whole process group with ``own_group``, for servers that fork workers). ``start`` may be
    called again after ``stop``: same command, same port."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str,
        port: int,
        ready_path: str,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        own_group: bool = False,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self.argv = [str(a) for a in argv]
        self.name = name
        self.port = port
        self.url = f"http://{LOOPBACK}:{port}"
        self.ready_path = ready_path
        self.ready = ready
        """How to tell it is ready, where a plain GET of ``url + ready_path`` cannot (TLS, credentials)."""
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.own_group = own_group
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines)

    def start(self, timeout: float, *, interval: float = 0.2) -> LoopbackServer:
        """Start and wait (at most ``timeout`` s) until ready; on failure stop it and raise ServerFailed
        naming the server, why, its command and its log's tail."""
        return self.launch().wait_ready(timeout, interval=interval)

    def launch(self) -> LoopbackServer:
        """Start the process and return at once (``wait_ready`` waits for it): lets a caller start a
        slow server in the background while it uses another."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env,
                cwd=self.cwd, start_new_session=self.own_group,
            )
        return self

    def wait_ready(self, timeout: float, *, interval: float = 0.2) -> LoopbackServer:
        """Wait (at most ``timeout`` s) until the launched server is ready; on failure stop it and raise
        ServerFailed naming the server, why, its command and its log's tail."""
        proc = self.proc
        if proc is None:
            raise ServerFailed(f"{self.name}: wait_ready before launch")

        def exited() -> str | None:
            code = proc.poll()
            return None if code is None else f"exited with status {code} before it was ready"

        url = self.url + self.ready_path
        ready = self.ready or (lambda: answers_200(url))
        try:
            wait_until(ready, timeout, what=f"{url} to answer 200", interval=interval,
                       give_up=exited)
        except WaitFailed as exc:
            self.stop()
            raise ServerFailed(
                f"{self.name}: {exc}; command: {' '.join(self.argv)}\n"
                f"log {self.log_path} (tail):\n{self.log_tail()}"
            ) from None
        return self

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` s; a no-op once it has exited."""
        if self.proc is not None:
            stop_processes([self.proc], timeout=timeout, group=self.own_group)

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
