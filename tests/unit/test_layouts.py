"""Layouts beyond one node and beyond TP: pipeline stages, DP attention with expert parallelism, replicas
that span nodes, and the plans the planner makes with them (issue: PP, DP + EP, LeaderWorkerSet)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import capacity as c
from kvright.conditions import Reason
from kvright.reconcile import desire
from tests.builders import llmd
from tests.unit.test_reconcile import H100, facts

H100_SXM = c.gpu_spec("h100-sxm")
H200 = c.gpu_spec("h200")


def _plan(
    model: str, gpu: c.GPU, *, max_len: int, concurrency: int | None = None, **limits: object
) -> c.PlanResult:
    return c.plan(
        c.catalog_architecture(model),
        gpu,
        c.Workload(max_model_len=max_len, concurrency=concurrency),
        c.SLO(),
        c.Limits(**limits),  # type: ignore[arg-type]
    )


# --- the rules --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layers", "pp", "sizes"),
    [
        (126, 2, [63, 63]),
        (61, 2, [31, 30]),
        (7, 4, [2, 2, 2, 1]),
        (10, 4, [2, 3, 3, 2]),
        (80, 3, [27, 27, 26]),
    ],
)
def test_pipeline_stages_cut_the_layers_as_vllm_get_pp_indices_does(
    layers: int, pp: int, sizes: list[int]
) -> None:
    """vLLM gives each stage layers // pp and the remainder, one each, to the stages just before the last."""
    base = c.catalog_architecture("llama-3.1-8b")
    arch = c.architecture_from_config(
        {**c.catalog_entry("llama-3.1-8b")["config"], "num_hidden_layers": layers}, name="cut"
    )
    assert base.num_layers == 32  # the catalog model is untouched
    stages = c.pipeline_stages(arch, pp)
    assert [s.stop - s.start for s in stages] == sizes
    assert [s.arch.num_layers for s in stages] == sizes
    assert stages[0].first and stages[-1].last and not any(s.first for s in stages[1:])
    assert [s.start for s in stages] == [sum(sizes[:i]) for i in range(pp)]


@given(model=st.sampled_from(c.catalog_ids()), pp=st.integers(2, 4))
@settings(max_examples=40, deadline=None)
def test_pipeline_stages_hold_every_weight_once(model: str, pp: int) -> None:
    """The stages' weights add up to the whole model's on a TP rank (a tied LM head is a copy on the last
    stage), and the KV bytes per token too."""
    _stages_hold_every_weight_once(model, pp)


@pytest.mark.parametrize("pp", [2, 3])
@pytest.mark.parametrize("model", ["kimi-k2.6-nvfp4", "qwen3.6-27b-nvfp4"])
def test_a_stage_weighs_its_layers_by_the_rules_that_name_them(model: str, pp: int) -> None:
    """Checkpoints whose quantization names layers (Kimi K2.6 NVFP4 leaves layer 0 bf16; Qwen3.6's mixed
    precision lists every layer's modules): a later stage's layers keep their checkpoint indices, so each
    stage weighs what the whole model weighs for them (the random test above found a stage starting over at
    layer 0 and taking layer 0's bf16 rule)."""
    _stages_hold_every_weight_once(model, pp)


def _stages_hold_every_weight_once(model: str, pp: int) -> None:
    arch = c.catalog_architecture(model)
    if pp > arch.num_layers:
        return
    tp = c.valid_tensor_parallel_sizes(arch, 8)[-1]
    stages = c.pipeline_stages(arch, pp)
    total = sum(c.weight_bytes_per_gpu(arch, tp, stage=s) for s in stages)
    tied_copy = arch.weight_groups.embedding / tp if arch.tie_word_embeddings else 0.0
    # Each stage's sub-model counts what follows the last layer, the real one on the last stage only: the
    # final norm, and DeepSeek-V4's hyper-connection head (hc mixes of the hc x hidden stream, hc biases and a
    # scale, fp32).
    hc = arch.hyper_connections
    head = arch.hidden_size * 2 + (4 * (hc * hc * arch.hidden_size + hc + 1) if hc else 0)
    if arch.embedding_replicated:
        # Inkling: vLLM's InklingModel builds its embedding (whole on every rank), the embedding's norm and
        # the LM head on every stage, not on the first or last alone.
        groups = arch.weight_groups
        head += groups.embedding + groups.lm_head / tp + arch.hidden_size * 2 * arch.embedding_norm
    assert total == pytest.approx(c.weight_bytes_per_gpu(arch, tp) + tied_copy + (pp - 1) * head, abs=pp + 1)
    per_token = sum(c.kv_cache_bytes_per_token(s.arch, tensor_parallel_size=tp) for s in stages)
    # (A DeepSeek-V4 layer compressing 128 tokens into one latent grows by a fraction of a byte a token:
    # each stage's sum is rounded down, once per rank.)
    assert per_token == pytest.approx(c.kv_cache_bytes_per_token(arch, tensor_parallel_size=tp), abs=pp * tp)


@pytest.mark.parametrize(
    ("layout", "fragment"),
    [
        (c.Layout(pipeline_parallel_size=200), "exceeds the 126 layers"),
        (c.Layout(tensor_parallel_size=2, expert_parallel=True), "needs a mixture-of-experts model"),
        (c.Layout(data_parallel_size=2), "without expert parallelism"),
        (c.Layout(tensor_parallel_size=8, gpus_per_node=4), "TP stays inside one node"),
        (c.Layout(tensor_parallel_size=4, pipeline_parallel_size=3), "without filling"),
    ],
)
def test_layout_rules_refuse_with_the_reason(layout: c.Layout, fragment: str) -> None:
    error = c.layout_error(c.catalog_architecture("llama-3.1-405b"), layout)
    assert error is not None and fragment in error


def test_expert_parallel_rules() -> None:
    arch = c.catalog_architecture("qwen3-235b-a22b-fp8")
    assert c.layout_error(arch, c.Layout(expert_parallel=True)) is not None  # one GPU: nothing to spread
    assert "exceeds the 128 experts" in (
        c.layout_error(arch, c.Layout(data_parallel_size=256, expert_parallel=True, gpus_per_node=256)) or ""
    )
    # 1536 / 8 = 192 is not whole 128x128 FP8 blocks: vLLM refuses pure TP 8; EP keeps experts whole.
    assert c.layout_error(arch, c.Layout(tensor_parallel_size=8)) is not None
    assert c.layout_error(arch, c.Layout(tensor_parallel_size=8, expert_parallel=True)) is None


def test_expert_parallel_places_whole_experts_as_vllm_does() -> None:
    """EP over E experts: the busiest GPU holds ceil(E / ep) whole experts (vLLM's determine_expert_map);
    with E divisible by the EP size that is exactly TP's share."""
    arch = c.catalog_architecture("deepseek-r1")
    w = arch.weight_groups
    one = w.routed_expert * arch.num_moe_layers
    tp8 = c.weight_bytes_per_gpu(arch, 8)
    ep8 = c.weight_bytes_per_gpu(arch, 8, layout=c.Layout(tensor_parallel_size=8, expert_parallel=True))
    assert ep8 == pytest.approx(tp8, abs=1)
    ep6 = c.weight_bytes_per_gpu(
        arch, 2, layout=c.Layout(tensor_parallel_size=2, data_parallel_size=3, expert_parallel=True)
    )
    no_experts = c.weight_bytes_per_gpu(arch, 2) - w.routed_experts_total / 2
    assert ep6 - no_experts == pytest.approx(math.ceil(256 / 6) * one, rel=1e-9)


def test_dp_attention_keeps_one_latent_per_engine() -> None:
    """TP copies the MLA latent onto every rank; DP engines each cache only their own sequences."""
    arch = c.catalog_architecture("deepseek-r1")
    tp8 = c.KVMemory(
        arch, H200, c.EngineConfig(layout=c.Layout(tensor_parallel_size=8), kv_cache_dtype="fp8")
    )
    dp8 = c.KVMemory(
        arch,
        H200,
        c.EngineConfig(layout=c.Layout(data_parallel_size=8, expert_parallel=True), kv_cache_dtype="fp8"),
    )
    assert dp8.layout.bytes_per_block == tp8.layout.bytes_per_block  # the same latent pages
    seqs_tp8 = tp8.max_batch(65536, 1024)
    seqs_dp8 = 8 * dp8.max_batch(65536, 1024)
    assert seqs_dp8 > 3 * seqs_tp8


def test_a_pipeline_adds_capacity_not_speed() -> None:
    """A pipeline's cycle streams the whole model's weights per TP rank: TP 8 x PP 2 reads weights as long
    as TP 8 does and is no faster at batch 1; only the KV reads split over the stages, so per GPU it
    serves fewer tokens than the single node it doubles."""
    arch = c.catalog_architecture("llama-3.1-405b")
    args = {"kv_cache_dtype": "fp8"}
    tp8 = c.roofline.StepModel(arch, H100_SXM, layout=c.Layout(tensor_parallel_size=8), **args)
    pp2 = c.roofline.StepModel(
        arch, H100_SXM, layout=c.Layout(tensor_parallel_size=8, pipeline_parallel_size=2), **args
    )
    assert pp2.predicted_seconds(1, 4096) > tp8.predicted_seconds(1, 4096)
    for batch in (1, 16, 128):
        assert pp2.step(batch, 4096).weight_read_seconds == pytest.approx(
            tp8.step(batch, 4096).weight_read_seconds
        )
        assert (
            batch / pp2.predicted_seconds(batch, 4096) / 16 < batch / tp8.predicted_seconds(batch, 4096) / 8
        )
    slow = c.roofline.StepModel(
        arch,
        H100_SXM,
        layout=c.Layout(tensor_parallel_size=8, pipeline_parallel_size=2),
        network_bytes_per_second=1e9,
        **args,
    )
    assert slow.predicted_seconds(64, 4096) > pp2.predicted_seconds(64, 4096)


# --- the plans ------------------------------------------------------------------------------------------


def test_405b_spans_two_nodes_with_sixteen_gpus_and_names_the_fix_with_eight() -> None:
    two = _plan("llama-3.1-405b", H100_SXM, max_len=8192, concurrency=16, max_gpus=16)
    assert two.feasible and two.plan is not None
    p = two.plan
    assert (p.nodes_per_replica, p.gpus_per_replica) == (2, 16)
    roles = p.vllm_args_by_role()
    assert set(roles) == {"leader", "worker"}
    assert "--headless" in roles["worker"] and "--headless" not in roles["leader"]
    assert roles["leader"][roles["leader"].index("--master-addr") + 1] == c.LEADER_ADDRESS_VARIABLE
    data = two.to_dict()
    assert data["plan"]["nodes_per_replica"] == 2 and data["vllm_args_by_role"] == roles

    one = _plan("llama-3.1-405b", H100_SXM, max_len=8192, concurrency=16, max_gpus=8)
    assert not one.feasible
    assert "over 2 nodes, raise the limit of 8 GPUs" in one.reason


def test_deepseek_r1_on_eight_h200_uses_dp_attention_with_ep() -> None:
    result = _plan("deepseek-r1", H200, max_len=65536, concurrency=64)
    assert result.feasible and result.plan is not None
    p = result.plan
    assert p.expert_parallel and p.data_parallel_size > 1
    chosen = result.candidates[0]
    tp8 = [x for x in result.candidates if x.layout == c.Layout(tensor_parallel_size=8)]
    assert tp8 and all(x.sequences_per_replica < chosen.sequences_per_replica for x in tp8)
    assert all(x.reason for x in tp8)  # each says why it lost
    assert p.vllm_args()[p.vllm_args().index("--data-parallel-size") + 1] == str(p.data_parallel_size)


@pytest.mark.parametrize("max_len", [4096, 8192, 32768])
@pytest.mark.parametrize("concurrency", [None, 8, 64])
def test_qwen3_235b_fp8_is_never_pure_tp8(max_len: int, concurrency: int | None) -> None:
    result = _plan("qwen3-235b-a22b-fp8", H100_SXM, max_len=max_len, concurrency=concurrency)
    for x in result.candidates:
        assert x.layout.expert_parallel or x.layout.tensor_parallel_size <= 4, x.layout
    if result.plan is not None:
        assert result.plan.expert_parallel or result.plan.tensor_parallel_size <= 4


def test_inside_one_node_tp_wins_over_a_pipeline() -> None:
    """PP is weighed to cross nodes (or when pinned): a model that fits one node keeps pure TP."""
    result = _plan("llama-3.1-70b", H100_SXM, max_len=8192, concurrency=64, max_gpus=16)
    assert result.plan is not None and result.plan.pipeline_parallel_size == 1
    assert all(x.layout.pipeline_parallel_size == 1 or x.layout.spans_nodes for x in result.candidates)
    pinned = _plan("llama-3.1-70b", H100_SXM, max_len=8192, tensor_parallel_size=2, pipeline_parallel_size=2)
    assert pinned.plan is not None and pinned.plan.layout.label == "TP 2 x PP 2"


def test_without_leader_worker_set_the_operator_names_what_to_install() -> None:
    spec = llmd("big").model("llama-3.1-405b").gpu(H100, max_gpus=16).context(8192, 1024, 256).concurrency(16)
    missing = desire(facts(spec.tpot_ms(100).spec()))
    assert missing.plan_feasible.reason == Reason.LEADER_WORKER_SET_MISSING
    assert "LeaderWorkerSet" in missing.plan_feasible.message and "2 " in missing.plan_feasible.message
    present = desire(facts(spec.tpot_ms(100).spec(), leader_worker_set=True))
    assert present.plan_feasible.status == "True", present.plan_feasible.message
    plan = present.fields["plan"]
    assert (plan["nodesPerReplica"], plan["gpusPerReplica"], plan["layout"]) == (2, 16, "TP 8 x PP 2")
    assert set(plan["vllmArgsByRole"]) == {"leader", "worker"}


def test_at_the_same_gpus_a_pipeline_must_beat_one_node_replicas_by_the_margin() -> None:
    """Llama-3.1-70B, 200 sequences on up to 32 H100s: TP 4 x PP 4 over two nodes is predicted at more
    output tokens/s per GPU than four TP 4 replicas on the same 16 GPUs, but by less than
    PIPELINE_MARGIN; its pipeline and network terms are not fitted, so the one-node replicas win and the
    pipeline's row says why."""
    from capacity import planner

    result = c.plan(
        c.catalog_architecture("llama-3.1-70b"),
        H100_SXM,
        c.Workload(max_model_len=8192, prompt_tokens=2048, output_tokens=256, concurrency=200),
        c.SLO(tpot_seconds=0.050),
        c.Limits(max_gpus=32),
    )
    assert result.plan is not None and not result.plan.layout.spans_nodes, result.reason
    chosen = result.candidates[0]
    pipelines = [x for x in result.candidates if x.feasible and x.stage == "lost" and x.layout.spans_nodes]
    faster = [
        x
        for x in pipelines
        if x.gpus == chosen.gpus
        and x.output_tokens_per_second_per_gpu > (chosen.output_tokens_per_second_per_gpu)
    ]
    assert faster, "expected a pipeline predicted faster per GPU at the same GPU count"
    for x in faster:
        assert (
            x.output_tokens_per_second_per_gpu
            < planner.PIPELINE_MARGIN * chosen.output_tokens_per_second_per_gpu
        )
        assert "a pipeline needs to beat one-node replicas" in x.reason
