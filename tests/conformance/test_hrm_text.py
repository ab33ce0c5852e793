"""HRM-Text as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``HrmTextForCausalLM`` (``hrm_text.py``, over transformers' HrmTextConfig) as a high and a
low stack of ``num_layers_per_stack`` layers run in ``H_cycles x (L_cycles + 1)`` recurrent steps, each
step's layers an attention cache of their own: every query head with its own K and V whatever
``num_key_value_heads`` says, a sigmoid gate fused with Q, K and V, norms without weights, a learned
``z_L_init``. vllm_weights_probe.py builds the class on the meta device and runs the engine core's
accounting; capacity must give the same parameters, bytes, caches and blocks. The per-rank bytes at TP 2,
measured on both ranks, and HRM-Text-1B's are held in tests/unit/test_hrm_text.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import HRM_TEXT_SMALL, edited

from . import harness

pytestmark = pytest.mark.conformance

#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "saved-steps": HRM_TEXT_SMALL,
    "raw-stack-size": edited(HRM_TEXT_SMALL, num_layers_per_stack=None, num_hidden_layers=2),
    "biases-narrower-heads": edited(HRM_TEXT_SMALL, head_dim=16, attention_bias=True, mlp_bias=True),
    "tied": edited(HRM_TEXT_SMALL, tie_word_embeddings=True),
    "kv-heads-ignored": edited(HRM_TEXT_SMALL, num_key_value_heads=2),
    "three-layer-stacks-one-cycle-of-two": edited(
        HRM_TEXT_SMALL, num_attention_heads=8, head_dim=16, H_cycles=1, L_cycles=2, num_layers_per_stack=3,
        num_hidden_layers=9,
    ),
}  # fmt: skip

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(BUILT, list(BUILT), memory=2**26, length=2048)

#: Files vLLM or its config class refuses, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "hidden_act": edited(HRM_TEXT_SMALL, hidden_act="gelu"),
}


class TestHrmText(harness.LayerCachesSuite):
    """Six builds (saved or raw layer counts, biases, tied, KV heads the class ignores, other cycles), their
    caches and one refusal."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
