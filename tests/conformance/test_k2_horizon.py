"""K2-Horizon as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``K2HorizonForCausalLM`` (``k2_horizon.py``; no config class in vLLM or its transformers:
the checkpoint's code gives it, so the probe registers a plain config of its type, ``plain_config``, and
every config below states each field the class reads) as Qwen MoE's layers: layer i routed unless
``mlp_only_layers`` names it, where ``num_experts`` is above 0 and ``decoder_sparse_step`` divides i + 1,
over experts, one shared MLP ``num_shared_experts`` experts wide and a router whose bias (``moe_gate_bias``)
is float32; ``attention_bias`` on Q/K/V and the output projection, q/k norms of a rank's heads
(``query_key_norm``), a gate projection (``attention_gate_func``); on the routed layers with
``mova_num_experts``, MoVA attention: K fused with Q and the values from routed projections, no V. Every
layer caches standard GQA heads. Its TP rules and per-rank bytes at TP 2, measured on both ranks, and the
real 36B-A4B's and 7B's, are held in tests/unit/test_k2_horizon.py.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from tests.builders import K2_HORIZON, K2_HORIZON_SMALL, edited

from . import harness

pytestmark = pytest.mark.conformance

#: Configs vLLM's class builds, weighed to the byte (tests/data/shapes/k2_horizon.json).
BUILT: dict[str, dict[str, Any]] = {
    "dense": K2_HORIZON_SMALL,
    "gate-norms-biases": K2_HORIZON["gated"],
    "tied-partial-rope": K2_HORIZON["tied"],
    "mova-after-dense-layers": K2_HORIZON["mova-small"],
    "every-other-layer-routed": K2_HORIZON["every-other-routed"],
    "mova-one-kv-head": K2_HORIZON["mova-one-kv-head"],
    "mova-biases-norms-no-shared": edited(K2_HORIZON["mova-norms-no-shared"], attention_bias=True),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(BUILT, list(BUILT), memory=2**26, length=2048)

#: Files vLLM's class refuses, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "hidden_act": edited(K2_HORIZON_SMALL, hidden_act="gelu"),  # K2HorizonMLP: silu alone
    "layernorm_num_groups": edited(K2_HORIZON_SMALL, layernorm_num_groups=3),  # K2HorizonRMSNorm's assert
}


class TestK2Horizon(harness.LayerCachesSuite):
    """Seven builds (dense, gated with norms and biases, tied, MoVA after dense layers, every other layer
    routed, MoVA over one KV head, MoVA with biases and norms and no shared expert), their caches and two
    refusals."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STAND_INS: ClassVar[dict[str, Any]] = {"plain_config": True}
