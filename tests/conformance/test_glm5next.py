"""Z.ai's GLM-5.3-Flash as vLLM's own classes build it and its engine core accounts its cache.

vLLM 0.32 builds ``Glm5NextForCausalLM`` and ``Glm5NextForConditionalGeneration`` (``models/glm5next``): Kimi
Delta Attention where a layer's ``layer_types`` entry is "linear_attention", NoPE MLA elsewhere, every MLA
layer with an indexer of its own (whatever ``indexer_types`` says) that caches one fp8 key per
``index_kpool`` tokens and keeps a bfloat16 ring of the last raw keys per request; mHC, an LM head never
tied, attention, KDA and indexers built without the checkpoint's quantization. The engine core sizes the
block by the KDA state the config describes (even with no KDA layer), pads the states to the latent's page
and packs the caches block-outermost. vllm_weights_probe.py builds each class on the meta device (the CPU
build's dense MLA backend stood in for the sparse one, torchvision for the wrapper's image processing, which
no tensor and no cache spec depends on); capacity must give the same bytes and blocks.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity
from tests.builders import GLM5_3_FLASH_TEXT, GLM5_NEXT_SMALL, edited

from . import harness

pytestmark = pytest.mark.conformance

KDA, MLA = "linear_attention", "indexed_attention"

#: Configs vLLM's classes build, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "three-kda-one-mla": GLM5_NEXT_SMALL,
    "six-layers-aliases-tied-kpool-16": edited(
        GLM5_NEXT_SMALL,
        num_hidden_layers=6,
        layer_types=["full_attention", KDA, "deepseek_sparse_attention", KDA, KDA, MLA],
        mlp_layer_types=["sparse"] * 6,
        n_shared_experts=2,
        hc_mult=4,
        index_kpool=16,
        tie_word_embeddings=True,
        linear_attn_config={"num_heads": 8, "head_dim": 64, "short_conv_kernel_size": 3},
    ),
    "class-schedules-no-mhc-no-shared-expert": edited(
        GLM5_NEXT_SMALL,
        num_hidden_layers=5,
        layer_types=None,
        mlp_layer_types=None,
        mhc=False,
        n_shared_experts=0,
        index_kpool=2,
    ),
    "all-mla-indexer-types-ignored": edited(
        GLM5_NEXT_SMALL,
        index_kpool=8,
        layer_types=[MLA] * 4,
        mlp_layer_types=["dense", "dense", "sparse", "dense"],
        indexer_types=["full", "shared", "full", "shared"],
        linear_attn_config=None,
    ),
    "all-kda-flat-fields": edited(
        GLM5_NEXT_SMALL,
        layer_types=[KDA] * 4,
        linear_attn_config=None,
        linear_num_heads=6,
        linear_head_dim=96,
        linear_conv_kernel_dim=5,
    ),
    "glm-5.3-flash-transcribed": GLM5_3_FLASH_TEXT,
    "a-sliding-entry-is-whole-mla": edited(GLM5_NEXT_SMALL, layer_types=[KDA, "sliding_attention", KDA, MLA]),
}

#: A block-FP8 checkpoint: vLLM quantizes its MLPs and experts only (the probe counts the scales as
#: parameters, capacity does not: held to the byte).
BLOCK_FP8 = edited(
    GLM5_NEXT_SMALL,
    quantization_config={
        "quant_method": "fp8",
        "fmt": "e4m3",
        "activation_scheme": "dynamic",
        "weight_block_size": [128, 128],
    },
)

#: The wrapper: the same language model behind its vision tower (GLM-OCR's, its merger
#: projection_intermediate_size wide).
WRAPPER: dict[str, Any] = {
    "architectures": ["Glm5NextForConditionalGeneration"],
    "model_type": "glm5_next",
    "torch_dtype": "bfloat16",
    "text_config": {k: v for k, v in GLM5_NEXT_SMALL.items() if k not in ("architectures", "torch_dtype")},
    "vision_config": {
        "model_type": "glm5_next_vision",
        "depth": 2,
        "hidden_size": 256,
        "num_heads": 4,
        "intermediate_size": 512,
        "out_hidden_size": 512,
        "projection_intermediate_size": 1024,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "spatial_merge_size": 2,
        "in_channels": 3,
    },
    "image_token_id": 3990,
    "video_token_id": 3991,
    "image_start_token_id": 3992,
    "image_end_token_id": 3993,
    "video_start_token_id": 3994,
    "video_end_token_id": 3995,
}

#: (config, KV-cache bytes, max_model_len, max_num_batched_tokens) for the engine core's accounting.
ACCOUNTED: dict[str, tuple[dict[str, Any], int, int, int]] = {
    "glm-5.3-flash-transcribed": (GLM5_3_FLASH_TEXT, 8 * 2**30, 32768, 8192),
} | harness.accounted_cases(
    BUILT,
    (
        "three-kda-one-mla",
        "six-layers-aliases-tied-kpool-16",
        "class-schedules-no-mhc-no-shared-expert",
        "all-mla-indexer-types-ignored",
        "all-kda-flat-fields",
    ),
)

#: Files vLLM refuses, by the field capacity names: the class's NoPE and kpool checks, a field vLLM reads
#: that the class does not declare, a tail selection vLLM does not build.
REFUSED: dict[str, dict[str, Any]] = {
    "qk_rope_head_dim": edited(GLM5_NEXT_SMALL, qk_rope_head_dim=32),
    "index_kpool": edited(GLM5_NEXT_SMALL, index_kpool=1),
    "mhc": edited(GLM5_NEXT_SMALL, mhc=None),
    "index_kpool_always_select_tail": edited(GLM5_NEXT_SMALL, index_kpool_always_select_tail=False),
}

#: Builds the suite's own tests read: the wrapper and a block-FP8 file.
PROBED: dict[str, dict[str, Any]] = {"wrapper": WRAPPER, "block-fp8": BLOCK_FP8}


class TestGlm5Next(harness.ModelSuite):
    """Every MLA layer's indexer is weighed, whatever indexer_types says; KDA's fp32 parts, mHC's mixes and
    the untied head as vLLM builds them; the block the KDA state sets, every group's page and the pool's
    blocks, and a request's blocks in every group (its MLA group's by its length, one in each KDA and ring
    group); the wrapper's tower; under block FP8 only the MLPs and experts quantized."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    PROBED = PROBED
    STAND_INS = harness.SPARSE_STAND_IN | {"torchvision_stand_in": True}

    def test_block_fp8_quantizes_the_mlps_and_experts_and_nothing_else(
        self, vllm_answers: dict[str, dict[str, Any]]
    ) -> None:
        answer = vllm_answers["built:block-fp8"]
        assert answer["error"] is None, answer
        assert round(capacity.architecture_from_config(BLOCK_FP8).weight_groups.total) == answer["bytes"]
        fp8 = {name for name in answer["own_dtypes"] if name.endswith(":float8_e4m3fn")}
        assert fp8 and not any("self_attn" in name for name in fp8), fp8

    def test_the_wrappers_tower_is_weighed_as_vllm_builds_it(
        self, vllm_answers: dict[str, dict[str, Any]]
    ) -> None:
        arch = harness.weighed_as_built(vllm_answers["built:wrapper"], WRAPPER)
        text = capacity.architecture_from_config(GLM5_NEXT_SMALL)
        assert arch.parameters - text.parameters == arch.vision_parameters > 0
