"""kvright.api: the LLMDeployment models, and the typed spec parsed from an LLMDeployment's dict.

Pure; nothing is faked. Valid specs parse to exact values with the CRD's defaults; each bad field is
one SpecError line naming the field (camelCase) and what is accepted. The CRD generated from the same
models must be the files on disk (crds/ and the chart's copy) byte for byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kvright import crdgen
from kvright.api import (
    ArchitectureRef,
    ConfigMapKeyRef,
    LLMDeploymentSpec,
    LLMDeploymentStatus,
    SecretKeyRef,
    SpecError,
    parse_spec,
)
from tests.builders import llmd

ROOT = Path(__file__).resolve().parents[2]


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
        60,
        600,
    )
    assert (spec.replicas.min, spec.replicas.max, spec.replicas.count) == (1, 4, None)
    assert (spec.gpu.product, spec.gpu.max_gpus) == (None, None)
    assert (spec.resources.cpu, spec.resources.memory) == ("4", "32Gi")
    assert spec.image is None


@pytest.mark.parametrize("path", ["crds/llmdeployment.yaml", "charts/kvright/files/crds/llmdeployment.yaml"])
def test_crd_on_disk_is_what_the_models_generate(path: str) -> None:
    on_disk = (ROOT / path).read_text(encoding="utf-8")
    assert on_disk == crdgen.render(), f"{path} differs from the models in kvright/api.py: run `make crd`"


def _crd_spec_schema() -> dict[str, Any]:
    crd = yaml.safe_load(crdgen.render())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def test_crd_defaults_are_what_parse_spec_fills_in() -> None:
    """The API server fills a minimal object with the CRD's defaults; parse_spec must fill the same."""
    schema = _crd_spec_schema()["properties"]
    dumped = parse_spec(llmd("a").spec()).model_dump(by_alias=True)  # Auto fields dump as "Auto"
    for section in ("gpu", "workload", "tuning", "feedback", "replicas", "resources"):
        python = {field: value for field, value in dumped[section].items() if value is not None}
        assert schema[section]["default"] == python, section
        for field, node in schema[section]["properties"].items():
            assert node.get("default") == python.get(field), f"{section}.{field}"
    assert schema["slo"]["properties"]["percentile"]["default"] == dumped["slo"]["percentile"]


def test_every_crd_rule_has_a_message() -> None:
    def rules(node: Any) -> list[dict[str, str]]:
        if isinstance(node, dict):
            own = node.get("x-kubernetes-validations", [])
            return own + [r for k, v in node.items() if k != "x-kubernetes-validations" for r in rules(v)]
        return [r for v in node for r in rules(v)] if isinstance(node, list) else []

    found = rules(yaml.safe_load(crdgen.render()))
    assert len(found) == 17  # 13, and spec.model.source: three on the source, one on the model
    assert all(r["rule"] and r["message"] for r in found)


def test_python_round_trips_through_the_wire_form() -> None:
    spec = parse_spec(llmd("a").tp(4).spec())
    wire = spec.model_dump(by_alias=True)
    assert wire["tuning"]["tensorParallelSize"] == 4
    assert wire["tuning"]["maxNumSeqs"] == "Auto"
    assert LLMDeploymentSpec.model_validate(wire) == spec


def test_the_status_reconcile_writes_is_declared_by_the_status_model() -> None:
    """The API server prunes status fields the CRD does not declare; nothing reconcile writes may be one
    (prediction, observed and calibration keep unknown fields on purpose)."""
    from kvright.reconcile import Rollout, status
    from tests.unit.test_reconcile import LLAMA70, NOW, PLANNED, facts

    rollout = Rollout(replicas=2, ready_replicas=2, updated_replicas=2, up_to_date=True)
    obj = facts(LLAMA70.replicas(2, 4).spec())
    written = status(obj, PLANNED, rollout=rollout, apply_error=None, now=NOW)
    kept = LLMDeploymentStatus.model_validate(written).model_dump(by_alias=True, exclude_none=True)
    assert kept == _without_nulls(written)


def _without_nulls(value: Any) -> Any:
    """What a merge patch leaves: a null removes its key (status.routing sends the keys it drops as null)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


@pytest.mark.parametrize(
    ("routing", "picker"),
    [
        ({}, None),
        ({"endpointPicker": {"name": "chat-epp"}}, ("chat-epp", 9002, "FailClose")),
        (
            {"endpointPicker": {"name": "picker", "port": 9100, "failureMode": "FailOpen"}},
            ("picker", 9100, "FailOpen"),
        ),
    ],
    ids=[
        "left-out-the-operators-default",
        "a-name-takes-the-upstream-port-and-fail-close",
        "all-three-given",
    ],
)
def test_the_endpoint_picker_of_the_spec(
    routing: dict[str, Any], picker: tuple[str, int, str] | None
) -> None:
    got = parse_spec({**llmd("a").spec(), "routing": routing}).routing.endpoint_picker
    assert (None if got is None else (got.name, got.port, got.failure_mode)) == picker


BAD_ENDPOINT_PICKERS = [
    pytest.param({"name": "Chat_EPP"}, "spec.routing.endpointPicker.name", id="not-a-service-name"),
    pytest.param({"name": "epp", "port": 70000}, "spec.routing.endpointPicker.port", id="port-out-of-range"),
    pytest.param(
        {"name": "epp", "failureMode": "failopen"},
        "spec.routing.endpointPicker.failureMode",
        id="failure-mode-in-the-wrong-case",
    ),
    pytest.param({"port": 9002}, "spec.routing.endpointPicker.name", id="no-name"),
]
"""Endpoint pickers that parse_spec and the CRD (tests/integration/test_operator_inference_pool.py) both
refuse, with the field each names."""


@pytest.mark.parametrize(("picker", "field"), BAD_ENDPOINT_PICKERS)
def test_a_bad_endpoint_picker_names_its_field(picker: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec({**llmd("a").spec(), "routing": {"endpointPicker": picker}})
    assert caught.value.field == field


def test_pinned_values_and_sources() -> None:
    spec = parse_spec(
        llmd("a")
        .hub("meta-llama/Llama-3.1-70B", revision="v1", token_secret="hf")
        .tp(4)
        .max_num_seqs(128)
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
        source="ConfigMap", config_map=ConfigMapKeyRef(name="cfg", key="config.json")
    )


BAD = [
    ("no-model", llmd("a").without("model"), "spec.model: is required (an object)"),
    ("no-model-name", llmd("a").without("model.name"), "spec.model.name: is required (a string of 1 to 253"),
    ("two-sources", llmd("a").set("model.hub", {"repository": "a/b"}), "exactly one of architecture"),
    ("no-source", llmd("a").without("model.architecture"), "(got none)"),
    (
        "hub-repo-no-slash",
        llmd("a").hub("x/y").set("model.hub.repository", "xyz"),
        "spec.model.hub.repository: 'xyz' is not accepted; accepted: a string of 3 to 200 characters",
    ),
    ("no-slo", llmd("a").without("slo"), "spec.slo: is required (an object)"),
    ("no-tpot", llmd("a").without("slo.tpotMilliseconds"), "spec.slo.tpotMilliseconds: is required"),
    ("tpot-zero", llmd("a").tpot_ms(0), "0 is out of range; accepted: an integer from 1 to 10000"),
    ("tpot-float", llmd("a").set("slo.tpotMilliseconds", 5.5), "accepted: an integer from 1 to 10000"),
    ("tpot-bool", llmd("a").set("slo.tpotMilliseconds", True), "True is not accepted; accepted: an integer"),
    ("tpot-string", llmd("a").set("slo.tpotMilliseconds", "50"), "'50' is not accepted; accepted: an int"),
    ("percentile-75", llmd("a").percentile(75), "percentile: 75 is not accepted; accepted: one of 50, 90"),
    ("tp-string", llmd("a").tp("Max"), "accepted: Auto or an integer from 1 to 64"),
    # The API server's CEL rule refuses a number written as a string, so parse_spec does too.
    ("seqs-number-as-string", llmd("a").max_num_seqs("128"), "accepted: Auto or an integer from 1 to 4096"),
    ("tp-too-big", llmd("a").tp(128), "128 is out of range; accepted: Auto or an integer from 1 to 64"),
    ("tp-over-max-gpus", llmd("a").tp(8).gpu(max_gpus=4), "tuning.tensorParallelSize must be <= gpu.maxGPUs"),
    ("kv-lowercase", llmd("a").kv_dtype("fp8"), "kvCacheDtype: 'fp8' is not accepted; accepted: one of Auto"),
    ("feedback-bool", llmd("a").set("feedback.mode", False), "accepted: one of Off, Observe, Adjust"),
    ("min-over-max", llmd("a").replicas(5, 2), "replicas.min must be <= replicas.max (got min 5, max 2)"),
    ("count-outside", llmd("a").replicas(1, 2, count=3), "within replicas.min..replicas.max (got count 3"),
    ("prompt-over-context", llmd("a").context(1024, prompt=1000, output=100), "(got 1000 + 100 > 1024)"),
    ("context-tiny", llmd("a").context(64, prompt=1, output=1), "accepted: an integer from 128 to 1048576"),
    ("gpu-not-object", llmd("a").set("gpu", "H100"), "spec.gpu: must be an object, got str"),
    ("image-empty", llmd("a").image(""), "spec.image: '' has 0 characters; accepted: a string of 1 to 512"),
    ("memory-list", llmd("a").set("resources.memory", ["1Gi"]), "accepted: an integer or a string matching"),
    ("cpu-word", llmd("a").set("resources.cpu", "four"), "spec.resources.cpu: 'four' is not accepted"),
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
