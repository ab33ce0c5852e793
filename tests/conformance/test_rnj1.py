"""Essential AI's Rnj-1 as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``Rnj1ForCausalLM`` (``rnj1.py``) from Gemma 3's config class with Gemma 3's modules and
layer kinds of its own: a ``chunked_attention`` layer caches a window of ``sliding_window`` tokens, any other
layer its whole context, except where every layer says ``sliding_attention`` (vLLM's engine then sets its
window on every layer). Each layer passes ``Attention`` a ``chunk_lookback`` that only the Triton backend
takes, so the CPU build cannot build the class and a GPU needs ``--attention-backend TRITON_ATTN``, which the
plan carries: the probe builds it without that argument (``TRITON_ONLY_ARGUMENTS``), on which no tensor and no
cache spec depends. vllm_weights_probe.py builds the class on the meta device and runs the engine core's
accounting; capacity must give the same parameters, bytes, windows and blocks.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity
from tests.builders import RNJ1_SMALL, edited

from . import harness

pytestmark = pytest.mark.conformance

#: The small config with a vocabulary of whole 64-row shards, so that the file's parameters are vLLM's (an odd
#: vocabulary's padded rows are weighed in tests/unit/test_rnj1.py).
SMALL = edited(RNJ1_SMALL, vocab_size=1024)

#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "chunked-sliding-full-tied": SMALL,
    "untied": edited(SMALL, tie_word_embeddings=False),
    "every-layer-chunked-one-kv-head": edited(
        SMALL,
        num_hidden_layers=3,
        num_key_value_heads=1,
        sliding_window=256,
        layer_types=["chunked_attention"] * 3,
    ),
    "every-layer-sliding-is-windowed": edited(
        SMALL, layer_types=["sliding_attention"] * 4, sliding_window=256
    ),
    "config-class-pattern-is-whole": edited(
        SMALL, num_hidden_layers=6, layer_types=None, rope_parameters=None
    ),
    "biases-two-layers": edited(
        SMALL, num_hidden_layers=2, layer_types=["full_attention", "chunked_attention"], attention_bias=True
    ),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(BUILT, list(BUILT), memory=2**26, length=2048)

#: Files vLLM or its config class refuses, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "hidden_activation": edited(SMALL, hidden_activation="silu"),  # "RNJ-1 uses gelu_pytorch_tanh"
    "rope_parameters": edited(SMALL, rope_parameters=None),  # no chunked_attention entry: its RoPE stops
    "num_attention_heads": edited(SMALL, hidden_size=250),  # Gemma3TextConfig's validate_architecture
}


class TestRnj1(harness.LayerCachesSuite):
    """Six builds (Gemma 3's modules, tied or not, biases), their caches (windows on chunked layers alone, or
    on every layer where all say sliding_attention), and three refusals."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED

    def check_built(self, answer: dict[str, Any], config: dict[str, Any]) -> None:
        """The bytes and windows, and the Triton backend in the plan."""
        super().check_built(answer, config)
        assert capacity.architecture_from_config(config).attention_backend == "TRITON_ATTN"
