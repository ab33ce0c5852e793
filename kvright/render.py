"""The children of an LLMDeployment as plain dicts, pure: vLLM Deployment, Service, PodMonitor.

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
from typing import Any, Final

import capacity
from kvright.api import API_VERSION, KIND, SecretKeyRef
from kvright.inventory import GPU_RESOURCE, PRODUCT_LABEL

__all__ = [
    "CONTAINER_NAME",
    "HTTP_PORT",
    "LLMD_LABEL",
    "MANAGED_BY",
    "Owner",
    "VLLMWorkload",
    "labels",
    "render_all",
    "render_deployment",
    "render_pod_monitor",
    "render_service",
    "selector",
    "startup_budget_seconds",
    "termination_grace_seconds",
]

LLMD_LABEL: Final = "kvright.dev/llmdeployment"
MANAGED_BY: Final = "kvright"
CONTAINER_NAME: Final = "vllm"
HTTP_PORT: Final = 8000
"""vLLM's OpenAI-compatible server port; /health and /metrics are on it too."""
PRESTOP_SLEEP_SECONDS: Final = 10
"""Time for endpoints and load balancers to stop sending new requests before vLLM gets SIGTERM."""
UID: Final = 1000


@dataclass(frozen=True, kw_only=True)
class Owner:
    """The owning LLMDeployment, for ownerReferences (garbage collection on delete)."""

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
    weight_bytes: int = 0
    """Model weights, all GPUs: sizes the startup probe's budget for loading."""
    max_request_seconds: float = 60.0
    """How long the longest expected request runs: sizes the termination grace period."""
    extra_labels: dict[str, str] = field(default_factory=dict)

    @property
    def gpus_per_pod(self) -> int:
        """GPUs of one pod: the replica's on one node, or one node's share of a multi-node replica."""
        return self.layout.gpus // self.layout.nodes


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


def _metadata(w: VLLMWorkload) -> dict[str, Any]:
    return {
        "name": w.owner.name,
        "namespace": w.owner.namespace,
        "labels": {**labels(w.owner.name), **w.extra_labels},
        "ownerReferences": [
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": w.owner.name,
                "uid": w.owner.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def startup_budget_seconds(weight_bytes: int) -> int:
    """Seconds the startup probe allows before liveness takes over.

    Loading weights dominates vLLM's start: downloading and reading them at a pessimistic 100 MB/s,
    plus 5 minutes for CUDA graphs, compilation and profiling; clamped to 10..60 minutes.
    """
    loading = weight_bytes / 100e6
    return int(min(3600, max(600, 300 + math.ceil(loading))))


def termination_grace_seconds(max_request_seconds: float) -> int:
    """Seconds a stopping pod gets: the preStop pause, then in-flight requests drain after SIGTERM
    (vLLM's server stops accepting and finishes open requests), with one longest request of slack.
    Clamped to 30 s .. 15 min."""
    drain = math.ceil(max(0.0, max_request_seconds))
    return int(min(900, max(30, PRESTOP_SLEEP_SECONDS + drain + 5)))


def _product_in(product: str) -> dict[str, Any]:
    return {"key": PRODUCT_LABEL, "operator": "In", "values": [product]}


def _container(w: VLLMWorkload) -> dict[str, Any]:
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
    health = {"httpGet": {"path": "/health", "port": "http"}}
    startup_period = 10
    gpus = str(w.gpus_per_pod)
    return {
        "name": CONTAINER_NAME,
        "image": w.image,
        "command": ["vllm", "serve"],
        "args": [
            w.model,
            *w.vllm_args,
            "--served-model-name",
            w.served_model_name,
            "--port",
            str(HTTP_PORT),
        ],
        "ports": [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}],
        "env": env,
        "resources": {
            "requests": {"cpu": w.cpu, "memory": w.memory, GPU_RESOURCE: gpus},
            "limits": {GPU_RESOURCE: gpus},
        },
        "startupProbe": {
            **health,
            "periodSeconds": startup_period,
            "failureThreshold": math.ceil(startup_budget_seconds(w.weight_bytes) / startup_period),
        },
        "readinessProbe": {**health, "periodSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {**health, "periodSeconds": 10, "failureThreshold": 6, "timeoutSeconds": 5},
        "lifecycle": {"preStop": {"sleep": {"seconds": PRESTOP_SLEEP_SECONDS}}},
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


def render_deployment(w: VLLMWorkload) -> dict[str, Any]:
    """The vLLM Deployment.

    Update strategy: RollingUpdate with maxSurge 1 and maxUnavailable 0. A new pod is added before an
    old one goes, and an old one goes only when a new one is Ready; if the new plan needs GPUs the
    cluster does not have, the new pod stays Pending and every old pod keeps serving (Recreate, or
    maxUnavailable > 0, would take capacity down first and strand it).
    """
    pod_labels = {**labels(w.owner.name), **w.extra_labels}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(w),
        "spec": {
            "replicas": w.replicas,
            "selector": {"matchLabels": selector(w.owner.name)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            # Weight loading is slow: a rollout only counts as stalled after the startup budget.
            "progressDeadlineSeconds": startup_budget_seconds(w.weight_bytes) + 300,
            "revisionHistoryLimit": 3,
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {"kvright.dev/gpu-product": w.gpu_product},
                },
                "spec": {
                    "containers": [_container(w)],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [_product_in(w.gpu_product)]}]
                            }
                        }
                    },
                    # GPU node pools are commonly tainted nvidia.com/gpu:NoSchedule.
                    "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": UID,
                        "runAsGroup": UID,
                        "fsGroup": UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "terminationGracePeriodSeconds": termination_grace_seconds(w.max_request_seconds),
                    "enableServiceLinks": False,
                    "volumes": [
                        # NCCL and vLLM's workers share memory through /dev/shm (64 MiB by default).
                        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                        {"name": "cache", "emptyDir": {}},
                        {"name": "tmp", "emptyDir": {}},
                    ],
                },
            },
        },
    }


def render_service(w: VLLMWorkload) -> dict[str, Any]:
    """A ClusterIP Service on the OpenAI port, named after the LLMDeployment."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(w),
        "spec": {
            "type": "ClusterIP",
            "selector": selector(w.owner.name),
            "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def render_pod_monitor(w: VLLMWorkload) -> dict[str, Any]:
    """A prometheus-operator PodMonitor scraping vLLM's /metrics, with the ``llmdeployment`` label on
    every series (``namespace`` is added by prometheus-operator)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": _metadata(w),
        "spec": {
            "selector": {"matchLabels": selector(w.owner.name)},
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


def render_all(w: VLLMWorkload, *, pod_monitor: bool) -> list[dict[str, Any]]:
    """Every child, in apply order; the PodMonitor only when its CRD is installed."""
    children = [render_deployment(w), render_service(w)]
    if pod_monitor:
        children.append(render_pod_monitor(w))
    return children
