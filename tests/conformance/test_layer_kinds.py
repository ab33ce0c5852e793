"""Layer kinds: the KV blocks real vLLM allocates for hybrid models equal capacity.kv_cache_layout's.

Tiny random checkpoints of hybrid families vLLM 0.32's CPU build serves are built here (no hub):

- Gemma 3 text (`Gemma3ForCausalLM`): sliding-window and full-attention layers in one model. Two
  patterns exercise vLLM's grouping rule: 5 sliding + 2 full (group_size = min = 2, the sliding kind
  padded by one layer) and 4 sliding + 3 full (max < 1.5 x min, so group_size = max = 4, the full
  kind padded by one layer).
- Qwen3-Next (`Qwen3NextForCausalLM`): Gated DeltaNet linear attention (a Mamba-style state) plus full
  attention, MoE MLPs. Its state page is larger than a 128-token attention page, so vLLM raises the
  attention block size (to 384 here) and pads the state page; with prefix caching (the default) the
  states are kept in "align" mode, two blocks per request per group, without it one.

Each case starts a real server with an explicit `--kv-cache-memory-bytes` budget and reads what vLLM
allocated: `num_gpu_blocks`, `block_size` and `kv_cache_max_concurrency` from `vllm:cache_config_info`,
the "KV cache size: N tokens, Maximum concurrency ..." log line, the number of KV-cache groups ("kv
cache group sizes (...)"), and the alignment / padding log lines. Nothing is faked. The CPU facts fed to
capacity: starting block size 128, kernel block alignment max(32, 128) = 128, and in-flight tokens
1 x max_num_batched_tokens (the CPU platform turns async scheduling off). The linear-attention key and
value head sizes are 128 because vLLM's CPU Gated DeltaNet kernel refuses others at the first request.

A third, Llama 4 text (`Llama4ForCausalLM`), has chunked local attention (`attention_chunk_size`) on its
RoPE layers and full attention on every fourth (NoPE) layer. vLLM 0.32 keeps its hybrid KV-cache manager
on for it: config/vllm.py would turn it off only when VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE
is false, and envs.py defaults that to "1". The chunked layers keep their ChunkedLocalAttentionSpec (their
own groups, each request holding cdiv(min(chunk + in-flight tokens, max_model_len), block) blocks), not
promoted to full attention.

Gemma 4 (`Gemma4ForCausalLM`) has sliding and global layers whose heads differ in width and count, so their
pages per token differ: vLLM gives every layer the largest page and the smaller-page kind a block size as
many times larger (256 tokens here), which the "kv cache group sizes" line shows group by group. One model is
shaped like the 26B/31B (K = V global layers with fewer KV heads), one like the E2B/E4B (per-layer inputs,
the last layers over earlier layers' caches, which get none of their own). Gemma 3n (`Gemma3nForCausalLM`)
shares caches the same way, its layers all of one shape, with AltUp, LAUREL and a width per layer beside.

Three carry Mamba states: Jamba (`JambaForCausalLM`, Mamba-1 layers, an attention layer every 4th), Nemotron-H
(Mamba-2 layers of their own) and Falcon-H1 (attention and Mamba-2 side by side in every layer). vLLM
0.32's Mamba-2 mixer asks for a prefill checkpoint block, so with prefix caching a request holds three
blocks per Mamba-2 group, two per Mamba-1 or Gated DeltaNet group.

One more is written as its publisher writes config.json, without the `layer_types` transformers saves:
Command R7B / A (`Cohere2ForCausalLM`, every 4th layer global by `sliding_window_pattern`). Which layers
slide is then derived by the config class vLLM loads, and capacity must derive the same; vLLM's layers
cache the window + 1 tokens, which the window of 129 tells apart from 128 in whole blocks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import capacity

from .harness import (
    BIG_KV_BYTES,
    BLOCK_ALIGNMENT_LOG_LINE,
    CONCURRENCY_LOG_LINE,
    MAMBA_PADDING_LOG_LINE,
    PADDING_LAYERS_LOG_LINE,
    ServerPool,
    ServerSpec,
    VllmEnv,
    build_model_from_fields,
    cache_config_labels,
    cpu_mamba_ssm_cache_dtype,
    following,
    group_block_sizes_from_log,
    kv_tokens_from_log,
    server_pool_fixture,
)

pytestmark = pytest.mark.conformance

# vLLM 0.32's CPU platform: block size 128 unless --block-size; CPU_ATTN kernel blocks are multiples of 32,
# and the hybrid alignment uses max(smallest kernel block, block_size) = 128.
CPU_BLOCK_SIZE = 128
CPU_KERNEL_BLOCK_ALIGNMENT = 128
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048  # vLLM serve's default on CPU
MAX_MODEL_LEN = 1024

_TOKENIZER_FIELDS = {"vocab_size": 512, "max_position_embeddings": 2048}


def _gemma3(pattern: str) -> dict[str, Any]:
    """Gemma 3 text, one layer per letter of `pattern`: s = sliding (window 64), f = full."""
    return {
        "model_type": "gemma3_text",
        "num_hidden_layers": len(pattern),
        "layer_types": ["sliding_attention" if c == "s" else "full_attention" for c in pattern],
        "sliding_window": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "hidden_size": 128,
        "intermediate_size": 256,
        **_TOKENIZER_FIELDS,
    }


MODELS: dict[str, dict[str, Any]] = {
    "gemma3-s5f2": _gemma3("sssfssf"),
    "gemma3-s4f3": _gemma3("sfsfsfs"),
    # 3 Gated DeltaNet layers and 1 full-attention layer (full_attention_interval 4), MoE MLPs.
    "qwen3-next": {
        "model_type": "qwen3_next",
        "num_hidden_layers": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "full_attention_interval": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_size": 128,
        "intermediate_size": 256,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 64,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        **_TOKENIZER_FIELDS,
    },
    # Jamba: Mamba-1 layers with an attention layer every 4th from the 2nd (M M A M), MoE every other layer.
    "jamba": {
        "model_type": "jamba",
        "num_hidden_layers": 4,
        "attn_layer_period": 4,
        "attn_layer_offset": 2,
        "expert_layer_period": 2,
        "expert_layer_offset": 1,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 128,
        "intermediate_size": 256,
        "mamba_d_state": 16,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        **_TOKENIZER_FIELDS,
    },
    # Nemotron-H: Mamba-2, attention, Mamba-2, MLP (hybrid_override_pattern "M*M-").
    "nemotron-h": {
        "model_type": "nemotron_h",
        "hybrid_override_pattern": "M*M-",
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "hidden_size": 128,
        "intermediate_size": 256,
        "mamba_num_heads": 8,
        "mamba_head_dim": 32,
        "ssm_state_size": 16,
        "n_groups": 2,
        "conv_kernel": 4,
        "expand": 2,
        **_TOKENIZER_FIELDS,
    },
    # Mamba-2 alone (Codestral Mamba's class): no attention layer, so no block grows with the context.
    "mamba2": {
        "model_type": "mamba2",
        "num_hidden_layers": 4,
        "hidden_size": 128,
        "expand": 2,
        "num_heads": 8,
        "head_dim": 32,
        "n_groups": 2,
        "state_size": 16,
        "conv_kernel": 4,
        **_TOKENIZER_FIELDS,
    },
    # LFM2: short convolutions (a conv state of the last 2 inputs per channel, no recurrent state) and
    # attention in the second layer; the MLP width 2/3 of block_ff_dim rounded up to 64.
    "lfm2": {
        "model_type": "lfm2",
        "layer_types": ["conv", "full_attention", "conv", "conv"],
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 128,
        "conv_dim": 128,
        "block_dim": 128,
        "block_ff_dim": 384,
        "block_multiple_of": 64,
        "conv_L_cache": 3,
        **_TOKENIZER_FIELDS,
    },
    # Falcon-H1: attention and Mamba-2 side by side in each of 3 layers (3 attention caches, 3 states).
    "falcon-h1": {
        "model_type": "falcon_h1",
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "hidden_size": 128,
        "intermediate_size": 256,
        "mamba_d_ssm": 256,
        "mamba_n_heads": 8,
        "mamba_d_head": 32,
        "mamba_n_groups": 2,
        "mamba_d_state": 16,
        "mamba_d_conv": 4,
        **_TOKENIZER_FIELDS,
    },
    # 3 chunked local attention layers (chunk 128) and 1 full (NoPE) layer (no_rope_layer_interval 4),
    # top-1 MoE MLPs of 4 experts on every layer.
    "llama4": {
        "model_type": "llama4_text",
        "num_hidden_layers": 4,
        "attention_chunk_size": 128,
        "no_rope_layer_interval": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "hidden_size": 128,
        "intermediate_size": 64,
        "intermediate_size_mlp": 256,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1,
        **_TOKENIZER_FIELDS,
    },
    # A file as its publisher writes it, with no layer_types: the config class vLLM loads derives the layers'
    # kinds from other fields, and capacity must derive the same (test_sliding_layers.py asks vLLM's config
    # code about many more files; this case adds the engine's allocation).
    # Command R7B / A (Cohere2ForCausalLM): sliding_window_pattern 4, every 4th layer global: 6 sliding
    # layers and 2 full. vLLM's layers take the window + 1; at 129 the sliding reservation (W - 1 + 256
    # in-flight tokens) crosses a 128-token block, so the case tells 129 from 130.
    "cohere2": {
        "model_type": "cohere2",
        "num_hidden_layers": 8,
        "sliding_window": 129,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 128,
        "intermediate_size": 256,
        "_as_published": {"layer_types": None, "sliding_window_pattern": 4},
        **_TOKENIZER_FIELDS,
    },
}

# Gemma 4 (Gemma4ForCausalLM): sliding and global layers whose heads differ in width and count, so their
# pages per token differ and vLLM gives the smaller page a block size as many times larger
# (unify_kv_cache_spec_page_size). "gemma4" is shaped like the 26B/31B (global layers: fewer KV heads, K = V,
# a smaller page: their blocks hold 256 tokens); "gemma4-e" like the E2B/E4B (per-layer inputs, the last two
# layers over earlier layers' caches with MLPs twice as wide, one KV head: the sliding page is the smaller).
S, F = "sliding_attention", "full_attention"
_GEMMA4 = {
    "model_type": "gemma4_text",
    "num_hidden_layers": 6,
    "layer_types": [S, S, F, S, S, F],
    "sliding_window": 64,
    "num_attention_heads": 4,
    "head_dim": 32,
    "global_head_dim": 64,
    "hidden_size": 128,
    "intermediate_size": 256,
    **_TOKENIZER_FIELDS,
}
MODELS["gemma4"] = _GEMMA4 | {
    "num_key_value_heads": 4,
    "num_global_key_value_heads": 1,
    "attention_k_eq_v": True,
    "hidden_size_per_layer_input": 0,
}
MODELS["gemma4-e"] = _GEMMA4 | {
    "num_key_value_heads": 1,
    "hidden_size_per_layer_input": 16,
    "vocab_size_per_layer_input": 512,
    "num_kv_shared_layers": 2,
    "use_double_wide_mlp": True,
}

# Gemma 3n (Gemma3nForCausalLM): sliding and global layers of one shape, the last two over earlier layers'
# caches (vLLM points a sliding one at layer first_shared - 2 and a global one at first_shared - 1, which
# this pattern makes layers of their kind), AltUp and LAUREL in every layer, an MLP width a layer.
MODELS["gemma3n"] = {
    "model_type": "gemma3n_text",
    "num_hidden_layers": 6,
    "layer_types": [S, S, S, F, S, F],
    "sliding_window": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "hidden_size": 128,
    "intermediate_size": [256, 256, 256, 256, 192, 192],
    "num_kv_shared_layers": 2,
    "hidden_size_per_layer_input": 16,
    "vocab_size_per_layer_input": 512,
    "altup_num_inputs": 2,
    "laurel_rank": 8,
    "tie_word_embeddings": True,  # vLLM's class has no LM head to load one into
    **_TOKENIZER_FIELDS,
}

#: What capacity reads from that file, so that its case cannot pass by both sides reading the wrong kinds
#: alike: the engine's allocation below then decides whether the reading is vLLM's.
DERIVED_KINDS = {"cohere2": {"sliding": 6, "full": 2}}

# A small --max-num-batched-tokens makes the sliding reservation (window - 1 + in-flight tokens) smaller
# than max_model_len, so the in-flight factor (1 on CPU, 2 with async scheduling) shows in the counts.
SMALL_BATCH = ("--max-num-batched-tokens", "256", "--max-num-seqs", "64")
NO_PREFIX_CACHING = ("--no-enable-prefix-caching",)

CASES = [
    ServerSpec(shape="gemma3-s5f2", kv_cache_memory_bytes=BIG_KV_BYTES, extra_args=SMALL_BATCH),
    ServerSpec(
        shape="gemma3-s5f2",
        tensor_parallel_size=2,
        kv_cache_memory_bytes=BIG_KV_BYTES,
        extra_args=SMALL_BATCH,
    ),
    ServerSpec(shape="gemma3-s4f3", kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="qwen3-next", kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="qwen3-next", tensor_parallel_size=2, kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="qwen3-next", kv_cache_memory_bytes=BIG_KV_BYTES, extra_args=NO_PREFIX_CACHING),
    # Mamba-1 (2 state blocks a request with prefix caching); Mamba-2 beside attention in every layer, its
    # state split over TP 2; Mamba-2 on layers of its own (both Mamba-2 hold 3: the prefill checkpoint).
    # Each engine costs about 25 s of the suite; qwen3-next above covers TP 2 and no prefix caching.
    ServerSpec(shape="jamba", kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="falcon-h1", tensor_parallel_size=2, kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="nemotron-h", kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="mamba2", kv_cache_memory_bytes=BIG_KV_BYTES),
    # LFM2's short convolutions: a state of conv inputs alone, 2 blocks a request with prefix caching.
    ServerSpec(shape="lfm2", kv_cache_memory_bytes=BIG_KV_BYTES),
    # The small batch bounds the chunked reservation (chunk + in-flight tokens) below max_model_len, so
    # the chunk bound and a full allocation differ in blocks per request, not only in groups.
    ServerSpec(shape="llama4", kv_cache_memory_bytes=BIG_KV_BYTES, extra_args=SMALL_BATCH),
    ServerSpec(shape="cohere2", kv_cache_memory_bytes=BIG_KV_BYTES, extra_args=SMALL_BATCH),
    ServerSpec(shape="gemma4", kv_cache_memory_bytes=BIG_KV_BYTES, extra_args=SMALL_BATCH),
    ServerSpec(
        shape="gemma4", tensor_parallel_size=2, kv_cache_memory_bytes=BIG_KV_BYTES, extra_args=SMALL_BATCH
    ),
    ServerSpec(shape="gemma4-e", kv_cache_memory_bytes=BIG_KV_BYTES, extra_args=SMALL_BATCH),
    ServerSpec(shape="gemma3n", kv_cache_memory_bytes=BIG_KV_BYTES, extra_args=SMALL_BATCH),
]


def _id(spec: ServerSpec) -> str:
    extra = "-no-prefix-caching" if NO_PREFIX_CACHING[0] in spec.extra_args else ""
    extra += "-mnbt256" if SMALL_BATCH[0] in spec.extra_args else ""
    return f"{spec.shape}-tp{spec.tensor_parallel_size}{extra}"


@pytest.fixture(scope="module")
def layer_models(vllm_env: VllmEnv) -> dict[str, Path]:
    return {name: build_model_from_fields(vllm_env, name, fields) for name, fields in MODELS.items()}


layer_servers = server_pool_fixture("layer_models", "vllm-layer-kinds")


def _arch(model: Path, name: str) -> capacity.Architecture:
    # The config as saved (transformers 5 writes layer_types for Llama 4; capacity, like vLLM, ignores it).
    with open(model / "config.json") as f:
        return capacity.architecture_from_config(json.load(f), name=name)


def _option(spec: ServerSpec, flag: str, default: int) -> int:
    args = list(spec.extra_args)
    return int(args[args.index(flag) + 1]) if flag in args else default


def _layout(arch: capacity.Architecture, spec: ServerSpec) -> Any:
    mnbt = _option(spec, "--max-num-batched-tokens", DEFAULT_MAX_NUM_BATCHED_TOKENS)
    return capacity.kv_cache_layout(
        arch,
        tensor_parallel_size=spec.tensor_parallel_size,
        kv_cache_dtype="auto",
        block_size=CPU_BLOCK_SIZE,
        kernel_block_alignment=CPU_KERNEL_BLOCK_ALIGNMENT,
        max_num_batched_tokens=mnbt,
        max_model_len=spec.max_model_len,
        max_in_flight_tokens=mnbt,  # CPU: async scheduling off, one batch in flight
        enable_prefix_caching=NO_PREFIX_CACHING[0] not in spec.extra_args,
        mamba_ssm_cache_dtype=cpu_mamba_ssm_cache_dtype(),
    )


def _engine_facts(labels: Mapping[str, str], log: str) -> dict[str, Any]:
    concurrency = [(int(n.replace(",", "")), float(x)) for n, x in CONCURRENCY_LOG_LINE.findall(log)]
    return {
        "block_size": int(labels["block_size"]),
        "num_gpu_blocks": int(labels["num_gpu_blocks"]),
        "kv_cache_size_tokens": int(labels["kv_cache_size_tokens"]),
        "kv_cache_max_concurrency": float(labels["kv_cache_max_concurrency"]),
        "log_tokens": kv_tokens_from_log(log),
        "log_concurrency": concurrency,
        # One block size per group; mamba groups show max_model_len when prefix caching is off.
        "groups": [len(sizes) for sizes in group_block_sizes_from_log(log)],
        "group_block_sizes": [sorted(sizes) for sizes in group_block_sizes_from_log(log)],
        # Logged by every worker that aligns (one per TP rank).
        "aligned_block_size": sorted({int(b) for b in BLOCK_ALIGNMENT_LOG_LINE.findall(log)}),
        "mamba_padding_percent": [float(p) for p in MAMBA_PADDING_LOG_LINE.findall(log)],
        "padding_layers": [int(n) for n in PADDING_LAYERS_LOG_LINE.findall(log)],
    }


@pytest.mark.parametrize("spec", CASES, ids=[_id(s) for s in CASES])
def test_hybrid_kv_cache_matches_capacity_layout(
    spec: ServerSpec, layer_servers: ServerPool, layer_models: dict[str, Path]
) -> None:
    server = layer_servers.get(spec, then=following(CASES, spec))
    log = server.log()
    engine = _engine_facts(cache_config_labels(server.metrics_text()), log)
    arch = _arch(layer_models[spec.shape], spec.shape)
    if spec.shape in DERIVED_KINDS:
        assert dict(arch.mixer_counts) == DERIVED_KINDS[spec.shape]
    layout = _layout(arch, spec)

    blocks = layout.num_blocks(spec.kv_cache_memory_bytes)
    per_request = layout.blocks_per_sequence(spec.max_model_len)
    concurrency = blocks / per_request
    tokens = int(concurrency * spec.max_model_len)
    groups = sum(g.count for g in layout.groups)
    predicted = {
        "block_size": layout.block_size,
        "num_gpu_blocks": blocks,
        "kv_cache_size_tokens": tokens,
        "kv_cache_max_concurrency": pytest.approx(concurrency, rel=1e-9),
        "log_tokens": [tokens],
        "log_concurrency": [(spec.max_model_len, pytest.approx(round(concurrency, 2), abs=0.006))],
        # vLLM logs "kv cache group sizes" only for more than one group (kv_cache_utils.py).
        "groups": [groups] if groups > 1 else [],
        # Each group's block size: the layout's, or larger where vLLM unified a smaller page (Gemma 4).
        "group_block_sizes": engine["group_block_sizes"],  # checked below
        # Raised to hold a state (logged); an attention-free model's block is max_model_len, not raised.
        "aligned_block_size": (
            [layout.block_size] if layout.block_size != CPU_BLOCK_SIZE and not arch.attention_free else []
        ),
        "mamba_padding_percent": engine["mamba_padding_percent"],  # checked below
        "padding_layers": engine["padding_layers"],  # checked below
    }
    assert engine == predicted, f"vLLM {engine} != capacity {layout}"

    mamba = [g for g in layout.groups if g.kind == "mamba"]
    # vLLM pads a state page to the attention page (and logs it) only where both are there. The padding it
    # logs is capacity's state size against that page: the blocks alone would not show a state too small.
    assert bool(engine["mamba_padding_percent"]) == bool(mamba and not arch.attention_free), engine
    if engine["mamba_padding_percent"]:
        state = capacity.memory.state_bytes_per_sequence(
            arch, spec.tensor_parallel_size, cpu_mamba_ssm_cache_dtype()
        )
        attention_page = max(g.page_bytes for g in layout.groups if g.kind != "mamba")
        padding = round(100 * (attention_page - state) / state, 2)
        # (each TP worker logs it)
        assert set(engine["mamba_padding_percent"]) == {padding}, (engine, state, layout)
    if not mamba and groups > 1:  # (a Mamba group logs max_model_len there without prefix caching)
        ours = sorted(g.tokens_per_block(layout.block_size) for g in layout.groups for _ in range(g.count))
        assert engine["group_block_sizes"] == [ours], (engine, layout)
    # vLLM pads each short group of a kind by group_size - layers % group_size layers (logged per kind).
    group_size = layout.bytes_per_block // max(g.page_bytes for g in layout.groups)
    padding = [group_size - g.layers % group_size for g in layout.groups if g.layers % group_size]
    assert sorted(engine["padding_layers"]) == sorted(padding), (engine, layout)
