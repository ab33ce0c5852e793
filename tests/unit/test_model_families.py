"""Families read by the rules of the code that builds them: vLLM's model file, or transformers' where vLLM
serves the class through its Transformers backend (``capacity.architecture._MODELING``).

The MoE cases are the shapes their checkpoints publish (the fields are the config classes' own names),
each checked against its publisher's totals; the dense cases check the one rule each family adds over a
Llama of the same fields, with the arithmetic written out here. The real files of EXAONE 4, OLMoE, SmolLM3,
ERNIE 4.5, CodeGemma, DeepSeek-MoE and Ling-lite are in ``tests/data/configs`` (test_model_zoo.py holds them
to their publishers' totals; the rules their families add are here).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import capacity as c

#: Published shapes. ERNIE-4.5-21B-A3B: transformers' Ernie4_5_MoeConfig defaults, which its docstring
#: names as that checkpoint's; the file leaves the MoE layer span to the class (layer 0 dense).
ERNIE_MOE = {
    "architectures": ["Ernie4_5_MoeForCausalLM"],
    "model_type": "ernie4_5_moe",
    "hidden_size": 2560,
    "intermediate_size": 12288,
    "num_hidden_layers": 28,
    "num_attention_heads": 20,
    "num_key_value_heads": 4,
    "vocab_size": 103424,
    "max_position_embeddings": 131072,
    "moe_num_experts": 64,
    "moe_k": 6,
    "moe_intermediate_size": 1536,
    "moe_num_shared_experts": 2,
}
#: Phi-3.5-MoE-instruct (PhimoeConfig's defaults are its shape).
PHI_MOE = {
    "architectures": ["PhiMoEForCausalLM"],
    "model_type": "phimoe",
    "hidden_size": 4096,
    "intermediate_size": 6400,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32064,
    "max_position_embeddings": 131072,
    "num_local_experts": 16,
    "num_experts_per_tok": 2,
}
#: granite-3.1-3b-a800m-instruct (model card's architecture table).
GRANITE_MOE = {
    "architectures": ["GraniteMoeForCausalLM"],
    "model_type": "granitemoe",
    "hidden_size": 1536,
    "intermediate_size": 512,
    "num_hidden_layers": 32,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "vocab_size": 49155,
    "max_position_embeddings": 131072,
    "num_local_experts": 40,
    "num_experts_per_tok": 8,
    "tie_word_embeddings": True,
}


#: Ling-flash-2.0 (Ring-flash-2.0 has the same shape): one merged shared expert, per-head q/k RMSNorms
#: (``use_rmsnorm``; LayerNorms without it).
#: Its model_type is no transformers type: the repository's own config class reads it (auto_map).
LING_FLASH = {
    "architectures": ["BailingMoeV2ForCausalLM"],
    "auto_map": {"AutoConfig": "configuration_bailing_moe_v2.BailingMoeV2Config"},
    "model_type": "bailing_moe",
    "vocab_size": 157184,
    "hidden_size": 4096,
    "intermediate_size": 9216,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "max_position_embeddings": 32768,
    "moe_intermediate_size": 1024,
    "moe_shared_expert_intermediate_size": 1024,
    "num_experts": 256,
    "num_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 1,
    "use_qk_norm": True,
    "use_rmsnorm": True,
    "use_bias": False,
    "use_qkv_bias": False,
    "tie_word_embeddings": False,
}
#: K-EXAONE-236B-A23B: three sliding layers (window 128) to one global, layer 0 dense.
K_EXAONE = {
    "architectures": ["ExaoneMoEForCausalLM"],
    "model_type": "exaone_moe",
    "vocab_size": 153600,
    "hidden_size": 6144,
    "intermediate_size": 18432,
    "num_hidden_layers": 48,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 262144,
    "moe_intermediate_size": 2048,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_shared_experts": 1,
    "sliding_window": 128,
    "sliding_window_pattern": "LLLG",
    "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(48)],
    "tie_word_embeddings": False,
}


@pytest.mark.parametrize(
    ("config", "total", "active", "tables_left_out"),
    [
        # HF's safetensors total of ERNIE-4.5-21B-A3B (its F32 part is the routers); "21B total, 3B active".
        (ERNIE_MOE, 21_825_437_888, 3.0e9, 1),
        # Phi-3 report (arXiv:2404.14219): "a 16 x 3.8B MoE model with 6.6 billion active parameters";
        # about 42B in all (not stated by Microsoft, so only the active count is held).
        (PHI_MOE, None, 6.6e9, 0),
        # Granite 3.0/3.1 card: "# Parameters 3.3B", "# Active Parameters 800M" (3B MoE column).
        (GRANITE_MOE, 3.3e9, 0.8e9, 1),
        # HF's safetensors total of Ling-flash-2.0 (F32: the routers' expert biases); its card: "6.1B active
        # (4.8B non-embedding)".
        (LING_FLASH, 102_889_705_216, 4.8e9, 2),
        # K-EXAONE's card: 236B total, 23B active (its BF16 GGUF sums to 236.57B plus a 0.53B MTP layer).
        (K_EXAONE, 236e9, 23e9, 0),
    ],
    ids=["ernie-4.5-21b-a3b", "phi-3.5-moe", "granite-3.1-3b-a800m", "ling-flash-2.0", "k-exaone"],
)
def test_a_mixture_of_experts_family_counts_what_its_publisher_counts(config, total, active, tables_left_out):
    arch = c.architecture_from_config(config)
    assert arch.warnings == ()
    if total:
        assert arch.parameters == pytest.approx(total, rel=0.02)
    embeddings = tables_left_out * config["vocab_size"] * config["hidden_size"]  # what the card leaves out
    assert arch.active_parameters - embeddings == pytest.approx(active, rel=0.05)


def test_k_exaones_layers_slide_and_route_as_its_lists_say():
    arch = c.architecture_from_config(K_EXAONE)
    assert (arch.num_sliding_window_layers, arch.sliding_window, arch.qk_norm) == (36, 128, "head")
    assert [layer.ffn for layer in arch.layers] == ["dense"] + ["moe"] * 47  # first_k_dense_replace's default
    listed = c.architecture_from_config(K_EXAONE | {"mlp_layer_types": ["dense"] * 2 + ["sparse"] * 46})
    assert [layer.ffn for layer in listed.layers] == ["dense"] * 2 + ["moe"] * 46


def test_lings_q_and_k_norms_are_there_only_when_its_config_turns_them_on():
    with_norms = c.architecture_from_config(LING_FLASH)
    without = c.architecture_from_config(LING_FLASH | {"use_qk_norm": False})
    assert (with_norms.qk_norm, without.qk_norm) == ("head", "none")
    assert with_norms.parameters - without.parameters == 32 * 2 * 128


#: Real files of the families the tests below hold to rules of their own (tests/data/configs).
CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
LING_LITE: dict[str, Any] = json.loads((CONFIGS / "ling-lite" / "config.json").read_text())


def test_deepseek_moe_caches_full_heads_and_its_first_layer_is_dense():
    """vLLM's DeepSeek-V2 class builds DeepSeek-MoE's attention as standard MHA (DeepseekAttention): full K
    and V for each of its 16 heads in all 28 layers; first_k_dense_replace 1 leaves layer 0 dense."""
    arch = c.load_architecture(str(CONFIGS / "deepseek-moe-16b-base"))  # published totals: test_model_zoo.py
    assert c.kv_cache_bytes_per_token(arch) == 28 * 2 * 16 * 128 * 2
    assert [layer.ffn for layer in arch.layers[:2]] == ["dense", "moe"]
    assert arch.config_reader == "checkpoint"  # vLLM reads model_type deepseek only with its own code


def test_ling_with_biases_and_shared_experts_is_refused_as_vllm_refuses_it():
    with pytest.raises(c.ConfigError) as refused:
        c.architecture_from_config(LING_LITE | {"use_bias": True})
    assert refused.value.field == "use_bias" and "accepted: false" in str(refused.value)


def test_ling_q_and_k_norms_are_layernorms_unless_use_rmsnorm():
    """vLLM's bailing_moe.py: per-head nn.LayerNorm (a weight and a bias) on q and k, RMSNorm (a weight)
    with use_rmsnorm: 2 x 128 more parameters a layer without it."""
    on = LING_LITE | {"use_qk_norm": True, "head_dim": 128}
    layernorm = c.architecture_from_config(on).parameters
    rmsnorm = c.architecture_from_config(on | {"use_rmsnorm": True}).parameters
    assert layernorm - rmsnorm == 28 * 2 * 128


def test_ernies_first_layer_is_dense_by_its_config_classs_default():
    arch = c.architecture_from_config(ERNIE_MOE)
    assert [layer.ffn for layer in arch.layers] == ["dense"] + ["moe"] * 27
    assert arch.shared_expert_intermediate_size == 2 * 1536  # two shared experts, one MLP twice as wide
    span = c.architecture_from_config(ERNIE_MOE | {"moe_layer_start_index": 4, "moe_layer_end_index": 23})
    assert [i for i, layer in enumerate(span.layers) if layer.ffn == "moe"] == list(range(4, 24))
    every_other = c.architecture_from_config(ERNIE_MOE | {"moe_layer_interval": 2})
    assert [i for i, layer in enumerate(every_other.layers) if layer.ffn == "moe"] == list(range(1, 28, 2))


DENSE: dict[str, Any] = {
    "hidden_size": 512,
    "intermediate_size": 1536,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}
H, W, L, HEADS, KV, HD = 512, 1536, 4, 8, 2, 64
Q, KV_WIDTH = HEADS * HD, KV * HD


def _llama(**fields: Any) -> c.Architecture:
    return c.architecture_from_config(
        DENSE | {"architectures": ["LlamaForCausalLM"], "model_type": "llama"} | fields
    )


def _family(architecture: str, model_type: str, **fields: Any) -> c.Architecture:
    arch = c.architecture_from_config(
        DENSE | {"architectures": [architecture], "model_type": model_type} | fields
    )
    assert arch.warnings == ()
    return arch


@pytest.mark.parametrize(
    ("architecture", "model_type", "fields", "more_than_llama"),
    [
        # c_fc and c_proj, no gate; use_bias (default on) on q, k, v, o and both MLP projections; LayerNorms
        # with a bias; the LM head tied by Starcoder2Config's default.
        (
            "Starcoder2ForCausalLM",
            "starcoder2",
            {},
            L * (-H * W + (Q + 2 * KV_WIDTH) + H + (W + H) + 2 * H) + H - 1000 * H,
        ),
        ("Starcoder2ForCausalLM", "starcoder2", {"use_bias": False}, L * (-H * W + 2 * H) + H - 1000 * H),
        # Nemotron-4 / Minitron: up and down only (squared ReLU); LayerNorm1P has a bias, the final norm too.
        ("NemotronForCausalLM", "nemotron", {"hidden_act": "relu2"}, L * (-H * W + 2 * H) + H),
        ("NemotronForCausalLM", "nemotron", {"bias": True}, L * (-H * W + 2 * H + Q + 2 * KV_WIDTH + H) + H),
        # Apertus: ungated xIELU MLP with two learned scalars a layer, per-head q/k norms.
        ("ApertusForCausalLM", "apertus", {"hidden_act": "xielu"}, L * (-H * W + 2 * HD + 2)),
        # q/k/v biased (attention_bias, on by Seed-OSS's class default), the output not.
        ("SeedOssForCausalLM", "seed_oss", {"head_dim": 64}, L * (Q + 2 * KV_WIDTH)),
        # GLM-4-0414: post-self-attention and post-MLP norms beside the usual two; q/k/v biased by default.
        ("Glm4ForCausalLM", "glm4", {"head_dim": 64}, L * (2 * H + Q + 2 * KV_WIDTH)),
        # OLMo 2/3 and OLMoE: q and k norms over the whole projection, every head at once.
        ("Olmo2ForCausalLM", "olmo2", {}, L * (Q + KV_WIDTH)),
        # EXAONE 4: per-head q and k norms; attention_bias puts a bias on the output projection too.
        ("Exaone4ForCausalLM", "exaone4", {}, L * 2 * HD),
        ("Exaone4ForCausalLM", "exaone4", {"attention_bias": True}, L * (2 * HD + Q + 2 * KV_WIDTH + H)),
        # Gemma: the LM head tied by GemmaConfig's default; its head_dim default is 256.
        ("GemmaForCausalLM", "gemma", {"head_dim": 64}, -1000 * H),
        ("SmolLM3ForCausalLM", "smollm3", {}, -1000 * H),
        # GLM-4-9B's -hf files (transformers' Glm): attention_bias on q, k and v, not the output.
        ("GlmForCausalLM", "glm", {"head_dim": 64, "attention_bias": True}, L * (Q + 2 * KV_WIDTH)),
        # OLMo 1: LayerNorms with neither weights nor biases (OlmoLayerNorm), two a layer and a final one.
        ("OlmoForCausalLM", "olmo", {}, -(2 * L + 1) * H),
        ("OlmoForCausalLM", "olmo", {"attention_bias": True}, -(2 * L + 1) * H + L * (Q + 2 * KV_WIDTH + H)),
        # VaultGemma: two norms a layer like a Llama's, the LM head tied by VaultGemmaConfig's default.
        ("VaultGemmaForCausalLM", "vaultgemma", {"head_dim": 64}, -1000 * H),
    ],
    ids=[
        "starcoder2",
        "starcoder2-no-bias",
        "nemotron",
        "nemotron-biased",
        "apertus",
        "seed-oss",
        "glm4",
        "olmo2",
        "exaone4",
        "exaone4-biased",
        "gemma",
        "smollm3",
        "glm",
        "olmo",
        "olmo-biased",
        "vaultgemma",
    ],
)
def test_a_family_weighs_what_its_modeling_code_builds_beyond_a_llama(
    architecture, model_type, fields, more_than_llama
):
    assert _family(architecture, model_type, **fields).parameters - _llama().parameters == more_than_llama


def test_vaultgemma_and_mellum_slide_as_their_config_classes_derive_layer_types():
    """VaultGemmaConfig: with no layer_types, every other layer slides (from the first), at 4096 where the
    file states no window. MellumConfig: with no layer_types no layer slides, whatever sliding_window says;
    where layer_types names sliding layers they slide at the file's window, or 1024."""
    vault = _family("VaultGemmaForCausalLM", "vaultgemma", head_dim=64)
    assert ([layer.mixer for layer in vault.layers], vault.sliding_window) == (["sliding", "full"] * 2, 4096)
    moe = {"num_local_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128, "head_dim": 64}
    unlisted = _family("MellumForCausalLM", "mellum", sliding_window=64, **moe)
    assert ([layer.mixer for layer in unlisted.layers], unlisted.sliding_window) == (["full"] * 4, None)
    listed = _family(
        "MellumForCausalLM",
        "mellum",
        layer_types=["sliding_attention", "full_attention", "full_attention", "full_attention"],
        mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
        **moe,
    )
    assert [layer.mixer for layer in listed.layers] == ["sliding", "full", "full", "full"]
    assert (listed.sliding_window, [layer.ffn for layer in listed.layers]) == (1024, ["dense"] + ["moe"] * 3)


def test_starcoder2_slides_every_layer_by_its_window_and_gemma_reads_its_class_head_size():
    starcoder2 = _family("Starcoder2ForCausalLM", "starcoder2", sliding_window=4096)
    assert {layer.mixer for layer in starcoder2.layers} == {"sliding"} and starcoder2.sliding_window == 4096
    assert _family("GemmaForCausalLM", "gemma").head_dim == 256  # stated by no Gemma 1 file but the class


#: GLM-4.7-Flash: Glm4MoeLiteConfig's defaults (MLA attention as DeepSeek-V2's, GLM-4.5's experts), with the
#: first_k_dense_replace vLLM reads (the class's own default, mlp_layer_types, makes layer 0 dense too).
GLM_FLASH = {
    "architectures": ["Glm4MoeLiteForCausalLM"],
    "model_type": "glm4_moe_lite",
    "vocab_size": 154880,
    "hidden_size": 2048,  # not a multiple of the 20 heads: MLA heads have no one width
    "intermediate_size": 10240,
    "moe_intermediate_size": 1536,
    "num_hidden_layers": 47,
    "num_attention_heads": 20,
    "num_key_value_heads": 20,
    "n_shared_experts": 1,
    "n_routed_experts": 64,
    "num_experts_per_tok": 4,
    "first_k_dense_replace": 1,
    "kv_lora_rank": 512,
    "q_lora_rank": 768,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 192,
    "v_head_dim": 256,
    "max_position_embeddings": 202752,
}


def test_glm_4_7_flash_is_a_30b_a3b_mla_model():
    arch = c.architecture_from_config(GLM_FLASH)
    assert arch.attention == "MLA" and arch.num_kv_heads == 1 and arch.warnings == ()
    assert arch.parameters == pytest.approx(30e9, rel=0.02)  # "30B-A3B"
    embeddings = 2 * GLM_FLASH["vocab_size"] * GLM_FLASH["hidden_size"]
    assert arch.active_parameters - embeddings == pytest.approx(3e9, rel=0.1)


#: MiniCPM3-4B's shape (openbmb/MiniCPM3-4B): DeepSeek-V2's low-rank attention projections over 62 layers.
MINICPM3: dict[str, Any] = {
    "architectures": ["MiniCPM3ForCausalLM"],
    "model_type": "minicpm3",
    "hidden_size": 2560,
    "intermediate_size": 6400,
    "num_hidden_layers": 62,
    "num_attention_heads": 40,
    "num_key_value_heads": 40,
    "q_lora_rank": 768,
    "kv_lora_rank": 256,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 32,
    "v_head_dim": 64,
    "vocab_size": 73448,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_minicpm3_projects_like_mla_but_caches_every_heads_full_keys_and_values():
    """vLLM's minicpm3.py: q_a / q_b / kv_a / kv_b / o as DeepSeek-V2's, then standard Attention over all 40
    heads, keys of qk_nope + qk_rope = 96 and values padded to 96: per token a layer caches 2 x 40 x 96, not
    the 288-wide latent a calculator that reads kv_lora_rank as MLA would say (27 times less)."""
    arch = c.architecture_from_config(MINICPM3)
    assert arch.attention == "MHA" and arch.num_kv_heads == 40 and arch.head_dim == 96
    assert c.kv_cache_bytes_per_token(arch) == 62 * 2 * 40 * 96 * 2
    h, heads = 2560, 40
    queries = h * 768 + 768 + 768 * heads * 96  # q_a, its norm, q_b
    keys_values = h * (256 + 32) + 256 + 256 * heads * (64 + 64)  # kv_a (latent and rope key), its norm, kv_b
    attention = queries + keys_values + heads * 64 * h  # and o
    layer = attention + 3 * h * 6400 + 2 * h
    assert arch.parameters == 62 * layer + h + 2 * 73448 * h  # the file's vocabulary; vLLM holds 73,472 rows
    assert arch.weight_groups.total == 2 * (62 * layer + h + 2 * 73472 * h)
    assert c.valid_tensor_parallel_sizes(arch, 8) == [1, 2, 4, 8]  # 40 heads split, never replicated
    # its LoRA buffers would be MLA's projections' shapes, which kvright does not size: refused, not guessed
    with pytest.raises(c.CapacityError, match="LoRA buffers of MLA-projection layers"):
        c.lora_bytes_per_gpu(arch, c.Lora())


def test_a_wrappers_text_config_decides_the_language_models_reader():
    """Mistral3ForConditionalGeneration wraps a Mistral, or a DeepSeek-V3 (Mistral Large 3): vLLM builds the
    language model by the text config's class, so its MLA latent is what is cached, not 128 KV heads."""
    text = {k: v for k, v in GLM_FLASH.items() if k != "architectures"} | {"model_type": "deepseek_v3"}
    wrapped = {
        "architectures": ["Mistral3ForConditionalGeneration"],
        "model_type": "mistral3",
        "text_config": text,
    }
    arch = c.architecture_from_config(wrapped)
    assert arch.attention == "MLA" and arch.kv_lora_rank == 512 and arch.num_kv_heads == 1
    mistral = text | {"model_type": "mistral", "hidden_size": 2560, "num_key_value_heads": 4, "head_dim": 128}
    plain = c.architecture_from_config(wrapped | {"text_config": mistral})
    assert plain.attention == "GQA" and plain.num_kv_heads == 4


#: GLM-4-9B-chat's ChatGLM fields (as its checkpoint's config prints them).
CHATGLM = {
    "architectures": ["ChatGLMModel"],
    "model_type": "chatglm",
    "hidden_size": 4096,
    "num_layers": 40,
    "num_attention_heads": 32,
    "multi_query_attention": True,
    "multi_query_group_num": 2,
    "kv_channels": 128,
    "ffn_hidden_size": 13696,
    "padded_vocab_size": 151552,
    "seq_length": 131072,
    "add_qkv_bias": True,
    "add_bias_linear": False,
    "tie_word_embeddings": False,
}


def test_chatglm_reads_its_own_names_and_its_group_count_only_with_multi_query_attention():
    arch = c.architecture_from_config(CHATGLM)
    assert (arch.num_kv_heads, arch.head_dim, arch.max_position_embeddings) == (2, 128, 131072)
    assert arch.qkv_bias and not arch.o_bias and not arch.mlp_bias and arch.warnings == ()
    assert arch.parameters == pytest.approx(9.4e9, rel=0.02)  # "9.4B params" on GLM-4-9B-chat's model page
    assert c.architecture_from_config(CHATGLM | {"multi_query_attention": False}).num_kv_heads == 32
    biased = c.architecture_from_config(CHATGLM | {"add_bias_linear": True})
    assert biased.parameters - arch.parameters == 40 * (4096 + 2 * 13696 + 4096)  # o_proj, gate+up, down


def test_hunyuans_per_layer_lists_are_read_as_one_value_and_cross_layer_attention_is_refused():
    hunyuan = {
        "architectures": ["HunYuanMoEV1ForCausalLM"],
        "model_type": "hunyuan_v1_moe",
        **{k: v for k, v in DENSE.items() if k != "num_hidden_layers"},
        "num_hidden_layers": 2,
        "num_experts": 8,
        "moe_topk": [2, 2],
        "moe_intermediate_size": [1536, 1536],  # not read: experts and the shared MLP are intermediate_size
    }
    arch = c.architecture_from_config(hunyuan)
    assert (arch.num_experts_per_token, arch.moe_intermediate_size) == (2, 1536)
    assert arch.shared_expert_intermediate_size == 1536 and arch.qk_norm == "head"
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(hunyuan | {"moe_topk": [2, 4]})
    assert err.value.field == "moe_topk"
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(hunyuan | {"use_cla": True, "cla_share_factor": 2})
    assert err.value.field == "use_cla" and "accepted: false" in str(err.value)


#: Falcon-7B's fields (its RW-era file states no multi_query default and no ffn_hidden_size).
FALCON_7B = {
    "architectures": ["FalconForCausalLM"],
    "model_type": "falcon",
    "vocab_size": 65024,
    "hidden_size": 4544,
    "num_hidden_layers": 32,
    "num_attention_heads": 71,
    "max_position_embeddings": 2048,
}


def test_falcon_is_read_as_vllms_falcon_builds_it():
    seven = c.architecture_from_config(FALCON_7B)
    assert seven.parameters == pytest.approx(7e9, rel=0.02)  # "Falcon-7B is a 7B parameters causal decoder"
    # multi_query by FalconConfig's default: one KV head; one LayerNorm for the parallel attention and MLP;
    # a GELU MLP of 4 x hidden without a gate.
    assert (seven.num_kv_heads, seven.norms_per_layer, seven.intermediate_size) == (1, 1, 4 * 4544)
    assert not seven.mlp_gated and seven.norm_bias and seven.tie_word_embeddings
    assert c.architecture_from_config(FALCON_7B | {"multi_query": False}).num_kv_heads == 71
    forty = FALCON_7B | {"hidden_size": 8192, "num_hidden_layers": 60, "num_attention_heads": 128}
    new = c.architecture_from_config(forty | {"new_decoder_architecture": True, "num_kv_heads": 8})
    assert (new.num_kv_heads, new.norms_per_layer) == (8, 2)  # ln_attn and ln_mlp
    biased = c.architecture_from_config(FALCON_7B | {"bias": True})
    per_layer = (71 + 2) * 64 + 4544 + (4 * 4544 + 4544)  # fused QKV, dense, dense_h_to_4h, dense_4h_to_h
    assert biased.parameters - seven.parameters == 32 * per_layer


def test_exaone_3_5_is_read_from_its_own_field_names_as_the_checkpoints_code_serves_it():
    """EXAONE 3.5 7.8B's config.json (LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct): ``num_layers`` for the layer
    count, served by vLLM's exaone.py through the repository's own config class. The model card's 7.82 B."""
    arch = c.architecture_from_config(
        {
            "architectures": ["ExaoneForCausalLM"],
            "model_type": "exaone",
            "auto_map": {"AutoConfig": "configuration_exaone.ExaoneConfig"},
            "activation_function": "silu",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 102400,
            "max_position_embeddings": 32768,
            "tie_word_embeddings": False,
            "torch_dtype": "float32",
        }
    )
    assert arch.num_layers == 32 and arch.config_reader == "checkpoint"
    assert round(arch.parameters / 1e9, 2) == 7.82
    assert not any("not an architecture kvright knows" in w for w in arch.warnings)


#: Jamba's shape (ai21labs' JambaConfig defaults, which are Jamba 1.5 Mini's), scaled down: 8 layers.
JAMBA = {
    "architectures": ["JambaForCausalLM"],
    "model_type": "jamba",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 4096,
    "max_position_embeddings": 262144,
    "torch_dtype": "bfloat16",
}


def test_jamba_attends_every_period_from_its_offset_and_routes_every_other_layer():
    """vLLM's jamba.py over JambaConfig: layer i attends when i % attn_layer_period == attn_layer_offset
    (defaults 8 and 4) and is Mamba-1 otherwise; MoE when i % expert_layer_period == expert_layer_offset
    (2 and 1) over num_experts (16), dense otherwise; one expert is the dense MLP everywhere."""
    arch = c.architecture_from_config(JAMBA)
    assert [layer.mixer for layer in arch.layers] == ["mamba"] * 4 + ["full"] + ["mamba"] * 3
    assert [layer.ffn for layer in arch.layers] == ["dense", "moe"] * 4
    assert (arch.num_experts, arch.num_experts_per_token, arch.moe_intermediate_size) == (16, 2, 1024)
    moved = c.architecture_from_config(JAMBA | {"attn_layer_period": 4, "attn_layer_offset": 1})
    assert [i for i, layer in enumerate(moved.layers) if layer.mixer == "full"] == [1, 5]
    dense = c.architecture_from_config(JAMBA | {"num_experts": 1})
    assert {layer.ffn for layer in dense.layers} == {"dense"} and dense.num_experts == 0
    # Attention KV only in the attention layer: 2 x 2 heads x 64 x 2 bytes.
    assert c.kv_cache_bytes_per_token(arch) == 512


def test_jambas_mamba_1_state_and_weights_are_what_its_mixer_builds():
    """The state (vLLM mamba1_state_shape): a conv of inner x (d_conv - 1) and inner x d_state per sequence,
    inner = mamba_expand x hidden, split by TP. The weights of one Mamba layer (vLLM's MambaMixer): in_proj
    (hidden -> 2 inner), conv1d (+ bias), x_proj (inner -> dt_rank + 2 d_state), dt_proj (+ bias), A, D,
    out_proj, and the dt/B/C RMSNorms; mamba_dt_rank "auto" is ceil(hidden / 16)."""
    arch = c.architecture_from_config(JAMBA)
    inner, state, kernel, rank = 1024, 16, 4, 32
    assert c.memory.state_bytes_per_sequence(arch, 1) == (inner * (kernel - 1) + inner * state) * 2
    assert c.memory.state_bytes_per_sequence(arch, 2) * 2 == c.memory.state_bytes_per_sequence(arch, 1)
    mamba = (
        512 * 2 * inner + inner * kernel + inner + inner * (rank + 2 * state) + rank * inner + inner
        + inner * state + inner + inner * 512 + rank + 2 * state
    )
    attention = 512 * 512 * 2 + 2 * 512 * 128
    as_attention = c.architecture_from_config(JAMBA | {"attn_layer_period": 1, "attn_layer_offset": 0})
    assert arch.parameters - as_attention.parameters == 7 * (mamba - attention)
    biased = c.architecture_from_config(JAMBA | {"mamba_proj_bias": True, "mamba_conv_bias": False})
    assert biased.parameters - arch.parameters == 7 * (2 * inner + 512 - inner)
    assert c.architecture_from_config(JAMBA | {"mamba_dt_rank": 32}).parameters == arch.parameters


def test_jamba_refuses_an_offset_past_its_period_and_names_tp_sizes_its_mamba_cannot_split():
    with pytest.raises(c.ConfigError, match="'attn_layer_offset': is 8; expected below its period, 8"):
        c.architecture_from_config(JAMBA | {"attn_layer_offset": 8})
    # 8 heads of 128 over a 1028-wide stream: TP 8 splits the heads, not the 1028 inner channels.
    odd = c.architecture_from_config(JAMBA | {"hidden_size": 1028, "head_dim": 128, "mamba_expand": 1})
    assert "does not divide the 1028 inner channels of jamba's Mamba layers" in (
        c.tensor_parallel_error(odd, 8) or ""
    )
    assert 8 not in c.valid_tensor_parallel_sizes(odd, 8) and 4 in c.valid_tensor_parallel_sizes(odd, 8)


#: Falcon-H1-0.5B's config.json as Megatron-Bridge's tests quote it (tiiuae/Falcon-H1-0.5B), its μP
#: multipliers left out (scalars, no weights), with the mamba_d_ssm its converter writes (heads x head dim).
FALCON_H1_05B = {
    "architectures": ["FalconH1ForCausalLM"],
    "model_type": "falcon_h1",
    "attention_bias": False,
    "head_dim": 64,
    "hidden_size": 1024,
    "intermediate_size": 2048,
    "mamba_conv_bias": True,
    "mamba_d_conv": 4,
    "mamba_d_head": 64,
    "mamba_d_ssm": 1536,
    "mamba_d_state": 128,
    "mamba_expand": 2,
    "mamba_n_groups": 1,
    "mamba_n_heads": 24,
    "mamba_proj_bias": False,
    "mamba_rms_norm": False,
    "max_position_embeddings": 16384,
    "mlp_bias": False,
    "num_attention_heads": 8,
    "num_hidden_layers": 36,
    "num_key_value_heads": 2,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 32784,
}


def test_falcon_h1_runs_attention_and_mamba_side_by_side_in_every_layer():
    """vLLM's FalconH1ParallelHybrid: each layer an attention (KV cache) and a Mamba-2 mixer (state) on the
    same input, then the MLP: two entries a layer, so 36 attention caches and 36 states; the pipeline cuts
    whole layers; three all-reduces a layer at TP > 1."""
    arch = c.architecture_from_config(FALCON_H1_05B)
    assert (arch.num_decoder_layers, arch.num_layers, arch.layers_per_block) == (36, 72, 2)
    assert dict(arch.mixer_counts) == {"full": 36, "mamba": 36}
    assert [(layer.mixer, layer.ffn) for layer in arch.layers[:2]] == [("full", "none"), ("mamba", "dense")]
    assert arch.parameters == pytest.approx(0.52e9, rel=0.01)  # "Falcon-H1-0.5B"
    assert c.kv_cache_bytes_per_token(arch) == 36 * 2 * 2 * 64 * 2
    conv, recurrent = (1536 + 2 * 128) * 3, 24 * 64 * 128
    assert c.memory.state_bytes_per_sequence(arch, 1) == (conv + recurrent) * 2
    stages = c.pipeline_stages(arch, 5)  # 36 layers over 5 stages: 7, 7, 7, 8, 7 (vLLM's get_pp_indices)
    assert [stage.stop - stage.start for stage in stages] == [14, 14, 14, 16, 14]
    assert [stage.arch.first_layer for stage in stages] == [0, 7, 14, 21, 29]
    assert all(stage.arch.layers[0].mixer == "full" for stage in stages)  # a stage starts a whole layer
    assert all(stage.arch.layers[-1].ffn == "dense" for stage in stages)  # and ends one
    assert "exceeds the 36 layers" in (
        c.layout_error(arch, c.Layout(pipeline_parallel_size=37, gpus_per_node=8)) or ""
    )


def test_falcon_h1_reads_its_mamba_switches_and_refuses_heads_that_do_not_fill_its_width():
    arch = c.architecture_from_config(FALCON_H1_05B)
    normed = c.architecture_from_config(FALCON_H1_05B | {"mamba_rms_norm": True, "mamba_proj_bias": True})
    in_width = 2 * 1536 + 2 * 128 + 24
    assert normed.parameters - arch.parameters == 36 * (1536 + in_width + 1024)
    biased = c.architecture_from_config(FALCON_H1_05B | {"attention_bias": True, "mlp_bias": True})
    assert biased.parameters == arch.parameters  # vLLM builds attention and MLP without biases
    # transformers' FalconH1Config refuses a Mamba width its heads do not fill (1024 by default, here).
    without = {k: v for k, v in FALCON_H1_05B.items() if k != "mamba_d_ssm"}
    with pytest.raises(c.ConfigError, match="'mamba_d_head': is 64; expected the 1024 inner channels"):
        c.architecture_from_config(without)


#: Mamba-Codestral-7B's shape (Mamba2Config names): 64 Mamba-2 layers, no attention, no MLP.
CODESTRAL_MAMBA = {
    "architectures": ["Mamba2ForCausalLM"],
    "model_type": "mamba2",
    "hidden_size": 4096,
    "num_hidden_layers": 64,
    "num_heads": 128,
    "head_dim": 64,
    "n_groups": 8,
    "state_size": 128,
    "expand": 2,
    "conv_kernel": 4,
    "vocab_size": 32768,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_a_model_of_mamba_layers_alone_has_no_kv_per_token_and_one_state_block_a_request():
    """vLLM's Mamba2ForCausalLM is attention-free: its num_heads are the mixer's, TP splits those; vLLM
    turns prefix caching off for attention-free classes by default, so each request holds one block of
    max_model_len tokens (tests/conformance/test_layer_kinds.py reads it from an engine)."""
    arch = c.architecture_from_config(CODESTRAL_MAMBA)
    assert arch.parameters == pytest.approx(7.29e9, rel=0.01)  # Mamba-Codestral-7B-v0.1
    assert arch.attention_free and arch.num_attention_layers == 0
    assert c.kv_cache_bytes_per_token(arch) == 0
    assert c.valid_tensor_parallel_sizes(arch, 8) == [1, 2, 4, 8]
    layout = c.kv_cache_layout(arch, max_model_len=4096)
    assert (layout.block_size, layout.state_blocks, layout.blocks_per_sequence(4096)) == (4096, 1, 1)
    state = ((8192 + 2 * 8 * 128) * 3 + 128 * 64 * 128) * 2  # conv (inner + 2 groups x state) and SSM
    assert c.memory.state_bytes_per_sequence(arch, 1) == state


def test_mamba_1_and_falcon_mamba_read_their_own_names():
    """MambaConfig / FalconMambaConfig: Mamba-1 over the intermediate_size a file states (else expand x
    hidden), time_step_rank "auto" = ceil(hidden / 16); Mamba ties its embeddings by default; FalconMamba's
    dt/B/C norms have no weights."""
    falcon_mamba_7b = {
        "architectures": ["FalconMambaForCausalLM"],
        "model_type": "falcon_mamba",
        "hidden_size": 4096,
        "intermediate_size": 8192,
        "num_hidden_layers": 64,
        "state_size": 16,
        "conv_kernel": 4,
        "expand": 16,
        "time_step_rank": 256,
        "use_bias": False,
        "use_conv_bias": True,
        "tie_word_embeddings": False,
        "vocab_size": 65024,
        "torch_dtype": "bfloat16",
    }
    arch = c.architecture_from_config(falcon_mamba_7b)
    assert arch.parameters == pytest.approx(7.27e9, rel=0.01)  # falcon-mamba-7b
    assert arch.state is not None and (arch.state.kind, arch.state.conv_channels) == ("mamba1", 8192)
    auto = c.architecture_from_config(falcon_mamba_7b | {"time_step_rank": "auto"})
    assert auto.state is not None and auto.state.time_step_rank == 256
    mamba = c.architecture_from_config(
        {k: v for k, v in falcon_mamba_7b.items() if k not in ("tie_word_embeddings", "intermediate_size")}
        | {"architectures": ["MambaForCausalLM"], "model_type": "mamba", "expand": 2}
    )
    assert mamba.tie_word_embeddings and mamba.state is not None and mamba.state.conv_channels == 8192


def test_dbrx_reads_its_heads_and_experts_from_its_own_objects():
    """DBRX (databricks/dbrx-instruct's config.json): d_model, n_heads, n_layers at the top, KV heads in
    attn_config, the 16 experts of 10752 (top 4) in ffn_config; vLLM's dbrx.py removes every LayerNorm bias.
    Databricks: "132B total parameters of which 36B parameters are active"."""
    dbrx = {
        "architectures": ["DbrxForCausalLM"],
        "model_type": "dbrx",
        "d_model": 6144,
        "n_heads": 48,
        "n_layers": 40,
        "max_seq_len": 32768,
        "vocab_size": 100352,
        "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "rope_theta": 500000},
        "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4},
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    arch = c.architecture_from_config(dbrx)
    assert arch.parameters == pytest.approx(132e9, rel=0.01)
    assert arch.active_parameters == pytest.approx(36e9, rel=0.02)
    assert (arch.num_kv_heads, arch.num_experts, arch.num_experts_per_token) == (8, 16, 4)
    assert arch.max_position_embeddings == 32768 and not arch.warnings
    # DbrxConfig's defaults where an object leaves a field out: one KV head, 4 experts, top 1.
    bare = c.architecture_from_config(dbrx | {"attn_config": {}, "ffn_config": {}})
    assert (bare.num_kv_heads, bare.num_experts, bare.num_experts_per_token) == (1, 4, 1)
    with pytest.raises(c.ConfigError, match="'ffn_config': is 'x'; expected an object"):
        c.architecture_from_config(dbrx | {"ffn_config": "x"})
    with pytest.raises(c.ConfigError, match="DbrxConfig refuses"):  # its config class raises, so vLLM does
        c.architecture_from_config(dbrx | {"tie_word_embeddings": True})


def _lfm2(
    hidden: int, heads: int, layers: int, attending: list[int], ff_dim: int, adjust: bool
) -> dict[str, Any]:
    """An LFM2 file's fields (Liquid AI's checkpoints state these names; ``block_ff_dim`` is the MLP width
    before the 2/3 adjustment, ``full_attn_idxs`` the attention layers)."""
    return {
        "architectures": ["Lfm2ForCausalLM"],
        "model_type": "lfm2",
        "vocab_size": 65536,
        "hidden_size": hidden,
        "block_dim": hidden,
        "conv_dim": hidden,
        "block_ff_dim": ff_dim,
        "block_auto_adjust_ff_dim": adjust,
        "block_ffn_dim_multiplier": 1.0,
        "block_multiple_of": 256,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": 8,
        "full_attn_idxs": attending,
        "conv_L_cache": 3,
        "max_position_embeddings": 128000,
        "tie_embedding": True,
        "torch_dtype": "bfloat16",
    }


@pytest.mark.parametrize(
    ("fields", "published", "mlp"),
    [
        # The shapes of LFM2-350M, -700M and -1.2B (16 layers, 6 of them attention) and their model cards'
        # parameter counts, to the parameter; LFM2-2.6B (2.57 B) states an MLP width that is not adjusted.
        (_lfm2(1024, 16, 16, [2, 5, 8, 10, 12, 14], 6656, True), 354_483_968, 4608),
        (_lfm2(1536, 24, 16, [2, 5, 8, 10, 12, 14], 10240, True), 742_489_344, 6912),
        (_lfm2(2048, 32, 16, [2, 5, 8, 10, 12, 14], 12288, True), 1_170_340_608, 8192),
        (_lfm2(2048, 32, 30, [2, 5, 9, 13, 17, 21, 24, 27], 10752, False), 2.57e9, 10752),
    ],
    ids=["lfm2-350m", "lfm2-700m", "lfm2-1.2b", "lfm2-2.6b"],
)
def test_lfm2_runs_short_convolutions_beside_attention_and_sizes_its_mlp_as_its_class_does(
    fields: dict[str, Any], published: float, mlp: int
) -> None:
    """vLLM's lfm2.py: layers in full_attn_idxs attend (q/k norms per head), the others run a short
    convolution (in_proj to 3 x conv_dim, a conv over conv_L_cache tokens, out_proj); the MLP is block_ff_dim
    cut to 2/3 and rounded up to block_multiple_of when block_auto_adjust_ff_dim says so; the LM head is tied.
    The state a conv layer keeps: the last conv_L_cache - 1 inputs of each channel, split by TP, no recurrent
    part (2 x 2048 x 2 bytes for the 1.2B) -- tests/conformance/test_layer_kinds.py reads an engine's."""
    arch = c.architecture_from_config(fields)
    assert arch.parameters == pytest.approx(published, rel=0 if isinstance(published, int) else 0.01)
    assert {layer.ffn_width for layer in arch.layers} == {mlp}
    attending = fields["full_attn_idxs"]
    assert [i for i, layer in enumerate(arch.layers) if layer.mixer == "full"] == attending
    assert arch.num_state_layers == len(arch.layers) - len(attending)
    assert arch.tie_word_embeddings and arch.qk_norm == "head"
    hidden = fields["hidden_size"]
    assert c.memory.state_bytes_per_sequence(arch, 1) == hidden * 2 * 2
    assert c.memory.state_bytes_per_sequence(arch, 2) == hidden * 2
    # KV only in the attention layers: 2 x 8 heads x 64 x 2 bytes each.
    assert c.kv_cache_bytes_per_token(arch) == len(attending) * 2 * 8 * 64 * 2


def test_lfm2_moe_routes_after_its_dense_layers_and_always_ties_its_head():
    """vLLM's lfm2_moe.py (LFM2-8B-A1B's shape: "8.3B total, 1.5B active"): num_dense_layers dense MLPs, then
    num_experts of moe_intermediate_size, top num_experts_per_tok, a score-correction bias; conv layers as
    wide as the hidden state; vLLM ties the LM head whatever tie_embedding says (parameter_cases.json)."""
    attending = (2, 6, 10, 14, 18, 21)
    fields = {
        "architectures": ["Lfm2MoeForCausalLM"],
        "model_type": "lfm2_moe",
        "vocab_size": 65536,
        "hidden_size": 2048,
        "intermediate_size": 7168,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "layer_types": ["full_attention" if i in attending else "conv" for i in range(24)],
        "num_experts": 32,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1792,
        "num_dense_layers": 2,
        "tie_embedding": False,
        "torch_dtype": "bfloat16",
    }
    arch = c.architecture_from_config(fields)
    assert arch.parameters == pytest.approx(8.3e9, rel=0.01)
    assert arch.active_parameters == pytest.approx(1.5e9, rel=0.05)
    assert [layer.ffn for layer in arch.layers] == ["dense"] * 2 + ["moe"] * 22
    assert arch.tie_word_embeddings and arch.expert_score_bias
    assert arch.state is not None and (arch.state.kind, arch.state.conv_channels) == ("short_conv", 2048)
    with pytest.raises(c.ConfigError, match="'layer_types': is missing"):
        c.architecture_from_config({k: v for k, v in fields.items() if k != "layer_types"})


def test_lfm2_refuses_a_file_its_engine_cannot_load_and_tp_that_splits_a_channel():
    """vLLM's lfm2.py reads conv_dim and block_dim, which Lfm2Config does not define: without them the engine
    stops (AttributeError, seen from vLLM's class in the parameter probe); every layer keeps the hidden width.
    Without layer_types or full_attn_idxs every layer attends (Lfm2Config's derivation)."""
    fields = _lfm2(2048, 32, 16, [2, 5, 8, 10, 12, 14], 12288, True)
    for missing in ("conv_dim", "block_dim"):
        with pytest.raises(c.ConfigError, match=f"'{missing}': is missing"):
            c.architecture_from_config({k: v for k, v in fields.items() if k != missing})
    with pytest.raises(c.ConfigError, match="'block_dim': is 1024; expected hidden_size"):
        c.architecture_from_config(fields | {"block_dim": 1024})
    with pytest.raises(c.ConfigError, match="'layer_types': entries must be 'conv' or 'full_attention'"):
        c.architecture_from_config(fields | {"layer_types": ["conv"] * 15 + ["mamba"]})
    every = c.architecture_from_config({k: v for k, v in fields.items() if k != "full_attn_idxs"})
    assert {layer.mixer for layer in every.layers} == {"full"}
    # 8 KV heads allow TP 8; a 2052-wide conv does not split 8 ways (vLLM divides its conv state by TP).
    odd = c.architecture_from_config(fields | {"conv_dim": 2052})
    assert "does not divide the 2052 inner channels of lfm2's short-convolution layers" in (
        c.tensor_parallel_error(odd, 8) or ""
    )
    assert 4 in c.valid_tensor_parallel_sizes(odd, 8) and 8 not in c.valid_tensor_parallel_sizes(odd, 8)


#: openai-community/gpt2 and facebook/opt-125m as their config.json files state them (the fields vLLM reads).
GPT2 = {
    "architectures": ["GPT2LMHeadModel"],
    "model_type": "gpt2",
    "vocab_size": 50257,
    "n_positions": 1024,
    "n_ctx": 1024,
    "n_embd": 768,
    "n_layer": 12,
    "n_head": 12,
    "activation_function": "gelu_new",
}
OPT_125M = {
    "architectures": ["OPTForCausalLM"],
    "model_type": "opt",
    "vocab_size": 50272,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "ffn_dim": 3072,
    "num_attention_heads": 12,
    "max_position_embeddings": 2048,
    "word_embed_proj_dim": 768,
    "do_layer_norm_before": True,
    "enable_bias": True,
    "torch_dtype": "float16",
}


def test_gpt2_and_opt_have_learned_positions_layernorm_biases_and_an_ungated_mlp():
    """vLLM's gpt2.py and opt.py: a learned position table (GPT-2's n_positions rows, OPT's two more), q/k/v/o
    and both MLP projections with biases (OPT's by enable_bias), LayerNorms with biases, an up/down MLP of
    n_inner (4 x n_embd when null) or ffn_dim, tied embeddings. GPT-2 small is 124,439,808 parameters and
    OPT-125M 125,239,296 (each count to the parameter); both attend with every head a KV head."""
    gpt2 = c.architecture_from_config(GPT2)
    assert gpt2.parameters == 124_439_808
    assert (gpt2.max_model_len, gpt2.num_kv_heads, gpt2.head_dim) == (1024, 12, 64)
    assert gpt2.layers[0].ffn_width == 4 * 768 and not gpt2.mlp_gated and gpt2.tie_word_embeddings
    assert c.kv_cache_bytes_per_token(gpt2) == 12 * 2 * 12 * 64 * 2
    opt = c.architecture_from_config(OPT_125M)
    assert opt.parameters == 125_239_296 and opt.max_model_len == 2048
    # OPT's post-norm checkpoints have no final norm; enable_bias false drops every projection's bias.
    post = c.architecture_from_config(OPT_125M | {"do_layer_norm_before": False})
    assert opt.parameters - post.parameters == 2 * 768
    plain = c.architecture_from_config(OPT_125M | {"enable_bias": False})
    assert opt.parameters - plain.parameters == 12 * (4 * 768 + 3072 + 768)


#: facebook/opt-350m: embeds in 512, projects to its 1,024-wide layers and back (project_in, project_out), and
#: is a post-norm checkpoint (no final norm).
OPT_350M = OPT_125M | {
    "hidden_size": 1024,
    "num_hidden_layers": 24,
    "ffn_dim": 4096,
    "num_attention_heads": 16,
    "word_embed_proj_dim": 512,
    "do_layer_norm_before": False,
}


def test_opt_350m_embeds_in_its_own_width_and_projects_in_and_out_of_the_layers():
    """vLLM's opt.py: the embedding and the (tied) LM head are word_embed_proj_dim wide, project_in and
    project_out replicated linears without bias. OPT-350M is 331,196,416 parameters, its card's count."""
    opt = c.architecture_from_config(OPT_350M)
    assert opt.parameters == 331_196_416
    assert opt.embedding_width == 512 and opt.parameter_groups.embedding == 50272 * 512
    assert opt.parameter_groups.replicated >= 2 * 1024 * 512 + 2050 * 1024  # the projections, the positions
    same = c.architecture_from_config(OPT_350M | {"word_embed_proj_dim": 1024})
    assert same.embedding_width == 0 and same.parameter_groups.embedding == 50272 * 1024
    untied = c.architecture_from_config(OPT_350M | {"tie_word_embeddings": False})
    assert untied.parameters - opt.parameters == 50272 * 512


def test_gpt_j_and_bloom_are_read_as_their_vllm_classes_build_them():
    """vLLM's gpt_j.py: q/k/v/out without biases, fc_in/fc_out (n_inner, else 4 x n_embd) with, one LayerNorm
    a layer for attention and MLP in parallel, an untied LM head with a bias (vLLM asserts it is untied).
    bloom.py: ALiBi (no position table), a LayerNorm right after the embedding, biases everywhere, a 4 x
    hidden MLP, tied; BloomConfig takes n_embed for hidden_size. bigscience/bloom-560m is 559,214,592
    parameters to the parameter; EleutherAI/gpt-j-6b 6,050,882,784, as Transformers' GPTJForCausalLM builds it
    on the meta device (the card's 6,053,381,344 is 2,498,560 more than that class has)."""
    gptj = {
        "architectures": ["GPTJForCausalLM"],
        "model_type": "gptj",
        "vocab_size": 50400,
        "n_positions": 2048,
        "n_embd": 4096,
        "n_layer": 28,
        "n_head": 16,
        "rotary_dim": 64,
        "n_inner": None,
        "torch_dtype": "float16",
    }
    arch = c.architecture_from_config(gptj)
    assert arch.parameters == 6_050_882_784 and arch.max_model_len == 2048
    assert arch.lm_head_bias and not arch.tie_word_embeddings and arch.norms_per_layer == 1
    with pytest.raises(c.ConfigError, match="'tie_word_embeddings': is true; expected false"):
        c.architecture_from_config(gptj | {"tie_word_embeddings": True})
    bloom = {
        "architectures": ["BloomForCausalLM"],
        "model_type": "bloom",
        "vocab_size": 250880,
        "n_embed": 1024,
        "n_layer": 24,
        "num_attention_heads": 16,
        "torch_dtype": "float16",
    }
    arch = c.architecture_from_config(bloom)
    assert arch.parameters == 559_214_592 and arch.embedding_norm and arch.position_embeddings == 0
    assert arch.layers[0].ffn_width == 4 * 1024 and arch.tie_word_embeddings


def test_pythia_and_starcoder_are_read_as_the_transformers_backend_builds_them():
    """vLLM 0.32 serves GPT-NeoX and GPTBigCode through its Transformers backend, so transformers' modeling
    code builds them: GPT-NeoX (EleutherAI/pythia-70m: 70,426,624 parameters, to the parameter) has biases on
    query_key_value and dense by attention_bias, a biased up/down MLP, LayerNorms with biases, an untied
    embed_out. Read as a gated Llama of the same fields, as an unknown class was, it was 9 % too large.
    GPTBigCode (bigcode/starcoder: 15.5 B) caches one KV head (multi_query), learns 8192 positions and
    has biases everywhere."""
    pythia = {
        "architectures": ["GPTNeoXForCausalLM"],
        "model_type": "gpt_neox",
        "vocab_size": 50304,
        "hidden_size": 512,
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "intermediate_size": 2048,
        "max_position_embeddings": 2048,
        "rotary_pct": 0.25,
        "use_parallel_residual": True,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
    }
    arch = c.architecture_from_config(pythia)
    assert arch.parameters == 70_426_624 and arch.warnings == ()
    assert not arch.mlp_gated and arch.num_kv_heads == 8
    starcoder = {
        "architectures": ["GPTBigCodeForCausalLM"],
        "model_type": "gpt_bigcode",
        "vocab_size": 49152,
        "n_embd": 6144,
        "n_layer": 40,
        "n_head": 48,
        "n_positions": 8192,
        "n_inner": 24576,
        "multi_query": True,
    }
    arch = c.architecture_from_config(starcoder)
    assert arch.parameters == pytest.approx(15.5e9, rel=0.01)
    assert (arch.num_kv_heads, arch.max_model_len, arch.position_embeddings) == (1, 8192, 8192)
    # One KV head of 128 a layer: 40 x 2 x 128 x 2 bytes a token.
    assert c.kv_cache_bytes_per_token(arch) == 40 * 2 * 128 * 2


def test_arcee_jais2_and_phi_have_ungated_mlps():
    """Three classes vLLM 0.32 serves through its Transformers backend, which had been read as gated Llamas
    with a warning (about a fifth too large; the conformance probe of unknown classes found them once it took
    the Transformers backend's classes too): Arcee (AFM) and Jais2 are a Llama's attention over an up/down
    ReLU^2 MLP, biases by attention_bias and mlp_bias (Jais2's on by default, its norms LayerNorms with
    biases); Phi-1/1.5/2 has biases everywhere, fc1/fc2 and one LayerNorm a layer (microsoft/phi-2: 2.7 B)."""
    base = {
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "intermediate_size": 4096,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
    }
    llama = c.architecture_from_config(base | {"architectures": ["LlamaForCausalLM"], "model_type": "llama"})
    arcee = c.architecture_from_config(base | {"architectures": ["ArceeForCausalLM"], "model_type": "arcee"})
    assert llama.parameters - arcee.parameters == 4 * 1024 * 4096 and arcee.warnings == ()
    jais2 = c.architecture_from_config(base | {"architectures": ["Jais2ForCausalLM"], "model_type": "jais2"})
    # q, k, v, o and up/down biases, and a bias on each of the 2 x 4 + 1 LayerNorms.
    biases = 4 * (1024 + 2 * 256 + 1024 + 4096 + 1024) + 9 * 1024
    assert jais2.parameters - arcee.parameters == biases
    phi2 = {
        "architectures": ["PhiForCausalLM"],
        "model_type": "phi",
        "hidden_size": 2560,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "intermediate_size": 10240,
        "vocab_size": 51200,
        "max_position_embeddings": 2048,
        "partial_rotary_factor": 0.4,
        "torch_dtype": "float16",
    }
    arch = c.architecture_from_config(phi2)
    assert arch.parameters == pytest.approx(2.78e9, rel=0.01) and arch.norms_per_layer == 1
    # qk_layernorm: a LayerNorm with a bias per head on queries and keys, 4 x 80 a layer
    normed = c.architecture_from_config(phi2 | {"qk_layernorm": True})
    assert normed.parameters - arch.parameters == 32 * 4 * 80


#: GLM-4.5V's config as transformers 5.7.0 prints it (Glm4vMoeConfig; a public model report of the
#: checkpoint), the fields the readers use.
GLM_4_5V: dict[str, Any] = {
    "architectures": ["Glm4vMoeForConditionalGeneration"],
    "model_type": "glm4v_moe",
    "dtype": "bfloat16",
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "glm4v_moe_text",
        "attention_bias": True,
        "first_k_dense_replace": 1,
        "head_dim": 128,
        "hidden_size": 4096,
        "intermediate_size": 10944,
        "max_position_embeddings": 65536,
        "moe_intermediate_size": 1408,
        "n_group": 1,
        "n_routed_experts": 128,
        "n_shared_experts": 1,
        "norm_topk_prob": True,
        "num_attention_heads": 96,
        "num_experts_per_tok": 8,
        "num_hidden_layers": 46,
        "num_key_value_heads": 8,
        "partial_rotary_factor": 0.5,
        "rope_parameters": {
            "mrope_section": [8, 12, 12],
            "partial_rotary_factor": 0.5,
            "rope_theta": 10000.0,
            "rope_type": "default",
        },
        "tie_word_embeddings": False,
        "topk_group": 1,
        "use_qk_norm": False,
        "vocab_size": 151552,
    },
    "vision_config": {
        "model_type": "glm4v_moe_vision",
        "attention_bias": False,
        "depth": 24,
        "hidden_size": 1536,
        "image_size": 336,
        "in_channels": 3,
        "intermediate_size": 10944,
        "num_heads": 12,
        "out_hidden_size": 4096,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
}


def test_glm_v_is_a_glm_language_model_beside_its_vision_tower_to_the_parameter():
    """vLLM's glm4_1v.py builds Glm4MoeForCausalLM (GLM-4.5V, GLM-4.6V) or Glm4ForCausalLM (GLM-4.1V,
    GLM-4.6V-Flash) from text_config, beside its own vision tower (test_parameter_counts.py holds both
    halves to the classes). The totals are the hub's safetensors counts (the `safetensors.total` that
    llmfit's hf_models.json records: GLM-4.5V 107,710,933,120; GLM-4.1V-9B-Thinking and GLM-4.6V-Flash
    10,292,777,472)."""
    glm45v = c.architecture_from_config(GLM_4_5V)
    assert glm45v.parameters == 107_710_933_120 and glm45v.warnings == ()
    assert glm45v.parameter_groups.vision == 858_681_856
    assert glm45v.model_type == "glm4_moe" and glm45v.head_dim == 128 and glm45v.num_kv_heads == 8
    assert glm45v.max_model_len == 65536
    # GLM-4.1V: a GLM-4-9B language model (q/k/v biases, four norms a layer) and Glm4vVisionConfig's own tower
    # (the file states its fields; these are the class's defaults, which are GLM-4.1V's).
    glm41v = {
        "architectures": ["Glm4vForConditionalGeneration"],
        "model_type": "glm4v",
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "glm4v_text",
            "attention_bias": True,
            "hidden_size": 4096,
            "intermediate_size": 13696,
            "num_hidden_layers": 40,
            "num_attention_heads": 32,
            "num_key_value_heads": 2,
            "vocab_size": 151552,
            "max_position_embeddings": 65536,
            "tie_word_embeddings": False,
        },
        "vision_config": {},
    }
    arch = c.architecture_from_config(glm41v)
    assert arch.parameters == 10_292_777_472 and arch.warnings == ()
    assert arch.norms_per_layer == 4 and arch.head_dim == 128
    # Glm4vTextConfig has no attention_bias: a file without it gets no q/k/v biases in vLLM's glm4.py.
    del glm41v["text_config"]["attention_bias"]
    assert c.architecture_from_config(glm41v).parameters == 10_292_777_472 - 40 * (4096 + 2 * 2 * 128)
    # A text_config without a model type is the wrapper class's default one.
    text = {k: v for k, v in GLM_4_5V["text_config"].items() if k != "model_type"}
    untyped = GLM_4_5V | {"text_config": text}
    assert c.architecture_from_config(untyped).parameters == glm45v.parameters


def test_glm_v_runs_its_vision_tower_whole_per_rank_where_tp_would_split_its_12_heads():
    """vLLM shards GLM-V's tower by TP under the default ``--mm-encoder-tp-mode weights``
    (Glm4vVisionAttention: ``divide(num_heads, tp)``), so GLM-4.5V at TP 8 stops at load ("AssertionError: 12
    is not divisible by 8", vllm-project/vllm#24004) although its text model's 96 heads and 8 KV heads split.
    Under ``--mm-encoder-tp-mode data`` (Glm4vForConditionalGeneration supports it) the tower runs whole on
    every rank: kvright writes that flag at such a TP degree, and counts the tower whole on each GPU."""
    arch = c.architecture_from_config(GLM_4_5V)
    assert arch.vision_tp_widths == (("{} vision attention heads", 12),)
    assert c.valid_tensor_parallel_sizes(arch, 8) == [1, 2, 4, 8]
    assert c.tensor_parallel_error(arch, 8) is None
    assert [c.encoder_tp_mode(arch, tp) for tp in (1, 2, 4, 8)] == ["weights", "weights", "weights", "data"]
    # Per GPU at TP 8: the text model an eighth, the tower whole (7/8 of it more than sharded).
    tower = arch.weight_groups.vision
    assert tower > 1e9  # about 0.9 B parameters in bf16
    text_only = dataclasses.replace(arch, vision_tp_widths=())  # the same weights, the tower sharded
    extra = c.weight_bytes_per_gpu(arch, 8) - c.weight_bytes_per_gpu(text_only, 8)
    assert extra == pytest.approx(tower * 7 / 8, abs=2)
    assert c.weight_bytes_per_gpu(arch, 4) == c.weight_bytes_per_gpu(text_only, 4)
    h100 = c.gpu_spec("h100-sxm")
    pinned = c.plan(arch, h100, c.Workload(max_model_len=8192, prompt_tokens=2048, output_tokens=256),
                    c.SLO(tpot_seconds=0.05), c.Limits(tensor_parallel_size=8))  # fmt: skip
    assert pinned.feasible, pinned.reason
    args = pinned.plan.vllm_args()
    assert args[args.index("--mm-encoder-tp-mode") + 1] == "data"
    at4 = c.plan(arch, h100, c.Workload(max_model_len=8192, prompt_tokens=2048, output_tokens=256),
                 c.SLO(tpot_seconds=0.05), c.Limits(tensor_parallel_size=4))  # fmt: skip
    assert at4.feasible and "--mm-encoder-tp-mode" not in at4.plan.vllm_args()
    sixteen = GLM_4_5V | {"vision_config": GLM_4_5V["vision_config"] | {"num_heads": 16}}
    assert c.encoder_tp_mode(c.architecture_from_config(sixteen), 8) == "weights"
    default = GLM_4_5V | {"vision_config": {}}
    assert c.architecture_from_config(default).vision_tp_widths[0][1] == 12  # Glm4vVisionConfig's
    wrong = GLM_4_5V | {"vision_config": GLM_4_5V["vision_config"] | {"num_heads": "x"}}
    with pytest.raises(c.ConfigError, match=r"vision_config\.num_heads"):
        c.architecture_from_config(wrong)


@pytest.mark.parametrize("model_type", ["qwen2_vl", "qwen2_5_vl"])
def test_qwen_vl_text_models_bias_q_k_and_v_as_vllms_qwen2_does(model_type):
    """vLLM builds Qwen2-VL's and Qwen2.5-VL's text model as Qwen2ForCausalLM, whose q/k/v projections carry
    a bias whatever the file says (a flat file states no attention_bias): 28 layers of 3,584 + 2 x 512 for
    Qwen2.5-VL-7B, the text model Qwen2.5-7B's 7,615,616,512 to the parameter."""
    path = Path(__file__).resolve().parents[1] / "data" / "configs" / "qwen2.5-vl-7b-instruct" / "config.json"
    cfg = json.loads(path.read_text()) | {"model_type": model_type}
    arch = c.architecture_from_config(cfg)
    assert arch.qkv_bias
    assert arch.parameters - arch.vision_parameters == 7_615_616_512


def test_qwen3_vl_text_models_norm_q_and_k_per_head_as_qwen3s_layers_do():
    """Qwen3-VL's dense text model (text_config model_type qwen3_vl_text) is built from vLLM's Qwen3 layers:
    a q and a k RMSNorm of head_dim in every layer, as the Qwen3 text model of the same shape has."""
    text = {
        "model_type": "qwen3_vl_text",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 262144,
        "tie_word_embeddings": False,
    }
    vl = c.architecture_from_config(
        {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", "text_config": text}
    )
    plain = c.architecture_from_config(text | {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"})
    assert vl.qk_norm == plain.qk_norm == "head"
    assert vl.parameters - vl.vision_parameters == plain.parameters


def test_flex_olmo_is_olmoe_with_its_attention_bias_read_and_seven_experts_by_default():
    """FlexOLMo (transformers' FlexOlmo through vLLM's Transformers backend): OLMoE's modules, post-norm, so
    the same parameters as an OLMoE of the same fields, but attention_bias puts a bias on q, k, v and o, which
    vLLM's own olmoe.py ignores. FlexOlmoConfig routes five of seven experts where a file says nothing."""
    fields = {
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1024,
        "max_position_embeddings": 4096,
        "num_experts": 8,
        "num_experts_per_tok": 2,
    }
    flex = {"architectures": ["FlexOlmoForCausalLM"], "model_type": "flex_olmo"}
    olmoe = {"architectures": ["OlmoeForCausalLM"], "model_type": "olmoe"}
    assert (
        c.architecture_from_config(fields | flex).parameters
        == c.architecture_from_config(fields | olmoe).parameters
    )
    biased = {"attention_bias": True}
    q, kv = 4 * 64, 2 * 64
    assert c.architecture_from_config(fields | flex | biased).parameters - c.architecture_from_config(
        fields | olmoe | biased
    ).parameters == 4 * (q + 2 * kv + 256)
    unstated = {k: v for k, v in fields.items() if k not in ("num_experts", "num_experts_per_tok")}
    arch = c.architecture_from_config(unstated | flex)
    assert (arch.num_experts, arch.num_experts_per_token) == (7, 5)


def test_telechat2_is_a_llama_with_biases_on_its_output_and_down_projections_alone():
    """vLLM's telechat2.py: a Llama read through n_layer / n_head / ffn_hidden_size, built with biases and
    then stripped of the q/k/v and gate/up ones, whatever bias keys the file has. TeleChat3 is vLLM's
    Llama."""
    fields = {"hidden_size": 256, "vocab_size": 1024, "max_position_embeddings": 4096}
    telechat2 = {"architectures": ["TeleChat2ForCausalLM"], "model_type": "telechat2"}
    names = {"n_layer": 4, "n_head": 4, "ffn_hidden_size": 512, "num_key_value_heads": 2}
    llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    standard = {"num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 512}
    standard |= {"num_key_value_heads": 2}
    arch = c.architecture_from_config(fields | telechat2 | names)
    plain = c.architecture_from_config(fields | llama | standard)
    assert (arch.num_layers, arch.num_kv_heads, arch.intermediate_size) == (4, 2, 512)
    assert arch.parameters - plain.parameters == 4 * (256 + 256)  # o_proj's and down_proj's biases
    keys = {"bias": True, "mlp_bias": True, "attention_bias": True}
    assert c.architecture_from_config(fields | telechat2 | names | keys).parameters == arch.parameters
    telechat3 = {"architectures": ["TeleChat3ForCausalLM"], "model_type": "telechat3"}
    for extra in ({}, {"attention_bias": True, "mlp_bias": True}):
        assert (
            c.architecture_from_config(fields | telechat3 | standard | extra).parameters
            == c.architecture_from_config(fields | llama | standard | extra).parameters
        )


@pytest.mark.parametrize(
    ("architecture", "model_type", "fields", "more_than_llama"),
    [
        # vLLM's internlm2.py and minicpm.py: no biases whatever the keys say (InternLM2's wqkv / wo / w1-w3).
        ("InternLM2ForCausalLM", "internlm2", {"bias": True}, 0),
        ("MiniCPMForCausalLM", "minicpm", {"attention_bias": True, "scale_emb": 12}, 0),
        # MiMo is vLLM's Qwen2: q/k/v biased always.
        ("MiMoForCausalLM", "mimo", {}, L * (Q + 2 * KV_WIDTH)),
        # Orion: LayerNorms with a bias (two a layer and the final one), no projection biases.
        ("OrionForCausalLM", "orion", {"attention_bias": True}, 2 * L * H + H),
        # StableLM: q/k/v biased by use_qkv_bias, LayerNorms with a bias.
        ("StableLmForCausalLM", "stablelm", {"use_qkv_bias": True}, L * (Q + 2 * KV_WIDTH + 2 * H) + H),
        # Solar: attention_bias or bias on all four attention projections (Smaug-72B's bias), mlp_bias.
        ("SolarForCausalLM", "solar", {"bias": True}, L * (Q + 2 * KV_WIDTH + H)),
        ("SolarForCausalLM", "solar", {"mlp_bias": True}, L * (2 * W + H)),
    ],
    ids=["internlm2", "minicpm", "mimo", "orion", "stablelm", "solar-bias", "solar-mlp-bias"],
)
def test_a_llama_shaped_class_of_its_own_weighs_what_vllm_builds(
    architecture, model_type, fields, more_than_llama
):
    """Classes vLLM 0.32 serves with Llama's shape and modules of their own (their configs mostly the
    checkpoint's own code: an auto_map names it); each held to vLLM's class in test_parameter_counts.py."""
    code = {"auto_map": {"AutoConfig": f"configuration_{model_type}.Config"}}
    config = DENSE | {"architectures": [architecture], "model_type": model_type} | code | fields
    assert c.architecture_from_config(config).parameters - _llama().parameters == more_than_llama


def test_minicpms_mixture_of_experts_variant_is_refused_naming_the_field():
    config = DENSE | {"architectures": ["MiniCPMForCausalLM"], "model_type": "minicpm", "num_experts": 8}
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(config | {"num_experts_per_tok": 2})
    assert err.value.field == "num_experts" and "not read yet" in str(err.value)


def test_granite_classes_slide_and_keep_a_sink_per_head_where_the_file_has_layer_types():
    """vLLM's granite.py / granitemoe.py (``granite_layer_attn_params``): layer_types' sliding layers see
    sliding_window tokens, and every attention layer then learns a sink per head unless attention_sinks is
    false; GraniteSWAForCausalLM and GraniteMoeSWAForCausalLM are those classes under other names."""
    types = {"layer_types": ["sliding_attention", "full_attention"] * 2, "sliding_window": 64}
    types |= {"tie_word_embeddings": False}  # (GraniteSWAConfig ties by default)
    plain = _family("GraniteForCausalLM", "granite")
    swa = _family("GraniteSWAForCausalLM", "granite_swa", **types)
    assert [layer.mixer for layer in swa.layers] == ["sliding", "full"] * 2 and swa.sliding_window == 64
    assert swa.parameters - plain.parameters == L * HEADS
    assert _family("GraniteSWAForCausalLM", "granite_swa", attention_sinks=False, **types).parameters == (
        plain.parameters
    )
    assert _family("GraniteForCausalLM", "granite", **types).parameters == swa.parameters


def test_internvl_counts_its_vit_to_the_selected_layer_and_the_pixel_shuffled_projector():
    """InternVL3-8B (InternVLChatModel): InternViT-300M's class token, biased patch convolution and position
    table, 24 blocks with layer scales, and mlp1 over 2 x 2 shuffled patches: 331,552,768, the count of
    transformers' HF-format class for the same shapes (tests/conformance/test_parameter_counts.py). vLLM
    builds the blocks up to select_layer only."""
    path = Path(__file__).resolve().parents[1] / "data" / "configs" / "internvl3-8b" / "config.json"
    config = json.loads(path.read_text())
    arch = c.architecture_from_config(config)
    assert arch.vision_parameters == 331_552_768
    block = 2 * 2048 + 2 * 1024 + 4 * 1024 * 1024 + 3 * 1024 + 1024 + 2 * 1024 * 4096 + 4096 + 1024
    shorter = c.architecture_from_config(config | {"select_layer": -2})
    assert arch.vision_parameters - shorter.vision_parameters == block
    for bad in (0, 1.5, "half"):
        with pytest.raises(c.ConfigError) as err:
            c.architecture_from_config(config | {"downsample_ratio": bad})
        assert err.value.field == "downsample_ratio"
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(config | {"select_layer": 24})
    assert err.value.field == "select_layer"


def test_hy3_reads_its_expert_width_from_expert_hidden_dim_as_vllm_does():
    """vLLM's hy_v3.py: experts and each shared expert expert_hidden_dim wide, the first
    first_k_dense_replace layers dense (intermediate_size), a float32 router and expert bias, per-head q/k
    norms by qk_norm; a file without either field stops vLLM at start, so kvright refuses it naming it."""
    hy3 = DENSE | {
        "architectures": ["HYV3ForCausalLM"],
        "model_type": "hy_v3",
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_shared_experts": 1,
        "expert_hidden_dim": 256,
        "moe_intermediate_size": 999,  # transformers' name; vLLM reads expert_hidden_dim
        "first_k_dense_replace": 1,
        "qk_norm": True,
    }
    arch = c.architecture_from_config(hy3)
    assert [layer.ffn for layer in arch.layers] == ["dense", "moe", "moe", "moe"]
    assert (arch.moe_intermediate_size, arch.shared_expert_intermediate_size) == (256, 256)
    assert arch.router_dtype == "float32" and arch.expert_score_bias and arch.qk_norm == "head"
    for field in ("expert_hidden_dim", "first_k_dense_replace"):
        with pytest.raises(c.ConfigError) as err:
            c.architecture_from_config({k: v for k, v in hy3.items() if k != field})
        assert err.value.field == field and "stops at start" in str(err.value)


def test_cwm_hyperclovax_and_ax_k1_are_read_as_their_classes_build_them():
    """CWM (transformers' class through vLLM's Transformers backend): a Llama whose every 4th layer from the
    first attends fully where layer_types is unstated (CwmConfig), the rest within sliding_window.
    HyperCLOVAX (vLLM's hyperclovax.py): Llama's biases, and two post-norms a layer with use_post_norm
    (its class's default). A.X K1 (vLLM's AXK1.py): DeepSeek-V3 with a third norm a layer, its experts'
    score bias built unless the file names a top-k method other than noaux_tc."""
    cwm = _family("CwmForCausalLM", "cwm", sliding_window=64, num_hidden_layers=8)
    assert [layer.mixer for layer in cwm.layers] == ["full", "sliding", "sliding", "sliding"] * 2
    assert cwm.sliding_window == 64 and cwm.parameters == _llama(num_hidden_layers=8).parameters
    post = _family("HyperCLOVAXForCausalLM", "hyperclovax")
    assert post.norms_per_layer == 4 and post.parameters - _llama().parameters == 2 * L * H
    assert _family("HyperCLOVAXForCausalLM", "hyperclovax", use_post_norm=False).norms_per_layer == 2
    mla = {
        "kv_lora_rank": 64,
        "qk_rope_head_dim": 16,
        "qk_nope_head_dim": 32,
        "v_head_dim": 32,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "first_k_dense_replace": 1,
    }
    axk1 = _family("AXK1ForCausalLM", "axk1", **mla)
    deepseek = _family("DeepseekV3ForCausalLM", "deepseek_v3", **mla)
    assert axk1.norms_per_layer == 3 and axk1.expert_score_bias and not deepseek.expert_score_bias
    assert _family("AXK1ForCausalLM", "axk1", topk_method="greedy", **mla).expert_score_bias is False


def test_ling_2_files_naming_bailing_moe_v2_read_as_vllms_one_bailing_class():
    """Ling 2.0's files say model_type bailing_moe_v2; vLLM's bailing_moe.py builds them by the same rules
    as Ling 1.x's bailing_moe (they were read with no q/k norms and no expert bias before)."""
    ling2 = DENSE | {
        "architectures": ["BailingMoeV2ForCausalLM"],
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 256,
        "num_shared_experts": 1,
        "first_k_dense_replace": 1,
        "use_qk_norm": True,
        "use_rmsnorm": True,
        "moe_router_enable_expert_bias": True,
    }
    v2 = c.architecture_from_config(ling2 | {"model_type": "bailing_moe_v2"})
    v1 = c.architecture_from_config(ling2 | {"model_type": "bailing_moe"})
    assert v2.parameters == v1.parameters and v2.qk_norm == "head" and v2.expert_score_bias


def test_cohere2_moe_slides_after_its_dense_prefix_and_ties_its_logits_to_the_embedding():
    """vLLM's cohere2_moe.py over Cohere2MoeConfig: layer_types derived with the dense prefix
    (first_k_dense_replace) global and every 4th layer after it, windows of W + 1 tokens as Command R's;
    experts and shared experts intermediate_size wide, the prefix prefix_dense_intermediate_size (refused
    when missing: vLLM stops at start); one norm a layer; the logits from the embedding."""
    moe = DENSE | {
        "architectures": ["Cohere2MoeForCausalLM"],
        "model_type": "cohere2_moe",
        "num_hidden_layers": 8,
        "sliding_window": 64,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_shared_experts": 1,
        "tie_word_embeddings": False,
    }
    prefix = {"first_k_dense_replace": 2, "prefix_dense_intermediate_size": 384}
    arch = c.architecture_from_config(moe | prefix)
    kinds = ["full"] * 2 + ["sliding"] * 3 + ["full"] + ["sliding"] * 2
    assert [layer.mixer for layer in arch.layers] == kinds
    assert arch.sliding_window == 65 and [layer.ffn for layer in arch.layers][:3] == ["dense", "dense", "moe"]
    assert arch.layers[0].ffn_width == 384 and arch.shared_expert_intermediate_size == W
    assert arch.tie_word_embeddings and arch.norms_per_layer == 1
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(moe | {"first_k_dense_replace": 2})
    assert err.value.field == "prefix_dense_intermediate_size"


def test_laguna_reads_heads_per_layer_its_output_gate_and_a_plain_shared_expert():
    """poolside's Laguna (vLLM's laguna.py over transformers' LagunaConfig): each layer's query heads from
    num_attention_heads_per_layer over the same KV heads; a softplus output gate from a g_proj of its own, one
    a head (gating true or "per-head") or one a channel ("per-element"); sinks on the sliding layers with
    swa_attention_sink_enabled; a shared expert with no gate; LagunaConfig's defaults where the file is
    silent (every layer full, layer 0 dense). What its config class or MLP refuses, kvright refuses naming
    the field."""
    fields = {
        "head_dim": 64,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "shared_expert_intermediate_size": 96,
        "sliding_window": 64,
        "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
        "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
        "num_attention_heads_per_layer": [8, 16, 16, 8],
    }
    arch = _family("LagunaForCausalLM", "laguna", **fields)
    assert [arch.heads_of(layer) for layer in arch.layers] == [8, 16, 16, 8]
    assert {arch.kv_heads_of(layer) for layer in arch.layers} == {KV}
    assert [layer.mixer for layer in arch.layers] == ["full", "sliding", "sliding", "full"]
    assert [layer.ffn for layer in arch.layers] == ["dense", "moe", "moe", "moe"]
    assert arch.attention_head_gate and not arch.attention_gate_projection
    assert not arch.shared_expert_gate and arch.expert_score_bias and arch.qk_norm == "head"
    assert not any(layer.sinks for layer in arch.layers)
    # The gate: one a head is H x heads on each layer; one a channel H x heads x head_dim.
    element = _family("LagunaForCausalLM", "laguna", **fields, gating="per-element")
    assert element.attention_gate_projection and not element.attention_head_gate
    assert element.parameters - arch.parameters == H * (HD - 1) * (8 + 16 + 16 + 8)
    ungated = _family("LagunaForCausalLM", "laguna", **fields, gating=False)
    assert arch.parameters - ungated.parameters == H * (8 + 16 + 16 + 8)
    sinks = _family("LagunaForCausalLM", "laguna", **fields, swa_attention_sink_enabled=True)
    assert [layer.sinks for layer in sinks.layers] == [False, True, True, False]
    silent = _family(
        "LagunaForCausalLM",
        "laguna",
        **{k: v for k, v in fields.items() if k not in ("layer_types", "mlp_layer_types")},
    )
    assert [layer.mixer for layer in silent.layers] == ["full"] * 4
    assert [layer.ffn for layer in silent.layers] == ["dense", "moe", "moe", "moe"]
    # vLLM splits every layer's query heads: TP 16 splits the full layers' 8, not the sliding layers' 16.
    assert c.tensor_parallel_error(arch, 8) is None
    assert "8 attention heads" in (c.tensor_parallel_error(arch, 16) or "")
    wide = _family(
        "LagunaForCausalLM", "laguna", **{**fields, "num_attention_heads_per_layer": [8, 12, 12, 8]}
    )
    assert "some layers' 12 attention heads" in (c.tensor_parallel_error(wide, 8) or "")
    for bad, field in [
        ({"head_dim": None}, "head_dim"),
        ({"moe_apply_router_weight_on_input": True}, "moe_apply_router_weight_on_input"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"num_attention_heads_per_layer": [8, 9, 16, 8]}, "num_attention_heads_per_layer"),
        ({"num_attention_heads_per_layer": [8, 16]}, "num_attention_heads_per_layer"),
        ({"gating": 1}, "gating"),
        ({"mlp_layer_types": ["dense", "moe", "sparse", "sparse"]}, "mlp_layer_types"),
    ]:
        with pytest.raises(c.ConfigError) as err:
            c.architecture_from_config(
                DENSE | {"architectures": ["LagunaForCausalLM"], "model_type": "laguna"} | fields | bad
            )
        assert err.value.field == field, (bad, err.value)


def test_sarvam_reads_ling_shared_experts_and_deepseek_layers_as_vllm_builds_them():
    """vLLM's sarvam.py: Sarvam-30B's class is Ling's (bailing_moe.py) with a weight loader of its own, so
    its router is float32 for router_dtype "fp32" (bfloat16 for another value; the model's dtype unstated) and
    its shared experts one MLP of num_shared_experts experts (none is allowed). Sarvam-105B's is DeepSeek-V3's
    layers under Sarvam's names: shared experts merged the same way, the float32 expert bias by
    moe_router_enable_expert_bias (on unless stated), routed layers every moe_layer_freq-th counted from
    first_k_dense_replace (1 unless stated), and at least one of them."""
    moe = DENSE | {
        "architectures": ["SarvamMoEForCausalLM"],
        "model_type": "sarvam_moe",
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "first_k_dense_replace": 1,
        "num_shared_experts": 2,
        "moe_shared_expert_intermediate_size": 96,
        "moe_router_enable_expert_bias": True,
        "use_qk_norm": True,
        "use_rmsnorm": True,
    }
    arch = c.architecture_from_config(moe)
    assert arch.shared_expert_intermediate_size == 2 * 96 and arch.expert_score_bias
    assert arch.router_dtype is None and arch.qk_norm == "head"
    assert c.architecture_from_config(moe | {"router_dtype": "fp32"}).router_dtype == "float32"
    assert c.architecture_from_config(moe | {"router_dtype": "bf16"}).router_dtype == "bfloat16"
    assert c.architecture_from_config(moe | {"num_shared_experts": 0}).shared_expert_intermediate_size == 0
    mla = DENSE | {
        "architectures": ["SarvamMLAForCausalLM"],
        "model_type": "sarvam_mla",
        "kv_lora_rank": 64,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 16,
        "v_head_dim": 32,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "num_shared_experts": 2,
        "moe_shared_expert_intermediate_size": 96,
    }
    arch = c.architecture_from_config(mla)
    assert [layer.ffn for layer in arch.layers] == ["dense", "moe", "moe", "moe"]
    assert arch.shared_expert_intermediate_size == 2 * 96 and arch.expert_score_bias
    assert arch.kv_lora_rank == 64 and arch.num_kv_heads == 1
    every_other = c.architecture_from_config(mla | {"first_k_dense_replace": 1, "moe_layer_freq": 2})
    assert [layer.ffn for layer in every_other.layers] == ["dense", "moe", "dense", "moe"]
    assert not c.architecture_from_config(mla | {"moe_router_enable_expert_bias": False}).expert_score_bias
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(mla | {"first_k_dense_replace": 4})
    assert err.value.field == "first_k_dense_replace"


def test_sarvam_30b_at_its_published_shape_counts_its_published_parameters():
    """Sarvam-30B's shape as its config.json states it (quoted in public porting notes; the file itself is not
    in the index): 19 layers 4096 wide, 64 query and 4 KV heads of 64, a dense first layer 8192 wide, 128
    experts of 1024 (6 a token) beside one shared, a 262,144-token vocabulary, RMSNorm q/k norms, a float32
    router. The notes count the checkpoint's tensors at 32,152,650,368 parameters, which vLLM's class on the
    meta device builds too."""
    arch = c.architecture_from_config(
        {
            "architectures": ["SarvamMoEForCausalLM"],
            "model_type": "sarvam_moe",
            "hidden_size": 4096,
            "num_hidden_layers": 19,
            "num_attention_heads": 64,
            "num_key_value_heads": 4,
            "head_dim": 64,
            "intermediate_size": 8192,
            "vocab_size": 262144,
            "max_position_embeddings": 131072,
            "num_experts": 128,
            "num_experts_per_tok": 6,
            "moe_intermediate_size": 1024,
            "num_shared_experts": 1,
            "first_k_dense_replace": 1,
            "use_qk_norm": True,
            "use_rmsnorm": True,
            "moe_router_enable_expert_bias": True,
            "router_dtype": "fp32",
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
        }
    )
    assert arch.parameters == 32_152_650_368


def test_param2_reads_ling_like_modules_with_its_own_biases_router_and_shared_width():
    """vLLM's param2moe.py (BharatGen's Param-2): use_qkv_bias on q/k/v alone, use_bias on the output
    projection only, RMSNorm q/k norms with use_qk_norm, a float32 router and the float32 expert bias (on
    unless stated), one shared expert unless stated and moe_shared_expert_intermediate_size as its whole
    width, every layer from first_k_dense_replace (1 unless stated) routed, no period read."""
    param2 = DENSE | {
        "architectures": ["Param2MoEForCausalLM"],
        "model_type": "param2moe",
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "moe_layer_freq": 2,  # not read
    }
    arch = c.architecture_from_config(param2)
    assert [layer.ffn for layer in arch.layers] == ["dense", "moe", "moe", "moe"]
    assert arch.router_dtype == "float32" and arch.expert_score_bias and arch.qk_norm == "head"
    assert arch.shared_expert_intermediate_size == 128 and not arch.qkv_bias and not arch.o_bias
    wide = c.architecture_from_config(
        param2 | {"num_shared_experts": 2, "moe_shared_expert_intermediate_size": 192, "use_bias": True}
    )
    assert wide.shared_expert_intermediate_size == 192 and wide.o_bias and not wide.qkv_bias
    assert not wide.mlp_bias
    plain = c.architecture_from_config(
        param2 | {"use_qk_norm": False, "moe_router_enable_expert_bias": False}
    )
    assert plain.qk_norm == "none" and not plain.expert_score_bias


LONGCAT_CHAT: dict[str, Any] = json.loads((CONFIGS / "longcat-flash-chat" / "config.json").read_text())


def test_longcat_flash_attends_twice_a_layer_and_routes_over_zero_experts():
    """Meituan's LongCat-Flash (vLLM's longcat_flash.py): each of num_layers layers runs two MLA attentions,
    each with its own norms and dense MLP, beside one MoE whose float32 router and score bias score the
    zero-computation experts with the routed ones; the zero experts hold nothing and take their share of the
    top-k. The arithmetic is written out here from the file's fields (vLLM's class agrees to the parameter:
    tests/conformance/test_parameter_counts.py)."""
    arch = c.architecture_from_config(LONGCAT_CHAT)
    f = LONGCAT_CHAT
    h, layers, experts, zero = f["hidden_size"], f["num_layers"], f["n_routed_experts"], f["zero_expert_num"]
    q, kv, rope = f["q_lora_rank"], f["kv_lora_rank"], f["qk_rope_head_dim"]
    heads, nope, v = f["num_attention_heads"], f["qk_nope_head_dim"], f["v_head_dim"]
    mla = h * (q + kv + rope) + q + q * heads * (nope + rope) + kv + kv * heads * (nope + v) + heads * v * h
    layer = 2 * mla + 2 * 3 * h * f["ffn_hidden_size"] + 4 * h + experts * 3 * h * f["expert_ffn_hidden_size"]
    router = (experts + zero) * (h + 1)  # the classifier and its score-correction bias, float32
    assert arch.parameters == layers * (layer + router) + 2 * f["vocab_size"] * h + h == 560_664_980_480
    bf16 = layers * layer + 2 * f["vocab_size"] * h + h
    assert arch.weight_groups.total == 2 * bf16 + 4 * layers * router
    # Two latent caches a layer, no window; pipeline stages cut whole layers.
    assert arch.num_layers == 2 * layers and arch.num_decoder_layers == layers and arch.layers_per_block == 2
    assert arch.num_attention_layers == 2 * layers and arch.sliding_window is None
    assert c.kv_cache_bytes_per_token(arch) == 2 * layers * (kv + rope) * 2 == 64_512
    # 12 picks among 512 experts and 256 identities run 8 experts when the router spreads them evenly: about
    # the 27 B active parameters a token Meituan reports.
    assert arch.num_experts_per_token == 12 and arch.routed_experts_per_token == 8
    assert arch.active_parameters == pytest.approx(27e9, rel=0.05)
    assert not arch.tie_word_embeddings
    assert not c.architecture_from_config(LONGCAT_CHAT | {"tie_word_embeddings": True}).tie_word_embeddings
    # num_hidden_layers, where a file states it, is twice num_layers (LongcatFlashConfig's setter halves it);
    # the standard names are its attribute_map's; a file with no model_type (LongCat-Flash-Lite's) is the type
    # vLLM gives the class.
    stated = c.architecture_from_config(LONGCAT_CHAT | {"num_hidden_layers": 8})
    assert stated.num_decoder_layers == 4
    renamed = {k: v for k, v in LONGCAT_CHAT.items() if k not in ("ffn_hidden_size", "n_routed_experts")}
    renamed |= {"intermediate_size": f["ffn_hidden_size"], "num_local_experts": experts}
    assert c.architecture_from_config(renamed).parameters == arch.parameters
    untyped = {k: v for k, v in LONGCAT_CHAT.items() if k != "model_type"}
    assert c.architecture_from_config(untyped).parameters == arch.parameters
    for bad, field in [
        ({"mla_scale_q_lora": None}, "mla_scale_q_lora"),
        ({"zero_expert_type": None}, "zero_expert_type"),
        ({"zero_expert_type": "const"}, "zero_expert_type"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"q_lora_rank": None}, "q_lora_rank"),
    ]:
        with pytest.raises(c.ConfigError) as err:
            c.architecture_from_config(LONGCAT_CHAT | bad)
        assert err.value.field == field, (bad, err.value)
    without = {k: v for k, v in LONGCAT_CHAT.items() if k != "mla_scale_kv_lora"}
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(without)
    assert err.value.field == "mla_scale_kv_lora"


#: LongCat-Flash-Lite's shape, as the Intel AutoRound re-upload's config.json and a test fixture quoting the
#: original state it (the original names no model_type). Published: 68.5 B parameters, 31.4 B of them in the
#: n-gram embeddings, 2.9 B to 4.5 B activated a token.
LONGCAT_LITE: dict[str, Any] = {
    **{k: v for k, v in LONGCAT_CHAT.items() if k not in ("model_type", "auto_map")},
    "architectures": ["LongcatFlashNgramForCausalLM"],
    "hidden_size": 3072,
    "num_layers": 14,
    "num_attention_heads": 32,
    "ffn_hidden_size": 6144,
    "expert_ffn_hidden_size": 1024,
    "n_routed_experts": 256,
    "zero_expert_num": 128,
    "max_position_embeddings": 327680,
    "ngram_vocab_size_ratio": 78,
    "emb_split_num": 4,
    "emb_neighbor_num": 4,
    "dtype": "bfloat16",
}


def test_longcat_flash_lite_looks_its_n_gram_embeddings_up_on_the_first_stage():
    """vLLM's longcat_flash_ngram.py: emb_split_num x (emb_neighbor_num - 1) hashed embedders share one
    vocab-parallel table (the i-th of int(ratio x vocab + 2i + 1) rows, hidden / embedders wide) and each has
    a projection back to the hidden width, all in the config's dtype; the main class builds none of it."""
    arch = c.architecture_from_config(LONGCAT_LITE)
    embedders, width = 4 * 3, 3072 // 12
    rows = sum(78 * 131072 + 2 * i + 1 for i in range(embedders))
    assert (arch.ngram_embedders, arch.ngram_rows) == (embedders, rows)
    assert arch.parameter_groups.ngram_embedding == rows * width == pytest.approx(31.4e9, rel=0.01)
    assert arch.parameters == pytest.approx(68.5e9, rel=0.01)
    assert 2.9e9 <= arch.active_parameters <= 4.5e9  # a lookup of 12 rows a token is not active weight
    # On the first pipeline stage only, split by TP with the input embedding.
    main = c.architecture_from_config(LONGCAT_LITE | {"architectures": ["LongcatFlashForCausalLM"]})
    assert main.ngram_embedders == 0
    per_gpu = c.weight_bytes_per_gpu(arch, 4) - c.weight_bytes_per_gpu(main, 4)
    assert per_gpu == pytest.approx((-(-rows // 64) * 64 * width / 4 + embedders * width * 3072) * 2, abs=1)
    # The tables keep the file's dtype where the model is served in bfloat16.
    wide = c.architecture_from_config(LONGCAT_LITE | {"dtype": "float32"})
    assert wide.dtype == "bfloat16" and wide.ngram_dtype == "float32"
    assert wide.weight_groups.ngram_embedding == 2 * arch.weight_groups.ngram_embedding
    for bad, field in [
        ({"emb_split_num": None}, "emb_split_num"),
        ({"emb_neighbor_num": 1}, "emb_neighbor_num"),
        ({"ngram_vocab_size_ratio": "78"}, "ngram_vocab_size_ratio"),
    ]:
        with pytest.raises(c.ConfigError) as err:
            c.architecture_from_config(LONGCAT_LITE | bad)
        assert err.value.field == field, (bad, err.value)


def test_a_wrapper_whose_language_model_is_another_repositorys_is_refused_naming_text_config():
    """Ultravox names its language model by repository (``text_model_id``); vLLM's config class reads that
    repository's config.json, which kvright does not fetch, so the file alone has no shape to plan."""
    ultravox = {
        "architectures": ["UltravoxModel"],
        "model_type": "ultravox",
        "text_model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "audio_config": {"model_type": "whisper", "d_model": 1280, "encoder_layers": 32},
        "hidden_size": 4096,
        "stack_factor": 8,
        "projector_act": "swiglu",
    }
    with pytest.raises(c.ConfigError) as refused:
        c.architecture_from_config(ultravox)
    assert refused.value.field == "text_config"
    assert "'meta-llama/Llama-3.1-8B-Instruct'" in str(refused.value)


def test_openvla_is_refused_for_its_towers_not_for_a_missing_one():
    """OpenVLA's file describes its towers by timm model ids, not a vision_config: the refusal says what
    kvright does not weigh, not that the file states no tower."""
    openvla = {
        "architectures": ["OpenVLAForActionPrediction"],
        "model_type": "openvla",
        "timm_model_ids": ["vit_large_patch14_reg4_dinov2.lvd142m", "vit_so400m_patch14_siglip_224"],
        "text_config": {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32},
    }
    with pytest.raises(c.ConfigError) as refused:
        c.architecture_from_config(openvla)
    assert refused.value.field == "architectures" and "timm_model_ids" in str(refused.value)
