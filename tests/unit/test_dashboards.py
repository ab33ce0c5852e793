"""kvright.dashboards: the capacity overview's structure, and every panel query parsed by real promtool.

Structure checks are pure. The PromQL check writes each query (Grafana variables substituted) as a recording
rule and runs `promtool check rules`, so a query Prometheus cannot parse fails here. Whether each query
returns data is checked against a real Prometheus in tests/e2e/test_dashboards_data.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvright.dashboards import DASHBOARDS, capacity_overview, main, panel_queries, render

BOARD = capacity_overview()
QUERIES = panel_queries(BOARD)
RENAMED = {  # current vLLM name -> the older name a dashboard must also query
    "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
    "vllm:request_time_per_output_token_seconds": "vllm:time_per_output_token_seconds",
}


def substitute(expr: str, *, namespace: str = "ml", llmdeployment: str = "demo") -> str:
    """Grafana's variables as Grafana would fill them."""
    return (expr.replace("$namespace", namespace).replace("$llmdeployment", llmdeployment)
            .replace("$__rate_interval", "1m"))


def test_variables_select_namespace_then_llmdeployment() -> None:
    variables = {v["name"]: v for v in BOARD["templating"]["list"]}
    assert set(variables) == {"datasource", "namespace", "llmdeployment"}
    assert "$namespace" in variables["llmdeployment"]["definition"]


@pytest.mark.parametrize(
    "topic",
    ["TPOT", "TTFT", "KV-cache usage", "running and waiting", "Preemptions", "GPUs and replicas",
     "Memory per GPU: weights vs KV cache", "Calibration"],
    ids=str,
)
def test_capacity_overview_has_a_panel_for(topic: str) -> None:
    assert any(topic in p["title"] for p in BOARD["panels"]), topic


def test_tpot_panel_shows_observed_slo_and_predicted() -> None:
    tpot = next(p for p in BOARD["panels"] if p["title"].startswith("TPOT"))
    assert [t["legendFormat"] for t in tpot["targets"]] == ["observed", "SLO target", "predicted"]


@pytest.mark.parametrize(("current", "legacy"), sorted(RENAMED.items()), ids=lambda v: str(v))
def test_every_query_of_a_renamed_metric_also_asks_for_the_legacy_name(current: str, legacy: str) -> None:
    using = [(title, expr) for title, expr in QUERIES if current in expr]
    assert using, f"no panel queries {current}"
    assert [title for title, expr in using if legacy not in expr] == []


def test_per_llmdeployment_panels_filter_by_both_variables() -> None:
    per_deployment = [(t, e) for t, e in QUERIES if not t.startswith(("Reconcile", "Reconciles"))]
    assert [t for t, e in per_deployment if "$namespace" not in e or "$llmdeployment" not in e] == []


def test_panel_ids_are_unique_and_panels_do_not_overlap() -> None:
    ids = [p["id"] for p in BOARD["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for p in BOARD["panels"]:
        g = p["gridPos"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, p["title"]
        assert g["x"] + g["w"] <= 24, p["title"]
        cells |= mine


def test_render_is_stable_json_and_main_writes_each_dashboard(tmp_path: Path) -> None:
    assert render(BOARD) == render(capacity_overview())
    assert main([str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{uid}.json" for uid in DASHBOARDS)
    assert main([]) == 2


def promtool() -> str:
    tools_dir = Path(os.environ.get("KVRIGHT_TOOLS_DIR", Path.home() / ".cache" / "kvright" / "tools"))
    for candidate in (tools_dir / "promtool", tools_dir / "bin" / "promtool", shutil.which("promtool")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    pytest.fail("promtool not found: install Debian's prometheus package (apt-get install prometheus)")


@pytest.mark.prometheus
def test_every_panel_query_parses_as_promql(tmp_path: Path) -> None:
    rules: list[dict[str, Any]] = [
        {"record": f"dashboard:query_{i}", "expr": substitute(expr)} for i, (_, expr) in enumerate(QUERIES)
    ]
    variables = [v["definition"] for v in BOARD["templating"]["list"] if v["type"] == "query"]
    assert all(v.startswith("label_values(") for v in variables)
    document = {"groups": [{"name": "dashboard", "rules": rules}]}
    (tmp_path / "queries.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    done = subprocess.run([promtool(), "check", "rules", "queries.yaml"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout + done.stderr
