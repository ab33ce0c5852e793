"""StepFun's Step-3 (vLLM's ``step3_text.py`` and ``step3_vl.py``: ``Step3TextForCausalLM`` and the wrapper
``Step3VLForConditionalGeneration``) as capacity reads, weighs and caches it.

tests/conformance/test_step3.py holds small configs to vLLM's class and engine core at one rank on every run.
The per-rank bytes and caches at TP 2 below were measured with vLLM 0.32's class built on both ranks of a TP
group (gloo on loopback) before this was written, the wrapper's in both of vLLM's encoder TP modes; both ranks
held the same bytes. kvright refused the text class before (its expert fields are not a standard decoder's)
and weighed the wrapper's tower as a generic ViT split by TP (760 MB short for the released shape).
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from tests.builders import (
    STEP3_TEXT_SMALL,
    STEP3_VL_SMALL,
    cpu_engine_accounting,
    edited,
    model_shapes,
    weight_bytes_by_tp,
)

#: The released text model's shape as Step3TextConfig's defaults state it (tests/data/shapes/step3.json).
STEP3_TEXT = model_shapes("step3")["text-321b"]


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


#: The released Step-3: the text model above behind Step3VisionEncoderConfig's tower (63 blocks of 1792, 16
#: heads, 728-pixel images of 14-pixel patches, a projector to 4096 and twice that).
STEP3_VL = edited(
    STEP3_VL_SMALL,
    vision_config=None,
    text_config={k: v for k, v in STEP3_TEXT.items() if k != "torch_dtype"},
)


def _tower(**changes: Any) -> dict[str, Any]:
    return edited(STEP3_VL_SMALL, vision_config=edited(STEP3_VL_SMALL["vision_config"], **changes))


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (STEP3_VL_SMALL, {1: 5_746_624, 2: 3_353_920}),
        (edited(STEP3_VL_SMALL, projector_bias=False), {1: 5_746_112, 2: 3_353_408}),
        (_tower(hidden_size=66), {1: 5_755_260, 2: 3_360_244}),
        (_tower(image_size=70, patch_size=7), {1: 5_700_928, 2: 3_308_224}),
        (STEP3_VL, {1: 636_389_714_944, 2: 319_731_158_272}),
    ],
    ids=["small", "projector-without-bias", "heads-narrower-than-the-blocks", "more-patches", "321b"],
)
def test_the_wrappers_ranks_hold_the_text_model_and_the_tower_vllm_builds(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """The tower's blocks split by TP; its embeddings, position table, output biases, norms and projector
    (two convolutions, a linear) whole on every rank."""
    assert weight_bytes_by_tp(config, measured) == measured
    assert c.encoder_tp_mode(c.architecture_from_config(config), 2) == "weights"


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (_tower(hidden_size=63, num_attention_heads=2), 3_414_254),  # "63 is not divisible by 2"
        (_tower(hidden_size=96, num_attention_heads=3), 3_599_360),  # the heads: an empty assertion
    ],
    ids=["blocks-63-wide", "three-heads"],
)
def test_a_tower_tp_does_not_split_runs_whole_on_every_rank(config: dict[str, Any], measured: int) -> None:
    """vLLM's default encoder mode stops at load where TP does not divide the tower's heads or widths (no
    fallback); the class runs it whole under ``--mm-encoder-tp-mode data``, which kvright plans there, and
    each rank then holds what vLLM built in that mode at TP 2."""
    a = c.architecture_from_config(config)
    assert c.encoder_tp_mode(a, 2) == "data"
    assert c.weight_bytes_per_gpu(a, 2) == measured


def test_a_file_without_a_tower_gets_the_config_classs() -> None:
    """No vision_config: Step3VisionEncoderConfig's default tower (1.84 B parameters), as vLLM builds it."""
    measured = {1: 3_691_945_728, 2: 2_186_215_424}
    assert weight_bytes_by_tp(edited(STEP3_VL_SMALL, vision_config=None), measured) == measured
