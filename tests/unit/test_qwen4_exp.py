"""Qwen3.8-Flash-Next (vLLM 0.32's models/qwen4_exp) in capacity: its hyper-connections, QSA and PLE weights,
the n-gram tables vLLM keeps in host memory, the block its states set and what vLLM refuses.
tests/conformance/test_qwen4_exp.py holds the bytes and blocks to vLLM's class and engine core."""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.architecture import _hyper_connection_params, _is_prime, _ngram_table_rows
from tests.builders import QWEN3_8_FLASH_NEXT_TEXT, QWEN4_EXP_SMALL, cpu_engine_layout, edited


def _arch(**changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(QWEN4_EXP_SMALL, **changes))


def test_each_ple_layer_hashes_into_primes_of_its_own() -> None:
    """Two heads a layer over primes from 1,000: layer 0's are 1009+1013+1019+1021 = 4,062, rounded up to
    4,096 rows; layer 1's the next four primes, so the tables differ."""
    assert [p for p in range(990, 1040) if _is_prime(p)] == [
        991,
        997,
        1009,
        1013,
        1019,
        1021,
        1031,
        1033,
        1039,
    ]
    assert _ngram_table_rows(1000, 4, 2, 128) == (4096, 4224)  # 1031+1033+1039+1049 = 4,152
    assert _is_prime(2_147_483_647) and not _is_prime(2_147_483_647 * 3)


def test_the_tables_are_weighed_but_on_no_gpu() -> None:
    arch = _arch()
    table = 4096 * (512 // 4) * 2
    assert arch.weight_groups.host_tables == table
    assert (
        _arch(ple_layer_ids=None).weight_groups.total == arch.weight_groups.total - table - _ple_gpu_bytes()
    )
    per_gpu = c.memory.weight_bytes_per_gpu(arch, 1)
    assert per_gpu == pytest.approx(c.weight_bytes(arch) - table, abs=1)
    assert any("pinned host memory" in warning for warning in arch.warnings)


def _ple_gpu_bytes() -> int:
    """The small model's PLE layer on the GPU: kv_proj (2 streams + hidden), 3 norms, a conv of 4."""
    stream = 2 * 512
    return 2 * ((stream + 512) * 512 + 3 * stream + stream * 4)


def test_hyper_connections_replace_every_norm() -> None:
    """Per layer two mixes: a norm of the stream, a down projection to rank + streams padded to 16 rows, an up
    projection; before the head one more without the inject. No layer norms, no final norm."""
    arch = _arch()
    stream, rank = 2 * 512, 32
    down = rank + 2 + (-(rank + 2)) % 16  # 48
    count = lambda module, layer, n, shares=None, dtype=None: n  # noqa: E731 - a Weigh that counts
    assert _hyper_connection_params(arch, 0, count) == 2 * (stream + down * stream + stream * rank)
    assert _hyper_connection_params(arch, None, count) == stream + 2 * rank * stream
    assert arch.norms_per_layer == 0 and not arch.final_norm


def test_qsa_fuses_an_index_head_into_qkv_and_caches_a_pooled_key() -> None:
    qsa, plain = _arch(), _arch(indexer_n_heads=None, indexer_kv_heads=None, indexer_head_dim=None,
                                indexer_budget=None, indexer_compress_ratio=None)  # fmt: skip
    assert qsa.parameters - plain.parameters == 512 * (4 + 1) * 64 + 2 * 64
    # a token: K and V of 2 heads x 64 in bf16, and a 64-wide bf16 key per 16 tokens
    assert c.kv_cache_bytes_per_token(qsa) == 2 * 2 * 64 * 2 + 64 * 2 // 16
    assert c.kv_cache_bytes_per_token(qsa, kv_cache_dtype="fp8") == 2 * 2 * 64 + 8  # the key stays bf16


def test_the_larger_state_sets_the_block_ple_layers_or_not() -> None:
    """The PLE state (3 x 3 tokens of the 2 x 512 stream) and the GDN state (its fp32 recurrent state on
    the CPU build) both size the block, in K/V pages of 512 bytes (2 heads x 64, K and V), rounded to 128
    tokens there."""
    gdn = c.memory.state_bytes_per_sequence(_arch(), 1, "float32")
    assert c.memory.ple_state_bytes(_arch()) == 9 * 1024 * 2 < gdn
    layout = cpu_engine_layout(
        _arch(), max_model_len=8192, max_num_batched_tokens=2048, mamba_ssm_cache_dtype="float32"
    )
    assert layout.block_size == 128 * -(-gdn // (128 * 512))
    no_ple = _arch(ple_layer_ids=None)
    same = cpu_engine_layout(
        no_ple, max_model_len=8192, max_num_batched_tokens=2048, mamba_ssm_cache_dtype="float32"
    )
    assert same.block_size == layout.block_size
    kinds = {group.kind for group in layout.groups}
    assert kinds == {"mamba", "ring", "full"}
    per_request = -(-8192 // layout.block_size) + sum(g.count for g in layout.groups if g.kind != "full")
    assert layout.blocks_per_sequence(8192) == per_request


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"output_gate_type": None}, "output_gate_type"),
        ({"hc_count": 1}, "hc_count"),
        ({"shared_expert_intermediate_size": 0}, "shared_expert_intermediate_size"),
        ({"indexer_budget": None}, "indexer_budget"),
        ({"indexer_kv_heads": 2}, "indexer_kv_heads"),
        ({"indexer_budget": 72}, "indexer_budget"),
        ({"indexer_compress_ratio": 32, "indexer_budget": 64}, "indexer_compress_ratio"),
        ({"indexer_head_dim": 8}, "indexer_head_dim"),
        ({"ple_layer_ids": [4]}, "ple_layer_ids"),
        ({"ple_embed_dim": 510}, "ple_embed_dim"),
        ({"eos_token_id": None}, "eos_token_id"),
    ],
)
def test_what_the_config_class_and_vllm_refuse_is_refused_by_the_field(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(c.ConfigError, match=field):
        c.architecture_from_config({**QWEN4_EXP_SMALL, **changes})


def test_the_transcribed_model_keeps_102_gb_on_the_host_and_plans_on_h100s() -> None:
    arch = c.architecture_from_config(QWEN3_8_FLASH_NEXT_TEXT)
    assert round(arch.weight_groups.host_tables) == 102_400_491_520
    assert c.kv_cache_bytes_per_token(arch) == 12 * (2 * 2 * 256 * 2 + 128 * 2 // 16)
    assert (
        not arch.tie_word_embeddings
        and not c.architecture_from_config(
            {**QWEN3_8_FLASH_NEXT_TEXT, "tie_word_embeddings": True}
        ).tie_word_embeddings
    )


def test_a_step_reads_the_picked_tokens_k_and_v_and_every_pooled_key() -> None:
    """Past the budget (64 tokens), a further context token costs a sixteenth of a 64-wide bf16 key; before
    it, its K and V too."""
    arch = _arch()
    step = c.roofline.StepModel(arch, c.gpu_spec("h100-sxm"), layout=c.Layout(), kv_cache_dtype="auto")
    key, kv = 64 * 2 / 16, 2 * 2 * 64 * 2
    assert step.kv_bytes(1, 64) - step.kv_bytes(1, 63) == pytest.approx(kv + key)
    assert step.kv_bytes(1, 65) - step.kv_bytes(1, 64) == pytest.approx(key)
