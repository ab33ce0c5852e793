"""Observe: live vLLM numbers for one LLMDeployment from the Prometheus HTTP API.

This is an IO edge (gather only). It asks Prometheus a fixed set of PromQL queries over a window,
selecting series by the labels every vLLM series carries (`namespace`, `llmdeployment`; see
docs/interfaces.md), and folds the answers into one typed :class:`Observation`. Nothing here decides
anything; :mod:`kvright.control` does.

Robustness is the point of this module. vLLM renamed its TPOT and KV-usage metrics between
releases, Prometheus may be down, a histogram with no traffic yields NaN, and a label may be missing.
Every such case ends up in the Observation as "unavailable, because ..." with a CamelCase reason
for the `MetricsAvailable` condition; no exception escapes :func:`observe`.
"""

from __future__ import annotations

import base64
import math
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import requests

from kvright.observation import Observation
from kvright.reasons import Reason

__all__ = [
    "KV_USAGE_METRICS",
    "TPOT_METRICS",
    "Credentials",
    "Observation",
    "PrometheusClient",
    "PrometheusError",
    "Sample",
    "observe",
    "selector",
]

# TPOT metrics, best first. `request_time_per_output_token_seconds` is one value per finished request
# (what a TPOT SLO means); `inter_token_latency_seconds` is per token; the last is the pre-0.11 name.
TPOT_METRICS: tuple[str, ...] = (
    "vllm:request_time_per_output_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:time_per_output_token_seconds",
)
# KV-cache usage (a fraction 0..1 despite the name), current name first, then the pre-0.10 name.
KV_USAGE_METRICS: tuple[str, ...] = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
TTFT_METRIC = "vllm:time_to_first_token_seconds"
RUNNING_METRIC = "vllm:num_requests_running"
WAITING_METRIC = "vllm:num_requests_waiting"
PREEMPTIONS_METRIC = "vllm:num_preemptions_total"
PROMPT_TOKENS_METRIC = "vllm:prompt_tokens_total"
GENERATION_TOKENS_METRIC = "vllm:generation_tokens_total"
SUCCESS_METRIC = "vllm:request_success_total"
CACHE_CONFIG_METRIC = "vllm:cache_config_info"
#: Prompt tokens looked up in, and found in, vLLM's prefix cache (counters, vLLM 0.32 v1/metrics/loggers.py).
PREFIX_QUERIES_METRIC = "vllm:prefix_cache_queries_total"
PREFIX_HITS_METRIC = "vllm:prefix_cache_hits_total"


class PrometheusError(Exception):
    """A query could not be answered. `reason` is a CamelCase condition reason; str() is one line."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One element of an instant-vector answer."""

    labels: Mapping[str, str]
    """The series' labels (metric name included as `__name__` where Prometheus keeps it)."""
    value: float
    """The value as Prometheus sent it: may be NaN or +-Inf."""


@dataclass(frozen=True, kw_only=True)
class Credentials:
    """Who a query comes from: a bearer token, or basic auth, or nobody. The secrets stay in their files
    (a Secret mounted into the pod) and are read for every observation, so a rotated token is the one sent; no
    message names more than the file or the user."""

    bearer_token_file: str = ""
    username: str = ""
    password_file: str = ""
    """Basic auth's password, with ``username``."""

    def describe(self) -> str:
        if self.bearer_token_file:
            return f"the bearer token in {self.bearer_token_file}"
        if self.username:
            return f"basic auth as {self.username!r}"
        return "a request without credentials"

    def headers(self) -> dict[str, str]:
        """The Authorization header (none without credentials); PrometheusError when a file cannot be read."""
        if self.bearer_token_file:
            return {"Authorization": f"Bearer {_secret(self.bearer_token_file, 'bearer token')}"}
        if self.username:
            pair = f"{self.username}:{_secret(self.password_file, 'password')}".encode()
            return {"Authorization": f"Basic {base64.b64encode(pair).decode('ascii')}"}
        return {}


def _secret(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            value = f.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise PrometheusError(
            Reason.PROMETHEUS_QUERY_FAILED,
            f"cannot read the Prometheus {what} file {path}: {type(exc).__name__}",
        ) from None
    if not value or any(c in value for c in "\r\n"):
        raise PrometheusError(
            Reason.PROMETHEUS_QUERY_FAILED,
            f"the Prometheus {what} file {path} is {'empty' if not value else 'more than one line'}",
        )
    return value


class PrometheusClient:
    """A minimal client for `GET /api/v1/query` (instant queries), over http or https (verified against
    ``ca_file``, or the system's CAs without one), with :class:`Credentials`."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_seconds: float = 5.0,
        session: requests.Session | None = None,
        ca_file: str = "",
        credentials: Credentials | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"Prometheus URL {base_url!r} is not an http(s) URL; expected e.g. http://127.0.0.1:9090"
            )
        self.base_url = base_url.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self.session = session or requests.Session()
        self.ca_file = ca_file
        self.credentials = credentials or Credentials()

    def query(self, promql: str, *, at: float, headers: Mapping[str, str] | None = None) -> list[Sample]:
        """Evaluate `promql` at unix time `at`; raise :class:`PrometheusError` on any failure. ``headers``:
        the credentials' headers when the caller read them once for several queries; else read now."""
        url = f"{self.base_url}/api/v1/query"
        headers = self.credentials.headers() if headers is None else headers
        try:
            response = self.session.get(
                url,
                params={"query": promql, "time": f"{at:.3f}"},
                headers=headers,
                timeout=self.timeout_seconds,
                verify=self.ca_file or True,
            )
        except requests.exceptions.SSLError as exc:
            trust = (
                f"the CAs in {self.ca_file}"
                if self.ca_file
                else "the system's CAs (KVRIGHT_PROMETHEUS_CA_FILE unset)"
            )
            raise PrometheusError(
                Reason.PROMETHEUS_UNREACHABLE,
                f"{url}: TLS: {_tls_reason(exc)} (the certificate is checked against {trust})",
            ) from exc
        except requests.RequestException as exc:
            raise PrometheusError(
                Reason.PROMETHEUS_UNREACHABLE, f"{url}: {type(exc).__name__}: {_first_line(exc)}"
            ) from exc
        if response.status_code in (401, 403):
            raise PrometheusError(
                Reason.PROMETHEUS_QUERY_FAILED,
                f"{url}: HTTP {response.status_code}: Prometheus refused {self.credentials.describe()} "
                "(KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE, or KVRIGHT_PROMETHEUS_USERNAME and _PASSWORD_FILE)",
            )
        try:
            body: Any = response.json()
        except ValueError as exc:
            raise PrometheusError(
                Reason.PROMETHEUS_QUERY_FAILED, f"{url}: HTTP {response.status_code}, answer is not JSON"
            ) from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error", "no error text") if isinstance(body, dict) else "not an object"
            raise PrometheusError(
                Reason.PROMETHEUS_QUERY_FAILED,
                f"{url}: HTTP {response.status_code}: {_first_line(error)} (query {promql})",
            )
        data = body.get("data")
        if not isinstance(data, dict) or data.get("resultType") not in ("vector", "scalar"):
            raise PrometheusError(
                Reason.PROMETHEUS_QUERY_FAILED, f"{url}: unexpected answer shape for query {promql}"
            )
        if data["resultType"] == "scalar":
            return [Sample(labels={}, value=_parse_value(data.get("result")))]
        result = data.get("result")
        if not isinstance(result, list):
            raise PrometheusError(
                Reason.PROMETHEUS_QUERY_FAILED, f"{url}: result is not a list for query {promql}"
            )
        samples = []
        for item in result:
            if not isinstance(item, dict):
                continue
            labels = item.get("metric")
            samples.append(
                Sample(
                    labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
                    value=_parse_value(item.get("value")),
                )
            )
        return samples


def _tls_reason(exc: BaseException) -> str:
    """What the TLS handshake said, from under requests' and urllib3's wrappers (whose own text is a
    retry summary that cuts the reason off)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, ssl.SSLCertVerificationError):
            return f"certificate verify failed: {seen.verify_message}"
        if isinstance(seen, ssl.SSLError):
            return _first_line(seen.reason or seen)
        inner = getattr(seen, "reason", None)
        if not isinstance(inner, BaseException):
            inner = next((a for a in seen.args if isinstance(a, BaseException)), None)
        seen = inner or seen.__cause__ or seen.__context__
    return _first_line(exc)


def _parse_value(pair: object) -> float:
    """Prometheus sends `[timestamp, "value"]`; anything unparsable becomes NaN (treated as unavailable)."""
    if isinstance(pair, list) and len(pair) == 2:
        try:
            return float(pair[1])
        except (TypeError, ValueError):
            return math.nan
    return math.nan


def _first_line(obj: object) -> str:
    text = str(obj).strip()
    return (text.splitlines() or [""])[0][:300]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def selector(namespace: str, name: str) -> str:
    """The label matcher every query uses: `{namespace="...",llmdeployment="..."}`."""
    return f'{{namespace="{_escape(namespace)}",llmdeployment="{_escape(name)}"}}'


def _finite(samples: Sequence[Sample]) -> float | None:
    """The single value of an aggregated answer, or None when empty, NaN, infinite or negative."""
    if not samples:
        return None
    value = samples[0].value
    if not math.isfinite(value) or value < 0:
        return None
    return value


def observe(
    client: PrometheusClient,
    *,
    namespace: str,
    name: str,
    window_seconds: int,
    percentile: int,
    now: float,
) -> Observation:
    """Query Prometheus for one LLMDeployment; never raises for data or transport problems."""
    query: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "window_seconds": window_seconds,
        "percentile": percentile,
    }
    try:
        # The secrets' files are read once per observation (a dozen queries), not once per query.
        headers = client.credentials.headers()
        return _observe(lambda promql: client.query(promql, at=now, headers=headers), **query, now=now)
    except PrometheusError as exc:
        return Observation(**query, sample_time=now, available=False, reason=exc.reason, message=str(exc))


_Query = Callable[[str], list[Sample]]
"""One instant query of an observation: PromQL in, the samples out (PrometheusError on failure)."""


def _observe(
    q: _Query, *, namespace: str, name: str, window_seconds: int, percentile: int, now: float
) -> Observation:
    """The observation from ``q``, one instant query at ``now``."""
    sel = selector(namespace, name)
    window = f"[{int(window_seconds)}s]"
    quantile = percentile / 100.0
    problems: list[str] = []

    def hist_quantile(metric: str) -> float | None:
        return _finite(q(f"histogram_quantile({quantile}, sum by (le) (rate({metric}_bucket{sel}{window})))"))

    replicas = _finite(q(f"count({RUNNING_METRIC}{sel})"))
    replicas_reporting = int(replicas) if replicas is not None else 0

    # TPOT: the first metric name that has series for this deployment.
    tpot_metric: str | None = None
    count: float | None = None
    for metric in TPOT_METRICS:
        answer = q(f"sum(increase({metric}_count{sel}{window}))")
        if answer:
            tpot_metric = metric
            count = _finite(answer)
            break
    common: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "sample_time": now,
        "window_seconds": window_seconds,
        "percentile": percentile,
        "replicas_reporting": replicas_reporting,
    }
    if tpot_metric is None:
        if replicas_reporting == 0:
            return Observation(
                **common,
                available=False,
                reason=Reason.NO_SERIES,
                message=(
                    f"no vLLM series with labels {sel} in Prometheus "
                    "(scrape target missing or labels not set)"
                ),
            )
        return Observation(
            **common,
            available=False,
            reason=Reason.TPOT_METRIC_MISSING,
            message=(
                f"{replicas_reporting} replica(s) report {RUNNING_METRIC} but none of "
                f"{', '.join(TPOT_METRICS)} exists (renamed metric?)"
            ),
        )
    if count is None:
        return Observation(
            **common,
            available=False,
            reason=Reason.TPOT_INVALID,
            message=f"{tpot_metric}_count over {window_seconds}s is not a finite number",
            tpot_metric=tpot_metric,
        )
    sample_count = round(count)
    tpot: float | None = None
    if sample_count > 0:
        tpot = hist_quantile(tpot_metric)
        if tpot is None:
            return Observation(
                **common,
                available=False,
                reason=Reason.TPOT_INVALID,
                message=(
                    f"p{percentile} of {tpot_metric} over {window_seconds}s is not a finite number "
                    f"although {sample_count} request(s) finished"
                ),
                tpot_metric=tpot_metric,
                sample_count=sample_count,
            )

    tpot_mean: float | None = None
    if sample_count > 0:
        tpot_mean = _finite(
            q(f"sum(rate({tpot_metric}_sum{sel}{window})) / sum(rate({tpot_metric}_count{sel}{window}))")
        )
        if tpot_mean is None:
            problems.append(f"{tpot_metric}: no finite mean over the window")
    ttft = hist_quantile(TTFT_METRIC) if sample_count > 0 else None
    if sample_count > 0 and ttft is None:
        problems.append(f"{TTFT_METRIC}: no finite p{percentile}")

    kv_usage: float | None = None
    for metric in KV_USAGE_METRICS:
        answer = q(f"max(avg_over_time({metric}{sel}{window}))")
        if answer:
            kv_usage = _finite(answer)
            if kv_usage is not None and kv_usage > 1.0:
                problems.append(f"{metric}: {kv_usage} is above 1")
                kv_usage = None
            break
    else:
        problems.append(f"none of {', '.join(KV_USAGE_METRICS)} found")

    running = _finite(q(f"sum({RUNNING_METRIC}{sel})"))
    waiting = _finite(q(f"sum({WAITING_METRIC}{sel})"))
    if waiting is None:
        problems.append(f"{WAITING_METRIC}: missing or invalid")
    mean_batch = _finite(q(f"avg(avg_over_time({RUNNING_METRIC}{sel}{window}))"))
    # E[b^2] = var + mean^2 per series (stddev_over_time is the population deviation over the samples).
    running_over = f"{RUNNING_METRIC}{sel}{window}"
    decode_batch = _finite(
        q(
            f"sum(avg_over_time({running_over}) ^ 2 + stddev_over_time({running_over}) ^ 2)"
            f" / sum(avg_over_time({running_over}))"
        )
    )
    preemptions = _finite(q(f"sum(rate({PREEMPTIONS_METRIC}{sel}{window}))"))

    mean_context: float | None = None
    finished = _finite(q(f"sum(increase({SUCCESS_METRIC}{sel}{window}))"))
    if finished is not None and finished > 0:
        prompt = _finite(q(f"sum(increase({PROMPT_TOKENS_METRIC}{sel}{window}))"))
        generated = _finite(q(f"sum(increase({GENERATION_TOKENS_METRIC}{sel}{window}))"))
        if prompt is not None and generated is not None:
            mean_context = (prompt + generated / 2.0) / finished
        else:
            problems.append("token counters missing or invalid")

    blocks, block_size, dtype = _cache_config(q(f"{CACHE_CONFIG_METRIC}{sel}"), problems)
    queried = _finite(q(f"sum(increase({PREFIX_QUERIES_METRIC}{sel}{window}))"))
    hit = _finite(q(f"sum(increase({PREFIX_HITS_METRIC}{sel}{window}))")) if queried else None
    hit_rate = min(1.0, max(0.0, hit / queried)) if hit is not None and queried else None

    return Observation(
        **common,
        available=True,
        reason=Reason.METRICS_FOUND,
        message=(
            f"{tpot_metric}: {sample_count} request(s) in {window_seconds}s "
            f"from {replicas_reporting} replica(s)" + (f"; {'; '.join(problems)}" if problems else "")
        ),
        tpot_seconds=tpot,
        tpot_mean_seconds=tpot_mean,
        tpot_metric=tpot_metric,
        ttft_seconds=ttft,
        kv_cache_usage=kv_usage,
        running=running,
        waiting=waiting,
        preemptions_per_second=preemptions,
        prefix_cache_hit_rate=hit_rate,
        mean_batch=mean_batch,
        decode_batch=decode_batch,
        mean_context_tokens=mean_context,
        num_gpu_blocks=blocks,
        block_size=block_size,
        kv_cache_tokens=blocks * block_size if blocks is not None and block_size is not None else None,
        cache_dtype=dtype,
        sample_count=sample_count,
        problems=tuple(problems),
    )


def _cache_config(
    samples: Sequence[Sample], problems: list[str]
) -> tuple[int | None, int | None, str | None]:
    """num_gpu_blocks and block_size of the replica with the fewest KV tokens; cache_dtype as labelled."""
    if not samples:
        problems.append(f"{CACHE_CONFIG_METRIC}: missing")
        return None, None, None
    best: tuple[int, int] | None = None
    dtype: str | None = None
    for sample in samples:
        try:
            blocks = int(sample.labels["num_gpu_blocks"])
            size = int(sample.labels["block_size"])
        except (KeyError, ValueError):
            continue
        if blocks <= 0 or size <= 0:
            continue
        if best is None or blocks * size < best[0] * best[1]:
            best = (blocks, size)
            dtype = sample.labels.get("cache_dtype")
    if best is None:
        problems.append(f"{CACHE_CONFIG_METRIC}: no series with integer num_gpu_blocks and block_size labels")
        return None, None, None
    return best[0], best[1], dtype
