"""kvright.resolve: architecture from the catalog, a ConfigMap's config.json, or the hub.

The hub is a real HTTP server on 127.0.0.1 (http.server in a thread) that serves config.json files,
demands a token for a gated repository, and fails a set number of times before answering; only the
sleep between retries is replaced (it records the backoff instead of waiting). The Kubernetes reads
are a dict behind the KubeReader protocol (the unit's edge).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import capacity
from kvright.api import ArchitectureRef, SecretKeyRef
from kvright.resolve import HubClient, ResolveError, resolve
from tests.builders import llama_8b_config

LLAMA_CONFIG = llama_8b_config()
MODELOPT = capacity.catalog_entry("llama-3.1-70b-fp8")
"""nvidia/Llama-3.1-70B-Instruct-FP8: ModelOpt 0.23 put its FP8 quantization in hf_quant_config.json only."""
QUANTIZED = {**LLAMA_CONFIG, "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}


#: Qwen3-Embedding's modules.json: its config.json names a CausalLM, its pooling module makes vLLM pool.
POOLING_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
]


#: TheBloke's GPTQ uploads: the quantization only in AutoGPTQ's file, beside a plain config.json.
AUTOGPTQ = {"bits": 4, "group_size": 128, "desc_act": False, "sym": True}


class Hub:
    """State of the fake hub: what it serves and how it misbehaves."""

    def __init__(self) -> None:
        self.failures_left = 0
        self.requests: list[tuple[str, str | None]] = []


@pytest.fixture
def hub() -> Iterator[tuple[Hub, str]]:
    state = Hub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            auth = self.headers.get("Authorization")
            state.requests.append((self.path, auth))
            if self.path.startswith("/flaky/") and state.failures_left > 0:
                state.failures_left -= 1
                return self._send(503, b"busy")
            if self.path.startswith("/gated/") and auth != "Bearer s3cret":
                return self._send(401, b"gated")
            if self.path.startswith("/modelopt/"):
                if self.path.endswith("/resolve/main/config.json"):
                    return self._send(200, json.dumps(MODELOPT["config"]).encode())
                if self.path.endswith("/resolve/main/hf_quant_config.json"):
                    return self._send(200, json.dumps(MODELOPT["hf_quant_config"]).encode())
            if self.path.startswith("/s3mirror/") and not self.path.endswith("/config.json"):
                return self._send(403, b"AccessDenied")  # object storage: a missing key without ListBucket
            if self.path == "/thebloke/llama/resolve/main/quantize_config.json":
                return self._send(200, json.dumps(AUTOGPTQ).encode())
            if self.path == "/embedding/qwen3/resolve/main/modules.json":
                return self._send(200, json.dumps(POOLING_MODULES).encode())
            if self.path == "/quantized/llama/resolve/main/config.json":
                return self._send(200, json.dumps(QUANTIZED).encode())
            if self.path.endswith("/resolve/main/config.json") and not self.path.startswith("/missing/"):
                if self.path.startswith("/notjson/"):
                    return self._send(200, b"<html>")
                if self.path.startswith("/badconfig/"):
                    return self._send(200, json.dumps({"model_type": "llama"}).encode())
                return self._send(200, json.dumps(LLAMA_CONFIG).encode())
            return self._send(404, b"not found")

        def _send(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Kube:
    def __init__(
        self,
        config_maps: Mapping[str, Mapping[str, str]] | None = None,
        secrets: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.config_maps = dict(config_maps or {})
        self.secrets = dict(secrets or {})

    def config_map_data(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return self.config_maps.get(f"{namespace}/{name}")

    def secret_data(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return self.secrets.get(f"{namespace}/{name}")


def client(endpoint: str, sleeps: list[float] | None = None, attempts: int = 3) -> HubClient:
    record = sleeps if sleeps is not None else []
    return HubClient(endpoint, attempts=attempts, backoff_seconds=0.5, timeout_seconds=5, sleep=record.append)


def hub_ref(repo: str, token: SecretKeyRef | None = None) -> ArchitectureRef:
    return ArchitectureRef(source="Hub", hub_repository=repo, hub_revision="main", hub_token=token)


def test_catalog() -> None:
    r = resolve(
        ArchitectureRef(source="Catalog", catalog_id="llama-3.1-70b"),
        namespace="ns",
        model_name="m",
        kube=Kube(),
        hub=client("http://127.0.0.1:9"),
    )
    assert (r.source, r.detail, r.architecture.num_layers) == ("Catalog", "llama-3.1-70b", 80)


def test_catalog_unknown_lists_ids() -> None:
    with pytest.raises(ResolveError) as info:
        resolve(
            ArchitectureRef(source="Catalog", catalog_id="gpt-9"),
            namespace="ns",
            model_name="m",
            kube=Kube(),
            hub=client("http://127.0.0.1:9"),
        )
    assert info.value.reason == "ArchitectureUnknown"
    assert "llama-3.1-70b" in str(info.value)
    assert not info.value.retryable


def test_config_map() -> None:
    kube = Kube(config_maps={"ns/cfg": {"config.json": json.dumps(LLAMA_CONFIG)}})
    ref = ArchitectureRef(source="ConfigMap", config_map=SecretKeyRef(name="cfg", key="config.json"))
    r = resolve(ref, namespace="ns", model_name="org/custom", kube=kube, hub=client("http://127.0.0.1:9"))
    assert (r.source, r.detail) == ("ConfigMap", "ns/cfg[config.json]")
    assert (r.architecture.num_layers, r.architecture.num_kv_heads) == (32, 8)


@pytest.mark.parametrize(
    ("config_maps", "reason", "text", "retryable"),
    [
        ({}, "ConfigMapMissing", "the ConfigMap does not exist", True),
        ({"ns/cfg": {"other": "{}"}}, "ConfigMapMissing", "keys: other", True),
        ({"ns/cfg": {"config.json": "not json"}}, "ArchitectureInvalid", "is not JSON", False),
        ({"ns/cfg": {"config.json": "[1]"}}, "ArchitectureInvalid", "holds a JSON list", False),
        (
            {"ns/cfg": {"config.json": '{"model_type": "llama"}'}},
            "ArchitectureInvalid",
            "ConfigMap ns/cfg",
            False,
        ),
    ],
    ids=["missing-configmap", "missing-key", "not-json", "not-an-object", "incomplete-config"],
)
def test_config_map_errors(
    config_maps: dict[str, dict[str, str]], reason: str, text: str, retryable: bool
) -> None:
    ref = ArchitectureRef(source="ConfigMap", config_map=SecretKeyRef(name="cfg", key="config.json"))
    with pytest.raises(ResolveError) as info:
        resolve(ref, namespace="ns", model_name="m", kube=Kube(config_maps), hub=client("http://127.0.0.1:9"))
    assert (info.value.reason, info.value.retryable) == (reason, retryable)
    assert text in str(info.value)
    assert "\n" not in str(info.value)


def test_hub_fetch(hub: tuple[Hub, str]) -> None:
    state, endpoint = hub
    r = resolve(
        hub_ref("meta/llama"), namespace="ns", model_name="meta/llama", kube=Kube(), hub=client(endpoint)
    )
    assert (r.source, r.detail, r.architecture.hidden_size) == ("Hub", "meta/llama@main", 4096)
    # no quantization_config: vLLM would look for ModelOpt's file beside it, and so does kvright (404 here)
    # then for a legacy GPTQ / AWQ file (vLLM reads one with --quantization), and for sentence-transformers'
    # modules.json, whose pooling module would make vLLM pool (all 404 here)
    assert state.requests == [
        ("/meta/llama/resolve/main/config.json", None),
        ("/meta/llama/resolve/main/hf_quant_config.json", None),
        ("/meta/llama/resolve/main/quantize_config.json", None),
        ("/meta/llama/resolve/main/quant_config.json", None),
        ("/meta/llama/resolve/main/modules.json", None),
    ]
    assert r.architecture.weights.method == "none"


def test_hub_token_from_secret(hub: tuple[Hub, str]) -> None:
    state, endpoint = hub
    kube = Kube(secrets={"ns/hf": {"token": "s3cret\n"}})
    r = resolve(
        hub_ref("gated/llama", SecretKeyRef(name="hf", key="token")),
        namespace="ns",
        model_name="x",
        kube=kube,
        hub=client(endpoint),
    )
    assert r.architecture.num_layers == 32
    assert state.requests == [
        ("/gated/llama/resolve/main/config.json", "Bearer s3cret"),
        ("/gated/llama/resolve/main/hf_quant_config.json", "Bearer s3cret"),
        ("/gated/llama/resolve/main/quantize_config.json", "Bearer s3cret"),
        ("/gated/llama/resolve/main/quant_config.json", "Bearer s3cret"),
        ("/gated/llama/resolve/main/modules.json", "Bearer s3cret"),
    ]


def test_hub_retries_with_backoff_then_succeeds(hub: tuple[Hub, str]) -> None:
    state, endpoint = hub
    state.failures_left = 2
    sleeps: list[float] = []
    r = resolve(hub_ref("flaky/m"), namespace="ns", model_name="x", kube=Kube(), hub=client(endpoint, sleeps))
    assert r.architecture.num_layers == 32
    assert sleeps == [0.5, 1.0]
    assert len(state.requests) == 7  # three tries of config.json, then the four optional files (404)


def test_hub_gives_up_retryably_after_attempts(hub: tuple[Hub, str]) -> None:
    state, endpoint = hub
    state.failures_left = 10
    sleeps: list[float] = []
    with pytest.raises(ResolveError) as info:
        resolve(hub_ref("flaky/m"), namespace="ns", model_name="x", kube=Kube(), hub=client(endpoint, sleeps))
    assert (info.value.reason, info.value.retryable) == ("HubFetchFailed", True)
    assert "failed after 3 attempt(s) (HTTP 503)" in str(info.value)
    assert sleeps == [0.5, 1.0]


def test_a_modelopt_checkpoint_on_the_hub_is_read_with_its_hf_quant_config(hub: tuple[Hub, str]) -> None:
    """Without hf_quant_config.json the 70B FP8 checkpoint would be planned as bf16: twice its weights."""
    state, endpoint = hub
    r = resolve(hub_ref("modelopt/llama"), namespace="ns", model_name="x", kube=Kube(), hub=client(endpoint))
    catalog = capacity.catalog_architecture("llama-3.1-70b-fp8")
    assert r.architecture.weights == catalog.weights
    assert capacity.weight_bytes(r.architecture) == capacity.weight_bytes(catalog)
    assert capacity.weight_bytes(r.architecture) < 0.6 * capacity.weight_bytes(
        capacity.architecture_from_config(MODELOPT["config"])
    )
    assert [path for path, _ in state.requests] == [
        "/modelopt/llama/resolve/main/config.json",
        "/modelopt/llama/resolve/main/hf_quant_config.json",
        "/modelopt/llama/resolve/main/modules.json",
    ]


def test_a_config_with_its_quantization_fetches_no_hf_quant_config(hub: tuple[Hub, str]) -> None:
    state, endpoint = hub
    r = resolve(hub_ref("quantized/llama"), namespace="ns", model_name="x", kube=Kube(), hub=client(endpoint))
    assert r.architecture.weights.method.startswith("fp8")
    assert [path for path, _ in state.requests] == [
        "/quantized/llama/resolve/main/config.json",
        "/quantized/llama/resolve/main/modules.json",
    ]


def test_a_mirror_that_answers_a_missing_hf_quant_config_403_still_resolves(hub: tuple[Hub, str]) -> None:
    state, endpoint = hub
    r = resolve(hub_ref("s3mirror/llama"), namespace="ns", model_name="x", kube=Kube(), hub=client(endpoint))
    assert (r.architecture.num_layers, r.architecture.weights.method) == (32, "none")
    assert len(state.requests) == 5  # no retry of the optional files


def test_a_config_map_may_hold_hf_quant_config_beside_config() -> None:
    data = {
        "config.json": json.dumps(MODELOPT["config"]),
        "hf_quant_config.json": json.dumps(MODELOPT["hf_quant_config"]),
    }
    ref = ArchitectureRef(source="ConfigMap", config_map=SecretKeyRef(name="cfg", key="config.json"))
    nowhere = client("http://127.0.0.1:9")
    r = resolve(ref, namespace="ns", model_name="m", kube=Kube({"ns/cfg": data}), hub=nowhere)
    assert r.architecture.weights == capacity.catalog_architecture("llama-3.1-70b-fp8").weights
    assert r.detail == "ns/cfg[config.json, hf_quant_config.json]"
    broken = Kube({"ns/cfg": {**data, "hf_quant_config.json": "{"}})
    with pytest.raises(ResolveError, match=r"ConfigMap ns/cfg key hf_quant_config\.json is not JSON"):
        resolve(ref, namespace="ns", model_name="m", kube=broken, hub=nowhere)


def test_hub_caches_success(hub: tuple[Hub, str]) -> None:
    state, endpoint = hub
    c = client(endpoint)
    for _ in range(3):
        resolve(hub_ref("meta/llama"), namespace="ns", model_name="x", kube=Kube(), hub=c)
    assert len(state.requests) == 5  # config.json and the answers that the optional files are not there


def test_hub_cache_does_not_lend_a_token_fetch_to_a_tokenless_spec(hub: tuple[Hub, str]) -> None:
    _, endpoint = hub
    c = client(endpoint)
    kube = Kube(secrets={"ns/hf": {"token": "s3cret"}})
    resolve(
        hub_ref("gated/m", SecretKeyRef(name="hf", key="token")),
        namespace="ns",
        model_name="x",
        kube=kube,
        hub=c,
    )
    with pytest.raises(ResolveError) as info:
        resolve(hub_ref("gated/m"), namespace="other", model_name="x", kube=Kube(), hub=c)
    assert "answered 401" in str(info.value)


@pytest.mark.parametrize(
    ("repo", "kube", "token", "reason", "text", "retryable"),
    [
        ("gated/m", Kube(), None, "HubFetchFailed", "set model.hub.tokenSecretRef", False),
        ("gated/m", Kube(), SecretKeyRef(name="hf", key="token"), "TokenSecretMissing", "Secret ns/hf", True),
        ("missing/m", Kube(), None, "HubFetchFailed", "answered 404", False),
        ("notjson/m", Kube(), None, "ArchitectureInvalid", "is not JSON", False),
        ("badconfig/m", Kube(), None, "ArchitectureInvalid", "badconfig/m@main", False),
    ],
    ids=["gated-without-token", "token-secret-missing", "not-found", "not-json", "incomplete-config"],
)
def test_hub_errors(
    hub: tuple[Hub, str],
    repo: str,
    kube: Kube,
    token: SecretKeyRef | None,
    reason: str,
    text: str,
    retryable: bool,
) -> None:
    _, endpoint = hub
    with pytest.raises(ResolveError) as info:
        resolve(hub_ref(repo, token), namespace="ns", model_name="x", kube=kube, hub=client(endpoint))
    assert (info.value.reason, info.value.retryable) == (reason, retryable)
    assert text in str(info.value)


def test_hub_unreachable_is_retryable() -> None:
    sleeps: list[float] = []
    # Port 9 (discard) on loopback: nothing listens, the connection is refused.
    with pytest.raises(ResolveError) as info:
        resolve(
            hub_ref("meta/llama"),
            namespace="ns",
            model_name="x",
            kube=Kube(),
            hub=client("http://127.0.0.1:9", sleeps, attempts=2),
        )
    assert (info.value.reason, info.value.retryable) == ("HubFetchFailed", True)
    assert "ConnectionError" in str(info.value)
    assert sleeps == [0.5]


def test_an_embedding_checkpoint_on_the_hub_is_refused_for_its_pooling_module(hub: tuple[Hub, str]) -> None:
    """vLLM reads modules.json beside config.json and serves a checkpoint with a pooling module with its
    pooling runner: no output tokens, nothing kvright sizes. Refused for good, saying so."""
    _, endpoint = hub
    with pytest.raises(ResolveError) as info:
        resolve(hub_ref("embedding/qwen3"), namespace="ns", model_name="x", kube=Kube(), hub=client(endpoint))
    assert (info.value.reason, info.value.retryable) == ("ArchitectureInvalid", False)
    assert "modules.json lists a sentence-transformers Pooling module" in str(info.value)
    assert "--runner pooling" in str(info.value)


def test_a_config_map_may_hold_modules_json_beside_config() -> None:
    ref = ArchitectureRef(source="ConfigMap", config_map=SecretKeyRef(name="cfg", key="config.json"))
    nowhere = client("http://127.0.0.1:9")
    data = {"config.json": json.dumps(LLAMA_CONFIG), "modules.json": json.dumps(POOLING_MODULES[:1])}
    r = resolve(ref, namespace="ns", model_name="m", kube=Kube({"ns/cfg": data}), hub=nowhere)
    assert r.detail == "ns/cfg[config.json, modules.json]"
    pooled = Kube({"ns/cfg": {**data, "modules.json": json.dumps(POOLING_MODULES)}})
    with pytest.raises(ResolveError, match=r"pooling runner"):
        resolve(ref, namespace="ns", model_name="m", kube=pooled, hub=nowhere)
    broken = Kube({"ns/cfg": {**data, "modules.json": "{}"}})
    with pytest.raises(ResolveError, match=r"holds a JSON dict; accepted: a modules\.json list"):
        resolve(ref, namespace="ns", model_name="m", kube=broken, hub=nowhere)


def test_a_legacy_gptq_checkpoint_on_the_hub_is_weighed_by_its_quantize_config(hub: tuple[Hub, str]) -> None:
    """Weighed as fp16 it would be 3.6 times its size, and the pods could not load it: vLLM reads the file
    only with --quantization gptq, which the architecture now carries (WeightFormat.flag) into the plan."""
    state, endpoint = hub
    r = resolve(hub_ref("thebloke/llama"), namespace="ns", model_name="x", kube=Kube(), hub=client(endpoint))
    assert (r.architecture.weights.method, r.architecture.weights.flag) == ("gptq", "gptq")
    assert [path for path, _ in state.requests] == [
        "/thebloke/llama/resolve/main/config.json",
        "/thebloke/llama/resolve/main/hf_quant_config.json",
        "/thebloke/llama/resolve/main/quantize_config.json",
        "/thebloke/llama/resolve/main/modules.json",
    ]


def test_a_config_map_may_hold_a_legacy_quantize_config_beside_config() -> None:
    ref = ArchitectureRef(source="ConfigMap", config_map=SecretKeyRef(name="cfg", key="config.json"))
    data = {"config.json": json.dumps(LLAMA_CONFIG), "quantize_config.json": json.dumps(AUTOGPTQ)}
    r = resolve(ref, namespace="ns", model_name="m", kube=Kube({"ns/cfg": data}), hub=client("http://127.0.0.1:9"))
    assert r.architecture.weights.flag == "gptq"
    assert r.detail == "ns/cfg[config.json, quantize_config.json]"
