"""Gemma 3n (vLLM's gemma3n.py and gemma3n_mm.py): KV-shared layers, per-layer embeddings and widths, AltUp
and LAUREL in every layer, and towers transformers builds whole on every GPU.
tests/conformance/test_parameter_counts.py holds two small text configs to vLLM's class (parameters, bytes
and every attention layer) and the audio tower to transformers' class; these hold the reading's rules and
its refusals."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import capacity as c
from capacity.architecture import TIMM_TOWER_PARAMETERS

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
E2B: dict[str, Any] = json.loads((CONFIGS / "gemma-3n-e2b-it" / "config.json").read_text())

S, F = "sliding_attention", "full_attention"
TEXT: dict[str, Any] = {
    "architectures": ["Gemma3nForCausalLM"],
    "model_type": "gemma3n_text",
    "hidden_size": 256,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": [512, 512, 512, 384, 384, 384],
    "layer_types": [S, S, F, S, S, F],
    "sliding_window": 128,
    "num_kv_shared_layers": 3,
    "hidden_size_per_layer_input": 32,
    "vocab_size_per_layer_input": 1024,
    "altup_num_inputs": 4,
    "laurel_rank": 16,
    "vocab_size": 2048,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}


def _formula(cfg: dict[str, Any]) -> int:
    """Parameters of vLLM's Gemma3nForCausalLM, module by module (gemma3n.py)."""
    h, layers, d = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["head_dim"]
    heads, kv, n, r = (
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["altup_num_inputs"],
        cfg["laurel_rank"],
    )
    ple, first_shared = cfg["hidden_size_per_layer_input"], layers - cfg["num_kv_shared_layers"]
    total = cfg["vocab_size"] * h + cfg["vocab_size_per_layer_input"] * layers * ple  # tied: no LM head
    total += h * layers * ple + ple + 2 * (n - 1) * h * h + h  # PLE projection and norm, AltUp in/out, norm
    for i, width in enumerate(cfg["intermediate_size"]):
        shared = i >= first_shared
        total += 2 * heads * d * h + (d if shared else 2 * kv * d * h + 2 * d)  # q, o (k, v), q/k norms
        total += 3 * h * width + 4 * h  # MLP, four norms
        total += 2 * h * ple + h  # per-layer input gate, projection, norm
        total += n * n + n**3 + h * n + 2 * h  # AltUp coefficients, router, its norm, the float32 scale
        total += 2 * h * r + h  # LAUREL and its norm
    return total


def test_the_last_layers_read_earlier_caches_and_every_layer_has_its_own_width():
    arch = c.architecture_from_config(TEXT)
    assert arch.warnings == () and arch.tie_word_embeddings
    assert [layer.kv_shared for layer in arch.layers] == [False] * 3 + [True] * 3
    assert [layer.ffn_width for layer in arch.layers] == TEXT["intermediate_size"]
    assert arch.parameters == _formula(TEXT)
    # Only layers 0-2 keep a cache: two sliding, one full, 2 KV heads of 64 each, K and V, bf16.
    assert c.kv_cache_bytes_per_token(arch) == 3 * 2 * 2 * 64 * 2


def test_one_width_for_every_layer_and_the_class_defaults():
    cfg = {k: v for k, v in TEXT.items() if k not in ("head_dim", "layer_types")} | {
        "intermediate_size": 512,
        "num_hidden_layers": 10,
        "num_kv_shared_layers": 0,
        "tie_word_embeddings": False,
    }
    arch = c.architecture_from_config(cfg)
    # Gemma3nTextConfig: heads 256 wide (not hidden / heads), every fifth layer global, the head tied anyway.
    assert arch.head_dim == 256 and arch.tie_word_embeddings
    assert [layer.mixer for layer in arch.layers] == (["sliding"] * 4 + ["full"]) * 2
    assert [layer.ffn_width for layer in arch.layers] == [512] * 10


def test_a_width_list_of_the_wrong_length_is_refused():
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(TEXT | {"intermediate_size": [512, 512]})
    assert err.value.field == "intermediate_size" and "6 layers" in str(err.value)


def test_the_real_e2b_is_the_parameters_and_bytes_vllm_builds():
    """5,418,464,192 parameters and 10,837,051,264 bytes: vLLM 0.32's Gemma3nForConditionalGeneration on the
    meta device (with timm for its vision tower), the hub's 5.44 B less the shared layers' k/v it drops."""
    arch = c.architecture_from_config(E2B)
    assert (arch.parameters, c.weight_bytes(arch)) == (5_418_464_192, 10_837_051_264)
    assert arch.vision_parameters == 983_281_504  # towers 975,475,552 and embedders 7,805,952
    assert c.kv_cache_bytes_per_token(arch) == 20 * 2 * 2 * 256 * 2  # 20 of 30 layers keep a cache


def test_the_towers_are_whole_on_every_gpu_and_the_embedders_split():
    arch = c.architecture_from_config(E2B)
    towers = arch.vision_whole_parameters
    assert towers == TIMM_TOWER_PARAMETERS["mobilenetv5_300m_enc"] + 681_348_640
    split = dataclasses.replace(arch, vision_whole_parameters=0)
    for tp in (2, 4):
        extra = c.weight_bytes_per_gpu(arch, tp) - c.weight_bytes_per_gpu(split, tp)
        assert extra == pytest.approx(towers * 2 * (1 - 1 / tp), abs=1)


def test_an_unknown_timm_tower_is_refused_naming_it():
    cfg = E2B | {"vision_config": E2B["vision_config"] | {"architecture": "mobilenetv4_conv_small"}}
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(cfg)
    assert err.value.field == "vision_config.architecture" and "mobilenetv5_300m_enc" in str(err.value)


def test_pipeline_parallelism_is_refused_as_vllm_refuses_it():
    """vLLM's Gemma 3n classes do not implement SupportsPP: a pipeline-parallel layout is refused."""
    arch = c.architecture_from_config(E2B)
    refused = c.layout_error(arch, c.Layout(pipeline_parallel_size=2))
    assert refused is not None and "Gemma3nForConditionalGeneration" in refused and "accepted: 1" in refused
    assert c.layout_error(arch, c.Layout(tensor_parallel_size=2)) is None


@pytest.mark.parametrize("value", [3, [[3, 3]], [[3, 3], [3]], [[3, 3], "3x3"]])
def test_a_malformed_convolution_kernel_is_refused_naming_the_field(value):
    cfg = E2B | {"audio_config": E2B["audio_config"] | {"sscp_conv_kernel_size": value}}
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(cfg)
    assert err.value.field == "audio_config.sscp_conv_kernel_size"
