"""The reconcile decision, pure: from gathered facts to children, status and events.

The operator (kvright.operator) is three steps: gather (the LLMDeployment, its architecture, the GPU
inventory, the live Deployment), decide (this module), act (server-side apply the children, patch
status only when it changed, post events). Splitting decide into two calls keeps it pure around the
one thing only acting can tell: :func:`desire` says what should exist; after applying,
:func:`status` folds what the API server answered (the Deployment's rollout) into the new status.

Nothing here raises for any spec the CRD admits (a property test holds it to that): problems become
conditions with a reason and a message that names the fix.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, NamedTuple

import capacity
from kvright import conditions as cond
from kvright import podstarts
from kvright import weights as weight_source
from kvright.api import EndpointPickerSpec, LLMDeploymentSpec, SpecError, WeightSource, parse_spec
from kvright.conditions import Condition, Reason
from kvright.inventory import InventoryError, ProductInventory, choose, pods_fit
from kvright.render import (
    CONTAINER_NAME,
    HTTP_PORT,
    INFERENCE_POOL_API_VERSION,
    LWS_WORKER_INDEX_LABEL,
    Owner,
    VLLMWorkload,
    drain_seconds,
    render_all,
    selector,
)

__all__ = [
    "Desired",
    "Event",
    "Facts",
    "Overrides",
    "Rollout",
    "desire",
    "rollout_from",
    "rollout_from_leader_worker_set",
    "status",
    "status_changed",
]

KV_DTYPES: Final[Mapping[str, str | None]] = {"Auto": None, "Model": "auto", "FP8": "fp8"}
"""spec.tuning.kvCacheDtype to vLLM's --kv-cache-dtype (None: the planner chooses)."""


@dataclass(frozen=True, kw_only=True)
class Overrides:
    """What the feedback loop (kvright.control) feeds back into planning. Defaults change nothing."""

    calibration: capacity.Calibration = capacity.UNCALIBRATED
    """The serving model's calibration the plan is made with (capacity.plan's ``calibration``)."""
    max_num_seqs: int | None = None
    """Pins --max-num-seqs below what the model predicts (a spec pin wins)."""
    replicas: int | None = None
    """Replaces the planned replica count (spec.replicas.count wins; clamped to min..max)."""
    kv_cache_dtype: str | None = None
    """Pins the KV dtype (vLLM spelling) when spec says Auto."""
    tensor_parallel_size: int | None = None
    """Pins TP when spec says Auto."""
    max_num_batched_tokens: int | None = None
    """Pins --max-num-batched-tokens to the plan's own when the loop moves seats or replicas: its choice
    weighs sequences per replica, which a max-num-seqs pin makes equal for every budget, so re-choosing
    would flip the budget and roll the pods for a move that restarts none."""
    shared_prefix_tokens: int | None = None
    """The shared prompt prefix vLLM's prefix cache was seen to serve, when below
    spec.workload.sharedPrefixTokens (planning uses the smaller)."""


class ResolveFailure(NamedTuple):
    """Why the architecture is not known (gathered by kvright.resolve): a condition reason, its message,
    and whether a later reconcile may succeed (retried with backoff)."""

    reason: str
    message: str
    retryable: bool


@dataclass(frozen=True, kw_only=True)
class Facts:
    """Everything gathered for one LLMDeployment."""

    name: str
    namespace: str
    uid: str
    generation: int
    spec: Mapping[str, Any]
    """The raw spec (defaulted by the API server)."""
    current_status: Mapping[str, Any]
    architecture: capacity.Architecture | ResolveFailure | None
    """None when the spec did not parse (resolution was not tried)."""
    architecture_source: str = ""
    """Catalog, ConfigMap or Hub, with where exactly, for status."""
    inventory: Mapping[str, ProductInventory]
    default_image: str
    pod_monitor: bool = False
    """The PodMonitor CRD is installed."""
    pod_monitor_labels: Mapping[str, str] = field(default_factory=dict)
    """Labels the operator adds to every PodMonitor (KVRIGHT_PODMONITOR_LABELS), for a Prometheus that
    selects PodMonitors by label (kube-prometheus-stack's ``release``)."""
    leader_worker_set: bool = False
    """The LeaderWorkerSet API (leaderworkerset.x-k8s.io/v1) is served: replicas may span nodes."""
    inference_pool: bool = False
    """The InferencePool API (inference.networking.k8s.io/v1) is served: an InferencePool routes."""
    endpoint_picker: EndpointPickerSpec | None = None
    """The operator's default endpoint picker for this object's pool (spec.routing.endpointPicker wins)."""
    overrides: Overrides = field(default_factory=Overrides)
    prices: Mapping[str, float] = field(default_factory=dict)
    """US dollars per GPU-hour by catalog id (the operator's KVRIGHT_GPU_PRICES) for choosing the GPU
    product; a product not listed costs its catalog list price."""
    weights: weight_source.Observed | None = None
    """The weights' claim, download Job and pods as read (spec.model.source PVC, Image or Cache); None:
    not read (a PVC or Cache source then waits)."""
    hub_endpoint: str | None = None
    """The hub mirror the operator reads config.json from (KVRIGHT_HF_ENDPOINT) when it is not the public
    hub: the vLLM pods and the cache's download Job download from it too (HF_ENDPOINT)."""
    pods: tuple[Mapping[str, Any], ...] | None = None
    """The vLLM pods as listed while a rollout runs (kvright.podstarts learns the cold start from their
    starts); None: not listed."""
    parsed: LLMDeploymentSpec | SpecError | None = None
    """The spec parsed once per reconcile (the operator's gather passes it; left out, it is parsed here
    on construction). ``dataclasses.replace`` carries it along, so the feedback seam and planning never
    parse again."""

    def __post_init__(self) -> None:
        if self.parsed is None:
            object.__setattr__(self, "parsed", spec_or_error(self.spec))

    @property
    def spec_or_error(self) -> LLMDeploymentSpec | SpecError:
        """The parsed spec, or why it does not parse."""
        assert self.parsed is not None  # set in __post_init__
        return self.parsed


@dataclass(frozen=True, kw_only=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True, kw_only=True)
class Desired:
    """What should exist, before acting."""

    plan_feasible: Condition
    children: tuple[dict[str, Any], ...] = ()
    """To server-side apply, Deployment first; empty when nothing should change."""
    fields: dict[str, Any] = field(default_factory=dict)
    """Status fields known before acting (architecture, gpu, plan, prediction, selector)."""
    replicas: int | None = None
    """Desired vLLM pods (None: not planned)."""
    events: tuple[Event, ...] = ()
    retry_seconds: float | None = None
    """Try again this soon (a transient failure); None: the regular period."""
    weights: Condition | None = None
    """WeightsReady (kvright.weights); None for weights from the hub."""


@dataclass(frozen=True, kw_only=True)
class Rollout:
    """The live Deployment or LeaderWorkerSet as the API server answered the apply (or read it). For a
    LeaderWorkerSet a replica is a group (a leader and its workers)."""

    replicas: int
    ready_replicas: int
    updated_replicas: int
    up_to_date: bool
    """The controller has seen this generation and every replica runs the new template."""
    stalled: str | None = None
    """Why the rollout cannot progress (unschedulable pod, progress deadline), or None."""


#: spec.tuning.quantization -> capacity.Limits.quantization.
_QUANTIZATION: dict[str, capacity.Quantization] = {"None": "none", "FP8": "fp8", "Auto": "auto"}


def spec_or_error(spec: Mapping[str, Any]) -> LLMDeploymentSpec | SpecError:
    try:
        return parse_spec(spec)
    except SpecError as exc:
        return exc


def _infeasible(reason: str, message: str, *, retry: float | None = None, warn: bool = True) -> Desired:
    events = (Event(type="Warning", reason=reason, message=message),) if warn else ()
    return Desired(
        plan_feasible=Condition(
            type=cond.PLAN_FEASIBLE,
            status="Unknown" if retry is not None else "False",
            reason=reason,
            message=message,
        ),
        events=events,
        retry_seconds=retry,
    )


def _plan_pinned(
    facts: Facts,
    arch: capacity.Architecture,
    product: ProductInventory,
    tp: int | None,
    workload: capacity.Workload,
    slo: capacity.SLO,
    limits: capacity.Limits,
) -> capacity.PlanResult | Desired:
    """Plan on the one product the spec pins (or the only one present); a Desired when it cannot."""
    try:
        gpu = capacity.gpu_spec(product.product)
    except capacity.CapacityError as exc:
        return _infeasible(Reason.GPU_PRODUCT_UNKNOWN, f"{exc}; kvright cannot size for this GPU")
    if tp is not None:
        error = capacity.tensor_parallel_error(arch, tp)
        if error is not None:
            valid = capacity.valid_tensor_parallel_sizes(arch, product.max_gpus_per_node)
            return _infeasible(
                Reason.TENSOR_PARALLEL_INVALID,
                f"tuning.tensorParallelSize {tp}: {error}; "
                f"valid here: {', '.join(map(str, valid)) or 'none'}",
            )
        if tp > product.max_gpus_per_node:
            return _infeasible(
                Reason.INFEASIBLE,
                f"tuning.tensorParallelSize {tp} needs {tp} GPUs in one node but the largest "
                f"{product.product} node has {product.max_gpus_per_node}; lower it or set it to Auto",
            )
    calibration = facts.overrides.calibration
    try:
        result = capacity.plan(arch, gpu, workload, slo, limits, calibration=calibration)
        if not result.feasible and not facts.leader_worker_set:
            wider = capacity.plan(
                arch, gpu, workload, slo, replace(limits, max_nodes_per_replica=None), calibration=calibration
            )
            if wider.feasible and wider.plan is not None:
                return _infeasible(
                    Reason.LEADER_WORKER_SET_MISSING,
                    f"one node is not enough ({result.reason}); a replica of {wider.plan.nodes_per_replica} "
                    f"{product.product} nodes ({wider.plan.layout.label}) would serve it, but this cluster "
                    "does not serve the LeaderWorkerSet API (leaderworkerset.x-k8s.io/v1) that runs a "
                    "replica across nodes; install LeaderWorkerSet v0.8.0 or later "
                    "(https://lws.sigs.k8s.io/docs/installation/) and kvright plans it",
                )
    except capacity.CapacityError as exc:
        return _infeasible(Reason.PLAN_INPUT_INVALID, str(exc))
    return result


def _choose_product(
    facts: Facts,
    allowed: Sequence[str] | None,
    arch: capacity.Architecture,
    workload: capacity.Workload,
    slo: capacity.SLO,
    limits_on: Callable[[ProductInventory], capacity.Limits],
) -> tuple[ProductInventory, capacity.PlanResult, list[dict[str, Any]], str | None] | Desired:
    """Plan on every allowed product present and take the cheapest that holds the workload (capacity's
    GPU choice, each product with its own node size and GPU count). Returns the product, its plan, the
    alternatives for status and, when a cheaper product lost, why (else None); a Desired when none fits."""
    wanted = {a.lower() for a in allowed} if allowed is not None else None
    present = sorted(facts.inventory.values(), key=lambda p: p.product)
    candidates = [p for p in present if wanted is None or p.product.lower() in wanted]
    names = ", ".join(p.product for p in present) or "none"
    if not candidates:
        asked = ", ".join(allowed or ())
        return _infeasible(
            Reason.NO_GPU_NODES,
            f"no schedulable node has any of gpu.products ({asked}); products present: {names}",
        )
    by_id: dict[str, ProductInventory] = {}
    for product in candidates:
        try:
            by_id.setdefault(capacity.gpu_spec(product.product).id, product)
        except capacity.CapacityError:
            continue  # a product kvright has no catalog entry for cannot be sized; the others compete
    if not by_id:
        return _infeasible(
            Reason.GPU_PRODUCT_UNKNOWN,
            f"none of the GPU products to choose from ({', '.join(p.product for p in candidates)}) is in "
            "kvright's GPU catalog (kvright catalog lists them); kvright cannot size for them",
        )

    def with_room(product: ProductInventory) -> capacity.Limits:
        # Only the GPUs other workloads' pods leave free are room for this deployment (its own are).
        limits = limits_on(product)
        free = product.free_gpus
        if free is None:
            return limits
        room = free if limits.max_gpus is None else min(limits.max_gpus, free)
        return replace(limits, max_gpus=max(1, room))

    # Products whose nodes other pods fill are not planned; one whose plan's pods would not fit on the
    # nodes' free GPUs (free GPUs spread thin) is dropped and the choice is made again without it.
    full: dict[str, str] = {}
    for gpu_id, product in by_id.items():
        if product.free_gpus == 0:
            full[gpu_id] = f"no room: {product.room()}, other workloads' pods hold the rest"
    choice: capacity.GPUChoice | None = None
    while True:
        open_ids = [i for i in by_id if i not in full]
        if not open_ids:
            break
        try:
            choice = _choose_among(facts, arch, {i: by_id[i] for i in open_ids}, workload, slo, with_room)
        except capacity.CapacityError as exc:
            return _infeasible(Reason.PLAN_INPUT_INVALID, str(exc))
        picked = choice.chosen
        if picked is None or picked.result.plan is None:
            break
        product, plan = by_id[picked.gpu.id], picked.result.plan
        if product.free_by_node is None or inventory_fits(product, plan):
            break
        full[picked.gpu.id] = (
            f"no room for {plan.replicas * plan.nodes_per_replica} pod(s) of "
            f"{plan.gpus_per_replica // plan.nodes_per_replica} GPUs: {product.room()}, "
            f"per node {', '.join(map(str, product.free_by_node))}"
        )
        choice = None
    rows = [] if choice is None else [_alternative(a, by_id[a.gpu.id].product) for a in choice.alternatives]
    rows += [_no_room(by_id[i], why) for i, why in full.items()]
    chosen = None if choice is None else choice.chosen
    if choice is None or chosen is None:
        reasons = "; ".join(f"{row['product']}: {row['plan']}" for row in rows)
        return _infeasible(Reason.INFEASIBLE, f"no GPU product holds the workload: {reasons}")
    price = chosen.usd_per_gpu_hour
    cheaper = [
        f"{by_id[a.gpu.id].product} ({a.result.reason})"
        for a in choice.alternatives
        if not a.feasible and a.usd_per_gpu_hour < price
    ]
    cheaper += [
        f"{by_id[i].product} ({why})"
        for i, why in full.items()
        if capacity.price_per_gpu_hour(capacity.gpu_spec(i), facts.prices) < price
    ]
    return by_id[chosen.gpu.id], chosen.result, rows, "; ".join(cheaper) or None


def _choose_among(
    facts: Facts,
    arch: capacity.Architecture,
    products: Mapping[str, ProductInventory],
    workload: capacity.Workload,
    slo: capacity.SLO,
    limits_on: Callable[[ProductInventory], capacity.Limits],
) -> capacity.GPUChoice:
    """capacity's GPU choice over ``products`` (catalog id -> what the cluster has of it), each planned
    with its own limits, at the operator's prices and the committed calibration."""
    ids = list(products)
    return capacity.choose_gpu(
        arch,
        [capacity.gpu_spec(i) for i in ids],
        workload,
        slo,
        limits_on(products[ids[0]]),
        prices=facts.prices,
        calibration=facts.overrides.calibration,
        limits_by_gpu={i: limits_on(p) for i, p in products.items()},
    )


def inventory_fits(product: ProductInventory, plan: capacity.Plan) -> bool:
    """Whether a plan's pods find room on the product's free GPUs (True when occupancy is not known)."""
    if product.free_by_node is None:
        return True
    return pods_fit(
        product.free_by_node,
        pods=plan.replicas * plan.nodes_per_replica,
        gpus_per_pod=plan.gpus_per_replica // plan.nodes_per_replica,
        pods_per_group=plan.nodes_per_replica,
    )


def _no_room(product: ProductInventory, why: str) -> dict[str, Any]:
    """A status.alternatives row for a product that was not planned: no room on its nodes."""
    return {
        "product": product.product,
        "feasible": False,
        "gpus": 0,
        "usdPerHour": None,
        "usdPerMillionOutputTokens": None,
        "plan": why[:1024],
        "why": why[:1024],
    }


def _fits_elsewhere(
    facts: Facts,
    arch: capacity.Architecture,
    pinned: ProductInventory,
    workload: capacity.Workload,
    slo: capacity.SLO,
    limits_on: Callable[[ProductInventory], capacity.Limits],
) -> str | None:
    """For a refusal on the pinned product: the cheapest other product in this cluster that holds the
    workload, and how to let kvright use it; None when none does."""
    others: dict[str, ProductInventory] = {}
    for product in facts.inventory.values():
        try:
            others.setdefault(capacity.gpu_spec(product.product).id, product)
        except capacity.CapacityError:
            continue
    try:
        refused_on = capacity.gpu_spec(pinned.product)
    except capacity.CapacityError:
        return None
    others.pop(refused_on.id, None)
    if not others:
        return None
    try:
        fit = _choose_among(facts, arch, others, workload, slo, limits_on).holds_it()
    except capacity.CapacityError:
        return None
    if fit is None:
        return None
    return f"in this cluster {fit}: name it in gpu.product, or leave gpu.product out and kvright chooses"


def _alternative(alt: capacity.Alternative, product: str) -> dict[str, Any]:
    """One row of status.alternatives."""
    row = alt.to_dict()
    return {
        "product": product,
        "feasible": alt.feasible,
        "gpus": alt.gpus,
        "usdPerHour": row["usd_per_hour"],
        "usdPerMillionOutputTokens": row["usd_per_million_output_tokens"],
        "plan": alt.summary()[:1024],
        "why": alt.why[:1024],
    }


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


#: Binary and decimal suffixes of the memory quantities ResourcesSpec accepts.
_QUANTITY_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_QUANTITY_SUFFIXES |= {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def memory_request(requested: str, host_bytes: float) -> str:
    """The vLLM container's memory request: ``spec.resources.memory`` (vLLM's own), plus what one pod keeps
    of the model's weights in host memory (Qwen3.8's pinned n-gram tables, split over a replica's nodes),
    so the scheduler places it on a node that can hold them; the spec's own quantity where there is none."""
    if not host_bytes:
        return requested
    quantity = str(requested)  # an integer is bytes
    number = quantity.rstrip("KMGTi")
    total = float(number) * _QUANTITY_SUFFIXES[quantity[len(number) :]] + host_bytes
    return f"{math.ceil(total / 2**30)}Gi"


def _seconds_from_ms(value: Any) -> float:
    """A status milliseconds field as seconds; 0 for anything that is not a finite, positive number."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return float(value) / 1000.0 if ok else 0.0


def _drain_budget(plan: Any, chosen: capacity.Plan, wanted: float) -> float:
    """The longest request the pods' drain budget covers (``--shutdown-timeout`` and the grace period).

    ``wanted`` follows the prediction, the SLO and what the loop last measured, which moves with every
    window; the budget is in the pod template, so following it would restart every pod whenever a window
    reads a longer TTFT (a real engine, queueing through a rollout, read 33 s then 2 s: nine rollouts in 40
    s). So the pods keep the budget they were rendered with (``status.plan.drainSeconds``) while the plan's
    flags stay the same, and take the new one with the next change of flags, which restarts them anyway:
    a budget changes only when the pods do."""
    previous = plan.get("drainSeconds") if isinstance(plan, Mapping) else None
    same_flags = isinstance(plan, Mapping) and plan.get("vllmArgs") == list(chosen.vllm_args())
    if same_flags and isinstance(previous, int) and not isinstance(previous, bool) and previous > 0:
        return float(previous)
    return wanted


def desire(facts: Facts) -> Desired:
    """Plan and render. Infeasible or unknown plans leave the running children alone.

    Events are posted once per change, not once per reconcile: a warning whose reason and message
    are already the PlanFeasible condition's is dropped, and so is a repeated ReplicasCapped."""
    desired = _desire(facts)
    current = cond.find(facts.current_status.get("conditions"), cond.PLAN_FEASIBLE) or {}
    same_plan = facts.current_status.get("plan") == desired.fields.get("plan")
    events = tuple(
        e
        for e in desired.events
        if not (e.reason == current.get("reason") and e.message == current.get("message"))
        and not (e.reason == Reason.REPLICAS_CAPPED and same_plan)
    )
    return replace(desired, events=events)


def _desire(facts: Facts) -> Desired:
    spec = facts.spec_or_error
    if isinstance(spec, SpecError):
        return _infeasible(Reason.INVALID_SPEC, str(spec))
    arch = facts.architecture
    if arch is None:
        return _infeasible(Reason.ARCHITECTURE_UNKNOWN, "the architecture was not resolved")
    if isinstance(arch, ResolveFailure):
        return _infeasible(arch.reason, arch.message, retry=30.0 if arch.retryable else None)
    if arch.needs_remote_code and not spec.model.trust_remote_code:
        name = spec.model.name
        what = (
            f"reads {name}'s config.json only by running the Python the model repository ships (its "
            "model_type has no class in vLLM or transformers; auto_map names the repository's)"
            if arch.config_reader == "checkpoint"
            else f"builds {name}'s model only by running the Python the model repository ships (vLLM "
            "registers no class its architectures names; auto_map names the repository's)"
        )
        return _infeasible(
            Reason.REMOTE_CODE_NOT_TRUSTED,
            f"vLLM {what}; set model.trustRemoteCode: true to let the vLLM pods run it, for a repository you "
            "trust",
        )

    overrides = facts.overrides
    tp = spec.tuning.tensor_parallel_size or overrides.tensor_parallel_size
    kv_dtype = KV_DTYPES[spec.tuning.kv_cache_dtype] or overrides.kv_cache_dtype
    workload = capacity.Workload(
        max_model_len=spec.workload.max_model_len,
        prompt_tokens=spec.workload.prompt_tokens,
        output_tokens=spec.workload.output_tokens,
        concurrency=spec.workload.concurrency,
        shared_prefix_tokens=min(
            spec.workload.shared_prefix_tokens,
            spec.workload.shared_prefix_tokens
            if overrides.shared_prefix_tokens is None
            else overrides.shared_prefix_tokens,
        ),
    )
    slo = capacity.SLO(
        tpot_seconds=spec.slo.tpot_milliseconds / 1000.0,
        ttft_seconds=None if spec.slo.ttft_milliseconds is None else spec.slo.ttft_milliseconds / 1000.0,
        percentile=spec.slo.percentile,
    )

    lora = None
    if spec.lora is not None:
        lora = capacity.Lora(
            max_loras=spec.lora.max_loras,
            max_lora_rank=spec.lora.max_rank,
            max_cpu_loras=spec.lora.max_cpu_loras,
            adapters=tuple((a.name, a.source) for a in spec.lora.adapters),
        )

    def limits_on(product: ProductInventory) -> capacity.Limits:
        cap = spec.gpu.max_gpus
        budget = product.total_gpus if cap is None else min(cap, product.total_gpus)
        return capacity.Limits(
            gpus_per_node=product.max_gpus_per_node,
            max_gpus=max(1, budget),
            kv_cache_dtype=kv_dtype,
            gpu_memory_utilization=spec.tuning.gpu_memory_utilization_percent / 100.0,
            tensor_parallel_size=tp,
            max_num_seqs=spec.tuning.max_num_seqs or overrides.max_num_seqs,
            max_num_batched_tokens=overrides.max_num_batched_tokens,
            # The loop's pin comes from the live engine's TPOT; only the user's is checked by the model.
            max_num_seqs_measured=spec.tuning.max_num_seqs is None and overrides.max_num_seqs is not None,
            quantization=_QUANTIZATION[spec.tuning.quantization],
            lora=lora,
            # Without LeaderWorkerSet a replica is one pod on one node.
            max_nodes_per_replica=None if facts.leader_worker_set else 1,
        )

    alternatives: list[dict[str, Any]] | None = None
    if spec.gpu.product is None and (spec.gpu.products is not None or len(facts.inventory) > 1):
        picked = _choose_product(facts, spec.gpu.products, arch, workload, slo, limits_on)
        if isinstance(picked, Desired):
            return picked
        product, result, alternatives, lost = picked
    else:
        try:
            product = choose(facts.inventory, spec.gpu.product)
        except InventoryError as exc:
            # Nodes may join: the periodic reconcile looks again.
            return _infeasible(exc.reason, str(exc))
        pinned = _plan_pinned(facts, arch, product, tp, workload, slo, limits_on(product))
        if isinstance(pinned, Desired):
            return pinned
        result, lost = pinned, None
    if not result.feasible or result.plan is None or result.prediction is None:
        fit = (
            None
            if alternatives is not None
            else _fits_elsewhere(facts, arch, product, workload, slo, limits_on)
        )
        return _infeasible(Reason.INFEASIBLE, result.reason + (f"; {fit}" if fit else ""))

    chosen = result.plan
    events: list[Event] = []
    planned = chosen.replicas
    if spec.replicas.count is not None:
        replicas = spec.replicas.count
    else:
        replicas = min(spec.replicas.max, max(spec.replicas.min, overrides.replicas or planned))
        if planned > spec.replicas.max:
            events.append(
                Event(
                    type="Warning",
                    reason=Reason.REPLICAS_CAPPED,
                    message=f"concurrency {spec.workload.concurrency} needs {planned} replicas at the "
                    f"TPOT target; replicas.max is {spec.replicas.max}, so requests will queue; "
                    "raise replicas.max",
                )
            )
    prediction = result.prediction
    # Fewer replicas than planned (replicas.max, a pinned count): the serving model adds the wait for a
    # seat to the predicted TTFT (a closed loop at its seats, Little's law). A replica's seats are every
    # data-parallel engine's max-num-seqs.
    ttft_seconds = prediction.point.ttft_seconds(
        prediction.percentile,
        in_flight=spec.workload.concurrency / max(1, replicas),
        seats=chosen.max_num_seqs * chosen.data_parallel_size,
    )
    memory = result.memory
    weight_total = capacity.weight_bytes(arch)
    # What a request in flight may take when its pod stops (the drain budget): the prediction, the SLO, or
    # what the feedback loop last measured, whichever is longest (pods are restarted because they are slow).
    observed = facts.current_status.get("observed") or {}
    seen_tpot = _seconds_from_ms(observed.get("tpotMilliseconds"))
    seen_ttft = _seconds_from_ms(observed.get("ttftMilliseconds"))
    longest_request = max(ttft_seconds, seen_ttft) + spec.workload.output_tokens * max(
        prediction.tpot_seconds, slo.tpot_seconds or 0.0, seen_tpot
    )
    drain = _drain_budget(facts.current_status.get("plan"), chosen, 2.0 * longest_request)
    token = spec.model.architecture.hub_token
    owner = Owner(name=facts.name, namespace=facts.namespace, uid=facts.uid)
    # The pod template (its startup budget) follows the documented defaults, so that learning never rolls
    # the pods; what the pods' own starts taught predicts the restart cost the feedback loop weighs.
    starts = capacity.plan_cold_starts(result, checkpoint_bytes=weight_total)
    learned = podstarts.learn(
        facts.current_status.get("coldStart"),
        facts.pods,
        source=weight_source.SOURCES[(spec.model.source or WeightSource()).type],
        predict=lambda profiles: capacity.plan_cold_starts(
            result, checkpoint_bytes=weight_total, profiles=profiles
        ),
    )
    predicted = capacity.plan_cold_starts(result, checkpoint_bytes=weight_total, profiles=learned.profiles)
    weights = weight_source.decide(
        spec.model,
        owner=owner,
        image=spec.image or facts.default_image,
        checkpoint_bytes=weight_total,
        starts=starts,
        observed=facts.weights,
        reported=cond.find(facts.current_status.get("conditions"), weight_source.WEIGHTS_READY) is not None,
        hub_endpoint=facts.hub_endpoint,
    )
    workload_render = VLLMWorkload(
        owner=owner,
        model=spec.model.name,
        served_model_name=spec.model.served_model_name,
        image=spec.image or facts.default_image,
        gpu_product=product.product,
        layout=chosen.layout,
        replicas=replicas,
        vllm_args=tuple(chosen.vllm_args()),
        vllm_args_by_role={role: tuple(args) for role, args in chosen.vllm_args_by_role().items()},
        cpu=spec.resources.cpu,
        memory=memory_request(spec.resources.memory, arch.weight_groups.host_tables / chosen.layout.nodes),
        hf_token=token,
        hub_endpoint=facts.hub_endpoint,
        weight_bytes=weight_total,
        max_request_seconds=drain,
        endpoint_picker=spec.routing.endpoint_picker or facts.endpoint_picker,
        weights=weights.mount,
        pod_monitor_labels=facts.pod_monitor_labels,
        trust_remote_code=spec.model.trust_remote_code,
    )
    plan_status: dict[str, Any] = {
        "gpuProduct": product.product,
        "tensorParallelSize": chosen.tensor_parallel_size,
        "pipelineParallelSize": chosen.pipeline_parallel_size,
        "dataParallelSize": chosen.data_parallel_size,
        "expertParallel": chosen.expert_parallel,
        "nodesPerReplica": chosen.nodes_per_replica,
        "gpusPerReplica": chosen.gpus_per_replica,
        "layout": chosen.layout.label,
        "maxNumSeqs": chosen.max_num_seqs,
        "kvCacheDtype": chosen.kv_cache_dtype,
        "maxModelLen": chosen.max_model_len,
        "maxNumBatchedTokens": chosen.max_num_batched_tokens,
        "gpuMemoryUtilizationPercent": round(chosen.gpu_memory_utilization * 100),
        "replicas": replicas,
        "gpus": chosen.gpus_per_replica * replicas,
        **({"quantization": chosen.quantization} if chosen.quantization else {}),
        "vllmArgs": list(chosen.vllm_args()),
        **({"vllmArgsByRole": chosen.vllm_args_by_role()} if chosen.nodes_per_replica > 1 else {}),
        "drainSeconds": drain_seconds(drain),
    }
    prediction_status: dict[str, Any] = {
        "percentile": prediction.percentile,
        "tpotMilliseconds": _ms(prediction.tpot_seconds),
        "tpotMeanMilliseconds": _ms(prediction.tpot_mean_seconds),
        "tpotHistogramMilliseconds": _ms(prediction.tpot_histogram_seconds),
        "ttftMilliseconds": _ms(ttft_seconds),
        "outputTokensPerSecond": round(prediction.output_tokens_per_second, 1),
        "batchPerReplica": prediction.batch_per_replica,
        "kvCacheTokensPerReplica": result.kv_cache_tokens_per_replica,
        "maxConcurrencyAtMaxModelLen": round(result.max_concurrency_at_max_model_len, 2),
        "bottleneck": str(prediction.decode.bottleneck),
        "calibration": overrides.calibration.scale,
        "calibrationTail": overrides.calibration.tail,
        "maxNumSeqsBoundBy": prediction.binding.constraint,
        "plannedReplicas": planned,
    }
    shared = spec.workload.shared_prefix_tokens
    if shared:
        layout = capacity.kv_cache_layout(
            arch,
            tensor_parallel_size=chosen.layout.tensor_parallel_size,
            kv_cache_dtype=chosen.kv_cache_dtype,
            max_num_batched_tokens=chosen.max_num_batched_tokens,
            compute_capability=capacity.gpu_spec(product.product).compute_capability,
        )
        cached = layout.cached_prefix_tokens(shared)
        prediction_status["prefixCacheHitPercent"] = round(100.0 * cached / spec.workload.prompt_tokens, 1)
    if weights.source in predicted:
        prediction_status["coldStartSeconds"] = round(predicted[weights.source].seconds, 1)
    if memory is not None:
        prediction_status["weightBytesPerGPU"] = memory.weights_bytes
        prediction_status["kvCacheBytesPerGPU"] = memory.kv_cache_bytes
    fields: dict[str, Any] = {
        "architecture": {
            "source": facts.architecture_source,
            "name": arch.name,
            "numLayers": arch.num_decoder_layers,
            "numAttentionHeads": arch.num_attention_heads,
            "numKVHeads": arch.num_kv_heads,
            "weightBytes": weight_total,
        },
        "gpu": {
            "product": product.product,
            "gpusPerNode": product.max_gpus_per_node,
            "nodes": product.nodes,
            "allocatableGPUs": product.total_gpus,
            # Room is only weighed when kvright chose among products (a pinned product is the user's).
            **({"freeGPUs": product.free_gpus} if alternatives is not None else {}),
        },
        "plan": plan_status,
        "prediction": prediction_status,
        "selector": ",".join(f"{k}={v}" for k, v in selector(facts.name).items()),
        "deployment": facts.name,
        "routing": _routing(
            facts.name, inference_pool=facts.inference_pool, picker=workload_render.endpoint_picker
        ),
        # Only when kvright chose the product; null clears a list from an earlier choice.
        "alternatives": alternatives,
        # What the pods' own starts taught (null: nothing yet, or a source it no longer holds for).
        "coldStart": learned.status,
    }
    previous = facts.current_status.get("plan")
    if alternatives is not None and (previous or {}).get("gpuProduct") != product.product:
        cost = alternatives[0]["usdPerHour"]
        events.append(
            Event(
                type="Normal",
                reason=Reason.GPU_PRODUCT_CHOSEN,
                message=f"{product.product} chosen, the cheapest product that holds the workload "
                f"(${cost:.2f}/h for {chosen.gpus_per_replica * replicas} GPUs)"
                + (f"; cheaper products cannot: {lost}" if lost else ""),
            )
        )
    if isinstance(previous, Mapping) and _plan_key(previous) != _plan_key(plan_status):
        events.append(
            Event(
                type="Normal",
                reason=Reason.PLAN_CHANGED,
                message=f"plan changed: {_describe(previous)} -> {_describe(plan_status)}",
            )
        )
    message = result.reason
    if arch.warnings or result.warnings:
        message += "; warnings: " + "; ".join((*arch.warnings, *result.warnings))
    return Desired(
        plan_feasible=Condition(
            type=cond.PLAN_FEASIBLE, status="True", reason=Reason.PLANNED, message=message
        ),
        children=(
            *weights.children,
            *(
                child
                for child in render_all(
                    workload_render, pod_monitor=facts.pod_monitor, inference_pool=facts.inference_pool
                )
                # Weights not ready: the workload is neither created nor rolled (the last one keeps serving).
                if not (weights.hold and child["kind"] in ("Deployment", "LeaderWorkerSet"))
            ),
        ),
        fields=fields,
        replicas=replicas,
        events=tuple(events),
        weights=weights.condition,
    )


def _routing(name: str, *, inference_pool: bool, picker: EndpointPickerSpec | None) -> dict[str, Any]:
    """status.routing: by the InferencePool when the cluster serves its API, else by the Service."""
    if not inference_pool:
        return {
            "mode": "Service",
            "inferencePool": None,
            "endpointPicker": None,
            "service": name,
            "message": f"the cluster does not serve {INFERENCE_POOL_API_VERSION} InferencePools; clients "
            f"reach the vLLM pods through Service {name}",
        }
    where = f"{picker.name}:{picker.port}" if picker is not None else None
    how = (
        f"endpoint picker Service {where} ({picker.failure_mode})"
        if picker is not None
        else "no endpoint picker (the gateway picks)"
    )
    return {
        "mode": "InferencePool",
        "inferencePool": name,
        "endpointPicker": where,
        "service": name,
        "message": f"InferencePool {name} selects the serving vLLM pods on port {HTTP_PORT}, {how}; "
        f"Service {name} reaches the same pods",
    }


_PLAN_KEYS: Final = (
    "gpuProduct",
    "tensorParallelSize",
    "pipelineParallelSize",
    "dataParallelSize",
    "expertParallel",
    "maxNumSeqs",
    "kvCacheDtype",
    "maxModelLen",
    "maxNumBatchedTokens",
    "replicas",
)


def _plan_key(plan: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(plan.get(k) for k in _PLAN_KEYS)


def _describe(plan: Mapping[str, Any]) -> str:
    return (
        f"{plan.get('layout') or 'TP ' + str(plan.get('tensorParallelSize'))} x {plan.get('replicas')} on "
        f"{plan.get('gpuProduct')}, "
        f"max-num-seqs {plan.get('maxNumSeqs')}, KV {plan.get('kvCacheDtype')}, "
        f"context {plan.get('maxModelLen')}, batched tokens {plan.get('maxNumBatchedTokens')}"
    )


def rollout_from(deployment: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] = ()) -> Rollout:
    """The rollout state of a Deployment dict (a LeaderWorkerSet's: :func:`rollout_from_leader_worker_set`),
    and why it is stuck if one of its pods cannot be scheduled (the scheduler's message, e.g.
    "Insufficient nvidia.com/gpu") or the progress deadline passed."""
    if deployment.get("kind") == "LeaderWorkerSet":
        return rollout_from_leader_worker_set(deployment, pods)
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    st = deployment.get("status") or {}
    desired = int(spec.get("replicas", 1) or 0)
    updated = int(st.get("updatedReplicas", 0) or 0)
    seen = int(st.get("observedGeneration", 0) or 0) >= int(meta.get("generation", 0) or 0)
    total = int(st.get("replicas", 0) or 0)
    stalled: str | None = None
    for c in st.get("conditions") or ():
        if c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded":
            stalled = f"rollout passed its progress deadline: {c.get('message', '')}"
    stalled = _unschedulable(pods) or stalled
    return Rollout(
        replicas=total,
        ready_replicas=int(st.get("readyReplicas", 0) or 0),
        updated_replicas=updated,
        up_to_date=seen and updated >= desired and total <= desired,
        stalled=stalled,
    )


def _unschedulable(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the first pod the scheduler cannot place waits, or None."""
    for pod in pods:
        for c in (pod.get("status") or {}).get("conditions") or ():
            if (
                c.get("type") == "PodScheduled"
                and c.get("status") == "False"
                and c.get("reason") == "Unschedulable"
            ):
                name = (pod.get("metadata") or {}).get("name", "?")
                return f"pod {name} cannot be scheduled: {c.get('message', '')}"
    return None


def _args(template: Mapping[str, Any] | None) -> list[Any] | None:
    containers = ((template or {}).get("spec") or {}).get("containers") or ()
    return next((list(c.get("args") or ()) for c in containers if c.get("name") == CONTAINER_NAME), None)


def rollout_from_leader_worker_set(lws: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] = ()) -> Rollout:
    """The rollout state of a LeaderWorkerSet dict (``leaderworkerset.x-k8s.io/v1``, v0.8.0), counted in
    groups: ``status.replicas`` (groups that exist), ``readyReplicas`` (leader Ready and workers ready),
    ``updatedReplicas`` (on the current template), and the conditions ``UpdateInProgress`` (the template
    changed and groups are still on the old one) and ``Progressing``.

    Its status has no observedGeneration, so right after an apply that changed the template it still
    describes the old one: given the set's ``pods``, a pod whose vLLM args are not its role's template's
    (leader: worker index 0) also means not up to date. A pod that cannot be scheduled stalls the rollout.
    """
    spec = lws.get("spec") or {}
    st = lws.get("status") or {}
    desired = int(spec.get("replicas", 1) or 0)
    total = int(st.get("replicas", 0) or 0)
    updated = int(st.get("updatedReplicas", 0) or 0)
    updating = any(
        c.get("type") == "UpdateInProgress" and c.get("status") == "True" for c in st.get("conditions") or ()
    )
    template = spec.get("leaderWorkerTemplate") or {}
    want = {"0": _args(template.get("leaderTemplate")), "worker": _args(template.get("workerTemplate"))}
    stale = 0
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            stale += 1
            continue
        index = (meta.get("labels") or {}).get(LWS_WORKER_INDEX_LABEL)
        expected = want["0"] if index == "0" else want["worker"]
        if expected is not None and _args(pod) != expected:
            stale += 1
    return Rollout(
        replicas=total,
        ready_replicas=int(st.get("readyReplicas", 0) or 0),
        updated_replicas=updated,
        up_to_date=not updating and not stale and updated >= desired and total <= desired,
        stalled=_unschedulable(pods),
    )


def deployed_condition(desired: Desired, rollout: Rollout | None, apply_error: str | None) -> Condition:
    """Deployed: True once the children are applied and the Deployment runs the new template everywhere."""
    if apply_error is not None:
        return Condition(type=cond.DEPLOYED, status="False", reason=Reason.APPLY_FAILED, message=apply_error)
    if desired.children and desired.weights is not None and desired.weights.status != "True":
        kept = "; the last applied workload keeps serving" if rollout is not None else ""
        held = desired.weights
        return Condition(type=cond.DEPLOYED, status="False", reason=held.reason, message=held.message + kept)
    if not desired.children:
        if rollout is not None:
            return Condition(
                type=cond.DEPLOYED,
                status="True",
                reason=Reason.KEPT_LAST_PLAN,
                message="the plan is not feasible now; the last applied workload keeps serving",
            )
        return Condition(
            type=cond.DEPLOYED,
            status="False",
            reason=Reason.NOT_PLANNED,
            message="nothing applied: no feasible plan",
        )
    if rollout is None:
        return Condition(type=cond.DEPLOYED, status="Unknown", reason=Reason.ROLLING_OUT, message="applied")
    if rollout.stalled is not None:
        return Condition(
            type=cond.DEPLOYED, status="False", reason=Reason.ROLLOUT_STALLED, message=rollout.stalled
        )
    if not rollout.up_to_date:
        return Condition(
            type=cond.DEPLOYED,
            status="False",
            reason=Reason.ROLLING_OUT,
            message=f"{rollout.updated_replicas}/{desired.replicas} replicas run the current plan",
        )
    return Condition(
        type=cond.DEPLOYED,
        status="True",
        reason=Reason.APPLIED,
        message=f"{rollout.updated_replicas}/{desired.replicas} replicas run the current plan",
    )


def status(
    facts: Facts,
    desired: Desired,
    *,
    rollout: Rollout | None,
    apply_error: str | None,
    now: datetime.datetime,
) -> dict[str, Any]:
    """The status to write: kvright's fields and conditions, merged into the current conditions (the
    feedback loop's types are kept). Fields the plan did not produce keep their current values, so an
    infeasible edit does not erase the description of what is still running."""
    deployed = deployed_condition(desired, rollout, apply_error)
    if rollout is not None:
        want = desired.replicas if desired.replicas is not None else rollout.replicas
    else:
        want = desired.replicas or 0
    ready_cond = cond.ready(
        plan_feasible=desired.plan_feasible,
        deployed=deployed,
        desired_replicas=want,
        ready_replicas=rollout.ready_replicas if rollout else 0,
    )
    new: dict[str, Any] = {
        "observedGeneration": facts.generation,
        **desired.fields,
        "replicas": rollout.replicas if rollout else 0,
        "readyReplicas": rollout.ready_replicas if rollout else 0,
        "conditions": cond.merge(
            facts.current_status.get("conditions"),
            [desired.plan_feasible, deployed, ready_cond, *([desired.weights] if desired.weights else [])],
            generation=facts.generation,
            now=now,
        ),
    }
    if "selector" not in new:
        new["selector"] = ",".join(f"{k}={v}" for k, v in selector(facts.name).items())
    wanted = desired.fields.get("routing") or {}
    if apply_error is not None and wanted.get("mode") == "InferencePool":
        # Not applied: say what routes now (what the last successful reconcile wrote), not what should.
        new["routing"] = facts.current_status.get("routing") or {
            "mode": "Service",
            "inferencePool": None,
            "endpointPicker": None,
            "service": facts.name,
            "message": f"the InferencePool is not applied (Deployed: {Reason.APPLY_FAILED}); clients reach "
            f"the vLLM pods through Service {facts.name}",
        }
    return new


def status_changed(current: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether writing ``new`` would change anything kvright owns in ``current``. A null in ``new`` removes
    a key (merge patch), so it equals a key that is absent."""
    return any(_present(current.get(key)) != _present(value) for key, value in new.items())


def _present(value: Any) -> Any:
    """``value`` without the keys a merge patch would remove (null values), at every depth."""
    if isinstance(value, Mapping):
        return {k: _present(v) for k, v in value.items() if v is not None}
    return value


def retry_delay(attempt: int, *, base: float = 5.0, cap: float = 300.0) -> float:
    """Exponential backoff for transient failures: base x 2^attempt, capped."""
    return float(min(cap, base * math.pow(2, max(0, attempt))))
