"""kvright.feedback.decide: the loop's seam between an Observation, the plan in status and planning.

Nothing is faked on the decision side: the real planner (kvright.reconcile.desire) produces the first
plan and then re-plans with the overrides the loop returns, so these tests hold both sides of the
seam. The Observation is built by hand (the Prometheus side is tests/unit/test_observe.py).
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest

import capacity
from kvright.feedback import FeedbackFacts, _memory, _rolling_out, decide
from kvright.inventory import GPUNode, summarize
from kvright.observe import Observation
from kvright.reconcile import Facts, desire
from tests.builders import llmd, reconcile_facts

H100 = "NVIDIA-H100-80GB-HBM3"
NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
CLUSTER = summarize(
    GPUNode(name=f"n{i}", product=H100, allocatable_gpus=8, memory_mib=None) for i in range(2)
)
BASE = (
    llmd("chat", "ml")
    .model("llama-3.1-8b")
    .gpu(H100)
    .context(4096, 1000, 200)
    .concurrency(64)
    .tpot_ms(50)
    .replicas(min=1, max=6)
)
#: One replica at most: the only lever left is max-num-seqs, a move that restarts the pods.
ONE_REPLICA = BASE.replicas(min=1, max=1)


def facts(builder: Any = BASE, status: dict[str, Any] | None = None) -> Facts:
    return reconcile_facts(builder.spec(), generation=2, current_status=status or {}, inventory=CLUSTER)


def planned_status(builder: Any = BASE) -> dict[str, Any]:
    """The status a first reconcile writes: plan and prediction from the real planner."""
    d = desire(facts(builder))
    assert d.plan_feasible.status == "True", d.plan_feasible.message
    return {"plan": d.fields["plan"], "prediction": d.fields["prediction"]}


def obs(**kw: Any) -> Observation:
    values: dict[str, Any] = {
        "namespace": "ml",
        "name": "chat",
        "sample_time": NOW.timestamp(),
        "window_seconds": 30,
        "percentile": 90,
        "available": True,
        "reason": "MetricsFound",
        "message": "ok",
        "tpot_seconds": 0.090,
        "tpot_mean_seconds": 0.080,
        "sample_count": 400,
        "running": 64.0,
        "waiting": 10.0,
        "mean_batch": 60.0,
        "mean_context_tokens": 1100.0,
        "kv_cache_usage": 0.4,
        "preemptions_per_second": 0.0,
    }
    values.update(kw)
    return Observation(**values)


def conditions(result: Any) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in result.conditions}


def test_adjust_lowers_the_batch_and_the_next_plan_obeys() -> None:
    builder = ONE_REPLICA.feedback("Adjust", 30, 30)
    status = planned_status(builder)
    seqs, replicas = status["plan"]["maxNumSeqs"], status["plan"]["replicas"]
    result = decide(
        facts(builder, status), FeedbackFacts(observation=obs(running=float(seqs * replicas))), now=NOW
    )
    d = result.decision
    assert d is not None and d.changes_plan, d
    assert conditions(result) == {
        "MetricsAvailable": ("True", "MetricsFound"),
        "SLOMet": ("False", "TPOTAboveSLO"),
    }
    assert d.max_num_seqs < seqs
    assert result.overrides.calibration.scale > 1.0
    [event] = result.events
    assert (event.type, event.reason) == ("Normal", "TPOTAboveSLO")
    assert "p90 TPOT 90.0 ms vs SLO 50.0 ms" in event.message
    assert result.calibration is not None
    assert result.calibration["lastChangeTime"] == "2026-01-01T12:00:00Z"
    assert result.calibration["lastDecision"]["applied"] is True
    assert result.observed is not None and result.observed["tpotMilliseconds"] == 90.0
    # The other side of the seam: planning with the overrides runs what the loop decided, or less where
    # the calibrated planner already chooses a smaller batch than the loop's bounded step.
    again = desire(replace(facts(builder, status), overrides=result.overrides))
    assert again.plan_feasible.status == "True", again.plan_feasible.message
    assert again.fields["plan"]["maxNumSeqs"] <= d.max_num_seqs
    assert again.fields["plan"]["replicas"] == d.replicas == result.overrides.replicas
    assert again.fields["prediction"]["calibration"] == result.overrides.calibration.scale


def test_memory_in_status_holds_the_cooldown_and_the_pins() -> None:
    builder = ONE_REPLICA.feedback("Adjust", 30, 600)
    status = planned_status(builder)
    first = decide(facts(builder, status), FeedbackFacts(observation=obs()), now=NOW)
    assert first.calibration is not None
    later = {**status, "calibration": first.calibration}
    second = decide(
        facts(builder, later), FeedbackFacts(observation=obs()), now=NOW + datetime.timedelta(seconds=60)
    )
    assert second.decision is not None and second.decision.reason == "Cooldown"
    assert second.overrides == replace(first.overrides, calibration=second.overrides.calibration)
    assert second.events == ()


def test_the_demand_trend_lives_in_status() -> None:
    """Every period with metrics leaves its demand in status.calibration (``demand``, ``demandTime``), so
    the next period, after an operator restart too, measures the trend from it; Observe mode keeps it
    out (nothing it decides adds replicas)."""
    builder = BASE.feedback("Adjust", 30, 600)
    status = planned_status(builder)
    first = decide(facts(builder, status), FeedbackFacts(observation=obs(mean_batch=60.0)), now=NOW)
    assert first.calibration is not None
    assert first.calibration["demand"] > 0 and first.calibration["demandTime"] == "2026-01-01T12:00:00Z"
    history, _ = _memory({"calibration": first.calibration})
    assert history.demand == first.calibration["demand"]
    assert history.demand_time == NOW.timestamp()
    garbled, _ = _memory({"calibration": {**first.calibration, "demand": "many", "demandTime": 5}})
    assert (garbled.demand, garbled.demand_time) == (None, None)
    observed = decide(
        facts(BASE.feedback("Observe", 30, 600), status), FeedbackFacts(observation=obs()), now=NOW
    )
    assert observed.calibration is not None and "demand" not in observed.calibration


def test_the_windows_the_shape_is_learned_from_live_in_status() -> None:
    """status.calibration keeps the windows (fixed, per-batch, observed seconds) and the shape learned from
    them, so an operator restart or another replica of kvright goes on where the last left off; a point a
    person edited into nonsense is dropped, not trusted."""
    builder = ONE_REPLICA.feedback("Observe", 30, 600)
    status = planned_status(builder)
    first = decide(facts(builder, status), FeedbackFacts(observation=obs(mean_batch=60.0)), now=NOW)
    assert first.calibration is not None
    assert len(first.calibration["points"]) == 1 and first.calibration["batchScale"] > 0
    later = {**status, "calibration": first.calibration}
    second = decide(
        facts(builder, later),
        FeedbackFacts(observation=obs(mean_batch=12.0, tpot_seconds=0.040, tpot_mean_seconds=0.030)),
        now=NOW + datetime.timedelta(seconds=60),
    )
    assert second.calibration is not None and second.decision is not None
    assert len(second.calibration["points"]) == 2
    assert second.calibration["points"][0] == first.calibration["points"][0]
    # Two windows at batches 60 and 12, far enough apart: the shape is fitted from them.
    assert second.calibration["batchScale"] != first.calibration["batchScale"]
    assert "per-batch x" in second.decision.message
    edited = {
        **second.calibration,
        "points": [[0.01, "x", 0.02], [-1.0, 0.0, 0.0], "junk", *second.calibration["points"]],
    }
    third = decide(
        facts(builder, {**status, "calibration": edited}),
        FeedbackFacts(observation=obs(mean_batch=12.0, tpot_seconds=0.040, tpot_mean_seconds=0.030)),
        now=NOW + datetime.timedelta(seconds=120),
    )
    assert third.calibration is not None
    assert len(third.calibration["points"]) == 3


def test_a_replicas_only_move_keeps_the_batch_and_the_committed_calibration_so_no_pod_restarts() -> None:
    """When the GPU budget holds the demand at the target batch, the loop adds replicas and the next plan
    runs the same max-num-seqs: the new calibration is not committed, or the planner would re-size the
    batch and roll every pod after all."""
    builder = BASE.feedback("Adjust", 30, 600)
    status = planned_status(builder)
    seqs, replicas = status["plan"]["maxNumSeqs"], status["plan"]["replicas"]
    first = decide(facts(builder, status), FeedbackFacts(observation=obs(running=64.0, waiting=0.0)), now=NOW)
    d = first.decision
    assert d is not None and d.action == "AddReplicas", d
    assert d.max_num_seqs == seqs and d.replicas > replicas
    assert "adding replicas restarts no pod" in d.message
    assert first.overrides.calibration == capacity.UNCALIBRATED
    again = desire(replace(facts(builder, status), overrides=first.overrides))
    assert again.fields["plan"]["maxNumSeqs"] == seqs
    assert again.fields["plan"]["replicas"] == d.replicas
    # Every flag the pods run with is the same (the batched-token budget included: with max-num-seqs
    # pinned every budget serves as many sequences, and re-choosing it flipped make demo's pods).
    assert again.fields["plan"]["vllmArgs"] == status["plan"]["vllmArgs"]
    # 60 s later (inside the 600 s cooldown, but after a fresh 30 s window) a still-short plan adds more.
    later = {**again.fields, "calibration": first.calibration}
    second = decide(
        facts(builder, later),
        FeedbackFacts(observation=obs(running=80.0, waiting=0.0, mean_batch=48.0)),
        now=NOW + datetime.timedelta(seconds=60),
    )
    assert second.decision is not None and second.decision.action == "AddReplicas", second.decision
    assert second.decision.max_num_seqs == seqs


def test_observe_mode_reports_but_does_not_pin() -> None:
    builder = BASE.feedback("Observe", 30, 30)
    status = planned_status(builder)
    result = decide(facts(builder, status), FeedbackFacts(observation=obs()), now=NOW)
    assert result.overrides.max_num_seqs is None and result.overrides.replicas is None
    assert result.overrides.calibration == capacity.UNCALIBRATED
    assert result.calibration is not None
    assert result.calibration["lastDecision"]["applied"] is False
    assert result.calibration["factor"] > 1.0
    assert result.events == ()
    assert conditions(result)["SLOMet"] == ("False", "TPOTAboveSLO")


@pytest.mark.parametrize(
    ("builder", "feedback", "expected"),
    [
        (BASE.feedback("Off"), FeedbackFacts(observation=None), ("Unknown", "FeedbackOff")),
        (
            BASE.feedback("Adjust"),
            FeedbackFacts(observation=None, prometheus_configured=False),
            ("Unknown", "PrometheusNotConfigured"),
        ),
    ],
    ids=["mode-off", "no-prometheus-url"],
)
def test_feedback_off_says_why_and_pins_nothing(builder: Any, feedback: FeedbackFacts, expected: Any) -> None:
    result = decide(facts(builder, planned_status(builder)), feedback, now=NOW)
    assert conditions(result)["MetricsAvailable"] == expected
    assert conditions(result)["SLOMet"] == ("Unknown", "NotMeasured")
    assert result.overrides.max_num_seqs is None and result.overrides.calibration == capacity.UNCALIBRATED
    assert result.observed is None


def test_metrics_unavailable_warns_once_and_changes_nothing() -> None:
    builder = BASE.feedback("Adjust", 30, 30)
    status = planned_status(builder)
    down = obs(available=False, reason="PrometheusUnreachable", message="http://p:9090: ConnectionError",
               tpot_seconds=None, sample_count=0)  # fmt: skip
    first = decide(facts(builder, status), FeedbackFacts(observation=down), now=NOW)
    assert conditions(first)["MetricsAvailable"] == ("False", "PrometheusUnreachable")
    assert [(e.type, e.reason) for e in first.events] == [("Warning", "PrometheusUnreachable")]
    assert first.decision is not None and first.decision.changes_plan is False
    status_after = {**status, "conditions": [{"type": "MetricsAvailable", "status": "False"}]}
    second = decide(facts(builder, status_after), FeedbackFacts(observation=down), now=NOW)
    assert second.events == ()


def test_kv_capacity_gap_is_shown_and_warned_once() -> None:
    builder = BASE.feedback("Observe", 30, 30)
    status = planned_status(builder)
    predicted = status["prediction"]["kvCacheTokensPerReplica"]
    small = obs(
        kv_cache_tokens=predicted // 2, num_gpu_blocks=predicted // 32, block_size=16, tpot_seconds=0.040
    )
    first = decide(facts(builder, status), FeedbackFacts(observation=small), now=NOW)
    assert first.observed is not None
    assert first.observed["kvCapacityGapPercent"] == pytest.approx(-50.0, abs=0.1)
    assert [e.reason for e in first.events] == ["KVCapacityMismatch"]
    again = decide(
        facts(builder, {**status, "observed": first.observed}), FeedbackFacts(observation=small), now=NOW
    )
    assert again.events == ()


def test_an_hpa_owns_replicas_so_kvright_only_recommends() -> None:
    builder = BASE.feedback("Adjust", 30, 30)
    status = planned_status(builder)
    seqs, replicas = status["plan"]["maxNumSeqs"], status["plan"]["replicas"]
    result = decide(
        facts(builder, status),
        FeedbackFacts(observation=obs(running=float(seqs * replicas), waiting=200.0), hpa="chat-hpa"),
        now=NOW,
    )
    assert result.calibration is not None
    assert result.calibration["replicasOwnedBy"] == "HorizontalPodAutoscaler/chat-hpa"
    assert result.calibration["recommendedReplicas"] > replicas
    assert result.overrides.replicas in (None, replicas)


def test_rollout_in_progress_holds_the_decision() -> None:
    builder = BASE.feedback("Adjust", 30, 30)
    status = planned_status(builder)
    result = decide(
        facts(builder, status), FeedbackFacts(observation=obs(), rollout_in_progress=True), now=NOW
    )
    assert result.decision is not None and result.decision.reason == "RolloutInProgress"
    assert result.events == ()


def test_no_plan_yet_still_reports_metrics() -> None:
    builder = BASE.feedback("Adjust", 30, 30)
    result = decide(facts(builder, {}), FeedbackFacts(observation=obs()), now=NOW)
    assert conditions(result)["MetricsAvailable"] == ("True", "MetricsFound")
    assert result.decision is None
    assert result.calibration is not None and result.calibration["note"] == "NoPlanYet"


def test_keys_no_longer_reported_are_nulled_for_the_merge_patch() -> None:
    builder = BASE.feedback("Adjust", 30, 30)
    status = planned_status(builder)
    first = decide(facts(builder, status), FeedbackFacts(observation=obs()), now=NOW)
    written = first.into_status(dict(status), generation=2, now=NOW)
    assert written["observed"]["tpotMilliseconds"] == 90.0
    down = obs(
        available=False, reason="PrometheusUnreachable", message="down", tpot_seconds=None, sample_count=0
    )
    second = decide(facts(builder, written), FeedbackFacts(observation=down), now=NOW)
    again = second.into_status(dict(status), generation=2, now=NOW)
    assert again["observed"]["tpotMilliseconds"] is None  # a merge patch deletes it
    assert "sampleTime" in again["observed"] and again["observed"]["sampleTime"] is not None


def test_the_planner_sees_the_factor_committed_with_the_last_move_not_every_new_estimate() -> None:
    """Otherwise the planner would re-size, and roll every pod, on each reconcile as the EWMA moves."""
    builder = ONE_REPLICA.feedback("Adjust", 30, 600)
    status = planned_status(builder)
    first = decide(facts(builder, status), FeedbackFacts(observation=obs()), now=NOW)
    assert first.decision is not None and first.decision.changes_plan
    committed = first.overrides.calibration
    later = {**status, "calibration": first.calibration}
    slower = obs(tpot_seconds=0.150, tpot_mean_seconds=0.140)
    second = decide(
        facts(builder, later), FeedbackFacts(observation=slower), now=NOW + datetime.timedelta(seconds=60)
    )
    assert second.decision is not None and second.decision.reason == "Cooldown"
    assert second.calibration is not None and second.calibration["factor"] > committed.scale
    assert second.overrides.calibration == committed


def test_one_reconcile_parses_the_spec_once_and_plans_at_most_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gather parses, the feedback seam and planning reuse it; a max-num-seqs pin costs one extra plan."""
    import kvright.reconcile as reconcile_module

    parses: list[int] = []
    plans: list[int] = []
    real_parse, real_plan = reconcile_module.parse_spec, capacity.plan

    def counting_parse(spec: Any) -> Any:
        parses.append(1)
        return real_parse(spec)

    def counting_plan(*args: Any, **kw: Any) -> Any:
        plans.append(1)
        return real_plan(*args, **kw)

    builder = BASE.feedback("Adjust", 30, 30)
    status = planned_status(builder)
    seqs, replicas = status["plan"]["maxNumSeqs"], status["plan"]["replicas"]
    monkeypatch.setattr(reconcile_module, "parse_spec", counting_parse)
    monkeypatch.setattr(capacity, "plan", counting_plan)
    f = facts(builder, status)  # the operator's gather: the one parse
    result = decide(f, FeedbackFacts(observation=obs(running=float(seqs * replicas))), now=NOW)
    assert result.decision is not None and result.decision.changes_plan  # the move pinned max-num-seqs
    desire(replace(f, overrides=result.overrides))
    assert len(parses) == 1
    assert len(plans) == 2  # the pin checked against one free plan, then the plan itself


def test_a_prefix_cache_far_below_plan_warns_once_and_the_next_move_plans_with_what_is_served() -> None:
    """The spec says 600 of 1000 prompt tokens are shared (59.2% in whole blocks); vLLM serves 20% from
    its prefix cache. A warning names both, once; the move the loop then applies commits the shared
    prefix actually served (200 tokens), and planning with it holds fewer sequences than the spec's."""
    builder = ONE_REPLICA.shared_prefix(600).feedback("Adjust", 30, 30)
    status = planned_status(builder)
    assert status["prediction"]["prefixCacheHitPercent"] == 59.2
    result = decide(
        facts(builder, status), FeedbackFacts(observation=obs(prefix_cache_hit_rate=0.2)), now=NOW
    )
    warnings = [e for e in result.events if e.reason == "PrefixCacheBelowPlan"]
    assert len(warnings) == 1 and "served 20%" in warnings[0].message and "assumed 59%" in warnings[0].message
    assert result.observed is not None and result.observed["prefixCacheHitPercent"] == 20.0
    assert result.decision is not None and result.decision.changes_plan, result.decision
    assert result.calibration is not None and result.calibration["sharedPrefixTokens"] == 200
    assert result.overrides.shared_prefix_tokens == 200
    planned = desire(replace(facts(builder, status), overrides=result.overrides))
    assert planned.plan_feasible.status == "True", planned.plan_feasible.message
    full = desire(
        replace(facts(builder, status), overrides=replace(result.overrides, shared_prefix_tokens=None))
    )
    assert planned.fields["prediction"]["ttftMilliseconds"] > full.fields["prediction"]["ttftMilliseconds"]
    # Still below on the next period: no second warning.
    later = {**status, "observed": result.observed, "calibration": result.calibration}
    again = decide(facts(builder, later), FeedbackFacts(observation=obs(prefix_cache_hit_rate=0.2)), now=NOW)
    assert not [e for e in again.events if e.reason == "PrefixCacheBelowPlan"]


def test_a_prefix_cache_near_plan_or_without_a_planned_prefix_says_nothing() -> None:
    shared = ONE_REPLICA.shared_prefix(600).feedback("Observe", 30, 30)
    half = FeedbackFacts(observation=obs(prefix_cache_hit_rate=0.5))
    near = decide(facts(shared, planned_status(shared)), half, now=NOW)
    none = decide(facts(BASE.feedback("Observe"), planned_status(BASE)),
                  FeedbackFacts(observation=obs(prefix_cache_hit_rate=0.0)), now=NOW)  # fmt: skip
    assert not [e for r in (near, none) for e in r.events if e.reason == "PrefixCacheBelowPlan"]


class OneDeployment:
    """Answers the feedback loop's Deployment read with one Deployment dict (or None: 404)."""

    def __init__(self, live: dict[str, Any] | None) -> None:
        self.live = live

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.live


def deployment(want: int, *, total: int, updated: int, ready: int, observed: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"generation": 2},
        "spec": {"replicas": want},
        "status": {
            "observedGeneration": observed,
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": ready,
        },
    }


@pytest.mark.parametrize(
    ("live", "expected"),
    [
        (None, (False, False)),
        (deployment(2, total=2, updated=2, ready=2), (False, False)),
        # 2 -> 5 replicas of the same template: three pods starting, none replaced.
        (deployment(5, total=5, updated=5, ready=2), (True, True)),
        # A new template rolling: old pods are being replaced (maxSurge 1: one extra pod).
        (deployment(2, total=3, updated=1, ready=2), (True, False)),
        (deployment(2, total=2, updated=2, ready=2, observed=1), (True, False)),  # not seen yet
    ],
    ids=["none", "settled", "adding-replicas", "replacing-pods", "edit-not-observed"],
)
def test_a_rollout_that_only_adds_replicas_is_told_apart_from_one_that_replaces_pods(
    live: dict[str, Any] | None, expected: tuple[bool, bool]
) -> None:
    assert _rolling_out(OneDeployment(live), "ns", "chat") == expected  # type: ignore[arg-type]


def test_the_law_is_told_a_data_parallel_replicas_engines_and_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """status.plan's layout reaches the law: a replica of two data-parallel engines (expert parallel)
    has twice the seats and takes twice the GPUs, and the budget is the cluster's 16 GPUs."""
    import kvright.feedback as feedback

    builder = BASE.model("qwen3-30b-a3b").feedback("Adjust", 30, 30)
    status = planned_status(builder)
    tp = status["plan"]["tensorParallelSize"]
    status["plan"] |= {"dataParallelSize": 2, "expertParallel": True, "gpusPerReplica": 2 * tp}
    seen: dict[str, Any] = {}
    law = feedback.control_decide

    def told(**kw: Any) -> Any:
        seen.update(kw)
        return law(**kw)

    monkeypatch.setattr(feedback, "control_decide", told)
    decide(facts(builder, status), FeedbackFacts(observation=obs()), now=NOW)
    current, bounds = seen["current"], seen["bounds"]
    assert (current.data_parallel_size, current.gpus_per_replica) == (2, 2 * tp)
    assert bounds.max_gpus == 16
    assert bounds.replica_ceiling(current.gpus_per_replica) == min(6, 16 // (2 * tp))
