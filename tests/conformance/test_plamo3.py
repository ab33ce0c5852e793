"""Preferred Networks' PLaMo 3 as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``Plamo3ForCausalLM`` (``plamo3.py``; the config class is the checkpoint's code, so the probe
registers a plain config of its type, ``plain_config``, holding what that class derives: the layers'
windows, their kinds and RoPE) as a GQA decoder with four norms a layer and per-head q/k norms, each layer's
window from ``interleaved_sliding_window`` (a null entry a full layer), the LM head tied by the config class's
default, and an untied head built for the vocabulary padded to 16. vllm_weights_probe.py builds the class on
the meta device and runs the engine core's accounting; capacity must give the same parameters, bytes,
windows and blocks. The vocabularies are whole 64-row shards, so that the file's parameters are vLLM's; the
head an odd vocabulary pads, and the per-rank bytes at TP 2 (measured on both ranks), are held in
tests/unit/test_plamo3.py.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from tests.builders import plamo3

from . import harness

pytestmark = pytest.mark.conformance

#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "every-fourth-layer-full-tied": plamo3(),
    "untied": plamo3(tie_word_embeddings=False),
    "one-kv-head-untied": plamo3(num_key_value_heads=1, tie_word_embeddings=False),
    "no-full-layer": plamo3(layers=4, pattern=8),
    "every-third-full-wider-heads": plamo3(
        layers=6,
        window=128,
        pattern=3,
        hidden_size=192,
        intermediate_size=384,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=16,
        tie_word_embeddings=False,
    ),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(BUILT, list(BUILT), memory=2**26, length=2048)

#: Files vLLM refuses, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "num_key_value_heads": plamo3(num_key_value_heads=3),  # the heads do not split into its groups
}


class TestPlamo3(harness.LayerCachesSuite):
    """Five builds (windows by layer, tied or not, one KV head, no full layer), their caches and one
    refusal."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STAND_INS: ClassVar[dict[str, Any]] = {"plain_config": True}
