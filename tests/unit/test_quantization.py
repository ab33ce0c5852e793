"""capacity.quantization and capacity.gpus.native_support: bytes per weight by method and module kind, ignore
lists, ModelOpt's hf_quant_config.json, compressed-tensors config groups, the errors, and which GPUs run each
format natively.

The quantization blocks are shaped like the real files' (AWQ, GPTQ, fp8, fbgemm, mxfp4, compressed-tensors,
ModelOpt); the expected bytes are the arithmetic of what vLLM 0.32 allocates (see the module docstring), so a
change in a layout or a default shows up here. Real config.json fixtures under tests/data/configs are parsed
when present.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from capacity.errors import ConfigError
from capacity.gpus import gpu_spec, native_support
from capacity.quantization import (
    MODULE_KINDS,
    ONLINE_FP8,
    UNQUANTIZED,
    ModuleKind,
    WeightFormat,
    weight_format,
)

BF16 = 2
LAYER_KINDS: tuple[ModuleKind, ...] = (
    "attention",
    "mlp",
    "experts",
    "shared_experts",
    "mamba",
    "indexer",
    "latent_projection",
)

AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
FP8_BLOCK = {
    "quant_method": "fp8",
    "fmt": "e4m3",
    "activation_scheme": "dynamic",
    "weight_block_size": [128, 128],
}
FP8_TENSOR = {"quant_method": "fp8", "activation_scheme": "static"}
FBGEMM = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": ["lm_head"]}
MXFP4 = {
    "quant_method": "mxfp4",
    "modules_to_not_convert": [
        "model.layers.*.self_attn",
        "model.layers.*.mlp.router",
        "model.embed_tokens",
        "lm_head",
    ],
}


def _ct(weights: dict[str, Any], inputs: dict[str, Any] | None, fmt: str, **extra: Any) -> dict[str, Any]:
    group: dict[str, Any] = {"targets": ["Linear"], "weights": weights}
    if inputs is not None:
        group["input_activations"] = inputs
    return {
        "quant_method": "compressed-tensors",
        "format": fmt,
        "config_groups": {"group_0": group},
        "ignore": ["lm_head"],
        **extra,
    }


CT_W4A16 = _ct(
    {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True},
    None,
    "pack-quantized",
)
CT_W4A16_ASYM = _ct(
    {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": False},
    None,
    "pack-quantized",
)
CT_W8A8_INT8 = _ct(
    {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True},
    {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True, "symmetric": True},
    "int-quantized",
)
CT_FP8_DYNAMIC = _ct(
    {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True},
    {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
    "float-quantized",
)
CT_FP8_BLOCK = _ct(
    {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]},
    {"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128, "dynamic": True},
    "float-quantized",
)
CT_NVFP4 = _ct(
    {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16},
    {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"},
    "nvfp4-pack-quantized",
)


def modelopt(algo: str, exclude: list[str], **extra: Any) -> dict[str, Any]:
    """An hf_quant_config.json as ModelOpt 0.29 writes it."""
    return {
        "producer": {"name": "modelopt", "version": "0.29.0"},
        "quantization": {
            "quant_algo": algo,
            "kv_cache_quant_algo": None,
            "exclude_modules": exclude,
            **extra,
        },
    }


AUTOROUND = {"quant_method": "auto-round", "bits": 4, "group_size": 128, "sym": True, "data_type": "int"}
AUTOROUND_FP8 = {"quant_method": "auto-round", "bits": 8, "group_size": [128, 128], "data_type": "fp"}
AUTOROUND_MXFP4 = {"quant_method": "auto-round", "bits": 4, "group_size": 32, "data_type": "mx_fp"}
AWQ_PACKING = {"packing_format": "auto_round:auto_awq"}


def fmt_of(block: dict[str, Any]) -> WeightFormat:
    return weight_format({"model_type": "llama", "quantization_config": block})


def per_row(scale_bytes: float) -> float:
    return scale_bytes / 4096  # PER_ROW_IN_FEATURES


# ----- bytes per parameter, every method ----------------------------------------------------------
BYTES = [
    # (id, format, quantized-kind bytes, kinds left in bf16)
    ("awq-4bit-g128-zp: 0.5 + (2-byte scale + 4-bit zero)/128", fmt_of(AWQ), 0.5 + 2.5 / 128, ()),
    ("awq-no-zero-point: 0.5 + 2/128", fmt_of({**AWQ, "zero_point": False}), 0.5 + 2 / 128, ()),
    ("awq-per-channel (group -1)", fmt_of({**AWQ, "group_size": -1}), 0.5 + per_row(2.5), ()),
    ("gptq-4bit-sym: qzeros dropped by Marlin", fmt_of(GPTQ), 0.5 + 2 / 128, ()),
    ("gptq-8bit-g32", fmt_of({**GPTQ, "bits": 8, "group_size": 32}), 1 + 2 / 32, ()),
    ("fp8-128x128-blocks: fp32 scale per block", fmt_of(FP8_BLOCK), 1 + 4 / 128**2, ()),
    ("fp8-per-tensor", fmt_of(FP8_TENSOR), 1.0, ()),
    ("fbgemm-per-row: fp32 per output row", fmt_of(FBGEMM), 1 + per_row(4), ("experts",)),
    ("online-fp8-per-tensor", ONLINE_FP8, 1.0, ()),
    ("ct-w4a16-sym: model-dtype group scales", fmt_of(CT_W4A16), 0.5 + 2 / 128, ()),
    ("ct-w4a16-asym: + 4-bit zero per group", fmt_of(CT_W4A16_ASYM), 0.5 + 2.5 / 128, ()),
    ("ct-w8a8-int8: fp32 per-channel scale", fmt_of(CT_W8A8_INT8), 1 + per_row(4), ()),
    ("ct-fp8-dynamic: fp32 per-channel scale", fmt_of(CT_FP8_DYNAMIC), 1 + per_row(4), ()),
    ("ct-fp8-block", fmt_of(CT_FP8_BLOCK), 1 + 4 / 128**2, ()),
    ("ct-nvfp4: 4 bits + fp8 scale per 16", fmt_of(CT_NVFP4), 0.5 + 1 / 16, ()),
    ("autoround-int4-sym: as GPTQ", fmt_of(AUTOROUND), 0.5 + 2 / 128, ()),
    ("autoround-int2-asym", fmt_of(AUTOROUND | {"bits": 2, "sym": False}), 0.25 + 2.25 / 128, ()),
    ("autoround-int8-awq-packing", fmt_of(AUTOROUND | {"bits": 8} | AWQ_PACKING), 1 + 2 / 128, ()),
    ("autoround-fp8-blocks", fmt_of(AUTOROUND_FP8), 1 + 4 / 128**2, ()),
    ("autoround-mxfp4: 4 bits + e8m0 per 32", fmt_of(AUTOROUND_MXFP4), 0.5 + 1 / 32, ()),
    (
        "modelopt-nvfp4: 4.5 bits",
        weight_format({}, hf_quant_config=modelopt("NVFP4", ["lm_head"], group_size=16)),
        0.5625,
        (),
    ),
    ("modelopt-fp8 per-tensor", weight_format({}, hf_quant_config=modelopt("FP8", ["lm_head"])), 1.0, ()),
    (
        "modelopt-fp8-pb-wo blocks",
        weight_format({}, hf_quant_config=modelopt("FP8_PB_WO", ["lm_head"])),
        1 + 4 / 128**2,
        (),
    ),
]
NOT_IN_LINEAR: tuple[ModuleKind, ...] = ("router", "embedding", "lm_head")


@pytest.mark.parametrize(("fmt", "quantized", "left"), [b[1:] for b in BYTES], ids=[b[0] for b in BYTES])
def test_bytes_per_parameter_by_kind(
    fmt: WeightFormat, quantized: float, left: tuple[ModuleKind, ...]
) -> None:
    for kind in LAYER_KINDS:
        expected = BF16 if kind in left else quantized
        assert fmt.bytes_per_parameter(kind, layer=3, model_dtype_bytes=BF16) == pytest.approx(expected), kind
        assert fmt.quantizes(kind, layer=3) is (kind not in left)
    for kind in NOT_IN_LINEAR:  # router, embedding and lm_head stay in the model dtype for all of these
        assert fmt.bytes_per_parameter(kind, layer=None, model_dtype_bytes=BF16) == BF16, kind
        assert not fmt.quantizes(kind, layer=None)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("experts", 0.5 + 1 / 32), ("attention", BF16), ("mlp", BF16), ("router", BF16), ("embedding", BF16)],
    ids=["experts-4.25-bits", "attention-bf16", "dense-mlp-bf16", "router-bf16", "embedding-bf16"],
)
def test_mxfp4_quantizes_only_the_routed_experts(kind: ModuleKind, expected: float) -> None:
    assert fmt_of(MXFP4).bytes_per_parameter(kind, layer=0, model_dtype_bytes=BF16) == pytest.approx(expected)


def test_scales_in_model_dtype_follow_the_model_dtype() -> None:
    # AWQ/GPTQ/wNa16 keep scales in params_dtype (an fp32 model doubles them); fp8's fp32 scales stay 4 bytes
    assert fmt_of(GPTQ).bytes_per_parameter("mlp", layer=0, model_dtype_bytes=4) == pytest.approx(
        0.5 + 4 / 128
    )
    assert fmt_of(FP8_BLOCK).bytes_per_parameter("mlp", layer=0, model_dtype_bytes=4) == pytest.approx(
        1 + 4 / 128**2
    )


def test_unquantized_checkpoint() -> None:
    fmt = weight_format({"model_type": "llama", "torch_dtype": "bfloat16"})
    assert fmt is UNQUANTIZED
    assert fmt.method == "none" and fmt.compute_format is None
    assert all(fmt.bytes_per_parameter(k, layer=0, model_dtype_bytes=BF16) == BF16 for k in MODULE_KINDS)


# ----- ignore lists -------------------------------------------------------------------------------
def _fbgemm_405b() -> WeightFormat:
    """Llama-3.1-405B-Instruct-FP8's shape: attention bf16 in every layer, the first and last layers' MLPs
    bf16 (the list names each projection, as Meta's file does)."""
    ignored = ["lm_head"]
    for i in range(126):
        ignored += [f"model.layers.{i}.self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
    for i in (0, 125):
        ignored += [f"model.layers.{i}.mlp.{p}" for p in ("gate_proj", "up_proj", "down_proj")]
    return fmt_of({**FBGEMM, "modules_to_not_convert": ignored})


FBGEMM_405B = _fbgemm_405b()
FP8_ROW = 1 + per_row(4)
IGNORES = [
    ("405b-attention-bf16-in-layer-0", FBGEMM_405B, "attention", 0, BF16),
    ("405b-attention-bf16-in-layer-64", FBGEMM_405B, "attention", 64, BF16),
    ("405b-first-layer-mlp-bf16", FBGEMM_405B, "mlp", 0, BF16),
    ("405b-last-layer-mlp-bf16", FBGEMM_405B, "mlp", 125, BF16),
    ("405b-middle-layer-mlp-fp8", FBGEMM_405B, "mlp", 1, FP8_ROW),
    ("405b-any-layer-mlp-fp8", FBGEMM_405B, "mlp", None, FP8_ROW),
    (
        "partial: q_proj of layer 2 only is a quarter of attention",
        fmt_of({**FBGEMM, "modules_to_not_convert": ["model.layers.2.self_attn.q_proj"]}),
        "attention",
        2,
        0.25 * BF16 + 0.75 * FP8_ROW,
    ),
    (
        "partial: down_proj is a third of the mlp",
        fmt_of({**FP8_TENSOR, "ignored_layers": ["model.layers.1.mlp.down_proj"]}),
        "mlp",
        1,
        (BF16 + 2) / 3,
    ),
    (
        "partial: the other layers are untouched",
        fmt_of({**FP8_TENSOR, "ignored_layers": ["model.layers.1.mlp.down_proj"]}),
        "mlp",
        2,
        1.0,
    ),
    (
        "mla: kv_b_proj is one of five projections",
        fmt_of({**FP8_TENSOR, "modules_to_not_convert": ["model.layers.0.self_attn.kv_b_proj"]}),
        "attention",
        0,
        (BF16 + 4) / 5,
    ),
    (
        "regex router: re:.*mlp.gate$ names the router, not gate_proj",
        fmt_of({**CT_W4A16, "ignore": ["lm_head", "re:.*mlp.gate$"]}),
        "mlp",
        0,
        0.5 + 2 / 128,
    ),
    (
        "plain mlp.gate does not touch gate_proj",
        fmt_of({**AWQ, "modules_to_not_convert": ["mlp.gate"]}),
        "mlp",
        0,
        0.5 + 2.5 / 128,
    ),
    (
        "glob model.layers.*.self_attn covers every layer",
        fmt_of({**FP8_BLOCK, "ignored_layers": ["model.layers.*.self_attn"]}),
        "attention",
        7,
        BF16,
    ),
    (
        "regex on the vision tower",
        fmt_of({**CT_FP8_DYNAMIC, "ignore": ["lm_head", "re:model.visual.*"]}),
        "vision",
        None,
        BF16,
    ),
    (
        "vision tower quantized when not ignored (compressed-tensors Linear)",
        fmt_of(CT_FP8_DYNAMIC),
        "vision",
        None,
        FP8_ROW,
    ),
    (
        "Llama 4's vision_model.model.layers entries (RedHatAI Scout FP8-dynamic names every one)",
        fmt_of(
            {
                **CT_FP8_DYNAMIC,
                "ignore": [
                    "vision_model.patch_embedding.linear",
                    *(f"vision_model.model.layers.{i}.self_attn.{p}_proj" for i in range(34) for p in "qkvo"),
                    *(f"vision_model.model.layers.{i}.mlp.fc{n}" for i in range(34) for n in (1, 2)),
                    "language_model.lm_head",
                ],
            }
        ),
        "vision",
        None,
        BF16,
    ),
    (
        "plain vision_tower entry",
        fmt_of({**FP8_BLOCK, "modules_to_not_convert": ["vision_tower", "multi_modal_projector"]}),
        "vision",
        None,
        BF16,
    ),
    (
        "shared_expert (Qwen spelling) leaves shared experts bf16",
        fmt_of({**AWQ, "modules_to_not_convert": ["shared_expert"]}),
        "shared_experts",
        4,
        BF16,
    ),
    (
        "shared_expert leaves routed experts quantized",
        fmt_of({**AWQ, "modules_to_not_convert": ["shared_expert"]}),
        "experts",
        4,
        0.5 + 2.5 / 128,
    ),
    (
        "mamba in_proj of Nemotron-H mixer",
        fmt_of({**CT_W4A16, "ignore": ["lm_head", "re:.*mixer.in_proj$"]}),
        "mamba",
        3,
        (BF16 + 0.5 + 2 / 128) / 2,
    ),
    (
        "linear_attn (Gated DeltaNet) whole module",
        fmt_of({**CT_W4A16, "ignore": ["lm_head", "re:.*linear_attn.*"]}),
        "mamba",
        0,
        BF16,
    ),
    (
        "indexer of DeepSeek-V3.2",
        fmt_of({**FP8_BLOCK, "modules_to_not_convert": ["indexer"]}),
        "indexer",
        5,
        BF16,
    ),
    (
        "experts of one layer by module name",
        fmt_of({**FP8_BLOCK, "modules_to_not_convert": ["model.layers.3.mlp.experts"]}),
        "experts",
        3,
        BF16,
    ),
    (
        "multimodal root model.language_model.layers",
        fmt_of({**FP8_BLOCK, "modules_to_not_convert": ["model.language_model.layers.2.mlp"]}),
        "mlp",
        2,
        BF16,
    ),
    (
        "gptq dynamic -: skips the matched modules",
        fmt_of({**GPTQ, "dynamic": {r"-:.*\.self_attn\..*": {}}}),
        "attention",
        0,
        BF16,
    ),
    (
        "gptq dynamic +: overrides bits in layers 10-15",
        fmt_of({**GPTQ, "dynamic": {r"+:.*\.(?:1[0-5])\..*": {"bits": 8}}}),
        "mlp",
        12,
        1 + 2 / 128,
    ),
    (
        "gptq dynamic +: leaves the other layers at 4 bits",
        fmt_of({**GPTQ, "dynamic": {r"+:.*\.(?:1[0-5])\..*": {"bits": 8}}}),
        "mlp",
        3,
        0.5 + 2 / 128,
    ),
]


@pytest.mark.parametrize(
    ("fmt", "kind", "layer", "expected"), [c[1:] for c in IGNORES], ids=[c[0] for c in IGNORES]
)
def test_ignore_lists(fmt: WeightFormat, kind: ModuleKind, layer: int | None, expected: float) -> None:
    assert fmt.bytes_per_parameter(kind, layer=layer, model_dtype_bytes=BF16) == pytest.approx(expected)


def test_lm_head_quantized_when_the_config_says_so() -> None:
    assert fmt_of({**GPTQ, "lm_head": True}).bytes_per_parameter(
        "lm_head", layer=None, model_dtype_bytes=BF16
    ) == pytest.approx(0.5 + 2 / 128)
    assert fmt_of({**AWQ, "lm_head": True}).quantizes("lm_head", layer=None)


# ----- ModelOpt -----------------------------------------------------------------------------------
def test_modelopt_nvfp4_from_hf_quant_config() -> None:
    fmt = weight_format(
        {"model_type": "llama"},
        hf_quant_config=modelopt(
            "NVFP4", ["lm_head", "model.layers.0.self_attn*"], group_size=16, kv_cache_quant_algo="FP8"
        ),
    )
    assert (fmt.method, fmt.compute_format, fmt.weight_only, fmt.kv_cache_dtype) == (
        "modelopt_nvfp4",
        "fp4",
        False,
        "fp8_e4m3",
    )
    assert (
        fmt.bytes_per_parameter("attention", layer=0, model_dtype_bytes=BF16) == BF16
    )  # module_path* excluded
    assert fmt.bytes_per_parameter("attention", layer=1, model_dtype_bytes=BF16) == pytest.approx(0.5625)
    assert fmt.bytes_per_parameter("lm_head", layer=None, model_dtype_bytes=BF16) == BF16


def test_modelopt_quantizes_lm_head_unless_excluded() -> None:
    fmt = weight_format({}, hf_quant_config=modelopt("FP8", []))
    assert fmt.bytes_per_parameter("lm_head", layer=None, model_dtype_bytes=BF16) == 1.0
    assert fmt.method == "modelopt_fp8"


def test_config_json_wins_over_hf_quant_config() -> None:
    # vLLM reads hf_quant_config.json only when config.json has no quantization_config
    fmt = weight_format({"quantization_config": FP8_BLOCK}, hf_quant_config=modelopt("NVFP4", ["lm_head"]))
    assert fmt.method == "fp8"


def test_modelopt_flat_config_json_form() -> None:
    block = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "ignore": ["lm_head"]}
    fmt = fmt_of(block)
    assert fmt.method == "modelopt_nvfp4"
    assert fmt.bytes_per_parameter("experts", layer=0, model_dtype_bytes=BF16) == pytest.approx(0.5625)


def test_quantization_under_text_config() -> None:
    fmt = weight_format({"model_type": "qwen3_vl", "text_config": {"quantization_config": FP8_BLOCK}})
    assert fmt.weight_block_size == (128, 128)


# ----- labels, compute formats --------------------------------------------------------------------
FORMATS = [
    ("awq", fmt_of(AWQ), "awq", "AWQ 4-bit, group 128, zero points", "int4", True),
    ("gptq", fmt_of(GPTQ), "gptq", "GPTQ 4-bit, group 128", "int4", True),
    ("fp8-block", fmt_of(FP8_BLOCK), "fp8", "fp8 128x128 blocks", "fp8", False),
    ("fbgemm", fmt_of(FBGEMM), "fbgemm_fp8", "fp8 per-row (fbgemm)", "fp8", False),
    ("mxfp4", fmt_of(MXFP4), "mxfp4", "MXFP4 experts (4.25 bits), rest in model dtype", "fp4", True),
    (
        "ct-w4a16",
        fmt_of(CT_W4A16),
        "compressed-tensors",
        "compressed-tensors int4 w4a16 group 128",
        "int4",
        True,
    ),
    (
        "ct-w8a8",
        fmt_of(CT_W8A8_INT8),
        "compressed-tensors",
        "compressed-tensors int8 w8a8 per-channel",
        "int8",
        False,
    ),
    (
        "ct-nvfp4",
        fmt_of(CT_NVFP4),
        "compressed-tensors",
        "compressed-tensors nvfp4 w4a4 (group 16)",
        "fp4",
        False,
    ),
]


@pytest.mark.parametrize(
    ("fmt", "method", "label", "compute", "weight_only"),
    [f[1:] for f in FORMATS],
    ids=[f[0] for f in FORMATS],
)
def test_method_label_and_compute_format(
    fmt: WeightFormat, method: str, label: str, compute: str, weight_only: bool
) -> None:
    assert (fmt.method, fmt.label, fmt.compute_format, fmt.weight_only) == (
        method,
        label,
        compute,
        weight_only,
    )


def test_fp8_block_size_for_the_tp_rule() -> None:
    assert fmt_of(FP8_BLOCK).weight_block_size == (128, 128)
    assert fmt_of(CT_FP8_BLOCK).weight_block_size == (128, 128)
    assert fmt_of(FP8_TENSOR).weight_block_size is None


def test_fbgemm_is_deprecated_in_vllm_032() -> None:
    fmt = fmt_of(FBGEMM)
    assert fmt.deprecated and any("--allow-deprecated-quantization" in w for w in fmt.warnings)
    assert not any(fmt_of(block).deprecated for block in (GPTQ, FP8_BLOCK))


def test_compressed_tensors_kv_cache_scheme_means_fp8_kv() -> None:
    kv = {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True}
    block = {**CT_FP8_DYNAMIC, "kv_cache_scheme": kv}
    assert fmt_of(block).kv_cache_dtype == "fp8"
    assert fmt_of({**block, "kv_cache_scheme": {**kv, "strategy": "attn_head"}}).kv_cache_dtype == "fp8"
    assert fmt_of(CT_FP8_DYNAMIC).kv_cache_dtype is None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"symmetric": None}, "only symmetric KV-cache scales"),  # llm-compressor's early files left it out
        ({"symmetric": False}, "only symmetric KV-cache scales"),
        ({"num_bits": 4}, "only to 8-bit floats"),
        ({"type": "int"}, "only to 8-bit floats"),
        ({"strategy": "channel"}, "accepts tensor or attn_head"),
    ],
)
def test_a_compressed_tensors_kv_scheme_vllm_refuses_is_refused(change: dict[str, Any], words: str) -> None:
    """vLLM's validate_kv_cache_scheme stops the engine at start for any other KV-cache scheme."""
    kv = {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True, **change}
    with pytest.raises(ConfigError, match=words) as info:
        fmt_of({**CT_FP8_DYNAMIC, "kv_cache_scheme": kv})
    assert info.value.field.endswith("kv_cache_scheme")


def test_compressed_tensors_attention_only_group_is_kv_only() -> None:
    block = {**CT_W4A16}
    block["config_groups"] = {
        **CT_W4A16["config_groups"],
        "kv": {"targets": ["LlamaAttention"], "weights": None},
    }
    fmt = fmt_of(block)
    assert fmt.bytes_per_parameter("attention", layer=0, model_dtype_bytes=BF16) == pytest.approx(
        0.5 + 2 / 128
    )


# ----- errors -------------------------------------------------------------------------------------
ERRORS = [
    ("unknown-method", {"quant_method": "hqq2"}, "quantization_config.quant_method", "expected one of awq"),
    (
        "bitsandbytes-removed-in-0.32",
        {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
        "quantization_config.quant_method",
        "no longer loads bitsandbytes",
    ),
    ("missing-method", {"bits": 4}, "quantization_config.quant_method", "is missing"),
    ("awq-8-bit", {**AWQ, "bits": 8}, "quantization_config.bits", "expected one of 4"),
    (
        "awq-no-zero-point-field",
        {"quant_method": "awq", "bits": 4, "group_size": 128},
        "zero_point",
        "missing",
    ),
    ("gptq-asymmetric", {**GPTQ, "sym": False}, "quantization_config.sym", "symmetric GPTQ only"),
    ("gptq-3-bit", {**GPTQ, "bits": 3}, "quantization_config.bits", "expected one of 4, 8"),
    ("gptq-group-zero", {**GPTQ, "group_size": 0}, "quantization_config.group_size", "positive integer"),
    (
        "gptq-group-activation-order",
        {**GPTQ, "desc_act": True},
        "quantization_config.desc_act",
        "is true with group_size 128: vLLM 0.32 no longer serves GPTQ with group activation ordering; "
        "accepted: desc_act false (static ordering), or group_size -1",
    ),
    (
        "gptq-group-activation-order-by-a-dynamic-rule",
        {**GPTQ, "dynamic": {"+:.*mlp.*": {"desc_act": True}}},
        "quantization_config.dynamic['+:.*mlp.*'].desc_act",
        "no longer serves GPTQ with group activation ordering",
    ),
    (
        "gptq-activation-order-a-dynamic-rule-groups",
        {**GPTQ, "group_size": -1, "desc_act": True, "dynamic": {"+:.*mlp.*": {"group_size": 64}}},
        "quantization_config.dynamic['+:.*mlp.*'].desc_act",
        "is true with group_size 64",
    ),
    ("fp8-bad-block", {**FP8_BLOCK, "weight_block_size": [128]}, "weight_block_size", "[n, k]"),
    (
        "fp8-without-activation-scheme",  # Fp8Config.from_config reads it with get_from_keys: no default
        {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
        "quantization_config.activation_scheme",
        "is missing; expected static or dynamic",
    ),
    (
        "fp8-block-static",
        {**FP8_BLOCK, "activation_scheme": "static"},
        "quantization_config.activation_scheme",
        "dynamic activations",
    ),
    (
        "fp8-ignore-not-a-list",
        {**FP8_BLOCK, "ignored_layers": "lm_head"},
        "quantization_config.ignored_layers",
        "list of module names",
    ),
    (
        "fbgemm-no-ub",
        {"quant_method": "fbgemm_fp8", "modules_to_not_convert": []},
        "quantization_config.activation_scale_ub",
        "missing",
    ),
    (
        "ct-actorder-group",
        _ct(
            {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "actorder": "group"},
            None,
            "x",
        ),
        "quantization_config.config_groups.group_0.weights.actorder",
        "activation ordering",
    ),
    ("autoround-1-bit", {**AUTOROUND, "bits": 1}, "quantization_config.bits", "expected one of 2, 3, 4, 5"),
    (
        "autoround-int-with-blocks",
        {**AUTOROUND, "group_size": [128, 128]},
        "quantization_config.group_size",
        "integer AutoRound needs an integer",
    ),
    (
        "autoround-fp8-static",
        {**AUTOROUND_FP8, "activation_scheme": "static"},
        "quantization_config.activation_scheme",
        "AutoRound fp needs 'dynamic'",
    ),
    ("autoround-mxfp4-g64", {**AUTOROUND_MXFP4, "group_size": 64}, "config.group_size", "needs 32"),
    (
        "autoround-packing",
        {**AUTOROUND, "packing_format": "auto_round:gguf"},
        "quantization_config.packing_format",
        "expected one of auto_round:auto_gptq",
    ),
    ("autoround-dtype", {**AUTOROUND, "data_type": "nf4"}, "config.data_type", "int, fp or mx_fp"),
    (
        "autoround-extra-bits",
        {**AUTOROUND, "extra_config": {"lm_head": {"bits": 12}}},
        "quantization_config.extra_config['lm_head'].bits",
        "expected 2 to 8, or 16 and up",
    ),
    (
        "ct-bad-strategy",
        _ct({"num_bits": 8, "type": "float", "strategy": "diagonal"}, None, "float-quantized"),
        "quantization_config.config_groups.group_0.weights.strategy",
        "expected one of tensor",
    ),
]


@pytest.mark.parametrize(("block", "field", "message"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_the_field_and_what_is_accepted(block: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        fmt_of(block)
    assert field in err.value.field
    assert message in str(err.value)


def test_modelopt_unknown_algo() -> None:
    with pytest.raises(ConfigError) as err:
        weight_format({}, hf_quant_config=modelopt("INT4_AWQ", []))
    assert err.value.field == "hf_quant_config.json.quantization.quant_algo"
    assert "FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4" in str(err.value)


def test_a_modelopt_file_without_its_producer_is_refused_saying_what_vllm_needs() -> None:
    """vLLM 0.32 reads ModelOpt's quant_algo only under producer.name 'modelopt' (or a legacy
    modelopt_quant_config); without it the method is empty and the checkpoint would load as unquantized."""
    block = modelopt("FP8", [])
    del block["producer"]
    with pytest.raises(ConfigError) as err:
        weight_format({}, hf_quant_config=block)
    assert err.value.field == "hf_quant_config.json.quant_method"
    assert str(err.value).startswith("hf_quant_config.json field 'quant_method': is missing (its ")
    assert "quant_algo 'FP8'" in str(err.value) and "producer.name 'modelopt'" in str(err.value)


@pytest.mark.parametrize(
    ("exclude", "latent_bytes"),
    [([], 1.0), (["*latent_proj*"], BF16), (["backbone.layers.*.mixer.fc1_latent_proj"], (1.0 + BF16) / 2)],
    ids=["quantized-like-any-linear", "both-excluded", "fc1-excluded"],
)
def test_latent_moe_projections_are_linear_layers_a_checkpoint_may_leave_unquantized(
    exclude: list[str], latent_bytes: float
) -> None:
    fmt = weight_format({}, hf_quant_config=modelopt("FP8", exclude))
    assert fmt.bytes_per_parameter("latent_projection", layer=3, model_dtype_bytes=BF16) == latent_bytes
    assert fmt.bytes_per_parameter("experts", layer=3, model_dtype_bytes=BF16) == 1.0


def test_quantization_config_not_an_object() -> None:
    with pytest.raises(ConfigError) as err:
        weight_format({"quantization_config": "fp8"})
    assert err.value.field == "quantization_config"


def test_unknown_module_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown module kind"):
        fmt_of(AWQ).bytes_per_parameter("ffn", layer=0, model_dtype_bytes=BF16)  # type: ignore[arg-type]


# ----- native support -----------------------------------------------------------------------------
NVFP4_FMT = weight_format({}, hf_quant_config=modelopt("NVFP4", ["lm_head"], group_size=16))
NATIVE = [
    ("h100-fp8-native", "h100-sxm", fmt_of(FP8_BLOCK), None),
    ("a100-fp8-marlin", "a100-80gb", fmt_of(FP8_BLOCK), "no FP8 tensor cores"),
    ("a100-online-fp8-marlin", "a100-80gb", ONLINE_FP8, "Marlin weight-only"),
    ("l40s-fp8-native (Ada)", "l40s", fmt_of(FBGEMM), None),
    ("h100-nvfp4-marlin", "h100-sxm", NVFP4_FMT, "no FP4 tensor cores"),
    ("b200-nvfp4-native", "b200", NVFP4_FMT, None),
    ("mi300x-nvfp4-emulated", "mi300x", NVFP4_FMT, "emulates"),
    ("mi300x-fp8-native", "mi300x", fmt_of(CT_FP8_DYNAMIC), None),
    ("h100-gpt-oss-mxfp4-weight-only", "h100-sxm", fmt_of(MXFP4), None),
    ("a100-awq-int4", "a100-40gb", fmt_of(AWQ), None),
    ("a100-w8a8-int8", "a100-80gb", fmt_of(CT_W8A8_INT8), None),
    ("unquantized", "l4", UNQUANTIZED, None),
]


@pytest.mark.parametrize(("gpu", "fmt", "expected"), [n[1:] for n in NATIVE], ids=[n[0] for n in NATIVE])
def test_native_support(gpu: str, fmt: WeightFormat, expected: str | None) -> None:
    note = native_support(gpu_spec(gpu), fmt)
    if expected is None:
        assert note is None
    else:
        assert note is not None and expected in note


def test_gpu_native_formats() -> None:
    assert "fp4" in gpu_spec("b200").native_formats
    assert "fp4" not in gpu_spec("h200").native_formats
    assert "fp8" not in gpu_spec("a100-80gb").native_formats
    assert {"int8", "int4"} <= gpu_spec("mi300x").native_formats


# ----- real config fixtures -----------------------------------------------------------------------
CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def _quantized_fixtures() -> list[Path]:
    if not CONFIGS.is_dir():
        return []
    found = []
    for path in sorted(CONFIGS.glob("*/config.json")):
        config = json.loads(path.read_text())
        text = config.get("text_config") or {}
        if (
            "quantization_config" in config
            or "compression_config" in config
            or "quantization_config" in text
            or (path.parent / "hf_quant_config.json").exists()
        ):
            found.append(path)
    return found


#: Real quantized checkpoints vLLM 0.32 refuses to load, with the refusal capacity must give (the conformance
#: suite's test_quantization_methods.py holds the same rule against the engine).
REFUSED_FIXTURES = {
    # TheBloke's 8-bit branch was quantized with desc_act true and groups of 128
    "mythomax-l2-13b-gptq-int8": "no longer serves GPTQ with group activation ordering",
}


def _fixture_format(path: Path) -> WeightFormat:
    hf_quant = path.parent / "hf_quant_config.json"
    return weight_format(
        json.loads(path.read_text()),
        hf_quant_config=json.loads(hf_quant.read_text()) if hf_quant.exists() else None,
    )


@pytest.mark.parametrize(
    "path",
    [p for p in _quantized_fixtures() if p.parent.name not in REFUSED_FIXTURES],
    ids=lambda p: p.parent.name,
)
def test_every_quantized_fixture_parses(path: Path) -> None:
    fmt = _fixture_format(path)
    assert fmt.method != "none"
    assert fmt.compute_format is not None
    # (a ModelOpt MIXED_PRECISION file names its modules layer by layer: NVIDIA's MiniMax-M3's from layer 0)
    assert any(fmt.quantizes(kind, layer=layer) for kind in MODULE_KINDS for layer in (None, 0))


@pytest.mark.parametrize("name", sorted(REFUSED_FIXTURES))
def test_a_quantized_fixture_vllm_refuses_is_refused_saying_why(name: str) -> None:
    path = next(p for p in _quantized_fixtures() if p.parent.name == name)
    with pytest.raises(ConfigError) as err:
        _fixture_format(path)
    assert REFUSED_FIXTURES[name] in str(err.value)


def test_gptq_activation_ordering_with_one_group_per_channel_is_served() -> None:
    """With group_size -1 the ordering changes nothing: vLLM clears desc_act and serves the checkpoint."""
    fmt = fmt_of({**GPTQ, "group_size": -1, "desc_act": True})
    assert fmt.label == "GPTQ 4-bit, per channel"


# ----- Intel AutoRound (quant_method auto-round: vLLM's INCConfig) ----------------------------------------
def test_autoround_quantizes_only_the_blocks_it_names() -> None:
    """block_name_to_quantize: vLLM quantizes a module when its name starts with one of them (a plain prefix,
    so ``model.layers.1`` also takes layer 10, as vLLM's ``str.startswith`` does)."""
    fmt = fmt_of({**AUTOROUND, "block_name_to_quantize": "model.layers.1,model.layers.2"})
    assert fmt.quantizes("mlp", layer=1) and fmt.quantizes("attention", layer=2)
    assert fmt.quantizes("mlp", layer=10)
    assert not fmt.quantizes("mlp", layer=0) and not fmt.quantizes("mlp", layer=3)
    assert not fmt.quantizes("lm_head", layer=None)
    assert not fmt.quantizes("router", layer=1)  # under a named block, but never quantized (module docstring)


@pytest.mark.parametrize(
    ("extra", "kind", "layer", "expected"),
    [
        ({"model.layers.0.mlp.down_proj": {"bits": 16}}, "mlp", 0, (0.5 + 2 / 128) * 2 / 3 + BF16 / 3),
        ({"model.layers.0.mlp.down_proj": {"bits": 16}}, "mlp", 1, 0.5 + 2 / 128),
        ({"lm_head": {"bits": 8, "group_size": 64}}, "lm_head", None, 1 + 2 / 64),
        ({r"model\.layers\.[0-9]+\.self_attn": {"bits": 16}}, "attention", 5, BF16),
        ({r"model\.layers\.[0-9]+\.self_attn": {"bits": 16}}, "mlp", 5, 0.5 + 2 / 128),
    ],
    ids=["name-unquantized", "other-layers-not", "lm-head-named", "regex-by-search", "regex-elsewhere-not"],
)
def test_autoround_extra_config_overrides_modules_by_name_or_regex(
    extra: dict[str, Any], kind: ModuleKind, layer: int | None, expected: float
) -> None:
    fmt = fmt_of({**AUTOROUND, "extra_config": extra})
    assert fmt.bytes_per_parameter(kind, layer=layer, model_dtype_bytes=BF16) == pytest.approx(expected)


@pytest.mark.parametrize(
    "block",
    [
        {**GPTQ, "dynamic": {"+:.*mlp.*": {"bits": 8}}},
        {**AUTOROUND, "block_name_to_quantize": "model.layers"},
        {**AUTOROUND, "extra_config": {r".*\.mlp\..*": {"bits": 8}}},
    ],
    ids=["gptq-dynamic-rule", "autoround-block", "autoround-regex"],
)
def test_no_pattern_of_the_file_quantizes_the_router(block: dict[str, Any]) -> None:
    """A pattern over a layer's MLP names the router's ``mlp.gate`` too; the router stays in the model dtype
    (vLLM builds it without the quant config), as the experts beside it take the pattern's scheme."""
    fmt = fmt_of(block)
    assert not fmt.quantizes("router", layer=2)
    assert fmt.bytes_per_parameter("router", layer=2, model_dtype_bytes=BF16) == BF16
    assert fmt.quantizes("experts", layer=2)


def test_autoround_fp8_blocks_hold_the_tp_rule_and_int_is_weight_only() -> None:
    assert fmt_of(AUTOROUND_FP8).weight_block_size == (128, 128)
    assert fmt_of(AUTOROUND_FP8).compute_format == "fp8" and not fmt_of(AUTOROUND_FP8).weight_only
    assert fmt_of(AUTOROUND).weight_only and fmt_of(AUTOROUND).compute_format == "int4"
    assert fmt_of({**AUTOROUND, "quant_method": "inc"}).method == "inc"


# ----- ModelOpt in config.json's flat form, MIXED_PRECISION, and what vLLM's ModelOpt configs insist on -----
PRODUCER = {"name": "modelopt", "version": "0.41.0"}


def test_a_flat_modelopt_block_behind_a_producer_is_read_by_its_quant_algo() -> None:
    """NVIDIA's newer checkpoints (Kimi K2.6, GLM-5.1, Qwen3.5 NVFP4): producer modelopt, no ``quantization``
    block, quant_method modelopt and a flat quant_algo; vLLM's overrides pick the class from quant_algo."""
    nvfp4 = fmt_of({"quant_method": "modelopt", "quant_algo": "NVFP4", "producer": PRODUCER, "ignore": []})
    fp8 = fmt_of({"quant_method": "modelopt", "quant_algo": "FP8", "producer": PRODUCER, "ignore": []})
    assert (nvfp4.method, fp8.method) == ("modelopt_nvfp4", "modelopt_fp8")
    assert nvfp4.bytes_per_parameter("mlp", layer=0, model_dtype_bytes=BF16) == pytest.approx(0.5625)


def test_nvfp4_config_groups_without_input_activations_are_weight_only() -> None:
    groups = {"group_0": {"weights": {"num_bits": 4, "type": "float"}, "targets": ["Linear"]}}
    block = {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": [], "config_groups": groups}
    assert fmt_of(block).weight_only
    activations = {"input_activations": {"num_bits": 4, "type": "float"}}
    assert not fmt_of(block | {"config_groups": {"group_0": groups["group_0"] | activations}}).weight_only


@pytest.mark.parametrize(
    ("quantization", "field"),
    [
        ({"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": []}, "kv_cache_quant_algo"),
        ({"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "exclude_modules": []}, "group_size"),
        ({"quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": None}, "exclude_modules"),
    ],
    ids=["no-kv-cache-key", "no-group-size", "no-exclude-modules"],
)
def test_a_legacy_nvfp4_block_without_the_keys_vllm_requires_is_refused(
    quantization: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError) as err:
        weight_format({}, hf_quant_config={"producer": PRODUCER, "quantization": quantization})
    assert err.value.field == f"hf_quant_config.json.quantization.{field}"
    assert "vLLM 0.32 requires group_size, kv_cache_quant_algo, exclude_modules" in str(err.value)


def test_a_flat_block_naming_no_method_is_refused_saying_vllm_would_load_it_unquantized() -> None:
    with pytest.raises(ConfigError) as err:
        fmt_of({"quant_algo": "FP8", "producer": PRODUCER, "ignore": ["lm_head"]})
    assert err.value.field == "quantization_config.quant_method"
    assert "quant_algo 'FP8' is ModelOpt's" in str(err.value) and "as unquantized" in str(err.value)


MIXED = {
    "quant_method": "modelopt",
    "quant_algo": "MIXED_PRECISION",
    "producer": PRODUCER,
    "ignore": ["model.layers.1.self_attn.q_proj"],
    "quantized_layers": {
        "model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"},
        "model.layers.0.self_attn.k_proj": {"quant_algo": "FP8"},
        "model.layers.0.self_attn.v_proj": {"quant_algo": "FP8"},
        "model.layers.0.self_attn.o_proj": {"quant_algo": "FP8"},
        "model.layers.1.self_attn.q_proj": {"quant_algo": "FP8"},
        "model.layers.0.mlp.gate_proj": {"quant_algo": "W4A16_NVFP4", "group_size": 32},
        "model.layers.0.mlp.up_proj": {"quant_algo": "W4A16_NVFP4", "group_size": 32},
        "model.layers.0.mlp.down_proj": {"quant_algo": "W4A16_NVFP4", "group_size": 32},
        "lm_head": {"quant_algo": "NVFP4"},
    },
}


def test_mixed_precision_gives_each_listed_module_its_algo_and_leaves_the_rest_unquantized() -> None:
    """ModelOptMixedPrecisionConfig: a module quantized_layers names gets its algo (FP8 per tensor; NVFP4 at
    the first NVFP4 entry's group size for every NVFP4 entry); an ignored one, or one not named, the model
    dtype."""
    fmt = fmt_of(MIXED)
    assert fmt.method == "modelopt_mixed"
    per = {
        (kind, layer): fmt.bytes_per_parameter(kind, layer=layer, model_dtype_bytes=BF16)
        for kind, layer in [("attention", 0), ("attention", 1), ("mlp", 0), ("mlp", 1), ("lm_head", None)]
    }
    assert per == {
        ("attention", 0): 1.0,
        ("attention", 1): BF16,  # listed, but ignored
        ("mlp", 0): 0.5 + 1 / 32,
        ("mlp", 1): BF16,  # not listed
        ("lm_head", None): 0.5 + 1 / 32,
    }
    assert fmt.bytes_per_parameter("embedding", layer=None, model_dtype_bytes=BF16) == BF16
    assert (fmt.compute_format, fmt.weight_only) == ("fp4", False)  # a W4A4 NVFP4 entry needs FP4


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        ({}, "needs a non-empty object of module names"),
        ({"model.layers.0.mlp.down_proj": {"quant_algo": "INT8"}}, "has quant_algo 'INT8'"),
        (
            {
                "model.layers.0.mlp.experts": {"quant_algo": "FP8_PB_WO", "group_size": 128},
                "model.layers.1.mlp.experts": {"quant_algo": "FP8_PB_WO", "group_size": 64},
            },
            "block sizes [64, 128]",
        ),
    ],
    ids=["empty", "unknown-algo", "two-block-sizes"],
)
def test_mixed_precision_that_vllm_refuses_is_refused(layers: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        fmt_of(MIXED | {"quantized_layers": layers})
    assert message in str(err.value)


def test_a_module_partly_quantized_weighs_its_projections_by_their_sizes() -> None:
    """Excluding k_proj and v_proj only: K and V weights stay bf16, Q and O are fp8. Weighed with their
    projections' sizes the bytes are exact; without, the mean over q, k, v, o."""
    fmt = fmt_of({**FP8_TENSOR, "ignored_layers": ["self_attn.k_proj", "self_attn.v_proj"]})
    kv = fmt.bytes_per_parameter("attention", layer=0, model_dtype_bytes=BF16, shares=(0, 1, 1, 0))
    q = fmt.bytes_per_parameter("attention", layer=0, model_dtype_bytes=BF16, shares=(1, 0, 0, 0))
    assert (kv, q) == (BF16, 1.0)
    assert fmt.bytes_per_parameter("attention", layer=0, model_dtype_bytes=BF16) == (1 + 2 + 2 + 1) / 4
    # shares for another naming family (MLA's five parts) than the rules speak: the plain mean
    assert fmt.bytes_per_parameter(
        "attention", layer=0, model_dtype_bytes=BF16, shares=(1, 0, 0, 0, 0)
    ) == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("method", "words"),
    [
        ("fp_quant", "vLLM 0.32.0 loads it; kvright does not weigh fp_quant checkpoints yet"),
        ("torchao", "vLLM 0.32.0 loads it; kvright does not weigh torchao checkpoints yet"),
        ("exl3", "not a method vLLM 0.32.0 loads"),
    ],
)
def test_a_method_without_a_reader_says_whether_vllm_loads_it(method: str, words: str) -> None:
    """A method vLLM loads but kvright does not weigh (FP-Quant's) is refused as kvright's gap, not the
    engine's; one vLLM does not know (ExLlama's) as the engine's. The engine's list is its
    QUANTIZATION_METHODS, recorded in vllm_config_types.json."""
    with pytest.raises(ConfigError) as refused:
        fmt_of({"quant_method": method})
    assert refused.value.field == "quantization_config.quant_method"
    assert words in str(refused.value)


def _quark_spec(dtype: str, qscheme: str, **fields: Any) -> dict[str, Any]:
    return {"dtype": dtype, "qscheme": qscheme, "is_dynamic": False, "symmetric": True} | fields


_QFP8 = _quark_spec("fp8_e4m3", "per_tensor")
_QMXFP4 = _quark_spec("fp4", "per_group", group_size=32, scale_format="e8m0")


def quark(glob: Any, **fields: Any) -> dict[str, Any]:
    """A Quark block as Quark exports it: ``glob`` the global spec's (weight, input_tensors)."""
    spec = {"weight": glob[0], "input_tensors": glob[1], "output_tensors": None, "bias": None}
    block = {
        "quant_method": "quark",
        "export": {"kv_cache_group": [], "pack_method": "reorder"},
        "global_quant_config": spec,
        "layer_quant_config": {},
        "layer_type_quant_config": {},
        "exclude": ["lm_head"],
    }
    return block | fields


def test_quark_fp8_kv_recipe_is_fp8_weights_and_leaves_the_kv_cache_to_the_flag() -> None:
    """AMD's FP8-KV checkpoints: FP8 weights and inputs per tensor; the K and V output specs give the
    checkpoint's scales for ``--kv-cache-dtype fp8``, but vLLM's ``auto`` stays the model dtype for Quark."""
    kv = {"weight": _QFP8, "input_tensors": _QFP8, "output_tensors": _QFP8, "bias": None}
    fmt = fmt_of(
        quark(
            (_QFP8, _QFP8),
            layer_quant_config={"*k_proj": kv, "*v_proj": kv},
            export={"kv_cache_group": ["*k_proj", "*v_proj"]},
        )
    )
    assert (fmt.method, fmt.compute_format, fmt.weight_only, fmt.kv_cache_dtype) == (
        "quark",
        "fp8",
        False,
        None,
    )
    for kind in ("attention", "mlp", "experts"):
        assert fmt.bytes_per_parameter(kind, layer=3, model_dtype_bytes=BF16) == 1.0
    assert fmt.bytes_per_parameter("embedding", layer=None, model_dtype_bytes=BF16) == BF16
    assert fmt.bytes_per_parameter("lm_head", layer=None, model_dtype_bytes=BF16) == BF16


def test_quark_layer_specs_and_the_exclude_list_resolve_per_module_as_vllm_does() -> None:
    """A layer_quant_config glob over the full name overrides the global spec; the exclude list takes full
    names and ``re:`` regexes (a glob there matches nothing); a name under a layer's routed experts leaves
    all of that layer's experts unquantized."""
    int4 = {"weight": _quark_spec("int4", "per_group", group_size=128), "input_tensors": None}
    fmt = fmt_of(
        quark(
            (_QMXFP4, _QMXFP4),
            layer_quant_config={"*mlp*": int4 | {"output_tensors": None, "bias": None}},
            exclude=[
                "lm_head",
                "*self_attn*",
                "re:.*layers\\.2\\.self_attn.*",
                "model.layers.5.mlp.experts.0.w1",
            ],
        )
    )
    assert (
        fmt.bytes_per_parameter("attention", layer=1, model_dtype_bytes=BF16) == 4.25 / 8
    )  # the glob: nothing
    assert fmt.bytes_per_parameter("attention", layer=2, model_dtype_bytes=BF16) == BF16
    assert fmt.bytes_per_parameter("mlp", layer=1, model_dtype_bytes=BF16) == 0.5 + (2 + 0.5) / 128
    assert fmt.bytes_per_parameter("experts", layer=4, model_dtype_bytes=BF16) == 0.5 + (2 + 0.5) / 128
    assert fmt.bytes_per_parameter("experts", layer=5, model_dtype_bytes=BF16) == BF16


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"export": None}, "quantization_config.export", "requires the object"),
        (
            {"layer_type_quant_config": None},
            "quantization_config.layer_type_quant_config",
            "requires an object",
        ),
        (
            {"global_quant_config": {"weight": _QFP8, "input_tensors": None}},
            "quantization_config.global_quant_config.input_tensors",
            "only with FP8 activations",
        ),
        (
            {"global_quant_config": {"weight": _QFP8, "input_tensors": _QFP8, "output_tensors": _QFP8}},
            "quantization_config.global_quant_config",
            "output_tensors or bias",
        ),
        (
            {"export": {"kv_cache_group": ["*k_proj"]}},
            "quantization_config.export.kv_cache_group",
            "fp8_e4m3 per_tensor",
        ),
        (
            {"global_quant_config": {"weight": _quark_spec("fp6_e2m3", "per_group", group_size=32)}},
            "quantization_config.global_quant_config.weight",
            "kvright reads Quark's FP8",
        ),
    ],
)
def test_quark_blocks_vllm_refuses_are_refused_naming_the_field(
    fields: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        fmt_of(quark((_QFP8, _QFP8), **fields))
    assert refused.value.field == field and words in str(refused.value), str(refused.value)


def test_a_quark_file_quantizing_only_named_layers_computes_in_their_format() -> None:
    """No global spec, MXFP4 experts by a layer_quant_config glob (as AMD's Kimi and DeepSeek MXFP4 files
    are laid out): the experts are MXFP4, every other module in the model dtype, and the kernels the GPU
    must run natively are MXFP4's."""
    experts = {"weight": _QMXFP4, "input_tensors": _QMXFP4, "output_tensors": None, "bias": None}
    fmt = fmt_of(
        quark((None, None)) | {"global_quant_config": None, "layer_quant_config": {"*experts*": experts}}
    )
    assert (fmt.compute_format, fmt.weight_only, fmt.label) == ("fp4", False, "Quark MXFP4")
    assert fmt.bytes_per_parameter("experts", layer=2, model_dtype_bytes=BF16) == 4.25 / 8
    assert fmt.bytes_per_parameter("attention", layer=2, model_dtype_bytes=BF16) == BF16


# ----- legacy GPTQ / AWQ files beside a config.json without quantization_config --------------------------

_LEGACY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 5120,
    "intermediate_size": 13824,
    "num_hidden_layers": 40,
    "num_attention_heads": 40,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "torch_dtype": "float16",
}


_AUTOGPTQ = {"bits": 4, "group_size": 128, "desc_act": False, "sym": True}
_AUTOAWQ = {"zero_point": True, "q_group_size": 128, "w_bit": 4, "version": "gemm"}
_STATED = {"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": False}


@pytest.mark.parametrize(
    ("name", "content", "method"),
    [
        ("quantize_config.json", _AUTOGPTQ, "gptq"),
        ("quant_config.json", _AUTOAWQ, "awq"),
        ("quantize_config.json", _STATED, "awq"),
    ],
    ids=["autogptq", "autoawq", "stated-method"],
)
def test_a_legacy_quantization_file_is_read_and_names_the_flag_vllm_needs(
    name: str, content: dict[str, Any], method: str
) -> None:
    """TheBloke's GPTQ uploads keep their quantization only in quantize_config.json: weighed as fp16, the
    13B came out 3.6 times its size, and the plan's flags could not load it (vLLM reads the file only with
    --quantization gptq)."""
    fmt = weight_format(_LEGACY_LLAMA, legacy_quant_config=(name, content))
    assert (fmt.method, fmt.flag) == (method, method)
    assert fmt.bytes_per_parameter("mlp", layer=0, model_dtype_bytes=2) < 0.6
    assert any(f"--quantization {method}" in w and name in w for w in fmt.warnings)
    stated = {**_LEGACY_LLAMA, "quantization_config": {**GPTQ, "bits": 8}}
    assert weight_format(stated, legacy_quant_config=(name, content)).flag is None  # config.json says it


def test_a_legacy_file_of_another_method_is_refused_naming_the_file() -> None:
    with pytest.raises(ConfigError, match=r"read as gptq or awq") as info:
        weight_format(_LEGACY_LLAMA, legacy_quant_config=("quantize_config.json", {"quant_method": "fp8"}))
    assert str(info.value).startswith("quantize_config.json field 'quant_method'")
