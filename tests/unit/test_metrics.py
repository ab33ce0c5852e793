"""kvright.metrics: the operator's per-LLMDeployment gauges, reconcile counters and /metrics endpoint.

Nothing is faked: each test uses its own prometheus-client registry, and the endpoint test serves it
on 127.0.0.1 with a free port and scrapes it over HTTP.
"""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvright.metrics import (
    DEFAULT_METRICS_ADDRESS,
    DeploymentMetrics,
    OperatorMetrics,
    from_llmdeployment,
    metrics_address_from_env,
    metrics_port_from_env,
    serve,
)

#: The metrics of a feasible plan with its prediction, as read from an LLMDeployment's status
#: (:func:`llmd_obj`'s defaults).
FEASIBLE = {
    "feasible": True,
    "tensor_parallel_size": 4,
    "max_num_seqs": 64,
    "replicas": 2,
    "kv_cache_dtype": "fp8",
    "gpu": "NVIDIA-H100-80GB-HBM3",
    "model": "meta-llama/Llama-3.1-70B-Instruct",
    "predicted_tpot_seconds": 0.031,
    "predicted_tpot_mean_seconds": 0.026,
    "predicted_ttft_seconds": 0.4,
    "predicted_kv_cache_tokens": 1_200_000,
    "predicted_weight_bytes_per_gpu": 35_000_000_000,
    "predicted_kv_cache_bytes_per_gpu": 30_000_000_000,
    "slo_tpot_seconds": 0.05,
    "slo_ttft_seconds": 2.0,
    "slo_percentile": 95,
    "observed_kv_cache_tokens": None,
    "calibration_factor": None,
}

def full(namespace: str = "team-a", name: str = "llama", **overrides: object) -> DeploymentMetrics:
    values: dict[str, object] = {
        **FEASIBLE,
        "namespace": namespace,
        "name": name,
        "model": "llama-3.1-70b",
        "observed_kv_cache_tokens": 1_150_000,
        "calibration_factor": 1.1,
        "slo_percentile": 90,
    }
    values.update(overrides)
    return DeploymentMetrics(**values)  # type: ignore[arg-type]


def sample(m: OperatorMetrics, name: str, **labels: str) -> float | None:
    value = m.registry.get_sample_value(name, labels)
    return None if value is None else float(value)


KEY = {"namespace": "team-a", "llmdeployment": "llama"}


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("kvright_plan_tensor_parallel_size", 4),
        ("kvright_plan_max_num_seqs", 64),
        ("kvright_plan_replicas", 2),
        ("kvright_plan_gpus", 8),
        ("kvright_plan_feasible", 1),
        ("kvright_predicted_tpot_seconds", 0.031),
        ("kvright_predicted_tpot_mean_seconds", 0.026),
        ("kvright_predicted_ttft_seconds", 0.4),
        ("kvright_predicted_kv_cache_tokens", 1_200_000),
        ("kvright_predicted_weight_bytes_per_gpu", 35_000_000_000),
        ("kvright_predicted_kv_cache_bytes_per_gpu", 30_000_000_000),
        ("kvright_observed_kv_cache_tokens", 1_150_000),
        ("kvright_calibration_factor", 1.1),
        ("kvright_slo_tpot_seconds", 0.05),
        ("kvright_slo_ttft_seconds", 2.0),
        ("kvright_slo_percentile", 90),
    ],
    ids=lambda v: str(v),
)
def test_update_sets_each_gauge_with_namespace_and_llmdeployment(metric: str, expected: float) -> None:
    m = OperatorMetrics()
    m.update(full())
    assert sample(m, metric, **KEY) == pytest.approx(expected)


def test_gpus_is_a_replicas_gpus_times_replicas_and_info_carries_plan_labels() -> None:
    m = OperatorMetrics()
    m.update(full(tensor_parallel_size=2, replicas=3))
    assert sample(m, "kvright_plan_gpus", **KEY) == 6  # pure TP: a replica's GPUs are its TP degree
    m.update(full(tensor_parallel_size=1, gpus_per_replica=8, replicas=3))
    assert sample(m, "kvright_plan_gpus", **KEY) == 24  # TP 1 x DP 8
    dp = from_llmdeployment(llmd_obj(plan={**PLAN, "tensorParallelSize": 1, "gpusPerReplica": 4}))
    assert dp is not None and dp.gpus == 28
    info = {"kv_cache_dtype": "fp8", "gpu": "NVIDIA-H100-80GB-HBM3", "model": "llama-3.1-70b"}
    assert sample(m, "kvright_plan_info", **KEY, **info) == 1


def test_infeasible_plan_keeps_feasible_zero_and_removes_plan_series() -> None:
    m = OperatorMetrics()
    m.update(full())
    m.update(DeploymentMetrics(namespace="team-a", name="llama", feasible=False, slo_tpot_seconds=0.02))
    assert sample(m, "kvright_plan_feasible", **KEY) == 0
    assert sample(m, "kvright_slo_tpot_seconds", **KEY) == pytest.approx(0.02)
    for gone in (
        "kvright_plan_tensor_parallel_size",
        "kvright_plan_gpus",
        "kvright_predicted_tpot_seconds",
        "kvright_predicted_tpot_mean_seconds",
        "kvright_observed_kv_cache_tokens",
    ):
        assert sample(m, gone, **KEY) is None, gone
    families = {f.name: f for f in text_string_to_metric_families(exposition(m))}
    assert families["kvright_plan_info"].samples == []


def test_changed_plan_replaces_info_series_instead_of_adding_one() -> None:
    m = OperatorMetrics()
    m.update(full(kv_cache_dtype="auto"))
    m.update(full(kv_cache_dtype="fp8"))
    infos = [
        s
        for f in text_string_to_metric_families(exposition(m))
        if f.name == "kvright_plan_info"
        for s in f.samples
    ]
    assert [s.labels["kv_cache_dtype"] for s in infos] == ["fp8"]


def test_remove_drops_only_that_llmdeployment_and_is_idempotent() -> None:
    m = OperatorMetrics()
    m.update(full(name="llama"))
    m.update(full(name="qwen"))
    m.remove("team-a", "llama")
    m.remove("team-a", "llama")
    m.remove("team-a", "never-seen")
    text = exposition(m)
    assert 'llmdeployment="llama"' not in text
    assert sample(m, "kvright_plan_gpus", namespace="team-a", llmdeployment="qwen") == 8


def test_reconcile_counts_success_and_error_and_observes_duration() -> None:
    m = OperatorMetrics()
    ticks = iter([10.0, 10.5, 20.0, 22.0])
    with m.reconcile(clock=lambda: next(ticks)):
        pass
    with pytest.raises(RuntimeError), m.reconcile(clock=lambda: next(ticks)):
        raise RuntimeError("api server down")
    assert sample(m, "kvright_reconcile_total", result="success") == 1
    assert sample(m, "kvright_reconcile_total", result="error") == 1
    assert sample(m, "kvright_reconcile_duration_seconds_count") == 2
    assert sample(m, "kvright_reconcile_duration_seconds_sum") == pytest.approx(2.5)


def test_both_reconcile_results_exist_before_the_first_reconcile() -> None:
    m = OperatorMetrics()
    assert sample(m, "kvright_reconcile_total", result="success") == 0
    assert sample(m, "kvright_reconcile_total", result="error") == 0


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, 8080), ({"KVRIGHT_METRICS_PORT": "0"}, 0), ({"KVRIGHT_METRICS_PORT": " 9100 "}, 9100)],
    ids=["unset-default-8080", "zero-disables", "spaces-trimmed"],
)
def test_metrics_port_from_env(env: dict[str, str], expected: int) -> None:
    assert metrics_port_from_env(env) == expected


@pytest.mark.parametrize("raw", ["http", "-1", "65536"], ids=["not-a-number", "negative", "too-big"])
def test_bad_metrics_port_is_one_line_error_naming_what_is_accepted(raw: str) -> None:
    with pytest.raises(ValueError, match=r"KVRIGHT_METRICS_PORT=.* use 0 \(off\) or 1-65535") as err:
        metrics_port_from_env({"KVRIGHT_METRICS_PORT": raw})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, "127.0.0.1"), ({"KVRIGHT_METRICS_ADDRESS": "0.0.0.0"}, "0.0.0.0")],
    ids=["unset-is-loopback", "chart-sets-all-interfaces"],
)
def test_metrics_address_from_env(env: dict[str, str], expected: str) -> None:
    assert metrics_address_from_env(env) == expected
    assert DEFAULT_METRICS_ADDRESS == "127.0.0.1"


def test_serve_exposes_the_registry_over_http_on_loopback() -> None:
    m = OperatorMetrics()
    m.update(full())
    server = serve(m, port=0, address="127.0.0.1")
    try:
        assert server.port > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as response:
            body = response.read().decode()
    finally:
        server.close()
    assert 'kvright_plan_gpus{llmdeployment="llama",namespace="team-a"} 8.0' in body
    assert 'kvright_reconcile_total{result="success"} 0.0' in body


def exposition(m: OperatorMetrics) -> str:
    from prometheus_client import generate_latest

    return generate_latest(m.registry).decode()


def llmd_obj(*, feasible: str | None = "True", **status: object) -> dict[str, object]:
    conditions = [] if feasible is None else [{"type": "PlanFeasible", "status": feasible}]
    return {
        "metadata": {"namespace": "team-a", "name": "llama"},
        "spec": {
            "model": {"name": "meta-llama/Llama-3.1-70B-Instruct"},
            "slo": {"tpotMilliseconds": 50, "ttftMilliseconds": 2000, "percentile": 95},
        },
        "status": {
            "conditions": conditions,
            "plan": {
                "gpuProduct": "NVIDIA-H100-80GB-HBM3",
                "tensorParallelSize": 4,
                "maxNumSeqs": 64,
                "kvCacheDtype": "fp8",
                "replicas": 2,
                "gpus": 8,
            },
            "prediction": {
                "tpotMilliseconds": 31.0,
                "tpotMeanMilliseconds": 26.0,
                "ttftMilliseconds": 400.0,
                "kvCacheTokensPerReplica": 1_200_000,
                "weightBytesPerGPU": 35_000_000_000,
                "kvCacheBytesPerGPU": 30_000_000_000,
            },
            **status,
        },
    }


FROM_STATUS = [
    ("feasible-plan-and-prediction", llmd_obj(), FEASIBLE),
    (
        "feedback-observed-and-calibrated",
        llmd_obj(observed={"kvCacheTokens": 1_100_000}, calibration={"factor": 1.25}),
        {"observed_kv_cache_tokens": 1_100_000, "calibration_factor": 1.25},
    ),
    (
        "infeasible-hides-the-stale-plan",
        llmd_obj(feasible="False"),
        {
            "feasible": False,
            "tensor_parallel_size": None,
            "predicted_tpot_seconds": None,
            "predicted_tpot_mean_seconds": None,
            "kv_cache_dtype": None,
            "slo_tpot_seconds": 0.05,
        },
    ),
    ("unknown-feasibility-counts-as-not-feasible", llmd_obj(feasible="Unknown"), {"feasible": False}),
    (
        "garbage-numbers-are-unknown",
        llmd_obj(observed={"kvCacheTokens": "many"}, calibration={"factor": True}),
        {"observed_kv_cache_tokens": None, "calibration_factor": None},
    ),
]


@pytest.mark.parametrize(
    ("obj", "expected"), [(o, e) for _, o, e in FROM_STATUS], ids=[i for i, _, _ in FROM_STATUS]
)
def test_from_llmdeployment_reads_spec_and_status(
    obj: dict[str, object], expected: dict[str, object]
) -> None:
    values = from_llmdeployment(obj)
    assert values is not None
    for key, want in expected.items():
        got = getattr(values, key)
        assert (got == pytest.approx(want)) if isinstance(want, float) else (got == want), (key, got, want)


def test_from_llmdeployment_is_none_before_the_operator_reported_feasibility() -> None:
    assert from_llmdeployment(llmd_obj(feasible=None)) is None
    assert from_llmdeployment({"metadata": {"name": "x"}}) is None


def test_percentile_defaults_to_the_crd_default() -> None:
    obj = llmd_obj()
    del obj["spec"]["slo"]["percentile"]  # type: ignore[index]
    values = from_llmdeployment(obj)
    assert values is not None and values.slo_percentile == 90


# -- what other autoscalers read: recommended replicas and predicted capacity -------------------------

AUTOSCALER_GAUGES = (
    "kvright_recommended_replicas",
    "kvright_predicted_max_concurrency",
    "kvright_predicted_output_tokens_per_second",
)
PLAN = {"gpuProduct": "NVIDIA-H100-80GB-HBM3", "tensorParallelSize": 4, "maxNumSeqs": 64,
        "kvCacheDtype": "fp8", "replicas": 7, "gpus": 28}  # fmt: skip
PREDICTION = {"tpotMilliseconds": 31.0, "plannedReplicas": 3, "outputTokensPerSecond": 4500.0}
AUTOSCALER_FROM_STATUS = [
    (
        "planner-count-without-a-feedback-decision",
        llmd_obj(plan=PLAN, prediction=PREDICTION),
        (3, 64, 1500.0),
    ),
    (
        "the-feedback-loops-recommendation-wins",
        llmd_obj(plan=PLAN, prediction=PREDICTION, calibration={"factor": 1.1, "recommendedReplicas": 5}),
        (5, 64, 1500.0),
    ),
    (
        "each-data-parallel-engine-has-its-own-seats",
        llmd_obj(plan={**PLAN, "dataParallelSize": 2}, prediction=PREDICTION),
        (3, 128, 1500.0),
    ),
    (
        "never-the-autoscalers-own-count-in-plan-replicas",
        llmd_obj(plan=PLAN, prediction={"tpotMilliseconds": 31.0}),
        (None, 64, None),
    ),
    (
        "an-infeasible-plan-recommends-nothing",
        llmd_obj(feasible="False", plan=PLAN, prediction=PREDICTION, calibration={"recommendedReplicas": 5}),
        (None, None, None),
    ),
]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [(o, e) for _, o, e in AUTOSCALER_FROM_STATUS],
    ids=[i for i, _, _ in AUTOSCALER_FROM_STATUS],
)
def test_recommended_replicas_and_capacity_from_status(
    obj: dict[str, object], expected: tuple[int | None, int | None, float | None]
) -> None:
    values = from_llmdeployment(obj)
    assert values is not None
    m = OperatorMetrics()
    m.update(values)
    for gauge, want in zip(AUTOSCALER_GAUGES, expected, strict=True):
        got = sample(m, gauge, **KEY)
        assert (got is None) if want is None else (got == pytest.approx(want)), (gauge, got, want)


def test_autoscaler_gauges_carry_only_the_key_labels_and_go_with_their_llmdeployment() -> None:
    m = OperatorMetrics()
    for name, recommended in (("llama", 4), ("qwen", 2)):
        m.update(full(name=name, recommended_replicas=recommended, predicted_max_concurrency=64,
                      predicted_output_tokens_per_second=900.0))  # fmt: skip
    families = {f.name: f for f in text_string_to_metric_families(exposition(m))}
    for gauge in AUTOSCALER_GAUGES:
        samples = families[gauge].samples
        assert {frozenset(s.labels) for s in samples} == {frozenset({"namespace", "llmdeployment"})}, gauge
        assert sorted(s.labels["llmdeployment"] for s in samples) == ["llama", "qwen"]
    assert sample(m, "kvright_recommended_replicas", **KEY) == 4
    m.remove("team-a", "llama")
    for gauge in AUTOSCALER_GAUGES:
        assert sample(m, gauge, **KEY) is None, gauge
        assert sample(m, gauge, namespace="team-a", llmdeployment="qwen") is not None, gauge


def test_a_recommendation_that_becomes_unknown_is_removed_not_left_stale() -> None:
    m = OperatorMetrics()
    m.update(full(recommended_replicas=4))
    m.update(full(recommended_replicas=None))
    assert sample(m, "kvright_recommended_replicas", **KEY) is None


def test_the_gauges_read_the_status_the_real_reconcile_writes() -> None:
    """The status keys are a seam between kvright.reconcile and these gauges: read a real one."""
    from kvright.reconcile import desire, status
    from tests.unit.test_reconcile import LLAMA70, NOW, facts

    f = facts(LLAMA70.spec())
    d = desire(f)
    written = status(f, d, rollout=None, apply_error=None, now=NOW)
    values = from_llmdeployment({"metadata": {"namespace": "ml", "name": "chat"}, "spec": LLAMA70.spec(),
                                 "status": written})  # fmt: skip
    assert values is not None and values.feasible
    plan, prediction = written["plan"], written["prediction"]
    assert values.recommended_replicas == prediction["plannedReplicas"] >= 1
    assert values.predicted_max_concurrency == plan["maxNumSeqs"] * plan["dataParallelSize"]
    assert values.predicted_output_tokens_per_second == pytest.approx(
        prediction["outputTokensPerSecond"] / prediction["plannedReplicas"]
    )
    # The drift alert divides vLLM's mean TPOT by the predicted mean, which is below the SLO percentile's.
    mean, at_percentile = values.predicted_tpot_mean_seconds, values.predicted_tpot_seconds
    assert mean == pytest.approx(prediction["tpotMeanMilliseconds"] / 1000.0)
    assert at_percentile == pytest.approx(prediction["tpotMilliseconds"] / 1000.0)
    assert mean is not None and at_percentile is not None and mean < at_percentile
