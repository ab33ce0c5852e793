"""kvright.operator.Kube's fault-injection seams, with the HTTP transport faked (no API server): which
requests count as writes, the pause (KVRIGHT_FAULT_PAUSE_AFTER_WRITES) coming once, at the N-th write, and
the first write after it logged with the time it was sent and how it ended. SIGSTOP itself is faked (the
process is not stopped); tests/integration/test_operator_faults.py stops a real operator with it.
"""

from __future__ import annotations

import logging
import signal
from typing import Any

import pytest

from kvright.operator import Kube, KubeError


class Response:
    def __init__(self, status: int) -> None:
        self.status = status

    def read(self) -> bytes:
        return b"{}"


class Transport:
    """What Kube uses of the kubernetes ApiClient; refuses (raises) the requests numbered in ``down``."""

    def __init__(self, down: tuple[int, ...] = ()) -> None:
        self.down = down
        self.sent: list[tuple[str, str]] = []

    def param_serialize(
        self, method: str, path: str, **_: Any
    ) -> tuple[str, str, dict[str, str], None, list[str]]:
        return method, path, {}, None, []

    def call_api(self, method: str, path: str, *_: Any, **__: Any) -> Response:
        self.sent.append((method, path))
        if len(self.sent) in self.down:
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        return Response(201 if method == "POST" else 200)


REQUESTS = [("GET", "/a"), ("PATCH", "/b"), ("GET", "/c"), ("POST", "/d"), ("PATCH", "/e"), ("DELETE", "/f")]


@pytest.mark.parametrize(
    ("pause_after", "down", "paused_after", "traced"),
    [
        (0, (), [], []),
        (1, (), ["/b"], ["write 2 (POST /d) sent at", "write 2 answered 201 at"]),
        (2, (), ["/d"], ["write 3 (PATCH /e) sent at", "write 3 answered 200 at"]),
        (2, (5,), ["/d"], ["write 3 (PATCH /e) sent at", "write 3 failed at"]),
    ],
    ids=["off-by-default", "after-the-first-write", "reads-do-not-count", "the-write-after-it-refused"],
)
def test_the_pause_comes_once_at_the_nth_write_and_the_next_write_is_traced(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    pause_after: int,
    down: tuple[int, ...],
    paused_after: list[str],
    traced: list[str],
) -> None:
    transport = Transport(down)
    stops: list[str] = []
    monkeypatch.setattr(signal, "pthread_kill", lambda _tid, sig: stops.append(transport.sent[-1][1]))
    kube = Kube(transport, pause_after_writes=pause_after)  # type: ignore[arg-type]
    caplog.set_level(logging.ERROR, logger="kvright.operator")
    for method, path in REQUESTS:
        try:
            kube.request(method, path)
        except KubeError as exc:
            assert exc.status == 0 and "Connection refused" in str(exc)
    assert stops == paused_after  # once, right after the N-th write was answered
    lines = [r.getMessage().removeprefix("fault injection: ") for r in caplog.records]
    assert [line.split(" at ")[0] + " at" for line in lines if line.startswith("write")] == traced
    assert len(transport.sent) == len(REQUESTS)  # the seam never drops or repeats a request
