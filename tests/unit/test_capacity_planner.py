"""The planner and the roofline: choices, refusals that name the fix, calibration, MoE and MLA behaviour.

Pure functions over catalog models and GPUs; nothing is faked.
"""

from __future__ import annotations

import re

import pytest

import capacity as c

H100 = c.gpu_spec("h100-sxm")


def plan(model: str, gpu: str = "h100-sxm", *, calibration: float = 1.0, **kw: object) -> c.PlanResult:
    workload = c.Workload(
        **{
            k: kw.pop(k)
            for k in list(kw)
            if k in ("max_model_len", "prompt_tokens", "output_tokens", "concurrency")
        }
    )
    slo = c.SLO(**{k: kw.pop(k) for k in list(kw) if k in ("tpot_seconds", "ttft_seconds")})
    return c.plan(
        c.catalog_architecture(model), c.gpu_spec(gpu), workload, slo, c.Limits(**kw), calibration=calibration
    )


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"model": "llama-3.1-405b", "gpu": "a100-40gb", "max_model_len": 8192}, "GPU with more memory"),
        (
            {
                "model": "llama-3.1-70b",
                "max_model_len": 131072,
                "tensor_parallel_size": 2,
                "kv_cache_dtype": "auto",
            },
            "fp8 KV cache",
        ),
        (
            {
                "model": "llama-3.1-70b",
                "max_model_len": 131072,
                "tensor_parallel_size": 2,
                "kv_cache_dtype": "auto",
            },
            "a shorter max-model-len",
        ),
        ({"model": "llama-3.1-70b", "max_model_len": 8192, "max_gpus": 1}, "TP 2, raise the limit of 1"),
        ({"model": "llama-3.1-70b", "max_model_len": 8192, "concurrency": 4096}, "raise the GPU limit"),
        (
            {
                "model": "llama-3.1-70b",
                "gpu": "l4",
                "max_model_len": 4096,
                "tpot_seconds": 0.01,
                "gpus_per_node": 8,
            },
            "TPOT",
        ),
        (
            {"model": "llama-3.1-8b", "max_model_len": 8192, "prompt_tokens": 8000, "ttft_seconds": 0.001},
            "TTFT",
        ),
        # 811.7 GB over 16 L40S is 47 GiB per GPU against a 40.5 GiB budget: the next larger layout
        # (TP 8 x PP 2) does not hold the weights either, so the fix named is the smallest one that does.
        ({"model": "llama-3.1-405b", "gpu": "l40s", "max_model_len": 8192}, "(TP 8 x PP 3 over 3 nodes"),
    ],
    ids=[
        "weights-too-big",
        "long-context-fp8",
        "long-context-shorter",
        "one-gpu-budget",
        "concurrency",
        "tpot-slo",
        "ttft-slo",
        "the-larger-layout-named-holds-the-weights",
    ],
)
def test_infeasible_reason_names_the_fix(kwargs, fragment):
    kw = dict(kwargs)
    result = plan(kw.pop("model"), kw.pop("gpu", "h100-sxm"), **kw)
    assert not result.feasible and result.plan is None
    assert fragment in result.reason
    assert "\n" not in result.reason


@pytest.mark.parametrize(
    ("model", "named", "not_named"),
    [
        ("llama-3.1-70b", "llama-3.1-70b-fp8", None),
        # A NAS-pruned Llama 70B: its width, depth and vocabulary are the 70B's, its layers are not.
        ("llama-3.3-nemotron-super-49b", "FP8, AWQ, GPTQ", "llama-3.1-70b-fp8"),
        # V3.2 adds the sparse-attention indexer to V3.1's layers: another model, not another format.
        ("deepseek-v3.2", "FP8, AWQ, GPTQ", "deepseek-v3.1-nvfp4"),
    ],
)
def test_a_quantized_checkpoint_is_offered_only_of_the_same_model(model, named, not_named):
    result = plan(model, max_model_len=8192, max_gpus=1)
    assert not result.feasible and named in result.reason
    assert not_named is None or not_named not in result.reason


def test_plan_meets_slos_and_uses_one_node():
    result = plan("llama-3.1-70b", max_model_len=8192, tpot_seconds=0.05, concurrency=64)
    assert result.feasible and result.plan and result.prediction
    assert result.prediction.tpot_seconds <= 0.05
    assert result.plan.gpus <= 8
    assert result.plan.max_num_seqs * result.plan.replicas >= 64
    assert result.candidates[0].feasible


#: Llama-3.1-8B on one H100, 1024-token prompts and 256-token outputs, bf16 KV.
LLAMA8_TP1 = {
    "max_model_len": 8192,
    "prompt_tokens": 1024,
    "output_tokens": 256,
    "tensor_parallel_size": 1,
    "kv_cache_dtype": "auto",
}


def test_tighter_tpot_slo_shrinks_max_num_seqs():
    loose = plan("llama-3.1-8b", **LLAMA8_TP1)
    tight = plan("llama-3.1-8b", **LLAMA8_TP1, tpot_seconds=0.012)
    assert loose.plan and tight.plan and tight.prediction
    assert tight.plan.max_num_seqs < loose.plan.max_num_seqs
    assert tight.prediction.tpot_seconds <= 0.012


def test_calibration_multiplies_tpot_and_can_make_a_plan_smaller():
    base = plan("llama-3.1-8b", **LLAMA8_TP1, tpot_seconds=0.02)
    slow = plan("llama-3.1-8b", **LLAMA8_TP1, tpot_seconds=0.02, calibration=1.3)
    assert base.plan and slow.plan and slow.prediction
    assert slow.plan.max_num_seqs < base.plan.max_num_seqs
    assert slow.prediction.tpot_seconds <= 0.02


@pytest.mark.parametrize(
    "calibration", [0.0, -1.0, float("nan"), float("inf")], ids=["zero", "neg", "nan", "inf"]
)
def test_bad_calibration_is_an_input_error(calibration):
    with pytest.raises(c.CapacityError, match="calibration"):
        plan("llama-3.1-8b", max_model_len=8192, calibration=calibration)


def test_fp8_kv_cache_on_a100_wins_only_where_it_saves_gpus_and_says_what_serves_it():
    """vLLM 0.32 keeps an fp8 KV cache on SM80 (FlashInfer or Triton attention dequantize it; the
    conformance suite asks the backends): offered on the A100, chosen over the model's dtype only where it
    takes fewer GPUs, since without fp8 tensor cores it buys capacity, not speed."""
    light = plan("llama-3.1-8b", "a100-80gb", max_model_len=8192, concurrency=32)
    assert {cand.kv_cache_dtype for cand in light.candidates} == {"auto", "fp8"}
    assert light.plan is not None and light.plan.kv_cache_dtype == "auto" and light.plan.gpus == 1
    heavy = plan("llama-3.1-8b", "a100-80gb", max_model_len=8192, concurrency=100)
    assert heavy.plan is not None and (heavy.plan.kv_cache_dtype, heavy.plan.gpus) == ("fp8", 1)
    auto = plan("llama-3.1-8b", "a100-80gb", max_model_len=8192, concurrency=100, kv_cache_dtype="auto")
    assert auto.plan is not None and auto.plan.gpus == 2
    assert any("no fp8 tensor cores" in w and "Triton" in w for w in heavy.warnings)
    assert not any("tensor cores" in w for w in light.warnings)


def test_mla_fp8_is_flagged():
    mla = plan("deepseek-v2-lite", max_model_len=8192, kv_cache_dtype="fp8", tensor_parallel_size=1)
    assert mla.feasible and any("quality risk" in w for w in mla.warnings)


def test_vllm_args_are_the_six_flags():
    result = plan("qwen2.5-7b", max_model_len=16384, tensor_parallel_size=2, kv_cache_dtype="fp8")
    assert result.plan is not None
    args = result.plan.vllm_args()
    assert args[0::2] == [
        "--tensor-parallel-size",
        "--max-num-seqs",
        "--max-model-len",
        "--kv-cache-dtype",
        "--gpu-memory-utilization",
        "--max-num-batched-tokens",
    ]
    assert args[1::2] == [
        "2",
        str(result.plan.max_num_seqs),
        "16384",
        "fp8",
        "0.9",
        str(result.plan.max_num_batched_tokens),
    ]


def test_plan_result_to_dict_round_trips_plan_values():
    result = plan("mixtral-8x7b", max_model_len=32768, concurrency=32)
    assert result.plan is not None
    d = result.to_dict()
    assert d["plan"] == result.plan.to_dict()
    assert d["vllm_args"] == result.plan.vllm_args()
    assert len(d["candidates"]) == len(result.candidates)


def test_every_catalog_model_plans_on_h200_without_crashing():
    for model in c.catalog_ids():
        arch = c.catalog_architecture(model)
        result = c.plan(
            arch,
            c.gpu_spec("h200"),
            c.Workload(max_model_len=min(8192, arch.max_position_embeddings)),
            c.SLO(),
            c.Limits(),
        )
        assert result.reason


# ----- roofline --------------------------------------------------------------------------------------------


def test_gqa_does_not_cut_tpot_8x_at_small_batch():
    """Reference note: at batch 1 weights dominate, so MHA -> GQA-8 barely moves TPOT."""
    import dataclasses

    gqa = c.catalog_architecture("llama-3-70b")
    mha = dataclasses.replace(gqa, num_kv_heads=64)
    step = {
        n: c.decode_step(a, H100, tensor_parallel_size=8, batch=1, context_tokens=8192).roofline_floor_seconds
        for n, a in (("gqa", gqa), ("mha", mha))
    }
    assert 1.0 < step["mha"] / step["gqa"] < 2.0  # 8x fewer KV bytes, not even 2x faster


@pytest.mark.parametrize(
    ("batch", "bottleneck"),
    [(1, "weights"), (51, "weights"), (52, "kv_cache"), (256, "kv_cache")],
    ids=["b1", "b51-below-crossover", "b52-crossover", "b256"],
)
def test_bottleneck_and_crossover_llama70(batch, bottleneck):
    step = c.decode_step(
        c.catalog_architecture("llama-3-70b"), H100, tensor_parallel_size=1, batch=batch, context_tokens=8192
    )
    assert step.crossover_batch == 52  # 138.998 GB of streamed weights / 2.684 GB per 8K sequence = 51.8
    assert step.bottleneck == bottleneck


def test_compute_bottleneck_at_long_prefill_sized_batch_of_short_contexts():
    step = c.decode_step(
        c.catalog_architecture("llama-3.1-8b"), H100, tensor_parallel_size=1, batch=1024, context_tokens=16
    )
    assert step.bottleneck == "compute"


def test_moe_reads_only_touched_experts():
    arch = c.catalog_architecture("mixtral-8x7b")
    one = c.decode_step(arch, H100, tensor_parallel_size=2, batch=1, context_tokens=1024)
    many = c.decode_step(arch, H100, tensor_parallel_size=2, batch=256, context_tokens=1024)
    # batch 1 touches 2 of 8 experts; a big batch touches all 8
    assert one.weight_bytes_read < 0.4 * many.weight_bytes_read
    assert many.weight_bytes_read == pytest.approx(
        c.weight_bytes_per_gpu(arch, 2) - 32000 * 4096 * 2 / 2, rel=1e-3
    )


def test_mla_kv_reads_do_not_shrink_with_tp():
    arch = c.catalog_architecture("deepseek-v3")
    kv = [
        c.decode_step(arch, H100, tensor_parallel_size=tp, batch=8, context_tokens=4096).kv_cache_bytes_read
        for tp in (1, 8)
    ]
    assert kv[0] == kv[1] == 8 * 4096 * 61 * 576 * 2


def test_communication_only_with_tp():
    arch = c.catalog_architecture("llama-3-70b")
    assert (
        c.decode_step(arch, H100, tensor_parallel_size=1, batch=8, context_tokens=128).communication_seconds
        == 0
    )
    assert (
        c.decode_step(arch, H100, tensor_parallel_size=4, batch=8, context_tokens=128).communication_seconds
        > 0
    )


def test_efficiency_is_overridable_and_validated():
    arch = c.catalog_architecture("llama-3-8b")
    ideal = c.Efficiency(
        hbm=1.0,
        compute=1.0,
        interconnect=1.0,
        allreduce_latency_seconds=0,
        step_overhead_seconds=0,
        sequence_layer_overhead_seconds=0,
    )
    step = c.decode_step(arch, H100, tensor_parallel_size=1, batch=1, context_tokens=1024, efficiency=ideal)
    assert step.predicted_seconds == pytest.approx(step.roofline_floor_seconds)
    with pytest.raises(c.CapacityError, match="fraction"):
        c.Efficiency(hbm=1.5)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"batch": 0}, "batch"),
        ({"context_tokens": -1}, "context"),
        ({"tensor_parallel_size": 3}, "does not divide"),
    ],
    ids=["zero-batch", "negative-context", "invalid-tp"],
)
def test_decode_step_bad_input(kwargs, fragment):
    args = {"tensor_parallel_size": 1, "batch": 1, "context_tokens": 16} | kwargs
    with pytest.raises(c.CapacityError, match=fragment):
        c.decode_step(c.catalog_architecture("llama-3-70b"), H100, **args)


# ----- GPUs and memory --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "gpu_id"),
    [
        ("h100-sxm", "h100-sxm"),
        ("NVIDIA-H100-80GB-HBM3", "h100-sxm"),
        ("nvidia-h100-80gb-hbm3", "h100-sxm"),
        ("NVIDIA-A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA-L40S", "l40s"),
        ("NVIDIA-H200", "h200"),
        ("B200", "b200"),
        ("AMD-Instinct-MI300X", "mi300x"),
        ("NVIDIA-H100-80GB-HBM3-SHARED", "h100-sxm"),
    ],
    ids=["id", "gfd-label", "lower-case", "a100-label", "l40s", "h200", "upper-id", "amd", "gfd-shared"],
)
def test_gpu_lookup(key, gpu_id):
    assert c.gpu_spec(key).id == gpu_id


def test_gpu_catalog_has_the_nine_gpus():
    assert {"h100-sxm", "h100-pcie", "h200", "a100-80gb", "a100-40gb", "l40s", "l4", "b200", "mi300x"} <= set(
        c.gpu_ids()
    )
    for gpu_id in c.gpu_ids():
        gpu = c.gpu_spec(gpu_id)
        assert gpu.supports_fp8 == (gpu.fp8_flops_per_second > 0)


def test_unknown_gpu_lists_accepted():
    with pytest.raises(c.CapacityError, match="h100-sxm"):
        c.gpu_spec("tpu-v5e")


def test_memory_per_gpu_accounts_every_byte():
    arch = c.catalog_architecture("llama-3.1-70b")
    m = c.memory_per_gpu(arch, H100, tensor_parallel_size=4, gpu_memory_utilization=0.9, max_num_seqs=256)
    assert m.budget_bytes == pytest.approx(0.9 * 79.18 * 2**30, rel=1e-4)
    rest = m.budget_bytes - m.weights_bytes - m.activation_bytes - m.other_bytes - m.kv_cache_bytes
    block = 16 * 80 * 2 * 2 * 128 * 2  # 16 tokens x 80 layers x K,V x 2 heads per GPU x 128 x bf16
    assert 0 <= rest < block
    assert m.num_blocks * block == m.kv_cache_bytes
    assert m.other_bytes == c.CUDA_GRAPH_RESERVE_BYTES + c.NON_TORCH_OVERHEAD_BYTES + c.NCCL_RESERVE_BYTES


def test_weights_per_gpu_split_vocab_and_replicate_kv_projections():
    arch = c.catalog_architecture("llama-3-70b")
    tp8, tp16 = c.weight_bytes_per_gpu(arch, 8), c.weight_bytes_per_gpu(arch, 16)
    kv_proj_one_head = 80 * 2 * 8192 * 128 * 2
    # at TP16 each GPU still holds one whole KV head's projections, so weights do not halve exactly
    norms = (80 * 2 * 8192 + 8192) * 2  # replicated on every rank
    assert tp16 == tp8 // 2 + kv_proj_one_head // 2 + norms // 2


def test_prefill_share_slows_steps_and_shrinks_the_batch():
    """With 4 prompt tokens per output token, chunked prefill rides in the decode steps and costs compute."""
    arch = c.catalog_architecture("llama-3.1-70b")
    step = c.roofline.StepModel(arch, H100, layout=c.Layout(tensor_parallel_size=8), kv_cache_dtype="auto")
    decode_only = step.predicted_seconds(256, 4608)
    mixed = step.predicted_seconds(256, 4608, 256 * 4.0, 4096)
    # 1024 prompt tokens of a 70B model over 8 GPUs are ~18 ms of ideal tensor-core time on top of the step
    assert mixed - decode_only > 0.015
    with_mix = plan(
        "llama-3.1-70b",
        max_model_len=8192,
        prompt_tokens=4096,
        output_tokens=1024,
        tpot_seconds=0.05,
        tensor_parallel_size=8,
        kv_cache_dtype="fp8",
    )
    assert with_mix.plan and with_mix.prediction
    assert with_mix.prediction.prefill_tokens_per_step == with_mix.prediction.batch_per_replica * 4.0
    assert with_mix.prediction.tpot_seconds <= 0.05
    assert with_mix.plan.max_num_seqs < 521  # decode-only sizing would allow 521 at this SLO


@pytest.mark.parametrize(
    ("model", "gpu", "workload", "slo", "limits", "binding"),
    [
        (
            "llama-3.1-8b",
            "h200",
            {"max_model_len": 2048, "prompt_tokens": 100, "output_tokens": 1000},
            {},
            {"kv_cache_dtype": "fp8"},
            "vllm-cap",
        ),
        (
            "llama-3.1-8b",
            "h200",
            {"max_model_len": 2048, "prompt_tokens": 100, "output_tokens": 1000},
            {},
            {"max_num_seqs": 10},
            "pinned",
        ),
        ("llama-3.1-70b", "h100-sxm", {"max_model_len": 8192}, {}, {"tensor_parallel_size": 4}, "memory"),
        (
            "llama-3.1-8b",
            "h100-sxm",
            {"max_model_len": 8192, "prompt_tokens": 8000, "output_tokens": 16},
            {},
            {"tensor_parallel_size": 1},
            "prefill",
        ),
        (
            "llama-3.1-70b",
            "h200",
            {"max_model_len": 8192, "prompt_tokens": 2048, "output_tokens": 128},
            {"tpot_seconds": 0.04},
            {"tensor_parallel_size": 4},
            "tpot",
        ),
        (
            "llama-3.1-8b",
            "h100-sxm",
            {"max_model_len": 8192, "prompt_tokens": 4000, "output_tokens": 400},
            {"ttft_seconds": 0.2},
            {"tensor_parallel_size": 1},
            "ttft",
        ),
    ],
    ids=["vllm-cap", "pinned", "memory", "prefill", "tpot", "ttft"],
)
def test_each_batch_rule_binds_and_is_named(model, gpu, workload, slo, limits, binding):
    result = c.plan(
        c.catalog_architecture(model),
        c.gpu_spec(gpu),
        c.Workload(**workload),
        c.SLO(**slo),
        c.Limits(**limits),
    )
    assert result.feasible and result.plan and result.prediction, result.reason
    bound = result.prediction.binding
    assert bound.constraint == binding
    assert result.plan.max_num_seqs == bound.sequences
    assert all(limit.sequences >= bound.sequences for limit in result.prediction.limits)
    assert f"set by the {binding} limit" in result.reason
    assert result.to_dict()["predicted"]["max_num_seqs_bound_by"] == binding


def test_rule_lists_are_in_the_documented_order():
    from capacity import planner

    assert [r.__name__ for r in planner.FIT_RULES] == ["weights_fit_rule", "longest_sequence_rule"]
    assert [r.__name__ for r in planner.CAP_RULES] == [
        "vllm_cap_rule",
        "pinned_rule",
        "memory_rule",
        "prefill_rule",
    ]
    assert [r.__name__ for r in planner.LATENCY_RULES] == ["tpot_rule", "ttft_rule"]


# ----- weights quantized at load (spec.tuning.quantization) ------------------------------------------------


def _seventy_b_on_one_h100(quantization: str) -> c.PlanResult:
    return c.plan(
        c.catalog_architecture("llama-3.1-70b"),
        H100,
        c.Workload(max_model_len=2048),
        c.SLO(),
        c.Limits(max_gpus=1, quantization=quantization),
    )


def test_quantization_none_never_changes_the_model_and_names_the_way_out():
    result = _seventy_b_on_one_h100("none")
    assert not result.feasible
    assert "--quantization fp8_per_tensor" in result.reason and "spec.tuning.quantization" in result.reason


@pytest.mark.parametrize("quantization", ["auto", "fp8"])
def test_fp8_at_load_fits_what_bf16_cannot_and_says_so(quantization):
    result = _seventy_b_on_one_h100(quantization)
    assert result.feasible and result.plan is not None
    assert result.plan.quantization == "fp8_per_tensor"
    assert result.plan.vllm_args()[-2:] == ["--quantization", "fp8_per_tensor"]
    assert any("changes the model's numerics" in w for w in result.warnings)
    assert result.memory is not None and result.memory.weights_bytes < 75 * 10**9


def test_auto_keeps_the_checkpoint_when_it_serves():
    result = c.plan(
        c.catalog_architecture("llama-3.1-8b"),
        H100,
        c.Workload(max_model_len=8192),
        c.SLO(),
        c.Limits(max_gpus=1, quantization="auto"),
    )
    assert result.feasible and result.plan is not None and result.plan.quantization is None


def test_a_quantized_checkpoint_is_never_requantized():
    arch = c.architecture_from_config(
        {
            **c.catalog_entry("qwen3-235b-a22b")["config"],
            "quantization_config": {
                "quant_method": "fp8",
                "activation_scheme": "dynamic",
                "weight_block_size": [128, 128],
            },
        }
    )
    result = c.plan(
        arch, c.gpu_spec("h200"), c.Workload(max_model_len=8192), c.SLO(), c.Limits(quantization="fp8")
    )
    assert result.plan is not None and result.plan.quantization is None
    assert any("already quantized (fp8 128x128 blocks" in w for w in result.warnings), result.warnings
    assert result.plan.tensor_parallel_size in (1, 2, 4)  # TP 8 splits the 1536-wide experts into 192


@pytest.mark.parametrize(
    ("quantization", "flag"),
    [
        ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": []}, True),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, False),
    ],
    ids=["fbgemm-fp8-deprecated", "fp8-not"],
)
def test_a_method_vllm_deprecated_is_served_with_the_flag_that_lets_vllm_load_it(
    quantization: dict[str, object], flag: bool
) -> None:
    """vLLM 0.32 refuses to load fbgemm_fp8 (Meta's Llama-3.1-405B-Instruct-FP8) without
    --allow-deprecated-quantization: a plan without the flag renders pods whose engine never starts."""
    config = c.catalog_entry("llama-3.1-8b")["config"]
    arch = c.architecture_from_config({**config, "quantization_config": quantization})
    result = c.plan(arch, H100, c.Workload(max_model_len=8192), c.SLO(), c.Limits(max_gpus=1))
    assert result.plan is not None, result.reason
    assert result.plan.allow_deprecated_quantization is flag
    assert ("--allow-deprecated-quantization" in result.plan.vllm_args()) is flag
    assert any("deprecated" in w for w in arch.warnings) is flag


_NAMED = re.compile(r"one \d+-token sequence needs .* more GPUs \(TP (\d+)(?: x PP (\d+))?")


def _too_long(model: str, gpu: str, tp: int) -> str:
    arch, spec = c.catalog_architecture(model), c.gpu_spec(gpu)
    pinned = c.Limits(tensor_parallel_size=tp, kv_cache_dtype="auto")
    refused = c.plan(arch, spec, c.Workload(), c.SLO(), pinned)
    assert refused.plan is None and "-token sequence needs" in (refused.reason or ""), refused.reason
    return refused.reason or ""


@pytest.mark.parametrize(
    ("model", "gpu", "tp"),
    [
        ("llama-4-scout", "h100-sxm", 4),
        ("llama-4-scout", "a100-80gb", 2),
        ("llama-4-scout-fp8", "a100-40gb", 1),
    ],
)
def test_the_larger_layout_a_too_long_sequence_is_told_to_use_holds_it(model: str, gpu: str, tp: int) -> None:
    """The smallest larger layout can still be short of one max-model-len sequence (Llama 4 Scout's 10M
    tokens at TP 8 on one node): the refusal names the smallest that holds it, and it does."""
    named = _NAMED.search(_too_long(model, gpu, tp))
    assert named
    limits = c.Limits(
        tensor_parallel_size=int(named.group(1)),
        pipeline_parallel_size=int(named.group(2) or 1),
        kv_cache_dtype="auto",
        max_gpus=64,
    )
    result = c.plan(c.catalog_architecture(model), c.gpu_spec(gpu), c.Workload(), c.SLO(), limits)
    assert "-token sequence needs" not in (result.reason or ""), result.reason


def test_more_gpus_are_not_suggested_when_no_layout_of_four_nodes_holds_the_sequence() -> None:
    reason = _too_long("llama-4-scout-fp8", "l4", 4)
    assert "more GPUs" not in reason
    assert reason.endswith("needs fp8 KV cache, a shorter max-model-len or a GPU with more memory")
