"""The operator routes each LLMDeployment through a Gateway API Inference Extension InferencePool
(inference.networking.k8s.io/v1) when the cluster serves it, against the real control plane
(deploy/cluster.sh, which installs the upstream v1.6.0 InferencePool CRD): kube-apiserver validating the
pool against that CRD's schema, the Deployment and ReplicaSet controllers rolling the pods, the scheduler
placing them, the LeaderWorkerSet v0.8.0 controller for a replica across two nodes, the garbage
collector. Faked: the GPU nodes and the kubelets (kwok runs the pods and makes them Ready); no gateway or
endpoint picker runs (nothing here sends a request through the pool).

"Selects exactly the ready vLLM pods" is checked the way a gateway reads a pool: the pods its selector
matches in the namespace, next to a second LLMDeployment whose pods must never match. The no-CRD case runs
on the second, private control plane without optional APIs (tests/integration/test_without_optional_apis.py),
because deleting the CRD on the session's cluster would remove it under the other modules.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvright.operator import Kube, KubeError
from tests.builders import llmd
from tests.integration.kvright_cluster import (
    admin,
    condition,
    create,
    install_crd,
    llmd_path,
    namespace,
    operator,
    patch_spec,
    poll,
    reconciled,
)
from tests.unit.test_api import BAD_ENDPOINT_PICKERS

pytestmark = pytest.mark.cluster

API = "/apis/inference.networking.k8s.io/v1"
POOLS = API + "/namespaces/{ns}/inferencepools"
WAIT = 60.0
# One-GPU replicas on the H200 node (4 GPUs at most with a rollout's surge pod), so that two whole H100 nodes
# stay free for the two-node Llama-3.1-405B sample.
CHAT = llmd("chat").model("llama-3.1-8b").gpu("NVIDIA-H200").context(4096, 1024, 256).replicas(2, 2, 2)
OTHER = llmd("other").model("llama-3.1-8b").gpu("NVIDIA-H200").context(4096, 1024, 256).replicas(1, 1, 1)
TWO_NODES = Path(__file__).resolve().parents[2] / "deploy" / "samples" / "llama-3.1-405b-2x-h100.yaml"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


@pytest.fixture(scope="module")
def kube() -> Kube:
    k = admin()
    install_crd(k)
    if k.get(API) is None:
        pytest.fail(
            "the cluster does not serve inference.networking.k8s.io/v1: start it with the InferencePool CRD "
            "(`bash deploy/cluster.sh build inference-pool && bash deploy/cluster.sh up`, without "
            "KVRIGHT_INFERENCE_POOL=0)"
        )
    return k


def pool(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    return kube.get(POOLS.format(ns=ns) + f"/{name}")


def vllm_pods(kube: Kube, ns: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    sel = ",".join(f"{k}={v}" for k, v in labels.items())
    got = kube.request("GET", f"/api/v1/namespaces/{ns}/pods", query=[("labelSelector", sel)])
    return list(got.get("items") or [])


def names(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["name"] for p in pods}


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def settled(kube: Kube, ns: str, name: str, replicas: int) -> dict[str, Any] | None:
    """The LLMDeployment once its current generation is applied everywhere, it is Ready and so is every
    pod, with no pod of an older template left (a finished rollout)."""
    o = reconciled(kube, ns, name)
    if (
        o is None
        or condition(o, "Deployed").get("reason") != "Applied"
        or condition(o, "Ready").get("status") != "True"
    ):
        return None
    pods = vllm_pods(kube, ns, {"kvright.dev/llmdeployment": name})
    if len(pods) != replicas or not all(is_ready(p) for p in pods):
        return None
    return o


def with_routing(builder: Any, **picker: Any) -> dict[str, Any]:
    obj: dict[str, Any] = builder.obj()
    if picker:
        obj["spec"]["routing"] = {"endpointPicker": picker}
    return obj


def test_each_llmdeployment_gets_an_owned_pool_selecting_exactly_its_ready_pods_through_a_rollout(
    kube: Kube,
) -> None:
    started = time.monotonic()
    with namespace(kube, "kvr-pool") as ns, operator(ns):
        chat = create(kube, with_routing(CHAT, name="chat-picker", port=9100, failureMode="FailOpen"), ns)
        create(kube, with_routing(OTHER), ns)
        create(kube, yaml.safe_load(TWO_NODES.read_text(encoding="utf-8")), ns)
        done = poll(lambda: settled(kube, ns, "chat", 2), what="chat: 2 pods Ready, Deployed", timeout=WAIT)
        poll(lambda: settled(kube, ns, "other", 1), what="other: 1 pod Ready, Deployed", timeout=WAIT)
        poll(
            lambda: settled(kube, ns, "llama-405b", 2),
            what="llama-405b: a leader and a worker Ready, Deployed",
            timeout=WAIT,
        )

        p = pool(kube, ns, "chat") or {}
        owners = p["metadata"]["ownerReferences"]
        assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in owners] == [
            ("LLMDeployment", "chat", chat["metadata"]["uid"], True)
        ]
        spec = p["spec"]
        assert spec["targetPorts"] == [{"number": 8000}]
        assert spec["endpointPickerRef"] == {
            "group": "",  # the CRD's defaults
            "kind": "Service",
            "name": "chat-picker",
            "port": {"number": 9100},
            "failureMode": "FailOpen",
        }
        other = pool(kube, ns, "other") or {}
        assert other["spec"]["endpointPickerRef"]["name"] == "other-epp", "the operator's default picker"
        assert other["spec"]["endpointPickerRef"]["port"] == {"number": 9002}
        routing = done["status"]["routing"]
        assert (routing["mode"], routing["inferencePool"], routing["endpointPicker"]) == (
            "InferencePool",
            "chat",
            "chat-picker:9100",
        ), routing

        def matched(name: str) -> list[dict[str, Any]]:
            selector = (pool(kube, ns, name) or {})["spec"]["selector"]["matchLabels"]
            return vllm_pods(kube, ns, selector)

        chat_ready = names(vllm_pods(kube, ns, {"kvright.dev/llmdeployment": "chat"}))
        other_ready = names(vllm_pods(kube, ns, {"kvright.dev/llmdeployment": "other"}))
        assert names(matched("chat")) == chat_ready and len(chat_ready) == 2
        assert names(matched("other")) == other_ready and len(other_ready) == 1
        # A replica across two nodes: only its leader serves (the worker runs headless), so only it is in.
        group = vllm_pods(kube, ns, {"kvright.dev/llmdeployment": "llama-405b"})
        leaders = {p["metadata"]["name"] for p in group if p["metadata"]["labels"].get(WORKER_INDEX) == "0"}
        assert len(group) == 2 and len(leaders) == 1
        assert names(matched("llama-405b")) == leaders
        uid = p["metadata"]["uid"]

        # An edit rolls the pods (new template: new pods, the old ones deleted); the pool stays the same
        # object and, once the rollout is done, selects exactly the new Ready pods and never the other's.
        patch_spec(kube, ns, "chat", {"workload": {"maxModelLen": 2048}})
        strays: set[str] = set()

        def rolled() -> dict[str, Any] | None:
            strays.update(names(matched("chat")) & other_ready)
            o = settled(kube, ns, "chat", 2)
            if o is None or o["status"]["plan"]["maxModelLen"] != 2048:
                return None
            pods = vllm_pods(kube, ns, {"kvright.dev/llmdeployment": "chat"})
            return o if all("2048" in p["spec"]["containers"][0]["args"] for p in pods) else None

        poll(rolled, what="chat rolled to maxModelLen 2048, 2 new pods Ready", timeout=WAIT)
        assert not strays, f"the chat pool matched other's pods {strays}"
        after = pool(kube, ns, "chat") or {}
        assert after["metadata"]["uid"] == uid, "the pool was replaced, not kept"
        new_ready = names(vllm_pods(kube, ns, after["spec"]["selector"]["matchLabels"]))
        assert new_ready == names(vllm_pods(kube, ns, {"kvright.dev/llmdeployment": "chat"}))
        assert len(new_ready) == 2 and not new_ready & chat_ready, "the old pods are still selected"
        assert all(is_ready(p) for p in matched("chat"))

        # Deleting the LLMDeployment garbage-collects its pool (the controller ownerReference).
        kube.request("DELETE", llmd_path(ns, "chat"))
        poll(lambda: pool(kube, ns, "chat") is None, what="the chat pool collected", timeout=WAIT)
        assert pool(kube, ns, "other") is not None
    print(f"pool test: {time.monotonic() - started:.1f} s")


@pytest.mark.parametrize(("picker", "complaint"), BAD_ENDPOINT_PICKERS)
def test_the_crd_refuses_a_bad_endpoint_picker(kube: Kube, picker: dict[str, Any], complaint: str) -> None:
    obj = OTHER.obj()
    obj["spec"]["routing"] = {"endpointPicker": picker}
    with pytest.raises(KubeError) as refused:
        create(kube, obj, "default")
    assert refused.value.status == 422 and complaint in str(refused.value), str(refused.value)
