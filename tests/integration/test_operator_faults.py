"""The operator across faults of the control plane: kube-apiserver and etcd stopped during a reconcile, and a
watch that expires (410 Gone).

The operator runs as a process of its own (``python -m kvright.operator``, one namespace, its level-based
sweep every 2 s as in the other operator tests). "During a reconcile" is made certain with the seam
``KVRIGHT_FAULT_PAUSE_AFTER_WRITES=1``: the operator stops itself (SIGSTOP) right after the first write of its
first reconcile (the Deployment applied; the Service, the status and the events not yet). Then:

- the API server is killed and started again (``deploy/cluster.sh restart apiserver --kill``) and the spec
  edited (generation 2) before SIGCONT lets the same reconcile go on against the new server;
- kube-apiserver or etcd is killed (``stop-server``) and SIGCONT sent while it is down, so the reconcile's
  next write (the Service) meets the outage: refused at once without the API server (the reconcile fails and
  is retried), held by the API server until etcd is back. The seam logs when that write was sent and when
  it ended, which proves it was in flight during the outage. The server is started again, the first
  generation's status awaited, and the spec edited.

Afterwards, each time: one Deployment and one Service, both controlled by the LLMDeployment, the Deployment
running generation 2's plan, status and every condition at generation 2, Ready, and one PlanChanged event
(no event posted twice).

The watch expiry: the operator, idle, is stopped by the test, the API server stopped, etcd compacted at its
current revision (its v3 JSON gateway), and the API server started again. The operator's watch, resuming from
the last resourceVersion it saw, is answered 410 Gone whoever serves it: the new watch cache ("too old
resource version") or, while that cache still initializes, etcd ("compacted"). Without the compaction a watch
delegated to etcd resumed from the old revision and never saw a 410 (a CI run found that race); kopf then
lists again. The test proves the 410 from the
operator's log (kopf logs "Restarting the watch-stream" at DEBUG, on a 410 only) and checks that what changed
while the watch was broken, an edit and a new object, is handled by kopf (its record of the handled spec, an
annotation kvright's own sweep never writes, moves to the edit and appears on the new object) and ends
consistent.

Which control plane: one no one else uses, since its servers are stopped. When this test session started
its own cluster, that one (each start waits for /readyz, and the module ends by checking every component
runs); when the session reuses a running cluster (a developer's ``make cluster-up``, maybe shared), a private
one for this module (without LeaderWorkerSet and InferencePool, about 10 s to start). Nothing is faked: the
architecture comes from the catalog, so no hub is needed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from kvright.operator import Kube
from kvright_dev import cluster as dev_cluster
from kvright_dev.procs import free_port
from tests.builders import llmd
from tests.fixtures.cluster import OWNER_FILE, Cluster, local_cluster
from tests.integration.kvright_cluster import (
    admin_with_crd,
    condition,
    create,
    llmd_path,
    namespace,
    operator_process,
    patch_spec,
    poll,
    reconciled,
)

pytestmark = pytest.mark.cluster

BASE = llmd("chat").model("llama-3.1-8b").gpu("NVIDIA-H100-80GB-HBM3").context(8192, 1024, 256).tpot_ms(50)
EDIT = {"workload": {"maxModelLen": 32768}}
"""The edit made while the operator cannot see it: generation 2, whose plan runs a longer context."""
RELISTED = "Restarting the watch-stream for llmdeployments.v1alpha1.kvright.dev in '{ns}'"
"""What kopf logs (DEBUG) when a watch on LLMDeployments is answered 410 Gone, before it lists them again."""
WAIT = 50.0
"""Seconds to wait for the operator to converge after a fault."""
HANDLED = "kvright.dev/last-handled-configuration"
WATCH_LOG = ("kopf._cogs.clients.watching",)
"""kopf's watcher at DEBUG, so that a 410 shows in the operator's log."""
"""kopf's record of the spec its handlers last handled (the diff base for the next update)."""


@pytest.fixture(scope="module")
def restartable(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The state directory of a cluster.sh control plane whose servers these tests may restart, with
    ``$KUBECONFIG`` pointing at it (see the module docstring for which one)."""
    if cluster.started_here and cluster.cluster_dir is not None:
        yield cluster.cluster_dir
        state = subprocess.run(
            ["bash", str(dev_cluster.SCRIPT), "status"],
            env={**os.environ, "KVRIGHT_CLUSTER_DIR": str(cluster.cluster_dir)},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert state.returncode == 0, f"the cluster is not healthy after the restarts:\n{state.stdout}"
        return
    private = tmp_path_factory.mktemp("cluster-faults")
    (private / OWNER_FILE).write_text(str(os.getpid()))  # reaped if this session dies before its teardown
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KVRIGHT_LWS", "0")
        mp.setenv("KVRIGHT_INFERENCE_POOL", "0")
        with local_cluster(private) as own:
            mp.setenv("KUBECONFIG", str(own.kubeconfig))
            mp.setenv("KVRIGHT_CLUSTER_DIR", str(private))
            yield private


@pytest.fixture(scope="module")
def kube(restartable: Path) -> Kube:
    return admin_with_crd()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    with namespace(kube, "kvr-fault") as name:
        yield name


def stopped(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the process is stopped by a signal (state T in /proc/PID/stat); a dead one fails the test."""
    assert proc.poll() is None, f"the operator exited ({proc.returncode})"
    stat = Path(f"/proc/{proc.pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


def children(kube: Kube, ns: str) -> dict[str, list[dict[str, Any]]]:
    """The Deployments and Services in ``ns`` (every child kvright makes for this spec)."""
    return {
        "Deployment": kube.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments")["items"],
        "Service": kube.request("GET", f"/api/v1/namespaces/{ns}/services")["items"],
    }


def ready_at(kube: Kube, ns: str, name: str, generation: int) -> dict[str, Any] | None:
    """The LLMDeployment once its status describes ``generation`` and says Ready, else None."""
    obj = reconciled(kube, ns, name)
    if obj is None or obj["metadata"]["generation"] != generation:
        return None
    return obj if condition(obj, "Ready").get("status") == "True" else None


def changes(kube: Kube, ns: str, uid: str) -> list[tuple[str, str, str]]:
    return [e for e in about(kube, ns, uid) if e[1] == "PlanChanged"]


def about(kube: Kube, ns: str, uid: str) -> list[tuple[str, str, str]]:
    """The events posted about the object ``uid`` (type, reason, message), kopf's own log lines left out."""
    got = kube.request(
        "GET", f"/api/v1/namespaces/{ns}/events", query=[("fieldSelector", f"involvedObject.uid={uid}")]
    )
    return [(e["type"], e["reason"], e["message"]) for e in got["items"] if e["reason"] != "Logging"]


def assert_consistent(kube: Kube, ns: str, obj: dict[str, Any], *, plan_changed: bool) -> None:
    """One Deployment and one Service per LLMDeployment, each controlled by it; the Deployment runs the plan
    in status; status and every condition describe the current generation; and no event posted twice (once
    ``plan_changed``'s PlanChanged, posted after the status write, is there)."""
    listed = kube.request("GET", llmd_path(ns))["items"]
    uids = {o["metadata"]["name"]: o["metadata"]["uid"] for o in listed}
    for kind, items in children(kube, ns).items():
        assert sorted(i["metadata"]["name"] for i in items) == sorted(uids), kind  # none missing, none extra
        for item in items:  # not orphaned: controlled by the LLMDeployment of its name
            owners = [r["uid"] for r in item["metadata"].get("ownerReferences") or () if r.get("controller")]
            assert owners == [uids[item["metadata"]["name"]]], (kind, item["metadata"])
    name, generation, uid = obj["metadata"]["name"], obj["metadata"]["generation"], obj["metadata"]["uid"]
    status = obj["status"]
    assert status["observedGeneration"] == generation
    assert {c["type"] for c in status["conditions"]} >= {"PlanFeasible", "Deployed", "Ready"}
    assert all(c["observedGeneration"] == generation for c in status["conditions"]), status["conditions"]
    dep = kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}") or {}
    args, flags = dep["spec"]["template"]["spec"]["containers"][0]["args"], status["plan"]["vllmArgs"]
    assert args[1 : 1 + len(flags)] == flags, args  # `vllm serve MODEL FLAGS...`, then serving flags
    if plan_changed:
        poll(lambda: changes(kube, ns, uid), what="PlanChanged", timeout=WAIT)
    posted = about(kube, ns, uid)
    assert len(posted) == len(set(posted)), posted
    assert len(changes(kube, ns, uid)) == int(plan_changed), posted  # one edit, one PlanChanged


def _edit(kube: Kube, ns: str, name: str) -> int:
    """Make the edit; returns the new generation."""
    return int(patch_spec(kube, ns, name, EDIT)["metadata"]["generation"])


def _max_model_len(obj: dict[str, Any]) -> int:
    args = obj["status"]["plan"]["vllmArgs"]
    return int(args[args.index("--max-model-len") + 1])


def test_the_api_server_restarted_during_a_reconcile_leaves_it_consistent(
    kube: Kube, ns: str, restartable: Path, tmp_path: Path
) -> None:
    """The API server killed and started again while the operator is paused after its first write: the same
    reconcile goes on against the new server (with connections to the old one in its pools), then the edit
    made meanwhile is reconciled. (etcd restarted while the operator is paused goes unseen by it; the etcd
    case is the outage below, with a write in flight.)"""
    log = tmp_path / "operator.log"
    with operator_process(ns, log, debug=WATCH_LOG, KVRIGHT_FAULT_PAUSE_AFTER_WRITES="1") as proc:
        create(kube, BASE.obj(), ns)
        poll(lambda: stopped(proc), what="the operator to pause after its first write", timeout=WAIT)
        first_write = f"PATCH /apis/apps/v1/namespaces/{ns}/deployments/chat"
        assert f"pausing after write 1 ({first_write})" in log.read_text()
        # Cut in the middle: the Deployment applied, no Service and no status yet.
        cut = children(kube, ns)
        assert ([len(cut["Deployment"]), len(cut["Service"])]) == [1, 0]
        assert not (kube.get(llmd_path(ns, "chat")) or {}).get("status")
        dev_cluster.restart("kube-apiserver", restartable, kill=True)
        generation = _edit(kube, ns, "chat")
        assert generation == 2
        proc.send_signal(signal.SIGCONT)
        done = poll(lambda: ready_at(kube, ns, "chat", 2), what="chat Ready at generation 2", timeout=WAIT)
        assert "resumed after write 1" in log.read_text()  # the same process went on, not a new one
        assert _max_model_len(done) == 32768  # generation 2's plan, not the paused reconcile's
        assert_consistent(kube, ns, done, plan_changed=True)
        assert proc.poll() is None, log.read_text()[-3000:]


def fault_line(log: Path, pattern: str) -> re.Match[str] | None:
    """The seam's log line matching ``pattern`` (after "fault injection: "), or None."""
    return re.search(r"fault injection: " + pattern, log.read_text())


@pytest.mark.parametrize("server", ["kube-apiserver", "etcd"], ids=["apiserver-down", "etcd-down"])
def test_a_write_sent_while_a_server_is_down_is_finished_when_it_is_back(
    kube: Kube, ns: str, restartable: Path, tmp_path: Path, server: str
) -> None:
    """The outage in the middle of the reconcile: the server is stopped while the operator is paused, and the
    reconcile's next write (the Service) is sent while it is down. Without kube-apiserver the write is
    refused at once and the reconcile fails; without etcd the API server holds it until etcd is back. The
    seam logs when that write was sent and when it ended, which proves it was in flight during the outage."""
    log = tmp_path / "operator.log"
    service = f"PATCH /api/v1/namespaces/{ns}/services/chat"
    with operator_process(ns, log, debug=WATCH_LOG, KVRIGHT_FAULT_PAUSE_AFTER_WRITES="1") as proc:
        create(kube, BASE.obj(), ns)
        poll(lambda: stopped(proc), what="the operator to pause after its first write", timeout=WAIT)
        dev_cluster.stop_server(server, restartable, kill=True)
        try:
            down = time.time()
            proc.send_signal(signal.SIGCONT)
            sending = rf"write 2 \({re.escape(service)}\) sent at ([0-9.]+)"
            sent = poll(lambda: fault_line(log, sending), what="write 2 sent", timeout=WAIT)
            if server == "kube-apiserver":
                poll(lambda: fault_line(log, r"write 2 failed at"), what="write 2 refused", timeout=WAIT)
            back = time.time()
        finally:
            dev_cluster.start_server(server, restartable)
        assert down < float(sent[1]) < back
        if server == "kube-apiserver":
            failed = fault_line(log, r"write 2 failed at ([0-9.]+): (.*)")
            assert failed and float(failed[1]) < back and "Connection refused" in failed[2], failed
        else:  # held by the API server while etcd was down, answered once it was back
            answering = r"write 2 answered (\d+) at ([0-9.]+)"
            answered = poll(lambda: fault_line(log, answering), what="write 2 answered", timeout=WAIT)
            assert answered[1].startswith("2") and float(answered[2]) > back, answered[0]
        # Then an edit, once the first generation has a status: its PlanChanged is the event to count.
        poll(lambda: reconciled(kube, ns, "chat"), what="chat reconciled at generation 1", timeout=WAIT)
        assert _edit(kube, ns, "chat") == 2
        done = poll(lambda: ready_at(kube, ns, "chat", 2), what="chat Ready at generation 2", timeout=WAIT)
        assert _max_model_len(done) == 32768
        assert_consistent(kube, ns, done, plan_changed=True)
        assert proc.poll() is None, log.read_text()[-3000:]


def handled(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    """The spec kopf's handlers last handled for ``name`` (from its annotation), or None."""
    obj = kube.get(llmd_path(ns, name)) or {}
    record = (obj.get("metadata") or {}).get("annotations", {}).get(HANDLED)
    return dict(json.loads(record)["spec"]) if record else None


def test_a_watch_that_expires_is_listed_again_and_what_changed_meanwhile_is_acted_on(
    kube: Kube, ns: str, restartable: Path, tmp_path: Path
) -> None:
    log = tmp_path / "operator.log"
    with operator_process(ns, log, debug=WATCH_LOG) as proc:
        create(kube, BASE.obj(), ns)
        poll(lambda: handled(kube, ns, "chat") and ready_at(kube, ns, "chat", 1), what="chat", timeout=WAIT)
        relisted = RELISTED.format(ns=ns)
        before = log.read_text().count(relisted)
        os.kill(proc.pid, signal.SIGSTOP)
        poll(lambda: stopped(proc), what="the operator stopped", timeout=10)
        dev_cluster.stop_server("kube-apiserver", restartable, kill=True)
        # Compacted past every revision the operator saw: whichever serves its resumed watch, the new API
        # server's watch cache (started later) or etcd itself (while that cache initializes), answers 410.
        compacted = _compact_etcd(restartable)
        dev_cluster.start_server("kube-apiserver", restartable)
        # While the operator's watch is broken: an edit, and a new object.
        assert _edit(kube, ns, "chat") == 2
        create(kube, BASE.obj() | {"metadata": {"name": "second"}}, ns)
        os.kill(proc.pid, signal.SIGCONT)
        poll(
            lambda: (h := handled(kube, ns, "chat")) and h["workload"]["maxModelLen"] == 32768,
            what="kopf to handle the edit",
            timeout=WAIT,
        )
        poll(lambda: handled(kube, ns, "second"), what="kopf to handle the new object", timeout=WAIT)
        edited = poll(lambda: ready_at(kube, ns, "chat", 2), what="chat Ready at generation 2", timeout=WAIT)
        second = poll(lambda: ready_at(kube, ns, "second", 1), what="second Ready", timeout=WAIT)
        assert _max_model_len(edited) == 32768
        assert_consistent(kube, ns, edited, plan_changed=True)
        assert_consistent(kube, ns, second, plan_changed=False)
        assert proc.poll() is None, log.read_text()[-3000:]
    text = log.read_text()
    # The watch resumed from a resourceVersion compacted away: 410 Gone, then a new list.
    assert text.count(relisted) > before, f"etcd compacted at revision {compacted}\n{text[-3000:]}"


def _compact_etcd(cluster_dir: Path) -> int:
    """Compact the cluster's etcd (its v3 JSON gateway on loopback) at its current revision; return it."""
    base = f"http://127.0.0.1:{dev_cluster.ports(cluster_dir)['ETCD_PORT']}/v3/kv"
    # Any read answers with the store's revision in its header; the key is base64 of "/registry".
    header = requests.post(f"{base}/range", json={"key": "L3JlZ2lzdHJ5"}, timeout=10).json()["header"]
    revision = int(header["revision"])
    done = requests.post(f"{base}/compaction", json={"revision": revision, "physical": True}, timeout=30)
    assert done.status_code == 200, done.text
    return revision


def _healthy(url: str) -> dict[str, Any] | None:
    """/healthz's answer when it is 200 and its probe saw the periodic reconcile pass lately, else None."""
    response = requests.get(url, timeout=2)
    if response.status_code != 200:
        return None
    body: dict[str, Any] = response.json()
    ago = (body.get("periodicReconcile") or {}).get("lastPassSecondsAgo")
    return body if ago is not None and ago < 10 else None


def test_the_liveness_endpoint_answers_while_the_operator_runs_and_not_while_it_is_stopped(
    kube: Kube, ns: str, tmp_path: Path
) -> None:
    """``python -m kvright.operator`` serves /healthz (kopf's server, on the event loop) with the periodic
    reconcile's heartbeat; a process that cannot run answers nothing within the kubelet's timeout."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/healthz"
    log = tmp_path / "operator.log"
    with operator_process(ns, log, KVRIGHT_HEALTH_PORT=str(port)) as proc:
        create(kube, BASE.obj(), ns)
        poll(lambda: _healthy(url), what="/healthz 200 with the sweep's heartbeat", timeout=WAIT)
        os.kill(proc.pid, signal.SIGSTOP)
        poll(lambda: stopped(proc), what="the operator stopped", timeout=10)
        with pytest.raises(requests.exceptions.Timeout):
            requests.get(url, timeout=2)
        os.kill(proc.pid, signal.SIGCONT)
        poll(lambda: _healthy(url), what="/healthz 200 again", timeout=WAIT)
        assert proc.poll() is None, log.read_text()[-3000:]
