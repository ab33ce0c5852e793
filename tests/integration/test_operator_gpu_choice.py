"""kvright chooses the GPU product when the spec leaves it out, against the real control plane: the
kube-apiserver with the CRD, the Deployment controller, the scheduler placing the pods by the product's
node affinity and GPU capacity. Faked: the GPU nodes (kwok: four 8 x H100 nodes, one 8 x H200).

The operator runs with KVRIGHT_GPU_PRICES making the H200 much cheaper than the H100 (0.50 against the
catalog's 2.95 per GPU-hour). At 200 sequences Llama-3.1-70B does not fit the one 8-GPU H200 node (the
one node is the whole H200 budget), so it takes the H100 nodes, and the event and status.alternatives
say why the cheaper product lost; at 100 sequences it fits the H200 node (TP 4 x 2) and goes there. A
third deployment the H200 node would hold then finds it full (the second one's pods hold its 8 GPUs):
kvright takes the H100 nodes for it and says the H200 had no room.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kvright import inventory
from kvright.operator import Kube
from tests.builders import llmd
from tests.integration.kvright_cluster import (
    admin_with_crd,
    condition,
    create,
    events,
    operator_namespace,
    poll,
    reconciled,
)

pytestmark = pytest.mark.cluster

H100 = "NVIDIA-H100-80GB-HBM3"
H200 = "NVIDIA-H200"
WAIT = 60.0
LLAMA_70B = llmd("chat").model("llama-3.1-70b").context(8192, 2048, 256).tpot_ms(50).replicas(1, 8)


@pytest.fixture(scope="module")
def kube() -> Kube:
    return admin_with_crd()


def gpus_held(kube: Kube) -> dict[str, int]:
    """GPUs that bound, unfinished pods hold, by node, in every namespace."""
    held: dict[str, int] = {}
    for item in kube.bound_pods():
        pod = inventory.gpu_pod(item, owner_label="kvright.dev/llmdeployment")
        if pod is not None:
            held[pod.node] = held.get(pod.node, 0) + pod.gpus
    return held


@pytest.fixture
def running(kube: Kube) -> Iterator[str]:
    # kvright weighs free GPUs: the pods of earlier tests (their namespaces being deleted) must be gone,
    # or this test would measure their room instead of its own.
    poll(lambda: not gpus_held(kube), what="no pod holding GPUs before the test", timeout=WAIT)
    with operator_namespace(kube, "kvr-gpu", env={"KVRIGHT_GPU_PRICES": f"{H200}=0.5"}) as ns:
        yield ns


def placed(kube: Kube, ns: str, name: str, plan: dict[str, Any]) -> list[str] | None:
    """The nodes of the object's Running pods, once all of the plan's pods run (one per node of each
    replica: a replica over two nodes is a LeaderWorkerSet group of two pods)."""
    want = plan["replicas"] * plan["nodesPerReplica"]
    got = kube.request(
        "GET", f"/api/v1/namespaces/{ns}/pods", query=[("labelSelector", f"kvright.dev/llmdeployment={name}")]
    )
    pods = [p for p in got.get("items") or [] if not p["metadata"].get("deletionTimestamp")]
    running = [p["spec"]["nodeName"] for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return running if len(running) == want == len(pods) else None


def product_of(kube: Kube, node: str) -> str:
    return str((kube.get(f"/api/v1/nodes/{node}") or {})["metadata"]["labels"]["nvidia.com/gpu.product"])


def chosen(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    def planned() -> dict[str, Any] | None:
        obj = reconciled(kube, ns, name)
        return obj if condition(obj, "PlanFeasible").get("status") == "True" else None

    return poll(planned, what=f"{name} planned", timeout=WAIT)


def chosen_events(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    """The GPUProductChosen events about ``name``: kopf posts events from a queue of its own, after the
    status write, so a loaded CI machine may list the pods Running before the event (one run did)."""
    return [e for e in events(kube, ns, name) if e["reason"] == "GPUProductChosen"]


def test_the_cheapest_product_that_holds_the_workload_runs_it_and_the_next_takes_what_it_cannot(
    kube: Kube, running: str
) -> None:
    ns = running
    # 200 sequences: the one H200 node cannot hold them however cheap it is; the H100 nodes take them.
    create(kube, LLAMA_70B.concurrency(200).obj() | {"metadata": {"name": "overflow"}}, ns)
    overflow = chosen(kube, ns, "overflow")
    plan, alternatives = overflow["status"]["plan"], overflow["status"]["alternatives"]
    assert plan["gpuProduct"] == H100, plan
    assert [a["product"] for a in alternatives] == [H100, H200]
    assert not alternatives[1]["feasible"] and alternatives[1]["why"].startswith("not feasible on h200")
    nodes = poll(lambda: placed(kube, ns, "overflow", plan), what="overflow Running")
    assert {product_of(kube, n) for n in nodes} == {H100}
    [event] = poll(lambda: chosen_events(kube, ns, "overflow"), what="overflow's GPUProductChosen event")
    assert f"cheaper products cannot: {H200}" in event["message"], event["message"]

    # 100 sequences fit on the H200 node (TP 4 x 2): the cheapest product takes them.
    create(kube, LLAMA_70B.concurrency(100).obj() | {"metadata": {"name": "fits"}}, ns)
    fits = chosen(kube, ns, "fits")
    plan, alternatives = fits["status"]["plan"], fits["status"]["alternatives"]
    assert plan["gpuProduct"] == H200 and plan["gpus"] == 8, plan
    assert [a["product"] for a in alternatives] == [H200, H100]
    assert alternatives[0]["why"] == "chosen" and alternatives[0]["usdPerHour"] == 0.5 * plan["gpus"]
    assert alternatives[1]["feasible"] and alternatives[1]["why"].startswith("costs more")
    nodes = poll(lambda: placed(kube, ns, "fits", plan), what="fits Running")
    assert {product_of(kube, n) for n in nodes} == {H200}
    [event] = poll(lambda: chosen_events(kube, ns, "fits"), what="fits' GPUProductChosen event")
    assert event["message"].startswith(f"{H200} chosen")

    # The H200 node is full now (the first deployment's pods hold its 8 GPUs): the same workload again
    # goes to the H100 nodes, and status and the event say the H200 had no room.
    create(kube, LLAMA_70B.concurrency(100).obj() | {"metadata": {"name": "crowded"}}, ns)
    crowded = chosen(kube, ns, "crowded")
    status = crowded["status"]
    assert status["plan"]["gpuProduct"] == H100, status["plan"]
    assert status["gpu"]["freeGPUs"] >= status["plan"]["gpus"], status["gpu"]
    h200 = next(a for a in status["alternatives"] if a["product"] == H200)
    assert not h200["feasible"] and h200["why"].startswith("no room: 0 of 8 GPUs free"), h200
    nodes = poll(lambda: placed(kube, ns, "crowded", status["plan"]), what="crowded Running")
    assert {product_of(kube, n) for n in nodes} == {H100}
    [event] = [e for e in events(kube, ns, "crowded") if e["reason"] == "GPUProductChosen"]
    assert f"cheaper products cannot: {H200} (no room" in event["message"], event["message"]
