"""The LLMDeployment spec as typed values, parsed from the custom resource's dict.

The CRD (``crds/llmdeployment.yaml``) is the authority on what a valid object is; the API server
defaults and validates before kvright sees an object. This module still checks every field it reads,
so a spec that slipped past an older CRD (or a unit test's hand-made dict) becomes one
:class:`SpecError` line saying what is wrong and what is accepted, never a ``KeyError`` in a handler.
Defaults here are the CRD's defaults, written once in :data:`DEFAULTS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "API_VERSION",
    "DEFAULTS",
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "ArchitectureRef",
    "FeedbackMode",
    "FeedbackSpec",
    "GPUSpec",
    "KVCacheDtype",
    "LLMDeploymentSpec",
    "ModelSpec",
    "ReplicasSpec",
    "ResourcesSpec",
    "SLOSpec",
    "SecretKeyRef",
    "SpecError",
    "TuningSpec",
    "WorkloadSpec",
    "parse_spec",
]

GROUP: Final = "kvright.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "LLMDeployment"
PLURAL: Final = "llmdeployments"

KVCacheDtype = Literal["Auto", "Model", "FP8"]
FeedbackMode = Literal["Off", "Observe", "Adjust"]
ArchitectureSource = Literal["Catalog", "ConfigMap", "Hub"]

_KV_DTYPES: Final = ("Auto", "Model", "FP8")
_FEEDBACK_MODES: Final = ("Off", "Observe", "Adjust")
_PERCENTILES: Final = (50, 90, 95, 99)

# The CRD's defaults, one place. (The API server applies them; parse_spec applies them again so a
# dict that never went through the API server parses the same way.)
DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    "workload": {"maxModelLen": 8192, "promptTokens": 1024, "outputTokens": 256, "concurrency": 32},
    "slo": {"percentile": 90},
    "tuning": {
        "tensorParallelSize": "Auto",
        "maxNumSeqs": "Auto",
        "kvCacheDtype": "Auto",
        "gpuMemoryUtilizationPercent": 90,
    },
    "feedback": {"mode": "Observe", "windowSeconds": 300, "cooldownSeconds": 600},
    "replicas": {"min": 1, "max": 4},
    "resources": {"cpu": "4", "memory": "32Gi"},
    "configMapRef": {"key": "config.json"},
    "hub": {"revision": "main"},
    "tokenSecretRef": {"key": "token"},
}


class SpecError(ValueError):
    """A spec field is missing, mistyped or out of range; ``str()`` is one line naming the field,
    what it holds and what is accepted. ``field`` is the dotted path (``spec.slo.percentile``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True, kw_only=True)
class SecretKeyRef:
    """A key in a Secret (or ConfigMap) in the LLMDeployment's namespace."""

    name: str
    key: str


@dataclass(frozen=True, kw_only=True)
class ArchitectureRef:
    """Where the model's architecture comes from: exactly one source."""

    source: ArchitectureSource
    """Catalog (a built-in id), ConfigMap (a config.json in a ConfigMap) or Hub (fetched)."""
    catalog_id: str | None = None
    """The catalog id when source is Catalog."""
    config_map: SecretKeyRef | None = None
    """The ConfigMap name and key holding config.json when source is ConfigMap."""
    hub_repository: str | None = None
    """owner/name on the hub when source is Hub."""
    hub_revision: str = "main"
    """Branch, tag or commit on the hub."""
    hub_token: SecretKeyRef | None = None
    """Optional Secret key holding a hub token (also handed to vLLM as HF_TOKEN)."""


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    name: str
    """What vLLM serves (`vllm serve NAME`)."""
    served_model_name: str
    """The name clients use in the OpenAI API."""
    architecture: ArchitectureRef


@dataclass(frozen=True, kw_only=True)
class GPUSpec:
    product: str | None
    """GFD product label; None means "the one GPU type the cluster has"."""
    max_gpus: int | None
    """Upper bound on GPUs over all replicas; None means what the cluster has."""


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec:
    max_model_len: int
    """Longest context a request may use, tokens (--max-model-len)."""
    prompt_tokens: int
    output_tokens: int
    concurrency: int
    """Requests in flight at peak over all replicas."""


@dataclass(frozen=True, kw_only=True)
class SLOSpec:
    tpot_milliseconds: int
    ttft_milliseconds: int | None
    percentile: int


@dataclass(frozen=True, kw_only=True)
class TuningSpec:
    tensor_parallel_size: int | None
    """Pinned TP, or None for Auto."""
    max_num_seqs: int | None
    """Pinned --max-num-seqs, or None for Auto."""
    kv_cache_dtype: KVCacheDtype
    gpu_memory_utilization_percent: int


@dataclass(frozen=True, kw_only=True)
class FeedbackSpec:
    mode: FeedbackMode
    window_seconds: int
    cooldown_seconds: int


@dataclass(frozen=True, kw_only=True)
class ReplicasSpec:
    min: int
    max: int
    count: int | None
    """A pinned count (kubectl scale / HPA through the scale subresource), or None: kvright sizes it."""


@dataclass(frozen=True, kw_only=True)
class ResourcesSpec:
    cpu: str
    memory: str


@dataclass(frozen=True, kw_only=True)
class LLMDeploymentSpec:
    model: ModelSpec
    image: str | None
    gpu: GPUSpec
    workload: WorkloadSpec
    slo: SLOSpec
    tuning: TuningSpec
    feedback: FeedbackSpec
    replicas: ReplicasSpec
    resources: ResourcesSpec


# --- field readers: each names the field and what is accepted ------------------------------------


def _obj(parent: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        if required:
            raise SpecError(f"{path}.{key}", "is required (an object)")
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(f"{path}.{key}", f"must be an object, got {type(value).__name__}")
    return value


def _int(
    parent: Mapping[str, Any],
    key: str,
    path: str,
    lo: int,
    hi: int,
    default: int | None = None,
) -> int:
    value = parent.get(key, default)
    field = f"{path}.{key}"
    if value is None:
        raise SpecError(field, f"is required (an integer from {lo} to {hi})")
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, f"must be an integer from {lo} to {hi}, got {value!r}")
    if not lo <= value <= hi:
        raise SpecError(field, f"{value} is out of range; accepted: {lo} to {hi}")
    return value


def _opt_int(parent: Mapping[str, Any], key: str, path: str, lo: int, hi: int) -> int | None:
    if parent.get(key) is None:
        return None
    return _int(parent, key, path, lo, hi)


def _str(
    parent: Mapping[str, Any], key: str, path: str, *, default: str | None = None, max_len: int = 253
) -> str:
    value = parent.get(key, default)
    field = f"{path}.{key}"
    if value is None:
        raise SpecError(field, "is required (a non-empty string)")
    if not isinstance(value, str) or not value:
        raise SpecError(field, f"must be a non-empty string, got {value!r}")
    if len(value) > max_len:
        raise SpecError(field, f"is {len(value)} characters long; accepted: at most {max_len}")
    return value


def _opt_str(parent: Mapping[str, Any], key: str, path: str, *, max_len: int = 253) -> str | None:
    if parent.get(key) is None:
        return None
    return _str(parent, key, path, max_len=max_len)


def _auto_or_int(parent: Mapping[str, Any], key: str, path: str, lo: int, hi: int) -> int | None:
    """``Auto`` (None) or a pinned integer in [lo, hi]."""
    value = parent.get(key, "Auto")
    if value == "Auto" or value is None:
        return None
    if isinstance(value, str) and value.isdigit():  # int-or-string: "4" is 4
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{path}.{key}", f"must be Auto or an integer from {lo} to {hi}, got {value!r}")
    return _int({key: value}, key, path, lo, hi)


def _enum(parent: Mapping[str, Any], key: str, path: str, accepted: tuple[str, ...], default: str) -> str:
    value = parent.get(key, default)
    if value not in accepted:
        raise SpecError(f"{path}.{key}", f"{value!r} is not accepted; accepted: {', '.join(accepted)}")
    return str(value)


def _quantity(parent: Mapping[str, Any], key: str, path: str, default: str) -> str:
    value = parent.get(key, default)
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise SpecError(f"{path}.{key}", f"must be a quantity such as 8 or 64Gi, got {value!r}")
    text = str(value)
    if not text or len(text) > 32:
        raise SpecError(f"{path}.{key}", f"must be a quantity such as 8 or 64Gi, got {value!r}")
    return text


def _secret_ref(parent: Mapping[str, Any], key: str, path: str, default_key: str) -> SecretKeyRef | None:
    if parent.get(key) is None:
        return None
    ref = _obj(parent, key, path)
    where = f"{path}.{key}"
    return SecretKeyRef(name=_str(ref, "name", where), key=_str(ref, "key", where, default=default_key))


def _architecture(model: Mapping[str, Any], path: str) -> ArchitectureRef:
    named = [k for k in ("architecture", "configMapRef", "hub") if model.get(k) is not None]
    if len(named) != 1:
        got = ", ".join(named) if named else "none"
        raise SpecError(
            path,
            f"needs exactly one of architecture, configMapRef or hub; got {got}",
        )
    if named[0] == "architecture":
        return ArchitectureRef(source="Catalog", catalog_id=_str(model, "architecture", path, max_len=128))
    if named[0] == "configMapRef":
        ref = _secret_ref(model, "configMapRef", path, DEFAULTS["configMapRef"]["key"])
        return ArchitectureRef(source="ConfigMap", config_map=ref)
    hub = _obj(model, "hub", path)
    where = f"{path}.hub"
    repository = _str(hub, "repository", where, max_len=200)
    if repository.count("/") != 1 or repository.startswith("/") or repository.endswith("/"):
        raise SpecError(f"{where}.repository", f"{repository!r} is not accepted; accepted: owner/name")
    return ArchitectureRef(
        source="Hub",
        hub_repository=repository,
        hub_revision=_str(hub, "revision", where, default=DEFAULTS["hub"]["revision"], max_len=200),
        hub_token=_secret_ref(hub, "tokenSecretRef", where, DEFAULTS["tokenSecretRef"]["key"]),
    )


def parse_spec(spec: Mapping[str, Any]) -> LLMDeploymentSpec:
    """The typed spec of one LLMDeployment; raises :class:`SpecError` on the first bad field."""
    if not isinstance(spec, Mapping):
        raise SpecError("spec", f"must be an object, got {type(spec).__name__}")
    p = "spec"
    model = _obj(spec, "model", p, required=True)
    gpu = _obj(spec, "gpu", p)
    workload = _obj(spec, "workload", p)
    slo = _obj(spec, "slo", p, required=True)
    tuning = _obj(spec, "tuning", p)
    feedback = _obj(spec, "feedback", p)
    replicas = _obj(spec, "replicas", p)
    resources = _obj(spec, "resources", p)

    name = _str(model, "name", f"{p}.model")
    wd, sd, td, fd, rd, resd = (
        DEFAULTS["workload"],
        DEFAULTS["slo"],
        DEFAULTS["tuning"],
        DEFAULTS["feedback"],
        DEFAULTS["replicas"],
        DEFAULTS["resources"],
    )
    parsed_workload = WorkloadSpec(
        max_model_len=_int(workload, "maxModelLen", f"{p}.workload", 128, 1_048_576, wd["maxModelLen"]),
        prompt_tokens=_int(workload, "promptTokens", f"{p}.workload", 1, 1_048_576, wd["promptTokens"]),
        output_tokens=_int(workload, "outputTokens", f"{p}.workload", 1, 1_048_576, wd["outputTokens"]),
        concurrency=_int(workload, "concurrency", f"{p}.workload", 1, 1_000_000, wd["concurrency"]),
    )
    if parsed_workload.prompt_tokens + parsed_workload.output_tokens > parsed_workload.max_model_len:
        raise SpecError(
            f"{p}.workload",
            f"promptTokens + outputTokens = "
            f"{parsed_workload.prompt_tokens + parsed_workload.output_tokens} exceeds maxModelLen "
            f"{parsed_workload.max_model_len}; accepted: a sum <= maxModelLen",
        )
    percentile = _int(slo, "percentile", f"{p}.slo", 1, 99, sd["percentile"])
    if percentile not in _PERCENTILES:
        raise SpecError(f"{p}.slo.percentile", f"{percentile} is not accepted; accepted: 50, 90, 95, 99")
    parsed_replicas = ReplicasSpec(
        min=_int(replicas, "min", f"{p}.replicas", 0, 1000, rd["min"]),
        max=_int(replicas, "max", f"{p}.replicas", 1, 1000, rd["max"]),
        count=_opt_int(replicas, "count", f"{p}.replicas", 0, 1000),
    )
    if parsed_replicas.min > parsed_replicas.max:
        raise SpecError(
            f"{p}.replicas",
            f"min {parsed_replicas.min} > max {parsed_replicas.max}; accepted: min <= max",
        )
    count = parsed_replicas.count
    if count is not None and not parsed_replicas.min <= count <= parsed_replicas.max:
        raise SpecError(
            f"{p}.replicas.count",
            f"{count} is out of range; accepted: {parsed_replicas.min} to {parsed_replicas.max}",
        )
    parsed_gpu = GPUSpec(
        product=_opt_str(gpu, "product", f"{p}.gpu", max_len=128),
        max_gpus=_opt_int(gpu, "maxGPUs", f"{p}.gpu", 1, 4096),
    )
    parsed_tuning = TuningSpec(
        tensor_parallel_size=_auto_or_int(tuning, "tensorParallelSize", f"{p}.tuning", 1, 64),
        max_num_seqs=_auto_or_int(tuning, "maxNumSeqs", f"{p}.tuning", 1, 4096),
        kv_cache_dtype=_enum(tuning, "kvCacheDtype", f"{p}.tuning", _KV_DTYPES, td["kvCacheDtype"]),  # type: ignore[arg-type]
        gpu_memory_utilization_percent=_int(
            tuning, "gpuMemoryUtilizationPercent", f"{p}.tuning", 50, 98, td["gpuMemoryUtilizationPercent"]
        ),
    )
    tp = parsed_tuning.tensor_parallel_size
    if tp is not None and parsed_gpu.max_gpus is not None and tp > parsed_gpu.max_gpus:
        raise SpecError(
            f"{p}.tuning.tensorParallelSize",
            f"{tp} exceeds gpu.maxGPUs {parsed_gpu.max_gpus}; accepted: at most gpu.maxGPUs",
        )
    return LLMDeploymentSpec(
        model=ModelSpec(
            name=name,
            served_model_name=_opt_str(model, "servedModelName", f"{p}.model") or name,
            architecture=_architecture(model, f"{p}.model"),
        ),
        image=_opt_str(spec, "image", p, max_len=512),
        gpu=parsed_gpu,
        workload=parsed_workload,
        slo=SLOSpec(
            tpot_milliseconds=_int(slo, "tpotMilliseconds", f"{p}.slo", 1, 10_000),
            ttft_milliseconds=_opt_int(slo, "ttftMilliseconds", f"{p}.slo", 1, 600_000),
            percentile=percentile,
        ),
        tuning=parsed_tuning,
        feedback=FeedbackSpec(
            mode=_enum(feedback, "mode", f"{p}.feedback", _FEEDBACK_MODES, fd["mode"]),  # type: ignore[arg-type]
            window_seconds=_int(feedback, "windowSeconds", f"{p}.feedback", 30, 86_400, fd["windowSeconds"]),
            cooldown_seconds=_int(
                feedback, "cooldownSeconds", f"{p}.feedback", 0, 86_400, fd["cooldownSeconds"]
            ),
        ),
        replicas=parsed_replicas,
        resources=ResourcesSpec(
            cpu=_quantity(resources, "cpu", f"{p}.resources", resd["cpu"]),
            memory=_quantity(resources, "memory", f"{p}.resources", resd["memory"]),
        ),
    )
