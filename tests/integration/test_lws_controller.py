"""The real LeaderWorkerSet controller (sigs.k8s.io/lws v0.8.0) that ``deploy/cluster.sh up`` runs beside the
control plane, with its webhooks on 127.0.0.1 (docs/local-control-plane.md, "LeaderWorkerSet").

Real: the LWS manager (controllers and all four webhooks, called by kube-apiserver through the
MutatingWebhookConfiguration/ValidatingWebhookConfiguration that cluster.sh registers), the StatefulSets it
makes, the controller-manager's StatefulSet controller making the pods, kube-scheduler binding them by GPU
capacity, taints and affinity, garbage collection. Faked: the GPU nodes (kwok turns bound pods Running).

Exclusive placement (``leaderworkerset.sigs.k8s.io/exclusive-topology: <key>``) gives each group one domain of
``<key>`` to itself: the leader gets a pod affinity to its own group and an anti-affinity to every other group
in that domain, and the controller pins the workers to the leader's domain with a nodeSelector. Keyed on
``kubernetes.io/hostname``, a group of two 8-GPU pods therefore has to share one 8-GPU node and its worker
cannot be scheduled; a group spread over the two H100 nodes needs a key both nodes share
(``nvidia.com/gpu.product`` here, a rack or NVLink-domain label on real clusters). Both cases are tested.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kvright_dev.cluster import ports
from kvright_dev.procs import wait_until
from tests.fixtures.cluster import SCRIPT, Cluster, tools_dir

GROUP, VERSION, PLURAL = "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
CRD_NAME = f"{PLURAL}.{GROUP}"
WEBHOOKS = ("lws-mutating-webhook-configuration", "lws-validating-webhook-configuration")
H100 = "NVIDIA-H100-80GB-HBM3"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
# Bounded waits; GPU pods of earlier tests may still be going away with their namespaces.
WAIT = 120.0
RESTART = "bash deploy/cluster.sh down && bash deploy/cluster.sh up"
T = TypeVar("T")


class NotYet(Exception):
    """Raised by a wait's predicate to describe what it saw (wait_until reports the last one)."""


@pytest.fixture(scope="module")
def lws_controller(cluster: Cluster, kube: Any) -> None:
    """Fail (never skip) with the reason when the cluster has no working LeaderWorkerSet controller."""
    import urllib.request

    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    where = f"the cluster at {cluster.server}"
    if cluster.cluster_dir is not None:
        where += f" ({cluster.cluster_dir})"
        found = ports(cluster.cluster_dir)
        if found.get("LWS") != "1":
            pytest.fail(f"{where} was started without the LeaderWorkerSet controller (KVRIGHT_LWS=0, or by a "
                        f"cluster.sh older than the lws group); restart it with LWS: {RESTART}")
        log = cluster.cluster_dir / "logs" / "lws-controller-manager.log"
        readyz = f"http://127.0.0.1:{found.get('LWS_HEALTH_PORT')}/readyz"
        try:
            with urllib.request.urlopen(readyz, timeout=5) as r:
                ready = r.read().decode() == "ok"
        except (OSError, ValueError) as exc:
            ready, ready_error = False, str(exc)
        else:
            ready_error = ""
        if not ready:
            pytest.fail(f"the LeaderWorkerSet controller of {where} is not running or not ready on "
                        f"127.0.0.1:{found.get('LWS_HEALTH_PORT')} ({ready_error or 'readyz not ok'}); "
                        f"`bash deploy/cluster.sh status` says more, its log is {log}")
    ext: Any = client.ApiextensionsV1Api(kube)
    try:
        ext.read_custom_resource_definition(CRD_NAME)
    except ApiException as exc:
        if exc.status != 404:
            raise
        pytest.fail(f"{where} has no LeaderWorkerSet CRD ({CRD_NAME}): it was started with KVRIGHT_LWS=0 or "
                    f"without the LWS controller; restart it with LWS: {RESTART}")
    adm: Any = client.AdmissionregistrationV1Api(kube)
    try:
        adm.read_mutating_webhook_configuration(WEBHOOKS[0])
        adm.read_validating_webhook_configuration(WEBHOOKS[1])
    except ApiException as exc:
        if exc.status != 404:
            raise
        pytest.fail(f"{where} has the LeaderWorkerSet CRD but not the LWS webhook configurations {WEBHOOKS}; "
                    f"the controller is not set up by deploy/cluster.sh; restart it: {RESTART}")


def lws_manifest(name: str, *, topology: str, size: int = 2, gpus: int = 8, replicas: int = 1,
                 annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A LeaderWorkerSet of ``replicas`` groups of ``size`` pods, each asking for ``gpus`` H100 GPUs."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "annotations": {EXCLUSIVE: topology, **(annotations or {})}},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": size,
                "workerTemplate": {"spec": {
                    "tolerations": [GPU_TOLERATION],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "nvidia.com/gpu.product", "operator": "In", "values": [H100]}]}]}}},
                    "containers": [{
                        "name": "vllm", "image": "vllm/vllm-openai:v0.32.0",
                        "resources": {"requests": {"nvidia.com/gpu": str(gpus)},
                                      "limits": {"nvidia.com/gpu": str(gpus)}},
                    }],
                }},
            },
        },
    }


def create_lws(kube: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    from kubernetes import client

    custom: Any = client.CustomObjectsApi(kube)
    return dict(custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body))


def lws_pods(kube: Any, namespace: str, name: str) -> list[Any]:
    from kubernetes import client

    core: Any = client.CoreV1Api(kube)
    pods = core.list_namespaced_pod(namespace, label_selector=f"{NAME_LABEL}={name}").items
    return sorted(pods, key=lambda p: p.metadata.name)


def describe(pods: list[Any]) -> str:
    parts = []
    for p in pods:
        scheduled = next((c for c in p.status.conditions or [] if c.type == "PodScheduled"), None)
        why = ""
        if scheduled is not None and scheduled.message:
            why = f" ({scheduled.reason}: {scheduled.message})"
        parts.append(f"{p.metadata.name} {p.status.phase} on {p.spec.node_name}{why}")
    return "; ".join(parts) or "no pods"


def env_of(pod: Any, var: str) -> str | None:
    return next((e.value for e in pod.spec.containers[0].env or [] if e.name == var), None)


@contextlib.contextmanager
def deleted_at_end(kube: Any, namespace: str, name: str) -> Iterator[None]:
    """Delete the LWS afterwards even when the test failed, so its GPUs are free for the next test."""
    from kubernetes import client

    custom: Any = client.CustomObjectsApi(kube)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def delete_and_wait_for_pods_gone(kube: Any, namespace: str, name: str) -> None:
    from kubernetes import client

    custom: Any = client.CustomObjectsApi(kube)
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

    def gone() -> bool:
        pods = lws_pods(kube, namespace, name)
        if pods:
            raise NotYet(describe(pods))
        return True

    wait_until(gone, WAIT, what=f"the pods of LeaderWorkerSet {name} to be removed after deleting it")


def assert_group_labels_and_leader_address(leader: Any, worker: Any, name: str, namespace: str) -> None:
    assert leader.metadata.name == f"{name}-0" and worker.metadata.name == f"{name}-0-1"
    for pod, index in ((leader, "0"), (worker, "1")):
        labels = pod.metadata.labels
        assert labels[NAME_LABEL] == name
        assert labels[WORKER_INDEX_LABEL] == index, labels
        assert labels[GROUP_INDEX_LABEL] == "0", labels
        # injected by the LWS pod webhook: <leader pod>.<headless service named after the LWS>.<namespace>
        assert env_of(pod, "LWS_LEADER_ADDRESS") == f"{name}-0.{name}.{namespace}", pod.spec.containers[0].env
        assert env_of(pod, "LWS_GROUP_SIZE") == "2"


def exclusive_terms(pod: Any, topology: str) -> tuple[list[Any], list[Any]]:
    affinity = pod.spec.affinity
    together = [t for t in affinity.pod_affinity.required_during_scheduling_ignored_during_execution
                if t.topology_key == topology]
    apart = [t for t in affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution
             if t.topology_key == topology]
    return together, apart


@pytest.mark.cluster
def test_lws_webhooks_default_and_validate_leaderworkersets(
    lws_controller: None, kube: Any, namespace: str
) -> None:
    from kubernetes.client.exceptions import ApiException

    hostname = "kubernetes.io/hostname"
    bad = lws_manifest("bad", topology=hostname, replicas=0,
                       annotations={"leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": hostname})
    with pytest.raises(ApiException) as refused:
        create_lws(kube, namespace, bad)
    message = json.loads(refused.value.body)["message"]
    assert message.startswith('admission webhook "vleaderworkerset.kb.io" denied the request'), message
    assert "cannot have subgroup-exclusive-topology without subGroupSize set" in message

    made = create_lws(kube, namespace, lws_manifest("defaulted", topology=hostname, replicas=0))
    # defaults only the mutating webhook sets (the CRD schema has none for these)
    assert made["spec"]["networkConfig"] == {"subdomainPolicy": "Shared"}
    assert made["spec"]["rolloutStrategy"]["type"] == "RollingUpdate"
    assert made["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"] == 0
    assert made["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"


@contextlib.contextmanager
def group_of_two(kube: Any, namespace: str, name: str, *, topology: str,
                 until: Callable[[list[Any]], T | None], what: str) -> Iterator[T]:
    """Create a LeaderWorkerSet of one group of two 8-GPU pods, exclusive per ``topology``; wait until
    ``until`` (given its pods, leader first) returns a value and yield it; then delete the set and wait
    for its pods to go. The set is deleted even when the test fails, so the next test has the GPUs."""
    create_lws(kube, namespace, lws_manifest(name, topology=topology))
    with deleted_at_end(kube, namespace, name):
        def seen() -> T:
            pods = lws_pods(kube, namespace, name)
            got = until(pods)
            if got is None:
                raise NotYet(describe(pods))
            return got

        yield wait_until(seen, WAIT, what=what)
        delete_and_wait_for_pods_gone(kube, namespace, name)


def assert_exclusive_group(leader: Any, worker: Any, name: str, namespace: str, topology: str) -> None:
    """The group's labels and leader address, and the pod webhook's exclusive placement on the leader: one
    affinity to its own group and one anti-affinity to other groups, both keyed on ``topology``."""
    assert_group_labels_and_leader_address(leader, worker, name, namespace)
    together, apart = exclusive_terms(leader, topology)
    assert len(together) == 1 and len(apart) == 1


@pytest.mark.cluster
def test_lws_group_of_two_8_gpu_pods_runs_on_the_two_h100_nodes(
    lws_controller: None, kube: Any, namespace: str
) -> None:
    from kubernetes import client

    name, topology = "vllm-multinode", "nvidia.com/gpu.product"

    def both_running(pods: list[Any]) -> list[Any] | None:
        if len(pods) == 2 and all(p.status.phase == "Running" and p.spec.node_name for p in pods):
            return pods
        return None

    with group_of_two(kube, namespace, name, topology=topology, until=both_running,
                      what=f"leader and worker of LeaderWorkerSet {name} Running") as (leader, worker):
        core: Any = client.CoreV1Api(kube)
        nodes = {p.spec.node_name: core.read_node(p.spec.node_name).metadata.labels for p in (leader, worker)}
        assert len(nodes) == 2, f"leader and worker share a node: {describe([leader, worker])}"
        assert {labels["nvidia.com/gpu.product"] for labels in nodes.values()} == {H100}
        assert_exclusive_group(leader, worker, name, namespace, topology)
        # the controller's pinning of the worker to the leader's domain
        assert worker.spec.node_selector == {"nvidia.com/gpu.product": H100}

        custom: Any = client.CustomObjectsApi(kube)

        def ready_groups() -> int:
            lws = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
            return int(lws.get("status", {}).get("readyReplicas", 0))

        assert wait_until(ready_groups, WAIT, what=f"LeaderWorkerSet {name} to report 1 ready group") == 1


@pytest.mark.cluster
def test_lws_exclusive_per_host_group_of_two_8_gpu_pods_cannot_share_one_h100_node(
    lws_controller: None, kube: Any, namespace: str
) -> None:
    name, topology = "vllm-per-host", "kubernetes.io/hostname"

    def leader_running_worker_unschedulable(pods: list[Any]) -> tuple[Any, Any, str] | None:
        if len(pods) == 2 and pods[0].status.phase == "Running":
            conditions = pods[1].status.conditions or []
            scheduled = next((c for c in conditions if c.type == "PodScheduled"), None)
            if scheduled is not None and scheduled.reason == "Unschedulable":
                return pods[0], pods[1], str(scheduled.message)
        return None

    what = f"the leader of {name} Running and its worker Unschedulable"
    with group_of_two(kube, namespace, name, topology=topology, until=leader_running_worker_unschedulable,
                      what=what) as (leader, worker, why):
        assert_exclusive_group(leader, worker, name, namespace, topology)
        # the worker must go to the leader's node, whose 8 GPUs the leader holds
        assert worker.spec.node_selector == {"kubernetes.io/hostname": leader.spec.node_name}
        assert worker.spec.node_name is None
        assert "Insufficient nvidia.com/gpu" in why, why


def _script(cluster_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "KVRIGHT_CLUSTER_DIR": str(cluster_dir), "KVRIGHT_TOOLS_DIR": str(tools_dir()),
            **env}
    return subprocess.run(["bash", str(SCRIPT), *args], env=full, capture_output=True, text=True,
                          timeout=300, check=False)


def _kubectl(cluster_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tools_dir() / "kubectl"), "--kubeconfig", str(cluster_dir / "kubeconfig"),
                           "--request-timeout=20s", *args],
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.cluster
def test_kvright_lws_0_starts_a_cluster_without_the_lws_controller_and_crd(tmp_path: Path) -> None:
    try:
        without = _script(tmp_path, "up", KVRIGHT_LWS="0")
        assert without.returncode == 0, without.stderr[-2000:]
        # status follows what the running cluster was started with, not the environment
        status = _script(tmp_path, "status", KVRIGHT_LWS="1")
        assert status.returncode == 0, status.stdout + status.stderr
        assert "lws-controller-manager   disabled (KVRIGHT_LWS=0)" in status.stdout
        crd = _kubectl(tmp_path, "get", "crd", CRD_NAME)
        assert crd.returncode != 0 and "NotFound" in crd.stderr, crd.stdout + crd.stderr
        kinds = _kubectl(tmp_path, "api-resources", f"--api-group={GROUP}", "-o", "name")
        assert kinds.returncode == 0 and kinds.stdout.strip() == "", kinds.stdout + kinds.stderr
        hooks = _kubectl(tmp_path, "get", "mutatingwebhookconfigurations,validatingwebhookconfigurations",
                         "-o", "name")
        assert hooks.returncode == 0 and "lws-" not in hooks.stdout, hooks.stdout + hooks.stderr
    finally:
        down = _script(tmp_path, "down")
    assert down.returncode == 0, down.stderr[-2000:]
    assert not (tmp_path / "run").exists()
