"""kvright_dev.sim.workload: request lengths and the bench's arrival traces.

Pure and seeded; nothing is faked.
"""

from __future__ import annotations

import random
import statistics

import pytest

from kvright_dev.sim.workload import TRACES, Lengths, arrivals, trace

PROMPT = Lengths(mean=1000, sigma=0.6, low=16, high=6000)
OUTPUT = Lengths(mean=256, sigma=0.6, low=8, high=2000)


def test_lengths_have_the_stated_mean_a_long_tail_and_the_bounds() -> None:
    rng = random.Random(1)
    draws = [PROMPT.draw(rng) for _ in range(20_000)]
    assert statistics.mean(draws) == pytest.approx(1000, rel=0.03)
    assert statistics.median(draws) < 0.9 * statistics.mean(draws)  # log-normal: mean above median
    assert min(draws) >= 16 and max(draws) <= 6000


@pytest.mark.parametrize(
    ("name", "points"),
    [
        ("ramp", [(0.0, 2.0), (0.3, 7.0), (0.6, 12.0), (0.9, 12.0)]),
        ("spike", [(0.1, 7.0), (0.45, 18.0), (0.8, 7.0)]),
        ("diurnal", [(0.0, 2.0), (0.5, 12.0), (1.0, 2.0)]),
    ],
    ids=["ramp-then-hold", "spike-of-1.5x-peak", "raised-cosine-day"],
)
def test_trace_shapes(name: str, points: list[tuple[float, float]]) -> None:
    t = trace(name, seconds=1000, base_rate=2.0, peak_rate=12.0)
    assert [round(t.rate(x * 1000), 6) for x, _ in points] == [r for _, r in points]


def test_bursty_arrivals_alternate_between_base_and_peak() -> None:
    t = trace("bursty", seconds=3600, base_rate=2.0, peak_rate=12.0)
    got = arrivals(t, random.Random(4), prompt=PROMPT, output=OUTPUT)
    per_minute = [0] * 60
    for a in got:
        per_minute[int(a.time_seconds // 60)] += 1
    assert max(per_minute) > 3 * 60 * 2.0  # bursts well above the base rate
    assert min(per_minute) < 60 * 4.0  # and calm minutes near it


@pytest.mark.parametrize("name", TRACES)
def test_arrivals_are_seeded_ordered_and_inside_the_trace(name: str) -> None:
    t = trace(name, seconds=600, base_rate=2.0, peak_rate=12.0)
    a = arrivals(t, random.Random(9), prompt=PROMPT, output=OUTPUT)
    assert a == arrivals(t, random.Random(9), prompt=PROMPT, output=OUTPUT)
    assert a != arrivals(t, random.Random(10), prompt=PROMPT, output=OUTPUT)
    times = [x.time_seconds for x in a]
    assert times == sorted(times) and times[0] > 0 and times[-1] < 600
    assert 2.0 * 600 * 0.8 < len(a) < 18.0 * 600


def test_unknown_trace_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown trace 'flat'"):
        trace("flat", seconds=10, base_rate=1, peak_rate=2)
