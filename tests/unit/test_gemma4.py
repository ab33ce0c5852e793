"""Gemma 4 as vLLM 0.32's gemma4.py builds it and its hybrid allocator caches it.

The four text configs are the published checkpoints' fields (google/gemma-4-E2B, -E4B, -26B-A4B, -31B;
the 26B-A4B file itself is in tests/data/configs). The KV layouts asserted were computed by vLLM's own
``unify_kv_cache_spec_page_size`` and ``_get_kv_cache_groups_uniform_page_size`` on the cache specs its
attention layers declare for these configs (bf16, block size 128 as on the CPU backend); the parameter
counts of small configs of every variant are held to vLLM's model class in
tests/conformance/test_parameter_counts.py, and the layouts of two small models to the engine's allocation
in tests/conformance/test_layer_kinds.py.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.errors import ConfigError
from capacity.memory import activation_bytes
from capacity.roofline import StepModel

S, F = "sliding_attention", "full_attention"


def _types(layers: int, period: int) -> list[str]:
    return [F if (i + 1) % period == 0 else S for i in range(layers)]


COMMON = {
    "architectures": ["Gemma4ForCausalLM"],
    "model_type": "gemma4_text",
    "vocab_size": 262144,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "head_dim": 256,
    "global_head_dim": 512,
    "torch_dtype": "bfloat16",
}
MODELS: dict[str, dict[str, Any]] = {
    "e2b": COMMON
    | {
        "hidden_size": 1536,
        "num_hidden_layers": 35,
        "num_attention_heads": 8,
        "num_key_value_heads": 1,
        "intermediate_size": 6144,
        "max_position_embeddings": 131072,
        "sliding_window": 512,
        "layer_types": _types(35, 5),
        "hidden_size_per_layer_input": 256,
        "vocab_size_per_layer_input": 262144,
        "num_kv_shared_layers": 20,
        "use_double_wide_mlp": True,
    },
    "e4b": COMMON
    | {
        "hidden_size": 2560,
        "num_hidden_layers": 42,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "intermediate_size": 10240,
        "max_position_embeddings": 131072,
        "sliding_window": 512,
        "layer_types": _types(42, 6),
        "hidden_size_per_layer_input": 256,
        "vocab_size_per_layer_input": 262144,
        "num_kv_shared_layers": 18,
        "num_global_key_value_heads": None,
    },
    "26b-a4b": COMMON
    | {
        "hidden_size": 2816,
        "num_hidden_layers": 30,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "num_global_key_value_heads": 2,
        "attention_k_eq_v": True,
        "intermediate_size": 2112,
        "max_position_embeddings": 262144,
        "sliding_window": 1024,
        "layer_types": _types(30, 6),
        "enable_moe_block": True,
        "num_experts": 128,
        "top_k_experts": 8,
        "moe_intermediate_size": 704,
        "hidden_size_per_layer_input": 0,
    },
    "31b": COMMON
    | {
        "hidden_size": 5376,
        "num_hidden_layers": 60,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "num_global_key_value_heads": 4,
        "attention_k_eq_v": True,
        "intermediate_size": 21504,
        "max_position_embeddings": 262144,
        "sliding_window": 1024,
        "layer_types": _types(60, 6),
        "hidden_size_per_layer_input": 0,
    },
}

KiB = 1024


@pytest.mark.parametrize(
    ("model", "tp", "groups", "bytes_per_block"),
    [
        # (kind, layers with a cache of their own, groups, tokens per block)
        ("e2b", 1, {("sliding", 12, 4, 256), ("full", 3, 1, 128)}, 768 * KiB),
        ("e4b", 1, {("sliding", 20, 5, 256), ("full", 4, 1, 128)}, 2048 * KiB),
        ("26b-a4b", 1, {("sliding", 25, 5, 128), ("full", 5, 1, 256)}, 5120 * KiB),
        ("31b", 1, {("sliding", 50, 5, 128), ("full", 10, 1, 256)}, 20480 * KiB),
        # TP 8: 2 sliding KV heads per rank; the 4 global heads replicated to one per rank: equal pages
        ("31b", 8, {("sliding", 50, 5, 128), ("full", 10, 1, 128)}, 2560 * KiB),
    ],
)
def test_the_kv_layout_is_the_one_vllms_allocator_forms(model, tp, groups, bytes_per_block):
    """Sliding layers cache head_dim x KV heads, global layers global_head_dim x their own KV heads: the pages
    differ by 2x, so the smaller one's block holds 256 tokens (the E models' sliding layers, with one or
    two KV heads; the 26B's and 31B's global layers, with K = V heads 2 and 4). KV-shared layers (the E
    models' last 20 and 18) have no cache: groups of the fewer kind's count, one block per group."""
    arch = c.architecture_from_config(MODELS[model])
    layout = c.kv_cache_layout(
        arch,
        tensor_parallel_size=tp,
        block_size=128,
        kernel_block_alignment=128,
        max_num_batched_tokens=2048,
        max_in_flight_tokens=2048,
    )
    assert {
        (g.kind, g.layers, g.count, g.tokens_per_block(layout.block_size)) for g in layout.groups
    } == groups
    assert layout.bytes_per_block == bytes_per_block


def test_the_26b_counts_as_published_and_routes_8_of_128_experts_beside_its_dense_mlp():
    """Google's card: 25.2B in the language model, 3.8B active. Every layer runs the experts and the dense
    MLP (an always-on shared expert of intermediate_size); the router's per-expert scale and the three extra
    norms are replicated."""
    arch = c.architecture_from_config(MODELS["26b-a4b"])
    assert arch.parameters == pytest.approx(25.2e9, rel=0.01)
    assert arch.active_parameters == pytest.approx(3.8e9, rel=0.02)
    assert (arch.num_moe_layers, arch.shared_expert_intermediate_size) == (30, 2112)
    assert c.valid_tensor_parallel_sizes(arch, 8) == [1, 2, 4, 8]


def test_kv_shared_layers_keep_no_cache_but_their_reads_are_priced():
    """E4B: 42 layers, the last 18 over the caches of layers 22 (sliding) and 23 (global). The KV a token
    adds is the 24 cached layers'; a decode step still reads the cache once for every attending layer."""
    arch = c.architecture_from_config(MODELS["e4b"])
    shared = [i for i, layer in enumerate(arch.layers) if layer.kv_shared]
    assert shared == list(range(24, 42))
    sliding, full = 2 * 2 * 256 * 2, 2 * 2 * 512 * 2  # 2 KV heads of 256 / 512, K and V, bf16
    assert c.kv_cache_bytes_per_token(arch) == 20 * sliding + 4 * full
    step = StepModel(arch, c.gpu_spec("h100-sxm"), layout=c.Layout(), kv_cache_dtype="auto")
    assert step.full_kv_per_token == 7 * full  # 4 own + 3 shared global layers read
    assert step.sliding_kv_per_token == 35 * sliding


def test_per_layer_embeddings_are_a_table_never_the_lm_head():
    """E2B: the per-layer table (262144 x 35 x 256) and its projection are weights of their own; the tied LM
    head streamed per token is the input embedding alone; the shared layers' MLPs are twice as wide."""
    arch = c.architecture_from_config(MODELS["e2b"])
    g = arch.parameter_groups
    assert g.per_layer_embedding == 262144 * 35 * 256
    assert g.embedding == 262144 * 1536
    assert [layer.ffn_width for layer in arch.layers] == [6144] * 15 + [12288] * 20
    assert arch.parameters - g.per_layer_embedding - g.embedding == pytest.approx(1.88e9, rel=0.01)


def test_the_file_transformers_5_writes_reads_as_the_published_one():
    """transformers 5 saves Gemma4TextConfig with a per_layer_config (the global layers' head_dim and, with
    attention_k_eq_v, their KV heads) instead of global_head_dim / num_global_key_value_heads."""
    published = dict(MODELS["31b"])
    del published["global_head_dim"], published["num_global_key_value_heads"]
    saved = published | {
        "per_layer_config": {
            str(i): {"head_dim": 512, "num_key_value_heads": 4}
            for i, t in enumerate(published["layer_types"])
            if t == F
        }
    }
    assert c.architecture_from_config(saved).layers == c.architecture_from_config(MODELS["31b"]).layers


def test_without_k_eq_v_the_global_layers_keep_the_models_kv_heads():
    """Gemma4TextConfig applies num_global_key_value_heads only with attention_k_eq_v."""
    arch = c.architecture_from_config(MODELS["31b"] | {"attention_k_eq_v": False})
    assert {arch.kv_heads_of(layer) for layer in arch.layers} == {16}
    assert {arch.head_dim_of(layer) for layer in arch.layers} == {256, 512}


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"num_kv_shared_layers": 35}, "num_kv_shared_layers", "fewer than the 35 layers"),
        (
            {"num_kv_shared_layers": 34, "layer_types": [S] * 34 + [F]},
            "num_kv_shared_layers",
            "no earlier full layer",
        ),
        ({"per_layer_config": {"4": {"intermediate_size": 1}}}, "per_layer_config.4", "intermediate_size"),
        ({"per_layer_config": {"99": {"head_dim": 64}}}, "per_layer_config.99", "layer index below 35"),
        (
            {"attention_k_eq_v": True, "num_global_key_value_heads": 3},
            "num_global_key_value_heads",
            "divisor of num_attention_heads (8)",
        ),
    ],
    ids=["all-shared", "no-target", "unread-override", "no-such-layer", "heads-not-divisor"],
)
def test_what_vllm_cannot_build_is_refused_naming_the_field(fields, field, words):
    with pytest.raises(ConfigError) as err:
        c.architecture_from_config(MODELS["e2b"] | fields)
    assert err.value.field == field and words in str(err.value), str(err.value)


def test_fp8_blocks_hold_each_attention_shape_at_its_own_width():
    """vLLM builds the projections per layer, so Fp8Config's block check meets the global layers at their
    own width. Their merged QKV projection is let through whatever its parts (vLLM 0.32 skips the check of a
    merged linear whose parts are not all whole blocks: a 192-wide single global KV head loads), but o_proj's
    input per rank must be whole 128-wide blocks: 32 heads 200 wide leave 800 channels per GPU at TP 8."""
    fp8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    published = c.architecture_from_config(MODELS["31b"] | {"quantization_config": fp8})
    assert c.fp8_block_error(published, 8) is None
    narrow = c.architecture_from_config(
        MODELS["31b"] | {"quantization_config": fp8, "global_head_dim": 192, "num_global_key_value_heads": 1}
    )
    assert c.fp8_block_error(narrow, 8) is None
    odd = c.architecture_from_config(MODELS["31b"] | {"quantization_config": fp8, "global_head_dim": 200})
    heads = odd.num_attention_heads
    error = c.fp8_block_error(odd, 8)
    assert error is not None and f"{heads * 200 // 8} attention output channels of the 200-wide" in error
    assert c.fp8_block_error(c.architecture_from_config(MODELS["31b"] | {"global_head_dim": 200}), 8) is None


def test_the_per_layer_inputs_are_part_of_the_profile_runs_activation():
    """The E models embed every token once per layer before the first layer runs ([tokens, 35, 256] bf16
    for E2B) and each layer reads its slice, so the profile run holds them beside the widest MLP's
    activations: 147 MB more at 8192 batched tokens, the same at any TP (the projection gathers them)."""
    e2b = c.architecture_from_config(MODELS["e2b"])
    plain = c.architecture_from_config(MODELS["e2b"] | {"hidden_size_per_layer_input": 0})
    for tp in (1, 2):
        grown = activation_bytes(e2b, tensor_parallel_size=tp, max_num_batched_tokens=8192, max_num_seqs=1)
        base = activation_bytes(plain, tensor_parallel_size=tp, max_num_batched_tokens=8192, max_num_seqs=1)
        assert grown - base == pytest.approx(8192 * 35 * 256 * 2, abs=1)


def test_gemma_4s_audio_tower_is_weighed_where_the_file_states_one():
    """Gemma 4 E4B states an audio_config: vLLM's Gemma4ForConditionalGeneration builds transformers'
    conformer (1,024 wide, 12 blocks) whole on every rank and a projection of its 1,536-wide output into the
    2,560-wide text: 308,756,768 parameters, which vLLM's class registers (conformance builds it). The
    31B and 26B-A4B files state none, and a stated null is none too: no tower, no warning."""
    import json
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "data" / "configs" / "gemma-4-e4b-it"
    config = json.loads((folder / "config.json").read_text())
    with_audio = c.architecture_from_config(config)
    without = c.architecture_from_config({k: v for k, v in config.items() if k != "audio_config"})
    null = c.architecture_from_config({**config, "audio_config": None})
    assert with_audio.vision_parameters - without.vision_parameters == 308_756_768
    assert null.vision_parameters == without.vision_parameters
    assert not with_audio.warnings and not without.warnings
    deeper = {**config["audio_config"], "num_hidden_layers": 13}
    wider = c.architecture_from_config({**config, "audio_config": deeper})
    h = 1024  # one more block: 2 feed-forwards, attention, light convolution, norms
    block = 2 * (8 * h * h + 2 * h) + 5 * h * h + h // 8 + 3 * h * h + 5 * h + 5 * h
    assert wider.vision_parameters - with_audio.vision_parameters == block
