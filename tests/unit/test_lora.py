"""LoRA adapters: the GPU buffers vLLM 0.32 allocates for them, their place in the memory model, the
planner's flags, the CLI and the operator's spec.lora.

Expected buffer sizes are written out from the tensor shapes in vLLM 0.32's ``create_lora_weights``
(``vllm/lora/layers/*.py``), not from :func:`capacity.lora_bytes_per_gpu`. Nothing is faked but the
cluster in the reconcile test (the same in-memory fakes as tests/unit/test_reconcile.py).
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

import capacity
from capacity import CapacityError, EngineConfig, KVMemory, Layout, Limits, Lora, Workload
from kvright.api import SpecError, parse_spec
from kvright.reconcile import desire
from tests.builders import llama_8b_config
from tests.unit.test_cli import run as cli
from tests.unit.test_reconcile import LLAMA70, facts

ARCH = capacity.catalog_architecture("llama-3.1-8b")
H100 = capacity.gpu_spec("h100-sxm")


def llama_8b_elements(rank: int, tp: int) -> int:
    """LoRA buffer elements for ONE adapter of Llama-3.1-8B on one of ``tp`` GPUs, from vLLM's shapes.

    Llama-3.1-8B: hidden 4096, 32 query heads and 8 KV heads of 128, MLP 14336, vocab 128256, 32 layers;
    LlamaForCausalLM declares embed_tokens and lm_head in embedding_modules."""
    h, q, kv, mlp, vocab, layers = 4096, 32 * 128, 8 * 128, 14336, 128256, 32
    qkv = 3 * (rank * h) + (q // tp + kv // tp + kv // tp) * rank  # MergedQKV: A x3 whole, B sliced
    o_proj = rank * (q // tp) + h * rank  # RowParallel: A by input shard, B whole
    gate_up = 2 * (rank * h) + 2 * (mlp // tp) * rank  # MergedColumn: 2 slices
    down = rank * (mlp // tp) + h * rank  # RowParallel
    embed = vocab * rank + h * rank  # VocabParallelEmbeddingWithLoRA: (vocab, r) and (h, r), whole
    logits = rank * h + vocab * rank  # LogitsProcessorWithLoRA: (r, h) and (vocab, r), whole
    return layers * (qkv + o_proj + gate_up + down) + embed + logits


@pytest.mark.parametrize(
    ("loras", "rank", "tp", "expected"),
    [
        # 32 x 1,310,720 + 4,235,264 elements x 4 adapters x 2 B
        (4, 16, 1, 369_426_432),
        (4, 16, 2, 260_374_528),
        (1, 64, 1, 369_426_432),
    ],
    ids=["4x-rank16-tp1", "4x-rank16-tp2-B-and-row-A-halved", "1x-rank64-tp1-same-as-4x-rank16"],
)
def test_llama_8b_buffer_bytes_follow_vllm_shapes(loras: int, rank: int, tp: int, expected: int) -> None:
    assert llama_8b_elements(rank, tp) * loras * 2 == expected
    got = capacity.lora_bytes_per_gpu(
        ARCH, Lora(max_loras=loras, max_lora_rank=rank), tensor_parallel_size=tp
    )
    assert got == expected


def test_buffers_scale_with_adapters_and_rank() -> None:
    one = capacity.lora_bytes_per_gpu(ARCH, Lora(max_loras=1, max_lora_rank=8))
    assert capacity.lora_bytes_per_gpu(ARCH, Lora(max_loras=3, max_lora_rank=8)) == 3 * one
    assert capacity.lora_bytes_per_gpu(ARCH, Lora(max_loras=1, max_lora_rank=32)) == 4 * one


def test_qwen2_has_no_embedding_buffers() -> None:
    """Qwen2ForCausalLM keeps SupportsLoRA's empty embedding_modules: only the linear layers."""
    arch = capacity.catalog_architecture("qwen2.5-7b")
    h, q, kv, mlp, layers, r = 3584, 28 * 128, 4 * 128, 18944, 28, 16
    per_layer = 3 * r * h + (q + 2 * kv) * r + r * q + h * r + 2 * r * h + 2 * mlp * r + r * mlp + h * r
    assert capacity.lora_bytes_per_gpu(arch, Lora(max_lora_rank=r)) == layers * per_layer * 2


def test_phi3_fused_checkpoint_modules_hold_one_a() -> None:
    """Phi3ForCausalLM maps qkv_proj and gate_up_proj to themselves: one slice each, A held once."""
    arch = capacity.catalog_architecture("phi-3-mini")
    h, q, mlp, vocab, layers, r, tp = 3072, 32 * 96, 8192, 32064, 32, 8, 2
    qkv = r * h + (3 * q // tp) * r
    o_proj = r * q // tp + h * r
    gate_up = r * h + (2 * mlp // tp) * r
    down = r * mlp // tp + h * r
    total = layers * (qkv + o_proj + gate_up + down) + 2 * (vocab * r + h * r)
    got = capacity.lora_bytes_per_gpu(arch, Lora(max_loras=2, max_lora_rank=r), tensor_parallel_size=tp)
    assert got == total * 2 * 2


def test_moe_experts_get_buffers_per_local_expert() -> None:
    """Mixtral-8x7B: every expert gets w1/w3/w2 A and B (fused_moe.py), the router a replicated layer."""
    arch = capacity.catalog_architecture("mixtral-8x7b")
    h, q, kv, inter, experts, layers, vocab, r = 4096, 4096, 1024, 14336, 8, 32, 32000, 8
    for tp, ep in ((2, False), (2, True)):
        local, width = (experts // 2, inter) if ep else (experts, inter // tp)
        attn = 3 * r * h + (q // tp + 2 * kv // tp) * r + r * q // tp + h * r
        moe = local * r * (3 * h + 3 * width) + r * h + experts * r
        total = layers * (attn + moe) + 2 * (vocab * r + h * r)
        layout = Layout(tensor_parallel_size=tp, expert_parallel=ep)
        got = capacity.lora_bytes_per_gpu(arch, Lora(max_lora_rank=r), tensor_parallel_size=tp, layout=layout)
        assert got == total * 2, f"tp {tp} ep {ep}"


def test_pipeline_stages_split_the_buffers() -> None:
    """Embedding buffers on the first stage, logits on the last, each stage its own layers."""
    lora = Lora(max_loras=2, max_lora_rank=16)
    whole = capacity.lora_bytes_per_gpu(ARCH, lora)
    stages = capacity.pipeline_stages(ARCH, 2)
    parts = [capacity.lora_bytes_per_gpu(ARCH, lora, stage=s) for s in stages]
    assert sum(parts) == whole
    assert parts[0] == parts[1]  # 16 layers each, the embedding on one and the logits on the other


@pytest.mark.parametrize(
    ("lora", "accepted"),
    [
        (Lora(max_lora_rank=48), "1, 8, 16, 32, 64, 128, 256, 320, 512"),
        (Lora(max_lora_rank=4), "1, 8, 16, 32, 64, 128, 256, 320, 512"),
        (Lora(max_loras=0), "integer >= 1"),
        (Lora(max_loras=4, max_cpu_loras=2), ">= max LoRAs (4)"),
    ],
    ids=["rank-48-not-a-vllm-rank", "rank-4", "no-adapters", "cpu-cache-below-gpu-slots"],
)
def test_bad_settings_are_refused_naming_what_is_accepted(lora: Lora, accepted: str) -> None:
    with pytest.raises(CapacityError, match="expected") as err:
        capacity.lora_bytes_per_gpu(ARCH, lora)
    assert accepted in str(err.value)
    with pytest.raises(CapacityError, match="expected"):
        capacity.plan(ARCH, H100, Workload(max_model_len=8192), capacity.SLO(), Limits(lora=lora))


def test_unmodelled_layers_and_large_vocabularies_are_refused() -> None:
    with pytest.raises(CapacityError, match="mla layers"):
        capacity.lora_bytes_per_gpu(capacity.catalog_architecture("deepseek-v2-lite"), Lora())
    wide = dataclasses.replace(ARCH, vocab_size=262_144)  # LogitsProcessorWithLoRA refuses > 258,048
    with pytest.raises(CapacityError, match="at most 258048"):
        capacity.lora_bytes_per_gpu(wide, Lora())


def test_fewer_sequences_fit_with_lora_on_the_same_layout() -> None:
    lora = Lora(max_loras=4, max_lora_rank=64)
    base = EngineConfig(layout=Layout(tensor_parallel_size=1), max_num_batched_tokens=8192)
    without = KVMemory(ARCH, H100, base)
    with_lora = KVMemory(ARCH, H100, EngineConfig(layout=base.layout, max_num_batched_tokens=8192, lora=lora))
    taken = capacity.lora_bytes_per_gpu(ARCH, lora)
    assert with_lora.free_bytes(256) == without.free_bytes(256) - taken
    assert with_lora.max_batch(8192, 1024) < without.max_batch(8192, 1024)
    shown = with_lora.breakdown(256)
    assert shown.lora_bytes == taken
    assert shown.to_dict()["lora"] == taken
    assert without.breakdown(256).lora_bytes == 0


def test_plan_renders_lora_flags_and_counts_the_memory() -> None:
    workload, slo = Workload(max_model_len=8192), capacity.SLO()
    pinned = Limits(kv_cache_dtype="auto", tensor_parallel_size=1)
    plain = capacity.plan(ARCH, H100, workload, slo, pinned)
    lora = Lora(max_loras=4, max_lora_rank=64, max_cpu_loras=16)
    with_lora = capacity.plan(
        ARCH, H100, workload, slo, Limits(kv_cache_dtype="auto", tensor_parallel_size=1, lora=lora)
    )
    assert plain.plan is not None and with_lora.plan is not None and with_lora.memory is not None
    args = with_lora.plan.vllm_args()
    flags = ["--enable-lora", "--max-loras", "4", "--max-lora-rank", "64", "--max-cpu-loras", "16"]
    assert args[-len(flags) :] == flags
    assert "--enable-lora" not in plain.plan.vllm_args()
    assert with_lora.memory.lora_bytes == capacity.lora_bytes_per_gpu(ARCH, lora)
    assert with_lora.plan.max_num_seqs < plain.plan.max_num_seqs
    assert Lora(max_loras=2).vllm_args() == ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "16"]


def test_a_memory_refusal_names_the_adapters_as_a_lever() -> None:
    """Llama-3.1-8B at 128K on one L4: the sequence does not fit; the LoRA slots are one of the fixes."""
    lora = Lora(max_loras=8, max_lora_rank=64)
    limits = Limits(max_gpus=1, kv_cache_dtype="fp8", lora=lora)
    l4 = capacity.gpu_spec("l4")
    result = capacity.plan(ARCH, l4, Workload(max_model_len=131072), capacity.SLO(), limits)
    assert not result.feasible
    taken = capacity.lora_bytes_per_gpu(ARCH, lora)
    assert f"and {taken / 2**30:.2f} GiB of LoRA adapters" in result.reason
    assert "fewer or lower-rank LoRA adapters (--max-loras 8 at --max-lora-rank 64" in result.reason
    without = capacity.plan(ARCH, l4, Workload(max_model_len=131072), capacity.SLO(), Limits(max_gpus=1))
    assert "LoRA" not in without.reason


PLAN = ("plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--max-model-len", "8192", "--kv-cache-dtype", "auto")


def test_cli_plan_adds_the_flags_and_shows_the_adapter_memory(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, *PLAN, "--max-loras", "4", "--max-lora-rank", "64", "--json")
    assert code == 0, err
    data = json.loads(out)
    taken = capacity.lora_bytes_per_gpu(ARCH, Lora(max_loras=4, max_lora_rank=64))
    assert data["memory_per_gpu_bytes"]["lora"] == taken
    assert data["vllm_args"][-5:] == ["--enable-lora", "--max-loras", "4", "--max-lora-rank", "64"]
    assert data["plan"]["lora"] == {
        "max_loras": 4,
        "max_lora_rank": 64,
        "max_cpu_loras": None,
        "adapters": [],
    }
    code, plain, err = cli(capsys, *PLAN, "--json")
    assert code == 0, err
    without = json.loads(plain)
    assert without["memory_per_gpu_bytes"]["lora"] == 0 and "lora" not in without["plan"]
    assert data["plan"]["max_num_seqs"] < without["plan"]["max_num_seqs"]
    code, text, _ = cli(capsys, *PLAN, "--max-loras", "4", "--max-lora-rank", "64")
    assert code == 0
    row = next(line for line in text.splitlines() if "LoRA adapters" in line)
    assert f"{taken / 2**30:.2f} GiB (taken from the KV cache)" in row


def test_cli_refuses_a_rank_vllm_does_not_accept(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, *PLAN, "--max-lora-rank", "48")
    assert code == 2 and out == ""
    assert err.strip() == (
        "kvright: error: max LoRA rank 48 is not one vLLM 0.32 accepts; expected one of "
        "1, 8, 16, 32, 64, 128, 256, 320, 512"
    )


# --- the operator: spec.lora reaches the planner and the pod ------------------------------------------

LORA_SPEC = {
    "maxLoras": 4,
    "maxRank": 64,
    "maxCPULoras": 8,
    "adapters": [
        {"name": "sql", "source": "org/llama-sql-lora"},
        {"name": "chat.v2", "source": "/adapters/c"},
    ],
}


def test_spec_lora_reaches_the_rendered_container_args() -> None:
    plain = desire(facts(LLAMA70.spec()))
    d = desire(facts(LLAMA70.set("lora", LORA_SPEC).spec()))
    assert d.plan_feasible.status == "True", d.plan_feasible.message
    container = d.children[0]["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    flags = ["--enable-lora", "--max-loras", "4", "--max-lora-rank", "64", "--max-cpu-loras", "8"]
    modules = ["--lora-modules", "sql=org/llama-sql-lora", "chat.v2=/adapters/c"]
    at = args.index("--enable-lora")
    assert args[at : at + len(flags) + len(modules)] == flags + modules
    assert d.fields["plan"]["vllmArgs"][-len(flags) - len(modules) :] == flags + modules
    assert "--enable-lora" not in plain.children[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    # The adapters' buffers come out of the KV cache the status reports.
    with_lora, without = d.fields["prediction"], plain.fields["prediction"]
    assert with_lora["kvCacheBytesPerGPU"] < without["kvCacheBytesPerGPU"]


@pytest.mark.parametrize(
    ("lora", "message"),
    [
        ({"maxRank": 48}, "spec.lora.maxRank"),
        ({"maxLoras": 4, "maxCPULoras": 2}, "lora.maxCPULoras must be >= lora.maxLoras"),
        ({"adapters": [{"name": "a", "source": "x"}, {"name": "a", "source": "y"}]}, "names must be unique"),
        ({"adapters": [{"name": "a=b", "source": "x"}]}, "spec.lora.adapters[0].name"),
        ({"adapters": [{"name": "a", "source": "x,y"}]}, "spec.lora.adapters[0].source"),
    ],
    ids=[
        "rank-vllm-refuses",
        "cpu-cache-below-gpu-slots",
        "repeated-name",
        "equals-in-name",
        "comma-in-source",
    ],
)
def test_spec_lora_is_validated_as_vllm_parses_it(lora: dict, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_spec(LLAMA70.set("lora", lora).spec())


@pytest.mark.parametrize("config", ["stablelm", "minimax-m3"])
def test_lora_on_a_class_vllm_serves_without_it_is_refused_naming_the_class(config: str) -> None:
    """vLLM's loader refuses --enable-lora for a class without SupportsLoRA (capacity.NO_LORA): the plan is
    refused in one line, instead of pods that never start."""
    if config == "minimax-m3":
        arch = capacity.load_architecture("tests/data/configs/minimax-m3-nvfp4")
    else:
        stablelm = {**llama_8b_config(), "architectures": ["StableLmForCausalLM"], "model_type": "stablelm"}
        arch = capacity.architecture_from_config(stablelm)
    with pytest.raises(CapacityError, match=f"its class {arch.architecture} does not support LoRA"):
        capacity.lora_bytes_per_gpu(arch, Lora())
    with pytest.raises(CapacityError, match="does not support LoRA"):
        capacity.plan(
            arch, capacity.gpu_spec("b200"), Workload(max_model_len=4096), capacity.SLO(), Limits(lora=Lora())
        )
