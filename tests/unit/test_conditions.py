"""kvright.conditions: merging conditions by type, time moved only on a flip, the Ready summary.

Pure; the clock is a fixed datetime passed in.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kvright.conditions import (
    DEPLOYED,
    PLAN_FEASIBLE,
    READY,
    Condition,
    Reason,
    find,
    format_time,
    merge,
    ready,
)

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(minutes=5)
OLD = {
    "type": PLAN_FEASIBLE,
    "status": "True",
    "reason": "Planned",
    "message": "old",
    "observedGeneration": 1,
    "lastTransitionTime": format_time(T0),
}
FOREIGN = {"type": "SLOMet", "status": "False", "reason": "TPOTAboveTarget", "message": "x"}


def test_format_time_is_utc_seconds() -> None:
    est = datetime.timezone(datetime.timedelta(hours=-5))
    assert format_time(datetime.datetime(2026, 1, 1, 7, 0, 0, 123, tzinfo=est)) == "2026-01-01T12:00:00Z"


@pytest.mark.parametrize(
    ("status", "reason", "expected_time"),
    [
        ("True", "Planned", format_time(T0)),
        ("True", "PlannedAgain", format_time(T0)),
        ("False", "Infeasible", format_time(T1)),
        ("Unknown", "Pending", format_time(T1)),
    ],
    ids=[
        "same-status-keeps-time",
        "reason-change-keeps-time",
        "flip-to-false-moves",
        "flip-to-unknown-moves",
    ],
)
def test_last_transition_time_moves_only_on_flip(status: Any, reason: str, expected_time: str) -> None:
    (merged,) = merge(
        [OLD],
        [Condition(type=PLAN_FEASIBLE, status=status, reason=reason, message="new")],
        generation=2,
        now=T1,
    )
    assert merged == {
        "type": PLAN_FEASIBLE,
        "status": status,
        "reason": reason,
        "message": "new",
        "observedGeneration": 2,
        "lastTransitionTime": expected_time,
    }


def test_merge_keeps_foreign_types_and_appends_new() -> None:
    merged = merge(
        [FOREIGN, OLD],
        [Condition(type=DEPLOYED, status="Unknown", reason="Pending", message="m")],
        generation=3,
        now=T1,
    )
    assert [c["type"] for c in merged] == ["SLOMet", PLAN_FEASIBLE, DEPLOYED]
    assert merged[0] == FOREIGN
    assert merged[1] == OLD
    assert merged[2]["lastTransitionTime"] == format_time(T1)
    assert merged[2]["observedGeneration"] == 3


def test_merge_does_not_mutate_input() -> None:
    current = [dict(OLD)]
    merge(
        current,
        [Condition(type=PLAN_FEASIBLE, status="False", reason="R", message="m")],
        generation=9,
        now=T1,
    )
    assert current == [OLD]


def test_message_is_one_bounded_line() -> None:
    (merged,) = merge(
        None,
        [Condition(type=READY, status="True", reason="R", message="a\nb  " + "x" * 5000)],
        generation=1,
        now=T0,
    )
    assert "\n" not in merged["message"]
    assert len(merged["message"]) == 1024
    assert merged["message"].startswith("a b x")


def test_find() -> None:
    assert find([FOREIGN, OLD], PLAN_FEASIBLE) is OLD
    assert find(None, READY) is None


FEASIBLE = Condition(type=PLAN_FEASIBLE, status="True", reason=Reason.PLANNED, message="ok")
INFEASIBLE = Condition(type=PLAN_FEASIBLE, status="False", reason=Reason.INFEASIBLE, message="needs 2 GPUs")
UNKNOWN_PLAN = Condition(type=PLAN_FEASIBLE, status="Unknown", reason=Reason.HUB_FETCH_FAILED, message="503")
APPLIED = Condition(type=DEPLOYED, status="True", reason=Reason.APPLIED, message="ok")
ROLLING = Condition(type=DEPLOYED, status="False", reason=Reason.ROLLING_OUT, message="1 of 2 updated")
STALLED = Condition(type=DEPLOYED, status="False", reason=Reason.ROLLOUT_STALLED, message="no GPUs")


@pytest.mark.parametrize(
    ("plan", "deployed", "desired", "ready_n", "status", "reason"),
    [
        (FEASIBLE, APPLIED, 2, 2, "True", Reason.REPLICAS_READY),
        (FEASIBLE, APPLIED, 2, 1, "False", Reason.REPLICAS_NOT_READY),
        (FEASIBLE, APPLIED, 0, 0, "True", Reason.SCALED_TO_ZERO),
        (FEASIBLE, ROLLING, 2, 2, "True", Reason.REPLICAS_READY),
        (FEASIBLE, STALLED, 2, 2, "False", Reason.ROLLOUT_STALLED),
        (INFEASIBLE, APPLIED, 2, 2, "False", Reason.INFEASIBLE),
        (UNKNOWN_PLAN, APPLIED, 2, 2, "Unknown", Reason.HUB_FETCH_FAILED),
    ],
    ids=[
        "all-ready",
        "one-not-ready",
        "scaled-to-zero",
        "rolling-but-serving",
        "stalled-rollout-not-ready",
        "infeasible-plan-wins",
        "unknown-plan-is-unknown",
    ],
)
def test_ready_summary(
    plan: Condition, deployed: Condition, desired: int, ready_n: int, status: str, reason: str
) -> None:
    result = ready(plan_feasible=plan, deployed=deployed, desired_replicas=desired, ready_replicas=ready_n)
    assert (result.type, result.status, result.reason) == (READY, status, reason)
