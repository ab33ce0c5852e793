"""Built-in model catalog: the ``config.json`` facts of popular models, and loading an architecture by
reference.

Each entry keeps only the fields of the model's published Hugging Face ``config.json`` that the converter
reads (same names, same values), so the catalog goes through the same parser as a user's file. The comment
names the repository the facts come from and the published parameter total.
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

from capacity.architecture import Architecture, architecture_from_config
from capacity.errors import CapacityError, ConfigError

__all__ = ["catalog_architecture", "catalog_ids", "load_architecture"]

_LLAMA3_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}
_LLAMA3_70B = {
    "model_type": "llama",
    "hidden_size": 8192,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "intermediate_size": 28672,
    "vocab_size": 128256,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}
_DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "max_position_embeddings": 163840,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
}

#: id -> (source repository, published total, config facts)
_CATALOG: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama-2-7b": (
        "meta-llama/Llama-2-7b-hf",
        "6.74 B",
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "intermediate_size": 11008,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
            "torch_dtype": "float16",
            "tie_word_embeddings": False,
        },
    ),
    "llama-2-70b": (
        "meta-llama/Llama-2-70b-hf",
        "69.0 B",
        {
            "model_type": "llama",
            "hidden_size": 8192,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "intermediate_size": 28672,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
            "torch_dtype": "float16",
            "tie_word_embeddings": False,
        },
    ),
    "llama-3-8b": ("meta-llama/Meta-Llama-3-8B", "8.03 B", {**_LLAMA3_8B, "max_position_embeddings": 8192}),
    "llama-3-70b": (
        "meta-llama/Meta-Llama-3-70B",
        "70.55 B",
        {**_LLAMA3_70B, "max_position_embeddings": 8192},
    ),
    "llama-3.1-8b": (
        "meta-llama/Llama-3.1-8B-Instruct",
        "8.03 B",
        {**_LLAMA3_8B, "max_position_embeddings": 131072},
    ),
    "llama-3.1-70b": (
        "meta-llama/Llama-3.1-70B-Instruct",
        "70.55 B",
        {**_LLAMA3_70B, "max_position_embeddings": 131072},
    ),
    "llama-3.1-405b": (
        "meta-llama/Llama-3.1-405B-Instruct",
        "405.9 B",
        {
            "model_type": "llama",
            "hidden_size": 16384,
            "num_hidden_layers": 126,
            "num_attention_heads": 128,
            "num_key_value_heads": 8,
            "intermediate_size": 53248,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "mistral-7b": (
        "mistralai/Mistral-7B-Instruct-v0.3",
        "7.25 B",
        {
            "model_type": "mistral",
            "hidden_size": 4096,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "intermediate_size": 14336,
            "vocab_size": 32768,
            "max_position_embeddings": 32768,
            "sliding_window": None,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "mixtral-8x7b": (
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "46.7 B",
        {
            "model_type": "mixtral",
            "hidden_size": 4096,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "intermediate_size": 14336,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "vocab_size": 32000,
            "max_position_embeddings": 32768,
            "sliding_window": None,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "mixtral-8x22b": (
        "mistralai/Mixtral-8x22B-Instruct-v0.1",
        "140.6 B",
        {
            "model_type": "mixtral",
            "hidden_size": 6144,
            "num_hidden_layers": 56,
            "num_attention_heads": 48,
            "num_key_value_heads": 8,
            "intermediate_size": 16384,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "vocab_size": 32768,
            "max_position_embeddings": 65536,
            "sliding_window": None,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "qwen2.5-7b": (
        "Qwen/Qwen2.5-7B-Instruct",
        "7.62 B",
        {
            "model_type": "qwen2",
            "hidden_size": 3584,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "intermediate_size": 18944,
            "vocab_size": 152064,
            "max_position_embeddings": 32768,
            "sliding_window": 131072,
            "use_sliding_window": False,
            "max_window_layers": 28,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "qwen2.5-72b": (
        "Qwen/Qwen2.5-72B-Instruct",
        "72.7 B",
        {
            "model_type": "qwen2",
            "hidden_size": 8192,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "intermediate_size": 29568,
            "vocab_size": 152064,
            "max_position_embeddings": 32768,
            "sliding_window": 131072,
            "use_sliding_window": False,
            "max_window_layers": 70,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "qwen2-57b-a14b": (
        "Qwen/Qwen2-57B-A14B-Instruct",
        "57.4 B",
        {
            "model_type": "qwen2_moe",
            "hidden_size": 3584,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "intermediate_size": 18944,
            "moe_intermediate_size": 2560,
            "shared_expert_intermediate_size": 20480,
            "num_experts": 64,
            "num_experts_per_tok": 8,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "vocab_size": 151936,
            "max_position_embeddings": 32768,
            "use_sliding_window": False,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "qwen3-8b": (
        "Qwen/Qwen3-8B",
        "8.19 B",
        {
            "model_type": "qwen3",
            "hidden_size": 4096,
            "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "intermediate_size": 12288,
            "vocab_size": 151936,
            "max_position_embeddings": 40960,
            "attention_bias": False,
            "use_sliding_window": False,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "qwen3-32b": (
        "Qwen/Qwen3-32B",
        "32.8 B",
        {
            "model_type": "qwen3",
            "hidden_size": 5120,
            "num_hidden_layers": 64,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "intermediate_size": 25600,
            "vocab_size": 151936,
            "max_position_embeddings": 40960,
            "attention_bias": False,
            "use_sliding_window": False,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "qwen3-30b-a3b": (
        "Qwen/Qwen3-30B-A3B",
        "30.5 B",
        {
            "model_type": "qwen3_moe",
            "hidden_size": 2048,
            "num_hidden_layers": 48,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "intermediate_size": 6144,
            "moe_intermediate_size": 768,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "vocab_size": 151936,
            "max_position_embeddings": 40960,
            "use_sliding_window": False,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "qwen3-235b-a22b": (
        "Qwen/Qwen3-235B-A22B",
        "235 B",
        {
            "model_type": "qwen3_moe",
            "hidden_size": 4096,
            "num_hidden_layers": 94,
            "num_attention_heads": 64,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "intermediate_size": 12288,
            "moe_intermediate_size": 1536,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "vocab_size": 151936,
            "max_position_embeddings": 40960,
            "use_sliding_window": False,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "deepseek-v2-lite": (
        "deepseek-ai/DeepSeek-V2-Lite",
        "15.7 B",
        {
            "model_type": "deepseek_v2",
            "hidden_size": 2048,
            "num_hidden_layers": 27,
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "intermediate_size": 10944,
            "moe_intermediate_size": 1408,
            "n_routed_experts": 64,
            "n_shared_experts": 2,
            "num_experts_per_tok": 6,
            "first_k_dense_replace": 1,
            "moe_layer_freq": 1,
            "q_lora_rank": None,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128,
            "v_head_dim": 128,
            "vocab_size": 102400,
            "max_position_embeddings": 163840,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "deepseek-v2": (
        "deepseek-ai/DeepSeek-V2",
        "236 B",
        {
            "model_type": "deepseek_v2",
            "hidden_size": 5120,
            "num_hidden_layers": 60,
            "num_attention_heads": 128,
            "num_key_value_heads": 128,
            "intermediate_size": 12288,
            "moe_intermediate_size": 1536,
            "n_routed_experts": 160,
            "n_shared_experts": 2,
            "num_experts_per_tok": 6,
            "first_k_dense_replace": 1,
            "moe_layer_freq": 1,
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128,
            "v_head_dim": 128,
            "vocab_size": 102400,
            "max_position_embeddings": 163840,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "deepseek-v3": ("deepseek-ai/DeepSeek-V3 (main model, MTP layer excluded)", "671 B", _DEEPSEEK_V3),
    "deepseek-r1": ("deepseek-ai/DeepSeek-R1 (same architecture as V3)", "671 B", _DEEPSEEK_V3),
    "gemma-2-9b": (
        "google/gemma-2-9b-it",
        "9.24 B",
        {
            "model_type": "gemma2",
            "hidden_size": 3584,
            "num_hidden_layers": 42,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
            "intermediate_size": 14336,
            "vocab_size": 256000,
            "max_position_embeddings": 8192,
            "sliding_window": 4096,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": True,
        },
    ),
    "gemma-2-27b": (
        "google/gemma-2-27b-it",
        "27.2 B",
        {
            "model_type": "gemma2",
            "hidden_size": 4608,
            "num_hidden_layers": 46,
            "num_attention_heads": 32,
            "num_key_value_heads": 16,
            "head_dim": 128,
            "intermediate_size": 36864,
            "vocab_size": 256000,
            "max_position_embeddings": 8192,
            "sliding_window": 4096,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": True,
        },
    ),
    "gemma-3-27b": (
        "google/gemma-3-27b-it (language model; vision tower not counted)",
        "27.0 B",
        {
            "model_type": "gemma3",
            "torch_dtype": "bfloat16",
            "text_config": {
                "model_type": "gemma3_text",
                "hidden_size": 5376,
                "num_hidden_layers": 62,
                "num_attention_heads": 32,
                "num_key_value_heads": 16,
                "head_dim": 128,
                "intermediate_size": 21504,
                "vocab_size": 262208,
                "max_position_embeddings": 131072,
                "sliding_window": 1024,
                "sliding_window_pattern": 6,
            },
        },
    ),
    "phi-3-mini": (
        "microsoft/Phi-3-mini-4k-instruct",
        "3.82 B",
        {
            "model_type": "phi3",
            "hidden_size": 3072,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "intermediate_size": 8192,
            "vocab_size": 32064,
            "max_position_embeddings": 4096,
            "sliding_window": 2047,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
    "phi-3-medium": (
        "microsoft/Phi-3-medium-4k-instruct",
        "14.0 B",
        {
            "model_type": "phi3",
            "hidden_size": 5120,
            "num_hidden_layers": 40,
            "num_attention_heads": 40,
            "num_key_value_heads": 10,
            "intermediate_size": 17920,
            "vocab_size": 32064,
            "max_position_embeddings": 4096,
            "sliding_window": 2047,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
        },
    ),
}


def catalog_ids() -> list[str]:
    """Ids of the built-in models, sorted."""
    return sorted(_CATALOG)


def catalog_source(model_id: str) -> tuple[str, str]:
    """(Hugging Face repository the facts come from, published parameter total) for a catalog id."""
    source, total, _ = _entry(model_id)
    return source, total


def _entry(model_id: str) -> tuple[str, str, dict[str, Any]]:
    entry = _CATALOG.get(model_id.lower()) if isinstance(model_id, str) else None
    if entry is None:
        raise CapacityError(
            f"unknown model {model_id!r}; expected a catalog id ({', '.join(catalog_ids())}), "
            "a path to a config.json or a folder holding one"
        )
    return entry


@cache
def catalog_architecture(model_id: str) -> Architecture:
    """The architecture of a built-in model (parsed once, then cached)."""
    return architecture_from_config(_entry(model_id)[2], name=model_id.lower())


def load_architecture(ref: str) -> Architecture:
    """A catalog id, a path to a ``config.json``, or a folder holding one (the only IO in ``capacity``)."""
    if not isinstance(ref, str) or not ref:
        raise CapacityError(f"model {ref!r} is empty; expected a catalog id or a path to a config.json")
    if ref.lower() in _CATALOG:
        return catalog_architecture(ref.lower())
    path = os.path.join(ref, "config.json") if os.path.isdir(ref) else ref
    if not os.path.exists(path):
        raise CapacityError(
            f"unknown model {ref!r}: not a catalog id and no such file; expected one of "
            f"{', '.join(catalog_ids())}, a path to a config.json or a folder holding one"
        )
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, UnicodeDecodeError) as exc:
        raise CapacityError(
            f"cannot read {path}: {exc.__class__.__name__}; expected a readable config.json"
        ) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(
            "<root>",
            f"{path} is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); expected "
            f"a config.json",
        ) from exc
    return architecture_from_config(
        config, name=os.path.basename(os.path.dirname(os.path.abspath(path))) or path
    )
