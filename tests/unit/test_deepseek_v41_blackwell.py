"""DeepSeek-V4.1-Flash's KV cache by the GPU's compute capability (``kv_cache_layout(compute_capability=)``).

Every number marked "measured" is vLLM 0.32's own engine-core KV accounting for the released
deepseek-v4.1-flash (and deepseek-v4-flash) config, run on vLLM's CPU build at TP 1 with one batch in
flight (``max_in_flight_tokens`` = ``max_num_batched_tokens``) and a compute-capability stand-in: the
platform answered the capability asked (9.0, 10.0, 10.3), FlashMLA's mega-attention ops were reported
compiled, the CUDA platform's block-size rule was kept; no tensor shape or cache spec was stood in. 12.x
could not be measured (the CPU build has no FlashInfer, whose SM120 class stops at its kernel check); its
figures are derived from vLLM's source.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import capacity as c
from capacity.errors import CapacityError
from capacity.memory import resolve_kv_cache_dtype, v41_records
from capacity.roofline import StepModel

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
V41: dict[str, Any] = json.loads((CONFIGS / "deepseek-v4.1-flash" / "config.json").read_text())
V4: dict[str, Any] = json.loads((CONFIGS / "deepseek-v4-flash" / "config.json").read_text())
GiB = 2**30


def _layout(config: dict[str, Any], cc: str | None, dtype: str = "auto", mnbt: int = 8192, mml: int = 32768):
    return c.kv_cache_layout(
        c.architecture_from_config(config),
        kv_cache_dtype=dtype,
        max_num_batched_tokens=mnbt,
        max_model_len=mml,
        max_in_flight_tokens=mnbt,
        compute_capability=cc,
    )


# Measured (vLLM 0.32 engine core, capability stand-in, TP 1, one batch in flight): capability (None:
# kvright's default, Hopper's), GiB of KV memory, max_model_len, max_num_batched_tokens -> block, bytes a
# block, the dtype auto became, blocks in the pool, blocks one max_model_len request reserves.
# 9.0: FlashMLA, fp8_ds_mla's 584-byte records on 576-byte pages, 64-token blocks. 10.0 (B200) and 10.3
# (B300, the same: vLLM's checks are family tests of SM100): mega attention, nvfp4_ds_mla (528-byte window
# and 288-byte compressed records on 512-byte pages), 128-token blocks.
MEASURED = [
    ("9.0", 1, 8192, 2048, 64, 116_928, "fp8_ds_mla", 9_182, 612),
    ("9.0", 4, 32768, 8192, 64, 116_928, "fp8_ds_mla", 36_731, 2_340),
    ("9.0", 16, 131072, 8192, 64, 116_928, "fp8_ds_mla", 146_926, 3_876),
    (None, 4, 32768, 8192, 64, 116_928, "fp8_ds_mla", 36_731, 2_340),
    ("10.0", 1, 8192, 2048, 128, 135_168, "nvfp4_ds_mla", 7_943, 410),
    ("10.0", 4, 32768, 8192, 128, 135_168, "nvfp4_ds_mla", 31_775, 1_562),
    ("10.0", 16, 131072, 8192, 128, 135_168, "nvfp4_ds_mla", 127_100, 2_330),
    ("10.3", 4, 32768, 8192, 128, 135_168, "nvfp4_ds_mla", 31_775, 1_562),
]


@pytest.mark.parametrize("cc, gib, mml, mnbt, block, per_block, dtype, blocks, per_request", MEASURED)
def test_v41_layout_is_vllms_measured_one_on_each_capability(
    cc, gib, mml, mnbt, block, per_block, dtype, blocks, per_request
):
    a = c.architecture_from_config(V41)
    assert resolve_kv_cache_dtype(a, "auto", compute_capability=cc) == dtype
    layout = _layout(V41, cc, mnbt=mnbt, mml=mml)
    assert (layout.block_size, layout.bytes_per_block) == (block, per_block)
    assert layout.num_blocks(gib * GiB) == blocks
    assert layout.admitted_blocks_per_sequence(mml) == per_request


def test_b200_packs_five_window_groups_of_eight():
    """Measured at 10.0: equal 16,896-byte window pages make five window groups of 8 layers (Hopper:
    seven)."""
    windows = [g for g in _layout(V41, "10.0").groups if g.kind == "sliding"]
    assert sum(g.count for g in windows) == 5
    assert sum(g.count for g in _layout(V41, "9.0").groups if g.kind == "sliding") == 7


@pytest.mark.parametrize("cc", ["10.0", "10.3"])
def test_explicit_fp8_ds_mla_on_b200_keeps_528_byte_compressed_records(cc):
    """Measured at 10.0 and 10.3, 4 GiB, 32K, 8,192 batched: 211,968 bytes a block, 20,262 blocks, 1,301 a
    request (FlashMLA's class, forced with FLASHMLA_SPARSE_DSV41, measured the same with auto)."""
    layout = _layout(V41, cc, dtype="fp8_ds_mla")
    assert (layout.block_size, layout.bytes_per_block, layout.num_blocks(4 * GiB)) == (128, 211_968, 20_262)
    assert layout.admitted_blocks_per_sequence(32768) == 1_301
    # An explicit nvfp4_ds_mla is auto there (measured: 135,168 bytes a block).
    assert _layout(V41, cc, dtype="nvfp4_ds_mla") == _layout(V41, cc)


def test_12x_keeps_584_byte_records_in_128_token_blocks():
    """Derived from vLLM's source (not measurable on the CPU build): FlashInfer's SM120 class keeps
    fp8_ds_mla's 584/576 records with a 128-token block, the layout the CPU build measured (230,400 bytes,
    18,641 blocks)."""
    layout = _layout(V41, "12.0")
    assert (layout.block_size, layout.bytes_per_block, layout.num_blocks(4 * GiB)) == (128, 230_400, 18_641)


@pytest.mark.parametrize("cc", [None, "9.0", "12.0"])
def test_nvfp4_ds_mla_off_sm100_is_refused_as_vllm_refuses_it(cc):
    a = c.architecture_from_config(V41)
    with pytest.raises(CapacityError, match="FlashMLA decodes only on SM100"):
        c.kv_cache_layout(a, kv_cache_dtype="nvfp4_ds_mla", compute_capability=cc)
    assert _layout(V41, cc, dtype="fp8_ds_mla") == _layout(V41, cc)  # fp8_ds_mla is auto there


@pytest.mark.parametrize("dtype", ["bfloat16", "fp8_e4m3"])
def test_b200_still_refuses_what_vllm_refuses(dtype):
    with pytest.raises(CapacityError, match=r"DeepSeek-V4\.1"):
        _layout(V41, "10.0", dtype=dtype)


@pytest.mark.parametrize(
    "tp, mega, dtype",
    [
        (1, True, "nvfp4_ds_mla"),
        (2, True, "nvfp4_ds_mla"),
        (4, True, "nvfp4_ds_mla"),
        (8, True, "nvfp4_ds_mla"),
        (16, False, "fp8_ds_mla"),
    ],
)
def test_mega_attention_needs_whole_groups_of_eight_heads_a_rank(tp, mega, dtype):
    """vLLM's flash_mla_mega_attn is_available_for: V4.1-Flash's 64 heads in 8 o_groups qualify up to TP 8;
    at TP 16 (half a group a rank) FlashMLA serves it and auto is fp8_ds_mla with 528-byte records (the
    layout measured with FlashMLA forced at TP 1: 211,968 bytes a block)."""
    a = c.architecture_from_config(V41)
    records = v41_records(a, "auto", tp, "10.0")
    assert (records.mega, records.dtype) == (mega, dtype)
    layout = c.kv_cache_layout(a, tensor_parallel_size=tp, compute_capability="10.0")
    assert layout.bytes_per_block == (135_168 if mega else 211_968)


@pytest.mark.parametrize("cc", ["9.0", "10.0", "12.0"])
def test_v4_is_one_layout_on_every_capability(cc):
    """Measured at 9.0 and 10.0 (12.0 derived): block 256, 1,002,240 bytes, 4,285 blocks in 4 GiB; an explicit
    fp8_ds_mla is auto, nvfp4_ds_mla refused as vLLM refuses it."""
    layout = _layout(V4, cc)
    assert (layout.block_size, layout.bytes_per_block, layout.num_blocks(4 * GiB)) == (256, 1_002_240, 4_285)
    assert _layout(V4, cc, dtype="fp8_ds_mla") == layout
    with pytest.raises(CapacityError, match="DeepSeek-V4'"):
        _layout(V4, cc, dtype="nvfp4_ds_mla")


def test_the_roofline_reads_the_gpus_records():
    """A B200 decode step reads 528-byte window records and 288-byte compressed ones; an H200's 584."""
    a = c.architecture_from_config(V41)
    layout = c.Layout(tensor_parallel_size=1)
    h200 = StepModel(a, c.gpu_spec("h200"), layout=layout, kv_cache_dtype="auto")
    b200 = StepModel(a, c.gpu_spec("b200"), layout=layout, kv_cache_dtype="auto")
    assert len(a.layers) == 40
    assert (h200.sliding_kv_per_token, h200.sparse_entry_bytes) == (40 * 584, 584)
    assert (b200.sliding_kv_per_token, b200.sparse_entry_bytes) == (40 * 528, 288)
    assert b200.full_kv_per_token == h200.full_kv_per_token  # the indexer keys: 132 bytes everywhere


def test_a_b200_plan_holds_more_tokens_than_hoppers_layout_on_the_same_memory():
    """The same load planned on a B200, on a B200 given Hopper's compute capability (Hopper's KV layout on
    B200's memory) and on an H200: B200's layout has fewer, larger blocks but holds more tokens a replica."""
    a = c.architecture_from_config(V41)
    b200 = c.gpu_spec("b200")
    as_hopper = dataclasses.replace(b200, compute_capability="9.0")
    load = c.Workload(max_model_len=32768)
    on_b200, on_hopper_layout, on_h200 = (
        c.plan(a, gpu, load, c.SLO(), c.Limits()) for gpu in (b200, as_hopper, c.gpu_spec("h200"))
    )
    assert on_b200.feasible and on_hopper_layout.feasible and on_h200.feasible
    assert on_b200.memory is not None and on_hopper_layout.memory is not None
    assert on_b200.memory.num_blocks < on_hopper_layout.memory.num_blocks
    assert on_b200.kv_cache_tokens_per_replica > 1.2 * on_hopper_layout.kv_cache_tokens_per_replica
    memory = c.KVMemory(a, b200, c.EngineConfig(kv_cache_dtype="auto"))
    assert (memory.layout.block_size, memory.layout.bytes_per_block) == (128, 135_168)
    h200 = c.KVMemory(a, c.gpu_spec("h200"), c.EngineConfig(kv_cache_dtype="auto"))
    assert (h200.layout.block_size, h200.layout.bytes_per_block) == (64, 116_928)
