"""StepFun's Step1 as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``Step1ForCausalLM`` (``step1.py``; no config class in vLLM or its transformers: the
checkpoint's code gives it, so the probe registers a plain config of its type, ``plain_config``) as a decoder
with heads ``hidden_size / num_attention_heads`` wide whatever ``head_dim`` says, KV heads from
``num_attention_groups`` (else ``num_key_value_heads``, else one), ``attention_bias`` on the fused QKV and the
output projection, ``mlp_bias`` on the MLP, ALiBi positions, and the LM head tied unless the file says
otherwise. Its layers ask ``Attention`` for ALiBi with ``use_alibi_sqrt``, which only the Triton backend
takes: the CPU build cannot build the class and a GPU needs ``--attention-backend TRITON_ATTN``, which the
plan carries; the probe builds it without that argument (``TRITON_ONLY_ARGUMENTS``), on which no tensor and
no cache spec depends. Its TP rules and per-rank bytes, measured on both ranks of TP 2, are held in
tests/unit/test_step1.py.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

import capacity
from tests.builders import STEP1_SMALL, edited

from . import harness

pytestmark = pytest.mark.conformance

#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "two-groups-tied-by-default": STEP1_SMALL,
    "untied": edited(STEP1_SMALL, tie_word_embeddings=False),
    "groups-win-over-kv-heads": edited(STEP1_SMALL, num_key_value_heads=4),
    "kv-heads-without-groups": edited(STEP1_SMALL, num_attention_groups=None, num_key_value_heads=4),
    "neither-is-one-kv-head": edited(STEP1_SMALL, num_attention_groups=None),
    "head-dim-ignored": edited(STEP1_SMALL, head_dim=64),
    "biases": edited(STEP1_SMALL, attention_bias=True, mlp_bias=True),
    "twelve-heads-three-groups": edited(
        STEP1_SMALL, hidden_size=384, num_attention_heads=12, num_attention_groups=3
    ),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(BUILT, list(BUILT), memory=2**26, length=2048)

#: Files vLLM refuses, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "num_attention_groups": edited(STEP1_SMALL, num_attention_groups=3),  # Attention: heads % KV heads
}


class TestStep1(harness.LayerCachesSuite):
    """Eight builds (KV heads by each field that names them, none, a head_dim ignored, biases, tied or not),
    their caches and one refusal."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STAND_INS: ClassVar[dict[str, Any]] = {"plain_config": True}

    def check_built(self, answer: dict[str, Any], config: dict[str, Any]) -> None:
        """The bytes and every layer's cache, and the Triton backend in the plan."""
        super().check_built(answer, config)
        assert capacity.architecture_from_config(config).attention_backend == "TRITON_ATTN"
