"""capacity counts, family by family, exactly the parameters vLLM's own model class creates, and caches
what its attention layers cache.

Weights are most of a GPU's memory, and a family's modeling code decides them beyond what its config
states: which key puts a bias where, how many norms a layer has, whether the LM head is tied, whether an
MLP has a gate, what a router carries. Each case is a small config of one family (the fields its real files
use); vllm_weights_probe.py builds vLLM 0.32's class for it (native, or its Transformers backend) on the
meta device and counts every parameter once, and capacity must say the same number. Variants turn on the
bias keys, since a rule that ignores a key is only seen when the key is on.

Nemotron-H's experts (squared ReLU, no gate; latent MoE) are the one place the CPU build refuses to build
vLLM's class: a platform gate on its CPU kernels, not a rule of the weights. Those cases are built with the
probe's stand-in lifting that gate alone (``relu2_moe_stand_in``; no tensor changes), so capacity is held to
vLLM's NemotronHMoE itself: experts at the latent width when ``moe_latent_size`` is set, replicated fc1/fc2
latent projections, a float32 router and score-correction bias, the shared expert at ``hidden_size``.

GLM-V (GLM-4.1V, GLM-4.5V, GLM-4.6V) is held in two halves, since vLLM's CPU venv cannot import its wrapper
(the processor needs torchvision): its language model is a case like the others, the text config as
glm4_1v.py hands it to vLLM (Glm4ForCausalLM or Glm4MoeForCausalLM over glm4v_text / glm4v_moe_text), and
the whole wrapper must be that plus the tower transformers' class builds, which vLLM loads one to one.

The real quantized checkpoints of ``tests/data/configs`` are built whole, with their quantization config
(and ``hf_quant_config.json``), and their bytes held to capacity's within a millionth, less the two things
capacity leaves out by design: symmetric GPTQ's zero points (Marlin drops them after loading) and the exact
width of a per-row scale's rows (amortized over 4,096 inputs); a multimodal one with the torchvision
stand-in (Gemma 3 FP8, Llama 4 Scout FP8). Those the CPU build cannot build (sparse attention, NVFP4, MXFP8
and WNA16 kernels) assert its refusal.

Ling 1.x and 2.0 (``bailing_moe``) and DeepSeek-MoE (``deepseek``) load only with the checkpoint's own config
code: their cases are read by a plain config class (``_plain_config``), so vLLM's class reads the case's
fields as they stand. Where vLLM refuses a file at build, capacity must refuse it too, naming the field
(``REFUSED_BY_BOTH``).

The multimodal fixtures vLLM's CPU build builds once torchvision is stood in (the wrappers' modules import
it for image processing alone) are built whole, towers and all, and held to the parameter and byte
(``WRAPPER_FIXTURES``; the others say why not). Not here: other multimodal wrappers (their towers are
counted by ViT arithmetic, held to published totals in test_model_zoo.py),
DeepSeek-V3.2 / GLM-5 (sparse-attention indexers), Llama-Nemotron (remote code), Qwen3.5 (vision wrapper)
and Kimi K2 (a DeepSeek-V3 under another model type, the same class).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import capacity
from capacity.architecture import ATTENTION_MIXERS, ENCODER_TP_DATA, FAMILIES, TIMM_TOWER_PARAMETERS
from capacity.quantization import PER_ROW, PER_ROW_IN_FEATURES
from tests.builders import (
    AUDIO_WRAPPERS,
    GLM_OCR,
    MINIMAX_M3_TEXT,
    QWEN2_VL_7B,
    TOWERLESS_WRAPPERS,
    VISION_WRAPPERS,
    edited,
)

from .harness import HERE, VllmEnv, accounted_layout, assert_blocks_as_accounted, probe, weights_probe

pytestmark = pytest.mark.conformance

#: The cases: data (parameter_cases.json), one small config per family, some again with their bias keys on.
_TABLE: dict[str, Any] = json.loads((HERE / "parameter_cases.json").read_text())


def _case(fields: dict[str, Any]) -> dict[str, Any]:
    own = {
        k: v
        for k, v in fields.items()
        if k not in ("_without", "_standalone", "_plain_config", "_model_runner_v2")
    }
    if fields.get("_standalone"):
        return own
    base = {k: v for k, v in _TABLE["base"].items() if k not in fields.get("_without", ())}
    return base | own


CASES: dict[str, dict[str, Any]] = (
    {case: _case(fields) for case, fields in _TABLE["cases"].items()}
    | {f"{case}+biases": _case(_TABLE["cases"][case]) | _TABLE["biases"] for case in _TABLE["with_biases"]}
    # the audio wrappers vLLM's CPU build builds whole: the language model, the encoder and the projector
    | {f"audio:{case}": config for case, config in AUDIO_WRAPPERS.items()}
)

#: Files vLLM's class refuses to build: (config, the field capacity's refusal names, words of vLLM's error).
#: Ling with biases and shared experts (bailing_moe.py's shared experts skip the all-reduce their bias needs);
#: Laguna with a null head width, the router weight on the input or another activation than SiLU (its config
#: class refuses the first two, its MLP the third); Sarvam-105B's class with no routed layer; LongCat-Flash
#: without the MLA LoRA scales or a zero-expert type (read as plain attributes), or with another activation.
REFUSED_BY_BOTH: dict[str, tuple[dict[str, Any], str, str]] = {
    "bailing_moe-use-bias": (
        CASES["bailing_moe-ling1"] | {"use_bias": True},
        "use_bias",
        "When not reduce the results, adding bias",
    ),
    "laguna-null-head-dim": (CASES["laguna"] | {"head_dim": None}, "head_dim", "expected int, got NoneType"),
    "laguna-router-weight-on-input": (
        CASES["laguna"] | {"moe_apply_router_weight_on_input": True},
        "moe_apply_router_weight_on_input",
        "moe_apply_router_weight_on_input=True is not yet supported",
    ),
    "laguna-gelu": (CASES["laguna"] | {"hidden_act": "gelu"}, "hidden_act", "Only silu is supported"),
    "sarvam_mla-no-routed-layer": (
        CASES["sarvam_mla"] | {"first_k_dense_replace": 4},
        "first_k_dense_replace",
        "No SarvamMLAMoE layer found",
    ),
    "longcat_flash-no-lora-scale": (
        {k: v for k, v in CASES["longcat_flash"].items() if k != "mla_scale_q_lora"},
        "mla_scale_q_lora",
        "has no attribute 'mla_scale_q_lora'",
    ),
    "longcat_flash-null-zero-expert-type": (
        CASES["longcat_flash"] | {"zero_expert_type": None},
        "zero_expert_type",
        "AssertionError",
    ),
    "longcat_flash-gelu": (
        CASES["longcat_flash"] | {"hidden_act": "gelu"},
        "hidden_act",
        "Unsupported activation",
    ),
    # MiniMax-M3 (its classes built in test_minimax_m3.py)
    "minimax_m3-silu": (MINIMAX_M3_TEXT | {"hidden_act": "silu"}, "hidden_act", "Unsupported activation"),
    "minimax_m3-index-heads-not-kv-heads": (
        MINIMAX_M3_TEXT
        | {
            "sparse_attention_config": MINIMAX_M3_TEXT["sparse_attention_config"]
            | {"sparse_num_index_heads": 4}
        },
        "sparse_attention_config.sparse_num_index_heads",
        "requires total_num_index_heads",
    ),
    # MiniMaxM3TextConfig's default object has 4 index heads, which 2 KV heads cannot take
    "minimax_m3-default-sparse-config-with-two-kv-heads": (
        edited(MINIMAX_M3_TEXT, sparse_attention_config=None),
        "sparse_attention_config.sparse_num_index_heads",
        "requires total_num_index_heads",
    ),
    "minimax_m3-missing-topk-blocks": (
        MINIMAX_M3_TEXT
        | {"sparse_attention_config": {"sparse_num_index_heads": 2, "sparse_attention_freq": [0, 1, 1, 1]}},
        "sparse_attention_config.sparse_topk_blocks",
        "KeyError",
    ),
    "minimax_m3-short-moe-layer-freq": (
        MINIMAX_M3_TEXT | {"moe_layer_freq": [0, 1]},
        "moe_layer_freq",
        "IndexError",
    ),
    "granite_speech-context-beyond-positions": (
        edited(
            AUDIO_WRAPPERS["granite_speech"],
            encoder_config=AUDIO_WRAPPERS["granite_speech"]["encoder_config"] | {"context_size": 200},
        ),
        "encoder_config.context_size",
        "Context size should be > 0 and <= max_pos_emb",
    ),
    # Voxtral as transformers writes it: voxtral.py reads encoder settings only vLLM's Mistral-format
    # loader writes (from params.json)
    "voxtral-transformers-config": (
        {
            "architectures": ["VoxtralForConditionalGeneration"],
            "model_type": "voxtral",
            "torch_dtype": "bfloat16",
            "text_config": AUDIO_WRAPPERS["glmasr"]["text_config"],
            "audio_config": {
                "model_type": "voxtral_encoder",
                "hidden_size": 128,
                "intermediate_size": 256,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
            },
        },
        "audio_config.downsample_factor",
        "has no attribute 'downsample_factor'",
    ),
}

#: Of those, the files read by their own transformers config class, not a plain one.
REFUSED_BY_OWN_CONFIG_CLASS = {"voxtral-transformers-config", "granite_speech-context-beyond-positions"}

#: Cases of a model type whose config class is the checkpoint's own code: the probe registers a plain config
#: class for the type, so vLLM's class reads the case's fields as they stand (``"_plain_config": true``).
PLAIN_CONFIG = {
    name
    for case, fields in _TABLE["cases"].items()
    if fields.get("_plain_config")
    for name in (case, f"{case}+biases")
}

#: Cases of a class vLLM builds for its V2 model runner only (LongCat-Flash-Lite's n-gram embeddings), which a
#: GPU build selects and this CPU build does not: the probe builds them with VLLM_USE_V2_MODEL_RUNNER=1.
RUNNER_V2 = {case for case, fields in _TABLE["cases"].items() if fields.get("_model_runner_v2")}

#: Classes capacity reads that no case builds, and why (see the module docstring).
NOT_BUILT = {
    "ExaoneMoeForCausalLM": "the class ExaoneMoEForCausalLM names too",
    "DeciLMForCausalLM": "its config class is the checkpoint's own code",
    "DeepseekV32ForCausalLM": "its sparse-attention indexer",
    "GlmMoeDsaForCausalLM": "its sparse-attention indexer",
    "KimiK2ForCausalLM": "the DeepSeek-V3 class under another model type",
    "MistralLarge3ForCausalLM": "the DeepSeek-V3 class with Mistral's weight names",
    "InternLM3ForCausalLM": "vLLM's Llama class; its config class is the checkpoint's own code",
    "ExaoneForCausalLM": "its config class is the checkpoint's own code",
    "Qwen3_5ForCausalLM": "the text half of a vision wrapper",
    "Qwen3_5MoeForCausalLM": "the text half of a vision wrapper",
    "MiniMaxM3SparseForCausalLM": "built in test_minimax_m3.py (its sparse layers are not Attention modules)",
    "InklingForCausalLM": "built in test_inkling.py (its layers are not Attention modules)",
    "HYV4ForCausalLM": "built in test_hy_v4.py (its sparse-attention indexer)",
    "Glm5NextForCausalLM": "built in test_glm5next.py (it needs two stand-ins: its indexer, torchvision)",
    "Qwen4ExpForCausalLM": "built in test_qwen4_exp.py (its host tables and QSA need stand-ins)",
    "DeepseekV41ForCausalLM": "built in test_deepseek_v41.py (its host tables and FlashMLA need stand-ins)",
    "Dots3NoteForCausalLM": "built in test_dots3_note.py (its CUDA imports and added_tokens.json)",
    "BailingMoeV2_5ForCausalLM": "built in test_ling25.py (its config class is the checkpoint's own code)",
    "BailingMoeV3ForCausalLM": "built in test_ling3.py (its config class is the checkpoint's own code)",
    "IQuestLoopCoderForCausalLM": "built in test_iquest_loop.py (its config class is the checkpoint's code)",
    "OlmoHybridForCausalLM": "built in test_olmo_hybrid.py (its GDN layers need a stand-in on the CPU build)",
    "Rnj1ForCausalLM": "built in test_rnj1.py (its layers' chunk_lookback needs a stand-in on the CPU build)",
    "HrmTextForCausalLM": "built in test_hrm_text.py (its recurrent steps: a suite of its own)",
    "K2HorizonForCausalLM": "built in test_k2_horizon.py (its config class is the checkpoint's code)",
    "MuseGlimmerForCausalLM": "built in test_muse_glimmer.py (its processor needs torchvision's stand-in)",
    "NemotronHPuzzleForCausalLM": (
        "built in test_nemotron_h_puzzle.py (its config class is the checkpoint's code, and its squared-ReLU "
        "experts need a stand-in on the CPU build)"
    ),
    "Step3TextForCausalLM": "built in test_step3.py (one KV head behind a shared query: a suite of its own)",
    "Step1ForCausalLM": "built in test_step1.py (its use_alibi_sqrt needs a stand-in on the CPU build)",
    "Plamo3ForCausalLM": "built in test_plamo3.py (its config class is the checkpoint's code)",
    "PanguEmbeddedForCausalLM": "built in test_openpangu.py (its config class is the checkpoint's code)",
    "PanguUltraMoEForCausalLM": "built in test_openpangu.py (its config class is the checkpoint's code)",
    "PanguProMoEV2ForCausalLM": (
        "built in test_openpangu.py (its config class is the checkpoint's code, and its sink tensors need a "
        "stand-in on the meta device)"
    ),
    "Zamba2ForCausalLM": "built in test_zamba2.py (shared blocks, adapters and caches: a suite of its own)",
}


#: Cases with squared-ReLU experts without a gate, which the CPU build refuses as a platform gate: built
#: with the probe's stand-in that lifts it (see the module docstring).
RELU2_EXPERTS = frozenset({"nemotron_h-moe", "nemotron_h-latent-moe+blocks"})


def _wrapper(fields: dict[str, Any]) -> dict[str, Any]:
    text = {k: v for k, v in CASES[fields["_language_model"]].items() if k != "architectures"}
    return {k: v for k, v in fields.items() if not k.startswith("_")} | {"text_config": text}


#: Multimodal wrappers held as their language model's case plus transformers' tower (the module docstring).
TOWERS: dict[str, dict[str, Any]] = {case: _wrapper(fields) for case, fields in _TABLE["towers"].items()}


CONFIGS = HERE.parent / "data" / "configs"

#: Gemma 3n checkpoints, whose towers vLLM builds through transformers' AutoModel (gemma3n_mm.py), whole on
#: every rank: the audio conformer is counted by transformers' class, the vision tower (timm's MobileNet) is
#: capacity's table of timm models. The whole wrapper, towers and all, is built in WRAPPER_FIXTURES.
GEMMA3N = {slug: json.loads((CONFIGS / slug / "config.json").read_text()) for slug in ("gemma-3n-e2b-it",)}


#: Multimodal checkpoints whose vision tower (and projector) vLLM loads one to one from what transformers'
#: class builds. Qwen-VL (``visual``): Qwen2.5-VL's (RMSNorms, a gated MLP with biases), Qwen3-VL's and
#: Qwen3.5's (learned positions, a biased patch embedding, deepstack mergers), and Qwen2-VL-7B's (a GELU
#: MLP; its published vision_config, with a two-layer text model: the tower is what is counted).
QWEN_VL_TOWERS: dict[str, dict[str, Any]] = {
    slug: json.loads((CONFIGS / slug / "config.json").read_text())
    for slug in ("qwen2.5-vl-7b-instruct", "qwen3-vl-235b-a22b", "qwen3.5-397b-a17b", "qwen3.6-27b-nvfp4")
} | {"qwen2-vl-7b": QWEN2_VL_7B}


#: Vision towers (``vision_tower``) with their wrapper's projector (``multi_modal_projector``): Pixtral with
#: Mistral 3's (Mistral-Small-3.1: a norm and a patch merger, unbiased linears; and with
#: multimodal_projector_bias on) and LLaVA's (Pixtral-12B's published shapes, with biased linears by
#: LlavaConfig's default); InternViT with InternVL's mlp1 in the HF format (InternVL3-8B's shapes, and a
#: 6B-style tower: RMSNorms, q/k norms, no q/k/v bias, no position table).
_MISTRAL_SMALL = json.loads((CONFIGS / "mistral-small-3.1-24b-instruct-2503" / "config.json").read_text())
_INTERNVL_HF = {
    "architectures": ["InternVLForConditionalGeneration"],
    "model_type": "internvl",
    "downsample_ratio": 0.5,
    "vision_feature_layer": -1,
    "text_config": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 2,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 151674,
        "max_position_embeddings": 32768,
    },
    "vision_config": {
        "model_type": "internvl_vision",
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "image_size": [448, 448],
        "patch_size": [14, 14],
        "attention_bias": True,
        "norm_type": "layer_norm",
    },
}
PROJECTED_TOWERS: dict[str, dict[str, Any]] = {
    "internvl3-8b-hf": _INTERNVL_HF,
    "internvl-6b-style": _INTERNVL_HF
    | {
        "vision_config": _INTERNVL_HF["vision_config"]
        | {
            "hidden_size": 256,
            "intermediate_size": 512,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "use_qk_norm": True,
            "norm_type": "rms_norm",
            "attention_bias": False,
            "image_size": [224, 224],
            "use_absolute_position_embeddings": False,
        }
    },
    "mistral-small-3.1": _MISTRAL_SMALL,
    "mistral-small-3.1+projector-bias": _MISTRAL_SMALL | {"multimodal_projector_bias": True},
    "pixtral-12b": {
        "architectures": ["LlavaForConditionalGeneration"],
        "model_type": "llava",
        "image_token_index": 10,
        "vision_feature_layer": -1,
        "text_config": {
            "model_type": "mistral",
            "hidden_size": 5120,
            "head_dim": 128,
            "intermediate_size": 14336,
            "num_attention_heads": 32,
            "num_hidden_layers": 40,
            "num_key_value_heads": 8,
            "vocab_size": 131072,
            "max_position_embeddings": 1024000,
        },
        "vision_config": {
            "model_type": "pixtral",
            "hidden_size": 1024,
            "image_size": 1024,
            "intermediate_size": 4096,
            "num_attention_heads": 16,
            "num_hidden_layers": 24,
            "patch_size": 16,
            "head_dim": 64,
        },
    },
}


#: Each tower case with the modules transformers builds it under.
TOWER_MODULES: dict[str, tuple[dict[str, Any], str | list[str]]] = {
    slug: (config, "visual") for slug, config in QWEN_VL_TOWERS.items()
} | {slug: (config, ["vision_tower", "multi_modal_projector"]) for slug, config in PROJECTED_TOWERS.items()}


def _quantized_fixtures() -> dict[str, dict[str, Any]]:
    """Every real quantized checkpoint in tests/data/configs capacity reads the architecture of: the probe's
    case, its config.json with the hf_quant_config.json beside it."""
    found: dict[str, dict[str, Any]] = {}
    for folder in sorted(p for p in CONFIGS.iterdir() if (p / "config.json").is_file()):
        config = json.loads((folder / "config.json").read_text())
        hf_quant = folder / "hf_quant_config.json"
        text = config.get("text_config") or {}
        if "quantization_config" in config or "quantization_config" in text or hf_quant.is_file():
            found[folder.name] = {"config": config} | (
                {"hf_quant_config": json.loads(hf_quant.read_text())} if hf_quant.is_file() else {}
            )
    return found


#: Quantized fixtures whose vLLM class the CPU build does not build, with its refusal: a check of the CPU
#: build's kernels and imports, not of the weights (their bytes are held by test_model_zoo.py's arithmetic).
FIXTURE_NOT_BUILT = {
    "glm-5.2-nvfp4": "No NvFp4 MoE backend supports the deployment configuration",
    "deepseek-v3.1-nvfp4": "Failed to find a kernel that can implement the NVFP4 linear layer",
    "qwen3-235b-a22b-nvfp4": "Failed to find a kernel that can implement the NVFP4 linear layer",
    "kimi-k2.6-nvfp4": "No NvFp4 MoE backend supports the deployment configuration",
    "deepseek-v4-flash-nvfp4": "No NvFp4 MoE backend supports the deployment configuration",
    "deepseek-v4-flash-nvfp4-fp8": "Failed to find a kernel that can implement the NVFP4 linear layer",
    "gemma-4-26b-a4b-nvfp4": "No NvFp4 MoE backend supports the deployment configuration",
    "kimi-k3": "No MXFP4 MoE backend supports the deployment configuration",
    "kimi-k2.5": "No WNA16 MoE backend supports the deployment configuration",
    "minimax-m3-nvfp4": "Failed to find a kernel that can implement the MXFP8 linear layer",
    "qwen3.6-27b-nvfp4": "Marlin FP4 not available",
    "mimo-v2.5-pro": "contains custom code",
}

#: Quantized fixtures vLLM 0.32 refuses to load on any platform, with its refusal; capacity refuses them too.
FIXTURE_REFUSED = {"mythomax-l2-13b-gptq-int8": "GPTQ group activation ordering (desc_act=True)"}

QUANTIZED_FIXTURES = _quantized_fixtures()

#: A Llama 3 8B's widths over two layers, for the quantization blocks no fixture holds (``QUANTIZED_BLOCKS``).
_WIDE_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 2,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
_AUTOROUND = {"quant_method": "auto-round", "bits": 4, "group_size": 128, "sym": True, "data_type": "int"}


def _q(dtype: str, qscheme: str, **fields: Any) -> dict[str, Any]:
    """One Quark QuantizationSpec as Quark exports it."""
    return {
        "dtype": dtype,
        "qscheme": qscheme,
        "is_dynamic": False,
        "symmetric": True,
        "group_size": None,
    } | fields


def _quark_spec(weight: Any, inputs: Any = None, outputs: Any = None) -> dict[str, Any]:
    return {"weight": weight, "input_tensors": inputs, "output_tensors": outputs, "bias": None}


def _quark(
    spec: dict[str, Any],
    *,
    layers: dict[str, Any] | None = None,
    kv_cache_group: list[str] | None = None,
    exclude: list[str] | None = None,
) -> dict[str, Any]:
    """A Quark quantization_config as Quark exports it."""
    return {
        "quant_method": "quark",
        "export": {
            "kv_cache_group": kv_cache_group or [],
            "pack_method": "reorder",
            "weight_format": "real_quantized",
        },
        "global_quant_config": spec,
        "layer_quant_config": layers or {},
        "layer_type_quant_config": {},
        "exclude": ["lm_head", *(exclude or [])],
    }


_FP8T = _q("fp8_e4m3", "per_tensor")
_CT_W4A16 = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}

#: Quantization blocks no real fixture here holds, each on ``_WIDE_LLAMA`` (vLLM's CPU build builds them).
QUANTIZED_BLOCKS: dict[str, dict[str, Any]] = {
    "awq-int4": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"},
    # GPTQModel's dynamic rules: "-:" leaves the modules it matches unquantized
    "gptq-int4-group-32-dynamic": {"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": True}
    | {"desc_act": False, "dynamic": {"-:.*down_proj": {}}},
    "fp8-per-tensor-static": {"quant_method": "fp8", "activation_scheme": "static"},
    "ct-w4a16-asymmetric": {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {"g": {"targets": ["Linear"], "weights": _CT_W4A16 | {"symmetric": False}}},
        "ignore": ["lm_head"],
    },
    "autoround-int4": _AUTOROUND | {"packing_format": "auto_round:auto_gptq"},
    "autoround-int4-awq-packing": _AUTOROUND | {"packing_format": "auto_round:auto_awq"},
    "autoround-int4-extra-config": _AUTOROUND
    | {"extra_config": {"model.layers.0.mlp.down_proj": {"bits": 16}, "lm_head": {"bits": 16}}},
    "autoround-int4-one-block": _AUTOROUND | {"block_name_to_quantize": ["model.layers.1"]},
    "autoround-fp8-blocks": _AUTOROUND | {"bits": 8, "group_size": [128, 128], "data_type": "fp"},
    # AMD Quark: its FP8-KV recipe (FP8 weights and inputs per tensor, K and V outputs for --kv-cache-dtype
    # fp8), per-channel weights with per-token inputs, 128 x 128 blocks, INT4 W4A16, and an exclude list of
    # exact names and a regex beside a glob (which vLLM matches against nothing)
    "quark-fp8-kv": _quark(
        _quark_spec(_FP8T, _FP8T),
        layers={k: _quark_spec(_FP8T, _FP8T, _FP8T) for k in ("*k_proj", "*v_proj")},
        kv_cache_group=["*k_proj", "*v_proj"],
    ),
    "quark-fp8-per-channel-dynamic": _quark(
        _quark_spec(_q("fp8_e4m3", "per_channel"), _q("fp8_e4m3", "per_channel", is_dynamic=True))
    ),
    "quark-fp8-blocks": _quark(
        _quark_spec(
            _q("fp8_e4m3", "per_block", block_size=[128, 128]),
            _q("fp8_e4m3", "per_group", is_dynamic=True, group_size=128),
        )
    ),
    "quark-int4-w4a16": _quark(_quark_spec(_q("int4", "per_group", group_size=128))),
    "quark-fp8-exclude": _quark(
        _quark_spec(_FP8T, _FP8T),
        exclude=[f"model.layers.0.self_attn.{p}_proj" for p in "qkv"]
        + [r"re:.*layers\.1\.mlp\..*", "*o_proj"],
    ),
}


#: Vocabularies that are not a multiple of 64 (GPT-2's 50,257; MiniCPM3's 73,448), tied and untied: vLLM pads
#: the embedding and the LM head to the next multiple of 64 rows.
ODD_VOCABULARIES: dict[str, dict[str, Any]] = {
    "llama-untied": _WIDE_LLAMA | {"num_hidden_layers": 1, "vocab_size": 73448},
    "llama-tied": _WIDE_LLAMA | {"num_hidden_layers": 1, "vocab_size": 50257, "tie_word_embeddings": True},
}


def _tied(config: dict[str, Any], tie: bool) -> dict[str, Any]:
    """``config`` stating ``tie_word_embeddings`` as ``tie`` at every level: a wrapper's top level, which vLLM
    copies onto the language model's config (``VllmConfig.with_hf_config``), and its text config's own."""
    nested = {
        key: _tied(config[key], tie)
        for key in ("text_config", "llm_config", "thinker_config")
        if isinstance(config.get(key), dict)
    }
    return config | nested | {"tie_word_embeddings": tie}


#: Every case stating its embeddings tied and untied: vLLM's classes that read tie_word_embeddings build an LM
#: head for one and not the other; the rest build the same model either way (commandr.py never builds one,
#: deepseek_v2.py always does), which capacity's tables of such text model types say.
TIE_CASES = {
    f"{case}|{'tied' if tie else 'untied'}": _tied(config, tie)
    for case, config in CASES.items()
    for tie in (True, False)
}


#: Every case with a sliding window stated, alone and with the Qwen classes' switches: transformers' config
#: classes decide which layers slide (only Qwen2's, Qwen3's and their MoE's and VL's read
#: use_sliding_window and max_window_layers; SmolLM3's its NoPE layers), and vLLM's classes whether a layer
#: gets a window of its own, the model's, or none (falcon.py's attention takes none; qwen2_moe.py's a
#: mixed one reaches no layer; qwen2.py asserts it is on every layer or none).
WINDOWS = {
    "window": {"sliding_window": 96},
    "window-switched-on": {"sliding_window": 96, "use_sliding_window": True},
    "window-from-layer-1": {"sliding_window": 96, "use_sliding_window": True, "max_window_layers": 1},
}
WINDOW_CASES = {
    f"{case}|{name}": config | {"text_config": config["text_config"] | fields}
    if isinstance(config.get("text_config"), dict)
    else config | fields
    for case, config in CASES.items()
    for name, fields in WINDOWS.items()
}


@pytest.fixture(scope="module")
def vllm_counts(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    cases = (
        [
            {
                "id": case,
                "config": c,
                "plain_config": case in PLAIN_CONFIG,
                "model_runner_v2": case in RUNNER_V2,
                "relu2_moe_stand_in": case in RELU2_EXPERTS,
            }
            for case, c in CASES.items()
        ]
        + [
            {
                "id": f"variant:{case}",
                "config": c,
                "plain_config": case.split("|")[0] in PLAIN_CONFIG,
                "model_runner_v2": case.split("|")[0] in RUNNER_V2,
                "relu2_moe_stand_in": case.split("|")[0] in RELU2_EXPERTS,
            }
            for case, c in (TIE_CASES | WINDOW_CASES).items()
        ]
        + [
            {"id": f"{case}:tower", "config": config, "tower": _TABLE["towers"][case]["_tower"]}
            for case, config in TOWERS.items()
        ]
        + [
            {
                "id": f"fixture:{slug}",
                "torchvision_stand_in": _is_wrapper(files["config"]),
                # DeepSeek-V3.2's sparse attention, which the CPU build gives no backend (see the probe)
                "sparse_attention_stand_in": "index_topk" in files["config"],
            }
            | files
            for slug, files in QUANTIZED_FIXTURES.items()
        ]
        + [
            {"id": f"block:{name}", "config": _WIDE_LLAMA | {"quantization_config": block}}
            for name, block in QUANTIZED_BLOCKS.items()
        ]
        + [{"id": f"vocab:{name}", "config": config} for name, config in ODD_VOCABULARIES.items()]
        + [{"id": f"audio:{slug}", "config": c, "sub_config": "audio_config"} for slug, c in GEMMA3N.items()]
        + [
            {"id": f"tower:{slug}", "config": config, "tower": modules}
            for slug, (config, modules) in TOWER_MODULES.items()
        ]
        + [
            {
                "id": f"refused:{name}",
                "config": config,
                "plain_config": name not in REFUSED_BY_OWN_CONFIG_CLASS,
            }
            for name, (config, _, _) in REFUSED_BY_BOTH.items()
        ]
    )
    return weights_probe(vllm_env, cases)


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_counts_the_parameters_vllms_model_class_creates(
    vllm_counts: dict[str, dict[str, Any]], case: str
) -> None:
    answer = vllm_counts[case]
    ours = capacity.architecture_from_config(CASES[case]).parameters
    assert answer["error"] is None, f"vLLM could not build {case}: {answer['error']}"
    assert answer["architecture"] == CASES[case]["architectures"][0]
    # vLLM counts an n-gram table in the rows it builds (padded to 64); the checkpoint's rows are the file's.
    arch = capacity.architecture_from_config(CASES[case])
    width = arch.hidden_size // arch.ngram_embedders if arch.ngram_embedders else 0
    assert ours == answer["parameters"] - (-arch.ngram_rows % 64) * width


@pytest.mark.parametrize("case", sorted(TIE_CASES))
def test_the_lm_head_is_the_embedding_exactly_where_vllms_class_makes_it_so(
    vllm_counts: dict[str, dict[str, Any]], case: str
) -> None:
    answer, config = vllm_counts[f"variant:{case}"], TIE_CASES[case]
    if answer["error"] is not None:  # the config class refuses the value (DBRX's, GPT-J's): so does capacity
        with pytest.raises(capacity.ConfigError) as refused:
            capacity.architecture_from_config(config)
        assert refused.value.field == "tie_word_embeddings", answer["error"]
        return
    arch = capacity.architecture_from_config(config)
    width = arch.hidden_size // arch.ngram_embedders if arch.ngram_embedders else 0
    assert arch.parameters == answer["parameters"] - (-arch.ngram_rows % 64) * width


@pytest.mark.parametrize("case", sorted(WINDOW_CASES))
def test_the_layers_that_slide_are_the_ones_vllm_gives_a_window(
    vllm_counts: dict[str, dict[str, Any]], case: str
) -> None:
    answer, config = vllm_counts[f"variant:{case}"], WINDOW_CASES[case]
    if answer["error"] is not None:  # a Qwen2 model with its window on some layers only: both refuse it
        with pytest.raises(capacity.ConfigError):
            capacity.architecture_from_config(config)
        return
    arch = capacity.architecture_from_config(config)
    if arch.model_type in LATENT_HELD_ELSEWHERE:
        return
    ours = [_cached(arch, layer) for layer in arch.layers if layer.mixer in ATTENTION_MIXERS]
    assert ours == _probed_layers(answer)


@pytest.mark.parametrize("name", sorted(REFUSED_BY_BOTH))
def test_a_file_vllm_refuses_to_build_capacity_refuses_naming_the_field(
    vllm_counts: dict[str, dict[str, Any]], name: str
) -> None:
    config, field, words = REFUSED_BY_BOTH[name]
    assert words in (vllm_counts[f"refused:{name}"]["error"] or ""), vllm_counts[f"refused:{name}"]
    with pytest.raises(capacity.ConfigError) as refused:
        capacity.architecture_from_config(config)
    assert refused.value.field == field


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_weighs_the_bytes_vllms_model_class_creates(
    vllm_counts: dict[str, dict[str, Any]], case: str
) -> None:
    """Bytes as well as parameters: vLLM builds a model in its dtype, but some tensors in float32 whatever
    that is, never quantized (``capacity.architecture.FLOAT32_PARAMETERS``: score-correction biases, a state
    layer's decay, some families' routers), and every one is on every GPU that holds its layer. The failure
    names the tensors vLLM keeps in a dtype of their own."""
    answer = vllm_counts[case]
    assert answer["error"] is None, f"vLLM could not build {case}: {answer['error']}"
    ours = capacity.architecture_from_config(CASES[case]).weight_groups.total
    assert round(ours) == answer["bytes"], f"{round(ours)} vs {answer['bytes']}; {answer['own_dtypes']}"


def _bytes_as_capacity_counts_them(answer: dict[str, Any], arch: capacity.Architecture) -> float:
    """vLLM's bytes less what capacity leaves out by design (docs/capacity.md): a symmetric format's
    ``qzeros``, which vLLM builds and Marlin drops after loading; and, in a checkpoint scaled per output row,
    each row's scale, which capacity amortizes over 4,096 inputs whatever the module's width."""
    own = {key.rsplit(":", 1)[0]: count for key, count in answer["own_dtypes"].items()}
    every = (arch.weights.scheme, *(rule.scheme for rule in arch.weights.rules))
    schemes = [scheme for scheme in every if scheme is not None]
    per_row = any(scheme.weights_per_scale == PER_ROW for scheme in schemes)
    symmetric = all(scheme.zero_point_bits == 0 for scheme in schemes)
    total = float(answer["bytes"])
    for key, count in answer["own_dtypes"].items():
        name, dtype = key.rsplit(":", 1)
        if symmetric and name.endswith(".qzeros") and dtype == "int32":
            total -= 4 * count
        if per_row and name.endswith("weight_scale") and dtype == "float32":
            total += 4 * own[name.removesuffix("_scale")] / PER_ROW_IN_FEATURES - 4 * count
    return total


@pytest.mark.parametrize(
    "case",
    [f"fixture:{slug}" for slug in sorted(QUANTIZED_FIXTURES)]
    + [f"block:{name}" for name in sorted(QUANTIZED_BLOCKS)],
)
def test_capacity_weighs_each_quantized_checkpoint_as_vllms_class_builds_it(
    vllm_counts: dict[str, dict[str, Any]], case: str
) -> None:
    """Every quantized checkpoint of tests/data/configs, whole, and the blocks no fixture holds (AWQ, GPTQ
    with a dynamic rule, static fp8, asymmetric compressed-tensors, Intel AutoRound with its overrides) on a
    Llama 3 8B's widths: built by vLLM's class with their quantization config (every scale, zero point and
    packed weight as vLLM creates it) and weighed by capacity."""
    answer = vllm_counts[case]
    source, name = case.split(":", 1)
    if name in FIXTURE_REFUSED:
        assert FIXTURE_REFUSED[name] in (answer["error"] or ""), answer
        with pytest.raises(capacity.ConfigError):
            capacity.load_architecture(str(CONFIGS / name))
        return
    if name in FIXTURE_NOT_BUILT:
        assert FIXTURE_NOT_BUILT[name] in (answer["error"] or ""), f"vLLM's CPU build now builds {name}"
        return
    assert answer["error"] is None, f"vLLM could not build {name}: {answer['error']}"
    if source == "fixture":
        arch = capacity.load_architecture(str(CONFIGS / name))
    else:
        block = QUANTIZED_BLOCKS[name]
        arch = capacity.architecture_from_config(_WIDE_LLAMA | {"quantization_config": block})
    expected = _bytes_as_capacity_counts_them(answer, arch)
    assert arch.weight_groups.total == pytest.approx(expected, rel=1e-6), answer["own_dtypes"]


@pytest.mark.parametrize("name", sorted(ODD_VOCABULARIES))
def test_capacity_weighs_the_vocabulary_tables_as_vllm_pads_them(
    vllm_counts: dict[str, dict[str, Any]], name: str
) -> None:
    """The checkpoint's parameters are the file's vocabulary; the GPU holds vLLM's padded rows."""
    answer = vllm_counts[f"vocab:{name}"]
    config = ODD_VOCABULARIES[name]
    arch = capacity.architecture_from_config(config)
    tables = 1 if arch.tie_word_embeddings else 2
    padding = (arch.vocab_rows - config["vocab_size"]) * config["hidden_size"] * tables
    assert 0 < arch.vocab_rows - config["vocab_size"] < 64
    assert arch.weight_groups.total == answer["bytes"]
    assert arch.parameters == answer["parameters"] - padding


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_caches_the_heads_sizes_and_windows_vllms_attention_layers_cache(
    vllm_counts: dict[str, dict[str, Any]], case: str
) -> None:
    """Layer by layer, what each of vLLM's ``Attention`` and ``MLAAttention`` modules caches: KV heads, K and
    V head sizes (Gemma 4's global layers have their own; an MLA layer one latent head of kv_lora_rank +
    qk_rope_head_dim), the sliding window, whether the layer reads another layer's cache instead of keeping
    its own (Gemma 4's KV-shared layers), and values narrower than keys (MiMo-V2)."""
    arch = capacity.architecture_from_config(CASES[case])
    if arch.model_type in LATENT_HELD_ELSEWHERE:
        return
    ours = [_cached(arch, layer) for layer in arch.layers if layer.mixer in ATTENTION_MIXERS]
    assert ours == _probed_layers(vllm_counts[case])


def _probed_layers(answer: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The probe's attention modules as :func:`_cached` describes capacity's layers."""
    keys = ("latent", "kv_heads", "head_size", "head_size_v", "sliding_window", "kv_shared")
    return [tuple(layer[key] for key in keys) for layer in answer["attention"]]


def _cached(arch: capacity.Architecture, layer: capacity.Layer) -> tuple[Any, ...]:
    """What capacity says an attention layer caches, as the probe reports a module: (latent, KV heads, K and
    V head sizes, window, reads another layer's cache)."""
    if layer.mixer == "mla":
        latent = arch.kv_elements_per_token_per_layer
        return (True, 1, latent, latent, None, False)
    window = arch.sliding_window if layer.mixer == "sliding" else None
    widths = (arch.head_dim_of(layer), arch.v_head_dim_of(layer))
    return (False, arch.kv_heads_of(layer), *widths, window, layer.kv_shared)


#: Model types whose latent attention is a module of their own rather than vLLM's ``MLAAttention``, with the
#: module that holds their cache to the engine's.
LATENT_HELD_ELSEWHERE = {
    "kimi_linear": "test_kimi_linear.py (the engine core's KV-cache accounting of KimiK3's MLA and KDA)",
    "deepseek_v4": "test_deepseek_v4.py (its compressed and sliding caches, on a started engine)",
}


@pytest.mark.parametrize("case", sorted(TOWERS))
def test_a_wrapper_is_its_language_model_plus_the_tower_vllm_loads(
    vllm_counts: dict[str, dict[str, Any]], case: str
) -> None:
    language_model = _TABLE["towers"][case]["_language_model"]
    tower = vllm_counts[f"{case}:tower"]
    assert tower["error"] is None, f"transformers could not build {case}: {tower['error']}"
    assert tower["architecture"] == TOWERS[case]["architectures"][0]
    arch = capacity.architecture_from_config(TOWERS[case])
    assert arch.parameter_groups.vision == tower["parameters"]
    assert arch.parameters == vllm_counts[language_model]["parameters"] + tower["parameters"]
    assert not arch.warnings


@pytest.mark.parametrize("slug", sorted(TOWER_MODULES))
def test_a_vision_tower_and_its_projector_are_the_ones_transformers_builds_and_vllm_loads(
    vllm_counts: dict[str, dict[str, Any]], slug: str
) -> None:
    tower = vllm_counts[f"tower:{slug}"]
    assert tower["error"] is None, f"transformers could not build {slug}: {tower['error']}"
    assert capacity.architecture_from_config(TOWER_MODULES[slug][0]).vision_parameters == tower["parameters"]


@pytest.mark.parametrize("slug", sorted(GEMMA3N))
def test_gemma3n_holds_the_audio_conformer_transformers_builds_whole_on_every_rank(
    vllm_counts: dict[str, dict[str, Any]], slug: str
) -> None:
    audio = vllm_counts[f"audio:{slug}"]
    assert audio["error"] is None, audio["error"]
    assert audio["architecture"] == "Gemma3nAudioEncoder"
    arch = capacity.architecture_from_config(GEMMA3N[slug])
    vision = GEMMA3N[slug]["vision_config"]["architecture"]
    assert arch.vision_whole_parameters == TIMM_TOWER_PARAMETERS[vision] + audio["parameters"]


def test_the_classes_that_run_a_tower_whole_per_rank_are_vllms(
    vllm_env: VllmEnv, vllm_supports: dict[str, dict[str, bool]], tiny_models: dict[str, Any]
) -> None:
    """Where TP does not divide a width of a tower vLLM shards (``Architecture.vision_tp_widths``: GLM-V's
    heads, a Qwen-VL tower's heads, MLP and merger), kvright writes ``--mm-encoder-tp-mode data``
    (``capacity.encoder_tp_mode``). vLLM honours it only for a class with ``supports_encoder_tp_data`` and
    otherwise falls back to ``weights`` with a warning, and the TP degree stops at load. ENCODER_TP_DATA is
    the set of classes that have it, as vLLM answers for every class it can inspect here; a tower of a class
    outside it splits its widths as TP rules instead; and vLLM's parser and engine config take the flag."""
    assert len(vllm_supports) >= 70, sorted(set(FAMILIES) - set(vllm_supports))
    assert {name for name, answer in vllm_supports.items() if answer["encoder_tp_data"]} == ENCODER_TP_DATA
    sharded = {
        case: capacity.architecture_from_config(config)
        for case, config in (*TOWERS.items(), *WRAPPER_CASES.items())
        if capacity.architecture_from_config(config).vision_tp_widths
    }
    assert {arch.architecture for arch in sharded.values()} >= {
        "Glm4vMoeForConditionalGeneration",
        "Qwen2_5_VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
    }
    for case, arch in sharded.items():
        assert arch.architecture in ENCODER_TP_DATA, case
        width = arch.vision_tp_widths[0][1]
        splitting = next(tp for tp in range(2, width + 2) if width % tp)
        assert capacity.encoder_tp_mode(arch, splitting) == "data", case
    omni = capacity.load_architecture(str(CONFIGS / "qwen2.5-omni-3b"))  # a Qwen2.5-VL tower, no data mode
    assert omni.architecture not in ENCODER_TP_DATA and not omni.vision_tp_widths
    assert "3420-wide vision MLP" in (capacity.tensor_parallel_error(omni, 8) or "")
    model = str(next(iter(tiny_models.values())))
    verdict = probe(vllm_env, {"flag": ["--model", model, "--enforce-eager", "--mm-encoder-tp-mode", "data"]})
    assert verdict["flag"]["accepted"], verdict["flag"]


#: Multimodal fixtures vLLM's CPU build builds whole once torchvision is stood in (the weights probe's
#: ``torchvision_stand_in``: the wrappers' modules import it for image processing alone): their towers,
#: projectors and language models are vLLM's own classes', held to capacity's to the parameter and byte.
WRAPPER_FIXTURES = (
    "gemma-3-4b-it",
    "medgemma-27b-it",
    "llava-1.5-7b-hf",
    "llava-v1.6-mistral-7b-hf",
    "qwen2.5-vl-7b-instruct",
    "olmocr-7b-0225-preview",
    "phi-3-vision-128k-instruct",
    "qwen3-vl-235b-a22b",
    "qwen3.5-397b-a17b",
    "qwen3-asr-0.6b",
    "qwen3-omni-30b-a3b-instruct",
    "qwen2.5-omni-3b",
    "llama-4-scout-17b-16e-instruct",
    "gemma-4-26b-a4b",
    "gemma-4-e4b-it",
    "exaone-4.5-33b",
    "lfm2.5-vl-1.6b",
    "paddleocr-vl",
    "deepseek-ocr",
    "deepseek-ocr-2",
    "gemma-3n-e2b-it",
    "gemma-3n-e4b-it",
)

#: Wrapper classes that look a special token's id up in the tokenizer while they are built (the weights
#: probe's ``tokens``: a tokenizer that knows them).
TOKENS_LOOKED_UP = {
    "DeepseekOCRForCausalLM": ["<image>"],
    "DeepseekOCR2ForCausalLM": ["<image>"],
    "DeepseekVLV2ForCausalLM": ["<image>"],
}
#: Wrapper classes that build a timm tower (the weights probe's ``timm``): DeepSeek-VL2's SigLIP, Gemma 3n's
#: MobileNet (through transformers' TimmWrapper).
TIMM_TOWERS = {"DeepseekVLV2ForCausalLM", "Gemma3nForConditionalGeneration"}

_OCR = json.loads((CONFIGS / "deepseek-ocr" / "config.json").read_text())
#: DeepSeek-VL2 as its files are (no top-level ``architectures``: DeepseekVLV2Config names the class), its
#: SigLIP-so400m and downsampling projector over DeepSeek-OCR's language model, which is DeepSeek-VL2-Tiny's
#: (plain attention), and over a small MLA one (DeepSeek-VL2-Small's and the full model's kind).
_VL2 = {k: v for k, v in _OCR.items() if k not in ("architectures", "auto_map")} | {
    "vision_config": {
        "model_name": "siglip_so400m_patch14_384",
        "image_size": 384,
        "patch_size": 14,
        "width": 1152,
        "layers": 27,
        "heads": 16,
        "mlp_ratio": 3.7362,
    },
    "projector_config": {"projector_type": "downsample_mlp_gelu", "input_dim": 1152, "n_embed": 1280},
}
DEEPSEEK_VL2 = {
    "deepseek-vl2:plain-attention": _VL2,
    "deepseek-vl2:mla": _VL2
    | {
        "language_config": _OCR["language_config"]
        | {"kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32},
    },
}

#: The other multimodal fixtures, and why they are not held here.
WRAPPERS_NOT_HELD = {
    "internvl3-8b": "its config class is the checkpoint's own code (TOWERS holds its tower)",
    "mistral-small-3.1-24b-instruct-2503": (
        "a build from config.json alone ties its LM head (Mistral3Config's tie_word_embeddings default); "
        "the checkpoint ships lm_head.weight, so vLLM unties it at load (maybe_untie_word_embeddings), as "
        "capacity counts it"
    ),
}


def _is_wrapper(config: dict[str, Any]) -> bool:
    """A multimodal checkpoint (a tower's or a thinker's config beside its language model's, or
    Phi-3-vision's image settings)."""
    return any(key in config for key in ("vision_config", "audio_config", "thinker_config", "img_processor"))


def _multimodal_fixtures() -> set[str]:
    return {
        folder.name
        for folder in CONFIGS.iterdir()
        if (folder / "config.json").is_file()
        and folder.name not in QUANTIZED_FIXTURES
        and _is_wrapper(json.loads((folder / "config.json").read_text()))
    }


def _without_vision_config(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != "vision_config"}


#: Those fixtures, and vision wrappers that leave their sub-configs to the config classes' defaults
#: (PaliGemma, Idefics3, SmolVLM, LLaVA-OneVision, LLaVA-NeXT-Video, LLaVA-NeXT over several feature layers,
#: Command A Vision's Cohere2Vision); the same, and Llama 4 Scout, with no vision_config at all (the tower
#: the wrapper's config class makes: its own choice of widths, e.g. LLaVA's 336-pixel CLIP, or its tower
#: class's defaults).
WRAPPER_CASES: dict[str, dict[str, Any]] = (
    {slug: json.loads((CONFIGS / slug / "config.json").read_text()) for slug in WRAPPER_FIXTURES}
    | {f"vision:{name}": config for name, config in VISION_WRAPPERS.items()}
    | {f"no-vision-config:{name}": _without_vision_config(c) for name, c in VISION_WRAPPERS.items()}
    | {
        "no-vision-config:llama-4-scout": _without_vision_config(
            json.loads((CONFIGS / "llama-4-scout-17b-16e-instruct" / "config.json").read_text())
        )
    }
    | DEEPSEEK_VL2
    | {"glm-ocr": GLM_OCR}
)


def _wrapper_case(case: str, config: dict[str, Any]) -> dict[str, Any]:
    """The probe's case for a wrapper, with what its class needs to be built here (a config only the
    checkpoint's own code reads, Phi-3-vision's, as a plain config class of its fields)."""
    cls = capacity.architecture_from_config(config).architecture
    return (
        {"id": case, "config": config, "torchvision_stand_in": True}
        | ({"tokens": TOKENS_LOOKED_UP[cls]} if cls in TOKENS_LOOKED_UP else {})
        | ({"timm": True} if cls in TIMM_TOWERS else {})
        | ({"plain_config": True} if capacity.config_reader(config) == "checkpoint" else {})
    )


@pytest.fixture(scope="module")
def vllm_wrapper_counts(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    """The wrappers built in a process of their own: a module imported under the stand-in stays imported,
    which would let a later case build that the other probe's expects to be refused."""
    cases = [_wrapper_case(case, c) for case, c in WRAPPER_CASES.items()]
    cases += [
        _wrapper_case(f"kv:{case}", WRAPPER_CASES[case])
        | {"kv_cache": {"memory_bytes": memory, "max_model_len": length, "max_num_batched_tokens": length}}
        for case, (memory, length) in KV_ACCOUNTED.items()
    ]
    cases += [
        {"id": f"towerless:{name}", "config": c, "torchvision_stand_in": True}
        for name, c in TOWERLESS_WRAPPERS.items()
    ]
    return weights_probe(vllm_env, cases)


@pytest.mark.parametrize("name", sorted(TOWERLESS_WRAPPERS))
def test_a_multimodal_wrapper_over_a_text_models_file_alone_is_refused_as_vllm_fails_to_build_it(
    vllm_wrapper_counts: dict[str, dict[str, Any]], name: str
) -> None:
    """A wrapper class named over a text config that states and makes no tower (a REAP-pruned Qwen3.5 kept
    Qwen3_5MoeForConditionalGeneration over its qwen3_5_moe_text file): vLLM's class looks for the tower's
    config (or refuses the config's type) and fails to build; capacity refuses it naming ``architectures``."""
    assert vllm_wrapper_counts[f"towerless:{name}"]["error"], vllm_wrapper_counts[f"towerless:{name}"]
    with pytest.raises(capacity.ConfigError, match=r"'architectures': .* a multimodal wrapper"):
        capacity.architecture_from_config(TOWERLESS_WRAPPERS[name])


@pytest.mark.parametrize("case", sorted(WRAPPER_CASES))
def test_a_multimodal_wrapper_is_what_vllms_own_wrapper_class_builds(
    vllm_wrapper_counts: dict[str, dict[str, Any]], case: str
) -> None:
    answer = vllm_wrapper_counts[case]
    assert answer["error"] is None, f"vLLM could not build {case}: {answer['error']}"
    arch = capacity.architecture_from_config(WRAPPER_CASES[case])
    assert answer["architecture"] == arch.architecture
    assert arch.parameters == answer["parameters"]
    assert round(arch.weight_groups.total) == answer["bytes"], answer["own_dtypes"]
    assert not arch.warnings
    ours = [_cached(arch, layer) for layer in arch.layers if layer.mixer in ATTENTION_MIXERS]
    assert ours == _probed_layers(answer)


#: DeepSeek-VL2 classes whose KV cache the engine core sizes here: (memory bytes, max_model_len).
KV_ACCOUNTED = {
    "deepseek-ocr": (2 * 2**30, 8192),
    "deepseek-ocr-2": (2 * 2**30, 8192),
    "deepseek-vl2:mla": (256 * 2**20, 4096),
}


@pytest.mark.parametrize("case", sorted(KV_ACCOUNTED))
def test_the_deepseek_vl2_classes_cache_is_what_the_engine_core_makes_of_it(
    vllm_wrapper_counts: dict[str, dict[str, Any]], case: str
) -> None:
    """One group of every layer's cache (plain attention's K and V, or MLA's latent) whose pages, a layer's
    each, make capacity's block; as many blocks of the memory and as much concurrency as capacity's layout."""
    memory, length = KV_ACCOUNTED[case]
    answer, config = vllm_wrapper_counts[f"kv:{case}"], WRAPPER_CASES[case]
    vllm, arch, layout = accounted_layout(answer, config, length, length)
    (group,) = vllm["groups"]
    assert group["layers"] == arch.num_layers
    assert group["page_size_bytes"] * group["layers"] == layout.bytes_per_block
    assert_blocks_as_accounted(vllm, layout.num_blocks(memory), layout.blocks_per_sequence(length))


def test_every_multimodal_fixture_is_held_to_vllms_class_or_says_why_not() -> None:
    assert _multimodal_fixtures() == set(WRAPPER_FIXTURES) | set(WRAPPERS_NOT_HELD)


def test_every_text_model_class_capacity_reads_is_built_here_or_says_why_not() -> None:
    built = {config["architectures"][0] for config in CASES.values()} | {
        capacity.architecture_from_config(config).architecture for config in WRAPPER_CASES.values()
    }
    text_models = {name for name in FAMILIES if not name.endswith("ForConditionalGeneration")}
    assert text_models - built - set(NOT_BUILT) == set()
    assert not built & set(NOT_BUILT)
