"""GLM-5.3-Flash (vLLM 0.32's models/glm5next) in capacity: its layer kinds, the fields it must state, its
pooled indexer's cache and ring, the block its KDA state sets, and the GPUs its sparse MLA runs on.
tests/conformance/test_glm5next.py holds the counts and blocks to vLLM's classes and engine core."""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.gpus import attention_support
from tests.builders import GLM5_3_FLASH_TEXT, GLM5_NEXT_SMALL, cpu_engine_layout, edited


def _arch(**changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(GLM5_NEXT_SMALL, **changes))


def test_exactly_linear_attention_is_kda_and_every_other_layer_is_mla_with_an_indexer() -> None:
    arch = _arch(layer_types=["mamba", "sliding_attention", "linear_attention", "full_attention"])
    assert [layer.mixer for layer in arch.layers] == ["linear", "mla", "linear", "mla"]
    assert arch.num_mla_indexers == 2  # indexer_types is not read: every MLA layer builds one
    assert _arch(indexer_types=["shared"] * 4).num_mla_indexers == 1
    default = _arch(num_hidden_layers=8, layer_types=None, mlp_layer_types=None)
    assert [layer.mixer for layer in default.layers] == ["linear"] * 3 + ["mla"] + ["linear"] * 3 + ["mla"]
    assert [layer.ffn for layer in default.layers] == ["dense"] * 3 + ["moe"] * 5


def test_the_head_is_never_tied_and_mhc_has_no_head_mix() -> None:
    assert _arch(tie_word_embeddings=True).parameters == _arch().parameters
    h, hc, n = 512, 2, 4
    mix = (2 + hc) * hc
    assert _arch().parameters - _arch(mhc=False).parameters == n * 2 * (mix * hc * h + mix + 3)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"mhc": None}, "mhc"),
        ({"mla_use_nope": None}, "mla_use_nope"),
        ({"topk_method": None}, "topk_method"),
        ({"scoring_func": None}, "scoring_func"),
        ({"indexer_rope_interleave": None}, "indexer_rope_interleave"),
        ({"qk_rope_head_dim": 64}, "qk_rope_head_dim"),
        ({"num_key_value_heads": 4}, "num_key_value_heads"),
        ({"index_kpool": 1}, "index_kpool"),
        ({"index_topk": 250}, "index_kpool"),
        ({"index_kpool_always_select_tail": False}, "index_kpool_always_select_tail"),
        ({"mla_use_nope": False}, "mla_use_nope"),
        (
            {"layer_types": ["linear_attention", "global", "linear_attention", "full_attention"]},
            "layer_types",
        ),
    ],
)
def test_what_the_config_class_and_vllm_refuse_is_refused_by_the_field(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(c.ConfigError, match=field):
        _arch(**changes)


def test_a_token_adds_a_latent_and_a_pooled_key_to_each_mla_layer() -> None:
    """kv_lora_rank 128 in bfloat16 and 132 bytes a key over 4 tokens: 256 + 33 a token."""
    arch = _arch()
    assert c.memory.indexer_bytes_per_token(arch) == 33
    assert c.kv_cache_bytes_per_token(arch) == 256 + 33


def test_the_kda_state_sets_the_block_even_without_a_kda_layer() -> None:
    """The block holds a KDA state in latent pages (rounded to the sparse kernels' and the pooled indexer's
    blocks); an all-MLA file still pays for the state its config describes, as vLLM sizes it."""
    layout = cpu_engine_layout(_arch(), max_model_len=8192, max_num_batched_tokens=2048)
    state = c.memory.state_bytes_per_sequence(_arch(), 1)
    assert layout.block_size * 256 >= state > (layout.block_size - 128) * 256
    all_mla = cpu_engine_layout(
        _arch(layer_types=["indexed_attention"] * 4), max_model_len=8192, max_num_batched_tokens=2048
    )
    assert all_mla.block_size == layout.block_size
    no_state = _arch(
        layer_types=["indexed_attention"] * 4, linear_attn_config={"num_heads": 1, "head_dim": 8}
    )
    assert cpu_engine_layout(no_state, max_model_len=8192, max_num_batched_tokens=2048).block_size == 128


def test_a_request_holds_its_context_in_the_mla_group_and_one_block_per_state_and_ring_group() -> None:
    layout = cpu_engine_layout(_arch(), max_model_len=8192, max_num_batched_tokens=2048)
    kinds = {group.kind: group.count for group in layout.groups}
    assert set(kinds) == {"mamba", "full", "ring"} and kinds["full"] == 1
    per_request = -(-8192 // layout.block_size) + kinds["mamba"] + kinds["ring"]
    assert layout.blocks_per_sequence(8192) == per_request


def test_its_sparse_mla_runs_where_vllm_has_a_sparse_kernel() -> None:
    assert "sparse MLA layers" in (attention_support(c.gpu_spec("a100-80gb"), _arch()) or "")
    assert attention_support(c.gpu_spec("h200"), _arch()) is None
    all_kda = _arch(layer_types=["linear_attention"] * 4)
    assert attention_support(c.gpu_spec("a100-80gb"), all_kda) is None


def test_no_plan_splits_it_into_pipeline_stages() -> None:
    """vLLM 0.32 gates GLM-5.3's pipeline parallelism off (no make_empty_intermediate_tensors)."""
    arch = c.architecture_from_config(GLM5_3_FLASH_TEXT)
    refused = c.layout_error(arch, c.Layout(pipeline_parallel_size=2)) or ""
    assert "make_empty_intermediate_tensors" in refused
    assert c.layout_error(arch, c.Layout(tensor_parallel_size=8)) is None
