"""Flags: the vLLM command lines capacity renders are ones real vLLM accepts, and its TP rules are vLLM's.

Every check here asks real vLLM 0.32 (CPU build) in-process, through vllm_probe.py: the server's own
argument parser, its serve-argument checks and `create_engine_config` (vLLM's config validation),
against tiny locally built checkpoints. The plans are capacity's, made for the tiny models on a
catalog GPU (the GPU only steers the planner; vLLM on CPU validates the flags the same way).

What `create_engine_config` does not check, the engine checks while building layers: a TP degree
that divides the attention heads but splits KV heads into fractions, or does not divide the
vocabulary padded to a multiple of 64. Those cases are listed in LOAD_TIME_ONLY, and one of each kind
is proven by starting a real server that must refuse it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity

from .harness import SHAPES, ServerSpec, VllmEnv, VllmServer, exit_of, probe

pytestmark = pytest.mark.conformance

MAX_TP = 8
# vLLM's config validation accepts these (attention heads divide), capacity rejects them (KV heads
# would split, or the padded vocabulary would), and vLLM refuses them only when QKVParallelLinear or
# VocabParallelEmbedding is built.
LOAD_TIME_ONLY = {
    ("gqa12-wide", 3): "KV heads",
    ("gqa12-wide", 6): "KV heads",
    ("gqa12-v512", 3): "padded vocabulary",
    ("gqa12-v512", 4): "KV heads",
    ("gqa12-v512", 6): "padded vocabulary",
}
# The GPU the planner plans for; the tiny models fit anywhere.
PLAN_GPU = "h100-sxm"
MAX_MODEL_LEN = 1024


def _arch(model: Path, name: str) -> capacity.Architecture:
    with open(model / "config.json") as f:
        return capacity.architecture_from_config(json.load(f), name=name)


def _base_argv(model: Path) -> list[str]:
    return ["--model", str(model), "--enforce-eager"]


def _pinned_plan(arch: capacity.Architecture, tp: int, dtype: str) -> capacity.Plan:
    result = capacity.plan(
        arch,
        capacity.gpu_spec(PLAN_GPU),
        capacity.Workload(max_model_len=MAX_MODEL_LEN, prompt_tokens=256, output_tokens=128, concurrency=32),
        capacity.SLO(),
        capacity.Limits(tensor_parallel_size=tp, kv_cache_dtype=dtype),
    )
    assert result.feasible and result.plan is not None, result.reason
    return result.plan


def _free_plan(arch: capacity.Architecture) -> capacity.Plan:
    result = capacity.plan(
        arch,
        capacity.gpu_spec(PLAN_GPU),
        capacity.Workload(max_model_len=MAX_MODEL_LEN, prompt_tokens=256, output_tokens=128, concurrency=64),
        capacity.SLO(tpot_seconds=0.05),
        capacity.Limits(),
    )
    assert result.feasible and result.plan is not None, result.reason
    return result.plan


TP_CASES = [(shape, tp) for shape in SHAPES for tp in range(1, MAX_TP + 1)]
DTYPES = list(capacity.KV_CACHE_DTYPES)


@pytest.fixture(scope="module")
def archs(tiny_models: dict[str, Path]) -> dict[str, capacity.Architecture]:
    return {name: _arch(path, name) for name, path in tiny_models.items()}


@pytest.fixture(scope="module")
def plans(archs: dict[str, capacity.Architecture]) -> dict[str, capacity.Plan]:
    """capacity's plans, by case id: every valid TP x every KV dtype pinned, plus the planner's own pick."""
    out: dict[str, capacity.Plan] = {}
    for name, arch in archs.items():
        out[f"{name}-planner-choice"] = _free_plan(arch)
        for tp in capacity.valid_tensor_parallel_sizes(arch, MAX_TP):
            for dtype in DTYPES:
                out[f"{name}-tp{tp}-{dtype}"] = _pinned_plan(arch, tp, dtype)
    return out


@pytest.fixture(scope="module")
def verdicts(
    vllm_env: VllmEnv, tiny_models: dict[str, Path], plans: dict[str, capacity.Plan]
) -> dict[str, dict[str, Any]]:
    """vLLM's verdict on every command line this module asks about (one vLLM process for all)."""
    cases: dict[str, list[str]] = {}
    for shape, tp in TP_CASES:
        cases[f"tp:{shape}:{tp}"] = [*_base_argv(tiny_models[shape]), "--tensor-parallel-size", str(tp)]
    for case_id, plan in plans.items():
        shape = next(s for s in SHAPES if case_id.startswith(f"{s}-"))
        cases[f"plan:{case_id}"] = [*_base_argv(tiny_models[shape]), *plan.vllm_args()]
    return probe(vllm_env, cases)


@pytest.mark.parametrize(("shape", "tp"), TP_CASES, ids=[f"{s}-tp{tp}" for s, tp in TP_CASES])
def test_tensor_parallel_verdict_matches_vllm(
    shape: str, tp: int, archs: dict[str, capacity.Architecture], verdicts: dict[str, dict[str, Any]]
) -> None:
    arch = archs[shape]
    ours = capacity.tensor_parallel_error(arch, tp)
    theirs = verdicts[f"tp:{shape}:{tp}"]
    if (shape, tp) in LOAD_TIME_ONLY:
        assert ours is not None and LOAD_TIME_ONLY[shape, tp] in ours, ours
        assert theirs["accepted"], "vLLM's config validation now checks this: move the case out"
        return
    if ours is None:
        assert theirs["accepted"], f"capacity accepts TP {tp}, vLLM says: {theirs['error']}"
        config = theirs["config"]
        assert config["tensor_parallel_size"] == tp
        assert config["num_kv_heads_per_rank"] == capacity.kv_heads_per_gpu(arch, tp)
    else:
        assert not theirs["accepted"], f"capacity rejects TP {tp} ({ours}), vLLM accepts it"
        assert theirs["stage"] == "engine-config"
        assert "must be divisible by tensor parallel size" in theirs["error"]


def test_load_time_only_cases_are_exactly_where_kv_heads_or_the_vocabulary_split(
    archs: dict[str, capacity.Architecture],
) -> None:
    found = {
        (shape, tp)
        for shape, tp in TP_CASES
        if archs[shape].num_attention_heads % tp == 0 and capacity.tensor_parallel_error(archs[shape], tp)
    }
    assert found == set(LOAD_TIME_ONLY)


# TP degrees vLLM's config validation lets through and the engine refuses while building layers:
# (shape, tp, vLLM's assertion). capacity must refuse each of them too.
ENGINE_REFUSALS = [
    # 12 attention heads divide by 3, the 4 KV heads do not (LlamaAttention asserts it, bare).
    ("gqa12-wide", 3, "assert self.total_num_kv_heads % tp_size == 0"),
    # 12 attention and 6 KV heads divide by 3; the vocab (512, padded to a multiple of 64) does not
    # (VocabParallelEmbedding splits the padded vocab evenly over the TP ranks).
    ("gqa12-v512", 3, "512 is not divisible by 3"),
]


@pytest.fixture(scope="module")
def refusals(
    vllm_env: VllmEnv, tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, int], tuple[int | None, str]]:
    """(exit status or None, log) of a server for each ENGINE_REFUSALS case, by (shape, tp). They are
    launched together and then waited for: each start is ~30 s of one process at a time importing vLLM,
    so two overlap on two cores."""
    logs = tmp_path_factory.mktemp("vllm-refusals")
    servers = {
        (shape, tp): VllmServer(
            vllm_env,
            ServerSpec(shape=shape, tensor_parallel_size=tp, kv_cache_memory_bytes=16 * 2**20),
            tiny_models[shape],
            logs / f"vllm-{shape}-tp{tp}.log",
        )
        for shape, tp, _ in ENGINE_REFUSALS
    }
    try:
        for server in servers.values():
            server.launch()
        return {key: exit_of(server) for key, server in servers.items()}
    finally:
        for server in servers.values():
            server.stop()


@pytest.mark.parametrize(
    ("shape", "tp", "message"), ENGINE_REFUSALS, ids=["kv-heads-split", "padded-vocab-split"]
)
def test_tp_that_vllm_refuses_while_building_layers_is_refused_by_capacity(
    shape: str,
    tp: int,
    message: str,
    refusals: dict[tuple[str, int], tuple[int | None, str]],
    archs: dict[str, capacity.Architecture],
) -> None:
    status, log = refusals[shape, tp]
    assert status is not None, f"vLLM served {shape} at TP={tp}; this case no longer shows a refusal"
    assert message in log, log[-3000:]
    assert capacity.tensor_parallel_error(archs[shape], tp) is not None, (
        f"capacity accepts TP={tp} for {shape}, but vLLM's engine refuses it: AssertionError: {message}"
    )


def _plan_ids() -> list[str]:
    """Case ids known at collection: capacity's valid TPs for each shape's config fields."""
    ids = []
    for name, shape in SHAPES.items():
        arch = capacity.architecture_from_config(
            {**shape.hf_fields(), "model_type": "llama", "torch_dtype": "bfloat16"}, name=name
        )
        ids.append(f"{name}-planner-choice")
        for tp in capacity.valid_tensor_parallel_sizes(arch, MAX_TP):
            ids.extend(f"{name}-tp{tp}-{dtype}" for dtype in DTYPES)
    return ids


@pytest.mark.parametrize("case_id", _plan_ids())
def test_rendered_plan_is_accepted_by_vllm(
    case_id: str, plans: dict[str, capacity.Plan], verdicts: dict[str, dict[str, Any]]
) -> None:
    plan = plans[case_id]
    theirs = verdicts[f"plan:{case_id}"]
    assert theirs["accepted"], f"vLLM refused {plan.vllm_args()} at {theirs['stage']}: {theirs['error']}"
    config = theirs["config"]
    assert {
        "tensor_parallel_size": config["tensor_parallel_size"],
        "max_num_seqs": config["max_num_seqs"],
        "max_model_len": config["max_model_len"],
        "cache_dtype": config["cache_dtype"],
        "gpu_memory_utilization": config["gpu_memory_utilization"],
    } == {
        "tensor_parallel_size": plan.tensor_parallel_size,
        "max_num_seqs": plan.max_num_seqs,
        "max_model_len": plan.max_model_len,
        "cache_dtype": plan.kv_cache_dtype,
        "gpu_memory_utilization": plan.gpu_memory_utilization,
    }


def test_every_plan_made_from_the_built_models_is_checked(plans: dict[str, capacity.Plan]) -> None:
    """The ids above come from the shapes' fields; the plans from the built config.json files."""
    assert sorted(plans) == sorted(_plan_ids())
