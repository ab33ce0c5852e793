"""kvright.observe against a tiny local HTTP server that speaks the Prometheus query API.

What is faked: Prometheus itself. The fake answers each PromQL query from a table keyed by the
outer aggregation and the metric it selects, so a test states exactly which series "exist" and
what they hold (including NaN and missing labels). Everything else is real: the HTTP client,
JSON decoding, the fallback chain over renamed metrics and the mapping to an Observation.
"""

from __future__ import annotations

import base64
import json
import math
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from kvright.observe import Credentials, Observation, PrometheusClient, observe, selector
from kvright_dev.procs import free_port

NOW = 1_800_000_000.0
RTPOT = "vllm:request_time_per_output_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
LEGACY_TPOT = "vllm:time_per_output_token_seconds"


class FakePrometheus:
    """Answers `/api/v1/query` from `table`: key "<outer function>:<metric token>" -> value or series list."""

    def __init__(self) -> None:
        self.table: dict[str, Any] = {}
        self.queries: list[str] = []
        self.raw: tuple[int, bytes] | None = None  # when set, every answer is this (status, body)
        self.authorizations: list[str | None] = []  # each request's Authorization header
        self.want: str | None = None  # when set, a request without this Authorization gets HTTP 401
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                params = parse_qs(urlparse(self.path).query)
                query = params.get("query", [""])[0]
                fake.queries.append(query)
                fake.authorizations.append(self.headers.get("Authorization"))
                if fake.want is not None and self.headers.get("Authorization") != fake.want:
                    status, body = 401, b"Unauthorized\n"
                elif fake.raw is not None:
                    status, body = fake.raw
                else:
                    status, body = 200, json.dumps(fake.answer(query)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def answer(self, query: str) -> dict[str, Any]:
        outer = query.split("(", 1)[0] if "(" in query else ""
        if "stddev_over_time(" in query:
            outer = "stddev_over_time"  # the decode batch: a ratio of sums, told apart by its variance
        token = re.search(r"vllm:[a-z_]+", query)
        key = f"{outer}:{token.group(0) if token else ''}"
        value = self.table.get(key)
        if value is None:
            result: list[dict[str, Any]] = []
        elif isinstance(value, list):
            result = [{"metric": labels, "value": [NOW, "1"]} for labels in value]
        else:
            result = [{"metric": {}, "value": [NOW, str(value)]}]
        return {"status": "success", "data": {"resultType": "vector", "result": result}}


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    fake = FakePrometheus()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def healthy(tpot_metric: str = RTPOT, kv_metric: str = "vllm:kv_cache_usage_perc") -> dict[str, Any]:
    return {
        "count:vllm:num_requests_running": 2,
        f"sum:{tpot_metric}_count": 120,
        f"histogram_quantile:{tpot_metric}_bucket": 0.042,
        f"sum:{tpot_metric}_sum": 0.036,
        "histogram_quantile:vllm:time_to_first_token_seconds_bucket": 0.35,
        f"max:{kv_metric}": 0.61,
        "sum:vllm:num_requests_running": 40,
        "sum:vllm:num_requests_waiting": 3,
        "avg:vllm:num_requests_running": 18.5,
        "stddev_over_time:vllm:num_requests_running": 21.25,
        "sum:vllm:num_preemptions_total": 0.25,
        "sum:vllm:request_success_total": 120,
        "sum:vllm:prompt_tokens_total": 120 * 2000,
        "sum:vllm:generation_tokens_total": 120 * 200,
        "sum:vllm:prefix_cache_queries_total": 120 * 2000,
        "sum:vllm:prefix_cache_hits_total": 120 * 800,
        ":vllm:cache_config_info": [
            {"num_gpu_blocks": "9000", "block_size": "16", "cache_dtype": "auto", "pod": "a"},
            {"num_gpu_blocks": "8800", "block_size": "16", "cache_dtype": "auto", "pod": "b"},
        ],
    }


def run(prom: FakePrometheus, percentile: int = 90) -> Observation:
    client = PrometheusClient(prom.url, timeout_seconds=2.0)
    return observe(client, namespace="team-a", name="chat", window_seconds=60, percentile=percentile, now=NOW)


def test_healthy_deployment_maps_every_metric(prom: FakePrometheus) -> None:
    prom.table = healthy()
    obs = run(prom)
    assert obs.available and obs.reason == "MetricsFound"
    assert obs.tpot_seconds == pytest.approx(0.042)
    assert obs.tpot_mean_seconds == pytest.approx(0.036)
    assert obs.tpot_metric == RTPOT
    assert obs.ttft_seconds == pytest.approx(0.35)
    assert obs.kv_cache_usage == pytest.approx(0.61)
    assert (obs.running, obs.waiting, obs.mean_batch, obs.decode_batch) == (40, 3, 18.5, 21.25)
    assert obs.preemptions_per_second == pytest.approx(0.25)
    assert obs.mean_context_tokens == pytest.approx(2000 + 100)
    # The smallest replica's KV capacity is the one that binds.
    assert (obs.num_gpu_blocks, obs.block_size, obs.kv_cache_tokens) == (8800, 16, 8800 * 16)
    assert obs.cache_dtype == "auto"
    assert obs.prefix_cache_hit_rate == pytest.approx(0.4)
    assert (obs.sample_count, obs.replicas_reporting) == (120, 2)
    assert obs.problems == ()
    status = obs.to_status()
    assert status["tpotMilliseconds"] == 42.0
    assert status["tpotMeanMilliseconds"] == 36.0
    assert status["kvCacheUsagePercent"] == 61.0
    assert status["numGPUBlocks"] == 8800
    assert status["sampleCount"] == 120
    assert status["sampleTime"] == "2027-01-15T08:00:00Z"
    assert status["prefixCacheHitPercent"] == 40.0


def test_without_prefix_cache_counters_the_hit_rate_is_unknown_not_zero(prom: FakePrometheus) -> None:
    prom.table = {k: v for k, v in healthy().items() if "prefix_cache" not in k}
    obs = run(prom)
    assert obs.available and obs.prefix_cache_hit_rate is None
    assert "prefixCacheHitPercent" not in obs.to_status()


def test_queries_select_the_deployment_labels_and_window(prom: FakePrometheus) -> None:
    prom.table = healthy()
    run(prom, percentile=95)
    sel = '{namespace="team-a",llmdeployment="chat"}'
    assert all(sel in query for query in prom.queries), prom.queries
    assert f"histogram_quantile(0.95, sum by (le) (rate({RTPOT}_bucket{sel}[60s])))" in prom.queries
    assert f"sum(rate({RTPOT}_sum{sel}[60s])) / sum(rate({RTPOT}_count{sel}[60s]))" in prom.queries


@pytest.mark.parametrize(
    ("tpot_metric", "kv_metric"),
    [
        (ITL, "vllm:kv_cache_usage_perc"),
        (LEGACY_TPOT, "vllm:gpu_cache_usage_perc"),
    ],
    ids=["per-token-latency-when-per-request-is-absent", "pre-0.11-names"],
)
def test_falls_back_over_renamed_metrics(prom: FakePrometheus, tpot_metric: str, kv_metric: str) -> None:
    prom.table = healthy(tpot_metric, kv_metric)
    obs = run(prom)
    assert obs.available
    assert obs.tpot_metric == tpot_metric
    assert obs.tpot_seconds == pytest.approx(0.042)
    assert obs.kv_cache_usage == pytest.approx(0.61)


def without(table: dict[str, Any], *prefixes: str) -> dict[str, Any]:
    return {k: v for k, v in table.items() if not any(p in k for p in prefixes)}


@pytest.mark.parametrize(
    ("table", "reason", "fragment"),
    [
        ({}, "NoSeries", 'llmdeployment="chat"'),
        (without(healthy(), "time_per_output_token", "inter_token"), "TPOTMetricMissing", "renamed metric"),
        ({**healthy(), f"histogram_quantile:{RTPOT}_bucket": "NaN"}, "TPOTInvalid", "not a finite number"),
        ({**healthy(), f"histogram_quantile:{RTPOT}_bucket": "+Inf"}, "TPOTInvalid", "not a finite number"),
        ({**healthy(), f"sum:{RTPOT}_count": "NaN"}, "TPOTInvalid", "_count"),
    ],
    ids=["nothing-scraped", "tpot-renamed-to-unknown", "quantile-nan", "quantile-inf", "count-nan"],
)
def test_unusable_tpot_is_unavailable_with_a_reason(
    prom: FakePrometheus, table: dict[str, Any], reason: str, fragment: str
) -> None:
    prom.table = table
    obs = run(prom)
    assert not obs.available
    assert obs.reason == reason
    assert fragment in obs.message
    assert obs.tpot_seconds is None


def test_no_finished_requests_is_available_without_tpot(prom: FakePrometheus) -> None:
    prom.table = {**healthy(), f"sum:{RTPOT}_count": 0, f"histogram_quantile:{RTPOT}_bucket": "NaN"}
    obs = run(prom)
    assert obs.available
    assert obs.sample_count == 0
    assert obs.tpot_seconds is None
    assert obs.ttft_seconds is None


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ({"max:vllm:kv_cache_usage_perc": "NaN"}, "kv_cache_usage", None),
        ({"max:vllm:kv_cache_usage_perc": 7.5}, "kv_cache_usage", "above 1"),
        ({":vllm:cache_config_info": [{"block_size": "16"}]}, "kv_cache_tokens", "integer num_gpu_blocks"),
        (
            {":vllm:cache_config_info": [{"num_gpu_blocks": "x", "block_size": "16"}]},
            "kv_cache_tokens",
            "integer",
        ),
        ({":vllm:cache_config_info": None}, "kv_cache_tokens", "cache_config_info: missing"),
        ({"sum:vllm:num_requests_waiting": None}, "waiting", "num_requests_waiting"),
        ({"sum:vllm:prompt_tokens_total": "NaN"}, "mean_context_tokens", "token counters"),
    ],
    ids=[
        "kv-usage-nan",
        "kv-usage-out-of-range",
        "cache-config-missing-label",
        "cache-config-non-integer-label",
        "cache-config-absent",
        "waiting-absent",
        "prompt-tokens-nan",
    ],
)
def test_bad_secondary_metric_is_dropped_and_named(
    prom: FakePrometheus, change: dict[str, Any], field: str, problem: str | None
) -> None:
    prom.table = {k: v for k, v in {**healthy(), **change}.items() if v is not None}
    obs = run(prom)
    assert obs.available, obs.message
    assert getattr(obs, field) is None
    assert obs.tpot_seconds == pytest.approx(0.042)
    if problem is not None:
        assert any(problem in line for line in obs.problems), obs.problems
        assert problem in obs.message


def test_prometheus_down_is_unreachable_not_an_exception() -> None:
    client = PrometheusClient(f"http://127.0.0.1:{free_port()}", timeout_seconds=1.0)
    obs = observe(client, namespace="a", name="b", window_seconds=30, percentile=90, now=NOW)
    assert not obs.available
    assert obs.reason == "PrometheusUnreachable"
    assert "ConnectionError" in obs.message
    assert obs.to_status()["sampleCount"] == 0


@pytest.mark.parametrize(
    ("status", "body", "fragment"),
    [
        (400, b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}', "parse error"),
        (200, b"<html>proxy login</html>", "not JSON"),
        (200, b'{"status":"success","data":{"resultType":"matrix","result":[]}}', "unexpected answer shape"),
    ],
    ids=["promql-error", "not-json", "wrong-result-type"],
)
def test_bad_answers_are_query_failures(
    prom: FakePrometheus, status: int, body: bytes, fragment: str
) -> None:
    prom.raw = (status, body)
    obs = run(prom)
    assert not obs.available
    assert obs.reason == "PrometheusQueryFailed"
    assert fragment in obs.message
    assert "\n" not in obs.message


def test_label_values_are_escaped_in_selectors() -> None:
    assert selector('we"ird', "a\\b") == '{namespace="we\\"ird",llmdeployment="a\\\\b"}'


def test_non_http_url_is_refused_with_what_is_accepted() -> None:
    with pytest.raises(ValueError, match=r"not an http\(s\) URL; expected e.g. http://127.0.0.1:9090"):
        PrometheusClient("prometheus:9090")


def test_nan_never_leaks_into_status(prom: FakePrometheus) -> None:
    prom.table = {k: "NaN" if not isinstance(v, list) else v for k, v in healthy().items()}
    prom.table["count:vllm:num_requests_running"] = 1
    obs = run(prom)
    assert not any(isinstance(v, float) and math.isnan(v) for v in obs.to_status().values())


def test_a_bearer_token_is_read_from_its_file_for_every_observation(
    prom: FakePrometheus, tmp_path: Path
) -> None:
    """The kubelet rotates a projected service-account token in place: the next observation sends it."""
    token = tmp_path / "token"
    token.write_text("first\n", encoding="utf-8")
    client = PrometheusClient(prom.url, credentials=Credentials(bearer_token_file=str(token)))
    prom.table, prom.want = healthy(), "Bearer first"
    assert observe(client, namespace="a", name="b", window_seconds=60, percentile=90, now=NOW).available
    token.write_text("second\n", encoding="utf-8")
    refused = observe(client, namespace="a", name="b", window_seconds=60, percentile=90, now=NOW)
    assert (refused.available, refused.reason) == (False, "PrometheusQueryFailed")
    assert f"HTTP 401: Prometheus refused the bearer token in {token}" in refused.message
    assert "second" not in refused.message
    prom.want = "Bearer second"
    assert observe(client, namespace="a", name="b", window_seconds=60, percentile=90, now=NOW).available
    assert set(prom.authorizations) == {"Bearer first", "Bearer second"}


def test_basic_auth_sends_the_user_and_the_password_from_its_file(
    prom: FakePrometheus, tmp_path: Path
) -> None:
    password = tmp_path / "password"
    password.write_text("pa:ss\n", encoding="utf-8")
    client = PrometheusClient(
        prom.url, credentials=Credentials(username="kvright", password_file=str(password))
    )
    prom.table, prom.want = healthy(), "Basic " + base64.b64encode(b"kvright:pa:ss").decode()
    assert observe(client, namespace="a", name="b", window_seconds=60, percentile=90, now=NOW).available
    anonymous = observe(
        PrometheusClient(prom.url), namespace="a", name="b", window_seconds=60, percentile=90, now=NOW
    )
    assert "HTTP 401: Prometheus refused a request without credentials" in anonymous.message


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot read the Prometheus bearer token file"),
        ("", "is empty"),
        ("a\nb", "is more than one line"),
    ],
    ids=["missing", "empty", "two-lines"],
)
def test_a_token_file_that_cannot_be_used_is_a_query_failure_naming_the_file(
    prom: FakePrometheus, tmp_path: Path, content: str | None, says: str
) -> None:
    token = tmp_path / "token"
    if content is not None:
        token.write_text(content, encoding="utf-8")
    client = PrometheusClient(prom.url, credentials=Credentials(bearer_token_file=str(token)))
    obs = observe(client, namespace="a", name="b", window_seconds=60, percentile=90, now=NOW)
    assert (obs.available, obs.reason) == (False, "PrometheusQueryFailed")
    assert says in obs.message and str(token) in obs.message
    assert prom.queries == []  # nothing was sent without the credentials
