"""Huawei's openPangu Pro MoE V2 (vLLM's ``openpangu.py``, ``PanguProMoEV2ForCausalLM``) as capacity reads,
weighs and caches it.

vLLM builds it with the code it builds Ultra MoE with (``OpenPanguMoEModel``); each layer's attention and MLP
come from the file's fields, not the class: sink attention where ``param_sink_number`` is above 0 (keys
``qk_nope_dim + qk_rope_dim`` wide, values ``v_channels`` wide, a ``k_layernorm``, learned sink keys and with
``param_sink_with_value`` values), plain GQA where it is 0; routed layers by Ultra MoE's rules.
tests/conformance/test_openpangu.py holds small configs to vLLM's class and engine core at one rank on every
run. The per-rank bytes at TP 1 and 2, the blocks and the refusals below were measured with vLLM 0.32's class
built on both ranks of a TP group (gloo on loopback) before this was written; both ranks held the same bytes.
No Pro MoE V2 config.json is public, so every case is small (tests/data/shapes/openpangu.json's pro-small).
kvright refused the class before, as an unknown one with mixture-of-experts fields.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from tests.builders import PANGU_PRO_SMALL, cpu_engine_accounting, edited, weight_bytes_by_tp


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (PANGU_PRO_SMALL, {1: 505_168, 2: 254_544}),
        (edited(PANGU_PRO_SMALL, param_sink_with_value=False), {1: 502_096, 2: 253_008}),
        (edited(PANGU_PRO_SMALL, param_sink_number=0), {1: 478_912, 2: 241_344}),
        (edited(PANGU_PRO_SMALL, param_sink_number=32), {1: 512_848, 2: 258_384}),
        (edited(PANGU_PRO_SMALL, sandwich_norm=False), {1: 504_400, 2: 253_776}),
        (edited(PANGU_PRO_SMALL, router_enable_expert_bias=False), {1: 505_104, 2: 254_480}),
        (edited(PANGU_PRO_SMALL, v_channels=32), {1: 545_104, 2: 274_512}),
        (edited(PANGU_PRO_SMALL, v_channels=24, qk_nope_dim=24), {1: 545_152, 2: 274_560}),
        (edited(PANGU_PRO_SMALL, num_key_value_heads=4), {1: 543_568, 2: 273_744}),
        (edited(PANGU_PRO_SMALL, bias=True), {1: 506_608, 2: 255_456}),
        (edited(PANGU_PRO_SMALL, interleaved_sliding_window=[256, None, None]), {1: 505_168, 2: 254_544}),
        (edited(PANGU_PRO_SMALL, tie_word_embeddings=True), {1: 439_632, 2: 221_776}),
    ],
    ids=[
        "sink-keys-and-values",
        "sink-keys-alone",
        "no-sinks-plain-gqa",
        "32-sinks",
        "no-sandwich",
        "no-expert-bias",
        "wider-values",
        "wider-keys",
        "four-kv-heads",
        "bias",
        "windows-ignored",
        "tied",
    ],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """The sink keys (and values) split with the KV heads in the model dtype, a ``k_layernorm`` a layer,
    the router in the model dtype and its expert bias in float32; without sinks, Embedded's GQA with
    ``hidden / heads`` heads whatever ``qk_nope_dim`` and ``v_channels`` say."""
    assert weight_bytes_by_tp(config, measured) == measured


@pytest.mark.parametrize(
    ("changes", "measured"),
    [
        ({}, (1092, 2184)),
        ({"param_sink_with_value": False}, (1092, 2184)),
        ({"v_channels": 32}, (780, 1560)),
        ({"num_key_value_heads": 4}, (546, 1092)),
        ({"interleaved_sliding_window": [256, None, None]}, (1092, 2184)),
    ],
    ids=["sink", "keys-alone", "wider-values", "four-kv-heads", "windows-ignored"],
)
def test_the_engine_core_blocks_a_sink_cache_as_measured(
    changes: dict[str, Any], measured: tuple[int, int]
) -> None:
    """64 MiB at 2,048 tokens, TP 1 and 2: a page of ``kv_heads / tp x (keys + values)`` (FlashAttention
    DiffKV), one full-attention group whatever the windows, the sinks not in the blocks. Measured with 16
    sinks, whose KV accounting vLLM passes (its KV managers then assert, below); the sink count changes no
    page (measured: 32 sinks give 16's blocks), so asked here with 128, which the engine starts with."""
    config = edited(PANGU_PRO_SMALL, param_sink_number=128, **changes)
    blocks = tuple(cpu_engine_accounting(config, 2**26, 2048, tensor_parallel_size=tp)[:2] for tp in (1, 2))
    assert blocks == ((128, measured[0]), (128, measured[1]))


def test_without_sinks_the_cache_is_plain_gqa() -> None:
    """param_sink_number 0: a FullAttentionSpec of 16-wide heads (measured 1365 and 2730 blocks)."""
    config = edited(PANGU_PRO_SMALL, param_sink_number=0)
    blocks = [cpu_engine_accounting(config, 2**26, 2048, tensor_parallel_size=tp)[:2] for tp in (1, 2)]
    assert blocks == [(128, 1365), (128, 2730)]


@pytest.mark.parametrize(("sinks", "block", "refused"), [(16, 128, True), (128, 128, False), (16, 16, False)])
def test_a_block_that_does_not_divide_the_sinks_is_refused(sinks: int, block: int, refused: bool) -> None:
    """vLLM's SinkFullAttentionManager asserts ``sink_len % block_size == 0`` when the engine builds its KV
    managers: 16 sinks start on a GPU's 16-token blocks, not on the CPU engine's 128."""
    arch = c.architecture_from_config(edited(PANGU_PRO_SMALL, param_sink_number=sinks))

    def layout() -> c.KVCacheLayout:
        return c.kv_cache_layout(arch, block_size=block, kernel_block_alignment=block)

    if refused:
        with pytest.raises(c.CapacityError, match=f"multiple of {block}"):
            layout()
    else:
        assert layout().block_size == block


def test_sink_attention_never_replicates_a_kv_head() -> None:
    """One KV head at TP 2: vLLM refuses ("KV heads replication is not support yet"); plain GQA (no sinks)
    gives each rank a copy of it."""
    one = edited(PANGU_PRO_SMALL, num_key_value_heads=1)
    error = c.tensor_parallel_error(c.architecture_from_config(one), 2)
    assert error is not None and "Number of KV heads 1 is less than TP size 2" in error
    assert c.tensor_parallel_error(c.architecture_from_config(one), 1) is None
    assert c.tensor_parallel_error(c.architecture_from_config(edited(one, param_sink_number=0)), 2) is None


def test_without_a_routed_layer_it_is_refused() -> None:
    """vLLM's class: "No MOE layer found in model.layers." (first_k_dense_replace at or past the layers)."""
    with pytest.raises(c.ConfigError, match="No MOE layer found"):
        c.architecture_from_config(edited(PANGU_PRO_SMALL, first_k_dense_replace=3))


def test_mla_fields_are_refused_as_ultra_moes() -> None:
    """openpangu.py would build MLA from DeepSeek's fields whatever the class: not read under this one."""
    changes = {"kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16}
    with pytest.raises(c.ConfigError, match="kv_lora_rank"):
        c.architecture_from_config(edited(PANGU_PRO_SMALL, **changes))
