"""Status conditions, pure: types, reason constants, and merging that moves time only on a flip.

Conditions follow the Kubernetes API conventions: a list keyed by ``type``, ``status`` in
True/False/Unknown, a CamelCase ``reason``, a human ``message``, ``observedGeneration`` always set,
and ``lastTransitionTime`` that changes only when ``status`` changes. kvright owns ``PlanFeasible``,
``Deployed`` and ``Ready``; the feedback loop owns ``MetricsAvailable`` and ``SLOMet``. Merging
touches only the types it is given, so the two writers never erase each other's conditions.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from kvright.reasons import Reason

__all__ = [
    "DEPLOYED",
    "METRICS_AVAILABLE",
    "PLAN_FEASIBLE",
    "READY",
    "SLO_MET",
    "Condition",
    "ConditionStatus",
    "Reason",
    "find",
    "format_time",
    "merge",
    "ready",
]

PLAN_FEASIBLE: Final = "PlanFeasible"
DEPLOYED: Final = "Deployed"
READY: Final = "Ready"
METRICS_AVAILABLE: Final = "MetricsAvailable"
SLO_MET: Final = "SLOMet"

ConditionStatus = Literal["True", "False", "Unknown"]
MESSAGE_MAX: Final = 1024


@dataclass(frozen=True, kw_only=True)
class Condition:
    """A condition as kvright decides it, before time and generation are stamped on."""

    type: str
    status: ConditionStatus
    reason: str
    message: str


def format_time(now: datetime.datetime) -> str:
    """RFC 3339 in UTC with second precision, as the API server writes metav1.Time."""
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _bounded(message: str) -> str:
    one_line = " ".join(message.split())
    return one_line if len(one_line) <= MESSAGE_MAX else one_line[: MESSAGE_MAX - 3] + "..."


def find(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    """The condition of ``type_`` in a status list, or None."""
    for cond in conditions or ():
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def merge(
    current: Sequence[Mapping[str, Any]] | None,
    updates: Iterable[Condition],
    *,
    generation: int,
    now: datetime.datetime,
) -> list[dict[str, Any]]:
    """The new conditions list: ``current`` with each update applied by type.

    ``lastTransitionTime`` is kept when the status did not flip (reason and message may still change),
    and set to ``now`` when it flipped or the condition is new. Types not in ``updates`` are kept as
    they are, in their order; new types are appended.
    """
    result: list[dict[str, Any]] = [dict(c) for c in current or () if isinstance(c, Mapping) and "type" in c]
    stamp = format_time(now)
    for update in updates:
        entry: dict[str, Any] = {
            "type": update.type,
            "status": update.status,
            "reason": update.reason,
            "message": _bounded(update.message),
            "observedGeneration": generation,
        }
        for i, old in enumerate(result):
            if old.get("type") == update.type:
                flipped = old.get("status") != update.status or not old.get("lastTransitionTime")
                entry["lastTransitionTime"] = stamp if flipped else old["lastTransitionTime"]
                result[i] = entry
                break
        else:
            entry["lastTransitionTime"] = stamp
            result.append(entry)
    return result


def ready(
    *, plan_feasible: Condition, deployed: Condition, desired_replicas: int, ready_replicas: int
) -> Condition:
    """The summary ``Ready``: True when the plan is feasible, applied, and every desired replica is
    Ready (or zero are desired). The first of those that fails gives the reason."""
    if plan_feasible.status != "True":
        return Condition(
            type=READY,
            status="False" if plan_feasible.status == "False" else "Unknown",
            reason=plan_feasible.reason,
            message=plan_feasible.message,
        )
    if deployed.status != "True" and deployed.reason != Reason.ROLLING_OUT:
        return Condition(type=READY, status="False", reason=deployed.reason, message=deployed.message)
    if desired_replicas == 0:
        return Condition(
            type=READY, status="True", reason=Reason.SCALED_TO_ZERO, message="0 replicas are desired"
        )
    if ready_replicas >= desired_replicas:
        return Condition(
            type=READY,
            status="True",
            reason=Reason.REPLICAS_READY,
            message=f"{ready_replicas}/{desired_replicas} vLLM replicas are Ready",
        )
    return Condition(
        type=READY,
        status="False",
        reason=Reason.REPLICAS_NOT_READY,
        message=f"{ready_replicas}/{desired_replicas} vLLM replicas are Ready",
    )
