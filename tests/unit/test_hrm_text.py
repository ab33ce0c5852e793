"""HRM-Text (vLLM's ``hrm_text.py``, ``HrmTextForCausalLM``) as capacity reads, weighs, caches and times it.

tests/conformance/test_hrm_text.py holds small configs to vLLM's class and engine core at one rank on every
run. The per-rank bytes and caches at TP 2 below, and HRM-Text-1B's, were measured with vLLM 0.32's class
built on both ranks of a TP group (gloo on loopback) before this was written; both ranks held the same bytes.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.roofline import StepModel
from tests.builders import HRM_TEXT_SMALL, cpu_engine_accounting, edited, model_shapes, weight_bytes_by_tp

#: HRM-Text-1B's config.json, the fields capacity reads (tests/data/shapes/hrm_text.json).
HRM_TEXT_1B = model_shapes("hrm_text")["1b"]


def test_each_step_caches_its_layers_and_the_stacks_hold_the_weights() -> None:
    a = c.architecture_from_config(HRM_TEXT_SMALL)
    assert (a.num_layers, a.held_layers, a.num_kv_heads) == (16, 4, 4)
    raw = c.architecture_from_config(edited(HRM_TEXT_SMALL, num_layers_per_stack=None, num_hidden_layers=2))
    assert (raw.num_layers, raw.held_layers) == (16, 4)
    assert raw.parameters == a.parameters


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (HRM_TEXT_SMALL, {1: 1_704_192, 2: 852_224}),
        (edited(HRM_TEXT_SMALL, head_dim=16, attention_bias=True, mlp_bias=True), {1: 1_384_704, 2: 693_504}),
        (edited(HRM_TEXT_SMALL, tie_word_embeddings=True), {1: 1_573_120, 2: 786_688}),
        (HRM_TEXT_1B, {1: 2_365_590_528, 2: 1_182_796_800}),
    ],
    ids=["small", "biases", "tied", "1b"],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """Two stacks' weights whatever the steps, the output projection's and down projection's biases whole
    on every rank, no norm weights, one hidden-wide z_L_init."""
    assert weight_bytes_by_tp(config, measured) == measured


@pytest.mark.parametrize(
    ("config", "memory", "length", "tp", "measured"),
    [
        (HRM_TEXT_SMALL, 2**26, 2048, 1, (128, 64)),
        (HRM_TEXT_SMALL, 2**26, 2048, 2, (128, 128)),
        (HRM_TEXT_1B, 2**32, 4096, 1, (128, 42)),
        (HRM_TEXT_1B, 2**32, 4096, 2, (128, 85)),
    ],
    ids=["small", "small-tp2", "1b", "1b-tp2"],
)
def test_the_engine_core_blocks_every_steps_caches(
    config: dict[str, Any], memory: int, length: int, tp: int, measured: tuple[int, int]
) -> None:
    """(Block size, blocks): 128 caches for HRM-Text-1B's 32 weight layers."""
    block, blocks, _ = cpu_engine_accounting(config, memory, length, tensor_parallel_size=tp)
    assert (block, blocks) == measured


def test_a_step_reads_each_stack_once_a_step_it_runs() -> None:
    """The 1B's decode step streams its layers' weights four times (8 steps over 2 stacks), not once."""
    a = c.architecture_from_config(HRM_TEXT_1B)
    layers = a.weight_groups.sharded + a.weight_groups.replicated + a.weight_groups.kv_projection_total
    assert a.weight_groups.reread == pytest.approx(3 * (layers - 1536 * 2))  # less z_L_init's bytes
    step = StepModel(
        a, c.gpu_spec("h100-sxm"), layout=c.Layout(tensor_parallel_size=1), kv_cache_dtype="auto"
    )
    assert step.dense_weight_bytes == pytest.approx(4 * layers - 3 * 1536 * 2 + a.weight_groups.lm_head)


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"hidden_act": "gelu"}, "hidden_act"), ({"num_attention_heads": 5}, "num_attention_heads")],
    ids=["activation", "heads"],
)
def test_files_the_class_or_its_config_refuses_are_refused(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(c.ConfigError, match=field):
        c.architecture_from_config(edited(HRM_TEXT_SMALL, **changes))
