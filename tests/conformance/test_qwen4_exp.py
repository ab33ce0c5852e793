"""Qwen3.8-Flash-Next as vLLM's own classes build it and its engine core accounts its cache.

vLLM 0.32 builds ``Qwen4ExpForCausalLM`` (``models/qwen4_exp``) as Qwen3-Next's hybrid of Gated DeltaNet and
gated full attention with three parts of its own: hyper-connections in place of every norm, QSA on the
full layers (an index head fused into qkv_proj; a bfloat16 key per ``indexer_compress_ratio`` tokens and a
ring of raw keys per request), and PLE on some linear layers (a dilated conv state, and an n-gram table of
its own primes that vLLM keeps in pinned host memory). The engine core sizes the block by the larger of the
GDN and PLE states the config describes, pads both to it and packs QSA's caches block-outermost.
vllm_weights_probe.py builds each config's class on the meta device (the CPU build's missing FlashAttention,
pinned memory and UVA stood in: ``_qwen4_exp_on_cpu``); capacity must give the same bytes, host bytes and
blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

import capacity
from tests.builders import QWEN3_8_FLASH_NEXT_TEXT, QWEN4_EXP_SMALL, cpu_engine_layout, edited

from . import harness

pytestmark = pytest.mark.conformance

GDN, FULL = "linear_attention", "full_attention"
_NO_QSA = {
    name: None
    for name in (
        "indexer_n_heads",
        "indexer_kv_heads",
        "indexer_head_dim",
        "indexer_budget",
        "indexer_compress_ratio",
    )
}

BUILT: dict[str, dict[str, Any]] = {
    "three-gdn-one-qsa-ple-on-2": QWEN4_EXP_SMALL,
    "six-layers-two-ple-tied-qsa-8": edited(
        QWEN4_EXP_SMALL,
        num_hidden_layers=6,
        num_key_value_heads=1,
        tie_word_embeddings=True,
        linear_conv_kernel_dim=3,
        shared_expert_intermediate_size=384,
        num_experts=6,
        layer_types=[GDN, FULL, GDN, GDN, "indexed_attention", GDN],
        hc_count=4,
        hc_lowrank=48,
        ple_layer_ids=[4, 1],
        ple_embed_dim=576,
        ple_conv_kernel_size=3,
        ngram_size=4,
        heads_per_ngram=3,
        ngram_vocab_size_base=700,
        make_ngram_vocab_size_divisible_by=64,
        indexer_n_heads=8,
        indexer_head_dim=128,
        indexer_budget=128,
        indexer_compress_ratio=8,
    ),
    "no-qsa-no-ple-class-layer-types": edited(
        QWEN4_EXP_SMALL,
        num_hidden_layers=5,
        shared_expert_intermediate_size=128,
        hc_count=3,
        hc_lowrank=16,
        layer_types=None,
        ple_layer_ids=None,
        **_NO_QSA,
    ),
    "all-gdn-ple-on-1-and-3": edited(QWEN4_EXP_SMALL, layer_types=[GDN] * 4, ple_layer_ids=[1, 3], **_NO_QSA),
    "bf16-recurrent-state": edited(QWEN4_EXP_SMALL, mamba_ssm_dtype="bfloat16"),
    "qwen3.8-flash-next-transcribed": QWEN3_8_FLASH_NEXT_TEXT,
}

ACCOUNTED: dict[str, tuple[dict[str, Any], int, int, int]] = {
    "qwen3.8-flash-next-transcribed": (QWEN3_8_FLASH_NEXT_TEXT, 8 * 2**30, 32768, 8192),
} | harness.accounted_cases(BUILT, sorted(set(BUILT) - {"qwen3.8-flash-next-transcribed"}))

#: Files vLLM refuses, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "output_gate_type": edited(QWEN4_EXP_SMALL, output_gate_type=None),
    "hc_count": edited(QWEN4_EXP_SMALL, hc_count=1),
    "indexer_compress_ratio": edited(QWEN4_EXP_SMALL, indexer_compress_ratio=3, indexer_budget=63),
    "ple_layer_ids": edited(QWEN4_EXP_SMALL, ple_layer_ids=[4]),
    "indexer_kv_heads": edited(QWEN4_EXP_SMALL, indexer_kv_heads=2),
}


class TestQwen4Exp(harness.ModelSuite):
    """Every tensor to the byte, the n-gram tables among them (what vLLM keeps in pinned host memory and
    capacity keeps off the GPUs); the block the larger state sets, the packed (QSA) or page-unified groups,
    the pool's blocks and a request's (its context in the attention group, one block in each state and
    ring group); five refusals."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED

    def check_built(self, answer: Mapping[str, Any], config: dict[str, Any]) -> None:
        arch = harness.weighed_as_built(answer, config)
        assert round(arch.weight_groups.host_tables) == answer["host_bytes"]

    def check_accounted(self, answers: Mapping[str, Mapping[str, Any]], case: str) -> None:
        config, memory, length, mnbt = ACCOUNTED[case]
        answer = answers[f"kv:{case}"]
        assert answer["error"] is None, answer
        arch = capacity.architecture_from_config(config)
        layout = cpu_engine_layout(
            arch,
            max_model_len=length,
            max_num_batched_tokens=mnbt,
            mamba_ssm_cache_dtype=None if config.get("mamba_ssm_dtype") else "float32",  # the CPU build's
        )
        assert answer["kv_cache"]["block_size"] == layout.block_size
        harness.assert_blocks_as_accounted(
            answer["kv_cache"], layout.num_blocks(memory), layout.blocks_per_sequence(length)
        )
