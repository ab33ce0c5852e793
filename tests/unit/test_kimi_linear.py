"""Kimi-Linear (vLLM's KimiLinearForCausalLM): MLA layers among Kimi Delta Attention layers, MoE experts.

tests/conformance/test_parameter_counts.py holds two small configs to vLLM's class, and test_kimi_linear.py
there the KV-cache accounting (block, page, groups, blocks, concurrency) and the real checkpoint to vLLM's own
code; these hold the reading's rules, the GPU-side alignment and the refusals."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import capacity as c
from kvright import cli
from tests.builders import cpu_engine_layout

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
        ({"linear": {"kda_layers": None}}, "linear_attn_config.kda_layers", "1-based"),
        ({"linear": {"head_dim": "wide"}}, "linear_attn_config.head_dim", ""),
        ({"linear_attn_config": [1, 2]}, "linear_attn_config", "expected an object"),
        ({"hidden_act": "gelu"}, "hidden_act", "'silu' or 'situ'"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_what_vllm_stops_on_is_refused_naming_the_field(fields, field, words):
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


def test_kimi_k3_parts_add_what_vllms_class_builds_for_each():
    """Kimi-K3's switches over a Kimi-Linear file (vLLM 0.32's models/kimi_k3 builds both), each term from
    the file's fields (tests/conformance/test_parameter_counts.py holds small configs with them to vLLM's
    class)."""
    base = c.architecture_from_config(KIMI)
    h, heads, v = KIMI["hidden_size"], KIMI["num_attention_heads"], KIMI["v_head_dim"]
    mla, kda = base.mixer_counts["mla"], base.mixer_counts["linear"]
    gated = c.architecture_from_config(_with(mla_use_output_gate=True))
    assert gated.parameters - base.parameters == mla * h * heads * v  # a hidden x heads x v gate per MLA
    residuals = c.architecture_from_config(_with(attn_res_block_size=12))
    assert residuals.parameters - base.parameters == 4 * h * base.num_layers + 2 * h
    linear = KIMI["linear_attn_config"]
    width, d, kda_heads = linear["num_heads"] * linear["head_dim"], linear["head_dim"], linear["num_heads"]
    full_rank = c.architecture_from_config(_with(linear={"use_full_rank_gate": True}))
    pad = -(4 * width + d + kda_heads) % 16
    assert full_rank.parameters - base.parameters == kda * (h * (width + pad) - h * d - d * width)
    r, moe = 1024, base.num_moe_layers
    latent = c.architecture_from_config(_with(routed_expert_hidden_size=r, latent_moe_use_norm=True))
    experts = KIMI["num_experts"] * 3 * KIMI["moe_intermediate_size"]
    assert latent.parameters - base.parameters == moe * (experts * (r - h) + 2 * h * r + r)
    assert latent.moe_latent_size == r and latent.moe_latent_norm


def test_kimi_k3_weighs_and_caches_what_vllms_class_builds():
    """moonshotai/Kimi-K3's file (tests/data/configs/kimi-k3): vLLM 0.32 rewrites its compressed-tensors
    mxfp4-pack-quantized block to quant_method mxfp4 (only the routed experts in MXFP4, the ignore list
    unread) and builds 1,560,860,298,368 bytes (its class on the meta device; the CPU build's MXFP4 expert
    kernel takes neither SiTU nor this routing, so that check was lifted to count it); its engine core,
    given 80 GB at 131,072 tokens and 8,192 batched, raises the block to 5,760 tokens for the KDA state
    (6,635,520 bytes a page) and makes 502 blocks."""
    arch = c.load_architecture("tests/data/configs/kimi-k3")
    assert arch.weights.method == "mxfp4" and arch.weight_groups.total == 1_560_860_298_368
    assert dict(arch.mixer_counts) == {"linear": 69, "mla": 24}
    layout = cpu_engine_layout(
        arch, max_model_len=131072, max_num_batched_tokens=8192, mamba_ssm_cache_dtype="float32"
    )
    assert (layout.block_size, max(g.page_bytes for g in layout.groups)) == (5760, 6_635_520)
    assert layout.num_blocks(80_000_000_000) == 502
    # The same block as a text-only Kimi-Linear file is compressed-tensors, not rewritten.
    text = json.loads(Path("tests/data/configs/kimi-k3/config.json").read_text())["text_config"]
    assert c.architecture_from_config(text).weights.method == "compressed-tensors"


def test_an_ignore_list_naming_self_attn_leaves_the_kda_projections_unquantized():
    """Kimi Delta Attention's projections live under ``self_attn`` as attention's do (kind ``kda``): a
    compressed-tensors file that ignores ``re:.*self_attn.*`` keeps them in bf16, as vLLM does (a small
    Kimi-K3-like file with the block weighs the 5,686,928 bytes vLLM's class builds), while the routed
    experts are quantized."""
    block = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {
            "g": {
                "targets": ["Linear"],
                "weights": {
                    "num_bits": 4,
                    "type": "int",
                    "symmetric": True,
                    "strategy": "group",
                    "group_size": 32,
                },
            }
        },
        "ignore": [
            "re:.*self_attn.*",
            "re:.*shared_experts.*",
            "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
            "lm_head",
        ],
    }
    plain = c.architecture_from_config(KIMI)
    quantized = c.architecture_from_config(_with(quantization_config=block))
    g, q = plain.weight_groups, quantized.weight_groups
    assert q.routed_experts_total < g.routed_experts_total / 3  # 4-bit experts
    assert q.sharded == g.sharded and q.replicated == g.replicated  # KDA, MLA and the dense MLP in bf16
    # Without the ignore list the KDA projections are quantized too.
    everything = c.architecture_from_config(_with(quantization_config={**block, "ignore": ["lm_head"]}))
    assert everything.weight_groups.sharded < g.sharded / 3
