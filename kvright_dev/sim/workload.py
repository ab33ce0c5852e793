"""Simulated traffic: request-length distributions and arrival traces (ramp, spike, diurnal, bursty).

Pure and seeded: every draw takes the caller's ``random.Random``. The control-loop bench replays one
trace per (trace, seed) against every policy, so all of them see the same requests.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TRACES", "Arrival", "Lengths", "Trace", "arrivals", "trace"]


@dataclass(frozen=True, kw_only=True)
class Lengths:
    """Token counts drawn from a log-normal with this mean and log-space spread, clipped to [low, high]
    (chat traffic's prompt and output lengths are long-tailed, not Gaussian)."""

    mean: float
    sigma: float = 0.6
    low: int = 1
    high: int

    def draw(self, rng: random.Random) -> int:
        mu = math.log(self.mean) - self.sigma**2 / 2.0  # E[lognormal] = exp(mu + sigma^2 / 2) = mean
        return max(self.low, min(self.high, round(rng.lognormvariate(mu, self.sigma))))


@dataclass(frozen=True, kw_only=True)
class Arrival:
    time_seconds: float
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True, kw_only=True)
class Trace:
    """An arrival-rate shape between ``base`` and ``peak`` requests per second over ``seconds``."""

    name: str
    seconds: float
    base_rate: float
    peak_rate: float

    def rate(self, t: float, burst: bool = False) -> float:
        """Requests per second at ``t`` (``burst``: the bursty trace's high state)."""
        x = min(1.0, max(0.0, t / self.seconds))
        lo, hi = self.base_rate, self.peak_rate
        shape = _SHAPES[self.name]
        return shape(x, lo, hi, burst)


def _ramp(x: float, lo: float, hi: float, burst: bool) -> float:
    """Base to peak over the first 60 %, then the peak."""
    return lo + (hi - lo) * min(1.0, x / 0.6)


def _spike(x: float, lo: float, hi: float, burst: bool) -> float:
    """Midway between base and peak, with 1.5 x the peak for 10 % of the time from 40 %."""
    return 1.5 * hi if 0.4 <= x < 0.5 else (lo + hi) / 2.0


def _diurnal(x: float, lo: float, hi: float, burst: bool) -> float:
    """One day compressed: night at the base, noon at the peak (a raised cosine)."""
    return lo + (hi - lo) * (1.0 - math.cos(2.0 * math.pi * x)) / 2.0


def _bursty(x: float, lo: float, hi: float, burst: bool) -> float:
    """A two-state Markov-modulated Poisson process: base, or the peak during bursts."""
    return hi if burst else lo


_SHAPES: dict[str, Callable[[float, float, float, bool], float]] = {
    "ramp": _ramp,
    "spike": _spike,
    "diurnal": _diurnal,
    "bursty": _bursty,
}
TRACES = tuple(_SHAPES)
BURST_MEAN_SECONDS = 60.0
CALM_MEAN_SECONDS = 180.0


def trace(name: str, *, seconds: float, base_rate: float, peak_rate: float) -> Trace:
    if name not in _SHAPES:
        raise ValueError(f"unknown trace {name!r} (known: {', '.join(TRACES)})")
    if not 0 < base_rate <= peak_rate or seconds <= 0:
        raise ValueError(f"trace {name}: need 0 < base_rate <= peak_rate and seconds > 0")
    return Trace(name=name, seconds=seconds, base_rate=base_rate, peak_rate=peak_rate)


def arrivals(t: Trace, rng: random.Random, *, prompt: Lengths, output: Lengths) -> list[Arrival]:
    """Every arrival of the trace: a Poisson process thinned to the trace's rate (Lewis-Shedler), at
    most ``1.5 x peak x seconds x 2 + 100`` candidates, so the loop is bounded."""
    top = 1.5 * t.peak_rate
    out: list[Arrival] = []
    now = 0.0
    burst = False
    switch = rng.expovariate(1.0 / CALM_MEAN_SECONDS)
    bound = int(2 * top * t.seconds) + 100
    for _ in range(bound):
        now += rng.expovariate(top)
        if now >= t.seconds:
            break
        while now >= switch:  # the bursty trace's state changes (other traces ignore it)
            burst = not burst
            switch += rng.expovariate(1.0 / (BURST_MEAN_SECONDS if burst else CALM_MEAN_SECONDS))
        if rng.random() * top <= t.rate(now, burst):
            out.append(
                Arrival(time_seconds=now, prompt_tokens=prompt.draw(rng), output_tokens=output.draw(rng))
            )
    return out
