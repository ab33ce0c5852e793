"""The reference numbers of issue 2 (../shared/reference/): KV-cache sizes, decode floors, MLA, Llama-3-8B
capacity.

Pure arithmetic over catalog architectures; nothing is faked.
"""

from __future__ import annotations

import pytest

import capacity as c

GB = 1e9


@pytest.fixture(scope="module")
def llama70() -> c.Architecture:
    return c.catalog_architecture("llama-3-70b")


def _mha(arch: c.Architecture) -> c.Architecture:
    """Llama-3-70B with one KV head per query head (the MHA equivalent)."""
    import dataclasses

    return dataclasses.replace(arch, num_kv_heads=arch.num_attention_heads)


@pytest.mark.parametrize(
    ("context", "batch", "mha", "tp", "expected_gb"),
    [
        (8192, 32, False, 1, 85.9),
        (8192, 32, True, 1, 687.2),
        (32768, 16, False, 1, 171.8),
        (32768, 16, True, 1, 1374.4),
        (8192, 32, False, 16, 171.8),  # TP16 on 8 KV heads: every head on two GPUs, KV doubles
        (8192, 32, False, 8, 85.9),  # TP8: one head per GPU, no replication
    ],
    ids=["8k-b32-gqa8", "8k-b32-mha", "32k-b16-gqa8", "32k-b16-mha", "8k-b32-tp16-replicated", "8k-b32-tp8"],
)
def test_llama3_70b_kv_cache_total(llama70, context, batch, mha, tp, expected_gb):
    arch = _mha(llama70) if mha else llama70
    total = c.kv_cache_bytes_per_token(arch, tensor_parallel_size=tp) * context * batch
    assert round(total / GB, 1) == expected_gb


def test_llama3_70b_per_sequence_and_ratio_to_weights(llama70):
    assert round(c.kv_cache_bytes_per_sequence(llama70, 8192) / GB, 2) == 2.68
    assert round(c.weight_bytes(llama70) / GB, 1) == 141.1
    kv = c.kv_cache_bytes_per_token(llama70) * 32768 * 16
    assert round(kv / c.weight_bytes(llama70), 2) == 1.22


@pytest.mark.parametrize(
    ("tp", "floor_ms"),
    [(1, 42.3), (2, 21.15), (4, 10.57), (8, 5.29)],
    ids=["tp1", "tp2", "tp4", "tp8"],
)
def test_llama3_70b_decode_floor_on_h100(llama70, tp, floor_ms):
    step = c.decode_step(
        llama70, c.gpu_spec("h100-sxm"), tensor_parallel_size=tp, batch=1, context_tokens=8192
    )
    assert step.roofline_floor_seconds * 1e3 == pytest.approx(floor_ms, abs=0.006)
    assert step.bottleneck == "weights"


def test_deepseek_v2_mla_cache_is_576_elements_and_57x_smaller_than_mha():
    arch = c.catalog_architecture("deepseek-v2")
    assert arch.attention == "MLA"
    assert arch.kv_elements_per_token_per_layer == 576
    one_seq = c.kv_cache_bytes_per_sequence(arch, 8192)
    assert round(one_seq / 1e6) == 566
    assert one_seq / 2**20 == 540
    mha = arch.num_layers * 2 * 128 * 128 * 2 * 8192
    assert round(mha / GB, 1) == 32.2
    assert round(mha / one_seq) == 57


@pytest.mark.parametrize(
    ("kv_dtype", "expected_sequences"),
    [("auto", 54), ("fp8", 108)],
    ids=["bf16-about-55", "fp8-about-twice"],
)
def test_llama3_8b_full_length_sequences_on_one_h100(kv_dtype, expected_sequences):
    """0.9 x 79.18 GiB = 71.26 GiB; minus 14.96 GiB weights, 0.78 GiB forward activation (8192 batched
    tokens),
    1 GiB CUDA graphs, 0.13 GiB non-torch = 54.39 GiB of KV; one 8K sequence is 1 GiB in bf16, 0.5 GiB in
    fp8."""
    arch = c.catalog_architecture("llama-3-8b")
    result = c.plan(
        arch,
        c.gpu_spec("h100-sxm"),
        c.Workload(max_model_len=8192),
        c.SLO(),
        c.Limits(tensor_parallel_size=1, kv_cache_dtype=kv_dtype),
    )
    assert result.feasible
    assert result.plan is not None and result.plan.max_num_seqs == expected_sequences
    assert int(result.max_concurrency_at_max_model_len) == expected_sequences
