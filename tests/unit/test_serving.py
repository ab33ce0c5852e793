"""capacity.serving, the one serving model: published TPOT, percentiles, and the planner and the control law
agreeing on every catalog model.

Nothing is faked. The published rows are measurements on real GPUs (tests/data/published_tpot.json, each
with its source); the agreement tests run the real planner (kvright.reconcile.desire) and the real control
law (kvright.feedback.decide) with an Observation that reports exactly what the plan predicted.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import capacity as c
from kvright.api import parse_spec
from kvright.cli import main
from kvright.control import Decision
from kvright.feedback import FeedbackFacts, decide, serving_curve
from kvright.inventory import GPUNode, summarize
from kvright.observe import Observation
from kvright.reconcile import Facts, Overrides, desire
from tests.builders import llmd

DATA = Path(__file__).resolve().parents[1] / "data" / "published_tpot.json"
ROWS: list[dict[str, Any]] = json.loads(DATA.read_text())["rows"]
NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)


def predicted_tpot_ms(row: dict[str, Any]) -> float:
    """The serving model's prediction for one published row, in the row's own setting."""
    arch = c.catalog_architecture(row["model"])
    if row["weight_dtype"] == "fp8":  # the row's weights are fp8: one byte per linear weight
        arch = dataclasses.replace(arch, weights=c.ONLINE_FP8)
    gpu = c.gpu_spec(row["gpu"])
    model = c.ServingModel(
        arch,
        gpu,
        c.EngineConfig(
            layout=c.Layout(tensor_parallel_size=row["tensor_parallel_size"]),
            kv_cache_dtype=row["kv_cache_dtype"],
            max_num_batched_tokens=c.default_max_num_batched_tokens(gpu),
        ),
    )
    batch, prompt, output = row["batch"], row["input_tokens"], row["output_tokens"]
    if row["statistic"] == "derived-from-e2e-latency":
        # vLLM's latency benchmark: one static batch, prefilled together, then decoded; the row is the
        # end-to-end latency over the output tokens, prefill included.
        seconds = model.batch_latency_seconds(batch, prompt_tokens=prompt, output_tokens=output) / output
    else:
        # A serving benchmark at fixed concurrency: the steady state, mean TPOT.
        seconds = c.Curve(model, c.Shape(prompt_tokens=prompt, output_tokens=output), 50).mean_seconds(batch)
    return seconds * 1e3


@pytest.mark.parametrize(
    "row",
    ROWS,
    ids=[
        f"{r['model']}-{r['gpu']}-tp{r['tensor_parallel_size']}-{r['weight_dtype']}-b{r['batch']}-"
        f"{r['input_tokens']}x{r['output_tokens']}"
        for r in ROWS
    ],
)
def test_published_tpot_within_15_percent(row: dict[str, Any]) -> None:
    predicted = predicted_tpot_ms(row)
    assert abs(predicted / row["tpot_ms"] - 1.0) <= 0.15, (
        f"predicted {predicted:.2f} ms vs {row['tpot_ms']} ms measured ({row['source']})"
    )


def test_published_rows_cover_small_models_at_batch_one_and_tp_up_to_four() -> None:
    """The table must hold the rows where one efficiency factor fails (fixed per-step costs)."""
    small_b1 = [r for r in ROWS if r["model"].endswith("8b") and r["batch"] == 1]
    assert {r["tensor_parallel_size"] for r in small_b1} >= {1, 2, 4}
    assert max(r["batch"] for r in ROWS) >= 64
    assert all(r["source"] and r["where"] for r in ROWS)


# -- percentiles ------------------------------------------------------------------------------------------


def _plan_json(capsys: Any, *args: str) -> dict[str, Any]:
    code = main(["plan", *args, "--json"])
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0, data["reason"]
    return data


@pytest.mark.parametrize(
    ("model", "gpu", "tp", "tpot_ms"),
    [
        ("llama-3.1-8b", "h100-sxm", "1", "20"),
        ("llama-3.1-70b", "h200", "4", "40"),
        ("qwen3-30b-a3b", "h100-sxm", "2", "20"),
        ("gemma-3-27b", "h200", "2", "35"),
    ],
)
def test_higher_percentile_never_plans_more_sequences(
    capsys: Any, model: str, gpu: str, tp: str, tpot_ms: str
) -> None:
    """On one layout, a stricter percentile only removes batches; across layouts the objective (output
    tokens/s per GPU within the SLO) can only fall."""
    shape = (
        "--max-model-len",
        "8192",
        "--prompt-tokens",
        "2048",
        "--output-tokens",
        "128",
        "--tpot-ms",
        tpot_ms,
    )
    seqs, objective = [], []
    for p in ("50", "90", "95", "99"):
        pinned = _plan_json(
            capsys, model, "--gpu", gpu, *shape, "--percentile", p, "--tensor-parallel-size", tp
        )
        free = _plan_json(capsys, model, "--gpu", gpu, *shape, "--percentile", p)
        for data in (pinned, free):
            assert data["predicted"]["percentile"] == int(p)
            assert data["predicted"]["tpot_seconds"] <= int(tpot_ms) / 1000.0
            assert data["predicted"]["tpot_seconds"] >= data["predicted"]["tpot_mean_seconds"]
        seqs.append(pinned["plan"]["max_num_seqs"])
        plan = free["plan"]
        objective.append(
            free["predicted"]["output_tokens_per_second"] / (plan["tensor_parallel_size"] * plan["replicas"])
        )
    assert seqs == sorted(seqs, reverse=True), seqs
    assert objective == sorted(objective, reverse=True), objective


@pytest.mark.parametrize(
    "args",
    [
        # A batched-token budget with more sequences and 1.6 % more throughput lost to vLLM's default at
        # p90 (the default was preferred within 3 %) and won at p95, where the default had fallen further:
        # 66 sequences per replica at p90, 72 at p95.
        pytest.param(
            ("qwen3-30b-a3b", "--gpu", "h200", "--tpot-ms", "15", "--max-model-len", "8192",
             "--concurrency", "64", "--output-tokens", "512", "--prompt-tokens", "2048"),
            id="qwen3-30b-a3b-budget",
        ),
        # The same with a TTFT target and 16K prompts: 16 at p95, 18 at p99.
        pytest.param(
            ("llama-3.1-70b", "--gpu", "h100-sxm", "--tpot-ms", "30", "--max-model-len", "32768",
             "--concurrency", "16", "--output-tokens", "1000", "--prompt-tokens", "16000",
             "--ttft-ms", "3000"),
            id="llama-3.1-70b-long-prompts-ttft",
        ),
    ],
)  # fmt: skip
def test_the_batched_token_budget_keeps_the_percentile_order(capsys: Any, args: tuple[str, ...]) -> None:
    plans = [_plan_json(capsys, *args, "--percentile", p) for p in ("50", "90", "95", "99")]
    keys = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "expert_parallel")
    layouts = {(*(d["plan"][k] for k in keys), d["plan"]["kv_cache_dtype"]) for d in plans}
    assert len(layouts) == 1, layouts  # one layout, so sequences per replica compare like for like
    seqs = [d["plan"]["max_num_seqs"] * d["plan"]["data_parallel_size"] for d in plans]
    assert seqs == sorted(seqs, reverse=True), seqs


def test_p99_binds_tighter_than_p50_when_the_tail_is_wide(capsys: Any) -> None:
    args = ("llama-3.1-70b", "--gpu", "h200", "--max-model-len", "8192", "--prompt-tokens", "2048")
    args += ("--output-tokens", "128", "--tpot-ms", "40", "--tensor-parallel-size", "4")
    p50 = _plan_json(capsys, *args, "--percentile", "50")
    p99 = _plan_json(capsys, *args, "--percentile", "99")
    assert p50["predicted"]["max_num_seqs_bound_by"] == "tpot"
    assert p99["plan"]["max_num_seqs"] < p50["plan"]["max_num_seqs"]


def test_tail_narrows_with_longer_outputs() -> None:
    """A request's TPOT averages its steps: the percentile's excess over the mean shrinks like 1/sqrt(n)."""
    arch, gpu = c.catalog_architecture("llama-3.1-8b"), c.gpu_spec("h100-sxm")
    model = c.ServingModel(arch, gpu, c.EngineConfig(max_num_batched_tokens=8192))
    short = model.at(64, c.Shape(prompt_tokens=2048, output_tokens=64))
    long = model.at(64, c.Shape(prompt_tokens=2048 * 16, output_tokens=64 * 16))
    assert short.tpot_sd_seconds > 0 and long.tpot_sd_seconds > 0
    assert long.tpot_sd_seconds / long.tpot_mean_seconds < short.tpot_sd_seconds / short.tpot_mean_seconds


def test_refusal_names_the_constraint_that_binds() -> None:
    """Llama-3.1-70B on one 8 x H200 node at 32K context, 16K prompts, TTFT 3 s, concurrency 48."""
    result = c.plan(
        c.catalog_architecture("llama-3.1-70b"),
        c.gpu_spec("h200"),
        c.Workload(max_model_len=32768, prompt_tokens=16384, output_tokens=256, concurrency=48),
        c.SLO(tpot_seconds=0.040, ttft_seconds=3.0, percentile=90),
        c.Limits(),
    )
    assert not result.feasible
    assert "set by the" in result.reason and "the other limits: " in result.reason
    for constraint in ("memory", "prefill", "tpot", "ttft"):
        assert constraint in result.reason


# -- calibration --------------------------------------------------------------------------------------------


def _histogram_curve() -> c.Curve:
    arch, gpu = c.catalog_architecture("llama-3.1-8b"), c.gpu_spec("h100-sxm")
    model = c.ServingModel(arch, gpu, c.EngineConfig(max_num_batched_tokens=8192))
    return c.Curve(model, c.Shape(prompt_tokens=2048, output_tokens=64), 90)


@pytest.mark.parametrize(
    ("scale", "tail"),
    [(1.0, 1.0), (1.3, 1.0), (1.0, 2.5), (0.8, 0.7)],
    ids=["as-predicted", "slower", "wider-tail", "faster-narrower"],
)
def test_learn_recovers_the_calibration_that_produced_the_observation(scale: float, tail: float) -> None:
    """Observe what a replica calibrated by (scale, tail) would report, through vLLM's histogram; one
    full-weight update recovers the scale exactly and a tail that reproduces the reading (within the 1%
    a histogram reading can tell apart; a tail whose reading differs by more is recovered itself)."""
    curve, batch = _histogram_curve(), 96
    truth = c.Calibration(scale=scale, tail=tail)
    observed_p = curve.measured_seconds(batch, truth)
    got = c.learn(
        c.UNCALIBRATED,
        predicted_mean_seconds=curve.mean_seconds(batch),
        percentile_at=lambda cal: curve.measured_seconds(batch, cal),
        observed_mean_seconds=curve.point(batch, truth).tpot_mean_seconds,
        observed_percentile_seconds=observed_p,
        alpha=1.0,
        bounds=(0.5, 4.0),
    )
    assert got.scale == pytest.approx(scale, rel=1e-9)
    assert curve.measured_seconds(batch, got) == pytest.approx(observed_p, rel=0.0101)
    if abs(observed_p / curve.measured_seconds(batch, c.Calibration(scale=scale)) - 1.0) > 0.01:
        assert got.tail == pytest.approx(tail, rel=1e-3)


@pytest.mark.parametrize(
    ("observed_mean", "observed_p", "expected"),
    [
        (math.nan, 0.044, (1.0, 1.0)),
        (0.050, math.inf, (1.125, 1.0)),
        (0.050, None, (1.125, 1.0)),
    ],
    ids=["nan-mean-and-a-flat-percentile-keep-it", "infinite-percentile-leaves-the-tail", "no-percentile"],
)
def test_learn_survives_bad_numbers(
    observed_mean: float, observed_p: float | None, expected: tuple[float, float]
) -> None:
    got = c.learn(
        c.UNCALIBRATED,
        predicted_mean_seconds=0.040,
        percentile_at=lambda cal: cal.scale * 0.044,  # a model whose spread does not move the percentile
        observed_mean_seconds=observed_mean,
        observed_percentile_seconds=observed_p,
        alpha=0.5,
        bounds=(0.5, 4.0),
    )
    assert (got.scale, got.tail) == pytest.approx(expected)


def test_the_histogram_reads_a_narrow_distribution_at_its_bucket() -> None:
    """Every TPOT between 10 and 25 ms reads as 23.5 ms at p90 (Prometheus interpolates in the bucket);
    the plan is sized on the engine's percentile, the calibration learned on the reading."""
    buckets = c.TPOT_HISTOGRAM_BUCKETS
    assert c.histogram_quantile(0.9, 0.0105, 0.0002, buckets) == pytest.approx(0.0235, abs=1e-4)
    assert c.histogram_quantile(0.5, 0.025, 0.0, buckets) == pytest.approx(0.0175)
    curve = _histogram_curve()
    for batch in (1, 32, 200):
        point = curve.point(batch)
        assert curve.tpot_seconds(batch) == point.tpot_seconds(90)
        assert curve.measured_seconds(batch) == point.tpot_seconds(90, buckets)


def test_calibration_is_applied_the_same_way_everywhere() -> None:
    arch, gpu = c.catalog_architecture("qwen3-32b"), c.gpu_spec("h200")
    model = c.ServingModel(
        arch, gpu, c.EngineConfig(layout=c.Layout(tensor_parallel_size=2), kv_cache_dtype="fp8")
    )
    curve = c.Curve(model, c.Shape(prompt_tokens=1500, output_tokens=300), 95, buckets=None)
    cal = c.Calibration(scale=1.3, tail=1.1)
    for batch in (1, 17, 200):
        point = model.at(batch, curve.shape)
        mean, sd = point.tpot_mean_seconds, point.tpot_sd_seconds
        assert curve.tpot_seconds(batch, cal) == pytest.approx(1.3 * (mean + c.percentile_z(95) * 1.1 * sd))
        assert curve.point(batch, cal).tpot_mean_seconds == pytest.approx(1.3 * mean)


def _learn_at(curve: c.Curve, previous: c.Calibration, batch: int, observed_mean: float) -> c.Calibration:
    return c.learn(
        previous,
        predicted_mean_seconds=curve.mean_seconds(batch),
        fixed_seconds=curve.fixed_seconds(batch),
        percentile_at=lambda cal: curve.measured_seconds(batch, cal),
        observed_mean_seconds=observed_mean,
        observed_percentile_seconds=None,
        alpha=0.5,
        bounds=(0.5, 4.0),
    )


@pytest.mark.parametrize(
    ("scale", "batch_scale"),
    [(1.0, 1.0), (2.5, 0.2), (1.5, 3.0), (0.7, 1.0)],
    ids=["as-predicted", "large-fixed-overhead", "heavy-per-sequence-work", "faster-by-a-constant"],
)
def test_windows_at_two_batches_recover_a_model_wrong_in_shape(scale: float, batch_scale: float) -> None:
    """An engine whose step is ``scale x (F + batch_scale x (t - F))`` of the model's: a window at one
    batch cannot tell a fixed cost from a per-batch one; a second window at a batch far enough away
    recovers both exactly, and the calibrated curve then predicts every other batch."""
    curve = _histogram_curve()
    truth = c.Calibration(scale=scale, batch_scale=batch_scale)
    cal = c.UNCALIBRATED
    for batch in (96, 24):
        cal = _learn_at(curve, cal, batch, curve.point(batch, truth).tpot_mean_seconds)
    assert cal.scale == pytest.approx(scale, rel=1e-6)
    assert cal.batch_scale == pytest.approx(batch_scale, rel=1e-6)
    assert len(cal.points) == 2
    for batch in (1, 8, 48, 160):
        assert curve.point(batch, cal).tpot_mean_seconds == pytest.approx(
            curve.point(batch, truth).tpot_mean_seconds, rel=1e-6
        )


def test_a_ratio_beyond_the_scale_bounds_goes_into_the_per_batch_part() -> None:
    """A CPU serving a tiny model: 9x the roofline at a batch of 48, far beyond any bandwidth error. The
    scale stays within its bounds and the per-batch part takes the rest, so the calibrated curve
    reproduces the window at once and grows with the batch (a scale alone would say every batch is
    equally slow, and the law could never find a batch that meets the SLO)."""
    arch = c.architecture_from_config(
        {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 4,
            "hidden_size": 384, "num_attention_heads": 12, "num_key_value_heads": 4, "head_dim": 64,
            "intermediate_size": 768, "vocab_size": 576, "max_position_embeddings": 2048,
            "torch_dtype": "bfloat16",
        },
        name="tiny",
    )  # fmt: skip
    model = c.ServingModel(arch, c.gpu_spec("h100-sxm"), c.EngineConfig(max_num_batched_tokens=8192))
    curve = c.Curve(model, c.Shape(prompt_tokens=256, output_tokens=64), 90)
    observed = 9.0 * curve.mean_seconds(48)
    cal = _learn_at(curve, c.UNCALIBRATED, 48, observed)
    assert 0.5 <= cal.scale <= 4.0
    assert cal.batch_scale > 10.0
    assert curve.point(48, cal).tpot_mean_seconds == pytest.approx(observed, rel=1e-9)
    assert curve.point(24, cal).tpot_mean_seconds < 0.75 * observed


def test_windows_at_the_same_share_keep_the_shape() -> None:
    """Two windows at nearly the same batch cannot separate the two costs: the shape stays, the scale
    follows the newest window (EWMA), and the window is still kept for a later fit."""
    curve = _histogram_curve()
    first = _learn_at(curve, c.UNCALIBRATED, 64, 1.2 * curve.mean_seconds(64))
    second = _learn_at(curve, first, 66, 1.4 * curve.mean_seconds(66))
    assert second.batch_scale == first.batch_scale == 1.0
    assert first.scale == pytest.approx(1.1) and second.scale > first.scale
    assert len(second.points) == 2


def test_only_the_last_windows_are_kept() -> None:
    curve = _histogram_curve()
    cal = c.UNCALIBRATED
    for i in range(c.POINTS_KEPT + 3):
        cal = _learn_at(curve, cal, 16 + 8 * i, 1.1 * curve.mean_seconds(16 + 8 * i))
    assert len(cal.points) == c.POINTS_KEPT
    assert cal.points[-1][2] == pytest.approx(1.1 * curve.mean_seconds(16 + 8 * (c.POINTS_KEPT + 2)))


@pytest.mark.parametrize("point", [(0.01, -0.001, 0.02), (0.01, 0.002), (math.nan, 0.0, 0.01)])
def test_a_calibration_refuses_a_malformed_point(point: tuple[float, ...]) -> None:
    with pytest.raises(c.CapacityError, match="calibration point"):
        c.Calibration(points=(point,))  # type: ignore[arg-type]


def test_a_shape_calibration_applies_to_decode_spread_and_ttft_alike() -> None:
    """batch_scale 1 is the scale-only calibration exactly; otherwise each step's fixed part takes the
    scale and the rest the scale times batch_scale, TTFT's chunk steps included."""
    curve = _histogram_curve()
    for batch in (1, 40):
        plain = curve.point(batch)
        only = curve.point(batch, c.Calibration(scale=1.7))
        assert only.tpot_mean_seconds == pytest.approx(1.7 * plain.tpot_mean_seconds)
        assert only.ttft_service_seconds == pytest.approx(1.7 * plain.ttft_service_seconds)
        shaped = curve.point(batch, c.Calibration(scale=2.0, batch_scale=0.5))
        f = plain.fixed_step_seconds
        assert 0 < f <= plain.decode_step_seconds
        assert shaped.tpot_mean_seconds == pytest.approx(2.0 * (f + 0.5 * (plain.tpot_mean_seconds - f)))
        assert shaped.tpot_sd_seconds == pytest.approx(1.0 * plain.tpot_sd_seconds)
        m = plain.prefill_steps_per_prompt
        assert shaped.ttft_service_seconds == pytest.approx(
            2.0 * (m * f + 0.5 * (plain.ttft_service_seconds - m * f))
        )


# -- the planner and the control law agree ------------------------------------------------------------------

NODES = {
    "h200": ("NVIDIA-H200", 141 * 1024),
    "b200": ("NVIDIA-B200", 180 * 1024),
}


def _cluster(gpu: str) -> Any:
    product, memory = NODES[gpu]
    return summarize(
        GPUNode(name=f"{gpu}-{i}", product=product, allocatable_gpus=8, memory_mib=memory) for i in range(2)
    )


def _facts(model: str, gpu: str, builder: Any, status: dict[str, Any], overrides: Overrides) -> Facts:
    return Facts(
        name="chat",
        namespace="ml",
        uid="u-1",
        generation=1,
        spec=builder.spec(),
        current_status=status,
        architecture=c.catalog_architecture(model),
        architecture_source=f"Catalog {model}",
        inventory=_cluster(gpu),
        default_image="vllm/vllm-openai:test",
        overrides=overrides,
        leader_worker_set=True,  # replicas may span the two nodes
    )


def _planned(
    model: str,
    calibration: c.Calibration = c.UNCALIBRATED,
    *,
    tpot_ms: int = 75,
    concurrency: int = 96,
    shared_prefix: int = 0,
) -> tuple[str, Any, dict[str, Any]]:
    """The first plan for ``model`` on two H200 nodes (B200 where they cannot hold it). The SLO sits
    on a bound of vLLM's TPOT histogram, where the reading Prometheus gives and the engine's percentile
    agree on whether it is met (between bounds the reading is coarse)."""
    builder = (
        llmd("chat", "ml").model(model).context(4096, 1500, 300).concurrency(concurrency).tpot_ms(tpot_ms)
        .replicas(min=1, max=16).feedback("Adjust", 60, 60).shared_prefix(shared_prefix)
        .set("model.trustRemoteCode", c.catalog_architecture(model).config_reader == "checkpoint")
    )  # fmt: skip
    for gpu in ("h200", "b200"):
        b = builder.gpu(NODES[gpu][0])
        d = desire(_facts(model, gpu, b, {}, Overrides(calibration=calibration)))
        if d.plan_feasible.status == "True":
            return gpu, b, {"plan": d.fields["plan"], "prediction": d.fields["prediction"]}
    raise AssertionError(f"{model}: no feasible plan on 2 x 8 H200 or B200: {d.plan_feasible.message}")


def _as_predicted(status: dict[str, Any]) -> Observation:
    """What Prometheus reports when every replica behaves exactly as the plan predicted."""
    plan, prediction = status["plan"], status["prediction"]
    batch = prediction["batchPerReplica"]
    return Observation(
        namespace="ml",
        name="chat",
        sample_time=NOW.timestamp(),
        window_seconds=60,
        percentile=prediction["percentile"],
        available=True,
        reason="MetricsFound",
        message="ok",
        tpot_seconds=prediction["tpotHistogramMilliseconds"] / 1000.0,  # what Prometheus reports
        tpot_mean_seconds=prediction["tpotMeanMilliseconds"] / 1000.0,
        sample_count=500,
        running=float(batch * plan["replicas"]),
        waiting=0.0,
        mean_batch=float(batch),
        kv_cache_usage=0.5,
        preemptions_per_second=0.0,
    )


#: Catalog models whose weights fit one 8-GPU B200 node (the others need the multi-node layouts of a later
#: issue; the planner refuses them with the fix, which test_capacity_planner covers).
ONE_NODE = [
    m
    for m in c.catalog_ids()
    if c.weight_bytes(c.catalog_architecture(m)) < 0.85 * 8 * c.gpu_spec("b200").memory_bytes
]


@pytest.mark.parametrize("model", ONE_NODE)
def test_a_plan_that_behaves_as_predicted_is_left_alone(model: str) -> None:
    gpu, builder, status = _planned(model)
    result = decide(
        _facts(model, gpu, builder, status, Overrides()),
        FeedbackFacts(observation=_as_predicted(status)),
        now=NOW,
    )
    d = result.decision
    assert d is not None
    assert not d.changes_plan, d.message
    assert d.calibration.scale == pytest.approx(1.0, abs=1e-3)
    assert d.calibration.tail == pytest.approx(1.0, abs=1e-3)
    assert d.slo_met is True


def _windows_from_a_load_start(first: Observation | None) -> tuple[list[Decision], dict[str, Any]]:
    """Decide on ``first`` (the window a load started in, see below; None: as predicted) and then on four
    windows exactly as predicted, a minute apart, carrying status.calibration over as the operator does;
    the decisions and the last calibration."""
    gpu, builder, status = _planned("llama-3.1-8b")
    steady = _as_predicted(status)
    decisions: list[Decision] = []
    for i, window in enumerate([first or steady, steady, steady, steady, steady]):
        at = NOW + datetime.timedelta(minutes=i)
        result = decide(
            _facts("llama-3.1-8b", gpu, builder, status, Overrides()),
            FeedbackFacts(observation=dataclasses.replace(window, sample_time=at.timestamp())),
            now=at,
        )
        assert result.decision is not None and result.calibration is not None
        decisions.append(result.decision)
        status = {**status, "calibration": result.calibration}
    return decisions, status["calibration"]


def _load_started(decode_batch: bool) -> Observation:
    """A window the load reached the planned batch B in halfway: the running gauge averages B / 2 over the
    window, while its tokens were decoded at 0.9 B (the requests that finished in it filled the batch
    together), and the TPOT is exactly the model's there. ``decode_batch``: whether Prometheus gave the
    batch the tokens saw, as ``observe()`` reads it."""
    _, builder, status = _planned("llama-3.1-8b")
    curve, _ = serving_curve(
        parse_spec(builder.spec()), c.catalog_architecture("llama-3.1-8b"), status["plan"]
    )
    batch = status["prediction"]["batchPerReplica"]
    seen = round(0.9 * batch)
    return dataclasses.replace(
        _as_predicted(status),
        tpot_seconds=curve.measured_seconds(seen),
        tpot_mean_seconds=curve.mean_seconds(seen),
        mean_batch=batch / 2,
        decode_batch=float(seen) if decode_batch else None,
    )


def test_a_window_the_load_started_in_is_judged_at_the_batch_its_tokens_were_decoded_at() -> None:
    """The fresh-clone CI's sim run of a plan that behaves exactly as predicted: the load filled the batch
    halfway through the first window, so the running gauge's time average read about half the batch while
    the TPOT the histogram counted was decoded near the full batch. Judged at the time average, that window
    and the steady ones after it were two batches far apart with almost one TPOT, and the shape fit learned
    a fixed cost ~2x the model's and a batch that costs almost nothing (the run read factor 1.905,
    batchScale 0.085). Judged at the batch the tokens saw (``decode_batch``), every window agrees with the
    model, as a plan that ran from its first window on does."""
    decisions, calibration = _windows_from_a_load_start(_load_started(decode_batch=True))
    assert not any(d.changes_plan for d in decisions), [d.message for d in decisions]
    _, steady = _windows_from_a_load_start(None)
    for key in ("factor", "batchScale"):
        assert calibration[key] == pytest.approx(steady[key], abs=0.02), (calibration, steady)
    # What the time average alone teaches from the same windows: the shape the CI run showed.
    _, wrong = _windows_from_a_load_start(_load_started(decode_batch=False))
    assert wrong["factor"] > 1.5 and wrong["batchScale"] < 0.2, wrong


@settings(max_examples=30, deadline=None)
@given(
    model=st.sampled_from(c.catalog_ids()),
    scale=st.floats(0.6, 2.5),
    tail=st.floats(0.8, 1.5),
    shared=st.sampled_from([0, 1024]),
)
def test_planner_and_control_law_predict_the_same_tpot(
    model: str, scale: float, tail: float, shared: int
) -> None:
    """For the same batch, context, shared prompt prefix and calibration the planner's prediction and the
    control law's curve (rebuilt from status the way the feedback seam rebuilds it) are the same number."""
    calibration = c.Calibration(scale=scale, tail=tail)
    # An SLO loose enough that every catalog model has a plan at any of these calibrations.
    _gpu, builder, status = _planned(model, calibration, tpot_ms=400, concurrency=32, shared_prefix=shared)
    curve, _ = serving_curve(parse_spec(builder.spec()), c.catalog_architecture(model), status["plan"])
    batch = status["prediction"]["batchPerReplica"]
    assert curve.tpot_seconds(batch, calibration) * 1000.0 == pytest.approx(
        status["prediction"]["tpotMilliseconds"], abs=1e-3
    )


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(st.floats(0.0, 10.0), min_size=1, max_size=200),
    start=st.floats(0.0, 5.0),
    bound=st.floats(0.0, 200.0),
)
def test_largest_within_matches_a_linear_scan(steps: list[float], start: float, bound: float) -> None:
    """The interpolating search finds what scanning every batch finds, for any non-decreasing curve."""
    values = [start]
    for step in steps:
        values.append(values[-1] + step)
    hi = len(values)

    def value(n: int) -> float:
        return values[n - 1]

    expected = max((n for n in range(1, hi + 1) if value(n) <= bound), default=0)
    assert c.largest_within(1, hi, value, bound) == expected


@settings(max_examples=300, deadline=None)
@given(
    mean=st.floats(0.001, 2.0),
    sd=st.floats(0.0, 0.5),
    bound=st.sampled_from(c.TPOT_HISTOGRAM_BUCKETS[:-1]),
    percentile=st.sampled_from(sorted(c.PERCENTILES)),
)
def test_at_a_bucket_bound_the_reading_and_the_percentile_agree_on_the_slo(
    mean: float, sd: float, bound: float, percentile: int
) -> None:
    """An SLO on a histogram bound is met by Prometheus' reading exactly when the engine's percentile meets
    it, so the plan (sized on the percentile) and the loop (judging the reading) agree there."""
    exact = mean + c.percentile_z(percentile) * sd
    reading = c.histogram_quantile(percentile / 100.0, mean, sd, c.TPOT_HISTOGRAM_BUCKETS)
    if abs(exact - bound) > 1e-9 * bound:
        assert (reading <= bound) == (exact <= bound)


def test_a_reading_high_in_the_bucket_of_the_mean_narrows_the_tail() -> None:
    """With the mean near a bucket bound more spread moves mass below the bound and lowers the reading: a
    reading above the prediction is reached by narrowing the tail, not widening it (as far as the bound
    allows). The fresh-clone CI's elastic run kept a tail of 4 learned under load through every window at
    batch 1 (mean 10.2 ms, p90 reading 23.5 ms), whose calibrated spread then put batch 2 over the SLO and
    held 3 replicas for 4 clients."""
    got = c.learn(
        c.Calibration(tail=1.3),
        predicted_mean_seconds=0.0105,
        percentile_at=lambda cal: 0.0235 - 0.002 * cal.tail,
        observed_mean_seconds=0.0105,
        observed_percentile_seconds=0.0235,
        alpha=0.5,
        bounds=(0.5, 4.0),
    )
    assert (got.scale, got.tail) == pytest.approx((1.0, 0.5))
    # Through vLLM's own buckets: a mean of 10.24 ms read as 23.49 ms at p90 is a narrow distribution.
    sd = 0.0012

    def reading(cal: c.Calibration) -> float:
        return c.histogram_quantile(0.9, 0.01024, cal.tail * sd, c.TPOT_HISTOGRAM_BUCKETS)

    narrowed = c.learn(
        c.Calibration(tail=4.0),
        predicted_mean_seconds=0.01024,
        percentile_at=reading,
        observed_mean_seconds=0.01024,
        observed_percentile_seconds=0.02349,
        alpha=0.5,
        bounds=(0.5, 4.0),
    )
    assert narrowed.tail == pytest.approx(0.5)  # as narrow as the bound allows: the closest reading
    assert reading(narrowed) > reading(c.Calibration(tail=4.0))


def _idle_fleet(learned: dict[str, Any], tpot_seconds: float = 0.02349) -> Decision:
    """The law's decision on the fresh-clone CI's elastic fleet after the load fell to 4 clients: llama-3.1-8b
    at a 25 ms SLO, 4 replicas at max-num-seqs 1, a window of 170 requests with a mean TPOT of 10.24 ms and a
    mean batch of 0.93, its p90 reading ``tpot_seconds``; ``learned`` is the calibration in status."""
    gpu, builder, status = _planned("llama-3.1-8b", tpot_ms=25, concurrency=4)
    builder = builder.replicas(min=1, max=4)
    status["plan"] = {**status["plan"], "replicas": 4, "maxNumSeqs": 1}
    status["calibration"] = {"maxNumSeqs": 1, "replicas": 4, **learned}
    window = dataclasses.replace(
        _as_predicted(status),
        window_seconds=30,
        tpot_seconds=tpot_seconds,
        tpot_mean_seconds=0.01024,
        sample_count=170,
        running=4.0,
        mean_batch=0.925,
    )
    d = decide(
        _facts("llama-3.1-8b", gpu, builder, status, Overrides()), FeedbackFacts(observation=window), now=NOW
    ).decision
    assert d is not None
    return d


def test_a_fleet_idle_between_requests_is_judged_at_batch_one() -> None:
    """The fresh-clone CI's elastic run, after the load fell to 4 clients: 4 replicas at max-num-seqs 1 read
    a mean batch of 0.93 (each replica idle between requests) and a p90 of 23.5 ms (every TPOT in the
    10-25 ms bucket reads near its top) against a 25 ms SLO. Each token was still decoded at batch 1, so
    the law calibrates there and sees the headroom the reading hides: one replica goes, and the three left
    get the 2 seats they need. Reading 0.93 as no batch at all kept 4 replicas at 1 seat for good."""
    d = _idle_fleet({})
    assert (d.replicas, d.max_num_seqs) == (3, 2), d.message
    assert d.calibration.scale > 1.0  # learned at batch 1: the engine is slower than the roofline


def test_a_per_batch_factor_left_from_an_older_regime_returns_to_the_models_shape() -> None:
    """The fresh-clone CI's elastic run: after an overload taught a per-batch factor of 59, every window at
    batch 1 (one share, no shape to fit) was explained by the scale at its lower bound 0.5 times that
    factor, and the calibrated spread at batch 2 read far over the SLO, so no replica was ever released.
    The model's own shape explains the same window at scale 1.23: the factor goes back to 1."""
    fixed, variable, observed = 0.00812063, 0.000208942, 0.01024

    def window(cal: c.Calibration, seconds: float) -> c.Calibration:
        """One window at this share (batch 1) observed at a mean TPOT of ``seconds``."""
        return c.learn(
            cal,
            predicted_mean_seconds=fixed + variable,
            fixed_seconds=fixed,
            percentile_at=lambda cal: cal.step_seconds(fixed + variable, fixed),
            observed_mean_seconds=seconds,
            observed_percentile_seconds=None,
            alpha=0.5,
            bounds=(0.5, 4.0),
        )

    got = c.Calibration(
        scale=0.5005, batch_scale=59.0402, tail=2.272, points=((fixed, variable, observed),) * 5
    )
    for _ in range(6):
        got = window(got, observed)
        assert got.batch_scale == 1.0
    assert got.scale == pytest.approx(observed / (fixed + variable), rel=0.02)
    # Not at the lower bound, the factor stays: one share cannot tell it from a scale (a CPU engine learned
    # x55 per batch at scale 2.5, and its windows then sat at one batch; both explain them).
    cpu = c.Calibration(scale=2.5, batch_scale=55.0)
    kept = window(cpu, cpu.step_seconds(fixed + variable, fixed))
    assert (kept.scale, kept.batch_scale) == pytest.approx((2.5, 55.0))
    # A factor the bounds do force stays: an engine 6x slower than the model at this share.
    slow = window(c.Calibration(scale=4.0, batch_scale=100.0), 6 * (fixed + variable))
    assert slow.batch_scale > 1.0


def test_a_tail_the_reading_cannot_show_does_not_hold_a_replica() -> None:
    """The fresh-clone CI's elastic run, the third way it stuck: a tail of 2.3 learned under load, kept
    through windows whose reading (23.5 ms) sits in the same 10-25 ms bucket as their mean (10.2 ms), put
    batch 2 over the SLO. Such a reading cannot show the spread, so the release is judged with the model's
    own (tail 1): one replica goes and the three left get their 2 seats."""
    point = [0.00812063, 0.000208942, 0.010232]
    learned = {"factor": 0.5005, "batchScale": 59.0402, "tail": 2.272, "points": [point] * 6}
    d = _idle_fleet(learned)
    assert (d.replicas, d.max_num_seqs) == (3, 2), d.message
    # A reading in a bucket above the mean's does show the spread: the learned tail judges the release.
    kept = _idle_fleet(learned, tpot_seconds=0.030)
    assert kept.replicas == 4, kept.message
