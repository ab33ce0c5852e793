"""DeepSeek-V4.1-Flash as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 registers ``DeepseekV41ForCausalLM`` (``models/deepseek_v41``) as its vision-language wrapper: V4's
layers (a sliding window of one fp8_ds_mla latent on every layer, grouped low-rank output, mHC, routed
experts with a shared one) whose compressed caches are shared, written by the ``kv_source_layer_ids`` layers'
compressors (ratio 1 or 2) and scored by the ``index_source_layer_ids`` layers' indexers; Engram n-gram tables
in pinned host memory; a ViT and aligner beside the text model. vllm_weights_probe.py builds each config's
class on the meta device (``_deepseek_v41_on_cpu`` stands in what the CPU build lacks and no tensor or cache
spec depends on) and runs the engine core's accounting; capacity must give the same bytes on the GPU and in
host memory, and the same blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

import capacity
from tests.builders import deepseek_v41, edited

from . import harness

pytestmark = pytest.mark.conformance


def _text(config: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return edited(config, text_config=edited(config["text_config"], **changes))


RELEASED = deepseek_v41()
#: Configs vLLM's class builds, weighed to the byte (GPU and host).
BUILT: dict[str, dict[str, Any]] = {
    "released-widths": RELEASED,
    "two-kv-sources-two-engram-layers-no-tower": _text(
        edited(RELEASED, vision_config=None),
        num_hidden_layers=6,
        compress_ratios=[0, 1, 2, 1, 2, 0],
        kv_source_layer_ids=[1, 4],
        index_source_layer_ids=[1, 2, 4],
        engram_layer_ids=[2, 5],
        engram_num_embeddings=[384006168, 384016682],
    ),
    "32-heads-no-engram-no-shared-expert": _text(
        RELEASED,
        num_attention_heads=32,
        o_groups=4,
        n_shared_experts=0,
        compress_ratios=[1, 1, 1, 1],
        kv_source_layer_ids=[0, 2],
        index_source_layer_ids=[0, 1, 2, 3],
        engram_layer_ids=None,
        topk_method="greedy",
    ),
    "released-quantization": deepseek_v41(quantized=True),
}

#: The engine core's accounting of some of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(
    BUILT,
    ["released-widths", "two-kv-sources-two-engram-layers-no-tower", "32-heads-no-engram-no-shared-expert"],
    memory=2**30,
    length=32768,
    max_num_batched_tokens=4096,
)
ACCOUNTED["window-only"] = (
    _text(
        RELEASED,
        compress_ratios=[0, 0, 0, 0],
        kv_source_layer_ids=[99],
        index_source_layer_ids=None,
        engram_layer_ids=None,
    ),
    2**30,
    32768,
    4096,
)

#: Files vLLM refuses at build, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "compress_ratios": _text(RELEASED, compress_ratios=[0, 4, 2, 1]),
    "kv_source_layer_ids": _text(RELEASED, compress_ratios=[2, 2, 2, 1]),  # layer 0 reads no source
    "index_source_layer_ids": _text(RELEASED, index_source_layer_ids=[0, 1, 2]),  # layer 0: no keys to score
    "head_dim": _text(RELEASED, head_dim=256),
    "n_shared_experts": _text(RELEASED, n_shared_experts=None),
}


class TestDeepseekV41(harness.ModelSuite):
    """Four builds (every tensor vLLM builds weighed, the Engram tables as host memory), four caches (every
    layer's window, every kv source's compressed latents and indexer keys, every ratio-2 compressor ring,
    packed into one pool) and five refusals."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED

    def check_built(self, answer: Mapping[str, Any], config: dict[str, Any]) -> None:
        """The bytes on the GPUs and in host memory; the parameters vLLM counts less the E8M0 scales (the
        tables', the quantized weights'), which it counts as elements and capacity as bytes alone."""
        assert answer["error"] is None, answer
        arch = capacity.architecture_from_config(config)
        assert answer["architecture"] == "DeepseekV41ForCausalLM"
        assert round(arch.weight_groups.total) == answer["bytes"], answer["own_dtypes"]
        assert round(arch.weight_groups.host_tables) == answer["host_bytes"]
        own = answer["own_dtypes"]
        scales = sum(n for key, n in own.items() if key.endswith(":uint8") and "weight_scale" in key)
        if arch.weights.method == "none":
            assert arch.parameters == answer["parameters"] - scales, own
