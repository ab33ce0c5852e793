"""Where the weights come from (spec.model.source, kvright.weights): the pod spec each source renders
(the volume, what `vllm serve` loads, the startup budget from capacity.coldstart), the shared cache's
claim and download Job, the readiness verdict that holds the workload back, and how reconcile turns it
into children and conditions. Pure: the claim, the Job and the pods are dicts shaped as the API server
returns them (the Job's conditions as the Job controller writes them, a pod's waiting state as the
kubelet writes it for an image volume it cannot pull); the cluster tests apply the same objects.
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest

import capacity
from kvright.api import SpecError, parse_spec
from kvright.conditions import Reason
from kvright.inventory import GPUNode, summarize
from kvright.reconcile import Facts, desire, status
from kvright.render import Owner, VLLMWorkload, render_leader_worker_set
from kvright.weights import (
    WEIGHTS_READY,
    Observed,
    cache_key,
    cache_size,
    decide,
    fill_job_name,
    startup_budget_seconds,
)
from tests.builders import llmd, reconcile_facts

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
H100 = "NVIDIA-H100-80GB-HBM3"
CLUSTER = summarize(
    GPUNode(name=f"h100-{i}", product=H100, allocatable_gpus=8, memory_mib=None) for i in range(2)
)
BASE = llmd("chat").model("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct").gpu(H100).tpot_ms(50)
PVC = BASE.set("model.source", {"type": "PVC", "pvc": {"claimName": "llama-weights", "path": "llama/8b"}})
IMAGE = BASE.set("model.source", {"type": "Image", "image": {"reference": "registry.example/llama:8b"}})
CACHE = BASE.set("model.source", {"type": "Cache"})
KEY = cache_key("meta-llama/Llama-3.1-8B-Instruct", "main")
JOB = fill_job_name("chat", KEY)
LLAMA_8B = capacity.catalog_architecture("llama-3.1-8b")
CLAIM = {"metadata": {"name": "chat-weights"}, "status": {"phase": "Bound"}}


def facts(spec: dict[str, Any], observed: Observed | None, current: dict[str, Any] | None = None) -> Facts:
    return reconcile_facts(
        spec,
        generation=2,
        current_status=current or {},
        inventory=CLUSTER,
        weights=observed,
        architecture=LLAMA_8B,
        architecture_source="Catalog llama-3.1-8b",
    )


def job(condition: str | None = None, reason: str = "", message: str = "") -> dict[str, Any]:
    conditions = [] if condition is None else [{"type": condition, "status": "True", "reason": reason,
                                                  "message": message}]  # fmt: skip
    return {"metadata": {"name": JOB}, "status": {"conditions": conditions}}


def pulling(reason: str, image: str) -> dict[str, Any]:
    """A vLLM pod as the kubelet reports a pull that failed (kuberuntime: the container's waiting state)."""
    waiting = {"reason": reason, "message": f'Back-off pulling image "{image}"'}
    return {
        "metadata": {"name": "chat-abc"},
        "status": {"containerStatuses": [{"name": "vllm", "ready": False, "state": {"waiting": waiting}}]},
    }


def children(d: Any) -> dict[str, dict[str, Any]]:
    return {c["kind"]: c for c in d.children}


def vllm(deployment: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


# --- the pod spec of each source ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("builder", "observed", "volume", "model"),
    [
        (BASE, None, None, "meta-llama/Llama-3.1-8B-Instruct"),
        (PVC, Observed(claim=CLAIM),
         {"persistentVolumeClaim": {"claimName": "llama-weights", "readOnly": True}},
         "/models/llama/8b"),
        (IMAGE, Observed(),
         {"image": {"reference": "registry.example/llama:8b", "pullPolicy": "IfNotPresent"}},
         "/models"),
        (CACHE, Observed(claim=CLAIM, job=job("Complete")),
         {"persistentVolumeClaim": {"claimName": "chat-weights", "readOnly": True}},
         f"/models/meta-llama--Llama-3.1-8B-Instruct-{KEY}"),
    ],
    ids=["hub-downloads-by-name", "pvc-path-in-claim", "image-root", "cache-folder-per-revision"],
)  # fmt: skip
def test_each_source_mounts_its_volume_read_only_and_points_vllm_at_it(
    builder: Any, observed: Observed | None, volume: dict[str, Any] | None, model: str
) -> None:
    deployment = children(desire(facts(builder.spec(), observed)))["Deployment"]
    container = vllm(deployment)
    assert container["args"][0] == model
    names = container["args"][container["args"].index("--served-model-name") + 1]
    assert names == "meta-llama/Llama-3.1-8B-Instruct"  # the public name stays
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    if volume is None:
        assert "weights" not in volumes and "weights" not in mounts
    else:
        assert volumes["weights"] == {"name": "weights", **volume}
        assert mounts["weights"] == {"name": "weights", "mountPath": "/models", "readOnly": True}


def test_every_pod_of_a_replica_across_nodes_loads_from_the_volume() -> None:
    w = decide(
        parse_spec(PVC.spec()).model,
        owner=Owner("chat", "ml", "u"),
        image="i",
        checkpoint_bytes=0,
        starts={},
        observed=Observed(claim=CLAIM),
    )
    layout = capacity.Layout(tensor_parallel_size=8, pipeline_parallel_size=2, gpus_per_node=8)
    lws = render_leader_worker_set(
        VLLMWorkload(
            owner=Owner("chat", "ml", "u"),
            model="meta-llama/Llama-3.1-405B-Instruct",
            served_model_name="llama",
            image="i",
            gpu_product=H100,
            layout=layout,
            replicas=1,
            vllm_args=("--tensor-parallel-size", "8"),
            weights=w.mount,
        )
    )
    template = lws["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        container = template[role]["spec"]["containers"][0]
        assert container["args"][0] == "/models/llama/8b", role
        assert {"name": "weights", "mountPath": "/models", "readOnly": True} in container["volumeMounts"], (
            role
        )


# --- the startup budget follows the source --------------------------------------------------------------


def start(source: str, checkpoint_bytes: float, gpus: int = 1) -> capacity.ColdStart:
    return capacity.cold_start(
        source, weight_bytes_per_gpu=checkpoint_bytes / gpus, checkpoint_bytes=checkpoint_bytes,
        gpus_per_node=gpus,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("source", "checkpoint_bytes", "gpus", "seconds"),
    [
        ("pvc", 16e9, 1, 326),  # 64 s read + 4 s GPU load + 95 s engine = 163 s; x2
        ("pvc", 141e9, 4, 1336),  # 564 s read + 8.8 s load + 95 s = 667.8 s; x2
        ("cache", 141e9, 4, 1336),  # a restart reads the filled cache like a PVC; the fill is not counted
        ("image", 141e9, 4, 772),  # the 470 s pull precedes the container: 282 + 8.8 + 95 s; x2
        ("pvc", 1.4e12, 8, 3600),  # capped at an hour
    ],
    ids=["small-floor", "pvc-70b", "cache-restart-like-pvc", "image-pull-not-in-probe", "huge-capped"],
)
def test_startup_budget_follows_the_predicted_cold_start(
    source: str, checkpoint_bytes: float, gpus: int, seconds: int
) -> None:
    assert startup_budget_seconds(start(source, checkpoint_bytes, gpus)) == seconds


def test_the_probe_and_progress_deadline_use_the_source_budget() -> None:
    deployment = children(desire(facts(IMAGE.spec(), Observed())))["Deployment"]
    probe = vllm(deployment)["startupProbe"]
    budget = probe["failureThreshold"] * probe["periodSeconds"]
    predicted = capacity.plan_cold_starts(
        capacity.plan(
            capacity.catalog_architecture("llama-3.1-8b"),
            capacity.gpu_spec(H100),
            capacity.Workload(max_model_len=8192, prompt_tokens=1024, output_tokens=256, concurrency=32),
            capacity.SLO(tpot_seconds=0.05),
            capacity.Limits(gpus_per_node=8, max_gpus=16, max_nodes_per_replica=1),
        ),
        checkpoint_bytes=capacity.weight_bytes(capacity.catalog_architecture("llama-3.1-8b")),
    )["image"]
    assert budget == 300  # the 8B model's prediction is below the 5-minute floor
    # The image volume's pull is before the container starts: the rollout deadline waits for it too.
    assert deployment["spec"]["progressDeadlineSeconds"] == 300 + 300 + round(predicted.fetch_seconds + 0.5)


# --- the spec's rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "complaint"),
    [
        ({"type": "PVC"}, "model.source.pvc (its claimName) is required with type PVC"),
        ({"type": "Hub", "pvc": {"claimName": "w"}}, "model.source.pvc (its claimName) is required"),
        ({"type": "Image"}, "model.source.image (its reference) is required with type Image"),
        ({"type": "Cache", "image": {"reference": "r"}}, "model.source.image (its reference) is required"),
        ({"type": "PVC", "pvc": {"claimName": "w"}, "cache": {}},
         "model.source.cache is allowed with type Cache"),
        ({"type": "PVC", "pvc": {"claimName": "w", "path": "../etc"}}, "spec.model.source.pvc.path"),
        ({"type": "PVC", "pvc": {"claimName": "w", "path": "/abs"}}, "spec.model.source.pvc.path"),
        ({"type": "PVC", "pvc": {"claimName": "Not_A_Name"}}, "spec.model.source.pvc.claimName"),
        ({"type": "Cache", "cache": {"size": "lots"}}, "spec.model.source.cache.size"),
        ({"type": "Cache", "cache": {"accessMode": "ReadOnlyMany"}}, "spec.model.source.cache.accessMode"),
        ({"type": "Local"}, "spec.model.source.type"),
    ],
    ids=["pvc-needs-claim", "pvc-only-with-type-pvc", "image-needs-reference", "image-only-with-type-image",
         "cache-only-with-type-cache", "path-no-dotdot", "path-relative", "claim-is-dns-name",
         "size-quantity",
         "cache-must-be-writable", "unknown-type"],
)  # fmt: skip
def test_invalid_sources_are_refused(source: dict[str, Any], complaint: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(BASE.set("model.source", source).spec())
    assert complaint in str(caught.value)


def test_a_cache_downloads_model_name_so_it_must_be_a_repository() -> None:
    with pytest.raises(SpecError, match=r"model\.name must be a repository id"):
        parse_spec(CACHE.set("model.name", "llama").spec())


# --- the shared cache: created once, filled once, then every replica mounts it -------------------------


@pytest.mark.parametrize(
    ("observed", "created", "hold", "ready", "reason"),
    [
        (Observed(), ["PersistentVolumeClaim", "Job"], True, "False", Reason.MODEL_CACHE_FILLING),
        (Observed(claim=CLAIM, job=job()), [], True, "False", Reason.MODEL_CACHE_FILLING),
        (Observed(claim=CLAIM, job=job("Complete")), [], False, "True", Reason.WEIGHTS_AVAILABLE),
        (Observed(claim=CLAIM, job=job("Failed", "BackoffLimitExceeded", "Job has reached the specified "
                                       "backoff limit")), [], True, "False", Reason.MODEL_CACHE_FILL_FAILED),
        (Observed(job=job("Complete")), ["PersistentVolumeClaim"], True, "False",
         Reason.WEIGHTS_CLAIM_MISSING),
        (Observed(error="GET jobs/chat-fill: 403 forbidden"), [], True, "Unknown",
         Reason.WEIGHTS_STATUS_UNKNOWN),
        (None, [], True, "Unknown", Reason.WEIGHTS_STATUS_UNKNOWN),
    ],
    ids=["first-visit-creates-claim-and-job", "filling-creates-nothing", "filled-releases-the-workload",
         "failed-job-holds-with-its-reason", "claim-gone-after-fill", "unreadable-is-unknown",
         "not-read-waits"],
)  # fmt: skip
def test_cache_verdict(
    observed: Observed | None, created: list[str], hold: bool, ready: str, reason: str
) -> None:
    d = desire(facts(CACHE.spec(), observed))
    kinds = [c["kind"] for c in d.children]
    assert [k for k in kinds if k in ("PersistentVolumeClaim", "Job")] == created
    assert ("Deployment" not in kinds) is hold
    assert "Service" in kinds  # the rest of the children are applied either way
    assert d.weights is not None
    assert (d.weights.type, d.weights.status, d.weights.reason) == (WEIGHTS_READY, ready, reason)
    new = status(facts(CACHE.spec(), observed), d, rollout=None, apply_error=None, now=NOW)
    by_type = {c["type"]: c for c in new["conditions"]}
    assert by_type[WEIGHTS_READY]["reason"] == reason
    if hold:  # Deployed and the summary say why nothing serves
        assert (by_type["Deployed"]["status"], by_type["Deployed"]["reason"]) == ("False", reason)
        assert (by_type["Ready"]["status"], by_type["Ready"]["reason"]) == ("False", reason)


def test_a_failed_download_names_the_job_and_its_reason_bounded() -> None:
    long = "x" * 5000
    d = desire(facts(CACHE.spec(), Observed(claim=CLAIM, job=job("Failed", "DeadlineExceeded", long))))
    assert d.weights is not None
    assert JOB in d.weights.message and "DeadlineExceeded" in d.weights.message
    assert len(d.weights.message) < 900


def test_the_cache_claim_and_job_are_owned_and_the_token_is_only_a_reference() -> None:
    spec = (
        llmd("chat")
        .hub("meta-llama/Llama-3.1-8B-Instruct", revision="v2", token_secret="hf")
        .gpu(H100)
        .tpot_ms(50)
        .set("model.source", {"type": "Cache", "cache": {"storageClassName": "fast", "size": "40Gi"}})
        .spec()
    )
    made = children(desire(facts(spec, Observed())))
    claim, fill = made["PersistentVolumeClaim"], made["Job"]
    for child in (claim, fill):
        assert child["metadata"]["ownerReferences"][0]["uid"] == "u-1"
        assert child["metadata"]["ownerReferences"][0]["controller"] is True
    assert claim["metadata"]["name"] == "chat-weights"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "40Gi"}},
        "storageClassName": "fast",
    }
    key = cache_key("meta-llama/Llama-3.1-8B-Instruct", "v2")  # the hub source's revision
    assert fill["metadata"]["name"] == fill_job_name("chat", key)
    pod = fill["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"] == [
        "meta-llama/Llama-3.1-8B-Instruct",
        "v2",
        f"/cache/meta-llama--Llama-3.1-8B-Instruct-{key}",
    ]
    token = [e for e in container["env"] if e["name"] == "HF_TOKEN"]
    assert token == [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]
    assert pod["volumes"][0] == {"name": "cache", "persistentVolumeClaim": {"claimName": "chat-weights"}}
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    # The download pod never matches the vLLM pods' selector.
    assert fill["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] != "vllm"
    # The Deployment mounts the folder of that revision.
    ready = desire(facts(spec, Observed(claim=CLAIM, job={**job("Complete"), "metadata": {"name": "x"}})))
    assert vllm(children(ready)["Deployment"])["args"][0].endswith(key)


def test_a_hub_mirror_is_where_the_pods_and_the_download_job_fetch_the_weights() -> None:
    """The operator's KVRIGHT_HF_ENDPOINT, when it is a mirror, goes to vLLM and to the cache's download Job
    as HF_ENDPOINT (huggingface_hub's), so an air-gapped cluster loads from the mirror it resolves
    config.json from; with the public hub nothing is added."""
    spec = BASE.set("model.source", {"type": "Cache"}).spec()
    mirror = "http://hub-mirror.models.svc:8080"

    def endpoints(hub_endpoint: str | None, observed: Observed) -> dict[str, list[str]]:
        made = children(desire(replace(facts(spec, observed), hub_endpoint=hub_endpoint)))
        found = {}
        for kind in ("Job", "Deployment"):
            if kind in made:
                env = made[kind]["spec"]["template"]["spec"]["containers"][0]["env"]
                found[kind] = [e["value"] for e in env if e["name"] == "HF_ENDPOINT"]
        return found

    filling = Observed()
    filled = Observed(claim=CLAIM, job={**job("Complete"), "metadata": {"name": "x"}})
    assert endpoints(mirror, filling) == {"Job": [mirror]}
    assert endpoints(mirror, filled) == {"Deployment": [mirror]}
    assert endpoints(None, filling) == {"Job": []} and endpoints(None, filled) == {"Deployment": []}


@pytest.mark.parametrize(
    ("checkpoint_bytes", "size"),
    [(16_060_522_496, "19Gi"), (0, "1Gi"), (141_107_412_992, "153Gi")],
    ids=["8b", "empty", "70b"],
)
def test_default_cache_size(checkpoint_bytes: int, size: str) -> None:
    assert cache_size(checkpoint_bytes) == size


def test_job_names_fit_a_label_value() -> None:
    name = fill_job_name("a" * 63, KEY)
    assert len(name) <= 63 and name.endswith(f"-fill-{KEY}")


def test_a_second_replica_reuses_the_filled_cache() -> None:
    two = CACHE.replicas(2, 2, 2).spec()
    d = desire(facts(two, Observed(claim=CLAIM, job=job("Complete"))))
    kinds = [c["kind"] for c in d.children]
    assert "Job" not in kinds and "PersistentVolumeClaim" not in kinds  # nothing is created again
    assert children(d)["Deployment"]["spec"]["replicas"] == 2


# --- PVC and image failures -----------------------------------------------------------------------------


def test_a_missing_claim_holds_the_workload() -> None:
    d = desire(facts(PVC.spec(), Observed(claim=None)))
    assert "Deployment" not in [c["kind"] for c in d.children]
    assert d.weights is not None and d.weights.reason == Reason.WEIGHTS_CLAIM_MISSING
    assert "llama-weights" in d.weights.message


def test_a_pending_claim_is_named() -> None:
    d = desire(facts(PVC.spec(), Observed(claim={"status": {"phase": "Pending"}})))
    assert d.weights is not None and d.weights.status == "True"
    assert "the claim is Pending" in d.weights.message


@pytest.mark.parametrize(
    ("pod", "reason"),
    [
        (pulling("ImagePullBackOff", "registry.example/llama:8b"), Reason.WEIGHTS_IMAGE_PULL_FAILED),
        (pulling("ErrImagePull", "registry.example/llama:8b"), Reason.WEIGHTS_IMAGE_PULL_FAILED),
        (pulling("ImagePullBackOff", "vllm/vllm-openai:test"), Reason.WEIGHTS_AVAILABLE),
        (pulling("ContainerCreating", "registry.example/llama:8b"), Reason.WEIGHTS_AVAILABLE),
    ],
    ids=["backoff-on-the-volume", "pull-error-on-the-volume", "the-vllm-image-is-not-the-weights",
         "not-a-pull-failure"],
)  # fmt: skip
def test_image_pull_failure_of_the_volume_is_a_condition(pod: dict[str, Any], reason: str) -> None:
    d = desire(facts(IMAGE.spec(), Observed(pods=(pod,))))
    assert d.weights is not None and d.weights.reason == reason
    assert "Deployment" in [c["kind"] for c in d.children]  # the pods must exist to pull: never held


def test_hub_sets_no_condition_unless_one_is_there_to_update() -> None:
    assert desire(facts(BASE.spec(), None)).weights is None
    current = {"conditions": [{"type": WEIGHTS_READY, "status": "False", "reason": "ModelCacheFilling"}]}
    d = desire(facts(BASE.spec(), None, current))
    assert d.weights is not None and (d.weights.status, d.weights.reason) == (
        "True",
        Reason.WEIGHTS_AVAILABLE,
    )


def test_status_predicts_the_cold_start_from_the_specs_own_source() -> None:
    """status.prediction.coldStartSeconds: one pod's time to Ready from where its weights come from (the
    feedback loop weighs a restart by it); a PVC skips the hub download, so it starts sooner."""
    hub = desire(facts(BASE.spec(), None)).fields["prediction"]["coldStartSeconds"]
    pvc = desire(facts(PVC.spec(), Observed(claim=CLAIM))).fields["prediction"]["coldStartSeconds"]
    assert 0 < pvc < hub
