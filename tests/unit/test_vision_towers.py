"""Vision towers as vLLM's wrapper classes build them (held to those classes, with a torchvision stand-in, in
tests/conformance/test_parameter_counts.py ``WRAPPER_FIXTURES``): what each GPU holds and what the file's
switches change."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import capacity as c
from tests.builders import edited

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def _config(slug: str) -> dict:
    return json.loads((CONFIGS / slug / "config.json").read_text())


def test_gemma4s_tower_is_whole_on_every_gpu():
    """gemma4_mm.py builds the tower with transformers' AutoModel and the projection replicated: TP splits
    none of it (572,792,112 parameters for the 26B-A4B, vLLM's class counted)."""
    arch = c.load_architecture(str(CONFIGS / "gemma-4-26b-a4b"))
    assert arch.vision_parameters == arch.vision_whole_parameters == 572_792_112
    split = dataclasses.replace(arch, vision_whole_parameters=0)
    for tp in (2, 4):
        extra = c.weight_bytes_per_gpu(arch, tp) - c.weight_bytes_per_gpu(split, tp)
        assert extra == pytest.approx(arch.vision_parameters * 2 * (1 - 1 / tp), abs=1)


def test_llava_builds_its_tower_only_up_to_the_feature_layer():
    """LLaVA 1.5's vision_feature_layer -2 leaves the last of CLIP's 24 blocks out; -1 builds it too."""
    config = _config("llava-1.5-7b-hf")
    h, inter = 1024, 4096
    block = 4 * h * h + 4 * h + 2 * h * inter + inter + h + 4 * h
    last = c.architecture_from_config(edited(config, vision_feature_layer=-1)).vision_parameters
    assert last - c.architecture_from_config(config).vision_parameters == block
    with pytest.raises(c.ConfigError) as refused:
        c.architecture_from_config(edited(config, vision_feature_layer=-30))
    assert refused.value.field == "vision_feature_layer"


def test_llava_projector_biases_follow_multimodal_projector_bias():
    config = _config("llava-v1.6-mistral-7b-hf")
    biased = c.architecture_from_config(config).vision_parameters
    plain = c.architecture_from_config(edited(config, multimodal_projector_bias=False)).vision_parameters
    assert biased - plain == 2 * 4096


def test_llama4s_adapter_and_projector_are_counted():
    """Llama 4 Scout's vision model: 871,932,416 parameters in vLLM's class, the pixel-shuffle adapter
    (5632 -> 4096 -> 4096) and the projection into the 5120-wide text model among them."""
    arch = c.load_architecture(str(CONFIGS / "llama-4-scout-17b-16e-instruct"))
    assert arch.vision_parameters == 871_932_416
