"""kvright.inventory: GPU facts from Node dicts (GFD labels, allocatable) and the product choice.

Pure; Node dicts come from tests.builders.gpu_node_obj.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvright.inventory import (
    GPUNode,
    GPUPod,
    InventoryError,
    ProductInventory,
    choose,
    gpu_node,
    gpu_pod,
    pods_fit,
    summarize,
)
from tests.builders import gpu_node_obj

H100 = "NVIDIA-H100-80GB-HBM3"
H200 = "NVIDIA-H200"


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (gpu_node_obj("a", H100, 8), GPUNode(name="a", product=H100, allocatable_gpus=8, memory_mib=81559)),
        (
            gpu_node_obj("b", H200, 4, memory_mib=None),
            GPUNode(name="b", product=H200, allocatable_gpus=4, memory_mib=None),
        ),
        (gpu_node_obj("c", H100, 0), None),
        (gpu_node_obj("d", H100, 8, unschedulable=True), None),
        ({"metadata": {"name": "cpu", "labels": {}}, "status": {"allocatable": {"cpu": "8"}}}, None),
        (
            {
                "metadata": {"name": "garbage", "labels": {"nvidia.com/gpu.product": H100}},
                "status": {"allocatable": {"nvidia.com/gpu": "many"}},
            },
            None,
        ),
        (
            {
                "metadata": {
                    "name": "label-only",
                    "labels": {"nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": "2"},
                }
            },
            GPUNode(name="label-only", product=H100, allocatable_gpus=2, memory_mib=None),
        ),
    ],
    ids=[
        "h100x8",
        "h200x4-no-memory-label",
        "zero-allocatable",
        "cordoned",
        "cpu-node",
        "bad-quantity",
        "count-label-fallback",
    ],
)
def test_gpu_node(node: dict[str, Any], expected: GPUNode | None) -> None:
    assert gpu_node(node) == expected


NODES = [
    GPUNode(name="h1", product=H100, allocatable_gpus=8, memory_mib=None),
    GPUNode(name="h2", product=H100, allocatable_gpus=4, memory_mib=None),
    GPUNode(name="x1", product=H200, allocatable_gpus=8, memory_mib=None),
]


def test_summarize() -> None:
    assert summarize(NODES) == {
        H100: ProductInventory(product=H100, nodes=2, max_gpus_per_node=8, total_gpus=12),
        H200: ProductInventory(product=H200, nodes=1, max_gpus_per_node=8, total_gpus=8),
    }


@pytest.mark.parametrize(
    ("nodes", "product", "expected"),
    [
        (NODES, H200, H200),
        (NODES, "nvidia-h100-80gb-hbm3", H100),
        (NODES[:2], None, H100),
    ],
    ids=["named", "named-case-insensitive", "only-one-present"],
)
def test_choose(nodes: list[GPUNode], product: str | None, expected: str) -> None:
    assert choose(summarize(nodes), product).product == expected


@pytest.mark.parametrize(
    ("nodes", "product", "reason", "text"),
    [
        (NODES, None, "GPUProductAmbiguous", "set spec.gpu.product to one of them"),
        ([], None, "NoGPUNodes", "add GPU nodes"),
        (NODES, "NVIDIA-A100-SXM4-80GB", "NoGPUNodes", f"products present: {H100}, {H200}"),
    ],
    ids=["two-products-unnamed", "no-gpu-nodes", "named-but-absent"],
)
def test_choose_refuses_with_the_fix(
    nodes: list[GPUNode], product: str | None, reason: str, text: str
) -> None:
    with pytest.raises(InventoryError) as info:
        choose(summarize(nodes), product)
    assert info.value.reason == reason
    assert text in str(info.value)


OWNER = "kvright.dev/llmdeployment"


def pod_obj(
    node: str | None,
    *gpus: int,
    init: tuple[int, ...] = (),
    phase: str = "Running",
    namespace: str = "ml",
    owner: str | None = None,
    requests_only: bool = False,
) -> dict[str, Any]:
    key = "requests" if requests_only else "limits"

    def container(n: int) -> dict[str, Any]:
        return {"name": f"c{n}", "resources": {key: {"nvidia.com/gpu": str(n)}} if n else {}}

    return {
        "metadata": {"name": "p", "namespace": namespace, "labels": {OWNER: owner} if owner else {}},
        "spec": {
            **({"nodeName": node} if node else {}),
            "containers": [container(n) for n in gpus],
            "initContainers": [container(n) for n in init],
        },
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (pod_obj("h1", 4, owner="chat"), GPUPod(node="h1", namespace="ml", owner="chat", gpus=4)),
        (pod_obj("h1", 2, 1), GPUPod(node="h1", namespace="ml", owner=None, gpus=3)),
        # The scheduler's effective request: the larger of the containers' sum and the largest init.
        (pod_obj("h1", 1, init=(4, 2)), GPUPod(node="h1", namespace="ml", owner=None, gpus=4)),
        (pod_obj("h1", 2, requests_only=True), GPUPod(node="h1", namespace="ml", owner=None, gpus=2)),
        (pod_obj(None, 8), None),
        (pod_obj("h1", 8, phase="Succeeded"), None),
        (pod_obj("h1", 8, phase="Failed"), None),
        (pod_obj("h1", 0), None),
    ],
    ids=["owned", "two-containers", "init-larger", "requests", "pending", "succeeded", "failed", "no-gpu"],
)
def test_gpu_pod(pod: dict[str, Any], expected: GPUPod | None) -> None:
    assert gpu_pod(pod, owner_label=OWNER) == expected


def test_free_gpus_leave_out_other_pods_but_not_the_deployments_own() -> None:
    pods = [
        GPUPod(node="h1", namespace="ml", owner="chat", gpus=4),
        GPUPod(node="h1", namespace="ml", owner=None, gpus=2),
        GPUPod(node="h2", namespace="other", owner="chat", gpus=4),  # same name, another namespace
        GPUPod(node="x1", namespace="ml", owner="batch", gpus=8),
        GPUPod(node="gone", namespace="ml", owner=None, gpus=8),  # a node that is not a GPU node here
    ]
    inv = summarize(NODES, pods, exclude=("ml", "chat"))
    assert inv[H100].free_by_node == (6, 0) and inv[H100].free_gpus == 6
    assert inv[H200].free_by_node == (0,) and inv[H200].free_gpus == 0
    assert inv[H100].room() == "6 of 12 GPUs free"
    # Without a listing, room is unknown rather than zero.
    assert summarize(NODES)[H100].free_gpus is None
    assert summarize(NODES)[H100].room() == "12 GPUs"
    # Overbooked nodes (a listing racing a node shrink) count as full, never negative.
    assert summarize(NODES, [GPUPod(node="h2", namespace="a", owner=None, gpus=9)])[H100].free_by_node == (
        8,
        0,
    )


@pytest.mark.parametrize(
    ("free", "pods", "size", "group", "fits"),
    [
        ((8, 8), 2, 8, 1, True),
        ((8, 8), 3, 8, 1, False),
        ((4, 4), 1, 8, 1, False),  # 8 free GPUs, but no node holds an 8-GPU pod
        ((8, 4, 4), 4, 4, 1, True),  # two on the 8-GPU node
        ((8, 8), 2, 8, 2, True),  # one replica over two nodes
        ((16,), 2, 8, 2, False),  # a two-node replica needs two nodes, not one big one
        ((8, 8, 8, 8), 4, 8, 2, True),
        ((8, 8, 8, 4), 4, 8, 2, False),
        ((), 0, 8, 1, True),
    ],
)
def test_pods_fit(free: tuple[int, ...], pods: int, size: int, group: int, fits: bool) -> None:
    assert pods_fit(free, pods=pods, gpus_per_pod=size, pods_per_group=group) is fits
