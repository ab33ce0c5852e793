"""kvright's control law against three autoscalers, on the simulator's own physics, scored on goodput.

What runs: an in-process, discrete-time model of a vLLM fleet (no cluster, no HTTP). Each replica is a
:class:`kvright_dev.sim.engine.Engine` (vLLM's scheduler: chunked prefill, KV blocks, preemption) timed
by :mod:`kvright_dev.sim.physics`, whose GPU profile is drawn per seed from documented ranges and never
shown to any policy. Every policy gets, per (trace, seed):

- the same first plan: kvright's roofline plan (``capacity.plan`` for the spec below: TP, KV dtype,
  ``--max-num-seqs``, replicas);
- the same arrivals (one of :data:`kvright_dev.sim.workload.TRACES`, Poisson with log-normal prompt and
  output lengths), the same hidden profile, the same GPU budget (``spec.gpu.maxGPUs``) and replica
  bounds;
- the same rollout mechanics: a Deployment with maxSurge 1 / maxUnavailable 0. A new pod holds its GPUs
  from the moment it is scheduled and serves after the profile's cold start (fixed part plus weights
  over the load bandwidth); a ``--max-num-seqs`` change replaces every pod, one surge pod at a time
  (each replacement is a restart); adding a replica starts that pod only; a removed pod drains.

The policies, each with its documented defaults:

- ``kvright``: :func:`kvright.control.decide` every reconcile period (the operator's 60 s) with the
  CRD's defaults (``spec.feedback``: window 300 s, cooldown 600 s, read from :mod:`kvright.api`), the
  seam's tuning (:mod:`kvright.feedback`) and the plan's own serving curve
  (:func:`kvright.feedback.serving_curve`), on an Observation assembled as Prometheus would answer it
  (histogram_quantile over vLLM's buckets, window averages). Replans are counted, not applied (one
  model, GPU and TP per run).
- ``hpa-tpot``: an HPA on the p90 TPOT (a KEDA Prometheus trigger on vLLM's histogram over 1 minute),
  target the SLO: ``desired = ceil(current x metric / target)``, HPA defaults (15 s sync, 10 %
  tolerance, 300 s scale-down stabilisation, scale-up at most max(4 pods, 100 %) per 15 s).
- ``queue-length``: KEDA on ``sum(vllm:num_requests_waiting)``, AverageValue target 5 per replica
  (vLLM production-stack's KEDA example), the same HPA behaviour.
- ``kv-usage``: KEDA on ``avg(vllm:gpu_cache_usage_perc)``, AverageValue target 0.8 per replica, the same
  HPA behaviour.

Baselines never change ``--max-num-seqs``.

Score (per run, ground truth from finished requests, not from the histograms): goodput = requests
meeting both TPOT <= the spec's TPOT SLO and TTFT <= its TTFT SLO, per GPU-hour held (warming and
draining pods included); SLO attainment = those requests / all that arrived (unfinished ones count as
missed); p90 TTFT and TPOT over finished requests; GPU-hours; restarts. Arrivals stop at the trace's
end; the fleet then gets up to :data:`DRAIN_SECONDS` to finish.

Run: ``python -m bench control-loop [--seeds 10] [--minutes 20] [--json] [--plot DIR]``;
``python -m bench.control_loop`` prints the table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import capacity
from kvright.api import LLMDeploymentSpec, parse_spec
from kvright.control import Action, Bounds, Current, History, Tuning, decide
from kvright.feedback import law_settings, plan_engine, serving_curve
from kvright.inventory import ProductInventory
from kvright.observe import Observation
from kvright.reconcile import Facts, desire
from kvright_dev.sim.engine import Engine
from kvright_dev.sim.metrics import TPOT_BUCKETS, TTFT_BUCKETS
from kvright_dev.sim.physics import GPUProfile, ModelFacts, cold_start_seconds, step_function
from kvright_dev.sim.workload import TRACES, Arrival, Lengths, arrivals, trace

POLICIES = ("kvright", "hpa-tpot", "queue-length", "kv-usage")
KEYS = (
    "goodput_per_gpu_hour",
    "slo_attainment",
    "ttft_p90_seconds",
    "tpot_p90_seconds",
    "gpu_hours",
    "restarts",
)
TICK = 1.0  # seconds of virtual time per simulation tick (arrivals, pods, GPU accounting)
DRAIN_SECONDS = 300.0  # after the last arrival, at most this long to finish what was admitted
RECONCILE_SECONDS = 60.0  # the operator's KVRIGHT_RECONCILE_SECONDS default
TIMELINE_EVERY = 10.0

#: The LLMDeployment every run serves (defaults left to the CRD: feedback window, cooldown).
SPEC: dict[str, Any] = {
    "model": {"name": "meta-llama/Llama-3.1-70B-Instruct", "architecture": "llama-3.1-70b"},
    "gpu": {"product": "NVIDIA-H100-80GB-HBM3", "maxGPUs": 32},
    "workload": {"maxModelLen": 8192, "promptTokens": 1000, "outputTokens": 256, "concurrency": 64},
    "slo": {"tpotMilliseconds": 50, "ttftMilliseconds": 2000, "percentile": 90},
    "feedback": {"mode": "Adjust"},
    "replicas": {"min": 1, "max": 8},
}


#: Request lengths: log-normal around the spec's promptTokens and outputTokens (chat traffic's long tail).
PROMPT_LENGTHS = Lengths(mean=1000, sigma=0.6, low=16, high=6000)
OUTPUT_LENGTHS = Lengths(mean=256, sigma=0.6, low=8, high=2000)


@dataclass(frozen=True, kw_only=True)
class HPA:
    """The HPA controller's defaults (kube-controller-manager flags and autoscaling/v2 behavior)."""

    sync_seconds: float = 15.0
    """--horizontal-pod-autoscaler-sync-period."""
    tolerance: float = 0.1
    """--horizontal-pod-autoscaler-tolerance: no move while the metric is within 10 % of its target."""
    scale_down_stabilisation_seconds: float = 300.0
    """behavior.scaleDown.stabilizationWindowSeconds: the highest recommendation of the last 5 minutes."""
    scale_up_pods: int = 4
    """behavior.scaleUp: at most 4 pods ..."""
    scale_up_percent: float = 100.0
    """... or 100 % of the current replicas per 15 s, whichever is more."""
    metric_window_seconds: float = 60.0
    """The baselines' PromQL range (a KEDA query's ``[1m]``)."""


@dataclass(frozen=True, kw_only=True)
class Scenario:
    spec: dict[str, Any] = field(default_factory=lambda: SPEC)
    """The LLMDeployment spec; its model.architecture is a catalog id."""
    trace: str = "ramp"
    minutes: float = 20.0
    base_rate: float = 2.0
    peak_rate: float = 12.0
    prompt: Lengths = PROMPT_LENGTHS
    output: Lengths = OUTPUT_LENGTHS
    seed: int = 1
    queue_target_waiting: float = 5.0
    kv_target_usage: float = 0.8
    hpa: HPA = HPA()


# -- the fleet ------------------------------------------------------------------------------------


@dataclass
class Pod:
    engine: Engine
    max_num_seqs: int
    ready_at: float
    draining: bool = False

    def serving(self, now: float) -> bool:
        return not self.draining and now >= self.ready_at

    @property
    def load(self) -> int:
        return len(self.engine.running) + len(self.engine.waiting)


class Fleet:
    """Pods behind a least-outstanding-requests balancer, reconciled like a Deployment (maxSurge 1)."""

    def __init__(
        self,
        make_engine: Callable[[int, int], Engine],
        *,
        cold_start: float,
        replicas: int,
        seqs: int,
        tp: int,
    ) -> None:
        self.make_engine = make_engine
        self.cold_start = cold_start
        self.tp = tp
        self.want_replicas = replicas
        self.want_seqs = seqs
        self.pods = [
            Pod(engine=make_engine(seqs, i), max_num_seqs=seqs, ready_at=0.0) for i in range(replicas)
        ]
        self.serial = replicas
        self.restarts = 0

    def route(self, arrival: Arrival) -> None:
        now = arrival.time_seconds
        live = [p for p in self.pods if p.serving(now)]
        if not live:
            live = [p for p in self.pods if not p.draining] or self.pods
        target = min(live, key=lambda p: p.load)
        if target.engine.validate(arrival.prompt_tokens, arrival.output_tokens) is None:
            target.engine.advance_idle(now)
            target.engine.submit(
                prompt_tokens=arrival.prompt_tokens, max_tokens=arrival.output_tokens, at=now
            )

    def reconcile(self, now: float) -> None:
        active = [p for p in self.pods if not p.draining]
        new = [p for p in active if p.max_num_seqs == self.want_seqs]
        old = [p for p in active if p.max_num_seqs != self.want_seqs]
        warming = [p for p in new if now < p.ready_at]
        if len(active) < self.want_replicas:
            for _ in range(self.want_replicas - len(active)):
                self._add(now, restart=bool(old))
        elif old and not warming:
            if len(active) <= self.want_replicas:
                self._add(now, restart=True)  # surge one replacement
            else:
                old[0].draining = True
        elif len(active) > self.want_replicas and not old:
            min(new, key=lambda p: p.load).draining = True  # scale down: the least busy pod drains
        ready_new = [p for p in new if now >= p.ready_at]
        if old and len(ready_new) + len(old) > self.want_replicas:
            old[0].draining = True  # a replacement that became ready retires one old pod
        self.pods = [p for p in self.pods if not (p.draining and not p.engine.busy)]

    def _add(self, now: float, *, restart: bool) -> None:
        self.serial += 1
        self.restarts += restart
        engine = self.make_engine(self.want_seqs, self.serial)
        engine.advance_idle(now)
        self.pods.append(Pod(engine=engine, max_num_seqs=self.want_seqs, ready_at=now + self.cold_start))

    def rolling(self, now: float) -> bool:
        active = [p for p in self.pods if not p.draining]
        return len(active) != self.want_replicas or any(
            p.max_num_seqs != self.want_seqs or not p.serving(now) for p in active
        )

    def scaling_out(self, now: float) -> bool:
        """Rolling only because replicas were added: every pod runs the wanted max-num-seqs."""
        active = [p for p in self.pods if not p.draining]
        return (
            self.rolling(now)
            and len(active) <= self.want_replicas
            and all(p.max_num_seqs == self.want_seqs for p in active)
        )

    def gpus(self) -> int:
        return len(self.pods) * self.tp

    def serving_count(self, now: float) -> int:
        return sum(1 for p in self.pods if p.serving(now))


# -- what Prometheus would answer -----------------------------------------------------------------


def histogram_quantile(q: float, values: Sequence[float], buckets: Sequence[float]) -> float | None:
    """Prometheus' histogram_quantile over cumulative buckets built from ``values`` (linear in a bucket)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = q * len(ordered)
    lower_bound, lower_count = 0.0, 0
    index = 0
    for le in buckets:
        while index < len(ordered) and ordered[index] <= le:
            index += 1
        if index >= rank:
            width = index - lower_count
            return lower_bound + (le - lower_bound) * ((rank - lower_count) / width if width else 1.0)
        lower_bound, lower_count = le, index
    return buckets[-1]


def exact_quantile(q: float, values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass
class Window:
    """Finished requests and per-tick gauges, kept for the longest window any policy queries."""

    seconds: float
    done: deque[tuple[float, float, float, int]] = field(default_factory=deque)  # (t, tpot, ttft, output)
    ticks: deque[tuple[float, int, int, float, float, int]] = field(default_factory=deque)
    # (t, running, waiting, max kv usage, mean kv usage, preemptions)

    def trim(self, now: float) -> None:
        while self.done and self.done[0][0] <= now - self.seconds:
            self.done.popleft()
        while self.ticks and self.ticks[0][0] <= now - self.seconds:
            self.ticks.popleft()

    def tpots(self, now: float, seconds: float) -> list[float]:
        return [tp for (t, tp, _, o) in self.done if t > now - seconds and o > 1]

    def ttfts(self, now: float, seconds: float) -> list[float]:
        return [tf for (t, _, tf, _) in self.done if t > now - seconds]

    def recent(self, now: float, seconds: float) -> list[tuple[float, int, int, float, float, int]]:
        return [x for x in self.ticks if x[0] > now - seconds]


# -- policies -------------------------------------------------------------------------------------


@dataclass
class HPAState:
    recommendations: deque[tuple[float, int]] = field(default_factory=deque)


def hpa_step(
    s: Scenario, bounds: Bounds, tp: int, fleet: Fleet, now: float, desired: int | None, state: HPAState
) -> None:
    """One HPA sync: tolerance, scale-up limit, scale-down stabilisation, bounds (replicas only)."""
    if desired is None:
        return  # no metric: the HPA keeps the replicas
    current = fleet.want_replicas
    ceiling = bounds.replica_ceiling(tp)
    up_limit = max(current + s.hpa.scale_up_pods, math.ceil(current * (1 + s.hpa.scale_up_percent / 100)))
    desired = max(bounds.min_replicas, min(ceiling, up_limit, desired))
    state.recommendations.append((now, desired))
    while (
        state.recommendations and state.recommendations[0][0] <= now - s.hpa.scale_down_stabilisation_seconds
    ):
        state.recommendations.popleft()
    if desired < current:
        desired = min(current, max(d for _, d in state.recommendations))
    fleet.want_replicas = desired


def hpa_desired(
    current: int, metric: float | None, target: float, tolerance: float, *, average: bool
) -> int | None:
    """The HPA formula: ``ceil(current x metric / target)`` (Value), or ``ceil(metric / target)`` for an
    AverageValue total, unchanged within the tolerance."""
    if metric is None:
        return None
    ratio = (metric / current if average else metric) / target
    if abs(ratio - 1.0) <= tolerance:
        return current
    return math.ceil(current * ratio)


# -- one run --------------------------------------------------------------------------------------


@dataclass
class Result:
    policy: str
    trace: str
    seed: int
    good: int = 0
    arrived: int = 0
    tpots: list[float] = field(default_factory=list)
    ttfts: list[float] = field(default_factory=list)
    gpu_seconds: float = 0.0
    restarts: int = 0
    missed_tpot: int = 0
    """Finished requests over the TPOT SLO (TTFT met or not)."""
    missed_ttft: int = 0
    """Finished requests over the TTFT SLO with TPOT met."""
    replans: int = 0
    changes: int = 0
    timeline: list[tuple[float, int, int, float | None, float | None]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    calibration: capacity.Calibration | None = None
    """kvright's: the calibration its law had learned when the run ended."""

    def summary(self) -> dict[str, float | None]:
        hours = self.gpu_seconds / 3600.0
        return {
            "goodput_per_gpu_hour": round(self.good / hours, 2) if hours else 0.0,
            "slo_attainment": round(self.good / self.arrived, 4) if self.arrived else 0.0,
            "ttft_p90_seconds": _round(exact_quantile(0.9, self.ttfts), 3),
            "tpot_p90_seconds": _round(exact_quantile(0.9, self.tpots), 4),
            "gpu_hours": round(hours, 3),
            "restarts": self.restarts,
        }


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


@dataclass(frozen=True, kw_only=True)
class FirstPlan:
    """The plan fields the fleet runs (from status.plan)."""

    tensor_parallel_size: int
    max_num_seqs: int
    kv_cache_dtype: str
    max_model_len: int
    max_num_batched_tokens: int
    replicas: int


@dataclass(frozen=True)
class Setup:
    """What every policy shares for one scenario: the spec, the first plan, the serving curve."""

    spec: LLMDeploymentSpec
    arch: capacity.Architecture
    gpu: capacity.GPU
    plan: FirstPlan
    status_plan: dict[str, Any]
    memory: capacity.KVMemory
    """vLLM's memory accounting for the plan's engine: KV blocks at a max-num-seqs."""
    cold_start_seconds: float
    """kvright's predicted cold start of one pod (status.prediction.coldStartSeconds), which its law
    weighs a restart by; the simulated pods start as the hidden profile says."""


def setup(s: Scenario) -> Setup:
    """The first plan exactly as the operator makes it (:func:`kvright.reconcile.desire`, no feedback
    yet) on a cluster of ``maxGPUs`` GPUs in 8-GPU nodes, and vLLM's memory accounting for its engine."""
    arch = capacity.load_architecture(str(s.spec["model"]["architecture"]))  # a catalog id
    spec = parse_spec(s.spec)
    product = str(spec.gpu.product)
    gpus = spec.gpu.max_gpus or 8
    desired = desire(
        Facts(
            name="bench",
            namespace="bench",
            uid="bench",
            generation=1,
            spec=s.spec,
            current_status={},
            architecture=arch,
            inventory={
                product: ProductInventory(
                    product=product, nodes=-(-gpus // 8), max_gpus_per_node=8, total_gpus=gpus
                )
            },
            default_image="vllm/vllm-openai",
        )
    )
    status_plan = desired.fields.get("plan")
    if not isinstance(status_plan, dict) or desired.replicas is None:
        raise SystemExit(f"bench: the spec has no feasible plan: {desired.plan_feasible}")
    gpu = capacity.gpu_spec(str(status_plan["gpuProduct"]))
    engine = plan_engine(status_plan, gpu)
    plan = FirstPlan(
        tensor_parallel_size=engine.layout.tensor_parallel_size,
        max_num_seqs=int(status_plan["maxNumSeqs"]),
        kv_cache_dtype=engine.kv_cache_dtype,
        max_model_len=int(status_plan.get("maxModelLen") or spec.workload.max_model_len or 8192),
        max_num_batched_tokens=engine.max_num_batched_tokens,
        replicas=desired.replicas,
    )
    return Setup(
        spec=spec,
        arch=arch,
        gpu=gpu,
        plan=plan,
        status_plan=status_plan,
        memory=capacity.KVMemory(arch, gpu, engine),
        cold_start_seconds=float((desired.fields.get("prediction") or {}).get("coldStartSeconds") or 0.0),
    )


def simulate(
    s: Scenario, policy: str, *, profile: GPUProfile | None = None, keep_timeline: bool = False
) -> Result:
    """One policy on one (trace, seed): bounded by the trace plus :data:`DRAIN_SECONDS` of virtual time."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
    st = setup(s)
    spec, p = st.spec, st.plan
    tp = p.tensor_parallel_size
    profile = profile or GPUProfile.draw(random.Random(f"profile-{s.seed}"))
    facts = ModelFacts.of(st.arch, st.gpu, tensor_parallel_size=tp, kv_cache_dtype=p.kv_cache_dtype)
    step = step_function(facts, profile)
    blocks_at: dict[int, int] = {}

    def blocks(seqs: int) -> int:
        """What the engine gets at ``seqs`` (vLLM profiles activations and the sampler at max-num-seqs),
        as the simulator's server computes it: the accounting times the profile's share."""
        if seqs not in blocks_at:
            blocks_at[seqs] = max(
                1, math.floor(st.memory.breakdown(seqs).num_blocks * profile.kv_memory_fraction)
            )
        return blocks_at[seqs]

    def make_engine(seqs: int, serial: int) -> Engine:
        return Engine(
            step_seconds=step,
            max_num_seqs=seqs,
            num_gpu_blocks=blocks(seqs),
            max_model_len=p.max_model_len,
            max_num_batched_tokens=p.max_num_batched_tokens,
            noise=profile.step_noise,
            seed=s.seed * 1000 + serial,
        )

    fleet = Fleet(
        make_engine,
        cold_start=cold_start_seconds(facts, profile),
        replicas=p.replicas,
        seqs=p.max_num_seqs,
        tp=tp,
    )
    slo_tpot = spec.slo.tpot_milliseconds / 1000.0
    ttft_ms = spec.slo.ttft_milliseconds
    slo_ttft = math.inf if ttft_ms is None else ttft_ms / 1000.0
    q = spec.slo.percentile / 100.0
    seconds = s.minutes * 60.0
    rng = random.Random(f"trace-{s.trace}-{s.seed}")
    todo = deque(
        arrivals(
            trace(s.trace, seconds=seconds, base_rate=s.base_rate, peak_rate=s.peak_rate),
            rng,
            prompt=s.prompt,
            output=s.output,
        )
    )
    out = Result(policy=policy, trace=s.trace, seed=s.seed, arrived=len(todo))
    out.events.append(
        f"t=0s first plan: TP {tp}, max-num-seqs {p.max_num_seqs}, replicas {p.replicas}, "
        f"KV {p.kv_cache_dtype}"
    )

    bounds = Bounds(
        min_replicas=spec.replicas.min,
        max_replicas=spec.replicas.max,
        max_gpus=spec.gpu.max_gpus or tp * spec.replicas.max,
        fp8_kv_allowed=spec.tuning.kv_cache_dtype == "Auto",
    )
    feedback_window = float(spec.feedback.window_seconds)
    window = Window(seconds=max(feedback_window, s.hpa.metric_window_seconds) + TICK)
    curve, memory_bound = serving_curve(spec, st.arch, st.status_plan)
    # What the operator's seam tells the law (kvright.feedback.law_settings) at the CRD's defaults.
    law = law_settings(spec)
    tuning = law["tuning"]
    history = History()
    hpa_state = HPAState()
    period = RECONCILE_SECONDS if policy == "kvright" else s.hpa.sync_seconds
    next_control = period
    next_timeline = 0.0
    t = 0.0
    end = seconds + DRAIN_SECONDS
    for _ in range(math.ceil(end / TICK)):
        stop = t + TICK
        while todo and todo[0].time_seconds < stop:
            fleet.route(todo.popleft())
        preempted = 0
        for pod in fleet.pods:
            e = pod.engine
            e.advance_idle(t)
            for _ in range(100_000):  # bounded: a step takes at least the profile's fixed overhead
                if not (e.busy and e.now < stop):
                    break
                result = e.step()
                preempted += result.preempted
                for done in result.finished:
                    window.done.append((e.now, done.tpot_seconds, done.ttft_seconds, done.output_tokens))
                    out.ttfts.append(done.ttft_seconds)
                    if done.output_tokens > 1:
                        out.tpots.append(done.tpot_seconds)
                    tpot_met = done.tpot_seconds <= slo_tpot
                    out.missed_tpot += not tpot_met
                    out.missed_ttft += tpot_met and done.ttft_seconds > slo_ttft
                    out.good += tpot_met and done.ttft_seconds <= slo_ttft
        t = stop
        out.gpu_seconds += fleet.gpus() * TICK
        live = [pod for pod in fleet.pods if pod.serving(t)] or fleet.pods
        usages = [pod.engine.kv_cache_usage for pod in live]
        window.ticks.append(
            (
                t,
                sum(len(pod.engine.running) for pod in live),
                sum(len(pod.engine.waiting) for pod in fleet.pods),
                max(usages),
                sum(usages) / len(usages),
                preempted,
            )
        )
        window.trim(t)
        fleet.reconcile(t)
        if t >= next_control:
            next_control += period
            before = (fleet.want_seqs, fleet.want_replicas)
            if policy == "kvright":
                history = _kvright(
                    t,
                    fleet,
                    window,
                    feedback_window,
                    spec,
                    curve,
                    memory_bound,
                    bounds,
                    tuning,
                    history,
                    out,
                    tp,
                    p.kv_cache_dtype,
                    st.cold_start_seconds,
                )
            else:
                _baseline(s, policy, t, fleet, window, slo_tpot, q, bounds, tp, hpa_state)
            if (fleet.want_seqs, fleet.want_replicas) != before:
                out.changes += 1
                out.events.append(
                    f"t={t:.0f}s max-num-seqs {before[0]} -> {fleet.want_seqs}, "
                    f"replicas {before[1]} -> {fleet.want_replicas}"
                )
        if keep_timeline and t >= next_timeline:
            next_timeline += TIMELINE_EVERY
            out.timeline.append(
                (
                    t,
                    fleet.serving_count(t),
                    fleet.want_seqs,
                    exact_quantile(q, window.tpots(t, 60.0)),
                    exact_quantile(q, window.ttfts(t, 60.0)),
                )
            )
        if t >= seconds and not todo and not any(pod.engine.busy for pod in fleet.pods):
            break
    out.restarts = fleet.restarts
    if policy == "kvright":
        out.calibration = history.calibration
    return out


def _kvright(
    t: float,
    fleet: Fleet,
    window: Window,
    seconds: float,
    spec: LLMDeploymentSpec,
    curve: capacity.Curve,
    memory_bound: int,
    bounds: Bounds,
    tuning: Tuning,
    history: History,
    out: Result,
    tp: int,
    dtype: str,
    cold_start_seconds: float,
) -> History:
    tpots = window.tpots(t, seconds)
    ticks = window.recent(t, seconds)
    serving = max(1, fleet.serving_count(t))
    last = ticks[-1] if ticks else (t, 0, 0, 0.0, 0.0, 0)
    q = spec.slo.percentile / 100.0
    # As observe() reads it: the running count weighted by itself (the replicas share the load evenly).
    running = sum(x[1] for x in ticks)
    decode_batch = sum(x[1] ** 2 for x in ticks) / running / serving if running else None
    obs = Observation(
        namespace="bench",
        name="llm",
        sample_time=t,
        window_seconds=int(seconds),
        percentile=spec.slo.percentile,
        available=True,
        reason="MetricsFound",
        message="bench",
        tpot_seconds=histogram_quantile(q, tpots, TPOT_BUCKETS),
        sample_count=len(tpots),
        tpot_mean_seconds=sum(tpots) / len(tpots) if tpots else None,
        ttft_seconds=histogram_quantile(q, window.ttfts(t, seconds), TTFT_BUCKETS),
        running=float(last[1]),
        waiting=float(last[2]),
        mean_batch=sum(x[1] for x in ticks) / len(ticks) / serving if ticks else None,
        decode_batch=decode_batch,
        preemptions_per_second=sum(x[5] for x in ticks) / seconds,
        kv_cache_usage=sum(x[3] for x in ticks) / len(ticks) if ticks else None,
        mean_context_tokens=(spec.workload.prompt_tokens or 0) + (spec.workload.output_tokens or 0) / 2,
        replicas_reporting=fleet.serving_count(t),
    )
    current = Current(
        tensor_parallel_size=tp,
        max_num_seqs=fleet.want_seqs,
        kv_cache_dtype=dtype,
        replicas=fleet.want_replicas,
        max_num_seqs_limit=max(memory_bound, fleet.want_seqs),
    )
    law = {**law_settings(spec), "tuning": tuning, "model": curve, "bounds": bounds, "history": history}
    decision = decide(
        **law,
        current=current,
        observation=obs,
        now=t,
        rollout_in_progress=fleet.rolling(t),
        scaling_out=fleet.scaling_out(t),
        restart_seconds=capacity.rollout_seconds(cold_start_seconds, fleet.want_replicas),
        cold_start_seconds=cold_start_seconds,
    )
    if decision.action == Action.REPLAN:
        out.replans += 1
        out.events.append(f"t={t:.0f}s {decision.reason} (not applied in the bench): {decision.message}")
        return replace(decision.history, last_change_time=history.last_change_time)
    if decision.changes_plan:
        out.events.append(f"t={t:.0f}s {decision.action} {decision.reason}: {decision.message}")
        fleet.want_seqs = decision.max_num_seqs
        fleet.want_replicas = decision.replicas
    return decision.history


def _baseline(
    s: Scenario,
    policy: str,
    t: float,
    fleet: Fleet,
    window: Window,
    slo_tpot: float,
    q: float,
    bounds: Bounds,
    tp: int,
    state: HPAState,
) -> None:
    current = fleet.want_replicas
    span = s.hpa.metric_window_seconds
    if policy == "hpa-tpot":
        metric = histogram_quantile(q, window.tpots(t, span), TPOT_BUCKETS)
        desired = hpa_desired(current, metric, slo_tpot, s.hpa.tolerance, average=False)
    else:
        last = window.ticks[-1] if window.ticks else None
        if policy == "queue-length":
            metric = None if last is None else float(last[2])
            target = s.queue_target_waiting
        else:
            metric = None if last is None else last[4] * max(1, fleet.serving_count(t))
            target = s.kv_target_usage
        desired = hpa_desired(current, metric, target, s.hpa.tolerance, average=True)
        if desired is not None and metric is not None:
            # AverageValue: desired = ceil(total / target); the tolerance is on the per-replica ratio.
            desired = current if desired == current else math.ceil(metric / target)
    hpa_step(s, bounds, tp, fleet, t, desired, state)


# -- the report -----------------------------------------------------------------------------------


def _run(job: tuple[Scenario, str, bool]) -> Result:
    s, policy, keep = job
    return simulate(s, policy, keep_timeline=keep)


def run(
    seeds: Sequence[int],
    *,
    minutes: float,
    traces: Sequence[str] = TRACES,
    workers: int | None = None,
    plot_seed: int | None = None,
) -> list[Result]:
    jobs = [
        (Scenario(trace=name, minutes=minutes, seed=seed), policy, seed == plot_seed)
        for seed in seeds
        for name in traces
        for policy in POLICIES
    ]
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    if workers <= 1:
        return [_run(job) for job in jobs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_run, jobs, chunksize=1))


def merge(results: Sequence[Result]) -> dict[str, float | None]:
    """One seed's score over all its traces: counts and GPU-hours summed, percentiles over all requests."""
    total = Result(policy=results[0].policy, trace="all", seed=results[0].seed)
    for r in results:
        total.good += r.good
        total.arrived += r.arrived
        total.tpots += r.tpots
        total.ttfts += r.ttfts
        total.gpu_seconds += r.gpu_seconds
        total.restarts += r.restarts
    return total.summary()


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 4) if present else None


def report(results: Sequence[Result], seeds: Sequence[int]) -> dict[str, Any]:
    policies: dict[str, Any] = {}
    for policy in POLICIES:
        per_seed = []
        for seed in seeds:
            mine = [r for r in results if r.policy == policy and r.seed == seed]
            entry: dict[str, Any] = {"seed": seed, **merge(mine)}
            entry["traces"] = {r.trace: r.summary() for r in mine}
            per_seed.append(entry)
        summary: dict[str, Any] = {key: _median([e[key] for e in per_seed]) for key in KEYS}
        summary["per_seed"] = per_seed
        policies[policy] = summary
    return {"seeds": list(seeds), "policies": policies}


def plot(results: Sequence[Result], seed: int, directory: Path) -> list[Path]:
    """One PNG per trace: replicas, max-num-seqs, p90 TPOT and p90 TTFT (1-minute windows) over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    spec = parse_spec(SPEC)
    for name in sorted({r.trace for r in results if r.seed == seed and r.timeline}):
        fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
        for r in results:
            if r.seed != seed or r.trace != name or not r.timeline:
                continue
            minutes = [x[0] / 60.0 for x in r.timeline]
            axes[0].step(minutes, [x[1] for x in r.timeline], where="post", label=r.policy)
            axes[1].step(minutes, [x[2] for x in r.timeline], where="post", label=r.policy)
            axes[2].plot(
                minutes, [math.nan if x[3] is None else x[3] * 1000 for x in r.timeline], label=r.policy
            )
            axes[3].plot(minutes, [math.nan if x[4] is None else x[4] for x in r.timeline], label=r.policy)
        axes[2].axhline(spec.slo.tpot_milliseconds, color="grey", linestyle="--", linewidth=1)
        axes[3].axhline((spec.slo.ttft_milliseconds or 0) / 1000.0, color="grey", linestyle="--", linewidth=1)
        axes[3].set_yscale("log")
        for ax, label in zip(
            axes,
            ("replicas serving", "--max-num-seqs", "p90 TPOT, ms (1 min)", "p90 TTFT, s (1 min)"),
            strict=True,
        ):
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0].legend(loc="upper left", fontsize=8)
        axes[0].set_title(f"{name} trace, seed {seed} (hidden GPU profile drawn for the seed)")
        axes[3].set_xlabel("minutes")
        fig.tight_layout()
        path = directory / f"control-loop-{name}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    return written


def table(doc: dict[str, Any]) -> str:
    lines = [f"{'policy':14}" + "".join(f"{k:>22}" for k in KEYS)]
    for name, summary in doc["policies"].items():
        lines.append(f"{name:14}" + "".join(f"{summary[k]!s:>22}" for k in KEYS))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench control-loop", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--seeds", type=int, default=10, help="seeds 1..N, each with its own hidden GPU profile"
    )
    parser.add_argument("--minutes", type=float, default=20.0, help="length of each trace (arrivals)")
    parser.add_argument(
        "--traces", default=",".join(TRACES), help=f"comma-separated subset of {', '.join(TRACES)}"
    )
    parser.add_argument("--workers", type=int, default=None, help="processes (default: the CPU count)")
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object")
    parser.add_argument(
        "--plot", type=Path, default=None, help="write one PNG per trace for the first seed here"
    )
    parser.add_argument("--events", action="store_true", help="print every plan change (stderr)")
    ns = parser.parse_args(argv)
    if ns.seeds < 1 or ns.minutes <= 0:
        parser.error("--seeds must be >= 1 and --minutes > 0")
    traces = [t for t in ns.traces.split(",") if t]
    unknown = sorted(set(traces) - set(TRACES))
    if unknown:
        parser.error(f"unknown trace(s) {', '.join(unknown)} (known: {', '.join(TRACES)})")
    seeds = list(range(1, ns.seeds + 1))
    results = run(
        seeds, minutes=ns.minutes, traces=traces, workers=ns.workers, plot_seed=seeds[0] if ns.plot else None
    )
    doc = report(results, seeds)
    if ns.plot:
        for path in plot(results, seeds[0], ns.plot):
            print(f"wrote {path}", file=sys.stderr)
    if ns.events:
        for r in results:
            print(f"\n{r.policy} {r.trace} seed {r.seed}:", file=sys.stderr)
            for e in r.events:
                print(f"  {e}", file=sys.stderr)
    if ns.json:
        print(json.dumps(doc))
    else:
        print(
            f"control loop bench: {len(seeds)} seed(s) x {', '.join(traces)} ({ns.minutes:g} min each), "
            "medians over seeds; hidden GPU profile per seed"
        )
        print(table(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
