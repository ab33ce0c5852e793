"""capacity counts, family by family, exactly the parameters vLLM's own model class creates, and caches
what its attention layers cache.

Weights are most of a GPU's memory, and a family's modeling code decides them beyond what its config
states: which key puts a bias where, how many norms a layer has, whether the LM head is tied, whether an
MLP has a gate, what a router carries. Each case is a small config of one family (the fields its real files
use); vllm_weights_probe.py builds vLLM 0.32's class for it (native, or its Transformers backend) on the
meta device and counts every parameter once, and capacity must say the same number. Variants turn on the
bias keys, since a rule that ignores a key is only seen when the key is on.

Not here: Ling 2.0 (``bailing_moe`` loads only with the checkpoint's own config code), the multimodal
wrappers (their towers are counted by ViT arithmetic, held to published totals in test_model_zoo.py),
DeepSeek-V3.2 / GLM-5 (sparse-attention indexers), Llama-Nemotron (remote code), Qwen3.5 (vision wrapper)
and Kimi K2 (a DeepSeek-V3 under another model type, the same class).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import capacity
from capacity.architecture import FAMILIES
from kvright_dev.procs import free_port

from .harness import HERE, VllmEnv

pytestmark = pytest.mark.conformance

_BASE: dict[str, Any] = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
_BIASES = {"attention_bias": True, "mlp_bias": True}
_MOE = {"num_experts": 8, "num_experts_per_tok": 2}
_LOCAL_MOE = {"num_local_experts": 8, "num_experts_per_tok": 2}
_ROUTED = {"n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1}
_MLA = {"kv_lora_rank": 64, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32, "v_head_dim": 32}


def _f(architecture: str, model_type: str, **fields: Any) -> dict[str, Any]:
    return _BASE | {"architectures": [architecture], "model_type": model_type} | fields


_CHATGLM = {
    "architectures": ["ChatGLMModel"],
    "model_type": "chatglm",
    "hidden_size": 256,
    "num_layers": 4,
    "num_attention_heads": 4,
    "multi_query_attention": True,
    "multi_query_group_num": 2,
    "kv_channels": 64,
    "ffn_hidden_size": 512,
    "padded_vocab_size": 1024,
    "seq_length": 4096,
    "add_qkv_bias": True,
    "add_bias_linear": False,
    "rmsnorm": True,
    "original_rope": True,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}

CASES: dict[str, dict[str, Any]] = {
    # dense, with their bias keys off (the files' usual) and on
    **{
        name + suffix: _f(architecture, model_type, **fields, **extra)
        for name, architecture, model_type, fields in [
            ("llama", "LlamaForCausalLM", "llama", {}),
            ("mistral", "MistralForCausalLM", "mistral", {}),
            ("ministral3", "Ministral3ForCausalLM", "ministral3", {"head_dim": 64}),
            ("qwen2", "Qwen2ForCausalLM", "qwen2", {}),
            ("qwen3", "Qwen3ForCausalLM", "qwen3", {"head_dim": 64}),
            ("gemma", "GemmaForCausalLM", "gemma", {"head_dim": 64}),
            ("gemma2", "Gemma2ForCausalLM", "gemma2", {"head_dim": 64}),
            ("gemma3", "Gemma3ForCausalLM", "gemma3_text", {"head_dim": 64}),
            ("phi3", "Phi3ForCausalLM", "phi3", {}),
            ("cohere", "CohereForCausalLM", "cohere", {}),
            ("cohere2", "Cohere2ForCausalLM", "cohere2", {"sliding_window": 512}),
            ("granite", "GraniteForCausalLM", "granite", {}),
            ("exaone4", "Exaone4ForCausalLM", "exaone4", {"layer_types": ["full_attention"] * 4}),
            ("glm4", "Glm4ForCausalLM", "glm4", {"head_dim": 64}),
            ("ernie4_5", "Ernie4_5ForCausalLM", "ernie4_5", {"head_dim": 64}),
            ("olmo2", "Olmo2ForCausalLM", "olmo2", {}),
            ("olmo3", "Olmo3ForCausalLM", "olmo3", {"sliding_window": 512}),
            ("seed_oss", "SeedOssForCausalLM", "seed_oss", {"head_dim": 64}),
            ("smollm3", "SmolLM3ForCausalLM", "smollm3", {}),
            ("hunyuan_dense", "HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense", {"head_dim": 64}),
        ]
        for suffix, extra in (("", {}), ("+biases", _BIASES))
    },
    "starcoder2": _f("Starcoder2ForCausalLM", "starcoder2", sliding_window=512),
    "starcoder2-without-bias": _f("Starcoder2ForCausalLM", "starcoder2", use_bias=False),
    "falcon-multi-query": {
        k: v for k, v in _f("FalconForCausalLM", "falcon").items() if k != "num_key_value_heads"
    },
    "falcon-new-decoder": _f("FalconForCausalLM", "falcon", new_decoder_architecture=True, num_kv_heads=2),
    "falcon-biased-mha": _f("FalconForCausalLM", "falcon", bias=True, multi_query=False),
    "chatglm": _CHATGLM,
    "chatglm-biased": _CHATGLM | {"add_bias_linear": True},
    # mixture of experts
    "mixtral": _f("MixtralForCausalLM", "mixtral", **_LOCAL_MOE),
    "qwen2_moe": _f(
        "Qwen2MoeForCausalLM",
        "qwen2_moe",
        moe_intermediate_size=128,
        shared_expert_intermediate_size=256,
        **_MOE,
    ),
    "qwen3_moe": _f("Qwen3MoeForCausalLM", "qwen3_moe", moe_intermediate_size=128, head_dim=64, **_MOE),
    "olmoe+biases": _f("OlmoeForCausalLM", "olmoe", **_MOE, **_BIASES),
    "phimoe": _f("PhiMoEForCausalLM", "phimoe", **_LOCAL_MOE),
    "granitemoe+biases": _f(
        "GraniteMoeForCausalLM", "granitemoe", tie_word_embeddings=True, **_LOCAL_MOE, **_BIASES
    ),
    "granitemoeshared": _f(
        "GraniteMoeSharedForCausalLM", "granitemoeshared", shared_intermediate_size=256, **_LOCAL_MOE
    ),
    "ernie4_5_moe": _f(
        "Ernie4_5_MoeForCausalLM",
        "ernie4_5_moe",
        head_dim=64,
        moe_num_experts=8,
        moe_k=2,
        moe_intermediate_size=128,
        moe_num_shared_experts=2,
    ),
    "hunyuan_moe+biases": _f(
        "HunYuanMoEV1ForCausalLM", "hunyuan_v1_moe", head_dim=64, num_experts=8, moe_topk=2
    ),
    "exaone_moe+biases": _f(
        "ExaoneMoEForCausalLM",
        "exaone_moe",
        head_dim=64,
        moe_intermediate_size=128,
        num_shared_experts=1,
        sliding_window=512,
        layer_types=["sliding_attention"] * 3 + ["full_attention"],
        **_MOE,
        **_BIASES,
    ),
    "glm4_moe+biases": _f(
        "Glm4MoeForCausalLM",
        "glm4_moe",
        head_dim=64,
        moe_intermediate_size=128,
        use_qk_norm=True,
        **_ROUTED,
        **_BIASES,
    ),
    "gpt_oss": _f(
        "GptOssForCausalLM",
        "gpt_oss",
        head_dim=64,
        sliding_window=128,
        layer_types=["sliding_attention", "full_attention"] * 2,
        **_LOCAL_MOE,
    ),
    "minimax_m2": _f(
        "MiniMaxM2ForCausalLM",
        "minimax_m2",
        head_dim=64,
        use_routing_bias=True,
        use_qk_norm=True,
        qk_norm_type="per_layer",
        scoring_func="sigmoid",
        rotary_dim=32,
        **_LOCAL_MOE,
    ),
    "llama4": _f(
        "Llama4ForCausalLM",
        "llama4_text",
        head_dim=64,
        num_local_experts=8,
        num_experts_per_tok=1,
        intermediate_size_mlp=512,
        interleave_moe_layer_step=2,
        attention_chunk_size=1024,
        no_rope_layers=[1, 1, 1, 0],
    ),
    # MLA
    "deepseek_v2-lite": _f(
        "DeepseekV2ForCausalLM", "deepseek_v2", moe_intermediate_size=128, q_lora_rank=None, **_ROUTED, **_MLA
    ),
    "deepseek_v3-noaux": _f(
        "DeepseekV3ForCausalLM",
        "deepseek_v3",
        moe_intermediate_size=128,
        q_lora_rank=96,
        topk_method="noaux_tc",
        **_ROUTED,
        **_MLA,
    ),
    "glm4_moe_lite": _f(
        "Glm4MoeLiteForCausalLM",
        "glm4_moe_lite",
        moe_intermediate_size=128,
        q_lora_rank=96,
        **_ROUTED,
        **_MLA,
    ),
    # hybrid
    "qwen3_next": _f(
        "Qwen3NextForCausalLM",
        "qwen3_next",
        head_dim=64,
        moe_intermediate_size=128,
        shared_expert_intermediate_size=128,
        full_attention_interval=4,
        linear_num_value_heads=4,
        linear_num_key_heads=2,
        linear_key_head_dim=32,
        linear_value_head_dim=32,
        linear_conv_kernel_dim=4,
        decoder_sparse_step=1,
        **_MOE,
    ),
    "nemotron_h": _f(
        "NemotronHForCausalLM",
        "nemotron_h",
        head_dim=64,
        hybrid_override_pattern="M-*-",
        mamba_num_heads=8,
        mamba_head_dim=32,
        ssm_state_size=16,
        n_groups=2,
        conv_kernel=4,
        expand=1,
        mamba_hidden_act="silu",
    ),
    "granitemoehybrid": _f(
        "GraniteMoeHybridForCausalLM",
        "granitemoehybrid",
        layer_types=["mamba", "attention", "mamba", "mamba"],
        mamba_n_heads=8,
        mamba_d_head=32,
        mamba_d_state=16,
        mamba_n_groups=1,
        mamba_d_conv=4,
        mamba_expand=1,
        num_local_experts=0,
        shared_intermediate_size=512,
    ),
}

#: Classes capacity reads that no case builds, and why (see the module docstring).
NOT_BUILT = {
    "BailingMoeV2ForCausalLM": "its config class is the checkpoint's own code",
    "ExaoneMoeForCausalLM": "the class ExaoneMoEForCausalLM names too",
    "DeciLMForCausalLM": "its config class is the checkpoint's own code",
    "DeepseekV32ForCausalLM": "its sparse-attention indexer",
    "GlmMoeDsaForCausalLM": "its sparse-attention indexer",
    "KimiK2ForCausalLM": "the DeepSeek-V3 class under another model type",
    "MistralLarge3ForCausalLM": "the DeepSeek-V3 class with Mistral's weight names",
    "InternLM3ForCausalLM": "vLLM's Llama class; its config class is the checkpoint's own code",
    "Qwen3_5ForCausalLM": "the text half of a vision wrapper",
    "Qwen3_5MoeForCausalLM": "the text half of a vision wrapper",
}


@pytest.fixture(scope="module")
def vllm_counts(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    payload = json.dumps([{"id": case, "config": config} for case, config in CASES.items()])
    out = vllm_env.run([str(HERE / "vllm_weights_probe.py"), str(free_port())], stdin=payload, timeout=900)
    return {answer["id"]: answer for answer in json.loads(out.strip().splitlines()[-1])}


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_counts_the_parameters_vllms_model_class_creates(
    vllm_counts: dict[str, dict[str, Any]], case: str
) -> None:
    answer = vllm_counts[case]
    assert answer["error"] is None, f"vLLM could not build {case}: {answer['error']}"
    assert answer["architecture"] == CASES[case]["architectures"][0]
    assert capacity.architecture_from_config(CASES[case]).parameters == answer["parameters"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_caches_the_heads_sizes_and_windows_vllms_attention_layers_cache(
    vllm_counts: dict[str, dict[str, Any]], case: str
) -> None:
    """Layer by layer, what each of vLLM's ``Attention`` modules caches (MLA's latent is another module, held
    by test_kv_capacity.py and test_layer_kinds.py): KV heads, K and V head sizes, the sliding window."""
    arch = capacity.architecture_from_config(CASES[case])
    if arch.attention == "MLA":
        return
    ours = [
        (
            arch.kv_heads_of(layer),
            arch.head_dim,
            arch.head_dim,
            arch.sliding_window if layer.mixer == "sliding" else None,
        )
        for layer in arch.layers
        if layer.mixer in ("full", "sliding", "chunked")
    ]
    theirs = [
        (layer["kv_heads"], layer["head_size"], layer["head_size_v"], layer["sliding_window"])
        for layer in vllm_counts[case]["attention"]
    ]
    assert ours == theirs


def test_every_text_model_class_capacity_reads_is_built_here_or_says_why_not() -> None:
    built = {config["architectures"][0] for config in CASES.values()}
    text_models = {name for name in FAMILIES if not name.endswith("ForConditionalGeneration")}
    assert text_models - built - set(NOT_BUILT) == set()
    assert not built & set(NOT_BUILT)
