"""Kimi-Linear (vLLM's KimiLinearForCausalLM): MLA layers among Kimi Delta Attention layers, MoE experts.

tests/conformance/test_parameter_counts.py holds two small configs to vLLM's class, and test_kimi_linear.py
there the KV-cache accounting (block, page, groups, blocks, concurrency) and the real checkpoint to vLLM's own
code; these hold the reading's rules, the GPU-side alignment and the refusals."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import capacity as c
from kvright import cli

KIMI = c.catalog_entry("kimi-linear-48b-a3b")["config"]


def _with(**fields: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(KIMI)
    linear = fields.pop("linear", None)
    if linear is not None:
        cfg["linear_attn_config"] = cfg["linear_attn_config"] | linear
    return cfg | fields


def test_kda_layers_are_the_one_based_ones_the_config_lists():
    arch = c.catalog_architecture("kimi-linear-48b-a3b")
    mla = [i for i, layer in enumerate(arch.layers) if layer.mixer == "mla"]
    assert mla == [3, 7, 11, 15, 19, 23, 26]  # full_attn_layers 4, 8, ..., 27 counted from 1
    assert dict(arch.mixer_counts) == {"linear": 20, "mla": 7}
    # vLLM picks KDA layers by kda_layers alone: listing layer 1 makes layer 0 a KDA layer.
    one = c.architecture_from_config(
        _with(linear={"kda_layers": [1], "full_attn_layers": list(range(2, 28))})
    )
    assert [layer.mixer for layer in one.layers][:2] == ["linear", "mla"]


def test_a_kda_layer_holds_a_bf16_conv_state_and_a_float32_recurrent_state_split_by_head():
    arch = c.catalog_architecture("kimi-linear-48b-a3b")
    for tp in (1, 2, 4, 8):
        conv = 3 * 32 * 128 // tp * 3 * 2  # q, k, v of 32 heads x 128, kernel 4 - 1, bf16
        recurrent = 32 // tp * 128 * 128 * 4
        assert c.memory.state_bytes_per_sequence(arch, tp) == conv + recurrent
    # only the MLA layers' latents grow with the context
    assert c.kv_cache_bytes_per_token(arch) == 7 * (512 + 64) * 2


@pytest.mark.parametrize(("kv_dtype", "block"), [("auto", 1920), ("fp8", 3840)])
def test_on_gpus_the_mla_block_is_a_multiple_of_128_tokens_that_holds_a_state(kv_dtype, block):
    """vLLM's hybrid alignment for an MLA model: 128 x ceil(state / (128 x latent page)); a 16-token
    alignment would give 1,888 tokens at bf16."""
    arch = c.catalog_architecture("kimi-linear-48b-a3b")
    layout = c.kv_cache_layout(arch, kv_cache_dtype=kv_dtype)
    assert layout.block_size == block
    assert {g.page_bytes for g in layout.groups} == {block * 576 * (2 if kv_dtype == "auto" else 1)}


def test_experts_narrower_than_256_per_rank_are_padded_without_expert_parallelism():
    """vLLM's KimiMoE pads moe_intermediate_size / tp up to 256 per rank (min_moe_intermediate_per_partition):
    1,024 / 8 = 128, so at TP 8 each expert is held at twice its width; never with expert parallelism."""
    arch = c.catalog_architecture("kimi-linear-48b-a3b")
    assert [arch.expert_padding(tp) for tp in (1, 2, 4, 8)] == [1.0, 1.0, 1.0, 2.0]
    assert arch.expert_padding(8, expert_parallel=True) == 1.0
    unpadded = c.architecture_from_config(_with(min_moe_intermediate_per_partition=64))
    assert unpadded.expert_padding(8) == 1.0
    # at TP 8 a GPU holds its eighth of the experts twice over: 11.8 GB more than unpadded
    experts = arch.weight_groups.routed_experts_total
    extra = c.weight_bytes_per_gpu(arch, 8) - c.weight_bytes_per_gpu(unpadded, 8)
    assert extra == pytest.approx(experts / 8, abs=1) and extra > 11e9
    assert c.weight_bytes_per_gpu(arch, 4) == c.weight_bytes_per_gpu(unpadded, 4)


def test_without_linear_attention_every_layer_is_mla():
    arch = c.architecture_from_config(_with(linear_attn_config=None))
    assert dict(arch.mixer_counts) == {"mla": 27} and arch.state is None


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"mla_use_nope": False}, "mla_use_nope", "asserts NoPE"),
        ({"mla_use_output_gate": True}, "mla_use_output_gate", "Kimi-K3's"),
        ({"attn_res_block_size": 12}, "attn_res_block_size", "Kimi-K3's"),
        ({"routed_expert_hidden_size": 1024}, "routed_expert_hidden_size", "Kimi-K3's"),
        ({"linear": {"use_full_rank_gate": True}}, "linear_attn_config.use_full_rank_gate", "Kimi-K3's"),
        ({"linear": {"kda_layers": None}}, "linear_attn_config.kda_layers", "1-based"),
        ({"linear": {"head_dim": "wide"}}, "linear_attn_config.head_dim", ""),
        ({"linear_attn_config": [1, 2]}, "linear_attn_config", "expected an object"),
        ({"hidden_act": "gelu"}, "hidden_act", "'silu' or 'situ'"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_what_vllm_stops_on_or_kvright_does_not_read_is_refused_naming_the_field(fields, field, words):
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(_with(**copy.deepcopy(fields)))
    assert err.value.field == field and words in str(err.value), str(err.value)


def test_a_missing_kda_width_is_refused_in_one_cli_line(tmp_path, capsys):
    cfg = _with()
    del cfg["linear_attn_config"]["num_heads"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert cli.main(["inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'linear_attn_config.num_heads'" in err, err


def test_the_lm_head_is_its_own_whatever_the_file_says():
    untied = c.catalog_architecture("kimi-linear-48b-a3b")
    tied = c.architecture_from_config(_with(tie_word_embeddings=True))
    assert tied.parameters == untied.parameters == 49_122_681_728
