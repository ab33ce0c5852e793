"""Step-3.5 (vLLM's step3p5.py over its Step3p5Config): layers with query heads of their own, a gate per head,
and the TP rule those heads set. tests/conformance/test_parameter_counts.py holds two small configs to vLLM's
class, parameters and every attention layer; these hold the reading's rules and its refusals."""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c

LAYERS = 8
TYPES = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(LAYERS)]

STEP: dict[str, Any] = {
    "architectures": ["Step3p5ForCausalLM"],
    "model_type": "step3p5",
    "hidden_size": 1024,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": 16,
    "num_attention_groups": 4,
    "head_dim": 64,
    "vocab_size": 32000,
    "intermediate_size": 2816,
    "moe_num_experts": 16,
    "moe_top_k": 4,
    "moe_intermediate_size": 256,
    "share_expert_dim": 512,
    "moe_layers_enum": ",".join(str(i) for i in range(2, LAYERS)),
    "sliding_window": 512,
    "layer_types": TYPES,
    "attention_other_setting": {
        "attention_type": "sliding_attention",
        "num_attention_heads": 24,
        "num_attention_groups": 4,
        "head_dim": 64,
    },
    "att_impl_type": "GQA",
    "use_head_wise_attn_gate": True,
    "max_position_embeddings": 65536,
    "torch_dtype": "bfloat16",
}


def test_sliding_layers_take_the_other_settings_heads_and_every_attention_layer_gates_its_heads():
    arch = c.architecture_from_config(STEP)
    assert arch.warnings == () and arch.sliding_window == 512 and not arch.tie_word_embeddings
    heads = [16 if kind == "full_attention" else 24 for kind in TYPES]
    assert [arch.heads_of(layer) for layer in arch.layers] == heads
    assert [layer.ffn for layer in arch.layers] == ["dense"] * 2 + ["moe"] * (LAYERS - 2)
    assert arch.attention_head_counts == {16, 24}
    # The gate is hidden x heads a layer, split by TP with the heads.
    ungated = c.architecture_from_config(STEP | {"use_head_wise_attn_gate": False})
    assert arch.parameters - ungated.parameters == 1024 * (2 * 16 + 6 * 24)
    # Query heads weigh q_proj and o_proj; KV (4 groups of 64 either way) is the same.
    same_heads = c.architecture_from_config(STEP | {"attention_other_setting": None})
    per_head = 2 * 1024 * 64 + 1024  # q and o columns, and the gate's
    assert arch.parameters - same_heads.parameters == 6 * (24 - 16) * per_head
    assert c.kv_cache_bytes_per_token(arch) == c.kv_cache_bytes_per_token(same_heads)


def test_a_tp_size_must_split_every_layers_query_heads():
    """Step3p5Attention asserts ``total_num_heads % tp == 0`` per layer, so a sliding layer's own head count
    binds as the model's does."""
    twelve = STEP | {"attention_other_setting": STEP["attention_other_setting"] | {"num_attention_heads": 12}}
    arch = c.architecture_from_config(twelve)
    assert c.valid_tensor_parallel_sizes(arch, 16) == [1, 2, 4]
    error = c.tensor_parallel_error(arch, 8)
    assert error is not None and "does not divide some layers' 12 attention heads" in error
    assert c.valid_tensor_parallel_sizes(c.architecture_from_config(STEP), 16) == [1, 2, 4, 8]


def test_without_layer_types_the_even_layers_slide_and_without_a_window_none_does():
    bare = {k: v for k, v in STEP.items() if k not in ("layer_types", "attention_other_setting")}
    arch = c.architecture_from_config(bare)
    assert [layer.mixer for layer in arch.layers] == ["sliding", "full"] * (LAYERS // 2)
    arch = c.architecture_from_config({k: v for k, v in bare.items() if k != "sliding_window"})
    assert {layer.mixer for layer in arch.layers} == {"full"} and arch.sliding_window is None
    # No moe_layers_enum: every layer but the first routes; no share_expert_dim: top-k experts wide.
    unstated = ("moe_layers_enum", "share_expert_dim")
    arch = c.architecture_from_config({k: v for k, v in bare.items() if k not in unstated})
    assert [layer.ffn for layer in arch.layers] == ["dense"] + ["moe"] * (LAYERS - 1)
    assert arch.shared_expert_intermediate_size == 256 * 4


def test_the_step_3_5_flash_sizes_count_what_its_card_states():
    """With the sizes aiconfigurator vendors for Step-3.7-Flash (45 layers, one full to three sliding ones,
    288 experts of 1,280 from layer 3): 195.8 B parameters, 10.9 B active; Step-3.5-Flash's card says 196 B
    and 11 B. The sliding layers' own setting in the real file is not known here: the totals are near."""
    types = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(45)]
    flash = STEP | {
        "hidden_size": 4096,
        "num_hidden_layers": 45,
        "num_attention_heads": 64,
        "num_attention_groups": 8,
        "head_dim": 128,
        "vocab_size": 128896,
        "intermediate_size": 11264,
        "moe_num_experts": 288,
        "moe_top_k": 8,
        "moe_intermediate_size": 1280,
        "share_expert_dim": 1280,
        "moe_layers_enum": ",".join(str(i) for i in range(3, 45)),
        "layer_types": types,
        "attention_other_setting": None,
    }
    arch = c.architecture_from_config(flash)
    assert arch.parameters == pytest.approx(196e9, rel=0.005)
    assert arch.active_parameters == pytest.approx(11e9, rel=0.02)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"att_impl_type": "MLA"}, "'att_impl_type': is 'MLA'; expected 'GQA'"),
        ({"num_attention_groups": 3}, "'num_attention_groups': is 3; expected a divisor of num_attention"),
        ({"layer_types": TYPES[:3]}, "'layer_types': is .*; expected at least 8 layer type names"),
        ({"attention_other_setting": {"num_attention_heads": 8}}, "'attention_other_setting': is .*type"),
        (
            {"attention_other_setting": STEP["attention_other_setting"] | {"num_attention_heads": "many"}},
            "'attention_other_setting.num_attention_heads': is 'many'",
        ),
        (
            {"attention_other_setting": STEP["attention_other_setting"] | {"num_attention_groups": 5}},
            "'attention_other_setting.num_attention_groups': is 5; expected a divisor of its",
        ),
        ({"moe_layers_enum": "2,three"}, "'moe_layers_enum': is '2,three'; expected layer indices"),
        ({"moe_top_k": 32}, "'moe_top_k': is 32; expected at most the 16 experts"),
    ],
    ids=["not-gqa", "groups", "short-types", "setting-without-type", "setting-heads", "setting-groups",
         "enum", "top-k"],
)
def test_a_file_vllms_step_class_would_refuse_is_refused_naming_the_field(fields, message):
    with pytest.raises(c.ConfigError, match=message):
        c.architecture_from_config(STEP | fields)
