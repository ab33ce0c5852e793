"""Metrics: real Prometheus scrapes a real vLLM server under load; kvright.observe reads it back.

The server is the gqa tiny model with a KV cache of about a dozen blocks (METRICS_SERVER), so a
bounded burst of concurrent long generations fills the cache, queues requests and forces
preemptions. Prometheus (the real binary) scrapes vLLM's /metrics every 2 s with the
`namespace` / `llmdeployment` labels kvright selects on. Then the operator's observation code,
unchanged, answers: TPOT (the per-request histogram), TTFT, KV usage, running / waiting,
preemptions and vLLM's real KV capacity. Nothing is faked; there are no timing assertions, only
"moved" / "equals vLLM's own number" checks, and every wait is bounded.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvright.observe import Observation, PrometheusClient, observe
from kvright_dev.procs import WaitFailed, wait_until
from kvright_dev.prometheus import Prometheus

from .harness import (
    HERE,
    METRICS_SERVER,
    ServerPool,
    VllmEnv,
    VllmServer,
    cache_config_labels,
    metric_samples,
)

pytestmark = pytest.mark.conformance

NAMESPACE = "conformance"
NAME = "tiny-gqa"
REQUESTS = 12
CONCURRENCY = 8
OUTPUT_TOKENS = 384
PROMPT = " ".join(["the kv cache block token head layer tensor parallel"] * 12)
LOAD_DEADLINE_SECONDS = 300.0
BURSTS = 3
"""Bursts at most. Prometheus samples vLLM every :data:`SCRAPE_INTERVAL`, and a burst can end before a sample
catches it running (one CI run's did, on a machine busy with the side lane: no sample saw a request running or
a block in use): another burst of the same requests is sent until one does."""
SCRAPE_INTERVAL = "2s"
"""Prometheus's scrape interval, and so its timeout. At 1 s a later CI run's three bursts all went unseen
(every request finished, every one was counted afterwards, no sample showed one running): vLLM's API server,
busy with the burst on a two-core machine that the other lanes also load, can take longer than a second to
answer /metrics, and a scrape that times out records nothing."""


@pytest.fixture(scope="module")
def server(vllm_servers: ServerPool) -> VllmServer:
    return vllm_servers.get(METRICS_SERVER)


@pytest.fixture(scope="module")
def prometheus(server: VllmServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """One Prometheus for the module (overriding the function-scoped fixture of tests/conftest.py), from
    the shared launcher; the target carries the labels kvright's queries select on, as the chart's
    PodMonitor relabelling writes them."""
    with Prometheus(tmp_path_factory.mktemp("prometheus"), scrape_interval=SCRAPE_INTERVAL).start() as prom:
        labels = {"namespace": NAMESPACE, "llmdeployment": NAME}
        prom.add_targets("vllm", [f"127.0.0.1:{server.port}"], labels)
        yield prom


def _observe(prom: Prometheus) -> Observation:
    return observe(
        PrometheusClient(prom.url),
        namespace=NAMESPACE,
        name=NAME,
        window_seconds=300,
        percentile=90,
        now=time.time(),
    )


def _wait_for(what: str, predicate: Callable[[], bool], deadline_seconds: float) -> None:
    """Poll ``predicate()`` twice a second until true; fail the test naming ``what`` at the deadline."""
    try:
        wait_until(predicate, deadline_seconds, what=what, interval=0.5, transient=())
    except WaitFailed as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="module")
def loaded(server: VllmServer, prometheus: Prometheus) -> dict[str, object]:
    """Run a bounded burst (again, up to BURSTS, until observe() saw it queued up); observe once more after
    it drained."""
    sel = f'{{namespace="{NAMESPACE}",llmdeployment="{NAME}"}}'
    _wait_for("Prometheus to scrape vLLM", lambda: prometheus.query_value(f"up{sel}") == 1.0, 60)
    during: list[Observation] = []
    answers: list[dict[str, Any]] = []
    for _ in range(BURSTS):
        with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
            futures = [
                pool.submit(server.complete, PROMPT, max_tokens=OUTPUT_TOKENS, timeout=LOAD_DEADLINE_SECONDS)
                for _ in range(REQUESTS)
            ]

            def queued_up(futures: list[Any] = futures) -> bool:
                if all(f.done() for f in futures):
                    return True  # too late for this burst
                obs = _observe(prometheus)
                if obs.running and obs.waiting:
                    during.append(obs)
                    return True
                return False

            _wait_for("observe() to see requests running and waiting", queued_up, LOAD_DEADLINE_SECONDS)
            answers += [f.result(timeout=LOAD_DEADLINE_SECONDS) for f in futures]
        if during:
            break
    sent = len(answers)
    finished = sum(1 for a in answers if a["choices"][0]["finish_reason"] == "length")
    _wait_for(
        "Prometheus to see every request finish",
        lambda: prometheus.query_value(f"sum(vllm:request_success_total{sel})") == float(sent),
        60,
    )
    direct = server.metrics_text()
    after = _observe(prometheus)
    return {"during": during, "after": after, "finished": finished, "sent": sent, "direct": direct}


def test_every_request_generated_its_tokens(loaded: dict[str, object]) -> None:
    assert loaded["finished"] == loaded["sent"]


def test_observe_sees_requests_running_and_waiting_under_load(loaded: dict[str, object]) -> None:
    during = loaded["during"]
    assert isinstance(during, list) and during, "observe() never saw running and waiting requests together"
    obs = during[-1]
    assert obs.running is not None and obs.running >= 1
    assert obs.waiting is not None and obs.waiting >= 1


def test_observe_reads_tpot_ttft_and_counts_from_real_vllm(loaded: dict[str, object]) -> None:
    obs = loaded["after"]
    assert isinstance(obs, Observation)
    assert (obs.available, obs.reason) == (True, "MetricsFound"), obs.message
    assert obs.tpot_metric == "vllm:request_time_per_output_token_seconds"
    # increase() extrapolates the sampled span towards the window's ends (up to 1.1 scrape intervals each, and
    # towards zero where the series starts mid-window), so a burst whose samples span a few seconds reads high
    # in proportion: 12 finished requests read 13 on one machine and 14 on another. It never reads fewer, and
    # a quarter over still tells the one replica's count from two replicas' (24) or a missed series.
    sent = loaded["sent"]
    assert isinstance(sent, int) and sent <= obs.sample_count <= sent + max(1, sent // 4), (sent, obs)
    assert obs.replicas_reporting == 1
    assert obs.tpot_seconds is not None and math.isfinite(obs.tpot_seconds) and obs.tpot_seconds > 0
    assert obs.ttft_seconds is not None and math.isfinite(obs.ttft_seconds) and obs.ttft_seconds > 0
    assert obs.mean_context_tokens is not None and obs.mean_context_tokens > OUTPUT_TOKENS / 2
    assert (obs.running, obs.waiting) == (0.0, 0.0)
    assert obs.problems == ()


def test_observe_reads_kv_usage_and_preemptions_that_moved(loaded: dict[str, object]) -> None:
    obs = loaded["after"]
    assert isinstance(obs, Observation)
    direct = loaded["direct"]
    assert isinstance(direct, str)
    [(_, preempted)] = metric_samples(direct, "vllm:num_preemptions_total")
    assert preempted > 0, "the small KV cache did not force a single preemption"
    assert obs.preemptions_per_second is not None and obs.preemptions_per_second > 0
    assert obs.kv_cache_usage is not None and 0 < obs.kv_cache_usage <= 1
    assert obs.mean_batch is not None and obs.mean_batch > 0


def test_observe_reads_the_batch_the_tokens_were_decoded_at(
    loaded: dict[str, object], prometheus: Prometheus
) -> None:
    """The window holds idle minutes and the burst: the batch a token saw (running weighted by itself) is
    above the time average and never above the largest batch Prometheus sampled."""
    obs = loaded["after"]
    assert isinstance(obs, Observation)
    assert obs.mean_batch is not None and obs.decode_batch is not None
    sel = f'{{namespace="{NAMESPACE}",llmdeployment="{NAME}"}}'
    [largest] = PrometheusClient(prometheus.url).query(
        f"max(max_over_time(vllm:num_requests_running{sel}[300s]))", at=obs.sample_time
    )
    # (sum(running^2) / sum(running) over samples that all read 6 comes out as 6.000000000000001)
    top = largest.value * (1 + 1e-9)
    assert obs.mean_batch < obs.decode_batch <= top, (obs.mean_batch, obs.decode_batch, largest)


def test_observe_reports_vllms_real_kv_capacity(loaded: dict[str, object]) -> None:
    obs = loaded["after"]
    assert isinstance(obs, Observation)
    direct = loaded["direct"]
    assert isinstance(direct, str)
    labels = cache_config_labels(direct)
    assert (obs.num_gpu_blocks, obs.block_size, obs.cache_dtype) == (
        int(labels["num_gpu_blocks"]),
        int(labels["block_size"]),
        labels["cache_dtype"],
    )
    assert obs.kv_cache_tokens == int(labels["kv_cache_size_tokens"])


def test_a_data_parallel_server_reports_each_engines_running_requests_as_a_series_of_its_own(
    vllm_env: VllmEnv, tiny_models: dict[str, Path]
) -> None:
    """The control law reads the window's mean batch (``avg`` over vLLM's running-requests series) as one
    engine's batch, and counts a data-parallel replica's seats as max-num-seqs per engine
    (``kvright.control.Current.data_parallel_size``). That holds because vLLM's own Prometheus logger,
    under the engine indexes a DP API server manages, writes one series per engine, labelled ``engine``."""
    running, waiting = [3, 5, 0, 7], [0, 1, 0, 2]
    out = vllm_env.run(
        [str(HERE / "vllm_dp_metrics_probe.py"), str(tiny_models["gqa"])],
        stdin=json.dumps({"running": running, "waiting": waiting}),
        timeout=300,
    )
    exposition = json.loads(out.strip().splitlines()[-1])["exposition"]
    series: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            series.setdefault(sample.name, {})[sample.labels["engine"]] = sample.value
    assert series["vllm:num_requests_running"] == {str(i): float(r) for i, r in enumerate(running)}
    assert series["vllm:num_requests_waiting"] == {str(i): float(w) for i, w in enumerate(waiting)}
