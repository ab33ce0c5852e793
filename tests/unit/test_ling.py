"""The Ling hybrids as capacity reads them: Ling 2.5 / Ring 2.5 (vLLM's ``bailing_moe_linear.py``,
``BailingMoeV2_5ForCausalLM``: Lightning linear attention) and Ling 3.0 (``bailing_moe_v3.py``,
``BailingMoeV3ForCausalLM``: Kimi Delta Attention), both with MLA layers closing their groups, both model type
``bailing_hybrid``.

inclusionAI's config.json files are not public, so the configs here are small ones of their shape
(tests/builders.py) and one of Ling-3.0-tiny's published shape (third-party readers of it state the same
widths; the fields vLLM's class reads); tests/conformance/test_ling25.py and test_ling3.py hold the small ones
to vLLM's classes and engine core on every run. The per-rank bytes at TP 2 and 4, the caches at TP > 1 and
with fp8, and the TP refusals below were measured with vLLM 0.32's classes built on every rank of a TP group
(gloo on loopback) before this was written: the conformance probe builds one rank.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.errors import ConfigError
from capacity.memory import state_bytes_per_sequence
from tests.builders import (
    LING3_SMALL,
    LING3_WIDE_STATE,
    LING25_SMALL,
    LING25_WIDE_STATE,
    cpu_engine_layout,
    edited,
    model_shapes,
)

#: Ling 2.5's measured configs: the small one with a 1,000-token vocabulary, and one whose state (16 heads
#: of 128: 512 KiB a layer at TP 1) sizes the block.
MEASURED25 = edited(LING25_SMALL, vocab_size=1000)
WIDE25 = edited(LING25_WIDE_STATE, vocab_size=1000)
ELEMENTWISE3 = edited(
    LING3_SMALL,
    gated_attention_proj_granularity_type="element_wise",
    num_hidden_layers=10,
    q_lora_rank=96,
    first_k_dense_replace=0,
)
#: Ling-3.0-tiny's shape (tests/data/shapes/ling.json).
TINY3 = model_shapes("ling")["ling3-tiny"]


def _arch(config: dict[str, Any], **changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(config, **changes))


def _mla_layers(config: dict[str, Any], **changes: Any) -> list[int]:
    return [i for i, layer in enumerate(_arch(config, **changes).layers) if layer.mixer == "mla"]


def test_ling_2_5_ends_each_group_in_mla_and_keeps_a_trailing_partial_group_linear():
    assert _mla_layers(LING25_SMALL) == [3, 7]
    assert _mla_layers(LING25_SMALL, num_hidden_layers=10) == [3, 7]
    for group in (1, 0, -2, None):  # 1 or less, or unset (the class's getattr default 1): every layer MLA
        assert len(_mla_layers(LING25_SMALL, layer_group_size=group)) == 8
    a = _arch(LING25_SMALL)
    assert a.attention == "MLA" and a.state is not None and a.state.kind == "lightning"
    assert (a.state.heads, a.state.head_dim, a.state.state_dim, a.state.conv_channels) == (8, 32, 32, 0)
    assert [layer.ffn for layer in a.layers] == ["dense"] + ["moe"] * 7
    assert not _arch(LING25_SMALL, tie_word_embeddings=True).tie_word_embeddings  # its own head, always


def test_ling_3_makes_the_layer_closing_each_group_and_a_trailing_partial_group_mla():
    assert _mla_layers(LING3_SMALL) == [3, 7]
    assert _mla_layers(LING3_SMALL, num_hidden_layers=10) == [3, 7, 8, 9]
    assert _mla_layers(LING3_SMALL, num_hidden_layers=4, layer_group_size=8) == [0, 1, 2, 3]
    a = _arch(LING3_SMALL)
    assert a.state is not None and a.state.kind == "kda" and a.state.separate_gates
    assert (a.state.conv_kernel, a.state.conv_channels, a.state.ssm_dtype) == (4, 3 * 8 * 32, "float32")
    assert a.attention_head_gate and not a.attention_gate_projection
    assert [layer.ffn for layer in a.layers] == ["dense"] + ["moe"] * 7
    assert {layer.ffn for layer in _arch({**LING3_SMALL, "num_experts": None}).layers} == {"dense"}
    assert not _arch(LING3_SMALL, tie_word_embeddings=True).tie_word_embeddings


@pytest.mark.parametrize(
    ("config", "tp", "measured"),
    [
        (MEASURED25, 1, 12_899_040),
        (MEASURED25, 2, 6_524_128),
        (MEASURED25, 4, 3_336_672),
        (WIDE25, 1, 90_366_880),
        (WIDE25, 2, 45_396_896),
        (WIDE25, 4, 22_911_904),
        # use_bias: the dense MLP's down-projection bias is whole on every rank (row-parallel), as are the
        # Lightning layers' output biases; the qkv and gate/up biases split.
        (edited(MEASURED25, vocab_size=1001, use_bias=True, num_shared_experts=0, head_dim=None), 2, 6189280),
        (edited(MEASURED25, score_function="softmax", moe_router_enable_expert_bias=False, group_norm_size=8,
                num_attention_heads=16, num_key_value_heads=16, head_dim=16, router_dtype=None), 4, 3532672),
        (LING3_SMALL, 1, 13794848),
        (LING3_SMALL, 2, 6971840),
        (LING3_SMALL, 4, 3560336),
        (ELEMENTWISE3, 1, 16779904),
        (ELEMENTWISE3, 2, 8617504),
        (ELEMENTWISE3, 4, 4536304),
        (LING3_WIDE_STATE, 1, 106608928),
        (LING3_WIDE_STATE, 2, 53516128),
        (LING3_WIDE_STATE, 4, 26969728),
        (TINY3, 1, 15796794496),
        (TINY3, 2, 7915196992),
    ],
    ids=["2.5-small-tp1", "2.5-small-tp2", "2.5-small-tp4", "2.5-wide-tp1", "2.5-wide-tp2", "2.5-wide-tp4",
         "2.5-biases-tp2", "2.5-softmax-tp4", "3-small-tp1", "3-small-tp2", "3-small-tp4",
         "3-elementwise-tp1", "3-elementwise-tp2", "3-elementwise-tp4", "3-wide-tp1", "3-wide-tp2",
         "3-wide-tp4", "3-tiny-tp1", "3-tiny-tp2"],
)  # fmt: skip
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], tp: int, measured: int
) -> None:
    assert c.weight_bytes_per_gpu(c.architecture_from_config(config), tp) == measured


@pytest.mark.parametrize(
    ("config", "tp", "kv_cache_dtype", "block", "blocks", "concurrency"),
    [
        # Ling 2.5: one 16 x 128 x 128 bf16 state (512 KiB, split by TP) over a 320-byte latent a token.
        (WIDE25, 1, "auto", 1664, 252, 25.2),
        (WIDE25, 2, "auto", 896, 468, 39.0),
        (WIDE25, 4, "auto", 512, 819, 54.6),
        (MEASURED25, 1, "fp8", 256, 6553, 344.89),
        (WIDE25, 1, "fp8", 3328, 252, 28.0),
        # Ling 3.0: a conv state (3 rows of q, k and v, model dtype) and a float32 head_dim x head_dim state.
        (LING3_SMALL, 1, "auto", 256, 3276, 172.42),
        (LING3_SMALL, 2, "auto", 128, 6553, 187.23),
        (LING3_WIDE_STATE, 1, "auto", 3456, 121, 13.44),
        (LING3_WIDE_STATE, 2, "auto", 1792, 234, 23.4),
        (LING3_WIDE_STATE, 4, "auto", 896, 468, 39.0),
        (LING3_SMALL, 1, "fp8", 512, 3276, 297.82),
        (LING3_WIDE_STATE, 1, "fp8", 6784, 123, 15.38),
        (ELEMENTWISE3, 1, "fp8", 512, 1638, 163.8),
    ],
)
def test_the_block_holds_a_state_over_the_latents_page(
    config: dict[str, Any], tp: int, kv_cache_dtype: str, block: int, blocks: int, concurrency: float
) -> None:
    """128 x ceil(state / (128 x the latent's page a token)) tokens a block, on vLLM's CPU engine core (256
    MiB, a 4,096-token context) and on a GPU alike (16-token blocks, MLA's 128-token hybrid alignment); fp8
    halves the latents alone, so the block holding a state doubles and the pool keeps its blocks."""
    arch = c.architecture_from_config(config)
    layout = cpu_engine_layout(
        arch,
        max_model_len=4096,
        max_num_batched_tokens=4096,
        tensor_parallel_size=tp,
        kv_cache_dtype=kv_cache_dtype,
    )
    assert (layout.block_size, layout.num_blocks(2**28)) == (block, blocks)
    assert layout.num_blocks(2**28) / layout.blocks_per_sequence(4096) == pytest.approx(concurrency, abs=0.01)
    gpu = c.kv_cache_layout(arch, tensor_parallel_size=tp, kv_cache_dtype=kv_cache_dtype)
    assert gpu.block_size == block


def test_ling_3_tiny_at_its_full_context():
    """27 GiB of cache at 131,072 tokens: 1,024-token blocks at TP 1, 512 at TP 2 (measured)."""
    arch = c.architecture_from_config(TINY3)
    for tp, block, blocks, concurrency in ((1, 1024, 4096, 31.267), (2, 512, 8192, 31.629)):
        layout = cpu_engine_layout(
            arch, max_model_len=131072, max_num_batched_tokens=131072, tensor_parallel_size=tp
        )
        assert (layout.block_size, layout.num_blocks(28991029248)) == (block, blocks)
        assert layout.num_blocks(28991029248) / layout.blocks_per_sequence(131072) == pytest.approx(
            concurrency, abs=0.001
        )


def test_the_states_keep_their_classes_dtypes_whatever_the_ssm_cache_dtype():
    """Ling 2.5's one state takes --mamba-cache-dtype (the model's); Ling 3.0's recurrent state is float32
    (its class asks no SSM dtype); --mamba-ssm-cache-dtype, which the CPU platform sets, changes neither."""
    for config, state in ((LING25_SMALL, 8 * 32 * 32 * 2), (LING3_SMALL, 4608 + 32768)):
        a = _arch(config)
        assert (
            state_bytes_per_sequence(a, 1, "float32") == state_bytes_per_sequence(a, 1, "bfloat16") == state
        )


def test_group_norm_size_bounds_ling_2_5s_tensor_parallel_degree():
    """vLLM asserts TP <= group_norm_size and that it divides them; a file without the field has one group,
    and so runs at TP 1 (where it has Lightning layers)."""
    assert c.valid_tensor_parallel_sizes(_arch(LING25_SMALL), 8) == [1, 2, 4]
    error = c.tensor_parallel_error(_arch(LING25_SMALL, group_norm_size=3), 2)
    assert error is not None and "3 output-norm groups" in error and error.endswith("accepted: 1")
    assert c.tensor_parallel_error(_arch(LING25_SMALL, group_norm_size=None), 2) is not None
    assert c.tensor_parallel_error(_arch(LING25_SMALL, group_norm_size=None, layer_group_size=1), 2) is None


def test_routed_experts_tp_does_not_divide_are_refused_unless_whole_on_a_gpu():
    """vLLM 0.32's FusedMoEConfig asserts its TP degree divides the experts' width (measured: 65 at TP 2)."""
    a = _arch(LING3_SMALL, moe_intermediate_size=65, num_shared_experts=0)
    error = c.tensor_parallel_error(a, 2)
    assert error is not None and "65-wide routed experts" in error
    assert c.tensor_parallel_error(a, 2, expert_parallel=True) is None
    assert c.valid_tensor_parallel_sizes(a, 8) == [1]


@pytest.mark.parametrize(
    ("config", "changes", "field"),
    [
        (LING25_SMALL, {"model_type": "bailing_moe_v2_5"}, "model_type"),
        (LING25_SMALL, {"score_function": "softmax"}, "score_function"),
        (LING25_SMALL, {"moe_router_enable_expert_bias": False}, "score_function"),
        (LING25_SMALL, {"use_bias": True}, "use_bias"),
        (LING25_SMALL, {"use_qkv_bias": None}, "use_qkv_bias"),
        (LING25_SMALL, {"num_shared_experts": None}, "num_shared_experts"),
        (LING25_SMALL, {"max_position_embeddings": None}, "max_position_embeddings"),
        (LING25_SMALL, {"layer_group_size": "4"}, "layer_group_size"),
        (LING3_SMALL, {"model_type": "bailing_moe_v3"}, "model_type"),
        (LING3_SMALL, {"no_kda_lora": False}, "no_kda_lora"),
        (LING3_SMALL, {"no_kda_lora": None}, "no_kda_lora"),
        (LING3_SMALL, {"head_dim": None}, "head_dim"),
        (LING3_SMALL, {"short_conv_kernel_size": None}, "short_conv_kernel_size"),
        (LING3_SMALL, {"layer_group_size": None}, "layer_group_size"),
        (LING3_SMALL, {"layer_group_size": 0}, "layer_group_size"),
        (LING3_SMALL, {"first_k_dense_replace": None}, "first_k_dense_replace"),
        (LING3_SMALL, {"moe_shared_expert_intermediate_size": None}, "moe_shared_expert_intermediate_size"),
        (LING3_SMALL, {"use_bias": True, "num_shared_experts": 0}, "use_bias"),
        (LING3_SMALL, {"num_experts": None}, "num_experts"),
        (
            LING3_SMALL,
            {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}},
            "quantization_config",
        ),
    ],
)
def test_files_vllm_refuses_or_kvright_does_not_read_are_refused_naming_the_field(
    config: dict[str, Any], changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError, match=field):
        _arch(config, **changes)


def test_what_a_model_without_linear_layers_does_not_need():
    assert _arch(LING25_SMALL, layer_group_size=1, max_position_embeddings=None).mixer_counts["linear"] == 0
    assert _arch(LING25_SMALL, score_function=None).expert_score_bias  # unset: softmax scoring, bias kept
    assert _arch(LING3_SMALL, layer_group_size=1, no_kda_lora=None).mixer_counts["linear"] == 0


def test_ling_3s_vision_wrapper_is_refused_by_name():
    """Ling 3.0's VL class (a Qwen3 ViT and a projector over this text model) is not read yet."""
    wrapper = {"architectures": ["BailingMoeV3VLForConditionalGeneration"], "model_type": "bailing_moe_v3_vl"}
    with pytest.raises(ConfigError, match="architectures"):
        c.architecture_from_config(wrapper | {"text_config": LING3_SMALL})
