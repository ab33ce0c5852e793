"""Preferred Networks' PLaMo 3 (vLLM's ``plamo3.py``, ``Plamo3ForCausalLM``) as capacity reads, weighs and
caches it.

tests/conformance/test_plamo3.py holds small configs to vLLM's class and engine core at one rank on every run.
The per-rank bytes and caches at TP 2 below were measured with vLLM 0.32's class built on both ranks of a TP
group (gloo on loopback) before this was written; both ranks held the same bytes. kvright read the class as a
standard decoder before: two of its four norms and its q/k norms missing, and every layer cached whole (4 to
8 times too few blocks). No config.json of Preferred Networks' is public here: the shape below is its config
class's defaults (a copy of the class in sgl-project/sglang@33918d47).
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from tests.builders import cpu_engine_accounting, edited, plamo3, weight_bytes_by_tp

#: The config class's defaults: 32 layers of 4096, 32 heads of 128 over 4 KV heads, a 2048-token window on
#: every layer but each eighth, the head tied; the file as the class writes it (no layer_types, no RoPE dict).
PLAMO3_DEFAULTS = {
    k: v
    for k, v in plamo3(
        layers=32,
        window=2048,
        pattern=8,
        hidden_size=4096,
        intermediate_size=13312,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        vocab_size=32000,
    ).items()
    if k not in ("layer_types", "rope_parameters")
}


def test_the_config_class_derives_the_windows_a_file_leaves_out() -> None:
    a = c.architecture_from_config(edited(plamo3(), interleaved_sliding_window=None, layer_types=None))
    assert [layer.mixer for layer in a.layers] == ["sliding", "sliding", "sliding", "full"] * 2
    assert a.sliding_window == 64 and a.qk_norm == "head" and a.norms_per_layer == 4
    assert c.architecture_from_config(edited(plamo3(), tie_word_embeddings=None)).tie_word_embeddings


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (plamo3(), {1: 2_499_840, 2: 1_254_656}),
        (plamo3(tie_word_embeddings=False), {1: 2_630_912, 2: 1_320_192}),
        (plamo3(num_key_value_heads=1, tie_word_embeddings=False), {1: 2_499_840, 2: 1_320_192}),
        (plamo3(vocab_size=1000, tie_word_embeddings=False), {1: 2_909_440, 2: 1_459_456}),
        (PLAMO3_DEFAULTS, {1: 13_148_119_040, 2: 6_574_596_096}),
    ],
    ids=["small", "untied", "one-kv-head", "head-padded-to-16", "defaults"],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """Four norms a layer and the per-head q/k norms whole on every rank; an untied head over a vocabulary
    that is no multiple of 16 holds 64 more rows (its padding to 16, padded to 64 apart)."""
    assert weight_bytes_by_tp(config, measured) == measured


@pytest.mark.parametrize(
    ("config", "memory", "length", "tp", "measured"),
    [
        (plamo3(), 2**26, 2048, 1, (128, 1024)),
        (plamo3(), 2**26, 2048, 2, (128, 2048)),
        (plamo3(layers=4, pattern=8), 2**26, 2048, 1, (128, 512)),
        (PLAMO3_DEFAULTS, 2**32, 4096, 1, (128, 4096)),
        (PLAMO3_DEFAULTS, 2**32, 4096, 2, (128, 8192)),
    ],
    ids=["small", "small-tp2", "no-full-layer", "defaults", "defaults-tp2"],
)
def test_the_engine_core_blocks_its_caches_as_measured(
    config: dict[str, Any], memory: int, length: int, tp: int, measured: tuple[int, int]
) -> None:
    """(Block size, blocks): the sliding layers hold their window's blocks alone."""
    block, blocks, _ = cpu_engine_accounting(config, memory, length, tensor_parallel_size=tp)
    assert (block, blocks) == measured
