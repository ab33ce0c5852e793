"""The chart's PrometheusRule: the alerts kvright ships, tested as shipped.

Real tools, nothing faked: the rules are rendered from charts/kvright by the pinned helm (`helm template`),
`promtool check rules` validates them (PromQL and annotation templates), and `promtool test rules` runs
tests/promtool/capacity_test.yaml (each alert firing and not firing) against them. Only the `description`
annotation is stripped before the unit tests, because it quotes the alert's value. A missing helm or promtool
is a failure with the reason, never a skip.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.helm, pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kvright"
PROMTOOL_TESTS = ROOT / "tests" / "promtool"
ALERTS = ("TPOTSLOBurn", "KVCacheSaturated", "Preemptions", "RequestsWaiting", "PlanInfeasible",
          "TPOTPredictionDrift", "KVCapacityMismatch", "PrefixCacheBelowPlan", "OperatorDown",
          "ReconcileErrors")


def tool(name: str, hint: str) -> str:
    """A binary from `make tools` ($KVRIGHT_TOOLS_DIR, default ~/.cache/kvright/tools), else from PATH."""
    tools_dir = Path(os.environ.get("KVRIGHT_TOOLS_DIR", Path.home() / ".cache" / "kvright" / "tools"))
    for candidate in (tools_dir / name, tools_dir / "bin" / name):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found in {tools_dir} or on PATH: {hint}")
    return found


def helm() -> str:
    return tool("helm", "run `make tools` (deploy/cluster.sh build helm)")


def promtool() -> str:
    return tool("promtool", "install Debian's prometheus package (apt-get install prometheus)")


def render(*args: str) -> list[dict[str, Any]]:
    """`helm template` the chart as release "kvright" in namespace "monitoring"; the parsed documents."""
    cmd = [helm(), "template", "kvright", str(CHART), "--namespace", "monitoring", "--kube-version", "1.37.2",
           "--set", "prometheusRule.enabled=true", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"helm template failed: {done.stderr}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def groups(*args: str) -> list[dict[str, Any]]:
    rules = [d for d in render(*args) if d["kind"] == "PrometheusRule"]
    assert len(rules) == 1
    result: list[dict[str, Any]] = rules[0]["spec"]["groups"]
    return result


def alert_rules(*args: str) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in groups(*args) for r in g["rules"]}


@pytest.fixture(scope="module")
def shipped() -> list[dict[str, Any]]:
    return groups()


def run_promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          check=False)


def test_promtool_accepts_the_shipped_rules(shipped: list[dict[str, Any]], tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": shipped}), encoding="utf-8")
    done = run_promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in done.stdout + done.stderr


def test_promtool_unit_tests_pass_against_the_shipped_rules(
    shipped: list[dict[str, Any]], tmp_path: Path
) -> None:
    shipped = copy.deepcopy(shipped)
    for group in shipped:
        for rule in group["rules"]:
            rule["annotations"].pop("description")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": shipped}), encoding="utf-8")
    shutil.copy(PROMTOOL_TESTS / "capacity_test.yaml", tmp_path / "capacity_test.yaml")
    done = run_promtool("test", "rules", "capacity_test.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_every_alert_is_unit_tested_firing_and_not_firing() -> None:
    suite = yaml.safe_load((PROMTOOL_TESTS / "capacity_test.yaml").read_text(encoding="utf-8"))
    firing: set[str] = set()
    silent: set[str] = set()
    for case in suite["tests"]:
        for check in case["alert_rule_test"]:
            (firing if check["exp_alerts"] else silent).add(check["alertname"])
    names = {f"KVRight{a}" for a in ALERTS}
    assert (names - firing, names - silent) == (set(), set())


def test_shipped_alerts_are_exactly_the_documented_ones(shipped: list[dict[str, Any]]) -> None:
    assert sorted(r["alert"] for g in shipped for r in g["rules"]) == sorted(f"KVRight{a}" for a in ALERTS)


@pytest.mark.parametrize("name", ALERTS, ids=str)
def test_alert_has_summary_description_and_a_runbook_in_the_repo(name: str) -> None:
    rule = alert_rules()[f"KVRight{name}"]
    annotations = rule["annotations"]
    assert annotations["summary"] and annotations["description"]
    assert annotations["runbook_url"].endswith(f"/docs/runbooks/KVRight{name}.md")
    assert (ROOT / "docs" / "runbooks" / f"KVRight{name}.md").is_file()


@pytest.mark.parametrize("name", ALERTS, ids=str)
def test_each_alert_switches_off_alone(name: str) -> None:
    remaining = alert_rules("--set", f"prometheusRule.alerts.{name}.enabled=false")
    assert sorted(remaining) == sorted(f"KVRight{a}" for a in ALERTS if a != name)


@pytest.mark.parametrize("name", ALERTS, ids=str)
def test_for_severity_and_extra_labels_are_overridable(name: str) -> None:
    rule = alert_rules(
        "--set", f"prometheusRule.alerts.{name}.for=42m",
        "--set", f"prometheusRule.alerts.{name}.severity=info",
        "--set", "prometheusRule.additionalAlertLabels.team=ml-platform",
        "--set", "prometheusRule.runbookBaseURL=https://wiki.example/runbooks/",
    )[f"KVRight{name}"]
    assert (rule["for"], rule["labels"]) == ("42m", {"severity": "info", "team": "ml-platform"})
    assert rule["annotations"]["runbook_url"] == f"https://wiki.example/runbooks/KVRight{name}.md"


@pytest.mark.parametrize(
    ("alert", "current", "legacy"),
    [("TPOTSLOBurn", "vllm:request_time_per_output_token_seconds_bucket",
      "vllm:time_per_output_token_seconds_bucket"),
     ("KVCacheSaturated", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
     ("TPOTPredictionDrift", "vllm:request_time_per_output_token_seconds_sum",
      "vllm:time_per_output_token_seconds_sum")],
    ids=["tpot-burn", "kv-usage", "tpot-drift"],
)
def test_renamed_vllm_metrics_are_queried_under_both_names(alert: str, current: str, legacy: str) -> None:
    expr = alert_rules()[f"KVRight{alert}"]["expr"]
    assert current in expr and legacy in expr and " or" in expr


def test_prediction_drift_divides_the_observed_mean_by_the_predicted_mean() -> None:
    """vLLM's _sum/_count is a mean TPOT: the percentile's prediction would read a wide tail as drift."""
    expr = alert_rules()["KVRightTPOTPredictionDrift"]["expr"]
    assert "kvright_predicted_tpot_mean_seconds" in expr
    assert "kvright_predicted_tpot_seconds" not in expr


def test_operator_alerts_select_the_chart_job_or_the_override() -> None:
    assert 'job="kvright-metrics"' in alert_rules()["KVRightOperatorDown"]["expr"]
    overridden = alert_rules("--set", "prometheusRule.operatorJob=my-kvright")
    assert 'job="my-kvright"' in overridden["KVRightReconcileErrors"]["expr"]


def test_burn_rate_that_can_never_fire_is_refused_with_the_fix() -> None:
    cmd = [helm(), "template", "kvright", str(CHART), "--kube-version", "1.37.2",
           "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.alerts.TPOTSLOBurn.burnRate=2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert "burnRate=2 cannot fire for percentile 50" in done.stderr


def test_rules_off_by_default() -> None:
    cmd = [helm(), "template", "kvright", str(CHART), "--kube-version", "1.37.2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "PrometheusRule"] == []
