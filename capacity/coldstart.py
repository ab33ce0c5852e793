"""Cold start: how long a vLLM pod takes from scheduled to Ready, by where its weights come from.

A pod's start is a chain of phases; each is either bytes over a bandwidth or a fixed engine cost:

* **fetch** (``checkpoint_bytes / fetch``): the whole checkpoint comes onto the node before vLLM reads
  it. ``hub``: the pod downloads it from the Hugging Face hub into its ``emptyDir`` on every start.
  ``image``: the kubelet pulls the OCI image volume (download and unpack) before the container starts.
  ``pvc`` and ``cache`` fetch nothing at pod start.
* **read** (``node bytes / read``): the GPUs of one node read their weights from the volume at once and
  share its bandwidth: ``read_bytes_per_gpu x gpus_per_node``.
* **GPU load** (``read_bytes_per_gpu / gpu_load``): deserialize and copy to the GPU (each GPU its own).
* **engine** (fixed seconds): process start (imports, config, worker spawn, API server), torch.compile,
  CUDA graph capture and the engine's init (profile run, KV-cache allocation, warmup).

``cache`` is a shared PVC that a download Job fills once (``first_fill_seconds``, at the hub's
bandwidth); every later start reads from it, so its ``seconds`` is a restart's.

The defaults (:data:`DEFAULT_SOURCES`, :class:`EngineCosts`) come from published vLLM start logs and
measurements, or are marked as assumptions, in docs/capacity.md ("Cold start"). Each is overridable
(pass a :class:`SourceProfile` or :class:`EngineCosts`) and the bandwidth that dominates a source is
learned from observed pod starts by :func:`learn_bandwidth`.

Pure: no IO, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Literal

from capacity.errors import CapacityError

if TYPE_CHECKING:
    from capacity.planner import PlanResult

__all__ = [
    "BANDWIDTH_BOUNDS",
    "DEFAULT_ENGINE_COSTS",
    "DEFAULT_SOURCES",
    "LEARN_ALPHA",
    "SOURCES",
    "ColdStart",
    "EngineCosts",
    "SourceProfile",
    "cold_start",
    "cold_starts",
    "learn_bandwidth",
    "plan_cold_starts",
    "rollout_seconds",
]

#: Where a pod's weights come from (``spec.model.source``), in the order the CLI prints them.
SOURCES: Final[tuple[str, ...]] = ("hub", "pvc", "image", "cache")

#: The EWMA weight of one observed pod start in :func:`learn_bandwidth`.
LEARN_ALPHA: Final = 0.3

#: A learned bandwidth stays within these (bytes/s): 10 MB/s (a throttled network volume) to 50 GB/s
#: (beyond any single node's NVMe or NIC); a reading outside is a broken measurement, not storage.
BANDWIDTH_BOUNDS: Final = (1e7, 5e10)


def _positive(name: str, value: float | None, *, allow_none: bool = False, allow_zero: bool = False) -> None:
    if value is None and allow_none:
        return
    ok = (
        value is not None
        and not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        raise CapacityError(f"{name} {value!r} is not valid; expected a positive number")


@dataclass(frozen=True, kw_only=True)
class SourceProfile:
    """The bandwidths of one weight source (bytes/s, 1 MB = 1e6 bytes)."""

    read_bytes_per_second: float
    """One node reading the checkpoint from where the pod mounts it (shared by its GPUs)."""
    fetch_bytes_per_second: float | None = None
    """Bringing the whole checkpoint onto the node at every pod start (hub download, image pull); None:
    the weights are already on a volume."""
    fill_bytes_per_second: float | None = None
    """The one-time fill of a shared cache (its download Job); None: nothing is filled once."""

    def __post_init__(self) -> None:
        _positive("read_bytes_per_second", self.read_bytes_per_second)
        _positive("fetch_bytes_per_second", self.fetch_bytes_per_second, allow_none=True)
        _positive("fill_bytes_per_second", self.fill_bytes_per_second, allow_none=True)

    @property
    def learned(self) -> Literal["fetch", "read"]:
        """The phase whose bandwidth a start's duration corrects: the fetch when there is one (it moves
        the whole checkpoint over the slowest link), else the read."""
        return "fetch" if self.fetch_bytes_per_second is not None else "read"

    @property
    def learned_bytes_per_second(self) -> float:
        """The bandwidth :func:`learn_bandwidth` corrects."""
        if self.fetch_bytes_per_second is not None:
            return self.fetch_bytes_per_second
        return self.read_bytes_per_second

    def with_learned(self, bytes_per_second: float) -> SourceProfile:
        """This profile with the learned bandwidth replaced (what :func:`learn_bandwidth` returned)."""
        if self.learned == "fetch":
            return replace(self, fetch_bytes_per_second=bytes_per_second)
        return replace(self, read_bytes_per_second=bytes_per_second)


@dataclass(frozen=True, kw_only=True)
class EngineCosts:
    """vLLM's own start costs, the same for every source (defaults: docs/capacity.md, "Cold start")."""

    process_start_seconds: float = 20.0
    """Container start to engine config: Python imports, config, worker processes, the API server."""
    gpu_load_bytes_per_second: float = 4e9
    """Deserializing the read weights and copying them onto the GPU."""
    torch_compile_seconds: float = 40.0
    """torch.compile with an empty cache (kvright's pods keep ``VLLM_CACHE_ROOT`` on an ``emptyDir``)."""
    cuda_graph_capture_seconds: float = 20.0
    """Capturing the CUDA graphs for the decode batch sizes."""
    engine_init_seconds: float = 15.0
    """The rest of engine init: the profile run, KV-cache allocation, warmup, the first /health."""

    def __post_init__(self) -> None:
        _positive("gpu_load_bytes_per_second", self.gpu_load_bytes_per_second)
        for name in (
            "process_start_seconds",
            "torch_compile_seconds",
            "cuda_graph_capture_seconds",
            "engine_init_seconds",
        ):
            _positive(name, getattr(self, name), allow_zero=True)

    @property
    def fixed_seconds(self) -> float:
        """The costs that do not depend on the weights' bytes."""
        parts = (self.process_start_seconds, self.torch_compile_seconds, self.cuda_graph_capture_seconds)
        return sum(parts) + self.engine_init_seconds


DEFAULT_ENGINE_COSTS: Final = EngineCosts()

#: Default bandwidths per source; where each number comes from is in docs/capacity.md ("Cold start").
DEFAULT_SOURCES: Final[Mapping[str, SourceProfile]] = {
    # Measured: a hub download at ~260 MB/s (16 GB in 61 s), then the emptyDir read at ~490 MB/s (33 s).
    "hub": SourceProfile(fetch_bytes_per_second=250e6, read_bytes_per_second=500e6),
    # Assumption: a network volume between EBS gp3's 125 MiB/s baseline and its 1,000 MiB/s ceiling.
    "pvc": SourceProfile(read_bytes_per_second=250e6),
    # Measured for uncompressed layers (13 GB pulled in 41 s; gzip: ~25 MB/s), then the node's disk.
    "image": SourceProfile(fetch_bytes_per_second=300e6, read_bytes_per_second=500e6),
    # A PVC like "pvc", filled once by a download Job at the hub's bandwidth.
    "cache": SourceProfile(read_bytes_per_second=250e6, fill_bytes_per_second=250e6),
}


@dataclass(frozen=True, kw_only=True)
class ColdStart:
    """A pod's predicted time to Ready from one source, by phase (seconds)."""

    source: str
    """``hub``, ``pvc``, ``image`` or ``cache``."""
    fetch_seconds: float
    """The whole checkpoint onto the node (0 for ``pvc`` and ``cache``)."""
    read_seconds: float
    """One node's GPUs reading their weights from the volume."""
    gpu_load_seconds: float
    """Deserialize and copy onto the GPU."""
    engine_seconds: float
    """Process start, torch.compile, CUDA graphs and engine init."""
    first_fill_seconds: float = 0.0
    """``cache`` only: the download Job that fills the cache once, before the first pod can start."""
    learned: Literal["fetch", "read"] = "read"
    """The phase whose bandwidth :func:`learn_bandwidth` corrects (:attr:`SourceProfile.learned`)."""
    learned_bytes: float = 0.0
    """The bytes that go through that phase."""

    @property
    def seconds(self) -> float:
        """Scheduled to Ready: every phase of a start (a ``cache`` restart: without the first fill)."""
        return self.fetch_seconds + self.read_seconds + self.gpu_load_seconds + self.engine_seconds

    @property
    def learned_seconds(self) -> float:
        """The seconds of the phase whose bandwidth is learned."""
        return self.fetch_seconds if self.learned == "fetch" else self.read_seconds


def cold_start(
    source: str,
    *,
    weight_bytes_per_gpu: float,
    checkpoint_bytes: float | None = None,
    gpus_per_node: int = 1,
    profile: SourceProfile | None = None,
    engine: EngineCosts = DEFAULT_ENGINE_COSTS,
) -> ColdStart:
    """A pod's time to Ready loading ``weight_bytes_per_gpu`` on each of ``gpus_per_node`` GPUs from
    ``source`` (with ``profile``, default :data:`DEFAULT_SOURCES`).

    ``seconds = checkpoint / fetch + gpus_per_node x bytes_per_gpu / read + bytes_per_gpu / gpu_load +
    engine fixed``. ``checkpoint_bytes`` (what a download or an image holds) defaults to one node's
    bytes. A replica across nodes starts its nodes in parallel, so one node's time is the replica's.
    """
    if profile is None:
        if source not in DEFAULT_SOURCES:
            raise CapacityError(
                f"weight source {source!r} is not known; expected one of {', '.join(SOURCES)}"
            )
        profile = DEFAULT_SOURCES[source]
    _positive("weight_bytes_per_gpu", weight_bytes_per_gpu, allow_zero=True)
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise CapacityError(f"gpus_per_node {gpus_per_node!r} is not valid; expected a whole number >= 1")
    node_bytes = weight_bytes_per_gpu * gpus_per_node
    checkpoint = node_bytes if checkpoint_bytes is None else checkpoint_bytes
    _positive("checkpoint_bytes", checkpoint, allow_zero=True)
    fetch = checkpoint / profile.fetch_bytes_per_second if profile.fetch_bytes_per_second else 0.0
    fill = checkpoint / profile.fill_bytes_per_second if profile.fill_bytes_per_second else 0.0
    return ColdStart(
        source=source,
        fetch_seconds=fetch,
        read_seconds=node_bytes / profile.read_bytes_per_second,
        gpu_load_seconds=weight_bytes_per_gpu / engine.gpu_load_bytes_per_second,
        engine_seconds=engine.fixed_seconds,
        first_fill_seconds=fill,
        learned=profile.learned,
        learned_bytes=checkpoint if profile.learned == "fetch" else node_bytes,
    )


def cold_starts(
    *,
    weight_bytes_per_gpu: float,
    checkpoint_bytes: float | None = None,
    gpus_per_node: int = 1,
    profiles: Mapping[str, SourceProfile] = DEFAULT_SOURCES,
    engine: EngineCosts = DEFAULT_ENGINE_COSTS,
) -> dict[str, ColdStart]:
    """:func:`cold_start` for every source in ``profiles``, in their order."""
    return {
        source: cold_start(
            source,
            weight_bytes_per_gpu=weight_bytes_per_gpu,
            checkpoint_bytes=checkpoint_bytes,
            gpus_per_node=gpus_per_node,
            profile=profile,
            engine=engine,
        )
        for source, profile in profiles.items()
    }


def plan_cold_starts(
    result: PlanResult,
    *,
    checkpoint_bytes: float,
    profiles: Mapping[str, SourceProfile] = DEFAULT_SOURCES,
    engine: EngineCosts = DEFAULT_ENGINE_COSTS,
) -> dict[str, ColdStart]:
    """The cold start of one pod of a feasible plan from every source (empty without a plan).

    Each GPU reads at least its even share of the checkpoint (``checkpoint / gpus_per_replica``): weights
    quantized at load (``--quantization fp8_per_tensor``) sit smaller on the GPU than they are on disk.
    """
    if result.plan is None or result.memory is None:
        return {}
    plan = result.plan
    per_gpu = max(float(result.memory.weights_bytes), checkpoint_bytes / plan.gpus_per_replica)
    return cold_starts(
        weight_bytes_per_gpu=per_gpu,
        checkpoint_bytes=checkpoint_bytes,
        gpus_per_node=plan.gpus_per_replica // plan.nodes_per_replica,
        profiles=profiles,
        engine=engine,
    )


def rollout_seconds(start: ColdStart | float, replicas: int, *, max_surge: int = 1) -> float:
    """How long a rollout that restarts every pod takes: kvright rolls with ``maxSurge`` new pods at a
    time and ``maxUnavailable 0``, so ``ceil(replicas / max_surge)`` starts one after another (``start``:
    one pod's cold start, or its seconds). The cost a control law weighs before a change that restarts
    pods."""
    if replicas <= 0:
        return 0.0
    seconds = start.seconds if isinstance(start, ColdStart) else float(start)
    return math.ceil(replicas / max(1, max_surge)) * seconds


def learn_bandwidth(
    previous_bytes_per_second: float,
    observed_seconds: Iterable[float],
    *,
    prediction: ColdStart,
    alpha: float = LEARN_ALPHA,
    bounds: tuple[float, float] = BANDWIDTH_BOUNDS,
) -> float:
    """The source's learned bandwidth (:attr:`SourceProfile.learned`) after observed pod starts.

    Each observation, in order, implies seconds per byte for the learned phase: ``max(0, observed -
    other phases) / learned_bytes``, where the other phases are ``prediction``'s (they do not depend on
    that bandwidth). The EWMA (weight ``alpha``) runs on seconds per byte, not on bandwidth: times add
    and average, and a start quicker than the fixed costs means "no time for bytes", not an infinite
    bandwidth. The result is clamped to ``bounds``. Non-finite or non-positive observations, and a
    prediction that moves no bytes, leave the previous value (clamped).
    """
    low, high = bounds
    bandwidth = min(high, max(low, previous_bytes_per_second))
    if not (math.isfinite(prediction.learned_bytes) and prediction.learned_bytes > 0):
        return bandwidth
    other = prediction.seconds - prediction.learned_seconds
    per_byte = 1.0 / bandwidth
    for seconds in observed_seconds:
        if isinstance(seconds, bool) or not math.isfinite(seconds) or seconds <= 0:
            continue
        implied = max(0.0, seconds - other) / prediction.learned_bytes
        per_byte = (1.0 - alpha) * per_byte + alpha * implied
        per_byte = min(1.0 / low, max(1.0 / high, per_byte))
    return 1.0 / per_byte
