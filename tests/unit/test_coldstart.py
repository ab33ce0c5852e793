"""capacity.coldstart: a vLLM pod's predicted time to Ready per weight source, and the bandwidth learned
from observed pod starts.

Pure functions on numbers and on real plans of catalog models; nothing is faked. Expected values are
derived from the profiles' own bandwidths, so a changed default changes the expectation with it.
"""

from __future__ import annotations

import math

import pytest

import capacity as cap
from capacity.coldstart import BANDWIDTH_BOUNDS, LEARN_ALPHA, SOURCES

GB = 1e9


def start(source: str, per_gpu: float = 16 * GB, **kwargs: object) -> cap.ColdStart:
    return cap.cold_start(source, weight_bytes_per_gpu=per_gpu, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("source", SOURCES, ids=[f"{s}-pays-per-byte" for s in SOURCES])
def test_cold_start_grows_with_weight_bytes_by_the_source_bandwidths(source: str) -> None:
    profile = cap.DEFAULT_SOURCES[source]
    small, large = start(source, 8 * GB), start(source, 16 * GB)
    per_byte = (
        (1 / profile.fetch_bytes_per_second if profile.fetch_bytes_per_second else 0.0)
        + 1 / profile.read_bytes_per_second
        + 1 / cap.DEFAULT_ENGINE_COSTS.gpu_load_bytes_per_second
    )
    assert large.seconds > small.seconds
    assert large.seconds - small.seconds == pytest.approx(8 * GB * per_byte)
    assert small.engine_seconds == large.engine_seconds == cap.DEFAULT_ENGINE_COSTS.fixed_seconds


@pytest.mark.parametrize(
    ("source", "fetches", "fills_once"),
    [("hub", True, False), ("image", True, False), ("pvc", False, False), ("cache", False, True)],
    ids=["hub-downloads-every-start", "image-pull-counted", "pvc-only-reads", "cache-filled-once-then-reads"],
)
def test_which_sources_fetch_at_every_start_and_which_fill_once(
    source: str, fetches: bool, fills_once: bool
) -> None:
    s = start(source, checkpoint_bytes=32 * GB)
    assert (s.fetch_seconds > 0) is fetches
    assert (s.first_fill_seconds > 0) is fills_once
    assert s.read_seconds > 0


def test_a_cache_restart_is_faster_than_a_hub_start_and_its_first_fill_is_not() -> None:
    hub, cache = start("hub"), start("cache")
    assert cache.seconds < hub.seconds
    # The fill is a hub download: the first start from an empty cache is no faster than the hub.
    assert cache.first_fill_seconds + cache.seconds >= hub.seconds


def test_the_gpus_of_one_node_share_its_read_bandwidth() -> None:
    one, four = start("pvc", gpus_per_node=1), start("pvc", gpus_per_node=4)
    assert four.read_seconds == pytest.approx(4 * one.read_seconds)
    assert four.gpu_load_seconds == one.gpu_load_seconds  # each GPU copies its own weights


def test_the_fetch_moves_the_whole_checkpoint_not_one_gpus_share() -> None:
    s = start("hub", 4 * GB, checkpoint_bytes=32 * GB)
    assert s.fetch_seconds == pytest.approx(32 * GB / cap.DEFAULT_SOURCES["hub"].fetch_bytes_per_second)  # type: ignore[operator]
    assert s.learned == "fetch" and s.learned_bytes == 32 * GB


@pytest.mark.parametrize(
    ("override", "faster"),
    [
        ({"profile": cap.SourceProfile(read_bytes_per_second=2 * GB)}, True),
        ({"profile": cap.SourceProfile(read_bytes_per_second=50e6)}, False),
        ({"engine": cap.EngineCosts(torch_compile_seconds=5.0)}, True),
        ({"engine": cap.EngineCosts(cuda_graph_capture_seconds=120.0)}, False),
    ],
    ids=["local-nvme-volume", "throttled-volume", "warm-compile-cache", "many-cuda-graph-sizes"],
)
def test_defaults_are_overridable(override: dict[str, object], faster: bool) -> None:
    base, other = start("pvc"), start("pvc", **override)
    assert (other.seconds < base.seconds) is faster


@pytest.mark.parametrize(
    "call",
    [
        lambda: start("s3"),
        lambda: start("hub", -1.0),
        lambda: start("hub", gpus_per_node=0),
        lambda: cap.SourceProfile(read_bytes_per_second=0.0),
        lambda: cap.EngineCosts(torch_compile_seconds=math.nan),
    ],
    ids=["unknown-source", "negative-bytes", "no-gpus", "zero-bandwidth", "nan-cost"],
)
def test_invalid_inputs_are_refused_with_a_capacity_error(call: object) -> None:
    with pytest.raises(cap.CapacityError):
        call()  # type: ignore[operator]


# -- learning ------------------------------------------------------------------------------------------


def implied(prediction: cap.ColdStart, observed: float) -> float:
    """The bandwidth an observed start implies for the learned phase, the other phases as predicted."""
    return prediction.learned_bytes / (observed - (prediction.seconds - prediction.learned_seconds))


@pytest.mark.parametrize("source", SOURCES, ids=[f"{s}-slower-than-predicted" for s in SOURCES])
def test_learning_moves_the_bandwidth_towards_what_the_observations_imply(source: str) -> None:
    prediction = start(source, checkpoint_bytes=16 * GB)
    previous = cap.DEFAULT_SOURCES[source].learned_bytes_per_second
    observed = prediction.seconds + 60.0  # a minute slower than predicted
    target = implied(prediction, observed)
    once = cap.learn_bandwidth(previous, [observed], prediction=prediction)
    assert target < once < previous
    # One observation moves seconds-per-byte by alpha of the way.
    assert 1 / once == pytest.approx((1 - LEARN_ALPHA) / previous + LEARN_ALPHA / target)
    many = cap.learn_bandwidth(previous, [observed] * 40, prediction=prediction)
    assert many == pytest.approx(target, rel=1e-3)


@pytest.mark.parametrize(
    ("source", "field"),
    [("hub", "fetch_bytes_per_second"), ("image", "fetch_bytes_per_second"), ("pvc", "read_bytes_per_second"),
     ("cache", "read_bytes_per_second")],
    ids=["hub-learns-its-download", "image-learns-its-pull", "pvc-learns-its-read", "cache-learns-its-read"],
)  # fmt: skip
def test_a_learned_bandwidth_goes_back_into_its_sources_profile_and_the_prediction(
    source: str, field: str
) -> None:
    profile = cap.DEFAULT_SOURCES[source]
    prediction = start(source, checkpoint_bytes=16 * GB, profile=profile)
    slower = profile.with_learned(profile.learned_bytes_per_second / 2)
    assert getattr(slower, field) == getattr(profile, field) / 2
    assert start(source, checkpoint_bytes=16 * GB, profile=slower).seconds == pytest.approx(
        prediction.seconds + prediction.learned_seconds
    )


def test_a_start_faster_than_predicted_raises_the_bandwidth() -> None:
    prediction = start("hub", checkpoint_bytes=16 * GB)
    previous = cap.DEFAULT_SOURCES["hub"].learned_bytes_per_second
    assert cap.learn_bandwidth(previous, [prediction.seconds - 30.0], prediction=prediction) > previous


@pytest.mark.parametrize(
    ("observed", "bound"),
    [([1e9] * 50, 0), ([1.0] * 50, 1)],
    ids=[
        "a-start-of-decades-stops-at-the-floor",
        "a-start-quicker-than-the-fixed-costs-stops-at-the-ceiling",
    ],
)
def test_learning_stays_within_its_bounds(observed: list[float], bound: int) -> None:
    prediction = start("hub", checkpoint_bytes=16 * GB)
    learned = cap.learn_bandwidth(250e6, observed, prediction=prediction)
    assert BANDWIDTH_BOUNDS[0] <= learned <= BANDWIDTH_BOUNDS[1]
    assert learned == pytest.approx(BANDWIDTH_BOUNDS[bound])


@pytest.mark.parametrize(
    "observed",
    [[], [math.nan], [math.inf], [0.0], [-5.0]],
    ids=["none", "nan", "inf", "zero", "negative"],
)
def test_unusable_observations_leave_the_bandwidth(observed: list[float]) -> None:
    prediction = start("pvc")
    assert cap.learn_bandwidth(250e6, observed, prediction=prediction) == pytest.approx(250e6)


def test_a_prediction_that_moves_no_bytes_learns_nothing() -> None:
    prediction = start("pvc", 0.0)
    assert cap.learn_bandwidth(250e6, [500.0], prediction=prediction) == pytest.approx(250e6)


# -- plans and rollouts ----------------------------------------------------------------------------------


def plan_70b(**limits: object) -> cap.PlanResult:
    return cap.plan(
        cap.catalog_architecture("llama-3.1-70b"),
        cap.gpu_spec("h100-sxm"),
        cap.Workload(max_model_len=8192, concurrency=64),
        cap.SLO(tpot_seconds=0.05),
        cap.Limits(**limits),  # type: ignore[arg-type]
    )


def test_a_plan_predicts_every_source_from_its_weights_per_gpu() -> None:
    result = plan_70b()
    assert result.plan is not None and result.memory is not None
    checkpoint = cap.weight_bytes(cap.catalog_architecture("llama-3.1-70b"))
    starts = cap.plan_cold_starts(result, checkpoint_bytes=checkpoint)
    assert list(starts) == list(SOURCES)
    direct = cap.cold_start(
        "hub",
        weight_bytes_per_gpu=max(result.memory.weights_bytes, checkpoint / result.plan.gpus_per_replica),
        checkpoint_bytes=checkpoint,
        gpus_per_node=result.plan.gpus_per_replica,
    )
    assert starts["hub"].seconds == pytest.approx(direct.seconds)
    assert starts["cache"].seconds < starts["hub"].seconds


def test_weights_quantized_at_load_read_the_wider_checkpoint() -> None:
    arch = cap.catalog_architecture("llama-3.1-70b")
    result = plan_70b(quantization="fp8", tensor_parallel_size=2)
    assert result.plan is not None and result.memory is not None and result.plan.quantization
    starts = cap.plan_cold_starts(result, checkpoint_bytes=cap.weight_bytes(arch))
    on_gpu = cap.cold_start(
        "pvc", weight_bytes_per_gpu=result.memory.weights_bytes, gpus_per_node=result.plan.gpus_per_replica
    )
    assert starts["pvc"].read_seconds > on_gpu.read_seconds


def test_an_infeasible_plan_has_no_cold_start() -> None:
    assert cap.plan_cold_starts(cap.PlanResult.refused("no"), checkpoint_bytes=1e9) == {}


@pytest.mark.parametrize(
    ("replicas", "surge", "starts"),
    [(4, 1, 4), (4, 2, 2), (5, 2, 3), (0, 1, 0)],
    ids=["one-at-a-time", "two-at-a-time", "a-last-lone-pod", "nothing-to-roll"],
)
def test_a_rollout_restarts_its_pods_surge_by_surge(replicas: int, surge: int, starts: int) -> None:
    s = start("hub")
    assert cap.rollout_seconds(s, replicas, max_surge=surge) == pytest.approx(starts * s.seconds)
