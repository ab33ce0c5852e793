"""StepFun's Step-3 text model (vLLM's ``step3_text.py``, ``Step3TextForCausalLM``) as capacity reads, weighs
and caches it.

tests/conformance/test_step3.py holds small configs to vLLM's class and engine core at one rank on every run.
The per-rank bytes and caches at TP 2 below were measured with vLLM 0.32's class built on both ranks of a TP
group (gloo on loopback) before this was written; both ranks held the same bytes. kvright refused the class
before (its expert fields are not a standard decoder's).
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from tests.builders import STEP3_TEXT_SMALL, cpu_engine_accounting, edited, weight_bytes_by_tp

#: The released text model's shape as Step3TextConfig's defaults state it (no config.json of StepFun's is
#: public here): 61 layers of 7168, 64 heads of 256 over one KV head behind a 2048-wide shared query, layers
#: 4-59 routed (48 experts of 5120, 3 a token, a 5120-wide shared expert), a 128,815-token vocabulary.
STEP3_TEXT = edited(
    STEP3_TEXT_SMALL,
    hidden_size=7168,
    intermediate_size=18432,
    num_attention_heads=64,
    num_hidden_layers=61,
    max_seq_len=65536,
    vocab_size=128815,
    moe_intermediate_size=5120,
    moe_num_experts=48,
    moe_top_k=3,
    max_position_embedding=65536,
    max_position_embeddings=None,
    share_expert_dim=5120,
    share_q_dim=2048,
    head_dim=256,
    moe_layers_enum=",".join(str(i) for i in range(4, 60)),
)


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (STEP3_TEXT_SMALL, {1: 5_054_720, 2: 2_728_192}),
        (edited(STEP3_TEXT_SMALL, moe_layers_enum="2"), {1: 4_757_760, 2: 2_578_688}),
        (STEP3_TEXT_SMALL | {"share_q_dim": None}, {1: 4_759_424, 2: 2_531_200}),
        (edited(STEP3_TEXT_SMALL, share_q_dim=None), {1: 13_913_600, 2: 8_637_952}),
        (edited(STEP3_TEXT_SMALL, num_attention_heads=4, head_dim=128), {1: 5_251_328, 2: 2_924_800}),
        (edited(STEP3_TEXT_SMALL, moe_num_experts=2, moe_top_k=1), {1: 4_266_240, 2: 2_332_928}),
        (STEP3_TEXT, {1: 632_589_563_904, 2: 317_434_411_008}),
    ],
    ids=[
        "small",
        "one-routed-layer",
        "shared-query-null",
        "shared-query-default",
        "heads-of-128",
        "two-experts",
        "321b-text",
    ],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """The shared query's projection (with the one K and V head) and the routers are whole on every rank: a
    rank of TP 2 holds more than half (54 % of the small model)."""
    assert weight_bytes_by_tp(config, measured) == measured


def test_one_kv_head_is_cached_whole_on_every_rank() -> None:
    """682 blocks of 64 MiB at TP 1 and at TP 2 (measured): the cache does not shrink with TP."""
    for tp in (1, 2):
        assert cpu_engine_accounting(STEP3_TEXT_SMALL, 2**26, 2048, tensor_parallel_size=tp)[:2] == (128, 682)
    a = c.architecture_from_config(edited(STEP3_TEXT_SMALL, num_attention_groups=4))
    assert a.num_kv_heads == 1 and not a.tie_word_embeddings


@pytest.mark.parametrize(
    ("changes", "tp", "reason"),
    [
        ({"num_attention_heads": 6}, 4, "does not divide the 6 attention heads"),
        ({"moe_num_experts": 2, "moe_top_k": 1}, 4, "exceeds the 2 routed experts"),
    ],
    ids=["heads", "more-ranks-than-experts"],
)
def test_tp_degrees_the_class_refuses_are_refused(changes: dict[str, Any], tp: int, reason: str) -> None:
    """Its attention asserts the heads split; its MoE layer raises "Tensor parallel size 4 is greater than the
    number of experts 2" (read in step3_text.py, not run: a TP 4 build takes four probe processes)."""
    error = c.tensor_parallel_error(c.architecture_from_config(edited(STEP3_TEXT_SMALL, **changes)), tp)
    assert error is not None and reason in error, error


def test_a_file_without_its_routed_layers_is_refused() -> None:
    with pytest.raises(c.ConfigError, match="moe_layers_enum"):
        c.architecture_from_config(edited(STEP3_TEXT_SMALL, moe_layers_enum=None))
