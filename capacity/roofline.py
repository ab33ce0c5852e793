"""The roofline of one engine step on one TP group (decodes plus an optional prefill chunk).

A decode step reads, on every GPU of the group, its share of the weights (all but the input-embedding table,
which is a lookup; for MoE only the experts the batch touches) and the KV cache of every sequence in the
batch, and does ``2 x active parameters x batch`` FLOPs plus attention. The ideal floor is
``max(bytes / HBM bandwidth, FLOPs / peak)``. The predicted time divides by efficiency factors and adds the
TP all-reduces and a fixed per-step overhead (:class:`Efficiency`, every factor documented and overridable).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from capacity.architecture import ATTENTION_MIXERS, DTYPE_BYTES, Architecture
from capacity.errors import CapacityError
from capacity.gpus import GPU
from capacity.layout import Layout, layout_error
from capacity.memory import (
    FP8_DS_MLA_ENTRY_BYTES,
    V41Records,
    attention_bytes_per_token,
    indexer_bytes_per_token,
    indexer_key_bytes,
    qsa_key_bytes_per_token,
    resolve_kv_cache_dtype,
    short_conv_bytes_per_sequence,
    state_bytes_per_sequence,
    v41_records,
)

__all__ = [
    "ALLREDUCE_LATENCY_SECONDS",
    "ALLTOALL_LATENCY_SECONDS",
    "ALLTOALL_NETWORK_LATENCY_SECONDS",
    "COMPUTE_EFFICIENCY",
    "DEFAULT_EFFICIENCY",
    "HBM_EFFICIENCY",
    "INTERCONNECT_EFFICIENCY",
    "P2P_LATENCY_SECONDS",
    "PCIE_ALLREDUCE_LATENCY_SECONDS",
    "SEQUENCE_LAYER_OVERHEAD_SECONDS",
    "STEP_OVERHEAD_SECONDS",
    "Bottleneck",
    "DecodeStep",
    "Efficiency",
    "StepModel",
    "decode_step",
]

Bottleneck = Literal["weights", "kv_cache", "compute"]

# The five constants below are fitted, together, to the 18 published TPOT measurements in
# tests/data/published_tpot.json (vLLM's CI latency table on H200, Argonne's LLM-Inference-Bench vLLM runs on
# H100 at TP 1-4 and batch 1-64, NVIDIA NIM on 2 x H100 fp8 at concurrency 1-50): every row is predicted
# within 15% (docs/capacity.md has the table). A single efficiency factor cannot fit them: small models at
# batch 1 and TP > 1 are dominated by fixed costs (the step, the all-reduces), large batches of short
# contexts by a per-sequence cost in the attention kernels.

#: Fraction of peak HBM bandwidth a decode step's streaming reads achieve.
HBM_EFFICIENCY = 0.875
#: Fraction of dense tensor-core peak reached by decode/prefill GEMMs.
COMPUTE_EFFICIENCY = 0.70
#: Fraction of the per-direction link bandwidth a ring all-reduce achieves.
INTERCONNECT_EFFICIENCY = 0.70
#: Fixed cost per all-reduce (launch and synchronisation of vLLM's custom all-reduce / NCCL), seconds.
ALLREDUCE_LATENCY_SECONDS = 15e-6
#: Fixed cost per all-reduce through NCCL over PCIe, where vLLM's custom all-reduce is off (more than two
#: PCIe-only GPUs): a ring through the host's PCIe switches. Not fitted (no published PCIe TPOT table was
#: found); NCCL's small-message all-reduce latency over PCIe is tens of microseconds.
PCIE_ALLREDUCE_LATENCY_SECONDS = 50e-6
#: Fixed cost per engine step outside the kernels (scheduling, sampling, detokenisation handoff), seconds.
STEP_OVERHEAD_SECONDS = 3.0e-3
#: Fixed cost of one expert-parallel dispatch or combine (all-to-all) inside a node, and across nodes over
#: the node network. Not fitted (no published per-layout TPOT table was found): DeepEP's README measures its
#: low-latency kernels at about 77 us (dispatch) and 114 us (combine) for EP 8 over 400 Gb/s InfiniBand on
#: H800; inside a node two all-reduce latencies are assumed.
ALLTOALL_LATENCY_SECONDS = 2 * ALLREDUCE_LATENCY_SECONDS
ALLTOALL_NETWORK_LATENCY_SECONDS = 100e-6
#: Fixed cost of one pipeline-stage hand-off (a send of the hidden states to the next stage).
P2P_LATENCY_SECONDS = 20e-6
#: Fixed cost per sequence per layer in a decode step (the paged-attention kernel's per-sequence work:
#: block-table walk, softmax reduction and launch tail, which short contexts do not amortise), seconds.
SEQUENCE_LAYER_OVERHEAD_SECONDS = 1.5e-6


@dataclass(frozen=True, kw_only=True)
class Efficiency:
    """Factors that turn the ideal roofline into a predicted time; override any of them."""

    hbm: float = HBM_EFFICIENCY
    """Achieved fraction of peak HBM bandwidth."""
    compute: float = COMPUTE_EFFICIENCY
    """Achieved fraction of dense peak FLOPs."""
    interconnect: float = INTERCONNECT_EFFICIENCY
    """Achieved fraction of interconnect bandwidth in all-reduce."""
    allreduce_latency_seconds: float = ALLREDUCE_LATENCY_SECONDS
    """Fixed cost of one all-reduce."""
    step_overhead_seconds: float = STEP_OVERHEAD_SECONDS
    """Fixed cost of one engine step."""
    sequence_layer_overhead_seconds: float = SEQUENCE_LAYER_OVERHEAD_SECONDS
    """Fixed cost per decoded sequence per layer."""

    def __post_init__(self) -> None:
        for name in ("hbm", "compute", "interconnect"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise CapacityError(
                    f"efficiency {name}={value!r} is out of range; expected a fraction in (0, 1]"
                )
        for name in ("allreduce_latency_seconds", "step_overhead_seconds", "sequence_layer_overhead_seconds"):
            if getattr(self, name) < 0:
                raise CapacityError(f"efficiency {name} must be >= 0 seconds")


DEFAULT_EFFICIENCY = Efficiency()


@dataclass(frozen=True, kw_only=True)
class DecodeStep:
    """Where one decode step's time goes on each GPU of a TP group."""

    batch: int
    """Sequences decoded in the step."""
    context_tokens: int
    """Context length of each sequence."""
    weight_bytes_read: int
    """Weight bytes each GPU streams (embedding table excluded; MoE: experts touched)."""
    kv_cache_bytes_read: int
    """KV bytes each GPU streams for the batch's contexts."""
    flops: float
    """FLOPs each GPU performs."""
    weight_read_seconds: float
    """Ideal time to stream the weights at peak HBM bandwidth."""
    kv_read_seconds: float
    """Ideal time to stream the KV cache at peak HBM bandwidth."""
    compute_seconds: float
    """Ideal time for the FLOPs at dense peak."""
    communication_seconds: float
    """Predicted TP all-reduce time (0 at TP 1)."""
    roofline_floor_seconds: float
    """``max(weight + KV read, compute)``: no implementation can beat it."""
    predicted_seconds: float
    """Predicted TPOT: efficiency-scaled roofline plus communication and per-step overhead."""
    bottleneck: Bottleneck
    """The largest of weight reads, KV reads and compute."""
    crossover_batch: int | None
    """Smallest batch at which KV reads match or exceed weight reads at this context (None: never)."""

    def to_dict(self) -> dict[str, Any]:
        """The ``kvright tpot --json`` object: every field but the raw FLOP count."""
        return {k: v for k, v in asdict(self).items() if k != "flops"}


class StepModel:
    """Per-(model, GPU, TP, KV dtype) constants of the decode and prefill roofline, precomputed once so a
    planner can evaluate thousands of batch sizes cheaply."""

    __slots__ = (
        "a2a_bandwidth",
        "a2a_bytes_per_token",
        "a2a_latency",
        "allreduce_latency",
        "allreduces",
        "attention_layers",
        "attn_flops_per_ctx_token",
        "bf_flops",
        "chunk",
        "chunked_kv_per_token",
        "comm_bytes_per_token",
        "comm_fixed",
        "comm_per_token",
        "dense_attention_layers",
        "dense_flops_per_token",
        "dense_weight_bytes",
        "dp",
        "efficiency",
        "expert_flops_per_token",
        "experts",
        "full_kv_per_token",
        "hbm",
        "hidden_bytes",
        "index_flops_per_ctx_token",
        "interconnect",
        "layers",
        "local_expert_bytes",
        "moe_layers",
        "p2p_bandwidth",
        "pp",
        "sliding_kv_per_token",
        "sparse_entry_bytes",
        "sparse_kv_per_token",
        "sparse_ratios",
        "state_bytes",
        "top_k",
        "topk",
        "tp",
        "window",
    )

    def __init__(
        self,
        arch: Architecture,
        gpu: GPU,
        *,
        layout: Layout,
        kv_cache_dtype: str,
        efficiency: Efficiency = DEFAULT_EFFICIENCY,
        network_bytes_per_second: float | None = None,
    ) -> None:
        """``network_bytes_per_second`` overrides the GPU's node-to-node bandwidth (a replica that spans
        nodes sends pipeline hand-offs and expert all-to-alls over it)."""
        error = layout_error(arch, layout)
        if error is not None:
            raise CapacityError(error)
        tp = layout.tensor_parallel_size
        resolve_kv_cache_dtype(
            arch, kv_cache_dtype, compute_capability=gpu.compute_capability, tensor_parallel_size=tp
        )
        g = arch.parameter_groups
        w = arch.weight_groups
        # The LM head is streamed every step; the input embedding is a row lookup and the vision tower does
        # not run in a decode step, so both are left out.
        # A loop model (IQuest-Coder Loop) runs its layers loop_count times a step, reading them each time.
        passes = arch.loop_count
        # Zamba2's shared blocks are read again by every application past the one that holds them (reread).
        self.dense_weight_bytes = (
            passes * (w.sharded / tp + w.replicated + w.kv_projection_per_rank(tp) + w.reread / tp)
            + w.lm_head / tp
        )
        if arch.tie_word_embeddings:
            self.dense_weight_bytes += w.embedding / tp  # tied: the table is the LM head
        # Routed experts on one GPU: split by width over TP, or whole over the EP group (the busiest GPU).
        local = g.num_experts / tp * arch.expert_padding(tp)
        if layout.expert_parallel:
            local = -(-g.num_experts // layout.expert_parallel_size)
        self.local_expert_bytes = local * w.routed_expert
        self.experts = g.num_experts
        self.top_k = g.experts_per_token
        self.moe_layers = g.num_moe_layers
        dense_params = g.sharded / tp + g.replicated + g.kv_projection_per_rank(tp) + g.reread / tp
        lm_head_params = g.embedding if arch.tie_word_embeddings else g.lm_head
        self.dense_flops_per_token = 2.0 * (passes * dense_params + lm_head_params / tp)
        self.expert_flops_per_token = 2.0 * g.routed_expert * g.experts_per_token * g.num_moe_layers / tp
        per_kind: dict[str, int] = {"full": 0, "sliding": 0, "chunked": 0}
        # (A layer over another's cache, Gemma 4's KV-shared layers, reads that cache again: it counts.)
        widths: dict[str, float] = {"full": 0.0, "sliding": 0.0, "chunked": 0.0}
        for (mixer, kv_heads, head_dim, v_head_dim, _), n in arch.layer_census.items():
            if mixer in ATTENTION_MIXERS:
                kind = "full" if mixer == "mla" else mixer
                per_kind[kind] += n * attention_bytes_per_token(
                    arch, kv_heads, kv_cache_dtype, tp, head_dim, v_head_dim
                )
        # QK^T over the key width, AV over the value width, for each of the layer's query heads.
        for layer in arch.layers:
            if layer.mixer in ATTENTION_MIXERS:
                width = arch.head_dim_of(layer) + arch.v_head_dim_of(layer)
                wide = width / (2 * arch.head_dim) if layer.mixer != "mla" and arch.head_dim else 1.0
                heads = arch.heads_of(layer) / arch.num_attention_heads
                widths["full" if layer.mixer == "mla" else layer.mixer] += wide * heads
                widths["sliding"] += wide * heads * (passes - 1)  # a loop model's later passes
        self.full_kv_per_token: float = per_kind["full"]
        self.sliding_kv_per_token: float = per_kind["sliding"]
        self.chunked_kv_per_token = per_kind["chunked"]
        self.window = arch.sliding_window or 0
        self.chunk = arch.attention_chunk_size or 0
        # Sparse attention: per-token latents read for the top-k cached tokens only (``sparse_kv_per_token``,
        # up to ``topk`` tokens), the indexer's keys for every one (in ``full_kv_per_token``).
        self.topk = 0
        self.sparse_kv_per_token: float = 0
        self.index_flops_per_ctx_token = 0.0
        self.dense_attention_layers = 0.0
        # DeepSeek-V4.1's layers attend to the top-k of their source's compressed entries (one a ratio
        # tokens): (ratio, layers) pairs, each layer reading min(T / ratio, topk) entries of this many bytes.
        self.sparse_ratios: tuple[tuple[int, int], ...] = ()
        self.sparse_entry_bytes = 0
        if arch.shared_compressed_caches:
            records = v41_records(arch, kv_cache_dtype, tp, gpu.compute_capability)
            self._shared_compressed_attention(arch, widths, records)
        elif arch.compressed_attention:
            self._compressed_attention(arch, widths)
        elif arch.attention == "MLA" and arch.index_head_dim and arch.index_topk:
            self._sparse_attention(arch, widths)
        elif arch.num_indexer_layers:
            self._layer_sparse_attention(arch, kv_cache_dtype, tp, widths)
        elif arch.qsa_compress_ratio:
            self._qsa_attention(arch)
        # Mamba / linear-attention states are read and written back whole every step; so are the short
        # convolutions' windows of inputs (Inkling's).
        states = state_bytes_per_sequence(arch, tp) * arch.num_state_layers
        self.state_bytes = 2 * (states + short_conv_bytes_per_sequence(arch, tp))
        self.layers = arch.num_layers * passes
        # Layers of each kind, weighted by their head width over the model's (Gemma 4's global layers attend
        # with heads twice as wide): attention FLOPs per context token are per_head x this.
        self.attention_layers = (widths["full"], widths["sliding"], widths["chunked"])
        heads_per_gpu = arch.num_attention_heads / tp
        if arch.compressed_attention:
            per_head = 4 * arch.head_dim  # scores and values over the one shared latent
        elif arch.attention == "MLA" and arch.kv_lora_rank is not None:
            # Absorbed MLA: scores over the latent plus rope key, values over the latent.
            per_head = 2 * (arch.kv_lora_rank + arch.qk_rope_head_dim) + 2 * arch.kv_lora_rank
        else:
            per_head = 4 * arch.head_dim  # QK^T and AV
        self.attn_flops_per_ctx_token = per_head * heads_per_gpu
        self.tp = tp
        # One all-reduce of the hidden state after each row-parallel output: a layer's mixer (attention,
        # Mamba) and its MLP, two for a standard layer; one for Nemotron-H's single-purpose layers, three for
        # Falcon-H1's (attention and Mamba side by side, then the MLP).
        reduces = sum((layer.mixer != "none") + (layer.ffn != "none") for layer in arch.layers)
        self.allreduces = passes * reduces
        self.comm_bytes_per_token = self.allreduces * arch.hidden_size * DTYPE_BYTES[arch.dtype]
        self.hbm = gpu.hbm_bytes_per_second
        fp8_weights = arch.weights.compute_format == "fp8" and gpu.supports_fp8
        self.bf_flops = gpu.fp8_flops_per_second if fp8_weights else gpu.bf16_flops_per_second
        self.interconnect = gpu.interconnect_bytes_per_second
        # vLLM's custom all-reduce runs over NVLink/xGMI and on two PCIe GPUs; more PCIe-only GPUs use NCCL.
        nccl_over_pcie = gpu.interconnect == "pcie" and tp > 2
        self.allreduce_latency = max(
            efficiency.allreduce_latency_seconds, PCIE_ALLREDUCE_LATENCY_SECONDS if nccl_over_pcie else 0.0
        )
        self.efficiency = efficiency
        self.pp = layout.pipeline_parallel_size
        self.dp = layout.data_parallel_size
        network = network_bytes_per_second or gpu.network_bytes_per_second
        self.hidden_bytes = arch.hidden_size * DTYPE_BYTES[arch.dtype]
        # Pipeline hand-offs cross the node network when the stages span nodes.
        self.p2p_bandwidth = network if layout.spans_nodes else self.interconnect
        # Expert parallelism: every token's hidden state goes to its top-k experts and back (dispatch and
        # combine), (ep - 1) / ep of it to other GPUs, over the node network when the EP group spans nodes.
        # A latent MoE projects it to the latent width first (vLLM's routed_input_transform).
        ep = layout.expert_parallel_size if layout.expert_parallel else 1
        routed_bytes = (arch.moe_latent_size or arch.hidden_size) * DTYPE_BYTES[arch.dtype]
        self.a2a_bytes_per_token = (
            2 * routed_bytes * g.experts_per_token * (ep - 1) / ep / tp if ep > 1 else 0.0
        )
        spans = layout.expert_parallel_size > layout.gpus_per_node
        self.a2a_bandwidth = network if spans else self.interconnect
        self.a2a_latency = (
            0.0
            if ep == 1
            else ALLTOALL_NETWORK_LATENCY_SECONDS
            if spans
            else efficiency.allreduce_latency_seconds * 2
        )
        self.comm_fixed, self.comm_per_token = self._communication()

    def _sparse_attention(self, arch: Architecture, widths: dict[str, float]) -> None:
        """DeepSeek-V3.2's sparse attention (DSA): each indexer scores every cached token with its own fp8
        key, then attention reads the latent of the top-k tokens only (vLLM's sparse MLA decode,
        ``index_topk``); a layer under IndexCache (:attr:`Layer.reuses_indices`) reads the top-k the
        indexer before it picked, so only :attr:`Architecture.num_mla_indexers` layers score the context.
        HY V4's dense layers (:attr:`Layer.dense_attention`) read every latent, as dense MLA does."""
        indexers = arch.num_mla_indexers
        mla = [layer for layer in arch.layers if layer.mixer == "mla"]
        dense = sum(layer.dense_attention for layer in mla)
        latents = self.full_kv_per_token  # one latent per MLA layer, all as wide
        self.topk = arch.index_topk
        self.sparse_kv_per_token = latents * (len(mla) - dense) / len(mla)
        self.full_kv_per_token = latents * dense / len(mla) + indexers * float(indexer_bytes_per_token(arch))
        self.dense_attention_layers = float(dense)
        widths["full"] -= dense
        # q . k for every indexer head and cached key (GLM-5.3's: one a pool); heads not split over TP.
        pooled = max(1, arch.index_kpool)
        self.index_flops_per_ctx_token = 2.0 * arch.index_n_heads * arch.index_head_dim * indexers / pooled

    def _layer_sparse_attention(
        self, arch: Architecture, kv_cache_dtype: str, tp: int, widths: dict[str, float]
    ) -> None:
        """MiniMax-M3's sparse layers (:attr:`Layer.indexer`): the indexer scores every cached token with its
        bfloat16 key (one query head per KV head on this rank), then the layer reads the K and V of the
        ``index_topk`` tokens in the blocks it picks; the other layers attend whole."""
        sparse = [layer for layer in arch.layers if layer.indexer]
        kv = sum(
            attention_bytes_per_token(arch, arch.kv_heads_of(layer), kv_cache_dtype, tp) for layer in sparse
        )
        index_bytes = len(sparse) * indexer_key_bytes(arch)
        self.topk = arch.index_topk
        self.sparse_kv_per_token = kv
        self.full_kv_per_token += index_bytes - kv
        self.dense_attention_layers = widths["full"] - len(sparse)
        widths["full"] = len(sparse)
        heads = max(1, arch.index_n_heads // tp)
        self.index_flops_per_ctx_token = 2.0 * heads * arch.index_head_dim * len(sparse)

    def _qsa_attention(self, arch: Architecture) -> None:
        """Qwen3.8's QSA on its full layers: the indexer scores one bfloat16 key per ``ratio`` cached tokens
        (its heads whole on every rank), then attention reads the K and V of the ``index_topk`` (its budget)
        tokens it picks."""
        full = sum(layer.mixer == "full" for layer in arch.layers)
        self.topk = arch.index_topk
        self.sparse_kv_per_token = self.full_kv_per_token
        self.full_kv_per_token = full * float(qsa_key_bytes_per_token(arch))
        scored = full / arch.qsa_compress_ratio  # keys a context token adds over the layers
        self.index_flops_per_ctx_token = 2.0 * arch.index_n_heads * arch.index_head_dim * scored

    def _compressed_attention(self, arch: Architecture, widths: dict[str, float]) -> None:
        """DeepSeek-V4's reads per sequence: every layer its window of latents; a ratio-4 layer the indexer's
        key of every compressed entry (``T / 4`` of them) and then the latents of the ``index_topk`` it
        picks; a ratio-128 layer every compressed latent (``T / 128``). Entries are the fp8_ds_mla 584
        bytes (the indexer's, fp8 with fp32 scales), whole on every rank. The compressor states each step
        writes one token into (and reads back once per ``ratio`` tokens) are left out: a few KiB."""
        latent = FP8_DS_MLA_ENTRY_BYTES
        index = indexer_key_bytes(arch)
        ratios = [layer.compress_ratio for layer in arch.layers]
        sparse = ratios.count(4) / 4  # layers' entries per context token
        dense = ratios.count(128) / 128
        self.sliding_kv_per_token = len(ratios) * latent
        self.full_kv_per_token = sparse * index + dense * latent
        self.sparse_kv_per_token = sparse * latent
        self.topk = 4 * arch.index_topk  # min(T / 4, top-k) entries = min(T, 4 x top-k) / 4
        self.index_flops_per_ctx_token = 2.0 * arch.index_n_heads * arch.index_head_dim * sparse
        widths.update(full=sparse, sliding=float(len(ratios)))
        self.dense_attention_layers = dense

    def _shared_compressed_attention(
        self, arch: Architecture, widths: dict[str, float], records: V41Records
    ) -> None:
        """DeepSeek-V4.1's reads per sequence: every layer its window of latents; an index source the
        indexer keys of its kv source's whole context (``T / ratio`` of them; the candidate prefilter of the
        layers above ``candidate_source_layer_id`` is left out, which overstates them); every compressed
        layer the latents of the ``index_topk`` entries its indexer picks. Records are the GPU's
        (:func:`capacity.memory.v41_records`: window and compressed 584 bytes on Hopper; on 10.x 528 and,
        under ``nvfp4_ds_mla``, 288)."""
        layers = arch.layers
        self.sliding_kv_per_token = len(layers) * records.window
        source = 0
        ratios: dict[int, int] = {}
        scored = 0.0
        for i, layer in enumerate(layers):
            if layer.kv_source:
                source = i
            if layer.index_source:
                scored += 1 / layers[source].compress_ratio
            if layer.compress_ratio:
                ratio = layers[source].compress_ratio
                ratios[ratio] = ratios.get(ratio, 0) + 1
        self.full_kv_per_token = scored * indexer_key_bytes(arch)
        self.sparse_ratios = tuple(sorted(ratios.items()))
        self.sparse_entry_bytes = records.compressed
        self.topk = arch.index_topk
        self.index_flops_per_ctx_token = 2.0 * arch.index_n_heads * arch.index_head_dim * scored
        widths.update(full=0.0, sliding=float(len(layers)))

    def _sparse_entries(self, context_tokens: int) -> float:
        """DeepSeek-V4.1: compressed entries the layers attend to, summed over layers."""
        return sum(n * min(context_tokens / r, self.topk) for r, n in self.sparse_ratios)

    def weight_bytes(self, batch: float) -> float:
        """Weight bytes streamed per GPU in a step over ``batch`` tokens: dense part plus the expected number
        of distinct experts the tokens route to, ``E * (1 - (1 - k/E) ** batch)`` per MoE layer (uniform
        routing)."""
        if not self.moe_layers:
            return self.dense_weight_bytes
        # Data-parallel engines step together and route all their tokens into the shared experts.
        touched = 1.0 - float((1.0 - self.top_k / self.experts) ** (batch * self.dp))
        return self.dense_weight_bytes + touched * self.local_expert_bytes * self.moe_layers

    def kv_bytes(self, batch: float, context_tokens: int) -> float:
        """KV bytes per GPU read for ``batch`` sequences of ``context_tokens``: full-attention layers the
        whole context, sliding layers their window, chunked layers their chunk, Mamba / linear-attention
        layers their state (read and written)."""
        window = min(context_tokens, self.window) if self.window else 0
        chunk = min(context_tokens, self.chunk) if self.chunk else 0
        return batch * (
            self.full_kv_per_token * context_tokens
            + self.sparse_kv_per_token * min(context_tokens, self.topk)
            + self.sparse_entry_bytes * self._sparse_entries(context_tokens)
            + self.sliding_kv_per_token * window
            + self.chunked_kv_per_token * chunk
            + self.state_bytes
        )

    def attended_tokens(self, context_tokens: int) -> float:
        """Context tokens the attention layers attend to, summed over layers."""
        full, sliding, chunked = self.attention_layers
        window = min(context_tokens, self.window) if self.window else context_tokens
        chunk = min(context_tokens, self.chunk) if self.chunk else context_tokens
        attended = min(context_tokens, self.topk) if self.topk else context_tokens
        dense = self.dense_attention_layers * context_tokens
        sparse = self._sparse_entries(context_tokens)
        return full * attended + dense + sparse + sliding * window + chunked * chunk

    def flops(self, batch: float, context_tokens: int) -> float:
        """FLOPs per GPU: ``2 x active parameters x batch`` plus attention over the context."""
        return batch * (
            self.dense_flops_per_token
            + self.expert_flops_per_token
            + self.attn_flops_per_ctx_token * self.attended_tokens(context_tokens)
            + self.index_flops_per_ctx_token * context_tokens
        )

    def communication_seconds(self, tokens: float) -> float:
        """Per step (a pipeline's cycle) on its busiest GPU, for ``tokens`` tokens in the step: TP ring
        all-reduces (``2 (tp-1)/tp x bytes / link`` plus a fixed latency, two per layer), expert-parallel
        dispatch and combine per MoE layer, and the pipeline's hand-offs (every micro-batch once per
        stage). Linear in the tokens: its two coefficients are computed once (:meth:`_communication`)."""
        return self.comm_fixed + self.comm_per_token * tokens

    def _communication(self) -> tuple[float, float]:
        """(fixed seconds, seconds per token) of :meth:`communication_seconds`."""
        eff = self.efficiency
        fixed = per_token = 0.0
        if self.tp > 1:
            per_token += (
                2
                * (self.tp - 1)
                / self.tp
                * self.comm_bytes_per_token
                / self.pp
                / (self.interconnect * eff.interconnect)
            )
            fixed += self.allreduces * self.allreduce_latency
        if self.a2a_bytes_per_token:
            per_token += (
                self.a2a_bytes_per_token * self.moe_layers / self.pp / (self.a2a_bandwidth * eff.interconnect)
            )
            fixed += 2 * self.moe_layers * self.a2a_latency
        if self.pp > 1:
            per_token += self.hidden_bytes / (self.p2p_bandwidth * eff.interconnect)
            fixed += self.pp * P2P_LATENCY_SECONDS
        return fixed, per_token

    def step_function(
        self, batch: int, context_tokens: int, prompt_tokens: int = 0
    ) -> Callable[[float], float]:
        """The predicted step time as a function of the prompt tokens mixed into it, for one batch and
        context (the terms that do not depend on the prefill are computed once: the serving model
        evaluates many chunk sizes per batch). :meth:`predicted_seconds` is this function at one value.

        ``max(bytes / (HBM x hbm), FLOPs / (peak x compute)) + all-reduces + step overhead + batch x
        layers x per-sequence overhead``. Prefill tokens (of prompts ``prompt_tokens`` long, as vLLM's
        chunked prefill mixes them into decode steps) add their GEMM and causal-attention FLOPs and
        all-reduce volume; the weights are streamed once for both.
        """
        eff = self.efficiency
        # A pipeline of pp stages runs pp micro-batches of batch / pp sequences; in its steady state each
        # stage's GPU streams its weights once per micro-batch, so a cycle (one token for every sequence)
        # takes what one TP group would take for a micro-batch: the whole model's weights per TP rank, the
        # micro-batch's KV cache and FLOPs (PP adds capacity, not speed), plus hand-offs and pp steps.
        m = batch / self.pp
        memory = (self.weight_bytes(m) + self.kv_bytes(m, context_tokens)) / (self.hbm * eff.hbm)
        decode_flops = self.flops(m, context_tokens)
        per_prefill_token = (
            self.dense_flops_per_token
            + self.expert_flops_per_token
            + self.attn_flops_per_ctx_token * self.attended_tokens(max(1, prompt_tokens // 2))
            + self.index_flops_per_ctx_token * max(1, prompt_tokens // 2)
        )
        peak = self.bf_flops * eff.compute
        fixed = self.pp * eff.step_overhead_seconds + m * self.layers * eff.sequence_layer_overhead_seconds

        def seconds(prefill_tokens: float) -> float:
            compute = (decode_flops + prefill_tokens / self.pp * per_prefill_token) / peak
            return (
                max(memory, compute) + self.communication_seconds(batch + math.ceil(prefill_tokens)) + fixed
            )

        return seconds

    def predicted_seconds(
        self, batch: int, context_tokens: int, prefill_tokens: float = 0.0, prompt_tokens: int = 0
    ) -> float:
        """Predicted time of one step (:meth:`step_function` at ``prefill_tokens``)."""
        return self.step_function(batch, context_tokens, prompt_tokens)(prefill_tokens)

    def crossover_batch(self, context_tokens: int) -> int | None:
        """Smallest batch whose KV reads reach the weight reads (binary search; KV is linear, weights
        concave)."""
        if context_tokens <= 0 or self.kv_bytes(1, context_tokens) <= 0:
            return None
        hi = 1
        while self.kv_bytes(hi, context_tokens) < self.weight_bytes(hi):
            hi *= 2
            if hi > 1 << 40:
                return None
        lo = hi // 2 + 1 if hi > 1 else 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.kv_bytes(mid, context_tokens) >= self.weight_bytes(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def step(self, batch: int, context_tokens: int) -> DecodeStep:
        """The full breakdown of one decode step (a pipeline's cycle: per micro-batch of batch / pp)."""
        m = batch / self.pp
        w = self.weight_bytes(m)
        kv = self.kv_bytes(m, context_tokens)
        f = self.flops(m, context_tokens)
        w_s = w / self.hbm
        kv_s = kv / self.hbm
        c_s = f / self.bf_flops
        comm = self.communication_seconds(batch)
        if c_s > w_s + kv_s:
            bottleneck: Bottleneck = "compute"
        else:
            bottleneck = "weights" if w_s >= kv_s else "kv_cache"
        return DecodeStep(
            batch=batch,
            context_tokens=context_tokens,
            weight_bytes_read=math.ceil(w),
            kv_cache_bytes_read=math.ceil(kv),
            flops=f,
            weight_read_seconds=w_s,
            kv_read_seconds=kv_s,
            compute_seconds=c_s,
            communication_seconds=comm,
            roofline_floor_seconds=max(w_s + kv_s, c_s),
            predicted_seconds=self.predicted_seconds(batch, context_tokens),
            bottleneck=bottleneck,
            crossover_batch=self.crossover_batch(context_tokens),
        )


def _positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CapacityError(f"{name} {value!r} is not valid; expected an integer >= 1")


def decode_step(
    arch: Architecture,
    gpu: GPU,
    *,
    tensor_parallel_size: int,
    batch: int,
    context_tokens: int,
    kv_cache_dtype: str = "auto",
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> DecodeStep:
    """Roofline of one decode step of ``batch`` sequences, each ``context_tokens`` long, on a TP group."""
    _positive("tensor parallel size", tensor_parallel_size)
    _positive("batch", batch)
    _positive("context length", context_tokens)
    model = StepModel(
        arch,
        gpu,
        layout=Layout(tensor_parallel_size=tensor_parallel_size),
        kv_cache_dtype=kv_cache_dtype,
        efficiency=efficiency,
    )
    return model.step(batch, context_tokens)
