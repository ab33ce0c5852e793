"""DeepSeek-VL2, DeepSeek-OCR and DeepSeek-OCR-2 (vLLM's deepseek_vl2.py, deepseek_ocr.py, deepseek_ocr2.py),
and the plain-attention form of vLLM's DeepSeek-V2 layer their language models may take.

Their files (``tests/data/configs/deepseek-ocr``, ``deepseek-ocr-2``) keep the language model under
``language_config``: a DeepSeek-V2 MoE whose ``qk_nope_head_dim`` and ``qk_rope_head_dim`` are 0, which vLLM
builds with ``DeepseekAttention`` (every head's K and V cached) whatever ``use_mla`` says. The towers have
fixed sizes in vLLM's classes; the projector is ``projector_config``'s. The real classes hold all of it to
the parameter, the byte and the cached head in tests/conformance/test_parameter_counts.py
(``WRAPPER_FIXTURES``, ``DEEPSEEK_VL2`` and the ``deepseek_v2-mha`` cases); the rules are here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity as c

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
OCR: dict[str, Any] = json.loads((CONFIGS / "deepseek-ocr" / "config.json").read_text())
OCR2: dict[str, Any] = json.loads((CONFIGS / "deepseek-ocr-2" / "config.json").read_text())
SOURCES: dict[str, Any] = json.loads((CONFIGS / "sources.json").read_text())


def _language_model_alone(config: dict[str, Any], architecture: str = "DeepseekV2ForCausalLM") -> dict:
    """The ``language_config`` as a text model's own file."""
    return config["language_config"] | {"architectures": [architecture], "model_type": "deepseek_v2"}


def test_deepseek_ocr_is_its_published_tensors_a_deepseek_moe_with_plain_attention():
    arch = c.architecture_from_config(OCR)
    assert arch.parameters == SOURCES["deepseek-ocr"]["published_parameters"]  # the checkpoint's listing
    assert arch.attention == "MHA" and arch.kv_lora_rank is None
    text = OCR["language_config"]
    width = text["hidden_size"] // text["num_attention_heads"]
    per_layer = 2 * text["num_key_value_heads"] * width * 2  # K and V, bfloat16
    assert c.kv_cache_bytes_per_token(arch) == text["num_hidden_layers"] * per_layer
    assert [layer.ffn for layer in arch.layers[:2]] == ["dense", "moe"]  # first_k_dense_replace 1
    assert not arch.warnings
    # TP splits the 10 heads: 1 and 2 (and 5, 10) divide them; 4 and 8 do not.
    assert c.tensor_parallel_error(arch, 2) is None
    assert "10 attention heads" in (c.tensor_parallel_error(arch, 4) or "")


def test_the_wrapper_is_its_language_model_and_a_tower_of_fixed_sizes():
    """The language model alone is DeepSeek-MoE's layers (vLLM's DeepseekForCausalLM, a reader of its own);
    the rest is the DeepEncoder, whose sizes vLLM fixes: another vision_config changes nothing."""
    alone = c.architecture_from_config(_language_model_alone(OCR) | {"kv_lora_rank": 512})
    moe = c.architecture_from_config(
        _language_model_alone(OCR) | {"architectures": ["DeepseekForCausalLM"], "model_type": "deepseek"}
    )
    wrapper = c.architecture_from_config(OCR)
    assert alone.parameters == moe.parameters == wrapper.parameters - wrapper.vision_parameters
    assert alone.layers == moe.layers
    # SAM ViT-B and CLIP-L as vLLM builds them, the linear projector 2,048 -> 1,280 and two separators.
    assert wrapper.vision_parameters == 95_569_152 + 303_177_728 + (2048 * 1280 + 1280) + 2 * 1280
    # CLIP's parallel linears split by TP (24 layers of a fused QKV, an output projection and a 4,096-wide
    # MLP, the row-parallel biases aside); the rest is whole on every GPU.
    h, m = 1024, 4096
    split = 24 * (3 * h * h + 3 * h + h * h + h * m + m + m * h)
    assert wrapper.vision_whole_parameters == wrapper.vision_parameters - split
    other = OCR | {"vision_config": OCR["vision_config"] | {"image_size": 640, "width": {}}}
    assert c.architecture_from_config(other).parameters == wrapper.parameters


def test_deepseek_ocr_2_is_sam_and_a_qwen2_encoder_all_whole():
    arch = c.architecture_from_config(OCR2)
    assert arch.vision_whole_parameters == arch.vision_parameters
    alone = c.architecture_from_config(_language_model_alone(OCR2) | {"kv_lora_rank": 512})
    # SAM ViT-B into 896 channels; the Qwen2 encoder (24 layers 896 wide, 2 KV heads, a 4,864-wide MLP, a
    # final norm) and its 144- and 256-row query tables; the linear projector 896 -> 1,280; one separator.
    h, kv, inter = 896, 128, 4864
    qwen2 = 24 * (2 * h * h + h + 2 * (h * kv + kv) + 3 * h * inter + 2 * h) + h + (144 + 256) * h
    sam = 95_569_152 - 1024 * 512 * 9 + 896 * 512 * 9
    projector = OCR2["projector_config"]
    linear = projector["input_dim"] * projector["n_embed"] + projector["n_embed"]
    assert arch.parameters - alone.parameters == sam + qwen2 + linear + projector["n_embed"]


def test_a_downsampling_projector_is_weighed_as_vllms_mlp_projector_builds_it():
    """``downsample_mlp_gelu``: ``depth`` biased linears, the first over ``downsample_ratio``^2 merged inputs,
    ``n_embed * mlp_ratio`` wide up to the last; MlpProjectorConfig's defaults where the file is silent."""
    linear = c.architecture_from_config(OCR)
    n_in, n_embed = 2048, 1280
    shaped = {"projector_type": "downsample_mlp_gelu", "input_dim": n_in, "n_embed": n_embed}
    cases = {
        (3, 2, 2): (4 * n_in) * (2 * n_embed) + 2 * n_embed + (2 * n_embed) ** 2 + 2 * n_embed,
        (2, 1, 3): (9 * n_in) * n_embed + n_embed,
    }
    for (depth, ratio, downsample), up_to_last in cases.items():
        projector = shaped | {"depth": depth, "mlp_ratio": ratio, "downsample_ratio": downsample}
        arch = c.architecture_from_config(OCR | {"projector_config": projector})
        last = ratio * n_embed * n_embed + n_embed
        assert arch.parameters - linear.parameters == up_to_last + last - (n_in * n_embed + n_embed)
    defaults = c.architecture_from_config(OCR | {"projector_config": {}})  # 1,152 -> 2,048, depth 2
    separators = 2 * 2048 - 2 * n_embed
    expected = (4 * 1152 * 2048 + 2048) + (2048 * 2048 + 2048) - (n_in * n_embed + n_embed) + separators
    assert defaults.parameters - linear.parameters == expected


POOLING = {"projector_type": "linear", "token_pooling": True}


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"projector_config": {"projector_type": "mlp_gelu"}}, "projector_config.projector_type", "accepted"),
        ({"projector_config": POOLING}, "projector_config.token_pooling", "true"),
        ({"tile_tag": "1D"}, "tile_tag", "accepted: 2D"),
        ({"tile_tag": None}, "tile_tag", "is missing"),
    ],
)
def test_what_vllms_deep_encoder_classes_refuse_is_refused_naming_the_field(change, field, words):
    config = {k: v for k, v in (OCR | change).items() if v is not None}
    with pytest.raises(c.ConfigError) as refused:
        c.architecture_from_config(config)
    assert refused.value.field.startswith(field) and words in str(refused.value)


def test_plain_attention_needs_both_qk_widths_zero():
    """vLLM's ``use_mha``: both ``qk_nope_head_dim`` and ``qk_rope_head_dim`` 0; with its widths the layer is
    MLA. A text model's own file needs its latent rank either way: transformers' DeepseekV2Config and
    DeepseekV3Config refuse a null one (only the OCR wrappers' language_config may leave it null)."""
    for architecture in ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"):
        ranked = _language_model_alone(OCR, architecture) | {"kv_lora_rank": 512}
        arch = c.architecture_from_config(ranked)
        assert arch.attention == "MHA" and arch.num_kv_heads == OCR["language_config"]["num_key_value_heads"]
        latent = {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}
        assert c.architecture_from_config(ranked | latent).attention == "MLA"
        for unranked in (_language_model_alone(OCR, architecture), ranked | latent | {"kv_lora_rank": None}):
            with pytest.raises(c.ConfigError) as refused:
                c.architecture_from_config(unranked)
            assert refused.value.field == "kv_lora_rank"


#: DeepSeek-VL2 as its files are: no top-level ``architectures`` (DeepseekVLV2Config names
#: DeepseekVLV2ForCausalLM), a SigLIP vision config and a downsampling projector, over DeepSeek-OCR's language
#: model (DeepSeek-VL2-Tiny's: the OCR model is built on it).
VL2: dict[str, Any] = {k: v for k, v in OCR.items() if k not in ("architectures", "auto_map")} | {
    "vision_config": {"model_name": "siglip_so400m_patch14_384", "width": 1152, "layers": 27},
    "projector_config": {"projector_type": "downsample_mlp_gelu", "input_dim": 1152, "n_embed": 1280},
}


def test_deepseek_vl2_is_timms_siglip_so400m_over_the_same_language_model():
    """vLLM's deepseek_vl2.py builds timm's ``vit_so400m_patch14_siglip_384`` whatever the vision config says:
    27 blocks 1,152 wide with a 4,304-wide MLP, 729 positions, its attention-pooling head and a final norm.
    At TP above 1 it swaps each MLP's two linears (27 blocks' and the pooling head's) for parallel ones."""
    arch = c.architecture_from_config(VL2)
    assert arch.architecture == "DeepseekVLV2ForCausalLM"
    ocr = c.architecture_from_config(OCR)
    assert arch.layers == ocr.layers and arch.attention == "MHA"
    h, m = 1152, 4304
    mlp = h * m + m + m * h + h
    block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + mlp
    pool = h + (h * h + h) + (2 * h * h + 2 * h) + (h * h + h) + 2 * h + mlp
    siglip = 3 * 14 * 14 * h + h + 729 * h + 27 * block + 2 * h + pool
    projector = (4 * 1152 * 1280 + 1280) + (1280 * 1280 + 1280)
    assert arch.vision_parameters == siglip + projector + 2 * 1280
    assert arch.vision_parameters - arch.vision_whole_parameters == 28 * (mlp - h)
    assert c.architecture_from_config(VL2 | {"vision_config": {}}).parameters == arch.parameters


def test_unlimited_ocr_is_refused_by_name():
    """Baidu's Unlimited-OCR is DeepSeek-OCR's wrapper with reference sliding-window attention, which kvright
    does not model (and vLLM's CPU build cannot build its vision backend to hold it to)."""
    config = OCR | {"architectures": ["UnlimitedOCRForCausalLM"], "model_type": "unlimited-ocr"}
    with pytest.raises(c.ConfigError) as refused:
        c.architecture_from_config(config)
    assert refused.value.field == "architectures" and "window past the prompt" in str(refused.value)
    assert "kvright catalog" in str(refused.value)


def test_kvright_plans_deepseek_ocr_on_one_gpu():
    arch = c.architecture_from_config(OCR)
    workload = c.Workload(max_model_len=8192, prompt_tokens=2048, output_tokens=1024)
    result = c.plan(arch, c.gpu_spec("h100-sxm"), workload, c.SLO(tpot_seconds=0.02), c.Limits())
    assert result.feasible, result.reason
    assert result.plan is not None and result.plan.tensor_parallel_size == 1

