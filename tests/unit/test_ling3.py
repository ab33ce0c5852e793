"""Ling 3.0 (vLLM's ``bailing_moe_v3.py``, ``BailingMoeV3ForCausalLM``) as capacity reads it.

inclusionAI's config.json files are not public, so the configs here are small ones of its shape
(tests/builders.py) and one of Ling-3.0-tiny's published shape (third-party readers of it state the same
widths; the fields vLLM's class reads); tests/conformance/test_ling3.py holds the small ones to vLLM's class
and engine core on every run. The per-rank bytes at TP 2 and 4, the caches at TP > 1 and with fp8, and the TP
refusals below were measured with vLLM 0.32's class built on every rank of a TP group (gloo on loopback)
before this was written: the conformance probe builds one rank.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.errors import ConfigError
from capacity.memory import state_bytes_per_sequence
from tests.builders import LING3_SMALL, LING3_WIDE_STATE, cpu_engine_layout, edited

ELEMENTWISE = edited(
    LING3_SMALL,
    gated_attention_proj_granularity_type="element_wise",
    num_hidden_layers=10,
    q_lora_rank=96,
    first_k_dense_replace=0,
)
WIDE = LING3_WIDE_STATE
#: Ling-3.0-tiny's shape: 24 layers of 1,536, MLA every fourth (a query LoRA of 256, a gate per head), 16 KDA
#: heads of 128, 128 experts of 512 and one shared, a 157,184-token vocabulary.
TINY = edited(
    LING3_SMALL,
    vocab_size=157184,
    hidden_size=1536,
    intermediate_size=4608,
    num_hidden_layers=24,
    num_attention_heads=16,
    num_key_value_heads=16,
    head_dim=128,
    q_lora_rank=256,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    num_experts=128,
    num_experts_per_tok=8,
    n_group=8,
    topk_group=4,
    moe_intermediate_size=512,
    moe_shared_expert_intermediate_size=512,
    max_position_embeddings=131072,
)


def _arch(config: dict[str, Any] = LING3_SMALL, **changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(config, **changes))


def test_the_layer_closing_each_group_and_a_trailing_partial_group_are_mla():
    assert [layer.mixer for layer in _arch().layers] == ["linear"] * 3 + ["mla"] + ["linear"] * 3 + ["mla"]
    assert [i for i, layer in enumerate(_arch(num_hidden_layers=10).layers) if layer.mixer == "mla"] == [
        3,
        7,
        8,
        9,
    ]
    assert {layer.mixer for layer in _arch(num_hidden_layers=4, layer_group_size=8).layers} == {"mla"}
    a = _arch()
    assert a.state is not None and a.state.kind == "kda" and a.state.separate_gates
    assert (a.state.conv_kernel, a.state.conv_channels, a.state.ssm_dtype) == (4, 3 * 8 * 32, "float32")
    assert a.attention_head_gate and not a.attention_gate_projection
    assert [layer.ffn for layer in a.layers] == ["dense"] + ["moe"] * 7
    assert {layer.ffn for layer in _arch({**LING3_SMALL, "num_experts": None}).layers} == {"dense"}
    assert not _arch(tie_word_embeddings=True).tie_word_embeddings


@pytest.mark.parametrize(
    ("config", "tp", "measured"),
    [
        (LING3_SMALL, 1, 13794848),
        (LING3_SMALL, 2, 6971840),
        (LING3_SMALL, 4, 3560336),
        (ELEMENTWISE, 1, 16779904),
        (ELEMENTWISE, 2, 8617504),
        (ELEMENTWISE, 4, 4536304),
        (WIDE, 1, 106608928),
        (WIDE, 2, 53516128),
        (WIDE, 4, 26969728),
        (TINY, 1, 15796794496),
        (TINY, 2, 7915196992),
    ],
    ids=["small-tp1", "small-tp2", "small-tp4", "elementwise-tp1", "elementwise-tp2", "elementwise-tp4",
         "wide-tp1", "wide-tp2", "wide-tp4", "tiny-tp1", "tiny-tp2"],
)  # fmt: skip
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], tp: int, measured: int
) -> None:
    assert c.weight_bytes_per_gpu(c.architecture_from_config(config), tp) == measured


@pytest.mark.parametrize(
    ("config", "tp", "kv_cache_dtype", "block", "blocks", "concurrency"),
    [
        (LING3_SMALL, 1, "auto", 256, 3276, 172.42),
        (LING3_SMALL, 2, "auto", 128, 6553, 187.23),
        (WIDE, 1, "auto", 3456, 121, 13.44),
        (WIDE, 2, "auto", 1792, 234, 23.4),
        (WIDE, 4, "auto", 896, 468, 39.0),
        (LING3_SMALL, 1, "fp8", 512, 3276, 297.82),
        (WIDE, 1, "fp8", 6784, 123, 15.38),
        (ELEMENTWISE, 1, "fp8", 512, 1638, 163.8),
    ],
)
def test_the_block_holds_both_kda_states_over_the_latents_page(
    config: dict[str, Any], tp: int, kv_cache_dtype: str, block: int, blocks: int, concurrency: float
) -> None:
    """A conv state (3 rows of q, k and v, model dtype) and a float32 head_dim x head_dim state a head, split
    by TP, over the latent's page a token (fp8 halves it; the states keep their dtypes): vLLM's CPU engine
    core on 256 MiB at a 4,096-token context."""
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


def test_ling_3_tiny_at_its_full_context():
    """27 GiB of cache at 131,072 tokens: 1,024-token blocks at TP 1, 512 at TP 2 (measured)."""
    arch = c.architecture_from_config(TINY)
    for tp, block, blocks, concurrency in ((1, 1024, 4096, 31.267), (2, 512, 8192, 31.629)):
        layout = cpu_engine_layout(
            arch, max_model_len=131072, max_num_batched_tokens=131072, tensor_parallel_size=tp
        )
        assert (layout.block_size, layout.num_blocks(28991029248)) == (block, blocks)
        assert layout.num_blocks(28991029248) / layout.blocks_per_sequence(131072) == pytest.approx(
            concurrency, abs=0.001
        )


def test_the_recurrent_state_is_float32_whatever_the_ssm_cache_dtype():
    a = _arch()
    assert state_bytes_per_sequence(a, 1, "bfloat16") == state_bytes_per_sequence(a, 1) == 4608 + 32768


def test_routed_experts_tp_does_not_divide_are_refused_unless_whole_on_a_gpu():
    """vLLM 0.32's FusedMoEConfig asserts its TP degree divides the experts' width (measured: 65 at TP 2)."""
    a = _arch(moe_intermediate_size=65, num_shared_experts=0)
    error = c.tensor_parallel_error(a, 2)
    assert error is not None and "65-wide routed experts" in error
    assert c.tensor_parallel_error(a, 2, expert_parallel=True) is None
    assert c.valid_tensor_parallel_sizes(a, 8) == [1]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"model_type": "bailing_moe_v3"}, "model_type"),
        ({"no_kda_lora": False}, "no_kda_lora"),
        ({"no_kda_lora": None}, "no_kda_lora"),
        ({"head_dim": None}, "head_dim"),
        ({"short_conv_kernel_size": None}, "short_conv_kernel_size"),
        ({"layer_group_size": None}, "layer_group_size"),
        ({"layer_group_size": 0}, "layer_group_size"),
        ({"first_k_dense_replace": None}, "first_k_dense_replace"),
        ({"moe_shared_expert_intermediate_size": None}, "moe_shared_expert_intermediate_size"),
        ({"use_bias": True, "num_shared_experts": 0}, "use_bias"),
        ({"num_experts": None}, "num_experts"),
        (
            {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}},
            "quantization_config",
        ),
    ],
)
def test_files_vllm_refuses_or_kvright_does_not_read_are_refused_naming_the_field(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError, match=field):
        _arch(**changes)


def test_without_kda_layers_no_kda_lora_is_not_needed():
    assert _arch(layer_group_size=1, no_kda_lora=None).mixer_counts["linear"] == 0


def test_the_vision_wrapper_is_refused_by_name():
    """Ling 3.0's VL class (a Qwen3 ViT and a projector over this text model) is not read yet."""
    wrapper = {"architectures": ["BailingMoeV3VLForConditionalGeneration"], "model_type": "bailing_moe_v3_vl"}
    with pytest.raises(ConfigError, match="architectures"):
        c.architecture_from_config(wrapper | {"text_config": LING3_SMALL})
