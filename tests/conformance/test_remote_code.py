"""Which config.json files vLLM reads only with the repository's own code: capacity's answer is the engine's.

``capacity.config_reader`` applies vLLM's ``get_config`` rule to the engine's vocabulary
(``capacity/vllm_config_types.json``). Here the real engine answers the same questions: the vocabulary is
the one vLLM 0.32 and its transformers hold today, and every config kvright has (the catalog, the zoo in
``tests/data/configs``, and files shaped to reach each branch of the rule) loads without
``--trust-remote-code`` exactly where capacity says ``engine``; refuses for custom code where it says
``checkpoint``; and does not recognise the type where it says ``none``. Last, the flag does what the
operator renders it for: with it, vLLM runs a checkpoint's own config class.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import capacity

from .harness import HERE, VllmEnv

pytestmark = pytest.mark.conformance

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
LLAMA = dict(capacity.catalog_entry("llama-3.1-8b")["config"])
AUTO_MAP = {"AutoConfig": "configuration_custom.CustomConfig"}

#: A checkpoint's own config class, as repositories ship one beside config.json (auto_map names it).
CUSTOM_CONFIG = '''
from transformers import LlamaConfig


class CustomConfig(LlamaConfig):
    model_type = "kvright_custom"
'''


def _without(config: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != key}


def _cases() -> dict[str, dict[str, Any]]:
    cases = {f"catalog:{m}": dict(capacity.catalog_entry(m)["config"]) for m in capacity.catalog_ids()}
    for folder in sorted(p for p in CONFIGS.iterdir() if (p / "config.json").is_file()):
        cases[f"zoo:{folder.name}"] = json.loads((folder / "config.json").read_text())
    shaped = {
        "known-type-with-auto-map": {**LLAMA, "auto_map": AUTO_MAP},
        "type-only-vllm-registers": {**LLAMA, "model_type": "chatglm"},
        "renamed-type": {**LLAMA, "model_type": "kvright_custom", "auto_map": AUTO_MAP},
        "no-type": {**_without(LLAMA, "model_type"), "auto_map": AUTO_MAP},
        "no-type-but-a-class-vllm-maps": {
            **_without(LLAMA, "model_type"),
            "architectures": ["LongcatFlashForCausalLM"],
        },
        "unknown-type-without-code": {**LLAMA, "model_type": "kvright_custom"},
        "code-but-no-config-class": {
            **LLAMA,
            "model_type": "kvright_custom",
            "auto_map": {"AutoModel": "m.M"},
        },
    }
    return cases | {f"shaped:{k}": v for k, v in shaped.items()}


CASES = _cases()

#: How vLLM 0.32 (transformers 5.19) words each refusal.
REFUSALS = {"checkpoint": "contains custom code", "none": "does not recognize this architecture"}


@pytest.fixture(scope="module")
def vllm_reads(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    cases = [{"id": cid, "config": config} for cid, config in CASES.items()]
    cases.append(
        {
            "id": "trusted",
            "config": {**LLAMA, "model_type": "kvright_custom", "auto_map": AUTO_MAP},
            "files": {"configuration_custom.py": CUSTOM_CONFIG},
            "trust_remote_code": True,
        }
    )
    out = vllm_env.run([str(HERE / "vllm_config_probe.py")], stdin=json.dumps(cases), timeout=600)
    return {answer["id"]: answer for answer in json.loads(out.strip().splitlines()[-1])}


def test_the_vocabulary_is_the_engines(vllm_env: VllmEnv) -> None:
    """capacity/vllm_config_types.json is what the installed vLLM and transformers know, to the entry.
    When it is not (the engine moved), the message says how to write it anew."""
    ours = json.loads((resources.files("capacity") / "vllm_config_types.json").read_text())
    theirs = json.loads(vllm_env.run([str(HERE / "vllm_config_types_probe.py")], timeout=300))
    assert ours == theirs, (
        "capacity/vllm_config_types.json is not the engine's: run "
        f"{vllm_env.python} tests/conformance/vllm_config_types_probe.py > capacity/vllm_config_types.json"
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_vllm_reads_the_config_without_remote_code_exactly_where_capacity_says(
    vllm_reads: dict[str, dict[str, Any]], case: str
) -> None:
    reader = capacity.config_reader(CASES[case])
    error = vllm_reads[case]["error"]
    refused = {kind for kind, words in REFUSALS.items() if words in str(error)}
    assert refused == ({reader} - {"engine"}), f"capacity says {reader}; vLLM: {error}"


def test_every_reader_is_reached(vllm_reads: dict[str, dict[str, Any]]) -> None:
    assert {capacity.config_reader(c) for c in CASES.values()} == {"engine", "checkpoint", "none"}


def test_with_trust_remote_code_vllm_runs_the_checkpoints_own_config_class(
    vllm_reads: dict[str, dict[str, Any]],
) -> None:
    answer = vllm_reads["trusted"]
    assert answer["error"] is None, answer["error"]
    assert answer["num_hidden_layers"] == LLAMA["num_hidden_layers"]
