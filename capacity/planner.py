"""The planner: which layout (TP x PP x DP, expert parallelism), KV dtype, --max-num-seqs,
--max-num-batched-tokens and replica count serve a workload within its SLOs.

For every candidate (layout vLLM accepts within the GPU budget, :func:`candidate_layouts`) x (KV dtype the
GPU supports) x
(batched-token budget) it builds the :class:`~capacity.serving.ServingModel` and asks it, rule by rule, how
many sequences one replica may run: the memory rule (sequences whose KV reservations fit), the prefill
rule (prompts prefilled as fast as they arrive), the TPOT rule (TPOT at the SLO's percentile within the
SLO), the TTFT rule, vLLM's own cap and any pinned value. The smallest wins and is named as the binding
constraint. Replicas follow from the concurrency. The objective is output tokens/s per GPU within the SLOs,
fewer GPUs on ties. Refusals name the constraint that binds and the fix. Pure: no IO, no clock.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from capacity.architecture import Architecture
from capacity.catalog import catalog_architecture, catalog_ids
from capacity.errors import CapacityError
from capacity.gpus import GPU, attention_support, native_support
from capacity.launch import LEADER_RANK, node_args
from capacity.layout import Layout, layout_error
from capacity.lora import Lora
from capacity.memory import (
    KV_CACHE_DTYPES,
    MAX_NUM_SEQS_CAP,
    EngineConfig,
    KVMemory,
    MemoryBreakdown,
    default_max_num_batched_tokens,
    resolve_kv_cache_dtype,
)
from capacity.parallel import EncoderTPMode, encoder_tp_mode, tensor_parallel_error
from capacity.quantization import ONLINE_FP8
from capacity.roofline import DEFAULT_EFFICIENCY, DecodeStep, Efficiency, StepModel
from capacity.serving import (
    UNCALIBRATED,
    Calibration,
    Curve,
    ServingModel,
    ServingPoint,
    Shape,
    largest_within,
    percentile_z,
)

__all__ = [
    "BATCHED_TOKEN_CHOICES",
    "CAP_RULES",
    "FIT_RULES",
    "LATENCY_RULES",
    "QUANTIZATION_CHOICES",
    "SLO",
    "BatchLimit",
    "Candidate",
    "Limits",
    "Plan",
    "PlanResult",
    "Prediction",
    "Quantization",
    "Workload",
    "candidate_layouts",
    "plan",
]

GiB = 2**30

#: How a LeaderWorkerSet pod names its leader: the environment variable the LWS controller sets, in the
#: ``$(VAR)`` form Kubernetes expands in container args.
LEADER_ADDRESS_VARIABLE = "$(LWS_LEADER_ADDRESS)"

#: Order in which a candidate can fail; the planner explains an infeasible request with the candidate
#: that got furthest.
_STAGES = ("memory", "batch", "gpus", "ok")

#: --max-num-batched-tokens values the planner weighs besides vLLM's default for the GPU: the chunk of
#: prefill a step may carry. Smaller chunks ride along memory-bound decode steps almost for free (lower
#: TPOT) but take more steps per prompt (higher TTFT) and, for sliding-window models, reserve less KV.
BATCHED_TOKEN_CHOICES = (2048, 4096, 8192, 16384)

#: Among the --max-num-batched-tokens that serve as many sequences per replica, one other than vLLM's default
#: must buy at least this much more output tokens/s per GPU to be chosen.
BATCHED_TOKENS_GAIN = 0.03


#: Online weight quantization the planner may apply (``Limits.quantization``).
Quantization = Literal["none", "fp8", "auto"]


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What is served."""

    max_model_len: int | None = None
    """--max-model-len; None: the model's maximum positions (vLLM's default)."""
    prompt_tokens: int | None = None
    """Typical prompt length; None: sequences are sized at max_model_len (conservative)."""
    output_tokens: int | None = None
    """Typical output length; None with prompt_tokens set: 0."""
    concurrency: int | None = None
    """Sequences in flight to serve at once (drives replicas); None: one replica, as many as fit."""
    shared_prefix_tokens: int = 0
    """Tokens at the start of every prompt that all requests share (a system prompt, few-shot examples):
    vLLM's prefix caching (on by default) holds their KV blocks once and prefills them once."""


@dataclass(frozen=True, kw_only=True)
class SLO:
    """Latency targets at a percentile; None means unconstrained."""

    tpot_seconds: float | None = None
    """Time per output token that ``percentile`` percent of requests must stay within."""
    ttft_seconds: float | None = None
    """Time to first token that ``percentile`` percent of requests must stay within (slot wait included)."""
    percentile: int = 90
    """50, 90, 95 or 99."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What the planner may use, and any values the user pinned."""

    gpus_per_node: int = 8
    """GPUs of one node: TP never spans nodes, and a replica larger than a node takes whole nodes."""
    max_gpus: int | None = None
    """Budget of GPUs over all replicas; None: one node (gpus_per_node). Above one node's GPUs a replica may
    span nodes (pipeline or data parallelism across them)."""
    kv_cache_dtype: str | None = None
    """Pinned --kv-cache-dtype; None: try ``auto`` and, where the GPU supports it, ``fp8``."""
    gpu_memory_utilization: float = 0.9
    """--gpu-memory-utilization, a fraction of total device memory."""
    tensor_parallel_size: int | None = None
    """Pinned --tensor-parallel-size; None: choose."""
    pipeline_parallel_size: int | None = None
    """Pinned --pipeline-parallel-size; None: choose."""
    data_parallel_size: int | None = None
    """Pinned --data-parallel-size (with expert parallelism, MoE only); None: choose."""
    expert_parallel: bool | None = None
    """Pinned --enable-expert-parallel; None: choose (MoE only)."""
    max_nodes_per_replica: int | None = None
    """Most nodes one replica may span (1 where the cluster cannot run multi-node replicas); None: any."""
    network_bytes_per_second: float | None = None
    """Node-to-node bandwidth per GPU; None: the GPU catalog's (:attr:`GPU.network_bytes_per_second`)."""
    max_num_seqs: int | None = None
    """Pinned --max-num-seqs; None: choose."""
    max_num_seqs_measured: bool = False
    """The pinned max-num-seqs was set by a feedback loop from what the live engine measured: the latency
    rules (tpot, ttft, prefill), which are the model's predictions, do not refuse it (the measurement
    outranks them); memory and vLLM's own caps still do."""
    max_num_batched_tokens: int | None = None
    """Pinned --max-num-batched-tokens; None: choose among vLLM's default and
    :data:`BATCHED_TOKEN_CHOICES`."""
    efficiency: Efficiency = DEFAULT_EFFICIENCY
    """Factors from roofline to predicted time."""
    quantization: Quantization = "none"
    """Online weight quantization of an unquantized checkpoint (``vllm serve --quantization
    fp8_per_tensor``): ``none``
    (the default: it changes the model), ``fp8`` (always), ``auto`` (only when the unquantized model does
    not fit or cannot meet the SLO). A checkpoint that is already quantized is served as it is."""
    lora: Lora | None = None
    """LoRA adapters (``--enable-lora``): their GPU buffers come out of the KV budget; None: LoRA off."""


QUANTIZATION_CHOICES: tuple[Quantization, ...] = ("none", "fp8", "auto")


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A vLLM configuration."""

    tensor_parallel_size: int
    """--tensor-parallel-size."""
    max_num_seqs: int
    """--max-num-seqs (per data-parallel engine)."""
    kv_cache_dtype: str
    """--kv-cache-dtype (``auto`` = the model's dtype)."""
    max_model_len: int
    """--max-model-len."""
    gpu_memory_utilization: float
    """--gpu-memory-utilization."""
    max_num_batched_tokens: int
    """--max-num-batched-tokens: the step's token budget (decodes plus prefill chunks)."""
    replicas: int
    """vLLM servers (each on ``gpus_per_replica`` GPUs)."""
    quantization: str | None = None
    """--quantization for weights quantized at load (``fp8_per_tensor``: vLLM 0.32 refuses ``fp8`` on an
    unquantized checkpoint), or the method of a legacy GPTQ / AWQ checkpoint that vLLM reads only when told it
    (``gptq``, ``awq``: :attr:`WeightFormat.flag`); None: config.json says the format."""
    pipeline_parallel_size: int = 1
    """--pipeline-parallel-size."""
    data_parallel_size: int = 1
    """--data-parallel-size: attention engines per replica, each with ``max_num_seqs`` seats."""
    expert_parallel: bool = False
    """--enable-expert-parallel."""
    gpus_per_node: int = 8
    """GPUs of one node of the product the plan was made for."""
    lora: Lora | None = None
    """LoRA settings (``--enable-lora --max-loras --max-lora-rank``); None: LoRA off."""
    mm_encoder_tp_mode: EncoderTPMode = "weights"
    """--mm-encoder-tp-mode, written only as ``data`` (:func:`capacity.parallel.encoder_tp_mode`: a vision
    tower whose heads the TP degree does not divide runs whole on every rank)."""
    allow_deprecated_quantization: bool = False
    """--allow-deprecated-quantization: the checkpoint's method is one vLLM 0.32 loads only with it
    (:attr:`capacity.quantization.WeightFormat.deprecated`: ``fbgemm_fp8``)."""
    attention_backend: str | None = None
    """--attention-backend, where the model's class runs on one backend alone
    (:attr:`capacity.architecture.Architecture.attention_backend`: Rnj-1's and Step1's ``TRITON_ATTN``)."""

    @property
    def layout(self) -> Layout:
        """The replica's parallel layout."""
        return Layout(
            tensor_parallel_size=self.tensor_parallel_size,
            pipeline_parallel_size=self.pipeline_parallel_size,
            data_parallel_size=self.data_parallel_size,
            expert_parallel=self.expert_parallel,
            gpus_per_node=self.gpus_per_node,
        )

    @property
    def gpus_per_replica(self) -> int:
        """GPUs of one replica (TP x PP x DP)."""
        return self.layout.gpus

    @property
    def nodes_per_replica(self) -> int:
        """Nodes one replica spans (a LeaderWorkerSet group when more than one)."""
        return self.layout.nodes

    @property
    def gpus(self) -> int:
        """GPUs over all replicas."""
        return self.gpus_per_replica * self.replicas

    def vllm_args(self) -> list[str]:
        """The ``vllm serve`` flags this plan implies on every node of a replica (vLLM 0.32 spellings); a
        replica that spans nodes adds each node's own flags (:func:`capacity.launch.node_args`)."""
        layout = [
            *(
                ["--pipeline-parallel-size", str(self.pipeline_parallel_size)]
                if self.pipeline_parallel_size > 1
                else []
            ),
            *(["--data-parallel-size", str(self.data_parallel_size)] if self.data_parallel_size > 1 else []),
            *(["--enable-expert-parallel"] if self.expert_parallel else []),
        ]
        return [
            "--tensor-parallel-size",
            str(self.tensor_parallel_size),
            *layout,
            "--max-num-seqs",
            str(self.max_num_seqs),
            "--max-model-len",
            str(self.max_model_len),
            "--kv-cache-dtype",
            self.kv_cache_dtype,
            "--gpu-memory-utilization",
            f"{self.gpu_memory_utilization:g}",
            "--max-num-batched-tokens",
            str(self.max_num_batched_tokens),
            *(["--quantization", self.quantization] if self.quantization else []),
            *(["--allow-deprecated-quantization"] if self.allow_deprecated_quantization else []),
            *(self.lora.vllm_args() if self.lora is not None else []),
            *(["--mm-encoder-tp-mode", "data"] if self.mm_encoder_tp_mode == "data" else []),
            *(["--attention-backend", self.attention_backend] if self.attention_backend else []),
        ]

    def vllm_args_by_role(self, leader_address: str = LEADER_ADDRESS_VARIABLE) -> dict[str, list[str]]:
        """Each role's full ``vllm serve`` flags: ``server`` for a replica on one node; ``leader`` (node
        rank 0, the API server) and ``worker`` (node rank 1; the other workers differ only in
        ``--node-rank``) for a replica that spans nodes, the leader reached at ``leader_address``
        (LeaderWorkerSet's ``$(LWS_LEADER_ADDRESS)`` by default)."""
        common = self.vllm_args()
        layout = self.layout
        if not layout.spans_nodes:
            return {"server": common}
        return {
            role: [*common, *node_args(layout, node_rank=rank, leader_address=leader_address)]
            for role, rank in (("leader", LEADER_RANK), ("worker", LEADER_RANK + 1))
        }

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``plan`` object: every field, by its name (``lora`` only when LoRA is on), and the
        replica's size."""
        fields = asdict(self)
        if self.lora is None:
            del fields["lora"]
        return {
            **fields,
            "gpus_per_replica": self.gpus_per_replica,
            "nodes_per_replica": self.nodes_per_replica,
        }


@dataclass(frozen=True, kw_only=True)
class BatchLimit:
    """One rule's cap on the sequences a replica runs."""

    constraint: str
    """memory, prefill, tpot, ttft, vllm-cap or pinned."""
    sequences: int
    """Largest batch the rule allows (0: not even one)."""
    detail: str
    """The numbers behind it, one phrase."""
    at_least: bool = False
    """The rule was searched only up to a cheaper cap and holds there: it allows at least ``sequences``."""

    @property
    def label(self) -> str:
        """``tpot >=116`` or ``memory 116``."""
        return f"{self.constraint} {'>=' if self.at_least else ''}{self.sequences}"


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """What a plan is expected to do at the workload's load."""

    percentile: int
    """The percentile ``tpot_seconds`` and ``ttft_seconds`` hold at."""
    tpot_seconds: float
    """Predicted TPOT at ``percentile`` at the operating batch (calibration applied)."""
    tpot_mean_seconds: float
    """Predicted mean TPOT at the operating batch."""
    tpot_histogram_seconds: float
    """TPOT at ``percentile`` as vLLM's histogram will report it (``histogram_quantile`` over its buckets):
    what Prometheus and the feedback loop will read, coarse within a bucket (prefer SLOs at bucket bounds:
    10, 25, 50, 75, 100 ms, ...)."""
    ttft_seconds: float
    """Predicted TTFT at ``percentile`` at the operating batch (slot wait, chunks, a prompt ahead)."""
    output_tokens_per_second: float
    """Output tokens/s over all replicas at the operating batch."""
    batch_per_replica: int
    """Sequences each replica decodes together at the target concurrency."""
    prefill_tokens_per_step: float
    """Prompt tokens per step on average in steady state (batch x prompt / output; 0 without a mix)."""
    point: ServingPoint
    """The serving model's steady state at the operating batch."""
    decode: DecodeStep
    """Breakdown of the decode-only part of a step at the operating batch (uncalibrated, no prefill)."""
    limits: tuple[BatchLimit, ...]
    """Every rule's cap on max-num-seqs; the smallest binds."""
    calibration: Calibration = UNCALIBRATED
    """The calibration applied."""

    @property
    def binding(self) -> BatchLimit:
        """The rule that sets max-num-seqs."""
        return _binding(self.limits)

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``predicted`` object."""
        return {
            "percentile": self.percentile,
            "tpot_seconds": self.tpot_seconds,
            "tpot_mean_seconds": self.tpot_mean_seconds,
            "tpot_histogram_seconds": self.tpot_histogram_seconds,
            "ttft_seconds": self.ttft_seconds,
            "output_tokens_per_second": self.output_tokens_per_second,
            "batch_per_replica": self.batch_per_replica,
            "prefill_tokens_per_step": self.prefill_tokens_per_step,
            "prefill_step_fraction": self.point.prefill_step_fraction,
            "bottleneck": self.decode.bottleneck,
            "weight_read_seconds": self.decode.weight_read_seconds,
            "kv_read_seconds": self.decode.kv_read_seconds,
            "max_num_seqs_limits": {limit.constraint: limit.sequences for limit in self.limits},
            "max_num_seqs_limits_at_least": [limit.constraint for limit in self.limits if limit.at_least],
            "max_num_seqs_bound_by": self.binding.constraint,
            "calibration": self.calibration.to_dict(),
        }


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One (layout, KV dtype, batched tokens) option the planner weighed."""

    layout: Layout
    """The replica's parallel layout."""
    kv_cache_dtype: str
    """KV dtype."""
    max_num_batched_tokens: int
    """--max-num-batched-tokens."""
    feasible: bool
    """Meets memory, SLOs and the GPU budget."""
    reason: str
    """Why not, or empty."""
    stage: str
    """How far it got: memory, batch, gpus or ok."""
    max_num_seqs: int
    """Largest batch every rule allows per engine (0 when none)."""
    bound_by: str
    """The rule that sets max_num_seqs (empty when memory refused the candidate)."""
    replicas: int
    """Replicas for the target concurrency."""
    kv_cache_tokens_per_replica: int
    """vLLM's "GPU KV cache size" in tokens: one engine's, so with data parallelism each of a replica's
    ``data_parallel_size`` engines holds this many."""
    tpot_seconds: float
    """Predicted TPOT at the SLO's percentile at the operating batch (0 when not reached)."""
    ttft_seconds: float
    """Predicted TTFT at the percentile (0 when not reached)."""
    output_tokens_per_second_per_gpu: float
    """The objective (0 when infeasible)."""

    @property
    def tensor_parallel_size(self) -> int:
        """TP degree."""
        return self.layout.tensor_parallel_size

    @property
    def gpus(self) -> int:
        """GPUs over all replicas."""
        return self.layout.gpus * self.replicas

    @property
    def sequences_per_replica(self) -> int:
        """Sequences one replica runs at once: ``max_num_seqs`` per data-parallel engine."""
        return self.max_num_seqs * self.layout.data_parallel_size

    def to_dict(self) -> dict[str, Any]:
        """One row of the CLI's ``candidates`` list."""
        return {
            "layout": self.layout.label,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.layout.pipeline_parallel_size,
            "data_parallel_size": self.layout.data_parallel_size,
            "expert_parallel": self.layout.expert_parallel,
            "nodes_per_replica": self.layout.nodes,
            "gpus_per_replica": self.layout.gpus,
            "kv_cache_dtype": self.kv_cache_dtype,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "feasible": self.feasible,
            "reason": self.reason,
            "max_num_seqs": self.max_num_seqs,
            "sequences_per_replica": self.sequences_per_replica,
            "bound_by": self.bound_by,
            "replicas": self.replicas,
            "gpus": self.gpus,
            "kv_cache_tokens_per_replica": self.kv_cache_tokens_per_replica,
            "tpot_seconds": self.tpot_seconds,
            "ttft_seconds": self.ttft_seconds,
            "output_tokens_per_second_per_gpu": self.output_tokens_per_second_per_gpu,
        }


@dataclass(frozen=True, kw_only=True)
class PlanResult:
    """The planner's answer."""

    feasible: bool
    """A plan meets every constraint."""
    reason: str
    """Why not (names the binding constraint and the fix), or a one-line summary of the choice."""
    plan: Plan | None
    """The chosen configuration (None when infeasible)."""
    prediction: Prediction | None
    """Expected behaviour of the plan."""
    memory: MemoryBreakdown | None
    """Per-GPU memory of the plan (or of the closest candidate when infeasible)."""
    kv_cache_tokens_per_replica: int
    """Tokens the KV cache of one replica holds (vLLM's "GPU KV cache size")."""
    max_concurrency_at_max_model_len: float
    """Sequences of max_model_len that fit at once, as vLLM logs "Maximum concurrency"."""
    candidates: tuple[Candidate, ...]
    """Every option weighed, best first."""
    warnings: tuple[str, ...] = field(default=())
    """Things to know about the plan (e.g. fp8 KV cache on MLA is a quality risk)."""

    @classmethod
    def refused(cls, reason: str) -> PlanResult:
        """No candidate was weighed: the request itself rules every plan out, for ``reason``."""
        return cls(
            feasible=False,
            reason=reason,
            plan=None,
            prediction=None,
            memory=None,
            kv_cache_tokens_per_replica=0,
            max_concurrency_at_max_model_len=0.0,
            candidates=(),
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``kvright plan --json`` object."""
        return {
            "feasible": self.feasible,
            "reason": self.reason,
            "plan": self.plan.to_dict() if self.plan else None,
            "memory_per_gpu_bytes": self.memory.to_dict() if self.memory else None,
            "kv_cache_tokens_per_replica": self.kv_cache_tokens_per_replica,
            "max_concurrency_at_max_model_len": self.max_concurrency_at_max_model_len,
            "predicted": self.prediction.to_dict() if self.prediction else None,
            "vllm_args": self.plan.vllm_args() if self.plan else [],
            "vllm_args_by_role": self.plan.vllm_args_by_role() if self.plan else {},
            "candidates": [c.to_dict() for c in self.candidates],
            "warnings": list(self.warnings),
        }


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def _positive_int(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise CapacityError(f"{name} {value!r} is not valid; expected an integer >= 1")


@dataclass(frozen=True, kw_only=True)
class _Request:
    """The validated request, derived once."""

    arch: Architecture
    gpu: GPU
    workload: Workload
    slo: SLO
    limits: Limits
    calibration: Calibration
    max_len: int
    seq_tokens: int
    shape: Shape
    max_gpus: int
    network: float
    """Node-to-node bandwidth per GPU."""
    memory_at: dict[tuple[Layout, str, int], KVMemory] = field(
        default_factory=dict, compare=False, repr=False
    )
    """vLLM's memory accounting of other layouts, by (layout, KV dtype, batched tokens): the fixes a refusal
    names ask the same larger layouts again for every candidate that does not fit."""
    fixes: dict[tuple[str, int, str, int], str] = field(default_factory=dict, compare=False, repr=False)
    """The fixes a refusal rule (by name) names, by GPUs per replica, KV dtype and batched tokens: the same
    for every candidate of that size, so searched once per request."""


def _validate(
    arch: Architecture, gpu: GPU, workload: Workload, slo: SLO, limits: Limits, calibration: Calibration
) -> _Request:
    _positive_int("gpus per node", limits.gpus_per_node)
    _positive_int("max GPUs", limits.max_gpus)
    _positive_int("max-model-len", workload.max_model_len)
    _positive_int("prompt tokens", workload.prompt_tokens)
    _positive_int("concurrency", workload.concurrency)
    if limits.lora is not None:
        limits.lora.validate()
    shared = workload.shared_prefix_tokens
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
        raise CapacityError(f"shared prefix tokens {shared!r} is not valid; expected an integer >= 0")
    _positive_int("max-num-seqs", limits.max_num_seqs)
    _positive_int("max-num-batched-tokens", limits.max_num_batched_tokens)
    _positive_int("pipeline parallel size", limits.pipeline_parallel_size)
    _positive_int("data parallel size", limits.data_parallel_size)
    _positive_int("nodes per replica", limits.max_nodes_per_replica)
    bandwidth = limits.network_bytes_per_second
    if bandwidth is not None and (
        not isinstance(bandwidth, int | float) or not math.isfinite(bandwidth) or bandwidth <= 0
    ):
        raise CapacityError(
            f"network bandwidth {bandwidth!r} is not valid; expected a positive number of bytes/s"
        )
    if workload.output_tokens is not None and (
        isinstance(workload.output_tokens, bool) or workload.output_tokens < 0
    ):
        raise CapacityError(
            f"output tokens {workload.output_tokens!r} is not valid; expected an integer >= 0"
        )
    util = limits.gpu_memory_utilization
    if not isinstance(util, int | float) or not 0 < util <= 1:
        raise CapacityError(f"gpu memory utilization {util!r} is not valid; expected a fraction in (0, 1]")
    for name, value in (("TPOT SLO", slo.tpot_seconds), ("TTFT SLO", slo.ttft_seconds)):
        if value is not None and (
            not isinstance(value, int | float) or not math.isfinite(value) or value <= 0
        ):
            raise CapacityError(f"{name} {value!r} is not valid; expected a positive number of seconds")
    percentile_z(slo.percentile)
    if limits.kv_cache_dtype is not None and limits.kv_cache_dtype not in KV_CACHE_DTYPES:
        raise CapacityError(
            f"KV-cache dtype {limits.kv_cache_dtype!r} is not supported; expected one of "
            f"{', '.join(KV_CACHE_DTYPES)}"
        )
    max_len = workload.max_model_len or arch.default_max_model_len
    too_long = arch.context_error(max_len)
    if too_long is not None:
        raise CapacityError(f"max-model-len {too_long.removeprefix('context ')}")
    if workload.prompt_tokens is not None:
        output = workload.output_tokens or 0
        seq_tokens = workload.prompt_tokens + output
        if seq_tokens > max_len:
            raise CapacityError(
                f"prompt + output tokens ({seq_tokens}) exceed max-model-len {max_len}; expected at "
                f"most {max_len}"
            )
        if shared > workload.prompt_tokens:
            raise CapacityError(
                f"shared prefix tokens ({shared}) exceed the prompt ({workload.prompt_tokens}); expected at "
                f"most {workload.prompt_tokens}"
            )
        # Steady state: every output token's share of prefill work rides in the same engine steps.
        shape = Shape(
            prompt_tokens=workload.prompt_tokens,
            output_tokens=output,
            mixed=output > 0,
            cached_prompt_tokens=shared,
        )
    else:
        if shared > max_len:
            raise CapacityError(
                f"shared prefix tokens ({shared}) exceed max-model-len {max_len}; expected at most {max_len}"
            )
        seq_tokens = max_len
        shape = Shape(
            prompt_tokens=max_len,
            output_tokens=0,
            context_tokens=max_len,
            mixed=False,
            cached_prompt_tokens=shared,
        )
    return _Request(
        arch=arch,
        gpu=gpu,
        workload=workload,
        slo=slo,
        limits=limits,
        calibration=calibration,
        max_len=max_len,
        seq_tokens=seq_tokens,
        shape=shape,
        max_gpus=limits.max_gpus or limits.gpus_per_node,
        network=limits.network_bytes_per_second or gpu.network_bytes_per_second,
    )


def plan(
    arch: Architecture,
    gpu: GPU,
    workload: Workload,
    slo: SLO,
    limits: Limits,
    *,
    calibration: Calibration | float = 1.0,
) -> PlanResult:
    """Choose TP, KV dtype, --max-num-seqs, --max-num-batched-tokens and replicas (and, where
    ``limits.quantization`` allows it, online FP8 weights).

    ``calibration`` is the serving model's :class:`~capacity.serving.Calibration` (a number is its
    ``scale``: it multiplies every predicted step time)."""
    if limits.quantization not in QUANTIZATION_CHOICES:
        raise CapacityError(
            f"quantization {limits.quantization!r} is not valid; expected one of "
            f"{', '.join(QUANTIZATION_CHOICES)}"
        )
    online = limits.quantization != "none" and arch.weights.method == "none"
    if online and limits.quantization == "fp8":
        return _online_fp8(
            _plan(replace(arch, weights=ONLINE_FP8), gpu, workload, slo, limits, calibration), gpu
        )
    result = _plan(arch, gpu, workload, slo, limits, calibration)
    if online and not result.feasible:
        quantized = _plan(replace(arch, weights=ONLINE_FP8), gpu, workload, slo, limits, calibration)
        if quantized.feasible:
            return _online_fp8(quantized, gpu, because=result.reason)
    if result.feasible:
        notes = (
            native_support(gpu, arch.weights),
            _default_context_note(arch, workload),
            _quantized_checkpoint_note(arch, limits),
        )
        result = replace(result, warnings=(*result.warnings, *(n for n in notes if n is not None)))
    return result


def _quantized_checkpoint_note(arch: Architecture, limits: Limits) -> str | None:
    """Said when FP8 at load was asked for always but the checkpoint is already quantized: vLLM loads a
    quantized checkpoint with its own method (a different ``--quantization`` fails at load), so the
    request has no effect and the plan says so rather than dropping it silently."""
    if limits.quantization != "fp8" or arch.weights.method == "none":
        return None
    return (
        f"the checkpoint is already quantized ({arch.weights.label}): served as it is; FP8 at load "
        "(spec.tuning.quantization: FP8; kvright plan --quantization fp8) applies only to unquantized "
        "checkpoints"
    )


def _default_context_note(arch: Architecture, workload: Workload) -> str | None:
    """Said when no context was asked for and vLLM's default is shorter than what the model accepts."""
    if workload.max_model_len is not None or arch.default_max_model_len >= arch.max_model_len:
        return None
    return (
        f"no max-model-len given: planned at {arch.default_max_model_len} tokens, the context vLLM serves "
        f"{arch.name} at by default (LongRoPE's original length); ask for up to {arch.max_model_len} to "
        "serve longer prompts"
    )


def _online_fp8(result: PlanResult, gpu: GPU, because: str | None = None) -> PlanResult:
    """A plan with the weights quantized online to FP8 (``--quantization fp8``), saying so."""
    if result.plan is None:
        return result
    why = f" (unquantized: {because})" if because else ""
    warnings = [
        f"weights quantized to FP8 at load (--quantization {ONLINE_FP8.method}){why}: this changes the "
        "model's numerics; "
        "spec.tuning.quantization allows it"
    ]
    note = native_support(gpu, ONLINE_FP8)
    if note is not None:
        warnings.append(note)
    return replace(
        result,
        plan=replace(result.plan, quantization=ONLINE_FP8.method),
        warnings=(*result.warnings, *warnings),
    )


def _plan(
    arch: Architecture,
    gpu: GPU,
    workload: Workload,
    slo: SLO,
    limits: Limits,
    calibration: Calibration | float,
) -> PlanResult:
    if not isinstance(calibration, Calibration):
        if isinstance(calibration, bool) or not isinstance(calibration, int | float):
            raise CapacityError(
                f"calibration {calibration!r} is not valid; expected a positive number (1.0 = none)"
            )
        if not math.isfinite(calibration) or calibration <= 0:
            raise CapacityError(
                f"calibration {calibration!r} is not valid; expected a positive number (1.0 = none)"
            )
        calibration = Calibration(scale=float(calibration))
    req = _validate(arch, gpu, workload, slo, limits, calibration)

    if limits.tensor_parallel_size is not None:
        error = tensor_parallel_error(arch, limits.tensor_parallel_size)
        if error is not None and (
            not arch.is_moe
            or limits.expert_parallel is False
            or tensor_parallel_error(arch, limits.tensor_parallel_size, expert_parallel=True) is not None
        ):
            raise CapacityError(error)
    pin_error = _pin_error(arch, limits)
    if pin_error is not None:
        raise CapacityError(pin_error)
    layouts = candidate_layouts(arch, limits, req.max_gpus)
    if limits.kv_cache_dtype is not None:
        dtypes = [limits.kv_cache_dtype]
        if limits.kv_cache_dtype.startswith("fp8") and not gpu.fp8_kv_cache:
            raise CapacityError(
                f"vLLM cannot keep an fp8 KV cache on {gpu.id}; expected --kv-cache-dtype auto, bfloat16 or "
                "float16"
            )
    else:
        dtypes = ["auto", "fp8"] if gpu.fp8_kv_cache and not arch.model_dtype_kv_cache else ["auto"]
    default_mnbt = default_max_num_batched_tokens(gpu)
    if limits.max_num_batched_tokens is not None:
        budgets = [limits.max_num_batched_tokens]
    else:
        budgets = [default_mnbt] + [t for t in BATCHED_TOKEN_CHOICES if t != default_mnbt]

    unsupported = attention_support(gpu, arch)
    if unsupported is not None:
        return PlanResult.refused(unsupported)
    if not layouts:
        return PlanResult.refused(_no_layout(arch, limits, req.max_gpus))
    rows = []
    for layout in layouts:
        for dtype in dtypes:
            roofline = StepModel(
                arch,
                gpu,
                layout=layout,
                kv_cache_dtype=dtype,
                efficiency=limits.efficiency,
                network_bytes_per_second=req.network,
            )
            rows += [_evaluate(req, layout, dtype, mnbt, roofline) for mnbt in budgets]
    ordered = sorted(
        rows,
        key=lambda r: (
            not r.candidate.feasible,
            r.candidate.gpus,
            # Without fp8 tensor cores an fp8 KV cache is for capacity, not speed: its attention kernels
            # (FlashInfer, Triton) are not the ones the roofline was fitted to, so it wins only on GPUs.
            r.candidate.kv_cache_dtype.startswith("fp8") and not gpu.supports_fp8,
            -round(_ranked_throughput(r.candidate), 6),
            _complexity(r.candidate.layout),
            r.candidate.kv_cache_dtype != "auto",
            r.candidate.max_num_batched_tokens != default_mnbt,
            -r.candidate.max_num_batched_tokens,
        ),
    )
    best = ordered[0]
    if best.candidate.feasible:
        best = _budget_for(best, rows, default_mnbt)
        return _chosen(req, best, _why_lost(best.candidate, [r.candidate for r in ordered], default_mnbt))
    candidates = tuple(r.candidate for r in ordered)
    # Infeasible: explain with the candidate that got furthest (largest TP and fp8 break ties).
    closest = max(
        rows,
        key=lambda r: (
            _STAGES.index(r.candidate.stage),
            r.candidate.sequences_per_replica,
            r.candidate.layout.gpus,
            r.candidate.tensor_parallel_size,
            r.candidate.kv_cache_dtype != "auto",
            r.candidate.max_num_batched_tokens == default_mnbt,
        ),
    )
    seqs = max(1, closest.candidate.max_num_seqs)
    memory = closest.model.memory
    return PlanResult(
        feasible=False,
        reason=closest.candidate.reason,
        plan=None,
        prediction=None,
        memory=memory.breakdown(seqs),
        kv_cache_tokens_per_replica=memory.kv_cache_tokens(req.max_len, seqs),
        max_concurrency_at_max_model_len=memory.max_concurrency(req.max_len, seqs),
        candidates=candidates,
    )


def _budget_for(best: _Row, rows: list[_Row], default_mnbt: int) -> _Row:
    """For the layout and KV dtype the ranking chose, the --max-num-batched-tokens: vLLM's default unless
    another serves :data:`BATCHED_TOKENS_GAIN` more sequences per replica or is that much faster (a flag
    changed for noise is not worth its TTFT and memory trade-offs); else, of the budgets that serve the
    most sequences, the fastest.

    Sequences come first. Preferring the default by throughput alone let a budget with 9 % more sequences
    and 1.6 % more throughput lose to the default at p90 and win at p95, where the default had fallen
    further: a stricter SLO planned more sequences on the same layout. Each budget's sequences only fall
    as the SLO tightens; the choice can still move to a budget with more sequences when the default falls
    out of the 3 % band while another stays, by less than that band (docs/capacity.md)."""
    b = best.candidate
    siblings = [
        r
        for r in rows
        if r.candidate.feasible
        and r.candidate.layout == b.layout
        and r.candidate.kv_cache_dtype == b.kv_cache_dtype
    ]
    most = max(r.candidate.sequences_per_replica for r in siblings)
    fastest = max(
        (r for r in siblings if r.candidate.sequences_per_replica == most),
        key=lambda r: r.candidate.output_tokens_per_second_per_gpu,
    )
    gain, quickest = 1.0 + BATCHED_TOKENS_GAIN, fastest.candidate.output_tokens_per_second_per_gpu
    for row in siblings:
        c = row.candidate
        if (
            c.max_num_batched_tokens == default_mnbt
            and c.sequences_per_replica * gain >= most
            and c.output_tokens_per_second_per_gpu * gain >= quickest
        ):
            return row
    return fastest


def _complexity(layout: Layout) -> tuple[int, int, int, bool, int]:
    """On ties, the simpler layout: fewer nodes, no pipeline, no data parallelism, no EP, smaller TP."""
    return (
        layout.nodes,
        layout.pipeline_parallel_size,
        layout.data_parallel_size,
        layout.expert_parallel,
        layout.tensor_parallel_size,
    )


#: A pipeline (or a replica across nodes) must beat a one-node layout's throughput per GPU by this much to
#: be chosen at the same GPU count: its bubbles, hand-offs and node-network terms are not fitted to
#: measurements (docs/capacity.md), and one-node replicas are simpler to run and to roll.
PIPELINE_MARGIN = 1.15


def _ranked_throughput(c: Candidate) -> float:
    """Output tokens/s per GPU as the ranking weighs it (a pipeline's discounted by PIPELINE_MARGIN)."""
    pipelined = c.layout.pipeline_parallel_size > 1 or c.layout.spans_nodes
    return c.output_tokens_per_second_per_gpu / (PIPELINE_MARGIN if pipelined else 1.0)


def _why_lost(best: Candidate, ordered: list[Candidate], default_mnbt: int) -> tuple[Candidate, ...]:
    """The candidates, best first, every feasible runner-up saying why it lost to ``best`` (a budget of the
    same layout and dtype by the rule of :func:`_budget_for`)."""
    out = [best]
    winner = (
        f"{best.layout.label} with {best.kv_cache_dtype} KV cache and {best.max_num_batched_tokens} batched "
        f"tokens ({best.sequences_per_replica} sequences per replica)"
    )
    for c in ordered:
        if c is best:
            continue
        if c.feasible:
            mine, theirs = c.output_tokens_per_second_per_gpu, best.output_tokens_per_second_per_gpu
            sibling = c.layout == best.layout and c.kv_cache_dtype == best.kv_cache_dtype
            if c.gpus > best.gpus:
                why = f"{c.gpus} GPUs against {best.gpus}"
            elif sibling and best.max_num_batched_tokens == default_mnbt:
                why = (
                    f"vLLM's default budget is kept unless another serves {BATCHED_TOKENS_GAIN:.0%} more "
                    f"sequences or is that much faster ({c.sequences_per_replica} sequences against "
                    f"{best.sequences_per_replica}, {mine:.0f} output tokens/s per GPU against {theirs:.0f})"
                )
            elif sibling and c.sequences_per_replica < best.sequences_per_replica:
                why = f"{c.sequences_per_replica} sequences per replica against {best.sequences_per_replica}"
            elif mine < theirs * (1 - 1e-9):
                why = f"{mine:.0f} output tokens/s per GPU against {theirs:.0f}"
            elif _ranked_throughput(c) < _ranked_throughput(best) * (1 - 1e-9):
                why = (
                    f"{mine:.0f} output tokens/s per GPU against {theirs:.0f}, short of the "
                    f"{PIPELINE_MARGIN:.2f}x a pipeline needs to beat one-node replicas (not fitted terms)"
                )
            else:
                why = "equal throughput, but a more complex layout or a non-default flag"
            lost = copy.copy(c)  # a frozen copy with two fields changed, cheaper than dataclasses.replace
            object.__setattr__(lost, "stage", "lost")
            object.__setattr__(
                lost,
                "reason",
                f"feasible ({c.sequences_per_replica} sequences per replica) but lost to {winner}: {why}",
            )
            c = lost
        out.append(c)
    return tuple(out)


def candidate_layouts(arch: Architecture, limits: Limits, max_gpus: int) -> list[Layout]:
    """Every layout vLLM accepts for ``arch`` within ``max_gpus`` GPUs and what ``limits`` pins (the rules
    of :func:`~capacity.layout.layout_error`). Pipeline parallelism is weighed where a replica spans nodes
    (inside a node TP serves the same GPUs faster: a pipeline only adds the bubbles TP does not have),
    unless pinned; data parallelism only with expert parallelism, for MoE models. Memoized per model."""
    pins = (
        limits.gpus_per_node,
        limits.tensor_parallel_size,
        limits.pipeline_parallel_size,
        limits.data_parallel_size,
        limits.expert_parallel,
        limits.max_nodes_per_replica,
    )
    key = ("candidate_layouts", max_gpus, *pins)
    cached = arch.memo.get(key)
    if cached is None:
        cached = arch.memo[key] = tuple(_layouts(arch, limits, max_gpus))
    assert isinstance(cached, tuple)
    return list(cached)


def _layouts(arch: Architecture, limits: Limits, max_gpus: int) -> Iterator[Layout]:
    gpn = limits.gpus_per_node
    pinned_pp = limits.pipeline_parallel_size
    max_nodes = limits.max_nodes_per_replica or max_gpus
    for ep in [limits.expert_parallel] if limits.expert_parallel is not None else [False, True]:
        if ep and not arch.is_moe:
            continue
        for tp in range(1, min(gpn, max_gpus) + 1):
            if limits.tensor_parallel_size not in (None, tp):
                continue
            for dp in range(1, max_gpus // tp + 1) if ep else (1,):
                if limits.data_parallel_size not in (None, dp):
                    continue
                deepest = min(max_gpus // (tp * dp), arch.num_decoder_layers)
                for pp in range(1, deepest + 1) if dp == 1 else (1,):
                    gpus = tp * pp * dp
                    if pinned_pp not in (None, pp) or (pinned_pp is None and pp > 1 and gpus <= gpn):
                        continue  # a pipeline inside one node only when pinned
                    if -(-gpus // gpn) > max_nodes or (gpus > gpn and gpus % gpn):
                        continue  # too many nodes, or a node shared by two partial replicas
                    layout = Layout(
                        tensor_parallel_size=tp,
                        pipeline_parallel_size=pp,
                        data_parallel_size=dp,
                        expert_parallel=ep,
                        gpus_per_node=gpn,
                    )
                    if layout_error(arch, layout) is None:
                        yield layout


def _pin_error(arch: Architecture, limits: Limits) -> str | None:
    """A pinned pipeline, data or expert parallelism that no layout of ``arch`` can take, as bad input (like
    a TP that splits the heads): the rules of :func:`~capacity.layout.layout_error` that hold whatever the
    other degrees are."""
    pp, dp = limits.pipeline_parallel_size, limits.data_parallel_size
    if pp is not None and pp > arch.num_decoder_layers:
        return (
            f"pipeline parallel size {pp} exceeds the {arch.num_decoder_layers} layers of {arch.name}; "
            f"accepted: at most {arch.num_decoder_layers}"
        )
    if limits.expert_parallel and not arch.is_moe:
        return f"expert parallelism needs a mixture-of-experts model; {arch.name} is dense (accepted: off)"
    if dp is not None and dp > 1 and not arch.is_moe:
        return (
            f"data parallel size {dp} is planned only with expert parallelism on a mixture-of-experts model; "
            f"{arch.name} is dense and scales with replicas (accepted: 1)"
        )
    return None


def _no_layout(arch: Architecture, limits: Limits, max_gpus: int) -> str:
    """Why no layout is valid: the pinned one's error, or the model's TP rules within the budget."""
    pinned = Layout(
        tensor_parallel_size=limits.tensor_parallel_size or 1,
        pipeline_parallel_size=limits.pipeline_parallel_size or 1,
        data_parallel_size=limits.data_parallel_size or 1,
        expert_parallel=bool(limits.expert_parallel),
        gpus_per_node=limits.gpus_per_node,
    )
    error = layout_error(arch, pinned)
    if error is not None and (
        limits.tensor_parallel_size or limits.pipeline_parallel_size or limits.data_parallel_size
    ):
        return f"the pinned layout {pinned.label} is not valid: {error}"
    if pinned.gpus > max_gpus:
        return (
            f"the pinned layout {pinned.label} needs {pinned.gpus} GPUs, more than the {max_gpus} allowed; "
            "raise the GPU limit"
        )
    return (
        f"no layout up to {max_gpus} GPUs is valid for {arch.name} ({arch.num_attention_heads} heads, "
        f"{arch.num_kv_heads} KV heads); allow more GPUs per node or more GPUs"
    )


@dataclass(frozen=True, kw_only=True)
class _Row:
    candidate: Candidate
    model: ServingModel
    limits: tuple[BatchLimit, ...] = ()
    op_batch: int = 0
    point: ServingPoint | None = None
    curve: Curve | None = None


def _chosen(req: _Request, row: _Row, candidates: tuple[Candidate, ...]) -> PlanResult:
    best, model = row.candidate, row.model
    assert row.point is not None
    batch, point = best.max_num_seqs, row.point
    chosen = Plan(
        tensor_parallel_size=best.tensor_parallel_size,
        pipeline_parallel_size=best.layout.pipeline_parallel_size,
        data_parallel_size=best.layout.data_parallel_size,
        expert_parallel=best.layout.expert_parallel,
        gpus_per_node=best.layout.gpus_per_node,
        max_num_seqs=batch,
        kv_cache_dtype=best.kv_cache_dtype,
        max_model_len=req.max_len,
        gpu_memory_utilization=req.limits.gpu_memory_utilization,
        max_num_batched_tokens=best.max_num_batched_tokens,
        replicas=best.replicas,
        lora=req.limits.lora,
        mm_encoder_tp_mode=encoder_tp_mode(req.arch, best.tensor_parallel_size),
        allow_deprecated_quantization=req.arch.weights.deprecated,
        quantization=req.arch.weights.flag,
        attention_backend=req.arch.attention_backend,
    )
    shape = req.shape
    prediction = Prediction(
        percentile=req.slo.percentile,
        tpot_seconds=best.tpot_seconds,
        tpot_mean_seconds=point.tpot_mean_seconds,
        tpot_histogram_seconds=row.curve.measured_seconds(row.op_batch, req.calibration)
        if row.curve
        else 0.0,
        ttft_seconds=best.ttft_seconds,
        output_tokens_per_second=best.replicas
        * best.layout.data_parallel_size
        * row.op_batch
        / point.tpot_mean_seconds,
        batch_per_replica=row.op_batch,
        prefill_tokens_per_step=(
            row.op_batch * shape.prompt_tokens / shape.output_tokens if shape.mixed else 0.0
        ),
        point=point,
        decode=model.roofline.step(row.op_batch, shape.decode_context_tokens),
        limits=row.limits,
        calibration=req.calibration,
    )
    warnings = []
    if req.arch.attention == "MLA" and best.kv_cache_dtype.startswith("fp8"):
        warnings.append(
            "fp8 KV cache on MLA quantizes the shared latent: a quality risk, check long-context recall"
        )
    if best.kv_cache_dtype.startswith("fp8") and not req.gpu.supports_fp8:
        warnings.append(
            f"fp8 KV cache on {req.gpu.id}, which has no fp8 tensor cores: vLLM serves it with FlashInfer or "
            "Triton attention instead of FlashAttention; the predicted TPOT is the roofline's, not measured "
            "on those kernels (the feedback loop calibrates it)"
        )
    nodes = f" over {chosen.nodes_per_replica} nodes" if chosen.nodes_per_replica > 1 else ""
    reason = (
        f"{best.layout.label}{nodes} x {chosen.replicas} replica(s) with {chosen.kv_cache_dtype} KV "
        f"cache: {prediction.output_tokens_per_second / chosen.gpus:.0f} output tokens/s per GPU; "
        f"max-num-seqs {batch} set by {_describe(prediction.binding)}"
    )
    return PlanResult(
        feasible=True,
        reason=reason,
        plan=chosen,
        prediction=prediction,
        memory=model.memory.breakdown(batch),
        kv_cache_tokens_per_replica=model.memory.kv_cache_tokens(req.max_len, batch),
        max_concurrency_at_max_model_len=model.memory.max_concurrency(req.max_len, batch),
        candidates=candidates,
        warnings=tuple(warnings),
    )


def _binding(limits: tuple[BatchLimit, ...]) -> BatchLimit:
    """The rule that sets max-num-seqs: the smallest cap (a searched one over an "at least" on ties)."""
    return min(limits, key=lambda limit: (limit.sequences, limit.at_least))


def _describe(limit: BatchLimit) -> str:
    return f"the {limit.constraint} limit ({limit.detail})"


@dataclass(frozen=True, kw_only=True)
class _Sizing:
    """What the batch rules read for one candidate."""

    req: _Request
    model: ServingModel
    dtype: str
    curve: Curve

    @property
    def cap(self) -> int:
        return min(MAX_NUM_SEQS_CAP, self.model.max_num_batched_tokens)

    def at(self, batch: int) -> ServingPoint:
        return self.curve.point(batch, self.req.calibration)

    def tpot(self, batch: int) -> float:
        return self.curve.tpot_seconds(batch, self.req.calibration)


def vllm_cap_rule(z: _Sizing) -> BatchLimit | None:
    """vLLM's own bounds: at most 1024 seats, and no more seats than batched tokens."""
    mnbt = z.model.max_num_batched_tokens
    return BatchLimit(
        constraint="vllm-cap",
        sequences=z.cap,
        detail=f"max-num-seqs is at most {MAX_NUM_SEQS_CAP} and at most max-num-batched-tokens {mnbt}",
    )


#: The batch limits that predict latency from the serving model (a measured pin outranks them).
PREDICTED_LIMITS = frozenset({"tpot", "ttft", "prefill"})


def pinned_rule(z: _Sizing) -> BatchLimit | None:
    """A max-num-seqs the user (or the feedback loop) pinned."""
    pinned = z.req.limits.max_num_seqs
    if pinned is None:
        return None
    return BatchLimit(constraint="pinned", sequences=pinned, detail=f"max-num-seqs pinned to {pinned}")


def memory_rule(z: _Sizing) -> BatchLimit | None:
    """Sequences of the workload's length whose KV reservations fit beside the activation peak the batch
    itself sets (:meth:`KVMemory.max_batch`)."""
    shared = z.req.workload.shared_prefix_tokens
    seqs = max(0, z.model.memory.max_batch(z.req.seq_tokens, z.cap, shared))
    sharing = f" sharing a {shared}-token prefix" if shared else ""
    return BatchLimit(
        constraint="memory",
        sequences=seqs,
        detail=f"{_dtype_label(z.req.arch, z.dtype, z.model.memory)} KV cache holds {seqs} sequences of "
        f"{z.req.seq_tokens} tokens{sharing}",
    )


def prefill_rule(z: _Sizing) -> BatchLimit | None:
    """Prompt tokens arrive at ``b x prompt / output`` per step and must fit the ``mnbt - b`` the decodes
    leave: beyond that the queue grows without bound."""
    shape, mnbt = z.req.shape, z.model.max_num_batched_tokens
    if not shape.mixed:
        return None
    seqs = max(0, min(z.cap, mnbt * shape.output_tokens // (shape.prefill_tokens + shape.output_tokens)))
    cached = f" ({shape.cached_prompt_tokens} of them cached)" if shape.cached_prompt_tokens else ""
    return BatchLimit(
        constraint="prefill",
        sequences=seqs,
        detail=f"prompts of {shape.prompt_tokens} tokens{cached} arriving every {shape.output_tokens} steps "
        f"fit {mnbt} batched tokens up to batch {seqs}",
    )


def tpot_rule(z: _Sizing, hi: int) -> BatchLimit | None:
    """The largest batch whose TPOT at the SLO's percentile is within the SLO."""
    slo_tpot, p = z.req.slo.tpot_seconds, z.req.slo.percentile
    if slo_tpot is None:
        return None
    seqs = largest_within(1, hi, z.tpot, slo_tpot)
    if seqs < 1:
        one = z.tpot(1)
        detail = f"p{p} TPOT at batch 1 is {one * 1e3:.1f} ms, above the {slo_tpot * 1e3:.1f} ms SLO"
    else:
        detail = (
            f"p{p} TPOT {z.tpot(seqs) * 1e3:.1f} ms <= {slo_tpot * 1e3:.1f} ms up to batch "
            f"{seqs}{' at least' if seqs == hi else ''}"
        )
    return BatchLimit(constraint="tpot", sequences=max(0, seqs), at_least=seqs == hi, detail=detail)


def ttft_rule(z: _Sizing, hi: int) -> BatchLimit | None:
    """The largest batch whose TTFT at the percentile (chunks, a prompt ahead) is within the TTFT SLO."""
    slo_ttft, p = z.req.slo.ttft_seconds, z.req.slo.percentile
    if slo_ttft is None:
        return None
    seqs = largest_within(1, hi, lambda b: z.at(b).ttft_seconds(p), slo_ttft)
    prompt = f"a {z.req.shape.prompt_tokens}-token prompt"
    if seqs < 1:
        one = z.at(1).ttft_seconds(p)
        detail = f"p{p} TTFT of {prompt} is {one:.3f} s at batch 1, above the {slo_ttft:.3f} s SLO"
    else:
        detail = (
            f"p{p} TTFT of {prompt} {z.at(seqs).ttft_seconds(p):.3f} s <= {slo_ttft:.3f} s up to batch "
            f"{seqs}{' at least' if seqs == hi else ''}"
        )
    return BatchLimit(constraint="ttft", sequences=max(0, seqs), at_least=seqs == hi, detail=detail)


#: Caps on --max-num-seqs that need no latency search, in the order they are reported.
CAP_RULES: tuple[Callable[[_Sizing], BatchLimit | None], ...] = (
    vllm_cap_rule,
    pinned_rule,
    memory_rule,
    prefill_rule,
)
#: Latency caps, searched by bisection only up to the smallest of the caps above (beyond it they cannot
#: bind, and are reported as "at least").
LATENCY_RULES: tuple[Callable[[_Sizing, int], BatchLimit | None], ...] = (tpot_rule, ttft_rule)


def _batch_limits(req: _Request, curve: Curve, dtype: str) -> tuple[BatchLimit, ...]:
    """Every rule's cap on the sequences one replica runs; the smallest binds."""
    z = _Sizing(req=req, model=curve.model, dtype=dtype, curve=curve)
    caps = [limit for rule in CAP_RULES if (limit := rule(z)) is not None]
    hi = max(1, min(limit.sequences for limit in caps))
    latency = [limit for rule in LATENCY_RULES if (limit := rule(z, hi)) is not None]
    return (*caps, *latency)


def _memory_at(req: _Request, model: ServingModel, dtype: str, layout: Layout) -> KVMemory:
    """vLLM's memory accounting for ``model``'s engine flags on another layout (to name a fix that works),
    computed once per request and layout."""
    key = (layout, dtype, model.max_num_batched_tokens)
    known = req.memory_at.get(key)
    if known is None:
        config = EngineConfig(
            layout=layout,
            kv_cache_dtype=dtype,
            max_num_batched_tokens=model.max_num_batched_tokens,
            gpu_memory_utilization=req.limits.gpu_memory_utilization,
            lora=req.limits.lora,
        )
        known = req.memory_at[key] = KVMemory(req.arch, req.gpu, config)
    return known


def weights_fit_rule(req: _Request, model: ServingModel, dtype: str) -> str | None:
    """The weights, the activation peak and the reserves fit the memory budget, or why not."""
    mem, layout = model.memory, model.layout
    if mem.free_bytes(1) > 0:
        return None

    def fits(larger: Layout) -> bool:
        """The same engine flags hold the weights on ``larger``: the fix to name."""
        return _memory_at(req, model, dtype, larger).free_bytes(1) > 0

    key = ("weights", layout.gpus, dtype, model.max_num_batched_tokens)
    if key not in req.fixes:
        req.fixes[key] = _weight_fixes(req.arch, layout, req.limits, req.max_gpus, fits)
    adapters = f"{_gib(mem.lora)} of LoRA adapters plus " if mem.lora else ""
    return (
        f"at {layout.label} the {_gib(mem.weights)} of weights per GPU plus {adapters}"
        f"{_gib(mem.other + mem.activation(1))} of activations and reserves exceed the "
        f"{_gib(mem.budget)} budget; {req.fixes[key]}"
    )


def longest_sequence_rule(req: _Request, model: ServingModel, dtype: str) -> str | None:
    """One sequence of max-model-len fits the KV cache (vLLM refuses to start otherwise), or why not."""
    mem, layout = model.memory, model.layout
    need = mem.blocks_per_sequence(req.max_len)
    if mem.blocks(1) >= need:
        return None

    def fits(larger: Layout) -> bool:
        """The same engine flags hold one max-model-len sequence on ``larger``: the layout to name."""
        kv = _memory_at(req, model, dtype, larger)
        return kv.blocks(1) >= kv.blocks_per_sequence(req.max_len)

    key = ("longest sequence", layout.gpus, dtype, model.max_num_batched_tokens)
    if key not in req.fixes:
        req.fixes[key] = _memory_fixes(req.arch, req.gpu, layout, dtype, req.limits, req.max_gpus, fits)
    fixes = req.fixes[key]
    return (
        f"at {layout.label} with {_dtype_label(req.arch, dtype, mem)} KV cache one {req.max_len}-token "
        "sequence needs "
        f"{_gib(need * mem.layout.bytes_per_block)} of KV cache per GPU but only "
        f"{_gib(mem.free_bytes(1))} is left after "
        f"{_gib(mem.weights)} of weights{f' and {_gib(mem.lora)} of LoRA adapters' if mem.lora else ''}; "
        f"{fixes}"
    )


#: What must hold before any batch is sized, in order; the first refusal is the candidate's answer.
FIT_RULES: tuple[Callable[[_Request, ServingModel, str], str | None], ...] = (
    weights_fit_rule,
    longest_sequence_rule,
)


def _evaluate(req: _Request, layout: Layout, dtype: str, mnbt: int, roofline: StepModel) -> _Row:
    arch, gpu, limits = req.arch, req.gpu, req.limits
    at = f"at {layout.label}"
    dp, size = layout.data_parallel_size, layout.gpus
    config = EngineConfig(
        layout=layout,
        kv_cache_dtype=dtype,
        max_num_batched_tokens=mnbt,
        gpu_memory_utilization=limits.gpu_memory_utilization,
        lora=limits.lora,
    )
    model = ServingModel(arch, gpu, config, efficiency=limits.efficiency, roofline=roofline)
    mem = model.memory

    def refuse(
        stage: str,
        reason: str,
        *,
        seqs: int = 0,
        bound_by: str = "",
        replicas: int = 1,
        tpot: float = 0.0,
        ttft: float = 0.0,
        limits_: tuple[BatchLimit, ...] = (),
    ) -> _Row:
        return _Row(
            candidate=Candidate(
                layout=layout,
                kv_cache_dtype=dtype,
                max_num_batched_tokens=mnbt,
                feasible=False,
                reason=reason,
                stage=stage,
                max_num_seqs=seqs,
                bound_by=bound_by,
                replicas=replicas,
                kv_cache_tokens_per_replica=mem.kv_cache_tokens(req.max_len, max(1, seqs)),
                tpot_seconds=tpot,
                ttft_seconds=ttft,
                output_tokens_per_second_per_gpu=0.0,
            ),
            model=model,
            limits=limits_,
        )

    label = _dtype_label(arch, dtype, mem)
    for fit in FIT_RULES:
        refusal = fit(req, model, dtype)
        if refusal is not None:
            return refuse("memory", refusal)
    curve = Curve(model, req.shape, req.slo.percentile)
    batch_limits = _batch_limits(req, curve, dtype)
    if limits.max_num_seqs is not None and limits.max_num_seqs_measured:
        # The model's latency limits do not bind a measured pin (the plan's prediction still shows them).
        batch_limits = tuple(b for b in batch_limits if b.constraint not in PREDICTED_LIMITS)
    binding = _binding(batch_limits)
    seqs = binding.sequences
    others = ", ".join(limit.label for limit in batch_limits if limit is not binding)
    if limits.max_num_seqs is not None and seqs < limits.max_num_seqs:
        return refuse(
            "batch",
            f"{at} with {label} KV cache the pinned max-num-seqs {limits.max_num_seqs} breaks "
            f"{_describe(binding)}; {_batch_fixes(binding, req, layout, dtype)}",
            seqs=seqs,
            bound_by=binding.constraint,
            limits_=batch_limits,
        )
    if seqs < 1:
        return refuse(
            "batch",
            f"{at} with {label} KV cache not one sequence meets {_describe(binding)}; "
            f"{_batch_fixes(binding, req, layout, dtype)}",
            bound_by=binding.constraint,
            limits_=batch_limits,
        )
    concurrency = req.workload.concurrency
    replicas = math.ceil(concurrency / (seqs * dp)) if concurrency else 1
    if replicas * size > req.max_gpus and limits.max_num_seqs is not None and limits.max_num_seqs_measured:
        # The feedback loop chose this batch knowing the budget cannot seat the whole demand: the rest
        # queues (its law weighed that), so the plan is the replicas the budget holds, not a refusal.
        replicas = max(1, req.max_gpus // size)
    op_batch = min(seqs, math.ceil(concurrency / (replicas * dp))) if concurrency else seqs
    point = curve.point(op_batch, req.calibration)
    p = req.slo.percentile
    tpot = curve.tpot_seconds(op_batch, req.calibration)
    ttft = point.ttft_seconds(p)
    if replicas * size > req.max_gpus:
        engines = f"{dp} engines of {seqs}" if dp > 1 else f"{seqs}"
        return refuse(
            "gpus",
            f"{at} with {label} KV cache one replica serves {engines} sequences (set by "
            f"{_describe(binding)}; the other limits: {others}), so concurrency {concurrency} needs "
            f"{replicas} replicas = {replicas * size} GPUs, {replicas * size - req.max_gpus} more than the "
            f"{req.max_gpus} allowed; raise the GPU limit"
            + (
                ", use fp8 KV cache"
                if dtype != "fp8" and gpu.fp8_kv_cache and binding.constraint == "memory"
                else ""
            )
            + " or lower the concurrency",
            seqs=seqs,
            bound_by=binding.constraint,
            replicas=replicas,
            tpot=tpot,
            ttft=ttft,
            limits_=batch_limits,
        )
    per_gpu = op_batch * dp / point.tpot_mean_seconds / size
    return _Row(
        candidate=Candidate(
            layout=layout,
            kv_cache_dtype=dtype,
            max_num_batched_tokens=mnbt,
            feasible=True,
            reason="",
            stage="ok",
            max_num_seqs=seqs,
            bound_by=binding.constraint,
            replicas=replicas,
            kv_cache_tokens_per_replica=mem.kv_cache_tokens(req.max_len, seqs),
            tpot_seconds=tpot,
            ttft_seconds=ttft,
            output_tokens_per_second_per_gpu=per_gpu,
        ),
        model=model,
        limits=batch_limits,
        op_batch=op_batch,
        point=point,
        curve=curve,
    )


def _batch_fixes(binding: BatchLimit, req: _Request, layout: Layout, dtype: str) -> str:
    """What relaxes the binding rule."""
    match binding.constraint:
        case "memory":
            return _memory_fixes(req.arch, req.gpu, layout, dtype, req.limits, req.max_gpus)
        case "tpot":
            return (
                "use more GPUs per replica (higher TP), a GPU with more memory bandwidth, a lower "
                "percentile or relax the TPOT SLO"
            )
        case "ttft":
            return "use higher TP, a faster GPU, shorter prompts or relax the TTFT SLO"
        case "prefill":
            return "raise --max-num-batched-tokens, use shorter prompts or longer outputs"
        case _:
            return "lower the pinned max-num-seqs or set it to Auto"


def _dtype_label(arch: Architecture, dtype: str, memory: KVMemory) -> str:
    """``bfloat16 (auto)`` for auto (the checkpoint's own KV format where it has one: ModelOpt's
    ``kv_cache_quant_algo`` makes vLLM's auto fp8; DeepSeek-V4.1's its GPU's), the dtype itself otherwise."""
    if dtype != "auto":
        return dtype
    tp = memory.parallel.tensor_parallel_size
    cc = memory.gpu.compute_capability
    return f"{resolve_kv_cache_dtype(arch, 'auto', compute_capability=cc, tensor_parallel_size=tp)} (auto)"


def _larger_layout(
    arch: Architecture,
    layout: Layout,
    limits: Limits,
    max_gpus: int,
    fits: Callable[[Layout], bool] | None = None,
) -> str | None:
    """The smallest valid layout with more GPUs per replica than ``layout`` (up to four nodes) that
    ``fits`` (by default any), as ``TP 8 x PP 2 over 2 nodes``, saying when it needs a larger GPU budget;
    None when there is none."""
    bigger = sorted(
        (
            c
            for c in candidate_layouts(
                arch,
                replace(
                    limits, pipeline_parallel_size=None, tensor_parallel_size=None, max_nodes_per_replica=None
                ),
                4 * limits.gpus_per_node,
            )
            if c.gpus > layout.gpus
        ),
        key=lambda c: (c.gpus, _complexity(c)),
    )
    c = next((c for c in bigger if fits is None or fits(c)), None)
    if c is None:
        return None
    nodes = f" over {c.nodes} nodes" if c.nodes > 1 else ""
    limit = "" if c.gpus <= max_gpus else f", raise the limit of {max_gpus} GPUs"
    return f"{c.label}{nodes}{limit}"


def _weight_fixes(
    arch: Architecture, layout: Layout, limits: Limits, max_gpus: int, fits: Callable[[Layout], bool]
) -> str:
    """What makes the weights fit: the smallest larger layout that holds them, else a bigger GPU or
    quantized weights kvright reads (and fewer LoRA adapter slots, when LoRA is on)."""
    fix = _weight_layout_fixes(arch, layout, limits, max_gpus, fits)
    if limits.lora is None:
        return fix
    return f"{fix}; or fewer or lower-rank LoRA adapters (--max-loras, --max-lora-rank)"


def _weight_layout_fixes(
    arch: Architecture, layout: Layout, limits: Limits, max_gpus: int, fits: Callable[[Layout], bool]
) -> str:
    larger = _larger_layout(arch, layout, limits, max_gpus, fits)
    if larger:
        return f"needs more GPUs ({larger}), a GPU with more memory or {_quantized_options(arch)}"
    return (
        f"needs a GPU with more memory or {_quantized_options(arch)} (no valid layout of up to four "
        f"{limits.gpus_per_node}-GPU nodes holds the weights)"
    )


def _same_stack(a: Architecture, b: Architecture) -> bool:
    """The same model in another weight format: width, vocabulary, every layer's kind, width and KV heads,
    and DeepSeek-V3.2's sparse-attention indexer (which V3 and V3.1 lack)."""
    return (a.hidden_size, a.vocab_size, a.layers, a.index_head_dim) == (
        b.hidden_size, b.vocab_size, b.layers, b.index_head_dim
    )  # fmt: skip


def _quantized_options(arch: Architecture) -> str:
    """Quantized weights for ``arch`` that kvright understands: a catalog checkpoint of the same model in a
    quantized format (the same layers, layer by layer: Llama-3.3-Nemotron-49B shares Llama-3.1-70B's width,
    depth and vocabulary, not its layers), and online FP8 when the checkpoint is unquantized."""
    same = [
        model_id
        for model_id in catalog_ids()
        if (other := catalog_architecture(model_id)).weights.method != "none"
        and other.weights.method != arch.weights.method
        and _same_stack(other, arch)
    ]
    options = []
    if same:
        options.append(
            "a quantized checkpoint such as "
            + " or ".join(f"{m} ({catalog_architecture(m).weights.label})" for m in same[:2])
        )
    else:
        options.append(
            "a quantized checkpoint (FP8, AWQ, GPTQ, compressed-tensors, NVFP4 and MXFP4 are read)"
        )
    if arch.weights.method == "none":
        options.append(
            f"FP8 weights quantized at load (spec.tuning.quantization: FP8 or Auto, --quantization "
            f"{ONLINE_FP8.method})"
        )
    return " or ".join(options)


def _memory_fixes(
    arch: Architecture,
    gpu: GPU,
    layout: Layout,
    dtype: str,
    limits: Limits,
    max_gpus: int,
    fits: Callable[[Layout], bool] | None = None,
) -> str:
    """The changes that would free KV memory, in the order people usually try them; more GPUs only as the
    smallest larger layout that ``fits`` (by default any)."""
    fixes = []
    larger = _larger_layout(arch, layout, limits, max_gpus, fits)
    if larger:
        fixes.append(f"more GPUs ({larger})")
    if not dtype.startswith("fp8") and gpu.fp8_kv_cache:
        fixes.append("fp8 KV cache")
    fixes.append("a shorter max-model-len")
    if limits.lora is not None:
        fixes.append(
            f"fewer or lower-rank LoRA adapters (--max-loras {limits.lora.max_loras} at --max-lora-rank "
            f"{limits.lora.max_lora_rank} take their buffers from the KV cache)"
        )
    fixes.append("a GPU with more memory")
    return "needs " + ", ".join(fixes[:-1]) + " or " + fixes[-1]
