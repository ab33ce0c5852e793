"""The serving model: how long a vLLM engine step takes, how much fits, and what a request sees.

This is the one place kvright says how vLLM serves. The planner, the control law, the feedback seam, the
status and the CLI call it; nothing else derives a step time or a memory bound. Its parts:

* **Memory** (:class:`~capacity.memory.KVMemory`): bytes, then blocks, then tokens, then sequences, as
  vLLM 0.32 accounts them (sliding-window reservations included).
* **One engine step** (:meth:`ServingModel.step_seconds`): ``batch`` decodes at a context plus a
  chunk of prefill tokens (chunked prefill, up to ``--max-num-batched-tokens`` per step), priced by the
  roofline in :class:`~capacity.roofline.StepModel`.
* **The steady state at a batch** (:meth:`ServingModel.at`): with ``b`` sequences running, ``b /
  output_tokens`` of them finish, and as many prompts arrive, per step. Each prompt is prefilled in
  ``m = ceil(prompt / (mnbt - b))`` equal chunk steps; the chunks a step carries are Poisson with mean
  ``mu = (b / output) x m``, capped at what the budget holds (work the cap turns away is carried into
  later steps). The mean step time over that distribution is the mean TPOT; a request's TPOT averages
  its ``n = output - 1`` steps, so its standard deviation is the step's over ``sqrt(n)``. The TPOT at
  percentile ``p`` is ``mean + z_p x tail x sd`` (normal approximation; ``z_50 = 0``), so a wider tail
  shows at p99, not at p50, and shrinks for long outputs.
* **As Prometheus reads it**: :func:`histogram_quantile` over vLLM's TPOT buckets
  (:data:`TPOT_HISTOGRAM_BUCKETS`) gives the reading an observation will report; the calibration is
  learned against that reading, the plan is sized on the engine's percentile.
* **Time to first token**: the prompt's ``m`` chunk steps (each carrying the other prompts' chunks in
  flight), plus the wait for a seat when more sequences are in flight than ``--max-num-seqs`` (a closed
  loop: ``wait = service x (in_flight / seqs - 1)``), plus, at a percentile above the share of steps
  without a chunk, one more prompt's chunks ahead of it.
* **Calibration** (:class:`Calibration`): what the feedback loop learns, applied by the same formula
  that predicts: ``scale`` multiplies every step time (bandwidth and overheads the engine actually
  reaches), ``tail`` multiplies the spread of a request's TPOT. :func:`learn` updates it from an observed
  mean and percentile reading at the batch that was served.

Pure: no IO, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from capacity.architecture import Architecture
from capacity.errors import CapacityError
from capacity.gpus import GPU
from capacity.memory import EngineConfig, KVMemory
from capacity.roofline import DEFAULT_EFFICIENCY, Efficiency, StepModel

__all__ = [
    "BATCH_SCALE_BOUNDS",
    "PERCENTILES",
    "POINTS_KEPT",
    "TPOT_HISTOGRAM_BUCKETS",
    "UNCALIBRATED",
    "Calibration",
    "Curve",
    "ServingModel",
    "ServingPoint",
    "Shape",
    "histogram_quantile",
    "largest_within",
    "learn",
    "percentile_z",
]

#: Percentiles an SLO may be stated at, with the standard normal quantile of each.
PERCENTILES: dict[int, float] = {50: 0.0, 90: 1.2815516, 95: 1.6448536, 99: 2.3263479}


def percentile_z(percentile: int) -> float:
    """The standard normal quantile of ``percentile`` (one of :data:`PERCENTILES`)."""
    if percentile not in PERCENTILES:
        raise CapacityError(
            f"percentile {percentile!r} is not supported; expected one of {', '.join(map(str, PERCENTILES))}"
        )
    return PERCENTILES[percentile]


#: vLLM's bucket bounds (seconds) for its TPOT histograms (``vllm:request_time_per_output_token_seconds``,
#: ``vllm:inter_token_latency_seconds`` and the older ``vllm:time_per_output_token_seconds`` share them,
#: ``vllm/v1/metrics/loggers.py``). Prometheus reads percentiles through ``histogram_quantile`` over these
#: buckets; the calibration compares like with like.
TPOT_HISTOGRAM_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip


#: Relative difference between an observed and a predicted percentile that counts as a match when learning
#: the tail.
TAIL_MATCH = 0.01


def histogram_quantile(q: float, mean: float, sd: float, buckets: tuple[float, ...]) -> float:
    """What Prometheus' ``histogram_quantile(q, ...)`` reports for values ~ Normal(mean, sd) counted into
    ``buckets``: the bucket holding rank ``q``, interpolated linearly from its lower bound (0 for the first)
    to its upper bound. Within a wide bucket this is not the true quantile (every TPOT between 10 and
    25 ms reads as 23.5 ms at p90), which is why the serving model predicts this number, not the exact one.
    """

    def cdf(x: float) -> float:
        if sd <= 0:
            return 1.0 if mean <= x else 0.0
        return 0.5 * (1.0 + math.erf((x - mean) / (sd * math.sqrt(2.0))))

    lower, below = 0.0, 0.0
    for upper in buckets:
        at = cdf(upper)
        if at >= q:
            return lower + (upper - lower) * ((q - below) / (at - below) if at > below else 1.0)
        lower, below = upper, at
    return buckets[-1]  # beyond the last finite bucket Prometheus answers the last bound


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """The correction learned from a live engine; ``Calibration()`` is the uncorrected model.

    A step the model prices at ``t`` takes ``scale x (F + batch_scale x (t - F))``, where ``F`` is the
    model's step with nothing in it (weights streamed once, the step overhead) and ``t - F`` what the
    sequences and prefill chunks add. ``scale`` alone is the model wrong by a constant (bandwidth and
    overheads the engine really reaches); ``batch_scale`` is the model wrong in shape: an engine whose
    fixed cost per step is much larger than the model's (``batch_scale < 1``: a CPU, a slow scheduler)
    or whose per-sequence work is (``> 1``). Both are learned from windows at different batches
    (:func:`learn`)."""

    scale: float = 1.0
    """Observed mean TPOT over the predicted mean: multiplies every step time."""
    tail: float = 1.0
    """Multiplies the spread of a request's TPOT (the dispersion that reproduces the observed percentile)."""
    batch_scale: float = 1.0
    """Multiplies (on top of ``scale``) the part of a step that grows with the batch and the prefill."""
    points: tuple[tuple[float, float, float], ...] = ()
    """The windows learned from, newest last: the model's fixed and batch-dependent parts of the mean TPOT
    at the batch served (uncalibrated seconds) and the observed mean (seconds)."""

    def __post_init__(self) -> None:
        for name in ("scale", "tail", "batch_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise CapacityError(f"calibration {name} {value!r} is not valid; expected a positive number")
            if value <= 0:
                raise CapacityError(f"calibration {name} {value!r} is not valid; expected a positive number")
        for point in self.points:
            if len(point) != 3 or not all(math.isfinite(x) and x >= 0 for x in point):
                raise CapacityError(
                    f"calibration point {point!r} is not valid; "
                    "expected (fixed, variable, observed) seconds >= 0"
                )

    def step_seconds(self, seconds: float, fixed_seconds: float, steps: float = 1.0) -> float:
        """``steps`` model steps totalling ``seconds``, of which ``steps x fixed_seconds`` is fixed, as the
        engine runs them."""
        fixed = steps * fixed_seconds
        return self.scale * (fixed + self.batch_scale * max(0.0, seconds - fixed))

    def to_dict(self) -> dict[str, float]:
        return {"scale": self.scale, "batchScale": self.batch_scale, "tail": self.tail}


UNCALIBRATED = Calibration()


@dataclass(frozen=True, kw_only=True)
class Shape:
    """The request mix a replica serves."""

    prompt_tokens: int
    """Prompt length of each request."""
    output_tokens: int
    """Output length of each request (0: prefill only)."""
    context_tokens: int | None = None
    """Mean context over a request's decode steps; None: ``prompt + output / 2``."""
    mixed: bool = True
    """False: price decode steps only (no prompt/output mix was stated)."""
    cached_prompt_tokens: int = 0
    """The start of every prompt that vLLM's prefix cache already holds (a shared system prompt): only
    the rest is prefilled."""

    @property
    def prefill_tokens(self) -> int:
        """Prompt tokens each request actually prefills (at least one: vLLM always computes the last)."""
        return max(1, self.prompt_tokens - self.cached_prompt_tokens)

    @property
    def decode_context_tokens(self) -> int:
        if self.context_tokens is not None:
            return max(1, self.context_tokens)
        return max(1, self.prompt_tokens + self.output_tokens // 2)


@dataclass(frozen=True, kw_only=True)
class ServingPoint:
    """What a replica does in steady state at one batch."""

    batch: int
    """Sequences decoding together."""
    decode_step_seconds: float
    """``t0``: a step with no prefill chunk."""
    prefill_step_seconds: float
    """``t1``: a step that also carries a prefill chunk."""
    prefill_chunk_tokens: float
    """Prompt tokens in a step that carries prefill."""
    prefill_steps_per_prompt: int
    """``m``: chunk steps one prompt takes."""
    prefill_step_fraction: float
    """``f``: share of steps carrying a prefill chunk."""
    prefill_saturated: bool
    """Prompts arrive faster than the chunk budget prefills them: the queue grows without bound."""
    tpot_mean_seconds: float
    """Mean TPOT over requests."""
    tpot_sd_seconds: float
    """Standard deviation of a request's TPOT."""
    ttft_service_seconds: float
    """Time to first token once a slot is free (the prompt's chunk steps)."""
    tail: float
    """The calibration's tail factor: multiplies the TPOT spread (TTFT takes the scale only)."""
    output_tokens: int
    """Tokens each request decodes."""
    fixed_step_seconds: float
    """``F``: the part of every step that does not grow with the batch (a step with nothing in it)."""

    def calibrated(self, calibration: Calibration) -> ServingPoint:
        """This point with a calibration applied (:class:`Calibration`: each step's fixed part times
        ``scale``, the rest times ``scale x batch_scale``), percentiles' spread times ``tail``."""
        if calibration == UNCALIBRATED:
            return self
        f = self.fixed_step_seconds

        def step(seconds: float, steps: float = 1.0) -> float:
            return calibration.step_seconds(seconds, f, steps)

        return replace(
            self,
            decode_step_seconds=step(self.decode_step_seconds),
            prefill_step_seconds=step(self.prefill_step_seconds),
            tpot_mean_seconds=step(self.tpot_mean_seconds),
            tpot_sd_seconds=calibration.scale * calibration.batch_scale * self.tpot_sd_seconds,
            ttft_service_seconds=step(self.ttft_service_seconds, self.prefill_steps_per_prompt),
            tail=self.tail * calibration.tail,
        )

    def tpot_seconds(self, percentile: int, buckets: tuple[float, ...] | None = None) -> float:
        """TPOT at ``percentile``. With ``buckets``, as ``histogram_quantile`` over them reports it (what
        an SLO on vLLM's histogram is judged on); without, the exact normal quantile ``mean + z_p x tail
        x sd``."""
        sd = self.tail * self.tpot_sd_seconds
        if buckets is not None:
            return histogram_quantile(percentile / 100.0, self.tpot_mean_seconds, sd, buckets)
        return self.tpot_mean_seconds + percentile_z(percentile) * sd

    def queue_seconds(self, in_flight: float, seats: int) -> float:
        """Mean wait for a slot with ``in_flight`` requests per replica and ``seats`` slots (max-num-seqs
        times the replica's data-parallel engines).

        A closed loop at its slots: throughput ``X = seats / service`` and Little's law give
        ``wait = service x (in_flight / seats - 1)``, where service is TTFT plus the decode steps."""
        if in_flight <= seats:
            return 0.0
        service = self.ttft_service_seconds + max(0, self.output_tokens - 1) * self.tpot_mean_seconds
        return service * (in_flight / seats - 1.0)

    def ttft_seconds(self, percentile: int, *, in_flight: float | None = None, seats: int = 0) -> float:
        """TTFT at ``percentile``: the slot wait, the prompt's chunk steps and, when ``p`` falls in the
        share of arrivals that find another prompt being prefilled, that prompt's chunks too."""
        wait = self.queue_seconds(in_flight, seats) if in_flight is not None else 0.0
        ahead = self.ttft_service_seconds if percentile / 100.0 > 1.0 - self.prefill_step_fraction else 0.0
        return wait + self.ttft_service_seconds + ahead


class ServingModel:
    """One replica of a model on a TP group of one GPU product, with its flags: memory and time.

    Built once per (TP, KV dtype, max-num-batched-tokens, gpu-memory-utilization) and evaluated at many
    batches; every method is cheap.
    """

    __slots__ = ("arch", "gpu", "layout", "max_num_batched_tokens", "memory", "roofline")

    def __init__(
        self,
        arch: Architecture,
        gpu: GPU,
        config: EngineConfig,
        *,
        efficiency: Efficiency = DEFAULT_EFFICIENCY,
        roofline: StepModel | None = None,
    ) -> None:
        """``roofline`` may pass in the :class:`StepModel` of the same (arch, GPU, layout, KV dtype,
        efficiency), which does not depend on the batched tokens: the planner builds it once per
        candidate layout and reuses it across batched-token budgets. A data-parallel layout is modelled
        per engine: ``batch`` everywhere is one engine's (``--max-num-seqs`` is per engine)."""
        self.arch = arch
        self.gpu = gpu
        self.layout = config.layout
        self.max_num_batched_tokens = config.max_num_batched_tokens
        self.roofline = roofline or StepModel(
            arch, gpu, layout=config.layout, kv_cache_dtype=config.kv_cache_dtype, efficiency=efficiency
        )
        self.memory = KVMemory(arch, gpu, config)

    @property
    def tensor_parallel_size(self) -> int:
        """The layout's TP degree."""
        return self.layout.tensor_parallel_size

    # -- one step -------------------------------------------------------------------------------------

    def step_seconds(
        self,
        batch: int,
        context_tokens: float,
        prefill_tokens: float = 0.0,
        *,
        prompt_tokens: int = 0,
    ) -> float:
        """One engine step: ``batch`` decodes at ``context_tokens`` plus ``prefill_tokens`` of prompts
        ``prompt_tokens`` long (the simulator and the steady state below both price steps here)."""
        seconds = self.roofline.predicted_seconds(
            max(0, batch),
            max(1, round(context_tokens)),
            prefill_tokens,
            prompt_tokens or round(prefill_tokens),
        )
        return seconds

    def batch_latency_seconds(self, batch: int, *, prompt_tokens: int, output_tokens: int) -> float:
        """One static batch end to end, as vLLM's latency benchmark runs it: the ``batch`` prompts
        prefilled together (in chunks of the step budget), then ``output_tokens - 1`` decode steps at the
        mean context of the decode."""
        prefill = batch * prompt_tokens
        chunks = max(1, math.ceil(prefill / self.max_num_batched_tokens))
        prefill_seconds = chunks * self.step_seconds(
            0, prompt_tokens, prefill / chunks, prompt_tokens=prompt_tokens
        )
        decode_context = prompt_tokens + output_tokens / 2
        return prefill_seconds + max(0, output_tokens - 1) * self.step_seconds(batch, decode_context)

    # -- steady state ---------------------------------------------------------------------------------

    def at(self, batch: int, shape: Shape) -> ServingPoint:
        """The steady state of a replica decoding ``batch`` sequences of ``shape`` (module docstring),
        uncalibrated; :meth:`ServingPoint.calibrated` applies a calibration."""
        b = max(1, batch)
        context = shape.decode_context_tokens
        # The prompt's length shapes a chunk's attention; only its uncached part is prefill work.
        prompt_len = max(1, shape.prompt_tokens)
        prompt = shape.prefill_tokens
        step = self.roofline.step_function(b, context, prompt_len)
        t0 = step(0.0)
        fixed = min(t0, self.roofline.step_function(0, context, prompt_len)(0.0))
        chunk_budget = max(1, self.max_num_batched_tokens - b)
        steps_per_prompt = max(1, math.ceil(prompt / chunk_budget))
        if not shape.mixed or shape.output_tokens <= 0:
            # Decode steps only; a lone prompt still needs its chunks for TTFT.
            t_chunk = self.step_seconds(0, context, min(prompt, chunk_budget), prompt_tokens=prompt_len)
            return ServingPoint(
                batch=b,
                decode_step_seconds=t0,
                prefill_step_seconds=t0,
                prefill_chunk_tokens=0.0,
                prefill_steps_per_prompt=steps_per_prompt,
                prefill_step_fraction=0.0,
                prefill_saturated=False,
                tpot_mean_seconds=t0,
                tpot_sd_seconds=0.0,
                ttft_service_seconds=steps_per_prompt * t_chunk,
                tail=1.0,
                output_tokens=max(1, shape.output_tokens),
                fixed_step_seconds=fixed,
            )
        # Prompts arrive (as sequences finish) at b / output per step, each split into m equal chunks;
        # the chunks a step carries are Poisson with mean mu = arrivals x m, at most what the budget holds.
        arrivals = b / shape.output_tokens
        chunk = prompt / steps_per_prompt
        mu = arrivals * steps_per_prompt
        most = max(1, int(chunk_budget // chunk))
        top = min(most, math.ceil(mu + 4.0 * math.sqrt(mu) + 2.0))  # the mass beyond goes to the top
        weights = _poisson(mu, top)
        times = [step(k * chunk) for k in range(top + 1)]
        mean = sum(w * t for w, t in zip(weights, times, strict=True))
        second = sum(w * t * t for w, t in zip(weights, times, strict=True))
        variance = max(0.0, second - mean * mean)
        carrying = 1.0 - weights[0]
        t1 = (mean - weights[0] * t0) / carrying if carrying > 0 else t0
        # A prompt's own chunk steps also carry the other prompts' chunks in flight (mean mu, capped).
        own = min(float(chunk_budget), chunk * (1.0 + mu))
        t_own = step(own)
        n = max(1, shape.output_tokens - 1)
        return ServingPoint(
            batch=b,
            decode_step_seconds=t0,
            prefill_step_seconds=t1,
            prefill_chunk_tokens=chunk,
            prefill_steps_per_prompt=steps_per_prompt,
            prefill_step_fraction=carrying,
            prefill_saturated=arrivals * prompt > chunk_budget,
            tpot_mean_seconds=mean,
            tpot_sd_seconds=math.sqrt(variance / n),
            ttft_service_seconds=steps_per_prompt * t_own,
            tail=1.0,
            output_tokens=shape.output_tokens,
            fixed_step_seconds=fixed,
        )


def _poisson(mu: float, top: int) -> list[float]:
    """Chunks per step: Poisson(mu) probabilities of 0..top-1 with the rest of the mass at ``top`` (the
    step's cap). Work the cap turns away is not lost but carried into later steps, so that much more
    probability moves from "no chunk" to "a full step" until the mean is ``mu`` again."""
    weights = []
    term = math.exp(-mu)
    for k in range(top):
        weights.append(term)
        term *= mu / (k + 1)
    weights.append(max(0.0, 1.0 - sum(weights)))
    carried = sum(k * w for k, w in enumerate(weights))
    if top > 0 and carried < mu:
        shift = min(weights[0], (mu - carried) / top)
        weights[0] -= shift
        weights[top] += shift
    return weights


class Curve:
    """A serving model at one request shape and percentile: TPOT as a function of the batch.

    What the planner sizes ``--max-num-seqs`` with and what the control law targets, so the two agree by
    construction. :meth:`measured_seconds` reads the percentile as vLLM's histogram reports it
    (``buckets``, default :data:`TPOT_HISTOGRAM_BUCKETS`), which is what observations are compared with.
    Points are memoized (uncalibrated); a calibration is applied on read.
    """

    __slots__ = ("_points", "buckets", "model", "percentile", "shape")

    def __init__(
        self,
        model: ServingModel,
        shape: Shape,
        percentile: int,
        buckets: tuple[float, ...] | None = TPOT_HISTOGRAM_BUCKETS,
    ) -> None:
        percentile_z(percentile)
        self.model = model
        self.shape = shape
        self.percentile = percentile
        self.buckets = buckets
        self._points: dict[int, ServingPoint] = {}

    def point(self, batch: int, calibration: Calibration = UNCALIBRATED) -> ServingPoint:
        """The steady state at ``batch``."""
        b = max(1, batch)
        point = self._points.get(b)
        if point is None:
            point = self._points[b] = self.model.at(b, self.shape)
        return point.calibrated(calibration)

    def mean_seconds(self, batch: int) -> float:
        """Uncalibrated mean TPOT at ``batch``."""
        return self.point(batch).tpot_mean_seconds

    def fixed_seconds(self, batch: int) -> float:
        """The part of the uncalibrated mean TPOT at ``batch`` that does not grow with the batch."""
        return self.point(batch).fixed_step_seconds

    def tpot_seconds(self, batch: int, calibration: Calibration = UNCALIBRATED) -> float:
        """The engine's TPOT at the curve's percentile with ``calibration`` applied: what the plan is
        sized on and the law targets."""
        return self.point(batch, calibration).tpot_seconds(self.percentile)

    def measured_seconds(self, batch: int, calibration: Calibration = UNCALIBRATED) -> float:
        """TPOT at the curve's percentile as the observation reads it (``histogram_quantile`` over
        ``buckets``): what the calibration is learned against, so a coarse bucket is not mistaken for a
        wide tail."""
        return self.point(batch, calibration).tpot_seconds(self.percentile, self.buckets)


def largest_within(lo: int, hi: int, value: Callable[[int], float], bound: float) -> int:
    """Largest n in [lo, hi] with ``value(n) <= bound`` for a non-decreasing ``value``; lo - 1 if none.

    Step times grow nearly linearly with the batch, so the probe interpolates inside the bracket
    (regula falsi), checking the neighbour to close it, and halves on alternate rounds so the worst case
    stays logarithmic. The planner's latency rules use it: a handful of evaluations where plain bisection
    needs ``log2(hi)``.
    """
    if hi < lo:
        return lo - 1
    v_lo = value(lo)
    if v_lo > bound:
        return lo - 1
    v_hi = value(hi)
    if v_hi <= bound:
        return hi
    interpolate = True
    while hi - lo > 1:  # value(lo) <= bound < value(hi)
        if interpolate and v_hi > v_lo:
            probe = lo + int((bound - v_lo) / (v_hi - v_lo) * (hi - lo))
        else:
            probe = (lo + hi) // 2
        probe = min(hi - 1, max(lo + 1, probe))
        v = value(probe)
        if v <= bound:
            lo, v_lo = probe, v
            if interpolate and probe + 1 < hi:
                v_next = value(probe + 1)
                if v_next > bound:
                    return probe
                lo, v_lo = probe + 1, v_next
        else:
            hi, v_hi = probe, v
        interpolate = not interpolate
    return lo


#: Bounds of :attr:`Calibration.batch_scale`. Wide on purpose: the model's batch-dependent part can be a
#: sliver of its step (a tiny model on a fast GPU) while the engine's is most of it (the same on a CPU).
BATCH_SCALE_BOUNDS: tuple[float, float] = (1.0 / 64.0, 1.0e4)
#: Windows :func:`learn` keeps to fit the shape from.
POINTS_KEPT = 6
#: The smallest spread of the batch-dependent share (largest over smallest ``variable / fixed``) among the
#: kept windows from which the shape is fitted; closer windows cannot tell a fixed cost from a per-batch one.
SHAPE_SPREAD = 1.3
#: A window's ratio within this factor of the lower scale bound counts as at the bound (see :func:`learn`).
AT_BOUND = 1.05


def learn(
    previous: Calibration,
    *,
    predicted_mean_seconds: float,
    percentile_at: Callable[[Calibration], float],
    observed_mean_seconds: float | None,
    observed_percentile_seconds: float | None,
    alpha: float,
    bounds: tuple[float, float],
    tail_bounds: tuple[float, float] = (0.5, 4.0),
    fixed_seconds: float | None = None,
    batch_bounds: tuple[float, float] = BATCH_SCALE_BOUNDS,
) -> Calibration:
    """The calibration after one window, from the prediction at the batch that was served.

    With ``fixed_seconds`` (the model's fixed part of ``predicted_mean_seconds``) and an observed mean,
    the window is kept as a point (the last :data:`POINTS_KEPT`). Once the kept points were served at
    batches far enough apart to tell a fixed cost from a per-batch one (:data:`SHAPE_SPREAD`), ``scale``
    and ``batch_scale`` are the weighted least-squares fit ``observed = scale x (F + batch_scale x V)``
    over them (newer points weigh more, by ``1 - alpha`` per window of age). Until then ``scale`` is an
    EWMA towards ``observed mean / calibrated prediction``, and what its ``bounds`` cannot take (a
    ratio far beyond any bandwidth error) is put in ``batch_scale``: a model that is wrong by more than
    a constant is wrong in shape, and the per-sequence work is where models are weakest. Without that
    spread, a ``batch_scale`` above 1 that only a scale at its lower bound (:data:`AT_BOUND`) reconciles
    with the window returns to 1 when the model's own shape explains the window at a scale within bounds:
    a fixed cost scaled to half the model's would be weights streamed faster than the model allows, so the
    factor is a leftover of windows that aged out (an overload), not this engine's shape. An engine slower
    than the model (a CPU, the upper side) keeps its factor: there a large per-batch cost is plausible.
    ``scale`` is clamped to ``bounds``
    (a wilder ratio at the same shape is a broken metric), ``batch_scale`` to ``batch_bounds``.

    ``tail`` is the spread multiplier nearest the previous one, within ``tail_bounds``, at which the
    model's percentile at that scale (``percentile_at``, measured the way the observation was: through
    the same histogram) reproduces the observed one; where the histogram cannot tell (a reading inside
    one bucket does not move with the spread) it stays as it was. Without a mean, ``scale`` moves
    towards the observed over the predicted percentile. Non-finite or non-positive inputs leave the
    previous values (clamped).
    """
    low, high = bounds

    def good(x: float | None) -> bool:
        return x is not None and math.isfinite(x) and x > 0

    def clamp(x: float, lo_hi: tuple[float, float]) -> float:
        return min(lo_hi[1], max(lo_hi[0], x))

    def ewma(prev: float, ratio: float) -> float:
        return clamp((1.0 - alpha) * prev + alpha * clamp(ratio, bounds), bounds)

    scale = clamp(previous.scale, bounds)
    tail = clamp(previous.tail, tail_bounds)
    beta = clamp(previous.batch_scale, batch_bounds)
    points = previous.points
    kept = replace(previous, scale=scale, tail=tail, batch_scale=beta)
    if not good(predicted_mean_seconds):
        return kept
    if not good(observed_mean_seconds):
        if good(observed_percentile_seconds):
            assert observed_percentile_seconds is not None
            predicted = percentile_at(replace(kept, scale=1.0))
            if good(predicted):
                scale = ewma(scale, observed_percentile_seconds / predicted)
        return replace(kept, scale=scale)
    assert observed_mean_seconds is not None
    observed = observed_mean_seconds
    if (
        fixed_seconds is not None
        and math.isfinite(fixed_seconds)
        and 0 < fixed_seconds <= predicted_mean_seconds
    ):
        fixed, variable = fixed_seconds, predicted_mean_seconds - fixed_seconds
        points = (*points, (fixed, variable, observed))[-POINTS_KEPT:]
        fitted = _fit_shape(points, 1.0 - alpha, bounds, batch_bounds)
        if fitted is not None:
            scale, beta = fitted
        else:
            ratio = observed / (fixed + beta * variable)
            plain = observed / (fixed + variable)
            if beta > 1.0 and ratio <= low * AT_BOUND and low <= plain <= high:
                # Only a scale at its lower bound reconciles this window with the per-batch factor: the
                # engine would stream its weights at twice the rate the model allows, which no engine does,
                # while the model's own shape explains the window at a scale within bounds. The factor is
                # left from windows that have aged out (an overload), so the shape returns to the model's.
                beta, ratio = 1.0, plain
            scale = ewma(scale, ratio)
            if variable > 0 and not low <= ratio <= high:
                beta = clamp((observed / scale - fixed) / variable, batch_bounds)
    else:
        scale = ewma(scale, observed / predicted_mean_seconds)
    learned = replace(kept, scale=scale, batch_scale=beta, points=points)
    if good(observed_percentile_seconds):
        assert observed_percentile_seconds is not None
        target = observed_percentile_seconds

        def at(t: float) -> float:
            return percentile_at(replace(learned, tail=t))

        tail = _nearest_tail(at, target, tail, tail_bounds)
    return replace(learned, tail=tail)


def _fit_shape(
    points: tuple[tuple[float, float, float], ...],
    decay: float,
    bounds: tuple[float, float],
    batch_bounds: tuple[float, float],
) -> tuple[float, float] | None:
    """(scale, batch_scale) fitting ``observed = a F + c V`` (``a = scale``, ``c = scale x batch_scale``) by
    weighted least squares over ``points``, or None when their batch-dependent shares are too close to
    tell the two apart. ``a`` is held within ``bounds`` (then ``c`` is refitted alone)."""
    shares = [v / f for f, v, _ in points if f > 0]
    if len(shares) < 2 or min(shares) <= 0 or max(shares) / min(shares) < SHAPE_SPREAD:
        return None
    n = len(points)
    weights = [decay ** (n - 1 - i) for i in range(n)]
    sff = sum(w * f * f for w, (f, _, _) in zip(weights, points, strict=True))
    sfv = sum(w * f * v for w, (f, v, _) in zip(weights, points, strict=True))
    svv = sum(w * v * v for w, (_, v, _) in zip(weights, points, strict=True))
    sfo = sum(w * f * o for w, (f, _, o) in zip(weights, points, strict=True))
    svo = sum(w * v * o for w, (_, v, o) in zip(weights, points, strict=True))
    det = sff * svv - sfv * sfv
    if det <= 0 or svv <= 0:
        return None
    a = (sfo * svv - sfv * svo) / det
    c = (sff * svo - sfv * sfo) / det
    if not bounds[0] <= a <= bounds[1] or c <= 0:
        a = min(bounds[1], max(bounds[0], a))
        c = (svo - a * sfv) / svv  # the best per-batch cost with the fixed one held at its bound
    if c <= 0:
        return None
    return a, min(batch_bounds[1], max(batch_bounds[0], c / a))


def _nearest_tail(
    at: Callable[[float], float], target: float, previous: float, bounds: tuple[float, float]
) -> float:
    """The tail nearest ``previous`` whose percentile reading ``at(tail)`` reaches ``target``, clamped to
    ``bounds``; ``previous`` when its own reading already matches within :data:`TAIL_MATCH` (a histogram
    reading is coarse: chasing its last percent would swing the tail across the flat stretches where the
    spread does not move the reading).

    The reading is not monotone in the spread: with the mean just above a bucket bound, more spread puts
    mass below the bound and *lowers* the reading (all of 10-25 ms reads 23.5 ms at p90 only when nearly
    every request is above 10 ms: a narrow distribution). So both directions are searched, the one a
    monotone reading would take first: the first tail from ``previous`` whose reading crosses ``target``,
    else the bound that comes closest, else ``previous`` when neither bound comes closer."""
    now = at(previous)
    if math.isclose(now, target, rel_tol=TAIL_MATCH):
        return previous
    wider_first = now < target
    best, best_error = previous, abs(now - target)
    for edge in (bounds[1], bounds[0]) if wider_first else (bounds[0], bounds[1]):
        if edge == previous:
            continue
        far = at(edge)
        if (far - target) * (now - target) <= 0:  # the reading crosses the target between the two
            near, beyond = previous, edge
            for _ in range(40):  # bisection, to ~1e-12 of the bracket
                mid = 0.5 * (near + beyond)
                if (at(mid) - target) * (now - target) > 0:
                    near = mid
                else:
                    beyond = mid
            return beyond
        if abs(far - target) < best_error:
            best, best_error = edge, abs(far - target)
    return best
