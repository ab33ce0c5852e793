"""DeepSeek-V4 (vLLM's ``models/deepseek_v4``) as capacity reads it from DeepSeek-V4-Flash's real config.

The numbers held here were measured on vLLM 0.32's own classes (the CPU build): the parameters and bytes by
building ``DeepseekV4ForCausalLM`` on the meta device at TP 1, 2, 4 and 8 (a no-op ``torch.cuda.Event``
in that process, which the CPU class calls while building), the KV-cache groups, block stride and block
count by starting the engine on the real 43-layer ratio pattern with tiny widths (the cache dimensions
are the real ones). tests/conformance/test_deepseek_v4.py asks the engine again on every run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity as c
from capacity.errors import ConfigError
from tests.builders import edited

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "configs" / "deepseek-v4-flash" / "config.json"
CONFIG: dict[str, Any] = json.loads(FIXTURE.read_text())


def _arch(**changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(CONFIG, **changes), name="deepseek-v4-flash")


def test_parameters_are_what_vllms_class_builds():
    a = _arch()
    # 284,332,240,471 learned parameters (FP4 counted two a byte; the card says 284B) and the three hash
    # layers' token-to-expert tables, 129,280 x 6 each.
    assert a.parameters == 284_332_240_471 + 3 * 129_280 * 6
    assert a.active_parameters == 13_799_632_471 + 3 * 129_280 * 6
    assert a.attention == "MLA" and a.num_kv_heads == 1 and a.num_sliding_window_layers == 43
    ratios = [layer.compress_ratio for layer in a.layers]
    assert (ratios.count(0), ratios.count(4), ratios.count(128)) == (2, 21, 20)


@pytest.mark.parametrize(
    "tp, per_rank",
    [(1, 156_006_389_980), (2, 78_656_962_140), (4, 39_982_248_220), (8, 20_644_891_260)],
)
def test_weight_bytes_per_rank_are_vllms_to_the_byte(tp, per_rank):
    """fp8 linears with one-byte e8m0 scales per 128x128 block, MXFP4 experts, bf16 router, embedding, head
    and compressors, fp32 sinks, hyper-connections and compressor position biases, int32 hash tables."""
    a = _arch()
    assert a.weights.method == "deepseek_v4_fp8"
    assert c.weight_bytes_per_gpu(a, tp) == per_rank


def test_fp8_experts_keep_float32_block_scales():
    """``expert_dtype: fp8`` (DeepSeek-V4-Flash-Base): Fp8Config's experts and fp32 scales, no MXFP4."""
    fp4, fp8 = _arch(), _arch(expert_dtype="fp8")
    assert "MXFP4" not in fp8.weights.label
    scale = 4 / (128 * 128)
    per_weight = fp8.weights.bytes_per_parameter("experts", layer=5, model_dtype_bytes=2)
    assert per_weight == pytest.approx(1 + scale)
    assert fp4.weights.bytes_per_parameter("experts", layer=5, model_dtype_bytes=2) == 0.5 + 1 / 32
    assert fp4.weights.bytes_per_parameter("attention", layer=5, model_dtype_bytes=2) == 1 + 1 / (128 * 128)


def test_an_unquantized_checkpoint_weighs_two_bytes_a_weight():
    a = _arch(quantization_config=None)
    assert a.weights.method == "none"
    assert a.weight_groups.routed_experts_total == 2 * a.parameter_groups.routed_experts_total


#: The engine's groups for the real pattern (fp8_ds_mla): two of 22 and 21 sliding-window latent caches (64
#: tokens a block), one of every compressed latent and indexer cache (256), the ratio-4 compressor states
#: (window 8, 4 tokens a block) and the ratio-128 ones (window 128, 8 a block). A block of any group costs
#: the widest group's 1,002,240 bytes.
ENGINE_GROUPS = {("sliding", 128, 64): (43, 2), ("full", None, 256): (62, 1), ("sliding", 8, 4): (42, 1),
                 ("sliding", 128, 8): (20, 1)}  # fmt: skip


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_the_cache_layout_is_the_engines_on_every_rank(tp):
    layout = c.kv_cache_layout(_arch(), tensor_parallel_size=tp, max_num_batched_tokens=4096)
    assert layout.bytes_per_block == 1_002_240
    assert {(g.kind, g.bound, g.block_tokens): (g.layers, g.count) for g in layout.groups} == ENGINE_GROUPS
    assert layout.num_blocks(4 * 2**30) == 4285  # the engine's num_gpu_blocks for a 4 GiB cache


@pytest.mark.parametrize(
    "tokens, inflight, blocks",
    # vLLM's own per-request figure (its startup check and "Maximum concurrency"): cdiv(T, 256) compressed
    # blocks, and in each sliding group its window plus the in-flight tokens.
    [(131_072, 4096, 2202), (8192, 4096, 1722), (131_072, 8192, 3866), (131_072, 16_384, 7194)],
)
def test_a_request_reserves_what_vllm_reserves(tokens, inflight, blocks):
    layout = c.kv_cache_layout(
        _arch(), max_num_batched_tokens=inflight, max_in_flight_tokens=inflight, max_model_len=131_072
    )
    assert layout.blocks_per_sequence(tokens) == blocks


def test_auto_and_fp8_are_one_layout_and_bf16_is_refused():
    a = _arch()
    assert c.kv_cache_layout(a, kv_cache_dtype="auto") == c.kv_cache_layout(a, kv_cache_dtype="fp8")
    with pytest.raises(c.CapacityError, match=r"fp8_ds_mla.*expected auto or fp8"):
        c.kv_cache_layout(a, kv_cache_dtype="bfloat16")


def test_tensor_parallelism_divides_the_output_groups():
    a = _arch()
    assert c.valid_tensor_parallel_sizes(a, 16) == [1, 2, 4, 8]
    error = c.tensor_parallel_error(a, 16)
    assert error is not None and "8 output-projection groups" in error and "accepted: 1, 2, 4, 8" in error


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"compress_ratios": [0, 8] * 22}, "compress_ratios"),
        ({"compress_ratios": [0, 4]}, "compress_ratios"),
        ({"o_groups": None}, "o_groups"),
        ({"o_groups": 7}, "o_groups"),
        ({"hc_mult": None}, "hc_mult"),
        ({"expert_dtype": "int4"}, "expert_dtype"),
    ],
)
def test_a_file_vllm_cannot_build_is_refused_naming_the_field(changes, field):
    with pytest.raises(ConfigError) as raised:
        _arch(**changes)
    assert raised.value.field.endswith(field)


def _plan(gpu: str, **limits: Any) -> c.PlanResult:
    workload = c.Workload(max_model_len=32_768, prompt_tokens=4096, output_tokens=512, concurrency=64)
    return c.plan(_arch(), c.gpu_spec(gpu), workload, c.SLO(tpot_seconds=0.05), c.Limits(**limits))


def test_it_plans_on_hopper_and_is_refused_where_vllm_has_no_kernel():
    hopper = _plan("h200")
    assert hopper.feasible and hopper.plan is not None
    assert hopper.plan.layout.tensor_parallel_size * hopper.plan.layout.data_parallel_size >= 2
    ampere = _plan("a100-80gb")
    assert not ampere.feasible
    assert "compute capability 9.x or 10.x" in ampere.reason and "8.0" in ampere.reason


def test_a_pinned_bf16_cache_is_refused_with_what_is_accepted():
    with pytest.raises(c.CapacityError, match="expected auto or fp8"):
        _plan("h200", kv_cache_dtype="bfloat16")


def test_a_file_with_a_vision_tower_warns_that_the_tower_is_not_weighed():
    """DeepSeek-V4-Flash-Vision-Exp states ``vision_n_layers`` flat beside the text fields; vLLM serves such a
    file as DeepseekV4ForConditionalGeneration. kvright reads the text model and says what it leaves out."""
    vision = _arch(vision_n_layers=32, vision_dim=1024, vision_n_heads=16)
    text = _arch()
    assert vision.parameters == text.parameters and not text.warnings
    (warning,) = vision.warnings
    assert "vision_n_layers is 32" in warning and "DeepseekV4ForConditionalGeneration" in warning
    assert not _arch(vision_n_layers=0).warnings
