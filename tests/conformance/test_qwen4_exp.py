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

from tests.builders import QWEN3_8_FLASH_NEXT_TEXT, QWEN4_EXP_SMALL, edited, model_shapes

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

#: Configs vLLM's class builds, weighed to the byte (the longer ones in tests/data/shapes/qwen4_exp.json).
_QWEN4_EXP = model_shapes("qwen4_exp")
BUILT: dict[str, dict[str, Any]] = {
    "three-gdn-one-qsa-ple-on-2": QWEN4_EXP_SMALL,
    "six-layers-two-ple-tied-qsa-8": _QWEN4_EXP["six-layers-two-ple-tied-qsa-8"],
    "no-qsa-no-ple-class-layer-types": _QWEN4_EXP["no-qsa-no-ple-class-layer-types"],
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
        config = ACCOUNTED[case][0]
        state_dtype = None if config.get("mamba_ssm_dtype") else "float32"  # the CPU build's, unless stated
        harness.assert_accounted(answers, ACCOUNTED, case, state_dtype)
