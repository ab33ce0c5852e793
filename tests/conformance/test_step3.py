"""StepFun's Step-3, its text model and its wrapper, as vLLM's own classes build them and its engine core
accounts their cache.

vLLM 0.32 builds ``Step3TextForCausalLM`` (``step3_text.py``, over its own Step3TextConfig) with one KV
head in every layer whatever ``num_attention_groups`` says, cached whole on every rank: a projection whole
on every rank from the hidden state to the shared query (``share_q_dim``; null or 0 the head width) and the
K and V heads, a norm of that width, and a split projection up to the query heads; routed experts on the
layers ``moe_layers_enum`` lists (a comma-separated string: the config class's default tuple stops the
build), each with a router whole on every rank and a ``share_expert_dim``-wide shared expert; an LM head of
its own whatever the file says. vllm_weights_probe.py builds the class on the meta device and runs the
engine core's accounting; capacity must give the same parameters, bytes and blocks. The wrapper
(``Step3VLForConditionalGeneration``, the released checkpoint's class) adds its tower, never quantized and
holding no cache: blocks split by TP and, whole on every rank, the embeddings, the blocks' output biases and
norms, and a projector of two convolutions and a linear; its processor imports torchvision, which the probe
stands in for. The per-rank bytes at TP 2, measured on both ranks in both of vLLM's encoder TP modes, and the
released shape's are held in tests/unit/test_step3.py.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from tests.builders import STEP3_TEXT_SMALL, STEP3_VL_SMALL, edited

from . import harness

pytestmark = pytest.mark.conformance

#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "two-routed-layers": STEP3_TEXT_SMALL,
    "one-routed-layer": edited(STEP3_TEXT_SMALL, moe_layers_enum="2"),
    "shared-query-null-is-the-head-width": STEP3_TEXT_SMALL | {"share_q_dim": None},
    "shared-query-default": edited(STEP3_TEXT_SMALL, share_q_dim=None),
    "tied-file-untied-head": edited(STEP3_TEXT_SMALL, tie_word_embeddings=True),
    "groups-ignored": edited(STEP3_TEXT_SMALL, num_attention_groups=4),
    "four-heads-of-128": edited(STEP3_TEXT_SMALL, num_attention_heads=4, head_dim=128),
    "two-experts-one-a-token": edited(STEP3_TEXT_SMALL, moe_num_experts=2, moe_top_k=1),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(BUILT, list(BUILT), memory=2**26, length=2048)

#: Files vLLM refuses, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "moe_layers_enum": edited(STEP3_TEXT_SMALL, moe_layers_enum=None),  # "'tuple' object has no attribute"
}


class TestStep3Text(harness.LayerCachesSuite):
    """Eight builds (the shared query by every spelling, routed layers, groups the class ignores, the head
    untied), their caches and one refusal."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED


def _tower(**changes: Any) -> dict[str, Any]:
    """The small Step-3 with its tower's fields changed."""
    return edited(STEP3_VL_SMALL, vision_config=edited(STEP3_VL_SMALL["vision_config"], **changes))


#: Wrappers vLLM's class builds, weighed to the byte.
VL_BUILT: dict[str, dict[str, Any]] = {
    "two-blocks-of-64": STEP3_VL_SMALL,
    "projector-without-bias": edited(STEP3_VL_SMALL, projector_bias=False),
    "heads-narrower-than-the-blocks": _tower(hidden_size=66),
    "three-heads-of-32": _tower(hidden_size=96, num_attention_heads=3),
    "seventy-pixels-of-seven": _tower(image_size=70, patch_size=7),
    "five-blocks-wider-mlp-and-projector": _tower(
        num_hidden_layers=5, intermediate_size=200, output_hidden_size=160
    ),
}


class TestStep3VL(harness.ModelSuite):
    """Six wrappers (the tower's widths, heads, images and projector), their caches (the text model's
    alone) and the file without its routed layers."""

    BUILT = VL_BUILT
    ACCOUNTED = harness.accounted_cases(VL_BUILT, list(VL_BUILT), memory=2**26, length=2048)
    REFUSED: ClassVar[dict[str, dict[str, Any]]] = {
        "moe_layers_enum": edited(
            STEP3_VL_SMALL, text_config=edited(STEP3_VL_SMALL["text_config"], moe_layers_enum=None)
        ),
    }
    STAND_INS: ClassVar[dict[str, Any]] = {"torchvision_stand_in": True}
