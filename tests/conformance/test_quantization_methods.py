"""Which quantization method vLLM loads a checkpoint with: capacity's reading of the config is the engine's.

``capacity.quantization.weight_format`` follows vLLM 0.32's two steps: the config loader's normalization (a
ModelOpt ``producer`` over a ``quantization`` block names the method from its ``quant_algo``; an unknown
algo there is refused) and ``ModelConfig._verify_quantization``'s overrides (a ``modelopt*`` method's
``quant_algo`` picks the ModelOpt class: FP8, NVFP4, MXFP8, MIXED_PRECISION). NVIDIA's newer checkpoints
state ModelOpt in config.json's flat form (``quant_method``, ``quant_algo``, ``ignore``, ``quantized_layers``)
rather than in ``hf_quant_config.json``; both forms are asked here of the real engine, on a small Llama, with
``create_engine_config`` (no weights): the method vLLM resolves must be the one capacity reads, and where vLLM
refuses the file or would load quantized weights as unquantized (no method at all), capacity refuses it.

The other methods' blocks are asked the same way (GPTQ, AWQ, fp8, fbgemm_fp8, compressed-tensors, each under
every spelling vLLM reads with one config class, and the variants vLLM 0.32 refuses at config time: group
activation ordering, asymmetric or 3-bit GPTQ, 8-bit AWQ, static-activation fp8 blocks, fp8 without its
activation scheme, methods vLLM no longer loads), and Intel AutoRound's (``auto-round``, vLLM's ``inc``):
integer, FP8-block and MXFP data types, packings, per-module overrides and what INCConfig asserts. A method
vLLM 0.32 deprecates is asked with the flag a plan adds for it (``Plan.allow_deprecated_quantization``), and
once without, which vLLM must refuse.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity
from capacity.quantization import weight_format

from .harness import VllmEnv, probe, weights_probe

pytestmark = pytest.mark.conformance

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
}
PRODUCER = {"name": "modelopt", "version": "0.41.0"}
NVFP4_GROUPS = {
    "group_0": {
        "weights": {"num_bits": 4, "type": "float", "group_size": 16},
        "input_activations": {"num_bits": 4, "type": "float", "group_size": 16},
        "targets": ["Linear"],
    }
}
MIXED = {
    "model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"},
    "model.layers.0.mlp.down_proj": {"quant_algo": "W4A16_NVFP4", "group_size": 16},
}

#: Keys vLLM's NVFP4 config requires in the legacy block, even when null.
NVFP4_KEYS = {"group_size": 16, "kv_cache_quant_algo": None}

GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
FP8_BLOCKS = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
FBGEMM = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": ["lm_head"]}
AUTOROUND = {
    "quant_method": "auto-round",
    "bits": 4,
    "group_size": 128,
    "sym": True,
    "data_type": "int",
    "packing_format": "auto_round:auto_gptq",
}
AUTOROUND_FP8 = {"quant_method": "auto-round", "bits": 8, "group_size": [128, 128], "data_type": "fp"}
AUTOROUND_MXFP4 = {"quant_method": "auto-round", "bits": 4, "group_size": 32, "data_type": "mx_fp"}


def _ct_w4a16(weights: dict[str, Any]) -> dict[str, Any]:
    """compressed-tensors int4 weights, group 128 (llm-compressor's W4A16 recipe), with ``weights`` added."""
    group = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}
    return {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": group | weights}},
        "ignore": ["lm_head"],
    }


#: (config.json's quantization_config or None, hf_quant_config.json or None), by case.
CASES: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {
    "flat-nvfp4": (
        {"quant_method": "modelopt", "quant_algo": "NVFP4", "producer": PRODUCER, "ignore": ["lm_head"]}
        | {"config_groups": NVFP4_GROUPS},
        None,
    ),
    "flat-fp8": ({"quant_method": "modelopt", "quant_algo": "FP8", "producer": PRODUCER, "ignore": []}, None),
    "flat-mxfp8": ({"quant_method": "modelopt", "quant_algo": "MXFP8", "ignore": ["lm_head"]}, None),
    "flat-mixed-precision": (
        {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "producer": PRODUCER}
        | {"ignore": ["lm_head"], "quantized_layers": MIXED},
        None,
    ),
    "flat-without-a-method": ({"quant_algo": "FP8", "producer": PRODUCER, "ignore": ["lm_head"]}, None),
    "legacy-fp8": (
        None,
        {"producer": PRODUCER, "quantization": {"quant_algo": "FP8", "exclude_modules": []}},
    ),
    "legacy-nvfp4": (
        None,
        {"producer": PRODUCER, "quantization": {"quant_algo": "NVFP4", "exclude_modules": []} | NVFP4_KEYS},
    ),
    "legacy-nvfp4-without-its-kv-cache-key": (
        None,
        {
            "producer": PRODUCER,
            "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": []},
        },
    ),
    "legacy-mixed-precision": (
        None,
        {"producer": PRODUCER, "quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": MIXED}},
    ),
    "legacy-without-its-producer": (None, {"quantization": {"quant_algo": "FP8"}}),
    # the methods beside ModelOpt
    "gptq": (GPTQ, None),
    "gptq-8-bit": (GPTQ | {"bits": 8}, None),
    "gptq-3-bit": (GPTQ | {"bits": 3}, None),
    "gptq-asymmetric": (GPTQ | {"sym": False}, None),
    "gptq-group-activation-order": (GPTQ | {"desc_act": True}, None),
    "gptq-channel-activation-order": (GPTQ | {"desc_act": True, "group_size": -1}, None),
    "gptq-activation-order-by-a-dynamic-rule": (GPTQ | {"dynamic": {"+:.*mlp.*": {"desc_act": True}}}, None),
    "gptq-marlin-spelling": (GPTQ | {"quant_method": "gptq_marlin"}, None),
    "awq": (AWQ, None),
    "awq-8-bit": (AWQ | {"bits": 8}, None),
    "awq-marlin-spelling": (AWQ | {"quant_method": "awq_marlin"}, None),
    "fp8-blocks": (FP8_BLOCKS, None),
    "fp8-blocks-static-activations": (FP8_BLOCKS | {"activation_scheme": "static"}, None),
    "fp8-without-activation-scheme": ({"quant_method": "fp8", "weight_block_size": [128, 128]}, None),
    "fbgemm-fp8": (FBGEMM, None),
    "ct-w4a16": (_ct_w4a16({}), None),
    "ct-w4a16-group-activation-order": (_ct_w4a16({"actorder": "group"}), None),
    "ct-w4a16-weight-activation-order": (_ct_w4a16({"actorder": "weight"}), None),
    "bitsandbytes": ({"quant_method": "bitsandbytes", "load_in_4bit": True}, None),
    # Intel AutoRound (quant_method auto-round, vLLM's INCConfig)
    "autoround-int4": (AUTOROUND, None),
    "autoround-int2-awq-packing-asymmetric": (
        AUTOROUND | {"bits": 2, "packing_format": "auto_round:auto_awq", "sym": False},
        None,
    ),
    "autoround-int8-inc-spelling": (AUTOROUND | {"bits": 8, "quant_method": "inc"}, None),
    "autoround-int4-extra-config": (
        AUTOROUND | {"extra_config": {"lm_head": {"bits": 16}, "model.layers.0.mlp.down_proj": {"bits": 8}}},
        None,
    ),
    "autoround-int4-blocks": (AUTOROUND | {"block_name_to_quantize": "model.layers"}, None),
    "autoround-fp8-blocks": (AUTOROUND_FP8, None),
    "autoround-mxfp4": (AUTOROUND_MXFP4, None),
    "autoround-1-bit": (AUTOROUND | {"bits": 1}, None),
    "autoround-int-with-blocks-of-groups": (AUTOROUND | {"group_size": [128, 128]}, None),
    "autoround-fp8-static": (AUTOROUND_FP8 | {"activation_scheme": "static"}, None),
    "autoround-mxfp4-group-64": (AUTOROUND_MXFP4 | {"group_size": 64}, None),
    "autoround-gguf-packing": (AUTOROUND | {"packing_format": "auto_round:gguf"}, None),
    "autoround-intel-spelling": (AUTOROUND | {"quant_method": "intel/auto-round"}, None),
}

#: The cases vLLM 0.32 refuses at config time (capacity must refuse each too, test above).
REFUSED_BY_VLLM = {
    "legacy-mixed-precision",
    "legacy-nvfp4-without-its-kv-cache-key",
    "gptq-3-bit",
    "gptq-asymmetric",
    "gptq-group-activation-order",
    "gptq-activation-order-by-a-dynamic-rule",
    "awq-8-bit",
    "fp8-blocks-static-activations",
    "fp8-without-activation-scheme",
    "ct-w4a16-group-activation-order",
    "bitsandbytes",
    "autoround-1-bit",
    "autoround-int-with-blocks-of-groups",
    "autoround-fp8-static",
    "autoround-mxfp4-group-64",
    "autoround-gguf-packing",
    "autoround-intel-spelling",
}

#: capacity's WeightFormat.method -> the names vLLM's ModelConfig.quantization holds for it (the spellings
#: vLLM reads with that one config class; a GPTQ file's ``gptq`` resolves to ``auto_gptq``).
VLLM_NAMES = {
    "modelopt_fp8": {"modelopt"},
    "modelopt_nvfp4": {"modelopt_fp4"},
    "modelopt_mxfp8": {"modelopt_mxfp8"},
    "modelopt_mixed": {"modelopt_mixed"},
    "gptq": {"auto_gptq", "gptq_marlin", "gptq"},  # gptq: as --quantization names it for a legacy file
    "awq": {"awq", "awq_marlin"},
    "fp8": {"fp8"},
    "fbgemm_fp8": {"fbgemm_fp8"},
    "compressed-tensors": {"compressed-tensors"},
    "inc": {"inc"},
}


def _files(case: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    quantization, hf_quant = CASES[case]
    return (LLAMA | {"quantization_config": quantization} if quantization else dict(LLAMA)), hf_quant


@pytest.fixture(scope="module")
def resolved(vllm_env: VllmEnv, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("quantization-methods")
    argv: dict[str, list[str]] = {}
    for case in CASES:
        config, hf_quant = _files(case)
        folder = root / case
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        if hf_quant is not None:
            (folder / "hf_quant_config.json").write_text(json.dumps(hf_quant))
        argv[case] = ["--model", str(folder), "--skip-tokenizer-init", "--load-format", "dummy"]
        if _deprecated(case):  # what a plan adds (Plan.allow_deprecated_quantization); asked once without
            argv[f"{case}:without-the-flag"] = list(argv[case])
            argv[case].append("--allow-deprecated-quantization")
    return probe(vllm_env, argv)


def _deprecated(case: str) -> bool:
    config, hf_quant = _files(case)
    try:
        return weight_format(config, hf_quant_config=hf_quant).deprecated
    except capacity.ConfigError:
        return False


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_reads_the_method_vllm_loads_the_checkpoint_with(
    resolved: dict[str, dict[str, Any]], case: str
) -> None:
    config, hf_quant = _files(case)
    verdict = resolved[case]
    theirs = verdict["config"]["quantization"] if verdict["accepted"] else None
    try:
        ours: str | None = weight_format(config, hf_quant_config=hf_quant).method
    except capacity.ConfigError as exc:
        # refused: vLLM refuses the file too, or resolves no method for weights the file says are quantized
        assert theirs is None, f"vLLM loads {case} as {theirs}; capacity refuses it: {exc}"
        return
    assert verdict["accepted"], f"vLLM refuses {case} ({verdict['error']}); capacity reads {ours}"
    assert theirs in VLLM_NAMES[ours], f"vLLM loads {case} as {theirs}; capacity reads {ours}"


def test_every_case_is_asked(resolved: dict[str, dict[str, Any]]) -> None:
    """The refusals above are the engine's: each refusing case is one vLLM refuses or resolves no method for,
    and at least one of each kind is here."""
    refused = {case for case, v in resolved.items() if not v["accepted"] and ":" not in case}
    unquantized = {c for c, v in resolved.items() if v["accepted"] and v["config"]["quantization"] is None}
    assert refused == REFUSED_BY_VLLM, refused ^ REFUSED_BY_VLLM
    assert unquantized == {"flat-without-a-method", "legacy-without-its-producer"}, unquantized


def test_a_deprecated_method_loads_only_with_the_flag_a_plan_adds(
    resolved: dict[str, dict[str, Any]],
) -> None:
    """fbgemm_fp8 (Meta's Llama-3.1-405B-Instruct-FP8): vLLM 0.32 refuses it unless the command line says
    --allow-deprecated-quantization, which a plan for such a checkpoint carries."""
    deprecated = [case for case in CASES if _deprecated(case)]
    assert deprecated == ["fbgemm-fp8"]
    for case in deprecated:
        assert resolved[case]["accepted"], resolved[case]["error"]
        without = resolved[f"{case}:without-the-flag"]
        assert not without["accepted"] and "--allow-deprecated-quantization" in (without["error"] or "")


# ----- a legacy GPTQ / AWQ checkpoint: its quantization only in quantize_config.json ----------------------

#: TheBloke's GPTQ uploads (AutoGPTQ's file) and AutoAWQ's, beside a config.json with no quantization_config.
LEGACY: dict[str, tuple[str, dict[str, Any]]] = {
    "autogptq-file": (
        "quantize_config.json",
        {"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": False, "sym": True},
    ),
    "autoawq-file": (
        "quant_config.json",
        {"zero_point": True, "q_group_size": 128, "w_bit": 4, "version": "GEMM"},
    ),
}


@pytest.fixture(scope="module")
def legacy_resolved(vllm_env: VllmEnv, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each folder resolved as the plan's arguments have it (--quantization from capacity), and without."""
    root = tmp_path_factory.mktemp("legacy-quantization")
    argv: dict[str, list[str]] = {}
    for case, (name, content) in LEGACY.items():
        folder = root / case
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(LLAMA))
        (folder / name).write_text(json.dumps(content))
        flag = weight_format(LLAMA, legacy_quant_config=(name, content)).flag
        assert flag is not None
        plain = ["--model", str(folder), "--skip-tokenizer-init", "--load-format", "dummy"]
        argv[f"{case}:without-the-flag"] = plain
        argv[case] = [*plain, "--quantization", flag]
    return probe(vllm_env, argv)


@pytest.mark.parametrize("case", sorted(LEGACY))
def test_a_legacy_quantization_file_is_read_with_the_flag_vllm_needs_for_it(
    legacy_resolved: dict[str, dict[str, Any]], case: str
) -> None:
    """capacity reads the method and its flag from the file; with that flag vLLM loads the checkpoint with
    the same method, and without it vLLM takes the weights as unquantized (the load then fails on qweight)."""
    ours = weight_format(LLAMA, legacy_quant_config=LEGACY[case])
    verdict = legacy_resolved[case]
    assert verdict["accepted"], verdict["error"]
    assert verdict["config"]["quantization"] in VLLM_NAMES[ours.method]
    without = legacy_resolved[f"{case}:without-the-flag"]
    assert without["accepted"] and without["config"]["quantization"] is None


# ----- a compressed-tensors KV-cache scheme ----------------------------------------------------------------

#: compressed-tensors FP8 weights (llm-compressor's FP8_DYNAMIC) with a KV-cache scheme, by case. vLLM checks
#: the scheme when it builds each attention layer (``CompressedTensorsKVCacheMethod``), so the model is built.
KV_SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True, "dynamic": False}
KV_CASES: dict[str, dict[str, Any]] = {
    "per-tensor": KV_SCHEME,
    "per-head": KV_SCHEME | {"strategy": "attn_head"},
    "symmetric-left-out": {k: v for k, v in KV_SCHEME.items() if k != "symmetric"},  # early llm-compressor
    "asymmetric": KV_SCHEME | {"symmetric": False},
    "int8": KV_SCHEME | {"type": "int"},
    "per-channel": KV_SCHEME | {"strategy": "channel"},
}


def _ct_fp8_with_kv(kv: dict[str, Any]) -> dict[str, Any]:
    weights = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel", "dynamic": False}
    activations = weights | {"dynamic": True, "strategy": "token"}
    group = {"targets": ["Linear"], "weights": weights, "input_activations": activations}
    return {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "config_groups": {"group_0": group},
        "ignore": ["lm_head"],
        "kv_cache_scheme": kv,
    }


@pytest.fixture(scope="module")
def kv_builds(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    cases = [
        {"id": case, "config": LLAMA | {"quantization_config": _ct_fp8_with_kv(kv)}}
        for case, kv in KV_CASES.items()
    ]
    return weights_probe(vllm_env, cases)


@pytest.mark.parametrize("case", sorted(KV_CASES))
def test_a_kv_cache_scheme_is_refused_exactly_where_vllm_refuses_it(
    kv_builds: dict[str, dict[str, Any]], case: str
) -> None:
    config = LLAMA | {"quantization_config": _ct_fp8_with_kv(KV_CASES[case])}
    error = kv_builds[case]["error"]
    try:
        ours = weight_format(config)
    except capacity.ConfigError as exc:
        assert error is not None and "kv cache" in error.lower(), f"vLLM builds {case}; capacity: {exc}"
        return
    assert error is None, f"vLLM refuses {case} ({error}); capacity reads it"
    assert ours.kv_cache_dtype == "fp8"


def test_both_kv_cache_scheme_verdicts_are_reached(kv_builds: dict[str, dict[str, Any]]) -> None:
    assert {answer["error"] is None for answer in kv_builds.values()} == {True, False}
