"""Every panel query of the shipped dashboards returns data from a real Prometheus.

Real parts: Prometheus (Debian's binary, on 127.0.0.1 with a temporary TSDB) scrapes the vLLM simulator
(`python -m kvright_dev.sim serve`, under load from kvright_dev.sim.loadgen) and the operator's real /metrics
endpoint (kvright.metrics.serve on 127.0.0.1, filled with one LLMDeployment's plan as the operator would).
Faked: the plan numbers themselves (no API server here; the operator's own tests cover how it computes
them), and the namespace/llmdeployment target labels, which the PodMonitor or the pod runner's file
service discovery would add and which this test writes into the static scrape config instead.
The vLLM simulator exposes the current metric names only; the legacy `or` branches are proven by
tests/promtool (rule tests with legacy series) and parse-checked in tests/unit/test_dashboards.py.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from kvright.dashboards import DASHBOARDS, panel_queries
from kvright.metrics import DeploymentMetrics, OperatorMetrics, serve
from kvright_dev.procs import LoopbackServer, WaitFailed, dev_environ, free_port, wait_until
from kvright_dev.prometheus import Prometheus, PrometheusMissing
from kvright_dev.sim.loadgen import LoadGenerator

pytestmark = [pytest.mark.e2e, pytest.mark.prometheus]

NAMESPACE, NAME, MODEL = "ml", "demo", "llama-3.1-8b"
DEADLINE_SECONDS = 120.0  # bounded wait for every query to have data; polling, not a timing assertion


@pytest.fixture(scope="module")
def operator_metrics() -> Iterator[int]:
    m = OperatorMetrics()
    m.update(DeploymentMetrics(
        namespace=NAMESPACE, name=NAME, feasible=True, model=MODEL, gpu="NVIDIA-H100-80GB-HBM3",
        kv_cache_dtype="auto", tensor_parallel_size=1, max_num_seqs=16, replicas=1,
        predicted_tpot_seconds=0.012, predicted_ttft_seconds=0.05, predicted_kv_cache_tokens=400_000,
        predicted_weight_bytes_per_gpu=16_060_522_496, predicted_kv_cache_bytes_per_gpu=52_000_000_000,
        observed_kv_cache_tokens=398_000, calibration_factor=1.0, slo_tpot_seconds=0.05, slo_ttft_seconds=1.0,
        slo_percentile=90, planned_prefix_cache_hit_ratio=0.5, recommended_replicas=1,
        predicted_max_concurrency=16,
    ))
    stop = threading.Event()

    def reconcile_periodically() -> None:  # the operator's level-based timer, bounded by the fixture's life
        for _ in range(10_000):
            with m.reconcile():
                time.sleep(0.01)
            if stop.wait(0.5):
                return

    timer = threading.Thread(target=reconcile_periodically, daemon=True)
    timer.start()
    server = serve(m, port=0, address="127.0.0.1")
    try:
        yield server.port
    finally:
        stop.set()
        timer.join(timeout=10)
        server.close()


@pytest.fixture(scope="module")
def simulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, "-m", "kvright_dev.sim", "serve", MODEL, "--host", "127.0.0.1",
            "--port", str(port), "--gpu", "h100-sxm", "--max-num-seqs", "16", "--max-model-len", "4096",
            "--time-scale", "5"]
    log = tmp_path_factory.mktemp("sim") / "sim.log"
    with LoopbackServer(argv, name="simulator", port=port, ready_path="/metrics", log_path=log,
                        env=dev_environ()).start(60) as sim:
        yield sim.url


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, simulator: str, operator_metrics: int
) -> Iterator[str]:
    scrape_configs = [
        {"job_name": "vllm", "static_configs": [{
            "targets": [simulator.removeprefix("http://")],
            "labels": {"namespace": NAMESPACE, "llmdeployment": NAME, "pod": f"{NAME}-0"}}]},
        {"job_name": "kvright-metrics", "honor_labels": True,
         "static_configs": [{"targets": [f"127.0.0.1:{operator_metrics}"]}]},
    ]
    try:
        prom = Prometheus(tmp_path_factory.mktemp("prometheus"), extra_scrape_configs=scrape_configs)
    except PrometheusMissing as exc:
        pytest.fail(str(exc))
    with prom.start():
        yield prom.url


def instant(prometheus: str, expr: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", (expr, answer)
    result: list[dict[str, Any]] = answer["data"]["result"]
    return [r for r in result if r["value"][1] not in ("NaN", "+Inf", "-Inf")]


def substitute(expr: str) -> str:
    return (expr.replace("$namespace", NAMESPACE).replace("$llmdeployment", NAME)
            .replace("$__rate_interval", "20s"))


@pytest.mark.parametrize("uid", sorted(DASHBOARDS), ids=str)
def test_every_panel_query_returns_data_under_load(uid: str, prometheus: str, simulator: str) -> None:
    queries = [(title, substitute(expr)) for title, expr in panel_queries(DASHBOARDS[uid]())]
    load = LoadGenerator(lambda: [simulator], model=MODEL, concurrency=6, prompt_tokens=256, output_tokens=64,
                         max_requests=5000, max_seconds=DEADLINE_SECONDS + 30, max_concurrency=6)
    empty = [title for title, _ in queries]

    def all_have_data() -> bool:
        empty[:] = [title for title, expr in queries if not instant(prometheus, expr)]
        return not empty

    with load, contextlib.suppress(WaitFailed):  # the asserts below say what is missing
        wait_until(all_have_data, DEADLINE_SECONDS, what="every panel to have data", interval=2, transient=())
    assert load.stats.completed > 0, load.stats.errors[:3]
    assert empty == [], f"panels without data: {empty}"


def test_variables_list_the_llmdeployment(prometheus: str) -> None:
    def values() -> list[str]:
        return list(requests.get(f"{prometheus}/api/v1/label/llmdeployment/values",
                                 params={"match[]": f'kvright_plan_feasible{{namespace="{NAMESPACE}"}}'},
                                 timeout=10).json()["data"])

    assert wait_until(values, 30, what="the llmdeployment label's values", interval=1, transient=()) == [NAME]
