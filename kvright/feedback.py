"""The feedback seam of a reconcile: gather (Prometheus, HPAs, the rollout) -> decide (pure) -> overrides.

The operator calls, once per reconcile of an LLMDeployment (level-based, every
``KVRIGHT_RECONCILE_SECONDS``):

1. :func:`gather` (IO): the :class:`~kvright.observe.Observation` over ``spec.feedback.windowSeconds``,
   whether an HPA targets the workload, and whether the Deployment is still rolling out;
2. :func:`decide` (pure): runs :func:`kvright.control.decide` against the plan in status and returns
   the :class:`kvright.reconcile.Overrides` for this reconcile's planning, the ``observed`` and
   ``calibration`` status fields, the ``MetricsAvailable`` and ``SLOMet`` conditions and the events;
3. the operator plans with those overrides, applies, and merges :meth:`FeedbackResult.into_status`.

The loop's memory lives in ``status.calibration`` (the factor, the pins it set, the time of the last
change, the last decision), so it survives operator restarts and is visible to users.

Modes (``spec.feedback.mode``): ``Off`` reports nothing and pins nothing; ``Observe`` measures,
calibrates and shows what it *would* do (``status.calibration.lastDecision``) without changing the
plan; ``Adjust`` also applies it.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import capacity
from kvright import conditions as cond
from kvright.api import LLMDeploymentSpec, SpecError
from kvright.conditions import Condition
from kvright.control import Action, Bounds, Current, Decision, History, Tuning
from kvright.control import decide as control_decide
from kvright.observe import Observation, PrometheusClient, observe
from kvright.reasons import Reason
from kvright.reconcile import Event, Facts, Overrides, desire

__all__ = ["FeedbackFacts", "FeedbackResult", "decide", "gather", "run", "serving_curve"]

KV_GAP_WARN = 0.2
"""Relative gap between vLLM's real KV capacity and the predicted one that earns a warning event."""


class Reader(Protocol):
    """What gather needs from the API server (kvright.operator.Kube provides it)."""

    def get(self, path: str) -> dict[str, Any] | None: ...

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True, kw_only=True)
class FeedbackFacts:
    """What the loop gathered for one LLMDeployment."""

    observation: Observation | None
    """None when feedback is off or Prometheus is not configured."""
    hpa: str | None = None
    """Name of an HPA targeting the LLMDeployment or its Deployment, if any."""
    rollout_in_progress: bool = False
    scaling_out: bool = False
    """The rollout in progress only adds pods of the running template (no pod is replaced)."""
    prometheus_configured: bool = True


@dataclass(frozen=True, kw_only=True)
class FeedbackResult:
    overrides: Overrides
    observed: dict[str, Any] | None
    calibration: dict[str, Any] | None
    conditions: tuple[Condition, ...]
    events: tuple[Event, ...] = ()
    decision: Decision | None = None
    previous: Mapping[str, Any] = field(default_factory=dict)
    """The status this was decided on (to null out keys that are gone)."""

    def into_status(
        self, status: dict[str, Any], *, generation: int, now: datetime.datetime
    ) -> dict[str, Any]:
        """``status`` with observed, calibration and the feedback conditions merged in."""
        out = dict(status)
        # Status is written as a JSON merge patch: a key that is no longer reported must be sent as null,
        # or the API server keeps the stale value (e.g. a TPOT from before Prometheus went away).
        if self.observed is not None:
            out["observed"] = _nulls_for_gone(self.observed, self.previous.get("observed"))
        if self.calibration is not None:
            out["calibration"] = _nulls_for_gone(self.calibration, self.previous.get("calibration"))
        out["conditions"] = cond.merge(out.get("conditions"), self.conditions, generation=generation, now=now)
        return out


def run(
    facts: Facts, *, kube: Reader, prometheus: PrometheusClient | None, now: datetime.datetime
) -> FeedbackResult:
    """Gather and decide for one reconcile. A bug here must not stop reconciling: it becomes an Unknown
    MetricsAvailable condition with the error, and the last pins stay in force."""
    try:
        return decide(facts, gather(facts, kube=kube, prometheus=prometheus, now=now), now=now)
    except Exception as exc:
        history, pins = _memory(facts.current_status)
        return FeedbackResult(
            overrides=_overrides(history, pins),
            observed=None,
            calibration=None,
            conditions=(
                Condition(
                    type=cond.METRICS_AVAILABLE,
                    status="Unknown",
                    reason=Reason.FEEDBACK_FAILED,
                    message=f"the feedback loop failed: {type(exc).__name__}: {exc}",
                ),
            ),
        )


def _nulls_for_gone(new: dict[str, Any], previous: Any) -> dict[str, Any]:
    if not isinstance(previous, Mapping):
        return new
    return {**{key: None for key in previous if key not in new}, **new}


# -- gather (IO) ----------------------------------------------------------------------------------------


def gather(
    facts: Facts, *, kube: Reader, prometheus: PrometheusClient | None, now: datetime.datetime
) -> FeedbackFacts:
    """Observe Prometheus (its failures become the observation's error) and read the HPAs and the
    Deployment (an API error, a 403 included, raises: :func:`run` reports it)."""
    spec = facts.spec_or_error
    if isinstance(spec, SpecError):
        return FeedbackFacts(observation=None, prometheus_configured=prometheus is not None)
    if spec.feedback.mode == "Off" or prometheus is None:
        return FeedbackFacts(observation=None, prometheus_configured=prometheus is not None)
    observation = observe(
        prometheus,
        namespace=facts.namespace,
        name=facts.name,
        window_seconds=spec.feedback.window_seconds,
        percentile=spec.slo.percentile,
        now=now.timestamp(),
    )
    rolling, adding = _rolling_out(kube, facts.namespace, facts.name)
    return FeedbackFacts(
        observation=observation,
        hpa=_hpa_targeting(kube, facts.namespace, facts.name),
        rollout_in_progress=rolling,
        scaling_out=adding,
    )


def _hpa_targeting(kube: Reader, namespace: str, name: str) -> str | None:
    """The HPA that owns the replicas, if any. No API (404) reads as none; any other error raises, a
    403 included, so that :func:`run` reports it (MetricsAvailable Unknown, FeedbackFailed, naming the
    request) and the loop does not act while it cannot tell whether an HPA owns the replicas."""
    listing = kube.get(f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers")
    for hpa in (listing or {}).get("items") or []:
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        if ref.get("name") == name and ref.get("kind") in ("LLMDeployment", "Deployment"):
            return str((hpa.get("metadata") or {}).get("name", "?"))
    return None


def _rolling_out(kube: Reader, namespace: str, name: str) -> tuple[bool, bool]:
    """Whether the Deployment is still rolling out, and whether that rollout only adds pods of the
    running template (every pod is of the current template, fewer are ready than wanted); none (404) is
    not rolling. Errors raise, as in :func:`_hpa_targeting`: a refused read is not a finished rollout."""
    live = kube.deployment(namespace, name)
    if live is None:
        return False, False
    meta, spec, status = live.get("metadata") or {}, live.get("spec") or {}, live.get("status") or {}
    want = int(spec.get("replicas", 1) or 0)
    seen = int(status.get("observedGeneration", 0) or 0) >= int(meta.get("generation", 0) or 0)
    updated = int(status.get("updatedReplicas", 0) or 0)
    ready = int(status.get("readyReplicas", 0) or 0)
    total = int(status.get("replicas", 0) or 0)
    rolling = not seen or updated < want or ready < want or total > want
    adding = seen and rolling and updated == total <= want and ready < want
    return rolling, adding


# -- decide (pure) ------------------------------------------------------------------------------------


def _time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return (
            datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()
        )
    except ValueError:
        return None


def _stamp(unix: float | None) -> str | None:
    if unix is None:
        return None
    return datetime.datetime.fromtimestamp(unix, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _count(value: Any) -> int | None:
    """A token count >= 0 (0 is a real answer: nothing shared), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _positive(value: Any, default: float = 1.0) -> float:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) and value > 0 else default


def _nonnegative(value: Any) -> float | None:
    """A finite number >= 0 from status (a demand of 0 is a real reading), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _points(value: Any) -> tuple[tuple[float, float, float], ...]:
    """The calibration's kept windows from status (``[[fixed, variable, observed], ...]`` in seconds);
    anything malformed (a hand edit, an older status) is dropped, not trusted."""
    if not isinstance(value, list):
        return ()
    points = []
    for item in value[-capacity.POINTS_KEPT :]:
        if (
            isinstance(item, list)
            and len(item) == 3
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in item)
            and all(math.isfinite(x) and x >= 0 for x in item)
        ):
            points.append((float(item[0]), float(item[1]), float(item[2])))
    return tuple(points)


def _calibration(
    saved: Mapping[str, Any], factor: str, tail: str, batch_scale: str, points: str | None = None
) -> capacity.Calibration:
    """A calibration from status.calibration's keys: the one learned so far (``factor``, ...) or the one
    committed with the last applied move (``appliedFactor``, ...; no windows kept)."""
    return capacity.Calibration(
        scale=_positive(saved.get(factor)),
        tail=_positive(saved.get(tail)),
        batch_scale=_positive(saved.get(batch_scale)),
        points=_points(saved.get(points)) if points is not None else (),
    )


def _memory(status: Mapping[str, Any]) -> tuple[History, dict[str, Any]]:
    """The loop's memory from status.calibration: its History and the pins it set."""
    saved = status.get("calibration")
    saved = saved if isinstance(saved, Mapping) else {}
    history = History(
        calibration=_calibration(saved, "factor", "tail", "batchScale", "points"),
        last_change_time=_time(saved.get("lastChangeTime")),
        waiting_for_samples_since=_time(saved.get("waitingForSamplesSince")),
        missed_batch=_int(saved.get("missedBatch")),
        missed_time=_time(saved.get("missedTime")),
        met_batch=_int(saved.get("metBatch")),
        met_time=_time(saved.get("metTime")),
        demand=_nonnegative(saved.get("demand")),
        demand_time=_time(saved.get("demandTime")),
    )
    pins = {
        key: saved[key]
        for key in (
            "maxNumSeqs",
            "replicas",
            "kvCacheDtype",
            "tensorParallelSize",
            "maxNumBatchedTokens",
            "appliedFactor",
            "appliedTail",
            "appliedBatchScale",
            "sharedPrefixTokens",
        )
        if key in saved and saved[key] is not None
    }
    return history, pins


def _overrides(history: History, pins: Mapping[str, Any]) -> Overrides:
    """What planning uses. The calibration is the one committed with the last applied move
    (``appliedFactor``, ``appliedTail``), not the one learned this period: feeding a calibration that
    moves every period into the planner would re-plan, and roll the pods, on every reconcile, bypassing
    deadband and cooldown."""
    dtype = pins.get("kvCacheDtype")
    return Overrides(
        calibration=_calibration(pins, "appliedFactor", "appliedTail", "appliedBatchScale"),
        max_num_seqs=_int(pins.get("maxNumSeqs")),
        replicas=_int(pins.get("replicas")),
        kv_cache_dtype=dtype if isinstance(dtype, str) and dtype else None,
        tensor_parallel_size=_int(pins.get("tensorParallelSize")),
        max_num_batched_tokens=_int(pins.get("maxNumBatchedTokens")),
        shared_prefix_tokens=_count(pins.get("sharedPrefixTokens")),
    )


def _metrics_condition(facts: FeedbackFacts, spec: LLMDeploymentSpec) -> Condition:
    if spec.feedback.mode == "Off":
        return Condition(
            type=cond.METRICS_AVAILABLE,
            status="Unknown",
            reason=Reason.FEEDBACK_OFF,
            message="spec.feedback.mode is Off",
        )
    if not facts.prometheus_configured or facts.observation is None:
        return Condition(
            type=cond.METRICS_AVAILABLE,
            status="Unknown",
            reason=Reason.PROMETHEUS_NOT_CONFIGURED,
            message="the operator has no KVRIGHT_PROMETHEUS_URL; feedback is off",
        )
    obs = facts.observation
    return Condition(
        type=cond.METRICS_AVAILABLE,
        status="True" if obs.available else "False",
        reason=obs.reason,
        message=obs.message,
    )


def decide(facts: Facts, feedback: FeedbackFacts, *, now: datetime.datetime) -> FeedbackResult:
    """One period of the loop for one LLMDeployment (pure). See the module docstring."""
    result = _decide(facts, feedback, now=now)
    return replace(result, previous=facts.current_status)


def _decide(facts: Facts, feedback: FeedbackFacts, *, now: datetime.datetime) -> FeedbackResult:
    history, saved_pins = _memory(facts.current_status)
    pins: dict[str, Any] = dict(saved_pins)
    spec = facts.spec_or_error
    if isinstance(spec, SpecError):
        return FeedbackResult(overrides=Overrides(), observed=None, calibration=None, conditions=())
    metrics = _metrics_condition(feedback, spec)
    unknown_slo = Condition(
        type=cond.SLO_MET, status="Unknown", reason=Reason.NOT_MEASURED, message="TPOT is not measured"
    )
    if feedback.observation is None:
        return FeedbackResult(
            overrides=Overrides(), observed=None, calibration=None, conditions=(metrics, unknown_slo)
        )
    obs = feedback.observation
    events: list[Event] = []
    previous = cond.find(facts.current_status.get("conditions"), cond.METRICS_AVAILABLE) or {}
    if not obs.available and previous.get("status") != "False":
        events.append(Event(type="Warning", reason=obs.reason, message=f"metrics unavailable: {obs.message}"))

    observed = obs.to_status()
    prediction = facts.current_status.get("prediction") or {}
    predicted_kv = prediction.get("kvCacheTokensPerReplica")
    if obs.kv_cache_tokens is not None and isinstance(predicted_kv, int) and predicted_kv > 0:
        gap = obs.kv_cache_tokens / predicted_kv - 1.0
        observed["kvCacheTokensPredicted"] = predicted_kv
        observed["kvCapacityGapPercent"] = round(gap * 100.0, 1)
        before = (facts.current_status.get("observed") or {}).get("kvCapacityGapPercent")
        was_large = isinstance(before, int | float) and abs(before) >= KV_GAP_WARN * 100
        if abs(gap) >= KV_GAP_WARN and not was_large:
            events.append(
                Event(
                    type="Warning",
                    reason=Reason.KV_CAPACITY_MISMATCH,
                    message=f"vLLM reports {obs.kv_cache_tokens} KV tokens per replica "
                    f"({obs.num_gpu_blocks} blocks x {obs.block_size}); kvright predicted {predicted_kv} "
                    f"({gap * 100:+.0f}%): the memory model is off for this deployment",
                )
            )

    prefix_event = _prefix_cache_event(obs, prediction, facts.current_status.get("observed") or {})
    if prefix_event is not None:
        events.append(prefix_event)

    plan = facts.current_status.get("plan") or {}
    arch = facts.architecture
    decision: Decision | None = None
    if not isinstance(arch, capacity.Architecture) or not plan.get("maxNumSeqs"):
        slo_condition = unknown_slo if not plan else _slo_condition(None, obs, spec)
        calibration = {**_calibration_status(history, pins, None, spec, feedback), "note": Reason.NO_PLAN_YET}
        overrides = _overrides(history, pins) if spec.feedback.mode == "Adjust" else Overrides()
    else:
        decision = _control(facts, spec, arch, plan, obs, history, feedback, now)
        slo_condition = _slo_condition(decision, obs, spec)
        adjust = spec.feedback.mode == "Adjust"
        if adjust and decision.changes_plan:
            pins = _pins_after(decision, plan, saved_pins)
            seen = _served_prefix(obs, spec)
            if seen is None:
                seen = _count(saved_pins.get("sharedPrefixTokens"))
            if seen is not None:
                # Committed with a move, as the calibration is: the next plan holds what really is shared.
                pins["sharedPrefixTokens"] = seen
        event = _event_for(decision, facts.current_status, applied=adjust and decision.changes_plan)
        if event is not None:
            events.append(event)
        new_history = (
            decision.history
            if adjust
            else History(
                calibration=decision.calibration,
                last_change_time=history.last_change_time,
                waiting_for_samples_since=decision.history.waiting_for_samples_since,
            )
        )
        overrides = _overrides(new_history, pins) if adjust else Overrides()
        overrides, pins = _planner_accepts(facts, overrides, pins)
        calibration = _calibration_status(new_history, pins if adjust else {}, decision, spec, feedback)
    return FeedbackResult(
        overrides=overrides,
        observed=observed,
        calibration=calibration,
        conditions=(metrics, slo_condition),
        events=tuple(events),
        decision=decision,
    )


#: The prefix cache is "far below plan" under this fraction of the planned hit rate (the chart's alert too).
PREFIX_BELOW_PLAN = 0.5


def _prefix_cache_event(
    obs: Observation, prediction: Mapping[str, Any], before: Mapping[str, Any]
) -> Event | None:
    """A warning when vLLM's prefix cache serves far less than the plan's shared prefix assumed, posted
    when it first falls below (not on every period that stays there)."""
    planned = prediction.get("prefixCacheHitPercent")
    if obs.prefix_cache_hit_rate is None or not isinstance(planned, int | float) or planned <= 0:
        return None
    seen = obs.prefix_cache_hit_rate * 100.0
    was = before.get("prefixCacheHitPercent")
    floor = PREFIX_BELOW_PLAN * planned
    if seen >= floor or (isinstance(was, int | float) and was < floor):
        return None
    return Event(
        type="Warning",
        reason=Reason.PREFIX_CACHE_BELOW_PLAN,
        message=f"vLLM's prefix cache served {seen:.0f}% of prompt tokens, the plan assumed {planned:.0f}% "
        "(workload.sharedPrefixTokens): fewer sequences fit and TTFT is longer than planned; the next move "
        "plans with what is served",
    )


def _served_prefix(obs: Observation, spec: LLMDeploymentSpec) -> int | None:
    """The shared prefix vLLM's prefix cache was seen to serve, in tokens, when below the spec's."""
    stated = spec.workload.shared_prefix_tokens
    if not stated or obs.prefix_cache_hit_rate is None:
        return None
    served = int(obs.prefix_cache_hit_rate * spec.workload.prompt_tokens)
    return served if served < stated else None


def _pins_after(decision: Decision, plan: Mapping[str, Any], saved: Mapping[str, Any]) -> dict[str, Any]:
    """What an applied move pins for the planner (kept in status.calibration)."""
    pins: dict[str, Any] = {
        "maxNumSeqs": decision.max_num_seqs,
        "replicas": decision.replicas,
        "kvCacheDtype": decision.kv_cache_dtype or plan.get("kvCacheDtype"),
        "tensorParallelSize": decision.tensor_parallel_size or plan.get("tensorParallelSize"),
        # The budget stays the plan's: a seats or replicas move must not re-choose it (reconcile.Overrides).
        "maxNumBatchedTokens": plan.get("maxNumBatchedTokens"),
        "appliedFactor": round(decision.calibration.scale, 4),
        "appliedTail": round(decision.calibration.tail, 4),
        "appliedBatchScale": round(decision.calibration.batch_scale, 4),
    }
    replicas_only = decision.action in (Action.ADD_REPLICAS, Action.REMOVE_REPLICAS)
    if replicas_only and decision.max_num_seqs == plan.get("maxNumSeqs"):
        # Only the replica count moves, which restarts no pod: the planner keeps sizing the batch with the
        # calibration committed by the last move that did restart them (committing the new one would
        # re-size max-num-seqs and roll every pod after all).
        for key in ("appliedFactor", "appliedTail", "appliedBatchScale"):
            if key in saved:
                pins[key] = saved[key]
            else:
                pins.pop(key)
    if decision.action == Action.REPLAN:
        # A new plan: the planner sizes batch and replicas again with the new dtype or TP.
        keep = ("kvCacheDtype", "tensorParallelSize", "appliedFactor", "appliedTail", "appliedBatchScale")
        pins = {k: v for k, v in pins.items() if k in keep}
    return pins


def _event_for(decision: Decision, status: Mapping[str, Any], *, applied: bool) -> Event | None:
    """Every applied move is an event; a recommendation (an HPA owns replicas) or an unattainable SLO is
    one when it first appears, not on every period that repeats it."""
    if applied:
        return Event(type="Normal", reason=decision.reason, message=decision.message)
    last = ((status.get("calibration") or {}).get("lastDecision") or {}).get("reason")
    if last == decision.reason:
        return None
    if decision.recommend_only and decision.recommended_replicas != decision.replicas:
        return Event(type="Normal", reason=Reason.REPLICAS_RECOMMENDED, message=decision.message)
    if decision.reason == Reason.SLO_UNATTAINABLE:
        return Event(type="Warning", reason=decision.reason, message=decision.message)
    return None


def _planner_accepts(
    facts: Facts, overrides: Overrides, pins: dict[str, Any]
) -> tuple[Overrides, dict[str, Any]]:
    """Overrides the planner can honour. A max-num-seqs pin only ever lowers the batch below what the
    calibrated planner would choose (docs/interfaces.md): one planner run without the pin says what it
    would choose; a pin above that is dropped and the planner's batch runs instead."""
    if overrides.max_num_seqs is None:
        return overrides, pins
    relaxed = replace(overrides, max_num_seqs=None)
    free = desire(replace(facts, overrides=relaxed))
    if free.plan_feasible.status != "True":
        return overrides, pins
    chosen = int((free.fields.get("plan") or {}).get("maxNumSeqs") or 0)
    if overrides.max_num_seqs <= chosen:
        return overrides, pins
    return relaxed, {k: v for k, v in pins.items() if k != "maxNumSeqs"}


def _slo_condition(decision: Decision | None, obs: Observation, spec: LLMDeploymentSpec) -> Condition:
    slo_ms = spec.slo.tpot_milliseconds
    if obs.tpot_seconds is None or decision is None or decision.slo_met is None:
        why = obs.message if not obs.available else f"{obs.sample_count} finished request(s) in the window"
        return Condition(
            type=cond.SLO_MET,
            status="Unknown",
            reason=Reason.NOT_MEASURED,
            message=f"p{spec.slo.percentile} TPOT not measured: {why}",
        )
    met = decision.slo_met
    sign = "<=" if met else ">"
    tpot = f"p{spec.slo.percentile} TPOT {obs.tpot_seconds * 1000.0:.1f} ms {sign} {slo_ms} ms"
    ttft = ""
    ttft_met = True
    if decision.ttft_ratio is not None and obs.ttft_seconds is not None:
        ttft_met = decision.ttft_ratio <= 1.0
        ttft = (
            f", p{spec.slo.percentile} TTFT {obs.ttft_seconds * 1000.0:.0f} ms {'<=' if ttft_met else '>'} "
            f"{spec.slo.ttft_milliseconds} ms"
        )
    reason = Reason.TPOT_WITHIN_SLO if met else Reason.TPOT_ABOVE_SLO
    if met and not ttft_met:
        reason = Reason.TTFT_ABOVE_SLO
    return Condition(
        type=cond.SLO_MET,
        status="True" if met and ttft_met else "False",
        reason=reason,
        message=f"{tpot}{ttft} over {obs.window_seconds}s ({obs.sample_count} requests)",
    )


def _calibration_status(
    history: History,
    pins: Mapping[str, Any],
    decision: Decision | None,
    spec: LLMDeploymentSpec,
    feedback: FeedbackFacts,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "factor": round(history.calibration.scale, 4),
        "tail": round(history.calibration.tail, 4),
        "batchScale": round(history.calibration.batch_scale, 4),
        "points": [[float(f"{x:.6g}") for x in point] for point in history.calibration.points],
        "mode": spec.feedback.mode,
        **{k: v for k, v in pins.items() if v is not None},
    }
    for key, value in (
        ("lastChangeTime", _stamp(history.last_change_time)),
        ("waitingForSamplesSince", _stamp(history.waiting_for_samples_since)),
        ("missedBatch", history.missed_batch),
        ("missedTime", _stamp(history.missed_time)),
        ("metBatch", history.met_batch),
        ("metTime", _stamp(history.met_time)),
        ("demand", None if history.demand is None else round(history.demand, 2)),
        ("demandTime", _stamp(history.demand_time)),
    ):
        if value is not None:
            out[key] = value
    if decision is not None:
        out["lastDecision"] = {
            "action": str(decision.action),
            "reason": decision.reason,
            "message": decision.message[:1024],
            "applied": spec.feedback.mode == "Adjust" and decision.changes_plan,
        }
        out["recommendedReplicas"] = decision.recommended_replicas
        out["recommendedMaxNumSeqs"] = decision.max_num_seqs
    if feedback.hpa is not None or spec.replicas.count is not None:
        out["replicasOwnedBy"] = (
            f"HorizontalPodAutoscaler/{feedback.hpa}" if feedback.hpa else "spec.replicas.count"
        )
    return out


def plan_engine(plan: Mapping[str, Any], gpu: capacity.GPU) -> capacity.EngineConfig:
    """The engine flags ``status.plan`` records (absent fields: one node, pure TP, vLLM's defaults)."""

    def whole(key: str, default: int = 1) -> int:
        value = plan.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default

    gpus, nodes = whole("gpusPerReplica"), whole("nodesPerReplica")
    util = whole("gpuMemoryUtilizationPercent", 90)
    return capacity.EngineConfig(
        layout=capacity.Layout(
            tensor_parallel_size=whole("tensorParallelSize"),
            pipeline_parallel_size=whole("pipelineParallelSize"),
            data_parallel_size=whole("dataParallelSize"),
            expert_parallel=plan.get("expertParallel") is True,
            gpus_per_node=gpus // nodes if nodes > 1 else 8,
        ),
        kv_cache_dtype=str(plan.get("kvCacheDtype", "auto") or "auto"),
        max_num_batched_tokens=whole("maxNumBatchedTokens", capacity.default_max_num_batched_tokens(gpu)),
        gpu_memory_utilization=min(util, 100) / 100.0,
    )


def serving_curve(
    spec: LLMDeploymentSpec, arch: capacity.Architecture, plan: Mapping[str, Any]
) -> tuple[capacity.Curve, int]:
    """The plan's own serving model, rebuilt from ``status.plan``: the curve the planner sized
    max-num-seqs with (same flags, request shape and percentile), so a deployment that behaves exactly
    as predicted is left alone; and the memory rule's bound on max-num-seqs at the workload's length."""
    gpu = capacity.gpu_spec(str(plan.get("gpuProduct", "")))
    prompt = spec.workload.prompt_tokens
    output = spec.workload.output_tokens
    shared = spec.workload.shared_prefix_tokens
    model = capacity.ServingModel(arch, gpu, plan_engine(plan, gpu))
    shape = capacity.Shape(
        prompt_tokens=max(1, prompt), output_tokens=output, mixed=output > 0, cached_prompt_tokens=shared
    )
    curve = capacity.Curve(model, shape, spec.slo.percentile)
    return curve, model.memory.max_batch(prompt + output, capacity.MAX_NUM_SEQS_CAP, shared)


def _control(
    facts: Facts,
    spec: LLMDeploymentSpec,
    arch: capacity.Architecture,
    plan: Mapping[str, Any],
    obs: Observation,
    history: History,
    feedback: FeedbackFacts,
    now: datetime.datetime,
) -> Decision:
    dtype = str(plan.get("kvCacheDtype", "auto") or "auto")
    product = str(plan.get("gpuProduct", ""))
    curve, memory_bound = serving_curve(spec, arch, plan)
    layout = curve.model.layout
    tp, per_replica = layout.tensor_parallel_size, layout.gpus
    product_inventory = facts.inventory.get(product)
    cluster_gpus = (
        product_inventory.total_gpus if product_inventory is not None else per_replica * spec.replicas.max
    )
    max_gpus = cluster_gpus if spec.gpu.max_gpus is None else min(spec.gpu.max_gpus, cluster_gpus)
    larger: int | None = None
    if spec.tuning.tensor_parallel_size is None and product_inventory is not None:
        bigger = [
            t
            for t in capacity.valid_tensor_parallel_sizes(arch, product_inventory.max_gpus_per_node)
            if t > tp
        ]
        larger = min(bigger) if bigger else None
    replicas = int(plan.get("replicas", 1) or 1)
    # One pod's predicted time to Ready from the spec's weight source (0: not known): what a restart costs.
    cold_start = _positive((facts.current_status.get("prediction") or {}).get("coldStartSeconds"), 0.0)
    current = Current(
        tensor_parallel_size=tp,
        max_num_seqs=int(plan["maxNumSeqs"]),
        kv_cache_dtype=dtype,
        replicas=replicas,
        max_num_seqs_limit=max(memory_bound, int(plan["maxNumSeqs"])),
        pipeline_parallel_size=layout.pipeline_parallel_size,
        data_parallel_size=layout.data_parallel_size,
    )
    bounds = Bounds(
        min_replicas=spec.replicas.min,
        max_replicas=spec.replicas.max,
        max_gpus=max(per_replica, max_gpus),
        fp8_kv_allowed=spec.tuning.kv_cache_dtype == "Auto",
        larger_tensor_parallel_size=larger,
    )
    return control_decide(
        **law_settings(spec),
        current=current,
        observation=obs,
        model=curve,
        bounds=bounds,
        history=history,
        now=now.timestamp(),
        hpa_present=feedback.hpa is not None or spec.replicas.count is not None,
        rollout_in_progress=feedback.rollout_in_progress,
        scaling_out=feedback.scaling_out,
        restart_seconds=capacity.rollout_seconds(cold_start, replicas),
        cold_start_seconds=cold_start,
    )


def law_settings(spec: LLMDeploymentSpec) -> dict[str, Any]:
    """What the spec tells the control law (``kvright.control.decide``'s ``slo_tpot_seconds``,
    ``slo_ttft_seconds`` and ``tuning``): the SLOs, and the tuning at the spec's window and cooldown,
    with 50 finished requests per window for production windows and fewer for test-sized ones."""
    window = spec.feedback.window_seconds
    ttft = spec.slo.ttft_milliseconds
    return {
        "slo_tpot_seconds": spec.slo.tpot_milliseconds / 1000.0,
        "slo_ttft_seconds": ttft / 1000.0 if ttft else None,
        "tuning": Tuning(
            cooldown_seconds=float(spec.feedback.cooldown_seconds),
            sample_deadline_seconds=float(max(3 * window, 60)),
            min_samples=max(10, min(50, window // 6)),
        ),
    }
