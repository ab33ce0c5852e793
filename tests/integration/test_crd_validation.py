"""The LLMDeployment CRD's own validation, as the real kube-apiserver applies it.

Each invalid object is created (server-side dry run, so nothing is stored) and must be rejected with the
CRD's message: schema bounds and enums, and every CEL rule. The same objects written as an update over a
stored valid one are rejected the same way (the rules hold on every write, not only on create); a spec
sent through the status subresource is dropped by the API server. The samples and a defaulted minimal
object must be accepted. Nothing is faked; no operator runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvright.operator import Kube, KubeError
from tests.builders import llmd
from tests.integration.kvright_cluster import admin, install_crd, llmd_path, namespace

pytestmark = pytest.mark.cluster

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "deploy" / "samples").glob("*.yaml"))


@pytest.fixture(scope="module")
def ns() -> Iterator[tuple[Kube, str]]:
    kube = admin()
    install_crd(kube)
    with namespace(kube, "kvr-crd") as name:
        yield kube, name


def dry_run(kube: Kube, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
    obj = {**obj, "metadata": {**obj["metadata"], "namespace": ns}}
    result: dict[str, Any] = kube.request("POST", llmd_path(ns), body=obj, query=[("dryRun", "All")])
    return result


INVALID = [
    ("percentile-75", llmd("a").percentile(75), "slo.percentile must be one of 50, 90, 95, 99"),
    (
        "two-sources",
        llmd("a").set("model.hub", {"repository": "a/b"}),
        "model needs exactly one of architecture",
    ),
    ("no-source", llmd("a").without("model.architecture"), "model needs exactly one of architecture"),
    (
        "all-sources",
        llmd("a").set("model.configMapRef", {"name": "c"}).set("model.hub", {"repository": "a/b"}),
        "model needs exactly one of architecture",
    ),
    ("tp-word", llmd("a").tp("Max"), "tuning.tensorParallelSize must be Auto or an integer from 1 to 64"),
    ("tp-128", llmd("a").tp(128), "tuning.tensorParallelSize must be Auto or an integer from 1 to 64"),
    ("tp-zero", llmd("a").tp(0), "tuning.tensorParallelSize must be Auto or an integer from 1 to 64"),
    ("tp-over-budget", llmd("a").tp(8).gpu(max_gpus=4), "tuning.tensorParallelSize must be <= gpu.maxGPUs"),
    ("seqs-zero", llmd("a").max_num_seqs(0), "tuning.maxNumSeqs must be Auto or an integer from 1 to 4096"),
    (
        "seqs-word",
        llmd("a").max_num_seqs("Many"),
        "tuning.maxNumSeqs must be Auto or an integer from 1 to 4096",
    ),
    ("min-over-max", llmd("a").replicas(5, 2), "replicas.min must be <= replicas.max"),
    (
        "count-over-max",
        llmd("a").replicas(1, 2, count=3),
        "replicas.count must lie within replicas.min..replicas.max",
    ),
    (
        "count-under-min",
        llmd("a").replicas(2, 4, count=1),
        "replicas.count must lie within replicas.min..replicas.max",
    ),
    (
        "prompt-over-context",
        llmd("a").context(1024, 1000, 100),
        "workload.promptTokens + workload.outputTokens must be <= workload.maxModelLen",
    ),
    (
        "default-prompt-over-context",
        llmd("a").context(1024),
        "workload.promptTokens + workload.outputTokens must be <= workload.maxModelLen",
    ),
    (
        "kv-lowercase",
        llmd("a").kv_dtype("fp8"),
        'Unsupported value: "fp8": supported values: "Auto", "Model", "FP8"',
    ),
    ("feedback-mode", llmd("a").feedback("Sometimes"), 'supported values: "Off", "Observe", "Adjust"'),
    (
        "quantization-int4",
        llmd("a").set("tuning.quantization", "INT4"),
        'Unsupported value: "INT4": supported values: "None", "FP8", "Auto"',
    ),
    ("tpot-zero", llmd("a").tpot_ms(0), "spec.slo.tpotMilliseconds: Invalid value: 0"),
    ("tpot-missing", llmd("a").without("slo.tpotMilliseconds"), "spec.slo.tpotMilliseconds: Required value"),
    ("context-tiny", llmd("a").context(64, 16, 16), "spec.workload.maxModelLen: Invalid value: 64"),
    (
        "utilization-99",
        llmd("a").set("tuning.gpuMemoryUtilizationPercent", 99),
        "spec.tuning.gpuMemoryUtilizationPercent: Invalid value: 99",
    ),
    (
        "utilization-fraction",
        llmd("a").set("tuning.gpuMemoryUtilizationPercent", 0.9),
        "spec.tuning.gpuMemoryUtilizationPercent: Invalid value",
    ),
    (
        "hub-repo-no-owner",
        llmd("a").hub("x/y").set("model.hub.repository", "llama"),
        "spec.model.hub.repository",
    ),
    ("name-not-dns1035", llmd("9lives"), "metadata.name must be a DNS-1035 label"),
    (
        "trust-remote-code-word",
        llmd("a").set("model.trustRemoteCode", "yes"),
        "spec.model.trustRemoteCode in body must be of type boolean",
    ),
    (
        "product-and-products",
        llmd("a").gpu("NVIDIA-H100-80GB-HBM3").set("gpu.products", ["NVIDIA-H200"]),
        "gpu.product pins one GPU product and gpu.products lists those kvright may choose among",
    ),
    ("products-empty", llmd("a").set("gpu.products", []), "spec.gpu.products: Invalid value: 0"),
    (
        "shared-prefix-over-prompt",
        llmd("a").context(8192, 1000, 100).shared_prefix(2000),
        "workload.sharedPrefixTokens must be <= workload.promptTokens",
    ),
    (
        "lora-adapter-names-repeat",
        llmd("a").set(
            "lora", {"adapters": [{"name": "sql", "source": "org/sql"}, {"name": "sql", "source": "/m"}]}
        ),
        "spec.lora.adapters[1]: Duplicate value",
    ),
]


@pytest.mark.parametrize(
    ("builder", "message"), [(b, m) for _, b, m in INVALID], ids=[i for i, _, _ in INVALID]
)
def test_invalid_objects_are_rejected_with_the_crds_message(
    ns: tuple[Kube, str], builder: Any, message: str
) -> None:
    kube, name = ns
    with pytest.raises(KubeError) as info:
        dry_run(kube, name, builder.obj())
    assert info.value.status == 422, str(info.value)
    assert message in str(info.value)


@pytest.fixture(scope="module")
def stored(ns: tuple[Kube, str]) -> dict[str, Any]:
    """One valid LLMDeployment, stored, that the update cases overwrite (dry run)."""
    kube, name = ns
    obj = llmd("edited").obj()
    obj["metadata"]["namespace"] = name
    created: dict[str, Any] = kube.request("POST", llmd_path(name), body=obj)
    return created


#: Every invalid case but the name's: a name is immutable, so an edit cannot carry a bad one.
EDITS = [case for case in INVALID if case[0] != "name-not-dns1035"]


@pytest.mark.parametrize(("builder", "message"), [(b, m) for _, b, m in EDITS], ids=[i for i, _, _ in EDITS])
def test_invalid_edits_are_rejected_like_invalid_creates(
    ns: tuple[Kube, str], stored: dict[str, Any], builder: Any, message: str
) -> None:
    kube, name = ns
    meta = stored["metadata"]
    edit = {**builder.obj(), "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion")}}
    with pytest.raises(KubeError) as info:
        kube.request("PUT", llmd_path(name, meta["name"]), body=edit, query=[("dryRun", "All")])
    assert info.value.status == 422, str(info.value)
    assert message in str(info.value)


def test_a_spec_written_through_the_status_subresource_is_dropped(
    ns: tuple[Kube, str], stored: dict[str, Any]
) -> None:
    """Another actor's write to /status can change status only: the spec it carries is ignored (so it
    cannot bypass validation), while its status lands (kvright repairs that: test_operator.py)."""
    kube, name = ns
    path = llmd_path(name, stored["metadata"]["name"]) + "/status"
    body = {"spec": {"slo": {"percentile": 75}}, "status": {"observedGeneration": 99}}
    written = kube.request("PATCH", path, body=body, content_type="application/merge-patch+json")
    assert written["spec"]["slo"] == stored["spec"]["slo"]
    assert written["status"]["observedGeneration"] == 99


def test_at_least_fifteen_invalid_cases() -> None:
    assert len(INVALID) >= 15


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_samples_are_accepted(ns: tuple[Kube, str], path: Path) -> None:
    kube, name = ns
    obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    stored = dry_run(kube, name, obj)
    assert stored["spec"]["model"] == {"trustRemoteCode": False, **obj["spec"]["model"]}


def test_defaults_are_applied(ns: tuple[Kube, str]) -> None:
    kube, name = ns
    stored = dry_run(kube, name, llmd("minimal").obj())["spec"]
    assert stored["model"]["trustRemoteCode"] is False  # the repository's code runs only when asked
    assert stored["workload"] == {
        "maxModelLen": 8192,
        "promptTokens": 1024,
        "outputTokens": 256,
        "concurrency": 32,
        "sharedPrefixTokens": 0,
    }
    assert stored["slo"] == {"tpotMilliseconds": 50, "percentile": 90}
    assert stored["tuning"] == {
        "tensorParallelSize": "Auto",
        "maxNumSeqs": "Auto",
        "kvCacheDtype": "Auto",
        "gpuMemoryUtilizationPercent": 90,
        "quantization": "None",
    }
    assert stored["feedback"] == {"mode": "Observe", "windowSeconds": 60, "cooldownSeconds": 600}
    assert stored["replicas"] == {"min": 1, "max": 4}
    assert stored["resources"] == {"cpu": "4", "memory": "32Gi"}
    assert stored["gpu"] == {}


def test_pinned_integers_and_a_scale_count_are_accepted(ns: tuple[Kube, str]) -> None:
    kube, name = ns
    stored = dry_run(kube, name, llmd("pinned").tp(4).max_num_seqs(64).replicas(0, 3, count=0).obj())["spec"]
    assert (stored["tuning"]["tensorParallelSize"], stored["tuning"]["maxNumSeqs"]) == (4, 64)
    assert stored["replicas"] == {"min": 0, "max": 3, "count": 0}
