"""SIGTERM against the real engine: what a vLLM pod does with the requests it admitted when it stops.

kvright gives every serving container ``--shutdown-timeout`` (kvright.render.drain_seconds) and a grace
period that covers it, because vLLM 0.32 aborts every request in flight on SIGTERM when that flag is 0,
its default. Both halves are shown here, each on its own server (the tiny gqa model, and its long-context
twin): a request that is decoding when the server gets SIGTERM finishes with every token when the flag is
set, and is cut when it is not (an error, a short answer, or, as vLLM 0.32 does on some runs, no answer at
all: the engine is killed while the HTTP server waits for the connection to close). Either way the server
stops taking new connections. The generation is streamed, so SIGTERM is sent only while it is decoding,
and the cut one asks for minutes of tokens: a busy machine that handles the signal slowly cannot let it
finish. Waits are bounded; nothing is timed.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from kvright.render import drain_seconds
from kvright_dev.procs import wait_until

from .harness import LONG_GQA, SMALL_KV_BYTES, ServerSpec, VllmEnv, VllmServer, build_model

pytestmark = pytest.mark.conformance

DRAINED_TOKENS = 1000
"""What the drained request must finish with: seconds of decode on a CPU (SIGTERM lands after its first
token), well inside DRAIN on a machine three test lanes keep busy (1,500 took about 20 s of a 60 s drain on
a quiet one)."""
ABORTED_TOKENS = 12_000
"""What the request asks for on the server without the flag: minutes of decode on a CPU, so however slowly
SIGTERM is handled on a busy machine, it lands long before the request could finish."""
STALL_SECONDS = 15.0
"""A stream that sends nothing for this long after SIGTERM is a request that will not be finished."""
DRAIN = drain_seconds(60.0)
SPECS = {
    "drain": ServerSpec(
        shape="gqa", kv_cache_memory_bytes=SMALL_KV_BYTES * 4, max_model_len=2048,
        extra_args=("--shutdown-timeout", str(DRAIN)),
    ),
    "default": ServerSpec(shape="gqa-long", kv_cache_memory_bytes=SMALL_KV_BYTES * 32, max_model_len=12_288),
}  # fmt: skip


@pytest.fixture(scope="module")
def servers(
    vllm_env: VllmEnv, tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, VllmServer]]:
    """Both servers, started together (their starts overlap on two cores)."""
    logs = tmp_path_factory.mktemp("vllm-shutdown")
    models = {**tiny_models, LONG_GQA.name: build_model(vllm_env, LONG_GQA)}
    started = {
        name: VllmServer(vllm_env, spec, models[spec.shape], logs / f"{name}.log")
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


def _generate(server: VllmServer, tokens: int, stall_seconds: float, decoding: threading.Event) -> int | None:
    """Stream one generation of ``tokens`` tokens, setting ``decoding`` at its first token; return the
    completion tokens the server's closing usage counts, or None when the stream was cut: an error, an end
    without usage, or nothing for ``stall_seconds`` (vLLM 0.32 on some runs kills its engine while its HTTP
    server waits on the open connection, which then never completes)."""
    body = {
        "model": server.served_name, "prompt": [5] * 32, "max_tokens": tokens, "ignore_eos": True,
        "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True},
    }  # fmt: skip
    completed: int | None = None
    try:
        with requests.post(
            f"{server.url}/v1/completions", json=body, stream=True, timeout=(10, stall_seconds)
        ) as response:
            if response.status_code != 200:
                return None
            for line in response.iter_lines():
                if line.startswith(b"data: {"):
                    decoding.set()
                    usage = json.loads(line[len(b"data: ") :]).get("usage")
                    if usage:
                        completed = int(usage["completion_tokens"])
    except requests.RequestException:
        return None
    return completed


def _sigterm_mid_request(
    server: VllmServer, tokens: int, stall_seconds: float
) -> tuple[Future[int | None], str]:
    """Start one long generation, send the server SIGTERM once it is decoding (its first token streamed
    back: a poll of the running-requests gauge can miss a short request on a busy machine), as the kubelet
    signals a container's first process, and return the generation's future (see _generate) and what a
    new request met."""
    decoding = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(_generate, server, tokens, stall_seconds, decoding)
    pool.shutdown(wait=False)
    assert decoding.wait(120) or future.done(), "no token streamed back in 120 s"
    assert not future.done(), f"the generation ended before SIGTERM could be sent: {future.result()}"
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
    future, new = _sigterm_mid_request(server, DRAINED_TOKENS, stall_seconds=60)
    assert new == "refused", new
    assert future.result(timeout=DRAIN + 60) == DRAINED_TOKENS
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
    future, new = _sigterm_mid_request(server, ABORTED_TOKENS, stall_seconds=STALL_SECONDS)
    assert new == "refused", new
    completed = future.result(timeout=120)
    assert completed is None or completed < ABORTED_TOKENS, (
        "vLLM finished the request in flight without --shutdown-timeout: kvright's flag may be moot"
    )
    assert "mode=abort" in server.log(), server.log()[-2000:]
