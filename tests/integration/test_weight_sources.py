"""Where the weights come from (spec.model.source) against the real control plane (deploy/cluster.sh,
Kubernetes 1.37, where image volumes are GA and always on): kube-apiserver validating the CRD's CEL rules
and the pods (a PersistentVolumeClaim volume, an image volume), the PersistentVolume controller binding the
claims, the real Job controller running the cache's download Job, the Deployment and ReplicaSet
controllers, the scheduler (a pod whose claim is unbound does not schedule), the garbage collector.

Faked: the nodes and kubelets (kwok). kwok's pod-complete stage finishes a Job's pod as soon as it runs,
so the Job controller marks the download Job Complete exactly as it would after a real download (nothing
is downloaded; the Job's container command is checked in the unit tests). A storage provisioner is absent,
so the tests create the PersistentVolume a provisioner would. Two failures are written the way their
real writers would write them, because no kubelet or download runs here: the Job controller's
FailureTarget + Failed conditions (the download Job's pod cannot schedule here: its claim is left unbound,
so the real controller never completes it), and the kubelet's ImagePullBackOff waiting state on a vLLM
pod that cannot pull its image volume.
"""

from __future__ import annotations

import contextlib
import datetime
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from kvright.operator import Kube, KubeError
from tests.builders import llmd
from tests.integration.kvright_cluster import (
    admin_with_crd,
    condition,
    create,
    llmd_path,
    namespace,
    operator,
    patch_spec,
    poll,
)

pytestmark = pytest.mark.cluster

H100 = "NVIDIA-H100-80GB-HBM3"
BASE = llmd("x").model("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct").gpu(H100).replicas(1, 4, 1)
WAIT = 60.0
VOLUMES: list[str] = []
"""The PersistentVolumes made here (cluster-scoped: deleted when the module ends)."""


@pytest.fixture(scope="module")
def kube() -> Kube:
    return admin_with_crd()


@pytest.fixture(scope="module")
def ns(kube: Kube) -> Iterator[str]:
    """One namespace with the operator running, for every test here (each uses its own objects)."""
    try:
        with namespace(kube, "kvr-weights") as name, operator(name):
            yield name
    finally:
        for volume in VOLUMES:
            with contextlib.suppress(KubeError):
                kube.request("DELETE", f"/api/v1/persistentvolumes/{volume}")


def named(builder: Any, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = builder.obj()
    obj["metadata"]["name"] = name
    return obj


def claims(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/persistentvolumeclaims"


def volume_for(kube: Kube, ns: str, claim: str, size: str = "50Gi") -> None:
    """A PersistentVolume bound in advance to one claim, as a storage provisioner would make it."""
    name = f"pv-{secrets.token_hex(4)}"
    VOLUMES.append(name)
    kube.request(
        "POST",
        "/api/v1/persistentvolumes",
        body={
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteMany", "ReadOnlyMany", "ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": f"/tmp/{name}"},
                "claimRef": {"namespace": ns, "name": claim},
            },
        },
    )


def user_claim(kube: Kube, ns: str, name: str) -> None:
    kube.request(
        "POST",
        claims(ns),
        body={
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "20Gi"}}},
        },
    )


def obj(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    return kube.get(llmd_path(ns, name)) or {}


def has(kube: Kube, ns: str, name: str, type_: str, reason: str, status: str) -> dict[str, Any] | None:
    got = obj(kube, ns, name)
    c = condition(got, type_)
    return got if (c.get("reason"), c.get("status")) == (reason, status) else None


def pods(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    sel = f"app.kubernetes.io/name=vllm,kvright.dev/llmdeployment={name}"
    got = kube.request("GET", f"/api/v1/namespaces/{ns}/pods", query=[("labelSelector", sel)])
    return [p for p in got.get("items") or [] if not p["metadata"].get("deletionTimestamp")]


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def vllm(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = next(c for c in pod["spec"]["containers"] if c["name"] == "vllm")
    return container


def weights_volume(pod: dict[str, Any]) -> dict[str, Any]:
    volume: dict[str, Any] = next(v for v in pod["spec"]["volumes"] if v["name"] == "weights")
    return volume


def deployment(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    return kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}")


def jobs(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    sel = f"app.kubernetes.io/component=model-cache,kvright.dev/llmdeployment={name}"
    got = kube.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs", query=[("labelSelector", sel)])
    return list(got.get("items") or [])


def stamp(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def owned_by_kvright(child: dict[str, Any], uid: str) -> bool:
    meta = child["metadata"]
    refs = meta.get("ownerReferences") or ()
    applied = any(
        m.get("manager") == "kvright" and m.get("operation") == "Apply" for m in meta["managedFields"]
    )
    return applied and any(r.get("uid") == uid and r.get("controller") for r in refs)


def test_pvc_and_image_sources_render_pods_the_api_server_accepts_loading_from_the_mount(
    kube: Kube, ns: str
) -> None:
    user_claim(kube, ns, "llama-weights")
    volume_for(kube, ns, "llama-weights")
    pvc = {"type": "PVC", "pvc": {"claimName": "llama-weights", "path": "llama/8b"}}
    image = {"image": {"reference": "registry.example/llama-8b:v1", "pullPolicy": "Always"}}
    pvc_volume = {"claimName": "llama-weights", "readOnly": True}
    create(kube, named(BASE.set("model.source", pvc), "from-pvc"), ns)
    create(kube, named(BASE.set("model.source", {"type": "Image", **image}), "from-image"), ns)
    for name, path, volume in (
        ("from-pvc", "/models/llama/8b", {"persistentVolumeClaim": pvc_volume}),
        ("from-image", "/models", image),
    ):
        poll(
            lambda n=name: has(kube, ns, n, "Ready", "ReplicasReady", "True"),
            what=f"{name} Ready",
            timeout=WAIT,
        )
        (pod,) = pods(kube, ns, name)
        assert ready(pod)
        assert weights_volume(pod) == {"name": "weights", **volume}
        container = vllm(pod)
        assert container["args"][0] == path
        assert container["args"][container["args"].index("--served-model-name") + 1] == (
            "meta-llama/Llama-3.1-8B-Instruct"
        )
        assert {"name": "weights", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
        assert condition(obj(kube, ns, name), "WeightsReady")["status"] == "True"


def test_the_cache_is_created_and_filled_once_and_every_replica_mounts_it(kube: Kube, ns: str) -> None:
    volume_for(kube, ns, "cached-weights")
    made = create(kube, named(BASE.set("model.source", {"type": "Cache"}), "cached"), ns)
    uid = made["metadata"]["uid"]
    done = poll(
        lambda: has(kube, ns, "cached", "Ready", "ReplicasReady", "True"), what="cached Ready", timeout=WAIT
    )
    assert condition(done, "WeightsReady")["reason"] == "WeightsAvailable"
    claim = kube.get(f"{claims(ns)}/cached-weights")
    (job,) = jobs(kube, ns, "cached")
    assert claim is not None and owned_by_kvright(claim, uid) and owned_by_kvright(job, uid)
    assert claim["status"]["phase"] == "Bound"
    # The real Job controller completed it (kwok finished its pod), and only then was the Deployment made.
    assert job["status"]["succeeded"] == 1
    assert [c["type"] for c in job["status"]["conditions"] if c["status"] == "True"][-1] == "Complete"
    made_at = deployment(kube, ns, "cached")["metadata"]["creationTimestamp"]  # type: ignore[index]
    assert stamp(made_at) >= stamp(job["status"]["completionTime"])
    first = {"claim": claim["metadata"]["uid"], "job": job["metadata"]["uid"]}

    # A second replica: the same claim and Job, nothing created or run again.
    patch_spec(kube, ns, "cached", {"replicas": {"count": 2}})
    poll(
        lambda: len([p for p in pods(kube, ns, "cached") if ready(p)]) == 2,
        what="2 ready replicas",
        timeout=WAIT,
    )
    (again,) = jobs(kube, ns, "cached")
    assert {"claim": kube.get(f"{claims(ns)}/cached-weights")["metadata"]["uid"],  # type: ignore[index]
            "job": again["metadata"]["uid"]} == first  # fmt: skip
    assert again["status"]["succeeded"] == 1
    path = vllm(pods(kube, ns, "cached")[0])["args"][0]
    for pod in pods(kube, ns, "cached"):
        assert weights_volume(pod)["persistentVolumeClaim"] == {
            "claimName": "cached-weights",
            "readOnly": True,
        }
        assert vllm(pod)["args"][0] == path and path.startswith("/models/meta-llama--Llama-3.1-8B-Instruct-")


def test_a_failed_download_is_a_condition_and_no_deployment(kube: Kube, ns: str) -> None:
    # No volume for this claim: the download pod cannot schedule, so the Job runs until it fails.
    create(kube, named(BASE.set("model.source", {"type": "Cache"}), "cache-fails"), ns)
    poll(lambda: has(kube, ns, "cache-fails", "WeightsReady", "ModelCacheFilling", "False"), what="filling")
    (job,) = poll(lambda: jobs(kube, ns, "cache-fails"), what="the download Job")
    poll(
        lambda: "the claim is Pending" in condition(obj(kube, ns, "cache-fails"), "WeightsReady")["message"],
        what="the unbound claim named",
    )
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    why = {"reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}
    kube.request(
        "PATCH",
        f"/apis/batch/v1/namespaces/{ns}/jobs/{job['metadata']['name']}/status",
        body={"status": {"active": 0, "ready": 0, "terminating": 0, "conditions": [
            {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now, **why}
            for kind in ("FailureTarget", "Failed")
        ]}},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    failed = poll(
        lambda: has(kube, ns, "cache-fails", "WeightsReady", "ModelCacheFillFailed", "False"),
        what="fill failed",
    )
    message = condition(failed, "WeightsReady")["message"]
    assert job["metadata"]["name"] in message and "BackoffLimitExceeded" in message
    assert (condition(failed, "Deployed")["reason"], condition(failed, "Ready")["status"]) == (
        "ModelCacheFillFailed",
        "False",
    )
    assert deployment(kube, ns, "cache-fails") is None
    assert len(jobs(kube, ns, "cache-fails")) == 1  # no retry loop: deleting the Job is the retry


def test_a_missing_claim_is_a_condition_until_it_is_created(kube: Kube, ns: str) -> None:
    pvc = {"type": "PVC", "pvc": {"claimName": "late-weights"}}
    create(kube, named(BASE.set("model.source", pvc), "late"), ns)
    missing = poll(
        lambda: has(kube, ns, "late", "WeightsReady", "WeightsClaimMissing", "False"), what="missing"
    )
    assert "late-weights" in condition(missing, "WeightsReady")["message"]
    assert condition(missing, "Deployed")["reason"] == "WeightsClaimMissing"
    assert deployment(kube, ns, "late") is None
    volume_for(kube, ns, "late-weights")
    user_claim(kube, ns, "late-weights")
    poll(lambda: has(kube, ns, "late", "Ready", "ReplicasReady", "True"), what="late Ready", timeout=WAIT)


def test_an_image_volume_that_cannot_be_pulled_is_a_condition(kube: Kube, ns: str) -> None:
    ref = "registry.invalid/no-such-weights:v1"
    create(
        kube, named(BASE.set("model.source", {"type": "Image", "image": {"reference": ref}}), "bad-image"), ns
    )
    (pod,) = poll(lambda: pods(kube, ns, "bad-image"), what="the vLLM pod")
    poll(lambda: all(ready(p) for p in pods(kube, ns, "bad-image")), what="kwok made the pod Running")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    waiting = {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{ref}"'}
    # As the kubelet reports it (phase stays Running so that kwok's pod-ready stage leaves it alone).
    kube.request(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/status",
        body={"status": {
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now},
                           {"type": "ContainersReady", "status": "False", "lastTransitionTime": now}],
            "containerStatuses": [{"name": "vllm", "image": "vllm/vllm-openai", "imageID": "", "ready": False,
                                   "restartCount": 0, "state": {"waiting": waiting}}],
        }},
        content_type="application/strategic-merge-patch+json",
    )  # fmt: skip
    failed = poll(
        lambda: has(kube, ns, "bad-image", "WeightsReady", "WeightsImagePullFailed", "False"),
        what="pull failed",
    )
    assert ref in condition(failed, "WeightsReady")["message"]
    assert condition(failed, "Ready")["status"] == "False"


@pytest.mark.parametrize(
    ("source", "name", "complaint"),
    [
        ({"type": "PVC"}, "meta-llama/Llama-3.1-8B-Instruct", "model.source.pvc (its claimName) is required"),
        ({"type": "Image", "pvc": {"claimName": "w"}}, "meta-llama/Llama-3.1-8B-Instruct",
         "model.source.image (its reference) is required"),
        ({"type": "Cache"}, "llama-8b", "model.name must be a repository id"),
        ({"type": "PVC", "pvc": {"claimName": "w", "path": "../up"}}, "meta-llama/Llama-3.1-8B-Instruct",
         "spec.model.source.pvc.path"),
    ],
    ids=["pvc-needs-claim", "image-needs-reference", "cache-needs-repository", "path-stays-inside"],
)  # fmt: skip
def test_the_api_server_refuses_invalid_sources(
    kube: Kube, source: dict[str, Any], name: str, complaint: str
) -> None:
    bad = named(BASE.set("model.source", source).set("model.name", name), "bad")
    with pytest.raises(KubeError) as refused:
        create(kube, bad, "default")
    assert refused.value.status == 422
    assert complaint in str(refused.value)
