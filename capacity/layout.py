"""How one replica of a model is laid out over GPUs: tensor x pipeline x data parallelism, with expert
parallelism on or off, on nodes of a given size, and the rules vLLM 0.32 applies to each layout.

A replica is one vLLM server (one API endpoint). Its ``tensor_parallel_size x pipeline_parallel_size x
data_parallel_size`` GPUs may span several nodes; kvright places whole nodes per replica once a replica
is larger than a node (a LeaderWorkerSet group), and never splits a TP group across nodes (its two
all-reduces per layer would cross the node network).

- **TP** splits every layer's heads, MLP width and vocabulary (the rules of :mod:`capacity.parallel`).
- **PP** splits the layers into stages (vLLM's ``get_pp_indices``: even shares, the remainder on the
  stages before the last); each stage holds its layers' weights and KV cache; the first holds the input
  embedding, the last the LM head.
- **DP** (with **EP**, the layout DeepSeek/Kimi-class MoE models are served with) runs ``dp`` attention
  engines, each with its own KV cache and ``--max-num-seqs``, so an MLA latent is not copied onto every
  GPU as TP copies it; the MoE layers spread their experts over all ``tp x dp`` GPUs (vLLM's
  ``determine_expert_map``: ``experts // ep`` each, the remainder one more on the first ranks). kvright
  plans DP only with EP and only for MoE models: a dense model's data parallelism is replicas.
- **EP** without DP places whole experts on the TP ranks instead of splitting every expert's width (what
  lets FP8 block-quantized experts load at TP 8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from capacity.architecture import NO_PIPELINE_HANDOFF, NO_PIPELINE_PARALLEL, Architecture
from capacity.errors import CapacityError
from capacity.parallel import tensor_parallel_error

__all__ = ["Layout", "Stage", "layout_error", "pipeline_stages"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One replica's parallel layout."""

    tensor_parallel_size: int = 1
    """--tensor-parallel-size: GPUs that split every layer."""
    pipeline_parallel_size: int = 1
    """--pipeline-parallel-size: stages that split the layers."""
    data_parallel_size: int = 1
    """--data-parallel-size: attention engines, each with its own KV cache and batch."""
    expert_parallel: bool = False
    """--enable-expert-parallel: whole experts per GPU over the ``tp x dp`` GPUs."""
    gpus_per_node: int = 8
    """GPUs of the node product; a replica larger than a node takes whole nodes."""

    def __post_init__(self) -> None:
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "gpus_per_node"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CapacityError(
                    f"{name.replace('_', ' ')} {value!r} is not valid; expected an integer >= 1"
                )

    @property
    def gpus(self) -> int:
        """GPUs of one replica."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    @property
    def nodes(self) -> int:
        """Nodes one replica spans."""
        return math.ceil(self.gpus / self.gpus_per_node)

    @property
    def expert_parallel_size(self) -> int:
        """GPUs the experts of one MoE layer are spread over (``tp x dp``)."""
        return self.tensor_parallel_size * self.data_parallel_size

    @property
    def spans_nodes(self) -> bool:
        """One replica needs more than one node."""
        return self.nodes > 1

    @property
    def label(self) -> str:
        """``TP 8``, ``TP 8 x PP 2``, ``DP 8 + EP``, ``TP 2 x DP 4 + EP``."""
        parts = (
            [f"TP {self.tensor_parallel_size}"]
            if self.tensor_parallel_size > 1 or self.data_parallel_size == 1
            else []
        )
        if self.pipeline_parallel_size > 1:
            parts.append(f"PP {self.pipeline_parallel_size}")
        if self.data_parallel_size > 1:
            parts.append(f"DP {self.data_parallel_size}")
        return " x ".join(parts) + (" + EP" if self.expert_parallel else "")


def layout_error(arch: Architecture, layout: Layout) -> str | None:
    """Why vLLM would refuse ``layout`` for ``arch`` (or kvright does not plan it), or None.

    TP follows :func:`capacity.parallel.tensor_parallel_error` (with EP the experts keep their width);
    PP needs a class that implements it (:data:`~capacity.architecture.NO_PIPELINE_PARALLEL`,
    :data:`~capacity.architecture.NO_PIPELINE_HANDOFF`) and a layer
    per stage; EP needs a MoE model and at most one GPU per expert; DP needs EP
    (kvright's choice: a dense model scales with replicas); a replica that spans nodes takes whole
    nodes, and a TP group stays inside one.
    """
    tp, pp, dp = layout.tensor_parallel_size, layout.pipeline_parallel_size, layout.data_parallel_size
    error = tensor_parallel_error(arch, tp, expert_parallel=layout.expert_parallel)
    if error is not None:
        return error
    if pp > 1 and arch.architecture in NO_PIPELINE_PARALLEL:
        return (
            f"pipeline parallel size {pp}: vLLM's {arch.architecture} does not implement pipeline "
            "parallelism (its class has no SupportsPP); accepted: 1"
        )
    if pp > 1 and arch.architecture in NO_PIPELINE_HANDOFF:
        return (
            f"pipeline parallel size {pp}: vLLM 0.32's {arch.architecture} gates pipeline parallelism off "
            "(its model has no make_empty_intermediate_tensors, which every later stage needs); accepted: 1"
        )
    if pp > arch.num_decoder_layers:
        return (
            f"pipeline parallel size {pp} exceeds the {arch.num_decoder_layers} layers of {arch.name}; "
            f"accepted: at most {arch.num_decoder_layers}"
        )
    if layout.expert_parallel and not arch.is_moe:
        return f"expert parallelism needs a mixture-of-experts model; {arch.name} is dense"
    if layout.expert_parallel and layout.expert_parallel_size == 1:
        return "expert parallelism needs more than one GPU (tensor x data parallel size above 1)"
    if dp > 1 and not layout.expert_parallel:
        return (
            f"data parallel size {dp} without expert parallelism is not planned (a dense replica scales "
            "with more replicas); use DP with --enable-expert-parallel on a mixture-of-experts model"
        )
    if layout.expert_parallel and layout.expert_parallel_size > arch.num_experts:
        return (
            f"expert parallelism over {layout.expert_parallel_size} GPUs exceeds the {arch.num_experts} "
            f"experts of {arch.name}; accepted: at most {arch.num_experts}"
        )
    if tp > layout.gpus_per_node:
        return (
            f"tensor parallel size {tp} spans nodes of {layout.gpus_per_node} GPUs; TP stays inside one node "
            "(use pipeline or data parallelism across nodes)"
        )
    if layout.gpus > layout.gpus_per_node and layout.gpus % layout.gpus_per_node:
        return (
            f"a replica of {layout.gpus} GPUs spans nodes of {layout.gpus_per_node} GPUs without filling "
            "them; a multi-node replica takes whole nodes"
        )
    return None


@dataclass(frozen=True, slots=True)
class Stage:
    """One pipeline stage: the layers ``[start, stop)`` as an architecture of their own (their weights,
    KV layout and state), with the embedding on the first stage and the LM head on the last."""

    arch: Architecture
    start: int
    stop: int
    first: bool
    last: bool


def pipeline_stages(arch: Architecture, pipeline_parallel_size: int) -> tuple[Stage, ...]:
    """The stages vLLM's ``get_pp_indices`` cuts: ``layers // pp`` each, and the ``layers % pp`` left over
    one more each on the stages just before the last (the first and last carry the embeddings); the
    checkpoint's decoder layers, so a Falcon-H1 layer's two entries stay on one stage."""
    pp = pipeline_parallel_size
    key = ("pipeline_stages", pp)
    cached = arch.memo.get(key)
    if cached is None:
        if pp == 1:
            cached = (Stage(arch, 0, arch.num_layers, True, True),)
        else:
            per = arch.layers_per_block
            blocks = arch.num_decoder_layers
            sizes = [blocks // pp] * pp
            for i in range(2, blocks % pp + 2):
                sizes[-i] += 1
            sizes = [size * per for size in sizes]
            stages = []
            start = 0
            for i, size in enumerate(sizes):
                sub = replace(
                    arch,
                    layers=arch.layers[start : start + size],
                    num_layers=size,
                    first_layer=arch.first_layer + start // per,
                )
                stages.append(Stage(sub, start, start + size, i == 0, i == pp - 1))
                start += size
            cached = tuple(stages)
        arch.memo[key] = cached
    assert isinstance(cached, tuple)
    return cached
