"""Context length: the longest ``--max-model-len`` capacity accepts, and the one it plans when the spec
gives none, are the ones real vLLM derives from the same config.json.

vLLM 0.32's ``_get_and_verify_max_len`` takes the smallest length key the config states
(``model_max_length`` over all), multiplies it by the RoPE factor of a type whose positions are the
pre-training length, and serves LongRoPE's original length by default. The tokenizer's own
``model_max_length`` does not cap it: vLLM reads that for pooling models with absolute position
embeddings only, not for a generative model (a fact sheet said otherwise; these cases show the engine).

Each case below writes a variant of the tiny gqa checkpoint's config.json beside links to its weights and
tokenizer, and asks vLLM's own config code (``create_engine_config`` through vllm_probe.py, no engine
started) three things: what it serves without the flag, whether it accepts capacity's limit, and whether it
refuses one token more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import capacity

from .harness import VllmEnv, probe

pytestmark = pytest.mark.conformance

TOKENIZER_LIMIT = "tokenizer_config.json:model_max_length"
"""A variant's key for the tokenizer's own model_max_length (otherwise dropped)."""
# Each variant changes the base config (2048 positions, no RoPE scaling); None removes a key.
VARIANTS: dict[str, Mapping[str, Any]] = {
    "plain": {},
    "linear-rope-scales-the-positions": {"rope_scaling": {"type": "linear", "factor": 4.0}},
    "dynamic-rope-scales-the-positions": {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "yarn-positions-are-already-extended": {
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512}
    },
    "llama3-positions-are-already-extended": {
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 256,
        }
    },
    "longrope-serves-its-original-length-by-default": {
        "max_position_embeddings": 8192,
        "original_max_position_embeddings": 2048,
        "rope_scaling": {"type": "longrope", "long_factor": [1.5] * 16, "short_factor": [1.0] * 16},
    },
    "model-max-length-wins-over-the-positions": {"model_max_length": 8192},
    "the-smallest-length-key-wins": {"seq_length": 1024},
    "the-tokenizers-model-max-length-does-not-cap-a-generative-model": {
        "max_position_embeddings": 8192,
        TOKENIZER_LIMIT: 1024,
    },
    "nor-does-it-cap-a-scaled-one": {
        "max_position_embeddings": 8192,
        "rope_scaling": {"type": "linear", "factor": 2.0},
        TOKENIZER_LIMIT: 1024,
    },
}


def _variant(base: Path, root: Path, name: str, change: Mapping[str, Any]) -> Path:
    """A checkpoint folder whose config.json is the base's with ``change``; the rest links to the base.

    The tokenizer's own model_max_length (the base's 2048) is dropped unless the variant sets one
    (TOKENIZER_LIMIT), so that each rule is seen on its own."""
    folder = root / name
    folder.mkdir()
    for item in base.iterdir():
        if item.name not in ("config.json", "tokenizer_config.json"):
            (folder / item.name).symlink_to(item)
    tokenizer = json.loads((base / "tokenizer_config.json").read_text())
    tokenizer.pop("model_max_length", None)
    config = json.loads((base / "config.json").read_text())
    for key, value in change.items():
        if key == TOKENIZER_LIMIT:
            tokenizer["model_max_length"] = value
        elif value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def derived(
    vllm_env: VllmEnv, tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[capacity.Architecture, dict[str, dict[str, Any]]]]:
    """Capacity's reading of each variant, and vLLM's verdicts on it, by variant."""
    root = tmp_path_factory.mktemp("context-variants")
    archs: dict[str, capacity.Architecture] = {}
    cases: dict[str, list[str]] = {}
    for name, change in VARIANTS.items():
        folder = _variant(tiny_models["gqa"], root, name, change)
        arch = capacity.load_architecture(str(folder))  # what `kvright plan FOLDER` reads
        archs[name] = arch
        argv = ["--model", str(folder), "--enforce-eager"]
        cases[f"{name}:default"] = argv
        cases[f"{name}:limit"] = [*argv, "--max-model-len", str(arch.max_model_len)]
        cases[f"{name}:beyond"] = [*argv, "--max-model-len", str(arch.max_model_len + 1)]
    verdicts = probe(vllm_env, cases)
    return {
        name: (arch, {kind: verdicts[f"{name}:{kind}"] for kind in ("default", "limit", "beyond")})
        for name, arch in archs.items()
    }


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_capacity_derives_the_context_vllm_derives(
    variant: str, derived: dict[str, tuple[capacity.Architecture, dict[str, dict[str, Any]]]]
) -> None:
    arch, verdict = derived[variant]
    default, limit, beyond = verdict["default"], verdict["limit"], verdict["beyond"]
    assert default["accepted"], f"vLLM refused the config at {default['stage']}: {default['error']}"
    assert default["config"]["max_model_len"] == arch.default_max_model_len
    assert limit["accepted"], f"vLLM refused --max-model-len {arch.max_model_len}: {limit['error']}"
    assert not beyond["accepted"], f"vLLM accepts --max-model-len {arch.max_model_len + 1}"
    assert "max_model_len" in beyond["error"], beyond["error"]
    assert arch.context_error(arch.max_model_len) is None
    assert arch.context_error(arch.max_model_len + 1) is not None


def test_the_variants_differ_where_the_rules_do(
    derived: dict[str, tuple[capacity.Architecture, dict[str, dict[str, Any]]]],
) -> None:
    """Each rule moves the numbers away from the plain config's, so each case above tests its rule."""
    limits = {name: (arch.max_model_len, arch.default_max_model_len) for name, (arch, _) in derived.items()}
    assert limits == {
        "plain": (2048, 2048),
        "linear-rope-scales-the-positions": (8192, 8192),
        "dynamic-rope-scales-the-positions": (4096, 4096),
        "yarn-positions-are-already-extended": (2048, 2048),
        "llama3-positions-are-already-extended": (2048, 2048),
        "longrope-serves-its-original-length-by-default": (8192, 2048),
        "model-max-length-wins-over-the-positions": (8192, 8192),
        "the-smallest-length-key-wins": (1024, 1024),
        "the-tokenizers-model-max-length-does-not-cap-a-generative-model": (8192, 8192),
        "nor-does-it-cap-a-scaled-one": (16384, 16384),
    }
