"""MiniMax-M3, as vLLM's own classes build it and its engine core accounts its KV cache.

vLLM 0.32 registers ``MiniMaxM3SparseForCausalLM`` and the ``MiniMaxM3SparseForConditionalGeneration``
wrapper NVIDIA's MiniMax-M3-NVFP4 names (``models/minimax_m3``). Its sparse layers fuse an indexer into the
qkv projection and cache its key beside K and V, in a cache spec of its own; its vision tower is built from
the vision config as a plain config. vllm_weights_probe.py builds each config's class on the meta device
(with the two things the CPU build lacks for it stood in: torchvision's ``InterpolationMode`` for an
annotation, and the SwiGLU-OAI activation in the list of its CPU MoE kernel) and runs the engine core's
accounting (``get_kv_cache_spec``, ``get_kv_cache_configs``); capacity must give the same parameters, bytes,
block, page and blocks. The probe's ``attention`` list names ``Attention`` modules only, and a sparse layer
is a module of its own, so the cache is held here, whole, rather than in test_parameter_counts.py (which
holds the refusals, with the other families').
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity
from tests.builders import MINIMAX_M3_TEXT, edited

from . import harness
from .harness import VllmEnv, kv_case, weights_probe

pytestmark = pytest.mark.conformance

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
REAL = json.loads((CONFIGS / "minimax-m3-nvfp4" / "config.json").read_text())

_VISION: dict[str, Any] = {
    "model_type": "clip_vision_model",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "patch_size": 14,
    "num_channels": 3,
    "layer_norm_eps": 1e-5,
    "hidden_act": "gelu",
    "img_token_compression_config": {"spatial_merge_size": 2, "temporal_patch_size": 2},
}
_VL: dict[str, Any] = {
    "architectures": ["MiniMaxM3SparseForConditionalGeneration"],
    "model_type": "minimax_m3_vl",
    "torch_dtype": "bfloat16",
    "text_config": {k: v for k, v in MINIMAX_M3_TEXT.items() if k not in ("architectures", "model_type")},
    "vision_config": _VISION,
    "projector_hidden_size": 192,
    "image_token_index": 1000,
    "video_token_index": 1001,
}


def _text(**changes: Any) -> dict[str, Any]:
    return edited(MINIMAX_M3_TEXT, **changes)


def _sparse(**changes: Any) -> dict[str, Any]:
    return MINIMAX_M3_TEXT["sparse_attention_config"] | changes


def _vl(vision: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    cfg = edited(_VL, **top)
    cfg["vision_config"] |= vision or {}
    return cfg


#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "text": _text(),
    "no-routing-bias": _text(use_routing_bias=False),
    "no-shared-expert": _text(n_shared_experts=0),
    "two-shared-experts-whatever-shared-intermediate-size": _text(
        n_shared_experts=2, shared_intermediate_size=999
    ),
    "no-sparse-layer": _text(sparse_attention_config=_sparse(sparse_attention_freq=[0, 0, 0, 0])),
    "use-sparse-attention-false-is-not-read": _text(
        sparse_attention_config=_sparse(use_sparse_attention=False)
    ),
    "a-short-freq-leaves-later-layers-dense": _text(
        sparse_attention_config=_sparse(sparse_attention_freq=[0, 1])
    ),
    "every-layer-sparse-and-routed": _text(
        moe_layer_freq=[1, 1, 1, 1], sparse_attention_config=_sparse(sparse_attention_freq=[1, 1, 1, 1])
    ),
    "default-moe-layer-freq": _text(moe_layer_freq=None),
    "index-dim-64": _text(sparse_attention_config=_sparse(sparse_index_dim=64)),
    "tie-word-embeddings-is-not-read": _text(tie_word_embeddings=True),
    "head-dim-64": _text(head_dim=64),
    "float16": _text(dtype="float16"),
    "one-kv-head": _text(num_key_value_heads=1, sparse_attention_config=_sparse(sparse_num_index_heads=1)),
    "vl": _vl(),
    "vl-top-level-projector-bias-is-not-read": _vl(multimodal_projector_bias=False),
    "vl-vision-config-biases-off": _vl({"multimodal_projector_bias": False, "patch_merge_bias": False}),
    "vl-no-projector-hidden-size": _vl(projector_hidden_size=None),
    "vl-merge-3-one-frame": _vl(
        {"img_token_compression_config": {"spatial_merge_size": 3, "temporal_patch_size": 1}}
    ),
    "nvidia-minimax-m3-unquantized": {k: v for k, v in REAL.items() if k != "quantization_config"},
}

#: (config, KV-cache bytes, max_model_len, max_num_batched_tokens) for the engine core's accounting.
ACCOUNTED: dict[str, tuple[dict[str, Any], int, int, int]] = {
    "text": (_text(), 50_000_000, 4096, 2048),
    "no-sparse-layer": (BUILT["no-sparse-layer"], 50_000_000, 4096, 2048),
    "one-kv-head": (BUILT["one-kv-head"], 50_000_000, 4096, 2048),
    "nvidia-minimax-m3-nvfp4": (REAL, 32 * 2**30, 131072, 8192),
}


@pytest.fixture(scope="module")
def vllm_answers(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    cases = [{"id": f"built:{k}", "config": v} for k, v in BUILT.items()]
    real = "nvidia-minimax-m3-nvfp4"
    cases += [kv_case(f"kv:{k}", *fields) for k, fields in ACCOUNTED.items() if k != real]
    # The real file unquantized: the CPU build has no MXFP8 linear kernel for its block
    # (test_parameter_counts.py's FIXTURE_NOT_BUILT); the cache does not depend on the weights' format.
    _, *engine = ACCOUNTED[real]
    cases.append(kv_case(f"kv:{real}", BUILT["nvidia-minimax-m3-unquantized"], *engine))
    return weights_probe(vllm_env, cases)


@pytest.mark.parametrize("case", sorted(BUILT))
def test_capacity_counts_and_weighs_what_vllms_class_builds(
    vllm_answers: dict[str, dict[str, Any]], case: str
) -> None:
    harness.weighed_as_built(vllm_answers[f"built:{case}"], BUILT[case])


def test_the_real_checkpoint_is_its_text_model_and_tower() -> None:
    """NVIDIA's file, unquantized: 426,174,572,928 parameters of text model and 865,567,232 of tower."""
    arch = capacity.architecture_from_config(BUILT["nvidia-minimax-m3-unquantized"])
    assert (arch.parameters, arch.vision_parameters) == (427_040_140_160, 865_567_232)


@pytest.mark.parametrize("case", sorted(ACCOUNTED))
def test_capacity_sizes_the_kv_cache_as_vllms_engine_core_would(
    vllm_answers: dict[str, dict[str, Any]], case: str
) -> None:
    """One group of every layer's K/V cache and every sparse layer's index-key cache (page: their sum), in
    blocks of 128 tokens; as many blocks and as much concurrency."""
    config, memory, length, mnbt = ACCOUNTED[case]
    vllm, arch, layout = harness.accounted_layout(vllm_answers[f"kv:{case}"], config, length, mnbt)
    # One group of every cache: with index keys, one spec of the caches' pages summed (vLLM's
    # UniformTypeKVCacheSpecs); without, the layers' one FullAttentionSpec, a block of each layer's page.
    (group,) = vllm["groups"]
    assert group["layers"] == arch.num_layers + arch.num_indexer_layers
    pages = 1 if arch.num_indexer_layers else group["layers"]
    assert group["page_size_bytes"] * pages == layout.bytes_per_block
    harness.assert_blocks_as_accounted(vllm, layout.num_blocks(memory), layout.blocks_per_sequence(length))
