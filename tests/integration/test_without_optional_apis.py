"""The operator on a control plane that serves none of the optional APIs (started with KVRIGHT_LWS=0 and
KVRIGHT_INFERENCE_POOL=0: no LeaderWorkerSet controller or CRD, no InferencePool CRD): a plan that needs a
replica over two nodes is refused with a condition that names what to install, nothing is created for it,
and a one-node plan on the same cluster deploys as usual; routing is by Service, with no error.

This is a second, private control plane (deploy/cluster.sh up in a temp directory), because the session's
cluster serves LeaderWorkerSet and removing its CRD there would race the other modules' tests. Warm, it
starts in a few seconds.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvright.operator import Kube, api_client
from tests.fixtures.cluster import local_cluster
from tests.integration.kvright_cluster import (
    condition,
    create,
    events,
    install_crd,
    namespace,
    operator,
    poll,
    reconciled,
)
from tests.integration.test_operator_inference_pool import API, OTHER, settled, with_routing

SAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "samples"
WAIT = 60.0


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """A private control plane without LeaderWorkerSet; KUBECONFIG points at it for this module only."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KVRIGHT_LWS", "0")
        mp.setenv("KVRIGHT_INFERENCE_POOL", "0")
        with local_cluster(tmp_path_factory.mktemp("bare-cluster")) as started:
            mp.setenv("KUBECONFIG", str(started.kubeconfig))
            kube = Kube(api_client(), timeout_seconds=30)
            kube.request("GET", "/readyz")
            for api_path, switch in (
                ("/apis/leaderworkerset.x-k8s.io/v1", "KVRIGHT_LWS"),
                (API, "KVRIGHT_INFERENCE_POOL"),
            ):
                if kube.get(api_path) is not None:
                    pytest.fail(f"{switch}=0 started a cluster that serves {api_path}")
            install_crd(kube)
            yield kube
    assert os.environ.get("KVRIGHT_LWS") != "0" and os.environ.get("KVRIGHT_INFERENCE_POOL") != "0"


def sample(name: str) -> dict[str, Any]:
    obj = yaml.safe_load((SAMPLES / name).read_text(encoding="utf-8"))
    assert isinstance(obj, dict)
    return obj


def ready(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    return obj if condition(obj, "Ready").get("status") == "True" else None


def test_without_leader_worker_set_a_two_node_plan_names_what_to_install_and_one_node_plans_deploy(
    bare: Kube,
) -> None:
    two_nodes = sample("llama-3.1-405b-2x-h100.yaml")
    one_node = sample("llama-3.1-70b-h100.yaml")
    big, small = two_nodes["metadata"]["name"], one_node["metadata"]["name"]
    with namespace(bare, "kvr-nolws") as ns, operator(ns):
        create(bare, two_nodes, ns)
        create(bare, one_node, ns)

        refused = poll(
            lambda: (o := reconciled(bare, ns, big)) and condition(o, "PlanFeasible").get("status") and o,
            what=f"{big} reconciled",
            timeout=WAIT,
        )
        feasible = condition(refused, "PlanFeasible")
        assert (feasible["status"], feasible["reason"]) == ("False", "LeaderWorkerSetMissing"), feasible
        assert "leaderworkerset.x-k8s.io/v1" in feasible["message"], feasible["message"]
        assert "TP 8 x PP 2" in feasible["message"], feasible["message"]

        deployed = poll(
            lambda: ready(reconciled(bare, ns, small)),
            what=f"{small} Ready",
            timeout=WAIT,
        )
        assert deployed["status"]["plan"]["nodesPerReplica"] == 1
        assert bare.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{small}") is not None
        # The refused one got nothing: no Deployment, no Service, no pods (checked after the one-node
        # deployment is Ready, so the operator has had every chance to write them).
        assert bare.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{big}") is None
        assert bare.get(f"/api/v1/namespaces/{ns}/services/{big}") is None
        selector = [("labelSelector", f"kvright.dev/llmdeployment={big}")]
        pods = bare.request("GET", f"/api/v1/namespaces/{ns}/pods", query=selector)
        assert pods.get("items") == []
        again = reconciled(bare, ns, big)
        assert condition(again, "PlanFeasible").get("reason") == "LeaderWorkerSetMissing"


def test_without_the_inference_pool_api_routing_is_by_service_with_no_error(bare: Kube) -> None:
    kube = bare
    with namespace(kube, "kvr-nopool") as ns, operator(ns) as runner:
        create(kube, with_routing(OTHER, name="my-picker"), ns)
        done = poll(lambda: settled(kube, ns, "other", 1), what="other Deployed and Ready", timeout=WAIT)
        routing = done["status"]["routing"]
        assert (routing["mode"], routing["service"]) == ("Service", "other"), routing
        assert "inferencePool" not in routing and "endpointPicker" not in routing
        assert "does not serve inference.networking.k8s.io/v1" in routing["message"]
        assert kube.get(f"/api/v1/namespaces/{ns}/services/other") is not None
        # kvright's own warnings, on the LLMDeployment. The API server's ClusterIP repair loop may warn on
        # the Service of the same name when its periodic pass races the Service's creation ("Cluster IP ...
        # is not allocated; repairing", seen once in CI): Kubernetes', not kvright's.
        warnings = [
            e
            for e in events(kube, ns, "other")
            if e.get("type") == "Warning" and e["involvedObject"].get("kind") == "LLMDeployment"
        ]
        assert not warnings, warnings
    # The operator's log, complete once it stopped: no reconcile failed or retried.
    assert (
        "succeeded" in runner.output
        and "Traceback" not in runner.output
        and "failed" not in runner.output.replace("0 failed", "")
    ), runner.output[-2000:]
