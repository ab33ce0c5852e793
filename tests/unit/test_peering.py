"""kvright.peering: which replica's sweep works, by kopf's own pause rule.

The records are written by kopf's own ``Peer.as_dict`` (the shape kopf patches into a peering object's
status), so a change of kopf's format fails here. Nothing else is faked; the clock is passed in.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kopf._core.engines.peering import Identity
from kopf._core.engines.peering import Peer as KopfPeer

from kvright.peering import live_peers, standing_by

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


def record(priority: int, *, seen_ago: float = 5.0, lifetime: int = 60) -> dict[str, Any]:
    seen = NOW - datetime.timedelta(seconds=seen_ago)
    return KopfPeer(
        identity=Identity("x"), priority=priority, lifetime=lifetime, lastseen=seen.isoformat()
    ).as_dict()


def test_kopfs_record_is_read_with_its_deadline() -> None:
    (peer,) = live_peers({"pod-a": record(7, seen_ago=10, lifetime=60)}, NOW)
    assert (peer.identity, peer.priority) == ("pod-a", 7)
    assert peer.deadline == NOW + datetime.timedelta(seconds=50)


@pytest.mark.parametrize(
    ("status", "works"),
    [
        pytest.param({"me": record(5)}, True, id="alone"),
        pytest.param({"me": record(5), "pod-b": record(3)}, True, id="above-a-lower-peer"),
        pytest.param({"me": record(5), "pod-b": record(9)}, False, id="below-a-higher-peer"),
        pytest.param({"me": record(5), "pod-b": record(9, seen_ago=61)}, True, id="a-higher-peer-expired"),
        # kopf removes itself on exit by a touch with lifetime 0: dead at once.
        pytest.param({"me": record(5), "pod-b": record(9, lifetime=0)}, True, id="a-peer-that-left"),
        pytest.param({"pod-b": record(3)}, False, id="not-recorded-yet"),
        pytest.param({"me": record(5, seen_ago=70), "pod-b": record(3)}, False, id="own-record-expired"),
        pytest.param({"me": record(5), "pod-b": record(5)}, False, id="a-shared-priority-pauses-both"),
        pytest.param({"me": record(5), "junk": "x", "bad": {"priority": 9}}, True, id="not-kopfs-records"),
    ],
)
def test_one_peering_object(status: dict[str, Any], works: bool) -> None:
    why = standing_by([status], priority=5, now=NOW)
    assert (why is None) == works, why


def test_the_reason_names_the_replica_that_works() -> None:
    why = standing_by([{"me": record(5), "pod-b": record(9), "pod-c": record(8)}], priority=5, now=NOW)
    assert why == "pod-b works (priority 9 > 5)"


def test_namespaced_peerings_must_all_agree() -> None:
    """One KopfPeering per watched namespace: kopf pauses the operator when any of them says so."""
    fine, contested = {"me": record(5)}, {"me": record(5), "pod-b": record(6)}
    assert standing_by([fine, fine], priority=5, now=NOW) is None
    assert standing_by([fine, contested], priority=5, now=NOW) == "pod-b works (priority 6 > 5)"


def test_a_naive_timestamp_is_utc() -> None:
    naive = (NOW - datetime.timedelta(seconds=5)).replace(tzinfo=None).isoformat()
    assert live_peers({"me": {"priority": 5, "lifetime": 60, "lastseen": naive}}, NOW)
