"""GPU inventory from Node objects, pure.

GPU Feature Discovery labels each GPU node with ``nvidia.com/gpu.product`` (e.g.
``NVIDIA-H100-80GB-HBM3``), ``nvidia.com/gpu.count`` and ``nvidia.com/gpu.memory`` (MiB); the device
plugin reports ``nvidia.com/gpu`` in ``status.allocatable``. The operator indexes Nodes with
:func:`gpu_node` and asks :func:`choose` which product a spec runs on and how many GPUs one pod may
ask for: a plan never needs more GPUs per pod than the largest node of that product has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kvright.reasons import Reason

__all__ = [
    "GPU_RESOURCE",
    "PRODUCT_LABEL",
    "GPUNode",
    "GPUPod",
    "InventoryError",
    "ProductInventory",
    "choose",
    "gpu_node",
    "gpu_pod",
    "pods_fit",
    "summarize",
]

PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
COUNT_LABEL: Final = "nvidia.com/gpu.count"
MEMORY_LABEL: Final = "nvidia.com/gpu.memory"
GPU_RESOURCE: Final = "nvidia.com/gpu"


@dataclass(frozen=True, kw_only=True)
class GPUNode:
    """What one Node offers in GPUs."""

    name: str
    product: str
    """The GFD product label, as written on the node."""
    allocatable_gpus: int
    """``status.allocatable["nvidia.com/gpu"]`` (falls back to the gpu.count label)."""
    memory_mib: int | None
    """Per-GPU memory from the gpu.memory label, MiB, when labelled."""
    free_gpus: int | None = None
    """Allocatable GPUs not requested by pods bound to the node (see :func:`summarize`); None when
    occupancy is not known (the operator could not or was told not to list pods)."""


@dataclass(frozen=True, kw_only=True)
class GPUPod:
    """A pod bound to a node that holds GPUs there."""

    node: str
    namespace: str
    owner: str | None
    """The LLMDeployment whose pod this is (its ``kvright.dev/llmdeployment`` label), else None."""
    gpus: int
    """The GPUs the scheduler reserved for it: the larger of its containers' sum and its largest init
    container (the pod's effective request, as the scheduler computes it)."""


@dataclass(frozen=True, kw_only=True)
class ProductInventory:
    """The schedulable nodes of one GPU product, summed."""

    product: str
    nodes: int
    max_gpus_per_node: int
    """The most GPUs one pod can get on one node: the upper bound of tensor parallelism."""
    total_gpus: int
    free_by_node: tuple[int, ...] | None = None
    """GPUs free on each node, largest first; None when occupancy is not known."""

    @property
    def free_gpus(self) -> int | None:
        """GPUs not held by other pods over every node of the product; None when not known."""
        return None if self.free_by_node is None else sum(self.free_by_node)

    def room(self) -> str:
        """``5 of 16 GPUs free`` (or ``16 GPUs`` when occupancy is not known), for messages."""
        free = self.free_gpus
        return f"{self.total_gpus} GPUs" if free is None else f"{free} of {self.total_gpus} GPUs free"


class InventoryError(ValueError):
    """No usable GPU product for a spec; ``reason`` is a CamelCase condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _count(value: Any) -> int:
    """A non-negative integer from a quantity string ("8") or number; anything else is 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return 0


def gpu_node(node: Mapping[str, Any]) -> GPUNode | None:
    """The GPUs of a Node dict, or None when it has none or cannot take new pods (cordoned)."""
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    product = labels.get(PRODUCT_LABEL)
    if not isinstance(product, str) or not product:
        return None
    if (node.get("spec") or {}).get("unschedulable"):
        return None
    allocatable = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)
    gpus = _count(allocatable) if allocatable is not None else _count(labels.get(COUNT_LABEL))
    if gpus <= 0:
        return None
    memory = _count(labels.get(MEMORY_LABEL))
    return GPUNode(
        name=str(metadata.get("name", "")),
        product=product,
        allocatable_gpus=gpus,
        memory_mib=memory or None,
    )


def gpu_pod(pod: Mapping[str, Any], *, owner_label: str) -> GPUPod | None:
    """The GPUs a Pod dict holds on its node, or None when it holds none: not bound yet, finished
    (``Succeeded``/``Failed`` pods release their devices), or asking for no ``nvidia.com/gpu``.

    A pod's effective request is ``max(sum over containers, max over init containers)``: init containers
    run one at a time before the others and their devices are reused (the scheduler's rule)."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    if not isinstance(node, str) or not node:
        return None
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None

    def wanted(container: Mapping[str, Any]) -> int:
        resources = container.get("resources") or {}
        # Extended resources are requested by limits; requests, when given, must equal them.
        for key in ("limits", "requests"):
            value = (resources.get(key) or {}).get(GPU_RESOURCE)
            if value is not None:
                return _count(value)
        return 0

    running = sum(wanted(c) for c in spec.get("containers") or ())
    init = max((wanted(c) for c in spec.get("initContainers") or ()), default=0)
    gpus = max(running, init)
    if gpus <= 0:
        return None
    labels = metadata.get("labels") or {}
    owner = labels.get(owner_label)
    return GPUPod(
        node=node,
        namespace=str(metadata.get("namespace", "")),
        owner=owner if isinstance(owner, str) and owner else None,
        gpus=gpus,
    )


def summarize(
    nodes: Iterable[GPUNode],
    pods: Iterable[GPUPod] | None = None,
    *,
    exclude: tuple[str, str] | None = None,
) -> dict[str, ProductInventory]:
    """Per product (keyed by the label as written), the node count, largest node and total GPUs and,
    when ``pods`` is given, the GPUs free on each node: allocatable minus what bound pods hold, except
    the pods of ``exclude`` (namespace, LLMDeployment name): a deployment's own pods are room for it, so
    re-planning it never sees its own replicas as a full cluster."""
    held: dict[str, int] | None = None
    if pods is not None:
        held = {}
        for pod in pods:
            if exclude is not None and (pod.namespace, pod.owner) == exclude:
                continue
            held[pod.node] = held.get(pod.node, 0) + pod.gpus
    grouped: dict[str, list[GPUNode]] = {}
    for node in nodes:
        grouped.setdefault(node.product, []).append(node)
    return {
        product: ProductInventory(
            product=product,
            nodes=len(members),
            max_gpus_per_node=max(n.allocatable_gpus for n in members),
            total_gpus=sum(n.allocatable_gpus for n in members),
            free_by_node=None
            if held is None
            else tuple(
                sorted((max(0, n.allocatable_gpus - held.get(n.name, 0)) for n in members), reverse=True)
            ),
        )
        for product, members in sorted(grouped.items())
    }


def pods_fit(free_by_node: Iterable[int], *, pods: int, gpus_per_pod: int, pods_per_group: int = 1) -> bool:
    """Whether ``pods`` pods of ``gpus_per_pod`` GPUs each can be placed on nodes with these free GPUs.

    Pods of one group (a replica spanning ``pods_per_group`` nodes, one pod per node) go to different
    nodes. Placement is greedy: each group takes the ``pods_per_group`` distinct nodes with the most GPUs
    left. Every pod of one plan has the same size, and for one size, most-room-first never leaves a
    placement out that another order finds. The scheduler may still place differently; this is the
    check that room exists, not a placement."""
    if pods <= 0:
        return True
    if gpus_per_pod <= 0 or pods_per_group <= 0:
        return False
    left = sorted(free_by_node, reverse=True)
    for _ in range(-(-pods // pods_per_group)):
        if len(left) < pods_per_group or left[pods_per_group - 1] < gpus_per_pod:
            return False
        for i in range(pods_per_group):
            left[i] -= gpus_per_pod
        left.sort(reverse=True)
    return True


def choose(inventory: Mapping[str, ProductInventory], product: str | None) -> ProductInventory:
    """The product a spec runs on: the named one (case-insensitive), or the only one present.

    Raises :class:`InventoryError` with reason ``NoGPUNodes`` or ``GPUProductAmbiguous``.
    """
    present = ", ".join(sorted(inventory)) or "none"
    if product is None:
        if len(inventory) == 1:
            return next(iter(inventory.values()))
        if not inventory:
            raise InventoryError(
                Reason.NO_GPU_NODES,
                f"no schedulable node has the {PRODUCT_LABEL} label and {GPU_RESOURCE} allocatable; "
                "add GPU nodes (with GPU Feature Discovery) or name spec.gpu.product",
            )
        raise InventoryError(
            Reason.GPU_PRODUCT_AMBIGUOUS,
            f"the cluster has several GPU products ({present}); set spec.gpu.product to one of them",
        )
    for name, entry in inventory.items():
        if name.lower() == product.lower():
            return entry
    raise InventoryError(
        Reason.NO_GPU_NODES,
        f"no schedulable node has {PRODUCT_LABEL}={product}; products present: {present}",
    )
