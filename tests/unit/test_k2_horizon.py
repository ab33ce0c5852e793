"""K2-Horizon (vLLM's ``k2_horizon.py``, ``K2HorizonForCausalLM``) as capacity reads, weighs and caches it.

tests/conformance/test_k2_horizon.py holds small configs to vLLM's class and engine core at one rank on every
run. Every number below was measured with vLLM 0.32's class built on the meta device on this machine (its
config class is the checkpoint's code: a plain config of the file's fields), at TP 1 and on both ranks of a
TP-2 group (gloo on loopback), with the CPU engine core's cache accounting, before this was written; both
ranks held the same bytes and blocks. The real shapes are IFM/K2-Horizon-MoVA-36B-A4B's config.json and
K2-Horizon-7B's (tests/data/shapes/k2_horizon.json). The files the class refuses at any TP (an activation
other than silu, norm groups not dividing the width) are held to it in the conformance suite.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from tests.builders import K2_HORIZON, K2_HORIZON_SMALL, cpu_engine_accounting, edited, weight_bytes_by_tp

#: IFM/K2-Horizon-MoVA-36B-A4B's config.json (48 layers, 45 routed with MoVA attention).
K2_MOVA_36B = K2_HORIZON["mova-36b-a4b"]
#: K2-Horizon-7B's config.json, silent on experts, gate and biases (a dense model).
K2_7B = K2_HORIZON["7b"]
MOVA = K2_HORIZON["mova-small"]
GATED = K2_HORIZON["gated"]


def test_routed_layers_and_their_value_experts_are_read_as_the_class_builds_them() -> None:
    """Layer i routes unless mlp_only_layers names it, where experts exist and decoder_sparse_step divides
    i + 1; MoVA (value experts) on the routed layers alone; TP bounded by the experts only where one
    routes."""
    a = c.architecture_from_config(MOVA)
    assert [layer.ffn for layer in a.layers] == ["dense", "dense", "moe", "moe"]
    assert (a.value_experts, a.experts_bound_tp, a.expert_score_bias) == (3, True, True)
    every_other = c.architecture_from_config(K2_HORIZON["every-other-routed"])
    assert [layer.ffn for layer in every_other.layers] == ["dense", "moe", "dense", "moe"]
    assert every_other.value_experts == 0
    dense = c.architecture_from_config(K2_HORIZON_SMALL)
    assert (dense.num_moe_layers, dense.value_experts, dense.experts_bound_tp) == (0, 0, False)


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (K2_HORIZON_SMALL, {1: 853_248, 2: 427_264}),
        (GATED, {1: 921_088, 2: 461_440}),
        (MOVA, {1: 1_611_576, 2: 808_760}),
        (K2_HORIZON["every-other-routed"], {1: 1_544_480, 2: 774_432}),
        (K2_HORIZON["mova-one-kv-head"], {1: 955_192, 2: 512_824}),
        (K2_HORIZON["tied"], {1: 722_176, 2: 361_728}),
        (K2_HORIZON["mova-norms-no-shared"], {1: 988_672, 2: 496_768}),
        (K2_MOVA_36B, {1: 74_889_598_800, 2: 37_463_955_280}),
        (K2_7B, {1: 17_998_356_480, 2: 8_999_477_248}),
    ],
    ids=[
        "small",
        "gate-norms-biases",
        "mova",
        "every-other-routed",
        "mova-one-kv-head",
        "tied",
        "mova-norms",
        "mova-36b-a4b",
        "7b",
    ],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """The gate projection and the q/k norms split with a rank's heads (the k norm replicated with a KV head),
    the output projection's bias whole on every rank, each router and its float32 bias whole, the value
    experts split by KV head as V is."""
    arch = c.architecture_from_config(config)
    assert [c.tensor_parallel_error(arch, tp) for tp in measured] == [None] * len(measured)
    assert weight_bytes_by_tp(config, measured) == measured


def test_a_file_silent_on_experts_gate_and_biases_is_the_dense_model() -> None:
    """K2-Horizon-7B's file states no num_experts, mova_num_experts, attention_gate_func, attention_bias or
    decoder_sparse_step: read as the dense model those fields at 0, null and false build (vLLM's class
    measured with them stated)."""
    zeros = {"num_experts": 0, "mova_num_experts": 0, "attention_bias": False, "decoder_sparse_step": 1}
    stated = K2_7B | zeros | {"attention_gate_func": None}
    assert weight_bytes_by_tp(stated, (1, 2)) == weight_bytes_by_tp(K2_7B, (1, 2))
    silent = {"num_experts": None, "mova_num_experts": None, "decoder_sparse_step": None}
    assert weight_bytes_by_tp(edited(GATED, **silent), (1, 2)) == {1: 921_088, 2: 461_440}


@pytest.mark.parametrize(
    ("config", "memory", "length", "tp", "measured"),
    [
        (K2_HORIZON_SMALL, 2**26, 2048, 1, (128, 1024)),
        (K2_HORIZON_SMALL, 2**26, 2048, 2, (128, 2048)),
        (MOVA, 2**26, 2048, 1, (128, 512)),
        (MOVA, 2**26, 2048, 2, (128, 1024)),
        (K2_HORIZON["mova-one-kv-head"], 2**26, 2048, 2, (128, 2048)),
        (K2_MOVA_36B, 2**32, 4096, 1, (128, 170)),
        (K2_MOVA_36B, 2**32, 4096, 2, (128, 341)),
        (K2_7B, 2**32, 4096, 1, (128, 227)),
        (K2_7B, 2**32, 4096, 2, (128, 455)),
    ],
    ids=["small", "small-tp2", "mova", "mova-tp2", "one-kv-head-tp2", "36b", "36b-tp2", "7b", "7b-tp2"],
)
def test_the_engine_core_blocks_plain_attention_caches(
    config: dict[str, Any], memory: int, length: int, tp: int, measured: tuple[int, int]
) -> None:
    """(Block size, blocks): every layer caches its KV heads as a standard GQA layer, MoVA's too."""
    block, blocks, _ = cpu_engine_accounting(config, memory, length, tensor_parallel_size=tp)
    assert (block, blocks) == measured


@pytest.mark.parametrize(
    ("config", "measured", "refusal"),
    [
        (
            edited(
                K2_HORIZON["every-other-routed"],
                num_hidden_layers=2,
                decoder_sparse_step=1,
                num_experts=1,
                num_experts_per_tok=1,
            ),
            657_160,
            # "Tensor parallel size 2 is greater than the number of experts 1."
            "exceeds the 1 routed experts",
        ),
        (
            edited(K2_HORIZON_SMALL, hidden_size=192, num_attention_heads=6, num_key_value_heads=3),
            1_427_328,
            "3 KV heads",  # the attention's bare assert
        ),
    ],
    ids=["one-expert", "three-kv-heads"],
)
def test_tp_2_is_refused_where_the_class_refuses_it(
    config: dict[str, Any], measured: int, refusal: str
) -> None:
    """Built at TP 1 (these bytes); vLLM's class refuses TP 2 on both ranks."""
    arch = c.architecture_from_config(config)
    assert (c.tensor_parallel_error(arch, 1), c.weight_bytes_per_gpu(arch, 1)) == (None, measured)
    assert refusal in (c.tensor_parallel_error(arch, 2) or "")
