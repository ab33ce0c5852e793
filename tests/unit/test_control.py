"""kvright.control: calibration and the control law, table-driven with exact expected moves.

Nothing is faked except the TPOT model at the law's edge: instead of the serving model's curve, a linear
stand-in ``tpot(batch) = 10 ms + 0.5 ms x batch`` (mean and percentile alike) makes every expected number
checkable by hand (batch 70 -> 45 ms = 0.9 x the 50 ms SLO used below). The real curve is exercised by
tests/unit/test_serving.py, which checks that the law leaves a plan alone that behaves as predicted. The law's
table of whole periods is tests/data/control_law_cases.yaml, each case with where its numbers come from.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from capacity import UNCALIBRATED, Calibration, learn
from kvright.control import (
    MEASURED,
    PRE_MEASUREMENT,
    Action,
    Bounds,
    Current,
    Decision,
    History,
    Measured,
    Period,
    Tuning,
    cooling_down,
    decide,
    demand_rising,
    headroom,
    kv_cache_preempting,
    measure,
    metrics_unavailable,
    queue_in_deadband,
    rolling_out,
    target_batch,
    too_few_samples,
    tpot_above_slo,
    tpot_unmeasured,
    within_deadband,
)
from kvright.observe import Observation

NOW = 10_000.0
SLO = 0.050
LAW_CASES_FILE = Path(__file__).resolve().parents[1] / "data" / "control_law_cases.yaml"


def linear(batch: int) -> float:
    return 0.010 + 0.0005 * batch


class LinearModel:
    """The stand-in curve: no predicted spread, calibration applied as capacity.Calibration applies it."""

    def mean_seconds(self, batch: int) -> float:
        return linear(batch)

    def fixed_seconds(self, batch: int) -> float:
        return linear(0)

    def tpot_seconds(self, batch: int, calibration: Calibration = UNCALIBRATED) -> float:
        return calibration.tail * calibration.step_seconds(linear(batch), linear(0))

    def measured_seconds(self, batch: int, calibration: Calibration = UNCALIBRATED) -> float:
        return self.tpot_seconds(batch, calibration)


LINEAR = LinearModel()


def observation(**kw: Any) -> Observation:
    base: dict[str, Any] = {
        "namespace": "ns",
        "name": "chat",
        "sample_time": NOW,
        "window_seconds": 60,
        "percentile": 90,
        "available": True,
        "reason": "MetricsFound",
        "message": "ok",
        "tpot_seconds": 0.045,
        "sample_count": 500,
        "running": 120.0,
        "waiting": 0.0,
        "mean_batch": 60.0,
        "kv_cache_usage": 0.5,
        "preemptions_per_second": 0.0,
    }
    base.update(kw)
    return Observation(**base)


#: The plan a period starts from: 2 replicas of 64 seats at TP 1, with room for 256.
CURRENT = Current(
    tensor_parallel_size=1, max_num_seqs=64, kv_cache_dtype="auto", replicas=2, max_num_seqs_limit=256
)
BOUNDS = Bounds(min_replicas=1, max_replicas=4, max_gpus=8)
TUNING = Tuning(cooldown_seconds=300.0, sample_deadline_seconds=600.0)


def law_args(
    *, obs: dict[str, Any] | None = None, history: dict[str, Any] | History | None = None, **kw: Any
) -> dict[str, Any]:
    """One period's inputs (Period's fields: decide()'s but the model): CURRENT within BOUNDS at the 50 ms
    SLO, with TUNING, at NOW; ``obs`` on top of :func:`observation`'s reading, ``history`` a History or its
    fields, and ``kw`` in place of any of the rest."""
    return {
        "current": CURRENT,
        "observation": observation(**(obs or {})),
        "slo_tpot_seconds": SLO,
        "bounds": BOUNDS,
        "tuning": TUNING,
        "history": history if isinstance(history, History) else History(**(history or {})),
        "now": NOW,
        **kw,
    }


def law(**kw: Any) -> Decision:
    """The law's decision on the linear model for the period :func:`law_args` makes of ``kw``."""
    return decide(model=LINEAR, **law_args(**kw))


def _law_case(case: dict[str, Any]) -> Any:
    """A case of the law's table as law()'s keywords and the (action, reason, max-num-seqs, replicas)
    expected: ``current``, ``bounds`` and ``tuning`` over their defaults above, history times from NOW."""
    given = {key: value for key, value in case.items() if key not in ("id", "expect")}
    history = {
        key: NOW + value if key.endswith(("_time", "_since")) else value
        for key, value in given.get("history", {}).items()
    }
    if "calibration" in history:
        history["calibration"] = Calibration(**history["calibration"])
    given["history"] = History(**history)
    for name, default in (("current", CURRENT), ("bounds", BOUNDS), ("tuning", TUNING)):
        if name in given:
            given[name] = replace(default, **given[name])
    action, reason, seqs, replicas = case["expect"]
    return pytest.param(given, (Action[action], reason, seqs, replicas), id=case["id"])


LAW_CASES = [_law_case(case) for case in yaml.safe_load(LAW_CASES_FILE.read_text(encoding="utf-8"))["cases"]]


@pytest.mark.parametrize(("given", "expected"), LAW_CASES)
def test_control_law(given: dict[str, Any], expected: tuple[Action, str, int, int]) -> None:
    decision = law(**given)
    got = (decision.action, decision.reason, decision.max_num_seqs, decision.replicas)
    assert got == expected, decision.message
    assert "\n" not in decision.message
    # Every applied change, and every period spent rolling out, starts a cooldown.
    if decision.changes_plan or given.get("rollout_in_progress"):
        assert decision.history.last_change_time == NOW
    else:
        assert decision.history.last_change_time == given["history"].last_change_time
    assert 0.5 <= decision.calibration.scale <= 4.0


def test_decision_messages_carry_the_numbers() -> None:
    decision = law(
        current=replace(CURRENT, max_num_seqs=128),
        obs={"tpot_seconds": 0.070, "mean_batch": 100.0, "running": 200.0},
        tuning=Tuning(),
    )
    for fragment in (
        "p90 TPOT 70.0 ms vs SLO 50.0 ms (x1.40)",
        "replicas 2 -> 4 at max-num-seqs 128",
        "demand 200 at batch 63 needs 4; adding replicas restarts no pod",
        "calibration x1.08",
        "demand 200",
    ):
        assert fragment in decision.message
    assert decision.slo_met is False
    assert decision.tpot_ratio == pytest.approx(1.4)


def test_hpa_recommendation_is_exposed() -> None:
    decision = law(
        current=replace(CURRENT, replicas=3),
        obs={"tpot_seconds": 0.020, "mean_batch": 20.0, "running": 60.0},
        tuning=Tuning(),
        hpa_present=True,
    )
    assert (decision.replicas, decision.recommended_replicas, decision.recommend_only) == (3, 2, True)
    assert "an HPA owns replicas: recommending 2" in decision.message


def test_waiting_clock_starts_once_and_resets_when_samples_arrive() -> None:
    first = law(obs={"sample_count": 3}, tuning=Tuning())
    assert first.history.waiting_for_samples_since == NOW
    second = law(obs={"sample_count": 3}, tuning=Tuning(), history=first.history, now=NOW + 30)
    assert second.history.waiting_for_samples_since == NOW
    third = law(obs={"sample_count": 300}, tuning=Tuning(), history=second.history, now=NOW + 60)
    assert third.history.waiting_for_samples_since is None


def test_the_trend_baseline_is_held_for_half_a_window_so_a_short_period_still_sees_a_ramp() -> None:
    """Periods of 3 s against a 60 s window (the e2e tests' rhythm): every period's mean shares most of
    its samples with the last one's, so the baseline stays until it is 30 s old. A steady load whose
    mean jumps by one odd sample is no trend; a ramp of 1 request/s is seen once the baseline is 30 s old."""

    def at(batch: float, history: History, now: float) -> Decision:
        obs = {"tpot_seconds": 0.045, "mean_batch": batch, "running": 2 * batch, "waiting": 0.0}
        return law(obs=obs, history=history, now=now, tuning=Tuning(), cold_start_seconds=120.0)

    history = at(45.0, History(), NOW).history
    assert (history.demand, history.demand_time) == (90.0, NOW)
    # 3 s later the mean jumped by 15 (one odd sample in a handful): past sqrt(90), but no trend yet.
    blip = at(52.5, history, NOW + 3)
    assert (blip.action, blip.reason) == (Action.KEEP, "SLOMet"), blip.message
    assert (blip.history.demand, blip.history.demand_time) == (90.0, NOW)  # the baseline is held
    # A real ramp: 30 more over the 30 s since the baseline: 120 + 1/s x 90 s needs 4 replicas at 64.
    ramp = at(60.0, blip.history, NOW + 30)
    assert (ramp.action, ramp.reason, ramp.replicas) == (Action.ADD_REPLICAS, "DemandRising", 4), ramp.message
    assert (ramp.history.demand, ramp.history.demand_time) == (120.0, NOW + 30)  # and then replaced


@pytest.mark.parametrize(
    ("previous", "observed", "predicted", "expected"),
    [
        (1.0, 0.060, 0.040, 1.25),
        (1.0, 0.040, 0.040, 1.0),
        (2.0, 0.020, 0.040, 1.25),
        (1.0, 1.000, 0.010, 2.5),
        (4.0, 1.000, 0.010, 4.0),
        (1.0, 0.001, 0.040, 0.75),
        (1.3, math.nan, 0.040, 1.3),
        (1.3, 0.050, 0.0, 1.3),
        (9.0, math.inf, 0.040, 4.0),
    ],
    ids=[
        "slower-than-predicted-moves-half-way",
        "as-predicted-stays",
        "faster-than-predicted-comes-down",
        "wild-ratio-is-clamped-before-smoothing",
        "stays-at-the-upper-bound",
        "wild-low-ratio-is-clamped",
        "nan-observation-keeps-previous",
        "zero-prediction-keeps-previous",
        "out-of-range-previous-is-clamped",
    ],
)
def test_learn_scale(previous: float, observed: float, predicted: float, expected: float) -> None:
    got = learn(
        Calibration(scale=previous),
        predicted_mean_seconds=predicted,
        percentile_at=lambda cal: cal.scale * cal.tail * predicted,
        observed_mean_seconds=observed,
        observed_percentile_seconds=None,
        alpha=0.5,
        bounds=(0.5, 4.0),
    )
    assert got.scale == pytest.approx(expected)
    assert got.tail == 1.0


@pytest.mark.parametrize(
    ("budget", "limit", "expected"),
    [(0.045, 256, 70), (0.045, 50, 50), (0.0104, 256, 0), (0.0105, 256, 1), (0.2, 256, 256), (0.045, 0, 0)],
    ids=["interior", "memory-limit-binds", "batch-one-too-slow", "exactly-batch-one", "all-fit", "no-room"],
)
def test_target_batch(budget: float, limit: int, expected: int) -> None:
    assert target_batch(linear, budget_seconds=budget, limit=limit) == expected


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"deadband": 1.0}, "deadband 1.0 (accepted: 0 <= deadband < 1)"),
        ({"min_samples": 0}, "min_samples 0 (accepted: >= 1)"),
        ({"calibration_bounds": (2.0, 4.0)}, "accepted: 0 < low <= 1 <= high"),
        ({"max_seqs_step": 1.0}, "max_seqs_step 1.0 (accepted: > 1)"),
    ],
    ids=["deadband", "min-samples", "calibration-bounds", "seqs-step"],
)
def test_bad_tuning_is_one_line_naming_what_is_accepted(kw: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match="invalid control tuning") as info:
        Tuning(**kw)
    assert fragment in str(info.value)


def test_noisy_tpot_around_the_slo_changes_the_plan_a_bounded_number_of_times() -> None:
    """A world that answers the plan, with +-8 % noise on TPOT around 0.93 x SLO, for 200 periods.

    Demand is 120 concurrent requests; the true TPOT is 1.1625 x the model, so 2 replicas at batch
    60 give 46.5 ms. The deadband, the target fraction and the cooldown must keep the plan calm.
    """
    current = replace(CURRENT, max_num_seqs=70)
    history = History()
    changes: list[str] = []
    demand = 120.0
    for i in range(200):
        noise = ((i * 7919) % 17 - 8) / 100.0
        batch = min(current.max_num_seqs, demand / current.replicas)
        waiting = max(0.0, demand - batch * current.replicas)
        obs = {
            "tpot_seconds": 1.1625 * linear(round(batch)) * (1.0 + noise),
            "mean_batch": batch,
            "running": batch * current.replicas,
            "waiting": waiting,
        }
        decision = law(
            current=current,
            obs=obs,
            tuning=Tuning(cooldown_seconds=300.0),
            history=history,
            now=NOW + 30.0 * i,
        )
        history = decision.history
        if decision.changes_plan:
            changes.append(decision.message)
            current = replace(current, max_num_seqs=decision.max_num_seqs, replicas=decision.replicas)
    # It may move once or twice to get comfortably inside the SLO, then it must stay put.
    assert len(changes) <= 3, changes
    assert 1.1625 * linear(round(min(current.max_num_seqs, demand / current.replicas))) <= SLO


# -- each rule on its own -----------------------------------------------------------------------------------


def period(**kw: Any) -> Period:
    return Period(**law_args(**kw))


def measured(**kw: Any) -> Measured:
    return measure(period(**kw), LINEAR)


def test_the_rules_run_in_the_documented_order() -> None:
    assert [r.__name__ for r in PRE_MEASUREMENT] == [
        "metrics_unavailable",
        "rolling_out",
        "too_few_samples",
        "tpot_unmeasured",
    ]
    assert [r.__name__ for r in MEASURED] == [
        "scale_out_while_adding",
        "demand_rising",
        "cooling_down",
        "tpot_above_slo",
        "kv_cache_preempting",
        "ttft_above_slo",
        "headroom",
        "queue_in_deadband",
        "within_deadband",
    ]


#: Each rule on its own: (rule, Period keywords, expected (action, reason) or None when it passes).
PRE_MEASUREMENT_CASES: list[tuple[Any, dict[str, Any], tuple[Action, str] | None]] = [
    (metrics_unavailable, {}, None),
    (metrics_unavailable, {"obs": {"available": False, "reason": "NoSeries"}}, (Action.KEEP, "NoSeries")),
    (rolling_out, {}, None),
    (rolling_out, {"rollout_in_progress": True}, (Action.KEEP, "RolloutInProgress")),
    # Only replicas being added, and TPOT still misses: the measured rules may add more.
    (rolling_out, {"rollout_in_progress": True, "scaling_out": True, "obs": {"tpot_seconds": 0.070}}, None),
    (rolling_out, {"rollout_in_progress": True, "scaling_out": True}, (Action.KEEP, "RolloutInProgress")),
    (
        rolling_out,
        {
            "rollout_in_progress": True,
            "scaling_out": True,
            "hpa_present": True,
            "obs": {"tpot_seconds": 0.07},
        },
        (Action.KEEP, "RolloutInProgress"),
    ),
    (too_few_samples, {}, None),
    (too_few_samples, {"obs": {"sample_count": 3}}, (Action.WAIT, "InsufficientSamples")),
    (
        too_few_samples,
        {"obs": {"sample_count": 3}, "history": {"waiting_for_samples_since": NOW - 1000}},
        None,
    ),
    (
        too_few_samples,
        {
            "obs": {"sample_count": 0, "tpot_seconds": None, "running": 0.0, "mean_batch": None},
            "history": {"waiting_for_samples_since": NOW - 1000},
        },
        (Action.REMOVE_REPLICAS, "NoTraffic"),
    ),
    (tpot_unmeasured, {}, None),
    (tpot_unmeasured, {"obs": {"tpot_seconds": None}}, (Action.KEEP, "TPOTUnavailable")),
]
PRE_MEASUREMENT_IDS = [
    "available-passes",
    "unavailable-keeps-with-the-observation-reason",
    "no-rollout-passes",
    "rollout-keeps",
    "adding-replicas-while-short-passes-to-the-measured-rules",
    "adding-replicas-within-the-slo-keeps",
    "adding-replicas-under-an-hpa-keeps",
    "enough-samples-pass",
    "few-samples-wait",
    "deadline-passed-with-tpot-passes-to-the-measured-rules",
    "deadline-passed-without-traffic-steps-down",
    "tpot-present-passes",
    "tpot-missing-keeps",
]
MEASURED_CASES: list[tuple[Any, dict[str, Any], tuple[Action, str] | None]] = [
    (demand_rising, {}, None),
    (
        demand_rising,
        {"history": {"demand": 90.0, "demand_time": NOW - 60}, "cold_start_seconds": 120.0},
        (Action.ADD_REPLICAS, "DemandRising"),
    ),
    # A queue grows at a steady load too (the backlog of a fleet that is short): the queue's rules answer.
    (
        demand_rising,
        {
            "obs": {"waiting": 20.0},
            "history": {"demand": 90.0, "demand_time": NOW - 60},
            "cold_start_seconds": 120.0,
        },
        None,
    ),
    # A miss is the TPOT rule's, which sizes its scale-out for the same forecast.
    (
        demand_rising,
        {
            "obs": {"tpot_seconds": 0.070},
            "history": {"demand": 90.0, "demand_time": NOW - 60},
            "cold_start_seconds": 120.0,
        },
        None,
    ),
    (cooling_down, {"obs": {"tpot_seconds": 0.070}}, None),
    (
        cooling_down,
        {"obs": {"tpot_seconds": 0.070}, "history": {"last_change_time": NOW - 10}},
        (Action.KEEP, "Cooldown"),
    ),
    # In the band, on a window that judges the running plan (a window after the change, in the cooldown).
    (cooling_down, {"obs": {"tpot_seconds": 0.046}, "history": {"last_change_time": NOW - 120}}, None),
    (tpot_above_slo, {"obs": {"tpot_seconds": 0.045}}, None),
    (tpot_above_slo, {"obs": {"tpot_seconds": 0.070}}, (Action.ADD_REPLICAS, "TPOTAboveSLO")),
    (kv_cache_preempting, {}, None),
    (
        kv_cache_preempting,
        {"obs": {"preemptions_per_second": 1.0, "kv_cache_usage": 0.99}},
        (Action.SET_MAX_NUM_SEQS, "KVCachePreempting"),
    ),
    (headroom, {"obs": {"tpot_seconds": 0.045}}, None),
    (
        headroom,
        {"obs": {"tpot_seconds": 0.020, "mean_batch": 20.0, "running": 40.0}},
        (Action.REMOVE_REPLICAS, "TPOTWellBelowSLO"),
    ),
    (
        headroom,
        {"obs": {"tpot_seconds": 0.020, "waiting": 30.0, "running": 128.0}},
        (Action.SET_MAX_NUM_SEQS, "QueueWithHeadroom"),
    ),
    (queue_in_deadband, {"obs": {"tpot_seconds": 0.045}}, None),
    (
        queue_in_deadband,
        {
            "obs": {"tpot_seconds": 0.043, "waiting": 10.0, "running": 32.0, "mean_batch": 16.0},
            "current": replace(CURRENT, max_num_seqs=16),
        },
        (Action.SET_MAX_NUM_SEQS, "QueueWithHeadroom"),
    ),
    # The target is two seats above the 64 in use: a gain lost in the noise is not worth a restart, so the
    # queue gets a replica (the demo once settled at its seats with 20 requests waiting for good).
    (
        queue_in_deadband,
        {"obs": {"tpot_seconds": 0.045, "waiting": 10.0, "running": 128.0, "mean_batch": 64.0}},
        (Action.ADD_REPLICAS, "RequestsWaiting"),
    ),
    # The same at the replica ceiling: nothing to add, and the reason says why the queue stays.
    (
        queue_in_deadband,
        {
            "obs": {"tpot_seconds": 0.045, "waiting": 10.0, "running": 128.0, "mean_batch": 64.0},
            "bounds": replace(BOUNDS, max_replicas=2),
        },
        (Action.KEEP, "ReplicaCeiling"),
    ),
    (within_deadband, {"obs": {"tpot_seconds": 0.045}}, (Action.KEEP, "SLOMet")),
]
MEASURED_IDS = [
    "no-trend-passes",
    "a-rising-demand-adds-replicas-before-the-miss",
    "a-growing-queue-is-not-a-trend",
    "a-miss-is-the-tpot-rules",
    "no-cooldown-passes",
    "cooldown-holds-a-needed-move",
    "cooldown-irrelevant-inside-the-band-passes",
    "within-slo-passes",
    "above-slo-lowers-the-batch-and-adds-replicas-for-the-demand",
    "no-preemption-passes",
    "preempting-at-full-kv-lowers-the-batch",
    "inside-the-band-passes",
    "idle-replica-is-released",
    "queue-with-headroom-raises-the-batch",
    "no-queue-passes",
    "queue-inside-the-band-raises-towards-the-target",
    "queue-inside-the-band-with-no-seats-worth-a-restart-adds-a-replica",
    "queue-inside-the-band-at-the-replica-ceiling-says-so",
    "deadband-keeps",
]


@pytest.mark.parametrize(
    ("build", "rule", "kw", "expected"),
    [(period, *case) for case in PRE_MEASUREMENT_CASES] + [(measured, *case) for case in MEASURED_CASES],
    ids=PRE_MEASUREMENT_IDS + MEASURED_IDS,
)
def test_each_rule_on_its_own(
    build: Any, rule: Any, kw: dict[str, Any], expected: tuple[Action, str] | None
) -> None:
    """Rules before a measurement see a Period, the others a Measured period."""
    decision = rule(build(**kw))
    assert (None if decision is None else (decision.action, decision.reason)) == expected


def test_headroom_is_seen_through_a_coarse_histogram_reading() -> None:
    """At low load every TPOT sits in vLLM's (10, 25] ms bucket and p90 reads 23.5 ms (x0.94 of a 25 ms SLO,
    inside the deadband); the calibrated model at the served batch says ~10 ms, so the idle replica goes."""

    class Curve(LinearModel):
        def measured_seconds(self, batch: int, calibration: Calibration = UNCALIBRATED) -> float:
            return 0.0235  # what histogram_quantile reads for any TPOT in (10, 25] ms

    m = measure(
        period(
            obs={"tpot_seconds": 0.0235, "tpot_mean_seconds": 0.0105, "mean_batch": 1.0, "running": 2.0},
            slo_tpot_seconds=0.025,
            current=replace(CURRENT, max_num_seqs=17, replicas=3),
        ),
        Curve(),
    )
    assert m.ratio == pytest.approx(0.94)
    assert m.headroom_ratio < 0.85
    decision = headroom(m)
    assert decision is not None and (decision.action, decision.reason) == (
        Action.REMOVE_REPLICAS,
        "TPOTWellBelowSLO",
    )


def test_a_move_that_restarts_the_pods_says_what_the_restart_costs() -> None:
    """A move that restarts the pods carries the predicted cost in its message; a replicas-only move
    restarts nothing and says nothing of it."""
    restart = {"tuning": Tuning(cooldown_seconds=300.0), "restart_seconds": 40.0}
    current = replace(CURRENT, max_num_seqs=40)
    queued = {"tpot_seconds": 0.030, "mean_batch": 40.0, "running": 80.0, "waiting": 30.0}
    raised = law(current=current, obs=queued, **restart)
    assert raised.action == Action.SET_MAX_NUM_SEQS
    assert raised.message.endswith("restarting the 2 pod(s) takes about 40s at the predicted cold start")
    slow = {"tpot_seconds": 0.070, "mean_batch": 100.0, "running": 200.0}
    added = law(current=replace(current, max_num_seqs=128), obs=slow, **restart)
    assert added.action == Action.ADD_REPLICAS and "cold start" not in added.message


def test_the_largest_batch_measured_within_the_slo_is_remembered_and_a_miss_below_it_forgets_it() -> None:
    def period_at(tpot: float, batch: float, history: History) -> Decision:
        obs = {"tpot_seconds": tpot, "mean_batch": batch, "running": 2 * batch}
        return law(obs=obs, tuning=Tuning(cooldown_seconds=300.0), history=history)

    met = period_at(0.045, 50.0, History())
    assert met.history.met_batch == 50 and met.history.met_time == NOW
    smaller = period_at(0.040, 20.0, met.history)
    assert smaller.history.met_batch == 50  # the largest is kept
    missed = period_at(0.060, 40.0, met.history)
    assert missed.history.met_batch is None  # a miss at 40 says 50 no longer holds
    assert (missed.history.missed_batch, missed.history.missed_time) == (40, NOW)


def test_a_small_miss_at_seats_that_met_moves_when_the_next_window_confirms_it() -> None:
    """The real engine read 24.2, 24.8 and then 26.3 ms at the same 53 seats against a 25 ms SLO, and the
    law restarted the pod on the one window. Now the first small miss keeps and remembers itself; the next
    window judges: within the SLO, nothing moved; above it again, the step the first would have taken."""

    def period_at(tpot: float, history: History, now: float) -> Decision:
        return law(
            current=replace(CURRENT, replicas=1),
            obs={"tpot_seconds": tpot, "mean_batch": 64.0, "running": 64.0, "waiting": 40.0},
            bounds=replace(BOUNDS, max_replicas=1, max_gpus=1, fp8_kv_allowed=False),
            tuning=Tuning(cooldown_seconds=300.0, calibration_alpha=0.1),
            history=history,
            now=now,
        )

    met = period_at(0.048, History(), NOW - 60)
    assert met.slo_met and met.history.met_batch == 64
    first = period_at(0.0505, met.history, NOW)
    assert (first.action, first.reason, first.max_num_seqs) == (Action.KEEP, "TPOTAboveSLO", 64), (
        first.message
    )
    assert "waits for the next window" in first.message
    assert (first.history.missed_batch, first.history.met_batch) == (64, None)
    confirmed = period_at(0.0505, first.history, NOW + 60)
    assert (confirmed.action, confirmed.max_num_seqs) == (Action.SET_MAX_NUM_SEQS, 54), confirmed.message
    recovered = period_at(0.047, first.history, NOW + 60)
    assert (recovered.action, recovered.max_num_seqs) == (Action.KEEP, 64), recovered.message


def test_a_window_that_still_holds_the_restart_is_not_remembered_as_met_or_missed() -> None:
    """Ten seconds after a rollout ended, the 60 s window still holds the old pods' last requests and the
    new ones' start (the CI's real engine read 49 ms at a batch of 3 there, and the miss wiped the 27 that
    had met): the law keeps for its cooldown and remembers nothing of that window."""
    history = History(met_batch=27, met_time=NOW - 100, missed_batch=32, missed_time=NOW - 200)
    kept = law(
        current=replace(CURRENT, max_num_seqs=40, replicas=1),
        obs={"tpot_seconds": 0.098, "mean_batch": 3.0, "running": 3.0, "sample_count": 16},
        bounds=replace(BOUNDS, max_replicas=1, max_gpus=1),
        tuning=Tuning(cooldown_seconds=30.0, min_samples=10),
        history=replace(history, last_change_time=NOW - 10),
    )
    assert (kept.action, kept.reason) == (Action.KEEP, "Cooldown"), kept.message
    h = kept.history
    assert (h.met_batch, h.met_time, h.missed_batch, h.missed_time) == (27, NOW - 100, 32, NOW - 200)


@pytest.mark.parametrize(("since_change", "learns"), [(None, True), (10.0, False), (60.0, True)])
def test_only_a_window_that_judges_the_running_plan_calibrates(
    since_change: float | None, learns: bool
) -> None:
    """A window less than a window after the last change (its rollout, or added replicas) still holds the
    last plan's pods and their start: the real engine read 72 ms at a batch of 7 in one, just after a
    restart. It is judged, but keeps the calibration it had, so the shape fit holds only served plans."""
    history = {"calibration": Calibration(scale=1.3)}
    if since_change is not None:
        history["last_change_time"] = NOW - since_change
    m = measured(obs={"tpot_seconds": 0.070, "tpot_mean_seconds": 0.070}, history=history)
    assert (m.calibration != Calibration(scale=1.3)) is learns
    assert m.ratio == pytest.approx(0.070 / SLO)
