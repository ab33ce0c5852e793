"""MiMo-V2-Flash and MiMo-V2.5 as vLLM 0.32's mimo_v2.py builds them: sliding-window and full layers with
heads of their own, values narrower than keys, sinks on the sliding layers, an LM head never tied.

The parameter counts and each attention layer's heads, key and value widths and window are held to vLLM's own
class in tests/conformance/test_parameter_counts.py (the ``mimo_v2`` cases), and the FP8 TP verdicts to
vLLM's loader checks in tests/conformance/test_quantized_layouts.py; here the arithmetic built on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity as c
from capacity import ConfigError

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
FLASH: dict[str, Any] = c.catalog_entry("mimo-v2-flash")["config"]
PRO: dict[str, Any] = json.loads((CONFIGS / "mimo-v2.5-pro" / "config.json").read_text())


def _page(kv_heads: int, k: int, v: int, tp: int) -> int:
    """vLLM's AttentionSpec page per token: heads on a rank x (head_size + head_size_v) x 2 bytes (bf16)."""
    return max(1, kv_heads // tp) * (k + v) * 2


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_a_token_caches_keys_and_values_at_their_own_widths_in_each_kind_of_layer(tp: int) -> None:
    arch = c.architecture_from_config(FLASH)
    full = FLASH["hybrid_layer_pattern"].count(0)
    sliding = FLASH["hybrid_layer_pattern"].count(1)
    assert (full, sliding) == (9, 39)
    expected = tp * (full * _page(4, 192, 128, tp) + sliding * _page(8, 192, 128, tp))
    assert c.kv_cache_bytes_per_token(arch, tensor_parallel_size=tp) == expected
    # Only the full layers grow with the context; the sliding ones stop at the window (128 tokens).
    assert arch.sliding_window == 128 and arch.num_sliding_window_layers == 39


def test_the_smaller_page_gets_a_block_as_many_times_larger() -> None:
    """At TP 1 a sliding layer's 8 heads make a page twice a full layer's 4: vLLM gives every layer the larger
    page, so the full layers' blocks hold 32 tokens to the sliding layers' 16; at TP 8 each rank holds one
    head of either kind and the pages are equal."""
    arch = c.architecture_from_config(FLASH)
    one = c.kv_cache_layout(arch, tensor_parallel_size=1)
    tokens = {g.kind: g.tokens_per_block(one.block_size) for g in one.groups}
    assert tokens == {"full": 2 * one.block_size, "sliding": one.block_size}
    assert {g.page_bytes for g in one.groups} == {one.block_size * _page(8, 192, 128, 1)}
    eight = c.kv_cache_layout(arch, tensor_parallel_size=8)
    assert {g.tokens_per_block(eight.block_size) for g in eight.groups} == {eight.block_size}


def test_parameters_are_the_published_totals_without_the_draft_layers() -> None:
    # Model card: 309B total, 15B active; the report's checkpoint (MTP layers and fp32 scales included)
    # holds 1,023,244,718,976 for MiMo-V2.5-Pro, of which vLLM's class builds 1,021,248,126,336.
    flash = c.architecture_from_config(FLASH)
    assert flash.parameters == pytest.approx(309e9, rel=0.01)
    assert flash.active_parameters == pytest.approx(15e9, rel=0.05)
    assert c.architecture_from_config(PRO).parameters == 1_021_248_126_336


def test_sinks_sit_on_the_sliding_layers_only_and_the_head_is_never_tied() -> None:
    arch = c.architecture_from_config(FLASH)
    assert [layer.sinks for layer in arch.layers] == [p == 1 for p in FLASH["hybrid_layer_pattern"]]
    without = c.architecture_from_config(FLASH | {"add_swa_attention_sink_bias": False})
    assert arch.parameters - without.parameters == 39 * FLASH["num_attention_heads"]
    tied = c.architecture_from_config(FLASH | {"tie_word_embeddings": True})
    assert not tied.tie_word_embeddings and tied.parameters == arch.parameters


def test_an_integer_moe_layer_freq_leaves_every_mlp_dense() -> None:
    """vLLM's is_moe_layer reads a list only: an integer (or no field) routes no layer."""
    for fields in ({"moe_layer_freq": 1}, {"moe_layer_freq": None}):
        arch = c.architecture_from_config(FLASH | fields)
        assert not arch.is_moe and {layer.ffn_width for layer in arch.layers} == {FLASH["intermediate_size"]}


def test_mimo_v2_5s_towers_are_not_built_by_its_text_class() -> None:
    """MiMo-V2.5's file describes vision and audio towers; MiMoV2ForCausalLM builds the text model alone."""
    vision = {"depth": 28, "hidden_size": 1280, "intermediate_size": 4608, "num_heads": 32, "patch_size": 16}
    arch = c.architecture_from_config(PRO | {"vision_config": vision})
    assert arch.vision_parameters == 0 and arch.parameters == 1_021_248_126_336


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"hybrid_layer_pattern": None}, "hybrid_layer_pattern", "1 for a sliding-window layer"),
        ({"hybrid_layer_pattern": [0, 1]}, "hybrid_layer_pattern", "at least 48 entries"),
        ({"hybrid_layer_pattern": [2] * 48}, "hybrid_layer_pattern", "0 for a full one"),
        ({"swa_num_key_value_heads": 6}, "swa_num_key_value_heads", "a divisor of swa_num_attention_heads"),
        ({"swa_num_attention_heads": 12}, "swa_num_key_value_heads", "of swa_num_attention_heads (12)"),
        ({"swa_head_dim": None}, "swa_head_dim", "is missing"),
        ({"sliding_window_size": None}, "sliding_window_size", "is missing"),
        ({"hidden_act": "gelu"}, "hidden_act", "expected 'silu'"),
        ({"moe_layer_freq": [1, 1]}, "moe_layer_freq", "at least 48 entries"),
        # found by fuzzing this family's file: a class kvright knows with a model_type no config class has
        ({"model_type": []}, "model_type", "expected a string"),
    ],
)
def test_what_vllm_cannot_build_is_refused_naming_the_field(
    fields: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ConfigError) as err:
        c.architecture_from_config(FLASH | fields)
    assert err.value.field == field and words in str(err.value), str(err.value)


def test_an_fp8_checkpoint_plans_at_every_tp_vllm_loads() -> None:
    """A rank's K part is 1.5 blocks from TP 4 (192-wide heads); vLLM's merged QKV projection loads it."""
    arch = c.architecture_from_config(FLASH)
    assert arch.quantization == "fp8"
    assert c.valid_tensor_parallel_sizes(arch, 8) == [1, 2, 4, 8]


def test_sliding_layers_with_query_heads_of_their_own_weigh_and_split_by_them() -> None:
    """vLLM's mimo_v2.py builds a sliding layer with ``swa_num_attention_heads`` query heads (no published
    file differs from the full layers' 64 yet): q_proj, o_proj and the sinks follow them, and TP must split
    them too."""
    flash = c.architecture_from_config(FLASH)
    wider = c.architecture_from_config(FLASH | {"swa_num_attention_heads": 96})
    sliding = [layer for layer in wider.layers if layer.mixer == "sliding"]
    assert {wider.heads_of(layer) for layer in sliding} == {96}
    assert wider.attention_head_counts == {64, 96}
    per_head = 4096 * 192 + 128 * 4096 + 1  # q, o at the value width, a sink
    assert wider.parameters - flash.parameters == len(sliding) * 32 * per_head
    twelve = c.architecture_from_config(FLASH | {"swa_num_attention_heads": 12, "swa_num_key_value_heads": 4})
    assert c.valid_tensor_parallel_sizes(twelve, 8) == [1, 2, 4]
    assert "some layers' 12 attention heads" in (c.tensor_parallel_error(twelve, 8) or "")


def test_the_router_is_weighed_in_moe_router_dtype_float32_unless_stated() -> None:
    """vLLM's mimo_v2.py builds each gate with ``params_dtype`` from ``moe_router_dtype`` (float32 when the
    file says nothing), unquantized even in the FP8 checkpoint: hidden x experts per MoE layer, whole on every
    GPU."""
    routers = FLASH["hidden_size"] * FLASH["n_routed_experts"] * sum(map(bool, FLASH["moe_layer_freq"]))
    stated = {k: v for k, v in FLASH.items() if k != "moe_router_dtype"}
    as_float32 = c.architecture_from_config(stated)
    as_bf16 = c.architecture_from_config(stated | {"moe_router_dtype": "bfloat16"})
    assert (as_float32.router_dtype, as_bf16.router_dtype) == ("float32", "bfloat16")
    assert as_float32.parameters == as_bf16.parameters
    assert as_float32.weight_groups.replicated - as_bf16.weight_groups.replicated == 2 * routers
    assert c.weight_bytes_per_gpu(as_float32, 8) - c.weight_bytes_per_gpu(as_bf16, 8) == 2 * routers
    with pytest.raises(ConfigError, match=r"moe_router_dtype.*'fp4'.*bfloat16, float16, float32"):
        c.architecture_from_config(stated | {"moe_router_dtype": "fp4"})
