"""bench.operator_scale and bench.operator_soak: the pure helpers that turn the bench's measurements into
its figures and verdicts (percentiles, the API server's request counts, quarter-over-quarter growth, the
edit lag, the Prometheus flap schedule, the bounds printed under a missed target).

Nothing runs against a cluster here: the bench itself is timed and is run by ``make bench-operator``,
not by ``make test``. The inputs are small literal samples.
"""

from __future__ import annotations

import math

import pytest

from bench.operator_scale import (
    Usage,
    apiserver_requests,
    burst_bounds,
    histogram_quantile,
    paced_bounds,
    percentile,
    writes_by_resource,
)
from bench.operator_soak import (
    QuarterLag,
    growth,
    lag_by_quarter,
    lag_grew,
    prometheus_down,
    quarter,
    reconcile_total,
    summarize,
    toggled_tpot,
)


@pytest.mark.parametrize(
    ("values", "q", "want"),
    [
        ([3.0, 1.0, 2.0], 50, 2.0),
        ([float(i) for i in range(1, 101)], 99, 99.0),
        ([5.0], 99, 5.0),
    ],
    ids=["median-of-three-sorted-first", "p99-of-1..100-nearest-rank", "one-value-is-every-percentile"],
)
def test_percentile(values: list[float], q: float, want: float) -> None:
    assert percentile(values, q) == want


def test_percentile_of_nothing_is_nan() -> None:
    assert math.isnan(percentile([], 50))


def test_apiserver_requests_sums_each_verb_and_resource_over_the_other_labels() -> None:
    text = "\n".join(
        [
            "# HELP apiserver_request_total Counter of apiserver requests",
            'apiserver_request_total{code="201",component="apiserver",resource="deployments",verb="POST"} 10',
            'apiserver_request_total{code="409",component="apiserver",resource="deployments",verb="POST"} 2',
            'apiserver_request_total{code="201",component="apiserver",resource="services",verb="POST"} 5',
            'apiserver_request_total{code="200",component="apiserver",resource="deployments",verb="APPLY"} 7',
            'apiserver_request_total{code="200",component="apiserver",resource="leases",verb="PUT"} 40',
            'apiserver_request_total{code="200",component="apiserver",resource="pods",verb="LIST"} 3e+00',
            'apiserver_request_duration_seconds_count{verb="POST"} 99',
        ]
    )
    counts = apiserver_requests(text)
    assert counts == {
        ("POST", "deployments"): 12.0,
        ("POST", "services"): 5.0,
        ("APPLY", "deployments"): 7.0,
        ("PUT", "leases"): 40.0,
        ("LIST", "pods"): 3.0,
    }
    # Leases are the control plane's heartbeats, reads are not writes.
    assert writes_by_resource(counts) == {"deployments": 19.0, "services": 5.0}


def test_histogram_quantile_is_the_upper_edge_of_the_bucket_that_holds_it() -> None:
    text = "\n".join(
        [
            'kvright_reconcile_duration_seconds_bucket{le="0.05"} 50.0',
            'kvright_reconcile_duration_seconds_bucket{le="0.1"} 90.0',
            'kvright_reconcile_duration_seconds_bucket{le="0.5"} 99.0',
            'kvright_reconcile_duration_seconds_bucket{le="+Inf"} 100.0',
            "kvright_reconcile_duration_seconds_count 100.0",
        ]
    )
    name = "kvright_reconcile_duration_seconds"
    assert [histogram_quantile(text, name, q) for q in (0.5, 0.9, 0.99, 1.0)] == [0.05, 0.1, 0.5, math.inf]
    assert histogram_quantile(text, "other_seconds", 0.5) is None
    assert histogram_quantile('kvright_reconcile_duration_seconds_bucket{le="+Inf"} 0.0', name, 0.5) is None


def _usage(*, wall: float, busy: float, writes: float | None, operator: float | None) -> Usage:
    return Usage(
        wall_seconds=wall,
        metered_seconds=wall,
        cores=2,
        machine_busy_cpu_seconds=busy,
        apiserver_cpu_seconds=10.0,
        etcd_cpu_seconds=2.0,
        operator_cpu_seconds=operator,
        writes=writes,
    )


def test_burst_bounds_name_the_write_ratio_the_saturated_machine_and_the_operator_share() -> None:
    floor = _usage(wall=10.0, busy=19.0, writes=3000.0, operator=None)
    kvright = _usage(wall=18.0, busy=35.0, writes=5400.0, operator=5.4)
    lines = burst_bounds(ratio=1.8, floor=floor, kvright=kvright, count=1000)
    assert lines[0] == (
        "API server writes: 5.4 per object in the kvright run against 3.0 in the floor "
        "(every client counted); at the floor's own write rate (300/s) those writes alone take 1.80x "
        "the floor's time"
    )
    assert lines[1] == (
        "CPU work: the control plane, the operator and the bench client used 17.4 CPU-s in the kvright run "
        "against 12.0 in the floor (1.45x); on a machine whose cores are all busy the ratio cannot fall much "
        "below that"
    )
    assert lines[2] == (
        "CPU: the machine's 2 cores were 97% busy during the kvright burst (35.0 CPU-s: kube-apiserver 10.0, "
        "etcd 2.0, operator 5.4, other processes 17.6); "
        "during the floor 95% (19.0 CPU-s: kube-apiserver 10.0, etcd 2.0, other processes 7.0)"
    )
    assert lines[3] == "the operator used 0.30 of one core on average (5.4 CPU-s): it is not the bottleneck"


def test_burst_bounds_without_evidence_say_so() -> None:
    idle = Usage(wall_seconds=10.0, metered_seconds=10.0, cores=2, machine_busy_cpu_seconds=2.0)
    assert burst_bounds(ratio=1.6, floor=idle, kvright=idle, count=10) == [
        "no bound measured (ratio 1.60); the API server's pid or metrics were not available"
    ]


@pytest.mark.parametrize(
    ("t", "want"),
    [(0.0, 0), (24.9, 0), (25.0, 1), (99.0, 3), (100.0, 3), (150.0, 3), (-5.0, 0)],
    ids=[
        "start",
        "just-before-q2",
        "q2-starts-at-a-quarter",
        "q4",
        "end-is-in-q4",
        "after-end-clamped",
        "before-start-clamped",
    ],
)
def test_quarter(t: float, want: int) -> None:
    assert quarter(t, 0.0, 100.0) == want


def test_growth_of_a_flat_series_is_zero() -> None:
    g = growth([(float(t), 100.0) for t in range(0, 100, 10)])
    assert (g.first_quarter_mean, g.last_quarter_mean, g.slope_per_hour, g.change_fraction) == (
        100.0,
        100.0,
        0.0,
        0.0,
    )


def test_growth_of_a_line_has_its_slope_per_hour_and_quarter_means() -> None:
    # v = 100 + t: t in 0..90 step 10; first quarter (t < 22.5): 0, 10, 20; last (t >= 67.5): 70, 80, 90.
    g = growth([(float(t), 100.0 + t) for t in range(0, 100, 10)])
    assert g.slope_per_hour == pytest.approx(3600.0)
    assert (g.first_quarter_mean, g.last_quarter_mean) == (110.0, 180.0)
    assert g.change_fraction == pytest.approx(70 / 110)


def test_lag_by_quarter_groups_edits_by_when_they_were_made() -> None:
    edits = [(1.0, 0.2), (2.0, 0.4), (30.0, 0.5), (80.0, None), (90.0, 1.0)]
    quarters = lag_by_quarter(edits, 0.0, 100.0)
    assert quarters[0] == QuarterLag(edits=2, unobserved=0, p50_seconds=0.2, p99_seconds=0.4)
    assert quarters[1] == QuarterLag(edits=1, unobserved=0, p50_seconds=0.5, p99_seconds=0.5)
    assert quarters[2].edits == 0 and math.isnan(quarters[2].p99_seconds)  # no edits: no lag, not 0
    assert quarters[3] == QuarterLag(edits=2, unobserved=1, p50_seconds=1.0, p99_seconds=1.0)


def _q(p99: float, unobserved: int = 0) -> QuarterLag:
    return QuarterLag(edits=10, unobserved=unobserved, p50_seconds=p99 / 2, p99_seconds=p99)


@pytest.mark.parametrize(
    ("quarters", "grew"),
    [
        ([_q(0.5), _q(0.6), _q(0.5), _q(1.4)], False),
        ([_q(0.5), _q(0.6), _q(0.5), _q(1.6)], True),
        ([_q(2.0), _q(3.0), _q(3.0), _q(3.9)], False),
        ([_q(2.0), _q(3.0), _q(3.0), _q(4.1)], True),
        ([_q(0.5), _q(0.5), _q(0.5), _q(0.5, unobserved=1)], True),
        (
            [
                _q(0.5),
                _q(0.5),
                _q(0.5),
                QuarterLag(edits=0, unobserved=0, p50_seconds=math.nan, p99_seconds=math.nan),
            ],
            False,
        ),
    ],
    ids=[
        "small-first-allows-plus-1s",
        "small-first-beyond-plus-1s",
        "large-first-allows-double",
        "large-first-beyond-double",
        "an-unobserved-edit-is-growth",
        "no-edits-in-the-last-quarter",
    ],
)
def test_lag_grew(quarters: list[QuarterLag], grew: bool) -> None:
    assert lag_grew(quarters) is grew


@pytest.mark.parametrize(
    ("t", "down"),
    [(0.0, False), (134.9, False), (135.0, True), (179.9, True), (180.0, False), (320.0, True)],
    ids=[
        "start-up",
        "just-before-down",
        "down-at-period-minus-down",
        "down-until-period-end",
        "up-again-next-period",
        "down-in-the-second-period",
    ],
)
def test_prometheus_down_schedule(t: float, down: bool) -> None:
    assert prometheus_down(t, period=180.0, down=45.0) is down


def test_prometheus_never_down_without_flaps() -> None:
    assert not prometheus_down(170.0, period=0.0, down=45.0)
    assert not prometheus_down(170.0, period=180.0, down=0.0)


def test_toggled_tpot_alternates() -> None:
    assert [toggled_tpot(50), toggled_tpot(60)] == [60, 50]


def test_reconcile_total_sums_results_and_is_none_without_the_metric() -> None:
    text = (
        '# TYPE kvright_reconcile counter\nkvright_reconcile_total{result="success"} 120.0\n'
        'kvright_reconcile_total{result="error"} 3.0\nkvright_reconcile_created{result="error"} 1.7e9\n'
    )
    assert reconcile_total(text) == 123.0
    assert reconcile_total("process_cpu_seconds_total 3.0\n") is None


def test_summarize_flags_memory_growth_and_an_unobserved_edit() -> None:
    samples = [
        {
            "t": float(t),
            "rss_bytes": 100 * 2**20 + t * 2**20,
            "cpu_seconds": t / 10,
            "reconciles": 10.0 * t,
            "edits_pending": 0,
        }
        for t in range(0, 100, 10)
    ]
    s = summarize(
        samples, [(5.0, 0.3), (95.0, None)], seconds=100.0, count=10, flaps=1, rss_peak=200 * 2**20, extra={}
    )
    assert s["verdict"]["memory_ok"] is False  # 110 -> 180 MiB: +64%
    assert s["verdict"]["lag_ok"] is False
    assert s["edits_unobserved"] == 1
    assert s["operator_cpu_cores"] == pytest.approx(0.1)
    assert s["reconciles_per_second"] == pytest.approx(10.0)


def test_paced_bounds_split_the_latency_between_the_reconcile_and_the_wait() -> None:
    kvright = _usage(wall=100.0, busy=190.0, writes=None, operator=40.0)
    lines = paced_bounds(p99=3.0, floor_p99=0.05, kvright=kvright, rate=10.0, reconcile_p99=0.5)
    assert lines[0] == "the floor's own p99 at 10/s is 0.05 s (the API server alone, no operator)"
    assert lines[1].startswith("the operator's own reconcile takes p99 <= 0.50 s")
    assert lines[1].endswith(
        "the rest of the 3.00 s is waiting: kopf's watch and queue, the API server's answers"
    )
    assert lines[2].startswith("the machine's 2 cores were 95% busy during the paced kvright run (190")
    assert lines[3] == "the operator used 0.40 of one core (40.0 CPU-s)"
