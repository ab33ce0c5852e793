"""The simulator's physics, from kvright's own capacity model.

Decode step time is ``capacity.decode_step(...).predicted_seconds / efficiency``; prefill time is
``capacity.prefill_seconds(...) / efficiency``; the KV cache holds ``capacity.memory_per_gpu(...)``'s
blocks unless ``--num-gpu-blocks-override`` says otherwise (as in vLLM). ``efficiency`` < 1 makes the
simulated GPU slower than kvright predicts, which is how tests create "a plan that is too aggressive".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import capacity
from capacity.memory import default_max_num_batched_tokens  # vLLM's default; not in capacity.__all__
from kvright_dev.sim.engine import Engine

if TYPE_CHECKING:
    from kvright_dev.sim.server import ServeArgs

__all__ = ["build_engine", "step_models"]

_CONTEXT_GRAIN = 64  # tokens; step times are cached per (batch, context rounded up to this)


def step_models(
    arch: capacity.Architecture,
    gpu: capacity.GPU,
    *,
    tensor_parallel_size: int,
    kv_cache_dtype: str,
    efficiency: float,
) -> tuple[Callable[[int, float], float], Callable[[int], float]]:
    """(decode_seconds(batch, mean_context), prefill_seconds(tokens)) for the engine."""

    @functools.lru_cache(maxsize=65_536)
    def decode(batch: int, context: int) -> float:
        step = capacity.decode_step(
            arch,
            gpu,
            tensor_parallel_size=tensor_parallel_size,
            batch=batch,
            context_tokens=context,
            kv_cache_dtype=kv_cache_dtype,
        )
        return step.predicted_seconds / efficiency

    @functools.lru_cache(maxsize=4096)
    def prefill(tokens: int) -> float:
        return (
            capacity.prefill_seconds(
                arch, gpu, tensor_parallel_size=tensor_parallel_size, prompt_tokens=tokens
            )
            / efficiency
        )

    def decode_seconds(batch: int, mean_context: float) -> float:
        context = max(1, math.ceil(mean_context / _CONTEXT_GRAIN) * _CONTEXT_GRAIN)
        return decode(batch, context)

    def prefill_seconds(tokens: int) -> float:
        return prefill(max(1, math.ceil(tokens / _CONTEXT_GRAIN) * _CONTEXT_GRAIN))

    return decode_seconds, prefill_seconds


def build_engine(args: ServeArgs) -> tuple[Engine, dict[str, str]]:
    """The engine for a `vllm serve` command line, and the labels of vllm:cache_config_info."""
    try:
        arch = capacity.load_architecture(args.architecture or args.model)
        gpu = capacity.gpu_spec(args.gpu)
    except capacity.CapacityError as exc:
        raise ValueError(str(exc)) from exc
    tp = args.tensor_parallel_size
    error = capacity.tensor_parallel_error(arch, tp)
    if error is not None:
        raise ValueError(error)
    decode, prefill = step_models(
        arch, gpu, tensor_parallel_size=tp, kv_cache_dtype=args.kv_cache_dtype, efficiency=args.efficiency
    )
    if args.num_gpu_blocks_override is not None:
        blocks = args.num_gpu_blocks_override
    else:
        memory = capacity.memory_per_gpu(
            arch,
            gpu,
            tensor_parallel_size=tp,
            kv_cache_dtype=args.kv_cache_dtype,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_num_seqs=args.max_num_seqs,
        )
        blocks = memory.num_blocks
    if blocks < 1:
        raise ValueError(
            f"no room for the KV cache: {arch.name} with tensor-parallel {tp} on {gpu.id} at "
            f"--gpu-memory-utilization {args.gpu_memory_utilization} (vLLM would fail to start the same way)"
        )
    max_model_len = args.max_model_len or arch.max_position_embeddings
    engine = Engine(
        decode_seconds=decode,
        prefill_seconds=prefill,
        max_num_seqs=args.max_num_seqs,
        num_gpu_blocks=blocks,
        block_size=args.block_size,
        max_model_len=max_model_len,
        max_num_batched_tokens=args.max_num_batched_tokens or default_max_num_batched_tokens(gpu),
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
