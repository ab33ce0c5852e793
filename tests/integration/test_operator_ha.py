"""Two operator replicas with kopf peering (the chart's HA mode): one works, the other stands by, and the
standby takes over when the worker leaves.

Both run as processes of their own (``python -m kvright.operator``'s ``main``, one namespace,
``KVRIGHT_PEERING``, the sweep every 2 s) against the real control plane, with kopf's peering CRDs and a
``KopfPeering`` object in the namespace as the chart installs them. ``POD_ID`` names each replica in the
peering records, as the chart's Deployment does. Each replica logs ``reconciled NS/NAME`` (DEBUG) for every
reconcile it finishes, from a kopf handler or from the sweep; that line is what "works" means here.

Nothing is faked: the architecture comes from the catalog, so no hub is needed.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kvright.operator import Kube
from tests.builders import llmd
from tests.fixtures.cluster import Cluster
from tests.integration.kvright_cluster import (
    ROOT,
    admin_with_crd,
    create,
    namespace,
    operator_process,
    patch_spec,
    poll,
    reconciled,
)

pytestmark = pytest.mark.cluster

PEERING_CRDS = ROOT / "charts" / "kvright" / "files" / "crds" / "kopf-peering.yaml"
PEERING = "kvright-ha"
CHAT = llmd("chat").model("llama-3.1-8b").gpu("NVIDIA-H100-80GB-HBM3").context(8192, 1024, 256).tpot_ms(50)
PERIODS = 4
"""Sweep periods the standby is watched for: with the sweep every 2 s, the worker reconciles in each."""


@pytest.fixture(scope="module")
def kube(cluster: Cluster) -> Kube:
    kube = admin_with_crd()
    for args in (
        ["apply", "--server-side", "--field-manager=kvright-tests", "-f", str(PEERING_CRDS)],
        ["wait", "--for=condition=Established", "--timeout=60s", "-f", str(PEERING_CRDS)],
    ):
        subprocess.run(["kubectl", *args], check=True, capture_output=True, timeout=90)
    return kube


def peers(kube: Kube, ns: str) -> dict[str, Any]:
    got = kube.get(f"/apis/kopf.dev/v1/namespaces/{ns}/kopfpeerings/{PEERING}") or {}
    return dict(got.get("status") or {})


def reconciles(log: Path, ns: str) -> int:
    return log.read_text(errors="replace").count(f"reconciled {ns}/chat:")


def test_one_replica_works_the_other_stands_by_and_takes_over(kube: Kube, tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        ns = stack.enter_context(namespace(kube, "kvr-ha"))
        kube.request(
            "POST",
            f"/apis/kopf.dev/v1/namespaces/{ns}/kopfpeerings",
            body={"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": PEERING}},
        )
        logs = {name: tmp_path / f"{name}.log" for name in ("op-a", "op-b")}
        procs = {
            name: stack.enter_context(
                operator_process(ns, log, debug=("kvright.operator",), POD_ID=name, KVRIGHT_PEERING=PEERING)
            )
            for name, log in logs.items()
        }

        def both_recorded() -> dict[str, Any] | None:
            records = peers(kube, ns)
            return records if set(records) >= set(procs) else None

        records = poll(both_recorded, what="both replicas to record themselves in the peering", timeout=60)
        priorities = {name: int(records[name]["priority"]) for name in procs}
        assert len(set(priorities.values())) == 2, f"each replica draws its own priority: {priorities}"
        worker = max(priorities, key=lambda name: priorities[name])
        standby = min(priorities, key=lambda name: priorities[name])

        # Both settled before the object exists: the standby's sweep has stood by once, so kopf, which
        # reads the same records, has paused its handlers too (a listing kopf had in flight before the
        # pause, retried while the API server warms up, would still be acted on).
        poll(
            lambda: "periodic reconcile: standing by" in logs[standby].read_text(errors="replace"),
            what="the standby to stand by",
            timeout=60,
        )
        create(kube, CHAT.obj(), ns)
        poll(lambda: reconciled(kube, ns, "chat"), what="the worker to reconcile the new object")
        # The sweep reconciles every 2 s: a few periods of the worker's reconciles, none from the standby.
        start = reconciles(logs[worker], ns)
        poll(lambda: reconciles(logs[worker], ns) >= start + PERIODS, what="the worker's sweep", timeout=60)
        standby_log = logs[standby].read_text(errors="replace")
        assert reconciles(logs[standby], ns) == 0, standby_log[-3000:]
        assert f"standing by: {worker} works (priority {priorities[worker]} > {priorities[standby]})" in (
            standby_log
        ), standby_log[-3000:]
        assert all(p.poll() is None for p in procs.values()), "a replica exited"

        # The worker leaves (kopf removes its record on exit); the standby takes over the object's edits.
        procs[worker].send_signal(signal.SIGTERM)
        procs[worker].wait(timeout=30)
        patch_spec(kube, ns, "chat", {"workload": {"maxModelLen": 16384}})

        def edit_reconciled() -> dict[str, Any] | None:
            obj = reconciled(kube, ns, "chat")
            return obj if obj and obj["metadata"]["generation"] == 2 else None

        obj = poll(edit_reconciled, what="the former standby to reconcile the edit", timeout=60)
        assert obj["status"]["plan"]["maxModelLen"] == 16384
        # kopf resumed the former standby's handlers; its sweep follows within a period.
        poll(
            lambda: "periodic reconcile: this replica works" in logs[standby].read_text(errors="replace"),
            what="the former standby's sweep to work",
            timeout=30,
        )
