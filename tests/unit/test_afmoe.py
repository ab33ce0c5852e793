"""AFMoE (Arcee's Trinity; vLLM's afmoe.py over transformers' AfmoeConfig): sliding and global layers, an
output gate of its own in every attention layer, experts with shared ones after ``num_dense_layers`` dense
layers.
tests/conformance/test_parameter_counts.py holds two small configs to vLLM's class (parameters and every
attention layer) and test_lora_flags.py the adapter buffers to vLLM's engine; these hold the reading's rules
and its refusals."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import capacity as c

LAYERS = 8

TRINITY: dict[str, Any] = {
    "architectures": ["AfmoeForCausalLM"],
    "model_type": "afmoe",
    "hidden_size": 1024,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "intermediate_size": 3072,
    "moe_intermediate_size": 256,
    "num_experts": 16,
    "num_experts_per_tok": 4,
    "num_shared_experts": 1,
    "num_dense_layers": 2,
    "global_attn_every_n_layers": 4,
    "sliding_window": 2048,
    "score_func": "sigmoid",
    "route_norm": True,
    "n_group": 1,
    "topk_group": 1,
    "route_scale": 2.826,
    "vocab_size": 32000,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "dtype": "bfloat16",
}


def _formula(cfg: dict[str, Any]) -> tuple[int, int]:
    """Parameters and bytes of vLLM's AfmoeForCausalLM, as its modules are built (afmoe.py)."""
    h, v, d = cfg["hidden_size"], cfg["vocab_size"], cfg.get("head_dim", 128)
    heads, kv, layers = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
    dense = cfg["num_dense_layers"]
    experts, width = cfg["num_experts"], cfg["moe_intermediate_size"]
    attention = h * d * (heads + 2 * kv) + heads * d * h + h * heads * d + 2 * d  # qkv, o, gate, q/k norms
    router = h * experts + experts  # float32: the gate and the expert bias
    moe = router + 3 * h * width * cfg["num_shared_experts"] + 3 * experts * h * width
    params = 2 * v * h + layers * (attention + 4 * h) + h + dense * 3 * h * cfg["intermediate_size"]
    params += (layers - dense) * moe
    return params, 2 * params + 2 * (layers - dense) * router


def test_every_fourth_layer_is_global_and_the_parameters_are_vllms_modules():
    arch = c.architecture_from_config(TRINITY)
    assert arch.warnings == () and arch.sliding_window == 2048
    assert [layer.mixer for layer in arch.layers] == ["sliding", "sliding", "sliding", "full"] * 2
    assert [layer.ffn for layer in arch.layers] == ["dense"] * 2 + ["moe"] * (LAYERS - 2)
    params, weight_bytes = _formula(TRINITY)
    assert arch.parameters == params
    assert c.weight_bytes(arch) == weight_bytes
    # The KV cache: 2 KV heads of 128, K and V, bf16, a layer; sliding layers hold their window only.
    assert arch.kv_elements_per_token_per_layer == 2 * 2 * 128


def test_stated_layer_types_outrank_the_every_n_rule():
    types = ["full_attention" if i % 2 else "sliding_attention" for i in range(LAYERS)]
    arch = c.architecture_from_config(TRINITY | {"layer_types": types})
    assert [layer.mixer for layer in arch.layers] == ["sliding", "full"] * (LAYERS // 2)


def test_the_lm_head_is_never_tied_and_the_heads_default_to_128_wide():
    tied = c.architecture_from_config(TRINITY | {"tie_word_embeddings": True})
    assert not tied.tie_word_embeddings
    assert tied.parameters == c.architecture_from_config(TRINITY).parameters
    # AfmoeConfig's head_dim is 128 where a file leaves it out, not hidden / heads (1024 / 8 = 128 here, so
    # the test takes 16 heads: 64 wide by division).
    unstated = {k: v for k, v in TRINITY.items() if k != "head_dim"} | {"num_attention_heads": 16}
    assert c.architecture_from_config(unstated).head_dim == 128


def test_the_output_gate_weighs_a_query_projection_and_takes_an_adapter_of_its_own():
    arch = c.architecture_from_config(TRINITY)
    assert arch.attention_gate_projection and not arch.attention_output_gate
    ungated = dataclasses.replace(arch, attention_gate_projection=False)
    assert arch.parameters - ungated.parameters == LAYERS * 1024 * 8 * 128
    # The gate's adapter per layer at TP 2: A whole (rank x hidden), B by the output shard (heads x 128 / 2
    # x rank); one adapter slot, bf16.
    lora = c.Lora(max_loras=1, max_lora_rank=8)
    gate = 8 * 1024 + 8 * 128 // 2 * 8
    assert (
        c.lora_bytes_per_gpu(arch, lora, tensor_parallel_size=2)
        - c.lora_bytes_per_gpu(ungated, lora, tensor_parallel_size=2)
        == LAYERS * gate * 2
    )


@pytest.mark.parametrize("field", ["score_func", "route_norm", "n_group", "topk_group"])
def test_a_file_without_a_routing_setting_vllm_reads_is_refused_naming_it(field):
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config({k: v for k, v in TRINITY.items() if k != field})
    assert err.value.field == field and "stops at start" in str(err.value)


def test_experts_other_than_silu_are_refused():
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(TRINITY | {"hidden_act": "gelu"})
    assert err.value.field == "hidden_act"


def test_the_trinity_mini_fixture_reads_as_vllm_builds_it():
    """26,123,974,400 parameters and 52,263,685,120 bytes: vLLM 0.32's class on the meta device."""
    path = Path(__file__).resolve().parents[1] / "data" / "configs" / "trinity-mini"
    arch = c.load_architecture(str(path))
    assert (arch.parameters, c.weight_bytes(arch)) == (26_123_974_400, 52_263_685_120)
    assert [layer.mixer for layer in arch.layers].count("full") == 8
