"""The Observation value: what one LLMDeployment's vLLM pods did over a window, as
:mod:`kvright.observe` gathered it from Prometheus.

A pure value type with no IO, so that the pure decision modules (:mod:`kvright.control`) can take it
without importing the Prometheus client; :mod:`kvright.observe` re-exports it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Observation"]


@dataclass(frozen=True, kw_only=True)
class Observation:
    """What one LLMDeployment's vLLM pods did over a window. None means "not measured" (see `problems`)."""

    namespace: str
    name: str
    sample_time: float
    """Unix seconds at which the queries were evaluated."""
    window_seconds: int
    percentile: int
    available: bool
    """True when Prometheus answered and a TPOT histogram exists for this deployment."""
    reason: str
    """CamelCase reason for the MetricsAvailable condition."""
    message: str
    tpot_seconds: float | None = None
    """TPOT at `percentile` over the window, across all replicas; None without finished requests."""
    tpot_mean_seconds: float | None = None
    """Mean TPOT over the window (histogram _sum / _count: exact, unlike the bucketed percentile)."""
    tpot_metric: str | None = None
    """Which of kvright.observe.TPOT_METRICS answered."""
    ttft_seconds: float | None = None
    kv_cache_usage: float | None = None
    """Fraction 0..1: the busiest replica's window average."""
    running: float | None = None
    """Requests running now, all replicas."""
    waiting: float | None = None
    """Requests queued now, all replicas."""
    preemptions_per_second: float | None = None
    mean_batch: float | None = None
    """Mean running requests per replica over the window: the seats the load holds, averaged over time."""
    decode_batch: float | None = None
    """The batch the window's tokens were decoded at: running requests weighted by themselves over the
    window, ``E[b^2] / E[b]`` summed over replicas. A TPOT histogram counts tokens (or the requests that
    made them), and a step at batch b makes b of them, so a window the load started or ended in decodes
    its tokens at a larger batch than the time average (half a minute idle, half at 48 is a mean of 24
    and every token at 48). Equal to ``mean_batch`` when the batch held steady."""
    mean_context_tokens: float | None = None
    """Mean context during decode: prompt + output/2 tokens per finished request."""
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    kv_cache_tokens: int | None = None
    """num_gpu_blocks x block_size of the smallest replica (vLLM's real KV capacity)."""
    cache_dtype: str | None = None
    prefix_cache_hit_rate: float | None = None
    """Fraction 0..1 of prompt tokens vLLM's prefix cache served over the window (hits / queries, all
    replicas); None when nothing was queried or the counters are missing."""
    sample_count: int = 0
    """Finished requests in the window (the TPOT histogram's count)."""
    replicas_reporting: int = 0
    problems: tuple[str, ...] = field(default_factory=tuple)
    """One line per secondary metric that was missing or invalid."""

    def to_status(self) -> dict[str, Any]:
        """`status.observed` (camelCase, milliseconds and integer percent where the CRD wants them)."""
        out: dict[str, Any] = {
            "sampleTime": _rfc3339(self.sample_time),
            "windowSeconds": self.window_seconds,
            "sampleCount": self.sample_count,
            "replicasReporting": self.replicas_reporting,
        }
        if self.tpot_seconds is not None:
            out["tpotMilliseconds"] = round(self.tpot_seconds * 1000.0, 2)
            out["tpotPercentile"] = self.percentile
        if self.tpot_mean_seconds is not None:
            out["tpotMeanMilliseconds"] = round(self.tpot_mean_seconds * 1000.0, 2)
        if self.tpot_metric is not None:
            out["tpotMetric"] = self.tpot_metric
        if self.ttft_seconds is not None:
            out["ttftMilliseconds"] = round(self.ttft_seconds * 1000.0, 2)
        if self.kv_cache_usage is not None:
            out["kvCacheUsagePercent"] = round(self.kv_cache_usage * 100.0, 1)
        if self.prefix_cache_hit_rate is not None:
            out["prefixCacheHitPercent"] = round(self.prefix_cache_hit_rate * 100.0, 1)
        for key, value in (
            ("running", self.running),
            ("waiting", self.waiting),
            ("meanBatch", self.mean_batch),
            ("decodeBatch", self.decode_batch),
            ("meanContextTokens", self.mean_context_tokens),
            ("preemptionsPerSecond", self.preemptions_per_second),
        ):
            if value is not None:
                out[key] = round(value, 3)
        for key, ivalue in (
            ("numGPUBlocks", self.num_gpu_blocks),
            ("blockSize", self.block_size),
            ("kvCacheTokens", self.kv_cache_tokens),
        ):
            if ivalue is not None:
                out[key] = ivalue
        if self.cache_dtype is not None:
            out["cacheDtype"] = self.cache_dtype
        return out


def _rfc3339(unix_seconds: float) -> str:
    return datetime.datetime.fromtimestamp(unix_seconds, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
