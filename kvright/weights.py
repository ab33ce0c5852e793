"""Where an LLMDeployment's weights come from (``spec.model.source``), decided: the pod volume, what
``vllm serve`` loads, the startup budget, the shared cache's children and whether the weights are ready.

- ``Hub`` (the default): vLLM downloads ``model.name`` at every pod start; nothing here changes the pods.
- ``PVC``: an existing claim, mounted read-only at ``/models``; vLLM loads ``/models/<path>``.
- ``Image``: a Kubernetes image volume (GA in 1.36), read-only; the kubelet pulls it before the container
  starts, so its pull counts towards the Deployment's progress deadline, not the startup probe.
- ``Cache``: a claim ``<name>-weights`` kvright creates once, and a download Job ``<name>-fill-<key>``
  (``key``: the repository and revision) that puts the checkpoint into ``<repo>-<key>`` in it, with the hub
  token from ``model.hub.tokenSecretRef`` as a Secret reference (the operator never reads it). Every replica
  mounts the claim read-only. Both are created once, when absent, and never changed afterwards: a Job's
  template is immutable, and a new vLLM image must not re-download. A new revision is a new key, so a new
  Job fills a new folder while the running workload keeps serving the old one.

The verdict (:class:`Weights` ``condition`` and ``hold``): while the cache is not filled, or the claim is
missing, the vLLM workload is neither created nor rolled (the last applied one keeps serving); a failed
Job and an image volume the kubelet cannot pull are conditions with their reason, never a crash loop.

Pure: the operator gathers :class:`Observed` (the claim, the Job, the pods) and acts on the result.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import capacity
from kvright.api import ModelSpec, SecretKeyRef, WeightSource
from kvright.conditions import Condition, Reason
from kvright.render import (
    CONTAINER_NAME,
    WEIGHTS_MOUNT_PATH,
    WEIGHTS_VOLUME,
    Owner,
    WeightsMount,
    gpu_toleration,
    owner_references,
    pod_security_context,
)

__all__ = [
    "CACHE_COMPONENT",
    "WEIGHTS_READY",
    "Observed",
    "Weights",
    "cache_claim_name",
    "cache_key",
    "cache_size",
    "cache_target",
    "decide",
    "fill_job_name",
    "render_cache_claim",
    "render_fill_job",
    "startup_budget_seconds",
]

WEIGHTS_READY: Final = "WeightsReady"
"""The condition type: whether the weights the pods load are where they mount them."""
CACHE_COMPONENT: Final = "model-cache"
"""``app.kubernetes.io/component`` of the cache's claim, Job and download pod."""
#: spec.model.source.type -> capacity.coldstart's source names.
SOURCES: Final[Mapping[str, str]] = {"Hub": "hub", "PVC": "pvc", "Image": "image", "Cache": "cache"}
#: The kubelet's waiting reasons for an image it cannot pull (pkg/kubelet/images: ErrImagePull and
#: friends); for an image volume they are the vLLM container's (kuberuntime toKubeContainerImageVolumes).
PULL_FAILURES: Final = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "ErrImageInspect"}
)
#: The download: huggingface_hub's snapshot_download (in every vLLM image), arguments from argv so that
#: nothing from the spec is ever parsed by a shell. Meta's ``original/`` folder holds a second copy of
#: the weights in another format that vLLM does not read.
DOWNLOAD_SCRIPT: Final = (
    "import sys\n"
    "from huggingface_hub import snapshot_download\n"
    "repo, revision, target = sys.argv[1:4]\n"
    "snapshot_download(repo_id=repo, revision=revision, local_dir=target, ignore_patterns=['original/*'])\n"
    "print('downloaded', repo, revision, 'into', target)\n"
)
CACHE_MOUNT_PATH: Final = "/cache"
"""Where the download Job mounts the claim, read-write."""
MESSAGE_MAX: Final = 512
"""Messages quoted from the Job or a pod are cut to this many characters."""


@dataclass(frozen=True, kw_only=True)
class Observed:
    """What the operator read before deciding (kvright.operator gathers it)."""

    claim: Mapping[str, Any] | None = None
    """The claim the pods mount (source PVC: the user's; Cache: ``<name>-weights``); None: not found."""
    job: Mapping[str, Any] | None = None
    """The cache's download Job; None: not found."""
    pods: Sequence[Mapping[str, Any]] = ()
    """The vLLM pods (source Image: their container states say whether the volume was pulled)."""
    error: str | None = None
    """Reading failed: the verdict is Unknown and the workload waits."""


@dataclass(frozen=True, kw_only=True)
class Weights:
    """The decision for one LLMDeployment's weights."""

    source: str
    """capacity.coldstart's name: hub, pvc, image or cache."""
    mount: WeightsMount | None
    """The pod volume and what vLLM loads; None: the hub."""
    children: tuple[dict[str, Any], ...] = ()
    """To server-side apply before the workload: the cache's claim and Job when they do not exist."""
    condition: Condition | None = None
    """WeightsReady; None for the hub unless the condition is already in status (then it says Hub)."""
    hold: bool = False
    """The workload must not be created or rolled now (the weights are not where the pods would look)."""


def cache_target(model: ModelSpec) -> tuple[str, str]:
    """The repository and revision a Cache source downloads: model.name at model.source.cache.revision,
    else model.hub.revision, else main."""
    cache = model.source.cache if model.source is not None else None
    revision = cache.revision if cache is not None and cache.revision is not None else None
    return model.name, revision or (model.hub.revision if model.hub is not None else "main")


def cache_key(repository: str, revision: str) -> str:
    """Ten hex digits naming one repository at one revision (a revision may hold ``/``)."""
    return hashlib.sha256(f"{repository}@{revision}".encode()).hexdigest()[:10]


def cache_claim_name(name: str) -> str:
    """The cache's claim: ``<name>-weights``."""
    return f"{name}-weights"


def fill_job_name(name: str, key: str) -> str:
    """The download Job: ``<name>-fill-<key>``, at most 63 characters (its pods carry it as a label)."""
    suffix = f"-fill-{key}"
    return name[: 63 - len(suffix)].rstrip("-") + suffix


def cache_folder(repository: str, key: str) -> str:
    """The folder inside the claim for one repository at one revision."""
    return f"{repository.replace('/', '--')}-{key}"


def cache_size(checkpoint_bytes: int) -> str:
    """The claim's default request: the checkpoint plus 15% (tokenizer, config, a file written twice
    while it downloads) and 1 GiB, in whole GiB."""
    return f"{math.ceil(checkpoint_bytes * 1.15 / 2**30) + 1}Gi"


def startup_budget_seconds(start: capacity.ColdStart) -> int:
    """The startup probe's budget for a pod whose weights are on a volume: twice what capacity.coldstart
    predicts from container start (read, GPU load, engine; an image volume's pull happens before the
    container starts, so it is left out), clamped to 5..60 minutes. Twice: the defaults are typical
    bandwidths, and a busy volume or a cold compile cache can halve them."""
    from_container = start.seconds - (start.fetch_seconds if start.source == "image" else 0.0)
    return int(min(3600, max(300, math.ceil(2.0 * from_container))))


def _cut(text: str) -> str:
    one_line = " ".join(str(text).split())
    return one_line if len(one_line) <= MESSAGE_MAX else one_line[: MESSAGE_MAX - 3] + "..."


def _path(folder: str | None) -> str:
    return f"{WEIGHTS_MOUNT_PATH}/{folder}" if folder else WEIGHTS_MOUNT_PATH


def _ready(status: Literal["True", "False", "Unknown"], reason: str, message: str) -> Condition:
    return Condition(type=WEIGHTS_READY, status=status, reason=reason, message=message)


def _cache_labels(name: str) -> dict[str, str]:
    """The cache's labels. Not the vLLM pods' (app.kubernetes.io/name: vllm): the download pod must never
    match the Deployment's or the Service's selector."""
    return {
        "app.kubernetes.io/managed-by": "kvright",
        "app.kubernetes.io/name": "kvright-model-cache",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/component": CACHE_COMPONENT,
        "kvright.dev/llmdeployment": name,
    }


def render_cache_claim(
    owner: Owner, *, size: str, access_mode: str, storage_class: str | None
) -> dict[str, Any]:
    """The cache's PersistentVolumeClaim (owned: deleted with the LLMDeployment)."""
    spec: dict[str, Any] = {"accessModes": [access_mode], "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": cache_claim_name(owner.name),
            "namespace": owner.namespace,
            "labels": _cache_labels(owner.name),
            "ownerReferences": owner_references(owner),
        },
        "spec": spec,
    }


def render_fill_job(
    owner: Owner,
    *,
    repository: str,
    revision: str,
    image: str,
    token: SecretKeyRef | None,
    deadline_seconds: int,
    hub_endpoint: str | None = None,
) -> dict[str, Any]:
    """The download Job that fills the cache once (from ``hub_endpoint``, a hub mirror, when given).

    One pod (``backoffLimit`` 3 retries, ``activeDeadlineSeconds`` from the predicted fill), the vLLM image
    (it ships huggingface_hub), non-root with a read-only root filesystem, no service account token, and
    the GPU taint tolerated without asking for a GPU (GPU node pools are tainted and may be the only nodes
    that can attach the claim). The token is an ``env.valueFrom`` reference, so it is in no object, log or
    event; a missing Secret keeps the pod from starting (CreateContainerConfigError), it is not read here.
    """
    key = cache_key(repository, revision)
    env: list[dict[str, Any]] = [
        {"name": "HOME", "value": "/tmp"},
        {"name": "HF_HOME", "value": "/tmp/huggingface"},
    ]
    if token is not None:
        env.append(
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": token.name, "key": token.key}}}
        )
    if hub_endpoint is not None:
        env.append({"name": "HF_ENDPOINT", "value": hub_endpoint})
    labels = _cache_labels(owner.name)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": fill_job_name(owner.name, key),
            "namespace": owner.namespace,
            "labels": labels,
            "annotations": {"kvright.dev/model": f"{repository}@{revision}"},
            "ownerReferences": owner_references(owner),
        },
        "spec": {
            "backoffLimit": 3,
            "activeDeadlineSeconds": deadline_seconds,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "tolerations": [gpu_toleration()],
                    "securityContext": pod_security_context(),
                    "containers": [
                        {
                            "name": "download",
                            "image": image,
                            "command": ["python3", "-c", DOWNLOAD_SCRIPT],
                            "args": [
                                repository,
                                revision,
                                f"{CACHE_MOUNT_PATH}/{cache_folder(repository, key)}",
                            ],
                            "env": env,
                            "resources": {
                                "requests": {"cpu": "1", "memory": "2Gi"},
                                "limits": {"memory": "4Gi"},
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {"name": "cache", "mountPath": CACHE_MOUNT_PATH},
                                {"name": "tmp", "mountPath": "/tmp"},
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "cache",
                            "persistentVolumeClaim": {"claimName": cache_claim_name(owner.name)},
                        },
                        {"name": "tmp", "emptyDir": {}},
                    ],
                },
            },
        },
    }


def decide(
    model: ModelSpec,
    *,
    owner: Owner,
    image: str,
    checkpoint_bytes: int,
    starts: Mapping[str, capacity.ColdStart],
    observed: Observed | None,
    reported: bool = False,
    hub_endpoint: str | None = None,
) -> Weights:
    """Where the weights come from and whether they are ready.

    ``starts``: capacity.coldstart's prediction for one pod of the plan from each source (this source's
    sizes the startup budget and the download Job's deadline); ``observed``: what the operator read
    (None: nothing was read, as in a pure test: a PVC or Cache source then waits); ``reported``: status
    already has a WeightsReady condition (a Hub source then updates it rather than leaving a stale one);
    ``hub_endpoint``: the hub mirror the cache's download Job fetches from (None: the public hub)."""
    source = model.source or WeightSource()
    kind = SOURCES[source.type]
    start = starts.get(kind)
    if source.type == "Hub":
        condition = None
        if reported:
            condition = _ready(
                "True",
                Reason.WEIGHTS_AVAILABLE,
                f"vLLM downloads {model.name} from the hub at every pod start",
            )
        return Weights(source=kind, mount=None, condition=condition)
    budget = startup_budget_seconds(start) if start is not None else 3600
    if source.type == "Image":
        assert source.image is not None  # the CRD's rule: type Image needs image
        ref = source.image.reference
        mount = WeightsMount(
            volume={
                "name": WEIGHTS_VOLUME,
                "image": {"reference": ref, "pullPolicy": source.image.pull_policy},
            },
            model_path=_path(source.image.path),
            startup_budget_seconds=budget,
            pull_seconds=math.ceil(start.fetch_seconds) if start is not None else 0,
        )
        failed = _pull_failure(observed.pods if observed is not None else (), ref)
        if failed is not None:
            return Weights(
                source=kind,
                mount=mount,
                condition=_ready("False", Reason.WEIGHTS_IMAGE_PULL_FAILED, failed),
            )
        return _loaded(kind, mount, f"the image volume {ref}")
    if source.type == "PVC":
        assert source.pvc is not None  # the CRD's rule: type PVC needs pvc
        claim = source.pvc.claim_name
        mount = WeightsMount(
            volume={"name": WEIGHTS_VOLUME, "persistentVolumeClaim": {"claimName": claim, "readOnly": True}},
            model_path=_path(source.pvc.path),
            startup_budget_seconds=budget,
        )
        unknown = _unknown(observed)
        if unknown is not None:
            return Weights(source=kind, mount=mount, condition=unknown, hold=True)
        assert observed is not None
        if observed.claim is None:
            return Weights(
                source=kind,
                mount=mount,
                hold=True,
                condition=_ready(
                    "False",
                    Reason.WEIGHTS_CLAIM_MISSING,
                    f"PersistentVolumeClaim {claim} (model.source.pvc.claimName) does not exist in "
                    f"{owner.namespace}; create it with the checkpoint, and kvright then creates the vLLM "
                    "pods",
                ),
            )
        return _loaded(kind, mount, f"PersistentVolumeClaim {claim}", note=_pending(observed.claim))
    return _cache(model, source, owner=owner, image=image, checkpoint_bytes=checkpoint_bytes,
                  start=start, observed=observed, budget=budget, hub_endpoint=hub_endpoint)  # fmt: skip


def _cache(
    model: ModelSpec,
    source: WeightSource,
    *,
    owner: Owner,
    image: str,
    checkpoint_bytes: int,
    start: capacity.ColdStart | None,
    observed: Observed | None,
    budget: int,
    hub_endpoint: str | None,
) -> Weights:
    cache = source.cache
    repository, revision = cache_target(model)
    key = cache_key(repository, revision)
    claim_name = cache_claim_name(owner.name)
    job_name = fill_job_name(owner.name, key)
    mount = WeightsMount(
        volume={"name": WEIGHTS_VOLUME, "persistentVolumeClaim": {"claimName": claim_name, "readOnly": True}},
        model_path=_path(cache_folder(repository, key)),
        startup_budget_seconds=budget,
    )
    unknown = _unknown(observed)
    if unknown is not None:
        return Weights(source="cache", mount=mount, condition=unknown, hold=True)
    assert observed is not None
    fill_seconds = start.first_fill_seconds if start is not None else 0.0
    children: list[dict[str, Any]] = []
    if observed.claim is None:
        children.append(
            render_cache_claim(
                owner,
                size=(cache.size if cache is not None else None) or cache_size(checkpoint_bytes),
                access_mode=cache.access_mode if cache is not None else "ReadWriteMany",
                storage_class=cache.storage_class_name if cache is not None else None,
            )
        )
    job = observed.job
    if job is None:
        children.append(
            render_fill_job(
                owner,
                repository=repository,
                revision=revision,
                image=image,
                token=model.hub.token_secret_ref if model.hub is not None else None,
                # Three times the predicted fill, and at least 30 minutes: a slow hub is not a failure.
                deadline_seconds=int(min(7 * 86400, max(1800, math.ceil(3.0 * fill_seconds)))),
                hub_endpoint=hub_endpoint,
            )
        )
    what = f"{repository}@{revision}"
    finished = _job_finished(job)

    def held(reason: str, message: str) -> Weights:
        """Not ready: the workload waits, the cache's missing children are applied."""
        return Weights(
            source="cache",
            mount=mount,
            children=tuple(children),
            hold=True,
            condition=_ready("False", reason, message),
        )

    if finished is not None and finished[0] == "Failed":
        return held(
            Reason.MODEL_CACHE_FILL_FAILED,
            f"the download Job {job_name} of {what} failed ({finished[1]}); its pod's log says why "
            f"(a gated model needs model.hub.tokenSecretRef); delete the Job and kvright runs it again",
        )
    if observed.claim is None and finished is not None:
        return held(
            Reason.WEIGHTS_CLAIM_MISSING,
            f"the model cache's PersistentVolumeClaim {claim_name} is gone after Job {job_name} filled "
            "it; kvright creates it again: delete the Job and kvright fills it again",
        )
    if finished is None:
        predicted = f" (predicted {math.ceil(fill_seconds)} s)" if fill_seconds else ""
        return held(
            Reason.MODEL_CACHE_FILLING,
            f"Job {job_name} is downloading {what} into PersistentVolumeClaim {claim_name}{predicted}"
            + _pending(observed.claim)
            + "; the vLLM workload is applied once it has finished",
        )
    return _loaded(
        "cache",
        mount,
        f"the model cache {claim_name}",
        note=f", filled with {what} by Job {job_name}",
        children=tuple(children),
    )


def _loaded(
    source: str, mount: WeightsMount, where: str, *, note: str = "", children: tuple[dict[str, Any], ...] = ()
) -> Weights:
    """Ready: vLLM loads the weights from the mounted volume ``where`` names."""
    return Weights(
        source=source,
        mount=mount,
        children=children,
        condition=_ready(
            "True", Reason.WEIGHTS_AVAILABLE, f"vLLM loads {mount.model_path} from {where} (read-only){note}"
        ),
    )


def _unknown(observed: Observed | None) -> Condition | None:
    if observed is None:
        return _ready("Unknown", Reason.WEIGHTS_STATUS_UNKNOWN, "the weights' volume has not been read yet")
    if observed.error is not None:
        return _ready(
            "Unknown",
            Reason.WEIGHTS_STATUS_UNKNOWN,
            f"reading the weights' volume failed: {_cut(observed.error)}",
        )
    return None


def _pending(claim: Mapping[str, Any] | None) -> str:
    phase = ((claim or {}).get("status") or {}).get("phase")
    if claim is None or phase in (None, "Bound"):
        return ""
    return (
        f"; the claim is {phase} (no volume bound yet: its StorageClass provisions one, or a "
        "PersistentVolume must match it)"
    )


def _job_finished(job: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """``("Complete", "")`` or ``("Failed", "reason: message")`` from the Job's conditions; None while it
    runs (or is absent)."""
    for c in ((job or {}).get("status") or {}).get("conditions") or ():
        if c.get("status") != "True":
            continue
        if c.get("type") == "Complete":
            return ("Complete", "")
        if c.get("type") == "Failed":
            why = ": ".join(p for p in (c.get("reason"), c.get("message")) if p) or "no reason given"
            return ("Failed", _cut(why))
    return None


def _pull_failure(pods: Sequence[Mapping[str, Any]], reference: str) -> str | None:
    """The first vLLM pod whose kubelet cannot pull the image volume ``reference``, in words; None if none.
    The kubelet reports an image volume's pull failure as the container's waiting reason, with the
    reference in the message (which tells it from the vLLM image's own)."""
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or ():
            if status.get("name") != CONTAINER_NAME:
                continue
            waiting = (status.get("state") or {}).get("waiting") or {}
            message = str(waiting.get("message") or "")
            if waiting.get("reason") in PULL_FAILURES and reference in message:
                name = (pod.get("metadata") or {}).get("name", "?")
                return (
                    f"pod {name} cannot pull the image volume {reference} "
                    f"({waiting['reason']}: {_cut(message)}); check model.source.image.reference and the "
                    "node's registry credentials"
                )
    return None
