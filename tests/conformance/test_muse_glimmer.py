"""MuseGlimmer as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``MuseGlimmerForCausalLM`` (``muse_glimmer.py``, also registered as
``MuseGlimmerForConditionalGeneration``, over vLLM's own MuseGlimmerConfig, which folds a flat file's
top-level fields into its text and vision configs and makes a default tower where the file states none) as a
GQA decoder of four norms a layer with a per-head output gate (unless ``use_attn_output_gate`` is false),
weightless q/k and embedding norms, and an LM head of its own whatever the file says; a layer with RoPE
(``no_rope_layers``, by default all but every 4th counted back from the last) slides over ``sliding_window``,
the others attend whole, whatever ``layer_types`` says. Its vision tower, built unless ``has_vision`` is false
or the file is a ``muse_glimmer_text`` config, splits its attention by TP and holds the rest whole on every
rank; its processor imports torchvision, which the probe stands in for. vllm_weights_probe.py builds the class
on the meta device and runs the engine core's accounting; capacity must give the same parameters, bytes,
windows and blocks. The per-rank bytes and blocks at TP 2, measured on both ranks, and the full-size flat
file's are held in tests/unit/test_muse_glimmer.py.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from tests.builders import MUSE_GLIMMER, MUSE_GLIMMER_SMALL, edited

from . import harness

pytestmark = pytest.mark.conformance

NESTED = MUSE_GLIMMER["nested-tower"]


def _tower(**changes: Any) -> dict[str, Any]:
    """The small nested file with its tower's fields changed."""
    return edited(NESTED, vision_config=edited(NESTED["vision_config"], **changes))


#: Configs vLLM's class builds, weighed to the byte (tests/data/shapes/muse_glimmer.json).
BUILT: dict[str, dict[str, Any]] = {
    "flat": MUSE_GLIMMER_SMALL,
    "no-gate-no-qk-norm": MUSE_GLIMMER["no-gate-no-qk-norm"],
    "layer-types-ignored": MUSE_GLIMMER["layer-types-ignored"],
    "nope-every-other": MUSE_GLIMMER["nope-every-other"],
    "tied-file-one-kv-head": MUSE_GLIMMER["tied-one-kv-head"],
    "nested-tower": NESTED,
    "nested-no-vision": MUSE_GLIMMER["nested-no-vision"],
    "text-type": MUSE_GLIMMER["text-type"],
    "nested-default-tower": MUSE_GLIMMER["nested-default-tower"],
    "window-null": MUSE_GLIMMER_SMALL | {"sliding_window": None},
    "flat-vision-fields-default-window": edited(
        MUSE_GLIMMER_SMALL,
        has_vision=None,
        sliding_window=None,
        vision_latent_dim=64,
        vision_heads=2,
        vision_layers=3,
        vision_mlp_ratio=1.5,
        vision_output_dim=256,
        vision_adapter_dim=80,
        vision_pos_emb_grid_h=3,
        vision_pos_emb_grid_w=5,
    ),
    "tower-three-blocks-one-head": _tower(num_hidden_layers=3, num_attention_heads=1, patch_temporal=1),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(BUILT, list(BUILT), memory=2**26, length=2048)

#: Files vLLM refuses, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "hidden_act": edited(MUSE_GLIMMER_SMALL, hidden_act="gelu"),  # "MuseGlimmer uses `silu` ..."
    "no_rope_layers": edited(MUSE_GLIMMER_SMALL, no_rope_layers=[0, 1]),  # shorter than the layers
    "output_dim": _tower(output_dim=255),  # not the pixel shuffle's width
    "num_attention_heads": _tower(num_attention_heads=3),  # the width does not split into the heads
    "has_vision": edited(MUSE_GLIMMER["text-type"], has_vision=True),  # a tower of the text config's fields
}


class TestMuseGlimmer(harness.LayerCachesSuite):
    """Twelve builds (flat, nested and text-type files; the gate off, layer_types ignored, no_rope_layers
    stated, a tied file, no window, the default window; the tower stated, left out, defaulted, flat and
    narrowed), their caches and five refusals."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STAND_INS: ClassVar[dict[str, Any]] = {"torchvision_stand_in": True}
