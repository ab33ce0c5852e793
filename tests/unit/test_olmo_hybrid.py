"""AI2's OLMo Hybrid (vLLM's ``olmo_hybrid.py``, ``OlmoHybridForCausalLM``) as capacity reads, weighs and
caches it.

tests/conformance/test_olmo_hybrid.py holds small configs to vLLM's class and engine core at one rank on every
run, with the recurrent state the CPU platform gives it. The per-rank bytes at TP 2 and 4, and the caches
with the recurrent state in the model's dtype (a GPU's), at TP > 1 and with fp8, were measured with vLLM
0.32's class built on every rank of a TP group (gloo on loopback; the CPU platform's float32 reset turned
off) before this was written. No config.json of allenai's is public here: the 7B below is the config class's
defaults, which third-party descriptions of allenai/Olmo-Hybrid-7B state field for field.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.errors import ConfigError
from capacity.memory import state_bytes_per_sequence
from tests.builders import (
    OLMO_HYBRID_GDN_GQA,
    OLMO_HYBRID_SMALL,
    OLMO_HYBRID_WIDE,
    cpu_engine_accounting,
    cpu_engine_layout,
    edited,
    model_shapes,
    weight_bytes_by_tp,
)

ALTERNATING = edited(
    OLMO_HYBRID_SMALL, num_hidden_layers=6, num_key_value_heads=4,
    layer_types=["full_attention", "linear_attention"] * 3,
)  # fmt: skip
#: The config class's defaults: allenai/Olmo-Hybrid-7B's shape (tests/data/shapes/olmo_hybrid.json).
OLMO_7B = model_shapes("olmo_hybrid")["7b"]


def _arch(config: dict[str, Any], **changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(config, **changes))


def test_the_config_class_fills_the_layer_kinds_and_widths_the_file_leaves_out() -> None:
    a = _arch(OLMO_HYBRID_SMALL)
    assert [layer.mixer for layer in a.layers] == ["linear", "linear", "linear", "full"]
    assert a.head_dim == 64 and a.qk_norm == "full" and not a.qkv_bias and not a.o_bias
    assert a.state is not None and a.state.kind == "gated_deltanet" and a.state.model_dtype_decay
    # 4 key and value heads; keys int(0.75 x 256 / 4) = 48 wide, values 96.
    assert (a.state.heads, a.state.state_dim, a.state.head_dim, a.state.conv_channels) == (4, 48, 96, 768)
    assert [layer.mixer for layer in _arch(OLMO_HYBRID_SMALL, num_hidden_layers=3).layers] == [
        "linear",
        "linear",
        "full",
    ]  # fewer than four layers: the last attends
    legacy = _arch(OLMO_HYBRID_SMALL, layer_types=["mamba", "attention", "sliding_attention", "mamba"])
    assert [layer.mixer for layer in legacy.layers] == ["linear", "full", "full", "linear"]
    assert legacy.sliding_window is None  # the class passes no window to any layer


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (OLMO_HYBRID_SMALL, {1: 6983536, 2: 3494744, 4: 1783116}),
        (OLMO_HYBRID_GDN_GQA, {1: 6190768, 2: 3098264, 4: 1584780}),
        (OLMO_HYBRID_WIDE, {1: 20787840, 2: 10399312, 4: 5270584}),
        (ALTERNATING, {1: 9740400, 2: 4875352, 4: 2442828}),
        (edited(OLMO_HYBRID_SMALL, num_hidden_layers=5, num_key_value_heads=1), {2: 4287392, 4: 2179984}),
        (edited(OLMO_HYBRID_SMALL, torch_dtype="float32"), {1: 6984112, 2: 3495320, 4: 1783692}),
        (OLMO_7B, {1: 14861741376, 2: 7431186336}),
    ],
    ids=["small", "gdn-gqa", "wide", "alternating", "one-kv-head", "float32-file", "7b"],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """The GDN layers' gated norm (one value head) and the attention layers' q/k norms whole on every rank;
    a float32 file runs in bfloat16 but for that norm, which its class builds in the file's dtype."""
    assert weight_bytes_by_tp(config, measured) == measured


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (
            OLMO_HYBRID_SMALL,
            {
                (1, "auto"): (128, 1024, 53.8947),
                (2, "auto"): (128, 2048, 107.7895),
                (2, "fp8"): (256, 2048, 186.1818),
            },
        ),
        (OLMO_HYBRID_WIDE, {(1, "auto"): (256, 512, 46.5455), (2, "fp8"): (384, 1365, 151.6667)}),
        (ALTERNATING, {(2, "auto"): (128, 341, 20.0588)}),
        (
            edited(OLMO_HYBRID_SMALL, num_hidden_layers=5, num_key_value_heads=1),
            {(1, "auto"): (256, 1024, 85.3333)},
        ),
    ],
    ids=["small", "wide", "alternating", "one-kv-head"],
)
def test_the_block_holds_a_state_in_the_models_dtype_over_the_attention_page(
    config: dict[str, Any], measured: dict[tuple[int, str], tuple[int, int, float]]
) -> None:
    """The engine core's accounting on vLLM's CPU platform with the recurrent state a GPU keeps (the model's
    dtype), by TP and KV dtype: block size, blocks of 64 MiB and concurrency at a 2,048-token context; fp8
    halves the attention page alone, so the block holding a state doubles."""
    for (tp, dtype), (block, blocks, concurrency) in measured.items():
        accounted = cpu_engine_accounting(config, 2**26, 2048, tensor_parallel_size=tp, kv_cache_dtype=dtype)
        assert accounted == (block, blocks, pytest.approx(concurrency, abs=1e-4)), (tp, dtype)


def test_the_7b_caches_a_1_2_mb_state_a_gdn_layer_and_plans_on_one_h100() -> None:
    """A sequence's state in each GDN layer: a conv of 3 x 11,520 and 30 heads of 192 x 96 in bfloat16 on a
    GPU (1,175,040 bytes); on vLLM's CPU engine 136 blocks of 2 GiB at 8K (measured), 68 with its float32
    state."""
    arch = c.architecture_from_config(OLMO_7B)
    assert state_bytes_per_sequence(arch, 1) == 1175040
    for ssm, blocks in ((None, 136), ("float32", 68)):
        layout = cpu_engine_layout(
            arch, max_model_len=8192, max_num_batched_tokens=2048, mamba_ssm_cache_dtype=ssm
        )
        assert layout.num_blocks(2**31) == blocks
    assert "divide the 30 attention heads" in (c.tensor_parallel_error(arch, 4) or "")
    result = c.plan(arch, c.gpu_spec("h100-sxm"), c.Workload(max_model_len=8192), c.SLO(), c.Limits())
    assert result.plan is not None and result.plan.tensor_parallel_size == 1


#: The conformance suite's small Qwen3-Next (test_parameter_counts.py's qwen3_next case), the small OLMo
#: Hybrid's widths: three GDN layers of four 32-wide value heads over two key heads, one attention layer,
#: eight experts.
QWEN3_NEXT_SMALL = {k: v for k, v in OLMO_HYBRID_SMALL.items() if k != "rope_parameters"} | {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "head_dim": 64,
    "full_attention_interval": 4,
    "linear_num_value_heads": 4,
    "linear_num_key_heads": 2,
    "linear_key_head_dim": 32,
    "linear_value_head_dim": 32,
    "linear_conv_kernel_dim": 4,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "shared_expert_intermediate_size": 128,
    "decoder_sparse_step": 1,
}


def test_every_gdn_models_gated_norm_is_whole_on_every_rank() -> None:
    """Qwen3-Next's too: 4,751,332 bytes on each rank at TP 2 (measured on both ranks of vLLM's class), its
    gated norms (one 32-wide value head) whole on each."""
    assert c.weight_bytes_per_gpu(c.architecture_from_config(QWEN3_NEXT_SMALL), 2) == 4751332


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"linear_use_gate": False}, "linear_use_gate"),  # vLLM asserts the gate
        ({"layer_types": ["linear_attention"] * 4}, "layer_types"),  # the config class wants attention
        ({"layer_types": ["full_attention"] * 4}, "layer_types"),  # ... and a GDN layer
        ({"layer_types": ["linear_attention", "foo", "linear_attention", "full_attention"]}, "layer_types"),
        ({"rope_parameters": {"rope_type": None}}, "rope_parameters"),  # vLLM 0.32: "Unknown RoPE scaling"
        ({"num_attention_heads": 6, "num_key_value_heads": 6}, "num_attention_heads"),  # 256 / 6
    ],
)
def test_files_the_config_class_or_vllm_refuses_are_refused(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        _arch(OLMO_HYBRID_SMALL, **changes)


@pytest.mark.parametrize(
    ("changes", "tp", "reason"),
    [
        (
            {"linear_num_key_heads": 1, "linear_key_head_dim": 90, "linear_num_value_heads": 4},
            4,
            "90-wide keys",
        ),
        ({"linear_num_key_heads": 3, "linear_num_value_heads": 6}, 4, "6 gated_deltanet state heads"),
        ({"intermediate_size": 510}, 4, "510-wide dense MLP"),
    ],
)
def test_tp_splits_every_gdn_width_whole(changes: dict[str, Any], tp: int, reason: str) -> None:
    """vLLM's fused input projection splits the keys by TP (an empty AssertionError where it cannot), b and a
    the value heads ("6 is not divisible by 4"), the MLP its width."""
    assert reason in (c.tensor_parallel_error(_arch(OLMO_HYBRID_SMALL, **changes), tp) or "")
