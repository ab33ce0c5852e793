"""KV cache per layer kind, as vLLM 0.32's hybrid allocator holds it (``capacity.kv_cache_layout``).

The configs are small dicts shaped like the real families' files; the numbers asserted follow from the
allocator's rules (grouping, padding, Mamba page alignment), each stated next to its test. The conformance
suite (``tests/conformance/test_layer_kinds.py``) checks the same layouts against the real engine.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c


def _gemma3(layers: int = 6, pattern: int = 6, window: int = 64) -> dict[str, Any]:
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "hidden_size": 128,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "intermediate_size": 256,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "sliding_window": window,
        "sliding_window_pattern": pattern,
    }


def _qwen3_next(layers: int = 4) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3NextForCausalLM"],
        "model_type": "qwen3_next",
        "hidden_size": 128,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "intermediate_size": 256,
        "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 64,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "full_attention_interval": 4,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
    }


def test_sliding_and_full_layers_form_groups_of_the_smaller_count():
    """5 sliding + 1 full: group size 1, six groups of one page; a request holds its full-attention blocks
    plus, per sliding group, the window and in-flight tokens' blocks plus one."""
    arch = c.architecture_from_config(_gemma3())
    layout = c.kv_cache_layout(arch, max_num_batched_tokens=256, max_model_len=4096)
    page = 16 * 2 * 2 * 32 * 2  # block x (K, V) x kv heads x head_dim x bf16
    assert layout.bytes_per_block == page
    assert {(g.kind, g.layers, g.count) for g in layout.groups} == {("sliding", 5, 5), ("full", 1, 1)}
    sliding = -(-(64 - 1 + 2 * 256) // 16) + 1
    assert layout.blocks_per_sequence(4096) == 4096 // 16 + 5 * sliding


def test_a_running_request_holds_its_window_and_only_the_admitted_one_reserves_the_in_flight_tokens():
    """vLLM admits a request when its reservation (window plus in-flight tokens in each sliding group) is
    free, and a running one frees what falls behind its window: n run when n - 1 held and one reservation
    fit in the pool less its null block."""
    arch = c.architecture_from_config(_gemma3())
    layout = c.kv_cache_layout(arch, max_num_batched_tokens=256, max_model_len=4096)
    reserve = 4096 // 16 + 5 * (-(-(64 - 1 + 2 * 256) // 16) + 1)
    held = 4096 // 16 + 5 * (-(-(64 - 1) // 16) + 1)
    assert layout.blocks_per_sequence(4096) == layout.admitted_blocks_per_sequence(4096) == reserve
    assert layout.held_blocks_per_sequence(4096) == held
    assert layout.sequences(reserve, 4096) == 0  # the null block
    assert layout.sequences(1 + reserve, 4096) == 1
    assert layout.sequences(1 + reserve + 3 * held + held - 1, 4096) == 4
    # Shorter than the window: vLLM's per-request figure counts a block more in each sliding group than the
    # scheduler takes or keeps (the request's own blocks).
    assert layout.blocks_per_sequence(40) == 3 + 5 * 4
    assert layout.held_blocks_per_sequence(40) == layout.admitted_blocks_per_sequence(40) == 3 + 5 * 3


def test_with_full_attention_alone_a_request_holds_what_it_reserves():
    arch = c.architecture_from_config(_gemma3(window=0))
    layout = c.kv_cache_layout(arch, max_num_batched_tokens=256, max_model_len=4096)
    assert layout.held_blocks_per_sequence(1000) == layout.blocks_per_sequence(1000) == 63
    assert [layout.sequences(b, 1000) for b in (63, 64, 126, 127)] == [0, 1, 1, 2]


def test_the_planners_memory_limit_counts_running_sequences():
    """gpt-oss-120b on one H100 at 8K (fp8 KV): max_batch is the running count, about twice what
    counting every request at its reservation gives."""
    memory = c.KVMemory(
        c.catalog_architecture("gpt-oss-120b"),
        c.gpu_spec("h100-sxm"),
        c.EngineConfig(layout=c.Layout(), kv_cache_dtype="fp8"),
    )
    batch = memory.max_batch(8192, 1024)
    blocks = memory.blocks(batch) - 1  # the null block
    reserve = memory.layout.admitted_blocks_per_sequence(8192)
    held = memory.layout.held_blocks_per_sequence(8192)
    assert reserve + (batch - 1) * held <= blocks < reserve + batch * held
    assert batch > 1.5 * (blocks // reserve)
    assert memory.sequences(8192, batch) == memory.layout.sequences(blocks + 1, 8192) >= batch


def test_near_equal_kinds_pad_to_the_larger_count():
    """12 sliding + 13 full (gpt-oss-20b + a drafter in vLLM's comment): max < 1.5 x min, so one group of
    13 per kind, the sliding one padded by a layer."""
    cfg = _gemma3(layers=25)
    cfg.pop("sliding_window_pattern")
    cfg["layer_types"] = ["sliding_attention"] * 12 + ["full_attention"] * 13
    layout = c.kv_cache_layout(c.architecture_from_config(cfg))
    assert layout.bytes_per_block == 13 * 16 * 2 * 2 * 32 * 2
    assert sorted((g.kind, g.count) for g in layout.groups) == [("full", 1), ("sliding", 1)]


def test_a_mamba_state_raises_the_attention_block_until_its_page_holds_it():
    """Gated-DeltaNet state per layer: conv (2 x 2 x 128 + 4 x 128) x 3 plus recurrent 4 x 128 x 128, bf16;
    the attention page per token is 2 x 2 x 64 x 2 = 512 B, so the block grows to a multiple of the kernel
    alignment that holds it, and each request keeps two state blocks per group (prefix caching's align
    mode) or one without prefix caching."""
    arch = c.architecture_from_config(_qwen3_next())
    state = ((2 * 2 * 128 + 4 * 128) * 3 + 4 * 128 * 128) * 2
    assert c.memory.state_bytes_per_sequence(arch, 1) == state
    layout = c.kv_cache_layout(arch, block_size=16, kernel_block_alignment=16)
    assert layout.block_size == 16 * -(-state // (16 * 512))
    assert layout.block_size * 512 >= state
    assert {(g.kind, g.layers, g.count) for g in layout.groups} == {("mamba", 3, 3), ("full", 1, 1)}
    tokens = 10 * layout.block_size
    assert layout.blocks_per_sequence(tokens) == 10 + 3 * 2
    plain = c.kv_cache_layout(arch, enable_prefix_caching=False)
    assert plain.blocks_per_sequence(tokens) == -(-tokens // plain.block_size) + 3


def test_a_mamba_2_mixer_keeps_a_prefill_checkpoint_block_beside_its_two_align_blocks():
    """vLLM 0.32's MambaMixer2 asks for one prefill checkpoint block (num_prefill_checkpoint_blocks = 1), so
    in align mode a request holds 3 blocks per Mamba-2 group where Mamba-1 and Gated DeltaNet hold 2; 1 each
    without prefix caching (tests/conformance/test_layer_kinds.py holds Nemotron-H and Falcon-H1 engines
    to it)."""
    nemotron_h = c.catalog_architecture("nemotron-h-56b")
    assert nemotron_h.state is not None and nemotron_h.state.kind == "mamba2"
    layout = c.kv_cache_layout(nemotron_h)
    assert layout.state_blocks == 3
    assert c.kv_cache_layout(nemotron_h, enable_prefix_caching=False).state_blocks == 1
    assert c.kv_cache_layout(c.architecture_from_config(_qwen3_next())).state_blocks == 2
    mamba_groups = sum(g.count for g in layout.groups if g.kind == "mamba")
    tokens = 4 * layout.block_size
    attention = sum(g.count * layout.group_blocks(g, tokens) for g in layout.groups if g.kind == "full")
    assert layout.blocks_per_sequence(tokens) == attention + 3 * mamba_groups


def test_an_engine_that_keeps_the_recurrent_state_in_float32_needs_larger_blocks():
    """vLLM's --mamba-ssm-cache-dtype (set to float32 by vLLM 0.32's CPU platform on AVX-512 BF16 CPUs):
    the recurrent state doubles from bf16, the conv state stays in the model dtype."""
    arch = c.architecture_from_config(_qwen3_next())
    conv, recurrent = (2 * 2 * 128 + 4 * 128) * 3, 4 * 128 * 128
    assert c.memory.state_bytes_per_sequence(arch, 1, "float32") == conv * 2 + recurrent * 4
    assert c.memory.state_bytes_per_sequence(arch, 1, "auto") == (conv + recurrent) * 2
    wide = c.kv_cache_layout(
        arch, block_size=128, kernel_block_alignment=128, mamba_ssm_cache_dtype="float32"
    )
    narrow = c.kv_cache_layout(arch, block_size=128, kernel_block_alignment=128)
    assert wide.block_size == 128 * -(-(conv * 2 + recurrent * 4) // (128 * 512)) > narrow.block_size


def test_state_layers_add_no_kv_per_token_and_tp_splits_their_heads():
    arch = c.architecture_from_config(_qwen3_next())
    assert c.kv_cache_bytes_per_token(arch) == 2 * 2 * 64 * 2  # the one full-attention layer
    assert c.memory.state_bytes_per_sequence(arch, 2) * 2 == c.memory.state_bytes_per_sequence(arch, 1)
    assert c.tensor_parallel_error(arch, 8) is not None  # 4 value heads do not split 8 ways


def test_growth_per_token_is_the_full_attention_layers_bytes():
    """Between two contexts a whole number of blocks apart only the full-attention groups grow; sliding
    and state groups are bounded."""
    arch = c.architecture_from_config(_gemma3(layers=12))
    layout = c.kv_cache_layout(arch, max_num_batched_tokens=256)
    a, b = 2048, 4096
    growth = (layout.bytes_per_sequence(b) - layout.bytes_per_sequence(a)) / (b - a)
    full_layers = arch.num_full_attention_layers
    assert growth == full_layers * 2 * 2 * 32 * 2


def test_layers_with_different_kv_heads_share_one_group():
    """Llama-Nemotron (nemotron-nas): per-layer KV heads from n_heads_in_group, layers without attention;
    all attention layers are full attention, so vLLM keeps one group whose block is the sum of pages."""
    blocks = [
        {"attention": {"n_heads_in_group": 8}, "ffn": {"ffn_mult": 2.625}},
        {"attention": {"n_heads_in_group": 4}, "ffn": {"ffn_mult": 1.0}},
        {"attention": {"no_op": True}, "ffn": {"ffn_mult": 2.625}},
        {"attention": {"replace_with_linear": True}, "ffn": {"no_op": True}},
    ]
    cfg = {
        "architectures": ["DeciLMForCausalLM"],
        "model_type": "nemotron-nas",
        "hidden_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "vocab_size": 1024,
        "max_position_embeddings": 4096,
        "block_configs": blocks,
    }
    arch = c.architecture_from_config(cfg)
    assert [layer.mixer for layer in arch.layers] == ["full", "full", "none", "projection"]
    assert [layer.kv_heads for layer in arch.layers] == [1, 2, 0, 0]
    assert [layer.ffn_width for layer in arch.layers] == [1024, 512, 1024, 0]
    head_dim = 512 // 8
    layout = c.kv_cache_layout(arch)
    assert layout.bytes_per_block == 16 * (1 + 2) * 2 * head_dim * 2
    assert c.valid_tensor_parallel_sizes(arch, 8) == [1, 2, 4, 8]


def test_mla_with_a_sparse_indexer_caches_the_latent_and_the_indexer_key():
    arch = c.catalog_architecture("deepseek-v3")
    sparse = c.architecture_from_config(
        {**c.catalog_entry("deepseek-v3")["config"], "index_head_dim": 128, "index_n_heads": 64}
    )
    assert c.kv_cache_bytes_per_token(arch) == 61 * 576 * 2
    assert c.kv_cache_bytes_per_token(sparse) == 61 * (576 * 2 + 128 + 4)
    assert c.kv_cache_bytes_per_token(sparse, kv_cache_dtype="fp8") == 61 * (656 + 132)
    assert c.kv_cache_bytes_per_token(arch, tensor_parallel_size=8) == 8 * c.kv_cache_bytes_per_token(arch)


def test_the_sparse_indexer_stores_wq_b_as_the_checkpoint_and_wk_unquantized():
    """DeepSeek-V3.2's indexer on every layer, replicated (vLLM's deepseek_v32/attention.py): ``wq_b`` as
    the checkpoint stores it (fp8 in 128 x 128 blocks, an fp32 scale each), ``wk`` and the per-head weights
    projection fused into one linear vLLM builds without the quantization (bf16), and ``k_norm`` a LayerNorm
    in float32."""
    fp8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    base = {**c.catalog_entry("deepseek-v3")["config"], "quantization_config": fp8}
    dense = c.architecture_from_config(base)
    sparse = c.architecture_from_config({**base, "index_head_dim": 128, "index_n_heads": 64})
    h, q_lora, layers = 7168, 1536, 61
    per_layer = q_lora * 64 * 128 * (1 + 4 / (128 * 128)) + h * (128 + 64) * 2 + 2 * 128 * 4
    assert sparse.weight_groups.total - dense.weight_groups.total == pytest.approx(layers * per_layer)
    assert sparse.parameters - dense.parameters == layers * (q_lora * 64 * 128 + h * (128 + 64) + 2 * 128)


@pytest.mark.parametrize(("expert_parallel", "valid"), [(False, [1, 2, 4]), (True, [1, 2, 4, 8])])
def test_fp8_weight_blocks_bound_the_expert_width_per_rank(expert_parallel, valid):
    """Qwen3-235B-A22B-FP8: 1536-wide experts in 128x128 FP8 blocks; at TP 8 each rank would hold 192
    columns, which vLLM's validate_fp8_block_shape_moe refuses unless expert parallelism keeps experts
    whole."""
    cfg = {
        **c.catalog_entry("qwen3-235b-a22b")["config"],
        "quantization_config": FP8_BLOCKS,
    }
    arch = c.architecture_from_config(cfg)
    assert c.valid_tensor_parallel_sizes(arch, 8, expert_parallel=expert_parallel) == valid
    if not expert_parallel:
        error = c.tensor_parallel_error(arch, 8)
        assert error is not None and "192" in error and "accepted: 1, 2, 4" in error


MODELOPT = {"quant_method": "modelopt", "producer": {"name": "modelopt", "version": "0.41.0"}, "ignore": []}


def _qwen3_235b(quantization: dict[str, Any]) -> c.Architecture:
    return c.architecture_from_config(
        {**c.catalog_entry("qwen3-235b-a22b")["config"], "quantization_config": quantization}
    )


@pytest.mark.parametrize(
    ("algo", "valid"),
    [("FP8_PB_WO", [1, 2, 4]), ("NVFP4", [1, 2, 4, 8])],
    ids=["experts-in-blocks", "experts-in-nvfp4"],
)
def test_in_a_mixed_checkpoint_only_the_block_quantized_modules_are_held_to_the_block(algo, valid):
    """ModelOpt MIXED_PRECISION: attention in 128x128 FP8 blocks, the 1536-wide experts in ``algo``. vLLM
    loads block-FP8 experts with Fp8MoEMethod (192 columns per rank at TP 8: refused) and NVFP4 experts
    with their own method, which checks no FP8 block; the attention's block binds neither."""
    layers = {
        "model.layers.*.self_attn*": {"quant_algo": "FP8_PB_WO", "group_size": 128},
        "model.layers.*.mlp.experts*": {"quant_algo": algo, "group_size": 128 if algo == "FP8_PB_WO" else 16},
    }
    arch = _qwen3_235b({**MODELOPT, "quant_algo": "MIXED_PRECISION", "quantized_layers": layers})
    assert arch.weights.weight_block("attention", layer=0) == (128, 128)
    assert arch.weights.weight_block("experts", layer=0) == ((128, 128) if algo == "FP8_PB_WO" else None)
    assert c.valid_tensor_parallel_sizes(arch, 8) == valid


FP8_BLOCKS = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


def test_modelopts_block_kernel_pads_the_output_and_checks_only_the_input_per_rank():
    """ModelOpt FP8_PB_WO linears (KFp8Block128) pad a partial output block and need only their input per
    rank in whole 128-blocks, and plain ModelOpt FP8 loads experts without a block check; Fp8Config's
    validate_fp8_block_shape holds each rank's outputs to the block too. Qwen3-235B's 1536-wide experts
    give 192 columns per rank at TP 8: only Fp8Config refuses. A model with 64-wide heads and 4 KV heads
    leaves one 64-channel KV head per rank at TP 4: both load it (vLLM 0.32 lets a merged QKV projection
    with a part short of a block through), and both refuse the 1,000-wide MLP whose down projection then
    reads 250 channels per rank."""
    modelopt = {**MODELOPT, "quant_algo": "FP8_PB_WO"}
    assert c.valid_tensor_parallel_sizes(_qwen3_235b(FP8_BLOCKS), 8) == [1, 2, 4]
    assert c.valid_tensor_parallel_sizes(_qwen3_235b(modelopt), 8) == [1, 2, 4, 8]
    dense = {
        **c.catalog_entry("llama-3-8b")["config"],
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "intermediate_size": 8192,
    }
    for quantization in (FP8_BLOCKS, modelopt):
        loads = c.architecture_from_config({**dense, "quantization_config": quantization})
        assert c.fp8_block_error(loads, 4) is None
        narrow = {**dense, "intermediate_size": 1000, "quantization_config": quantization}
        refused = c.fp8_block_error(c.architecture_from_config(narrow), 4)
        assert refused is not None and "leaves 250 of the 1000-wide dense MLP" in refused, refused


def _llama4_text(**extra: Any) -> dict[str, Any]:
    return {
        "architectures": ["Llama4ForCausalLM"],
        "model_type": "llama4_text",
        "hidden_size": 128,
        "num_hidden_layers": 8,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "intermediate_size": 64,
        "intermediate_size_mlp": 256,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "vocab_size": 512,
        "max_position_embeddings": 65536,
        "attention_chunk_size": 1024,
        **extra,
    }


@pytest.mark.parametrize("no_rope", [None, []], ids=["absent", "empty"])
def test_llama4_default_no_rope_layers_make_every_fourth_layer_global(no_rope):
    """transformers' Llama4TextConfig builds ``no_rope_layers`` from ``no_rope_layer_interval`` (4) when the
    file leaves it out or writes ``[]`` (Meta's and RedHatAI's April 2025 Scout files): layers 3 and 7 are
    NoPE full attention, the six RoPE layers attend within the chunk."""
    cfg = _llama4_text() if no_rope is None else _llama4_text(no_rope_layers=no_rope)
    arch = c.architecture_from_config(cfg)
    assert [layer.mixer for layer in arch.layers] == ["chunked", "chunked", "chunked", "full"] * 2
    assert arch.mixer_counts == {"chunked": 6, "full": 2}


def test_llama4_layer_types_as_transformers_5_writes_them_are_not_refused():
    """transformers 5 saves ``layer_types`` (``chunked_attention`` / ``full_attention``) in a Llama 4 config;
    vLLM's Llama 4 ignores it and reads no_rope_layers and attention_chunk_size, and so does capacity."""
    types = ["chunked_attention", "chunked_attention", "chunked_attention", "full_attention"] * 2
    arch = c.architecture_from_config(_llama4_text(layer_types=types))
    assert arch.mixer_counts == {"chunked": 6, "full": 2}


def test_llama4_explicit_no_rope_layers_are_read_as_written_and_a_short_list_refused():
    arch = c.architecture_from_config(_llama4_text(no_rope_layers=[1, 0, 1, 1, 1, 1, 1, 0]))
    assert [layer.mixer for layer in arch.layers] == ["chunked", "full"] + ["chunked"] * 5 + ["full"]
    with pytest.raises(c.ConfigError, match="no_rope_layers"):
        c.architecture_from_config(_llama4_text(no_rope_layers=[1, 0]))


def test_sparse_attention_reads_the_indexer_keys_of_the_context_and_the_latent_of_the_top_k():
    """DeepSeek-V3.2 (DSA): per layer and token the indexer reads its fp8 key (128 values plus one fp32 scale)
    for every cached token, and the sparse MLA decode reads the latent of the ``index_topk`` (2048) tokens
    the indexer picked (656 bytes in ``fp8_ds_mla``), not of the whole context."""
    arch = c.catalog_architecture("deepseek-v3.2")
    assert arch.index_topk == 2048
    gpu = c.gpu_spec("h200")
    layers, index_page, latent_page = arch.num_layers, 128 + 4, 656

    def read(context: int) -> int:
        step = c.decode_step(
            arch, gpu, tensor_parallel_size=8, batch=4, context_tokens=context, kv_cache_dtype="fp8"
        )
        return step.kv_cache_bytes_read

    assert read(1024) == 4 * layers * (index_page + latent_page) * 1024  # inside top-k: all of it
    assert read(131072) == 4 * layers * (index_page * 131072 + latent_page * 2048)
    dense = c.decode_step(
        c.catalog_architecture("deepseek-v3"), gpu, tensor_parallel_size=8, batch=4, context_tokens=131072,
        kv_cache_dtype="fp8",
    )  # fmt: skip
    assert read(131072) < dense.kv_cache_bytes_read / 4
