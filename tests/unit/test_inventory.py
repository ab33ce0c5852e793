"""kvright.inventory: GPU facts from Node dicts (GFD labels, allocatable) and the product choice.

Pure; Node dicts come from tests.builders.gpu_node_obj.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvright.inventory import GPUNode, InventoryError, ProductInventory, choose, gpu_node, summarize
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
