"""vLLM's tensor-parallel rules and KV-head replication. Pure functions, nothing faked."""

from __future__ import annotations

from dataclasses import replace

import pytest

import capacity as c


@pytest.mark.parametrize(
    ("model", "max_tp", "valid"),
    [
        ("llama-3-70b", 16, [1, 2, 4, 8, 16]),  # 64 heads, 8 KV heads
        ("qwen2.5-7b", 8, [1, 2, 4]),  # 28 heads, 4 KV heads: 7 divides 28 but not 4
        # 40 heads and 10 KV heads allow 5 and 10, but the 32,064-row vocabulary (a multiple of 64) does not
        ("phi-3-medium", 10, [1, 2]),
        ("deepseek-v3", 16, [1, 2, 4, 8, 16]),  # MLA: only attention heads matter
        ("llama-3-8b", 3, [1, 2]),
        # 40 heads and 40 KV heads allow 5 and 10, but the 13,824-wide MLP (2^9 x 27) does not; nor 8 for
        # this GPTQ checkpoint: 1,728 per GPU is 13.5 of its 128-weight groups (vLLM's Marlin refuses it)
        ("mythomax-l2-13b-gptq", 10, [1, 2, 4]),
    ],
    ids=["llama70-kv8", "qwen-28-heads", "phi3-kv10", "mla", "max-3", "mlp-width"],
)
def test_valid_tensor_parallel_sizes(model, max_tp, valid):
    assert c.valid_tensor_parallel_sizes(c.catalog_architecture(model), max_tp) == valid


@pytest.mark.parametrize(
    ("model", "tp", "fragment"),
    [
        ("llama-3-70b", 3, "does not divide the 64 attention heads"),
        ("qwen2.5-7b", 7, "splits the 4 KV heads"),
        ("phi-3-medium", 5, "does not divide the 32064-row padded vocabulary"),
        ("llama-3-70b", 0, "not a positive integer"),
        ("llama-3-70b", 16, None),
        ("mythomax-l2-13b-gptq", 5, "does not divide the 13824-wide dense MLP"),
    ],
    ids=["tp3-heads", "tp7-kv-fraction", "tp5-vocab-rows", "zero", "tp16-replicated-ok", "tp5-mlp-width"],
)
def test_tensor_parallel_error(model, tp, fragment):
    error = c.tensor_parallel_error(c.catalog_architecture(model), tp)
    if fragment is None:
        assert error is None
    else:
        assert error is not None and fragment in error


@pytest.mark.parametrize(
    ("tp", "heads_per_gpu", "replication"),
    [(1, 8, 1), (2, 4, 1), (8, 1, 1), (16, 1, 2)],
    ids=["tp1", "tp2", "tp8", "tp16-two-copies"],
)
def test_kv_heads_per_gpu_and_replication(tp, heads_per_gpu, replication):
    arch = c.catalog_architecture("llama-3-70b")
    assert c.kv_heads_per_gpu(arch, tp) == heads_per_gpu
    assert c.kv_cache_bytes_per_token(
        arch, tensor_parallel_size=tp
    ) == replication * c.kv_cache_bytes_per_token(arch)


def test_mla_latent_replicated_on_every_rank():
    arch = c.catalog_architecture("deepseek-v3")
    assert c.kv_cache_bytes_per_token(arch, tensor_parallel_size=8) == 8 * c.kv_cache_bytes_per_token(arch)


@pytest.mark.parametrize(
    ("vocab", "padded"),
    [(32000, 32000), (32001, 32064), (151936, 151936), (1, 64)],
    ids=["multiple-of-64", "one-over", "qwen", "tiny"],
)
def test_padded_vocab_size_rounds_up_to_64(vocab, padded):
    arch = replace(c.catalog_architecture("llama-3-8b"), vocab_size=vocab)
    assert c.padded_vocab_size(arch) == padded
