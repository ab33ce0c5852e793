"""kvright.control: calibration and the control law, table-driven with exact expected moves.

Nothing is faked except the TPOT model at the law's edge: instead of the serving model's curve, a linear
stand-in ``tpot(batch) = 10 ms + 0.5 ms x batch`` (mean and percentile alike) makes every expected number
checkable by hand (batch 70 -> 45 ms = 0.9 x the 50 ms SLO used below). The real curve is exercised by
tests/unit/test_serving.py, which checks that the law leaves a plan alone that behaves as predicted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

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


@dataclass
class Case:
    rollout: bool = False
    obs: dict[str, Any] = field(default_factory=dict)
    current: dict[str, Any] = field(default_factory=dict)
    bounds: dict[str, Any] = field(default_factory=dict)
    history: dict[str, Any] = field(default_factory=dict)
    tuning: dict[str, Any] = field(default_factory=dict)
    slo: float = SLO
    ttft_slo: float | None = None
    hpa: bool = False
    scaling_out: bool = False
    restart_seconds: float = 0.0
    cold_start_seconds: float = 0.0


#: 30 ms at a batch of 40 with 30 requests waiting: headroom and a queue.
QUEUED_AT_40: dict[str, Any] = {"tpot_seconds": 0.030, "mean_batch": 40.0, "running": 80.0, "waiting": 30.0}
#: Two replicas of four data-parallel engines with 128 seats each, 70 ms at 100 an engine.
DP4_OF_128: dict[str, Any] = {"data_parallel_size": 4, "max_num_seqs": 128}
SLOW_ON_DP4: dict[str, Any] = {"tpot_seconds": 0.070, "mean_batch": 100.0, "running": 800.0}
#: A window with no finished, running or waiting request; and a samples clock started long ago.
IDLE: dict[str, Any] = {
    "sample_count": 0,
    "tpot_seconds": None,
    "running": 0.0,
    "waiting": 0.0,
    "mean_batch": 0.0,
}
PAST_DEADLINE: dict[str, Any] = {"waiting_for_samples_since": NOW - 1000}
#: TPOT inside the SLO, 40 requests waiting, TTFT 3 s (against a 2 s TTFT SLO in the cases below).
QUEUE_OVER_TTFT: dict[str, Any] = {
    "tpot_seconds": 0.040,
    "mean_batch": 64.0,
    "running": 128.0,
    "waiting": 40.0,
    "ttft_seconds": 3.0,
}
#: TPOT well inside the SLO with 60 running on 3 replicas: two could carry them.
SPARE_REPLICA: dict[str, Any] = {"tpot_seconds": 0.020, "mean_batch": 20.0, "running": 60.0}


def too_slow_at_128(*, running: float, **more: Any) -> Case:
    """p90 TPOT 70 ms at batch 100 on 2 replicas of max-num-seqs 128 (the model says 60 ms)."""
    return Case(
        obs={"tpot_seconds": 0.070, "mean_batch": 100.0, "running": running},
        current={"max_num_seqs": 128, "replicas": 2},
        **more,
    )


CASES: list[tuple[str, Case, tuple[Action, str, int, int]]] = [
    (
        "waiting-with-free-seats-is-admission-not-a-queue",
        # 2 requests between two steps while 40 of 128 seats run: no replica is bought, none removed.
        Case(obs={"tpot_seconds": 0.020, "waiting": 2.0, "running": 40.0, "mean_batch": 20.0}),
        (Action.KEEP, "SLOMet", 64, 2),
    ),
    (
        "prometheus-down-keeps-everything",
        Case(obs={"available": False, "reason": "PrometheusUnreachable", "tpot_seconds": None}),
        (Action.KEEP, "PrometheusUnreachable", 64, 2),
    ),
    (
        "rollout-in-progress-keeps-and-restarts-the-cooldown",
        Case(obs={"tpot_seconds": 0.090}, rollout=True),
        (Action.KEEP, "RolloutInProgress", 64, 2),
    ),
    (
        "few-samples-waits-before-the-deadline",
        Case(obs={"sample_count": 10}, history={"waiting_for_samples_since": NOW - 100}),
        (Action.WAIT, "InsufficientSamples", 64, 2),
    ),
    (
        "no-traffic-after-the-deadline-removes-one-replica",
        Case(obs=IDLE, current={"replicas": 3}, history=PAST_DEADLINE),
        (Action.REMOVE_REPLICAS, "NoTraffic", 64, 2),
    ),
    (
        "no-traffic-at-min-replicas-keeps",
        Case(obs=IDLE, current={"replicas": 1}, history=PAST_DEADLINE),
        (Action.KEEP, "NoTraffic", 64, 1),
    ),
    (
        "few-samples-after-the-deadline-still-acts-on-a-violation",
        Case(
            obs={"sample_count": 5, "tpot_seconds": 0.060, "mean_batch": 64.0, "running": 128.0},
            history=PAST_DEADLINE,
        ),
        # predicted 42 ms at 64 -> calibration 1 + 0.5 x (60/42 - 1) = 1.2143; batch <= 54 fits 45 ms;
        # 128 at 54 need 3 replicas, which the budget holds: add one, keep max-num-seqs (no restart).
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 64, 3),
    ),
    (
        "too-slow-and-the-budget-holds-the-demand-adds-replicas-without-a-restart",
        # predicted 60 ms at 100 -> calibration 1.0833 -> target 63; 200/63 -> 4 replicas <= 4 allowed.
        too_slow_at_128(running=200.0),
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 128, 4),
    ),
    (
        "too-slow-and-the-budget-cannot-hold-the-demand-lowers-seqs-and-adds-replicas",
        # target 63: 300/63 -> 5 replicas > 4 allowed, so lower the batch (halving floor 64) and add 2.
        too_slow_at_128(running=300.0),
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 64, 4),
    ),
    (
        "percentile-spread-over-an-accurate-mean-still-sizes-the-batch",
        # Mean 40 ms at batch 60 is exactly the roofline (calibration stays 1), but p90 is 1.5x the mean:
        # 1.5 x (10 + 0.5 b) ms <= 45 ms -> b <= 40; 120 requests need 3 replicas, within the budget.
        Case(obs={"tpot_seconds": 0.060, "tpot_mean_seconds": 0.040, "mean_batch": 60.0, "running": 120.0}),
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 64, 3),
    ),
    (
        "too-slow-but-demand-fits-only-lowers-seqs",
        # 38 of the 128 seats are in use: the bounded step (a factor 2) counts from those, so one move
        # reaches the target batch (halving 128 would change nothing the engine does).
        Case(
            obs={"tpot_seconds": 0.060, "mean_batch": 38.0, "running": 150.0},
            current={"max_num_seqs": 128, "replicas": 4},
        ),
        (Action.SET_MAX_NUM_SEQS, "TPOTAboveSLO", 38, 4),
    ),
    (
        "adding-replicas-while-still-short-adds-what-the-demand-needs-now",
        # Replicas are starting (2 asked for) and TPOT still misses: the demand of 1000 needs 16.
        replace(
            too_slow_at_128(running=1000.0, bounds={"max_replicas": 30, "max_gpus": 30}),
            rollout=True,
            scaling_out=True,
        ),
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 128, 16),
    ),
    (
        "adding-replicas-that-already-cover-the-demand-waits-for-them",
        replace(
            Case(
                obs={"tpot_seconds": 0.070, "mean_batch": 100.0, "running": 200.0},
                current={"max_num_seqs": 128, "replicas": 4},
            ),
            rollout=True,
            scaling_out=True,
        ),
        (Action.KEEP, "RolloutInProgress", 128, 4),
    ),
    (
        "adding-replicas-within-the-slo-waits-for-them",
        Case(rollout=True, scaling_out=True),
        (Action.KEEP, "RolloutInProgress", 64, 2),
    ),
    (
        "a-rollout-that-replaces-pods-waits-even-when-short",
        replace(too_slow_at_128(running=1000.0, bounds={"max_replicas": 30, "max_gpus": 30}), rollout=True),
        (Action.KEEP, "RolloutInProgress", 128, 2),
    ),
    (
        "a-queue-beyond-the-budget-gets-every-replica-the-budget-holds",
        # 628 requests (500 waiting) at a target batch near 34 need 19 replicas; the budget holds 4.
        Case(obs={"tpot_seconds": 0.070, "mean_batch": 64.0, "running": 128.0, "waiting": 500.0}),
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 64, 4),
    ),
    (
        "scale-out-goes-to-what-the-demand-needs",
        too_slow_at_128(running=1000.0, bounds={"max_replicas": 30, "max_gpus": 30}),
        # 1000 at target 63 need 16 replicas, within 30: one move adds them all (no pod restarts).
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 128, 16),
    ),
    (
        "calibrated-model-too-pessimistic-at-batch-one-steps-down",
        # Observed 150 ms at batch 60 (3.6x the 40 ms roofline): calibration 2.3 says batch 1 takes 24 ms,
        # over the 22.5 ms budget, but the roofline alone says 10.5 ms, so halve the 60 seats in use and
        # measure again.
        Case(obs={"tpot_seconds": 0.150, "mean_batch": 60.0, "running": 120.0}, slo=0.025),
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 30, 4),
    ),
    (
        "batch-one-too-slow-replans-with-fp8-kv",
        Case(obs={"tpot_seconds": 0.030, "mean_batch": 8.0}, slo=0.010),
        (Action.REPLAN, "ReplanFP8KVCache", 64, 2),
    ),
    (
        "batch-one-too-slow-with-fp8-replans-with-larger-tp",
        Case(
            obs={"tpot_seconds": 0.030, "mean_batch": 8.0},
            current={"kv_cache_dtype": "fp8"},
            bounds={"larger_tensor_parallel_size": 2},
            slo=0.010,
        ),
        (Action.REPLAN, "ReplanLargerTP", 64, 2),
    ),
    (
        "batch-one-too-slow-and-nothing-left-says-so",
        Case(obs={"tpot_seconds": 0.030, "mean_batch": 8.0}, bounds={"fp8_kv_allowed": False}, slo=0.010),
        (Action.KEEP, "SLOUnattainable", 64, 2),
    ),
    (
        "gpu-budget-binds-adds-what-it-can",
        Case(
            obs={"tpot_seconds": 0.070, "mean_batch": 64.0, "running": 400.0},
            current={"max_num_seqs": 64, "tensor_parallel_size": 2},
            bounds={"max_gpus": 6},
        ),
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 47, 3),
    ),
    (
        "budget-full-and-seqs-at-target-replans",
        Case(
            obs={"tpot_seconds": 0.0505, "mean_batch": 10.0, "running": 90.0, "waiting": 170.0},
            current={"max_num_seqs": 30, "replicas": 3, "tensor_parallel_size": 2},
            bounds={"max_gpus": 6},
            tuning={"calibration_alpha": 0.1},
        ),
        (Action.REPLAN, "ReplanFP8KVCache", 30, 3),
    ),
    (
        "violation-before-a-fresh-window-keeps",
        # The last change was 30 s ago and the window is 60 s: this window still judges the old plan.
        Case(obs={"tpot_seconds": 0.070}, history={"last_change_time": NOW - 30}),
        (Action.KEEP, "Cooldown", 64, 2),
    ),
    (
        "violation-inside-cooldown-after-a-fresh-window-adds-replicas",
        # 100 s after a change (cooldown 300 s): adding replicas restarts nothing, so it need not wait.
        Case(obs={"tpot_seconds": 0.070}, history={"last_change_time": NOW - 100}),
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 64, 3),
    ),
    (
        "violation-inside-cooldown-that-needs-a-restart-keeps",
        # 300 requests at target 46 need 7 replicas > 4: only lowering max-num-seqs would do, a restart.
        Case(obs={"tpot_seconds": 0.070, "running": 300.0}, history={"last_change_time": NOW - 100}),
        (Action.KEEP, "Cooldown", 64, 2),
    ),
    (
        "ttft-above-slo-with-a-queue-adds-replicas",
        Case(
            obs=QUEUE_OVER_TTFT,
            ttft_slo=2.0,
        ),
        # 168 requests (40 waiting) at max-num-seqs 64 need 3 replicas.
        (Action.ADD_REPLICAS, "TTFTAboveSLO", 64, 3),
    ),
    (
        "ttft-above-slo-inside-cooldown-after-a-fresh-window-adds-replicas",
        Case(
            obs=QUEUE_OVER_TTFT,
            history={"last_change_time": NOW - 100},
            ttft_slo=2.0,
        ),
        # 168 requests (40 waiting) at max-num-seqs 64 need 3 replicas.
        (Action.ADD_REPLICAS, "TTFTAboveSLO", 64, 3),
    ),
    (
        "ttft-above-slo-without-a-queue-keeps-and-does-not-scale-down",
        # TPOT has headroom and 3 replicas could shrink, but the prefill itself is over the TTFT SLO.
        Case(obs={**SPARE_REPLICA, "ttft_seconds": 3.0}, current={"replicas": 3}, ttft_slo=2.0),
        (Action.KEEP, "TTFTAboveSLO", 64, 3),
    ),
    (
        "ttft-near-its-slo-holds-a-scale-down",
        Case(obs={**SPARE_REPLICA, "ttft_seconds": 1.9}, current={"replicas": 3}, ttft_slo=2.0),
        (Action.KEEP, "SLOMet", 64, 3),
    ),
    (
        "inside-the-deadband-keeps",
        Case(obs={"tpot_seconds": 0.046, "mean_batch": 64.0}),
        (Action.KEEP, "SLOMet", 64, 2),
    ),
    (
        "queue-with-headroom-raises-seqs-to-the-target",
        Case(
            obs=QUEUED_AT_40,
            current={"max_num_seqs": 40},
        ),
        # predicted 30 ms at 40 -> calibration 1 -> target 70, capped at 2 x 40 = 80 -> 70.
        (Action.SET_MAX_NUM_SEQS, "QueueWithHeadroom", 70, 2),
    ),
    (
        "a-queue-gets-a-replica-when-restarting-the-pods-for-seats-takes-longer",
        # The same queue, but the 2 pods restart one after another for the seats (240 s), while a replica
        # serves after one 120 s cold start and a 60 s window: 110 requests at 40 seats need 3 replicas.
        Case(
            obs=QUEUED_AT_40,
            current={"max_num_seqs": 40},
            restart_seconds=240.0,
            cold_start_seconds=120.0,
        ),
        (Action.ADD_REPLICAS, "RequestsWaiting", 40, 3),
    ),
    (
        "one-replica-restarts-in-one-cold-start-so-the-queue-gets-the-seats",
        # One pod: the restart for the seats and a new replica both take one cold start; the seats cost no
        # GPU.
        Case(
            obs={**QUEUED_AT_40, "running": 40.0},
            current={"max_num_seqs": 40, "replicas": 1},
            restart_seconds=120.0,
            cold_start_seconds=120.0,
        ),
        (Action.SET_MAX_NUM_SEQS, "QueueWithHeadroom", 70, 1),
    ),
    (
        "a-slow-restart-at-the-replica-ceiling-still-raises-the-seats",
        Case(
            obs={**QUEUED_AT_40, "running": 160.0},
            current={"max_num_seqs": 40, "replicas": 4},
            restart_seconds=480.0,
            cold_start_seconds=120.0,
        ),
        (Action.SET_MAX_NUM_SEQS, "QueueWithHeadroom", 70, 4),
    ),
    (
        "too-few-seats-for-the-replicas-left-get-raised-with-the-release",
        # A loop that stepped max-num-seqs down to 1 under a load that has fallen to 4: 3 replicas carry it
        # at batch 2, so one goes and the rest get the seats in the same move (no queue would ever raise
        # them, and at 1 seat each no replica could go).
        Case(
            obs={"tpot_seconds": 0.012, "mean_batch": 1.0, "running": 4.0, "waiting": 0.0},
            current={"max_num_seqs": 1, "replicas": 4},
        ),
        (Action.REMOVE_REPLICAS, "TPOTWellBelowSLO", 2, 3),
    ),
    (
        "a-demand-rising-faster-than-a-cold-start-gets-its-replicas-before-the-slo-is-missed",
        # Within the SLO (45 ms, target batch 64), but the load grew from 90 to 120 in the last minute
        # (0.5/s, past the noise of sqrt(90)). A replica added now serves after its 120 s cold start and
        # is judged a window later: 180 s, no more than 3 x the minute the trend was seen over. By then
        # 120 + 0.5 x 180 = 210 need 4 replicas at 64.
        Case(history={"demand": 90.0, "demand_time": NOW - 60}, cold_start_seconds=120.0),
        (Action.ADD_REPLICAS, "DemandRising", 64, 4),
    ),
    (
        "a-rise-within-the-noise-of-the-count-is-no-trend",
        Case(history={"demand": 112.0, "demand_time": NOW - 60}, cold_start_seconds=120.0),
        (Action.KEEP, "SLOMet", 64, 2),
    ),
    (
        "a-trend-is-extrapolated-no-further-than-three-times-the-span-it-was-seen-over",
        # 30 more in 30 s (1/s) with a 900 s cold start: forecast over 90 s, not 960 s: 120 + 90 = 210.
        Case(history={"demand": 90.0, "demand_time": NOW - 30}, cold_start_seconds=900.0),
        (Action.ADD_REPLICAS, "DemandRising", 64, 4),
    ),
    (
        "two-means-less-than-half-a-window-apart-share-most-samples-and-make-no-trend",
        # The same 30 more, but 20 s after the baseline in a 60 s window: two thirds of the samples are
        # the same, and what moved the mean is the few that differ.
        Case(history={"demand": 90.0, "demand_time": NOW - 20}, cold_start_seconds=900.0),
        (Action.KEEP, "SLOMet", 64, 2),
    ),
    (
        "a-demand-seen-long-ago-says-nothing-about-the-trend",
        Case(history={"demand": 10.0, "demand_time": NOW - 600}, cold_start_seconds=120.0),
        (Action.KEEP, "SLOMet", 64, 2),
    ),
    (
        "a-replica-goes-when-half-a-batch-measured-within-the-slo-carries-the-rest",
        # The calibrated model (scale 1.84 after this window) puts the 40 per replica that 3 replicas would
        # serve at 55 ms, but 100 per replica was measured within the SLO five minutes ago: TPOT does not
        # fall as the batch grows, so 40 (under half of 100) is served within it. The fresh-clone CI's
        # elastic run held 3 replicas for 4 clients on a model whose spread was learned wide.
        Case(
            obs={"tpot_seconds": 0.042, "mean_batch": 30.0, "running": 120.0},
            current={"replicas": 4},
            history={"calibration": Calibration(scale=2.0), "met_batch": 100, "met_time": NOW - 300},
        ),
        (Action.REMOVE_REPLICAS, "TPOTWellBelowSLO", 64, 3),
    ),
    (
        "a-momentary-dip-in-the-running-gauge-releases-nothing-the-windows-load-still-needs",
        # 30 running at this instant, but 40 a replica over the window: one replica would serve 80, not
        # 30, past the target batch. The simulated fleet's CI run released on such a dip (14 of 48).
        Case(obs={"tpot_seconds": 0.030, "mean_batch": 40.0, "running": 30.0}),
        (Action.KEEP, "SLOMet", 64, 2),
    ),
    (
        "without-that-measurement-the-model-keeps-the-replica",
        Case(
            obs={"tpot_seconds": 0.042, "mean_batch": 30.0, "running": 120.0},
            current={"replicas": 4},
            history={"calibration": Calibration(scale=2.0)},
        ),
        (Action.KEEP, "SLOMet", 64, 4),
    ),
    (
        "a-recent-miss-caps-the-raise-halfway-to-it",
        # The same, but TPOT was measured above the SLO at batch 60 five minutes ago: the model's 70 is
        # not trusted past halfway between the 40 that meets and the 60 that missed.
        Case(
            obs=QUEUED_AT_40,
            current={"max_num_seqs": 40},
            history={"missed_batch": 60, "missed_time": NOW - 300},
        ),
        (Action.SET_MAX_NUM_SEQS, "QueueWithHeadroom", 50, 2),
    ),
    (
        "a-miss-six-cooldowns-old-is-forgotten",
        Case(
            obs=QUEUED_AT_40,
            current={"max_num_seqs": 40},
            history={"missed_batch": 60, "missed_time": NOW - 6 * 600 - 1},
        ),
        (Action.SET_MAX_NUM_SEQS, "QueueWithHeadroom", 70, 2),
    ),
    (
        "a-miss-is-remembered-for-six-probes-of-a-restart-and-a-cooldown-each",
        # Past six cooldowns (30 min) but within six probes of a 5-minute restart and a 5-minute cooldown:
        # forgetting it sooner let the CI's real engine, whose restart outlasts its cooldown, probe again
        # a batch it had just measured above the SLO.
        Case(
            obs=QUEUED_AT_40,
            current={"max_num_seqs": 40},
            history={"missed_batch": 60, "missed_time": NOW - 6 * 300 - 60},
            restart_seconds=300.0,
            cold_start_seconds=300.0,
        ),
        (Action.SET_MAX_NUM_SEQS, "QueueWithHeadroom", 50, 2),
    ),
    (
        "a-data-parallel-replica-seats-four-engines-so-the-demand-needs-a-quarter-of-the-replicas",
        # 70 ms at 100 a engine, 800 running on 2 replicas of 4 engines (DP attention): the target batch is
        # 63 an engine, so 800 need 4 replicas of 4 x 63 seats, not 13 of 63 (52 GPUs, past the 16).
        Case(obs=SLOW_ON_DP4, current=DP4_OF_128, bounds={"max_replicas": 16, "max_gpus": 16}),
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 128, 4),
    ),
    (
        "the-gpu-budget-counts-every-gpu-of-a-replica-not-its-tensor-parallel-degree",
        # The same on 12 GPUs: three replicas of 4 GPUs (TP 1 x DP 4) are all the budget holds, so the
        # seats step down to the target batch too.
        Case(obs=SLOW_ON_DP4, current=DP4_OF_128, bounds={"max_replicas": 16, "max_gpus": 12}),
        (Action.ADD_REPLICAS, "TPOTAboveSLO", 63, 3),
    ),
    (
        "a-data-parallel-fleet-releases-a-replica-when-the-engines-left-carry-the-demand",
        # 20 ms at 10 an engine, 120 running on 3 replicas of 4 engines: 2 replicas serve 15 an engine.
        Case(
            obs={"tpot_seconds": 0.020, "mean_batch": 10.0, "running": 120.0},
            current={"data_parallel_size": 4, "replicas": 3},
            bounds={"max_gpus": 16},
        ),
        (Action.REMOVE_REPLICAS, "TPOTWellBelowSLO", 64, 2),
    ),
    (
        "a-miss-next-door-leaves-nothing-to-raise-so-the-queue-gets-a-replica",
        Case(
            obs=QUEUED_AT_40,
            current={"max_num_seqs": 40},
            history={"missed_batch": 41, "missed_time": NOW - 300},
        ),
        (Action.ADD_REPLICAS, "RequestsWaiting", 40, 3),
    ),
    (
        "a-miss-by-a-hair-at-the-replica-ceiling-steps-out-of-the-deadband",
        # 51 ms at 64 seats, one replica allowed: the calibrated target is 61, a 5 % step that moves TPOT by
        # less than the noise it is judged by. The fresh-clone CI's real engine walked 38, 28, 33, 31 this
        # way, a restart each. The step goes at least the deadband: 64 x 0.85 = 54.
        Case(
            obs={"tpot_seconds": 0.051, "mean_batch": 64.0, "running": 64.0, "waiting": 40.0},
            current={"replicas": 1},
            bounds={"max_replicas": 1},
        ),
        (Action.SET_MAX_NUM_SEQS, "TPOTAboveSLO", 54, 1),
    ),
    (
        "a-miss-the-slowly-calibrated-model-still-fits-steps-down-as-measured",
        # 50.5 ms at 64 seats, one replica allowed, nothing cheaper to re-plan to. The calibration learns
        # slowly (alpha 0.1) and still puts its target at 68: at or above the seats, which the reading
        # has just shown miss. The fresh-clone CI's real engine sat at such an edge, its p90 reading above
        # the SLO in a third of the windows, kept by "no cheaper move left". The reading outranks the
        # model: a step out of the deadband, 64 x 0.85 = 54.
        Case(
            obs={"tpot_seconds": 0.0505, "mean_batch": 64.0, "running": 64.0, "waiting": 40.0},
            current={"replicas": 1},
            bounds={"max_replicas": 1, "fp8_kv_allowed": False},
            tuning={"calibration_alpha": 0.1},
        ),
        (Action.SET_MAX_NUM_SEQS, "TPOTAboveSLO", 54, 1),
    ),
    (
        "one-small-miss-at-seats-measured-within-the-slo-waits-for-a-second-window",
        # The same reading, but these 64 seats were measured within the SLO five minutes ago: a 1 % miss
        # in one window is inside the noise of a percentile, and the step would restart the pod.
        Case(
            obs={"tpot_seconds": 0.0505, "mean_batch": 64.0, "running": 64.0, "waiting": 40.0},
            current={"replicas": 1},
            bounds={"max_replicas": 1, "fp8_kv_allowed": False},
            history={"met_batch": 64, "met_time": NOW - 300},
            tuning={"calibration_alpha": 0.1},
        ),
        (Action.KEEP, "TPOTAboveSLO", 64, 1),
    ),
    (
        "a-miss-past-the-deadband-at-those-seats-moves-at-once",
        Case(
            obs={"tpot_seconds": 0.060, "mean_batch": 64.0, "running": 64.0, "waiting": 40.0},
            current={"replicas": 1},
            bounds={"max_replicas": 1, "fp8_kv_allowed": False},
            history={"met_batch": 64, "met_time": NOW - 300},
            tuning={"calibration_alpha": 0.1},
        ),
        (Action.SET_MAX_NUM_SEQS, "TPOTAboveSLO", 54, 1),
    ),
    (
        "a-miss-after-a-probe-steps-back-to-the-batch-that-met-not-to-the-models-target",
        # 24 met five minutes ago, the probe to 33 misses at 60 ms: the recalibrated model says 7 (the real
        # engine once took such a word, 33 -> 17, and had to probe its way back up). The law bisects: 24.
        Case(
            obs={"tpot_seconds": 0.060, "mean_batch": 33.0, "running": 33.0, "waiting": 60.0},
            current={"replicas": 1, "max_num_seqs": 33},
            bounds={"max_replicas": 1, "fp8_kv_allowed": False},
            history={"met_batch": 24, "met_time": NOW - 300},
            slo=0.025,
        ),
        (Action.SET_MAX_NUM_SEQS, "TPOTAboveSLO", 24, 1),
    ),
    (
        "without-that-measurement-the-models-target-is-taken-halving-at-most",
        # The model's target is 7; one move at most halves the 33 seats in use.
        Case(
            obs={"tpot_seconds": 0.060, "mean_batch": 33.0, "running": 33.0, "waiting": 60.0},
            current={"replicas": 1, "max_num_seqs": 33},
            bounds={"max_replicas": 1, "fp8_kv_allowed": False},
            slo=0.025,
        ),
        (Action.SET_MAX_NUM_SEQS, "TPOTAboveSLO", 16, 1),
    ),
    (
        "the-same-miss-re-plans-when-a-cheaper-plan-serves-the-demand",
        Case(
            obs={"tpot_seconds": 0.0505, "mean_batch": 64.0, "running": 64.0, "waiting": 40.0},
            current={"replicas": 1},
            bounds={"max_replicas": 1},
            tuning={"calibration_alpha": 0.1},
        ),
        (Action.REPLAN, "ReplanFP8KVCache", 64, 1),
    ),
    (
        "then-a-raise-back-halfway-to-the-miss-is-within-the-noise-and-not-made",
        # 54 met at 44 ms with a queue: the model would raise to the target, the miss caps it halfway to 64,
        # at 59: 9 % more seats, inside the deadband. Keep (the queue waits on the replica ceiling).
        Case(
            obs={"tpot_seconds": 0.044, "mean_batch": 54.0, "running": 54.0, "waiting": 50.0},
            current={"replicas": 1, "max_num_seqs": 54},
            bounds={"max_replicas": 1},
            history={"missed_batch": 64, "missed_time": NOW - 300},
        ),
        (Action.KEEP, "ReplicaCeiling", 54, 1),
    ),
    (
        "queue-at-target-batch-adds-replicas",
        Case(
            obs={"tpot_seconds": 0.030, "mean_batch": 40.0, "running": 140.0, "waiting": 60.0},
            current={"max_num_seqs": 70},
        ),
        (Action.ADD_REPLICAS, "RequestsWaiting", 70, 3),
    ),
    (
        "queue-at-the-replica-ceiling-keeps",
        Case(
            obs={"tpot_seconds": 0.030, "mean_batch": 40.0, "running": 280.0, "waiting": 60.0},
            current={"max_num_seqs": 70, "replicas": 4},
        ),
        (Action.KEEP, "ReplicaCeiling", 70, 4),
    ),
    (
        "headroom-and-no-queue-removes-one-replica",
        Case(obs={"tpot_seconds": 0.020, "mean_batch": 20.0, "running": 60.0}, current={"replicas": 3}),
        (Action.REMOVE_REPLICAS, "TPOTWellBelowSLO", 64, 2),
    ),
    (
        "headroom-but-rest-cannot-carry-demand-keeps",
        Case(obs={"tpot_seconds": 0.020, "mean_batch": 20.0, "running": 100.0}, current={"replicas": 2}),
        (Action.KEEP, "SLOMet", 64, 2),
    ),
    (
        "headroom-at-min-replicas-keeps",
        Case(obs={"tpot_seconds": 0.020, "mean_batch": 20.0, "running": 20.0}, current={"replicas": 1}),
        (Action.KEEP, "SLOMet", 64, 1),
    ),
    (
        "hpa-owns-replicas-so-only-seqs-are-written",
        Case(
            obs={"tpot_seconds": 0.070, "mean_batch": 100.0, "running": 200.0},
            current={"max_num_seqs": 128, "replicas": 2},
            hpa=True,
        ),
        (Action.SET_MAX_NUM_SEQS, "TPOTAboveSLO", 63, 2),
    ),
    (
        "hpa-owns-replicas-scale-down-is-only-recommended",
        Case(
            obs={"tpot_seconds": 0.020, "mean_batch": 20.0, "running": 60.0},
            current={"replicas": 3},
            hpa=True,
        ),
        (Action.KEEP, "TPOTWellBelowSLO", 64, 3),
    ),
    (
        "kv-exhaustion-lowers-seqs",
        Case(
            obs={
                "tpot_seconds": 0.046,
                "mean_batch": 64.0,
                "preemptions_per_second": 0.5,
                "kv_cache_usage": 0.99,
            }
        ),
        (Action.SET_MAX_NUM_SEQS, "KVCachePreempting", 48, 2),
    ),
]


@pytest.mark.parametrize(("case", "expected"), [(c, e) for _, c, e in CASES], ids=[i for i, _, _ in CASES])
def test_control_law(case: Case, expected: tuple[Action, str, int, int]) -> None:
    current = Current(
        **{
            "tensor_parallel_size": 1,
            "max_num_seqs": 64,
            "kv_cache_dtype": "auto",
            "replicas": 2,
            "max_num_seqs_limit": 256,
            **case.current,
        }
    )
    bounds = Bounds(**{"min_replicas": 1, "max_replicas": 4, "max_gpus": 8, **case.bounds})
    history = History(**case.history)
    tuning = Tuning(**{"cooldown_seconds": 300.0, "sample_deadline_seconds": 600.0, **case.tuning})
    decision = decide(
        current=current,
        observation=observation(**case.obs),
        slo_tpot_seconds=case.slo,
        model=LINEAR,
        bounds=bounds,
        tuning=tuning,
        history=history,
        now=NOW,
        hpa_present=case.hpa,
        rollout_in_progress=case.rollout,
        scaling_out=case.scaling_out,
        slo_ttft_seconds=case.ttft_slo,
        restart_seconds=case.restart_seconds,
        cold_start_seconds=case.cold_start_seconds,
    )
    action, reason, seqs, replicas = expected
    assert (decision.action, decision.reason, decision.max_num_seqs, decision.replicas) == (
        action,
        reason,
        seqs,
        replicas,
    ), decision.message
    assert "\n" not in decision.message
    # Every applied change, and every period spent rolling out, starts a cooldown.
    if decision.changes_plan or case.rollout:
        assert decision.history.last_change_time == NOW
    else:
        assert decision.history.last_change_time == history.last_change_time
    assert 0.5 <= decision.calibration.scale <= 4.0


def test_decision_messages_carry_the_numbers() -> None:
    decision = _law(
        Current(
            tensor_parallel_size=1,
            max_num_seqs=128,
            kv_cache_dtype="auto",
            replicas=2,
            max_num_seqs_limit=256,
        ),
        observation(tpot_seconds=0.070, mean_batch=100.0, running=200.0),
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


def _law(current: Current, obs: Observation, **kw: Any) -> Decision:
    """One period at the 50 ms SLO on the linear model, 1-4 replicas within 8 GPUs, default tuning."""
    bounds = Bounds(min_replicas=1, max_replicas=4, max_gpus=8)
    return decide(current=current, observation=obs, slo_tpot_seconds=SLO, model=LINEAR, bounds=bounds,
                  tuning=Tuning(), history=History(), now=NOW, **kw)  # fmt: skip


def test_hpa_recommendation_is_exposed() -> None:
    decision = _law(
        Current(
            tensor_parallel_size=1, max_num_seqs=64, kv_cache_dtype="auto", replicas=3, max_num_seqs_limit=256
        ),
        observation(tpot_seconds=0.020, mean_batch=20.0, running=60.0),
        hpa_present=True,
    )
    assert (decision.replicas, decision.recommended_replicas, decision.recommend_only) == (3, 2, True)
    assert "an HPA owns replicas: recommending 2" in decision.message


def decide_args(**more: Any) -> dict[str, Any]:
    """decide()'s arguments but observation, history and time: 2 replicas of 64 seats, the linear model."""
    return {
        "current": Current(
            tensor_parallel_size=1, max_num_seqs=64, kv_cache_dtype="auto", replicas=2, max_num_seqs_limit=256
        ),
        "slo_tpot_seconds": SLO,
        "model": LINEAR,
        "bounds": Bounds(min_replicas=1, max_replicas=4, max_gpus=8),
        "tuning": Tuning(),
        **more,
    }


def test_waiting_clock_starts_once_and_resets_when_samples_arrive() -> None:
    args = decide_args()
    first = decide(observation=observation(sample_count=3), history=History(), now=NOW, **args)
    assert first.history.waiting_for_samples_since == NOW
    second = decide(observation=observation(sample_count=3), history=first.history, now=NOW + 30, **args)
    assert second.history.waiting_for_samples_since == NOW
    third = decide(observation=observation(sample_count=300), history=second.history, now=NOW + 60, **args)
    assert third.history.waiting_for_samples_since is None


def test_the_trend_baseline_is_held_for_half_a_window_so_a_short_period_still_sees_a_ramp() -> None:
    """Periods of 3 s against a 60 s window (the e2e tests' rhythm): every period's mean shares most of
    its samples with the last one's, so the baseline stays until it is 30 s old. A steady load whose
    mean jumps by one odd sample is no trend; a ramp of 1 request/s is seen once the baseline is 30 s old."""
    args = decide_args(cold_start_seconds=120.0)

    def at(batch: float) -> Observation:
        return observation(tpot_seconds=0.045, mean_batch=batch, running=2 * batch, waiting=0.0)

    history = decide(observation=at(45.0), history=History(), now=NOW, **args).history
    assert (history.demand, history.demand_time) == (90.0, NOW)
    # 3 s later the mean jumped by 15 (one odd sample in a handful): past sqrt(90), but no trend yet.
    blip = decide(observation=at(52.5), history=history, now=NOW + 3, **args)
    assert (blip.action, blip.reason) == (Action.KEEP, "SLOMet"), blip.message
    assert (blip.history.demand, blip.history.demand_time) == (90.0, NOW)  # the baseline is held
    # A real ramp: 30 more over the 30 s since the baseline: 120 + 1/s x 90 s needs 4 replicas at 64.
    ramp = decide(observation=at(60.0), history=blip.history, now=NOW + 30, **args)
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
    current = Current(
        tensor_parallel_size=1, max_num_seqs=70, kv_cache_dtype="auto", replicas=2, max_num_seqs_limit=256
    )
    history = History()
    changes: list[str] = []
    demand = 120.0
    for i in range(200):
        noise = ((i * 7919) % 17 - 8) / 100.0
        batch = min(current.max_num_seqs, demand / current.replicas)
        waiting = max(0.0, demand - batch * current.replicas)
        obs = observation(
            tpot_seconds=1.1625 * linear(round(batch)) * (1.0 + noise),
            mean_batch=batch,
            running=batch * current.replicas,
            waiting=waiting,
        )
        decision = decide(
            current=current,
            observation=obs,
            slo_tpot_seconds=SLO,
            model=LINEAR,
            bounds=Bounds(min_replicas=1, max_replicas=4, max_gpus=8),
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


def period(*, obs: dict[str, Any] | None = None, history: dict[str, Any] | None = None, **kw: Any) -> Period:
    values: dict[str, Any] = {
        "current": Current(
            tensor_parallel_size=1, max_num_seqs=64, kv_cache_dtype="auto", replicas=2, max_num_seqs_limit=256
        ),
        "observation": observation(**(obs or {})),
        "slo_tpot_seconds": SLO,
        "bounds": Bounds(min_replicas=1, max_replicas=4, max_gpus=8),
        "tuning": Tuning(cooldown_seconds=300.0, sample_deadline_seconds=600.0),
        "history": History(**(history or {})),
        "now": NOW,
    }
    values.update(kw)
    return Period(**values)


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
            "current": Current(
                tensor_parallel_size=1,
                max_num_seqs=16,
                kv_cache_dtype="auto",
                replicas=2,
                max_num_seqs_limit=256,
            ),
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
            "bounds": Bounds(min_replicas=1, max_replicas=2, max_gpus=8),
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
            current=Current(
                tensor_parallel_size=1,
                max_num_seqs=17,
                kv_cache_dtype="auto",
                replicas=3,
                max_num_seqs_limit=256,
            ),
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
    law = {
        "slo_tpot_seconds": SLO,
        "model": LINEAR,
        "bounds": Bounds(min_replicas=1, max_replicas=4, max_gpus=8),
        "tuning": Tuning(cooldown_seconds=300.0),
        "history": History(),
        "now": NOW,
        "restart_seconds": 40.0,
    }
    current = Current(
        tensor_parallel_size=1, max_num_seqs=40, kv_cache_dtype="auto", replicas=2, max_num_seqs_limit=256
    )
    queued = observation(tpot_seconds=0.030, mean_batch=40.0, running=80.0, waiting=30.0)
    raised = decide(current=current, observation=queued, **law)
    assert raised.action == Action.SET_MAX_NUM_SEQS
    assert raised.message.endswith("restarting the 2 pod(s) takes about 40s at the predicted cold start")
    slow = observation(tpot_seconds=0.070, mean_batch=100.0, running=200.0)
    added = decide(current=replace(current, max_num_seqs=128), observation=slow, **law)
    assert added.action == Action.ADD_REPLICAS and "cold start" not in added.message


def test_the_largest_batch_measured_within_the_slo_is_remembered_and_a_miss_below_it_forgets_it() -> None:
    def period_at(tpot: float, batch: float, history: History) -> Decision:
        return decide(
            current=Current(
                tensor_parallel_size=1,
                max_num_seqs=64,
                kv_cache_dtype="auto",
                replicas=2,
                max_num_seqs_limit=256,
            ),
            observation=observation(tpot_seconds=tpot, mean_batch=batch, running=2 * batch),
            slo_tpot_seconds=SLO,
            model=LINEAR,
            bounds=Bounds(min_replicas=1, max_replicas=4, max_gpus=8),
            tuning=Tuning(cooldown_seconds=300.0),
            history=history,
            now=NOW,
        )

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
        return decide(
            current=Current(
                tensor_parallel_size=1,
                max_num_seqs=64,
                kv_cache_dtype="auto",
                replicas=1,
                max_num_seqs_limit=256,
            ),
            observation=observation(tpot_seconds=tpot, mean_batch=64.0, running=64.0, waiting=40.0),
            slo_tpot_seconds=SLO,
            model=LINEAR,
            bounds=Bounds(min_replicas=1, max_replicas=1, max_gpus=1, fp8_kv_allowed=False),
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
    kept = decide(
        current=Current(
            tensor_parallel_size=1, max_num_seqs=40, kv_cache_dtype="auto", replicas=1, max_num_seqs_limit=256
        ),
        observation=observation(tpot_seconds=0.098, mean_batch=3.0, running=3.0, sample_count=16),
        slo_tpot_seconds=SLO,
        model=LINEAR,
        bounds=Bounds(min_replicas=1, max_replicas=1, max_gpus=1),
        tuning=Tuning(cooldown_seconds=30.0, min_samples=10),
        history=replace(history, last_change_time=NOW - 10),
        now=NOW,
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
