"""vLLM's Prometheus metrics as vLLM 0.32 exposes them: names, types, label names and buckets.

Labels are ``model_name`` and ``engine`` (the engine index, "0"), like vLLM's PrometheusStatLogger;
``vllm:request_success_total`` adds ``finished_reason``; ``vllm:cache_config_info`` is an info-style
gauge (value 1) whose labels carry the cache configuration as strings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kvright_dev.sim.engine import Finished, StepResult

__all__ = ["TPOT_BUCKETS", "TTFT_BUCKETS", "VLLMMetrics"]

# Buckets copied from the facts of vLLM's metric definitions (seconds).
TPOT_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
)  # fmt: skip
LABELS = ("model_name", "engine")


class VLLMMetrics:
    """One registry holding the metrics one vLLM server exposes."""

    def __init__(self, *, model_name: str, cache_config: Mapping[str, str], fault: str = "none") -> None:
        self.fault = fault
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        values = (model_name, "0")

        def histogram(name: str, doc: str, buckets: Sequence[float]) -> Histogram:
            return Histogram(name, doc, LABELS, registry=r, buckets=buckets).labels(*values)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, LABELS, registry=r, multiprocess_mode="mostrecent").labels(*values)

        def counter(name: str, doc: str) -> Counter:
            # prometheus_client appends _total to counters: vllm:num_preemptions is exposed as
            # vllm:num_preemptions_total, as vLLM exposes it.
            return Counter(name, doc, LABELS, registry=r).labels(*values)

        self.tpot = histogram("vllm:request_time_per_output_token_seconds",
                              "Histogram of time_per_output_token_seconds per request.", TPOT_BUCKETS)
        self.itl = histogram("vllm:inter_token_latency_seconds",
                             "Histogram of inter-token latency in seconds.", TPOT_BUCKETS)
        self.ttft = histogram("vllm:time_to_first_token_seconds",
                              "Histogram of time to first token in seconds.", TTFT_BUCKETS)
        self.e2e = histogram("vllm:e2e_request_latency_seconds",
                             "Histogram of e2e request latency in seconds.", REQUEST_LATENCY_BUCKETS)
        self.queue = histogram("vllm:request_queue_time_seconds",
                               "Histogram of time spent in WAITING phase for request.",
                               REQUEST_LATENCY_BUCKETS)
        self.kv_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        # The simulator keeps no prefix cache: every prompt token is looked up and none is found.
        self.prefix_queries = counter("vllm:prefix_cache_queries", "Prefix cache queries, in tokens.")
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of tokens.")
        success = Counter(
            "vllm:request_success", "Count of successfully processed requests.", (*LABELS, "finished_reason"),
            registry=r,
        )  # fmt: skip
        self.success_length = success.labels(*values, "length")
        for reason in ("stop", "abort", "error"):
            success.labels(*values, reason)  # vLLM creates every finished_reason child up front
        info_labels = tuple(sorted(cache_config))
        Gauge(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", info_labels, registry=r,
            multiprocess_mode="mostrecent",
        ).labels(*(cache_config[k] for k in info_labels)).set(1)  # fmt: skip

    def record_step(self, step: StepResult, *, prompt_tokens: int) -> None:
        """Counters and per-token latency for one engine step."""
        if step.batch:
            # Every token this step produced arrived `duration` after the previous one.
            for _ in range(step.new_tokens):
                self.itl.observe(step.duration_seconds)
        self.generation_tokens.inc(step.new_tokens)
        if prompt_tokens:
            self.prompt_tokens.inc(prompt_tokens)
            self.prefix_queries.inc(prompt_tokens)
        if step.preempted:
            self.preemptions.inc(step.preempted)
        for done in step.finished:
            self.record_finished(done)

    def record_finished(self, done: Finished) -> None:
        if self.fault == "nan":
            self.tpot.observe(math.nan)  # in no bucket, but _sum turns NaN, as a broken exporter would
        self.ttft.observe(done.ttft_seconds)
        if done.output_tokens > 1:
            self.tpot.observe(done.tpot_seconds)
        self.e2e.observe(done.e2e_seconds)
        self.queue.observe(done.queue_seconds)
        self.success_length.inc()

    def set_state(self, *, running: int, waiting: int, kv_cache_usage: float) -> None:
        self.running.set(running)
        self.waiting.set(waiting)
        self.kv_usage.set(math.nan if self.fault == "nan" else kv_cache_usage)
