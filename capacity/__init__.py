"""kvright's capacity engine: pure math from a Hugging Face config.json to a vLLM plan.

Architecture facts, the GPU catalog, weight / KV-cache / activation memory as vLLM accounts it, vLLM's
tensor-parallel rules, the roofline step, the serving model (:mod:`capacity.serving`, the one place that says
how long an engine step takes and how much fits) and the planner. No IO except reading a config file the
caller names (:func:`load_architecture`).
"""

from capacity.architecture import Architecture, AttentionKind, ParameterGroups, architecture_from_config
from capacity.catalog import catalog_architecture, catalog_ids, catalog_source, load_architecture
from capacity.errors import CapacityError, ConfigError
from capacity.gpus import GPU, gpu_ids, gpu_spec
from capacity.memory import (
    BLOCK_SIZE_TOKENS,
    CUDA_GRAPH_RESERVE_BYTES,
    KV_CACHE_DTYPES,
    MAX_NUM_SEQS_CAP,
    NCCL_RESERVE_BYTES,
    NON_TORCH_OVERHEAD_BYTES,
    SAMPLER_FP32_LOGIT_COPIES,
    KVMemory,
    MemoryBreakdown,
    default_max_num_batched_tokens,
    kv_cache_bytes_per_sequence,
    kv_cache_bytes_per_token,
    memory_per_gpu,
    weight_bytes,
    weight_bytes_per_gpu,
)
from capacity.parallel import (
    kv_heads_per_gpu,
    padded_vocab_size,
    tensor_parallel_error,
    valid_tensor_parallel_sizes,
)
from capacity.planner import (
    SLO,
    BatchLimit,
    Candidate,
    Limits,
    Plan,
    PlanResult,
    Prediction,
    Workload,
    plan,
)
from capacity.roofline import DEFAULT_EFFICIENCY, DecodeStep, Efficiency, decode_step
from capacity.serving import (
    PERCENTILES,
    TPOT_HISTOGRAM_BUCKETS,
    UNCALIBRATED,
    Calibration,
    Curve,
    ServingModel,
    ServingPoint,
    Shape,
    histogram_quantile,
    largest_within,
    learn,
    percentile_z,
)

__all__ = [
    "BLOCK_SIZE_TOKENS",
    "CUDA_GRAPH_RESERVE_BYTES",
    "DEFAULT_EFFICIENCY",
    "GPU",
    "KV_CACHE_DTYPES",
    "MAX_NUM_SEQS_CAP",
    "NCCL_RESERVE_BYTES",
    "NON_TORCH_OVERHEAD_BYTES",
    "PERCENTILES",
    "SAMPLER_FP32_LOGIT_COPIES",
    "SLO",
    "TPOT_HISTOGRAM_BUCKETS",
    "UNCALIBRATED",
    "Architecture",
    "AttentionKind",
    "BatchLimit",
    "Calibration",
    "Candidate",
    "CapacityError",
    "ConfigError",
    "Curve",
    "DecodeStep",
    "Efficiency",
    "KVMemory",
    "Limits",
    "MemoryBreakdown",
    "ParameterGroups",
    "Plan",
    "PlanResult",
    "Prediction",
    "ServingModel",
    "ServingPoint",
    "Shape",
    "Workload",
    "architecture_from_config",
    "catalog_architecture",
    "catalog_ids",
    "catalog_source",
    "decode_step",
    "default_max_num_batched_tokens",
    "gpu_ids",
    "gpu_spec",
    "histogram_quantile",
    "kv_cache_bytes_per_sequence",
    "kv_cache_bytes_per_token",
    "kv_heads_per_gpu",
    "largest_within",
    "learn",
    "load_architecture",
    "memory_per_gpu",
    "padded_vocab_size",
    "percentile_z",
    "plan",
    "tensor_parallel_error",
    "valid_tensor_parallel_sizes",
    "weight_bytes",
    "weight_bytes_per_gpu",
]
