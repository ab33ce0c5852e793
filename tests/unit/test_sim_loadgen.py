"""kvright_dev.sim.loadgen against real in-process simulators over HTTP.

Nothing is faked: two SimServers on loopback with a linear step model. Covers bounded counts,
changing concurrency while running, and the retried/dropped accounting when a server drains.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from kvright_dev.procs import wait_until as _wait_until
from kvright_dev.sim.engine import Engine
from kvright_dev.sim.loadgen import LoadGenerator
from kvright_dev.sim.metrics import VLLMMetrics
from kvright_dev.sim.server import SimServer


def server(max_num_seqs: int = 64) -> SimServer:
    engine = Engine(
        step_seconds=lambda w: 0.020 + 0.0005 * w.decode_seqs + w.prefill_tokens / 200_000.0,
        max_num_seqs=max_num_seqs,
        num_gpu_blocks=5000,
        max_model_len=4096,
    )
    metrics = VLLMMetrics(model_name="m", cache_config={"block_size": "16", "num_gpu_blocks": "5000"})
    s = SimServer(engine=engine, metrics=metrics, served_model_name="m", time_scale=40.0)
    s.start()
    return s


@pytest.fixture
def two() -> Iterator[list[SimServer]]:
    servers = [server(), server()]
    yield servers
    for s in servers:
        s.stop()


def urls(servers: list[SimServer]) -> list[str]:
    return [f"http://127.0.0.1:{s.port}" for s in servers if not s.draining]


def wait_until(predicate: Callable[[], object], timeout: float, *, what: str) -> object:
    """Poll every 20 ms: the running count under a short load changes from one engine step to the next."""
    return _wait_until(predicate, timeout, what=what, interval=0.02)


def test_bounded_by_count_and_spread_over_endpoints(two: list[SimServer]) -> None:
    gen = LoadGenerator(lambda: urls(two), model="m", concurrency=4, prompt_tokens=50, output_tokens=5,
                        max_requests=40, max_seconds=60)  # fmt: skip
    with gen:
        wait_until(lambda: gen.stats.completed == 40, 30, what="40 requests completed")
    assert (gen.stats.sent, gen.stats.completed, gen.stats.dropped) == (40, 40, 0)
    served = [s.metrics.success_length._value.get() for s in two]
    assert sum(served) == 40 and min(served) >= 10


def test_concurrency_changes_while_running(two: list[SimServer]) -> None:
    # Long answers (1-2 s each at 40x): a client's gap between two requests is a small part of its time, so
    # a loaded machine still sees all of them running at one poll (100 tokens, 65 ms, flaked in CI).
    gen = LoadGenerator(lambda: urls(two[:1]), model="m", concurrency=2, prompt_tokens=20, output_tokens=2000,
                        max_seconds=60)  # fmt: skip
    with gen:
        wait_until(lambda: len(two[0].engine.running) == 2, 30, what="2 sequences running")
        gen.set(concurrency=12, output_tokens=3000)
        wait_until(lambda: len(two[0].engine.running) == 12, 30, what="12 sequences running")
        gen.set(concurrency=0)
        wait_until(lambda: not two[0].engine.busy, 30, what="the engine to go idle")
    assert gen.stats.dropped == 0


def test_a_draining_server_costs_retries_not_requests(two: list[SimServer]) -> None:
    # The endpoint list lags (as a Service's would): the draining server stays in it and answers 503.
    every = [f"http://127.0.0.1:{s.port}" for s in two]
    gen = LoadGenerator(lambda: every, model="m", concurrency=8, prompt_tokens=20, output_tokens=100,
                        max_seconds=60)  # fmt: skip
    gen.start()
    wait_until(lambda: two[0].pending and two[1].pending, 30, what="requests pending on both servers")
    two[0].drain()
    stopper = threading.Thread(target=two[0].wait_drained)
    stopper.start()
    wait_until(
        lambda: gen.stats.completed > 30 and gen.stats.retried > 0,
        30,
        what="30 requests completed, some retried",
    )
    stats = gen.stop()
    assert stats.dropped == 0, stats.errors
    assert stats.retried > 0
    # Its 503s kept it from the quiet its drain waits for; with the traffic gone it drains within a second.
    stopper.join(30)
    assert not stopper.is_alive()


def test_bad_concurrency_is_refused() -> None:
    with pytest.raises(ValueError, match=r"concurrency 500 \(accepted: 0..256\)"):
        LoadGenerator(list, model="m", concurrency=500, prompt_tokens=1, output_tokens=1)
