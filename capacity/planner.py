"""The planner: which TP degree, KV dtype, --max-num-seqs and replica count serve a workload within its SLOs.

For every candidate (valid TP degree up to the node and the GPU budget) x (KV dtype the GPU supports) it
computes vLLM's KV capacity per replica, the largest batch that both fits the cache at the workload's
context and keeps the predicted TPOT within the SLO, the TTFT of one prompt, and the replicas the target
concurrency needs. The objective is output tokens/s per GPU within the SLOs, fewer GPUs on ties. Refusals
name the fix. Pure: no IO, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from capacity.architecture import Architecture
from capacity.errors import CapacityError
from capacity.gpus import GPU
from capacity.memory import (
    BLOCK_SIZE_TOKENS,
    KV_CACHE_DTYPES,
    MAX_NUM_SEQS_CAP,
    SAMPLER_FP32_LOGIT_COPIES,
    MemoryBreakdown,
    activation_bytes,
    default_max_num_batched_tokens,
    kv_bytes_per_token_per_layer_per_gpu,
    other_reserve_bytes,
    weight_bytes_per_gpu,
)
from capacity.parallel import tensor_parallel_error, valid_tensor_parallel_sizes
from capacity.roofline import DEFAULT_EFFICIENCY, DecodeStep, Efficiency, StepModel

__all__ = ["SLO", "Candidate", "Limits", "Plan", "PlanResult", "Prediction", "Workload", "plan"]

GiB = 2**30

#: Order in which a candidate can fail; the planner explains an infeasible request with the candidate
#: that got furthest.
_STAGES = ("memory", "tpot", "ttft", "gpus", "ok")


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


@dataclass(frozen=True, kw_only=True)
class SLO:
    """Latency targets; None means unconstrained."""

    tpot_seconds: float | None = None
    """Time per output token each sequence must stay within."""
    ttft_seconds: float | None = None
    """Time to first token of one prompt on an idle replica (queueing not modelled)."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What the planner may use, and any values the user pinned."""

    gpus_per_node: int = 8
    """TP never spans nodes: TP <= GPUs per node."""
    max_gpus: int | None = None
    """Budget of GPUs over all replicas; None: one node (gpus_per_node)."""
    kv_cache_dtype: str | None = None
    """Pinned --kv-cache-dtype; None: try ``auto`` and, where the GPU supports it, ``fp8``."""
    gpu_memory_utilization: float = 0.9
    """--gpu-memory-utilization, a fraction of total device memory."""
    tensor_parallel_size: int | None = None
    """Pinned --tensor-parallel-size; None: choose."""
    max_num_seqs: int | None = None
    """Pinned --max-num-seqs; None: choose."""
    max_num_batched_tokens: int | None = None
    """vLLM's --max-num-batched-tokens; None: vLLM's default for the GPU."""
    efficiency: Efficiency = DEFAULT_EFFICIENCY
    """Factors from roofline to predicted time."""


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A vLLM configuration."""

    tensor_parallel_size: int
    """--tensor-parallel-size."""
    max_num_seqs: int
    """--max-num-seqs."""
    kv_cache_dtype: str
    """--kv-cache-dtype (``auto`` = the model's dtype)."""
    max_model_len: int
    """--max-model-len."""
    gpu_memory_utilization: float
    """--gpu-memory-utilization."""
    replicas: int
    """vLLM instances (each on ``tensor_parallel_size`` GPUs)."""

    @property
    def gpus(self) -> int:
        """GPUs over all replicas."""
        return self.tensor_parallel_size * self.replicas

    def vllm_args(self) -> list[str]:
        """The ``vllm serve`` flags this plan implies (vLLM 0.32 spellings)."""
        return [
            "--tensor-parallel-size",
            str(self.tensor_parallel_size),
            "--max-num-seqs",
            str(self.max_num_seqs),
            "--max-model-len",
            str(self.max_model_len),
            "--kv-cache-dtype",
            self.kv_cache_dtype,
            "--gpu-memory-utilization",
            f"{self.gpu_memory_utilization:g}",
        ]

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``plan`` object."""
        return {
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_num_seqs": self.max_num_seqs,
            "kv_cache_dtype": self.kv_cache_dtype,
            "max_model_len": self.max_model_len,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "replicas": self.replicas,
        }


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """What a plan is expected to do at the workload's load."""

    tpot_seconds: float
    """Predicted TPOT at the operating batch (calibration applied)."""
    ttft_seconds: float
    """Predicted TTFT of one prompt on an idle replica."""
    output_tokens_per_second: float
    """Output tokens/s over all replicas at the operating batch."""
    batch_per_replica: int
    """Sequences each replica decodes together at the target concurrency."""
    prefill_tokens_per_step: float
    """Prompt tokens mixed into each step in steady state (batch x prompt / output; 0 without a mix)."""
    decode: DecodeStep
    """Breakdown of the decode-only part of a step at the operating batch (uncalibrated, no prefill)."""

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``predicted`` object."""
        return {
            "tpot_seconds": self.tpot_seconds,
            "ttft_seconds": self.ttft_seconds,
            "output_tokens_per_second": self.output_tokens_per_second,
            "batch_per_replica": self.batch_per_replica,
            "prefill_tokens_per_step": self.prefill_tokens_per_step,
            "bottleneck": self.decode.bottleneck,
            "weight_read_seconds": self.decode.weight_read_seconds,
            "kv_read_seconds": self.decode.kv_read_seconds,
        }


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One (TP, KV dtype) option the planner weighed."""

    tensor_parallel_size: int
    """TP degree."""
    kv_cache_dtype: str
    """KV dtype."""
    feasible: bool
    """Meets memory, SLOs and the GPU budget."""
    reason: str
    """Why not, or empty."""
    stage: str
    """How far it got: memory, tpot, ttft, gpus or ok."""
    max_num_seqs: int
    """Largest batch that fits and meets the TPOT SLO (0 when none)."""
    replicas: int
    """Replicas for the target concurrency."""
    kv_cache_tokens_per_replica: int
    """vLLM's "GPU KV cache size" in tokens."""
    tpot_seconds: float
    """Predicted TPOT at the operating batch (0 when not reached)."""
    ttft_seconds: float
    """Predicted TTFT (0 when not reached)."""
    output_tokens_per_second_per_gpu: float
    """The objective (0 when infeasible)."""

    @property
    def gpus(self) -> int:
        """GPUs over all replicas."""
        return self.tensor_parallel_size * self.replicas

    def to_dict(self) -> dict[str, Any]:
        """One row of the CLI's ``candidates`` list."""
        return {
            "tensor_parallel_size": self.tensor_parallel_size,
            "kv_cache_dtype": self.kv_cache_dtype,
            "feasible": self.feasible,
            "reason": self.reason,
            "max_num_seqs": self.max_num_seqs,
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
    """Why not (names the fix), or a one-line summary of the choice."""
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
            "candidates": [c.to_dict() for c in self.candidates],
            "warnings": list(self.warnings),
        }


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def _positive_int(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise CapacityError(f"{name} {value!r} is not valid; expected an integer >= 1")


class _Candidate:
    """Working state for one (TP, dtype): the memory constants and the step model."""

    def __init__(self, arch: Architecture, gpu: GPU, tp: int, dtype: str, limits: Limits, mnbt: int) -> None:
        self.arch = arch
        self.gpu = gpu
        self.tp = tp
        self.dtype = dtype
        self.mnbt = mnbt
        self.budget = math.ceil(gpu.cuda_total_bytes * limits.gpu_memory_utilization)
        self.weights = weight_bytes_per_gpu(arch, tp)
        self.other = other_reserve_bytes(tp)
        self.forward = activation_bytes(
            arch, tensor_parallel_size=tp, max_num_batched_tokens=mnbt, max_num_seqs=0
        )
        self.sampler_per_row = SAMPLER_FP32_LOGIT_COPIES * arch.vocab_size * 4
        self.page = BLOCK_SIZE_TOKENS * kv_bytes_per_token_per_layer_per_gpu(arch, dtype, tp)
        self.step = StepModel(
            arch, gpu, tensor_parallel_size=tp, kv_cache_dtype=dtype, efficiency=limits.efficiency
        )

    def activation(self, batch: int) -> int:
        return max(self.forward, math.ceil(self.sampler_per_row * min(batch, self.mnbt)))

    def layer_blocks(self, batch: int) -> int:
        """Per-layer blocks of 16 tokens the GPU holds with ``--max-num-seqs batch``."""
        free = self.budget - self.weights - self.other - self.activation(batch)
        return max(0, free // self.page)

    def blocks_per_sequence(self, tokens: int) -> int:
        """Per-layer blocks one sequence of ``tokens`` needs. Sliding-window layers need
        ``cdiv(min(W - 1 + T, tokens), 16) + 1`` with ``T = 2 x max_num_batched_tokens`` (vLLM >= 0.26)."""
        full = -(-tokens // BLOCK_SIZE_TOKENS)
        a = self.arch
        if a.sliding_window is None or not a.num_sliding_window_layers:
            return full * a.num_layers
        span = min(a.sliding_window - 1 + 2 * self.mnbt, tokens)
        sliding = min(full, -(-span // BLOCK_SIZE_TOKENS) + 1)
        return full * a.num_full_attention_layers + sliding * a.num_sliding_window_layers

    def memory(self, batch: int) -> MemoryBreakdown:
        blocks = self.layer_blocks(batch)
        return MemoryBreakdown(
            total_bytes=self.gpu.memory_bytes,
            budget_bytes=self.budget,
            weights_bytes=self.weights,
            activation_bytes=self.activation(batch),
            other_bytes=self.other,
            kv_cache_bytes=blocks * self.page,
            num_blocks=blocks // self.arch.num_layers,
        )


def _largest(lo: int, hi: int, ok: Any) -> int:
    """Largest n in [lo, hi] with ok(n), assuming ok is monotone (true then false); lo - 1 if none."""
    if hi < lo or not ok(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def plan(
    arch: Architecture,
    gpu: GPU,
    workload: Workload,
    slo: SLO,
    limits: Limits,
    *,
    calibration: float = 1.0,
) -> PlanResult:
    """Choose TP, KV dtype, --max-num-seqs and replicas; ``calibration`` multiplies every predicted TPOT."""
    if not isinstance(calibration, int | float) or not math.isfinite(calibration) or calibration <= 0:
        raise CapacityError(
            f"calibration {calibration!r} is not valid; expected a positive number (1.0 = none)"
        )
    _positive_int("gpus per node", limits.gpus_per_node)
    _positive_int("max GPUs", limits.max_gpus)
    _positive_int("max-model-len", workload.max_model_len)
    _positive_int("prompt tokens", workload.prompt_tokens)
    _positive_int("concurrency", workload.concurrency)
    _positive_int("max-num-seqs", limits.max_num_seqs)
    _positive_int("max-num-batched-tokens", limits.max_num_batched_tokens)
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
    if limits.kv_cache_dtype is not None and limits.kv_cache_dtype not in KV_CACHE_DTYPES:
        raise CapacityError(
            f"KV-cache dtype {limits.kv_cache_dtype!r} is not supported; expected one of "
            f"{', '.join(KV_CACHE_DTYPES)}"
        )

    max_len = workload.max_model_len or arch.max_position_embeddings
    if max_len > arch.max_position_embeddings:
        raise CapacityError(
            f"max-model-len {max_len} is longer than the {arch.max_position_embeddings} positions "
            f"of {arch.name}; "
            f"expected at most {arch.max_position_embeddings}"
        )
    if workload.prompt_tokens is not None:
        seq_tokens = workload.prompt_tokens + (workload.output_tokens or 0)
        if seq_tokens > max_len:
            raise CapacityError(
                f"prompt + output tokens ({seq_tokens}) exceed max-model-len {max_len}; expected at "
                f"most {max_len}"
            )
        decode_context = workload.prompt_tokens + (workload.output_tokens or 0) // 2
        prompt = workload.prompt_tokens
        # Steady state: every output token's share of prefill work rides in the same engine steps.
        prefill_ratio = workload.prompt_tokens / workload.output_tokens if workload.output_tokens else 0.0
    else:
        seq_tokens = decode_context = max_len
        prompt = max_len
        prefill_ratio = 0.0  # no prompt/output mix given: decode steps only
    max_gpus = limits.max_gpus or limits.gpus_per_node
    mnbt = limits.max_num_batched_tokens or default_max_num_batched_tokens(gpu)

    if limits.tensor_parallel_size is not None:
        error = tensor_parallel_error(arch, limits.tensor_parallel_size)
        if error is not None:
            raise CapacityError(error)
        tps = [limits.tensor_parallel_size]
    else:
        tps = valid_tensor_parallel_sizes(arch, min(limits.gpus_per_node, max_gpus))
    if limits.kv_cache_dtype is not None:
        dtypes = [limits.kv_cache_dtype]
        if limits.kv_cache_dtype.startswith("fp8") and not gpu.supports_fp8:
            raise CapacityError(
                f"{gpu.id} has no fp8 support; expected --kv-cache-dtype auto, bfloat16 or float16"
            )
    else:
        dtypes = ["auto", "fp8"] if gpu.supports_fp8 else ["auto"]

    cap = min(MAX_NUM_SEQS_CAP, mnbt)
    rows: list[tuple[Candidate, _Candidate | None]] = []
    for tp in tps:
        for dtype in dtypes:
            rows.append(
                _evaluate(
                    arch,
                    gpu,
                    tp,
                    dtype,
                    limits,
                    mnbt,
                    cap,
                    max_len,
                    seq_tokens,
                    decode_context,
                    prompt,
                    prefill_ratio,
                    workload.concurrency,
                    slo,
                    calibration,
                    max_gpus,
                )
            )

    warnings: list[str] = []
    feasible = [r for r in rows if r[0].feasible]
    if not rows:
        return PlanResult(
            feasible=False,
            reason=(
                f"no tensor parallel size up to {min(limits.gpus_per_node, max_gpus)} is valid for "
                f"{arch.name} "
                f"({arch.num_attention_heads} heads, {arch.num_kv_heads} KV heads); allow more GPUs per node"
            ),
            plan=None,
            prediction=None,
            memory=None,
            kv_cache_tokens_per_replica=0,
            max_concurrency_at_max_model_len=0.0,
            candidates=(),
        )
    ordered = sorted(
        rows,
        key=lambda r: (
            not r[0].feasible,
            -round(r[0].output_tokens_per_second_per_gpu, 6),
            r[0].gpus,
            r[0].tensor_parallel_size,
            r[0].kv_cache_dtype != "auto",
        ),
    )
    candidates = tuple(r[0] for r in ordered)
    if feasible:
        best, work = ordered[0]
        assert work is not None
        batch = best.max_num_seqs
        memory = work.memory(batch)
        per_seq_max = work.blocks_per_sequence(max_len)
        concurrency_at_max = work.layer_blocks(batch) / per_seq_max
        op_batch = math.ceil(workload.concurrency / best.replicas) if workload.concurrency else batch
        op_batch = min(op_batch, batch)
        decode = work.step.step(op_batch, decode_context)
        tpot = best.tpot_seconds  # decode plus its share of chunked prefill, calibrated
        prediction = Prediction(
            tpot_seconds=tpot,
            ttft_seconds=best.ttft_seconds,
            output_tokens_per_second=best.replicas * op_batch / tpot,
            batch_per_replica=op_batch,
            prefill_tokens_per_step=op_batch * prefill_ratio,
            decode=decode,
        )
        chosen = Plan(
            tensor_parallel_size=best.tensor_parallel_size,
            max_num_seqs=batch,
            kv_cache_dtype=best.kv_cache_dtype,
            max_model_len=max_len,
            gpu_memory_utilization=util,
            replicas=best.replicas,
        )
        if arch.attention == "MLA" and best.kv_cache_dtype.startswith("fp8"):
            warnings.append(
                "fp8 KV cache on MLA quantizes the shared latent: a quality risk, check long-context recall"
            )
        reason = (
            f"TP {chosen.tensor_parallel_size} x {chosen.replicas} replica(s) with "
            f"{chosen.kv_cache_dtype} KV cache: "
            f"{prediction.output_tokens_per_second / chosen.gpus:.0f} output tokens/s per GPU"
        )
        return PlanResult(
            feasible=True,
            reason=reason,
            plan=chosen,
            prediction=prediction,
            memory=memory,
            kv_cache_tokens_per_replica=int(concurrency_at_max * max_len),
            max_concurrency_at_max_model_len=concurrency_at_max,
            candidates=candidates,
            warnings=tuple(warnings),
        )
    # Infeasible: explain with the candidate that got furthest (largest TP and fp8 break ties).
    closest, work = max(
        rows,
        key=lambda r: (_STAGES.index(r[0].stage), r[0].tensor_parallel_size, r[0].kv_cache_dtype != "auto"),
    )
    closest_memory = work.memory(max(1, closest.max_num_seqs)) if work else None
    blocks = work.layer_blocks(max(1, closest.max_num_seqs)) if work else 0
    conc = blocks / work.blocks_per_sequence(max_len) if work else 0.0
    return PlanResult(
        feasible=False,
        reason=closest.reason,
        plan=None,
        prediction=None,
        memory=closest_memory,
        kv_cache_tokens_per_replica=int(conc * max_len),
        max_concurrency_at_max_model_len=conc,
        candidates=candidates,
    )


def _evaluate(
    arch: Architecture,
    gpu: GPU,
    tp: int,
    dtype: str,
    limits: Limits,
    mnbt: int,
    cap: int,
    max_len: int,
    seq_tokens: int,
    decode_context: int,
    prompt: int,
    prefill_ratio: float,
    concurrency: int | None,
    slo: SLO,
    calibration: float,
    max_gpus: int,
) -> tuple[Candidate, _Candidate | None]:
    work = _Candidate(arch, gpu, tp, dtype, limits, mnbt)

    def refuse(
        stage: str,
        reason: str,
        *,
        seqs: int = 0,
        replicas: int = 1,
        tokens: int = 0,
        tpot: float = 0.0,
        ttft: float = 0.0,
    ) -> tuple[Candidate, _Candidate]:
        return Candidate(
            tensor_parallel_size=tp,
            kv_cache_dtype=dtype,
            feasible=False,
            reason=reason,
            stage=stage,
            max_num_seqs=seqs,
            replicas=replicas,
            kv_cache_tokens_per_replica=tokens,
            tpot_seconds=tpot,
            ttft_seconds=ttft,
            output_tokens_per_second_per_gpu=0.0,
        ), work

    label = _dtype_label(arch, dtype)
    left = work.budget - work.weights - work.other - work.activation(1)
    if left <= 0:
        return refuse(
            "memory",
            (
                f"at TP {tp} the {_gib(work.weights)} of weights per GPU plus "
                f"{_gib(work.other + work.activation(1))} of activations and reserves exceed the "
                f"{_gib(work.budget)} budget; {_weight_fixes(arch, tp, limits, max_gpus)}"
            ),
        )
    fixes = _memory_fixes(arch, gpu, tp, dtype, limits, max_gpus)
    need_max = work.blocks_per_sequence(max_len)
    have = work.layer_blocks(1)
    if have < need_max:
        return refuse(
            "memory",
            (
                f"at TP {tp} with {label} KV cache one {max_len}-token sequence needs "
                f"{_gib(need_max * work.page)} of KV cache per GPU but only {_gib(left)} is left after "
                f"{_gib(work.weights)} of weights; {fixes}"
            ),
        )
    pinned = limits.max_num_seqs
    upper = min(cap, pinned) if pinned else cap
    need = work.blocks_per_sequence(seq_tokens)
    b_mem = _largest(1, upper, lambda b: b * need <= work.layer_blocks(b))
    tokens = int(work.layer_blocks(max(1, b_mem)) / need_max * max_len)
    b_slo = b_mem
    if slo.tpot_seconds is not None:
        target = slo.tpot_seconds / calibration
        step = work.step
        b_slo = _largest(
            1, b_mem, lambda b: step.predicted_seconds(b, decode_context, b * prefill_ratio, prompt) <= target
        )
        if b_slo < 1:
            t1 = step.predicted_seconds(1, decode_context, prefill_ratio, prompt) * calibration
            return refuse(
                "tpot",
                (
                    f"at TP {tp} the predicted TPOT at batch 1 is {t1 * 1e3:.1f} ms, above the "
                    f"{slo.tpot_seconds * 1e3:.1f} ms SLO; use more GPUs per replica (higher TP), a "
                    f"GPU with more "
                    f"memory bandwidth, or relax the TPOT SLO"
                ),
                tokens=tokens,
                tpot=t1,
            )
    seqs = min(b_mem, b_slo)
    if pinned and seqs < pinned:
        return refuse(
            "tpot",
            (
                f"at TP {tp} with {label} KV cache the pinned max-num-seqs {pinned} does not "
                f"{'fit the KV cache' if b_mem < pinned else 'meet the TPOT SLO'} (at most {seqs}); {fixes}"
            ),
            seqs=seqs,
            tokens=tokens,
        )
    ttft = work.step.prefill_seconds(prompt, chunk_tokens=mnbt)
    if slo.ttft_seconds is not None and ttft > slo.ttft_seconds:
        return refuse(
            "ttft",
            (
                f"at TP {tp} the predicted TTFT of a {prompt}-token prompt is {ttft:.3f} s, above the "
                f"{slo.ttft_seconds:.3f} s SLO; use higher TP, a faster GPU or shorter prompts"
            ),
            seqs=seqs,
            tokens=tokens,
            ttft=ttft,
        )
    replicas = math.ceil(concurrency / seqs) if concurrency else 1
    op_batch = math.ceil(concurrency / replicas) if concurrency else seqs
    tpot = (
        work.step.predicted_seconds(op_batch, decode_context, op_batch * prefill_ratio, prompt) * calibration
    )
    if replicas * tp > max_gpus:
        return refuse(
            "gpus",
            (
                f"at TP {tp} with {label} KV cache one replica serves {seqs} sequences, so concurrency "
                f"{concurrency} needs {replicas} replicas = {replicas * tp} GPUs, "
                f"{replicas * tp - max_gpus} more than "
                f"the {max_gpus} allowed; raise the GPU limit"
                + (", use fp8 KV cache" if dtype != "fp8" and gpu.supports_fp8 else "")
                + " or lower the concurrency"
            ),
            seqs=seqs,
            replicas=replicas,
            tokens=tokens,
            tpot=tpot,
            ttft=ttft,
        )
    per_gpu = replicas * op_batch / tpot / (replicas * tp)
    return Candidate(
        tensor_parallel_size=tp,
        kv_cache_dtype=dtype,
        feasible=True,
        reason="",
        stage="ok",
        max_num_seqs=seqs,
        replicas=replicas,
        kv_cache_tokens_per_replica=tokens,
        tpot_seconds=tpot,
        ttft_seconds=ttft,
        output_tokens_per_second_per_gpu=per_gpu,
    ), work


def _dtype_label(arch: Architecture, dtype: str) -> str:
    """``bfloat16 (auto)`` for auto, the dtype itself otherwise."""
    return f"{arch.dtype} (auto)" if dtype == "auto" else dtype


def _weight_fixes(arch: Architecture, tp: int, limits: Limits, max_gpus: int) -> str:
    """What makes the weights fit: more TP, else a bigger GPU or a quantized checkpoint."""
    larger = [t for t in valid_tensor_parallel_sizes(arch, limits.gpus_per_node) if t > tp]
    if larger:
        limit = "" if larger[0] <= max_gpus else f", raise the limit of {max_gpus}"
        return f"needs more GPUs (TP {larger[0]}{limit}) or a GPU with more memory"
    return (
        f"needs a GPU with more memory or a quantized checkpoint (TP is capped at the {limits.gpus_per_node} "
        "GPUs of one node)"
    )


def _memory_fixes(arch: Architecture, gpu: GPU, tp: int, dtype: str, limits: Limits, max_gpus: int) -> str:
    """The changes that would free KV memory, in the order people usually try them."""
    fixes = []
    larger = [t for t in valid_tensor_parallel_sizes(arch, limits.gpus_per_node) if t > tp]
    if larger:
        fixes.append(
            f"more GPUs (TP {larger[0]}{'' if larger[0] <= max_gpus else f', raise the limit of {max_gpus}'})"
        )
    if not dtype.startswith("fp8") and gpu.supports_fp8:
        fixes.append("fp8 KV cache")
    fixes.append("a shorter max-model-len")
    fixes.append("a GPU with more memory")
    return "needs " + ", ".join(fixes[:-1]) + " or " + fixes[-1]
