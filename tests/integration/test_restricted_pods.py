"""The vLLM pods kvright renders pass the API server's built-in Pod Security admission at ``restricted``.

Real parts: kube-apiserver with its PodSecurity admission plugin (on by default), the Deployment,
ReplicaSet, LeaderWorkerSet and StatefulSet controllers that create the pods (admission refuses a pod at
creation, so a refused pod never exists and its controller records FailedCreate), the scheduler. Faked:
the GPU nodes (kwok). Two samples cover both workload kinds: DeepSeek-R1 (a Deployment, DP + EP on the
H200 node) and Llama-3.1-405B over two H100 nodes (a LeaderWorkerSet group: leader and worker pods).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvright.operator import Kube
from tests.integration.kvright_cluster import admin_with_crd, create, operator, poll

pytestmark = pytest.mark.cluster

SAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "samples"
ENFORCE = "pod-security.kubernetes.io/enforce"


@pytest.fixture(scope="module")
def kube() -> Kube:
    return admin_with_crd()


@pytest.fixture
def restricted(kube: Kube) -> Iterator[str]:
    """A namespace that enforces the restricted Pod Security Standard, with the operator watching it."""
    name = "kvr-restricted"
    kube.request(
        "POST",
        "/api/v1/namespaces",
        body={
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {ENFORCE: "restricted"}},
        },
    )
    poll(lambda: kube.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"), what="default SA")
    try:
        with operator(name):
            yield name
    finally:
        kube.request("DELETE", f"/api/v1/namespaces/{name}")


def pods(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    got = kube.request(
        "GET", f"/api/v1/namespaces/{ns}/pods", query=[("labelSelector", f"kvright.dev/llmdeployment={name}")]
    )
    return list(got.get("items") or [])


def refusals(kube: Kube, ns: str) -> list[str]:
    """FailedCreate events that name Pod Security admission. Other FailedCreate events are controllers'
    creates that failed and were retried (the LeaderWorkerSet controller posted 'Failed to create worker
    statefulset for leader pod ...' once in a loaded fresh-clone run, its pods Running after); whether
    every pod runs is checked on its own."""
    got = kube.request(
        "GET", f"/api/v1/namespaces/{ns}/events", query=[("fieldSelector", "reason=FailedCreate")]
    )
    messages = [str(e.get("message", "")) for e in got.get("items") or []]
    return [m for m in messages if "PodSecurity" in m or "forbidden" in m]


def test_the_samples_pods_are_admitted_where_restricted_is_enforced(kube: Kube, restricted: str) -> None:
    ns = restricted
    wanted = {}
    for sample in ("deepseek-r1-h200.yaml", "llama-3.1-405b-2x-h100.yaml"):
        obj = yaml.safe_load((SAMPLES / sample).read_text(encoding="utf-8"))
        create(kube, obj, ns)
        wanted[obj["metadata"]["name"]] = obj

    def running(name: str) -> list[dict[str, Any]] | None:
        obj = kube.get(f"/apis/kvright.dev/v1alpha1/namespaces/{ns}/llmdeployments/{name}") or {}
        plan = (obj.get("status") or {}).get("plan") or {}
        want = int(plan.get("replicas", 0)) * int(plan.get("nodesPerReplica", 1))
        found = [p for p in pods(kube, ns, name) if (p.get("status") or {}).get("phase") == "Running"]
        return found if want and len(found) == want else None

    for name in wanted:
        found = poll(lambda n=name: running(n), what=f"{name}'s pods Running in a restricted namespace")
        for pod in found:
            spec = pod["spec"]
            (container,) = spec["containers"]
            assert spec["securityContext"]["runAsNonRoot"] is True
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert refusals(kube, ns) == []
    assert (kube.get(f"/api/v1/namespaces/{ns}") or {})["metadata"]["labels"][ENFORCE] == "restricted"
