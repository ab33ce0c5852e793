"""Which quantization method vLLM loads a checkpoint with: capacity's reading of the config is the engine's.

``capacity.quantization.weight_format`` follows vLLM 0.32's two steps: the config loader's normalization (a
ModelOpt ``producer`` over a ``quantization`` block names the method from its ``quant_algo``; an unknown
algo there is refused) and ``ModelConfig._verify_quantization``'s overrides (a ``modelopt*`` method's
``quant_algo`` picks the ModelOpt class: FP8, NVFP4, MXFP8, MIXED_PRECISION). NVIDIA's newer checkpoints
state ModelOpt in config.json's flat form (``quant_method``, ``quant_algo``, ``ignore``, ``quantized_layers``)
rather than in ``hf_quant_config.json``; both forms are asked here of the real engine, on a small Llama, with
``create_engine_config`` (no weights): the method vLLM resolves must be the one capacity reads, and where vLLM
refuses the file or would load quantized weights as unquantized (no method at all), capacity refuses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity
from capacity.quantization import weight_format

from .harness import VllmEnv, probe

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
}

#: capacity's WeightFormat.method -> the name vLLM's ModelConfig.quantization holds.
VLLM_NAME = {
    "modelopt_fp8": "modelopt",
    "modelopt_nvfp4": "modelopt_fp4",
    "modelopt_mxfp8": "modelopt_mxfp8",
    "modelopt_mixed": "modelopt_mixed",
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
    return probe(vllm_env, argv)


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
    assert VLLM_NAME.get(ours) == theirs


def test_every_case_is_asked(resolved: dict[str, dict[str, Any]]) -> None:
    """The refusals above are the engine's: each refusing case is one vLLM refuses or resolves no method for,
    and at least one of each kind is here."""
    refused = {case for case, v in resolved.items() if not v["accepted"]}
    unquantized = {c for c, v in resolved.items() if v["accepted"] and v["config"]["quantization"] is None}
    assert refused == {"legacy-mixed-precision", "legacy-nvfp4-without-its-kv-cache-key"}, refused
    assert unquantized == {"flat-without-a-method", "legacy-without-its-producer"}, unquantized
