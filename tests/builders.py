"""Builders for test objects: ``llmd("demo").model("llama-3.1-8b").tpot_ms(50).obj()``.

Builders are values: every step returns a new builder, so a shared base can be specialised freely.

One fluent builder per kind, so a test says only what matters to it and the rest is a valid default.
``spec()`` gives the spec dict; ``obj()`` the whole custom resource; ``without(path)`` drops a field and
``set(path, value)`` writes any field, valid or not (for CRD validation tests).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import capacity
from kvright.inventory import GPUNode, ProductInventory, summarize
from kvright.reconcile import Facts

API_VERSION = "kvright.dev/v1alpha1"


class LLMD:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._name = name
        self._namespace = namespace
        self._labels: dict[str, str] = {}
        self._spec: dict[str, Any] = {
            "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama-3.1-8b"},
            "slo": {"tpotMilliseconds": 50},
        }

    def _clone(self) -> LLMD:
        other = LLMD(self._name, self._namespace)
        other._labels = dict(self._labels)
        other._spec = copy.deepcopy(self._spec)
        return other

    # --- model ------------------------------------------------------------------------------------
    def model(self, architecture: str, name: str | None = None) -> LLMD:
        b = self._clone()
        b._spec["model"] = {"name": name or f"org/{architecture}", "architecture": architecture}
        return b

    def served_as(self, served_model_name: str) -> LLMD:
        b = self._clone()
        b._spec["model"]["servedModelName"] = served_model_name
        return b

    def config_map(self, name: str, key: str = "config.json", model_name: str = "org/custom") -> LLMD:
        b = self._clone()
        b._spec["model"] = {"name": model_name, "configMapRef": {"name": name, "key": key}}
        return b

    def hub(self, repository: str, revision: str = "main", token_secret: str | None = None) -> LLMD:
        b = self._clone()
        hub: dict[str, Any] = {"repository": repository, "revision": revision}
        if token_secret:
            hub["tokenSecretRef"] = {"name": token_secret, "key": "token"}
        b._spec["model"] = {"name": repository, "hub": hub}
        return b

    # --- placement and load -----------------------------------------------------------------------
    def _with(self, key: str, *, replace: bool = False, **fields: Any) -> LLMD:
        """A copy with the ``fields`` not None written into spec[key] (a new section if ``replace``)."""
        b = self._clone()
        section = {} if replace else b._spec.get(key, {})
        section.update((name, value) for name, value in fields.items() if value is not None)
        b._spec[key] = section
        return b

    def gpu(self, product: str | None = None, max_gpus: int | None = None) -> LLMD:
        return self._with("gpu", replace=True, product=product, maxGPUs=max_gpus)

    def gpu_products(self, *products: str) -> LLMD:
        """Let kvright choose among these GPU products (spec.gpu.products)."""
        return self._with("gpu", replace=True, products=list(products))

    def context(self, max_model_len: int, prompt: int | None = None, output: int | None = None) -> LLMD:
        return self._with("workload", maxModelLen=max_model_len, promptTokens=prompt, outputTokens=output)

    def shared_prefix(self, tokens: int) -> LLMD:
        """Every prompt starts with the same ``tokens`` (spec.workload.sharedPrefixTokens)."""
        return self._with("workload", sharedPrefixTokens=tokens)

    def concurrency(self, n: int) -> LLMD:
        return self._with("workload", concurrency=n)

    def tpot_ms(self, ms: int) -> LLMD:
        return self._with("slo", tpotMilliseconds=ms)

    def ttft_ms(self, ms: int) -> LLMD:
        return self._with("slo", ttftMilliseconds=ms)

    def percentile(self, p: int) -> LLMD:
        return self._with("slo", percentile=p)

    def tp(self, tp: int | str) -> LLMD:
        return self._with("tuning", tensorParallelSize=tp)

    def max_num_seqs(self, n: int | str) -> LLMD:
        return self._with("tuning", maxNumSeqs=n)

    def kv_dtype(self, dtype: str) -> LLMD:
        return self._with("tuning", kvCacheDtype=dtype)

    def replicas(self, min: int = 1, max: int = 4, count: int | None = None) -> LLMD:
        return self._with("replicas", replace=True, min=min, max=max, count=count)

    def feedback(self, mode: str, window_s: int | None = None, cooldown_s: int | None = None) -> LLMD:
        return self._with(
            "feedback", replace=True, mode=mode, windowSeconds=window_s, cooldownSeconds=cooldown_s
        )

    def image(self, image: str) -> LLMD:
        b = self._clone()
        b._spec["image"] = image
        return b

    def label(self, key: str, value: str) -> LLMD:
        b = self._clone()
        b._labels[key] = value
        return b

    # --- raw edits, for invalid objects -------------------------------------------------------------
    def set(self, path: str, value: Any) -> LLMD:
        b = self._clone()
        """Write ``value`` at a dotted path under spec (``slo.percentile``), creating objects."""
        node = b._spec
        *parents, last = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
        return b

    def without(self, path: str) -> LLMD:
        b = self._clone()
        node = b._spec
        *parents, last = path.split(".")
        for key in parents:
            node = node[key]
        node.pop(last, None)
        return b

    # --- output -------------------------------------------------------------------------------------
    def spec(self) -> dict[str, Any]:
        return copy.deepcopy(self._spec)

    def obj(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self._name, "namespace": self._namespace}
        if self._labels:
            metadata["labels"] = dict(self._labels)
        return {"apiVersion": API_VERSION, "kind": "LLMDeployment", "metadata": metadata, "spec": self.spec()}


def llmd(name: str, namespace: str = "default") -> LLMD:
    return LLMD(name, namespace)


def gpu_node_obj(
    name: str,
    product: str = "NVIDIA-H100-80GB-HBM3",
    gpus: int | str = 8,
    *,
    unschedulable: bool = False,
    memory_mib: int | None = 81559,
) -> dict[str, Any]:
    """A Node dict labelled the way GPU Feature Discovery labels one."""
    labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus)}
    if memory_mib is not None:
        labels["nvidia.com/gpu.memory"] = str(memory_mib)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"allocatable": {"cpu": "128", "memory": "2Ti", "nvidia.com/gpu": str(gpus)}},
    }


def llama_8b_config() -> dict[str, Any]:
    """Llama-3.1-8B's config.json as the Hugging Face hub serves it (for ConfigMap and hub sources)."""
    shape = dict(
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
        vocab_size=128256,
        max_position_embeddings=131072,
    )
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **shape,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
    }


def gpu_nodes(*groups: tuple[str, int, int]) -> dict[str, ProductInventory]:
    """A GPU inventory (product -> ProductInventory) of ``(product, nodes, GPUs per node)`` groups."""
    return summarize(
        GPUNode(name=f"{p}-{i}", product=p, allocatable_gpus=g, memory_mib=None)
        for p, count, g in groups
        for i in range(count)
    )


def reconcile_facts(spec: dict[str, Any], **overrides: Any) -> Facts:
    """kvright.reconcile.Facts for ``spec`` (object chat in ml, generation 3), the architecture from the
    catalog when the spec names a catalog id; ``overrides`` replace any field (inventory, status, ...)."""
    arch_id = (spec.get("model") or {}).get("architecture")
    values: dict[str, Any] = {
        "name": "chat",
        "namespace": "ml",
        "uid": "u-1",
        "generation": 3,
        "spec": spec,
        "current_status": {},
        "architecture": capacity.catalog_architecture(arch_id) if arch_id in capacity.catalog_ids() else None,
        "architecture_source": f"Catalog {arch_id}",
        "inventory": gpu_nodes(("NVIDIA-H100-80GB-HBM3", 2, 8), ("NVIDIA-H200", 1, 8)),
        "default_image": "vllm/vllm-openai:test",
    }
    values.update(overrides)
    return Facts(**values)


# Qwen2-VL and Qwen2.5-VL as their publishers ship them (the text fields at the top level, the window off).
QWEN2_VL_7B = {
    "architectures": ["Qwen2VLForConditionalGeneration"],
    "model_type": "qwen2_vl",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "sliding_window": 32768,
    "use_sliding_window": False,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {
        "depth": 32,
        "embed_dim": 1280,
        "mlp_ratio": 4,
        "num_heads": 16,
        "in_chans": 3,
        "hidden_size": 3584,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
}
QWEN25_VL_VISION = {
    "depth": 32,
    "hidden_act": "silu",
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "in_chans": 3,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "window_size": 112,
    "fullatt_block_indexes": [7, 15, 23, 31],
}
QWEN25_VL_7B = QWEN2_VL_7B | {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "max_position_embeddings": 128000,
    "vision_config": QWEN25_VL_VISION | {"out_hidden_size": 3584},
}
QWEN25_VL_3B = QWEN25_VL_7B | {
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_window_layers": 70,
    "tie_word_embeddings": True,
    "vision_config": QWEN25_VL_VISION | {"out_hidden_size": 2048},
}


def edited(config: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of ``config`` with ``changes`` over it; a change to None removes the key (a file silent
    on it)."""
    out = copy.deepcopy(config)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def zamba2_layers(layers: int, hybrid: Sequence[int]) -> list[str]:
    """A Zamba2 ``layers_block_type``: ``layers`` Mamba layers, those at ``hybrid`` also running a shared
    block."""
    return ["hybrid" if i in hybrid else "mamba" for i in range(layers)]


#: Model shapes stated as data, a file a family (or a conformance suite's cases): see :func:`model_shapes`.
SHAPES_DIR = Path(__file__).parent / "data" / "shapes"


@functools.cache
def _shape_entries(family: str) -> dict[str, dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = json.loads((SHAPES_DIR / f"{family}.json").read_text())
    return entries


def _resolved_shape(family: str, name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    ref = f"{family}:{name}"
    if ref in seen:
        raise ValueError(f"model shape {ref} is its own base (through {' -> '.join(seen)})")
    entry = _shape_entries(family)[name]
    if "config" in entry:
        config: dict[str, Any] = copy.deepcopy(entry["config"])
    else:
        base_family, _, base_name = entry["base"].rpartition(":")
        base = _resolved_shape(base_family or family, base_name, (*seen, ref))
        config = edited(base, **entry.get("edits", {}))
    if "hybrid_layers" in entry:
        config["layers_block_type"] = zamba2_layers(config["num_hidden_layers"], entry["hybrid_layers"])
    return config


def model_shapes(family: str) -> dict[str, dict[str, Any]]:
    """The model configs of ``tests/data/shapes/<family>.json`` by name, each a config.json dict of its own.

    An entry says where its shape comes from (``about``, where its name does not) and states it either whole
    (``config``) or as the ``edits`` over a ``base`` entry (``"name"`` in the same file, ``"family:name"`` in
    another), read as :func:`edited` reads them: a null edit removes the key (a file silent on it). A Zamba2
    entry may give its ``hybrid_layers`` for the ``layers_block_type`` :func:`zamba2_layers` makes of them."""
    return {name: _resolved_shape(family, name) for name in _shape_entries(family)}


def cpu_engine_layout(
    arch: capacity.Architecture,
    *,
    max_model_len: int,
    max_num_batched_tokens: int,
    mamba_ssm_cache_dtype: str | None = None,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str = "auto",
) -> capacity.KVCacheLayout:
    """The KV-cache layout vLLM 0.32's engine core makes on its CPU platform, as the conformance probes run
    it: 128-token blocks (its attention backends; also the alignment for a state), one batch in flight
    (synchronous scheduling) and no prefix caching (off for MLA models there, and off in the probes)."""
    return capacity.kv_cache_layout(
        arch,
        tensor_parallel_size=tensor_parallel_size,
        kv_cache_dtype=kv_cache_dtype,
        block_size=128,
        kernel_block_alignment=128,
        max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=max_model_len,
        max_in_flight_tokens=max_num_batched_tokens,
        enable_prefix_caching=False,
        mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
    )


#: A small standard decoder's fields: four layers of 256, four query heads of 64 over two KV heads, a
#: 1,024-token vocabulary (whole 64-row shards), a 512-wide MLP; what a family's small config adds to.
SMALL_DECODER: dict[str, Any] = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def weight_bytes_by_tp(config: dict[str, Any], tps: Iterable[int]) -> dict[int, int]:
    """The weight bytes capacity puts on one GPU of ``config`` at each TP degree of ``tps`` (as a surveyed
    table of vLLM's per-rank bytes states them)."""
    arch = capacity.architecture_from_config(config)
    return {tp: capacity.weight_bytes_per_gpu(arch, tp) for tp in tps}


def cpu_engine_accounting(
    config: dict[str, Any],
    memory: int,
    max_model_len: int,
    *,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str = "auto",
) -> tuple[int, int, float]:
    """(block size, blocks of ``memory``, concurrency at ``max_model_len``) of ``config`` on vLLM 0.32's CPU
    engine core (:func:`cpu_engine_layout`, as many tokens batched as the context): the numbers its cache
    setup logs, as a surveyed table states them."""
    layout = cpu_engine_layout(
        capacity.architecture_from_config(config),
        max_model_len=max_model_len,
        max_num_batched_tokens=max_model_len,
        tensor_parallel_size=tensor_parallel_size,
        kv_cache_dtype=kv_cache_dtype,
    )
    blocks = layout.num_blocks(memory)
    return layout.block_size, blocks, blocks / layout.blocks_per_sequence(max_model_len)


# A small MiniMax-M3 text model (vLLM's minimax_m3_mtp type: MiniMaxM3TextConfig with one layer unless stated;
# the text config's own type is registered nowhere): four layers, the first dense and attended whole, the
# other three routed and sparse.
MINIMAX_M3_TEXT: dict[str, Any] = {
    "architectures": ["MiniMaxM3SparseForCausalLM"],
    "model_type": "minimax_m3_mtp",
    "dtype": "bfloat16",
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "intermediate_size": 128,
    "dense_intermediate_size": 384,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "moe_layer_freq": [0, 1, 1, 1],
    "sparse_attention_config": {
        "sparse_index_dim": 128,
        "sparse_num_index_heads": 2,
        "sparse_topk_blocks": 16,
        "sparse_block_size": 128,
        "sparse_attention_freq": [0, 1, 1, 1],
    },
}


# Audio wrappers as their files state them (transformers' config classes; vLLM builds each as its class
# says), over a small language model. A sub-config that states only its type takes its class's defaults:
# the released sizes (Qwen2-Audio-7B's Whisper-large encoder, GLM-ASR's, Granite Speech 3.3's conformer).
_SMALL_TEXT = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 4096,
    "max_position_embeddings": 4096,
}
_WHISPER_SMALL = {"num_mel_bins": 80, "num_attention_heads": 4, "max_source_positions": 300}
AUDIO_WRAPPERS: dict[str, dict[str, Any]] = {
    "qwen2_audio": {
        "architectures": ["Qwen2AudioForConditionalGeneration"],
        "model_type": "qwen2_audio",
        "torch_dtype": "bfloat16",
        "audio_token_index": 4000,
        "text_config": _SMALL_TEXT | {"model_type": "qwen2", "tie_word_embeddings": False},
        "audio_config": {
            "model_type": "qwen2_audio_encoder",
            "d_model": 128,
            "encoder_layers": 2,
            "encoder_attention_heads": 4,
            "encoder_ffn_dim": 384,
            "num_mel_bins": 80,
            "max_source_positions": 300,
        },
    },
    "audioflamingo3": {
        "architectures": ["AudioFlamingo3ForConditionalGeneration"],
        "model_type": "audioflamingo3",
        "torch_dtype": "bfloat16",
        "audio_token_id": 4000,
        "projector_bias": True,
        "text_config": _SMALL_TEXT | {"model_type": "qwen2", "tie_word_embeddings": False},
        "audio_config": _WHISPER_SMALL
        | {
            "model_type": "audioflamingo3_encoder",
            "hidden_size": 128,
            "num_hidden_layers": 2,
            "intermediate_size": 384,
        },
    },
    "glmasr": {
        "architectures": ["GlmAsrForConditionalGeneration"],
        "model_type": "glmasr",
        "torch_dtype": "bfloat16",
        "audio_token_id": 4000,
        "tie_word_embeddings": False,
        "text_config": _SMALL_TEXT | {"model_type": "llama", "tie_word_embeddings": False},
        "audio_config": {
            "model_type": "glmasr_encoder",
            "hidden_size": 128,
            "intermediate_size": 512,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "num_mel_bins": 80,
        },
    },
    "granite_speech": {
        "architectures": ["GraniteSpeechForConditionalGeneration"],
        "model_type": "granite_speech",
        "torch_dtype": "bfloat16",
        "audio_token_index": 4000,
        "tie_word_embeddings": True,
        "window_size": 15,
        "downsample_rate": 5,
        "text_config": _SMALL_TEXT | {"model_type": "granite", "tie_word_embeddings": True},
        "encoder_config": {
            "model_type": "granite_speech_encoder",
            "input_dim": 160,
            "num_layers": 2,
            "hidden_dim": 128,
            "feedforward_mult": 4,
            "num_heads": 4,
            "dim_head": 32,
            "output_dim": 42,
            "context_size": 32,
            "max_pos_emb": 64,
            "conv_kernel_size": 15,
            "conv_expansion_factor": 2,
        },
        "projector_config": {
            "model_type": "blip_2_qformer",
            "hidden_size": 64,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "intermediate_size": 128,
            "cross_attention_frequency": 2,
            "encoder_hidden_size": 128,
        },
    },
}
AUDIO_WRAPPERS |= {
    "qwen2_audio-whisper-large": edited(
        AUDIO_WRAPPERS["qwen2_audio"], audio_config={"model_type": "qwen2_audio_encoder"}
    ),
    "audioflamingo3-unbiased-projector": edited(AUDIO_WRAPPERS["audioflamingo3"], projector_bias=False),
    "glmasr-grouped-kv": edited(
        AUDIO_WRAPPERS["glmasr"],
        audio_config=AUDIO_WRAPPERS["glmasr"]["audio_config"] | {"num_key_value_heads": 2},
    ),
    "glmasr-defaults": edited(AUDIO_WRAPPERS["glmasr"], audio_config={"model_type": "glmasr_encoder"}),
    "granite_speech-defaults": edited(
        AUDIO_WRAPPERS["granite_speech"],
        encoder_config={"model_type": "granite_speech_encoder"},
        projector_config={"model_type": "blip_2_qformer"},
    ),
    "granite_speech_plus": edited(
        AUDIO_WRAPPERS["granite_speech"],
        architectures=["GraniteSpeechPlusForConditionalGeneration"],
        model_type="granite_speech_plus",
    ),
}


# Vision wrappers as a file states them when it names each sub-config's type and leaves the rest to the
# config classes (their defaults, which the engine's transformers fills in), over a small language model.
VISION_WRAPPERS: dict[str, dict[str, Any]] = {
    name: {
        "architectures": [cls],
        "model_type": model_type,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,  # both levels: vLLM copies the wrapper's onto the text config
        "text_config": _SMALL_TEXT | {"model_type": text, "tie_word_embeddings": False},
        "vision_config": {"model_type": tower},
        **extra,
    }
    for name, cls, model_type, text, tower, extra in (
        ("paligemma", "PaliGemmaForConditionalGeneration", "paligemma", "gemma", "siglip_vision_model", {}),
        ("idefics3", "Idefics3ForConditionalGeneration", "idefics3", "llama", "idefics3_vision", {}),
        (
            "smolvlm",
            "SmolVLMForConditionalGeneration",
            "smolvlm",
            "llama",
            "smolvlm_vision",
            {"scale_factor": 4},
        ),
        (
            "llava_onevision",
            "LlavaOnevisionForConditionalGeneration",
            "llava_onevision",
            "qwen2",
            "siglip_vision_model",
            {},
        ),
        (
            "llava_next_video",
            "LlavaNextVideoForConditionalGeneration",
            "llava_next_video",
            "llama",
            "clip_vision_model",
            {},
        ),
        (
            "llava-feature-layers",
            "LlavaNextForConditionalGeneration",
            "llava_next",
            "llama",
            "clip_vision_model",
            {"vision_feature_layer": [-2, -5]},
        ),
        (
            "cohere2_vision",
            "Cohere2VisionForConditionalGeneration",
            "cohere2_vision",
            "cohere2",
            "siglip_vision_model",
            {"alignment_intermediate_size": 1024},
        ),
        ("glm_ocr", "GlmOcrForConditionalGeneration", "glm_ocr", "glm_ocr_text", "glm_ocr_vision", {}),
    )
}
# BLIP-2 over a small OPT (its MLP width OPTConfig's default; OPT has no KV-head field: its K and V are every
# head's) and the Q-Former Blip2Config makes.
VISION_WRAPPERS["blip2"] = {
    "architectures": ["Blip2ForConditionalGeneration"],
    "model_type": "blip-2",
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "text_config": {k: v for k, v in _SMALL_TEXT.items() if k != "num_key_value_heads"}
    | {"model_type": "opt", "tie_word_embeddings": False},
    "vision_config": {"model_type": "blip_2_vision_model"},
}

# zai-org/GLM-OCR's config.json as its publisher ships it (printed whole but for its last token ids in a
# public session transcript, 2026-05-21): a GLM-4 language model 1,536 wide with 128-wide heads and one MTP
# layer, behind GLM-OCR's CogViT tower. The model card's "0.9B parameters" counts no embedding table.
GLM_OCR: dict[str, Any] = {
    "architectures": ["GlmOcrForConditionalGeneration"],
    "model_type": "glm_ocr",
    "text_config": {
        "model_type": "glm_ocr_text",
        "pad_token_id": 59246,
        "vocab_size": 59392,
        "eos_token_id": [59246, 59253],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 1536,
        "initializer_range": 0.02,
        "intermediate_size": 4608,
        "max_position_embeddings": 131072,
        "num_attention_heads": 16,
        "num_hidden_layers": 16,
        "num_nextn_predict_layers": 1,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-05,
        "dtype": "bfloat16",
        "rope_parameters": {
            "rope_type": "default",
            "mrope_section": [16, 24, 24],
            "partial_rotary_factor": 1.0,
            "rope_theta": 10000,
        },
        "tie_word_embeddings": False,
        "use_cache": True,
    },
    "vision_config": {
        "model_type": "glm_ocr_vision",
        "hidden_size": 1024,
        "depth": 24,
        "num_heads": 16,
        "attention_bias": True,
        "intermediate_size": 4096,
        "hidden_act": "silu",
        "hidden_dropout_prob": 0.0,
        "initializer_range": 0.02,
        "image_size": 336,
        "patch_size": 14,
        "out_hidden_size": 1536,
        "rms_norm_eps": 1e-05,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
    "image_start_token_id": 59256,
    "image_end_token_id": 59257,
    "video_start_token_id": 59258,
}


# Multimodal wrappers named over a text model's file alone (no tower config, and a config type that makes
# none): vLLM's wrapper looks for its tower's config and fails to build.
TOWERLESS_WRAPPERS: dict[str, dict[str, Any]] = {
    name: {"architectures": [cls], "model_type": model_type, "torch_dtype": "bfloat16"} | _SMALL_TEXT | extra
    for name, cls, model_type, extra in (
        ("gemma3", "Gemma3ForConditionalGeneration", "gemma3_text", {"head_dim": 64}),
        ("mistral3", "Mistral3ForConditionalGeneration", "mistral", {}),
        ("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration", "qwen2", {}),
        ("llava", "LlavaForConditionalGeneration", "llama", {}),
        ("gemma4", "Gemma4ForConditionalGeneration", "gemma4_text", {"head_dim": 64, "global_head_dim": 64}),
    )
}


# A small GLM-5 (vLLM's GlmMoeDsaForCausalLM: DeepSeek-V3.2's sparse MLA, DSA): eight layers, the first dense,
# an indexer of four 128-wide heads beside each layer's latent unless IndexCache's fields say otherwise.
#: Z.ai's GLM-5.3-Flash (vLLM's models/glm5next) at small widths: Kimi Delta Attention on three layers,
#: NoPE MLA with a pooled indexer (a key per 4 tokens) on the fourth, mHC, three routed MLPs; the fields vLLM
#: reads that Glm5NextTextConfig does not declare (mhc, mla_use_nope, topk_method, scoring_func,
#: indexer_rope_interleave) stated, as the released file states them.
GLM5_NEXT_SMALL: dict[str, Any] = {
    "architectures": ["Glm5NextForCausalLM"],
    "model_type": "glm5_next_text",
    "torch_dtype": "bfloat16",
    "vocab_size": 4032,
    "hidden_size": 512,
    "intermediate_size": 1024,
    "moe_intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "scoring_func": "sigmoid",
    "topk_method": "noaux_tc",
    "moe_router_dtype": "float32",
    "mhc": True,
    "hc_mult": 2,
    "mla_use_nope": True,
    "q_lora_rank": 256,
    "kv_lora_rank": 128,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 0,
    "v_head_dim": 64,
    "index_n_heads": 4,
    "index_head_dim": 128,
    "index_topk": 256,
    "index_kpool": 4,
    "index_kpool_always_select_tail": True,
    "indexer_rope_interleave": True,
    "num_nextn_predict_layers": 1,
    "max_position_embeddings": 65536,
    "hidden_act": "silu",
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "indexed_attention"],
    "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
    "linear_attn_config": {"num_heads": 4, "head_dim": 128, "short_conv_kernel_size": 4},
    "tie_word_embeddings": False,
}

#: GLM-5.3-Flash's text config as public ports of the released checkpoint transcribe it (an MLX port's tests
#: and a C++ port's geometry file agree: 45 layers, MLA on every fourth from layer 3, a key pool of 4, mHC of
#: 4); the hub is not reachable here, so this is a transcription, not the file itself.
GLM5_3_FLASH_TEXT: dict[str, Any] = {
    "architectures": ["Glm5NextForCausalLM"],
    "model_type": "glm5_next_text",
    "torch_dtype": "bfloat16",
    "vocab_size": 154880,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 45,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "first_k_dense_replace": 3,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 288,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "topk_method": "noaux_tc",
    "norm_topk_prob": True,
    "moe_router_dtype": "float32",
    "n_group": 1,
    "topk_group": 1,
    "mhc": True,
    "hc_mult": 4,
    "hc_eps": 1e-06,
    "hc_sinkhorn_iters": 20,
    "mla_use_nope": True,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 256,
    "qk_rope_head_dim": 0,
    "v_head_dim": 256,
    "index_n_heads": 32,
    "index_head_dim": 128,
    "index_topk": 2048,
    "index_kpool": 4,
    "index_kpool_compress": True,
    "index_kpool_always_select_tail": True,
    "num_nextn_predict_layers": 1,
    "indexer_rope_interleave": True,
    "max_position_embeddings": 1048576,
    "rms_norm_eps": 1e-05,
    "hidden_act": "silu",
    "swiglu_limit": 10.0,
    "layer_types": ["deepseek_sparse_attention" if i % 4 == 3 else "linear_attention" for i in range(45)],
    "mlp_layer_types": ["dense"] * 3 + ["sparse"] * 42,
    "linear_attn_config": {
        "num_heads": 64,
        "head_dim": 128,
        "short_conv_kernel_size": 4,
        "gate_lower_bound": -5.0,
        "kda_layers": [i + 1 for i in range(45) if i % 4 != 3],
        "full_attn_layers": [i + 1 for i in range(45) if i % 4 == 3],
    },
}

#: Qwen3.8-Flash-Next (vLLM's models/qwen4_exp) at small widths: tests/data/shapes/qwen4_exp.json.
QWEN4_EXP_SMALL = model_shapes("qwen4_exp")["small"]

#: Qwen3.8-Flash-Next's text config as public copies of the released checkpoint transcribe it (widths,
#: PLE and QSA fields from three third-party copies that agree; ``output_gate_type`` is not among them and
#: is set to "sigmoid", which vLLM requires set). A transcription, not the file: the hub is not reachable.
QWEN3_8_FLASH_NEXT_TEXT: dict[str, Any] = {
    **QWEN4_EXP_SMALL,
    "vocab_size": 248320,
    "hidden_size": 2560,
    "num_hidden_layers": 48,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "max_position_embeddings": 32768,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "moe_intermediate_size": 640,
    "shared_expert_intermediate_size": 640,
    "num_experts_per_tok": 10,
    "num_experts": 512,
    "layer_types": ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(48)],
    "hc_count": 4,
    "hc_lowrank": 320,
    "ple_layer_ids": [2],
    "ple_embed_dim": 2560,
    "heads_per_ngram": 8,
    "ngram_vocab_size_base": 20_000_000,
    "indexer_n_heads": 16,
    "indexer_head_dim": 128,
    "indexer_budget": 2048,
    "eos_token_id": 248044,
}

#: Tencent's HY V4 (vLLM's models/hy_v4) at small widths with its own layout: the latent 576 wide (512 + 64,
#: what FlashMLA takes), a dense first layer, DSA on the rest, indexers on layers 0 and 1 of the class's
#: default schedule (the dense layer 0 builds none), gated MLA, sinks and iHC as the class defaults them.
HY_V4_SMALL: dict[str, Any] = {
    "architectures": ["HYV4ForCausalLM"],
    "model_type": "hy_v4",
    "dtype": "bfloat16",
    "vocab_size": 1024,
    "hidden_size": 512,
    "intermediate_size": 384,
    "moe_intermediate_size": 128,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "hidden_act": "silu",
    "max_position_embeddings": 8192,
    "tie_word_embeddings": False,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "q_lora_rank": 256,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 192,
    "qk_rope_head_dim": 64,
    "v_head_dim": 256,
    "layer_types": ["full_attention"] + ["indexed_attention"] * 5,
    "index_topk": 64,
    "index_head_dim": 128,
    "index_n_heads": 4,
    "enable_ihc": True,
    "hc_mult": 4,
    "gated_mla": True,
    "gating_type": "elementwise",
    "learnable_sink": True,
    "num_nextn_predict_layers": 1,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000},
}

GLM5_SMALL: dict[str, Any] = {
    "architectures": ["GlmMoeDsaForCausalLM"],
    "model_type": "glm_moe_dsa",
    "dtype": "bfloat16",
    "hidden_size": 512,
    "num_hidden_layers": 8,
    "first_k_dense_replace": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 256,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 192,
    "qk_rope_head_dim": 64,
    "qk_head_dim": 256,
    "v_head_dim": 256,
    "head_dim": 64,
    "index_head_dim": 128,
    "index_n_heads": 4,
    "index_topk": 64,
    "indexer_rope_interleave": True,
    "intermediate_size": 256,
    "moe_intermediate_size": 128,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "n_group": 1,
    "topk_group": 1,
    "norm_topk_prob": True,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "topk_method": "noaux_tc",
    "hidden_act": "silu",
    "rms_norm_eps": 1e-05,
    "rope_interleave": True,
    "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"},
    "max_position_embeddings": 4096,
    "vocab_size": 1024,
    "tie_word_embeddings": False,
}


# Inkling (Thinking Machines), read by vLLM 0.32's models/inkling. INKLING_TINY is the released files' shape
# at a few hundred wide, in the checkpoint's own field names (InklingModelConfig's): sliding-window layers
# with twice the full layers' KV heads, a dense MLP before routed ones with shared sink experts, every switch
# the released files turn on, an HMLP patch encoder and a dMel audio embedding. The kernels' fixed sizes are
# kept (head_dim 128, d_rel 16, a 4-token convolution window).
INKLING_TINY: dict[str, Any] = {
    "architectures": ["InklingForConditionalGeneration"],
    "model_type": "inkling_mm_model",
    "text_config": {
        "model_max_length": 4096,
        "torch_dtype": "bfloat16",
        "hidden_size": 256,
        "num_hidden_layers": 6,
        "vocab_size": 1024,
        "unpadded_vocab_size": 1000,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 128,
        "swa_num_attention_heads": 4,
        "swa_num_key_value_heads": 2,
        "swa_head_dim": 128,
        "local_layer_ids": [0, 1, 2, 4],
        "sliding_window_size": 64,
        "d_rel": 16,
        "rel_extent": 128,
        "use_embed_norm": True,
        "use_sconv": True,
        "sconv_kernel_size": 4,
        "dense_mlp_idx": 1,
        "dense_intermediate_size": 512,
        "intermediate_size": 128,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "n_shared_experts": 2,
        "shared_expert_sink": True,
        "route_scale": 8.0,
        "use_gate_bias": True,
        "gate_activation": "sigmoid",
        "norm_after_topk": True,
        "use_global_scale": True,
    },
    "vision_config": {
        "vision_encoder_type": "hmlp",
        "decoder_dmodel": 256,
        "patch_size": 8,
        "temporal_patch_size": 2,
        "n_channels": 3,
        "n_layers": 3,
        "use_vision_norm": True,
    },
    "audio_config": {
        "decoder_dmodel": 256,
        "n_mel_bins": 8,
        "mel_vocab_size": 16,
        "dmel_min_value": -7.0,
        "dmel_max_value": 2.0,
        "use_audio_norm": True,
        "audio_mode": "dmel",
    },
}

# thinkingmachines/Inkling (975B) as its published fields are transcribed in several public projects (no
# verbatim copy of its config.json was found): Inkling-Small's keys (the catalog's inkling-small) with the
# large model's values, 6,144 wide, 66 layers, 16 KV heads on its 55 sliding-window layers and 8 on its 11
# full ones, 3,072-wide experts and a 24,576-wide dense MLP. Its Hub page counts 952 B in the safetensors (the
# 8 MTP layers included, which vLLM builds only as a draft).
INKLING: dict[str, Any] = copy.deepcopy(capacity.catalog_entry("inkling-small")["config"])
INKLING["text_config"] |= {
    "hidden_size": 6144,
    "num_hidden_layers": 66,
    "num_attention_heads": 64,
    "swa_num_attention_heads": 64,
    "swa_num_key_value_heads": 16,
    "local_layer_ids": [i for i in range(66) if i % 6 != 5],
    "dense_intermediate_size": 24576,
    "intermediate_size": 3072,
    "logits_mup_width_multiplier": 24.0,
}
for _tower in ("vision_config", "audio_config"):
    INKLING[_tower]["decoder_dmodel"] = 6144

# An Inkling file in transformers' format (its inkling_text / inkling_vision / inkling_audio fields, as
# InklingConfig serializes them): layer_types and mlp_layer_types where the checkpoint's own format has
# local_layer_ids and dense_mlp_idx, no decoder_dmodel in the towers. vLLM 0.32 reads it through its own
# config class, which maps the MLP widths and the convolution window but reads neither list: every layer
# attends in full and routes, and no tower is built.
INKLING_TRANSFORMERS: dict[str, Any] = {
    "architectures": ["InklingForConditionalGeneration"],
    "model_type": "inkling_mm_model",
    "text_config": {
        # INKLING_TINY's sizes, under the names both formats share
        **{
            key: INKLING_TINY["text_config"][key]
            for key in ("vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim")
        },
        **{key: INKLING_TINY["text_config"][key] for key in INKLING_TINY["text_config"] if "swa_" in key},
        "model_type": "inkling_text",
        "num_hidden_layers": 4,
        "sliding_window_size": 64,
        "layer_types": ["hybrid_sliding", "hybrid_sliding", "hybrid_sliding", "hybrid"],
        "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
        "max_position_embeddings": 4096,
        "conv_kernel_size": 4,
        "intermediate_size": 512,
        "moe_intermediate_size": 128,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "n_shared_experts": 2,
        "shared_expert_sink": True,
        "route_scale": 8.0,
        "dtype": "bfloat16",
    },
    "vision_config": {"model_type": "inkling_vision", "hidden_size": 256, "n_layers": 2, "patch_size": 40},
    "audio_config": {"model_type": "inkling_audio", "n_mel_bins": 80, "mel_vocab_size": 256},
}


def deepseek_v41(layers: int = 4, *, quantized: bool = False, **text: Any) -> dict[str, Any]:
    """DeepSeek-V4.1-Flash's released file (tests/data/configs/deepseek-v4.1-flash, its text config nested,
    its tower's) cut to ``layers`` layers with ``text`` changed; unquantized unless ``quantized`` (the file's
    32x32 MXFP8 and MXFP4 experts). The cut's compress ratios, sources and Engram layer are the released
    file's kinds in a few layers: a window-only layer, a ratio-2 kv and index source with the Engram table,
    an index source over its keys, a ratio-1 reader."""
    path = Path(__file__).resolve().parent / "data" / "configs" / "deepseek-v4.1-flash" / "config.json"
    config = json.loads(path.read_text())
    if not quantized:
        del config["quantization_config"]
    cut = {
        "num_hidden_layers": layers,
        "compress_ratios": [0, 2, 2, 1] + [1] * (layers - 4),
        "kv_source_layer_ids": [1],
        "index_source_layer_ids": [1, 2],
        "engram_layer_ids": [1],
        "engram_num_embeddings": [384006168],
    }
    config["text_config"] = {**config["text_config"], **cut, **text}
    return config


# A small dots3-note (vLLM's models/dots3_note; rednote's checkpoint's hidden and MLP widths are not public):
# six layers, full (sparse MLA with an indexer) and sliding (an MLA of its own widths over 129 tokens), the
# sliding rows wider than the full ones, headwise gates, one dense layer then routed ones.
DOTS3_NOTE_SMALL: dict[str, Any] = {
    "architectures": ["Dots3NoteForCausalLM"],
    "model_type": "dots3_note",
    "vocab_size": 4032,
    "hidden_size": 512,
    "intermediate_size": 1024,
    "moe_intermediate_size": 128,
    "num_hidden_layers": 6,
    "layer_types": [
        "full_attention",
        "full_attention",
        "sliding_attention",
        "sliding_attention",
        "full_attention",
        "sliding_attention",
    ],
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "q_lora_rank": 192,
    "kv_lora_rank": 128,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 32,
    "v_head_dim": 64,
    "rope_theta": 1000000.0,
    "swa_num_attention_heads": 4,
    "swa_q_lora_rank": 160,
    "swa_kv_lora_rank": 224,
    "swa_qk_nope_head_dim": 96,
    "swa_qk_rope_head_dim": 32,
    "swa_v_head_dim": 48,
    "swa_rope_theta": 50000.0,
    "sliding_window_size": 129,
    "index_n_heads": 4,
    "index_head_dim": 128,
    "index_topk": 64,
    "attention_gate_type": "headwise",
    "swa_attention_gate_type": "headwise",
    "apply_mla_qkv_lora_rescale": True,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 1,
    "norm_topk_prob": True,
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "max_position_embeddings": 16384,
    "rms_norm_eps": 1e-05,
    "hidden_act": "silu",
    "torch_dtype": "bfloat16",
}

#: Ling 2.5 / Ring 2.5 and Ling 3.0 (vLLM's bailing_moe_linear.py and bailing_moe_v3.py) at small widths, each
#: also with the wide linear-attention state that sizes the hybrid block: tests/data/shapes/ling.json.
_LING = model_shapes("ling")
LING25_SMALL = _LING["ling25-small"]
LING25_WIDE_STATE = _LING["ling25-wide-state"]
LING3_SMALL = _LING["ling3-small"]
LING3_WIDE_STATE = _LING["ling3-wide-state"]


#: A small IQuest-Coder Loop model (vLLM's iquest_loopcoder.py): tests/data/shapes/iquest_loop.json.
IQUEST_LOOP_SMALL = model_shapes("iquest_loop")["small"]

#: OLMo Hybrid (vLLM's olmo_hybrid.py) at small widths, its GDN widths derived or stated, and 512 wide:
#: tests/data/shapes/olmo_hybrid.json.
_OLMO_HYBRID = model_shapes("olmo_hybrid")
OLMO_HYBRID_SMALL = _OLMO_HYBRID["small"]
OLMO_HYBRID_GDN_GQA = _OLMO_HYBRID["gdn-gqa"]
OLMO_HYBRID_WIDE = _OLMO_HYBRID["wide"]

#: A small Rnj-1 (vLLM's rnj1.py over Gemma3TextConfig): tests/data/shapes/rnj1.json.
RNJ1_SMALL = model_shapes("rnj1")["small"]


#: Zamba2 (vLLM's zamba2.py over transformers' Zamba2Config) small, in four variants, and Zamba2-2.7B's and
#: Zamba2-7B's shapes: tests/data/shapes/zamba2.json.
_ZAMBA2 = model_shapes("zamba2")
ZAMBA2_SMALL = _ZAMBA2["small"]
ZAMBA2_THREE_APPLICATIONS = _ZAMBA2["three-applications"]
ZAMBA2_WIDE = _ZAMBA2["wide"]
ZAMBA2_TWO_GROUPS = _ZAMBA2["two-groups"]
ZAMBA2_FEWER_KV_STATED = _ZAMBA2["fewer-kv-stated"]
ZAMBA2_2_7B = _ZAMBA2["2.7b"]
ZAMBA2_7B = _ZAMBA2["7b"]

#: A small Step1 (vLLM's step1.py): tests/data/shapes/step1.json.
STEP1_SMALL = model_shapes("step1")["small"]


def plamo3(layers: int = 8, window: int = 64, pattern: int = 4, **fields: Any) -> dict[str, Any]:
    """A PLaMo 3 config.json as its config class (the checkpoint's code) holds it once loaded, for vLLM's
    plamo3.py over a plain config: its window on every layer but each ``pattern``-th
    (``interleaved_sliding_window``), those layers' kinds and RoPE (``layer_types``, ``rope_parameters``); a
    small one of 128 wide, four heads of 32 over two KV heads, the LM head tied."""
    windows = [None if (i + 1) % pattern == 0 else window for i in range(layers)]
    config = {
        "architectures": ["Plamo3ForCausalLM"],
        "model_type": "plamo3",
        "torch_dtype": "bfloat16",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
        "window_size": window,
        "sliding_window_pattern": pattern,
        "rope_theta": 1000000,
        "rope_local_theta": 10000,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000},
        "interleaved_sliding_window": windows,
        "layer_types": ["full_attention" if w is None else "sliding_attention" for w in windows],
    }
    return config | fields


#: openPangu Embedded, Ultra MoE and Pro MoE V2 (vLLM's openpangu.py) at small widths:
#: tests/data/shapes/openpangu.json.
_OPENPANGU = model_shapes("openpangu")
PANGU_EMBEDDED_SMALL = _OPENPANGU["embedded-small"]
PANGU_ULTRA_SMALL = _OPENPANGU["ultra-small"]
PANGU_PRO_SMALL = _OPENPANGU["pro-small"]

#: A small Step-3 text model (vLLM's step3_text.py over its Step3TextConfig): tests/data/shapes/step3.json.
STEP3_TEXT_SMALL = model_shapes("step3")["text-small"]

# A small Step-3 (vLLM's step3_vl.py over its Step3VLConfig): the small text model behind a two-block tower of
# 64 (four heads), 56-pixel images of 14-pixel patches, a projector to 96 and twice that.
STEP3_VL_SMALL: dict[str, Any] = {
    "architectures": ["Step3VLForConditionalGeneration"],
    "model_type": "step3_vl",
    "torch_dtype": "bfloat16",
    "vision_config": {
        "model_type": "step3_vision_encoder",
        "hidden_size": 64,
        "intermediate_size": 128,
        "output_hidden_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_channels": 3,
        "image_size": 56,
        "patch_size": 14,
        "hidden_act": "quick_gelu",
        "layer_norm_eps": 1e-5,
    },
    "text_config": {k: v for k, v in STEP3_TEXT_SMALL.items() if k != "torch_dtype"},
    "understand_projector_stride": 1,
    "projector_bias": True,
    "image_token_id": 500,
}

#: A small HRM-Text (vLLM's hrm_text.py over HrmTextConfig): tests/data/shapes/hrm_text.json.
HRM_TEXT_SMALL = model_shapes("hrm_text")["small"]

#: K2-Horizon's shapes (vLLM's k2_horizon.py; its config class is the checkpoint's code), small dense, routed
#: and MoVA ones and the released 36B-A4B's and 7B's: tests/data/shapes/k2_horizon.json.
K2_HORIZON = model_shapes("k2_horizon")
K2_HORIZON_SMALL = K2_HORIZON["small"]

#: MuseGlimmer's shapes (vLLM's muse_glimmer.py over its MuseGlimmerConfig), small flat, nested and text-type
#: files, with and without their towers, and a full-size flat file: tests/data/shapes/muse_glimmer.json.
MUSE_GLIMMER = model_shapes("muse_glimmer")
MUSE_GLIMMER_SMALL = MUSE_GLIMMER["small"]
