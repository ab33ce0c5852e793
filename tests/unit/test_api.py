"""kvright.api: the typed spec parsed from an LLMDeployment's dict.

Pure; nothing is faked. Valid specs parse to exact values with the CRD's defaults; each bad field is
one SpecError line naming the field and what is accepted.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kvright.api import DEFAULTS, ArchitectureRef, SecretKeyRef, SpecError, parse_spec
from tests.builders import llmd


def test_defaults_fill_a_minimal_spec() -> None:
    spec = parse_spec(llmd("a").spec())
    assert spec.model.name == "meta-llama/Llama-3.1-8B-Instruct"
    assert spec.model.served_model_name == spec.model.name
    assert spec.model.architecture == ArchitectureRef(source="Catalog", catalog_id="llama-3.1-8b")
    assert (spec.workload.max_model_len, spec.workload.prompt_tokens) == (8192, 1024)
    assert (spec.workload.output_tokens, spec.workload.concurrency) == (256, 32)
    assert (spec.slo.tpot_milliseconds, spec.slo.ttft_milliseconds, spec.slo.percentile) == (50, None, 90)
    assert spec.tuning.tensor_parallel_size is None
    assert spec.tuning.max_num_seqs is None
    assert spec.tuning.kv_cache_dtype == "Auto"
    assert spec.tuning.gpu_memory_utilization_percent == 90
    assert (spec.feedback.mode, spec.feedback.window_seconds, spec.feedback.cooldown_seconds) == (
        "Observe",
        300,
        600,
    )
    assert (spec.replicas.min, spec.replicas.max, spec.replicas.count) == (1, 4, None)
    assert (spec.gpu.product, spec.gpu.max_gpus) == (None, None)
    assert (spec.resources.cpu, spec.resources.memory) == ("4", "32Gi")
    assert spec.image is None


def _crd_default(path: list[str]) -> Any:
    with open("crds/llmdeployment.yaml") as f:
        crd = yaml.safe_load(f)
    node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for key in path:
        node = node["properties"][key]
    return node.get("default")


@pytest.mark.parametrize(
    ("section", "field"),
    [(s, f) for s in ("workload", "slo", "tuning", "feedback", "replicas", "resources") for f in DEFAULTS[s]],
    ids=lambda v: str(v),
)
def test_python_defaults_are_the_crds(section: str, field: str) -> None:
    assert _crd_default([section, field]) == DEFAULTS[section][field]


def test_pinned_values_and_sources() -> None:
    spec = parse_spec(
        llmd("a")
        .hub("meta-llama/Llama-3.1-70B", revision="v1", token_secret="hf")
        .tp(4)
        .max_num_seqs("128")
        .kv_dtype("FP8")
        .replicas(1, 8, count=3)
        .gpu("NVIDIA-H200", 16)
        .spec()
    )
    assert spec.model.architecture == ArchitectureRef(
        source="Hub",
        hub_repository="meta-llama/Llama-3.1-70B",
        hub_revision="v1",
        hub_token=SecretKeyRef(name="hf", key="token"),
    )
    assert (spec.tuning.tensor_parallel_size, spec.tuning.max_num_seqs) == (4, 128)
    assert spec.tuning.kv_cache_dtype == "FP8"
    assert spec.replicas.count == 3
    assert (spec.gpu.product, spec.gpu.max_gpus) == ("NVIDIA-H200", 16)


def test_config_map_source_defaults_key() -> None:
    spec = parse_spec(llmd("a").config_map("cfg").without("model.configMapRef.key").spec())
    assert spec.model.architecture == ArchitectureRef(
        source="ConfigMap", config_map=SecretKeyRef(name="cfg", key="config.json")
    )


BAD = [
    ("no-model", llmd("a").without("model"), "spec.model: is required"),
    ("no-model-name", llmd("a").without("model.name"), "spec.model.name: is required"),
    ("two-sources", llmd("a").set("model.hub", {"repository": "a/b"}), "exactly one of architecture"),
    ("no-source", llmd("a").without("model.architecture"), "got none"),
    ("hub-repo-no-slash", llmd("a").hub("x/y").set("model.hub.repository", "xy"), "accepted: owner/name"),
    ("no-slo", llmd("a").without("slo"), "spec.slo: is required"),
    ("no-tpot", llmd("a").without("slo.tpotMilliseconds"), "spec.slo.tpotMilliseconds: is required"),
    ("tpot-zero", llmd("a").tpot_ms(0), "0 is out of range; accepted: 1 to 10000"),
    ("tpot-float", llmd("a").set("slo.tpotMilliseconds", 5.5), "must be an integer from 1 to 10000"),
    ("tpot-bool", llmd("a").set("slo.tpotMilliseconds", True), "must be an integer"),
    ("percentile-75", llmd("a").percentile(75), "accepted: 50, 90, 95, 99"),
    ("tp-string", llmd("a").tp("Max"), "must be Auto or an integer from 1 to 64"),
    ("tp-too-big", llmd("a").tp(128), "128 is out of range; accepted: 1 to 64"),
    ("tp-over-max-gpus", llmd("a").tp(8).gpu(max_gpus=4), "exceeds gpu.maxGPUs 4"),
    ("kv-lowercase", llmd("a").kv_dtype("fp8"), "accepted: Auto, Model, FP8"),
    ("feedback-bool", llmd("a").set("feedback.mode", False), "accepted: Off, Observe, Adjust"),
    ("min-over-max", llmd("a").replicas(5, 2), "min 5 > max 2"),
    ("count-outside", llmd("a").replicas(1, 2, count=3), "3 is out of range; accepted: 1 to 2"),
    ("prompt-over-context", llmd("a").context(1024, prompt=1000, output=100), "exceeds maxModelLen 1024"),
    ("context-tiny", llmd("a").context(64, prompt=1, output=1), "accepted: 128 to 1048576"),
    ("gpu-not-object", llmd("a").set("gpu", "H100"), "spec.gpu: must be an object"),
    ("image-empty", llmd("a").image(""), "spec.image: must be a non-empty string"),
    ("memory-list", llmd("a").set("resources.memory", ["1Gi"]), "must be a quantity"),
]


@pytest.mark.parametrize(("builder", "expected"), [(b, e) for _, b, e in BAD], ids=[i for i, _, _ in BAD])
def test_bad_fields_are_one_line_errors(builder: Any, expected: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(builder.spec())
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_spec_not_a_mapping() -> None:
    with pytest.raises(SpecError, match="spec: must be an object"):
        parse_spec([])  # type: ignore[arg-type]
