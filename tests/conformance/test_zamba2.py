"""Zyphra's Zamba2 as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``Zamba2ForCausalLM`` (``zamba2.py``) from transformers' Zamba2Config: a Mamba-2 layer for
every ``layers_block_type`` entry, and before each ``hybrid`` entry's an application of a shared transformer
block (``num_mem_blocks`` of them, taken in turn; only those some application takes are built), each
application with its own attention cache, its own low-rank adapters and a whole ``hidden x hidden`` linear.
The block attends over the hidden state and the embeddings concatenated, every query head with its own K and
V whatever ``num_key_value_heads`` says, which the engine reads alone, to size the hybrid block. The LM head
is the embedding whatever the file says. vllm_weights_probe.py builds the class on the meta device and runs
the engine core's accounting; capacity must give the same parameters, bytes, caches and blocks (the Mamba
state in float32 where the CPU platform resets it, ``harness.cpu_mamba_ssm_cache_dtype``). Its TP rules and
per-rank bytes, measured on every rank of TP 2 and 4, are held in tests/unit/test_zamba2.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import (
    ZAMBA2_FEWER_KV_STATED,
    ZAMBA2_SMALL,
    ZAMBA2_THREE_APPLICATIONS,
    ZAMBA2_TWO_GROUPS,
    ZAMBA2_WIDE,
    edited,
    model_shapes,
    zamba2_layers,
)

from . import harness

pytestmark = pytest.mark.conformance

#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "one-block-two-applications": ZAMBA2_SMALL,
    "attention-adapters": edited(ZAMBA2_SMALL, use_shared_attention_adapter=True, adapter_rank=32),
    "two-blocks-three-applications": edited(ZAMBA2_THREE_APPLICATIONS, vocab_size=1024, adapter_rank=16),
    "fewer-kv-heads-stated-than-cached": ZAMBA2_FEWER_KV_STATED,
    "untied-file-wider-rope": ZAMBA2_WIDE,
    "two-groups-three-blocks-twelve-heads": ZAMBA2_TWO_GROUPS,
    "linear-biases-no-conv-bias": edited(
        ZAMBA2_SMALL,
        num_mem_blocks=2,
        add_bias_linear=True,
        use_conv_bias=False,
        layers_block_type=zamba2_layers(6, (1, 4)),
    ),
    "mamba-only": edited(ZAMBA2_SMALL, layers_block_type=["mamba"] * 6),
    "more-blocks-than-applications": edited(
        ZAMBA2_SMALL, num_mem_blocks=3, use_shared_attention_adapter=True
    ),
    "four-groups-state-128-conv-3": model_shapes("zamba2")["four-groups-state-128-conv-3"],
    "config-class-layers": edited(ZAMBA2_SMALL, num_hidden_layers=54, layers_block_type=None),
    "stated-state-head-width": edited(ZAMBA2_SMALL, mamba_headdim=32),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(BUILT, list(BUILT), memory=2**26, length=2048)

#: Files vLLM refuses, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "hidden_act": edited(ZAMBA2_SMALL, hidden_act="gelu_pytorch_tanh"),  # "Only GELU activation is supported"
    "attention_head_dim": edited(ZAMBA2_SMALL, attention_head_dim=48),  # heads of it must fill 2 x hidden
}


class TestZamba2(harness.LayerCachesSuite):
    """Twelve builds (shared blocks fewer or more than their applications, adapters, groups, biases, the
    config class's layers, a Mamba-only file), their caches (the state sizing the block, by the stated KV
    heads where they are fewer than the cached ones) and two refusals."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    CPU_STATE_DTYPE = True
