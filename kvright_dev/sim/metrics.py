"""vLLM's Prometheus metrics as vLLM 0.32 exposes them: names, types, label names and buckets.

Labels are ``model_name`` and ``engine`` (the engine index, "0"), like vLLM's PrometheusStatLogger;
``vllm:request_success_total`` adds ``finished_reason``; ``vllm:cache_config_info`` is an info-style
gauge (value 1) whose labels carry the cache configuration as strings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

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
        self.tpot = Histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            LABELS, registry=r, buckets=TPOT_BUCKETS,
        ).labels(*values)  # fmt: skip
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
            LABELS, registry=r, buckets=TPOT_BUCKETS,
        ).labels(*values)  # fmt: skip
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            LABELS, registry=r, buckets=TTFT_BUCKETS,
        ).labels(*values)  # fmt: skip
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
            LABELS, registry=r, buckets=REQUEST_LATENCY_BUCKETS,
        ).labels(*values)  # fmt: skip
        self.queue = Histogram(
            "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
            LABELS, registry=r, buckets=REQUEST_LATENCY_BUCKETS,
        ).labels(*values)  # fmt: skip
        self.kv_usage = Gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", LABELS, registry=r,
            multiprocess_mode="mostrecent",
        ).labels(*values)  # fmt: skip
        self.running = Gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", LABELS, registry=r,
            multiprocess_mode="mostrecent",
        ).labels(*values)  # fmt: skip
        self.waiting = Gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", LABELS, registry=r,
            multiprocess_mode="mostrecent",
        ).labels(*values)  # fmt: skip
        # prometheus_client appends _total to counters, so these expose vllm:num_preemptions_total etc.
        self.preemptions = Counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine.", LABELS, registry=r
        ).labels(*values)
        self.prompt_tokens = Counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", LABELS, registry=r
        ).labels(*values)
        self.generation_tokens = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", LABELS, registry=r
        ).labels(*values)
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
