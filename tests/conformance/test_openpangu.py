"""Huawei's openPangu Embedded and Ultra MoE as vLLM's own class builds them and its engine core accounts
their caches.

vLLM 0.32 builds ``PanguEmbeddedForCausalLM`` and ``PanguUltraMoEForCausalLM`` (``openpangu.py``, one code for
both; the config classes are the checkpoint's code, so the probe registers a plain config of the type,
``plain_config``) with the kind of attention and MLP the file's fields select. Embedded's GQA attention: the
output projection biased by ``attention_bias`` or ``bias``, Q/K/V by ``qkv_bias`` where the file states it,
else by the same, the MLP by ``mlp_bias``; ``sandwich_norm`` adds two norms a layer;
``interleaved_sliding_window`` windows every layer (an integer) or the layers by their index modulo its length
(a list, null a full layer). Ultra MoE: DeepSeek-V3's MLA and MoE fields, a float32 score-correction bias with
``router_enable_expert_bias``, sandwich norms, the class refusing a model without a routed layer. Sink
attention (Pro MoE V2's) is refused. vllm_weights_probe.py builds the classes on the meta device and runs the
engine core's accounting; capacity must give the same parameters, bytes, windows and blocks. The per-rank
bytes at TP 2, measured on both ranks, and the released models' are held in tests/unit/test_openpangu.py.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from tests.builders import PANGU_EMBEDDED_SMALL, PANGU_ULTRA_SMALL, edited, model_shapes

from . import harness

pytestmark = pytest.mark.conformance

#: Embedded configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "biased-by-bias": PANGU_EMBEDDED_SMALL,
    "no-bias-tied": edited(PANGU_EMBEDDED_SMALL, bias=False, tie_word_embeddings=True),
    "qkv-bias-off-output-biased": edited(PANGU_EMBEDDED_SMALL, qkv_bias=False),
    "attention-bias-alone": edited(PANGU_EMBEDDED_SMALL, bias=False, attention_bias=True),
    "mlp-bias-sandwich-norms": edited(PANGU_EMBEDDED_SMALL, mlp_bias=True, sandwich_norm=True),
    "head-dim-stated": edited(PANGU_EMBEDDED_SMALL, head_dim=32),
    "one-window-every-layer": edited(PANGU_EMBEDDED_SMALL, interleaved_sliding_window=256),
    "windows-by-layer": edited(
        PANGU_EMBEDDED_SMALL, num_hidden_layers=4, interleaved_sliding_window=[256, None]
    ),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(BUILT, list(BUILT), memory=2**26, length=2048)

#: Files vLLM refuses, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "num_key_value_heads": edited(PANGU_EMBEDDED_SMALL, num_key_value_heads=3),  # heads % KV heads
}


class TestPanguEmbedded(harness.LayerCachesSuite):
    """Eight builds (every bias rule, sandwich norms, a stated head width, windows), their caches and one
    refusal."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STAND_INS: ClassVar[dict[str, Any]] = {"plain_config": True}


#: Ultra MoE configs vLLM's class builds, weighed to the byte.
ULTRA_BUILT: dict[str, dict[str, Any]] = {
    "one-dense-layer-query-lora": PANGU_ULTRA_SMALL,
    "no-query-lora": edited(PANGU_ULTRA_SMALL, q_lora_rank=None),
    "expert-bias": edited(PANGU_ULTRA_SMALL, router_enable_expert_bias=True),
    "sandwich-norms": edited(PANGU_ULTRA_SMALL, sandwich_norm=True),
    "two-shared-experts": edited(PANGU_ULTRA_SMALL, n_shared_experts=2),
    # the key stated null (the class reads it, null: no shared expert)
    "no-shared-expert-every-layer-routed": PANGU_ULTRA_SMALL
    | {"n_shared_experts": None, "first_k_dense_replace": 0},
    "wider-latent-tied": model_shapes("openpangu")["wider-latent-tied"],
}


class TestPanguUltraMoE(harness.ModelSuite):
    """Seven builds (query LoRA or not, the expert bias, sandwich norms, shared experts, every layer routed, a
    wider latent), their caches, and the file without a routed layer the class refuses."""

    BUILT = ULTRA_BUILT
    ACCOUNTED = harness.accounted_cases(ULTRA_BUILT, list(ULTRA_BUILT), memory=2**26, length=2048)
    REFUSED: ClassVar[dict[str, dict[str, Any]]] = {
        "first_k_dense_replace": edited(PANGU_ULTRA_SMALL, first_k_dense_replace=3),  # "No MOE layer found"
    }
    STAND_INS: ClassVar[dict[str, Any]] = {"plain_config": True}
