"""rednote's dots3-note as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``Dots3NoteForCausalLM`` (``models/dots3_note``) with DeepSeek-V3.2's sparse MLA on the
layers whose ``layer_types`` entry is not ``sliding_attention`` (an indexer each, as IndexCache's fields leave
it) and an MLA of the ``swa_*`` widths over ``sliding_window_size`` tokens on the others; every cache row is
as wide as the sliding layers' (vLLM pads the full layers' to it), packed block-outermost into one pool whose
block is the widest group's pages rounded to the rows' strides. A gate per head or per value, an RMSNorm on
the rotated key, an LM head never tied, and a vision and an audio tower where the file has their sections.
vllm_weights_probe.py builds each config's class on the meta device (``_dots3_note_on_cpu`` and the sparse
stand-in supply what the CPU build lacks, which no tensor or cache spec depends on) and runs the engine
core's accounting; capacity must give the same parameters, bytes and blocks.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import DOTS3_NOTE_SMALL, edited

from . import harness

pytestmark = pytest.mark.conformance

_VISION = {
    "embed_dim": 256,
    "intermediate_size": 512,
    "moe_intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "patch_size": 14,
    "pyramid_num_routed": [-1, 2, 4],
    "adapter_type": "patch_merger",
    "adapter_in_dim": 256,
    "adapter_out_dim": 512,
}
_AUDIO = {
    "encoder_type": "dots",
    "whisper_config": {
        "d_model": 192,
        "encoder_layers": 1,
        "encoder_attention_heads": 3,
        "encoder_ffn_dim": 384,
    },
    "adapter_in_dim": 384,
    "adapter_out_dim": 512,
    "use_conv2d_stem": False,
    "use_rope": False,
    "use_rms_norm": False,
}

#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "mixed-headwise": DOTS3_NOTE_SMALL,
    "equal-rows-elementwise-gates": edited(
        DOTS3_NOTE_SMALL,
        swa_kv_lora_rank=128,
        attention_gate_type="elementwise",
        swa_attention_gate_type="elementwise",
    ),
    "full-layers-alone-tied": edited(
        DOTS3_NOTE_SMALL, layer_types=["full_attention"] * 6, tie_word_embeddings=True
    ),
    "sliding-layers-alone": edited(DOTS3_NOTE_SMALL, layer_types=["sliding_attention"] * 6),
    "every-other-indexer-routed-every-other-layer": edited(
        DOTS3_NOTE_SMALL, index_topk_freq=2, moe_layer_freq=2, index_head_dim=64
    ),
    "vision-and-audio-towers": edited(DOTS3_NOTE_SMALL, vision_config=_VISION, audio_config=_AUDIO),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(
    BUILT,
    [
        "mixed-headwise",
        "equal-rows-elementwise-gates",
        "full-layers-alone-tied",
        "sliding-layers-alone",
        "every-other-indexer-routed-every-other-layer",
    ],
    memory=2**30,
    length=4096,
    max_num_batched_tokens=2048,
)

#: Files vLLM refuses at build, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "layer_types": edited(DOTS3_NOTE_SMALL, layer_types=None),
    "swa_kv_lora_rank": edited(DOTS3_NOTE_SMALL, swa_kv_lora_rank=32),  # rows narrower than the full ones
    "swa_v_head_dim": edited(DOTS3_NOTE_SMALL, swa_v_head_dim=None),
    "q_lora_rank": {**DOTS3_NOTE_SMALL, "q_lora_rank": None},  # null: no query rank for the indexer
    "hidden_act": edited(DOTS3_NOTE_SMALL, hidden_act="gelu"),
    "apply_mla_qkv_lora_rescale": edited(DOTS3_NOTE_SMALL, apply_mla_qkv_lora_rescale=None),
}


class TestDots3Note(harness.ModelSuite):
    """Six builds (the two kinds of layer at their own widths, each gate as wide and as split as vLLM builds
    it, an indexer on each full layer IndexCache leaves one, the towers where the file has them), five
    caches (every row as wide as the sliding layers', the indexers' keys beside the full ones) and six
    refusals."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STAND_INS = harness.SPARSE_STAND_IN
