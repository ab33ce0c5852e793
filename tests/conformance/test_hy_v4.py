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

from collections.abc import Mapping
from typing import Any

import pytest

from tests.builders import HY_V4_SMALL, edited

from . import harness

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


class TestHyV4(harness.ModelSuite):
    """Every indexer vLLM builds is weighed (its float32 k_norm among them), and none it leaves out (the
    dense layers and the "shared" ones hold none); every layer's latent and every indexer's key, in blocks
    of 128 tokens; three refusals, each naming the field vLLM's refusal names."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STAND_INS = harness.SPARSE_STAND_IN

    def check_accounted(self, answers: Mapping[str, Mapping[str, Any]], case: str) -> None:
        vllm, arch = harness.assert_accounted(answers, ACCOUNTED, case)
        layers = sum(group["layers"] for group in vllm["groups"])
        assert layers == arch.num_layers + arch.num_mla_indexers

    def test_vllms_refusal_names_the_field(self, vllm_answers: dict[str, dict[str, Any]]) -> None:
        for field in REFUSED:
            assert field in (vllm_answers[field]["error"] or ""), field
