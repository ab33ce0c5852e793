"""SIGTERM against the real engine: what a vLLM pod does with the requests it admitted when it stops.

kvright gives every serving container ``--shutdown-timeout`` (kvright.render.drain_seconds) and a grace
period that covers it, because vLLM 0.32 aborts every request in flight on SIGTERM when that flag is 0,
its default. Both halves are shown here, each on its own server (the tiny gqa model): a request that is
decoding when the server gets SIGTERM finishes with every token when the flag is set, and is cut when it
is not (an error, a short answer, or, as vLLM 0.32 does on some runs, no answer at all: the engine is
killed while the HTTP server waits for the connection to close). Either way the server stops taking new
connections. Waits are bounded; nothing is timed.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from kvright.render import drain_seconds
from kvright_dev.procs import wait_until

from .harness import SMALL_KV_BYTES, ServerSpec, VllmEnv, VllmServer, metric_samples

pytestmark = pytest.mark.conformance

OUTPUT_TOKENS = 1500
"""Long enough (seconds of decode on a CPU) that SIGTERM lands mid-request."""
DRAIN = drain_seconds(60.0)
SPECS = {
    "drain": ServerSpec(
        shape="gqa", kv_cache_memory_bytes=SMALL_KV_BYTES * 4, max_model_len=2048,
        extra_args=("--shutdown-timeout", str(DRAIN)),
    ),
    "default": ServerSpec(shape="gqa", kv_cache_memory_bytes=SMALL_KV_BYTES * 4, max_model_len=2048),
}  # fmt: skip


@pytest.fixture(scope="module")
def servers(
    vllm_env: VllmEnv, tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, VllmServer]]:
    """Both servers, started together (their starts overlap on two cores)."""
    logs = tmp_path_factory.mktemp("vllm-shutdown")
    started = {
        name: VllmServer(vllm_env, spec, tiny_models[spec.shape], logs / f"{name}.log")
        for name, spec in SPECS.items()
    }
    try:
        for server in started.values():
            server.launch()
        for server in started.values():
            server.wait_ready()
        yield started
    finally:
        for server in started.values():
            server.stop()


def _running(server: VllmServer) -> float:
    return sum(v for _, v in metric_samples(server.metrics_text(), "vllm:num_requests_running"))


def _sigterm_mid_request(server: VllmServer, timeout: float) -> tuple[Future[requests.Response], str]:
    """Start one long generation (given ``timeout`` seconds), send the server SIGTERM once it is decoding
    (as the kubelet signals a container's first process), and return the request's future and what a new
    request met."""
    pool = ThreadPoolExecutor(max_workers=1)
    body = {
        "model": server.served_name, "prompt": [5] * 32, "max_tokens": OUTPUT_TOKENS,
        "ignore_eos": True, "temperature": 0.0,
    }  # fmt: skip
    future = pool.submit(requests.post, f"{server.url}/v1/completions", json=body, timeout=timeout)
    pool.shutdown(wait=False)
    wait_until(lambda: _running(server) >= 1, 60, what="the request to be decoding", interval=0.05)
    assert server.proc is not None
    server.proc.send_signal(signal.SIGTERM)
    try:
        wait_until(
            lambda: (server.proc is not None and server.proc.poll() is not None) or _refused(server),
            60,
            what="the server to stop accepting",
            interval=0.05,
            transient=(),
        )
        new = "refused"
    except Exception as exc:
        new = f"still accepting: {exc}"
    return future, new


def _refused(server: VllmServer) -> bool:
    try:
        requests.get(f"{server.url}/v1/models", timeout=2)
    except requests.ConnectionError:
        return True
    return False


def test_with_shutdown_timeout_an_admitted_request_finishes_after_sigterm(
    servers: dict[str, VllmServer],
) -> None:
    server = servers["drain"]
    future, new = _sigterm_mid_request(server, timeout=300)
    assert new == "refused", new
    response = future.result(timeout=DRAIN + 60)
    assert response.status_code == 200, response.text[:300]
    assert response.json()["usage"]["completion_tokens"] == OUTPUT_TOKENS
    assert server.proc is not None
    wait_until(
        lambda: server.proc is not None and server.proc.poll() is not None,
        DRAIN + 30,
        what="the drained server to exit",
        interval=0.2,
        transient=(),
    )
    assert "mode=drain" in server.log(), server.log()[-2000:]


def test_without_it_vllm_aborts_the_request_in_flight(servers: dict[str, VllmServer]) -> None:
    server = servers["default"]
    future, new = _sigterm_mid_request(server, timeout=30)
    assert new == "refused", new
    try:
        response = future.result(timeout=45)
    except (requests.RequestException, TimeoutError):
        # The connection closed under the request, or it was never answered: vLLM killed its engine and
        # its HTTP server waits for the open connection that can no longer complete.
        cut = True
    else:
        body = (
            response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        )
        tokens = (body.get("usage") or {}).get("completion_tokens")
        cut = response.status_code != 200 or tokens != OUTPUT_TOKENS
    assert cut, "vLLM finished the request in flight without --shutdown-timeout: kvright's flag may be moot"
    assert "mode=abort" in server.log(), server.log()[-2000:]
