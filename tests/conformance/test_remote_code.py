"""Which config.json files vLLM reads only with the repository's own code: capacity's answer is the engine's.

``capacity.config_reader`` applies vLLM's ``get_config`` rule to the engine's vocabulary
(``capacity/vllm_config_types.json``). Here the real engine answers the same questions: the vocabulary is
the one vLLM 0.32 and its transformers hold today, and every config kvright has (the catalog, the zoo in
``tests/data/configs``, and files shaped to reach each branch of the rule) loads without
``--trust-remote-code`` exactly where capacity says ``engine``; refuses for custom code where it says
``checkpoint``; and does not recognise the type where it says ``none``. Last, the flag does what the
operator renders it for: with it, vLLM runs a checkpoint's own config class.

The model class is the registry's next question (``capacity.model_class_reader``): vLLM's engine config
refuses a file whose ``architectures`` names no class it registers, nor one its Transformers backend takes,
exactly where capacity says so (Baidu's first ERNIE 4.5 upload in the zoo names ``Ernie4_5_ForCausalLM``).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import capacity

from .harness import HERE, VllmEnv, probe

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


#: Files shaped to reach each answer of capacity.model_class_reader (the zoo's ERNIE 4.5 upload reaches
#: ``checkpoint``); their config class is the engine's, so only the model class can refuse them.
CLASS_CASES = {
    "class:a-transformers-class": {**LLAMA, "architectures": ["BitNetForCausalLM"]},
    "class:any-listed-class-vllm-registers": {
        **LLAMA,
        "architectures": ["MyLlamaForCausalLM", "LlamaForCausalLM"],
    },
    "class:only-the-repositorys-code": {
        **LLAMA,
        "architectures": ["MyLlamaForCausalLM"],
        "auto_map": {"AutoModelForCausalLM": "modeling_custom.MyLlamaForCausalLM"},
    },
    "class:none": {**LLAMA, "architectures": ["MyLlamaForCausalLM"]},
}


@pytest.fixture(scope="module")
def vllm_classes(vllm_env: VllmEnv, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("model-classes")
    argv: dict[str, list[str]] = {}
    for case, config in _class_cases().items():
        folder = root / case.replace(":", "-")
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        argv[case] = ["--model", str(folder), "--skip-tokenizer-init", "--load-format", "dummy"]
    return probe(vllm_env, argv)


def _class_cases() -> dict[str, dict[str, Any]]:
    zoo = {c: config for c, config in CASES.items() if c.startswith("zoo:")}
    readable = {c: config for c, config in zoo.items() if capacity.config_reader(config) == "engine"}
    return readable | CLASS_CASES


@pytest.mark.parametrize("case", sorted(_class_cases()))
def test_vllm_finds_a_model_class_exactly_where_capacity_says(
    vllm_classes: dict[str, dict[str, Any]], case: str
) -> None:
    reader = capacity.model_class_reader(_class_cases()[case])
    error = vllm_classes[case]["error"] or ""
    refused = "are not supported for now" in error
    assert refused == (reader != "engine"), f"capacity says {reader}; vLLM: {error}"


def test_every_model_class_answer_is_reached() -> None:
    answers = {capacity.model_class_reader(c) for c in _class_cases().values()}
    assert answers == {"engine", "checkpoint", "none"}
