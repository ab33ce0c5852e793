"""Inkling (Thinking Machines), as vLLM 0.32's own classes build it and its engine core accounts its cache.

vLLM serves Inkling with classes of its own (``vllm/models/inkling``), not its ``Attention`` layers: each
decoder layer has an ``InklingAttention`` (full or sliding-window, with a relative-position branch) and an
``InklingConvState``, the window of inputs of the layer's four short convolutions, paged as a sliding-window
cache of its own beside the KV cache. capacity must count what the classes hold (parameters and bytes, the
towers included), give every layer the cache spec its modules give it, and size the pool as the engine core
does: the block vLLM unifies the pages to, the groups, the blocks of the memory and the concurrency.

The CPU build cannot start the engine (Inkling's kernels are Triton's and FlashAttention 4's), so
vllm_weights_probe.py builds each class on the meta device and runs the accounting the engine core would
run, by vLLM's own code: every layer's ``get_kv_cache_spec`` and ``get_kv_cache_configs``. Held: the released
Inkling-Small file (the catalog's ``inkling-small``), the 975B model's transcribed fields, a small file of the
released shape (towers and all), one whose vision encoder has as many layers as folds, a text-only one
(``InklingForCausalLM``), one whose convolution pages outgrow the attention's (the attention blocks grow
instead) and one in transformers' format (whose layer lists vLLM does not read).
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity
from capacity.memory import short_conv_head_size
from tests.builders import INKLING, INKLING_TINY, INKLING_TRANSFORMERS, cpu_engine_layout

from .harness import VllmEnv, assert_blocks_as_accounted, kv_case, weighed_as_built, weights_probe

pytestmark = pytest.mark.conformance

_TEXT_ONLY: dict[str, Any] = INKLING_TINY["text_config"] | {
    "architectures": ["InklingForCausalLM"],
    "model_type": "inkling_model",
}
#: Every layer full, 4,096 wide with one KV head: a convolution page (K, V and 2 x 4,096 of the residual
#: streams, 16,384 wide) four tokens long outweighs a 128-token block of attention.
_WIDE_STREAMS: dict[str, Any] = _TEXT_ONLY | {
    "hidden_size": 4096,
    "num_hidden_layers": 3,
    "local_layer_ids": [],
    "dense_mlp_idx": 3,
    "dense_intermediate_size": 256,
    "vocab_size": 512,
    "unpadded_vocab_size": 512,
}

#: A vision encoder with as many layers as folds (4-pixel single frames over 3 layers): each layer takes the
#: nearest fold, the last one none (the other files' encoders have fewer layers than folds).
_DEEP_ENCODER: dict[str, Any] = INKLING_TINY | {
    "vision_config": INKLING_TINY["vision_config"] | {"patch_size": 4, "temporal_patch_size": 1}
}

#: (config, KV-cache bytes, max_model_len, max_num_batched_tokens).
CASES: dict[str, tuple[dict[str, Any], int, int, int]] = {
    "inkling-small": (capacity.catalog_entry("inkling-small")["config"], 40 * 2**30, 32768, 2048),
    "inkling-975b": (INKLING, 40 * 2**30, 32768, 2048),
    "tiny": (INKLING_TINY, 64 * 2**20, 4096, 512),
    "tiny-short": (INKLING_TINY, 8 * 2**20, 512, 256),
    "deep-encoder": (_DEEP_ENCODER, 64 * 2**20, 4096, 512),
    "text-only": (_TEXT_ONLY, 64 * 2**20, 4096, 512),
    "wide-streams": (_WIDE_STREAMS, 64 * 2**20, 2048, 256),
    "transformers-format": (INKLING_TRANSFORMERS, 32 * 2**20, 4096, 256),
}

_SPECS = {"full": "FullAttentionSpec", "sliding": "SlidingWindowSpec"}


@pytest.fixture(scope="module")
def vllm_builds(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    return weights_probe(vllm_env, [kv_case(case, *fields) for case, fields in CASES.items()])


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_counts_and_weighs_what_vllms_class_builds(
    vllm_builds: dict[str, dict[str, Any]], case: str
) -> None:
    arch = weighed_as_built(vllm_builds[case], CASES[case][0])
    assert capacity.weight_bytes(arch) == vllm_builds[case]["bytes"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_layer_has_the_cache_specs_its_modules_give_it(
    vllm_builds: dict[str, dict[str, Any]], case: str
) -> None:
    """Each layer's attention caches its KV heads (a sliding layer's own heads and width, its window) and its
    convolution state caches one entry per KV head, the kernel's tokens long, in blocks as long."""
    config, _, length, mnbt = CASES[case]
    arch = capacity.architecture_from_config(config)
    layout = cpu_engine_layout(arch, max_model_len=length, max_num_batched_tokens=mnbt)
    specs = vllm_builds[case]["kv_cache"]["layers"]
    attention = [
        (s["spec"], s["kv_heads"], s["head_size"], s["sliding_window"], s["block_size"])
        for s in specs
        if s["module"] == "InklingAttention"
    ]
    convs = [
        (s["spec"], s["kv_heads"], s["head_size"], s["head_size_v"], s["sliding_window"], s["block_size"])
        for s in specs
        if s["module"] == "InklingConvState"
    ]
    assert len(attention) + len(convs) == len(specs), specs
    layers = [layer for layer in arch.layers if layer.mixer in ("full", "sliding")]
    window = {"full": None, "sliding": arch.sliding_window}
    assert attention == [
        (_SPECS[layer.mixer], arch.kv_heads_of(layer), arch.head_dim_of(layer), window[layer.mixer], 128)
        for layer in layers
    ]
    kernel = arch.short_conv_kernel
    assert convs == [
        (
            "SlidingWindowSpec",
            arch.kv_heads_of(layer),
            short_conv_head_size(arch, arch.kv_heads_of(layer), arch.head_dim_of(layer)),
            0,
            kernel,
            kernel,
        )
        for layer in layers
    ]
    assert layout.block_size == vllm_builds[case]["kv_cache"]["block_size"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_sizes_the_cache_as_vllms_engine_core_would(
    vllm_builds: dict[str, dict[str, Any]], case: str
) -> None:
    """The groups (kind, tokens a block, the one unified page), the blocks the memory makes and the
    concurrency at max_model_len are the engine core's."""
    config, memory, length, mnbt = CASES[case]
    vllm = vllm_builds[case]["kv_cache"]
    arch = capacity.architecture_from_config(config)
    layout = cpu_engine_layout(arch, max_model_len=length, max_num_batched_tokens=mnbt)
    theirs = sorted((g["spec"], g["block_size"], g["page_size_bytes"]) for g in vllm["groups"])
    ours = sorted(
        (_SPECS[g.kind], g.tokens_per_block(layout.block_size), g.page_bytes)
        for g in layout.groups
        for _ in range(g.count)
    )
    assert theirs == ours
    assert_blocks_as_accounted(vllm, layout.num_blocks(memory), layout.blocks_per_sequence(length))


def test_the_released_shapes_are_what_the_cases_say(vllm_builds: dict[str, dict[str, Any]]) -> None:
    """What the cases above reach: the 975B model's sliding layers cache twice its full layers' KV heads (16
    against 8); the wide-streams file's convolution page outgrows a 128-token block of attention, so vLLM
    grows the attention blocks instead (to 256 tokens); the transformers-format file attends in full on
    every layer (vLLM reads no layer_types) and has no tower, as its warnings say."""
    big = capacity.architecture_from_config(INKLING)
    assert big.parameters == vllm_builds["inkling-975b"]["parameters"] == 947_119_537_218
    assert {big.kv_heads_of(layer) for layer in big.layers} == {8, 16}
    wide = vllm_builds["wide-streams"]["kv_cache"]
    assert {g["block_size"] for g in wide["groups"] if g["spec"] == "FullAttentionSpec"} == {256}
    flat = vllm_builds["transformers-format"]["kv_cache"]["layers"]
    assert {s["spec"] for s in flat if s["module"] == "InklingAttention"} == {"FullAttentionSpec"}
    arch = capacity.architecture_from_config(INKLING_TRANSFORMERS)
    assert arch.vision_parameters == 0 and len(arch.warnings) == 4, arch.warnings
