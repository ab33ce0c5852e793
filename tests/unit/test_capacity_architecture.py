"""Parsing Hugging Face config.json into Architecture: families, parameter counts, alternative names, errors.

Configs are the catalog's stored facts or small dicts built here; nothing is faked.
"""

from __future__ import annotations

import pytest

import capacity as c


@pytest.mark.parametrize("model", c.catalog_ids())
def test_every_catalog_entry_is_within_two_percent_of_its_published_total(model):
    """Each catalog entry names its source and the total its publisher states; the converter's count of
    the entry's own config.json must land within 2% of it (1% for most: Llama-3-70B 70.55 B, DeepSeek-V3
    671 B, Gemma-2-27B 27.2 B, ...), and the active count (top-k experts only) within 5%."""
    entry = c.catalog_entry(model)
    assert entry["repo"] and entry["source"]
    assert c.catalog_architecture(model).parameters == pytest.approx(entry["published_parameters"], rel=0.02)
    active = entry.get("published_active_parameters")
    if active:
        assert c.catalog_architecture(model).active_parameters == pytest.approx(active, rel=0.05)


@pytest.mark.parametrize(
    ("model", "attention", "kv_elements"),
    [
        ("llama-2-7b", "MHA", 2 * 32 * 128),
        ("llama-3-70b", "GQA", 2 * 8 * 128),
        ("deepseek-v3", "MLA", 576),
        ("gemma-2-9b", "GQA", 2 * 8 * 256),  # explicit head_dim 256, not 3584 / 16
        ("phi-3-mini", "MHA", 2 * 32 * 96),
    ],
    ids=["llama2-mha", "llama3-gqa", "deepseek-mla", "gemma2-explicit-head-dim", "phi3-mha"],
)
def test_attention_kind_and_cached_elements(model, attention, kv_elements):
    arch = c.catalog_architecture(model)
    assert arch.attention == attention
    assert arch.kv_elements_per_token_per_layer == kv_elements


def test_mqa_is_detected():
    cfg = {
        "model_type": "llama",
        "hidden_size": 1024,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 1,
        "intermediate_size": 2048,
        "vocab_size": 1000,
        "max_position_embeddings": 512,
    }
    assert c.architecture_from_config(cfg).attention == "MQA"


@pytest.mark.parametrize(
    ("model", "window", "sliding_layers"),
    [
        ("gemma-2-27b", 4096, 23),
        ("gemma-2-9b", 4096, 21),
        ("gemma-3-27b", 1024, 52),
        ("phi-3-medium", 2047, 40),
        ("qwen2.5-72b", None, 0),
        ("llama-3-70b", None, 0),
    ],
    ids=["gemma2-alternating", "gemma2-9b", "gemma3-5-of-6", "phi3-all", "qwen-window-off", "llama-none"],
)
def test_sliding_window_layers(model, window, sliding_layers):
    arch = c.catalog_architecture(model)
    assert (arch.sliding_window, arch.num_sliding_window_layers) == (window, sliding_layers)


@pytest.mark.parametrize(
    ("mnbt", "sliding_tokens"),
    [(1024, 16 * (-(-(4095 + 2 * 1024) // 16) + 1)), (8192, 8192 + 16)],
    ids=["window-plus-lookahead-plus-a-block", "lookahead-reaches-the-context"],
)
def test_sliding_window_caps_kv_per_sequence(mnbt, sliding_tokens):
    """vLLM reserves ``cdiv(min(W - 1 + 2 x mnbt, tokens), 16) + 1`` blocks per sliding layer (the window
    need not start on a block boundary): the window caps a sequence only when the batched tokens'
    lookahead does not already reach its length."""
    arch = c.catalog_architecture("gemma-2-27b")
    per_token_layer = c.kv_cache_bytes_per_token(arch) // arch.num_layers
    got = c.kv_cache_bytes_per_sequence(arch, 8192, max_num_batched_tokens=mnbt)
    assert got == per_token_layer * (23 * 8192 + 23 * sliding_tokens)


def test_deepseek_first_k_dense_and_shared_experts():
    arch = c.catalog_architecture("deepseek-v3")
    assert (arch.num_moe_layers, arch.num_experts, arch.num_experts_per_token) == (58, 256, 8)
    assert arch.shared_expert_intermediate_size == 2048
    assert arch.weights.method == "fp8"  # a block-quantized fp8 checkpoint
    assert arch.weights.weight_block_size == (128, 128)


def test_gemma3_text_config_is_read_and_embeddings_tied():
    arch = c.catalog_architecture("gemma-3-27b")
    assert arch.hidden_size == 5376 and arch.tie_word_embeddings and arch.qk_norm


BASE = {
    "model_type": "llama",
    "hidden_size": 1024,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "intermediate_size": 2048,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
}


@pytest.mark.parametrize(
    ("alt", "value"),
    [("n_layer", 2), ("num_layers", 2)],
    ids=["gpt2-n_layer", "chatglm-num_layers"],
)
def test_alternative_field_names(alt, value):
    cfg = {k: v for k, v in BASE.items() if k != "num_hidden_layers"} | {alt: value}
    assert c.architecture_from_config(cfg).num_layers == 2


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model_type": "gpt_bigcode", "num_attention_heads": None}, "num_attention_heads"),
        ({"model_type": None}, "architectures"),
        ({"hidden_size": None}, "hidden_size"),
        ({"hidden_size": -5}, "hidden_size"),
        ({"hidden_size": "1024"}, "hidden_size"),
        ({"num_attention_heads": True}, "num_attention_heads"),
        ({"num_key_value_heads": 3}, "num_key_value_heads"),
        ({"torch_dtype": "int3"}, "torch_dtype"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings"),
        ({"max_position_embeddings": 0}, "max_position_embeddings"),
        ({"quantization_config": {"quant_method": "no-such-method"}}, "quantization_config.quant_method"),
    ],
    ids=[
        "unknown-arch-missing-a-standard-field",
        "no-arch",
        "missing-hidden",
        "negative",
        "string-int",
        "bool-int",
        "kv-not-divisor",
        "bad-dtype",
        "bad-bool",
        "zero-positions",
        "unsupported-quant",
    ],
)
def test_bad_config_names_the_field(change, field):
    cfg = {k: v for k, v in (BASE | change).items() if v is not None}
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(cfg)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_unknown_catalog_id_lists_accepted():
    with pytest.raises(c.CapacityError, match=r"llama-3\.1-70b"):
        c.load_architecture("no-such-model")


def test_load_from_file_and_folder(tmp_path):
    import json

    (tmp_path / "config.json").write_text(json.dumps(BASE))
    assert c.load_architecture(str(tmp_path)).hidden_size == 1024
    assert c.load_architecture(str(tmp_path / "config.json")).num_layers == 2
    (tmp_path / "config.json").write_text(json.dumps(BASE)[:40])
    with pytest.raises(c.ConfigError, match="not valid JSON"):
        c.load_architecture(str(tmp_path))


def test_catalog_has_at_least_15_models():
    assert len(c.catalog_ids()) >= 15


def test_unknown_architecture_with_standard_fields_is_read_with_a_warning_naming_the_assumption():
    arch = c.architecture_from_config(
        BASE | {"model_type": "gpt_bigcode", "architectures": ["GPTBigCodeForCausalLM"]}
    )
    assert arch.parameters == c.architecture_from_config(BASE).parameters
    assert len(arch.warnings) == 1 and "GPTBigCodeForCausalLM" in arch.warnings[0]
    assert "standard decoder" in arch.warnings[0]


def test_unknown_mixture_of_experts_is_refused_rather_than_read_as_dense():
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(
            BASE | {"model_type": "new_moe", "num_experts": 8, "num_experts_per_tok": 2}
        )
    assert err.value.field == "architectures"


def test_architectures_outrank_model_type():
    """vLLM dispatches on ``architectures``: a renamed model_type of a known class reads as that class."""
    renamed = c.catalog_entry("deepseek-v3")["config"] | {
        "model_type": "kimi_k2",
        "architectures": ["DeepseekV3ForCausalLM"],
    }
    assert c.architecture_from_config(renamed).parameters == c.catalog_architecture("deepseek-v3").parameters
