"""Huawei's openPangu Embedded and Ultra MoE (vLLM's ``openpangu.py``, ``PanguEmbeddedForCausalLM`` and
``PanguUltraMoEForCausalLM``) as capacity reads, weighs and caches them.

tests/conformance/test_openpangu.py holds small configs to vLLM's class and engine core at one rank on every
run. The per-rank bytes and caches at TP 2 below, and the refusal there, were measured with vLLM 0.32's
class built on both ranks of a TP group (gloo on loopback) before this was written; both ranks held the same
bytes. kvright read Embedded as a standard decoder before: right KV but for a list of windows (half the
blocks), and short of every bias (the released 7B's `bias` puts one on Q/K/V and the output projection); it
refused Ultra MoE, whose MLA and MoE fields are DeepSeek-V3's.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from tests.builders import (
    PANGU_EMBEDDED_SMALL,
    PANGU_PRO_SMALL,
    PANGU_ULTRA_SMALL,
    cpu_engine_accounting,
    edited,
    model_shapes,
    weight_bytes_by_tp,
)

#: openPangu-Embedded-7B-V1.1's config.json (as vendored in wujing215/OpenPangu7B-on-NVIDIA@b63fa03), the
#: fields capacity reads.
PANGU_7B: dict[str, Any] = {
    "architectures": ["PanguEmbeddedForCausalLM"],
    "auto_map": {"AutoConfig": "configuration_openpangu_dense.PanguEmbeddedConfig"},
    "model_type": "PanguEmbedded",
    "bias": True,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 12800,
    "max_position_embeddings": 32768,
    "num_attention_heads": 32,
    "num_hidden_layers": 34,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 16000000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 153376,
}


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (PANGU_EMBEDDED_SMALL, {1: 279_936, 2: 140_416}),
        (edited(PANGU_EMBEDDED_SMALL, bias=False), {1: 279_168, 2: 139_904}),
        (edited(PANGU_EMBEDDED_SMALL, qkv_bias=False), {1: 279_424, 2: 140_160}),
        (edited(PANGU_EMBEDDED_SMALL, bias=False, attention_bias=True), {1: 279_936, 2: 140_416}),
        (edited(PANGU_EMBEDDED_SMALL, mlp_bias=True), {1: 281_216, 2: 141_184}),
        (edited(PANGU_EMBEDDED_SMALL, sandwich_norm=True), {1: 280_448, 2: 140_928}),
        (edited(PANGU_EMBEDDED_SMALL, num_key_value_heads=1), {1: 271_616, 2: 140_416}),
        (PANGU_7B, {1: 16_062_300_160, 2: 8_031_571_968}),
    ],
    ids=["bias", "no-bias", "qkv-bias-off", "attention-bias", "mlp-bias", "sandwich", "one-kv-head", "7b"],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """The output projection's and the down projection's biases are whole on every rank; one KV head too."""
    assert weight_bytes_by_tp(config, measured) == measured


@pytest.mark.parametrize(
    ("config", "memory", "tp", "measured"),
    [
        (PANGU_EMBEDDED_SMALL, 2**26, 1, (128, 2048)),
        (PANGU_EMBEDDED_SMALL, 2**26, 2, (128, 4096)),
        (edited(PANGU_EMBEDDED_SMALL, interleaved_sliding_window=256), 2**26, 2, (128, 4096)),
        (PANGU_7B, 2**31, 1, (128, 120)),
        (PANGU_7B, 2**31, 2, (128, 240)),
    ],
    ids=["small", "small-tp2", "one-window-every-layer", "7b", "7b-tp2"],
)
def test_the_engine_core_blocks_its_cache_as_measured(
    config: dict[str, Any], memory: int, tp: int, measured: tuple[int, int]
) -> None:
    """(Block size, blocks of ``memory`` at 2,048 tokens)."""
    block, blocks, _ = cpu_engine_accounting(config, memory, 2048, tensor_parallel_size=tp)
    assert (block, blocks) == measured


def test_a_list_of_windows_takes_its_layers_by_index_modulo_its_length() -> None:
    a = c.architecture_from_config(
        edited(PANGU_EMBEDDED_SMALL, num_hidden_layers=5, interleaved_sliding_window=[256, None])
    )
    assert [layer.mixer for layer in a.layers] == ["sliding", "full", "sliding", "full", "sliding"]
    assert a.sliding_window == 256


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        (
            {"kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128},
            "kv_lora_rank",
        ),
        ({"param_sink_number": 128}, "param_sink_number"),
        ({"n_routed_experts": 8}, "n_routed_experts"),
        ({"interleaved_sliding_window": [256, 512]}, "interleaved_sliding_window"),
    ],
    ids=["mla", "sinks", "experts", "two-windows"],
)
def test_the_attention_and_mlp_kinds_kvright_does_not_read_are_refused(
    changes: dict[str, Any], field: str
) -> None:
    """openpangu.py picks MLA, sink attention and routed experts by the file's fields whatever the class: not
    read here, so refused naming the field; so is a second window size."""
    with pytest.raises(c.ConfigError, match=field):
        c.architecture_from_config(edited(PANGU_EMBEDDED_SMALL, **changes))


#: openPangu Ultra MoE 718B's shape (tests/data/shapes/openpangu.json).
PANGU_ULTRA_718B = model_shapes("openpangu")["ultra-718b"]


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (PANGU_ULTRA_SMALL, {1: 499_968, 2: 265_472}),
        (edited(PANGU_ULTRA_SMALL, q_lora_rank=None), {1: 505_920, 2: 262_208}),
        (edited(PANGU_ULTRA_SMALL, router_enable_expert_bias=True), {1: 500_032, 2: 265_536}),
        (edited(PANGU_ULTRA_SMALL, sandwich_norm=True), {1: 500_736, 2: 266_240}),
        (PANGU_ULTRA_SMALL | {"n_shared_experts": None}, {1: 475_392, 2: 253_184}),
        (edited(PANGU_ULTRA_SMALL, num_hidden_layers=4, first_k_dense_replace=2), {1: 581_248, 2: 310_912}),
        (PANGU_ULTRA_718B, {1: 1_438_187_594_752, 2: 720_199_296_000}),
    ],
    ids=["small", "no-query-lora", "expert-bias", "sandwich", "no-shared-expert", "two-dense", "718b"],
)
def test_ultra_moe_ranks_hold_the_bytes_vllms_class_builds(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """DeepSeek-V3's MLA and MoE, the router in the model dtype, the expert bias in float32 only with
    ``router_enable_expert_bias``, two more norms a layer with ``sandwich_norm``."""
    assert weight_bytes_by_tp(config, measured) == measured


def test_ultra_moe_caches_one_latent_on_every_rank() -> None:
    """The 718B at 2 GiB: 238 blocks of 128 tokens on each rank of TP 1 and 2 (measured)."""
    for tp in (1, 2):
        assert cpu_engine_accounting(PANGU_ULTRA_718B, 2**31, 2048, tensor_parallel_size=tp)[:2] == (128, 238)


def test_ultra_moe_without_a_routed_layer_is_refused() -> None:
    """vLLM's class: "No MOE layer found in model.layers."."""
    with pytest.raises(c.ConfigError, match="No MOE layer found"):
        c.architecture_from_config(edited(PANGU_ULTRA_SMALL, first_k_dense_replace=3))


@pytest.mark.parametrize(
    ("config", "field", "words"),
    [
        (edited(PANGU_EMBEDDED_SMALL, hidden_act="gelu"), "hidden_act", "Only silu is supported"),
        (edited(PANGU_ULTRA_SMALL, hidden_act="relu"), "hidden_act", "Only silu is supported"),
        (edited(PANGU_PRO_SMALL, hidden_act="gelu"), "hidden_act", "Only silu is supported"),
        (edited(PANGU_ULTRA_SMALL, first_k_dense_replace=None), "first_k_dense_replace", "no default"),
        (edited(PANGU_PRO_SMALL, n_shared_experts=None), "n_shared_experts", "no default"),
    ],
    ids=["embedded-gelu", "ultra-relu", "pro-gelu", "ultra-no-dense-count", "pro-no-shared-count"],
)
def test_what_every_openpangu_class_refuses_or_needs_stated(
    config: dict[str, Any], field: str, words: str
) -> None:
    """openpangu.py checks every MLP's activation (``check_ffn_act_fn``: silu alone), and where experts route
    reads ``first_k_dense_replace`` and ``n_shared_experts`` with no default (the config class is the
    checkpoint's code): a file without them stops vLLM at start, so capacity refuses it naming the field. A
    stated null ``n_shared_experts`` is no shared expert (built, in the table above)."""
    with pytest.raises(c.ConfigError, match=words) as refused:
        c.architecture_from_config(config)
    assert refused.value.field == field
