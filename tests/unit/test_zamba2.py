"""Zyphra's Zamba2 (vLLM's ``zamba2.py``, ``Zamba2ForCausalLM``) as capacity reads, weighs, caches and times
it.

tests/conformance/test_zamba2.py holds small configs to vLLM's class and engine core at one rank on every
run, with the Mamba state the CPU platform gives it. The per-rank bytes at TP 2 and 4, the refusals there,
and the caches with the state in the model's dtype (a GPU's), at TP 2 and with fp8, were measured with vLLM
0.32's class built on every rank of a TP group (gloo on loopback; the CPU platform's float32 reset turned
off) before this was written; every rank of a group held the same bytes. No Hugging Face config.json of
Zyphra's is public here: the 2.7B and 7B are their shapes as tests/builders.py describes them.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.roofline import StepModel
from tests.builders import (
    ZAMBA2_2_7B,
    ZAMBA2_7B,
    ZAMBA2_FEWER_KV_STATED,
    ZAMBA2_SMALL,
    ZAMBA2_THREE_APPLICATIONS,
    ZAMBA2_TWO_GROUPS,
    ZAMBA2_WIDE,
    cpu_engine_accounting,
    edited,
    weight_bytes_by_tp,
    zamba2_layers,
)


def _arch(config: dict[str, Any], **changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(config, **changes))


def test_a_hybrid_layer_is_a_shared_block_application_before_its_mamba_layer() -> None:
    a = _arch(ZAMBA2_SMALL, tie_word_embeddings=False)
    mixers = ["mamba", "mamba", "full", "mamba", "mamba", "mamba", "full", "mamba"]
    assert [layer.mixer for layer in a.layers] == mixers
    assert [layer.ffn_width for layer in a.layers if layer.ffn == "dense"] == [1024, 1024]  # 4 x hidden
    # every query head caches its own K and V, 2 x 256 / 8 = 64 wide; the engine's alignment reads the file's
    assert (a.num_kv_heads, a.head_dim, a.alignment_kv_heads) == (8, 64, 8)
    assert (a.shared_blocks, a.attention_input_width, a.block_adapter_rank) == (1, 512, 16)
    assert a.tie_word_embeddings and not a.qkv_bias and not a.mlp_bias  # tied whatever the file says
    assert a.state is not None and (a.state.heads, a.state.head_dim, a.state.groups) == (8, 64, 1)
    assert a.num_state_layers == 6 and a.num_attention_layers == 2


def test_the_config_class_lays_out_54_layers_whatever_num_hidden_layers_says() -> None:
    a = _arch(ZAMBA2_SMALL, num_hidden_layers=6, layers_block_type=None)
    assert a.num_state_layers == 54 and a.num_attention_layers == 9


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (ZAMBA2_SMALL, {1: 9_528_192, 2: 5_098_176, 4: 2_883_168}),
        (ZAMBA2_WIDE, {1: 44_948_480, 2: 23_534_080, 4: 12_826_880}),
        (ZAMBA2_TWO_GROUPS, {1: 41_767_872, 2: 21_481_440}),
        (ZAMBA2_THREE_APPLICATIONS, {1: 13_050_240, 2: 6_925_504, 4: 3_863_136}),
        (
            edited(
                ZAMBA2_SMALL,
                num_mem_blocks=2,
                add_bias_linear=True,
                layers_block_type=zamba2_layers(6, (1, 4)),
            ),
            {1: 12_963_808, 2: 6_819_568, 4: 3_747_448},
        ),
        (ZAMBA2_2_7B, {1: 5_324_437_760, 2: 2_739_086_720, 4: 1_446_411_200}),
        (ZAMBA2_7B, {1: 14_713_517_440, 2: 7_524_059_840}),
    ],
    ids=["small", "wide-untied", "two-groups", "three-applications", "biases", "2.7b", "7b"],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """Shared blocks once, adapters and linears an application, one Mamba group whole on every rank (its B
    and C rows, conv and biases), ``A`` in float32."""
    assert weight_bytes_by_tp(config, measured) == measured


@pytest.mark.parametrize(
    ("config", "tp", "reason"),
    [
        (ZAMBA2_TWO_GROUPS, 4, "does not divide the 2 Mamba-2 groups"),
        (ZAMBA2_7B, 4, "does not divide the 2 Mamba-2 groups"),
        (edited(ZAMBA2_SMALL, use_conv_bias=False), 2, "whose convolution has no bias"),
        (edited(ZAMBA2_SMALL, adapter_rank=6), 4, "does not divide the 6-wide shared-block adapter rank"),
        (
            edited(ZAMBA2_SMALL, hidden_size=384, n_mamba_heads=6),
            4,
            "does not divide the 6 mamba2 state heads",
        ),
        (
            edited(ZAMBA2_SMALL, hidden_size=320, num_attention_heads=10, n_mamba_heads=10, adapter_rank=20),
            4,
            "does not divide the 10 attention heads",
        ),
    ],
    ids=[
        "groups",
        "7b-at-4",
        "one-group-without-conv-bias",
        "adapter-rank",
        "mamba-heads",
        "attention-heads",
    ],
)
def test_tp_degrees_vllm_refuses_are_refused(config: dict[str, Any], tp: int, reason: str) -> None:
    """Each refused where vLLM's build stops (measured: its assertion or, for the conv without a bias, the
    loader's AttributeError); the same files build at TP 1."""
    a = c.architecture_from_config(config)
    error = c.tensor_parallel_error(a, tp)
    assert error is not None and reason in error, error
    assert c.tensor_parallel_error(a, 1) is None


def test_the_released_shapes_run_at_the_tp_degrees_vllm_builds() -> None:
    assert c.valid_tensor_parallel_sizes(_arch(ZAMBA2_7B), 8) == [1, 2]
    assert c.valid_tensor_parallel_sizes(_arch(ZAMBA2_2_7B), 8) == [1, 2, 4, 8]


@pytest.mark.parametrize(
    ("config", "memory", "length", "tp", "dtype", "measured"),
    [
        (ZAMBA2_SMALL, 2**26, 2048, 1, "auto", (128, 128)),
        (ZAMBA2_SMALL, 2**26, 2048, 2, "auto", (128, 256)),
        (ZAMBA2_SMALL, 2**26, 2048, 1, "fp8", (128, 256)),
        (ZAMBA2_FEWER_KV_STATED, 2**26, 2048, 1, "auto", (128, 64)),
        (ZAMBA2_FEWER_KV_STATED, 2**26, 2048, 2, "auto", (128, 128)),
        (ZAMBA2_FEWER_KV_STATED, 2**26, 2048, 1, "fp8", (256, 64)),
        (ZAMBA2_TWO_GROUPS, 2**26, 2048, 2, "auto", (128, 85)),
        (edited(ZAMBA2_SMALL, layers_block_type=["mamba"] * 6), 2**26, 2048, 2, "auto", (128, 318)),
        (ZAMBA2_2_7B, 2**32, 4096, 1, "auto", (128, 182)),
        (ZAMBA2_2_7B, 2**32, 4096, 1, "fp8", (128, 364)),
        (ZAMBA2_2_7B, 2**32, 4096, 2, "auto", (128, 364)),
    ],
    ids=[
        "small",
        "small-tp2",
        "small-fp8",
        "fewer-kv-stated",
        "fewer-kv-stated-tp2",
        "fewer-kv-stated-fp8-larger-block",
        "two-groups-tp2",
        "mamba-only-tp2",
        "2.7b",
        "2.7b-fp8",
        "2.7b-tp2",
    ],
)
def test_the_engine_core_blocks_its_caches_as_measured(
    config: dict[str, Any], memory: int, length: int, tp: int, dtype: str, measured: tuple[int, int]
) -> None:
    """(Block size, blocks) of the engine core with the state in the model's dtype, as a GPU keeps it. The
    block holds a Mamba page by the KV heads the file states: with fp8, two stated heads of 64 take 256 tokens
    to hold the 73,728-byte state where the four cached heads would take 128."""
    block, blocks, _ = cpu_engine_accounting(
        config, memory, length, tensor_parallel_size=tp, kv_cache_dtype=dtype
    )
    assert (block, blocks) == measured


def test_a_step_reads_a_shared_block_again_for_every_application() -> None:
    """One block taken by three applications holds a third of three blocks' weights, but a decode step reads
    it three times: the streamed bytes are those of three blocks."""
    one = _arch(ZAMBA2_THREE_APPLICATIONS, num_mem_blocks=1)
    three = _arch(ZAMBA2_THREE_APPLICATIONS, num_mem_blocks=3)
    held_one, held_three = c.weight_bytes(one), c.weight_bytes(three)
    assert held_one < held_three
    assert one.weight_groups.reread == pytest.approx(held_three - held_one)
    layout = c.Layout(tensor_parallel_size=1)
    step = {
        n: StepModel(a, c.gpu_spec("h100-sxm"), layout=layout, kv_cache_dtype="auto").dense_weight_bytes
        for n, a in ((1, one), (3, three))
    }
    assert step[1] == pytest.approx(step[3])


def test_the_7b_plans_at_the_tp_degrees_vllm_builds() -> None:
    """Its two Mamba groups keep it off TP 4 and 8; one node of H100s is offered TP 1 and 2 alone."""
    result = c.plan(
        _arch(ZAMBA2_7B),
        c.gpu_spec("h100-sxm"),
        c.Workload(max_model_len=4096),
        c.SLO(tpot_seconds=0.02),
        c.Limits(),
    )
    assert result.feasible and result.plan is not None
    tried = {candidate.layout.tensor_parallel_size for candidate in result.candidates}
    assert tried == {1, 2}
