"""Operator metrics: what kvright planned, per LLMDeployment, and how its reconciles go.

The names are a seam (docs/interfaces.md): the chart's alert rules and Grafana dashboards query them.
Per-LLMDeployment gauges carry the labels ``namespace`` and ``llmdeployment``; the chart's
ServiceMonitor sets ``honorLabels: true`` so Prometheus keeps them instead of renaming ``namespace`` to
``exported_namespace``.

Gather, decide, act: the operator builds a :class:`DeploymentMetrics` value (pure data) from its plan
result and status, and :meth:`OperatorMetrics.update` only copies it into gauges. Every value that is
not known yet (no feasible plan, vLLM not observed yet) is ``None`` and its series is removed rather
than left stale, so an alert never compares against a number from an older plan.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

__all__ = [
    "DEFAULT_METRICS_ADDRESS",
    "DEFAULT_METRICS_PORT",
    "METRICS",
    "DeploymentMetrics",
    "MetricsServer",
    "OperatorMetrics",
    "from_llmdeployment",
    "metrics_address_from_env",
    "metrics_port_from_env",
    "serve",
]

DEFAULT_METRICS_PORT: Final = 8080
"""``KVRIGHT_METRICS_PORT`` when unset; 0 disables the endpoint."""

DEFAULT_METRICS_ADDRESS: Final = "127.0.0.1"
"""``KVRIGHT_METRICS_ADDRESS`` when unset. Loopback on purpose: only the chart, inside the pod, sets
``0.0.0.0`` so Prometheus can scrape it; a developer's laptop or a test never exposes it."""

_KEY_LABELS: Final = ("namespace", "llmdeployment")
_INFO_LABELS: Final = ("kv_cache_dtype", "gpu", "model")

# Reconciles of one LLMDeployment take milliseconds (pure planning, a few API calls) up to tens of
# seconds (hub fetch, slow API server): buckets cover both ends.
_RECONCILE_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeploymentMetrics:
    """What the operator knows about one LLMDeployment, in the units the gauges use.

    ``None`` means "not known": its series is removed (e.g. no feasible plan, so no TP degree).
    """

    namespace: str
    """The LLMDeployment's namespace."""
    name: str
    """The LLMDeployment's name (the ``llmdeployment`` label)."""
    feasible: bool
    """Whether the planner found a plan that meets the SLO within the limits."""
    model: str = ""
    """Model name or architecture id, for ``kvright_plan_info``."""
    gpu: str = ""
    """GPU product, for ``kvright_plan_info``."""
    kv_cache_dtype: str | None = None
    """Planned KV-cache dtype (``auto``, ``fp8``, ...); ``None`` without a plan."""
    tensor_parallel_size: int | None = None
    """Planned tensor-parallel degree."""
    gpus_per_replica: int | None = None
    """GPUs one replica takes (TP x PP x DP); None reads as ``tensor_parallel_size`` (pure TP)."""
    max_num_seqs: int | None = None
    """Planned ``--max-num-seqs``."""
    replicas: int | None = None
    """Planned replicas."""
    recommended_replicas: int | None = None
    """Replicas kvright recommends, for an autoscaler that owns them (KEDA, an HPA): the feedback loop's
    recommendation at the load it measured, else the planner's count for ``spec.workload.concurrency``."""
    predicted_max_concurrency: int | None = None
    """Sequences one replica serves at once within the SLO: ``--max-num-seqs`` x its data-parallel engines."""
    predicted_output_tokens_per_second: float | None = None
    """Output tokens/s one replica is predicted to produce at the workload's load."""
    predicted_tpot_seconds: float | None = None
    """Predicted time per output token at the SLO's percentile at the planned batch, calibration applied
    (``status.prediction.tpotMilliseconds``: what the plan is sized on)."""
    predicted_tpot_mean_seconds: float | None = None
    """Predicted mean time per output token at the planned batch, calibration applied
    (``status.prediction.tpotMeanMilliseconds``): what vLLM's histogram ``_sum / _count`` is compared with."""
    predicted_ttft_seconds: float | None = None
    """Predicted time to first token."""
    predicted_kv_cache_tokens: int | None = None
    """Predicted KV-cache capacity of one replica, in tokens."""
    predicted_weight_bytes_per_gpu: int | None = None
    """Predicted model weight bytes on each GPU."""
    predicted_kv_cache_bytes_per_gpu: int | None = None
    """Predicted KV-cache bytes on each GPU."""
    planned_prefix_cache_hit_ratio: float | None = None
    """Share of prompt tokens the plan expects vLLM's prefix cache to serve (spec.workload.sharedPrefixTokens
    in whole blocks over the prompt); absent without a shared prefix."""
    observed_kv_cache_tokens: int | None = None
    """KV-cache capacity vLLM reported (``num_gpu_blocks * block_size`` from ``cache_config_info``)."""
    calibration_factor: float | None = None
    """Observed/predicted TPOT factor the planner multiplies its prediction by."""
    slo_tpot_seconds: float | None = None
    """The TPOT target from ``spec.slo``."""
    slo_ttft_seconds: float | None = None
    """The TTFT target from ``spec.slo``."""
    slo_percentile: int | None = None
    """The percentile the targets hold at (``spec.slo.percentile``: 50, 90, 95 or 99); the TPOT burn-rate
    alert picks the quantile that matches it."""

    @property
    def gpus(self) -> int | None:
        """All GPUs the plan uses: ``gpus_per_replica * replicas``."""
        per_replica = self.gpus_per_replica or self.tensor_parallel_size
        if per_replica is None or self.replicas is None:
            return None
        return per_replica * self.replicas


# gauge name -> (help, attribute of DeploymentMetrics). Order is the order of docs/interfaces.md.
_VALUE_GAUGES: Final[Mapping[str, tuple[str, str]]] = {
    "kvright_plan_tensor_parallel_size": (
        "Planned tensor-parallel degree (GPUs per replica)",
        "tensor_parallel_size",
    ),
    "kvright_plan_max_num_seqs": ("Planned vLLM --max-num-seqs", "max_num_seqs"),
    "kvright_plan_replicas": ("Planned replicas", "replicas"),
    "kvright_plan_gpus": ("GPUs the plan uses in all (TP x PP x DP per replica, times replicas)", "gpus"),
    "kvright_recommended_replicas": (
        "Replicas kvright recommends (for KEDA or an HPA that owns replicas)",
        "recommended_replicas",
    ),
    "kvright_predicted_max_concurrency": (
        "Sequences one replica serves at once within the SLO",
        "predicted_max_concurrency",
    ),
    "kvright_predicted_output_tokens_per_second": (
        "Predicted output tokens/s of one replica at the workload's load",
        "predicted_output_tokens_per_second",
    ),
    "kvright_predicted_tpot_seconds": (
        "Predicted time per output token at the SLO's percentile, calibration applied",
        "predicted_tpot_seconds",
    ),
    "kvright_predicted_tpot_mean_seconds": (
        "Predicted mean time per output token, calibration applied",
        "predicted_tpot_mean_seconds",
    ),
    "kvright_predicted_ttft_seconds": ("Predicted time to first token", "predicted_ttft_seconds"),
    "kvright_predicted_kv_cache_tokens": (
        "Predicted KV-cache capacity of one replica in tokens",
        "predicted_kv_cache_tokens",
    ),
    "kvright_predicted_weight_bytes_per_gpu": (
        "Predicted model weight bytes per GPU",
        "predicted_weight_bytes_per_gpu",
    ),
    "kvright_predicted_kv_cache_bytes_per_gpu": (
        "Predicted KV-cache bytes per GPU",
        "predicted_kv_cache_bytes_per_gpu",
    ),
    "kvright_planned_prefix_cache_hit_ratio": (
        "Share of prompt tokens the plan expects vLLM's prefix cache to serve",
        "planned_prefix_cache_hit_ratio",
    ),
    "kvright_observed_kv_cache_tokens": (
        "KV-cache capacity of one replica vLLM reported, in tokens",
        "observed_kv_cache_tokens",
    ),
    "kvright_calibration_factor": (
        "Observed/predicted TPOT factor applied to predictions",
        "calibration_factor",
    ),
    "kvright_slo_tpot_seconds": ("TPOT target from spec.slo", "slo_tpot_seconds"),
    "kvright_slo_ttft_seconds": ("TTFT target from spec.slo", "slo_ttft_seconds"),
    "kvright_slo_percentile": ("Percentile the SLO targets hold at (50, 90, 95 or 99)", "slo_percentile"),
}


class OperatorMetrics:
    """The operator's metric families in one registry (a fresh registry per instance, so tests and
    several operators in one process do not collide)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.reconciles = Counter(
            "kvright_reconcile",
            "LLMDeployment reconciles by result (success or error)",
            ["result"],
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            "kvright_reconcile_duration_seconds",
            "Time one LLMDeployment reconcile took",
            buckets=_RECONCILE_BUCKETS,
            registry=self.registry,
        )
        # Both results exist from the start: rate() over a counter that appears at its first error
        # misses that error, and the failing-reconciles alert divides by the total.
        for result in ("success", "error"):
            self.reconciles.labels(result=result)
        self._values = {
            name: Gauge(name, help_text, _KEY_LABELS, registry=self.registry)
            for name, (help_text, _) in _VALUE_GAUGES.items()
        }
        self._feasible = Gauge(
            "kvright_plan_feasible",
            "1 when the planner found a plan that meets the SLO, else 0",
            _KEY_LABELS,
            registry=self.registry,
        )
        self._info = Gauge(
            "kvright_plan_info",
            "Always 1; labels carry the planned KV-cache dtype, GPU and model",
            (*_KEY_LABELS, *_INFO_LABELS),
            registry=self.registry,
        )
        self._info_labels: dict[tuple[str, str], tuple[str, str, str]] = {}

    def update(self, values: DeploymentMetrics) -> None:
        """Set every per-LLMDeployment series from ``values``; unknown values remove their series."""
        key = (values.namespace, values.name)
        self._feasible.labels(*key).set(1 if values.feasible else 0)
        for name, (_, attribute) in _VALUE_GAUGES.items():
            value = getattr(values, attribute)
            if value is None:
                self._remove(self._values[name], key)
            else:
                self._values[name].labels(*key).set(value)
        old_info = self._info_labels.pop(key, None)
        if old_info is not None:
            self._remove(self._info, (*key, *old_info))
        if values.kv_cache_dtype is not None:
            info = (values.kv_cache_dtype, values.gpu, values.model)
            self._info.labels(*key, *info).set(1)
            self._info_labels[key] = info

    def remove(self, namespace: str, name: str) -> None:
        """Drop every series of a deleted LLMDeployment (idempotent)."""
        key = (namespace, name)
        self._remove(self._feasible, key)
        for gauge in self._values.values():
            self._remove(gauge, key)
        old_info = self._info_labels.pop(key, None)
        if old_info is not None:
            self._remove(self._info, (*key, *old_info))

    @contextmanager
    def reconcile(self, *, clock: Any = time.monotonic) -> Iterator[None]:
        """Time one reconcile and count it as ``success``, or ``error`` if the block raises."""
        start = clock()
        try:
            yield
        except BaseException:
            self.reconciles.labels(result="error").inc()
            raise
        else:
            self.reconciles.labels(result="success").inc()
        finally:
            self.reconcile_duration.observe(max(0.0, clock() - start))

    @staticmethod
    def _remove(gauge: Gauge, labels: tuple[str, ...]) -> None:
        with suppress(KeyError):
            gauge.remove(*labels)


def _number(source: Mapping[str, Any], key: str, scale: float = 1.0) -> float | None:
    value = source.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) * scale


def _integer(source: Mapping[str, Any], key: str) -> int | None:
    value = source.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _mapping(source: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = source.get(key)
    return value if isinstance(value, Mapping) else {}


def from_llmdeployment(obj: Mapping[str, Any]) -> DeploymentMetrics | None:
    """The gauges' values from an LLMDeployment as the operator and the feedback loop wrote it (pure).

    Reads ``spec.model.name``, ``spec.slo`` (milliseconds, percentile default 90), ``status.plan``,
    ``status.prediction``, ``status.observed.kvCacheTokens``, ``status.calibration.factor`` and
    ``recommendedReplicas`` and the ``PlanFeasible`` condition. The recommended replicas are the feedback
    loop's when it has decided, else ``prediction.plannedReplicas`` (never ``plan.replicas``: under an
    autoscaler that is the autoscaler's own count); a replica's tokens/s are the prediction's over the
    planned replicas it was predicted for. ``None`` before the operator has written ``PlanFeasible``
    (nothing to report yet). Plan values count only while ``PlanFeasible`` is True, so an infeasible
    object shows ``kvright_plan_feasible 0`` and no stale plan.
    """
    meta = _mapping(obj, "metadata")
    spec = _mapping(obj, "spec")
    status = _mapping(obj, "status")
    conditions = status.get("conditions")
    feasible_condition = (
        next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == "PlanFeasible"), None)
        if isinstance(conditions, list)
        else None
    )
    if feasible_condition is None:
        return None
    feasible = feasible_condition.get("status") == "True"
    slo = _mapping(spec, "slo")
    plan = _mapping(status, "plan") if feasible else {}
    prediction = _mapping(status, "prediction") if feasible else {}
    percentile = _integer(slo, "percentile")
    seqs, engines = _integer(plan, "maxNumSeqs"), _integer(plan, "dataParallelSize") or 1
    planned = _integer(prediction, "plannedReplicas")
    recommended = _integer(_mapping(status, "calibration"), "recommendedReplicas") if feasible else None
    tokens = _number(prediction, "outputTokensPerSecond")
    return DeploymentMetrics(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        feasible=feasible,
        model=str(_mapping(spec, "model").get("name", "")),
        gpu=str(plan.get("gpuProduct", "")),
        kv_cache_dtype=str(plan["kvCacheDtype"]) if "kvCacheDtype" in plan else None,
        tensor_parallel_size=_integer(plan, "tensorParallelSize"),
        gpus_per_replica=_integer(plan, "gpusPerReplica"),
        max_num_seqs=_integer(plan, "maxNumSeqs"),
        replicas=_integer(plan, "replicas"),
        recommended_replicas=recommended if recommended is not None else planned,
        predicted_max_concurrency=seqs * engines if seqs is not None else None,
        predicted_output_tokens_per_second=tokens / planned if tokens is not None and planned else None,
        predicted_tpot_seconds=_number(prediction, "tpotMilliseconds", 1e-3),
        predicted_tpot_mean_seconds=_number(prediction, "tpotMeanMilliseconds", 1e-3),
        predicted_ttft_seconds=_number(prediction, "ttftMilliseconds", 1e-3),
        predicted_kv_cache_tokens=_integer(prediction, "kvCacheTokensPerReplica"),
        predicted_weight_bytes_per_gpu=_integer(prediction, "weightBytesPerGPU"),
        predicted_kv_cache_bytes_per_gpu=_integer(prediction, "kvCacheBytesPerGPU"),
        planned_prefix_cache_hit_ratio=_number(prediction, "prefixCacheHitPercent", 1e-2),
        observed_kv_cache_tokens=_integer(_mapping(status, "observed"), "kvCacheTokens"),
        calibration_factor=_number(_mapping(status, "calibration"), "factor"),
        slo_tpot_seconds=_number(slo, "tpotMilliseconds", 1e-3),
        slo_ttft_seconds=_number(slo, "ttftMilliseconds", 1e-3),
        slo_percentile=percentile if percentile is not None else 90,
    )


METRICS: Final = OperatorMetrics()
"""The operator's metrics; the kopf handlers update this one."""


def metrics_port_from_env(environ: Mapping[str, str] | None = None) -> int:
    """``KVRIGHT_METRICS_PORT``: 0 (off) or 1-65535; default 8080."""
    env = os.environ if environ is None else environ
    raw = env.get("KVRIGHT_METRICS_PORT", "").strip()
    if not raw:
        return DEFAULT_METRICS_PORT
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ValueError(f"KVRIGHT_METRICS_PORT={raw!r} is not a port: use 0 (off) or 1-65535")
    return port


def metrics_address_from_env(environ: Mapping[str, str] | None = None) -> str:
    """``KVRIGHT_METRICS_ADDRESS``: the address to bind; default 127.0.0.1 (the chart sets 0.0.0.0)."""
    env = os.environ if environ is None else environ
    return env.get("KVRIGHT_METRICS_ADDRESS", "").strip() or DEFAULT_METRICS_ADDRESS


@dataclasses.dataclass(frozen=True)
class MetricsServer:
    """A running ``/metrics`` endpoint; ``port`` is the bound port (useful when asked for port 0)."""

    address: str
    port: int
    _server: Any

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()


def serve(
    metrics: OperatorMetrics = METRICS, *, port: int, address: str = DEFAULT_METRICS_ADDRESS
) -> MetricsServer:
    """Serve ``metrics`` on ``address:port`` in a daemon thread; port 0 picks a free port."""
    server, _thread = start_http_server(port, addr=address, registry=metrics.registry)
    bound_port = int(server.server_address[1])
    return MetricsServer(address=address, port=bound_port, _server=server)
