"""AI2's OLMo Hybrid as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``OlmoHybridForCausalLM`` (``olmo_hybrid.py``) from transformers' OlmoHybridConfig: Gated
DeltaNet layers (``linear_attention``; ``olmo_gdn_linear_attn.py``: fused q/k/v/g, b and a projections, a
conv over q, k and v, ``A_log`` and ``dt_bias`` in the model dtype, a gated norm over one value head whole on
every rank) and OLMo 3 attention layers for every other type (no window, no bias, whole-width q/k norms, post
norms), every fourth layer attention where the file states no ``layer_types``. Its heads are ``hidden_size /
num_attention_heads`` wide. The CPU build cannot build the GDN layer as it ships (it registers a Triton
allocator the CPU build's triton lacks): the probe stands in for that call alone (``_olmo_hybrid_on_cpu``).
vllm_weights_probe.py builds the class on the meta device and runs the engine core's accounting; capacity must
give the same parameters, bytes and blocks (the recurrent state in float32 where the CPU platform resets it,
``harness.cpu_mamba_ssm_cache_dtype``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import (
    OLMO_HYBRID_GDN_GQA,
    OLMO_HYBRID_SMALL,
    OLMO_HYBRID_WIDE,
    edited,
)

from . import harness

pytestmark = pytest.mark.conformance

#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "every-fourth-attention-derived-widths": OLMO_HYBRID_SMALL,
    "tied": edited(OLMO_HYBRID_SMALL, tie_word_embeddings=True),
    "eight-layers-wider-mlp": edited(OLMO_HYBRID_SMALL, num_hidden_layers=8, intermediate_size=768),
    "alternating-mha": edited(
        OLMO_HYBRID_SMALL,
        num_hidden_layers=6,
        num_key_value_heads=4,
        layer_types=["full_attention", "linear_attention"] * 3,
    ),
    "gdn-fewer-key-heads": OLMO_HYBRID_GDN_GQA,
    "one-kv-head-five-layers": edited(OLMO_HYBRID_SMALL, num_hidden_layers=5, num_key_value_heads=1),
    "conv-3-legacy-names": edited(
        OLMO_HYBRID_SMALL, linear_conv_kernel_dim=3, layer_types=["mamba", "attention"] * 2
    ),
    "sliding-type-is-whole-bias-ignored": edited(
        OLMO_HYBRID_SMALL,
        layer_types=["linear_attention", "sliding_attention", "linear_attention", "full_attention"],
        sliding_window=64,
        attention_bias=True,
    ),
    "no-rope-eight-value-heads": edited(
        OLMO_HYBRID_WIDE, rope_parameters={"rope_type": "default", "rope_theta": None}
    ),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(
    BUILT,
    [
        "every-fourth-attention-derived-widths",
        "alternating-mha",
        "one-kv-head-five-layers",
        "conv-3-legacy-names",
        "sliding-type-is-whole-bias-ignored",
        "no-rope-eight-value-heads",
    ],
    memory=2**26,
    length=2048,
)

#: Files vLLM refuses (its config class or its class), by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "linear_use_gate": edited(OLMO_HYBRID_SMALL, linear_use_gate=False),
    "layer_types": edited(OLMO_HYBRID_SMALL, layer_types=["full_attention"] * 4),  # no GDN layer
    "rope_parameters": edited(OLMO_HYBRID_SMALL, rope_parameters={"rope_type": None}),
}


class TestOlmoHybrid(harness.ModelSuite):
    """Nine builds (derived and stated GDN widths, layer kinds by every name the config class takes, biases
    and windows the class does not build, tied heads), six caches (the state sizing the block over the
    attention page) and three refusals."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    CPU_STATE_DTYPE = True
