"""Ling 2.5 / Ring 2.5 (vLLM's ``bailing_moe_linear.py``, ``BailingMoeV2_5ForCausalLM``) as capacity reads it.

inclusionAI's config.json is not public, so the configs here are small ones of its shape (tests/builders.py);
tests/conformance/test_ling25.py holds them to vLLM's class and engine core on every run. The per-rank bytes
at TP 2 and 4, the fp8-cache blocks and the TP refusals below were measured with vLLM 0.32's class built on
every rank of a TP group (gloo on loopback) before this was written: the conformance probe builds one rank.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.errors import ConfigError
from capacity.memory import state_bytes_per_sequence
from tests.builders import LING25_SMALL, LING25_WIDE_STATE, cpu_engine_layout, edited

#: The measured configs: the small one with a 1,000-token vocabulary, and one with a wide state (16 heads of
#: 128: a 512 KiB state a layer at TP 1) that sizes the block.
MEASURED = edited(LING25_SMALL, vocab_size=1000)
WIDE = edited(LING25_WIDE_STATE, vocab_size=1000)


def _arch(config: dict[str, Any] = LING25_SMALL, **changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(config, **changes))


def test_every_layer_group_ends_in_mla_and_a_trailing_partial_group_stays_linear():
    assert [layer.mixer for layer in _arch().layers] == ["linear"] * 3 + ["mla"] + ["linear"] * 3 + ["mla"]
    trailing = _arch(num_hidden_layers=10)
    assert [i for i, layer in enumerate(trailing.layers) if layer.mixer == "mla"] == [3, 7]
    for group in (1, 0, -2, None):  # 1 or less, or unset (the class's getattr default 1): every layer MLA
        assert {layer.mixer for layer in _arch(layer_group_size=group).layers} == {"mla"}
    a = _arch()
    assert a.attention == "MLA" and a.state is not None and a.state.kind == "lightning"
    assert (a.state.heads, a.state.head_dim, a.state.state_dim, a.state.conv_channels) == (8, 32, 32, 0)
    assert [layer.ffn for layer in a.layers] == ["dense"] + ["moe"] * 7
    assert not _arch(tie_word_embeddings=True).tie_word_embeddings  # the class always builds its own head


@pytest.mark.parametrize(
    ("config", "tp", "measured"),
    [
        (MEASURED, 1, 12_899_040),
        (MEASURED, 2, 6_524_128),
        (MEASURED, 4, 3_336_672),
        (WIDE, 1, 90_366_880),
        (WIDE, 2, 45_396_896),
        (WIDE, 4, 22_911_904),
        # use_bias: the dense MLP's down-projection bias is whole on every rank (row-parallel), as are the
        # Lightning layers' output biases; the qkv and gate/up biases split.
        (edited(MEASURED, vocab_size=1001, use_bias=True, num_shared_experts=0, head_dim=None), 2, 6189280),
        (edited(MEASURED, score_function="softmax", moe_router_enable_expert_bias=False, group_norm_size=8,
                num_attention_heads=16, num_key_value_heads=16, head_dim=16, router_dtype=None), 4, 3532672),
    ],
    ids=["small-tp1", "small-tp2", "small-tp4", "wide-tp1", "wide-tp2", "wide-tp4", "biases-tp2",
         "softmax-tp4"],
)  # fmt: skip
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], tp: int, measured: int
) -> None:
    assert c.weight_bytes_per_gpu(c.architecture_from_config(config), tp) == measured


@pytest.mark.parametrize(
    ("tp", "block", "blocks", "concurrency"),
    [(1, 1664, 252, 25.2), (2, 896, 468, 39.0), (4, 512, 819, 54.6)],
)
def test_the_block_holds_one_state_over_the_latents_page_at_every_tp(
    tp: int, block: int, blocks: int, concurrency: float
):
    """A 16 x 128 x 128 bf16 state (512 KiB, split by TP) over a 320-byte latent a token: 128 x
    ceil(state / (128 x 320)) tokens a block; vLLM's engine core on 256 MiB and a 4,096-token context."""
    a = c.architecture_from_config(WIDE)
    layout = cpu_engine_layout(a, max_model_len=4096, max_num_batched_tokens=4096, tensor_parallel_size=tp)
    assert layout.block_size == block
    assert layout.num_blocks(2**28) == blocks
    assert layout.num_blocks(2**28) / layout.blocks_per_sequence(4096) == pytest.approx(concurrency, abs=0.05)
    gpu = c.kv_cache_layout(a, tensor_parallel_size=tp)  # GPU: 16-token blocks, MLA's 128-token alignment
    assert gpu.block_size == block


@pytest.mark.parametrize(
    ("config", "block", "blocks", "concurrency"), [(MEASURED, 256, 6553, 344.89), (WIDE, 3328, 252, 28.0)]
)
def test_an_fp8_cache_halves_the_latent_and_doubles_the_block_the_state_needs(
    config: dict[str, Any], block: int, blocks: int, concurrency: float
):
    """fp8 applies to the MLA latents alone (the states stay in the model dtype): the block holding one state
    is twice as many tokens, the pool as many blocks (measured on vLLM's CPU engine at 256 MiB, 4K tokens)."""
    arch = c.architecture_from_config(config)
    layout = cpu_engine_layout(arch, max_model_len=4096, max_num_batched_tokens=4096, kv_cache_dtype="fp8")
    assert (layout.block_size, layout.num_blocks(2**28)) == (block, blocks)
    assert layout.num_blocks(2**28) / layout.blocks_per_sequence(4096) == pytest.approx(concurrency, abs=0.01)


def test_the_state_is_in_the_model_dtype_whatever_the_ssm_dtype():
    """A Lightning layer's one state takes --mamba-cache-dtype (the model's); --mamba-ssm-cache-dtype, which
    the CPU platform sets to float32, is another state's."""
    a = _arch()
    assert state_bytes_per_sequence(a, 1, "float32") == state_bytes_per_sequence(a, 1) == 8 * 32 * 32 * 2
    cpu = cpu_engine_layout(
        a, max_model_len=4096, max_num_batched_tokens=4096, mamba_ssm_cache_dtype="float32"
    )
    assert cpu.block_size == 128


def test_group_norm_size_bounds_the_tensor_parallel_degree():
    """vLLM asserts TP <= group_norm_size and that it divides them; a file without the field has one group,
    and so runs at TP 1 (where it has Lightning layers)."""
    assert c.valid_tensor_parallel_sizes(_arch(), 8) == [1, 2, 4]
    error = c.tensor_parallel_error(_arch(group_norm_size=3), 2)
    assert error is not None and "3 output-norm groups" in error and error.endswith("accepted: 1")
    assert c.tensor_parallel_error(_arch(group_norm_size=None), 2) is not None
    assert c.tensor_parallel_error(_arch(group_norm_size=None, layer_group_size=1), 2) is None  # no Lightning


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"model_type": "bailing_moe_v2_5"}, "model_type"),
        ({"score_function": "softmax"}, "score_function"),
        ({"moe_router_enable_expert_bias": False}, "score_function"),
        ({"use_bias": True}, "use_bias"),
        ({"use_qkv_bias": None}, "use_qkv_bias"),
        ({"num_shared_experts": None}, "num_shared_experts"),
        ({"max_position_embeddings": None}, "max_position_embeddings"),
        ({"layer_group_size": "4"}, "layer_group_size"),
    ],
)
def test_files_vllm_refuses_are_refused_naming_the_field(changes: dict[str, Any], field: str):
    with pytest.raises(ConfigError, match=field):
        _arch(**changes)


def test_without_lightning_layers_max_position_embeddings_is_not_needed():
    assert _arch(layer_group_size=1, max_position_embeddings=None).mixer_counts["linear"] == 0
    assert _arch(score_function=None).expert_score_bias  # unset: softmax scoring, the bias kept
