"""DeepSeek-V3.2's sparse attention (DSA) and IndexCache, as vLLM's own classes build them and its engine core
accounts their cache.

vLLM 0.32 builds GLM-5's and DeepSeek-V3.2's sparse MLA (``models/deepseek_v32``; ``deepseek_v2.py`` reads
the same fields) with an indexer beside each layer's latent: its weights (``wq_b``, ``wk``, the weights
projection, a float32 ``k_norm``) and its own cache of one fp8 key per token. Under IndexCache (GLM-5.2's
``index_topk_freq`` and ``index_skip_topk_offset``, or an ``index_topk_pattern``) a layer may build none and
reuse the top-k of the indexer before it: it holds neither. vllm_weights_probe.py builds each config's class
on the meta device (with the CPU build's dense MLA backend stood in for the sparse one it refuses, which no
tensor and no cache spec depends on) and runs the engine core's accounting; capacity must give the same
parameters, bytes, cache layers, page and blocks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.builders import GLM5_SMALL, edited

from . import harness
from .harness import VllmEnv, kv_case, weights_probe

pytestmark = pytest.mark.conformance

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def _unquantized(slug: str) -> dict[str, Any]:
    """A fixture's config.json without its quantization (the CPU build has no NVFP4 MoE kernel; neither the
    indexers vLLM builds nor the cache depends on the weights' format)."""
    return edited(json.loads((CONFIGS / slug / "config.json").read_text()), quantization_config=None)


#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "an-indexer-on-every-layer": GLM5_SMALL,
    "index-topk-freq-4-from-offset-3": edited(GLM5_SMALL, index_topk_freq=4, index_skip_topk_offset=3),
    "index-topk-freq-2-from-the-default-offset": edited(GLM5_SMALL, index_topk_freq=2),
    "a-pattern-shorter-than-the-layers": edited(GLM5_SMALL, index_topk_pattern="FFSSF"),
    "a-pattern-as-a-list-outranks-the-freq": edited(
        GLM5_SMALL, index_topk_pattern=["F", "S", "S", "S", "F", "S", "F", "S"], index_topk_freq=1
    ),
    "deepseek-v3.2s-class": edited(
        GLM5_SMALL,
        architectures=["DeepseekV32ForCausalLM"],
        model_type="deepseek_v32",
        index_topk_freq=3,
    ),
    "glm-5": _unquantized("glm-5"),
    "glm-5.2": _unquantized("glm-5.2-nvfp4"),
}

#: (config, KV-cache bytes, max_model_len, max_num_batched_tokens) for the engine core's accounting.
ACCOUNTED: dict[str, tuple[dict[str, Any], int, int, int]] = {
    "an-indexer-on-every-layer": (BUILT["an-indexer-on-every-layer"], 64_000_000, 4096, 2048),
    "index-topk-freq-4-from-offset-3": (BUILT["index-topk-freq-4-from-offset-3"], 64_000_000, 4096, 2048),
    "a-pattern-shorter-than-the-layers": (BUILT["a-pattern-shorter-than-the-layers"], 64_000_000, 4096, 2048),
    # 192-wide keys: one fp32 scale, for the one whole block of 128 (vLLM floors)
    "an-indexer-key-of-a-block-and-a-half": (edited(GLM5_SMALL, index_head_dim=192), 64_000_000, 4096, 2048),
    "glm-5.2": (BUILT["glm-5.2"], 32 * 2**30, 131072, 8192),
}


@pytest.fixture(scope="module")
def vllm_answers(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    cases = [{"id": f"built:{k}", "config": v, "sparse_attention_stand_in": True} for k, v in BUILT.items()]
    stand_in = {"sparse_attention_stand_in": True}
    cases += [kv_case(f"kv:{k}", *fields) | stand_in for k, fields in ACCOUNTED.items()]
    cases.append({"id": "refused", "config": GLM5_SMALL})
    return weights_probe(vllm_env, cases)


def test_the_cpu_build_refuses_sparse_attention_without_the_stand_in(
    vllm_answers: dict[str, dict[str, Any]],
) -> None:
    """What the stand-in is for: without it the CPU build names the refusal (and builds nothing)."""
    assert "Sparse Attention is not supported on CPU" in (vllm_answers["refused"]["error"] or "")


@pytest.mark.parametrize("case", sorted(BUILT))
def test_capacity_counts_and_weighs_what_vllms_class_builds(
    vllm_answers: dict[str, dict[str, Any]], case: str
) -> None:
    """Every indexer vLLM builds is weighed (its float32 k_norm among them), and none it leaves out."""
    harness.weighed_with_indexers(vllm_answers[f"built:{case}"], BUILT[case])


@pytest.mark.parametrize("case", sorted(ACCOUNTED))
def test_capacity_sizes_the_kv_cache_as_vllms_engine_core_would(
    vllm_answers: dict[str, dict[str, Any]], case: str
) -> None:
    """One group of every layer's latent cache and every indexer's key cache (vLLM's
    UniformTypeKVCacheSpecs: a page that is their sum), in blocks of 128 tokens; as many blocks and as much
    concurrency."""
    config, memory, length, mnbt = ACCOUNTED[case]
    vllm, arch, layout = harness.accounted_layout(vllm_answers[f"kv:{case}"], config, length, mnbt)
    (group,) = vllm["groups"]
    assert group["layers"] == arch.num_layers + arch.num_mla_indexers
    assert group["page_size_bytes"] == layout.bytes_per_block
    harness.assert_blocks_as_accounted(vllm, layout.num_blocks(memory), layout.blocks_per_sequence(length))
