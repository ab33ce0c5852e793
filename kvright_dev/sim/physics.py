"""The simulator's physics: how long a vLLM engine step takes on a GPU, written for the simulator alone.

kvright predicts step times with its serving model (``capacity.serving`` / ``capacity.roofline``); the
simulator must not, or the feedback loop would only ever be tested against itself up to a constant
(issue 13). This module takes the model's *facts* from ``capacity`` (weight bytes per GPU, KV bytes per
token, parameters, layers, the GPU's datasheet bandwidth and FLOPs: data, not a model of time) and
prices a step the way a vLLM step spends its time:

``step = overhead + decodes x layers x per_sequence_layer + max(weight reads, GEMM FLOPs)
+ KV reads + prefill attention + TP all-reduces``

- **Weight reads** stream each GPU's weights once per step at ``hbm x weight_read_efficiency`` (MoE: the
  experts the step's tokens route to); the linear layers of every token in the step (decodes and
  prefill chunks alike) run as one GEMM that is either memory- or compute-bound
  (``prefill_compute_efficiency`` of the dense peak).
- **KV reads**: the decodes' paged attention streams their contexts at ``hbm x kv_read_efficiency``,
  *after* the GEMMs (separate kernels), so a step carrying prefill chunks is slower for every decode in
  it: chunked-prefill interference.
- **Prefill attention**: causal attention FLOPs of the chunks, at the compute efficiency.
- **All-reduces**: two per layer at TP > 1, a fixed latency plus the hidden states over the link.
- **Overheads**: a fixed cost per step (scheduler, sampler, CPU launch) visible at batch 1, and a cost
  per decoded sequence per layer (block-table walk, launch tail).

A :class:`GPUProfile` holds those efficiencies and overheads, the pod's cold start and the KV memory
the engine really gets; :meth:`GPUProfile.draw` draws a hidden one from :data:`RANGES` (the bench gives
each seed its own, and kvright is not told). :meth:`GPUProfile.nominal` is close to what kvright's
model assumes, so a plan that the model sizes right runs as predicted (the end-to-end test's "exact"
case); ``--efficiency`` scales the nominal profile's speed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, ClassVar

import capacity
from kvright_dev.sim.engine import Engine, StepWork

if TYPE_CHECKING:
    from kvright_dev.sim.server import ServeArgs

__all__ = ["RANGES", "GPUProfile", "ModelFacts", "build_engine", "step_function"]

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True, kw_only=True)
class GPUProfile:
    """How a real GPU (driver, kernels, engine version) falls short of its datasheet. Hidden from
    kvright: the bench draws one per seed from :data:`RANGES`."""

    weight_read_efficiency: float = 0.875
    """Fraction of peak HBM bandwidth the weight GEMMs stream at (0.55 .. 0.92)."""
    kv_read_efficiency: float = 0.875
    """Fraction of peak HBM bandwidth paged attention reads the KV cache at (0.40 .. 0.90)."""
    prefill_compute_efficiency: float = 0.70
    """Fraction of dense peak FLOPs the GEMMs and prefill attention reach (0.35 .. 0.75)."""
    interconnect_efficiency: float = 0.70
    """Fraction of the link bandwidth an all-reduce reaches (0.50 .. 0.85)."""
    allreduce_latency_seconds: float = 15e-6
    """Fixed cost of one all-reduce (10 .. 40 us)."""
    step_overhead_seconds: float = 3.0e-3
    """Fixed cost of every step: scheduling, sampling, launches (2 .. 12 ms)."""
    sequence_layer_seconds: float = 1.5e-6
    """Cost per decoded sequence per layer (0.5 .. 4 us)."""
    cold_start_fixed_seconds: float = 40.0
    """Pod start to first request, weights aside: image, engine init, CUDA graphs (20 .. 90 s)."""
    load_bytes_per_second: float = 2e9
    """Weight load bandwidth per GPU (storage or cache to HBM), bytes/s (0.5e9 .. 4e9)."""
    kv_memory_fraction: float = 1.0
    """Share of the KV blocks vLLM's memory accounting predicts that the engine really gets (0.85 .. 1.0):
    activation and graph peaks profiled larger than modelled."""
    step_noise: float = 0.05
    """Relative standard deviation of a step's duration (0.02 .. 0.10)."""

    RANGES: ClassVar[dict[str, tuple[float, float]]]

    def __post_init__(self) -> None:
        problems = [
            f"{f.name} {getattr(self, f.name)!r} (accepted: > 0)"
            for f in fields(self)
            if f.name not in ("step_noise", "kv_memory_fraction") and not getattr(self, f.name) > 0
        ]
        if not 0 < self.kv_memory_fraction <= 1:
            problems.append(f"kv_memory_fraction {self.kv_memory_fraction!r} (accepted: 0 < f <= 1)")
        if not 0 <= self.step_noise < 1:
            problems.append(f"step_noise {self.step_noise!r} (accepted: 0 <= noise < 1)")
        if problems:
            raise ValueError("invalid GPU profile: " + "; ".join(problems))

    @classmethod
    def nominal(cls) -> GPUProfile:
        """The defaults: near what kvright's serving model assumes."""
        return cls()

    @classmethod
    def draw(cls, rng: random.Random) -> GPUProfile:
        """A hidden profile, every field uniform within :data:`RANGES` (log-uniform for the overheads,
        which span several-fold)."""
        values: dict[str, float] = {}
        for name, (low, high) in RANGES.items():
            if name in _LOG_UNIFORM:
                values[name] = math.exp(rng.uniform(math.log(low), math.log(high)))
            else:
                values[name] = rng.uniform(low, high)
        return cls(**values)

    def scaled(self, speed: float) -> GPUProfile:
        """Every step ``1 / speed`` as long (the simulator's ``--efficiency``); cold start unchanged."""
        if speed <= 0:
            raise ValueError(f"speed {speed!r} (accepted: > 0)")
        return replace(
            self,
            weight_read_efficiency=self.weight_read_efficiency * speed,
            kv_read_efficiency=self.kv_read_efficiency * speed,
            prefill_compute_efficiency=self.prefill_compute_efficiency * speed,
            interconnect_efficiency=self.interconnect_efficiency * speed,
            allreduce_latency_seconds=self.allreduce_latency_seconds / speed,
            step_overhead_seconds=self.step_overhead_seconds / speed,
            sequence_layer_seconds=self.sequence_layer_seconds / speed,
        )


#: The documented range of every :class:`GPUProfile` field, which :meth:`GPUProfile.draw` samples.
RANGES: dict[str, tuple[float, float]] = {
    "weight_read_efficiency": (0.55, 0.92),
    "kv_read_efficiency": (0.40, 0.90),
    "prefill_compute_efficiency": (0.35, 0.75),
    "interconnect_efficiency": (0.50, 0.85),
    "allreduce_latency_seconds": (10e-6, 40e-6),
    "step_overhead_seconds": (2e-3, 12e-3),
    "sequence_layer_seconds": (0.5e-6, 4e-6),
    "cold_start_fixed_seconds": (20.0, 90.0),
    "load_bytes_per_second": (0.5e9, 4e9),
    "kv_memory_fraction": (0.85, 1.0),
    "step_noise": (0.02, 0.10),
}
GPUProfile.RANGES = RANGES
_LOG_UNIFORM = frozenset(
    {"allreduce_latency_seconds", "step_overhead_seconds", "sequence_layer_seconds", "load_bytes_per_second"}
)


@dataclass(frozen=True, kw_only=True)
class ModelFacts:
    """What the physics needs to know about one replica's model and GPUs (data from ``capacity``)."""

    weight_bytes_per_gpu: float
    """Weights each GPU streams per step (input embedding excluded: a row lookup)."""
    expert_fraction: float
    """Share of those bytes in routed experts (0 for dense models)."""
    experts: int
    experts_per_token: float
    kv_bytes_per_token_per_gpu: float
    flops_per_token_per_gpu: float
    """Linear-layer FLOPs per token per GPU (2 x parameters / TP)."""
    attention_flops_per_context_token: float
    """Attention FLOPs per query token per context token per GPU, over all layers
    (4 x head_dim x heads / TP)."""
    layers: int
    allreduce_bytes_per_token: float
    """Hidden-state bytes per token per all-reduce."""
    tensor_parallel_size: int
    hbm_bytes_per_second: float
    flops_per_second: float
    interconnect_bytes_per_second: float

    @classmethod
    def of(
        cls, arch: capacity.Architecture, gpu: capacity.GPU, *, tensor_parallel_size: int, kv_cache_dtype: str
    ) -> ModelFacts:
        tp = tensor_parallel_size
        g = arch.parameter_groups
        embedding_bytes = 0.0 if arch.tie_word_embeddings else arch.weight_groups.embedding / tp
        weights = capacity.weight_bytes_per_gpu(arch, tp) - embedding_bytes
        expert_bytes = arch.weight_groups.routed_experts_total / tp
        params = arch.parameters - (0 if arch.tie_word_embeddings else g.embedding)
        fp8 = arch.weights.compute_format == "fp8" and gpu.supports_fp8
        return cls(
            weight_bytes_per_gpu=weights,
            expert_fraction=min(1.0, expert_bytes / weights) if weights > 0 else 0.0,
            experts=g.num_experts,
            experts_per_token=g.experts_per_token,
            kv_bytes_per_token_per_gpu=capacity.kv_cache_bytes_per_token(
                arch, kv_cache_dtype=kv_cache_dtype, tensor_parallel_size=tp
            )
            / tp,
            flops_per_token_per_gpu=2.0 * (arch.active_parameters if arch.is_moe else params) / tp,
            attention_flops_per_context_token=4.0
            * arch.head_dim
            * arch.num_attention_heads
            / tp
            * arch.num_layers,
            layers=arch.num_layers,
            allreduce_bytes_per_token=arch.hidden_size * DTYPE_BYTES.get(arch.dtype, 2),
            tensor_parallel_size=tp,
            hbm_bytes_per_second=gpu.hbm_bytes_per_second,
            flops_per_second=gpu.fp8_flops_per_second if fp8 else gpu.bf16_flops_per_second,
            interconnect_bytes_per_second=gpu.interconnect_bytes_per_second,
        )


def step_function(facts: ModelFacts, profile: GPUProfile) -> StepFunction:
    """The engine's ``step_seconds(work)`` for one replica on GPUs behaving like ``profile``."""
    return StepFunction(facts, profile)


class StepFunction:
    """``step_seconds(work)`` (module docstring); the per-replica constants computed once."""

    __slots__ = ("_attn", "_comm_fixed", "_comm_token", "_fixed", "_flop", "_kv", "_per_seq", "_w", "facts")

    def __init__(self, facts: ModelFacts, p: GPUProfile) -> None:
        self.facts = facts
        self._w = facts.weight_bytes_per_gpu / (facts.hbm_bytes_per_second * p.weight_read_efficiency)
        self._kv = facts.kv_bytes_per_token_per_gpu / (facts.hbm_bytes_per_second * p.kv_read_efficiency)
        peak = facts.flops_per_second * p.prefill_compute_efficiency
        self._flop = facts.flops_per_token_per_gpu / peak
        self._attn = facts.attention_flops_per_context_token / peak
        self._fixed = p.step_overhead_seconds
        self._per_seq = facts.layers * p.sequence_layer_seconds
        tp = facts.tensor_parallel_size
        if tp > 1:
            link = facts.interconnect_bytes_per_second * p.interconnect_efficiency
            self._comm_fixed = 2 * facts.layers * p.allreduce_latency_seconds
            self._comm_token = 2 * facts.layers * facts.allreduce_bytes_per_token * 2 * (tp - 1) / tp / link
        else:
            self._comm_fixed = self._comm_token = 0.0

    def weight_read_seconds(self, tokens: int) -> float:
        f = self.facts
        if not f.experts:
            return self._w
        touched = 1.0 - (1.0 - f.experts_per_token / f.experts) ** max(1, tokens)
        return self._w * (1.0 - f.expert_fraction + f.expert_fraction * touched)

    def __call__(self, work: StepWork) -> float:
        tokens = work.decode_seqs + work.prefill_tokens
        linear = max(self.weight_read_seconds(tokens), tokens * self._flop)
        return (
            self._fixed
            + work.decode_seqs * self._per_seq
            + linear
            + work.decode_context_tokens * self._kv
            + work.prefill_context_tokens * self._attn
            + (self._comm_fixed + tokens * self._comm_token if self._comm_fixed else 0.0)
        )


def cold_start_seconds(facts: ModelFacts, profile: GPUProfile) -> float:
    """Pod start until it serves: the fixed part plus each GPU loading its weights."""
    return profile.cold_start_fixed_seconds + facts.weight_bytes_per_gpu / profile.load_bytes_per_second


def build_engine(args: ServeArgs) -> tuple[Engine, dict[str, str]]:
    """The engine for a `vllm serve` command line, and the labels of vllm:cache_config_info."""
    try:
        arch = capacity.load_architecture(args.architecture or args.model)
        gpu = capacity.gpu_spec(args.gpu)
    except capacity.CapacityError as exc:
        raise ValueError(str(exc)) from exc
    tp = args.tensor_parallel_size
    gpus = tp * args.pipeline_parallel_size * args.data_parallel_size
    # One replica's layout: spread over --nnodes nodes of equal share, else one node large enough.
    gpus_per_node = gpus // args.nnodes if args.nnodes > 1 and gpus % args.nnodes == 0 else max(8, gpus)
    try:
        layout = capacity.Layout(
            tensor_parallel_size=tp,
            pipeline_parallel_size=args.pipeline_parallel_size,
            data_parallel_size=args.data_parallel_size,
            expert_parallel=args.expert_parallel,
            gpus_per_node=gpus_per_node,
        )
    except capacity.CapacityError as exc:
        raise ValueError(str(exc)) from exc
    error = capacity.layout_error(arch, layout)
    if error is not None:
        raise ValueError(error)
    mnbt = args.max_num_batched_tokens or capacity.default_max_num_batched_tokens(gpu)
    # Memory accounting (what fits, not how long it takes) is vLLM's, as capacity models it.
    memory = capacity.KVMemory(
        arch,
        gpu,
        capacity.EngineConfig(
            layout=layout,
            kv_cache_dtype=args.kv_cache_dtype,
            max_num_batched_tokens=mnbt,
            gpu_memory_utilization=args.gpu_memory_utilization,
        ),
    )
    profile = GPUProfile(step_noise=args.noise).scaled(args.efficiency)
    if args.num_gpu_blocks_override is not None:
        blocks = args.num_gpu_blocks_override
    else:
        blocks = math.floor(memory.breakdown(args.max_num_seqs).num_blocks * profile.kv_memory_fraction)
    if blocks < 1:
        raise ValueError(
            f"no room for the KV cache: {arch.name} with {layout.label} on {gpu.id} at "
            f"--gpu-memory-utilization {args.gpu_memory_utilization} (vLLM would fail to start the same way)"
        )
    max_model_len = args.max_model_len or arch.default_max_model_len
    # A pipeline's stages each hold 1/pp of the layers and run in turn: per step, the replica streams
    # what one TP group would (PP adds capacity, not speed); data-parallel ranks run side by side.
    facts = ModelFacts.of(arch, gpu, tensor_parallel_size=tp, kv_cache_dtype=args.kv_cache_dtype)
    # What a request reserves to be admitted and holds while it runs is vLLM's layout too: a sliding-window
    # group keeps its window's blocks (vLLM frees those behind it), so only full-attention groups grow with
    # the context. Blocks change only where the context crosses a block of some group.
    kv = memory.layout
    engine = Engine(
        step_seconds=step_function(facts, profile),
        max_num_seqs=args.max_num_seqs,
        num_gpu_blocks=blocks,
        block_size=math.gcd(*(g.tokens_per_block(kv.block_size) for g in kv.groups)),
        blocks_held=kv.held_blocks_per_sequence,
        blocks_admitted=kv.admitted_blocks_per_sequence,
        max_model_len=max_model_len,
        max_num_batched_tokens=mnbt,
        noise=profile.step_noise,
        seed=args.seed,
    )
    cache_config = {
        "block_size": str(args.block_size),
        "cache_dtype": args.kv_cache_dtype,
        "gpu_memory_utilization": str(args.gpu_memory_utilization),
        "num_gpu_blocks": str(blocks),
        "num_gpu_blocks_override": str(args.num_gpu_blocks_override),
        "enable_prefix_caching": "False",
        # vLLM 0.28+ also exports its capacity figures, and (like every series) the engine index.
        "kv_cache_size_tokens": str(blocks * args.block_size),
        "kv_cache_max_concurrency": str(blocks / -(-max_model_len // args.block_size)),
        "engine": "0",
    }
    return engine, cache_config
