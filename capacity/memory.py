"""Weight, KV-cache and activation memory, and the per-GPU budget the way vLLM 0.32 accounts it.

Units: bytes everywhere; GiB (2**30) only in the names of the reserve constants that are measured in GiB.

vLLM's accounting (``v1/worker/gpu_worker.py``, fact sheet ``notes/vllm-memory-accounting.md``)::

    budget   = cuda_total * gpu_memory_utilization          # a fraction of TOTAL device memory
    kv_bytes = budget - weights - peak_activation - non_torch - cuda_graph_estimate
    blocks   = kv_bytes // (page_per_layer * layers)         # blocks of 16 tokens, per GPU
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from capacity.architecture import DTYPE_BYTES, Architecture
from capacity.errors import CapacityError
from capacity.gpus import GPU
from capacity.parallel import kv_heads_per_gpu

__all__ = [
    "BLOCK_SIZE_TOKENS",
    "CUDA_GRAPH_RESERVE_BYTES",
    "KV_CACHE_DTYPES",
    "MAX_NUM_SEQS_CAP",
    "NCCL_RESERVE_BYTES",
    "NON_TORCH_OVERHEAD_BYTES",
    "SAMPLER_FP32_LOGIT_COPIES",
    "KVMemory",
    "MemoryBreakdown",
    "activation_bytes",
    "blocks_per_sequence",
    "default_max_num_batched_tokens",
    "kv_cache_bytes_per_sequence",
    "kv_cache_bytes_per_token",
    "kv_dtype_bytes",
    "memory_per_gpu",
    "resolve_kv_cache_dtype",
    "weight_bytes",
    "weight_bytes_per_gpu",
]

GiB = 2**30

#: vLLM's default KV block: 16 tokens (``--block-size``; FlashAttention/FlashInfer/Triton accept it).
BLOCK_SIZE_TOKENS = 16

#: KV-cache dtypes the planner emits and accepts, with bytes per element (None: the model's dtype).
#: ``auto`` is vLLM's "same as the model"; ``fp8`` is e4m3 stored as one byte.
KV_CACHE_DTYPES: dict[str, int | None] = {
    "auto": None,
    "bfloat16": 2,
    "float16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}

#: vLLM >= 0.20 subtracts an estimate of CUDA-graph memory from the KV budget
#: (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to 1). Logged estimates are 0.17 to 1.97 GiB per GPU
#: for dense models (fact sheet, section 1); we reserve 1 GiB, the middle of that range.
CUDA_GRAPH_RESERVE_BYTES = 1 * GiB

#: Memory outside PyTorch's allocator that appears during profiling at TP=1 (CUDA/cuBLAS workspaces):
#: 0.13 GiB in llm-d's H100 measurements of Llama-3.1-8B, Qwen3-0.6B and gpt-oss-20b.
NON_TORCH_OVERHEAD_BYTES = int(0.13 * GiB)

#: Extra non-torch memory with TP > 1 (NCCL and custom all-reduce buffers): llm-d measured 0.55 GiB non-torch
#: for Llama-3.3-70B at TP=2 against 0.13 GiB at TP=1, so 0.42 GiB more.
NCCL_RESERVE_BYTES = int(0.42 * GiB)

#: Peak activation of vLLM's profile run is dominated by the dummy sampler over ``min(max_num_seqs, mnbt)``
#: rows of fp32 logits. llm-d's measurements at max_num_seqs 1024 give 4.76 GiB (Llama-3.1-8B, vocab 128,256),
#: 5.56 GiB (Qwen3-0.6B, vocab 151,936) and 7.38 GiB (gpt-oss-20b, vocab 201,088): 9.6 to 9.7 copies of a
#: ``[rows, vocab]`` fp32 tensor. We use 9.6.
SAMPLER_FP32_LOGIT_COPIES = 9.6

#: Largest --max-num-seqs the planner proposes (vLLM's default on large GPUs).
MAX_NUM_SEQS_CAP = 1024


def resolve_kv_cache_dtype(arch: Architecture, kv_cache_dtype: str) -> str:
    """The concrete dtype name a ``--kv-cache-dtype`` value stores (``auto`` -> the model's dtype)."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise CapacityError(
            f"KV-cache dtype {kv_cache_dtype!r} is not supported; expected one of "
            f"{', '.join(KV_CACHE_DTYPES)}"
        )
    return arch.dtype if kv_cache_dtype == "auto" else kv_cache_dtype


def kv_dtype_bytes(arch: Architecture, kv_cache_dtype: str) -> int:
    """Bytes per cached element for a ``--kv-cache-dtype`` value."""
    resolved = resolve_kv_cache_dtype(arch, kv_cache_dtype)
    size = KV_CACHE_DTYPES.get(resolved)
    return size if size is not None else DTYPE_BYTES[resolved]


def _replication(arch: Architecture, tp: int) -> int:
    """How many copies of the cache the cluster holds: KV heads per GPU times GPUs over the heads there
    are."""
    return kv_heads_per_gpu(arch, tp) * tp // arch.num_kv_heads if arch.attention != "MLA" else tp


def kv_cache_bytes_per_token(
    arch: Architecture, *, kv_cache_dtype: str = "auto", tensor_parallel_size: int = 1
) -> int:
    """KV bytes one token adds over all GPUs, replication included, every layer at full attention.

    ``layers * 2 (K and V) * kv_heads * head_dim * dtype_bytes``; MLA caches ``kv_lora_rank +
    qk_rope_head_dim``
    per layer. Across TP ranks each GPU holds ``max(1, kv_heads // tp)`` heads, so with ``tp > kv_heads``
    heads are replicated; MLA's latent is replicated on every rank.
    """
    _check_tp(tensor_parallel_size)
    per_layer = arch.kv_elements_per_token_per_layer * kv_dtype_bytes(arch, kv_cache_dtype)
    return arch.num_layers * per_layer * _replication(arch, tensor_parallel_size)


def kv_bytes_per_token_per_layer_per_gpu(arch: Architecture, kv_cache_dtype: str, tp: int) -> int:
    """One token's cache in one layer on one TP rank (vLLM's page size per token)."""
    size = kv_dtype_bytes(arch, kv_cache_dtype)
    if arch.attention == "MLA":
        return arch.kv_elements_per_token_per_layer * size
    return 2 * kv_heads_per_gpu(arch, tp) * arch.head_dim * size


def kv_cache_bytes_per_sequence(
    arch: Architecture,
    context_tokens: int,
    *,
    kv_cache_dtype: str = "auto",
    tensor_parallel_size: int = 1,
    max_num_batched_tokens: int = 8192,
) -> int:
    """Cache one sequence of ``context_tokens`` reserves over all GPUs, replication included: the pages of
    :func:`blocks_per_sequence` (whole 16-token blocks; sliding-window layers their window plus the
    batched tokens' lookahead) times the page size, on every rank."""
    _check_tp(tensor_parallel_size)
    tp = tensor_parallel_size
    page = BLOCK_SIZE_TOKENS * kv_bytes_per_token_per_layer_per_gpu(arch, kv_cache_dtype, tp)
    blocks = blocks_per_sequence(arch, context_tokens, max_num_batched_tokens=max_num_batched_tokens)
    return blocks * page * tp


def _embedding_bytes(arch: Architecture) -> int:
    """Embedding table and LM head stay in the model dtype even in fp8 checkpoints."""
    g = arch.parameter_groups
    return (g.embedding + g.lm_head) * DTYPE_BYTES[arch.dtype]


def weight_bytes(arch: Architecture) -> int:
    """All weights in the checkpoint's dtype (fp8 checkpoints: one byte per linear weight)."""
    g = arch.parameter_groups
    body = g.total - g.embedding - g.lm_head
    return _embedding_bytes(arch) + math.ceil(body * arch.weight_bytes_per_parameter)


def weight_bytes_per_gpu(arch: Architecture, tensor_parallel_size: int) -> int:
    """Weights on one TP rank: sharded linears, routed experts and the vocab-parallel embedding and LM head
    split ``tp`` ways; norms, routers and MLA down-projections whole; KV projections for
    ``max(1, kv_heads // tp)`` heads."""
    _check_tp(tensor_parallel_size)
    tp = tensor_parallel_size
    g = arch.parameter_groups
    body = (
        g.sharded / tp
        + g.replicated
        + g.kv_projection_per_head * kv_heads_per_gpu(arch, tp) * (1 if g.num_kv_heads else 0)
        + g.routed_experts_total / tp
    )
    return math.ceil(_embedding_bytes(arch) / tp + body * arch.weight_bytes_per_parameter)


def default_max_num_batched_tokens(gpu: GPU) -> int:
    """vLLM 0.32 ``vllm serve`` default: 16384 on GPUs with >= 160 GiB, 8192 on >= 70 GiB non-A100, else
    2048."""
    if gpu.cuda_total_bytes >= 160 * GiB:
        return 16384
    return 8192 if gpu.large_gpu_defaults else 2048


def activation_bytes(
    arch: Architecture, *, tensor_parallel_size: int, max_num_batched_tokens: int, max_num_seqs: int
) -> int:
    """Peak activation of vLLM's profile run on one GPU: the larger of the forward pass and the dummy sampler.

    Forward: ``mnbt * dtype_bytes * (2 * hidden + 3 * mlp_width / tp)`` (residual, normed input, gate/up
    output
    and activation of the widest MLP). Sampler: ``SAMPLER_FP32_LOGIT_COPIES * min(max_num_seqs, mnbt) * vocab
    * 4``
    (every rank samples from full-vocabulary logits).
    """
    tp = tensor_parallel_size
    if arch.is_moe:
        mlp_width = max(
            arch.intermediate_size if arch.num_moe_layers < arch.num_layers else 0,
            arch.num_experts_per_token * arch.moe_intermediate_size + arch.shared_expert_intermediate_size,
        )
    else:
        mlp_width = arch.intermediate_size
    forward = max_num_batched_tokens * DTYPE_BYTES[arch.dtype] * (2 * arch.hidden_size + 3 * mlp_width / tp)
    rows = min(max_num_seqs, max_num_batched_tokens)
    sampler = SAMPLER_FP32_LOGIT_COPIES * rows * arch.vocab_size * 4
    return math.ceil(max(forward, sampler))


def other_reserve_bytes(tensor_parallel_size: int) -> int:
    """CUDA-graph estimate, non-torch overhead and (TP > 1) NCCL buffers."""
    nccl = NCCL_RESERVE_BYTES if tensor_parallel_size > 1 else 0
    return CUDA_GRAPH_RESERVE_BYTES + NON_TORCH_OVERHEAD_BYTES + nccl


@dataclass(frozen=True, kw_only=True)
class MemoryBreakdown:
    """Where one GPU's memory goes under vLLM's accounting."""

    total_bytes: int
    """Device memory as the driver reports it."""
    budget_bytes: int
    """``cuda_total * gpu_memory_utilization``: what vLLM may use."""
    weights_bytes: int
    """Model weights on this GPU."""
    activation_bytes: int
    """Peak activation of the profile run."""
    other_bytes: int
    """CUDA-graph estimate, non-torch overhead and NCCL buffers."""
    kv_cache_bytes: int
    """Whole KV blocks that fit in what is left (0 when nothing is left)."""
    num_blocks: int
    """KV blocks of ``BLOCK_SIZE_TOKENS`` tokens on this GPU."""

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``memory_per_gpu_bytes`` object."""
        return {
            "total": self.total_bytes,
            "budget": self.budget_bytes,
            "weights": self.weights_bytes,
            "kv_cache": self.kv_cache_bytes,
            "activation": self.activation_bytes,
            "other": self.other_bytes,
        }


class KVMemory:
    """vLLM's memory accounting for one GPU of a replica, computed once per (TP, KV dtype, batched tokens,
    memory utilization): bytes, then blocks, then tokens, then sequences.

    ``budget - weights - reserves - activation(max_num_seqs)`` is cut into per-layer pages of
    ``BLOCK_SIZE_TOKENS`` tokens; one sequence needs :meth:`blocks_per_sequence` of them (sliding-window
    layers only their window plus the batched tokens' lookahead). The activation peak grows with
    ``--max-num-seqs`` (the dummy sampler's rows), so the sequences that fit depend on it.
    """

    __slots__ = ("arch", "budget", "forward", "gpu", "mnbt", "other", "page", "sampler_per_row", "weights")

    def __init__(
        self,
        arch: Architecture,
        gpu: GPU,
        *,
        tensor_parallel_size: int,
        kv_cache_dtype: str,
        max_num_batched_tokens: int,
        gpu_memory_utilization: float = 0.9,
    ) -> None:
        _check_tp(tensor_parallel_size)
        tp = tensor_parallel_size
        self.arch = arch
        self.gpu = gpu
        self.mnbt = max_num_batched_tokens
        self.budget = math.ceil(gpu.cuda_total_bytes * gpu_memory_utilization)
        self.weights = weight_bytes_per_gpu(arch, tp)
        self.other = other_reserve_bytes(tp)
        self.forward = activation_bytes(
            arch, tensor_parallel_size=tp, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=0
        )
        self.sampler_per_row = SAMPLER_FP32_LOGIT_COPIES * arch.vocab_size * 4
        self.page = BLOCK_SIZE_TOKENS * kv_bytes_per_token_per_layer_per_gpu(arch, kv_cache_dtype, tp)

    def activation(self, max_num_seqs: int) -> int:
        """Peak activation of the profile run with ``--max-num-seqs max_num_seqs``."""
        return max(self.forward, math.ceil(self.sampler_per_row * min(max_num_seqs, self.mnbt)))

    def free_bytes(self, max_num_seqs: int) -> int:
        """What is left for the KV cache (negative when the weights and reserves do not fit)."""
        return self.budget - self.weights - self.other - self.activation(max_num_seqs)

    def layer_blocks(self, max_num_seqs: int) -> int:
        """Per-layer pages of ``BLOCK_SIZE_TOKENS`` tokens the GPU holds."""
        return max(0, self.free_bytes(max_num_seqs) // self.page)

    def blocks_per_sequence(self, tokens: int) -> int:
        """Per-layer pages one sequence of ``tokens`` reserves. Sliding-window layers need
        ``cdiv(min(W - 1 + T, tokens), 16) + 1`` with ``T = 2 x max_num_batched_tokens`` (vLLM >= 0.26)."""
        return blocks_per_sequence(self.arch, tokens, max_num_batched_tokens=self.mnbt)

    def sequences(self, tokens: int, max_num_seqs: int) -> int:
        """Sequences of ``tokens`` that fit at once with ``--max-num-seqs max_num_seqs``."""
        return self.layer_blocks(max_num_seqs) // self.blocks_per_sequence(tokens)

    def max_batch(self, tokens: int, cap: int) -> int:
        """Largest ``--max-num-seqs`` b <= cap whose b sequences of ``tokens`` fit beside the activation
        peak that b itself sets (0 when not one fits)."""
        need = self.blocks_per_sequence(tokens)
        lo, hi = 1, cap
        if hi < 1 or need > self.layer_blocks(1):
            return 0
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if mid * need <= self.layer_blocks(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def max_concurrency(self, max_model_len: int, max_num_seqs: int) -> float:
        """vLLM's logged "Maximum concurrency": sequences of ``max_model_len`` the cache holds."""
        return self.layer_blocks(max_num_seqs) / self.blocks_per_sequence(max_model_len)

    def kv_cache_tokens(self, max_model_len: int, max_num_seqs: int) -> int:
        """vLLM's "GPU KV cache size" in tokens: ``int(max_concurrency x max_model_len)``."""
        return int(self.max_concurrency(max_model_len, max_num_seqs) * max_model_len)

    def breakdown(self, max_num_seqs: int) -> MemoryBreakdown:
        """Where the GPU's memory goes with ``--max-num-seqs max_num_seqs``."""
        layers = self.arch.num_layers
        blocks = self.layer_blocks(max_num_seqs) // layers  # vLLM: avail // page // layers
        return MemoryBreakdown(
            total_bytes=self.gpu.memory_bytes,
            budget_bytes=self.budget,
            weights_bytes=self.weights,
            activation_bytes=self.activation(max_num_seqs),
            other_bytes=self.other,
            kv_cache_bytes=blocks * layers * self.page,
            num_blocks=blocks,
        )


def blocks_per_sequence(arch: Architecture, tokens: int, *, max_num_batched_tokens: int) -> int:
    """Per-layer KV pages (summed over layers) one sequence of ``tokens`` reserves in vLLM: full attention
    ``cdiv(tokens, 16)`` per layer; sliding window ``cdiv(min(W - 1 + 2 x mnbt, tokens), 16) + 1`` (never
    more than full attention)."""
    full = -(-tokens // BLOCK_SIZE_TOKENS)
    if arch.sliding_window is None or not arch.num_sliding_window_layers:
        return full * arch.num_layers
    span = min(arch.sliding_window - 1 + 2 * max_num_batched_tokens, tokens)
    sliding = min(full, -(-span // BLOCK_SIZE_TOKENS) + 1)
    return full * arch.num_full_attention_layers + sliding * arch.num_sliding_window_layers


def memory_per_gpu(
    arch: Architecture,
    gpu: GPU,
    *,
    tensor_parallel_size: int,
    kv_cache_dtype: str = "auto",
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int = MAX_NUM_SEQS_CAP,
    max_num_batched_tokens: int | None = None,
) -> MemoryBreakdown:
    """vLLM's per-GPU KV budget: budget minus weights, peak activation and reserves, in whole 16-token
    blocks (:class:`KVMemory`)."""
    return KVMemory(
        arch,
        gpu,
        tensor_parallel_size=tensor_parallel_size,
        kv_cache_dtype=kv_cache_dtype,
        max_num_batched_tokens=max_num_batched_tokens or default_max_num_batched_tokens(gpu),
        gpu_memory_utilization=gpu_memory_utilization,
    ).breakdown(max_num_seqs)


def block_bytes_per_gpu(arch: Architecture, kv_cache_dtype: str, tp: int) -> int:
    """One block of ``BLOCK_SIZE_TOKENS`` tokens over all layers on one GPU (vLLM: page size x layers)."""
    return (
        BLOCK_SIZE_TOKENS * arch.num_layers * kv_bytes_per_token_per_layer_per_gpu(arch, kv_cache_dtype, tp)
    )


def _check_tp(tp: int) -> None:
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise CapacityError(f"tensor parallel size {tp!r} is not valid; expected an integer >= 1")
