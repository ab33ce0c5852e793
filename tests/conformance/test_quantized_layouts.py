"""Quantized checkpoint layouts: what vLLM 0.32's CPU build loads, and its TP verdicts, against capacity.

GPTQ (4-bit, group 128, AutoGPTQ layout: packed int32 qweight/qzeros, fp16 scales, g_idx) is built
here from a random tiny Llama and served by the real engine at TP 1 and 2 with an explicit KV budget:
vLLM loads it with its CPUWNA16 kernel, allocates the KV cache, and capacity must predict the blocks,
accept both TP degrees, and size the checkpoint (`capacity.weight_bytes`) within 5% of the bytes of its
safetensors tensors (the CPU worker logs no "Model loading took X GiB" line; that is GPU-only).
The tiny model's MLP is 512 wide, so TP 2 leaves each rank two whole groups of its down projection: on a
CPU with AMX, vLLM 0.32 repacks GPTQ weights for its W4A8 kernel (``VLLM_CPU_INT4_W4A8``), which fails at
load on a rank holding part of a group (384 wide, 1.5 groups: "shape '[8, 32, 1, 128]' is invalid");
on an AVX2-only CPU such a layout loads, and the first request dies in the missing `cpu_gemm_wna16` op
(the kernel ships in the AVX-512 build). The KV figures are fixed before any request; one test records
whether generation runs.

FP8 with 128x128 weight blocks: vLLM's CPU build cannot load an FP8 MoE without AMX (no FP8 MoE
backend, "Unsupported FP8 MoE backend: NONE"; its block-FP8 linear kernels also require AMX), which a
real server start proves on such CPUs. The TP rule is therefore checked against vLLM's own functions
(`fp8_utils.validate_fp8_block_shape_moe` / `validate_fp8_block_shape`, with vLLM's
`FusedMoEParallelConfig.make` deciding how experts are split and `ColumnParallelLinear`'s own
`_maybe_allow_fp8_block_shape_mismatch` letting a merged projection through) on the real shapes of
Qwen3-235B-A22B-FP8 (MoE), Qwen3-4B-FP8 (dense) and MiMo-V2-Flash (192-wide keys, 128-wide values), at
TP 1, 2, 4, 8 with and without expert parallelism; capacity.tensor_parallel_error must refuse exactly where
vLLM does.

Integer weights in groups (GPTQ, AWQ, W4A16): a row-parallel linear's share per rank must be whole groups.
vLLM's Marlin kernel (the CUDA build's choice for them) says so in ``can_implement``, which
vllm_group_probe.py asks on the real shapes of Llama 2 7B / 13B and Qwen2.5-72B (as published, and padded as
Qwen's Int4 upload is) with groups of 128, 32 and per channel, at TP 1, 2, 4, 8; capacity must refuse exactly
those.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

import capacity

from .harness import (
    BIG_KV_BYTES,
    ServerPool,
    ServerSpec,
    VllmEnv,
    VllmServer,
    build_model_from_fields,
    cache_config_labels,
    cpu_has_amx,
    exit_of,
    following,
    fp8_block_verdicts,
    kv_tokens_from_log,
    safetensors_bytes,
    server_pool_fixture,
)

pytestmark = pytest.mark.conformance

CPU_BLOCK_SIZE = 128

_LLAMA = {
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "hidden_size": 256,
    "intermediate_size": 512,
    "vocab_size": 512,
    "max_position_embeddings": 2048,
}
MODELS: dict[str, dict[str, Any]] = {
    "gptq-llama": {**_LLAMA, "_quantize": {"method": "gptq", "bits": 4, "group_size": 128}},
    # Qwen3-MoE with 128x128 FP8 blocks on the experts only (attention and router bf16, listed in
    # ignored_layers), so the engine reaches the fused-MoE weights before any FP8 linear kernel.
    "fp8-moe": {
        "model_type": "qwen3_moe",
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "hidden_size": 256,
        "intermediate_size": 512,
        "moe_intermediate_size": 384,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "vocab_size": 512,
        "max_position_embeddings": 2048,
        "_quantize": {"method": "fp8", "weight_block_size": [128, 128], "ignore": ["self_attn", "mlp.gate"]},
    },
}

GPTQ_CASES = [
    ServerSpec(shape="gptq-llama", kv_cache_memory_bytes=BIG_KV_BYTES),
    ServerSpec(shape="gptq-llama", tensor_parallel_size=2, kv_cache_memory_bytes=BIG_KV_BYTES),
]


@pytest.fixture(scope="module")
def quant_models(vllm_env: VllmEnv) -> dict[str, Path]:
    return {name: build_model_from_fields(vllm_env, name, fields) for name, fields in MODELS.items()}


quant_servers = server_pool_fixture("quant_models", "vllm-quantized")


def _arch_of(config: dict[str, Any], name: str) -> capacity.Architecture:
    return capacity.architecture_from_config(config, name=name)


def _arch(model: Path, name: str) -> capacity.Architecture:
    with open(model / "config.json") as f:
        return _arch_of(json.load(f), name)


def test_gptq_checkpoint_weight_bytes_match_capacity(quant_models: dict[str, Path]) -> None:
    model = quant_models["gptq-llama"]
    with open(model / "config.json") as f:
        assert json.load(f)["quantization_config"]["quant_method"] == "gptq"
    stored = safetensors_bytes(model)
    predicted = capacity.weight_bytes(_arch(model, "gptq-llama"))
    assert abs(predicted - stored) <= 0.05 * stored, f"capacity {predicted} B, checkpoint {stored} B"


@pytest.mark.parametrize("spec", GPTQ_CASES, ids=[f"tp{s.tensor_parallel_size}" for s in GPTQ_CASES])
def test_gptq_kv_cache_and_tp_verdict_match_capacity(
    spec: ServerSpec, quant_servers: ServerPool, quant_models: dict[str, Path]
) -> None:
    arch = _arch(quant_models[spec.shape], spec.shape)
    assert capacity.tensor_parallel_error(arch, spec.tensor_parallel_size) is None
    # vLLM loads the GPTQ layout at this TP (or the test fails here)
    server = quant_servers.get(spec, then=following(GPTQ_CASES, spec))
    log = server.log()
    assert "Using CPUWNA16LinearKernel for AutoGPTQLinearMethod" in log
    labels = cache_config_labels(server.metrics_text())
    layout = capacity.kv_cache_layout(
        arch,
        tensor_parallel_size=spec.tensor_parallel_size,
        block_size=CPU_BLOCK_SIZE,
        kernel_block_alignment=CPU_BLOCK_SIZE,
        max_num_batched_tokens=2048,
        max_model_len=spec.max_model_len,
        max_in_flight_tokens=2048,
    )
    blocks = layout.num_blocks(spec.kv_cache_memory_bytes)
    assert (int(labels["block_size"]), int(labels["num_gpu_blocks"])) == (layout.block_size, blocks), labels
    assert kv_tokens_from_log(log) == [blocks * layout.block_size]


def test_gptq_generation_needs_the_avx512_kernel_on_cpu(quant_servers: ServerPool) -> None:
    """Records why the GPTQ server is checked for its KV cache only: on AVX2 the first GEMM dies."""
    server = quant_servers.get(GPTQ_CASES[-1])
    with open("/proc/cpuinfo") as f:
        avx512 = any(line.startswith("flags") and " avx512f" in line for line in f)
    try:
        server.complete("the kv cache", max_tokens=2)
    except requests.HTTPError:
        assert not avx512, "vLLM's GPTQ CPU kernel failed on a CPU with AVX-512"
        assert "object has no attribute 'cpu_gemm_wna16'" in server.log()
    else:
        assert avx512, "vLLM ran a GPTQ GEMM on a CPU without AVX-512: the KV-only checks can go further"
    finally:
        quant_servers.close()  # the engine is dead after the failed request


# Real configurations (the fields the TP rules read), as published on the hub.
_FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}
REAL_FP8: dict[str, dict[str, Any]] = {
    "qwen3-235b-a22b-fp8": {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "moe_intermediate_size": 1536,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_hidden_layers": 94,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "quantization_config": _FP8,
    },
    "qwen3-4b-fp8": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 2560,
        "intermediate_size": 9728,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 36,
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "quantization_config": _FP8,
    },
    # 192-wide keys and 128-wide values, 4 KV heads in the full layers and 8 in the sliding ones: from TP 4
    # a rank's K part is 1.5 blocks, which vLLM lets through in a merged QKV projection.
    "mimo-v2-flash": capacity.catalog_entry("mimo-v2-flash")["config"],
    "tiny-fp8-moe": {
        **{k: v for k, v in MODELS["fp8-moe"].items() if k != "_quantize"},
        "torch_dtype": "bfloat16",
    }
    | {"quantization_config": _FP8},
}
# TP degrees that divide the attention heads (the head rules are test_flags.py's business).
FP8_CASES = [
    (name, tp, ep)
    for name, config in REAL_FP8.items()
    for tp in (1, 2, 4, 8)
    if config["num_attention_heads"] % tp == 0
    for ep in (False, True)
]


def _fp8_checks(name: str, config: dict[str, Any], tp: int, ep: bool) -> list[dict[str, Any]]:
    """The FP8 shape checks vLLM runs while building the model's layers at this TP / EP (MiMo-V2's sliding
    layers with their own KV heads, and values narrower than keys, included)."""
    hidden, heads, head_dim = config["hidden_size"], config["num_attention_heads"], config["head_dim"]
    v_head_dim = config.get("v_head_dim", head_dim)
    base = {"tp": tp, "ep": ep}
    shapes = {"qkv": config["num_key_value_heads"], "swa_qkv": config.get("swa_num_key_value_heads")}
    checks = [
        {**base, "id": f"{name}:{tp}:{ep}:{part}", "kind": "qkv", "input_size": hidden, "heads": heads,
         "kv_heads": kv, "head_dim": head_dim, "v_head_dim": v_head_dim}
        for part, kv in shapes.items() if kv
    ] + [
        {**base, "id": f"{name}:{tp}:{ep}:o_proj", "kind": "dense", "parallel": "row",
         "input_size": heads * v_head_dim, "output_sizes": [hidden]},
    ]  # fmt: skip
    experts = config.get("num_experts") or config.get("n_routed_experts")
    if experts:
        checks.append(
            {
                **base,
                "id": f"{name}:{tp}:{ep}:experts",
                "kind": "moe",
                "intermediate_size": config["moe_intermediate_size"],
            }
        )
    if not experts or 0 in config.get("moe_layer_freq", [1]):  # MiMo-V2's first layer is a dense MLP
        width = config["intermediate_size"]
        checks += [
            {**base, "id": f"{name}:{tp}:{ep}:gate_up", "kind": "dense", "parallel": "column",
             "input_size": hidden, "output_sizes": [width, width]},
            {**base, "id": f"{name}:{tp}:{ep}:down", "kind": "dense", "parallel": "row",
             "input_size": width, "output_sizes": [hidden]},
        ]  # fmt: skip
    return checks


@pytest.fixture(scope="module")
def fp8_verdicts(vllm_env: VllmEnv, fp8_moe_server: VllmServer) -> dict[str, dict[str, Any]]:
    """vLLM's FP8 block checks on every case. Asks for ``fp8_moe_server`` so that the FP8 MoE server the
    last test waits for starts while this probe runs (each is mostly one process importing vLLM)."""
    cases = [c for name, tp, ep in FP8_CASES for c in _fp8_checks(name, REAL_FP8[name], tp, ep)]
    return fp8_block_verdicts(vllm_env, cases)


@pytest.mark.parametrize(
    ("name", "tp", "ep"), FP8_CASES, ids=[f"{n}-tp{tp}{'-ep' if ep else ''}" for n, tp, ep in FP8_CASES]
)
def test_fp8_block_tp_verdict_matches_vllms_loader_checks(
    name: str, tp: int, ep: bool, fp8_verdicts: dict[str, dict[str, Any]]
) -> None:
    config = REAL_FP8[name]
    refusals = [
        v["error"] for c in _fp8_checks(name, config, tp, ep) if not (v := fp8_verdicts[c["id"]])["accepted"]
    ]
    ours = capacity.tensor_parallel_error(_arch_of(config, name), tp, expert_parallel=ep)
    if refusals:
        assert ours is not None, f"capacity accepts TP {tp} (EP {ep}) for {name}; vLLM: {refusals[0]}"
    else:
        assert ours is None, (
            f"capacity refuses TP {tp} (EP {ep}) for {name} ({ours}); vLLM's checks accept it"
        )


def test_fp8_block_rule_is_the_one_the_issue_reports(fp8_verdicts: dict[str, dict[str, Any]]) -> None:
    """Qwen3-235B-A22B-FP8 at TP 8 without EP: vLLM's message from issues 52997 / 54178, word for word."""
    verdict = fp8_verdicts["qwen3-235b-a22b-fp8:8:False:experts"]
    assert verdict["error"] == (
        "The output_size of gate's and up's weight = 192 is not divisible by "
        "weight quantization block_n = 128."
    )
    assert fp8_verdicts["qwen3-235b-a22b-fp8:8:True:experts"]["accepted"]


def test_a_merged_projection_with_a_part_short_of_a_block_loads(
    fp8_verdicts: dict[str, dict[str, Any]],
) -> None:
    """MiMo-V2-Flash at TP 8: a rank's fused q/k/v rows are 1536 + 192 + 128 = 1,856, 14.5 blocks (the figure
    vLLM's mimo_v2.py loader names). validate_fp8_block_shape alone would refuse the 192-row K part; the
    ColumnParallelLinear the layer is lets it through, and capacity must accept it too."""
    verdict = fp8_verdicts["mimo-v2-flash:8:False:qkv"]
    assert verdict["accepted"] and verdict["per_partition"] == 1856, verdict
    assert capacity.valid_tensor_parallel_sizes(_arch_of(REAL_FP8["mimo-v2-flash"], "mimo-v2-flash"), 8) == [
        1,
        2,
        4,
        8,
    ]


FP8_MOE = ServerSpec(shape="fp8-moe", kv_cache_memory_bytes=16 * 2**20)


@pytest.fixture(scope="module")
def fp8_moe_server(
    vllm_env: VllmEnv, quant_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VllmServer]:
    """A server for the tiny FP8 MoE, launched (not waited for); stopped when the module is done."""
    log = tmp_path_factory.mktemp("vllm-fp8-moe") / "vllm-fp8-moe.log"
    server = VllmServer(vllm_env, FP8_MOE, quant_models["fp8-moe"], log)
    server.launch()
    yield server
    server.stop()


def test_fp8_moe_checkpoint_is_refused_by_the_cpu_build_without_amx(fp8_moe_server: VllmServer) -> None:
    """vLLM 0.32 CPU has FP8 MoE experts only with AMX; elsewhere it refuses to build the layer."""
    status, log = exit_of(fp8_moe_server)
    if cpu_has_amx():
        assert status is None, f"vLLM refused a tiny FP8 MoE on an AMX CPU:\n{log[-3000:]}"
        return
    assert status is not None, "vLLM served an FP8 MoE on a CPU without AMX: serve it in the KV tests"
    assert "ValueError: Unsupported FP8 MoE backend: NONE" in log, log[-3000:]


# ----- integer weights in groups (GPTQ, AWQ, W4A16): a group must not straddle two TP ranks ---------------

#: Real shapes of GPTQ/AWQ checkpoints (heads x head width, the MLP width) and their groups. Llama 2 13B's
#: 13,824-wide MLP leaves 1,728 per GPU at TP 8 (13.5 groups of 128); Qwen2.5-72B's 29,568 leaves half a group
#: at TP 2, which is why Qwen's Int4 and AWQ uploads pad it to 29,696.
GROUPED = {
    "llama-2-13b-g128": {"heads": 40, "head_dim": 128, "intermediate": 13824, "group": 128},
    "llama-2-7b-g128": {"heads": 32, "head_dim": 128, "intermediate": 11008, "group": 128},
    "qwen2.5-72b-g128": {"heads": 64, "head_dim": 128, "intermediate": 29568, "group": 128},
    "qwen2.5-72b-int4-padded": {"heads": 64, "head_dim": 128, "intermediate": 29696, "group": 128},
    "llama-2-13b-g32": {"heads": 40, "head_dim": 128, "intermediate": 13824, "group": 32},
    "llama-2-13b-channelwise": {"heads": 40, "head_dim": 128, "intermediate": 13824, "group": -1},
}
GROUPED_TPS = (1, 2, 4, 8)


def _grouped_arch(name: str) -> capacity.Architecture:
    s = GROUPED[name]
    hidden = s["heads"] * s["head_dim"]
    return capacity.architecture_from_config(
        {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": hidden,
            "intermediate_size": s["intermediate"],
            "num_hidden_layers": 2,
            "num_attention_heads": s["heads"],
            "num_key_value_heads": 8,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
            "torch_dtype": "float16",
            "quantization_config": {
                "quant_method": "gptq",
                "bits": 4,
                "group_size": s["group"],
                "desc_act": False,
                "sym": True,
            },
        },
        name=name,
    )


@pytest.fixture(scope="module")
def group_verdicts(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    """vLLM's Marlin verdict on each checkpoint's row-parallel linears (o_proj, down_proj) at each TP."""
    cases = [
        {"id": f"{name}:{tp}:{layer}", "input_size": width, "output_size": s["heads"] * s["head_dim"],
         "tp": tp, "group_size": s["group"]}
        for name, s in GROUPED.items()
        for tp in GROUPED_TPS
        for layer, width in (("o_proj", s["heads"] * s["head_dim"]), ("down_proj", s["intermediate"]))
    ]  # fmt: skip
    probe = Path(__file__).parent / "vllm_group_probe.py"
    out = vllm_env.run([str(probe)], stdin=json.dumps(cases), timeout=300)
    return {answer["id"]: answer for answer in json.loads(out.strip().splitlines()[-1])}


@pytest.mark.parametrize(("name", "tp"), [(n, tp) for n in GROUPED for tp in GROUPED_TPS])
def test_a_group_split_across_gpus_is_refused_where_vllms_marlin_refuses_it(
    name: str, tp: int, group_verdicts: dict[str, dict[str, Any]]
) -> None:
    verdicts = [group_verdicts[f"{name}:{tp}:{layer}"] for layer in ("o_proj", "down_proj")]
    refusals = [v["reason"] for v in verdicts if not v["accepted"]]
    ours = capacity.tensor_parallel_error(_grouped_arch(name), tp)
    if refusals:
        assert ours is not None and "quantization groups" in ours, f"capacity: {ours}; vLLM: {refusals[0]}"
    else:
        assert ours is None, f"capacity refuses TP {tp} for {name} ({ours}); vLLM's Marlin accepts it"


def test_the_group_rule_refuses_somewhere_and_accepts_somewhere(
    group_verdicts: dict[str, dict[str, Any]],
) -> None:
    assert {v["accepted"] for v in group_verdicts.values()} == {True, False}
    assert group_verdicts["qwen2.5-72b-g128:2:down_proj"]["reason"] == (
        "in_features per partition 14784 is not divisible by group_size = 128."
    )
    assert group_verdicts["qwen2.5-72b-int4-padded:8:down_proj"]["accepted"]
