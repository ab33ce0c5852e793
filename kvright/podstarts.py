"""Cold start learned from the pods' own starts: the predicted time to Ready, corrected by what it took.

capacity.coldstart predicts a pod's start from the weights' bytes over its source's bandwidth plus vLLM's
fixed costs, with documented default bandwidths that a cluster's storage, network or registry may not
have. Each vLLM pod that became Ready shows what a start really took here: scheduled (the PodScheduled
condition) to Ready (the Ready condition). :func:`learn` folds the starts not yet counted into the
source's bandwidth (:func:`capacity.learn_bandwidth`, an EWMA on seconds per byte) and keeps it in
``status.coldStart``, so every later prediction (``status.prediction.coldStartSeconds``, the feedback
loop's restart cost, a demand trend's horizon) uses the bandwidth this cluster has.

A pod counts once: only pods whose Ready time is after the last one counted, whose containers never
restarted (a crash-looping start is not a load time) and whose Ready condition is True. A readiness that
flapped after the start reads as a long start; one such reading moves the EWMA by its weight (0.3) at
most, and the bandwidth stays within :data:`capacity.BANDWIDTH_BOUNDS`. A change of source starts over
from that source's defaults. Pure: no IO, no clock.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import capacity

__all__ = ["TIME_RESOLUTION_SECONDS", "Learned", "PodStart", "learn", "parse_time", "pod_starts"]

#: The resolution of a condition's lastTransitionTime (RFC 3339 to the second).
TIME_RESOLUTION_SECONDS: Final = 1.0


@dataclass(frozen=True, kw_only=True)
class PodStart:
    """One pod's start as its conditions tell it."""

    name: str
    ready: datetime.datetime
    """When its Ready condition last became True."""
    seconds: float
    """Scheduled to Ready."""


@dataclass(frozen=True, kw_only=True)
class Learned:
    """The source profiles to predict with, and what ``status.coldStart`` says (None: nothing learned)."""

    profiles: Mapping[str, capacity.SourceProfile]
    status: dict[str, Any] | None


def parse_time(value: Any) -> datetime.datetime | None:
    """An RFC 3339 time as the API server writes it (UTC when it names no zone), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)


def _stamp(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_starts(pods: Iterable[Mapping[str, Any]]) -> tuple[PodStart, ...]:
    """The starts of the Ready pods whose containers never restarted, oldest Ready first."""
    found = []
    for pod in pods:
        status = pod.get("status") or {}
        conditions = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, Mapping)}
        scheduled, ready = conditions.get("PodScheduled") or {}, conditions.get("Ready") or {}
        if scheduled.get("status") != "True" or ready.get("status") != "True":
            continue
        restarted = any(
            int(c.get("restartCount") or 0) > 0
            for key in ("initContainerStatuses", "containerStatuses")
            for c in status.get(key) or ()
            if isinstance(c, Mapping)
        )
        began, up = (
            parse_time(scheduled.get("lastTransitionTime")),
            parse_time(ready.get("lastTransitionTime")),
        )
        if restarted or began is None or up is None or up < began:
            continue
        name = str((pod.get("metadata") or {}).get("name", ""))
        # Condition times have a resolution of one second: Ready in the second it was scheduled is half a
        # second, the middle of what the two times can tell (and not a zero, which means no reading).
        seconds = max((up - began).total_seconds(), TIME_RESOLUTION_SECONDS / 2)
        found.append(PodStart(name=name, ready=up, seconds=seconds))
    return tuple(sorted(found, key=lambda s: (s.ready, s.name)))


def learn(
    previous: Mapping[str, Any] | None,
    pods: Iterable[Mapping[str, Any]] | None,
    *,
    source: str,
    predict: Callable[[Mapping[str, capacity.SourceProfile]], Mapping[str, capacity.ColdStart]],
) -> Learned:
    """The profiles after the starts in ``pods`` not yet counted in ``previous`` (``status.coldStart``).

    ``source`` is the spec's weight source (``hub``, ``pvc``, ``image`` or ``cache``); ``predict(profiles)``
    returns the plan's :class:`capacity.ColdStart` per source with those profiles (the prediction whose
    other phases a start's duration is corrected against). ``pods`` None: not listed this time.
    """
    default = capacity.DEFAULT_SOURCES[source]
    memory = dict(previous or {})
    if memory.get("source") != source:
        memory = {}
    bandwidth = memory.get("learnedBytesPerSecond")
    if isinstance(bandwidth, int | float) and not isinstance(bandwidth, bool) and bandwidth > 0:
        profile = default.with_learned(float(bandwidth))
    else:
        profile = default
    profiles = {**capacity.DEFAULT_SOURCES, source: profile}
    since = parse_time(memory.get("lastReadyTime"))
    fresh = [s for s in pod_starts(pods or ()) if since is None or s.ready > since]
    if not fresh:
        return Learned(profiles=profiles, status=memory or None)
    prediction = predict(profiles).get(source)
    if prediction is None:  # no plan to predict with: nothing to correct against
        return Learned(profiles=profiles, status=memory or None)
    learned = capacity.learn_bandwidth(
        profile.learned_bytes_per_second, [s.seconds for s in fresh], prediction=prediction
    )
    profiles[source] = default.with_learned(learned)
    counted = int(memory.get("observedStarts") or 0) + len(fresh)
    return Learned(
        profiles=profiles,
        status={
            "source": source,
            "learnedPhase": profile.learned,
            "learnedBytesPerSecond": round(learned),
            "defaultBytesPerSecond": round(default.learned_bytes_per_second),
            "observedStarts": counted,
            "lastStartSeconds": round(fresh[-1].seconds, 1),
            "lastReadyTime": _stamp(fresh[-1].ready),
        },
    )
