"""Configs vLLM reads only with the repository's own code: capacity says which, the operator refuses them
until the spec trusts the code, and then renders ``--trust-remote-code`` on every role.

The rule is vLLM's ``get_config`` over the engine's vocabulary (``capacity/vllm_config_types.json``);
tests/conformance/test_remote_code.py asks the real engine the same questions."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

import capacity
from kvright.conditions import Reason
from kvright.reconcile import desire
from kvright.render import render_deployment, render_leader_worker_set
from tests.builders import llmd, reconcile_facts
from tests.unit.test_render import _templates, multi_node, workload

LLAMA = dict(capacity.catalog_entry("llama-3.1-8b")["config"])
AUTO_MAP = {"AutoConfig": "configuration_custom.CustomConfig", "AutoModelForCausalLM": "modeling_custom.M"}


def _without(config: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != key}


@pytest.mark.parametrize(
    ("config", "reader"),
    [
        pytest.param(LLAMA, "engine", id="a-transformers-type"),
        pytest.param({**LLAMA, "auto_map": AUTO_MAP}, "engine", id="a-known-type-ignores-its-auto-map"),
        pytest.param({**LLAMA, "model_type": "chatglm"}, "engine", id="a-type-only-vllm-registers"),
        pytest.param({**LLAMA, "model_type": "my_llama", "auto_map": AUTO_MAP}, "checkpoint", id="renamed"),
        pytest.param({**_without(LLAMA, "model_type"), "auto_map": AUTO_MAP}, "checkpoint", id="no-type"),
        pytest.param(
            {**_without(LLAMA, "model_type"), "architectures": ["LongcatFlashForCausalLM"]},
            "engine",
            id="no-type-but-a-class-vllm-maps-to-one",
        ),
        pytest.param({**LLAMA, "model_type": "my_llama"}, "none", id="unknown-type-without-code"),
        pytest.param(
            {**LLAMA, "model_type": "my_llama", "auto_map": {"AutoModel": "m.M"}},
            "none",
            id="code-but-no-config",
        ),
    ],
)
def test_the_reader_is_the_one_vllm_get_config_picks(config: dict[str, Any], reader: str) -> None:
    assert capacity.config_reader(config) == reader


@pytest.mark.parametrize(
    ("config", "reader"),
    [
        pytest.param(LLAMA, "engine", id="a-class-vllm-registers"),
        pytest.param({**LLAMA, "architectures": ["BitNetForCausalLM"]}, "engine", id="a-transformers-class"),
        pytest.param(
            {**LLAMA, "architectures": ["MyLlamaForCausalLM", "LlamaForCausalLM"]},
            "engine",
            id="any-listed-class-vllm-registers",
        ),
        pytest.param(
            {**LLAMA, "architectures": ["MyLlamaForCausalLM"], "auto_map": AUTO_MAP},
            "checkpoint",
            id="only-the-repositorys-model-code",
        ),
        pytest.param({**LLAMA, "architectures": ["MyLlamaForCausalLM"]}, "none", id="no-class-anywhere"),
        pytest.param(_without(LLAMA, "architectures"), "engine", id="no-class-named"),
    ],
)
def test_the_model_class_is_the_one_vllm_registry_resolves(config: dict[str, Any], reader: str) -> None:
    """vLLM resolves the model class by the file's ``architectures`` (any registered one, else the first by
    its Transformers backend or the repository's code), never by ``model_type``: a known type under a name
    vLLM does not register is not served."""
    assert capacity.model_class_reader(config) == reader
    arch = capacity.architecture_from_config(config)
    named = [w for w in arch.warnings if "a class vLLM" in w]
    assert len(named) == (reader != "engine")
    if reader == "checkpoint":
        assert "--trust-remote-code" in named[0]
    if reader == "none":
        assert "stops at start" in named[0]


def test_the_catalog_knows_which_of_its_models_need_the_repositorys_code() -> None:
    readers = {m: capacity.catalog_architecture(m).config_reader for m in capacity.catalog_ids()}
    assert readers["llama-3.3-nemotron-super-49b"] == "checkpoint"  # model_type nemotron-nas (DeciLM)
    assert readers["deepseek-v3"] == "engine"  # auto_map too, but transformers knows deepseek_v3
    assert set(readers.values()) <= {"engine", "checkpoint"}


def test_a_type_no_engine_class_reads_is_planned_with_a_warning_that_names_the_engine() -> None:
    arch = capacity.architecture_from_config({**LLAMA, "model_type": "my_llama"})
    vocabulary = json.loads((resources.files("capacity") / "vllm_config_types.json").read_text())
    (warning,) = [w for w in arch.warnings if "AutoConfig" in w]
    assert "'my_llama'" in warning and f"vLLM {vocabulary['vllm']}" in warning


def test_the_vocabulary_is_the_engines_whole_list() -> None:
    doc = json.loads((resources.files("capacity") / "vllm_config_types.json").read_text())
    assert doc["model_types"] == sorted(set(doc["model_types"]))
    assert {"llama", "deepseek_v3", "qwen3_moe", "gemma3", "kimi_k2"} <= set(doc["model_types"])
    assert {"nemotron-nas", "hunyuan"}.isdisjoint(doc["model_types"])
    assert {"LlamaForCausalLM", "Ernie4_5ForCausalLM", "MiniCPM3ForCausalLM"} <= set(doc["architectures"])
    assert "Ernie4_5_ForCausalLM" not in doc["architectures"] + doc["transformers_architectures"]


NEMOTRON = llmd("nas").model("llama-3.3-nemotron-super-49b").gpu("NVIDIA-H100-80GB-HBM3").tpot_ms(60)


def test_a_model_read_by_its_own_code_is_refused_until_the_spec_trusts_it() -> None:
    d = desire(reconcile_facts(NEMOTRON.spec()))
    assert (d.plan_feasible.status, d.plan_feasible.reason) == ("False", Reason.REMOTE_CODE_NOT_TRUSTED)
    assert "model.trustRemoteCode: true" in d.plan_feasible.message
    assert d.children == ()
    trusted = desire(reconcile_facts(NEMOTRON.set("model.trustRemoteCode", True).spec()))
    assert trusted.plan_feasible.status == "True", trusted.plan_feasible.message
    args = trusted.children[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args.count("--trust-remote-code") == 1


def test_a_model_whose_class_only_its_own_code_builds_is_refused_until_the_spec_trusts_it() -> None:
    """The config class is the engine's, but vLLM registers no class the file's architectures names (Baidu's
    first ERNIE 4.5 upload): only the repository's model code, under --trust-remote-code, could build it."""
    config = {**LLAMA, "architectures": ["MyLlamaForCausalLM"], "auto_map": AUTO_MAP}
    arch = capacity.architecture_from_config(config)
    assert (arch.config_reader, arch.model_class_reader) == ("engine", "checkpoint")
    assert arch.needs_remote_code
    d = desire(reconcile_facts(NEMOTRON.spec(), architecture=arch))
    assert (d.plan_feasible.status, d.plan_feasible.reason) == ("False", Reason.REMOTE_CODE_NOT_TRUSTED)
    assert "builds" in d.plan_feasible.message and "registers no class" in d.plan_feasible.message
    trusted = desire(reconcile_facts(NEMOTRON.set("model.trustRemoteCode", True).spec(), architecture=arch))
    assert trusted.plan_feasible.status == "True", trusted.plan_feasible.message


def test_trust_is_rendered_only_where_the_spec_gives_it() -> None:
    llama = llmd("a").model("llama-3.1-8b").gpu("NVIDIA-H100-80GB-HBM3").tpot_ms(50)
    for spec, expected in ((llama.spec(), 0), (llama.set("model.trustRemoteCode", True).spec(), 1)):
        d = desire(reconcile_facts(spec))
        assert d.plan_feasible.status == "True", d.plan_feasible.message
        assert d.children[0]["spec"]["template"]["spec"]["containers"][0]["args"].count(
            "--trust-remote-code"
        ) == expected  # fmt: skip


def test_every_role_of_a_replica_across_nodes_loads_the_model_with_the_same_trust() -> None:
    """Workers build the model too: each must be allowed the code the leader is."""
    for template in _templates(render_leader_worker_set(multi_node(trust_remote_code=True))):
        (c,) = template["spec"]["containers"]
        assert c["args"].count("--trust-remote-code") == 1
    (c,) = render_deployment(workload(trust_remote_code=True))["spec"]["template"]["spec"]["containers"]
    assert c["args"].count("--trust-remote-code") == 1


def test_kvright_plan_adds_the_flag_only_when_asked_and_says_so_when_it_is_missing(capsys) -> None:
    """``kvright plan`` of a model vLLM reads only through its repository's code: without
    ``--trust-remote-code`` its vllm args lack the flag and a warning says vLLM stops at start without it;
    with it, every role's args carry the flag once (an opt-in, as the LLMDeployment's
    model.trustRemoteCode), and the warning is gone."""
    from kvright import cli

    base = ["plan", "llama-3.3-nemotron-super-49b", "--gpu", "h100-sxm", "--tpot-ms", "60", "--json"]
    assert cli.main(base) == 0
    untrusted = json.loads(capsys.readouterr().out)
    assert "--trust-remote-code" not in untrusted["vllm_args"]
    assert any("vLLM stops at start without it" in w for w in untrusted["warnings"]), untrusted["warnings"]
    assert cli.main([*base, "--trust-remote-code"]) == 0
    trusted = json.loads(capsys.readouterr().out)
    assert trusted["vllm_args"].count("--trust-remote-code") == 1
    assert all(args.count("--trust-remote-code") == 1 for args in trusted["vllm_args_by_role"].values())
    assert not any("vLLM stops at start" in w for w in trusted["warnings"])
    assert cli.main(base[:-1]) == 0
    assert "warning: vLLM reads this config" in capsys.readouterr().out
    assert cli.main([*base[:-1], "--trust-remote-code"]) == 0
    text = capsys.readouterr().out
    assert "--trust-remote-code" in text and "vLLM stops at start" not in text
