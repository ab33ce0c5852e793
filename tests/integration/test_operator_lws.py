"""The operator runs a replica that spans nodes as a LeaderWorkerSet, against the real control plane with
the real LeaderWorkerSet v0.8.0 controller and webhooks (deploy/cluster.sh; docs/local-control-plane.md):
kube-apiserver, the LWS controller making the StatefulSets, the StatefulSet controller making the pods,
the scheduler binding them by GPU capacity, taints and affinity, the garbage collector. Faked: the GPU
nodes (kwok: four 8 x H100 nodes, one 8 x H200).

Llama-3.1-405B at maxGPUs 16 is TP 8 x PP 2 over two H100 nodes: one group of a leader and a headless
worker, 8 GPUs each. The no-LWS path (PlanFeasible names LeaderWorkerSet, nothing is created) runs on a
second control plane started without it: tests/integration/test_without_optional_apis.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import capacity
from capacity.launch import node_args
from kvright.operator import Kube
from tests.integration.kvright_cluster import (
    admin_with_crd,
    condition,
    create,
    llmd_path,
    operator_namespace,
    patch_spec,
    poll,
    reconciled,
)

pytestmark = pytest.mark.cluster

SAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "samples" / "llama-3.1-405b-2x-h100.yaml"
H100 = "NVIDIA-H100-80GB-HBM3"
LWS = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
WAIT = 60.0


@pytest.fixture(scope="module")
def kube() -> Kube:
    k = admin_with_crd()
    if k.get("/apis/leaderworkerset.x-k8s.io/v1") is None:
        pytest.fail(
            "the cluster does not serve leaderworkerset.x-k8s.io/v1: start it with LeaderWorkerSet "
            "(`bash deploy/cluster.sh down && bash deploy/cluster.sh up`, without KVRIGHT_LWS=0)"
        )
    return k


@pytest.fixture
def running(kube: Kube) -> Iterator[str]:
    with operator_namespace(kube, "kvr-lws") as ns:
        yield ns


def lws(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    return kube.get(LWS.format(ns=ns) + f"/{name}")


def group_pods(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    got = kube.request(
        "GET", f"/api/v1/namespaces/{ns}/pods", query=[("labelSelector", f"kvright.dev/llmdeployment={name}")]
    )
    return sorted(got.get("items") or [], key=lambda p: p["metadata"]["name"])


def holding_gpus(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pods bound to a node (terminating ones still hold their GPUs)."""
    return [p for p in pods if p["spec"].get("nodeName")]


def running_group(kube: Kube, ns: str, name: str, args_have: str) -> list[dict[str, Any]] | None:
    pods = group_pods(kube, ns, name)
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    if (
        len(pods) == 2 == len(live)
        and all(p["status"].get("phase") == "Running" for p in live)
        and all(args_have in p["spec"]["containers"][0]["args"] for p in live)
    ):
        return live
    return None


def vllm(pod: dict[str, Any]) -> dict[str, Any]:
    (c,) = pod["spec"]["containers"]
    return dict(c)


def test_405b_on_two_h100_nodes_is_a_leader_worker_set_that_rolls_and_is_collected(
    kube: Kube, running: str
) -> None:
    ns, name = running, "llama-405b"
    started = time.monotonic()
    obj = yaml.safe_load(SAMPLE.read_text(encoding="utf-8"))
    create(kube, obj, ns)

    def deployed(o: dict[str, Any] | None) -> bool:
        return (
            condition(o, "Deployed").get("reason") == "Applied"
            and condition(o, "Ready").get("status") == "True"
        )

    done = poll(
        lambda: (o := reconciled(kube, ns, name)) and deployed(o) and o,
        what="llama-405b Deployed",
        timeout=WAIT,
    )
    plan = done["status"]["plan"]
    assert (plan["nodesPerReplica"], plan["layout"], plan["gpusPerReplica"]) == (2, "TP 8 x PP 2", 16), plan
    assert done["status"]["readyReplicas"] == 1 == done["status"]["replicas"]
    assert kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}") is None
    layout = capacity.Layout(
        tensor_parallel_size=plan["tensorParallelSize"], pipeline_parallel_size=plan["pipelineParallelSize"]
    )
    roles = {
        role: [*plan["vllmArgs"], *node_args(layout, node_rank=rank, leader_address="$(LWS_LEADER_ADDRESS)")]
        for role, rank in (("leader", 0), ("worker", 1))
    }

    leader, worker = poll(
        lambda: running_group(kube, ns, name, "--nnodes"), what="leader and worker Running", timeout=WAIT
    )
    assert (
        leader["metadata"]["labels"][WORKER_INDEX] == "0"
        and worker["metadata"]["labels"][WORKER_INDEX] == "1"
    )
    nodes = {leader["spec"]["nodeName"], worker["spec"]["nodeName"]}
    assert len(nodes) == 2, "leader and worker share a node"
    for node in nodes:
        labels = (kube.get(f"/api/v1/nodes/{node}") or {})["metadata"]["labels"]
        assert labels["nvidia.com/gpu.product"] == H100
    for pod in (leader, worker):
        assert vllm(pod)["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    model = obj["spec"]["model"]["name"]
    assert vllm(leader)["command"] == ["vllm", "serve"]
    args = vllm(leader)["args"]
    served = ["--served-model-name", model, "--port", "8000"]
    assert args[: args.index("--shutdown-timeout")] == [model, *roles["leader"], *served]
    assert "--shutdown-timeout" not in vllm(worker)["args"]  # a headless worker has no server to drain
    worker_args = list(roles["worker"])
    worker_args[worker_args.index("--node-rank") + 1] = "$(LWS_WORKER_INDEX)"
    assert vllm(worker)["args"] == [model, *worker_args]
    env = {e["name"]: e.get("value") for e in vllm(worker)["env"]}
    assert env["LWS_WORKER_INDEX"] == "1"
    assert env["LWS_LEADER_ADDRESS"] == f"{name}-0.{name}-0.{ns}"
    assert "readinessProbe" in vllm(leader) and "readinessProbe" not in vllm(worker)
    service = kube.get(f"/api/v1/namespaces/{ns}/services/{name}") or {}
    assert service["spec"]["selector"][WORKER_INDEX] == "0" and service["spec"].get("clusterIP") != "None"

    # An edit rolls the group to the new template; there is never a second group holding GPUs.
    previous = plan
    patch_spec(kube, ns, name, {"workload": {"maxModelLen": 4096}})
    most = 0

    def rolled() -> dict[str, Any] | None:
        nonlocal most
        most = max(most, len(holding_gpus(group_pods(kube, ns, name))))
        o = reconciled(kube, ns, name)
        if o is None or o["status"]["plan"] == previous or not deployed(o):
            return None
        return o if running_group(kube, ns, name, "4096") else None

    after = poll(rolled, what="the group rolled to maxModelLen 4096", timeout=WAIT)
    assert most <= 2, f"{most} pods held GPUs during the rollout"
    assert (lws(kube, ns, name) or {})["status"]["replicas"] == 1
    new_leader = vllm(running_group(kube, ns, name, "4096")[0])  # type: ignore[index]
    assert new_leader["args"][new_leader["args"].index("--max-model-len") + 1] == "4096"
    assert after["status"]["plan"]["maxModelLen"] == 4096

    # Deleting the LLMDeployment collects the LeaderWorkerSet and its pods (ownerReferences).
    kube.request("DELETE", llmd_path(ns, name))
    poll(
        lambda: lws(kube, ns, name) is None and not group_pods(kube, ns, name),
        what="LWS and pods collected",
        timeout=WAIT,
    )
    assert time.monotonic() - started < 90


def test_the_planner_agrees_on_the_two_node_layout() -> None:
    """The layout the test above expects is the planner's (not a test-local assumption)."""
    result = capacity.plan(
        capacity.catalog_architecture("llama-3.1-405b"),
        capacity.gpu_spec(H100),
        capacity.Workload(max_model_len=8192, prompt_tokens=2048, output_tokens=256, concurrency=16),
        capacity.SLO(tpot_seconds=0.06),
        capacity.Limits(gpus_per_node=8, max_gpus=16),
    )
    assert result.plan is not None and result.plan.layout.label == "TP 8 x PP 2"
