"""IQuest-Coder's Loop models (vLLM's ``iquest_loopcoder.py``, ``IQuestLoopCoderForCausalLM``) as capacity
reads, weighs, caches and times them.

tests/conformance/test_iquest_loop.py holds the small configs to vLLM's class and engine core at one rank on
every run. The per-rank bytes at TP 2 and 4, and the caches at TP > 1 and with fp8, were measured with vLLM
0.32's class built on every rank of a TP group (gloo on loopback) before this was written: the conformance
probe builds one rank. The 40B file's shape is IQuest-Coder-V1-40B-Loop-Instruct's as published (its fields
as third-party ports of it quote them); its numbers are vLLM's closed form, checked against those measured.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.errors import ConfigError
from tests.builders import IQUEST_LOOP_SMALL, cpu_engine_accounting, edited, model_shapes, weight_bytes_by_tp

ONE_KV_HEAD = edited(
    IQUEST_LOOP_SMALL, hidden_size=512, intermediate_size=1024, num_attention_heads=8, num_key_value_heads=1,
    vocab_size=32000,
)  # fmt: skip
THREE_PASSES = edited(
    IQUEST_LOOP_SMALL, loop_num=3, loop_window_size=32, vocab_size=32001, tie_word_embeddings=True
)
#: IQuest-Coder-V1-40B-Loop's shape (tests/data/shapes/iquest_loop.json).
LOOP_40B = model_shapes("iquest_loop")["40b"]


def _arch(config: dict[str, Any], **changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(config, **changes))


def test_a_later_pass_caches_each_layer_again_over_its_window() -> None:
    a = _arch(IQUEST_LOOP_SMALL)
    assert (a.loop_count, a.sliding_window, a.loop_gate, a.head_dim) == (2, 64, True, 64)
    assert [layer.mixer for layer in a.layers] == ["full"] * 3  # the layers' weights, once
    assert a.layer_census == {("full", 2, 64, 64, False): 3, ("sliding", 2, 64, 64, False): 3}
    three = _arch(THREE_PASSES)
    assert (three.loop_count, three.sliding_window) == (3, 32)
    assert three.layer_census[("sliding", 2, 64, 64, False)] == 6
    one = _arch(IQUEST_LOOP_SMALL, loop_num=1)
    assert (one.sliding_window, one.loop_gate) == (None, True)  # no window to cache, the gates all the same
    assert set(one.layer_census) == {("full", 2, 64, 64, False)}
    defaults = _arch(IQUEST_LOOP_SMALL, loop_num=None, loop_window_size=None)
    assert (defaults.loop_count, defaults.sliding_window) == (2, 64)  # the class's getattr defaults


def test_biases_the_file_asks_for_are_not_built() -> None:
    plain = c.weight_bytes_per_gpu(_arch(IQUEST_LOOP_SMALL), 1)
    asked = _arch(IQUEST_LOOP_SMALL, attention_bias=True, mlp_bias=True, model_type="iquestcoder")
    assert c.weight_bytes_per_gpu(asked, 1) == plain


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (IQUEST_LOOP_SMALL, {1: 4592664, 2: 2298124, 4: 1249158}),
        (edited(IQUEST_LOOP_SMALL, tie_word_embeddings=True), {1: 4068376, 4: 1118086}),
        (ONE_KV_HEAD, {2: 39461400, 4: 19930892}),  # the one KV head whole on each rank
        (THREE_PASSES, {1: 19960856, 2: 9982220, 4: 5091206}),
        (edited(IQUEST_LOOP_SMALL, hidden_size=384, num_attention_heads=6, head_dim=None), {2: 3742098}),
        (LOOP_40B, {1: 79589392640, 4: 19898584640}),
    ],
    ids=["small", "tied", "one-kv-head", "three-passes-odd-vocab", "six-heads", "40b"],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    assert weight_bytes_by_tp(config, measured) == measured


@pytest.mark.parametrize(
    ("config", "tp", "kv_cache_dtype", "blocks", "concurrency"),
    [
        (IQUEST_LOOP_SMALL, 2, "auto", 682, 20.667),
        (IQUEST_LOOP_SMALL, 4, "auto", 682, 20.667),  # two KV heads: one a rank from TP 2 on
        (IQUEST_LOOP_SMALL, 1, "fp8", 682, 20.667),
        (IQUEST_LOOP_SMALL, 2, "fp8", 1365, 41.364),
        (edited(IQUEST_LOOP_SMALL, loop_num=3), 1, "fp8", 682, 13.64),
        (edited(IQUEST_LOOP_SMALL, loop_num=3), 2, "fp8", 1365, 27.3),
        (edited(IQUEST_LOOP_SMALL, loop_num=1), 4, "auto", 682, 42.625),
        (THREE_PASSES, 4, "auto", 682, 13.64),
        (ONE_KV_HEAD, 1, "fp8", 1365, 41.364),
    ],
)
def test_the_passes_share_the_pool_as_the_engine_core_groups_them(
    config: dict[str, Any], tp: int, kv_cache_dtype: str, blocks: int, concurrency: float
) -> None:
    """A full group and a sliding-window group a later pass, each of the layers' count: a block costs every
    layer's page once per group, 64 MiB of it holding these many blocks (vLLM's CPU engine core, 2,048-token
    context), and a sequence takes its context's blocks in the first and its window's in each later one."""
    accounted = cpu_engine_accounting(
        config, 2**26, 2048, tensor_parallel_size=tp, kv_cache_dtype=kv_cache_dtype
    )
    assert accounted == (128, blocks, pytest.approx(concurrency, abs=0.001))


def test_every_pass_reads_the_layers_again_and_its_window_of_cache() -> None:
    """A decode step of n passes streams the layers' weights n times and the LM head once, the whole context's
    cache in the first pass and each later pass's window: 8 sequences of 4,096 tokens, 512 bytes of cache a
    token a layer."""
    gpu = c.gpu_spec("h100-sxm")
    w = _arch(IQUEST_LOOP_SMALL).weight_groups
    layers = w.sharded + w.replicated + w.kv_projection_per_rank(1)
    for passes in (1, 2, 3):
        step = c.decode_step(
            _arch(IQUEST_LOOP_SMALL, loop_num=passes),
            gpu,
            tensor_parallel_size=1,
            batch=8,
            context_tokens=4096,
        )
        assert step.weight_bytes_read == pytest.approx(passes * layers + w.lm_head)
        assert step.kv_cache_bytes_read == 8 * 3 * 512 * (4096 + 64 * (passes - 1))


def test_the_40b_loop_model_plans_on_two_h100s_with_the_flag_its_code_needs() -> None:
    arch = c.architecture_from_config(LOOP_40B)
    assert arch.config_reader == "checkpoint"  # served under --trust-remote-code
    assert arch.needs_remote_code
    assert c.tensor_parallel_error(arch, 8) is None
    assert "divide" in (c.tensor_parallel_error(arch, 16) or "")


def test_the_second_pass_costs_the_40b_model_sequences_at_a_tpot_target() -> None:
    """At 50 ms on H100s and 8K contexts, TP 2 either way: one pass would run as many sequences as memory
    holds (50, at 37 ms); two passes read the weights twice a step, so the TPOT target holds the batch
    below that (32, at 50 ms)."""
    h100 = c.gpu_spec("h100-sxm")
    plans = {
        passes: c.plan(
            _arch(LOOP_40B, loop_num=passes),
            h100,
            c.Workload(max_model_len=8192),
            c.SLO(tpot_seconds=0.05),
            c.Limits(),
        )
        for passes in (1, 2)
    }
    for result in plans.values():
        assert result.plan is not None and result.plan.tensor_parallel_size == 2
    one, two = (plans[n].plan for n in (1, 2))
    assert one is not None and two is not None
    assert two.max_num_seqs < one.max_num_seqs
    prediction = plans[2].prediction
    assert prediction is not None and prediction.tpot_seconds <= 0.05


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"hidden_act": "gelu"}, "hidden_act"),  # vLLM: "Unsupported activation"
        # vLLM builds a window on every layer's first pass too where max_window_layers covers them all (and
        # asserts where it does not): two windows, which kvright does not read.
        ({"sliding_window": 128, "max_window_layers": 3}, "sliding_window"),
        ({"num_attention_heads": 6}, "num_attention_heads"),  # 256 / 6: no head width
        ({"loop_num": 0}, "loop_num"),
    ],
)
def test_files_the_class_cannot_build_or_kvright_does_not_read_are_refused(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError, match=field):
        _arch(IQUEST_LOOP_SMALL, **changes)
