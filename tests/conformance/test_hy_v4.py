"""Tencent's HY V4 as vLLM's own classes build it and its engine core accounts its cache.

vLLM 0.32 builds ``HYV4ForCausalLM`` (``models/hy_v4``) with MLA on every layer: DSA (a sparse layer, by its
``layer_types`` entry) where the layer's entry is a sparse one, whole-context MLA elsewhere, and an indexer
(weights and a cache of one fp8 key per token) only on a sparse layer whose ``indexer_types`` entry is
"full"; a gated output (elementwise or headwise), a learnable sink per head, iHC's fp32 mixes, an fp32
router and expert bias. vllm_weights_probe.py builds each config's class on the meta device (the CPU build's
dense MLA backend stood in for the sparse one it refuses, which no tensor and no cache spec depends on) and
runs the engine core's accounting; capacity must give the same parameters, bytes, indexers and blocks.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import HY_V4_SMALL, edited

from . import harness
from .harness import VllmEnv, weights_probe

pytestmark = pytest.mark.conformance

SPARSE = ["sparse", "sparse_attention", "deepseek_sparse_attention", "indexed_attention"]

#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "the-class-layout": HY_V4_SMALL,
    "headwise-gate-no-sink-two-shared-tied": edited(
        HY_V4_SMALL,
        gating_type="headwise",
        learnable_sink=False,
        n_shared_experts=2,
        tie_word_embeddings=True,
        layer_types=["full_attention", *SPARSE, "sparse"],
    ),
    "no-layer-types-no-sparse-layer": edited(HY_V4_SMALL, layer_types=None),
    "dense-between-sparse-own-schedules": edited(
        HY_V4_SMALL,
        layer_types=["indexed_attention", "sparse", "full_attention", "sparse", "full_attention", "sparse"],
        indexer_types=["full", "shared", "full", "shared", "full", "full"],
        mlp_layer_types=["dense", "sparse", "dense", "sparse", "sparse", "dense"],
    ),
    "no-ihc-no-gate-no-shared-expert": edited(
        HY_V4_SMALL, enable_ihc=False, gated_mla=False, n_shared_experts=0, first_k_dense_replace=3
    ),
}

#: (config, KV-cache bytes, max_model_len, max_num_batched_tokens) for the engine core's accounting.
ACCOUNTED: dict[str, tuple[dict[str, Any], int, int, int]] = {
    case: (BUILT[case], 64_000_000, 4096, 2048)
    for case in ("the-class-layout", "no-layer-types-no-sparse-layer", "dense-between-sparse-own-schedules")
}


#: Files vLLM refuses at load (HYV4Config is a strict dataclass; transformers checks the layer lists), by the
#: field capacity names: a null query rank, an MLP kind other than dense or sparse, an unknown layer type.
REFUSED: dict[str, dict[str, Any]] = {
    "q_lora_rank": {**HY_V4_SMALL, "q_lora_rank": None},
    "mlp_layer_types": edited(
        HY_V4_SMALL, mlp_layer_types=["dense", "moe", "sparse", "sparse", "sparse", "sparse"]
    ),
    "layer_types": edited(
        HY_V4_SMALL, layer_types=["full_attention", "sparse", "global", "sparse", "sparse", "sparse"]
    ),
}


@pytest.fixture(scope="module")
def vllm_answers(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    stand_in = {"sparse_attention_stand_in": True}
    cases = harness.probe_cases(stand_in, built=BUILT, accounted=ACCOUNTED, refused=REFUSED)
    return weights_probe(vllm_env, cases)


@pytest.mark.parametrize("case", sorted(BUILT))
def test_capacity_counts_and_weighs_what_vllms_class_builds(
    vllm_answers: dict[str, dict[str, Any]], case: str
) -> None:
    """Every indexer vLLM builds is weighed (its float32 k_norm among them), and none it leaves out: the
    dense layers and the "shared" ones hold none."""
    harness.weighed_with_indexers(vllm_answers[f"built:{case}"], BUILT[case])


@pytest.mark.parametrize("case", sorted(ACCOUNTED))
def test_capacity_sizes_the_kv_cache_as_vllms_engine_core_would(
    vllm_answers: dict[str, dict[str, Any]], case: str
) -> None:
    """Every layer's latent and every indexer's key, in blocks of 128 tokens: as many blocks and as much
    concurrency as the engine core makes of the memory."""
    vllm, arch = harness.assert_accounted(vllm_answers, ACCOUNTED, case)
    layers = sum(group["layers"] for group in vllm["groups"])
    assert layers == arch.num_layers + arch.num_mla_indexers


@pytest.mark.parametrize("field", sorted(REFUSED))
def test_files_vllm_refuses_at_load_are_refused_by_the_field_it_names(
    vllm_answers: dict[str, dict[str, Any]], field: str
) -> None:
    assert field in (vllm_answers[field]["error"] or "")
    harness.assert_refused_alike(vllm_answers[field], REFUSED[field], field)
