"""MuseGlimmer (vLLM's ``muse_glimmer.py``: ``MuseGlimmerForCausalLM``, also registered as
``MuseGlimmerForConditionalGeneration``) as capacity reads, weighs and caches it.

tests/conformance/test_muse_glimmer.py holds small configs to vLLM's class and engine core at one rank on
every run. Every number below was measured with vLLM 0.32's class built on the meta device on this machine
(over vLLM's own MuseGlimmerConfig; its processor's torchvision import stood in), at TP 1 and on both ranks of
a TP-2 group (gloo on loopback), with the CPU engine core's cache accounting, before this was written; both
ranks held the same bytes and blocks. The shapes are tests/data/shapes/muse_glimmer.json: small flat, nested
and text-type files, and a full-size flat file vendored in a vLLM test. kvright refused the class by name
before; read as a standard decoder before that, it missed the output gate, two of the four norms and most of
the tower, tied the head where the file said so, and cached every layer whole (4 times too few blocks).
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from tests.builders import MUSE_GLIMMER, MUSE_GLIMMER_SMALL, cpu_engine_accounting, edited, weight_bytes_by_tp

NESTED = MUSE_GLIMMER["nested-tower"]
#: The full-size flat file (52 layers of 6656 and the default-sized tower, its fields at the top level).
FLAT_30B = MUSE_GLIMMER["flat-30b"]


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (MUSE_GLIMMER_SMALL, {1: 1_577_216, 2: 790_784}),
        (MUSE_GLIMMER["no-gate-no-qk-norm"], {1: 1_446_144, 2: 725_248}),
        (MUSE_GLIMMER["layer-types-ignored"], {1: 1_577_216, 2: 790_784}),
        (MUSE_GLIMMER["nope-every-other"], {1: 1_577_216, 2: 790_784}),
        (MUSE_GLIMMER["tied-one-kv-head"], {1: 1_511_680, 2: 790_784}),
        (NESTED, {1: 1_956_352, 2: 1_136_768}),
        (MUSE_GLIMMER["nested-no-vision"], {1: 1_577_216, 2: 790_784}),
        (MUSE_GLIMMER["text-type"], {1: 1_577_216, 2: 790_784}),
        (MUSE_GLIMMER["nested-default-tower"], {1: 3_791_791_360, 2: 3_318_915_328}),
        (FLAT_30B, {1: 59_553_253_376, 2: 31_227_773_952}),
        (MUSE_GLIMMER["flat-30b-text"], {1: 55_709_561_856, 2: 27_856_172_032}),
    ],
    ids=[
        "small",
        "no-gate",
        "layer-types-ignored",
        "nope-every-other",
        "tied-file-untied-head",
        "nested-tower",
        "nested-no-vision",
        "text-type",
        "nested-default-tower",
        "flat-30b",
        "flat-30b-text",
    ],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """Four norms a layer, the output gate split by head (none with use_attn_output_gate false), an LM head
    of its own whatever tie_word_embeddings says; the tower (the default one where a muse_glimmer file states
    no vision fields, none with has_vision false or a muse_glimmer_text file) split by TP in its attention
    alone, its patch projection, positions, norms, MLPs, adapter and projection whole on every rank."""
    arch = c.architecture_from_config(config)
    assert [c.tensor_parallel_error(arch, tp) for tp in measured] == [None] * len(measured)
    assert weight_bytes_by_tp(config, measured) == measured


def test_a_file_gets_the_default_tower_unless_it_says_it_has_none() -> None:
    """MuseGlimmerConfig makes a vision config for every muse_glimmer file: the nested file without one
    holds 1,895,895,680 parameters (1.9 B of them the default tower's), as many as the text model and that
    tower; has_vision false leaves the tower out, as a muse_glimmer_text file does."""
    default = c.architecture_from_config(MUSE_GLIMMER["nested-default-tower"])
    text = c.architecture_from_config(MUSE_GLIMMER["nested-no-vision"])
    assert default.parameters == 1_895_895_680
    assert text.parameters == 788_608 == c.architecture_from_config(MUSE_GLIMMER["text-type"]).parameters
    assert (text.vision_parameters, c.architecture_from_config(FLAT_30B).parameters) == (0, 29_776_626_688)


def test_the_tower_runs_whole_on_every_rank_where_tp_does_not_divide_its_heads() -> None:
    """vision.py's is_vit_use_data_parallel builds the vision attention whole where TP does not divide its
    heads: at TP 4 a tower of two heads adds all of its TP-1 bytes (379,136: the nested file's less the file
    without its tower, both measured) to each rank, where at TP 2 its four heads split (345,984 a rank)."""
    two_heads = edited(NESTED, vision_config=edited(NESTED["vision_config"], num_attention_heads=2))
    towerless = MUSE_GLIMMER["nested-no-vision"]
    at = {
        tp: weight_bytes_by_tp(two_heads, (tp,))[tp] - weight_bytes_by_tp(towerless, (tp,))[tp]
        for tp in (1, 4)
    }
    assert at == {1: 1_956_352 - 1_577_216, 4: 1_956_352 - 1_577_216}
    assert weight_bytes_by_tp(NESTED, (2,))[2] - weight_bytes_by_tp(towerless, (2,))[2] == 1_136_768 - 790_784


@pytest.mark.parametrize(
    ("config", "windows"),
    [
        (MUSE_GLIMMER_SMALL, [64, 64, 64, None]),
        (MUSE_GLIMMER["layer-types-ignored"], [64, 64, 64, None]),
        (MUSE_GLIMMER["nope-every-other"], [None, 64, None, 64]),
        (FLAT_30B, [None if (51 - i) % 4 == 0 else 2048 for i in range(52)]),
    ],
    ids=["default", "layer-types-ignored", "no-rope-layers", "flat-30b"],
)
def test_layers_slide_by_no_rope_layers_not_layer_types(
    config: dict[str, Any], windows: list[int | None]
) -> None:
    """A layer with RoPE (no_rope_layers 1) slides over sliding_window, a NoPE layer attends whole; the
    default list leaves RoPE off every 4th layer counted back from the last; layer_types is not read (the
    measured windows of each layer's cache)."""
    arch = c.architecture_from_config(config)
    assert [arch.sliding_window if layer.mixer == "sliding" else None for layer in arch.layers] == windows


@pytest.mark.parametrize(
    ("config", "memory", "length", "tp", "measured"),
    [
        (MUSE_GLIMMER_SMALL, 2**26, 2048, 1, (128, 2048)),
        (MUSE_GLIMMER_SMALL, 2**26, 2048, 2, (128, 4096)),
        (MUSE_GLIMMER["layer-types-ignored"], 2**26, 2048, 1, (128, 2048)),
        (MUSE_GLIMMER["nope-every-other"], 2**26, 2048, 1, (128, 1024)),
        (MUSE_GLIMMER["nope-every-other"], 2**26, 2048, 2, (128, 2048)),
        (MUSE_GLIMMER["tied-one-kv-head"], 2**26, 2048, 2, (128, 4096)),
        (MUSE_GLIMMER["nested-default-tower"], 2**26, 2048, 2, (128, 4096)),
        (FLAT_30B, 2**32, 4096, 1, (128, 2520)),
        (FLAT_30B, 2**32, 4096, 2, (128, 5041)),
        (MUSE_GLIMMER["flat-30b-text"], 2**32, 4096, 2, (128, 5041)),
    ],
    ids=[
        "small",
        "small-tp2",
        "layer-types-ignored",
        "nope-every-other",
        "nope-every-other-tp2",
        "one-kv-head-tp2",
        "default-tower-tp2",
        "30b",
        "30b-tp2",
        "30b-text-tp2",
    ],
)
def test_the_engine_core_blocks_full_and_sliding_layers_in_groups(
    config: dict[str, Any], memory: int, length: int, tp: int, measured: tuple[int, int]
) -> None:
    """(Block size, blocks): full and sliding layers share blocks in groups as many as the fewer kind (one
    full layer of four: 4 times the blocks a reading of every layer as full gives; 13 of 52 in the 30B)."""
    block, blocks, _ = cpu_engine_accounting(config, memory, length, tensor_parallel_size=tp)
    assert (block, blocks) == measured


def test_tp_2_is_refused_where_the_class_refuses_it() -> None:
    """Three KV heads build at TP 1 (these bytes) and not at TP 2 (the attention's bare assert, on both
    ranks)."""
    config = edited(MUSE_GLIMMER_SMALL, hidden_size=192, num_attention_heads=6, num_key_value_heads=3)
    arch = c.architecture_from_config(config)
    assert (c.tensor_parallel_error(arch, 1), c.weight_bytes_per_gpu(arch, 1)) == (None, 2_759_040)
    assert "3 KV heads" in (c.tensor_parallel_error(arch, 2) or "")


def test_an_activation_other_than_silu_is_refused_in_vllms_words() -> None:
    """vLLM refuses it at any TP: "MuseGlimmer uses `silu` as the hidden activation; got `gelu`." (a flat
    file's hidden_act, which its config class renames hidden_activation)."""
    with pytest.raises(c.ConfigError, match=r"hidden_activation.*got `gelu`"):
        c.architecture_from_config(edited(MUSE_GLIMMER_SMALL, hidden_act="gelu"))
