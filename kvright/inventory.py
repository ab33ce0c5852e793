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
    "InventoryError",
    "ProductInventory",
    "choose",
    "gpu_node",
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


@dataclass(frozen=True, kw_only=True)
class ProductInventory:
    """The schedulable nodes of one GPU product, summed."""

    product: str
    nodes: int
    max_gpus_per_node: int
    """The most GPUs one pod can get on one node: the upper bound of tensor parallelism."""
    total_gpus: int


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


def summarize(nodes: Iterable[GPUNode]) -> dict[str, ProductInventory]:
    """Per product (keyed by the label as written), the node count, largest node and total GPUs."""
    grouped: dict[str, list[GPUNode]] = {}
    for node in nodes:
        grouped.setdefault(node.product, []).append(node)
    return {
        product: ProductInventory(
            product=product,
            nodes=len(members),
            max_gpus_per_node=max(n.allocatable_gpus for n in members),
            total_gpus=sum(n.allocatable_gpus for n in members),
        )
        for product, members in sorted(grouped.items())
    }


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
