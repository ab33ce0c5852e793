"""Parsing Hugging Face config.json into Architecture: families, parameter counts, alternative names, errors.

Configs are the catalog's stored facts or small dicts built here; nothing is faked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import capacity as c
from tests.builders import GLM_OCR, QWEN2_VL_7B, QWEN25_VL_3B, QWEN25_VL_7B, VISION_WRAPPERS

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


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
    ("change", "kv_heads"),
    [
        ({"multi_query": True, "num_key_value_heads": None}, 1),
        ({"multi_query": True, "num_key_value_heads": 4, "new_decoder_architecture": True}, 4),
        ({"multi_query": False, "num_key_value_heads": None}, 8),
    ],
    ids=["multi-query-caches-one-head", "new-decoder-architecture-reads-its-kv-heads", "multi-query-off"],
)
def test_a_multi_query_flag_without_the_new_decoder_architecture_is_one_kv_head(change, kv_heads):
    cfg = {k: v for k, v in (BASE | change).items() if v is not None}
    assert c.architecture_from_config(cfg).num_kv_heads == kv_heads


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
        ({"model_type": "helium", "num_attention_heads": None}, "architectures"),
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


#: A small TeleFLM (vLLM's teleflm.py: llama.py's modules; no config class here): biased attention and MLP.
TELEFLM_BIASED = {
    "architectures": ["TeleFLMForCausalLM"],
    "model_type": "TeleFLM",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "num_hidden_layers": 2,
    "vocab_size": 512,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
    "use_mup": True,
    "tie_word_embeddings": False,
    "attention_bias": True,
    "mlp_bias": True,
}


def test_an_unknown_standard_decoder_is_biased_as_llama_is() -> None:
    """attention_bias on all four attention projections (o_proj's whole on every rank), mlp_bias on the MLP:
    TeleFLM's bytes as vLLM's class holds them on both ranks of TP 2 (measured by a survey of the class)."""
    arch = c.architecture_from_config(TELEFLM_BIASED)
    assert arch.o_bias and arch.mlp_bias and arch.warnings
    assert {tp: c.weight_bytes_per_gpu(arch, tp) for tp in (1, 2)} == {1: 3_157_504, 2: 1_581_056}


def test_unknown_architecture_with_standard_fields_is_read_with_a_warning_naming_the_assumption():
    arch = c.architecture_from_config(BASE | {"model_type": "helium", "architectures": ["HeliumForCausalLM"]})
    assert arch.parameters == c.architecture_from_config(BASE).parameters
    assert len(arch.warnings) == 1 and "HeliumForCausalLM" in arch.warnings[0]
    assert "standard decoder" in arch.warnings[0]


@pytest.mark.parametrize(
    ("fields", "what"),
    [
        ({"num_experts": 8, "num_experts_per_tok": 2}, "mixture-of-experts"),
        ({"kv_lora_rank": 512}, "MLA"),
        ({"num_kv_shared_layers": 10}, "KV shared across layers"),
        ({"cross_attention_layers": [3, 8]}, "cross-attention layers"),
        ({"ssm_state_size": 128, "mamba_expand": 2}, "state-space"),
        ({"layers_block_type": ["mamba", "attention"]}, "per-layer block kinds"),
        # Gemma 4: global layers with their own head size and KV heads, their keys also their values.
        (
            {"global_head_dim": 256, "num_global_key_value_heads": 2},
            "global_head_dim 256 (not its head_dim 128)",
        ),
        ({"attention_k_eq_v": True}, "keys that are also values"),
        # MiMo-V2: sliding-window layers with their own KV heads; values narrower than keys.
        ({"swa_num_key_value_heads": 4}, "swa_num_key_value_heads 4 (not its num_key_value_heads 8)"),
        ({"head_dim": 192, "v_head_dim": 128}, "v_head_dim 128 (not its head_dim 192)"),
        ({"hybrid_layer_pattern": [0, 1]}, "per-layer attention kinds"),
        # HRM-Text as transformers saves it: num_hidden_layers is the 2 x (3 + 1) steps of 2 layers a stack.
        (
            {"num_hidden_layers": 16, "num_layers_per_stack": 2, "H_cycles": 2, "L_cycles": 3},
            "recurrent layer stacks",
        ),
        ({"loop_num": 2, "loop_window_size": 64}, "layers run in loops (loop_num)"),
    ],
    ids=[
        "moe",
        "mla",
        "gemma3n-kv-sharing",
        "mllama-cross-attention",
        "mamba",
        "block-kinds",
        "gemma4-global-layers",
        "gemma4-k-eq-v",
        "mimo-swa-kv-heads",
        "mimo-v-head-dim",
        "mimo-layer-pattern",
        "hrm-text-stacks",
        "loops",
    ],
)
def test_an_unknown_architecture_that_is_not_a_standard_decoder_is_refused_rather_than_read_as_one(
    fields, what
):
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(BASE | {"model_type": "new", "architectures": ["NewForCausalLM"]} | fields)
    assert err.value.field == "architectures"
    assert "NewForCausalLM" in str(err.value) and what in str(err.value)


def test_an_unknown_architecture_that_nests_its_settings_is_refused_naming_them():
    """DBRX's shape as its config.json states it: heads, layers and width under names of its own, KV heads in
    ``attn_config`` and sixteen experts in ``ffn_config``. Read as a standard decoder (with its names
    aliased to the standard ones) it would be 12.7 B parameters of one MLP a layer, not 132 B."""
    dbrx = {
        "architectures": ["NewDbrxForCausalLM"],
        "model_type": "new_dbrx",
        "d_model": 6144,
        "n_heads": 48,
        "n_layers": 40,
        "attn_config": {"kv_n_heads": 8, "rope_theta": 500000},
        "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4},
        "vocab_size": 100352,
    }
    for cfg in (dbrx, dbrx | {"num_hidden_layers": 40, "hidden_size": 6144, "num_attention_heads": 48}):
        with pytest.raises(c.ConfigError) as err:
            c.architecture_from_config(cfg)
        assert err.value.field == "architectures"
        assert "mixture-of-experts fields (in ffn_config)" in str(err.value)
        assert "settings nested in attn_config, ffn_config" in str(err.value)
    # Objects that say nothing of the decoder's shape leave a standard one readable.
    plain = BASE | {"architectures": ["NewForCausalLM"], "model_type": "new"}
    neutral = {"rope_scaling": {"rope_type": "linear", "factor": 2.0}, "auto_map": {"AutoConfig": "a.B"}}
    assert c.architecture_from_config(plain | neutral).num_layers == 2


@pytest.mark.parametrize(
    ("renamed", "dropped", "lacking"),
    [
        ({"num_hidden_layers": "n_layers"}, (), "num_hidden_layers"),
        # GPT-2's names on a class kvright does not know: GPT-2 itself (an ungated MLP of n_inner, learned
        # positions, biases everywhere) holds 35 % fewer parameters than a gated decoder of these sizes.
        (
            {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head"},
            ("intermediate_size",),
            "hidden_size or num_hidden_layers or num_attention_heads or intermediate_size",
        ),
    ],
    ids=["own-layer-name", "gpt2-names"],
)
def test_an_unknown_architecture_without_the_standard_fields_says_so(renamed, dropped, lacking):
    cfg = {renamed.get(k, k): v for k, v in BASE.items() if k not in dropped}
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(cfg | {"architectures": ["NewForCausalLM"], "model_type": "new"})
    assert err.value.field == "architectures"
    assert str(err.value).startswith(
        "config.json field 'architectures': is NewForCausalLM, which kvright does not know and vLLM 0.32.0 "
        f"does not register either, and its config has no {lacking} to read it as a standard decoder from; "
        "expected one of "
    )


def test_an_unknown_class_vllm_registers_is_kvrights_gap_alone_in_the_refusal():
    # (NemotronHPuzzleForCausalLM was this example until it was read: test_nemotron_h_puzzle.py)
    nanbeige = BASE | {
        "architectures": ["NanbeigeForCausalLM"],
        "model_type": "nanbeige",
        "mamba_d_state": 64,
    }
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(nanbeige)
    assert "is NanbeigeForCausalLM, which kvright does not know, and its" in str(err.value)


@pytest.mark.parametrize(
    ("named", "says"),
    [
        ({"model_type": "new"}, "is missing, and model_type 'new' is not one kvright knows"),
        ({}, "is missing (and so is model_type)"),
    ],
    ids=["model-type-only", "neither"],
)
def test_a_config_without_architectures_is_refused_saying_it_is_missing(named, says):
    """A trimmed config (no ``architectures``) whose fields are not a standard decoder's: the refusal says the
    field is missing, not that an architecture called None is unknown."""
    config = {k: v for k, v in BASE.items() if k not in ("architectures", "model_type")}
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(config | named | {"num_experts": 8, "num_experts_per_tok": 2})
    assert err.value.field == "architectures"
    assert says in str(err.value) and "None" not in str(err.value)


@pytest.mark.parametrize(
    "fields",
    [
        {"v_head_dim": 128, "swa_head_dim": 128},  # 1024 / 8 heads: the standard head size
        {"head_dim": 64, "global_head_dim": 64, "num_global_key_value_heads": 8},
        {"swa_num_attention_heads": 8, "swa_num_key_value_heads": 8},
        {"attention_k_eq_v": False},
    ],
    ids=["derived-head-dim", "stated-head-dim", "swa-heads", "k-eq-v-off"],
)
def test_attention_fields_that_state_the_standard_shape_leave_an_unknown_architecture_readable(fields):
    unknown = {"model_type": "new", "architectures": ["NewForCausalLM"]}
    arch = c.architecture_from_config(BASE | unknown | fields)
    assert arch.head_dim == fields.get("head_dim", 128) and arch.num_kv_heads == 8
    assert "standard decoder" in arch.warnings[0]  # (the second: no vLLM config class for "new")


def test_architectures_outrank_model_type():
    """vLLM dispatches on ``architectures``: a renamed model_type of a known class reads as that class."""
    renamed = c.catalog_entry("deepseek-v3")["config"] | {
        "model_type": "kimi_k2",
        "architectures": ["DeepseekV3ForCausalLM"],
    }
    assert c.architecture_from_config(renamed).parameters == c.catalog_architecture("deepseek-v3").parameters


# ----- context length: vLLM's _get_and_verify_max_len (the conformance suite asks the engine itself) -----

LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}


@pytest.mark.parametrize(
    ("change", "limit", "default"),
    [
        ({}, 4096, 4096),
        ({"rope_scaling": {"type": "linear", "factor": 4.0}}, 16384, 16384),
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 2}}, 8192, 8192),
        # transformers 5 writes rope_parameters; a legacy rope_scaling beside it replaces it
        ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}, 8192, 8192),
        (
            {
                "rope_parameters": {"rope_type": "default", "rope_theta": 1e4},
                "rope_scaling": {"type": "linear", "factor": 3.0},
            },
            12288,
            12288,
        ),
        ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}, 4096, 4096),
        (
            {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}},
            4096,
            4096,
        ),
        (
            {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 512}},
            4096,
            4096,
        ),
        ({"rope_scaling": {"type": "deepseek_yarn", "factor": 40}}, 4096, 4096),
        (
            {
                "max_position_embeddings": 131072,
                "original_max_position_embeddings": 4096,
                "rope_scaling": {"type": "su", "long_factor": [1.0], "short_factor": [1.0]},
            },
            131072,
            4096,
        ),
        # one set per layer type: the factor of the unscaled kind applies
        (
            {
                "layer_types": ["full_attention", "sliding_attention"],
                "sliding_window": 512,
                "rope_parameters": {
                    "full_attention": {"rope_type": "linear", "factor": 2.0},
                    "sliding_attention": {"rope_type": "default"},
                },
            },
            8192,
            8192,
        ),
        (
            {
                "original_max_position_embeddings": 8192,
                "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
            },
            4096,
            4096,
        ),  # an original length past the positions: kvright passes the flag, so no more than accepted
        ({"rope_scaling": {"type": "linear", "factor": None}}, 4096, 4096),  # vLLM falls back to 1
        ({"model_max_length": 131072}, 131072, 131072),  # Command-R: wins over the positions
        ({"seq_length": 2048}, 2048, 2048),  # the smallest stated key
    ],
    ids=[
        "plain",
        "linear",
        "dynamic",
        "rope-parameters",
        "rope-scaling-replaces-rope-parameters",
        "default-type-has-no-factor",
        "yarn-already-extended",
        "llama3-already-extended",
        "deepseek-yarn-already-extended",
        "longrope-defaults-to-its-original-length",
        "nested-per-layer-type",
        "longrope-original-past-the-positions",
        "null-factor",
        "model-max-length",
        "smallest-key",
    ],
)
def test_context_length_is_derived_as_vllm_derives_it(change, limit, default):
    arch = c.architecture_from_config(LLAMA | change)
    assert (arch.max_model_len, arch.default_max_model_len) == (limit, default)
    assert arch.context_error(limit) is None
    assert f"expected at most {limit}" in (arch.context_error(limit + 1) or "")


def test_gemma3_positions_are_already_scaled():
    """Gemma 3's 128K is the extended length; its linear factor 8 is not applied again (catalog config)."""
    arch = c.catalog_architecture("gemma-3-4b")
    assert arch.max_model_len == 131072


def test_a_wrapper_text_configs_rope_is_not_on_the_config_vllm_asks():
    """vLLM reads RoPE from the object it loaded; a multimodal wrapper's top level has none of its own."""
    wrapper = {
        "model_type": "llava",
        "architectures": ["LlavaForConditionalGeneration"],
        "text_config": LLAMA | {"rope_scaling": {"type": "linear", "factor": 4.0}},
    }
    assert c.architecture_from_config(wrapper).max_model_len == 4096


#: What transformers saves for a wrapper's language model: its difference from the class's defaults (the
#: shape of llava-hf/llava-1.5-7b-hf's text_config, tests/data/configs).
SPARSE_TEXT = {"model_type": "llama", "vocab_size": 32064, "max_position_embeddings": 4096}


def test_a_wrapper_text_config_takes_the_sizes_it_leaves_out_from_its_class():
    """LlamaConfig's defaults (4096 wide, 32 layers of 32 heads, all KV heads, MLP 11008): what vLLM
    builds."""
    wrapper = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"]}
    arch = c.architecture_from_config(wrapper | {"text_config": SPARSE_TEXT})
    heads = (arch.num_attention_heads, arch.num_kv_heads)
    assert (arch.hidden_size, arch.num_layers, *heads) == (4096, 32, 32, 32)
    assert (arch.intermediate_size, arch.vocab_size, arch.max_position_embeddings) == (11008, 32064, 4096)


def test_a_text_config_naming_no_type_is_the_one_its_wrapper_builds():
    """LlavaConfig builds a Llama for a text_config without model_type, MistralConfig's defaults differ
    (8 KV heads): the type decides the defaults."""
    untyped = {k: v for k, v in SPARSE_TEXT.items() if k != "model_type"}
    llava = c.architecture_from_config({"model_type": "llava", "text_config": untyped})
    typed = untyped | {"model_type": "mistral"}
    mistral = c.architecture_from_config({"model_type": "llava", "text_config": typed})
    assert (llava.model_type, llava.num_kv_heads) == ("llama", 32)
    assert (mistral.model_type, mistral.num_kv_heads) == ("mistral", 8)


def test_a_top_level_file_states_its_sizes_itself():
    """transformers writes a top-level config whole, so a missing size is the file's error, not a default
    (and a file may name it its own way: GPT-2's n_embd, Falcon's n_layer)."""
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config({k: v for k, v in LLAMA.items() if k != "hidden_size"})
    assert err.value.field == "hidden_size"


def test_the_wrappers_dtype_outranks_its_text_configs():
    """vLLM takes the top level's dtype first (get_torch_dtype), as llava-v1.6-mistral-7b-hf's float16 over
    its text_config's bfloat16; the text config's when the top level states none, or null."""
    text = LLAMA | {"torch_dtype": "float16"}
    wrapper = {"model_type": "llava", "torch_dtype": "bfloat16", "text_config": text}
    assert c.architecture_from_config(wrapper).dtype == "bfloat16"
    unstated = {k: v for k, v in wrapper.items() if k != "torch_dtype"}
    assert c.architecture_from_config(unstated).dtype == "float16"
    assert c.architecture_from_config(wrapper | {"torch_dtype": None}).dtype == "float16"


def test_a_scaled_context_error_names_the_positions_and_the_factor():
    arch = c.architecture_from_config(LLAMA | {"rope_scaling": {"type": "linear", "factor": 4.0}}, name="m")
    assert arch.context_error(20000) == (
        "context 20000 is longer than the 16384 tokens vLLM accepts for m (4096 positions x RoPE factor 4); "
        "expected at most 16384"
    )


def test_a_config_without_any_length_is_planned_at_vllms_fallback_with_a_warning():
    arch = c.architecture_from_config({k: v for k, v in LLAMA.items() if k != "max_position_embeddings"})
    assert arch.max_model_len == c.DEFAULT_POSITIONS == 2048
    assert any("states none of max_position_embeddings" in w for w in arch.warnings)


@pytest.mark.parametrize("factor", [0, -2.0, "4", True, float("inf")])
def test_a_bad_rope_factor_names_the_field(factor):
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(LLAMA | {"rope_scaling": {"type": "linear", "factor": factor}})
    assert err.value.field == "rope_scaling.factor"


def test_the_planner_plans_the_default_context_and_refuses_one_past_the_limit():
    arch = c.architecture_from_config(
        LLAMA
        | {
            "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
        },
        name="phi",
    )
    h100 = c.gpu_spec("h100-sxm")
    result = c.plan(arch, h100, c.Workload(), c.SLO(), c.Limits())
    assert result.plan is not None and result.plan.max_model_len == 4096
    assert (
        "no max-model-len given: planned at 4096 tokens, the context vLLM serves phi at by default "
        "(LongRoPE's original length); ask for up to 131072 to serve longer prompts"
    ) in result.warnings
    asked = c.plan(arch, h100, c.Workload(max_model_len=4096), c.SLO(), c.Limits())
    assert not any("max-model-len given" in w for w in asked.warnings)
    with pytest.raises(c.CapacityError, match="max-model-len 131073 is longer than the 131072 tokens"):
        c.plan(arch, h100, c.Workload(max_model_len=131073), c.SLO(), c.Limits())


@pytest.mark.parametrize(
    ("config", "published"),
    [(QWEN2_VL_7B, 8.29e9), (QWEN25_VL_7B, 8.29e9), (QWEN25_VL_3B, 3.75e9)],
    ids=["qwen2-vl-7b", "qwen2.5-vl-7b", "qwen2.5-vl-3b"],
)
def test_qwen_vl_is_a_known_dense_decoder_with_its_window_off_and_its_tower_counted(config, published):
    """`use_sliding_window: false` nulls the window in transformers' Qwen config classes, which vLLM loads:
    every layer attends in full although the file states `sliding_window: 32768`. Qwen2-VL's tower is
    `embed_dim` wide (its `hidden_size` is the text width it merges into); Qwen2.5-VL's SiLU tower has a
    gated MLP. Totals as the model cards state them."""
    arch = c.architecture_from_config(config)
    assert (arch.sliding_window, arch.num_sliding_window_layers, arch.warnings) == (None, 0, ())
    assert arch.parameters == pytest.approx(published, rel=0.01)


def test_a_vision_config_is_the_class_its_wrapper_builds_whatever_type_it_names():
    """Qwen2VLConfig builds its own vision class of a ``vision_config`` whatever type the object names:
    olmOCR's file (transformers 4.45) names the wrapper's type and no sizes, and vLLM builds the class's
    defaults, Qwen2-VL-7B's tower. LlavaConfig goes by the type named: a SigLIP stays a SigLIP."""
    olmocr = json.loads((CONFIGS / "olmocr-7b-0225-preview" / "config.json").read_text())
    assert olmocr["vision_config"] == {"in_chans": 3, "model_type": "qwen2_vl", "spatial_patch_size": 14}
    read, full = c.architecture_from_config(olmocr), c.architecture_from_config(QWEN2_VL_7B)
    assert (read.parameters, read.weight_groups, read.warnings) == (full.parameters, full.weight_groups, ())
    assert read.parameters == 8_291_375_616  # vLLM 0.32's class on the meta device (sources.json)
    llava = json.loads((CONFIGS / "llava-1.5-7b-hf" / "config.json").read_text())
    siglip = llava | {"vision_config": llava["vision_config"] | {"model_type": "siglip_vision_model"}}
    assert c.architecture_from_config(siglip).parameters != c.architecture_from_config(llava).parameters


PHI3V = json.loads((CONFIGS / "phi-3-vision-128k-instruct" / "config.json").read_text())


def test_phi_3_vision_is_its_llama_behind_the_clip_vllm_builds_for_it():
    """phi3v.py: Phi-3-mini's layers as vLLM's Llama (every layer sliding at the file's 131,072), CLIP
    ViT-L/14-336 cut after layer_idx -2 (23 blocks), two 4,096-wide separators, a 4,096 -> 3,072 -> 3,072
    projection, and a second 32,064 x 3,072 token embedding: vLLM 0.32 builds 4,232,523,776 parameters."""
    arch = c.architecture_from_config(PHI3V)
    language = 3_821_079_552
    clip = 23 * (12 * 1024 * 1024 + 13 * 1024) + 1024 + 3 * 14 * 14 * 1024 + 577 * 1024 + 2 * 1024
    image = clip + 2 * 4096 + (4096 * 3072 + 3072) + (3072 * 3072 + 3072) + 32064 * 3072
    assert (arch.parameters, arch.weight_groups.vision) == (language + image, 2 * image)
    assert arch.parameters == 4_232_523_776
    assert (arch.num_kv_heads, arch.head_dim, arch.sliding_window, arch.num_sliding_window_layers) == (
        32,
        96,
        131072,
        32,
    )
    assert c.config_reader(PHI3V) == "checkpoint"  # phi3_v: the repository's own config class
    # A feature layer nearer the input builds fewer blocks.
    first = c.architecture_from_config(PHI3V | {"img_processor": PHI3V["img_processor"] | {"layer_idx": 0}})
    assert arch.parameters - first.parameters == 22 * (12 * 1024 * 1024 + 13 * 1024)


def test_blip_2_weighs_its_q_former_and_holds_it_whole():
    """blip2.py: BLIP's ViT (Blip2VisionConfig's ViT-g: 39 blocks 1,408 wide), 32 learned queries, a 12-layer
    Q-Former cross-attending the tower every other layer, and a projection into the text width; the
    Q-Former's plain torch modules are whole on every GPU. A cross-attention in every layer adds six."""
    blip = VISION_WRAPPERS["blip2"]
    arch = c.architecture_from_config(blip)
    h, q = 1408, 768
    vit_split = 39 * (3 * h * h + 3 * h + h * h + h * 6144 + 6144 + 6144 * h)
    vit_whole = h + 3 * 14 * 14 * h + h + (16 * 16 + 1) * h + 39 * 6 * h + 2 * h
    layer = (4 * q * q + 6 * q) + (2 * q * 3072 + 3072 + 3 * q)
    cross = 2 * q * q + 2 * h * q + 6 * q
    qformer = 32 * q + 2 * q + 12 * layer + 6 * cross + q * 256 + 256
    whole = vit_whole + qformer
    assert (arch.vision_parameters, arch.vision_whole_parameters) == (vit_split + whole, whole)
    every = blip | {"qformer_config": {"cross_attention_frequency": 1}}
    assert c.architecture_from_config(every).vision_parameters - arch.vision_parameters == 6 * cross


def test_glm_ocr_is_a_glm_4_behind_its_own_cogvit_tower():
    """glm_ocr.py: the language model is vLLM's Glm4ForCausalLM (four norms a layer, q/k/v biased only by
    attention_bias, the MTP layer left to speculative decoding); the tower is GLM-V's reworked: q/k/v and
    MLP biased, per-head q/k norms, no position table and no norm after the patch embedding, and a merger
    as wide as the text model's MLP. zai-org/GLM-OCR: 1,107,405,824 parameters, vLLM's class."""
    arch = c.architecture_from_config(GLM_OCR)
    h, inter, heads = 1024, 4096, 16
    block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * (h // heads) + (3 * h * inter + 2 * inter + h)
    downsample, merger = h + h * 1536 * 4 + 1536, 1536**2 + 2 * 1536 + 3 * 1536 * 4608
    tower = 3 * 2 * 14 * 14 * h + h + 24 * block + downsample + merger
    assert (arch.vision_parameters, arch.parameters, arch.warnings) == (tower, 1_107_405_824, ())
    assert (arch.num_kv_heads, arch.head_dim, len(arch.layers), arch.mtp_layers) == (8, 128, 16, 1)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"embd_layer": PHI3V["embd_layer"] | {"use_hd_transform": False}}, "embd_layer.use_hd_transform"),
        ({"img_processor": {"num_img_tokens": 144}}, "img_processor.image_dim_out"),
        ({"img_processor": PHI3V["img_processor"] | {"layer_idx": 24}}, "img_processor.layer_idx"),
        ({"embd_layer": None}, "embd_layer"),
    ],
)
def test_a_phi_3_vision_file_vllm_cannot_build_is_refused_naming_the_field(edit, field):
    with pytest.raises(c.ConfigError, match=f"config.json field '{field}'"):
        c.architecture_from_config(PHI3V | edit)


COHERE2 = BASE | {
    "architectures": ["Cohere2ForCausalLM"],
    "model_type": "cohere2",
    "num_hidden_layers": 8,
    "sliding_window": 256,
}


AS_QWEN2 = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}
AS_QWEN2_MOE = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "num_experts": 4,
             "num_experts_per_tok": 2, "moe_intermediate_size": 64}  # fmt: skip
AS_QWEN3_MOE = AS_QWEN2_MOE | {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"]}
AS_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}


@pytest.mark.parametrize(
    ("change", "sliding"),
    [
        ({}, [True, True, True, False] * 2),  # Cohere2Config's default: every 4th layer global
        ({"sliding_window_pattern": 2}, [True, False] * 4),
        ({"layer_types": ["full_attention"] * 7 + ["sliding_attention"]}, [False] * 7 + [True]),
        ({"model_type": "olmo3", "architectures": ["Olmo3ForCausalLM"]}, [True, True, True, False] * 2),
        ({"model_type": "mistral", "architectures": ["MistralForCausalLM"]}, [True] * 8),
        (AS_QWEN2 | {"use_sliding_window": True, "max_window_layers": 0}, [True] * 8),
        (AS_QWEN2 | {"use_sliding_window": True, "max_window_layers": 8}, [False] * 8),
        (AS_QWEN2 | {"use_sliding_window": True}, [False] * 8),  # Qwen2Config's max_window_layers: 28
        (AS_QWEN2 | {"use_sliding_window": False}, [False] * 8),
        (AS_QWEN2 | {"use_sliding_window": False, "layer_types": ["sliding_attention"] * 8}, [False] * 8),
        (AS_QWEN2, [False] * 8),
        ({"use_sliding_window": False, "max_window_layers": 2}, [True, True, True, False] * 2),
        (AS_LLAMA | {"use_sliding_window": False}, [True] * 8),
        (AS_QWEN3_MOE | {"use_sliding_window": True, "max_window_layers": 5}, [True] * 8),
        (AS_QWEN2_MOE | {"use_sliding_window": True, "max_window_layers": 5}, [False] * 8),
        (AS_QWEN2_MOE | {"use_sliding_window": True, "max_window_layers": 0}, [True] * 8),
        ({"sliding_window": 0}, [False] * 8),
        ({"sliding_window": 0, "layer_types": ["sliding_attention"] * 8}, [False] * 8),
    ],
    ids=[
        "cohere2-default-pattern",
        "stated-pattern",
        "layer-types-outrank-the-pattern",
        "olmo3-default-pattern",
        "mistral-every-layer",
        "qwen-use-sliding-window-from-layer-0",
        "qwen-use-sliding-window-past-the-last-layer",
        "qwen-max-window-layers-defaults-to-28",
        "qwen-use-sliding-window-false-turns-it-off",
        "qwen-off-outranks-layer-types",
        "qwen-window-off-when-use-sliding-window-is-unstated",
        "only-the-qwen-config-classes-read-use-sliding-window",
        "a-llama-typed-file-slides-every-layer-whatever-use-sliding-window-says",
        "qwen3-moe-derives-no-layer-types-so-every-layer-slides",
        "qwen2-moe-passes-no-per-layer-window-so-a-mixed-one-reaches-no-layer",
        "qwen2-moe-window-on-every-layer",
        "a-window-of-0-is-none-as-in-vllm",
        "a-window-of-0-outranks-layer-types",
    ],
)
def test_which_layers_slide_follows_the_configs_own_fields(change, sliding):
    """transformers' config classes derive `layer_types` from these fields, and vLLM's layers follow them."""
    config = COHERE2 | change
    arch = c.architecture_from_config(config)
    assert [layer.mixer == "sliding" for layer in arch.layers] == sliding
    # vLLM's Command R v2 layers cache W + 1 tokens (commandr.py: Cohere's training convention).
    window = 257 if config["model_type"] == "cohere2" else 256
    assert arch.sliding_window == (window if any(sliding) else None)


def test_a_qwen_window_on_some_layers_only_is_refused_as_vllm_refuses_it():
    """vLLM's Qwen2 model asserts that `max_window_layers` puts the window on every layer or on none."""
    config = COHERE2 | {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(config | {"use_sliding_window": True, "max_window_layers": 5})
    assert err.value.field == "max_window_layers" and "3 of 8 layers" in str(err.value)


def test_a_pattern_that_is_not_a_count_needs_layer_types():
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(COHERE2 | {"sliding_window_pattern": "LLLG"})
    assert err.value.field == "sliding_window_pattern" and "layer_types" in str(err.value)


def test_command_r7b_reads_as_a_known_decoder_with_three_of_four_layers_sliding():
    """CohereForAI/c4ai-command-r7b-12-2024's fields: 8.03 B as published, 24 of 32 layers in a 4K window
    (which vLLM caches as 4097 tokens)."""
    arch = c.architecture_from_config(
        {
            "architectures": ["Cohere2ForCausalLM"],
            "model_type": "cohere2",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "vocab_size": 256000,
            "tie_word_embeddings": True,
            "sliding_window": 4096,
            "sliding_window_pattern": 4,
            "max_position_embeddings": 132096,
            "torch_dtype": "bfloat16",
        }
    )
    assert arch.parameters == pytest.approx(8.03e9, rel=0.01)
    assert (arch.num_sliding_window_layers, arch.sliding_window, arch.warnings) == (24, 4097, ())


@pytest.mark.parametrize(
    ("model", "head"),
    [
        ("llama-3.1-8b", None),  # llama.py ties as the file says
        ("gemma-2-9b", "embedding"),  # gemma2.py: the logits from the embedding, always
        ("deepseek-v3", "own"),  # deepseek_v2.py: an lm_head of its own, always
        ("gpt-oss-20b", "own"),
        ("mixtral-8x7b", None),
    ],
)
def test_the_lm_head_follows_the_file_only_where_vllms_class_reads_it(model, head):
    """Some vLLM classes never read tie_word_embeddings (held to each class, both ways, in
    test_parameter_counts.py): the file's value changes their weights only where the class reads it."""
    config = c.catalog_entry(model)["config"]
    tied = c.architecture_from_config(config | {"tie_word_embeddings": True})
    untied = c.architecture_from_config(config | {"tie_word_embeddings": False})
    table = tied.hidden_size * tied.vocab_size
    if head is None:
        assert (tied.tie_word_embeddings, untied.parameters - tied.parameters) == (True, table)
    else:
        assert tied.parameters == untied.parameters
        assert tied.tie_word_embeddings is untied.tie_word_embeddings is (head == "embedding")


@pytest.mark.parametrize("model_type", ["cohere", "cohere2"])
def test_command_models_take_their_logits_from_the_embedding_whatever_the_file_says(model_type):
    """vLLM's commandr.py builds no LM head (it drops lm_head weights and multiplies by the embedding), so a
    file stating tie_word_embeddings false weighs no more (Command A Vision's text model, stated untied, is
    held to the class in test_parameter_counts.py)."""
    config = {"architectures": ["CohereForCausalLM"], "model_type": model_type, "hidden_size": 256,
              "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 4096, "max_position_embeddings": 4096}  # fmt: skip
    tied = c.architecture_from_config(config | {"tie_word_embeddings": True})
    stated_untied = c.architecture_from_config(config | {"tie_word_embeddings": False})
    assert stated_untied.tie_word_embeddings and stated_untied.parameters == tied.parameters


# ----- Nemotron-H: the block list of transformers 5, and latent MoE (Nemotron 3 Super / Ultra) -------------
#: A small Nemotron-H with Mamba, attention and MoE layers (the fields its real files use).
NEMOTRON_H_MOE = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "hybrid_override_pattern": "M*EME",
    "mamba_num_heads": 8,
    "mamba_head_dim": 32,
    "ssm_state_size": 16,
    "n_groups": 2,
    "conv_kernel": 4,
    "mlp_hidden_act": "relu2",
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "moe_shared_expert_intermediate_size": 256,
    "n_shared_experts": 1,
}


def _blocks(names: list[str], **more: object) -> dict[str, object]:
    config = {k: v for k, v in NEMOTRON_H_MOE.items() if k != "hybrid_override_pattern"}
    return {**config, "layers_block_type": names, **more}


@pytest.mark.parametrize(
    "config",
    [
        _blocks(["mamba", "attention", "moe", "mamba", "moe"]),
        _blocks(["linear_attention", "full_attention", "moe", "linear_attention", "moe"]),
        # transformers derives the layer count from the blocks and ignores a stated one
        {**NEMOTRON_H_MOE, "num_hidden_layers": 52},
    ],
    ids=["legacy-block-names", "block-names", "num-hidden-layers-ignored"],
)
def test_nemotron_h_layers_come_from_its_block_list_or_pattern(config):
    arch = c.architecture_from_config(config)
    pattern = c.architecture_from_config(NEMOTRON_H_MOE)
    assert [(layer.mixer, layer.ffn) for layer in arch.layers] == [
        ("mamba", "none"),
        ("full", "none"),
        ("none", "moe"),
        ("mamba", "none"),
        ("none", "moe"),
    ]
    assert arch.parameters == pattern.parameters


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (_blocks(["mamba", "cross_attention"]), "layers_block_type"),
        (_blocks([]), "layers_block_type"),
        ({**NEMOTRON_H_MOE, "hybrid_override_pattern": "M*X"}, "hybrid_override_pattern"),
        (_blocks([]) | {"layers_block_type": None}, "hybrid_override_pattern"),
    ],
    ids=["unknown-block", "no-blocks", "unknown-pattern-character", "neither"],
)
def test_nemotron_h_without_a_readable_block_list_is_refused_naming_it(config, field):
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(config)
    assert err.value.field == field


def test_latent_moe_experts_work_at_the_latent_width_between_two_replicated_projections():
    """vLLM's NemotronHMoE with ``moe_latent_size``: each routed expert's up and down projections are
    latent x moe_intermediate instead of hidden x moe_intermediate, fc1/fc2_latent_proj (hidden <-> latent)
    are ReplicatedLinear (whole on every TP rank), the router and shared expert stay at hidden_size."""
    h, latent, width, experts, moe_layers = 256, 64, 128, 8, 2
    plain = c.architecture_from_config(NEMOTRON_H_MOE)
    lat = c.architecture_from_config({**NEMOTRON_H_MOE, "moe_latent_size": latent})
    assert lat.moe_latent_size == latent and plain.moe_latent_size == 0
    experts_saved = moe_layers * experts * 2 * width * (h - latent)
    projections = moe_layers * 2 * h * latent
    assert plain.parameters - lat.parameters == experts_saved - projections
    assert lat.parameter_groups.replicated - plain.parameter_groups.replicated == projections
    assert plain.parameter_groups.routed_experts_total - lat.parameter_groups.routed_experts_total == (
        experts_saved
    )
    # null is no latent, as vLLM's `getattr(config, "moe_latent_size", None) is not None`
    assert c.architecture_from_config({**NEMOTRON_H_MOE, "moe_latent_size": None}) == plain


def test_latent_moe_dispatches_the_latent_to_other_gpus_under_expert_parallelism():
    """vLLM projects the hidden state to the latent before the experts' dispatch (routed_input_transform),
    so an all-to-all carries latent-width activations."""
    plain = c.architecture_from_config(NEMOTRON_H_MOE)
    lat = c.architecture_from_config({**NEMOTRON_H_MOE, "moe_latent_size": 64})
    layout = c.Layout(data_parallel_size=2, expert_parallel=True)
    gpu = c.gpu_spec("h100-sxm")
    steps = [c.roofline.StepModel(a, gpu, layout=layout, kv_cache_dtype="auto") for a in (plain, lat)]
    assert steps[0].a2a_bytes_per_token > 0
    assert steps[1].a2a_bytes_per_token / steps[0].a2a_bytes_per_token == pytest.approx(64 / 256)


def test_a_class_vllm_no_longer_serves_is_named_so():
    """vLLM's registry refuses the classes it dropped by name ("was supported in vLLM until v0.23.0"):
    kvright's refusal and warning say the same, not only that kvright does not know the class."""
    moe = {"architectures": ["MiniMaxM1ForCausalLM"], "model_type": "minimax_m1", "num_local_experts": 32}
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(BASE | moe)
    assert "served until v0.23.0" in str(err.value) and "0.32.0 refuses" in str(err.value)
    baichuan = {"architectures": ["BaichuanForCausalLM"], "model_type": "baichuan"}
    dense = c.architecture_from_config(BASE | baichuan)
    assert any("vLLM served it until v0.23.0" in w for w in dense.warnings), dense.warnings


def test_a_dropped_class_transformers_still_has_is_said_to_be_built_by_the_backend():
    """vLLM's registry tries its Transformers backend before it refuses a dropped class by name: Llama 3.2
    Vision (MllamaForConditionalGeneration, native until v0.10.2) is built that way, not refused. kvright
    still refuses it, for its cross-attention layers, and says what vLLM does."""
    mllama = {
        "architectures": ["MllamaForConditionalGeneration"],
        "model_type": "mllama",
        "text_config": {**BASE, "model_type": "mllama_text_model", "cross_attention_layers": [3, 8]},
    }
    engine = c.architecture.engine_vocabulary()
    name = "MllamaForConditionalGeneration"
    assert name in engine.previously_supported and name in engine.transformers_architectures
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(mllama)
    assert "builds only through its Transformers backend" in str(err.value), err.value
    assert "refuses by name" not in str(err.value) and "cross-attention layers" in str(err.value)


def test_an_encoder_decoder_is_refused_for_what_it_is():
    """Whisper's file states d_model and encoder_layers, not hidden_size: the refusal named the missing
    standard fields, as if one could add them. It says what the model is."""
    whisper = {
        "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper",
        "is_encoder_decoder": True,
        "d_model": 1280,
        "encoder_layers": 32,
        "decoder_layers": 32,
    }
    with pytest.raises(c.ConfigError, match=r"encoder and cross-attending decoder \(is_encoder_decoder\)"):
        c.architecture_from_config(whisper)
    assert c.architecture_from_config({**BASE, "is_encoder_decoder": False}).parameters > 0
