"""The children of an LLMDeployment as plain dicts, pure: the vLLM Deployment (a replica on one node) or
LeaderWorkerSet (a replica across nodes), Service, PodMonitor, InferencePool.

Every choice that is not the plan's lives here, with the reason next to it. The output is applied
with server-side apply under one field manager, so it lists only the fields kvright owns: anything
else on the live objects (a hand-added annotation, an HPA's fields) is left alone.

The vLLM container's command line is ``command: [vllm, serve]`` and ``args: [MODEL, --flag, value,
...]`` (docs/interfaces.md): a pod runner or simulator reads the same command line from the pod spec.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

import capacity
from kvright.api import API_VERSION, KIND, EndpointPickerSpec, SecretKeyRef
from kvright.inventory import GPU_RESOURCE, PRODUCT_LABEL

__all__ = [
    "CONTAINER_NAME",
    "HTTP_PORT",
    "INFERENCE_POOL_API_VERSION",
    "LLMD_LABEL",
    "LWS_API_VERSION",
    "LWS_NAME_LABEL",
    "LWS_WORKER_INDEX_LABEL",
    "MANAGED_BY",
    "Owner",
    "VLLMWorkload",
    "WeightsMount",
    "drain_seconds",
    "gpu_toleration",
    "labels",
    "owner_references",
    "pod_security_context",
    "render_all",
    "render_deployment",
    "render_inference_pool",
    "render_leader_worker_set",
    "render_pod_disruption_budget",
    "render_pod_monitor",
    "render_service",
    "selector",
    "serving_selector",
    "startup_budget_seconds",
    "termination_grace_seconds",
    "worker_args",
]

LLMD_LABEL: Final = "kvright.dev/llmdeployment"
MANAGED_BY: Final = "kvright"
CONTAINER_NAME: Final = "vllm"
HTTP_PORT: Final = 8000
"""vLLM's OpenAI-compatible server port; /health and /metrics are on it too."""
PRESTOP_SLEEP_SECONDS: Final = 10
MIN_DRAIN_SECONDS: Final = 60
"""The least time a stopping vLLM gets to finish what it admitted (see :func:`drain_seconds`)."""
"""Time for endpoints and load balancers to stop sending new requests before vLLM gets SIGTERM."""
UID: Final = 1000
LWS_API_VERSION: Final = "leaderworkerset.x-k8s.io/v1"
INFERENCE_POOL_API_VERSION: Final = "inference.networking.k8s.io/v1"
"""The Gateway API Inference Extension's InferencePool (GA in its v1.0.0)."""
LWS_NAME_LABEL: Final = "leaderworkerset.sigs.k8s.io/name"
"""Set by the LeaderWorkerSet controller on every pod of a set."""
LWS_WORKER_INDEX_LABEL: Final = "leaderworkerset.sigs.k8s.io/worker-index"
"""Set by the LeaderWorkerSet pod webhook: ``"0"`` on a group's leader, ``1..size-1`` on its workers."""
LWS_WORKER_INDEX_ENV: Final = "LWS_WORKER_INDEX"
"""The worker index as an environment variable, injected by the LeaderWorkerSet v0.8.0 pod webhook
(``pkg/utils/pod/pod_utils.go`` ``AddLWSVariables``, with ``LWS_LEADER_ADDRESS`` and ``LWS_GROUP_SIZE``)
into every container; the kubelet expands ``$(LWS_WORKER_INDEX)`` in ``args``."""


WEIGHTS_VOLUME: Final = "weights"
"""The pod volume holding the model's weights when they do not come from the hub."""
WEIGHTS_MOUNT_PATH: Final = "/models"
"""Where the vLLM container mounts that volume, read-only."""


@dataclass(frozen=True, kw_only=True)
class WeightsMount:
    """Weights on a volume (``spec.model.source`` PVC, Image or Cache; decided by kvright.weights): the
    pod volume, what ``vllm serve`` loads, and the startup budget that source needs."""

    volume: Mapping[str, Any]
    """The pod volume (its name is WEIGHTS_VOLUME), mounted read-only at WEIGHTS_MOUNT_PATH."""
    model_path: str
    """The checkpoint's folder in the container: ``vllm serve`` loads it instead of the model name (which
    stays the public one through ``--served-model-name``)."""
    startup_budget_seconds: int
    """The startup probe's budget from container start (kvright.weights.startup_budget_seconds)."""
    pull_seconds: int = 0
    """Predicted time before the container starts (an image volume's pull): added to the Deployment's
    progress deadline, not to the probe (which starts with the container)."""


class Owner(NamedTuple):
    """The owning LLMDeployment, for ownerReferences (garbage collection on delete): name, namespace, uid."""

    name: str
    namespace: str
    uid: str


@dataclass(frozen=True, kw_only=True)
class VLLMWorkload:
    """Everything the renderer needs, decided elsewhere."""

    owner: Owner
    model: str
    """What `vllm serve` loads."""
    served_model_name: str
    image: str
    gpu_product: str
    """Node affinity: the GFD product label value."""
    layout: capacity.Layout
    """The replica's parallel layout: one pod per node of a replica, each with the GPUs of its node."""
    replicas: int
    vllm_args: Sequence[str]
    """The plan's flags, exactly as vLLM accepts them (Plan.vllm_args())."""
    vllm_args_by_role: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Each role's full flags when a replica spans nodes (Plan.vllm_args_by_role(): ``leader``, and
    ``worker`` for node rank 1)."""
    cpu: str = "4"
    memory: str = "32Gi"
    hf_token: SecretKeyRef | None = None
    hub_endpoint: str | None = None
    """The hub mirror vLLM downloads from (``HF_ENDPOINT``; the operator's KVRIGHT_HF_ENDPOINT when it is
    not the public hub); None: the public hub."""
    weight_bytes: int = 0
    """Model weights, all GPUs: sizes the startup probe's budget for loading."""
    max_request_seconds: float = 60.0
    """How long the longest expected request runs: sizes the termination grace period."""
    pod_monitor_labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels on the PodMonitor only (the operator's KVRIGHT_PODMONITOR_LABELS): the label a Prometheus
    selects PodMonitors by, e.g. kube-prometheus-stack's ``release``. Not on the workload or its pods, so
    changing it never restarts vLLM; kvright's own labels win over these."""
    endpoint_picker: EndpointPickerSpec | None = None
    """The InferencePool's endpoint picker (None: the pool has no endpointPickerRef)."""
    weights: WeightsMount | None = None
    """Weights on a volume; None: vLLM downloads ``model`` from the hub at every start."""
    trust_remote_code: bool = False
    """``--trust-remote-code`` on every role: vLLM may run the Python the model repository ships."""

    @property
    def gpus_per_pod(self) -> int:
        """GPUs of one pod: the replica's on one node, or one node's share of a multi-node replica."""
        return self.layout.gpus // self.layout.nodes


def gpu_toleration() -> dict[str, str]:
    """GPU node pools are commonly tainted ``nvidia.com/gpu:NoSchedule``; kvright's pods tolerate it."""
    return {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


def pod_security_context() -> dict[str, Any]:
    """The pod-level security context of every pod kvright renders: non-root as UID/GID 1000, the
    volumes' group 1000, the runtime's default seccomp profile (Pod Security ``restricted``)."""
    return {
        "runAsNonRoot": True,
        "runAsUser": UID,
        "runAsGroup": UID,
        "fsGroup": UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def labels(name: str) -> dict[str, str]:
    """The labels every child and every vLLM pod carries (docs/interfaces.md)."""
    return {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/name": "vllm",
        "app.kubernetes.io/instance": name,
        LLMD_LABEL: name,
    }


def selector(name: str) -> dict[str, str]:
    """The pod selector: stable across plan changes, because a Deployment's selector is immutable."""
    return {"app.kubernetes.io/name": "vllm", LLMD_LABEL: name}


def serving_selector(name: str, *, spans_nodes: bool) -> dict[str, str]:
    """The pods that serve the API and /metrics: every vLLM pod, or a multi-node replica's leaders only
    (its workers run ``--headless``: no HTTP server)."""
    return {**selector(name), **({LWS_WORKER_INDEX_LABEL: "0"} if spans_nodes else {})}


def worker_args(args: Sequence[str]) -> list[str]:
    """A worker role's flags with its ``--node-rank`` value replaced by ``$(LWS_WORKER_INDEX)``: one
    worker template serves every node rank 1..N-1 (the workers differ only in ``--node-rank``)."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == "--node-rank":
            out[i + 1] = f"$({LWS_WORKER_INDEX_ENV})"
    return out


def owner_references(owner: Owner) -> list[dict[str, Any]]:
    """The controller ownerReference every child carries (garbage-collected with the LLMDeployment)."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": owner.name,
            "uid": owner.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _metadata(w: VLLMWorkload) -> dict[str, Any]:
    return {
        "name": w.owner.name,
        "namespace": w.owner.namespace,
        "labels": labels(w.owner.name),
        "ownerReferences": owner_references(w.owner),
    }


def _startup_budget(w: VLLMWorkload) -> int:
    """The startup probe's budget: the weight source's (kvright.weights), else the hub's."""
    return (
        w.weights.startup_budget_seconds if w.weights is not None else startup_budget_seconds(w.weight_bytes)
    )


def startup_budget_seconds(weight_bytes: int) -> int:
    """Seconds the startup probe allows before liveness takes over.

    Loading weights dominates vLLM's start: downloading and reading them at a pessimistic 100 MB/s,
    plus 5 minutes for CUDA graphs, compilation and profiling; clamped to 10..60 minutes.
    """
    loading = weight_bytes / 100e6
    return int(min(3600, max(600, 300 + math.ceil(loading))))


def drain_seconds(max_request_seconds: float) -> int:
    """vLLM's ``--shutdown-timeout``: how long the server lets the requests it admitted (running and
    waiting) finish after SIGTERM; it stops accepting at once and exits as soon as they are done, so a long
    budget costs nothing when they finish early. One longest request, at least :data:`MIN_DRAIN_SECONDS`
    (0 would mean abort them all, vLLM's default; the pod is usually restarted because it is slower than
    predicted, so a prediction alone is too short), at most what the grace period leaves after the
    preStop pause."""
    longest = math.ceil(max(0.0, max_request_seconds))
    return int(min(900 - PRESTOP_SLEEP_SECONDS - 5, max(MIN_DRAIN_SECONDS, longest)))


def termination_grace_seconds(max_request_seconds: float) -> int:
    """Seconds a stopping pod gets: the preStop pause (endpoints stop routing to it), then
    :func:`drain_seconds` for vLLM to finish what it admitted, with 5 s of slack before SIGKILL.
    Clamped to 30 s .. 15 min."""
    return int(min(900, max(30, PRESTOP_SLEEP_SECONDS + drain_seconds(max_request_seconds) + 5)))


def _product_in(product: str) -> dict[str, Any]:
    return {"key": PRODUCT_LABEL, "operator": "In", "values": [product]}


def _container(w: VLLMWorkload, args: Sequence[str] | None = None, *, serves: bool = True) -> dict[str, Any]:
    """The vLLM container running ``vllm serve MODEL *args`` (the plan's flags by default). A container
    that ``serves`` (a single-node replica, a multi-node leader) gets the served name, the port and the
    HTTP probes; a headless worker has no HTTP server, so none of them."""
    env: list[dict[str, Any]] = [
        # The image runs as a non-root user with a read-write cache on an emptyDir.
        {"name": "HOME", "value": "/cache"},
        {"name": "HF_HOME", "value": "/cache/huggingface"},
        {"name": "VLLM_CACHE_ROOT", "value": "/cache/vllm"},
    ]
    if w.hf_token is not None:
        # Only a reference: the token never appears in the Deployment.
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": w.hf_token.name, "key": w.hf_token.key}},
            }
        )
    if w.hub_endpoint is not None:
        env.append({"name": "HF_ENDPOINT", "value": w.hub_endpoint})
    health = {"httpGet": {"path": "/health", "port": "http"}}
    startup_period = 10
    gpus = str(w.gpus_per_pod)
    flags = list(w.vllm_args if args is None else args)
    if w.trust_remote_code:
        flags.append("--trust-remote-code")
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": w.image,
        "command": ["vllm", "serve"],
        "args": [w.model if w.weights is None else w.weights.model_path, *flags],
    }
    if serves:
        container["args"] += [
            "--served-model-name", w.served_model_name,
            "--port", str(HTTP_PORT),
            # vLLM 0.32 aborts every request in flight on SIGTERM unless told to drain (its default
            # --shutdown-timeout is 0): the pod's grace period only helps if the server waits for them.
            "--shutdown-timeout", str(drain_seconds(w.max_request_seconds)),
        ]  # fmt: skip
        container["ports"] = [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}]
    container["env"] = env
    container["resources"] = {
        "requests": {"cpu": w.cpu, "memory": w.memory, GPU_RESOURCE: gpus},
        "limits": {GPU_RESOURCE: gpus},
    }
    if serves:
        container |= {
            "startupProbe": {
                **health,
                "periodSeconds": startup_period,
                "failureThreshold": math.ceil(_startup_budget(w) / startup_period),
            },
            "readinessProbe": {**health, "periodSeconds": 5, "failureThreshold": 3},
            "livenessProbe": {**health, "periodSeconds": 10, "failureThreshold": 6, "timeoutSeconds": 5},
            "lifecycle": {"preStop": {"sleep": {"seconds": PRESTOP_SLEEP_SECONDS}}},
        }
    container |= {
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": UID,
            "runAsGroup": UID,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "cache", "mountPath": "/cache"},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    if w.weights is not None:
        container["volumeMounts"].append(
            {"name": WEIGHTS_VOLUME, "mountPath": WEIGHTS_MOUNT_PATH, "readOnly": True}
        )
    return container


def _pod_template(
    w: VLLMWorkload, container: dict[str, Any], *, affinity: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A vLLM pod template: labels, the GPU product's node affinity, the GPU toleration, security
    contexts and volumes (the same for a Deployment's pods and a LeaderWorkerSet's)."""
    return {
        "metadata": {
            "labels": labels(w.owner.name),
            "annotations": {"kvright.dev/gpu-product": w.gpu_product},
        },
        "spec": {
            "containers": [container],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [_product_in(w.gpu_product)]}]
                    }
                },
                **(affinity or {}),
            },
            "tolerations": [gpu_toleration()],
            "securityContext": pod_security_context(),
            "terminationGracePeriodSeconds": termination_grace_seconds(w.max_request_seconds),
            "enableServiceLinks": False,
            "volumes": [
                # NCCL and vLLM's workers share memory through /dev/shm (64 MiB by default).
                {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                {"name": "cache", "emptyDir": {}},
                {"name": "tmp", "emptyDir": {}},
                *([dict(w.weights.volume)] if w.weights is not None else []),
            ],
        },
    }


def render_deployment(w: VLLMWorkload) -> dict[str, Any]:
    """The vLLM Deployment.

    Update strategy: RollingUpdate with maxSurge 1 and maxUnavailable 0. A new pod is added before an
    old one goes, and an old one goes only when a new one is Ready; if the new plan needs GPUs the
    cluster does not have, the new pod stays Pending and every old pod keeps serving (Recreate, or
    maxUnavailable > 0, would take capacity down first and strand it).
    """
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(w),
        "spec": {
            "replicas": w.replicas,
            "selector": {"matchLabels": selector(w.owner.name)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            # Weight loading is slow: a rollout only counts as stalled after the startup budget.
            "progressDeadlineSeconds": _startup_budget(w)
            + 300
            + (w.weights.pull_seconds if w.weights else 0),
            "revisionHistoryLimit": 3,
            "template": _pod_template(w, _container(w)),
        },
    }


def render_leader_worker_set(w: VLLMWorkload) -> dict[str, Any]:
    """The vLLM LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``, LeaderWorkerSet v0.8.0) of a layout that
    spans nodes: one group per replica, one pod per node of the replica, each with that node's GPUs.

    - The leader (worker index 0) runs ``vllm serve MODEL`` with the plan's leader flags (``--node-rank
      0 --master-addr $(LWS_LEADER_ADDRESS) ...``), the served name, the port and the HTTP probes: it
      serves the API and /metrics. The workers run the worker flags with ``--node-rank
      $(LWS_WORKER_INDEX)`` and ``--headless``: no HTTP server, so no port and no probes (a group is
      Ready when its leader is Ready and its workers run).
    - ``restartPolicy: RecreateGroupOnPodRestart``: vLLM cannot re-admit one lost node into a running
      ``torch.distributed`` group, so a failed pod restarts the whole group.
    - Placement: the pods of this set repel each other per node (a required pod anti-affinity on
      ``kubernetes.io/hostname``); each pod also asks for its node's GPUs, so a group takes whole nodes.
      Not the ``exclusive-topology`` annotation: keyed on ``kubernetes.io/hostname`` it puts a *whole
      group* into one hostname domain (the controller pins the workers to the leader's node, where the
      leader already holds every GPU: the worker never schedules; tests/integration/test_lws_controller.py).
    - ``networkConfig.subdomainPolicy: UniquePerReplica``: the controller makes a headless Service per
      group named after its leader pod (``<name>-<group>``) for ``LWS_LEADER_ADDRESS``, instead of one
      headless Service named after the set, which is the name of kvright's ClusterIP Service.
    - Rollout: RollingUpdate with maxUnavailable 1 and maxSurge 0, one group replaced at a time, the
      others keep serving. maxUnavailable 0 (what the Deployment uses) is not possible: v0.8.0 copies it
      into the leader StatefulSet, which the API server rejects ("cannot be 0"), so no group would ever
      be created. A surge group is not used: it is a whole extra set of nodes, and without gang
      scheduling a surge group that only partly fits leaves its leader holding a node's GPUs while its
      workers wait (stranded GPUs); with one replica v0.8.0 does not burst at all (it releases the
      surge as soon as no more groups are unready than maxSurge). So a one-replica set restarts its
      group on a plan change: the new group needs the same nodes the old one holds.
    """
    name = w.owner.name
    leader_args = w.vllm_args_by_role.get("leader", w.vllm_args)
    worker_flags = worker_args(w.vllm_args_by_role.get("worker", w.vllm_args))
    apart = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {LWS_NAME_LABEL: name}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": _metadata(w),
        "spec": {
            "replicas": w.replicas,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0},
            },
            "networkConfig": {"subdomainPolicy": "UniquePerReplica"},
            "leaderWorkerTemplate": {
                "size": w.layout.nodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": _pod_template(w, _container(w, leader_args), affinity=apart),
                "workerTemplate": _pod_template(w, _container(w, worker_flags, serves=False), affinity=apart),
            },
        },
    }


def render_service(w: VLLMWorkload) -> dict[str, Any]:
    """A ClusterIP Service on the OpenAI port, named after the LLMDeployment, selecting the pods that
    serve (a multi-node replica's leaders only)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(w),
        "spec": {
            "type": "ClusterIP",
            "selector": serving_selector(w.owner.name, spans_nodes=w.layout.spans_nodes),
            "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def render_pod_disruption_budget(w: VLLMWorkload) -> dict[str, Any]:
    """A PodDisruptionBudget over every vLLM pod of the LLMDeployment (leaders and workers alike): a node
    drain (a cluster upgrade, an autoscaler scaling in) evicts them one at a time, waiting for each
    replacement to be Ready, so the other replicas keep serving. A pod that is not Ready (loading weights,
    crash-looping) may always be evicted (``unhealthyPodEvictionPolicy: AlwaysAllow``), so it never blocks
    a drain; nor does a single replica (``maxUnavailable: 1`` lets it go: a budget that held it would hold
    the drain for good)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(w),
        "spec": {
            "selector": {"matchLabels": selector(w.owner.name)},
            "maxUnavailable": 1,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def render_pod_monitor(w: VLLMWorkload) -> dict[str, Any]:
    """A prometheus-operator PodMonitor scraping vLLM's /metrics, with the ``llmdeployment`` label on
    every series (``namespace`` is added by prometheus-operator). Its object carries
    ``w.pod_monitor_labels`` too: a Prometheus picks up only the PodMonitors its podMonitorSelector matches
    (kube-prometheus-stack's default is its ``release`` label), so without them no vllm:* series exists."""
    metadata = _metadata(w)
    metadata["labels"] = {**w.pod_monitor_labels, **metadata["labels"]}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": serving_selector(w.owner.name, spans_nodes=w.layout.spans_nodes)},
            "podMetricsEndpoints": [
                {
                    "port": "http",
                    "path": "/metrics",
                    "interval": "15s",
                    "relabelings": [
                        {
                            "sourceLabels": ["__meta_kubernetes_pod_label_kvright_dev_llmdeployment"],
                            "targetLabel": "llmdeployment",
                            "action": "replace",
                        }
                    ],
                }
            ],
        },
    }


def render_inference_pool(w: VLLMWorkload) -> dict[str, Any]:
    """A Gateway API Inference Extension InferencePool (``inference.networking.k8s.io/v1``) over the pods
    that serve, on the vLLM port: what a Gateway's HTTPRoute names as its backend, so that an endpoint
    picker (which reads each pod's vLLM metrics: queue, KV-cache use, prefixes) chooses the pod for each
    request instead of the Service's round robin.

    The selector is the Service's: every vLLM pod, or a multi-node replica's leaders only (the workers
    run headless; a pod outside the selector is never offered to the picker). The picker is referenced
    as a Service (the reference's default kind) with its port and failure mode; without one the
    reference is left out (allowed from the API's v1.5.0, for gateways that pick endpoints themselves).
    ``appProtocol`` is left to the API's default (http), so pre-v1.5.0 CRDs, which lack the field,
    accept the object too."""
    spec: dict[str, Any] = {
        "selector": {"matchLabels": serving_selector(w.owner.name, spans_nodes=w.layout.spans_nodes)},
        "targetPorts": [{"number": HTTP_PORT}],
    }
    picker = w.endpoint_picker
    if picker is not None:
        spec["endpointPickerRef"] = {
            "kind": "Service",
            "name": picker.name,
            "port": {"number": picker.port},
            "failureMode": picker.failure_mode,
        }
    return {
        "apiVersion": INFERENCE_POOL_API_VERSION,
        "kind": "InferencePool",
        "metadata": _metadata(w),
        "spec": spec,
    }


def render_all(w: VLLMWorkload, *, pod_monitor: bool, inference_pool: bool = False) -> list[dict[str, Any]]:
    """Every child, in apply order: the vLLM workload first (a LeaderWorkerSet when a replica spans
    nodes, else a Deployment), the Service, the PodDisruptionBudget, the PodMonitor only when its CRD is
    installed, the InferencePool only when the cluster serves its API."""
    workload = render_leader_worker_set(w) if w.layout.spans_nodes else render_deployment(w)
    children = [workload, render_service(w), render_pod_disruption_budget(w)]
    if pod_monitor:
        children.append(render_pod_monitor(w))
    if inference_pool:
        children.append(render_inference_pool(w))
    return children
