"""Grafana dashboards, generated from code so every query is testable.

``python -m kvright.dashboards DIR`` writes each dashboard as ``DIR/<uid>.json``; ``make chart-sync`` writes
them into ``charts/kvright/files/dashboards/``, which the chart ships as ConfigMaps for the Grafana sidecar.
``tests/unit/test_dashboards.py`` fails when the files drift from this code, and
``tests/e2e/test_dashboards_data.py`` runs every panel query against a real Prometheus.

Every vLLM metric that was renamed is queried under both names (``current or legacy``): dashboards that
knew only one name showed "No data" after vLLM's rename.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

__all__ = ["DASHBOARDS", "capacity_overview", "panel_queries", "render", "write"]

SEL: Final = 'namespace="$namespace", llmdeployment="$llmdeployment"'
"""Label matchers of one LLMDeployment, filled by the dashboard's variables."""

RATE: Final = "$__rate_interval"


def _either(current: str, legacy: str) -> str:
    """``current or legacy``: the same series under vLLM's current and older metric name."""
    return f"({current}\n  or\n{legacy})"


def _tpot_quantile(quantile: str) -> str:
    """Observed TPOT (per request) at ``quantile``, from either of vLLM's histogram names."""
    buckets = _either(
        f"sum by (le) (rate(vllm:request_time_per_output_token_seconds_bucket{{{SEL}}}[{RATE}]))",
        f"sum by (le) (rate(vllm:time_per_output_token_seconds_bucket{{{SEL}}}[{RATE}]))",
    )
    return f"histogram_quantile({quantile}, {buckets})"


SLO_QUANTILE: Final = f"scalar(max(kvright_slo_percentile{{{SEL}}})) / 100"
"""The LLMDeployment's SLO percentile as a quantile (0.9 for p90), so observed latency is read at the
percentile the target holds at."""

KV_USAGE: Final = _either(f"vllm:kv_cache_usage_perc{{{SEL}}}", f"vllm:gpu_cache_usage_perc{{{SEL}}}")


def _against_slo(observed: str, latency: str) -> list[tuple[str, str]]:
    """An observed latency with kvright's SLO target and prediction for it (``latency``: tpot or ttft)."""
    return [
        (observed, "observed"),
        (f"max(kvright_slo_{latency}_seconds{{{SEL}}})", "SLO target"),
        (f"max(kvright_predicted_{latency}_seconds{{{SEL}}})", "predicted"),
    ]


def _target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    return {
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "expr": expr,
        "legendFormat": legend,
        "refId": ref,
    }


def _panel(
    pid: int,
    title: str,
    description: str,
    targets: Sequence[tuple[str, str]],
    *,
    unit: str,
    grid: tuple[int, int, int, int],
    kind: str = "timeseries",
    stacked: bool = False,
) -> dict[str, Any]:
    x, y, w, h = grid
    defaults: dict[str, Any] = {"unit": unit}
    if kind == "timeseries":
        defaults["custom"] = {
            "lineWidth": 2,
            "fillOpacity": 30 if stacked else 0,
            "stacking": {"mode": "normal" if stacked else "none", "group": "A"},
        }
    return {
        "id": pid,
        "type": kind,
        "title": title,
        "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": ({"legend": {"displayMode": "table", "placement": "bottom"}}
                    if kind == "timeseries" else {}),
        "targets": [_target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)],
    }


def _row(pid: int, title: str, y: int) -> dict[str, Any]:
    return {"id": pid, "type": "row", "title": title, "collapsed": False,
            "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []}


def _variables() -> list[dict[str, Any]]:
    def query(name: str, label: str, expr: str) -> dict[str, Any]:
        return {
            "name": name,
            "label": label,
            "type": "query",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": expr, "refId": f"{name}-var"},
            "definition": expr,
            "refresh": 2,
            "sort": 1,
            "includeAll": False,
            "multi": False,
            "current": {},
        }

    return [
        {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0},
        query("namespace", "Namespace", "label_values(kvright_plan_feasible, namespace)"),
        query("llmdeployment", "LLMDeployment",
              'label_values(kvright_plan_feasible{namespace="$namespace"}, llmdeployment)'),
    ]


def capacity_overview() -> dict[str, Any]:
    """Per LLMDeployment: latency against target and prediction, KV cache, queue, GPUs, memory split,
    calibration; and the operator's own health."""
    panels: list[dict[str, Any]] = [
        _row(1, "Latency: observed vs SLO vs predicted", 0),
        _panel(2, "TPOT at the SLO percentile",
               "Time per output token per request (vllm:request_time_per_output_token_seconds, or the "
               "legacy vllm:time_per_output_token_seconds) at the LLMDeployment's SLO percentile, against "
               "the target and kvright's prediction.",
               _against_slo(_tpot_quantile(SLO_QUANTILE), "tpot"),
               unit="s", grid=(0, 1, 12, 8)),
        _panel(3, "TTFT at the SLO percentile",
               "Time to first token (vllm:time_to_first_token_seconds) against the target and the "
               "prediction.",
               _against_slo(f"histogram_quantile({SLO_QUANTILE}, sum by (le) "
                            f"(rate(vllm:time_to_first_token_seconds_bucket{{{SEL}}}[{RATE}])))", "ttft"),
               unit="s", grid=(12, 1, 12, 8)),
        _row(4, "KV cache and scheduling", 9),
        _panel(5, "KV-cache usage",
               "Fraction of the KV cache in use (vllm:kv_cache_usage_perc, or the legacy "
               "vllm:gpu_cache_usage_perc): the fullest pod and the mean over pods.",
               [(f"max({KV_USAGE})", "fullest pod"), (f"avg({KV_USAGE})", "mean")],
               unit="percentunit", grid=(0, 10, 8, 8)),
        _panel(6, "Requests running and waiting",
               "Requests in the running batch and waiting for a slot, summed over pods.",
               [(f"sum(vllm:num_requests_running{{{SEL}}})", "running"),
                (f"sum(vllm:num_requests_waiting{{{SEL}}})", "waiting"),
                (f"max(kvright_predicted_max_concurrency{{{SEL}}}) * max(kvright_plan_replicas{{{SEL}}})",
                 "planned slots (max-num-seqs x engines x replicas)")],
               unit="short", grid=(8, 10, 8, 8)),
        _panel(7, "Preemptions",
               "Requests vLLM preempted per second because the KV cache ran out (recomputed later).",
               [(f"sum(rate(vllm:num_preemptions_total{{{SEL}}}[{RATE}]))", "preemptions/s")],
               unit="ops", grid=(16, 10, 8, 8)),
        _panel(8, "KV-cache capacity per replica",
               "Tokens the KV cache of one replica holds: kvright's prediction and what vLLM reported "
               "(num_gpu_blocks x block_size).",
               [(f"max(kvright_predicted_kv_cache_tokens{{{SEL}}})", "predicted"),
                (f"max(kvright_observed_kv_cache_tokens{{{SEL}}})", "observed")],
               unit="short", grid=(0, 18, 8, 8)),
        _row(9, "Plan: GPUs, replicas, memory", 26),
        _panel(10, "GPUs and replicas",
               "The plan: tensor-parallel degree, replicas and GPUs in all; the replicas kvright recommends "
               "(what KEDA or an HPA owning replicas follows); and the vLLM pods reporting metrics.",
               [(f"max(kvright_plan_gpus{{{SEL}}})", "GPUs"),
                (f"max(kvright_plan_replicas{{{SEL}}})", "replicas planned"),
                (f"max(kvright_recommended_replicas{{{SEL}}})", "replicas recommended"),
                (f"max(kvright_plan_tensor_parallel_size{{{SEL}}})", "tensor parallel"),
                (f"count(vllm:num_requests_running{{{SEL}}})", "vLLM pods reporting")],
               unit="short", grid=(8, 18, 8, 8)),
        _panel(11, "Memory per GPU: weights vs KV cache",
               "Predicted bytes on each GPU, stacked: model weights and the KV cache.",
               [(f"max(kvright_predicted_weight_bytes_per_gpu{{{SEL}}})", "weights"),
                (f"max(kvright_predicted_kv_cache_bytes_per_gpu{{{SEL}}})", "KV cache")],
               unit="bytes", grid=(16, 18, 8, 8), stacked=True),
        _panel(12, "Calibration",
               "Observed/predicted TPOT factor kvright applies to its roofline prediction (1 = the model "
               "matched).",
               [(f"max(kvright_calibration_factor{{{SEL}}})", "calibration factor")],
               unit="none", grid=(0, 27, 8, 8)),
        _panel(13, "Plan feasible",
               "1 when kvright found a plan that meets the SLO within the GPU limits.",
               [(f"max(kvright_plan_feasible{{{SEL}}})", "feasible")],
               unit="bool_yes_no", grid=(8, 27, 4, 8), kind="stat"),
        _panel(14, "KV-cache dtype",
               "The planned KV-cache dtype, GPU product and model.",
               [(f"max by (kv_cache_dtype, gpu, model) (kvright_plan_info{{{SEL}}})",
                 "{{kv_cache_dtype}} on {{gpu}}")],
               unit="none", grid=(12, 27, 4, 8), kind="stat"),
        _panel(18, "Prefix cache: hit rate vs plan",
               "Share of prompt tokens vLLM's prefix cache served (vllm:prefix_cache_hits_total over "
               "vllm:prefix_cache_queries_total) against the share kvright planned from "
               "workload.sharedPrefixTokens.",
               [(f"sum(rate(vllm:prefix_cache_hits_total{{{SEL}}}[{RATE}])) / "
                 f"sum(rate(vllm:prefix_cache_queries_total{{{SEL}}}[{RATE}]))", "observed"),
                (f"max(kvright_planned_prefix_cache_hit_ratio{{{SEL}}})", "planned")],
               unit="percentunit", grid=(16, 27, 8, 8)),
        _row(15, "Operator", 35),
        _panel(16, "Reconciles",
               "LLMDeployment reconciles per second by result, all kvright operators.",
               [(f"sum by (result) (rate(kvright_reconcile_total[{RATE}]))", "{{result}}")],
               unit="ops", grid=(0, 36, 12, 8)),
        _panel(17, "Reconcile duration (p90)",
               "90th percentile of the time one reconcile takes.",
               [("histogram_quantile(0.9, sum by (le) "
                 f"(rate(kvright_reconcile_duration_seconds_bucket[{RATE}])))", "p90")],
               unit="s", grid=(12, 36, 12, 8)),
    ]
    return {
        "uid": "kvright-capacity",
        "title": "kvright / capacity overview",
        "description": "Per LLMDeployment: latency against SLO and prediction, KV cache, queue, GPUs and "
                       "memory.",
        "tags": ["kvright", "vllm", "capacity"],
        "timezone": "browser",
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "templating": {"list": _variables()},
        "annotations": {"list": []},
        "panels": panels,
    }


DASHBOARDS: Final = {"kvright-capacity": capacity_overview}
"""Every shipped dashboard by uid (also its file name)."""


def render(dashboard: dict[str, Any]) -> str:
    """The JSON text as shipped: stable key order, trailing newline."""
    return json.dumps(dashboard, indent=2, sort_keys=True) + "\n"


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title / refId, expr) of every query of every panel."""
    return [
        (f"{panel['title']} / {target['refId']}", target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def write(directory: Path) -> list[Path]:
    """Write every dashboard to ``directory/<uid>.json``; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for uid, build in DASHBOARDS.items():
        path = directory / f"{uid}.json"
        path.write_text(render(build()), encoding="utf-8")
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m kvright.dashboards DIRECTORY (writes <uid>.json for each dashboard)",
              file=sys.stderr)
        return 2
    for path in write(Path(args[0])):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
