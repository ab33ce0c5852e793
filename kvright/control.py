"""The control law: from a plan, its prediction and a live observation to one bounded, explained move.

Pure: no IO, no clock (``now`` is an argument), no Kubernetes. The operator gathers an
:class:`~kvright.observe.Observation`, calls :func:`decide`, and acts on the :class:`Decision`
(patch the Deployment, re-plan, post an event with ``decision.message``, set conditions).

The law, in the order it is applied (docs/feedback.md explains it with tuning advice):

1. No usable metrics -> keep everything (reason from the observation). A rollout still in progress
   -> keep, and restart the cooldown (the window must only see the plan being judged).
2. Fewer than ``min_samples`` finished requests in the window -> wait, but only until
   ``sample_deadline_seconds``: after that act on what there is, and with no traffic at all scale
   down one replica at a time towards ``min_replicas`` (the loop never stalls for lack of data).
3. Calibrate the serving model (:func:`capacity.learn`) at the batch that was actually served: the
   scale is an EWMA of observed over predicted mean TPOT, bounded to ``calibration_bounds``; the tail
   is the window's percentile-over-mean against the predicted one. The law then judges every batch
   by ``model.tpot_seconds(batch, calibration)``, the curve the planner sized the plan with.
4. The target batch per replica is the largest batch whose calibrated TPOT stays within
   ``target_fraction x SLO`` (and within the memory limit on max-num-seqs).
5. Cooldown: no change within ``cooldown_seconds`` of the last one.
6. TPOT above the SLO: lower max-num-seqs to the target batch (at most a factor ``max_seqs_step``
   per move; one such step when the calibrated model says even batch 1 misses) and add replicas for
   the demand that no longer fits (at most ``max_replicas_step`` per move), within min/max replicas
   and the GPU budget. When that cannot meet the SLO (the uncalibrated roofline says batch 1 is too
   slow, or the budget cannot hold the demand at the target batch) ask for a re-plan: fp8 KV cache
   first, then a larger tensor-parallel degree.
7. KV cache exhausted (preemptions while usage is near 1): lower max-num-seqs one step.
8. TPOT below ``(1 - deadband) x SLO``: with requests queued (waiting while the slots or the KV cache
   are full), raise max-num-seqs towards the target batch or add replicas; with none waiting, remove
   one replica if the rest can carry the demand at the target batch. Never scale down while requests
   wait.
9. Otherwise (inside the deadband) keep.

If an HPA targets the workload, replica changes become recommendations (``recommend_only``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from capacity import UNCALIBRATED, Calibration, learn

if TYPE_CHECKING:  # a typed value only; importing the IO module at runtime would drag `requests` in
    from kvright.observation import Observation

__all__ = [
    "Action",
    "Bounds",
    "Current",
    "Decision",
    "History",
    "TPOTModel",
    "Tuning",
    "decide",
    "target_batch",
]


class Action(StrEnum):
    """What the operator should do."""

    KEEP = "Keep"
    WAIT = "Wait"
    SET_MAX_NUM_SEQS = "SetMaxNumSeqs"
    ADD_REPLICAS = "AddReplicas"
    REMOVE_REPLICAS = "RemoveReplicas"
    REPLAN = "Replan"


@dataclass(frozen=True, kw_only=True)
class Tuning:
    """Knobs of the control law. Production defaults; tests shrink the times to seconds."""

    deadband: float = 0.15
    """Scale down or loosen only when TPOT < (1 - deadband) x SLO."""
    target_fraction: float = 0.9
    """New batches are sized for TPOT = target_fraction x SLO (headroom for noise)."""
    cooldown_seconds: float = 600.0
    """No change within this long of the previous one."""
    min_samples: int = 50
    """Finished requests in the window needed before acting."""
    sample_deadline_seconds: float = 900.0
    """Stop waiting for min_samples after this long and act on what there is."""
    max_replicas_step: int = 2
    """Most replicas added in one move (removal is always one at a time)."""
    max_seqs_step: float = 2.0
    """max-num-seqs moves by at most this factor per move."""
    calibration_alpha: float = 0.5
    """EWMA weight of the newest observed/predicted TPOT ratio."""
    calibration_bounds: tuple[float, float] = (0.5, 4.0)
    """The calibration factor is clamped to this range: a wilder ratio means a broken metric, not physics."""
    preemption_threshold_per_second: float = 0.05
    """Preemptions per second (all replicas) that, with KV usage >= 0.95, count as KV exhaustion."""

    def __post_init__(self) -> None:
        problems = []
        if not 0.0 <= self.deadband < 1.0:
            problems.append(f"deadband {self.deadband} (accepted: 0 <= deadband < 1)")
        if not 0.0 < self.target_fraction <= 1.0:
            problems.append(f"target_fraction {self.target_fraction} (accepted: 0 < f <= 1)")
        if self.min_samples < 1:
            problems.append(f"min_samples {self.min_samples} (accepted: >= 1)")
        if self.max_replicas_step < 1:
            problems.append(f"max_replicas_step {self.max_replicas_step} (accepted: >= 1)")
        if self.max_seqs_step <= 1.0:
            problems.append(f"max_seqs_step {self.max_seqs_step} (accepted: > 1)")
        if not 0.0 < self.calibration_alpha <= 1.0:
            problems.append(f"calibration_alpha {self.calibration_alpha} (accepted: 0 < alpha <= 1)")
        low, high = self.calibration_bounds
        if not 0.0 < low <= 1.0 <= high:
            problems.append(f"calibration_bounds {self.calibration_bounds} (accepted: 0 < low <= 1 <= high)")
        if self.cooldown_seconds < 0 or self.sample_deadline_seconds < 0:
            problems.append("cooldown_seconds and sample_deadline_seconds must be >= 0")
        if problems:
            raise ValueError("invalid control tuning: " + "; ".join(problems))


class TPOTModel(Protocol):
    """TPOT as a function of the batch: :class:`capacity.Curve`, the serving model the planner sized the
    plan with (same shape, same percentile), so the planner and the law agree by construction."""

    def mean_seconds(self, batch: int) -> float:
        """Uncalibrated mean TPOT at ``batch``."""
        ...

    def percentile_seconds(self, batch: int) -> float:
        """Uncalibrated TPOT at the SLO's percentile at ``batch``."""
        ...

    def tpot_seconds(self, batch: int, calibration: Calibration = UNCALIBRATED) -> float:
        """Calibrated TPOT at the SLO's percentile at ``batch``."""
        ...


@dataclass(frozen=True, kw_only=True)
class Current:
    """The plan that is deployed now."""

    tensor_parallel_size: int
    max_num_seqs: int
    kv_cache_dtype: str
    replicas: int
    max_num_seqs_limit: int
    """Largest max-num-seqs the KV cache can hold at the workload's context (the planner's memory bound)."""


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """Limits from the spec and from the model's TP rules."""

    min_replicas: int
    max_replicas: int
    max_gpus: int
    fp8_kv_allowed: bool = True
    """False when the spec pins the KV-cache dtype."""
    larger_tensor_parallel_size: int | None = None
    """The next valid TP above the current one (capacity.valid_tensor_parallel_sizes), or None."""

    def replica_ceiling(self, tensor_parallel_size: int) -> int:
        """Most replicas allowed: max_replicas and the GPU budget, whichever binds."""
        return max(0, min(self.max_replicas, self.max_gpus // max(1, tensor_parallel_size)))


@dataclass(frozen=True, kw_only=True)
class History:
    """What the loop remembers between periods (kept in status by the operator)."""

    calibration: Calibration = UNCALIBRATED
    """The serving model's calibration learned so far."""
    last_change_time: float | None = None
    """When the last change was applied, or last seen still rolling out (unix seconds)."""
    waiting_for_samples_since: float | None = None
    """When the loop started waiting for min_samples; None when it is not waiting."""


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One move with its reason and the numbers behind it."""

    action: Action
    reason: str
    """CamelCase, for events and conditions."""
    message: str
    """One line with the numbers that caused the move."""
    max_num_seqs: int
    replicas: int
    """Replicas to write (unchanged when recommend_only)."""
    recommended_replicas: int
    """What kvright would run; differs from `replicas` only when an HPA owns the replica count."""
    recommend_only: bool = False
    kv_cache_dtype: str | None = None
    """For Replan: the KV-cache dtype to plan with."""
    tensor_parallel_size: int | None = None
    """For Replan: the TP degree to plan with."""
    slo_met: bool | None = None
    """True/False when TPOT was measured; None when unknown."""
    tpot_ratio: float | None = None
    """Observed TPOT / SLO."""
    calibration: Calibration = UNCALIBRATED
    history: History = field(default_factory=History)

    @property
    def changes_plan(self) -> bool:
        return self.action in (
            Action.SET_MAX_NUM_SEQS,
            Action.ADD_REPLICAS,
            Action.REMOVE_REPLICAS,
            Action.REPLAN,
        )


def target_batch(predict: Callable[[int], float], *, budget_seconds: float, limit: int) -> int:
    """Largest batch b in [1, limit] with predict(b) <= budget_seconds; 0 when even b=1 is too slow.

    `predict` must be non-decreasing in b (decode steps get slower with batch), so bisection is exact.
    """
    budget = budget_seconds * (1.0 + 1e-9)  # a prediction equal to the budget fits, float rounding aside
    if limit < 1 or predict(1) > budget:
        return 0
    if predict(limit) <= budget:
        return limit
    low, high = 1, limit  # predict(low) fits, predict(high) does not
    while high - low > 1:
        mid = (low + high) // 2
        if predict(mid) <= budget:
            low = mid
        else:
            high = mid
    return low


def _ms(seconds: float) -> str:
    return f"{seconds * 1000.0:.1f} ms"


def decide(
    *,
    current: Current,
    observation: Observation,
    slo_tpot_seconds: float,
    model: TPOTModel,
    bounds: Bounds,
    tuning: Tuning,
    history: History,
    now: float,
    hpa_present: bool = False,
    rollout_in_progress: bool = False,
) -> Decision:
    """One period of the control law (see the module docstring). Pure and total: never raises on data."""
    obs = observation
    seqs, reps, tp = current.max_num_seqs, current.replicas, current.tensor_parallel_size
    ceiling = bounds.replica_ceiling(tp)

    def out(
        action: Action,
        reason: str,
        message: str,
        *,
        new_seqs: int = seqs,
        new_reps: int = reps,
        hist: History = history,
        calibration: Calibration = history.calibration,
        slo_met: bool | None = None,
        ratio: float | None = None,
        kv_cache_dtype: str | None = None,
        tensor_parallel_size: int | None = None,
    ) -> Decision:
        recommend_only = hpa_present and new_reps != reps
        applied_reps = reps if hpa_present else new_reps
        if recommend_only:
            message += f"; an HPA owns replicas: recommending {new_reps}, not writing it"
            if action in (Action.ADD_REPLICAS, Action.REMOVE_REPLICAS):
                action = Action.SET_MAX_NUM_SEQS if new_seqs != seqs else Action.KEEP
        changed = action in (
            Action.SET_MAX_NUM_SEQS,
            Action.ADD_REPLICAS,
            Action.REMOVE_REPLICAS,
            Action.REPLAN,
        )
        hist = replace(hist, calibration=calibration)
        if changed:
            hist = replace(hist, last_change_time=now)
        return Decision(
            action=action,
            reason=reason,
            message=message,
            max_num_seqs=new_seqs,
            replicas=applied_reps,
            recommended_replicas=new_reps,
            recommend_only=recommend_only,
            kv_cache_dtype=kv_cache_dtype,
            tensor_parallel_size=tensor_parallel_size,
            slo_met=slo_met,
            tpot_ratio=ratio,
            calibration=calibration,
            history=hist,
        )

    # 1. Metrics, and a plan that is actually in place.
    if not obs.available:
        return out(Action.KEEP, obs.reason, f"no action: {obs.message}")
    if rollout_in_progress:
        # The window mixes old and new pods: measuring now would judge a plan that is not running yet.
        # The cooldown restarts, so the next decision sees a window taken after the rollout.
        return out(
            Action.KEEP,
            "RolloutInProgress",
            f"the Deployment is still rolling out max-num-seqs {seqs} x {reps} replica(s); "
            f"the cooldown of {tuning.cooldown_seconds:.0f}s starts when it is done",
            hist=replace(history, last_change_time=now),
        )

    in_cooldown = (
        history.last_change_time is not None and now - history.last_change_time < tuning.cooldown_seconds
    )
    waiting = obs.waiting if obs.waiting is not None else 0.0
    running = obs.running if obs.running is not None else (obs.mean_batch or 0.0) * reps
    demand = running + waiting
    # A queue is a capacity signal only when the slots or the KV cache are full: a request that arrived
    # between two steps waits for the next one while seats are free, and must not buy a replica.
    slots_full = running >= 0.9 * seqs * reps or (obs.kv_cache_usage or 0.0) >= 0.9
    queued = waiting >= 1.0 and slots_full

    # 2. Samples, with a deadline.
    waiting_since = history.waiting_for_samples_since
    if obs.sample_count < tuning.min_samples:
        since = waiting_since if waiting_since is not None else now
        waited = now - since
        if waited < tuning.sample_deadline_seconds:
            return out(
                Action.WAIT,
                "InsufficientSamples",
                f"{obs.sample_count} of {tuning.min_samples} requests in {obs.window_seconds}s; "
                f"waiting {waited:.0f}s of at most {tuning.sample_deadline_seconds:.0f}s",
                hist=replace(history, waiting_for_samples_since=since),
            )
        hist_after = replace(history, waiting_for_samples_since=since)
        if obs.tpot_seconds is None:
            if demand == 0 and reps > bounds.min_replicas:
                if in_cooldown:
                    return out(
                        Action.KEEP,
                        "Cooldown",
                        "no traffic, but a change was made within the cooldown",
                        hist=hist_after,
                    )
                return out(
                    Action.REMOVE_REPLICAS,
                    "NoTraffic",
                    f"no finished requests for {waited:.0f}s and none running or waiting; "
                    f"replicas {reps} -> {reps - 1} (min {bounds.min_replicas})",
                    new_reps=reps - 1,
                    hist=hist_after,
                )
            return out(
                Action.KEEP,
                "NoTraffic" if demand == 0 else "InsufficientSamples",
                f"no finished requests in {obs.window_seconds}s after waiting {waited:.0f}s; "
                f"{running:.0f} running, {waiting:.0f} waiting; nothing to measure",
                hist=hist_after,
            )
        sample_note = (
            f" (only {obs.sample_count} samples; deadline of {tuning.sample_deadline_seconds:.0f}s passed)"
        )
    else:
        hist_after = replace(history, waiting_for_samples_since=None)
        sample_note = f" ({obs.sample_count} samples)"

    observed = obs.tpot_seconds
    if observed is None:  # available with enough samples always carries TPOT; stay total anyway
        return out(Action.KEEP, "TPOTUnavailable", "TPOT not measured", hist=hist_after)

    # 3. Calibrate at the batch actually served (capacity.learn: the mean TPOT, exact from the histogram's
    # _sum/_count, against the predicted mean; the percentile's spread over the mean against the predicted
    # spread), then judge every batch by the same calibrated curve the planner sized the plan with.
    served_batch = obs.mean_batch if obs.mean_batch is not None and obs.mean_batch >= 1 else None
    mean = obs.tpot_mean_seconds if obs.tpot_mean_seconds is not None and obs.tpot_mean_seconds > 0 else None
    calibration = history.calibration
    if served_batch is not None:
        served = max(1, round(served_batch))
        calibration = learn(
            history.calibration,
            predicted_mean_seconds=model.mean_seconds(served),
            predicted_percentile_seconds=model.percentile_seconds(served),
            observed_mean_seconds=mean,
            observed_percentile_seconds=observed,
            alpha=tuning.calibration_alpha,
            bounds=tuning.calibration_bounds,
        )

    def calibrated(batch: int) -> float:
        return model.tpot_seconds(batch, calibration)

    ratio = observed / slo_tpot_seconds
    slo_met = ratio <= 1.0
    head = (
        f"p{obs.percentile} TPOT {_ms(observed)} vs SLO {_ms(slo_tpot_seconds)} (x{ratio:.2f}){sample_note}"
    )

    def act(
        action: Action,
        reason: str,
        message: str,
        *,
        new_seqs: int = seqs,
        new_reps: int = reps,
        kv_cache_dtype: str | None = None,
        tensor_parallel_size: int | None = None,
    ) -> Decision:
        return out(
            action,
            reason,
            message,
            new_seqs=new_seqs,
            new_reps=new_reps,
            hist=hist_after,
            calibration=calibration,
            slo_met=slo_met,
            ratio=ratio,
            kv_cache_dtype=kv_cache_dtype,
            tensor_parallel_size=tensor_parallel_size,
        )

    # 4. Target batch per replica under the calibrated model.
    target = target_batch(
        calibrated, budget_seconds=tuning.target_fraction * slo_tpot_seconds, limit=current.max_num_seqs_limit
    )
    detail = (
        f"calibration x{calibration.scale:.2f} (tail x{calibration.tail:.2f}), target batch {target}, "
        f"demand {demand:.0f} "
        f"({running:.0f} running, {waiting:.0f} waiting), max-num-seqs {seqs}, replicas {reps}"
    )

    def replan(why: str) -> Decision:
        if bounds.fp8_kv_allowed and not current.kv_cache_dtype.startswith("fp8"):
            return act(
                Action.REPLAN,
                "ReplanFP8KVCache",
                f"{head}; {why}; re-plan with fp8 KV cache; {detail}",
                kv_cache_dtype="fp8",
            )
        larger = bounds.larger_tensor_parallel_size
        if larger is not None and larger <= bounds.max_gpus:
            return act(
                Action.REPLAN,
                "ReplanLargerTP",
                f"{head}; {why}; re-plan with tensor-parallel {tp} -> {larger}; {detail}",
                tensor_parallel_size=larger,
            )
        return act(
            Action.KEEP,
            "SLOUnattainable",
            f"{head}; {why}; no cheaper move left (KV dtype {current.kv_cache_dtype}, TP {tp}, "
            f"{ceiling} replica(s) max); {detail}",
        )

    # 5. Cooldown.
    if in_cooldown and (ratio > 1.0 or ratio < 1.0 - tuning.deadband or queued):
        assert history.last_change_time is not None
        left = tuning.cooldown_seconds - (now - history.last_change_time)
        return act(
            Action.KEEP,
            "Cooldown",
            f"{head}; cooldown {left:.0f}s left; {detail}",
        )

    min_step = max(1, math.floor(seqs / tuning.max_seqs_step))
    max_step = max(seqs + 1, math.ceil(seqs * tuning.max_seqs_step))

    # 6. Too slow.
    if ratio > 1.0:
        floor = model.tpot_seconds(1)
        if floor > tuning.target_fraction * slo_tpot_seconds:
            # The roofline itself (no calibration) says one sequence is too slow: only a new plan helps.
            return replan(f"even batch 1 is predicted at {_ms(floor)} by the roofline")
        # When only the calibrated model says batch 1 misses, the calibration (learned at a large batch)
        # may overstate small batches: step down one bounded step and measure again.
        new_seqs = max(min(target, seqs), min_step) if target >= 1 else min_step
        needed = math.ceil(demand / new_seqs) if demand > 0 else reps
        new_reps = max(min(max(needed, reps), reps + tuning.max_replicas_step, ceiling), bounds.min_replicas)
        short = (
            f"demand {demand:.0f} needs {needed} replicas at batch {new_seqs}, the budget allows {ceiling}"
            if needed > ceiling
            else ""
        )
        note = f" ({short})" if short else ""
        if new_reps > reps:
            return act(
                Action.ADD_REPLICAS,
                "TPOTAboveSLO",
                f"{head}; max-num-seqs {seqs} -> {new_seqs}, replicas {reps} -> {new_reps}{note}; {detail}",
                new_seqs=new_seqs,
                new_reps=new_reps,
            )
        if new_seqs < seqs:
            return act(
                Action.SET_MAX_NUM_SEQS,
                "TPOTAboveSLO",
                f"{head}; max-num-seqs {seqs} -> {new_seqs}{note}; {detail}",
                new_seqs=new_seqs,
            )
        if short:
            return replan(short)
        return act(
            Action.KEEP,
            "TPOTAboveSLO",
            f"{head}; the plan already fits the calibrated model (target batch {target}); "
            f"recalibrating before moving; {detail}",
        )

    # 7. KV exhaustion.
    preempting = (
        obs.preemptions_per_second is not None
        and obs.preemptions_per_second >= tuning.preemption_threshold_per_second
        and obs.kv_cache_usage is not None
        and obs.kv_cache_usage >= 0.95
    )
    if preempting and seqs > 1 and not in_cooldown:
        new_seqs = max(min_step, math.floor(seqs * 0.75), 1)
        return act(
            Action.SET_MAX_NUM_SEQS,
            "KVCachePreempting",
            f"{head}; {obs.preemptions_per_second:.2f} preemptions/s at KV usage "
            f"{(obs.kv_cache_usage or 0) * 100:.0f}%; max-num-seqs {seqs} -> {new_seqs}; {detail}",
            new_seqs=new_seqs,
        )

    # 8. Headroom.
    if ratio < 1.0 - tuning.deadband:
        if queued:
            if target > seqs:
                new_seqs = min(target, max_step, current.max_num_seqs_limit)
                return act(
                    Action.SET_MAX_NUM_SEQS,
                    "QueueWithHeadroom",
                    f"{head}; {waiting:.0f} waiting; max-num-seqs {seqs} -> {new_seqs}; {detail}",
                    new_seqs=new_seqs,
                )
            needed = math.ceil(demand / max(1, seqs))
            new_reps = min(max(needed, reps + 1), reps + tuning.max_replicas_step, ceiling)
            if new_reps > reps:
                return act(
                    Action.ADD_REPLICAS,
                    "RequestsWaiting",
                    f"{head}; {waiting:.0f} waiting at max-num-seqs {seqs}; replicas {reps} -> {new_reps}; "
                    f"{detail}",
                    new_reps=new_reps,
                )
            return act(
                Action.KEEP,
                "ReplicaCeiling",
                f"{head}; {waiting:.0f} waiting but replicas are at the ceiling {ceiling}; {detail}",
            )
        if reps > bounds.min_replicas and target >= 1 and waiting == 0:
            per_replica_after = demand / (reps - 1)
            if per_replica_after <= min(target, seqs):
                return act(
                    Action.REMOVE_REPLICAS,
                    "TPOTWellBelowSLO",
                    f"{head}; demand fits {reps - 1} replica(s) at batch {per_replica_after:.1f} "
                    f"(predicted {_ms(calibrated(max(1, math.ceil(per_replica_after))))}); "
                    f"replicas {reps} -> {reps - 1}; {detail}",
                    new_reps=reps - 1,
                )
        return act(
            Action.KEEP,
            "SLOMet",
            f"{head}; headroom but nothing to release; {detail}",
        )

    # 9. Deadband.
    if queued and not in_cooldown and target > seqs:
        # Within the band but queueing: loosen max-num-seqs only as far as the target allows.
        new_seqs = min(target, max_step, current.max_num_seqs_limit)
        if new_seqs > seqs:
            return act(
                Action.SET_MAX_NUM_SEQS,
                "QueueWithHeadroom",
                f"{head}; {waiting:.0f} waiting; max-num-seqs {seqs} -> {new_seqs}; {detail}",
                new_seqs=new_seqs,
            )
    return act(Action.KEEP, "SLOMet", f"{head}; within the deadband; {detail}")
