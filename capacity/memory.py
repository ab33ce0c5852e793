"""Weight, KV-cache and activation memory, and the per-GPU budget the way vLLM 0.32 accounts it.

Units: bytes everywhere; GiB (2**30) only in the names of the reserve constants that are measured in GiB.

vLLM's accounting (``v1/worker/gpu_worker.py``, fact sheet ``notes/vllm-memory-accounting.md``)::

    budget   = cuda_total * gpu_memory_utilization          # a fraction of TOTAL device memory
    kv_bytes = budget - weights - peak_activation - non_torch - cuda_graph_estimate
    blocks   = kv_bytes // bytes_per_block                   # KVCacheLayout: blocks of 16 tokens per group
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction
from typing import Any

from capacity.architecture import ATTENTION_MIXERS, DTYPE_BYTES, STATE_MIXERS, Architecture
from capacity.errors import CapacityError
from capacity.gpus import GPU
from capacity.layout import Layout, Stage, pipeline_stages
from capacity.lora import Lora, lora_bytes_per_gpu
from capacity.parallel import encoder_tp_mode, kv_heads_per_gpu

__all__ = [
    "BLOCK_SIZE_TOKENS",
    "CUDA_GRAPH_RESERVE_BYTES",
    "KV_CACHE_DTYPES",
    "MAX_NUM_SEQS_CAP",
    "NCCL_RESERVE_BYTES",
    "NON_TORCH_OVERHEAD_BYTES",
    "SAMPLER_FP32_LOGIT_COPIES",
    "EngineConfig",
    "KVCacheLayout",
    "KVGroup",
    "KVMemory",
    "MemoryBreakdown",
    "activation_bytes",
    "blocks_per_sequence",
    "default_max_num_batched_tokens",
    "kv_cache_bytes_per_sequence",
    "kv_cache_bytes_per_token",
    "kv_cache_layout",
    "kv_dtype_bytes",
    "memory_per_gpu",
    "resolve_kv_cache_dtype",
    "short_conv_bytes_per_sequence",
    "short_conv_head_size",
    "short_conv_page",
    "weight_bytes",
    "weight_bytes_per_gpu",
]

GiB = 2**30

#: vLLM's default KV block: 16 tokens (``--block-size``; FlashAttention/FlashInfer/Triton accept it).
BLOCK_SIZE_TOKENS = 16
#: vLLM's hybrid alignment (``Platform._align_hybrid_block_size``) makes an MLA model's attention block a
#: multiple of 128 tokens where it holds a state too (TRT-LLM and FlashInfer MLA decode kernels need the
#: kernel blocks aligned to 128 / kernel block size): Kimi-Linear's.
MLA_HYBRID_BLOCK_ALIGNMENT = 128
#: MiniMax-M3's sparse attention and indexer kernels take 128-token blocks alone (their backends'
#: ``get_supported_kernel_block_sizes``), so vLLM raises the block of a model with such layers to that.
SPARSE_INDEXER_BLOCK_SIZE = 128

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

#: The KV-cache layout DeepSeek-V4's attention keeps whatever fp8 is asked for (``fp8_ds_mla``): per cached
#: latent of 512, 448 fp8 values, their 7 one-byte UE8M0 block scales padded to 8, and the 64-wide rotated
#: part in bf16: 584 bytes (``state_content_bytes``), pages padded to a multiple of 576 bytes (FlashMLA's
#: stride).
FP8_DS_MLA = "fp8_ds_mla"
FP8_DS_MLA_ENTRY_BYTES = 584
FP8_DS_MLA_PAGE_ALIGNMENT = 576

#: DeepSeek-V4.1's KV records on compute capability 10.x (vLLM 0.32's ``_use_v41_mxfp8_kv_record``, a
#: family test of SM100): a 528-byte window and ``fp8_ds_mla`` record (512 fp8 values and 16 UE8M0
#: scales), a 288-byte compressed record under ``nvfp4_ds_mla`` (the mega-attention class's own dtype, which
#: FlashMLA decodes only on SM100), pages padded to 512 bytes, not 576.
NVFP4_DS_MLA = "nvfp4_ds_mla"
V41_SM100_ENTRY_BYTES = 528
V41_NVFP4_ENTRY_BYTES = 288
V41_SM100_PAGE_ALIGNMENT = 512
#: FlashMLA's mega-attention kernel (``flash_mla_mega_attn.py`` ``is_available_for``) serves a TP rank's
#: heads in groups of this many per ``o_groups`` group (``WV_GROUP_SIZE``).
V41_MEGA_HEADS_PER_GROUP = 8
#: The ``--kv-cache-dtype`` names of DeepSeek-V4's packed layouts, which vLLM takes as written for V4 and
#: V4.1 (the library accepts them; the CLI's and the CRD's choices stay auto / fp8 / 16-bit).
PACKED_KV_CACHE_DTYPES = (FP8_DS_MLA, NVFP4_DS_MLA)

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


def resolve_kv_cache_dtype(
    arch: Architecture,
    kv_cache_dtype: str,
    *,
    compute_capability: str | None = None,
    tensor_parallel_size: int = 1,
) -> str:
    """The concrete dtype name a ``--kv-cache-dtype`` value stores (``auto`` -> the model's dtype).
    DeepSeek-V4.1's depends on the GPU's ``compute_capability`` and the TP size (:func:`v41_records`)."""
    packed = arch.compressed_attention and kv_cache_dtype in PACKED_KV_CACHE_DTYPES
    if kv_cache_dtype not in KV_CACHE_DTYPES and not packed:
        raise CapacityError(
            f"KV-cache dtype {kv_cache_dtype!r} is not supported; expected one of "
            f"{', '.join(KV_CACHE_DTYPES)}"
        )
    if arch.compressed_attention:
        # DeepseekV4Attention's fp8_ds_mla layout (FlashMLA, and vLLM's CPU and ROCm classes): auto and every
        # fp8 become it; anything else stops the engine ("fp8_ds_mla layout only supports fp8 kv-cache").
        # DeepSeek-V4.1's takes auto, fp8 and its packed names alone ("packed KV layouts only support fp8
        # kv-cache"), auto and fp8 becoming its attention class's own (:func:`v41_records`).
        v41 = arch.shared_compressed_caches
        if v41 and (packed or kv_cache_dtype in ("auto", "fp8")):
            return v41_records(arch, kv_cache_dtype, tensor_parallel_size, compute_capability).dtype
        if not v41 and (kv_cache_dtype == "auto" or kv_cache_dtype.startswith("fp8")):
            return FP8_DS_MLA
        raise CapacityError(
            f"KV-cache dtype {kv_cache_dtype!r} is not one DeepSeek-V4{'.1' if v41 else ''}'s attention "
            f"keeps: vLLM stores its latent as {FP8_DS_MLA} (fp8 with block scales); expected auto or fp8"
        )
    sixteen = ("auto", "bfloat16", "float16")
    if arch.mla_cache_row and arch.mixer_counts["mla"] and kv_cache_dtype not in sixteen:
        raise CapacityError(
            f"KV-cache dtype {kv_cache_dtype!r} is not one {arch.name}'s full layers keep: vLLM 0.32 runs "
            "dots3-note's sparse MLA on FlashAttention's sparse kernel, which takes a 16-bit cache only; "
            "expected auto, bfloat16 or float16"
        )
    if arch.model_dtype_kv_cache and kv_cache_dtype not in ("auto", arch.dtype):
        raise CapacityError(
            f"KV-cache dtype {kv_cache_dtype!r} is not one {arch.name}'s attention keeps: vLLM 0.32 serves "
            f"Inkling with a {arch.dtype} KV cache only (its kernels refuse another at warm-up); expected "
            f"auto or {arch.dtype}"
        )
    if kv_cache_dtype != "auto":
        return kv_cache_dtype
    # A checkpoint with a quantized KV cache (ModelOpt kv_cache_quant_algo, compressed-tensors
    # kv_cache_scheme) makes vLLM's "auto" that dtype.
    own = arch.weights.kv_cache_dtype
    return own if own is not None and own in KV_CACHE_DTYPES else arch.dtype


def kv_dtype_bytes(arch: Architecture, kv_cache_dtype: str) -> int:
    """Bytes per cached element for a ``--kv-cache-dtype`` value."""
    resolved = resolve_kv_cache_dtype(arch, kv_cache_dtype)
    if resolved in PACKED_KV_CACHE_DTYPES:
        return 1
    size = KV_CACHE_DTYPES.get(resolved)
    return size if size is not None else DTYPE_BYTES[resolved]


def _replication(arch: Architecture, tp: int) -> int:
    """How many copies of the cache the cluster holds: KV heads per GPU times GPUs over the heads there
    are."""
    return kv_heads_per_gpu(arch, tp) * tp // arch.num_kv_heads if arch.attention != "MLA" else tp


def indexer_key_bytes(arch: Architecture) -> int:
    """One sparse-attention indexer key as vLLM caches it: DeepSeek-V3.2's and V4's ``index_head_dim`` fp8
    values and an fp32 scale per whole 128 of them (132 bytes for 128; ``head_dim // 128`` scales);
    MiniMax-M3's (its layers' own indexers, :attr:`Layer.indexer`) ``index_head_dim`` bfloat16 values,
    whatever ``--kv-cache-dtype`` (vLLM's ``indexer_kv_dtype`` "auto"), one head whole on every rank."""
    if arch.num_indexer_layers:
        return 2 * arch.index_head_dim
    return arch.index_head_dim + 4 * (arch.index_head_dim // 128)  # vLLM floors: a partial block, no scale


def indexer_bytes_per_token(arch: Architecture) -> Fraction:
    """What one token adds to an indexer's key cache: a key (:func:`indexer_key_bytes`), or GLM-5.3's one
    key per :attr:`Architecture.index_kpool` tokens."""
    return Fraction(indexer_key_bytes(arch), max(1, arch.index_kpool))


def qsa_key_bytes_per_token(arch: Architecture) -> Fraction:
    """What one token adds to a Qwen3.8 QSA layer's compressed-key cache: a bfloat16 key of
    ``index_head_dim`` per :attr:`Architecture.qsa_compress_ratio` tokens; 0 without QSA."""
    ratio = arch.qsa_compress_ratio
    return Fraction(2 * arch.index_head_dim, ratio) if ratio else Fraction(0)


def attention_bytes_per_token(
    arch: Architecture,
    kv_heads: int,
    kv_cache_dtype: str,
    tp: int,
    head_dim: int | None = None,
    v_head_dim: int | None = None,
) -> int:
    """One token's cache in one attention layer with ``kv_heads`` KV heads of ``head_dim`` (default: the
    model's) and values of ``v_head_dim`` (default: ``head_dim``) on one of ``tp`` ranks (vLLM's page size
    per token, ``AttentionSpec``: ``kv_heads x (head_size + head_size_v) x dtype bytes``). MLA caches the
    latent (``fp8_ds_mla`` for DeepSeek-V3.2's sparse attention: 512 fp8 latent values, four fp32 scales and
    the bf16 rope key, 656 bytes), replicated on every rank; a sparse layer's indexer keeps a cache of its
    own beside it (:func:`indexer_key_bytes`, on :attr:`Architecture.num_mla_indexers` layers)."""
    size = kv_dtype_bytes(arch, kv_cache_dtype)
    if arch.compressed_attention:  # DeepSeek-V4: the sliding window's latent (its compressed caches aside)
        return FP8_DS_MLA_ENTRY_BYTES
    if arch.mla_cache_row:  # dots3-note: every row the sliding layers' width, a value a byte in fp8
        return arch.mla_cache_row * size
    if arch.attention == "MLA":
        if arch.index_head_dim and size == 1:
            rank = arch.kv_lora_rank or 0
            return rank + 4 * -(-rank // 128) + 2 * arch.qk_rope_head_dim
        return arch.kv_elements_per_token_per_layer * size
    k = head_dim or arch.head_dim
    return max(1, kv_heads // tp) * (k + (v_head_dim or k)) * size


def short_conv_head_size(arch: Architecture, kv_heads: int, head_dim: int) -> int:
    """The width of one KV head's entry in an Inkling layer's short-convolution cache (vLLM 0.32's
    ``InklingConvState``): the K and V inputs and a ``hidden_size / kv_heads`` slice of both residual
    streams, rounded up to a power of two (so every layer's page is a multiple of the attention's)."""
    width = 2 * head_dim + 2 * (arch.hidden_size // kv_heads)
    return 1 << (width - 1).bit_length()


def short_conv_page(arch: Architecture, kv_heads: int, head_dim: int, tp: int) -> int:
    """Bytes one token's short-convolution inputs take in an Inkling layer with ``kv_heads`` KV heads of
    ``head_dim`` on one of ``tp`` ranks: each rank's heads (:func:`short_conv_head_size` wide each) in the
    model dtype whatever ``--kv-cache-dtype``, in a sliding window of :attr:`Architecture.short_conv_kernel`
    tokens whose block holds as many."""
    return (kv_heads // tp) * short_conv_head_size(arch, kv_heads, head_dim) * DTYPE_BYTES[arch.dtype]


def short_conv_bytes_per_sequence(arch: Architecture, tp: int) -> int:
    """The short-convolution inputs one sequence keeps over all layers on one of ``tp`` ranks (its window of
    tokens in every layer's cache); 0 for a model without them."""
    if not arch.short_conv_kernel:
        return 0
    return arch.short_conv_kernel * sum(
        n * short_conv_page(arch, kv_heads or arch.num_kv_heads, head_dim or arch.head_dim, tp)
        for (mixer, kv_heads, head_dim, _, shared), n in arch.layer_census.items()
        if mixer in ATTENTION_MIXERS and not shared
    )


def state_bytes_per_sequence(arch: Architecture, tp: int, ssm_cache_dtype: str | None = None) -> int:
    """The constant Mamba-2 / Gated-DeltaNet state one sequence holds in one layer on one of ``tp`` ranks:
    the conv state in the model dtype and the recurrent state in its own dtype (vLLM ``MambaSpec``).

    ``ssm_cache_dtype`` is vLLM's ``--mamba-ssm-cache-dtype`` when it is not ``auto`` (an engine may also
    set it: vLLM 0.32's CPU platform keeps the recurrent state in float32 on CPUs with AVX-512 BF16);
    otherwise the model's own (the config's, e.g. Nemotron-H's float32) or its dtype."""
    if arch.state is None:
        return 0
    conv, recurrent = arch.state.state_elements(tp)
    conv_bytes = DTYPE_BYTES[arch.dtype]
    if arch.state.fixed_dtypes:  # the class's dtypes, whatever --mamba-ssm-cache-dtype says
        ssm_cache_dtype = None
    chosen = ssm_cache_dtype if ssm_cache_dtype not in (None, "auto") else arch.state.ssm_dtype
    ssm_bytes = DTYPE_BYTES.get(chosen or arch.dtype, conv_bytes)
    return conv * conv_bytes + recurrent * ssm_bytes


def kv_cache_bytes_per_token(
    arch: Architecture, *, kv_cache_dtype: str = "auto", tensor_parallel_size: int = 1
) -> int:
    """KV bytes one token adds over all GPUs, replication included: the growth of the attention layers
    (full, sliding and chunked layers alike, before their bounds; Mamba and linear-attention layers add
    nothing per token).

    ``2 (K and V) * kv_heads * head_dim * dtype_bytes`` per attention layer; MLA caches ``kv_lora_rank +
    qk_rope_head_dim`` per layer. Across TP ranks each GPU holds ``max(1, kv_heads // tp)`` heads, so with
    ``tp > kv_heads`` heads are replicated; MLA's latent is replicated on every rank.
    """
    _check_tp(tensor_parallel_size)
    tp = tensor_parallel_size
    if arch.compressed_attention:
        resolve_kv_cache_dtype(arch, kv_cache_dtype)
        growth = sum(Fraction(c.page, c.block) for c in _compressed_attention_caches(arch) if not c.state)
        return tp * int(growth)
    attention = sum(
        n * attention_bytes_per_token(arch, kv_heads, kv_cache_dtype, tp, head_dim, v_head_dim)
        for (mixer, kv_heads, head_dim, v_head_dim, shared), n in arch.layer_census.items()
        if mixer in ATTENTION_MIXERS and not shared
    )
    full = sum(layer.mixer == "full" for layer in arch.layers)
    indexers = arch.num_indexers * indexer_bytes_per_token(arch) + full * qsa_key_bytes_per_token(arch)
    return tp * int(attention + indexers)


def kv_cache_bytes_per_sequence(
    arch: Architecture,
    context_tokens: int,
    *,
    kv_cache_dtype: str = "auto",
    tensor_parallel_size: int = 1,
    max_num_batched_tokens: int = 8192,
    compute_capability: str | None = None,
) -> int:
    """Cache one sequence of ``context_tokens`` reserves over all GPUs, replication included: the blocks of
    :meth:`KVCacheLayout.blocks_per_sequence` times the bytes of one block, on every rank (on a GPU of
    ``compute_capability``, :func:`kv_cache_layout`)."""
    layout = kv_cache_layout(
        arch,
        tensor_parallel_size=tensor_parallel_size,
        kv_cache_dtype=kv_cache_dtype,
        max_num_batched_tokens=max_num_batched_tokens,
        compute_capability=compute_capability,
    )
    return layout.bytes_per_sequence(context_tokens) * tensor_parallel_size


@dataclass(frozen=True, slots=True)
class KVGroup:
    """KV-cache groups of one layer kind as vLLM's hybrid allocator forms them."""

    kind: str
    """``full`` (full attention and MLA), ``sliding``, ``chunked`` or ``mamba`` (Mamba-2 and linear
    attention)."""
    layers: int
    """Layers of this kind (before padding); for DeepSeek-V4, whose layers hold up to five caches of
    different kinds, the caches of this kind."""
    count: int
    """Groups of this kind: ``cdiv(layers, group_size)``; each needs its own blocks per sequence."""
    page_bytes: int
    """Bytes one block of one layer of this kind takes (padded to the common page for Mamba). DeepSeek-V4's
    packed groups mix caches of different pages, so there it is the whole block of a group (every group's
    the same: vLLM's groups alias one pool)."""
    bound: int | None = None
    """Window or chunk in tokens (sliding, chunked)."""
    block_tokens: int = 0
    """Tokens one block of this group holds when it differs from the layout's ``block_size``: vLLM gives
    every layer the largest page (``unify_kv_cache_spec_page_size``), and a layer whose page per token is
    a divisor of that page's gets a block size as many times larger (Gemma 4's sliding and global layers
    differ in head width and KV heads). 0: the layout's."""

    short_conv: bool = False
    """Inkling's short-convolution caches (:func:`short_conv_page`): a sliding window of inputs, not of K and
    V."""

    def tokens_per_block(self, block_size: int) -> int:
        return self.block_tokens or block_size


@dataclass(frozen=True, kw_only=True)
class KVCacheLayout:
    """vLLM's KV-cache layout on one GPU of a replica (``v1/core/kv_cache_utils.py``, vLLM 0.32).

    Layers are bucketed by kind. A model of one kind is one group holding every layer: a block is the pages
    of all layers (``bytes_per_block`` = their sum, whatever each layer's heads) and a sequence of T tokens
    needs ``cdiv(T, block_size)`` blocks. A hybrid model (sliding and full, or Mamba and attention) needs one
    page size for all layers: when Mamba states are present the attention block size grows until its page
    holds a state (``Platform._align_hybrid_block_size``) and the state page is padded to it. Each kind is
    then split into groups of ``group_size`` layers (the fewest layers of any kind, or the most when that is
    below 1.5 times the fewest), padding the last group; a block is ``group_size`` pages and a sequence
    needs blocks in every group: ``cdiv(T, block_size)`` for full attention, its window plus the in-flight
    tokens for sliding layers (``cdiv(min(W - 1 + inflight, max_len), bs) + 1``, never more than the
    sequence's blocks plus one), its
    chunk plus the in-flight tokens for chunked layers, one block per group for Mamba states. In-flight
    tokens are ``2 x max_num_batched_tokens``."""

    block_size: int
    """Tokens per block after the hybrid alignment."""
    bytes_per_block: int
    """One block of the largest group over its layers, on this GPU (vLLM's ``bytes_per_block``)."""
    groups: tuple[KVGroup, ...]
    inflight_tokens: int
    """Tokens scheduled but not yet settled: ``2 x max_num_batched_tokens`` with async scheduling."""
    max_model_len: int | None = None
    """Longest sequence (bounds the sliding and chunked reservations); None: the sequence itself."""
    state_blocks: int = 2
    """Blocks a request holds per Mamba group: 2 in vLLM's ``align`` cache mode, which it turns on for
    every Mamba / linear-attention model when prefix caching is on (the default), plus the prefill
    checkpoint block vLLM 0.32's Mamba-2 mixer asks for (``num_prefill_checkpoint_blocks = 1``: 3 for
    Nemotron-H, Granite 4.0-H, Falcon-H1); 1 without prefix caching."""

    def num_blocks(self, available_bytes: int) -> int:
        """Blocks vLLM allocates from ``available_bytes`` (``available // bytes_per_block``)."""
        return max(0, available_bytes // self.bytes_per_block) if self.bytes_per_block else 0

    def group_blocks(
        self, group: KVGroup, tokens: int, *, inflight: int | None = None, admitted: bool = False
    ) -> int:
        """Blocks one request of ``tokens`` reserves in each group of ``group``'s kind, with ``inflight``
        tokens scheduled and not yet settled (default: the layout's; 0: what a running request holds).
        A sliding group's figure is vLLM's per-request one (``max_memory_usage``: the window plus one,
        whatever the request's length); ``admitted``, what the scheduler takes for a request of that length
        (never more than its own blocks)."""
        inflight = self.inflight_tokens if inflight is None else inflight
        bs = group.tokens_per_block(self.block_size)
        full = -(-tokens // bs)
        limit = self.max_model_len if self.max_model_len is not None else tokens
        if group.kind == "full":
            return full
        if group.kind == "sliding" and group.bound is not None:
            # vLLM reserves the window's blocks plus one (the window may not start on a block boundary).
            span = min(group.bound - 1 + inflight, limit)
            return min(full + (not admitted), -(-span // bs) + 1)
        if group.kind == "chunked" and group.bound is not None:
            return min(full, -(-min(group.bound + inflight, limit) // bs))
        if group.kind == "ring":  # a ring of the last tokens (GLM-5.3's indexer tail): one block a request
            return 1
        return self.state_blocks  # a Mamba / linear-attention state

    def shared_blocks(self, prefix_tokens: int) -> int:
        """Blocks a prefix common to every request (a system prompt) holds once for all of them under
        vLLM's prefix caching: its whole blocks in the full-attention groups. Sliding, chunked and Mamba
        groups keep only a window or a state per request, so nothing of theirs is shared."""
        cached = self.cached_prefix_tokens(prefix_tokens)
        return sum(
            cached // g.tokens_per_block(self.block_size) * g.count for g in self.groups if g.kind == "full"
        )

    def cached_prefix_tokens(self, prefix_tokens: int) -> int:
        """Tokens of a prefix common to every request that vLLM's prefix cache serves: its whole blocks
        (of this layout's block size, which a Mamba hybrid raises well above 16; with groups of several
        block sizes, whole blocks of every one of them), and none when no group holds full attention (a
        window or a state is not a reusable prefix)."""
        if not any(g.kind == "full" for g in self.groups):
            return 0
        align = math.lcm(
            *(g.tokens_per_block(self.block_size) for g in self.groups if g.kind not in ("mamba", "ring"))
        )
        return max(0, prefix_tokens) // align * align

    def blocks_per_sequence(self, tokens: int) -> int:
        """Blocks one request of ``tokens`` reserves over every group (at least one): vLLM's per-request
        figure, which its startup check and its logged maximum concurrency use."""
        return self._over_groups(tokens)

    def _over_groups(self, tokens: int, *, inflight: int | None = None, admitted: bool = False) -> int:
        blocks = (self.group_blocks(g, tokens, inflight=inflight, admitted=admitted) for g in self.groups)
        return max(1, sum(n * g.count for n, g in zip(blocks, self.groups, strict=True)))

    def admitted_blocks_per_sequence(self, tokens: int) -> int:
        """Blocks vLLM 0.32 must find free to admit a request of ``tokens`` (``allocate_slots`` with
        ``full_sequence_must_fit``, ``scheduler_reserve_full_isl``): its blocks in the full-attention
        groups, in a sliding or chunked group as many as its window or chunk plus the in-flight tokens
        need (``max_admission_blocks_per_request``), its states."""
        return self._over_groups(tokens, admitted=True)

    def held_blocks_per_sequence(self, tokens: int) -> int:
        """Blocks a running request of ``tokens`` holds once its prompt is in: every block of the
        full-attention groups, its window's in a sliding group and its chunk's in a chunked one (vLLM frees
        the blocks that fall behind, ``remove_skipped_blocks``), its states. Only the request being admitted
        needs the in-flight tokens' blocks besides (:meth:`admitted_blocks_per_sequence`)."""
        return self._over_groups(tokens, inflight=0, admitted=True)

    def sequences(self, blocks: int, tokens: int, shared_prefix_tokens: int = 0) -> int:
        """Requests of ``tokens`` that run at once in a pool of ``blocks``: vLLM 0.32 admits a request only
        when its reservation is free (:meth:`admitted_blocks_per_sequence`) and a running one keeps
        :meth:`held_blocks_per_sequence`, so ``n`` run when ``n - 1`` held and one reservation fit in the
        pool less its null block (``BlockPool`` sets one aside). Without sliding or chunked groups the two
        are equal and this is ``(blocks - 1) // blocks_per_sequence``. The first ``shared_prefix_tokens`` of
        every request, common to all, are held once (:meth:`shared_blocks`).
        ``tests/conformance/test_running_sequences.py`` holds this to the engine's scheduler."""
        usable = blocks - 1
        shared = self.shared_blocks(min(shared_prefix_tokens, tokens))
        reserve = self.admitted_blocks_per_sequence(tokens) - shared
        held = max(1, self.held_blocks_per_sequence(tokens) - shared)
        if usable < shared + reserve:
            return 0
        return 1 + (usable - shared - reserve) // held

    def bytes_per_sequence(self, tokens: int) -> int:
        """Bytes one request of ``tokens`` reserves on this GPU (vLLM's per-request figure)."""
        return self.blocks_per_sequence(tokens) * self.bytes_per_block


#: vLLM's NemotronH class, which it builds for both (nemotron_h.py): ``IsHybrid``, so its block is sized by
#: the Mamba state its config describes even where no layer is Mamba.
_NEMOTRON_H_CLASSES = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM")


def kv_cache_layout(
    arch: Architecture,
    *,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str = "auto",
    block_size: int = BLOCK_SIZE_TOKENS,
    kernel_block_alignment: int = BLOCK_SIZE_TOKENS,
    max_num_batched_tokens: int = 8192,
    max_model_len: int | None = None,
    max_in_flight_tokens: int | None = None,
    enable_prefix_caching: bool = True,
    mamba_ssm_cache_dtype: str | None = None,
    compute_capability: str | None = None,
) -> KVCacheLayout:
    """The :class:`KVCacheLayout` vLLM builds for ``arch`` on one of ``tensor_parallel_size`` ranks.

    ``block_size`` is vLLM's starting ``--block-size`` (16 on GPUs, 128 on the CPU backend) and
    ``kernel_block_alignment`` the attention kernel's block alignment used to fit Mamba states (16 on GPUs;
    128 on CPU, where it is ``max(32, block_size)``). ``max_in_flight_tokens`` defaults to ``2 x
    max_num_batched_tokens`` (GPU async scheduling); the CPU backend schedules synchronously (``1 x``).
    With prefix caching (vLLM's default) Mamba states are kept in ``align`` mode: two blocks per request,
    three for a Mamba-2 mixer (its prefill checkpoint block).
    ``mamba_ssm_cache_dtype``: the recurrent state's dtype when the engine overrides it (see
    :func:`state_bytes_per_sequence`).
    ``compute_capability``: the GPU's (:attr:`GPU.compute_capability`), which sets DeepSeek-V4.1's records,
    pages and block (:func:`v41_records`); None keeps Hopper's (and, with the CPU backend's block, vLLM's CPU
    build's)."""
    args = (
        tensor_parallel_size,
        kv_cache_dtype,
        block_size,
        kernel_block_alignment,
        max_num_batched_tokens,
        max_model_len,
        max_in_flight_tokens,
        enable_prefix_caching,
        mamba_ssm_cache_dtype,
        compute_capability,
    )
    layout = arch.memo.get(("kv_cache_layout", *args))
    if layout is None:
        layout = arch.memo[("kv_cache_layout", *args)] = _kv_cache_layout(arch, *args)
    assert isinstance(layout, KVCacheLayout)
    sinks = arch.attention_sink_tokens
    if sinks and sinks % layout.block_size:
        # vLLM's SinkFullAttentionManager asserts ``sink_len % block_size == 0``
        # (v1/core/single_type_kv_cache_manager.py:2196-2197) when the engine builds its KV managers, after
        # the KV accounting (which leaves the sink's slots out of num_blocks) has passed.
        raise CapacityError(
            f"{arch.name}'s {sinks} attention sink tokens (param_sink_number) are not a whole number of "
            f"{layout.block_size}-token KV blocks, the block this plan's engine uses: vLLM 0.32's sink "
            f"attention stops at start when the block does not divide them; accepted: param_sink_number a "
            f"multiple of {layout.block_size}"
        )
    return layout


def _kv_cache_layout(
    arch: Architecture,
    tensor_parallel_size: int,
    kv_cache_dtype: str,
    block_size: int,
    kernel_block_alignment: int,
    max_num_batched_tokens: int,
    max_model_len: int | None,
    max_in_flight_tokens: int | None,
    enable_prefix_caching: bool,
    mamba_ssm_cache_dtype: str | None = None,
    compute_capability: str | None = None,
) -> KVCacheLayout:
    _check_tp(tensor_parallel_size)
    tp = tensor_parallel_size
    inflight = 2 * max_num_batched_tokens if max_in_flight_tokens is None else max_in_flight_tokens
    if arch.compressed_attention:
        if arch.shared_compressed_caches:
            resolve_kv_cache_dtype(arch, kv_cache_dtype, compute_capability=compute_capability)
            records = v41_records(arch, kv_cache_dtype, tp, compute_capability)
            return _v41_layout(arch, inflight, max_model_len, block_size, kernel_block_alignment, records)
        resolve_kv_cache_dtype(arch, kv_cache_dtype)
        return _compressed_attention_layout(arch, inflight, max_model_len)
    if arch.mla_cache_row:
        resolve_kv_cache_dtype(arch, kv_cache_dtype)
        layout = _padded_row_layout(arch, tp, kv_cache_dtype, block_size, kernel_block_alignment)
        return replace(layout, inflight_tokens=inflight, max_model_len=max_model_len)
    if arch.index_kpool or arch.ple_conv_kernel:
        state_blocks = 2 if enable_prefix_caching else 1
        if arch.index_kpool:
            layout = _pooled_indexer_layout(arch, tp, kv_cache_dtype, block_size, kernel_block_alignment)
        else:
            layout = _qwen4_exp_layout(arch, tp, kv_cache_dtype, block_size, mamba_ssm_cache_dtype)
        return replace(
            layout, inflight_tokens=inflight, max_model_len=max_model_len, state_blocks=state_blocks
        )
    if arch.num_indexer_layers:
        block_size = math.lcm(block_size, SPARSE_INDEXER_BLOCK_SIZE)
    if arch.attention_free:
        # vLLM's default for an attention-free class: no prefix caching, so Mamba cache mode "none" and
        # mamba_block_size = max_model_len (MambaModelConfig), one block a request.
        enable_prefix_caching = False
        block_size = max_model_len or block_size
    # (kind, bound) -> [(page bytes per token, or per state), layers with that page]
    buckets: dict[tuple[str, int | None], list[tuple[int, int]]] = {}
    # Inkling's short-convolution caches: sliding windows of their own block size, one spec per layer shape
    # (KV heads and head width), which vLLM keeps apart even where their pages match: (kv heads, head dim)
    # -> [page bytes per token, layers]
    convs: dict[tuple[int, int], list[int]] = {}
    for (mixer, kv_heads, head_dim, v_head_dim, shared), layers in arch.layer_census.items():
        if shared:
            continue  # vLLM gives a layer over another layer's cache no spec of its own
        if mixer in ATTENTION_MIXERS:
            kind: str = "full" if mixer in ("full", "mla") else mixer
            bound = arch.sliding_window if kind == "sliding" else arch.attention_chunk_size
            page = attention_bytes_per_token(arch, kv_heads, kv_cache_dtype, tp, head_dim, v_head_dim)
            if kind == "sliding" and arch.own_windows:
                # NemotronH-Puzzle's windows by layer: each distinct window a spec (and bucket) of its own
                for window, n in arch.own_windows.items():
                    buckets.setdefault((kind, window), []).append((page, n))
                continue
            buckets.setdefault((kind, None if kind == "full" else bound), []).append((page, layers))
            if arch.short_conv_kernel:
                shape = (kv_heads or arch.num_kv_heads, head_dim or arch.head_dim)
                convs.setdefault(shape, [short_conv_page(arch, *shape, tp), 0])[1] += layers
        elif mixer in STATE_MIXERS:
            state = state_bytes_per_sequence(arch, tp, mamba_ssm_cache_dtype)
            buckets.setdefault(("mamba", None), []).append((state, layers))
    if not buckets:
        return KVCacheLayout(block_size=block_size, bytes_per_block=0, groups=(), inflight_tokens=inflight)
    # vLLM's MambaSpec.max_memory_usage_bytes: 2 + the prefill checkpoint blocks in align mode (MambaMixer2
    # asks for one; Mamba-1 and Gated DeltaNet for none), 1 otherwise.
    checkpoint = 1 if arch.state is not None and arch.state.kind == "mamba2" else 0
    state_blocks = 2 + checkpoint if enable_prefix_caching else 1
    counts = {key: sum(n for _, n in pages) for key, pages in buckets.items()}
    if indexers := arch.num_indexers:
        # Each indexer's key cache (MiniMax-M3's layers', DeepSeek-V3.2's): a page of its own in the
        # full-attention group, counted with its layer, not as a layer.
        buckets[("full", None)].append((indexer_key_bytes(arch), indexers))
    phantom = arch.attention == "MLA" or arch.architecture in _NEMOTRON_H_CLASSES
    if arch.state is not None and ("mamba", None) not in buckets and phantom:
        # A hybrid class whose layers all attend still sizes its block by the state its config describes
        # (vLLM aligns the block of every IsHybrid model): Ling 2.5 with layer_group_size 1, a NemotronH or
        # NemotronH-Puzzle file without Mamba layers (measured with the Puzzle's class: pages padded to it).
        state = state_bytes_per_sequence(arch, tp, mamba_ssm_cache_dtype)
        page = max(p for pages in buckets.values() for p, _ in pages)
        align = max(kernel_block_alignment, block_size)
        if arch.attention == "MLA":
            align = max(align, MLA_HYBRID_BLOCK_ALIGNMENT)
        block_size = _hybrid_block(state, page, align, kernel_block_alignment, block_size)
    if len(buckets) == 1 and not convs:
        ((kind, bound), pages) = next(iter(buckets.items()))
        per_layer_block = sum(p * n for p, n in pages)
        per_block = per_layer_block if kind == "mamba" else per_layer_block * block_size
        layers = counts[(kind, bound)]
        group = KVGroup(kind=kind, layers=layers, count=1, page_bytes=per_block // layers, bound=bound)
        return KVCacheLayout(
            block_size=block_size,
            bytes_per_block=per_block,
            groups=(group,),
            inflight_tokens=inflight,
            max_model_len=max_model_len,
            state_blocks=state_blocks,
        )
    token_page = max(p for (kind, _), pages in buckets.items() if kind != "mamba" for p, _ in pages)
    if ("mamba", None) in buckets:
        state_page = max(p for p, _ in buckets[("mamba", None)])
        align = max(kernel_block_alignment, block_size)
        if arch.attention == "MLA":
            align = max(align, MLA_HYBRID_BLOCK_ALIGNMENT)
        # The engine sizes the block by the KV heads its model config states, which are the layers' but in
        # Zamba2 (the block larger where the file states fewer; the state page is padded to that block of
        # them, and then to the layers' larger page).
        assumed = token_page
        if arch.alignment_kv_heads:
            assumed = attention_bytes_per_token(arch, arch.alignment_kv_heads, kv_cache_dtype, tp)
        block_size = _hybrid_block(state_page, assumed, align, kernel_block_alignment, block_size)
    kernel = arch.short_conv_kernel
    page = max([block_size * token_page, *(kernel * p for p, _ in convs.values())])
    # vLLM buckets layers by their spec: one bucket per kind and page per token (and per shape for the
    # convolution caches). A page smaller than the largest that divides it gets a block size as many times
    # larger; one that does not divide it is padded. Key: (kind, bound, page per token, tokens a block
    # starts with, conv shape).
    specs: dict[tuple[str, int | None, int, int, tuple[int, int] | None], int] = {}
    for (kind, bound), pages in buckets.items():
        for p, n in pages:
            key = (kind, bound, p if kind != "mamba" else 0, block_size, None)
            specs[key] = specs.get(key, 0) + n
    for shape, (p, n) in convs.items():
        specs[("sliding", kernel, p, kernel, shape)] = n
    sizes = list(specs.values())
    group_size = max(sizes) if max(sizes) < 1.5 * min(sizes) else min(sizes)

    def block_tokens(kind: str, p: int, start: int) -> int:
        if kind == "mamba":
            return 0
        if start * p < page and page % (start * p) == 0:
            return page // p
        return 0 if start == block_size else start

    groups = tuple(
        KVGroup(
            kind=kind,
            layers=n,
            count=-(-n // group_size),
            page_bytes=page,
            bound=bound,
            block_tokens=block_tokens(kind, p, start),
            short_conv=shape is not None,
        )
        for (kind, bound, p, start, shape), n in specs.items()
    )
    return KVCacheLayout(
        block_size=block_size,
        bytes_per_block=group_size * page,
        groups=groups,
        inflight_tokens=inflight,
        max_model_len=max_model_len,
        state_blocks=state_blocks,
    )


#: DeepSeek-V4's cache blocks, in tokens: the sliding-window latent's (``DeepseekV4SWACache``, 64), the
#: compressed latents' and the indexer's (vLLM forces ``--block-size`` 256 on the model: its sparse MLA and
#: indexer kernels take no other), and the compressor states' (4 for ratio 4, 8 for ratio 128: a state page
#: must match a latent page's size).
DSV4_SWA_BLOCK_TOKENS = 64
DSV4_BLOCK_SIZE = 256
DSV4_STATE_BLOCK_TOKENS = {4: 4, 128: 8}


@dataclass(frozen=True, slots=True)
class _Cache:
    """One KV-cache spec vLLM registers for a DeepSeek-V4 layer: its manager (``full``: every block of the
    sequence; ``sliding``: the last ``window`` tokens'), the tokens a block covers and its padded page."""

    kind: str
    block: int
    window: int | None
    page: int
    state: bool = False
    """A compressor's fp32 state (constant per sequence, not a cache that grows with it)."""
    spec: str = ""
    """What else keeps two caches apart in vLLM's buckets (Qwen3.8's PLE states are replicated over TP, its
    GDN states split)."""


def _padded(page: int, alignment: int = FP8_DS_MLA_PAGE_ALIGNMENT) -> int:
    return -(-page // alignment) * alignment


#: DeepSeek-V4.1's caches (vLLM's ``models/deepseek_v41``): its sliding-window latent's block in tokens
#: (``DeepseekV4SWACache``), its sparse MLA and indexer kernels' block on Hopper (FlashMLA's; 128 on 10.x and
#: 12.x, :attr:`V41Records.kernel_block`; the engine block is the smallest every backend takes), its indexer
#: key record (fp8 values and an fp32 scale per 128 of ``index_head_dim``, 132 bytes at 128) and its
#: compressor ring's block (8 rows of fp32 key and score).
V41_SWA_BLOCK_TOKENS = 32
V41_KERNEL_BLOCK = 64
V41_SM100_KERNEL_BLOCK = 128
V41_RING_BLOCK_TOKENS = 8


@dataclass(frozen=True, slots=True)
class V41Records:
    """DeepSeek-V4.1's KV records on one GPU (:func:`v41_records`)."""

    dtype: str
    """The KV dtype vLLM keeps: ``fp8_ds_mla`` or ``nvfp4_ds_mla``."""
    mega: bool
    """FlashMLA's mega-attention class serves the attention (10.x, heads in groups of 8 on every rank)."""
    window: int
    """Bytes of one sliding-window latent record."""
    compressed: int
    """Bytes of one compressed latent record."""
    alignment: int
    """What every packed page (window, compressed latents, indexer keys) is padded to."""
    kernel_block: int
    """The sparse MLA and indexer kernels' block in tokens."""


def _capability_major(compute_capability: str | None) -> int | None:
    """The major of a CUDA ``major.minor`` (None for none, or an AMD gfx target)."""
    major = (compute_capability or "").split(".")[0]
    return int(major) if major.isdigit() else None


def v41_records(
    arch: Architecture, kv_cache_dtype: str, tensor_parallel_size: int, compute_capability: str | None
) -> V41Records:
    """DeepSeek-V4.1's KV records as vLLM 0.32 picks them for a GPU of ``compute_capability`` (None: kvright's
    default, Hopper's records and block; vLLM's CPU build is that with its own 128-token block). On 10.x the
    mega-attention class serves it when every rank holds whole groups of 8 heads per ``o_groups`` group
    (``heads % tp == 0``, ``o_groups % tp == 0``, local heads a multiple of 8 and 8 per local group), else
    FlashMLA; ``auto`` and ``fp8`` become the class's ``nvfp4_ds_mla`` or ``fp8_ds_mla``; records are 528
    bytes (288 compressed under ``nvfp4_ds_mla``), pages padded to 512, kernel blocks 128 tokens. On 12.x
    (FlashInfer's SM120 class) and elsewhere the records are 584 bytes on 576-byte pages; the kernels' block
    is 64 tokens on 9.x, 128 on 12.x. ``nvfp4_ds_mla`` anywhere but 10.x stops vLLM."""
    major = _capability_major(compute_capability)
    tp = tensor_parallel_size
    heads, groups = arch.num_attention_heads, arch.o_groups
    mega = (
        major == 10
        and groups > 0
        and heads % tp == 0
        and groups % tp == 0
        and (heads // tp) % V41_MEGA_HEADS_PER_GROUP == 0
        and heads // tp == V41_MEGA_HEADS_PER_GROUP * (groups // tp)
    )
    dtype = kv_cache_dtype
    if dtype in ("auto", "fp8"):
        dtype = NVFP4_DS_MLA if mega else FP8_DS_MLA
    if dtype == NVFP4_DS_MLA and major != 10:
        raise CapacityError(
            f"KV-cache dtype {NVFP4_DS_MLA!r} is not one DeepSeek-V4.1 keeps on compute capability "
            f'{compute_capability or "unknown"}: vLLM says "nvfp4_ds_mla needs the V4.1 KV records, which '
            'FlashMLA decodes only on SM100."; expected auto, fp8 or fp8_ds_mla'
        )
    if major == 10:
        compressed = V41_NVFP4_ENTRY_BYTES if dtype == NVFP4_DS_MLA else V41_SM100_ENTRY_BYTES
        return V41Records(
            dtype, mega, V41_SM100_ENTRY_BYTES, compressed, V41_SM100_PAGE_ALIGNMENT, V41_SM100_KERNEL_BLOCK
        )
    kernel = V41_SM100_KERNEL_BLOCK if major == 12 else V41_KERNEL_BLOCK
    entry = FP8_DS_MLA_ENTRY_BYTES
    return V41Records(dtype, False, entry, entry, FP8_DS_MLA_PAGE_ALIGNMENT, kernel)


def _v41_caches(arch: Architecture, block: int, kernel: int, records: V41Records) -> tuple[list[_Cache], int]:
    """DeepSeek-V4.1's caches in vLLM's order, and the page alignment its packed pool rounds to: every layer
    its window of latents (``records.window`` bytes each, pages padded to ``records.alignment``); a kv source
    its compressed latents (``records.compressed`` bytes, one a ``ratio`` tokens, ``block`` tokens a block)
    and, where it is an index source too, its indexer's keys at the same rate; a ratio-2 kv source the
    compressor's ring. A block larger than the kernel's makes each such page's stride the page of a kernel
    block (their lcm is the alignment)."""
    align = records.alignment
    swa = _Cache(
        "sliding",
        V41_SWA_BLOCK_TOKENS,
        arch.sliding_window,
        _padded(V41_SWA_BLOCK_TOKENS * records.window, align),
    )
    index_entry = indexer_key_bytes(arch)
    stride = math.gcd(kernel, block)
    caches: list[_Cache] = []
    alignment = 1
    for layer in arch.layers:
        ratio = layer.compress_ratio
        if not layer.kv_source:
            caches.append(swa)
            continue
        entries = [records.compressed] + ([index_entry] if layer.index_source else [])
        for entry in entries:
            caches.append(_Cache("full", block, None, _padded(block // ratio * entry, align)))
            if stride != block:
                alignment = math.lcm(alignment, _padded(stride // ratio * entry, align))
        caches.append(swa)
        if ratio == 2:
            ring = V41_RING_BLOCK_TOKENS * 2 * arch.head_dim * 4
            caches.append(_Cache("ring", V41_RING_BLOCK_TOKENS, None, ring, state=True))
    return caches, alignment


def _compressed_attention_caches(arch: Architecture) -> list[_Cache]:
    """Every cache of every layer, in vLLM's order (``models/deepseek_v4``): the sliding-window latent;
    on a compressed layer the compressed latents (``256 / ratio`` a block), on ratio-4 layers the indexer's
    keys (fp8 with an fp32 scale per 128), and a compressor state for each (``2 x overlap x width`` fp32
    values a token, over a window of ``overlap x ratio`` tokens; ratio-4 windows overlap, 2)."""
    if arch.shared_compressed_caches:
        return _v41_caches(arch, V41_KERNEL_BLOCK, V41_KERNEL_BLOCK, v41_records(arch, "auto", 1, None))[0]
    index_entry = indexer_key_bytes(arch)
    caches = []
    for layer in arch.layers:
        swa_page = _padded(DSV4_SWA_BLOCK_TOKENS * FP8_DS_MLA_ENTRY_BYTES)
        caches.append(_Cache("sliding", DSV4_SWA_BLOCK_TOKENS, arch.sliding_window, swa_page))
        ratio = layer.compress_ratio
        if not ratio:
            continue
        per_block = DSV4_BLOCK_SIZE // ratio
        caches.append(_Cache("full", DSV4_BLOCK_SIZE, None, _padded(per_block * FP8_DS_MLA_ENTRY_BYTES)))
        widths = [arch.head_dim]
        if ratio == 4:
            caches.append(_Cache("full", DSV4_BLOCK_SIZE, None, _padded(per_block * index_entry)))
            widths.append(arch.index_head_dim)
        overlap = 2 if ratio == 4 else 1
        block = DSV4_STATE_BLOCK_TOKENS[ratio]
        caches += [
            _Cache("sliding", block, overlap * ratio, _padded(block * 2 * overlap * width * 4), state=True)
            for width in widths
        ]
    return caches


def _approximate_gcd(values: list[int], lower_bound: int) -> int:
    """The chunk in ``[lower_bound, max(values)]`` that pads ``values`` up to its multiples least, the larger
    on a tie (vLLM's ``_approximate_gcd``)."""
    if lower_bound > max(values):
        return lower_bound
    return min(range(lower_bound, max(values) + 1), key=lambda d: (sum(-x % d for x in values), -d))


def _packed_groups(caches: list[_Cache]) -> list[list[_Cache]]:
    """vLLM's grouping of caches whose pages differ in a block-outermost layout (DeepSeek-V4's indexer needs
    one; ``_get_packed_kv_cache_groups``): caches of one manager, block and window form a bucket; a bucket
    whose page sizes hold equally many caches repeats a pattern and is cut into groups of the same number
    of repeats (the one padding the buckets least, at least the largest mixed bucket's); an unbalanced
    bucket stays whole; with no mixed balanced bucket, sliding buckets are cut to the caches a block of the
    widest bucket fits."""
    buckets: dict[tuple[str, int, int | None, str], dict[int, list[_Cache]]] = {}
    for c in caches:
        buckets.setdefault((c.kind, c.block, c.window, c.spec), {}).setdefault(c.page, []).append(c)
    shapes = [(pages, len({len(v) for v in pages.values()}) == 1) for pages in buckets.values()]
    most = {id(pages): max(len(v) for v in pages.values()) for pages, _ in shapes}
    floor = max((most[id(p)] for p, balanced in shapes if balanced and len(p) > 1), default=0)
    repeats = _approximate_gcd([most[id(p)] for p, b in shapes if b], floor) if floor else None

    def split(pages: dict[int, list[_Cache]], balanced: bool) -> int:
        return -(-most[id(pages)] // repeats) if balanced and repeats else 1

    def widest(pages: dict[int, list[_Cache]], n: int) -> int:
        return sum(-(-len(v) // n) * page for page, v in pages.items())

    def state_bucket(pages: dict[int, list[_Cache]]) -> bool:
        kind = next(iter(pages.values()))[0].kind
        return kind in ("mamba", "ring") or (repeats is None and kind == "sliding")

    anchor = max(widest(p, sum(map(len, p.values())) if state_bucket(p) else split(p, b)) for p, b in shapes)
    groups = []
    for pages, balanced in shapes:
        n = split(pages, balanced)
        if state_bucket(pages):
            first = next(iter(pages))
            n = max(n, -(-sum(map(len, pages.values())) // max(anchor // first, 1)))
        if n == 1:
            groups.append([c for v in pages.values() for c in v])
            continue
        repeat = list(zip(*pages.values(), strict=False))
        groups += [[c for r in repeat[i::n] for c in r] for i in range(n)]
    return groups


def _v41_layout(
    arch: Architecture,
    inflight: int,
    max_model_len: int | None,
    block_size: int,
    kernel_block_alignment: int,
    records: V41Records,
) -> KVCacheLayout:
    """DeepSeek-V4.1's layout: its caches (:func:`_v41_caches`) packed by pattern (:func:`_packed_groups`)
    into one pool whose block is the widest group's pages, rounded to the pages' strides; a request holds
    ``cdiv(T, block)`` blocks in each compressed group, its window's (plus the in-flight tokens) in each
    sliding one and one a ring group. The block is the engine's: the kernels' (``records.kernel_block``: 64
    tokens on Hopper, 128 on 10.x and 12.x; vLLM asks 16, which they do not take), the CPU backend's own
    128."""
    kernel = max(kernel_block_alignment, records.kernel_block)
    block = max(block_size, kernel)
    caches, alignment = _v41_caches(arch, block, kernel, records)
    return _packed_pool(caches, block, alignment, inflight_tokens=inflight, max_model_len=max_model_len)


def _compressed_attention_layout(
    arch: Architecture, inflight: int, max_model_len: int | None
) -> KVCacheLayout:
    """DeepSeek-V4's layout: every group's block costs the widest group's pages (vLLM's groups alias one
    pool, ``bytes_per_block`` their largest), whatever the group; a sequence holds ``cdiv(T, 256)`` blocks in
    the compressed groups and its windows' blocks (plus the in-flight tokens) in the sliding ones. The cache
    is one latent, the same on every TP rank."""
    caches = _compressed_attention_caches(arch)
    # One page size (no compressed layer): one group of every window, as any model of one kind.
    return _packed_pool(
        caches,
        DSV4_BLOCK_SIZE,
        FP8_DS_MLA_PAGE_ALIGNMENT,
        inflight_tokens=inflight,
        max_model_len=max_model_len,
    )


def _packed_pool(caches: list[_Cache], block: int, alignment: int, **kw: Any) -> KVCacheLayout:
    """``caches`` packed by pattern (:func:`_packed_groups`; one group where they are all alike) into the one
    pool vLLM's groups alias, whose block is the widest group's pages rounded up to ``alignment`` (the
    pages' strides)."""
    groups = _packed_groups(caches) if len({(c.kind, c.page) for c in caches}) > 1 else [caches]
    widest = max(sum(c.page for c in g) for g in groups)
    return _pool_layout(groups, block, -(-widest // alignment) * alignment, **kw)


def _hybrid_block(state: int, per_token: int, align: int, multiple: int, floor: int) -> int:
    """vLLM's hybrid block size (``Platform._align_hybrid_block_size``): the fewest ``align``-token steps
    whose attention page (``per_token`` bytes a token) holds a ``state``, rounded up to the kernels'
    ``multiple``; never below ``floor`` tokens."""
    block = align * -(-state // (align * per_token))
    return max(floor, multiple * -(-block // multiple))


def _pool_layout(
    groups: list[list[_Cache]], block_size: int, bytes_per_block: int, **kw: Any
) -> KVCacheLayout:
    """Packed groups as the one pool vLLM's groups alias (every group's block costs ``bytes_per_block``):
    a :class:`KVGroup` per kind, window and block of cache, counting its caches and its groups."""
    merged: dict[tuple[str, int | None, int], list[int]] = {}
    for g in groups:
        entry = merged.setdefault((g[0].kind, g[0].window, g[0].block), [0, 0])
        entry[0] += len(g)
        entry[1] += 1
    page = max(sum(c.page for c in g) for g in groups)
    return KVCacheLayout(
        block_size=block_size,
        bytes_per_block=bytes_per_block,
        groups=tuple(
            KVGroup(kind=kind, layers=n, count=count, page_bytes=page, bound=window, block_tokens=block)
            for (kind, window, block), (n, count) in merged.items()
        ),
        **{"inflight_tokens": 0, **kw},
    )


#: The sparse MLA kernels' block in tokens (FlashMLA's; vLLM rounds GLM-5.3's block up to a multiple).
SPARSE_MLA_KERNEL_BLOCK = 64


def _pooled_indexer_layout(
    arch: Architecture, tp: int, kv_cache_dtype: str, block_size: int, kernel_block_alignment: int
) -> KVCacheLayout:
    """GLM-5.3's layout (vLLM 0.32's glm5next, block-outermost as its indexer's tail ring requires): every
    MLA layer caches its latent and a pooled indexer key (one per ``index_kpool`` tokens) and keeps a ring of
    its last ``index_kpool`` raw keys and gate scores (bfloat16, one block a request); every KDA layer a
    state. The block is the hybrid alignment of the KDA state the config describes (sized even where no
    layer is KDA) over the latent's page per token, rounded to the sparse kernels' and the pooled indexer's
    blocks; the states are padded to that page. vLLM packs the caches into groups of one pattern
    (:func:`_packed_groups`), which alias one pool whose block is the widest group's pages, rounded to the
    indexer's stride."""
    kpool = arch.index_kpool
    latent = attention_bytes_per_token(arch, 1, kv_cache_dtype, tp)
    state = state_bytes_per_sequence(arch, tp)
    kda = arch.num_state_layers
    mla = sum(layer.mixer == "mla" for layer in arch.layers)
    if not mla:
        group = KVGroup(kind="mamba", layers=kda, count=1, page_bytes=state)
        return KVCacheLayout(
            block_size=block_size, bytes_per_block=kda * state, groups=(group,), inflight_tokens=0
        )
    # The platform sizes the block by a plain MLA page (fp8: a byte a value, not fp8_ds_mla's entry).
    per_token = ((arch.kv_lora_rank or 0) + arch.qk_rope_head_dim) * kv_dtype_bytes(arch, kv_cache_dtype)
    align = max(kernel_block_alignment, block_size, MLA_HYBRID_BLOCK_ALIGNMENT)
    block = _hybrid_block(state, per_token, align, math.lcm(SPARSE_MLA_KERNEL_BLOCK, 32 * kpool), block_size)
    key = indexer_key_bytes(arch)
    ring_page = kpool * 2 * arch.index_head_dim * 2
    caches = [
        cache
        for layer in arch.layers
        for cache in (
            (_Cache("mamba", block, None, block * per_token, state=True),)
            if layer.mixer != "mla"
            else (
                _Cache("full", block, None, block * latent),
                _Cache("full", block, None, block // kpool * key),
                _Cache("ring", kpool, None, ring_page, state=True),
            )
        )
    ]
    stride = math.gcd(64 * kpool, block)  # the indexer's block stride (MultipleOf(64 x kpool) tokens)
    return _packed_pool(caches, block, 1 if stride == block else stride // kpool * key)


def _padded_row_layout(
    arch: Architecture, tp: int, kv_cache_dtype: str, block_size: int, kernel_block_alignment: int
) -> KVCacheLayout:
    """dots3-note's layout (vLLM 0.32's ``models/dots3_note``): every MLA layer, full or sliding, caches
    rows of :attr:`Architecture.mla_cache_row` values a token; a full layer's indexer keys beside them. The
    full layers' backend takes only the block-outermost layout, so a model with both kinds is packed by
    pattern (:func:`_packed_groups`) into one pool whose block is the widest group's pages, rounded up to the
    pages' strides (the full latents' a row each; the indexer's a kernel block of keys where the block is
    larger); one kind alone makes one group. The block is the engine's: the sparse kernels' 64 tokens on a
    GPU (vLLM asks 16, which they do not take), the CPU backend's 128."""
    block = max(block_size, SPARSE_MLA_KERNEL_BLOCK) if kernel_block_alignment < 64 else block_size
    row = attention_bytes_per_token(arch, 1, kv_cache_dtype, tp)
    key = indexer_key_bytes(arch)
    caches: list[_Cache] = []
    for layer in arch.layers:
        if layer.mixer == "sliding":
            caches.append(_Cache("sliding", block, arch.sliding_window, block * row))
            continue
        if not layer.reuses_indices:
            caches.append(_Cache("full", block, None, block * key))
        caches.append(_Cache("full", block, None, block * row))
    stride = math.gcd(SPARSE_MLA_KERNEL_BLOCK, block)
    alignment = row if any(c.kind == "full" for c in caches) else 1
    if arch.num_mla_indexers and stride != block:
        alignment = math.lcm(alignment, stride * key)
    return _packed_pool(caches, block, alignment)


def ple_state_bytes(arch: Architecture) -> int:
    """Qwen3.8's PLE state a request holds in a PLE layer: its dilated conv's window, ``(kernel - 1) x
    dilation`` tokens of the ``hc x hidden`` stream, in the model dtype, whole on every rank."""
    stream = arch.hyper_connections * arch.hidden_size
    return (arch.ple_conv_kernel - 1) * arch.ple_dilation * stream * DTYPE_BYTES[arch.dtype]


#: The attention kernels' block in tokens that Qwen3.8's layout rounds its block to (its QSA backend's and
#: FlashAttention's multiple of 16).
QSA_KERNEL_BLOCK = 16


def _qwen4_exp_layout(
    arch: Architecture, tp: int, kv_cache_dtype: str, block_size: int, ssm_cache_dtype: str | None
) -> KVCacheLayout:
    """Qwen3.8-Flash-Next's layout (vLLM 0.32's qwen4_exp): GDN states, PLE states (replicated, a bucket of
    their own), and on each full layer its K and V and, under QSA, a compressed key per ``ratio`` tokens
    (bfloat16 whatever ``--kv-cache-dtype``) and a ring of ``ratio`` raw keys (one block a request). The
    block holds the larger of the two states (both sized from the config, PLE layers or not) in K/V pages,
    rounded to 16 tokens; the states are padded to it. QSA's caches take only the block-outermost layout,
    so the engine packs them by pattern (:func:`_packed_groups`); without QSA it groups by page (the states
    padded to the largest), ``group_size`` layers a group, as any hybrid."""
    gdn, ple = state_bytes_per_sequence(arch, tp, ssm_cache_dtype), ple_state_bytes(arch)
    full = [i for i, layer in enumerate(arch.layers) if layer.mixer == "full"]
    per_token = attention_bytes_per_token(arch, arch.num_kv_heads, kv_cache_dtype, tp) if full else 0
    block, padded = block_size, None
    if full:
        block = _hybrid_block(max(gdn, ple), per_token, block_size, QSA_KERNEL_BLOCK, block_size)
        padded = block * per_token
    ratio = arch.qsa_compress_ratio
    caches: list[_Cache] = []
    for i, layer in enumerate(arch.layers):
        if i in arch.ple_layers:
            caches.append(_Cache("mamba", block, None, padded or ple, state=True, spec="replicated"))
        if layer.mixer == "linear":
            caches.append(_Cache("mamba", block, None, padded or gdn, state=True))
        elif layer.mixer == "full" and ratio:
            caches.append(_Cache("ring", ratio, None, ratio * arch.index_head_dim * 2, state=True))
            caches.append(_Cache("full", block, None, int(block * qsa_key_bytes_per_token(arch))))
            caches.append(_Cache("full", block, None, block * per_token))
        elif layer.mixer == "full":
            caches.append(_Cache("full", block, None, block * per_token))
    if ratio:
        groups = _packed_groups(caches)
    else:  # pages unified (the states padded to the largest), then groups of one spec, group_size layers
        largest = max(c.page for c in caches)
        same: dict[tuple[str, str], list[_Cache]] = {}
        for c in caches:
            same.setdefault((c.kind, c.spec), []).append(replace(c, page=largest) if c.kind == "mamba" else c)
        sizes = [len(v) for v in same.values()]
        size = max(sizes) if max(sizes) < 1.5 * min(sizes) else min(sizes)
        groups = [v[j :: -(-len(v) // size)] for v in same.values() for j in range(-(-len(v) // size))]
    return _pool_layout(groups, block, max(sum(c.page for c in g) for g in groups))


def weight_bytes(arch: Architecture) -> int:
    """All weights as the checkpoint stores them (quantized modules at their format's bytes, scales
    included; embeddings, norms and whatever the format leaves out in the model dtype)."""
    return math.ceil(arch.weight_groups.total)


def weight_bytes_per_gpu(
    arch: Architecture, tensor_parallel_size: int, *, layout: Layout | None = None, stage: Stage | None = None
) -> int:
    """Weights on one GPU: sharded linears, the vision tower and the vocab-parallel embedding and LM head
    split ``tp`` ways (a tower run with ``--mm-encoder-tp-mode data``, :func:`encoder_tp_mode`, whole; an
    embedding vLLM keeps whole on every rank, :attr:`Architecture.embedding_replicated`, whole);
    norms, routers and MLA down-projections whole; KV projections for
    ``max(1, kv_heads // tp)`` heads; routed experts split ``tp`` ways (padded where vLLM pads them,
    :meth:`Architecture.expert_padding`), or with expert parallelism whole experts over ``tp x dp`` GPUs,
    the busiest holding ``ceil(experts / (tp x dp))`` of them (vLLM's ``determine_expert_map``). With a
    pipeline ``stage``, only its layers, the embedding and vision tower on the first stage and the LM head on
    the last (a tied LM head is a copy of the embedding there; Inkling's embedding and LM head on every
    stage)."""
    _check_tp(tensor_parallel_size)
    tp = tensor_parallel_size
    g = (stage.arch if stage is not None else arch).weight_groups
    first = stage is None or stage.first
    last = stage is None or stage.last
    tower = g.vision if first else 0.0
    # the tower on every rank: run with --mm-encoder-tp-mode data, or built by transformers (Gemma 3n's);
    # an audio encoder's blocks where TP does not divide its heads (its class turns its TP off)
    tower_off = arch.tower_split_heads and arch.tower_split_heads % tp
    whole = (g.vision_whole + (g.vision_head_split if tower_off else 0.0)) if first else 0.0
    if encoder_tp_mode(arch, tp) == "data":
        whole = tower
    tables = g.embedding + g.ngram_embedding if first else 0.0  # the vocab-parallel lookups
    # Inkling's embedding is whole on every rank, and its model builds it and the LM head on every pipeline
    # stage (InklingModel and _build make them whatever the stage).
    every_stage = arch.embedding_replicated
    whole_table = g.embedding if every_stage else 0.0
    split = g.sharded + tables - (whole_table if first else 0.0) + tower - whole + g.per_layer_embedding
    if last or every_stage:
        split += g.lm_head if not (arch.tie_word_embeddings and not first) else g.embedding
    experts = g.routed_experts_total / tp * arch.expert_padding(tp)
    if layout is not None and layout.expert_parallel and arch.num_experts:
        ep = layout.expert_parallel_size
        experts = g.routed_experts_total * -(-arch.num_experts // ep) / arch.num_experts
    return math.ceil(split / tp + experts + g.replicated + whole + whole_table + g.kv_projection_per_rank(tp))


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

    Forward: ``mnbt * dtype_bytes * (2 * hidden + 3 * mlp_width / tp + layers * per_layer_input)``
    (residual, normed input, gate/up output and activation of the widest MLP; with Gemma 4's per-layer
    embeddings, the ``[tokens, layers, width]`` inputs every layer reads, alive through the whole forward
    pass and whole on every rank). Sampler: ``SAMPLER_FP32_LOGIT_COPIES * min(max_num_seqs, mnbt) * vocab
    * 4`` (every rank samples from full-vocabulary logits).
    """
    tp = tensor_parallel_size
    mlp_width = arch.widest_dense_mlp
    if arch.is_moe:
        routed = (
            arch.num_experts_per_token * arch.moe_intermediate_size + arch.shared_expert_intermediate_size
        )
        mlp_width = max(mlp_width, routed)
    per_layer_inputs = arch.num_layers * arch.per_layer_input_size
    forward = (
        max_num_batched_tokens
        * DTYPE_BYTES[arch.dtype]
        * (2 * arch.hidden_size + 3 * mlp_width / tp + per_layer_inputs)
    )
    rows = min(max_num_seqs, max_num_batched_tokens)
    sampler = SAMPLER_FP32_LOGIT_COPIES * rows * arch.vocab_size * 4
    return math.ceil(max(forward, sampler))


def other_reserve_bytes(gpus: int) -> int:
    """CUDA-graph estimate, non-torch overhead and (a replica of more than one GPU) NCCL buffers."""
    nccl = NCCL_RESERVE_BYTES if gpus > 1 else 0
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
    lora_bytes: int = 0
    """LoRA adapter buffers (``--max-loras`` at ``--max-lora-rank``), counted by vLLM as weights."""

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``memory_per_gpu_bytes`` object: the byte fields, named without ``_bytes``."""
        return {k.removesuffix("_bytes"): v for k, v in asdict(self).items() if k.endswith("_bytes")}


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """The flags that shape one vLLM engine's memory: its layout, ``--kv-cache-dtype``,
    ``--max-num-batched-tokens`` and ``--gpu-memory-utilization``."""

    layout: Layout = field(default_factory=Layout)
    """The replica's parallel layout."""
    kv_cache_dtype: str = "auto"
    """--kv-cache-dtype (``auto`` = the model's dtype)."""
    max_num_batched_tokens: int = 8192
    """--max-num-batched-tokens."""
    gpu_memory_utilization: float = 0.9
    """--gpu-memory-utilization, a fraction of total device memory."""
    lora: Lora | None = None
    """LoRA settings (``--enable-lora``); None: LoRA off."""


class KVMemory:
    """vLLM's memory accounting for one GPU of a replica, computed once per (layout, KV dtype, batched
    tokens, memory utilization): bytes, then blocks, then tokens, then sequences.

    ``budget - weights - reserves - activation(max_num_seqs)`` is cut into blocks of the
    :class:`KVCacheLayout`; one sequence needs :meth:`blocks_per_sequence` of them (full attention its
    length, sliding and chunked layers their bound, Mamba states their blocks per group). The activation
    peak grows with ``--max-num-seqs`` (the dummy sampler's rows), so the sequences that fit depend on it.

    Under pipeline parallelism every stage's GPU holds its layers' weights and KV pages (the first the
    input embedding, the last the LM head and the sampler) and vLLM gives every worker the fewest blocks
    any worker has room for: the binding stage answers. Under data parallelism each engine's GPUs are
    accounted alone (their own KV cache and batch); the MoE experts are spread over ``tp x dp`` GPUs.
    With LoRA on, each stage's GPU also holds its adapter buffers (:func:`capacity.lora.lora_bytes_per_gpu`),
    which vLLM counts as weights.
    """

    __slots__ = ("arch", "budget", "gpu", "layout", "mnbt", "other", "parallel", "stages")

    def __init__(self, arch: Architecture, gpu: GPU, config: EngineConfig) -> None:
        layout, kv_cache_dtype = config.layout, config.kv_cache_dtype
        max_num_batched_tokens = config.max_num_batched_tokens
        gpu_memory_utilization = config.gpu_memory_utilization
        tp = layout.tensor_parallel_size
        self.arch = arch
        self.gpu = gpu
        self.parallel = layout
        self.mnbt = max_num_batched_tokens
        self.budget = math.ceil(gpu.cuda_total_bytes * gpu_memory_utilization)
        self.other = other_reserve_bytes(layout.gpus)
        self.layout = kv_cache_layout(
            arch,
            tensor_parallel_size=tp,
            kv_cache_dtype=kv_cache_dtype,
            max_num_batched_tokens=max_num_batched_tokens,
            compute_capability=gpu.compute_capability,
        )
        stages = pipeline_stages(arch, layout.pipeline_parallel_size)
        lora = config.lora
        self.stages = tuple(
            _StageMemory(
                weights=weight_bytes_per_gpu(arch, tp, layout=layout, stage=stage),
                lora=0
                if lora is None
                else lora_bytes_per_gpu(arch, lora, tensor_parallel_size=tp, layout=layout, stage=stage),
                forward=activation_bytes(
                    stage.arch,
                    tensor_parallel_size=tp,
                    max_num_batched_tokens=max_num_batched_tokens,
                    max_num_seqs=0,
                ),
                sampler_per_row=SAMPLER_FP32_LOGIT_COPIES * arch.vocab_size * 4 if stage.last else 0.0,
                layout=self.layout
                if len(stages) == 1
                else kv_cache_layout(
                    stage.arch,
                    tensor_parallel_size=tp,
                    kv_cache_dtype=kv_cache_dtype,
                    max_num_batched_tokens=max_num_batched_tokens,
                    compute_capability=gpu.compute_capability,
                ),
            )
            for stage in stages
        )

    @property
    def weights(self) -> int:
        """Weights on the GPU that holds the most (the heaviest pipeline stage)."""
        return max(s.weights for s in self.stages)

    @property
    def lora(self) -> int:
        """LoRA adapter buffers on the GPU that holds the most (0 with LoRA off)."""
        return max(s.lora for s in self.stages)

    def _binding(self, max_num_seqs: int) -> _StageMemory:
        """The stage with room for the fewest blocks."""
        if len(self.stages) == 1:
            return self.stages[0]
        return min(self.stages, key=lambda s: s.layout.num_blocks(self._free(s, max_num_seqs)))

    def _free(self, stage: _StageMemory, max_num_seqs: int) -> int:
        return (
            self.budget - stage.weights - stage.lora - self.other - stage.activation(max_num_seqs, self.mnbt)
        )

    def activation(self, max_num_seqs: int) -> int:
        """Peak activation of the profile run with ``--max-num-seqs max_num_seqs`` (binding stage)."""
        return self._binding(max_num_seqs).activation(max_num_seqs, self.mnbt)

    def free_bytes(self, max_num_seqs: int) -> int:
        """What is left for the KV cache on the binding stage's GPU (negative when the weights and
        reserves do not fit on some stage)."""
        worst = min(self._free(s, max_num_seqs) for s in self.stages)
        return worst if worst <= 0 else self._free(self._binding(max_num_seqs), max_num_seqs)

    def blocks(self, max_num_seqs: int) -> int:
        """KV blocks (of every group's layers) every GPU holds with ``--max-num-seqs max_num_seqs``."""
        if len(self.stages) == 1:  # the common case, asked thousands of times per plan
            only = self.stages[0]
            return only.layout.num_blocks(self._free(only, max_num_seqs))
        return min(s.layout.num_blocks(self._free(s, max_num_seqs)) for s in self.stages)

    def blocks_per_sequence(self, tokens: int) -> int:
        """Blocks one sequence of ``tokens`` holds (:meth:`KVCacheLayout.blocks_per_sequence`)."""
        return self.layout.blocks_per_sequence(tokens)

    def sequences(self, tokens: int, max_num_seqs: int) -> int:
        """Sequences of ``tokens`` that run at once with ``--max-num-seqs max_num_seqs``
        (:meth:`KVCacheLayout.sequences`)."""
        return self.layout.sequences(self.blocks(max_num_seqs), tokens)

    def max_batch(self, tokens: int, cap: int, shared_prefix_tokens: int = 0) -> int:
        """Largest ``--max-num-seqs`` b <= cap whose b sequences of ``tokens`` run beside the activation
        peak that b itself sets (0 when not one fits): b - 1 holding their blocks and one admitted
        (:meth:`KVCacheLayout.sequences`); the first ``shared_prefix_tokens`` of every sequence, common to
        all, are held once (:meth:`KVCacheLayout.shared_blocks`)."""
        layout = self.layout
        lo, hi = 1, cap
        if hi < 1 or layout.sequences(self.blocks(1), tokens, shared_prefix_tokens) < 1:
            return 0
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if layout.sequences(self.blocks(mid), tokens, shared_prefix_tokens) >= mid:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def max_concurrency(self, max_model_len: int, max_num_seqs: int) -> float:
        """vLLM's logged "Maximum concurrency": sequences of ``max_model_len`` the cache holds."""
        return self.blocks(max_num_seqs) / self.blocks_per_sequence(max_model_len)

    def kv_cache_tokens(self, max_model_len: int, max_num_seqs: int) -> int:
        """vLLM's "GPU KV cache size" in tokens: ``int(max_concurrency x max_model_len)``."""
        return int(self.max_concurrency(max_model_len, max_num_seqs) * max_model_len)

    def breakdown(self, max_num_seqs: int) -> MemoryBreakdown:
        """Where the GPU's memory goes with ``--max-num-seqs max_num_seqs``."""
        blocks = self.blocks(max_num_seqs)
        stage = self._binding(max_num_seqs)
        return MemoryBreakdown(
            total_bytes=self.gpu.memory_bytes,
            budget_bytes=self.budget,
            weights_bytes=stage.weights,
            activation_bytes=stage.activation(max_num_seqs, self.mnbt),
            other_bytes=self.other,
            kv_cache_bytes=blocks * stage.layout.bytes_per_block,
            num_blocks=blocks,
            lora_bytes=stage.lora,
        )


@dataclass(frozen=True, slots=True)
class _StageMemory:
    """One pipeline stage's GPU: its weights, LoRA buffers, forward activation, sampler rows and KV pages."""

    weights: int
    lora: int
    forward: int
    sampler_per_row: float
    layout: KVCacheLayout

    def activation(self, max_num_seqs: int, mnbt: int) -> int:
        return max(self.forward, math.ceil(self.sampler_per_row * min(max_num_seqs, mnbt)))


def blocks_per_sequence(arch: Architecture, tokens: int, *, max_num_batched_tokens: int) -> int:
    """KV blocks one sequence of ``tokens`` holds in vLLM at TP 1
    (:meth:`KVCacheLayout.blocks_per_sequence`)."""
    return kv_cache_layout(arch, max_num_batched_tokens=max_num_batched_tokens).blocks_per_sequence(tokens)


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
    config = EngineConfig(
        layout=Layout(tensor_parallel_size=tensor_parallel_size),
        kv_cache_dtype=kv_cache_dtype,
        max_num_batched_tokens=max_num_batched_tokens or default_max_num_batched_tokens(gpu),
        gpu_memory_utilization=gpu_memory_utilization,
    )
    return KVMemory(arch, gpu, config).breakdown(max_num_seqs)


def _check_tp(tp: int) -> None:
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise CapacityError(f"tensor parallel size {tp!r} is not valid; expected an integer >= 1")
