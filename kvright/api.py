"""The LLMDeployment custom resource as pydantic models: the one source of its spec and status.

The models below are the CRD. Their field constraints, ``Literal`` enums, defaults and docstrings become
``crds/llmdeployment.yaml``'s ``openAPIV3Schema`` (``make crd`` runs :mod:`kvright.crdgen`), and each
cross-field :class:`Rule` is both a CEL ``x-kubernetes-validations`` rule there and a model validator
here, declared once side by side. So the API server and :func:`parse_spec` accept the same objects, and a
bound is changed in one place.

Python uses snake_case attribute names; the aliases are the camelCase Kubernetes users write
(``tpotMilliseconds``). Validation is strict, as the API server's is: ``"4"`` is not an integer and
``True`` is not a number. :func:`parse_spec` turns pydantic's ``ValidationError`` into one
:class:`SpecError` line naming the field (camelCase, ``spec.slo.percentile``), what it holds and what is
accepted, never a ``KeyError`` or a multi-line report in a handler.

Pure: pydantic and the standard library only (an import-linter contract checks it).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Final, Literal, NamedTuple, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "ArchitectureRef",
    "ArchitectureStatus",
    "Condition",
    "ConfigMapKeyRef",
    "EndpointPickerSpec",
    "FeedbackMode",
    "FeedbackSpec",
    "GPUSpec",
    "GPUStatus",
    "HubSource",
    "ImageWeights",
    "KVCacheDtype",
    "LLMDeployment",
    "LLMDeploymentSpec",
    "LLMDeploymentStatus",
    "LoraAdapter",
    "LoraSpec",
    "ModelSpec",
    "ObjectMeta",
    "PVCWeights",
    "PlanStatus",
    "PredictionStatus",
    "ReplicasSpec",
    "ResourcesSpec",
    "RoutingSpec",
    "RoutingStatus",
    "Rule",
    "SLOSpec",
    "SecretKeyRef",
    "SpecError",
    "TuningSpec",
    "WeightSource",
    "WeightsCache",
    "WorkloadSpec",
    "accepted",
    "parse_spec",
    "resolve_schema",
]

GROUP: Final = "kvright.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "LLMDeployment"
PLURAL: Final = "llmdeployments"

KVCacheDtype = Literal["Auto", "Model", "FP8"]
Quantization = Literal["None", "FP8", "Auto"]
FeedbackMode = Literal["Off", "Observe", "Adjust"]
FailureMode = Literal["FailOpen", "FailClose"]
RoutingMode = Literal["InferencePool", "Service"]
ArchitectureSource = Literal["Catalog", "ConfigMap", "Hub"]
WeightSourceType = Literal["Hub", "PVC", "Image", "Cache"]

#: The JSON Schema marker of a Kubernetes int-or-string field; kvright.crdgen turns it into the CRD's.
INT_OR_STRING: Final = "x-kubernetes-int-or-string"
#: Where a model's CEL rules sit in its JSON Schema (the CRD's own key).
VALIDATIONS: Final = "x-kubernetes-validations"
#: metadata.name: the Service is named after the object, so a DNS-1035 label.
DNS_1035: Final = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
#: A PersistentVolumeClaim's name: a DNS-1123 subdomain.
DNS_1123_SUBDOMAIN: Final = "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
#: A hub repository id, owner/name.
HUB_REPOSITORY: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$"
#: A folder inside a volume: relative, segments that do not start with "." (so never ".." or absolute).
VOLUME_PATH: Final = r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$"


class SpecError(ValueError):
    """A spec field is missing, mistyped or out of range; ``str()`` is one line naming the field,
    what it holds and what is accepted. ``field`` is the dotted path (``spec.slo.percentile``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


# --- the vocabulary the models are written in ----------------------------------------------------


class Rule(NamedTuple):
    """A cross-field invariant, stated once in both languages that enforce it.

    ``cel`` is the CRD's ``x-kubernetes-validations`` rule (the API server checks it), ``holds`` the same
    predicate over the parsed model (parse_spec checks it), ``message`` what both report. ``got`` says what
    the object holds, appended to parse_spec's message."""

    cel: str
    message: str
    holds: Callable[[Any], bool]
    got: Callable[[Any], str] | None = None


class _Object(BaseModel):
    """A CRD object: strict like the API server, immutable, camelCase on the wire.

    Fields are documented by the docstring under them (that text is the CRD's description and what
    ``kubectl explain`` prints). Defaults are validated like input. Unknown keys are ignored, as the API
    server prunes them."""

    model_config = ConfigDict(
        strict=True,
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_default=True,
        extra="ignore",
    )
    rules: ClassVar[tuple[Rule, ...]] = ()
    """Cross-field invariants of this object, in the CRD's order."""

    @model_validator(mode="after")
    def _rules_hold(self) -> Self:
        for rule in self.rules:
            if not rule.holds(self):
                got = f" (got {rule.got(self)})" if rule.got is not None else ""
                raise ValueError(f"{rule.message}{got}")
        return self

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        if cls.rules:
            handler.resolve_ref_schema(schema)[VALIDATIONS] = [
                {"rule": r.cel, "message": r.message} for r in cls.rules
            ]
        return schema


class _AutoOrInt:
    """``Auto`` or a pinned integer: ``None`` in Python (kvright chooses) and ``"Auto"`` on the wire; in the
    CRD an int-or-string, which kvright.crdgen guards with a CEL rule naming both. Marks
    ``Annotated[int, Field(ge=lo, le=hi)] | None``, whose bounds it keeps."""

    @staticmethod
    def _none_if_auto(value: object) -> object:
        return None if value == "Auto" else value

    @staticmethod
    def _auto_if_none(value: int | None) -> int | str:
        return "Auto" if value is None else value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(
            self._none_if_auto,
            handler(source),
            serialization=core_schema.plain_serializer_function_ser_schema(self._auto_if_none),
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        integers = [s for s in handler(schema)["anyOf"] if s.get("type") != "null"]
        return {"anyOf": [{"const": "Auto", "type": "string"}, *integers], INT_OR_STRING: True}


class _Quantity:
    """A Kubernetes quantity written as a number (``8``) or a string (``"500m"``, ``"64Gi"``), held as
    the string; in the CRD an int-or-string. Marks ``str``."""

    @staticmethod
    def _str_if_int(value: object) -> object:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self._str_if_int, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), INT_OR_STRING: True}


AUTO: Final = _AutoOrInt()
QUANTITY: Final = _Quantity()

Name = Annotated[str, Field(min_length=1, max_length=253)]
Int64 = Annotated[int, Field(json_schema_extra={"format": "int64"})]


# --- spec -----------------------------------------------------------------------------------------


class SecretKeyRef(_Object):
    """A key in a Secret in this namespace."""

    name: Name
    key: Name = "token"


class ConfigMapKeyRef(_Object):
    """A ConfigMap in this namespace holding the model's config.json."""

    name: Name
    key: Name = "config.json"


class HubSource(_Object):
    """Fetch config.json from the Hugging Face hub (or KVRIGHT_HF_ENDPOINT)."""

    repository: Annotated[
        str,
        Field(min_length=3, max_length=200, pattern=HUB_REPOSITORY),
    ]
    """Repository id, owner/name."""
    revision: Annotated[str, Field(min_length=1, max_length=200)] = "main"
    """Branch, tag or commit."""
    token_secret_ref: SecretKeyRef | None = None
    """A Secret in this namespace with a hub token; also given to vLLM as HF_TOKEN."""


class ArchitectureRef(_Object):
    """Where the model's architecture comes from, as kvright.resolve reads it (derived from
    :class:`ModelSpec`; not a CRD field)."""

    source: ArchitectureSource
    """Catalog (a built-in id), ConfigMap (a config.json in a ConfigMap) or Hub (fetched)."""
    catalog_id: str | None = None
    """The catalog id when source is Catalog."""
    config_map: SecretKeyRef | ConfigMapKeyRef | None = None
    """The ConfigMap name and key holding config.json when source is ConfigMap."""
    hub_repository: str | None = None
    """owner/name on the hub when source is Hub."""
    hub_revision: str = "main"
    """Branch, tag or commit on the hub."""
    hub_token: SecretKeyRef | None = None
    """Optional Secret key holding a hub token (also handed to vLLM as HF_TOKEN)."""


# --- where the weights come from (spec.model.source) -------------------------------------------------

VolumePath = Annotated[str, Field(min_length=1, max_length=512, pattern=VOLUME_PATH)]


class PVCWeights(_Object):
    """An existing PersistentVolumeClaim in this namespace that holds the checkpoint (config.json, the
    tokenizer and the safetensors); every vLLM pod mounts it read-only."""

    claim_name: Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_1123_SUBDOMAIN)]
    """The claim's name."""
    path: VolumePath | None = None
    """The checkpoint's folder inside the claim (relative); left out, the claim's root."""


class ImageWeights(_Object):
    """An OCI image (or artifact) holding the checkpoint, mounted read-only as a Kubernetes image volume
    (GA in Kubernetes 1.36): the kubelet pulls it before the container starts."""

    reference: Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[^\s]+$")]
    """The image reference (registry/repository:tag or @sha256:digest)."""
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    """The kubelet's pull policy for the image volume."""
    path: VolumePath | None = None
    """The checkpoint's folder inside the image (relative); left out, the image's root."""


class WeightsCache(_Object):
    """A shared cache kvright fills once: a PersistentVolumeClaim named <name>-weights and a download Job
    that puts model.name at its revision into it (with the hub token of model.hub.tokenSecretRef, if
    any); every replica then mounts the claim read-only, so a restart or a new replica loads from it."""

    size: Annotated[str, Field(pattern=r"^[0-9]+([KMGT]i?)?$"), QUANTITY] | None = None
    """The claim's storage request, e.g. 200Gi; left out, the checkpoint's bytes plus 15% and 1 GiB."""
    storage_class_name: Annotated[str, Field(min_length=1, max_length=253)] | None = None
    """The claim's StorageClass; left out, the cluster's default."""
    access_mode: Literal["ReadWriteMany", "ReadWriteOnce"] = "ReadWriteMany"
    """ReadWriteMany (replicas on any node share the claim) or ReadWriteOnce (the download Job and every
    replica must then run on one node)."""
    revision: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """The hub revision (branch, tag or commit) to download; left out, model.hub.revision, else main."""


class WeightSource(_Object):
    """Where the vLLM pods get the model's weights. vLLM is pointed at the mounted folder (and keeps the
    public name through --served-model-name); the startup probe's budget follows the source."""

    rules: ClassVar = (
        Rule(
            "self.type == 'PVC' ? has(self.pvc) : !has(self.pvc)",
            "model.source.pvc (its claimName) is required with type PVC and allowed with no other type",
            holds=lambda s: (s.type == "PVC") == (s.pvc is not None),
            got=lambda s: f"type {s.type}, pvc {'set' if s.pvc is not None else 'unset'}",
        ),
        Rule(
            "self.type == 'Image' ? has(self.image) : !has(self.image)",
            "model.source.image (its reference) is required with type Image and allowed with no other type",
            holds=lambda s: (s.type == "Image") == (s.image is not None),
            got=lambda s: f"type {s.type}, image {'set' if s.image is not None else 'unset'}",
        ),
        Rule(
            "self.type == 'Cache' || !has(self.cache)",
            "model.source.cache is allowed with type Cache only",
            holds=lambda s: s.type == "Cache" or s.cache is None,
            got=lambda s: f"type {s.type}",
        ),
    )

    type: WeightSourceType = "Hub"
    """Hub (vLLM downloads model.name at every pod start, the default), PVC (an existing claim), Image (an
    OCI image volume) or Cache (a claim kvright fills once with a download Job)."""
    pvc: PVCWeights | None = None
    image: ImageWeights | None = None
    cache: WeightsCache | None = None



def _sources(m: ModelSpec) -> list[str]:
    named = (("architecture", m.catalog_id), ("configMapRef", m.config_map_ref), ("hub", m.hub))
    return [key for key, value in named if value is not None]


class ModelSpec(_Object):
    """What to serve. Name the architecture exactly one way."""

    rules: ClassVar = (
        Rule(
            "[has(self.architecture), has(self.configMapRef), has(self.hub)].filter(x, x).size() == 1",
            "model needs exactly one of architecture (a catalog id), configMapRef (a config.json in a "
            "ConfigMap) or hub (a repository to fetch config.json from)",
            holds=lambda m: len(_sources(m)) == 1,
            got=lambda m: ", ".join(_sources(m)) or "none",
        ),
        Rule(
            f"!has(self.source) || self.source.type != 'Cache' || self.name.matches('{HUB_REPOSITORY}')",
            "model.source type Cache downloads model.name from the hub, so model.name must be a repository "
            "id (owner/name)",
            holds=lambda m: m.source is None
            or m.source.type != "Cache"
            or re.fullmatch(HUB_REPOSITORY, m.name) is not None,
            got=lambda m: m.name,
        ),
    )

    name: Name
    """The model vLLM serves (`vllm serve NAME`), usually a Hugging Face repository id."""
    served_name: Name | None = Field(default=None, alias="servedModelName")
    """The name clients use in the OpenAI API; defaults to model.name."""
    catalog_id: Annotated[str, Field(min_length=1, max_length=128)] | None = Field(
        default=None, alias="architecture"
    )
    """A built-in catalog id (e.g. llama-3.1-70b); see `kvright catalog`."""
    config_map_ref: ConfigMapKeyRef | None = None
    hub: HubSource | None = None
    source: WeightSource | None = None
    """Where the weights come from; left out, the hub (vLLM downloads model.name at every pod start)."""
    trust_remote_code: bool = False
    """Let vLLM run the Python the model repository ships (`--trust-remote-code`): needed where config.json
    names a model_type that neither vLLM nor its transformers has a class for, and only its auto_map code
    reads (`kvright inspect` says so); kvright refuses such a model until this is true. The code runs in the
    vLLM pods with the model's access: set it only for repositories you trust."""

    @property
    def served_model_name(self) -> str:
        """The name clients use in the OpenAI API."""
        return self.served_name or self.name

    @property
    def architecture(self) -> ArchitectureRef:
        """The one architecture source, as kvright.resolve reads it."""
        if self.catalog_id is not None:
            return ArchitectureRef(source="Catalog", catalog_id=self.catalog_id)
        if self.config_map_ref is not None:
            return ArchitectureRef(source="ConfigMap", config_map=self.config_map_ref)
        assert self.hub is not None  # the rule above: exactly one source
        return ArchitectureRef(
            source="Hub",
            hub_repository=self.hub.repository,
            hub_revision=self.hub.revision,
            hub_token=self.hub.token_secret_ref,
        )


#: A GPU product as GPU Feature Discovery labels it (nvidia.com/gpu.product).
ProductLabel = Annotated[str, Field(min_length=1, max_length=128)]


class GPUSpec(_Object):
    """Which GPUs, and how many at most."""

    rules: ClassVar = (
        Rule(
            "!(has(self.product) && has(self.products))",
            "gpu.product pins one GPU product and gpu.products lists those kvright may choose among; "
            "set one or neither",
            holds=lambda g: g.product is None or g.products is None,
        ),
    )

    product: ProductLabel | None = None
    """GPU product as GPU Feature Discovery labels it (nvidia.com/gpu.product), pinned. Left out, kvright
    plans every product present (or every one in gpu.products) and chooses the cheapest that holds the
    workload at the SLO; status.alternatives says what the others would cost and why they lost."""
    products: Annotated[list[ProductLabel], Field(min_length=1, max_length=16)] | None = None
    """The GPU products kvright may choose among (GPU Feature Discovery labels); left out, every product
    present in the cluster."""
    max_gpus: Annotated[int, Field(ge=1, le=4096)] | None = Field(default=None, alias="maxGPUs")
    """Upper bound on GPUs for all replicas together; left out, what the cluster has."""


class WorkloadSpec(_Object):
    """The traffic to plan for."""

    rules: ClassVar = (
        Rule(
            "self.promptTokens + self.outputTokens <= self.maxModelLen",
            "workload.promptTokens + workload.outputTokens must be <= workload.maxModelLen "
            "(the context a request may use)",
            holds=lambda w: w.prompt_tokens + w.output_tokens <= w.max_model_len,
            got=lambda w: f"{w.prompt_tokens} + {w.output_tokens} > {w.max_model_len}",
        ),
        Rule(
            "self.sharedPrefixTokens <= self.promptTokens",
            "workload.sharedPrefixTokens must be <= workload.promptTokens (the shared part of a prompt)",
            holds=lambda w: w.shared_prefix_tokens <= w.prompt_tokens,
            got=lambda w: f"{w.shared_prefix_tokens} > {w.prompt_tokens}",
        ),
    )

    max_model_len: Annotated[int, Field(ge=128, le=1_048_576)] = 8192
    """Longest context (prompt + output tokens) one request may use (--max-model-len)."""
    prompt_tokens: Annotated[int, Field(ge=1, le=1_048_576)] = 1024
    """Typical prompt length in tokens."""
    output_tokens: Annotated[int, Field(ge=1, le=1_048_576)] = 256
    """Typical output length in tokens."""
    concurrency: Annotated[int, Field(ge=1, le=1_000_000)] = 32
    """Requests in flight at peak, across all replicas."""
    shared_prefix_tokens: Annotated[int, Field(ge=0, le=1_048_576)] = 0
    """Tokens every prompt starts with (a system prompt, few-shot examples). vLLM's prefix caching (on by
    default) holds their KV blocks once for all requests and prefills them once, so more sequences fit
    and the first token comes sooner; kvright plans with both."""


class SLOSpec(_Object):
    """The latency targets."""

    tpot_milliseconds: Annotated[int, Field(ge=1, le=10_000)]
    """Target time per output token at the percentile, in milliseconds. Prometheus reads it from vLLM's
    histogram, whose bounds are 10, 25, 50, 75, 100, 150, 200, 300 ... ms: a target on a bound is judged
    exactly, one between bounds only as coarsely as the bucket around it."""
    ttft_milliseconds: Annotated[int, Field(ge=1, le=600_000)] | None = None
    """Target time to first token at the percentile, in milliseconds (optional)."""
    percentile: Literal[50, 90, 95, 99] = 90
    """The percentile the targets hold at; one of 50, 90, 95, 99."""


class TuningSpec(_Object):
    """Auto lets kvright choose; a pinned value is used as given (and checked against the architecture)."""

    tensor_parallel_size: Annotated[Annotated[int, Field(ge=1, le=64)] | None, AUTO] = None
    """Auto, or a pinned --tensor-parallel-size from 1 to 64."""
    max_num_seqs: Annotated[Annotated[int, Field(ge=1, le=4096)] | None, AUTO] = None
    """Auto, or a pinned --max-num-seqs from 1 to 4096."""
    kv_cache_dtype: KVCacheDtype = "Auto"
    """Auto (kvright chooses), Model (the model's dtype, vLLM's "auto") or FP8."""
    gpu_memory_utilization_percent: Annotated[int, Field(ge=50, le=98)] = 90
    """--gpu-memory-utilization as an integer percent."""
    quantization: Quantization = "None"
    """Weights of an unquantized checkpoint quantized at load: None (the default: it changes the model),
    FP8 (always: --quantization fp8_per_tensor), Auto (only when the unquantized weights do not fit or
    miss the SLO). A quantized checkpoint is always served in its own format."""


#: An adapter name vLLM 0.32 reads from ``--lora-modules name=source``: the item must hold ``=`` and no
#: ``,`` (else vLLM parses it as JSON) and splits at the first ``=``; the name is the model id clients
#: request, so kvright keeps it to letters, digits, ``.``, ``_`` and ``-``.
LORA_ADAPTER_NAME: Final = r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$"
#: An adapter source: a Hugging Face repository id or a path, without ``,`` or whitespace.
LORA_ADAPTER_SOURCE: Final = r"^[^,\s]+$"
#: The ranks vLLM 0.32 accepts for ``--max-lora-rank`` (``vllm/config/lora.py``, ``MaxLoRARanks``).
LoraRank = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]


class LoraAdapter(_Object):
    """One LoRA adapter vLLM serves from the start (--lora-modules name=source)."""

    name: Annotated[str, Field(min_length=1, max_length=128, pattern=LORA_ADAPTER_NAME)]
    """The model id clients request to use this adapter (letters, digits, '.', '_' and '-')."""
    source: Annotated[str, Field(min_length=1, max_length=512, pattern=LORA_ADAPTER_SOURCE)]
    """A Hugging Face repository id (org/adapter, downloaded by vLLM with the model's token) or a path in
    the vLLM container."""


class LoraSpec(_Object):
    """LoRA adapters (vLLM's --enable-lora). Every resident adapter gets GPU buffers at maxRank over the
    model's layers, taken from the KV cache, so fewer sequences fit; kvright plans with them."""

    rules: ClassVar = (
        Rule(
            "!has(self.maxCPULoras) || self.maxCPULoras >= self.maxLoras",
            "lora.maxCPULoras must be >= lora.maxLoras (the host cache holds the GPU's adapters too)",
            holds=lambda s: s.max_cpu_loras is None or s.max_cpu_loras >= s.max_loras,
            got=lambda s: f"maxCPULoras {s.max_cpu_loras}, maxLoras {s.max_loras}",
        ),
    )

    max_loras: Annotated[int, Field(ge=1, le=256)] = 1
    """Adapters resident on each GPU at once (--max-loras); requests for others wait for a slot."""
    max_rank: LoraRank = 16
    """Largest adapter rank (--max-lora-rank): 1, 8, 16, 32, 64, 128, 256, 320 or 512; lower ranks are
    padded to it."""
    max_cpu_loras: Annotated[int, Field(ge=1, le=4096)] | None = Field(default=None, alias="maxCPULoras")
    """Adapters cached in host memory (--max-cpu-loras, at least maxLoras); left out, maxLoras."""
    # A list keyed by name: the API server itself refuses two adapters of one name (a CEL rule comparing
    # every pair exceeds the schema's CEL cost budget, and the real API server refuses such a CRD).
    adapters: Annotated[
        list[LoraAdapter],
        Field(
            max_length=64,
            json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        ),
    ] = []
    """Adapters served from the start, names unique (each is a model id clients request); others can be
    loaded at run time where vLLM allows it."""

    @model_validator(mode="after")
    def _adapter_names_unique(self) -> Self:
        names = [a.name for a in self.adapters]
        if len(set(names)) != len(names):
            raise ValueError(f"lora.adapters names must be unique (got {', '.join(names)})")
        return self


class FeedbackSpec(_Object):
    """Correcting the plan against live TPOT from Prometheus."""

    mode: FeedbackMode = "Observe"
    """Off (no feedback), Observe (report observed latency), Adjust (also re-plan)."""
    window_seconds: Annotated[int, Field(ge=30, le=86_400)] = 60
    """The window latency percentiles are measured over."""
    cooldown_seconds: Annotated[int, Field(ge=0, le=86_400)] = 600
    """Least time between two adjustments."""


class ReplicasSpec(_Object):
    """How many vLLM replicas: kvright sizes the count within min..max unless it is pinned."""

    rules: ClassVar = (
        Rule(
            "self.min <= self.max",
            "replicas.min must be <= replicas.max",
            holds=lambda r: r.min <= r.max,
            got=lambda r: f"min {r.min}, max {r.max}",
        ),
        Rule(
            "!has(self.count) || (self.count >= self.min && self.count <= self.max)",
            "replicas.count must lie within replicas.min..replicas.max",
            holds=lambda r: r.count is None or r.min <= r.count <= r.max,
            got=lambda r: f"count {r.count}, min {r.min}, max {r.max}",
        ),
    )

    min: Annotated[int, Field(ge=0, le=1000)] = 1
    """Fewest replicas."""
    max: Annotated[int, Field(ge=1, le=1000)] = 4
    """Most replicas."""
    count: Annotated[int, Field(ge=0, le=1000)] | None = None
    """A pinned replica count (written by kubectl scale or an HPA); leave out to let kvright size it."""


class ResourcesSpec(_Object):
    """CPU and memory requests of the vLLM container (GPUs come from the plan)."""

    cpu: Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?m?$"), QUANTITY] = "4"
    """CPU request, e.g. 4 or 3500m."""
    memory: Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?([KMGT]i?)?$"), QUANTITY] = "32Gi"
    """Memory request, e.g. 32Gi: vLLM's own; kvright adds what the model keeps in host memory (Qwen3.8's
    n-gram tables)."""


class EndpointPickerSpec(_Object):
    """The endpoint picker (a gRPC ext-proc Service, such as the Gateway API Inference Extension's) that a
    gateway asks which vLLM pod of the InferencePool takes each request. One picker serves one pool."""

    name: Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_1035)]
    """The picker's Service, in this namespace."""
    port: Annotated[int, Field(ge=1, le=65535)] = 9002
    """The Service's ext-proc port (9002 is the upstream picker's)."""
    failure_mode: FailureMode = "FailClose"
    """What the gateway does when the picker does not answer: FailClose (the request fails; the upstream
    default) or FailOpen (the gateway forwards it to a pod of its own choosing)."""


class RoutingSpec(_Object):
    """How requests reach the vLLM pods. The Service named after the LLMDeployment always does; when the
    cluster serves the Gateway API Inference Extension (inference.networking.k8s.io/v1), an InferencePool of
    the same name also selects the serving pods, for a Gateway's HTTPRoute to send requests through the
    endpoint picker."""

    endpoint_picker: EndpointPickerSpec | None = None
    """The InferencePool's endpoint picker; left out, the operator's default (the chart's
    inferencePool.endpointPicker: a Service named <name>-epp on port 9002 unless changed there)."""


def _tp_within_budget(s: LLMDeploymentSpec) -> bool:
    tp, budget = s.tuning.tensor_parallel_size, s.gpu.max_gpus
    return tp is None or budget is None or tp <= budget


class LLMDeploymentSpec(_Object):
    """What to serve and the latency it must meet; kvright works out how to serve it."""

    rules: ClassVar = (
        Rule(
            "!has(self.gpu) || !has(self.gpu.maxGPUs) || !has(self.tuning) || "
            "!has(self.tuning.tensorParallelSize) || type(self.tuning.tensorParallelSize) == string || "
            "self.tuning.tensorParallelSize <= self.gpu.maxGPUs",
            "tuning.tensorParallelSize must be <= gpu.maxGPUs",
            holds=_tp_within_budget,
            got=lambda s: f"tensorParallelSize {s.tuning.tensor_parallel_size}, maxGPUs {s.gpu.max_gpus}",
        ),
    )

    model: ModelSpec
    image: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    """The vLLM container image; defaults to the operator's KVRIGHT_VLLM_IMAGE."""
    gpu: GPUSpec = GPUSpec()
    workload: WorkloadSpec = WorkloadSpec()
    slo: SLOSpec
    tuning: TuningSpec = TuningSpec()
    feedback: FeedbackSpec = FeedbackSpec()
    replicas: ReplicasSpec = ReplicasSpec()
    resources: ResourcesSpec = ResourcesSpec()
    routing: RoutingSpec = RoutingSpec()
    lora: LoraSpec | None = None
    """LoRA adapters; left out, LoRA is off."""


# --- status (written by kvright; the models state its schema) --------------------------------------


class ArchitectureStatus(_Object):
    """The architecture the plan was made for, and where it came from."""

    source: str | None = None
    name: str | None = None
    num_layers: int | None = None
    num_attention_heads: int | None = None
    num_kv_heads: int | None = Field(default=None, alias="numKVHeads")
    weight_bytes: Int64 | None = None


class GPUStatus(_Object):
    """The GPU inventory the plan was made against."""

    product: str | None = None
    gpus_per_node: int | None = None
    nodes: int | None = None
    allocatable_gpus: int | None = Field(default=None, alias="allocatableGPUs")
    free_gpus: int | None = Field(default=None, alias="freeGPUs")
    """Allocatable GPUs of the product not held by other workloads' pods when the product was chosen
    (this deployment's own pods count as free); absent when kvright did not choose the product or could
    not list pods."""


class AlternativeStatus(_Object):
    """One GPU product weighed for this LLMDeployment, cheapest feasible first."""

    product: str | None = None
    feasible: bool | None = None
    gpus: int | None = None
    usd_per_hour: float | None = None
    """GPUs x the product's price per GPU-hour (the operator's prices, else the catalog's list price)."""
    usd_per_million_output_tokens: float | None = None
    """At the planned load."""
    plan: str | None = None
    """The plan on this product in words, or why none fits."""
    why: str | None = None
    """chosen, or why it lost."""


class PlanStatus(_Object):
    """What kvright chose; every value is on the vLLM command line."""

    gpu_product: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    """Attention engines per replica (with expert parallelism), each with maxNumSeqs seats."""
    expert_parallel: bool | None = None
    nodes_per_replica: int | None = None
    """Nodes one replica spans: more than one runs the replica as a LeaderWorkerSet group."""
    gpus_per_replica: int | None = None
    layout: str | None = None
    """The layout in words (``TP 8 x PP 2``, ``DP 8 + EP``)."""
    max_num_seqs: int | None = None
    kv_cache_dtype: str | None = None
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization_percent: int | None = None
    replicas: int | None = None
    gpus: int | None = None
    quantization: str | None = None
    """--quantization when kvright quantizes the weights at load (fp8_per_tensor), or the method of a legacy
    GPTQ / AWQ checkpoint whose quantization is only in quantize_config.json (gptq, awq); absent otherwise."""
    vllm_args: list[str] | None = None
    """The flags every node of a replica runs; a multi-node replica's leader and workers add their own."""
    vllm_args_by_role: dict[str, list[str]] | None = None
    """Each role's full flags when a replica spans nodes (``leader``, ``worker``)."""
    drain_seconds: int | None = None
    """vLLM's --shutdown-timeout in the pods (the grace period adds the preStop pause and 5 s): twice the
    longest request by the prediction, the SLO or what was measured, at least 60 s. Kept while the flags
    stay the same, so a new measurement alone never restarts the pods."""


class PredictionStatus(_Object):
    """What the roofline model predicts for the plan at the workload."""

    model_config = ConfigDict(extra="allow")

    tpot_milliseconds: float | None = None
    """The engine's TPOT at the SLO's percentile at the planned batch (what the plan is sized on)."""
    tpot_mean_milliseconds: float | None = None
    """Mean TPOT at the planned batch."""
    tpot_histogram_milliseconds: float | None = None
    """The TPOT percentile as Prometheus will read it from vLLM's histogram (histogram_quantile)."""
    percentile: int | None = None
    """The percentile the TPOT and TTFT predictions hold at."""
    ttft_milliseconds: float | None = None
    kv_cache_tokens_per_replica: Int64 | None = None
    """Tokens the KV cache of one vLLM engine holds (its "GPU KV cache size"): of the whole replica, or of
    each of its data-parallel engines."""
    weight_bytes_per_gpu: Int64 | None = Field(default=None, alias="weightBytesPerGPU")
    kv_cache_bytes_per_gpu: Int64 | None = Field(default=None, alias="kvCacheBytesPerGPU")
    prefix_cache_hit_percent: float | None = None
    """Share of prompt tokens the plan expects vLLM's prefix cache to serve (the shared prefix's whole
    blocks over the prompt); status.observed.prefixCacheHitPercent is what vLLM reports."""
    bottleneck: str | None = None
    max_num_seqs_bound_by: str | None = None
    """The planner's rule that sets max-num-seqs: vllm-cap, pinned, memory, prefill, tpot or ttft."""
    calibration: float | None = None
    """The calibration scale the plan was made with (1 = the uncorrected serving model)."""
    calibration_tail: float | None = None
    """The calibration's spread multiplier the plan was made with."""
    cold_start_seconds: float | None = None
    """Predicted time from a pod's start to Ready from the spec's weight source (capacity.coldstart: the
    weights' bytes over the source's bandwidth plus vLLM's own start); the feedback loop weighs a move
    that restarts pods by it."""


class RoutingStatus(_Object):
    """How requests reach the vLLM pods now."""

    mode: RoutingMode | None = None
    """InferencePool (an InferencePool selects the serving pods; a gateway routes through its endpoint
    picker) or Service (the cluster serves no InferencePool API: clients use the Service)."""
    inference_pool: str | None = None
    """The InferencePool's name, when mode is InferencePool."""
    endpoint_picker: str | None = None
    """The pool's endpoint picker as service:port, when it has one."""
    service: str | None = None
    """The ClusterIP Service, which reaches the same pods in either mode."""
    message: str | None = None
    """Why this mode, in words."""


class ColdStartStatus(_Object):
    """The weight source's bandwidth learned from the vLLM pods' own starts (kvright.podstarts)."""

    source: Literal["hub", "pvc", "image", "cache"] | None = None
    """The spec's weight source the starts were observed with (a new source starts over)."""
    learned_phase: Literal["fetch", "read"] | None = None
    """The phase whose bandwidth the starts correct: fetch (a download or an image pull at every start)
    or read (the volume)."""
    learned_bytes_per_second: Int64 | None = None
    """That phase's bandwidth, learned (an EWMA on seconds per byte over the starts)."""
    default_bytes_per_second: Int64 | None = None
    """The documented default it started from (docs/capacity.md, "Cold start")."""
    observed_starts: Int64 | None = None
    """Pod starts counted so far."""
    last_start_seconds: float | None = None
    """The last counted start, scheduled to Ready."""
    last_ready_time: Annotated[str, Field(json_schema_extra={"format": "date-time"})] | None = None
    """The Ready time of the last counted pod: a pod is counted once."""


class Condition(_Object):
    """One condition, as the Kubernetes API conventions define it (a list keyed by type)."""

    type: Annotated[str, Field(max_length=316)]
    status: Literal["True", "False", "Unknown"]
    observed_generation: Annotated[Int64, Field(ge=0)] | None = None
    last_transition_time: Annotated[str, Field(json_schema_extra={"format": "date-time"})] | None = None
    reason: Annotated[str, Field(max_length=1024)] | None = None
    message: Annotated[str, Field(max_length=32768)] | None = None


class LLMDeploymentStatus(_Object):
    """What kvright planned, predicted and observed, and the conditions."""

    observed_generation: Int64 | None = None
    architecture: ArchitectureStatus | None = None
    gpu: GPUStatus | None = None
    plan: PlanStatus | None = None
    prediction: PredictionStatus | None = None
    observed: dict[str, Any] | None = None
    """Live measurements from Prometheus (written by the feedback loop)."""
    calibration: dict[str, Any] | None = None
    """The correction learned from observed latency (written by the feedback loop)."""
    replicas: int | None = None
    """vLLM pods that exist (scale subresource)."""
    ready_replicas: int | None = None
    """vLLM pods that are Ready."""
    selector: str | None = None
    """Label selector of the vLLM pods (scale subresource, for an HPA)."""
    deployment: str | None = None
    """Name of the vLLM Deployment."""
    routing: RoutingStatus | None = None
    """Whether requests are routed by an InferencePool or by the Service."""
    cold_start: ColdStartStatus | None = None
    """What the vLLM pods' own starts taught about the weight source's bandwidth; it predicts
    prediction.coldStartSeconds."""
    alternatives: Annotated[list[AlternativeStatus], Field(max_length=32)] | None = None
    """When kvright chose the GPU product (gpu.product left out): every product it weighed, the chosen one
    first, then by cost."""
    conditions: (
        Annotated[
            list[Condition],
            Field(
                json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
            ),
        ]
        | None
    ) = None


# --- the object -----------------------------------------------------------------------------------


# Standard object metadata. The API server lets a CRD constrain only metadata.name and generateName, and
# nothing else on metadata itself, hence no docstring (it would become a description).
class ObjectMeta(_Object):
    name: Annotated[str, Field(max_length=63)] | None = None
    """Children are named after the object and it is a label value: at most 63 characters."""


class LLMDeployment(_Object):
    """A vLLM deployment of one model, right-sized by kvright for a latency target."""

    rules: ClassVar = (
        Rule(
            f'self.metadata.name.matches("{DNS_1035}")',
            "metadata.name must be a DNS-1035 label (lower-case letters, digits and -, starting with a "
            "letter) because the Service is named after it",
            holds=lambda o: o.metadata is None or re.fullmatch(DNS_1035, o.metadata.name or "a") is not None,
        ),
    )

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: LLMDeploymentSpec
    status: LLMDeploymentStatus | None = None


# --- parsing: ValidationError -> one SpecError line -----------------------------------------------


def parse_spec(spec: Mapping[str, Any]) -> LLMDeploymentSpec:
    """The typed spec of one LLMDeployment; raises :class:`SpecError` on the first bad field."""
    try:
        return LLMDeploymentSpec.model_validate(_plain(spec))
    except ValidationError as exc:
        raise _spec_error(exc) from None


def _plain(value: object) -> object:
    """Mappings as dicts (kopf hands over read-only views; strict validation takes dicts)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@functools.cache
def _spec_schema() -> dict[str, Any]:
    return LLMDeploymentSpec.model_json_schema(by_alias=True)


def resolve_schema(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The schema a node stands for: through a ``$ref``, and through ``X | None`` to X."""
    if "$ref" in node:
        return {**defs[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    members = [m for m in node.get("anyOf", ()) if m.get("type") != "null"]
    if len(members) == 1 and not node.get(INT_OR_STRING):
        return resolve_schema({**members[0], **{k: v for k, v in node.items() if k != "anyOf"}}, defs)
    return node


def _at(loc: Sequence[int | str]) -> tuple[str, Mapping[str, Any]]:
    """The camelCase path and the schema of the field an error's ``loc`` points at (pydantic's union
    member tags in ``loc`` are not fields and end the walk)."""
    schema = _spec_schema()
    defs = schema.get("$defs", {})
    node: Mapping[str, Any] = schema
    path = ["spec"]
    for part in loc:
        resolved = resolve_schema(node, defs)
        if isinstance(part, int) and "items" in resolved:  # a list item: spec.lora.adapters[0]
            node = resolved["items"]
            path[-1] += f"[{part}]"
            continue
        properties = resolved.get("properties", {})
        if part not in properties:
            break
        node = properties[part]
        path.append(str(part))
    return ".".join(path), resolve_schema(node, defs)


def accepted(node: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> str:
    """What a field's JSON Schema accepts, in words: ``an integer from 1 to 64``, ``Auto or ...``."""
    node = resolve_schema(node, defs or {})
    if "anyOf" in node:
        return " or ".join(accepted(m, defs) for m in node["anyOf"] if m.get("type") != "null")
    if "const" in node:
        return str(node["const"])
    if "enum" in node:
        return "one of " + ", ".join(str(v) for v in node["enum"])
    kind = node.get("type")
    if kind in ("integer", "number"):
        noun = "an integer" if kind == "integer" else "a number"
        lo, hi = node.get("minimum"), node.get("maximum")
        if lo is not None and hi is not None:
            return f"{noun} from {lo} to {hi}"
        return noun + (f" >= {lo}" if lo is not None else "") + (f" <= {hi}" if hi is not None else "")
    if kind == "string":
        lo, hi = node.get("minLength"), node.get("maxLength")
        text = "an integer or a string" if node.get(INT_OR_STRING) else "a string"
        if lo is not None and hi is not None:
            text += f" of {lo} to {hi} characters"
        elif hi is not None:
            text += f" of at most {hi} characters"
        elif lo:
            text = "a non-empty string"
        if "pattern" in node:
            text += f" matching {node['pattern']}"
        return text
    if kind == "array":
        return "a list"
    return "an object"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _spec_error(exc: ValidationError) -> SpecError:
    """The first error as one line: the field, what is wrong, what is accepted."""
    error = exc.errors(include_url=False)[0]
    path, node = _at(error["loc"])
    kind, value = error["type"], error.get("input")
    what = accepted(node, _spec_schema().get("$defs", {}))
    if kind == "missing":
        return SpecError(path, f"is required ({what})")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return SpecError(path, f"must be an object, got {type(value).__name__}")
    if kind == "value_error":  # a Rule that does not hold: its message says what is accepted
        return SpecError(path, str(error["ctx"]["error"]))
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        return SpecError(path, f"{_shown(value)} is out of range; accepted: {what}")
    if kind in ("string_too_short", "string_too_long"):
        return SpecError(path, f"{_shown(value)} has {len(value)} characters; accepted: {what}")
    return SpecError(path, f"{_shown(value)} is not accepted; accepted: {what}")
