"""DeepSeek-V4.1-Flash (vLLM's ``models/deepseek_v41``) as capacity reads it from its released config.

The numbers held here were measured on vLLM 0.32's own class (the CPU build, the weights probe's stand-ins
for what it lacks): the bytes per GPU by building ``DeepseekV41ForCausalLM`` on the meta device at TP 1 and,
one process a rank, TP 2; the cache by the engine core's accounting. tests/conformance/test_deepseek_v41.py
asks the engine again on every run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity as c
from capacity.errors import CapacityError, ConfigError
from capacity.roofline import StepModel
from tests.builders import deepseek_v41, edited

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "configs" / "deepseek-v4.1-flash" / "config.json"
RELEASED: dict[str, Any] = json.loads(FIXTURE.read_text())


def _text(config: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return edited(config, text_config=edited(config["text_config"], **changes))


def test_the_released_file_reads_its_sources_and_its_engram_tables():
    a = c.architecture_from_config(RELEASED)
    assert a.compressed_attention and a.shared_compressed_caches
    kv = [i for i, layer in enumerate(a.layers) if layer.kv_source]
    index = [i for i, layer in enumerate(a.layers) if layer.index_source]
    assert (kv, index) == ([2, 8, 14, 20], [2, 8, 14, 20, 24, 28, 32, 36])
    ratios = [layer.compress_ratio for layer in a.layers]
    assert (ratios.count(0), ratios.count(2), ratios.count(1)) == (2, 18, 20)
    # Each table's rows are its 24 hash heads' primes (the next ones above the 16M vocabulary, none twice):
    # exactly the engram_num_embeddings the file states, which vLLM only asserts are enough.
    assert a.engram_layers == (1, 14) and a.engram_table_rows == (384_006_168, 384_016_682)
    assert a.engram_heads == 24 and a.weights.method == "deepseek_v4_fp8"


def test_the_engram_tables_are_host_memory_fp8_with_a_scale_per_32():
    a = c.architecture_from_config(RELEASED)
    rows = 384_006_168 + 384_016_682
    assert a.weight_groups.host_tables == rows * 256 * (1 + 1 / 32)  # 202.76 GB, on no GPU
    assert a.parameter_groups.host_tables == rows * 256
    assert c.weight_bytes_per_gpu(a, 8) < a.weight_groups.total - a.weight_groups.host_tables
    assert any("Engram n-gram tables, 202.8 GB, in pinned host memory" in w for w in a.warnings)


@pytest.mark.parametrize(
    "quantized, per_gpu",
    [(False, {1: 114_009_099_360, 2: 57_073_940_576}), (True, {1: 33_380_224_096, 2: 16_736_647_264})],
)
def test_weight_bytes_per_gpu_are_vllms_to_the_byte(quantized, per_gpu):
    """Four layers of the released widths (a window-only layer, a ratio-2 kv and index source with the first
    Engram table, two ratio-1 readers), the released tower: bf16, or the file's MXFP8 linears (a one-byte
    scale per 32 inputs of a row) and MXFP4 experts. TP 2 splits the attention's and experts' widths, the
    vocabulary, the Engram projection and the tower; the compressor, indexer, mHC and sinks stay whole."""
    a = c.architecture_from_config(deepseek_v41(quantized=quantized, compress_ratios=[0, 2, 1, 1]))
    assert {tp: c.weight_bytes_per_gpu(a, tp) for tp in per_gpu} == per_gpu
    assert a.weight_groups.host_tables == 101_377_628_352


def test_the_tower_and_aligner_stay_unquantized():
    plain = c.architecture_from_config(deepseek_v41())
    quantized = c.architecture_from_config(deepseek_v41(quantized=True))
    assert quantized.weight_groups.vision == plain.weight_groups.vision == 2 * plain.vision_parameters


def test_a_file_without_a_vision_config_still_builds_the_aligner():
    """The class vLLM registers is the wrapper: DeepseekV41Config's defaults give it no blocks, a patch
    embedding, a norm and the aligner into the text width (74.0M parameters at 5120), and no router bias."""
    a = c.architecture_from_config(edited(deepseek_v41(), vision_config=None))
    assert a.vision_parameters == 74_014_720 and not a.vision_router_bias
    assert c.architecture_from_config(deepseek_v41()).vision_router_bias


def test_gpu_layout_packs_the_windows_the_sources_and_the_rings_in_64_token_blocks():
    """On a GPU (vLLM asks 16, FlashMLA's kernels take 64): a window group per layer (one kv source), the
    source's compressed latents and indexer keys, its ring; every block costs the widest group's pages."""
    a = c.architecture_from_config(deepseek_v41(compress_ratios=[0, 2, 1, 1]))
    layout = c.kv_cache_layout(a, max_num_batched_tokens=8192, max_model_len=32768)
    assert layout.block_size == 64
    kinds = {g.kind: (g.layers, g.count) for g in layout.groups}
    assert kinds == {"sliding": (4, 4), "full": (2, 1), "ring": (1, 1)}
    assert layout.bytes_per_block == 32_768  # the ring's page: wider than the source's 19,008 + 4,608


@pytest.mark.parametrize("dtype", ["bfloat16", "fp8_e5m2", "fp8_e4m3"])
def test_kv_cache_dtypes_other_than_auto_and_fp8_are_refused(dtype):
    a = c.architecture_from_config(deepseek_v41())
    with pytest.raises(CapacityError, match=r"DeepSeek-V4\.1"):
        c.kv_cache_layout(a, kv_cache_dtype=dtype)
    assert c.kv_cache_layout(a, kv_cache_dtype="fp8") == c.kv_cache_layout(a)


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"compress_ratios": [0, 4, 2, 1]}, "compress_ratios"),
        ({"compress_ratios": [2, 2, 2, 1]}, "kv_source_layer_ids"),  # layer 0 compresses, no source below
        ({"kv_source_layer_ids": [0, 1]}, "kv_source_layer_ids"),  # a source that compresses nothing
        ({"kv_source_layer_ids": []}, "kv_source_layer_ids"),
        ({"kv_source_layer_ids": None}, "kv_source_layer_ids"),
        ({"index_source_layer_ids": [0, 1, 2]}, "index_source_layer_ids"),
        ({"index_source_layer_ids": [3]}, "index_source_layer_ids"),  # no indexer at or below layer 1
        ({"n_shared_experts": None}, "n_shared_experts"),
        ({"head_dim": 256}, "head_dim"),
        ({"engram_num_embeddings": [384_000_000]}, "engram_num_embeddings"),
    ],
)
def test_files_vllm_refuses_at_build_are_refused_naming_the_field(changes, field):
    with pytest.raises(ConfigError, match=field):
        c.architecture_from_config(_text(deepseek_v41(), **changes))


def test_a_flat_file_with_rope_scaling_at_the_top_is_refused_as_vllms_config_class_fails_it():
    flat = {k: v for k, v in deepseek_v41().items() if k != "text_config"} | deepseek_v41()["text_config"]
    flat["model_type"] = "deepseek_v41"
    with pytest.raises(ConfigError, match="rope_scaling"):
        c.architecture_from_config(flat)
    c.architecture_from_config({k: v for k, v in flat.items() if k != "rope_scaling"})


def test_tensor_parallelism_keeps_flashmla_heads_and_engram_shards():
    wide = c.architecture_from_config(_text(deepseek_v41(), num_attention_heads=256, o_groups=8))
    assert c.tensor_parallel_error(wide, 1) is not None and "FlashMLA" in c.tensor_parallel_error(wide, 1)
    assert c.valid_tensor_parallel_sizes(wide, 8) == [2, 4, 8]
    # Three hash heads: two a rank at TP 2 (the last gets one), one a rank at TP 4 (the last gets none).
    few = c.architecture_from_config(_text(deepseek_v41(), engram_max_ngram_size=2, engram_n_heads=3))
    assert c.tensor_parallel_error(few, 2) is None
    assert "Engram" in (c.tensor_parallel_error(few, 4) or "")


def test_sparse_reads_follow_each_layers_source_ratio():
    """A step reads every layer's window, the index sources' keys of the whole context and each compressed
    layer's top-k entries of its source: at 64K the ratio-2 readers are capped at 512 entries of 32K."""
    a = c.architecture_from_config(deepseek_v41(compress_ratios=[0, 2, 1, 1]))
    step = StepModel(a, c.gpu_spec("h200"), layout=c.Layout(tensor_parallel_size=1), kv_cache_dtype="auto")
    assert step.sparse_ratios == ((2, 3),)  # layers 1-3 read layer 1's ratio-2 cache
    short, long = step.kv_bytes(1, 512), step.kv_bytes(1, 65536)
    # two index sources score layer 1's 132-byte keys, one a 2 tokens each; three layers' top-k of 584 bytes
    assert long - short == pytest.approx((65536 - 512) * 132 + 3 * 584 * (512 - 256))
