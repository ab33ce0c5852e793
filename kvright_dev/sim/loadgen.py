"""A closed-loop load generator for OpenAI-compatible completion endpoints.

``concurrency`` workers each keep one request in flight; a test changes concurrency, prompt and
output lengths while it runs (:meth:`LoadGenerator.set`). It is bounded in count and in time
(``max_requests``, ``max_seconds``) and spreads requests round-robin over the endpoints a callable
returns at that moment (the pod runner's live list), as a Service would.

Accounting, the point of the exercise:
- ``completed``: a 200 answer;
- ``retried``: refused before admission (connection refused, 503 while a pod drains) and sent again
  elsewhere, which a client behind a Service never notices;
- ``dropped``: admitted and then lost (connection reset mid-request, a 5xx other than 503, or every
  retry refused): what "without dropping a request" must keep at zero.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import requests

from kvright_dev.procs import WaitFailed, wait_until

__all__ = ["LoadGenerator", "LoadStats"]


@dataclass
class LoadStats:
    """What the load generator saw, counted per request."""

    sent: int = 0
    """Requests started (a retry is the same request)."""
    completed: int = 0
    """Requests answered with every output token."""
    retried: int = 0
    """Tries that met no serving endpoint or a 503 (a pod draining) and went again."""
    dropped: int = 0
    """Requests that failed after admission or ran out of retries: lost ones."""
    rejected: int = 0
    """400-class answers (a bad request, not a capacity problem)."""
    tpot_seconds: list[float] = field(default_factory=list)
    """Per completed request, as the simulator reports it (virtual seconds)."""
    errors: list[str] = field(default_factory=list)


class LoadGenerator:
    def __init__(
        self,
        endpoints: Callable[[], Sequence[str]],
        *,
        model: str,
        concurrency: int,
        prompt_tokens: int,
        output_tokens: int,
        max_requests: int = 100_000,
        max_seconds: float = 600.0,
        max_concurrency: int = 256,
        retry_seconds: float = 60.0,
        timeout_seconds: float = 300.0,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        """``extra_body``: more fields for every request (``{"ignore_eos": True}`` makes a real engine with
        random weights generate exactly ``output_tokens``)."""
        if not 0 <= concurrency <= max_concurrency:
            raise ValueError(f"concurrency {concurrency} (accepted: 0..{max_concurrency})")
        self.endpoints = endpoints
        self.model = model
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self.max_concurrency = max_concurrency
        self.retry_seconds = retry_seconds
        self.timeout_seconds = timeout_seconds
        self.extra_body = dict(extra_body or {})
        self.stats = LoadStats()
        self._concurrency = concurrency
        self._prompt_tokens = prompt_tokens
        self._output_tokens = output_tokens
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._round_robin = itertools.count()
        self._threads: list[threading.Thread] = []
        self._deadline = 0.0

    def set(
        self,
        *,
        concurrency: int | None = None,
        prompt_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> None:
        """Change the load while it runs (takes effect at each worker's next request)."""
        with self._lock:
            if concurrency is not None:
                if not 0 <= concurrency <= self.max_concurrency:
                    raise ValueError(f"concurrency {concurrency} (accepted: 0..{self.max_concurrency})")
                self._concurrency = concurrency
            if prompt_tokens is not None:
                self._prompt_tokens = prompt_tokens
            if output_tokens is not None:
                self._output_tokens = output_tokens

    def start(self) -> LoadGenerator:
        self._deadline = time.monotonic() + self.max_seconds
        for index in range(self.max_concurrency):
            thread = threading.Thread(target=self._worker, args=(index,), daemon=True, name=f"load-{index}")
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 60.0) -> LoadStats:
        """Stop sending; wait (bounded) for requests in flight to finish; return the totals."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return self.stats

    def __enter__(self) -> LoadGenerator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _claim(self, index: int) -> tuple[int, int] | None:
        """The next request's (prompt, output) lengths for worker `index`, or None to idle."""
        with self._lock:
            if index >= self._concurrency:
                return None
            if self.stats.sent >= self.max_requests:
                return None
            self.stats.sent += 1
            return self._prompt_tokens, self._output_tokens

    def _worker(self, index: int) -> None:
        session = requests.Session()
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            claim = self._claim(index)
            if claim is None:
                self._stop.wait(0.05)
                continue
            try:
                self._one(session, *claim)
            except Exception as exc:  # a worker must never die silently: that would quietly lower the load
                self._record("dropped", f"{type(exc).__name__}: {str(exc)[:200]}")

    def _one(self, session: requests.Session, prompt_tokens: int, output_tokens: int) -> None:
        body = {
            "model": self.model,
            "prompt": [1] * prompt_tokens,
            "max_tokens": output_tokens,
            **self.extra_body,
        }
        try:
            wait_until(
                lambda: self._attempt(session, body),
                self.retry_seconds,
                what="an endpoint to accept the request",
                interval=0.05,
                transient=(),
            )
        except WaitFailed:
            self._record("dropped", f"no endpoint accepted the request within {self.retry_seconds:.0f}s")

    def _attempt(self, session: requests.Session, body: dict[str, Any]) -> bool:
        """Send once to the next endpoint; True when the request is settled (completed, dropped or
        rejected), False when it should be retried (no endpoint yet, never connected, or a 503)."""
        targets = list(self.endpoints())
        if not targets:
            return False
        base = targets[next(self._round_robin) % len(targets)]
        try:
            response = session.post(f"{base}/v1/completions", json=body, timeout=self.timeout_seconds)
        except requests.ConnectionError as exc:
            if not _never_connected(exc):
                self._record("dropped", f"{base}: {type(exc).__name__}: {str(exc)[:200]}")
                return True
        except requests.RequestException as exc:
            self._record("dropped", f"{base}: {type(exc).__name__}: {str(exc)[:200]}")
            return True
        else:
            if response.status_code == 200:
                tpot = response.json().get("kvright_sim", {}).get("tpot_seconds")
                with self._lock:
                    self.stats.completed += 1
                    if isinstance(tpot, float):
                        self.stats.tpot_seconds.append(tpot)
                return True
            if response.status_code != 503:
                kind = "rejected" if 400 <= response.status_code < 500 else "dropped"
                self._record(kind, f"{base}: HTTP {response.status_code}: {response.text[:200]}")
                return True
        with self._lock:
            self.stats.retried += 1
        return False

    def _record(self, kind: str, error: str) -> None:
        with self._lock:
            setattr(self.stats, kind, getattr(self.stats, kind) + 1)
            if len(self.stats.errors) < 50:
                self.stats.errors.append(error)


def _never_connected(exc: requests.ConnectionError) -> bool:
    """True when the TCP connection was never made (nothing was admitted, so a retry is safe)."""
    text = repr(exc)
    return "NewConnectionError" in text or "Connection refused" in text or "Errno 111" in text
