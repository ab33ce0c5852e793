"""The simulator's physics, from kvright's serving model.

A step takes ``capacity.ServingModel.step_seconds(batch, context, prefill_tokens) / efficiency`` (the same
step the planner and the control law price); the KV cache holds ``capacity.KVMemory``'s blocks unless
``--num-gpu-blocks-override`` says otherwise (as in vLLM). ``efficiency`` < 1 makes the simulated GPU
slower than kvright predicts, which is how tests create "a plan that is too aggressive". (Physics of its
own, independent of the model it checks, is issue 13's work.)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import capacity
from kvright_dev.sim.engine import Engine

if TYPE_CHECKING:
    from kvright_dev.sim.server import ServeArgs

__all__ = ["build_engine", "step_model"]

_GRAIN = 64  # tokens; step times are cached per (batch, context and prefill rounded up to this)


def step_model(model: capacity.ServingModel, *, efficiency: float) -> Callable[[int, float, int], float]:
    """``step_seconds(batch, mean_context, prefill_tokens)`` for the engine, cached on a 64-token grain."""

    @functools.lru_cache(maxsize=65_536)
    def step(batch: int, context: int, prefill: int) -> float:
        return model.step_seconds(batch, context, prefill) / efficiency

    def step_seconds(batch: int, mean_context: float, prefill_tokens: int) -> float:
        context = max(1, math.ceil(mean_context / _GRAIN) * _GRAIN)
        prefill = math.ceil(prefill_tokens / _GRAIN) * _GRAIN if prefill_tokens > 0 else 0
        return step(batch, context, prefill)

    return step_seconds


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
    model = capacity.ServingModel(
        arch,
        gpu,
        capacity.EngineConfig(
            layout=layout,
            kv_cache_dtype=args.kv_cache_dtype,
            max_num_batched_tokens=mnbt,
            gpu_memory_utilization=args.gpu_memory_utilization,
        ),
    )
    if args.num_gpu_blocks_override is not None:
        blocks = args.num_gpu_blocks_override
    else:
        blocks = model.memory.breakdown(args.max_num_seqs).num_blocks
    if blocks < 1:
        raise ValueError(
            f"no room for the KV cache: {arch.name} with {layout.label} on {gpu.id} at "
            f"--gpu-memory-utilization {args.gpu_memory_utilization} (vLLM would fail to start the same way)"
        )
    max_model_len = args.max_model_len or arch.max_position_embeddings
    engine = Engine(
        step_seconds=step_model(model, efficiency=args.efficiency),
        max_num_seqs=args.max_num_seqs,
        num_gpu_blocks=blocks,
        block_size=args.block_size,
        max_model_len=max_model_len,
        max_num_batched_tokens=mnbt,
        noise=args.noise,
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
