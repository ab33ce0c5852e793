"""kvright's control law against a queue-length autoscaler, side by side on one simulated trace.

What runs: an in-process, discrete-time model of a vLLM fleet built from the simulator's engine
(:mod:`kvright_dev.sim.engine` with capacity's roofline as physics, no cluster, no HTTP). Both policies
see the same seeded arrivals (a ramp, a spike, a slow decline), the same GPUs and the same rollout
mechanics (a Deployment with maxSurge 1 / maxUnavailable 0: a new or replacement replica costs GPUs
from the moment it is scheduled, serves after a start-up delay, and a removed replica drains).

- kvright: :func:`kvright.control.decide` every control period on an Observation assembled the way
  Prometheus would answer (p90 via histogram_quantile over vLLM's TPOT buckets, window averages).
  It may change --max-num-seqs (a rolling restart) and replicas. Replan decisions are counted but not
  applied (the bench keeps one model/GPU/TP).
- queue: the HPA/KEDA recipe deployments use today: replicas = ceil(current x mean waiting per
  replica / target), 10 % tolerance, scale-down stabilisation 300 s, on vllm:num_requests_waiting.
  It never touches --max-num-seqs.

Both start from the same first plan: the planner's max-num-seqs (the largest batch whose *predicted*
TPOT meets the SLO) on GPUs that are really slower than predicted (``--efficiency``), i.e. a plan that
is too aggressive. The score is measured from finished requests (ground truth, not the histogram).

Run: ``python -m bench.control_loop [--minutes 30] [--seed 1] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import capacity
from kvright.control import Action, Bounds, Current, History, Tuning, decide, target_batch
from kvright.observe import Observation
from kvright_dev.sim.engine import Engine
from kvright_dev.sim.metrics import TPOT_BUCKETS
from kvright_dev.sim.physics import step_model

DECISIONS = False  # --decisions: print every kvright decision to stderr
TICK = 1.0  # seconds of virtual time per simulation tick
SCORE_WINDOW = 60.0  # seconds: SLO compliance is judged on p90 over this window, every SCORE_EVERY
SCORE_EVERY = 10.0


@dataclass(frozen=True, kw_only=True)
class Scenario:
    architecture: str = "llama-3.1-70b"
    gpu: str = "h100-sxm"
    tensor_parallel_size: int = 4
    slo_tpot_seconds: float = 0.050
    percentile: int = 90
    efficiency: float = 0.8
    noise: float = 0.05
    prompt_tokens: int = 1000
    output_tokens: int = 256
    max_model_len: int = 4096
    min_replicas: int = 1
    max_replicas: int = 8
    max_gpus: int = 32
    base_rate: float = 3.0
    peak_rate: float = 18.0
    spike_rate: float = 30.0
    startup_seconds: float = 60.0
    minutes: float = 30.0
    seed: int = 1
    # control settings shared by both loops
    period_seconds: float = 30.0
    window_seconds: int = 60
    cooldown_seconds: float = 120.0
    queue_target_waiting: float = 5.0
    queue_period_seconds: float = 15.0
    queue_stabilisation_seconds: float = 300.0


def arrival_rate(s: Scenario, t: float, total: float) -> float:
    """Requests per second: ramp base -> peak over the first quarter, a spike for 5 %, decline to base."""
    x = t / total
    if x < 0.25:
        return s.base_rate + (s.peak_rate - s.base_rate) * x / 0.25
    if x < 0.30:
        return s.spike_rate
    return s.peak_rate - (s.peak_rate - s.base_rate) * (x - 0.30) / 0.70


@dataclass
class Replica:
    engine: Engine
    max_num_seqs: int
    ready_at: float
    draining: bool = False

    def serving(self, now: float) -> bool:
        return not self.draining and now >= self.ready_at


@dataclass
class Outcome:
    finished_at: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    gpu_seconds: float = 0.0
    plan_changes: int = 0
    replans: int = 0
    events: list[str] = field(default_factory=list)
    score_times: list[float] = field(default_factory=list)
    score_p90: list[float] = field(default_factory=list)


class Fleet:
    """Replicas behind a least-outstanding-requests balancer, reconciled like a Deployment."""

    def __init__(
        self, s: Scenario, make_engine: Callable[[int, int], Engine], *, replicas: int, seqs: int
    ) -> None:
        self.s = s
        self.make_engine = make_engine
        self.want_replicas = replicas
        self.want_seqs = seqs
        self.replicas = [
            Replica(engine=make_engine(seqs, i), max_num_seqs=seqs, ready_at=0.0) for i in range(replicas)
        ]
        self.serial = replicas

    def route(self, now: float, prompt: int, output: int) -> None:
        live = [r for r in self.replicas if r.serving(now)]
        if not live:
            live = [r for r in self.replicas if not r.draining] or self.replicas
        target = min(live, key=lambda r: len(r.engine.running) + len(r.engine.waiting))
        target.engine.advance_idle(now)
        target.engine.submit(prompt_tokens=prompt, max_tokens=output, at=now)

    def reconcile(self, now: float) -> None:
        active = [r for r in self.replicas if not r.draining]
        new = [r for r in active if r.max_num_seqs == self.want_seqs]
        old = [r for r in active if r.max_num_seqs != self.want_seqs]
        warming = [r for r in new if now < r.ready_at]
        if len(active) < self.want_replicas:
            for _ in range(self.want_replicas - len(active)):
                self._add(now)
        elif old and not warming:
            if len(active) <= self.want_replicas:
                self._add(now)  # surge one replacement
            else:
                old[0].draining = True
        elif len(active) > self.want_replicas and not old:
            # Scale down: drain the replica with the least work in flight.
            victim = min(new, key=lambda r: len(r.engine.running) + len(r.engine.waiting))
            victim.draining = True
        # A replacement that became ready retires one old replica.
        ready_new = [r for r in new if now >= r.ready_at]
        if old and len(ready_new) + len(old) > self.want_replicas:
            old[0].draining = True
        self.replicas = [r for r in self.replicas if not (r.draining and not r.engine.busy)]

    def _add(self, now: float) -> None:
        self.serial += 1
        engine = self.make_engine(self.want_seqs, self.serial)
        engine.advance_idle(now)
        self.replicas.append(
            Replica(engine=engine, max_num_seqs=self.want_seqs, ready_at=now + self.s.startup_seconds)
        )

    def rolling(self, now: float) -> bool:
        """True until every replica runs the wanted max-num-seqs, serves, and the count is right."""
        active = [r for r in self.replicas if not r.draining]
        return len(active) != self.want_replicas or any(
            r.max_num_seqs != self.want_seqs or not r.serving(now) for r in active
        )

    def gpus(self) -> int:
        return len(self.replicas) * self.s.tensor_parallel_size

    def serving_count(self, now: float) -> int:
        return sum(1 for r in self.replicas if r.serving(now))


def histogram_quantile(q: float, values: Sequence[float], buckets: Sequence[float]) -> float | None:
    """Prometheus' histogram_quantile over cumulative buckets built from `values` (linear in a bucket)."""
    if not values:
        return None
    counts = [sum(1 for v in values if v <= le) for le in buckets]
    total = len(values)
    rank = q * total
    lower_bound, lower_count = 0.0, 0
    for le, count in zip(buckets, counts, strict=True):
        if count >= rank:
            width = count - lower_count
            return lower_bound + (le - lower_bound) * ((rank - lower_count) / width if width else 1.0)
        lower_bound, lower_count = le, count
    return buckets[-1]


def exact_quantile(q: float, values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


Policy = Callable[[float, Fleet, "WindowStats"], None]


@dataclass
class WindowStats:
    """What a scrape-and-query would see over the last window."""

    tpots: list[float]
    mean_batch: float
    running: int
    waiting: int
    mean_waiting: float
    preemptions_per_second: float
    kv_usage: float
    mean_context: float


def simulate(s: Scenario, policy_name: str) -> Outcome:
    arch = capacity.load_architecture(s.architecture)
    gpu = capacity.gpu_spec(s.gpu)
    mnbt = capacity.default_max_num_batched_tokens(gpu)
    model = capacity.ServingModel(
        arch,
        gpu,
        capacity.EngineConfig(
            layout=capacity.Layout(tensor_parallel_size=s.tensor_parallel_size), max_num_batched_tokens=mnbt
        ),
    )
    step_seconds = step_model(model, efficiency=s.efficiency)
    context = s.prompt_tokens + s.output_tokens / 2
    curve = capacity.Curve(
        model, capacity.Shape(prompt_tokens=s.prompt_tokens, output_tokens=s.output_tokens), s.percentile
    )
    blocks = model.memory.breakdown(capacity.MAX_NUM_SEQS_CAP).num_blocks
    seqs_limit = max(1, model.memory.max_batch(s.prompt_tokens + s.output_tokens, capacity.MAX_NUM_SEQS_CAP))
    # The first plan: the largest batch whose *predicted* TPOT meets the SLO (no calibration yet).
    first_seqs = max(
        1, min(512, target_batch(curve.tpot_seconds, budget_seconds=s.slo_tpot_seconds, limit=seqs_limit))
    )
    peak_concurrency = arrival_rate(s, 0.0, 1.0) * (s.output_tokens * s.slo_tpot_seconds + 1.0)
    first_replicas = max(s.min_replicas, math.ceil(peak_concurrency / first_seqs))

    def make_engine(seqs: int, serial: int) -> Engine:
        return Engine(
            step_seconds=step_seconds,
            max_num_seqs=seqs,
            num_gpu_blocks=blocks,
            max_model_len=s.max_model_len,
            max_num_batched_tokens=mnbt,
            noise=s.noise,
            seed=s.seed * 1000 + serial,
        )

    fleet = Fleet(s, make_engine, replicas=first_replicas, seqs=first_seqs)
    out = Outcome()
    out.events.append(f"t=0s first plan: max-num-seqs {first_seqs}, replicas {first_replicas}")
    rng = random.Random(s.seed)
    total = s.minutes * 60.0
    finished_log: list[tuple[float, float, int]] = []  # (time, tpot, output tokens)
    samples: list[tuple[float, int, int, float, float]] = []  # (t, running, waiting, kv usage, batch/replica)
    preempt_log: list[tuple[float, int]] = []

    history = History()
    tuning = Tuning(cooldown_seconds=s.cooldown_seconds, min_samples=20, sample_deadline_seconds=120.0)
    bounds = Bounds(
        min_replicas=s.min_replicas, max_replicas=s.max_replicas, max_gpus=s.max_gpus, fp8_kv_allowed=False
    )
    queue_history: list[tuple[float, int]] = []
    next_control = s.period_seconds if policy_name == "kvright" else s.queue_period_seconds
    next_score = SCORE_WINDOW

    t = 0.0
    while t < total:
        # Arrivals in [t, t + TICK): Poisson with the trace's rate, lengths +-50 % around the means.
        rate = arrival_rate(s, t, total)
        n = _poisson(rng, rate * TICK)
        for k in range(n):
            prompt = max(1, int(s.prompt_tokens * rng.uniform(0.5, 1.5)))
            output = max(2, int(s.output_tokens * rng.uniform(0.5, 1.5)))
            fleet.route(t + TICK * k / max(1, n), prompt, output)
        end = t + TICK
        preempted = 0
        for replica in fleet.replicas:
            e = replica.engine
            e.advance_idle(t)
            while e.busy and e.now < end:
                step = e.step()
                preempted += step.preempted
                for done in step.finished:
                    finished_log.append((e.now, done.tpot_seconds, done.output_tokens))
                    out.finished_at.append(e.now)
                    out.tpot.append(done.tpot_seconds)
                    out.ttft.append(done.ttft_seconds)
        t = end
        live = [r for r in fleet.replicas if r.serving(t)] or fleet.replicas
        running = sum(len(r.engine.running) for r in fleet.replicas)
        waiting = sum(len(r.engine.waiting) for r in fleet.replicas)
        samples.append(
            (
                t,
                running,
                waiting,
                max(r.engine.kv_cache_usage for r in live),
                sum(len(r.engine.running) for r in live) / len(live),
            )
        )
        preempt_log.append((t, preempted))
        out.gpu_seconds += fleet.gpus() * TICK
        fleet.reconcile(t)

        if t >= next_score:
            recent = [tp for (ft, tp, o) in finished_log if ft > t - SCORE_WINDOW and o > 1]
            if recent:
                out.score_times.append(t)
                out.score_p90.append(exact_quantile(s.percentile / 100.0, recent))
            next_score += SCORE_EVERY

        if t >= next_control:
            window = [x for x in samples if x[0] > t - s.window_seconds]
            stats = WindowStats(
                tpots=[tp for (ft, tp, o) in finished_log if ft > t - s.window_seconds and o > 1],
                mean_batch=sum(x[4] for x in window) / len(window),
                running=running,
                waiting=waiting,
                mean_waiting=sum(x[2] for x in window) / len(window),
                preemptions_per_second=sum(p for (pt, p) in preempt_log if pt > t - s.window_seconds)
                / s.window_seconds,
                kv_usage=sum(x[3] for x in window) / len(window),
                mean_context=context,
            )
            if policy_name == "kvright":
                history = _kvright(s, t, fleet, stats, history, tuning, bounds, curve, seqs_limit, out)
                next_control += s.period_seconds
            else:
                _queue(s, t, fleet, stats, queue_history, out)
                next_control += s.queue_period_seconds
        # Keep the logs bounded to what the windows need.
        if len(samples) > 4 * s.window_seconds:
            del samples[: len(samples) - 2 * s.window_seconds]
            del preempt_log[: len(preempt_log) - 2 * s.window_seconds]
        horizon = t - max(SCORE_WINDOW, s.window_seconds) - 5
        if finished_log and finished_log[0][0] < horizon:
            finished_log = [x for x in finished_log if x[0] >= horizon]
    return out


def _poisson(rng: random.Random, mean: float) -> int:
    if mean <= 0:
        return 0
    # Knuth for small means, normal approximation for large ones.
    if mean > 50:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def _kvright(
    s: Scenario,
    t: float,
    fleet: Fleet,
    w: WindowStats,
    history: History,
    tuning: Tuning,
    bounds: Bounds,
    curve: capacity.Curve,
    seqs_limit: int,
    out: Outcome,
) -> History:
    tpot = histogram_quantile(s.percentile / 100.0, w.tpots, TPOT_BUCKETS)
    obs = Observation(
        namespace="bench",
        name="llm",
        sample_time=t,
        window_seconds=s.window_seconds,
        percentile=s.percentile,
        available=True,
        reason="MetricsFound",
        message="bench",
        tpot_seconds=tpot,
        sample_count=len(w.tpots),
        tpot_mean_seconds=sum(w.tpots) / len(w.tpots) if w.tpots else None,
        running=float(w.running),
        waiting=float(w.waiting),
        mean_batch=w.mean_batch,
        preemptions_per_second=w.preemptions_per_second,
        kv_cache_usage=w.kv_usage,
        mean_context_tokens=w.mean_context,
        replicas_reporting=fleet.serving_count(t),
    )
    current = Current(
        tensor_parallel_size=s.tensor_parallel_size,
        max_num_seqs=fleet.want_seqs,
        kv_cache_dtype="auto",
        replicas=fleet.want_replicas,
        max_num_seqs_limit=seqs_limit,
    )
    decision = decide(
        current=current,
        observation=obs,
        slo_tpot_seconds=s.slo_tpot_seconds,
        model=curve,
        bounds=bounds,
        tuning=tuning,
        history=history,
        now=t,
        rollout_in_progress=fleet.rolling(t),
    )
    if DECISIONS:
        print(f"t={t:.0f}s {decision.action} {decision.reason}: {decision.message}", file=sys.stderr)
    if decision.action == Action.REPLAN:
        out.replans += 1
        out.events.append(f"t={t:.0f}s {decision.reason} (not applied in the bench): {decision.message}")
        # The bench cannot re-plan; do not let the request restart the cooldown.
        return replace(decision.history, last_change_time=history.last_change_time)
    if decision.changes_plan:
        out.plan_changes += 1
        out.events.append(f"t={t:.0f}s {decision.action} {decision.reason}: {decision.message}")
        fleet.want_seqs = decision.max_num_seqs
        fleet.want_replicas = decision.replicas
    return decision.history


def _queue(
    s: Scenario, t: float, fleet: Fleet, w: WindowStats, history: list[tuple[float, int]], out: Outcome
) -> None:
    current = max(1, fleet.serving_count(t))
    per_replica = w.waiting / current
    ratio = per_replica / s.queue_target_waiting
    desired = fleet.want_replicas if abs(ratio - 1.0) <= 0.1 else math.ceil(current * ratio)
    desired = max(s.min_replicas, min(s.max_replicas, s.max_gpus // s.tensor_parallel_size, desired))
    history.append((t, desired))
    # Scale-down stabilisation: the highest recommendation of the last window wins.
    recent = [d for (ht, d) in history if ht > t - s.queue_stabilisation_seconds]
    del history[: len(history) - len(recent)]
    target = max(recent) if desired < fleet.want_replicas else desired
    if target != fleet.want_replicas:
        out.plan_changes += 1
        out.events.append(f"t={t:.0f}s replicas {fleet.want_replicas} -> {target} ({w.waiting} waiting)")
        fleet.want_replicas = target


def summarise(s: Scenario, out: Outcome) -> dict[str, Any]:
    violation_seconds = sum(SCORE_EVERY for p in out.score_p90 if p > s.slo_tpot_seconds)
    converge: float | None = None
    hold = 300.0
    for i, start in enumerate(out.score_times):
        later = [
            (tt, p)
            for tt, p in zip(out.score_times[i:], out.score_p90[i:], strict=True)
            if tt <= start + hold
        ]
        if (
            later
            and later[-1][0] >= start + hold - SCORE_EVERY
            and all(p <= s.slo_tpot_seconds for _, p in later)
        ):
            converge = start
            break
    return {
        "slo_violation_minutes": round(violation_seconds / 60.0, 2),
        "gpu_hours": round(out.gpu_seconds / 3600.0, 2),
        "plan_changes": out.plan_changes,
        "replans_requested": out.replans,
        "minutes_to_converge": None if converge is None else round(converge / 60.0, 2),
        "p90_tpot_ms": round(exact_quantile(0.9, out.tpot) * 1000, 1) if out.tpot else None,
        "p90_ttft_s": round(exact_quantile(0.9, out.ttft), 2) if out.ttft else None,
        "requests": len(out.tpot),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.control_loop", description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--efficiency", type=float, default=0.8)
    p.add_argument("--json", action="store_true")
    p.add_argument("--events", action="store_true", help="print every plan change")
    p.add_argument("--decisions", action="store_true", help="print every kvright decision (stderr)")
    ns = p.parse_args(argv)
    global DECISIONS
    DECISIONS = ns.decisions
    s = Scenario(minutes=ns.minutes, seed=ns.seed, efficiency=ns.efficiency)
    results = {}
    outcomes = {}
    for name in ("kvright", "queue"):
        outcomes[name] = simulate(s, name)
        results[name] = summarise(s, outcomes[name])
    k, q = results["kvright"], results["queue"]

    def ratio(a: float | None, b: float | None) -> float | None:
        if a is None or b is None:
            return None
        return round(a / b, 3) if b else (0.0 if a == 0 else math.inf)

    ratios = {
        "slo_violation_minutes": ratio(k["slo_violation_minutes"], q["slo_violation_minutes"]),
        "gpu_hours": ratio(k["gpu_hours"], q["gpu_hours"]),
        "plan_changes": ratio(k["plan_changes"], q["plan_changes"]),
    }
    report = {
        "scenario": {
            "model": s.architecture,
            "gpu": s.gpu,
            "tensor_parallel_size": s.tensor_parallel_size,
            "slo_tpot_ms": s.slo_tpot_seconds * 1000,
            "efficiency": s.efficiency,
            "minutes": s.minutes,
            "seed": s.seed,
            "trace": f"ramp {s.base_rate:g}->{s.peak_rate:g} req/s (25%), spike {s.spike_rate:g} req/s (5%), "
            f"decline to {s.base_rate:g} req/s (70%)",
            "mode": "in-process discrete-time fleet of kvright_dev.sim engines (no cluster)",
        },
        "kvright": k,
        "queue_autoscaler": q,
        "ratios_kvright_over_queue": ratios,
    }
    if ns.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"control loop bench: {report['scenario']['mode']}")
        print(
            f"  {s.architecture} TP{s.tensor_parallel_size} on {s.gpu}, "
            f"TPOT SLO {s.slo_tpot_seconds * 1000:.0f} ms "
            f"p{s.percentile}, GPUs at {s.efficiency:.0%} of predicted speed, {s.minutes:.0f} min trace"
        )
        print(f"  {'':28}{'kvright':>12}{'queue':>12}{'ratio':>10}")
        for key in (
            "slo_violation_minutes",
            "gpu_hours",
            "plan_changes",
            "minutes_to_converge",
            "p90_tpot_ms",
            "p90_ttft_s",
            "requests",
        ):
            r = ratios.get(key)
            print(f"  {key:28}{k[key]!s:>12}{q[key]!s:>12}{'' if r is None else r!s:>10}")
    if ns.events:
        for name, o in outcomes.items():
            print(f"\n{name} events:", file=sys.stderr)
            for e in o.events:
                print(f"  {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
