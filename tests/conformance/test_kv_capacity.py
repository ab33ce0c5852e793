"""KV capacity: the blocks and tokens real vLLM allocates for a KV budget equal capacity's prediction.

For each tiny shape at TP 1 and 2, a real vLLM CPU server is started with an explicit
`--kv-cache-memory-bytes` budget (per worker, which is how vLLM applies it) and the test reads what
vLLM allocated twice: the `num_gpu_blocks` / `block_size` / `kv_cache_size_tokens` labels of
`vllm:cache_config_info` on `/metrics`, and the "KV cache size: N tokens" log line. The prediction
comes from `capacity.kv_cache_bytes_per_token` (all ranks, replication included) divided by TP,
then whole blocks of vLLM's block size (128 on the CPU backend) that fit the budget. Budgets are
deliberately not a multiple of a block, so the floor is exercised. Nothing is faked.

fp8 KV cache: vLLM's CPU kernels need AVX-512 or AMX. On such CPUs the fp8 case checks the halved
bytes per token; on AVX2-only CPUs it checks that the engine refuses with vLLM's known message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import capacity

from .harness import (
    BIG_KV_BYTES,
    METRICS_SERVER,
    ServerFailed,
    ServerPool,
    ServerSpec,
    VllmEnv,
    VllmServer,
    cache_config_labels,
    cpu_supports_fp8_kv,
    following,
    kv_tokens_from_log,
)

pytestmark = pytest.mark.conformance

# Ordered so that consecutive cases share a server and the last one (the small-budget gqa server) is
# still running for test_metrics.py and test_sim_dialect.py.
CASES = [
    ServerSpec(shape="mha", tensor_parallel_size=1, kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="mha", tensor_parallel_size=2, kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="mqa", tensor_parallel_size=1, kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="mqa", tensor_parallel_size=2, kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="gqa12-wide", tensor_parallel_size=1, kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="gqa12-wide", tensor_parallel_size=2, kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="gqa", tensor_parallel_size=2, kv_cache_memory_bytes=BIG_KV_BYTES),
    METRICS_SERVER,
]


def _id(spec: ServerSpec) -> str:
    return f"{spec.shape}-tp{spec.tensor_parallel_size}-{spec.kv_cache_memory_bytes}B"


def architecture(model: Path, name: str) -> capacity.Architecture:
    with open(model / "config.json") as f:
        return capacity.architecture_from_config(json.load(f), name=name)


def predicted_blocks(
    arch: capacity.Architecture,
    *,
    tensor_parallel_size: int,
    kv_cache_dtype: str,
    budget: int,
    block_size: int,
) -> int:
    """Whole blocks per worker: budget // (bytes per token per rank x block size).

    vLLM's page per layer is 2 x block_size x kv_heads_per_rank x head_size x dtype_bytes and
    num_blocks = budget // page // layers (v1/core/kv_cache_utils.py), i.e. the formula above.
    """
    total = capacity.kv_cache_bytes_per_token(
        arch, kv_cache_dtype=kv_cache_dtype, tensor_parallel_size=tensor_parallel_size
    )
    assert total % tensor_parallel_size == 0, (
        f"{total} B per token does not split over {tensor_parallel_size}"
    )
    per_rank = total // tensor_parallel_size
    return budget // (per_rank * block_size)


FP8 = ServerSpec(shape="gqa", kv_cache_memory_bytes=BIG_KV_BYTES, extra_args=("--kv-cache-dtype", "fp8"))


def test_fp8_kv_cache_halves_bytes_per_token_or_is_refused_without_avx512(
    vllm_env: VllmEnv, tiny_models: dict[str, Path], tmp_path: Path, vllm_servers: ServerPool
) -> None:
    vllm_servers.prepare(CASES[0])  # the next test's first server starts while this one runs
    arch = architecture(tiny_models["gqa"], "gqa")
    auto = capacity.kv_cache_bytes_per_token(arch)
    assert capacity.kv_cache_bytes_per_token(arch, kv_cache_dtype="fp8") * 2 == auto
    server = VllmServer(vllm_env, FP8, tiny_models["gqa"], tmp_path / "vllm-fp8.log")
    try:
        server.start()
    except ServerFailed as exc:
        if cpu_supports_fp8_kv():
            pytest.fail(f"vLLM refused fp8 KV cache on a CPU with AVX-512/AMX: {exc}", pytrace=False)
        assert "FP8 KV cache on CPU requires x86 with AVX-512 or AMX" in server.log()
        return
    try:
        assert cpu_supports_fp8_kv(), "vLLM served an fp8 KV cache on a CPU without AVX-512/AMX"
        labels = cache_config_labels(server.metrics_text())
        block_size = int(labels["block_size"])
        blocks = predicted_blocks(
            arch,
            tensor_parallel_size=1,
            kv_cache_dtype="fp8",
            budget=FP8.kv_cache_memory_bytes,
            block_size=block_size,
        )
        assert labels["cache_dtype"] == "fp8"
        assert int(labels["num_gpu_blocks"]) == blocks, labels
        assert kv_tokens_from_log(server.log()) == [blocks * block_size]
    finally:
        server.stop()


@pytest.mark.parametrize("spec", CASES, ids=[_id(s) for s in CASES])
def test_vllm_allocates_exactly_the_predicted_kv_cache(
    spec: ServerSpec, vllm_servers: ServerPool, tiny_models: dict[str, Path]
) -> None:
    server = vllm_servers.get(spec, then=following(CASES, spec))
    labels = cache_config_labels(server.metrics_text())
    block_size = int(labels["block_size"])
    arch = architecture(tiny_models[spec.shape], spec.shape)
    blocks = predicted_blocks(
        arch,
        tensor_parallel_size=spec.tensor_parallel_size,
        kv_cache_dtype="auto",
        budget=spec.kv_cache_memory_bytes,
        block_size=block_size,
    )
    assert blocks > 0
    assert (labels["cache_dtype"], labels["kv_cache_memory_bytes"]) == (
        "auto",
        str(spec.kv_cache_memory_bytes),
    )
    assert int(labels["num_gpu_blocks"]) == blocks, labels
    assert int(labels["kv_cache_size_tokens"]) == blocks * block_size, labels
    assert kv_tokens_from_log(server.log()) == [blocks * block_size]
