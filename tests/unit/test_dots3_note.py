"""dots3-note (vLLM's ``models/dots3_note``) as capacity reads it.

Its checkpoint's hidden and MLP widths are not public, so the configs here are small ones of its shape
(tests/builders.py); tests/conformance/test_dots3_note.py holds them to vLLM's class and engine core on every
run, as a helper's survey held 31 builds (TP 1 and 2) and 23 refusals before this was written.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.errors import CapacityError, ConfigError
from capacity.gpus import attention_support
from tests.builders import DOTS3_NOTE_SMALL, cpu_engine_layout, edited


def _arch(**changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(DOTS3_NOTE_SMALL, **changes))


def test_layers_read_as_sparse_full_and_windowed_mla_of_their_own_widths():
    a = _arch()
    assert [layer.mixer for layer in a.layers] == ["mla", "mla", "sliding", "sliding", "mla", "sliding"]
    assert a.attention == "MLA" and a.sliding_window == 129 and a.num_mla_indexers == 3
    assert a.sliding_mla is not None and a.sliding_mla.heads == 4 and a.heads_of(a.layers[2]) == 4
    assert a.mla_cache_row == 224 + 32  # the sliding rows, wider than the full layers' 128 + 32
    assert not a.tie_word_embeddings and _arch(tie_word_embeddings=True).tie_word_embeddings is False


def test_every_row_is_as_wide_as_the_sliding_layers_on_cpu_and_on_gpu():
    """On the CPU backend (128-token blocks) a full layer's page is its indexer's keys and its padded latent;
    the pool's block is the widest group's pages rounded to the latent's row (512 bytes) and the indexer's
    64-key stride (64 x 132 bytes). On a GPU the block is the sparse kernels' 64 tokens, a stride apart."""
    a = _arch()
    cpu = cpu_engine_layout(a, max_model_len=4096, max_num_batched_tokens=2048)
    assert cpu.block_size == 128
    full = 3 * (128 * 132 + 128 * 256 * 2)
    assert cpu.bytes_per_block == -(-full // 16_896) * 16_896
    gpu = c.kv_cache_layout(a, max_model_len=4096)
    assert gpu.block_size == 64 and gpu.bytes_per_block % 512 == 0


def test_a_16_bit_cache_alone_where_there_are_full_layers():
    a = _arch()
    for dtype in ("fp8", "fp8_e5m2"):
        with pytest.raises(CapacityError, match="16-bit cache only"):
            c.kv_cache_layout(a, kv_cache_dtype=dtype)
    sliding = _arch(layer_types=["sliding_attention"] * 6)
    half = c.kv_cache_layout(sliding, kv_cache_dtype="fp8", max_model_len=4096)
    assert half.bytes_per_block * 2 == c.kv_cache_layout(sliding, max_model_len=4096).bytes_per_block


@pytest.mark.parametrize(
    "gpu, refused",
    [("h100-sxm", False), ("h200", False), ("b200", True), ("a100-80gb", True), ("mi300x", True)],
)
def test_full_layers_run_on_hopper_alone(gpu, refused):
    reason = attention_support(c.gpu_spec(gpu), _arch())
    assert (reason is not None) == refused
    if refused:
        assert "compute capability 9.x only" in reason


def test_tensor_parallelism_splits_both_kinds_of_heads():
    assert c.valid_tensor_parallel_sizes(_arch(), 8) == [1, 2, 4]  # 8 heads full, 4 sliding


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"layer_types": None}, "layer_types"),
        ({"layer_types": ["full_attention", "bogus"] + ["sliding_attention"] * 4}, "layer_types"),
        ({"layer_types": ["full_attention"] * 3}, "layer_types"),
        ({"swa_kv_lora_rank": 32}, "swa_kv_lora_rank"),
        ({"sliding_window_size": None}, "sliding_window_size"),
        ({"attention_gate_type": None}, "attention_gate_type"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"audio_config": {"encoder_type": "whisper"}}, "audio_config.encoder_type"),
        ({"vision_config": {"adapter_type": "mlp"}}, "vision_config.adapter_type"),
    ],
)
def test_files_vllm_refuses_are_refused_naming_the_field(changes, field):
    with pytest.raises(ConfigError, match=field):
        _arch(**changes)


def test_nulls_the_strict_config_class_refuses_are_refused():
    for field in ("n_shared_experts", "n_routed_experts", "q_lora_rank"):
        with pytest.raises(ConfigError, match=field):
            c.architecture_from_config({**DOTS3_NOTE_SMALL, field: None})


def test_the_towers_are_weighed_whole_on_every_gpu_where_the_file_has_them():
    plain = _arch()
    towers = _arch(vision_config={"num_hidden_layers": 2}, audio_config={"encoder_type": "dots"})
    assert towers.vision_parameters > 0 and towers.vision_whole_parameters == towers.vision_parameters
    assert plain.vision_parameters == 0 and not towers.warnings
