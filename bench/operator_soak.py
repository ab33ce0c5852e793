"""The operator soak: many LLMDeployments with feedback Adjust against a real Prometheus that goes away
and comes back ("flaps"), periodic spec edits on a subset, for ``seconds``; does the operator's memory
or its lag behind the edits grow?

Set up: a fresh namespace, Prometheus (kvright_dev.prometheus: the prometheus binary on a free
127.0.0.1 port), ``python -m kvright.operator`` watching the namespace with ``KVRIGHT_PROMETHEUS_URL``
set, its level-based sweep every ``sweep_seconds`` (so every object is reconciled again, its feedback
loop asking Prometheus, once a period), its metrics endpoint on loopback; then ``count`` objects with
``feedback.mode: Adjust`` (``replicas.count: 0``: no pods, so Prometheus has no vLLM series and the
loop reports "no data" while Prometheus is up and "unreachable" while it is down, and every flap
changes every object's MetricsAvailable condition, a status write each).

During the soak, each on its own schedule, all bounded by the soak's end:

* edits: every ``edit_seconds``, ``edit_batch`` objects (round robin) get ``spec.slo.tpotMilliseconds``
  toggled between 50 and 60 (a new plan: the Deployment's args change); the lag of each edit is the time
  from the PATCH's answer to the first status with that ``observedGeneration`` (a watch);
* flaps: in every ``flap_period_seconds``, Prometheus is stopped for ``flap_down_seconds``;
* samples: every ``sample_seconds``, the operator's RSS and CPU seconds (/proc), its reconciles so far
  (``kvright_reconcile_total`` from its metrics endpoint), the edits not yet observed and the oldest
  one's age.

Reported: RSS first quarter vs last quarter (mean) and its least-squares slope, edit lag p50/p99 and
edits still unobserved per quarter, reconciles per second. Verdicts: memory grows by at most
``RSS_GROWTH_MAX`` from the first to the last quarter; the last quarter's lag p99 is at most twice the
first's (or 1 s more, whichever is larger) and every edit was observed.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.operator_scale import (
    MODEL_SPEC,
    Operator,
    StatusWatcher,
    before,
    create_paced,
    delete_namespace,
    llmd_base,
    log,
    make_namespace,
    percentile,
    proc_cpu_seconds,
    proc_status_bytes,
)
from kvright.operator import Kube, KubeError
from kvright_dev.prometheus import Prometheus

SOAK_SPEC: dict[str, Any] = {
    **MODEL_SPEC,
    "feedback": {"mode": "Adjust", "windowSeconds": 60, "cooldownSeconds": 60},
}
RSS_GROWTH_MAX = 0.10
"""Memory passes when the last quarter's mean RSS is at most 10% above the first quarter's."""
TPOT_VALUES = (50, 60)


# --- pure ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Growth:
    """How a series sampled over time moved: first quarter vs last quarter, and its linear trend."""

    first_quarter_mean: float
    """Mean of the samples in the first quarter of the time span."""
    last_quarter_mean: float
    """Mean of the samples in the last quarter of the time span."""
    slope_per_hour: float
    """Least-squares slope over all samples, in units per hour."""

    @property
    def change_fraction(self) -> float:
        """(last - first) / first; 0 when the first quarter's mean is 0."""
        return (
            (self.last_quarter_mean - self.first_quarter_mean) / self.first_quarter_mean
            if self.first_quarter_mean
            else 0.0
        )


def quarter(t: float, start: float, end: float) -> int:
    """Which quarter (0..3) of [start, end] the time ``t`` falls in (clamped)."""
    if end <= start:
        return 0
    return min(3, max(0, int(4 * (t - start) / (end - start))))


def growth(samples: Sequence[tuple[float, float]]) -> Growth:
    """First- vs last-quarter means and the least-squares slope of ``(seconds, value)`` samples.

    slope = sum((t - t_mean)(v - v_mean)) / sum((t - t_mean)^2), scaled from per second to per hour."""
    if not samples:
        return Growth(first_quarter_mean=math.nan, last_quarter_mean=math.nan, slope_per_hour=math.nan)
    start, end = samples[0][0], samples[-1][0]
    first = [v for t, v in samples if quarter(t, start, end) == 0]
    last = [v for t, v in samples if quarter(t, start, end) == 3] or [samples[-1][1]]
    n = len(samples)
    t_mean = sum(t for t, _ in samples) / n
    v_mean = sum(v for _, v in samples) / n
    denominator = sum((t - t_mean) ** 2 for t, _ in samples)
    slope = sum((t - t_mean) * (v - v_mean) for t, v in samples) / denominator if denominator else 0.0
    return Growth(
        first_quarter_mean=sum(first) / len(first),
        last_quarter_mean=sum(last) / len(last),
        slope_per_hour=slope * 3600,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class QuarterLag:
    """Edit-to-status lag of the edits made in one quarter of the soak."""

    edits: int
    """Edits made in the quarter."""
    unobserved: int
    """Of those, edits whose status never came (within the soak and its drain)."""
    p50_seconds: float
    """Median lag of the observed ones (NaN for none)."""
    p99_seconds: float
    """99th percentile lag of the observed ones (NaN for none)."""


def lag_by_quarter(edits: Sequence[tuple[float, float | None]], start: float, end: float) -> list[QuarterLag]:
    """``(edit time, lag or None)`` grouped into the four quarters of [start, end]."""
    out = []
    for q in range(4):
        mine = [lag for t, lag in edits if quarter(t, start, end) == q]
        seen = [lag for lag in mine if lag is not None]
        out.append(
            QuarterLag(
                edits=len(mine),
                unobserved=len(mine) - len(seen),
                p50_seconds=percentile(seen, 50),
                p99_seconds=percentile(seen, 99),
            )
        )
    return out


def lag_grew(quarters: Sequence[QuarterLag]) -> bool:
    """Whether the lag grew: the last quarter's p99 is above max(2 x the first's, the first's + 1 s), or
    any edit went unobserved. A quarter without edits compares as no growth."""
    if any(q.unobserved for q in quarters):
        return True
    first, last = quarters[0].p99_seconds, quarters[-1].p99_seconds
    if math.isnan(first) or math.isnan(last):
        return False
    return last > max(2 * first, first + 1.0)


def toggled_tpot(current: int) -> int:
    """The other of the two TPOT targets the edits alternate between."""
    return TPOT_VALUES[1] if current == TPOT_VALUES[0] else TPOT_VALUES[0]


def prometheus_down(t: float, *, period: float, down: float) -> bool:
    """Whether Prometheus is meant to be down ``t`` seconds into the soak: in each ``period`` it is up
    for the first ``period - down`` seconds, then down."""
    return period > 0 and down > 0 and (t % period) >= period - down


def reconcile_total(metrics_text: str) -> float | None:
    """``kvright_reconcile_total`` summed over its ``result`` label, from the operator's /metrics text."""
    total, found = 0.0, False
    for line in metrics_text.splitlines():
        if line.startswith("kvright_reconcile_total{"):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    return total if found else None


# --- IO -------------------------------------------------------------------------------------------------


def soak(
    kube: Kube,
    kubeconfig: str,
    *,
    count: int,
    seconds: float,
    sweep_seconds: float = 60,
    timeout: float = 600,
    edit_seconds: float = 15,
    edit_batch: int = 10,
    flap_period_seconds: float = 180,
    flap_down_seconds: float = 45,
    sample_seconds: float = 10,
    drain_seconds: float = 120,
) -> dict[str, Any]:
    ns = make_namespace(kube, "bench-soak")
    work = Path(tempfile.mkdtemp(prefix="kvright-bench-soak-"))
    prometheus = Prometheus(work / "prometheus").start()
    operator = Operator(
        kubeconfig,
        ns,
        {
            "KVRIGHT_PROMETHEUS_URL": prometheus.url,
            "KVRIGHT_RECONCILE_SECONDS": f"{sweep_seconds:g}",
        },
    )
    samples: list[dict[str, float | int | bool | None]] = []
    edits: list[tuple[str, int, float]] = []  # name, generation, time of the PATCH's answer
    flaps = 0
    try:
        operator.wait_ready(kube, SOAK_SPEC)
        base = llmd_base(ns)
        with StatusWatcher(kube, ns) as statuses:
            log(f"soak: creating {count} objects")
            create_paced(kube, base, count=count, rate=0, timeout=timeout, label="soak", spec=SOAK_SPEC)
            if not before(
                time.monotonic() + timeout,
                lambda: statuses.with_status() >= count + 1,
                what="every soak status",
                interval=0.5,
            ):
                raise RuntimeError(
                    f"soak: only {statuses.with_status()} of {count + 1} statuses after {timeout:g} s"
                )
            names = [f"m{i:04d}" for i in range(count)]
            tpot = dict.fromkeys(names, TPOT_VALUES[0])
            log(f"soak: {count} objects reconciled; soaking for {seconds:g} s")
            start = time.monotonic()
            end = start + seconds
            next_edit, next_sample, cursor = start + edit_seconds, start, 0
            while (now := time.monotonic()) < end:
                elapsed = now - start
                want_down = prometheus_down(elapsed, period=flap_period_seconds, down=flap_down_seconds)
                if want_down and prometheus.running:
                    prometheus.stop()
                    flaps += 1
                elif not want_down and not prometheus.running:
                    prometheus.start()
                if now >= next_edit:
                    next_edit += edit_seconds
                    for _ in range(min(edit_batch, count)):
                        name = names[cursor % count]
                        cursor += 1
                        tpot[name] = toggled_tpot(tpot[name])
                        try:
                            answer = kube.request(
                                "PATCH",
                                f"{base}/{name}",
                                body={"spec": {"slo": {"tpotMilliseconds": tpot[name]}}},
                                content_type="application/merge-patch+json",
                            )
                        except KubeError as exc:
                            log(f"soak: edit of {name} failed: {exc}")
                            continue
                        edits.append((name, int(answer["metadata"]["generation"]), time.monotonic()))
                if now >= next_sample:
                    next_sample += sample_seconds
                    pending = [t for n, g, t in edits if statuses.first_at_least(n, g) is None]
                    samples.append(
                        {
                            "t": now - start,
                            "rss_bytes": proc_status_bytes(operator.pid, "VmRSS"),
                            "cpu_seconds": proc_cpu_seconds(operator.pid),
                            "reconciles": reconcile_total(operator.metrics_text()),
                            "edits_pending": len(pending),
                            "oldest_pending_seconds": (now - min(pending)) if pending else 0.0,
                            "prometheus_up": prometheus.running,
                        }
                    )
                    if operator.exited():
                        raise RuntimeError(f"soak: {operator.exited()}")
                time.sleep(min(1.0, max(0.05, min(next_edit, next_sample, end) - time.monotonic())))
            if not prometheus.running:
                prometheus.start()
            drained = before(
                time.monotonic() + drain_seconds,
                lambda: all(statuses.first_at_least(n, g) is not None for n, g, _ in edits),
                what="every edit observed",
                interval=0.5,
            )
            lags = [
                (t - start, (seen - t) if (seen := statuses.first_at_least(n, g)) is not None else None)
                for n, g, t in edits
            ]
            watch_errors = statuses.errors
        rss_peak = proc_status_bytes(operator.pid, "VmHWM")
    finally:
        operator.stop()
        prometheus.stop()
    gone = delete_namespace(kube, ns)
    return summarize(
        samples,
        lags,
        seconds=seconds,
        count=count,
        flaps=flaps,
        rss_peak=rss_peak,
        extra={
            "drained": drained,
            "watch_reconnects": watch_errors,
            "sweep_seconds": sweep_seconds,
            "edit_seconds": edit_seconds,
            "edit_batch": edit_batch,
            "flap_period_seconds": flap_period_seconds,
            "flap_down_seconds": flap_down_seconds,
            "sample_seconds": sample_seconds,
            "operator_log": operator.log_path,
            "namespace_gone_seconds": gone,
        },
    )


def summarize(
    samples: Sequence[Mapping[str, Any]],
    lags: Sequence[tuple[float, float | None]],
    *,
    seconds: float,
    count: int,
    flaps: int,
    rss_peak: int,
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """The soak's figures and verdicts from its samples and edit lags (pure)."""
    rss = growth([(float(s["t"]), float(s["rss_bytes"])) for s in samples])
    cpu = [(float(s["t"]), float(s["cpu_seconds"])) for s in samples]
    cpu_rate = (
        (cpu[-1][1] - cpu[0][1]) / (cpu[-1][0] - cpu[0][0])
        if len(cpu) > 1 and cpu[-1][0] > cpu[0][0]
        else None
    )
    rec = [(float(s["t"]), float(s["reconciles"])) for s in samples if s.get("reconciles") is not None]
    rec_rate = (
        (rec[-1][1] - rec[0][1]) / (rec[-1][0] - rec[0][0])
        if len(rec) > 1 and rec[-1][0] > rec[0][0]
        else None
    )
    pending = growth([(float(s["t"]), float(s["edits_pending"])) for s in samples])
    quarters = lag_by_quarter(lags, 0.0, seconds)
    memory_ok = rss.change_fraction <= RSS_GROWTH_MAX
    lag_ok = not lag_grew(quarters)
    observed = [lag for _, lag in lags if lag is not None]
    return {
        "count": count,
        "seconds": seconds,
        "flaps": flaps,
        "edits": len(lags),
        "edits_unobserved": len(lags) - len(observed),
        "edit_lag_p50_seconds": percentile(observed, 50),
        "edit_lag_p99_seconds": percentile(observed, 99),
        "edit_lag_max_seconds": max(observed, default=math.nan),
        "lag_by_quarter": [dataclasses.asdict(q) for q in quarters],
        "edits_pending_by_quarter_mean": [pending.first_quarter_mean, pending.last_quarter_mean],
        "rss_first_quarter_bytes": rss.first_quarter_mean,
        "rss_last_quarter_bytes": rss.last_quarter_mean,
        "rss_change_fraction": rss.change_fraction,
        "rss_slope_bytes_per_hour": rss.slope_per_hour,
        "rss_peak_bytes": rss_peak,
        "operator_cpu_cores": cpu_rate,
        "reconciles_per_second": rec_rate,
        "samples": [dict(s) for s in samples],
        "verdict": {
            "memory_ok": memory_ok,
            "memory": f"RSS {rss.first_quarter_mean / 2**20:.0f} -> {rss.last_quarter_mean / 2**20:.0f} MiB "
            f"({rss.change_fraction:+.1%}, limit +{RSS_GROWTH_MAX:.0%})",
            "lag_ok": lag_ok,
            "lag": f"p99 {quarters[0].p99_seconds:.2f} -> {quarters[-1].p99_seconds:.2f} s, "
            f"{len(lags) - len(observed)} unobserved",
        },
        **extra,
    }


def print_soak(s: Mapping[str, Any]) -> None:
    print(
        f"\nsoak: {s['count']} objects, feedback Adjust, {s['seconds']:g} s; "
        f"sweep every {s['sweep_seconds']:g} s; "
        f"{s['edit_batch']} edits every {s['edit_seconds']:g} s; "
        f"Prometheus down {s['flap_down_seconds']:g} s "
        f"of every {s['flap_period_seconds']:g} s ({s['flaps']} flaps)"
    )
    mib = 2**20
    print(
        f"  operator RSS: first quarter {s['rss_first_quarter_bytes'] / mib:.0f} MiB, last quarter "
        f"{s['rss_last_quarter_bytes'] / mib:.0f} MiB ({s['rss_change_fraction']:+.1%}), slope "
        f"{s['rss_slope_bytes_per_hour'] / mib:+.1f} MiB/h, peak {s['rss_peak_bytes'] / mib:.0f} MiB"
    )
    cores = s["operator_cpu_cores"]
    rps = s["reconciles_per_second"]
    print(
        f"  operator CPU: {'n/a' if cores is None else f'{cores:.2f}'} cores on average; "
        f"reconciles: {'n/a' if rps is None else f'{rps:.1f}'}/s"
    )
    print(
        f"  edits: {s['edits']}, lag p50 {s['edit_lag_p50_seconds']:.2f} s, "
        f"p99 {s['edit_lag_p99_seconds']:.2f} s, "
        f"max {s['edit_lag_max_seconds']:.2f} s, unobserved {s['edits_unobserved']}"
    )
    for i, q in enumerate(s["lag_by_quarter"]):
        print(
            f"    quarter {i + 1}: {q['edits']} edits, lag p50 {q['p50_seconds']:.2f} s, "
            f"p99 {q['p99_seconds']:.2f} s, "
            f"unobserved {q['unobserved']}"
        )
    first, last = s["edits_pending_by_quarter_mean"]
    print(f"  edits pending at a sample (mean): first quarter {first:.1f}, last quarter {last:.1f}")


__all__ = [
    "SOAK_SPEC",
    "Growth",
    "QuarterLag",
    "growth",
    "lag_by_quarter",
    "lag_grew",
    "prometheus_down",
    "quarter",
    "reconcile_total",
    "soak",
    "summarize",
    "toggled_tpot",
]
