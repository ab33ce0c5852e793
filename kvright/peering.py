"""Which operator replica works, by kopf's peering rule, for the loop kopf does not pause.

With peering (``KVRIGHT_PEERING``, the chart's HA mode) each replica records itself in a peering object
(``ClusterKopfPeering``, or a ``KopfPeering`` per watched namespace): ``status`` maps an identity to
``{priority, lifetime, lastseen}``. kopf pauses its own handlers on a replica that sees a live peer with a
higher priority, and pauses every replica that shares the top priority with another (it cannot tell which
should work). The periodic sweep is kvright's own task, not a kopf handler, so it asks the same question
here each period, from the same objects.

A replica recognises its own record by its priority: ``kvright.operator`` gives each replica a random one
(kopf's default is 0 for all, which would pause them all), so two records with the same priority are two
replicas that collided, and both stand by as kopf's handlers do.

Pure: the records and the clock are passed in.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PRIORITY_RANGE", "Peer", "live_peers", "standing_by"]

PRIORITY_RANGE = (1, 2**31 - 1)
"""A replica's random priority is drawn from here (above kopf's default 0, within a 32-bit int)."""


@dataclass(frozen=True, kw_only=True)
class Peer:
    """One replica's record in a peering object."""

    identity: str
    priority: int
    deadline: datetime.datetime
    """``lastseen + lifetime``: past it, kopf counts the replica dead."""


def live_peers(status: Mapping[str, Any] | None, now: datetime.datetime) -> list[Peer]:
    """The records in one peering object's ``status`` whose deadline is after ``now``. A record kopf did
    not write (not a mapping, no parseable ``lastseen``) is not a live peer."""
    peers: list[Peer] = []
    for identity, record in (status or {}).items():
        if not isinstance(record, Mapping):
            continue
        try:
            seen = datetime.datetime.fromisoformat(str(record["lastseen"]))
            lifetime = datetime.timedelta(seconds=int(record.get("lifetime", 60)))
            priority = int(record.get("priority", 0))
        except (KeyError, TypeError, ValueError):
            continue
        if seen.tzinfo is None:
            seen = seen.replace(tzinfo=datetime.UTC)
        deadline = seen + lifetime
        if deadline > now:
            peers.append(Peer(identity=str(identity), priority=priority, deadline=deadline))
    return peers


def standing_by(
    statuses: Sequence[Mapping[str, Any] | None], *, priority: int, now: datetime.datetime
) -> str | None:
    """None when the replica with ``priority`` is the one to work in every peering object it is in, else
    why it stands by (one line, for the log).

    Per object: its own live record must be there (kopf writes it when the operator starts; until then
    the replica does not know whether another works), no live record may have a higher priority, and
    none but its own may have the same one."""
    for status in statuses:
        peers = live_peers(status, now)
        mine = [p for p in peers if p.priority == priority]
        if not mine:
            return f"this replica (priority {priority}) is not recorded in the peering object yet"
        if len(mine) > 1:
            names = ", ".join(sorted(p.identity for p in mine))
            return f"{len(mine)} replicas share priority {priority} ({names}); kopf pauses them all"
        higher = sorted((p for p in peers if p.priority > priority), key=lambda p: -p.priority)
        if higher:
            return f"{higher[0].identity} works (priority {higher[0].priority} > {priority})"
    return None
