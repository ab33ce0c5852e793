"""The control law: from a plan, its prediction and a live observation to one bounded, explained move.

Pure: no IO, no clock (``now`` is an argument), no Kubernetes. The operator gathers an
:class:`~kvright.observe.Observation`, calls :func:`decide`, and acts on the :class:`Decision`
(patch the Deployment, re-plan, post an event with ``decision.message``, set conditions).

The law, in the order it is applied (docs/feedback.md explains it with tuning advice):

1. No usable metrics -> keep everything (reason from the observation). A rollout still in progress
   -> keep, and restart the cooldown (the window must only see the plan being judged); except when
   the rollout only adds replicas and the SLO is still missed or requests queue: then the replicas
   already asked for count as capacity and more are added if the demand measured now needs more (a
   cold start can take minutes; a rising load must not wait for it).
2. Fewer than ``min_samples`` finished requests in the window -> wait, but only until
   ``sample_deadline_seconds``: after that act on what there is, and with no traffic at all scale
   down one replica at a time towards ``min_replicas`` (the loop never stalls for lack of data).
3. Calibrate the serving model (:func:`capacity.learn`) at the batch that was actually served: once
   windows at batches far enough apart were seen, the scale of the model's fixed step cost and of its
   per-batch cost are fitted to them (a model wrong in shape, e.g. an engine with a large fixed
   overhead, not only by a constant); before that the scale is an EWMA of observed over predicted mean
   TPOT, bounded to ``calibration_bounds``, with what the bounds cannot take put in the per-batch part;
   the tail is the window's percentile-over-mean against the predicted one. The law then judges every batch
   by ``model.tpot_seconds(batch, calibration)``, the curve the planner sized the plan with.
4. The target batch per replica is the largest batch whose calibrated TPOT stays within
   ``target_fraction x SLO`` (and within the memory limit on max-num-seqs).
4a. Demand rising: the SLO holds, but the window's mean demand grew since a reading at least half a
   window old (``TREND_BASE_WINDOWS``; beyond a count's noise, with no queue) fast enough that,
   extrapolated over a new pod's cold start and a window (at most ``TREND_REACH`` times the span the
   trend was seen over), the replicas there are will not carry it at the target batch: add the replicas
   it needs now (``DemandRising``). Every scale-out for a miss is sized for the same forecast.
5. Cooldown: no move that restarts pods (max-num-seqs, re-plan) or removes a replica within
   ``cooldown_seconds`` of the last change. Adding replicas restarts nothing and disturbs no running
   request, so it waits only for one fresh window after the last change (the HPA's fast scale-up):
   inside the cooldown, an SLO miss (TPOT or TTFT) or a queue still adds replicas when the budget
   holds the demand at the target batch (with a queue, as many as the budget allows when it does not).
6. TPOT above the SLO: the cheaper move first. When the GPU budget holds the demand at the target
   batch, add the replicas that demand needs in one move (at least ``max_replicas_step``) and keep
   max-num-seqs: no pod restarts, no cold start. Otherwise lower max-num-seqs to the target batch (at
   most a factor ``max_seqs_step`` below the seats the load fills, per move; one such step when the
   calibrated model says even batch 1 misses; at least ``deadband`` below the seats it has, since a
   smaller step moves TPOT by less than the noise it is judged by, and each step restarts the pods, but
   no lower than a batch recently measured within the SLO: the law bisects from below too; and
   when the calibrated model, which lags a miss at the edge, still fits the seats that were just
   measured above the SLO, the deadband below the seats in use: the reading outranks the model) and
   add replicas for the demand that no longer fits,
   within min/max replicas and the GPU budget. When that cannot meet the SLO (the uncalibrated
   roofline says batch 1 is too slow, or the budget cannot hold the demand at the target batch) ask
   for a re-plan: fp8 KV cache first, then a larger tensor-parallel degree.
7. KV cache exhausted (preemptions while usage is near 1): lower max-num-seqs one step.
8. TTFT above the SLO (when the spec states one) while requests wait: add replicas (a queue is
   served by more engines, not by a smaller batch), else raise max-num-seqs within the TPOT target;
   without a queue nothing the loop moves shortens a prefill, so keep, and never scale down.
9. TPOT below ``(1 - deadband) x SLO`` (the lower of the reading and the calibrated estimate, since a
   histogram reading cannot show headroom inside a bucket): with requests queued (waiting while the
   slots or the KV cache are full), raise max-num-seqs towards the target batch (by at least
   ``deadband`` or not at all: a gain inside the noise is not worth a restart; never past halfway to
   the batch where TPOT was last measured above the SLO, for ``MISSED_MEMORY_PROBES`` probes of a
   restart and a cooldown each, in a window that judged that plan alone: the law bisects between what
   met and what missed rather than trust a model that just failed) or
   add replicas. The cold start is the cost of a restart: when restarting the pods for the seats
   (``restart_seconds``, one pod after another) takes longer than a new replica's cold start and a
   window, the queue gets the replica, which serves sooner and restarts nothing (a move that restarts
   the pods states its predicted cost); with
   none waiting, remove one replica if the rest can carry the demand at the target batch (raising
   max-num-seqs in the same move when they need more seats than they have). Never scale down while
   requests wait or TTFT lacks the same headroom.
10. Inside the deadband with a queue (outside a cooldown): serve it as in 9 (seats worth a restart, else
   replicas, else the ceiling). Otherwise keep.

If an HPA targets the workload, replica changes become recommendations (``recommend_only``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from capacity import TPOT_HISTOGRAM_BUCKETS, UNCALIBRATED, Calibration, largest_within, learn
from kvright.reasons import Reason

if TYPE_CHECKING:  # a typed value only; importing the IO module at runtime would drag `requests` in
    from kvright.observation import Observation

__all__ = [
    "MEASURED",
    "PRE_MEASUREMENT",
    "Action",
    "Bounds",
    "Current",
    "Decision",
    "History",
    "Measured",
    "Period",
    "TPOTModel",
    "Tuning",
    "cooling_down",
    "decide",
    "demand_rising",
    "headroom",
    "kv_cache_preempting",
    "measure",
    "metrics_unavailable",
    "queue_in_deadband",
    "rolling_out",
    "target_batch",
    "too_few_samples",
    "tpot_above_slo",
    "tpot_unmeasured",
    "ttft_above_slo",
    "within_deadband",
]


class Action(StrEnum):
    """What the operator should do."""

    KEEP = "Keep"
    WAIT = "Wait"
    SET_MAX_NUM_SEQS = "SetMaxNumSeqs"
    ADD_REPLICAS = "AddReplicas"
    REMOVE_REPLICAS = "RemoveReplicas"
    REPLAN = "Replan"


@dataclass(frozen=True, kw_only=True)
class Tuning:
    """Knobs of the control law. Production defaults; tests shrink the times to seconds."""

    deadband: float = 0.15
    """Scale down or loosen only when TPOT < (1 - deadband) x SLO."""
    target_fraction: float = 0.9
    """New batches are sized for TPOT = target_fraction x SLO (headroom for noise)."""
    cooldown_seconds: float = 600.0
    """No move that restarts pods or removes a replica within this long of the previous change (adding
    replicas waits only for one fresh observation window)."""
    min_samples: int = 50
    """Finished requests in the window needed before acting."""
    sample_deadline_seconds: float = 900.0
    """Stop waiting for min_samples after this long and act on what there is."""
    max_replicas_step: int = 2
    """Replicas one move may add at least: a scale-out takes the fleet to what the measured demand needs
    at the target batch in one move, and a move that lowers max-num-seqs adds at most this many (removal
    is always one at a time)."""
    max_seqs_step: float = 2.0
    """max-num-seqs moves by at most this factor per move."""
    calibration_alpha: float = 0.5
    """EWMA weight of the newest observed/predicted TPOT ratio."""
    calibration_bounds: tuple[float, float] = (0.5, 4.0)
    """The calibration factor is clamped to this range: a wilder ratio means a broken metric, not physics."""
    preemption_threshold_per_second: float = 0.05
    """Preemptions per second (all replicas) that, with KV usage >= 0.95, count as KV exhaustion."""

    def __post_init__(self) -> None:
        problems = []
        if not 0.0 <= self.deadband < 1.0:
            problems.append(f"deadband {self.deadband} (accepted: 0 <= deadband < 1)")
        if not 0.0 < self.target_fraction <= 1.0:
            problems.append(f"target_fraction {self.target_fraction} (accepted: 0 < f <= 1)")
        if self.min_samples < 1:
            problems.append(f"min_samples {self.min_samples} (accepted: >= 1)")
        if self.max_replicas_step < 1:
            problems.append(f"max_replicas_step {self.max_replicas_step} (accepted: >= 1)")
        if self.max_seqs_step <= 1.0:
            problems.append(f"max_seqs_step {self.max_seqs_step} (accepted: > 1)")
        if not 0.0 < self.calibration_alpha <= 1.0:
            problems.append(f"calibration_alpha {self.calibration_alpha} (accepted: 0 < alpha <= 1)")
        low, high = self.calibration_bounds
        if not 0.0 < low <= 1.0 <= high:
            problems.append(f"calibration_bounds {self.calibration_bounds} (accepted: 0 < low <= 1 <= high)")
        if self.cooldown_seconds < 0 or self.sample_deadline_seconds < 0:
            problems.append("cooldown_seconds and sample_deadline_seconds must be >= 0")
        if problems:
            raise ValueError("invalid control tuning: " + "; ".join(problems))


class TPOTModel(Protocol):
    """TPOT as a function of the batch: :class:`capacity.Curve`, the serving model the planner sized the
    plan with (same shape, same percentile), so the planner and the law agree by construction."""

    def mean_seconds(self, batch: int) -> float:
        """Uncalibrated mean TPOT at ``batch``."""
        ...

    def fixed_seconds(self, batch: int) -> float:
        """The part of the uncalibrated mean TPOT at ``batch`` that does not grow with the batch."""
        ...

    def tpot_seconds(self, batch: int, calibration: Calibration = UNCALIBRATED) -> float:
        """Calibrated TPOT at the SLO's percentile at ``batch``, as the SLO is held."""
        ...

    def measured_seconds(self, batch: int, calibration: Calibration = UNCALIBRATED) -> float:
        """Calibrated TPOT at the percentile as the observation measures it (vLLM's histogram)."""
        ...


@dataclass(frozen=True, kw_only=True)
class Current:
    """The plan that is deployed now."""

    tensor_parallel_size: int
    max_num_seqs: int
    """Seats of one engine; a replica has ``data_parallel_size`` engines."""
    kv_cache_dtype: str
    replicas: int
    max_num_seqs_limit: int
    """Largest max-num-seqs the KV cache can hold at the workload's context (the planner's memory bound)."""
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    """Attention engines per replica (data-parallel attention with expert parallelism), each with
    ``max_num_seqs`` seats. vLLM reports each engine's running requests as a series of its own, so the
    window's mean batch is one engine's: the batch the serving model prices."""

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    @property
    def engines(self) -> int:
        """Engines over all replicas."""
        return self.replicas * self.data_parallel_size

    def replicas_for(self, demand: float, per_engine: int) -> int:
        """Replicas that seat ``demand`` at ``per_engine`` sequences an engine."""
        return math.ceil(demand / (max(1, per_engine) * self.data_parallel_size))


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """Limits from the spec and from the model's TP rules."""

    min_replicas: int
    max_replicas: int
    max_gpus: int
    fp8_kv_allowed: bool = True
    """False when the spec pins the KV-cache dtype."""
    larger_tensor_parallel_size: int | None = None
    """The next valid TP above the current one (capacity.valid_tensor_parallel_sizes), or None."""

    def replica_ceiling(self, gpus_per_replica: int) -> int:
        """Most replicas allowed: max_replicas and the GPU budget, whichever binds."""
        return max(0, min(self.max_replicas, self.max_gpus // max(1, gpus_per_replica)))


@dataclass(frozen=True, kw_only=True)
class History:
    """What the loop remembers between periods (kept in status by the operator)."""

    calibration: Calibration = UNCALIBRATED
    """The serving model's calibration learned so far."""
    last_change_time: float | None = None
    """When the last change was applied, or last seen still rolling out (unix seconds)."""
    waiting_for_samples_since: float | None = None
    """When the loop started waiting for min_samples; None when it is not waiting."""
    missed_batch: int | None = None
    """The seats in use per engine (per replica without data parallelism) when TPOT was last measured
    above the SLO: raising max-num-seqs for a queue stops halfway to it (the law bisects between a batch
    that met the SLO and one that missed, instead of trusting a model that just failed there), until
    ``missed_time`` is ``MISSED_MEMORY_PROBES`` probes old (:meth:`Period._remembered`)."""
    missed_time: float | None = None
    met_batch: int | None = None
    """The largest seats in use per engine at which TPOT was measured within the SLO, while remembered
    (as ``missed_batch``; a miss at or below it forgets it): TPOT does not fall as the batch grows, so half
    of it is a batch the engine has shown it serves within the SLO, whatever the calibrated model says."""
    met_time: float | None = None
    demand: float | None = None
    """The demand a period with metrics saw (:attr:`Period.load`), the baseline of the trend: kept until it
    is ``TREND_BASE_WINDOWS`` of a window old, then replaced by the next reading."""
    demand_time: float | None = None
    """When ``demand`` was seen."""


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One move with its reason and the numbers behind it."""

    action: Action
    reason: str
    """CamelCase, for events and conditions."""
    message: str
    """One line with the numbers that caused the move."""
    max_num_seqs: int
    replicas: int
    """Replicas to write (unchanged when recommend_only)."""
    recommended_replicas: int
    """What kvright would run; differs from `replicas` only when an HPA owns the replica count."""
    recommend_only: bool = False
    kv_cache_dtype: str | None = None
    """For Replan: the KV-cache dtype to plan with."""
    tensor_parallel_size: int | None = None
    """For Replan: the TP degree to plan with."""
    slo_met: bool | None = None
    """True/False when TPOT was measured; None when unknown."""
    tpot_ratio: float | None = None
    """Observed TPOT / SLO."""
    ttft_ratio: float | None = None
    """Observed TTFT / TTFT SLO, when the spec states a TTFT SLO and TTFT was measured."""
    calibration: Calibration = UNCALIBRATED
    history: History = field(default_factory=History)

    @property
    def changes_plan(self) -> bool:
        return self.action in (
            Action.SET_MAX_NUM_SEQS,
            Action.ADD_REPLICAS,
            Action.REMOVE_REPLICAS,
            Action.REPLAN,
        )


def target_batch(predict: Callable[[int], float], *, budget_seconds: float, limit: int) -> int:
    """Largest batch b in [1, limit] with predict(b) <= budget_seconds; 0 when even b=1 is too slow.

    `predict` must be non-decreasing in b (decode steps get slower with batch); the search is the
    planner's (:func:`capacity.largest_within`), so both size batches the same way.
    """
    budget = budget_seconds * (1.0 + 1e-9)  # a prediction equal to the budget fits, float rounding aside
    return max(0, largest_within(1, limit, predict, budget))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000.0:.1f} ms"


# -- the law as ordered rules ---------------------------------------------------------------------------
#
# decide() builds a Period (everything the rules read, computed once) and asks the rules in order; the
# first one that answers decides. Rules before calibration (PRE_MEASUREMENT) see no TPOT model; the rest
# (MEASURED) see a Measured period with the calibrated curve. Each rule is a small pure function, tested
# on its own in tests/unit/test_control.py.


@dataclass(frozen=True, kw_only=True)
class Period:
    """One period's inputs and the facts every rule reads, derived once."""

    current: Current
    observation: Observation
    slo_tpot_seconds: float
    bounds: Bounds
    tuning: Tuning
    history: History
    now: float
    hpa_present: bool = False
    rollout_in_progress: bool = False
    scaling_out: bool = False
    """The rollout in progress only adds replicas (no running pod is replaced)."""
    slo_ttft_seconds: float | None = None
    restart_seconds: float = 0.0
    """Predicted time a move that restarts every pod takes (the pods' cold start, one after another);
    0 when not known."""
    cold_start_seconds: float = 0.0
    """Predicted time from adding a replica to its serving (one pod's cold start); 0 when not known."""

    @property
    def ceiling(self) -> int:
        return self.bounds.replica_ceiling(self.current.gpus_per_replica)

    @property
    def in_cooldown(self) -> bool:
        last = self.history.last_change_time
        return last is not None and self.now - last < self.tuning.cooldown_seconds

    @property
    def fresh(self) -> bool:
        """A whole observation window has passed since the last change: the window judges this plan."""
        last = self.history.last_change_time
        return last is None or self.now - last >= self.observation.window_seconds

    @property
    def ttft_ratio(self) -> float | None:
        """Observed TTFT at the percentile over the TTFT SLO; None when either is missing."""
        ttft, slo = self.observation.ttft_seconds, self.slo_ttft_seconds
        return ttft / slo if ttft is not None and slo else None

    @property
    def waiting(self) -> float:
        return self.observation.waiting if self.observation.waiting is not None else 0.0

    @property
    def running(self) -> float:
        obs = self.observation
        return obs.running if obs.running is not None else (obs.mean_batch or 0.0) * self.current.engines

    @property
    def demand(self) -> float:
        return self.running + self.waiting

    @property
    def load(self) -> float:
        """The demand averaged over the window (the mean running per replica times the replicas reporting,
        plus those waiting now): what the trend compares, as the gauge at one instant swings by tens of
        requests at a steady load."""
        obs = self.observation
        if obs.mean_batch is None or not math.isfinite(obs.mean_batch):
            return self.demand
        return obs.mean_batch * (obs.replicas_reporting or self.current.engines) + self.waiting

    @property
    def rising(self) -> float:
        """Requests per second by which the demand grew since the trend's baseline (History.demand), when
        the growth is beyond a count's noise (the square root of the earlier count) and the baseline is
        between half a window and three windows old; else 0. Falling demand is 0 too: releasing waits for
        what is.

        Two window means read closer together than half a window share most of their samples and differ
        by the few that entered and left: one odd scrape (a replica stalled for a moment) moves a mean over
        a handful of samples by more than the count's noise, and a growth that small over a few seconds,
        extrapolated, reads as a steep trend. Half a window apart, at least half the samples differ."""
        h = self.history
        if h.demand is None or h.demand_time is None or not self.observation.available or self.waiting > 0:
            return 0.0
        elapsed = self.now - h.demand_time
        window = max(1, self.observation.window_seconds)
        if not TREND_BASE_WINDOWS * window <= elapsed <= 3 * window:
            return 0.0
        grew = self.load - h.demand
        if grew <= math.sqrt(max(1.0, h.demand)):
            return 0.0
        return grew / elapsed

    @property
    def horizon_seconds(self) -> float:
        """How far ahead a replica added now must serve (its cold start, then a window to judge it), but no
        further than :data:`TREND_REACH` times the span the trend was measured over: two readings a minute
        apart do not say where the load is a quarter of an hour later."""
        h = self.history
        span = self.now - h.demand_time if h.demand_time is not None else 0.0
        return min(self.cold_start_seconds + self.observation.window_seconds, TREND_REACH * max(0.0, span))

    @property
    def trend_base_due(self) -> bool:
        """This period's demand becomes the trend's baseline: there is none, or it is half a window old."""
        h = self.history
        window = max(1, self.observation.window_seconds)
        return h.demand_time is None or self.now - h.demand_time >= TREND_BASE_WINDOWS * window

    @property
    def forecast(self) -> float:
        """The demand when a replica added now starts serving, at the trend :attr:`rising` measured (the
        demand now when it is not rising): capacity is planned for the load the cold start will meet."""
        return self.demand + self.rising * self.horizon_seconds

    @property
    def queued(self) -> bool:
        """Requests wait while the seats or the KV cache are full. A request that arrived between two steps
        waits for the next one while seats are free: that is admission, not a queue, and buys nothing."""
        seats = self.current.max_num_seqs * self.current.engines
        full = self.running >= 0.9 * seats or (self.observation.kv_cache_usage or 0.0) >= 0.9
        return self.waiting >= 1.0 and full

    @property
    def samples_short(self) -> bool:
        return self.observation.sample_count < self.tuning.min_samples

    @property
    def waiting_for_samples_since(self) -> float:
        since = self.history.waiting_for_samples_since
        return since if since is not None else self.now

    def _remembered(self, batch: int | None, at: float | None) -> int | None:
        """``batch``, measured at ``at``, while the loop remembers it (``MISSED_MEMORY_PROBES`` probes),
        else None. A probe of max-num-seqs costs a restart of the pods and a cooldown before its window is
        judged, so the memory is counted in those, not in cooldowns alone: where the restart is long next
        to the cooldown, a few probes would otherwise outlast it, and the loop would probe again a batch it
        has just measured above the SLO (the fresh-clone CI's real engine went 32 missed, 27 met, and
        three minutes later 40, missed again)."""
        if batch is None or at is None:
            return None
        probe = self.tuning.cooldown_seconds + self.restart_seconds
        if self.now - at > MISSED_MEMORY_PROBES * probe:
            return None
        return batch

    @property
    def recent_miss(self) -> int | None:
        """:attr:`History.missed_batch` while it is remembered, else None."""
        return self._remembered(self.history.missed_batch, self.history.missed_time)

    @property
    def recent_met(self) -> int | None:
        """:attr:`History.met_batch` while it is remembered, else None."""
        return self._remembered(self.history.met_batch, self.history.met_time)

    @property
    def history_after(self) -> History:
        """The history a measured decision starts from: the samples clock runs only while short."""
        since = self.waiting_for_samples_since if self.samples_short else None
        return replace(self.history, waiting_for_samples_since=since)

    def decision(
        self,
        action: Action,
        reason: str,
        message: str,
        *,
        new_seqs: int | None = None,
        new_reps: int | None = None,
        hist: History | None = None,
        calibration: Calibration | None = None,
        slo_met: bool | None = None,
        ratio: float | None = None,
        kv_cache_dtype: str | None = None,
        tensor_parallel_size: int | None = None,
    ) -> Decision:
        """A Decision, with an HPA's ownership of replicas and the cooldown clock applied."""
        seqs, reps = self.current.max_num_seqs, self.current.replicas
        new_seqs = seqs if new_seqs is None else new_seqs
        new_reps = reps if new_reps is None else new_reps
        calibration = self.history.calibration if calibration is None else calibration
        recommend_only = self.hpa_present and new_reps != reps
        if recommend_only:
            message += f"; an HPA owns replicas: recommending {new_reps}, not writing it"
            if action in (Action.ADD_REPLICAS, Action.REMOVE_REPLICAS):
                action = Action.SET_MAX_NUM_SEQS if new_seqs != seqs else Action.KEEP
        hist = replace(hist if hist is not None else self.history, calibration=calibration)
        if self.observation.available and self.trend_base_due:
            hist = replace(hist, demand=self.load, demand_time=self.now)
        if action in _CHANGES:
            hist = replace(hist, last_change_time=self.now)
        return Decision(
            action=action,
            reason=reason,
            message=message,
            max_num_seqs=new_seqs,
            replicas=reps if self.hpa_present else new_reps,
            recommended_replicas=new_reps,
            recommend_only=recommend_only,
            kv_cache_dtype=kv_cache_dtype,
            tensor_parallel_size=tensor_parallel_size,
            slo_met=slo_met,
            tpot_ratio=ratio,
            ttft_ratio=self.ttft_ratio,
            calibration=calibration,
            history=hist,
        )


_CHANGES = (Action.SET_MAX_NUM_SEQS, Action.ADD_REPLICAS, Action.REMOVE_REPLICAS, Action.REPLAN)
#: How far a demand trend is extrapolated at most, in spans it was measured over (Period.horizon_seconds).
TREND_REACH = 3.0
#: How old, in windows, the trend's baseline reading is at least (Period.rising): at the operator's default
#: reconcile period (60 s) and window (60 s) every period replaces it; a period shorter than half the window
#: keeps it for several periods.
TREND_BASE_WINDOWS = 0.5
#: How many probes (a restart of the pods and a cooldown each) a measured miss keeps capping raises of
#: max-num-seqs (History.missed_batch), and a measured batch within the SLO is kept (History.met_batch).
MISSED_MEMORY_PROBES = 6


@dataclass(frozen=True, kw_only=True)
class Measured:
    """A period with a measured TPOT: the calibrated curve and the numbers every message carries."""

    period: Period
    observed_tpot_seconds: float
    calibration: Calibration
    model: TPOTModel
    target: int
    """The largest batch whose calibrated TPOT stays within ``target_fraction x SLO``."""

    @property
    def ratio(self) -> float:
        """The observed reading over the SLO: what SLOMet and a violation are judged on."""
        return self.observed_tpot_seconds / self.period.slo_tpot_seconds

    @property
    def headroom_ratio(self) -> float:
        """What headroom is judged on: the lower of the reading and the calibrated model's percentile at
        the served batch, over the SLO. vLLM's histogram reads every TPOT inside a bucket near its top
        (all of 10-25 ms reads 23.5 ms at p90), so a reading alone cannot show headroom below a bucket
        bound; the calibration reproduces the reading, and its percentile is the estimate of the truth."""
        served = served_batch(self.period.observation)
        if served is None:
            return self.ratio
        estimate = self.model.tpot_seconds(served, self.release_calibration)
        return min(self.ratio, estimate / self.period.slo_tpot_seconds)

    def calibrated(self, batch: int) -> float:
        return self.model.tpot_seconds(batch, self.calibration)

    @property
    def release_calibration(self) -> Calibration:
        """The calibration a release is judged with. A reading in the same histogram bucket as the mean
        (all of 10-25 ms reads 23.5 ms at p90) cannot show the spread, so a tail wider than the model's own
        learned from earlier windows is not evidence here: the release uses the model's spread (tail 1)
        then. Elsewhere the learned calibration as it is."""
        obs = self.period.observation
        mean = obs.tpot_mean_seconds
        if self.calibration.tail <= 1.0 or mean is None or not math.isfinite(mean):
            return self.calibration
        if _bucket(mean) != _bucket(self.observed_tpot_seconds):
            return self.calibration
        return replace(self.calibration, tail=1.0)

    @property
    def head(self) -> str:
        p = self.period
        obs = p.observation
        if p.samples_short:
            note = (
                f" (only {obs.sample_count} samples; deadline of {p.tuning.sample_deadline_seconds:.0f}s "
                "passed)"
            )
        else:
            note = f" ({obs.sample_count} samples)"
        return (
            f"p{obs.percentile} TPOT {_ms(self.observed_tpot_seconds)} vs SLO {_ms(p.slo_tpot_seconds)} "
            f"(x{self.ratio:.2f}){note}"
        )

    @property
    def detail(self) -> str:
        p, c = self.period, self.calibration
        return (
            f"calibration x{c.scale:.2f} (per-batch x{c.batch_scale:.3g}, tail x{c.tail:.2f}), "
            f"target batch {self.target}, "
            f"demand {p.demand:.0f} ({p.running:.0f} running, {p.waiting:.0f} waiting), "
            f"max-num-seqs {p.current.max_num_seqs}, replicas {p.current.replicas}"
        )

    @property
    def seats_in_use(self) -> int:
        """The seats per engine (per replica without data parallelism) the load fills: what max-num-seqs
        really limits. A roofline plan may grant
        a thousand seats to a load that fills forty; halving the thousand would change nothing."""
        p = self.period
        engines = max(1, p.current.engines)
        batch = max(p.observation.mean_batch or 0.0, p.running / engines)
        return max(1, min(p.current.max_num_seqs, math.ceil(batch + p.waiting / engines)))

    @property
    def min_step(self) -> int:
        """The smallest max-num-seqs one move may go to: the seats in use over ``max_seqs_step``."""
        return max(1, math.floor(self.seats_in_use / self.period.tuning.max_seqs_step))

    @property
    def max_step(self) -> int:
        """The largest max-num-seqs one move may go to."""
        seqs = self.period.current.max_num_seqs
        return max(seqs + 1, math.ceil(seqs * self.period.tuning.max_seqs_step))

    def act(self, action: Action, reason: str, message: str, **moves: Any) -> Decision:
        """:meth:`Period.decision` with this measurement's calibration, ratio and history; ``moves`` are
        its ``new_seqs``, ``new_reps``, ``kv_cache_dtype`` and ``tensor_parallel_size``. A move that
        restarts the pods says what the restart costs, at the predicted cold start."""
        p = self.period
        seqs = moves.get("new_seqs")
        restarts = action == Action.REPLAN or (seqs is not None and seqs != p.current.max_num_seqs)
        if restarts and p.restart_seconds > 0:
            message += (
                f"; restarting the {p.current.replicas} pod(s) takes about {p.restart_seconds:.0f}s at the "
                "predicted cold start"
            )
        hist = self.period.history_after
        seats, met = self.seats_in_use, p.recent_met
        # A window that still holds the last plan's pods, or their start, says nothing of this plan's
        # batches (one read 49 ms at a batch of 3 just after a restart, and wiped the 27 that had met),
        # unless the law moves on it.
        judged = p.fresh or action in _CHANGES
        if judged and self.ratio > 1.0:
            hist = replace(hist, missed_batch=seats, missed_time=p.now)
            if met is not None and met >= seats:
                hist = replace(hist, met_batch=None, met_time=None)  # what met then does not hold now
        elif judged and not p.samples_short:
            hist = replace(hist, met_batch=max(seats, met or 0), met_time=p.now)
        return self.period.decision(
            action,
            reason,
            message,
            hist=hist,
            calibration=self.calibration,
            slo_met=self.ratio <= 1.0,
            ratio=self.ratio,
            **moves,
        )


# -- rules before a measurement --------------------------------------------------------------------------


def metrics_unavailable(p: Period) -> Decision | None:
    """No usable metrics: keep everything, with the observation's reason."""
    obs = p.observation
    if obs.available:
        return None
    return p.decision(Action.KEEP, obs.reason, f"no action: {obs.message}")


def rolling_out(p: Period) -> Decision | None:
    """A rollout in progress: the window mixes old and new pods and would judge a plan that is not running
    yet. Keep, and restart the cooldown so the next decision sees a window taken after the rollout."""
    if not p.rollout_in_progress:
        return None
    if p.scaling_out and not p.hpa_present and _short(p):
        return None  # replicas are being added and users still wait: scale_out_while_adding may add more
    return _keep_rolling(p)


def _short(p: Period) -> bool:
    """The reading misses the TPOT SLO, or requests queue (seats full, or TTFT above its SLO)."""
    reading = p.observation.tpot_seconds
    return (reading is not None and reading > p.slo_tpot_seconds) or p.queued or _ttft_queueing(p)


def _keep_rolling(p: Period) -> Decision:
    c = p.current
    return p.decision(
        Action.KEEP,
        Reason.ROLLOUT_IN_PROGRESS,
        f"the Deployment is still rolling out max-num-seqs {c.max_num_seqs} x {c.replicas} replica(s); "
        f"the cooldown of {p.tuning.cooldown_seconds:.0f}s starts when it is done",
        hist=replace(p.history, last_change_time=p.now),
    )


def too_few_samples(p: Period) -> Decision | None:
    """Fewer than ``min_samples`` finished requests: wait, but only until ``sample_deadline_seconds``;
    after that act on what there is, and with no traffic at all step replicas down towards the minimum."""
    if not p.samples_short:
        return None
    obs, tuning = p.observation, p.tuning
    since = p.waiting_for_samples_since
    waited = p.now - since
    hist = replace(p.history, waiting_for_samples_since=since)
    if waited < tuning.sample_deadline_seconds:
        return p.decision(
            Action.WAIT,
            Reason.INSUFFICIENT_SAMPLES,
            f"{obs.sample_count} of {tuning.min_samples} requests in {obs.window_seconds}s; "
            f"waiting {waited:.0f}s of at most {tuning.sample_deadline_seconds:.0f}s",
            hist=hist,
        )
    if obs.tpot_seconds is not None:
        return None  # the deadline passed and there is something to measure: the measured rules decide
    reps = p.current.replicas
    if p.demand == 0 and reps > p.bounds.min_replicas:
        if p.in_cooldown:
            return p.decision(
                Action.KEEP,
                Reason.COOLDOWN,
                "no traffic, but a change was made within the cooldown",
                hist=hist,
            )
        return p.decision(
            Action.REMOVE_REPLICAS,
            Reason.NO_TRAFFIC,
            f"no finished requests for {waited:.0f}s and none running or waiting; "
            f"replicas {reps} -> {reps - 1} (min {p.bounds.min_replicas})",
            new_reps=reps - 1,
            hist=hist,
        )
    return p.decision(
        Action.KEEP,
        Reason.NO_TRAFFIC if p.demand == 0 else Reason.INSUFFICIENT_SAMPLES,
        f"no finished requests in {obs.window_seconds}s after waiting {waited:.0f}s; "
        f"{p.running:.0f} running, {p.waiting:.0f} waiting; nothing to measure",
        hist=hist,
    )


def tpot_unmeasured(p: Period) -> Decision | None:
    """Available metrics with enough samples always carry TPOT; stay total anyway."""
    if p.observation.tpot_seconds is not None:
        return None
    return p.decision(Action.KEEP, Reason.TPOT_UNAVAILABLE, "TPOT not measured", hist=p.history_after)


PRE_MEASUREMENT: tuple[Callable[[Period], Decision | None], ...] = (
    metrics_unavailable,
    rolling_out,
    too_few_samples,
    tpot_unmeasured,
)


# -- rules on a measurement -------------------------------------------------------------------------------


def scale_out_while_adding(m: Measured) -> Decision | None:
    """Replicas are being added (their pods still starting) and the SLO is still missed: the replicas
    already asked for count as capacity, and more are added only when the demand measured now needs more
    than all of them at the target batch. Nothing that runs is touched; otherwise keep until the
    rollout is done (a cold start can take minutes, and a rising load must not wait for it)."""
    p = m.period
    if not p.rollout_in_progress:
        return None
    reason = Reason.TPOT_ABOVE_SLO if m.ratio > 1.0 else Reason.REQUESTS_WAITING
    if m.ratio <= 1.0 and _ttft_queueing(p):
        reason = Reason.TTFT_ABOVE_SLO
    scaled = _scale_out(m, reason, at_least_one=False)
    return scaled if scaled is not None else _keep_rolling(p)


def demand_rising(m: Measured) -> Decision | None:
    """The SLO holds, but the demand grows fast enough that the replicas there are will not carry it at
    the target batch by the time a replica added now has started (:attr:`Period.forecast`): add them
    now. A reactive loop adds them only once the SLO is missed, and the load meets a cold start. Adding
    replicas restarts nothing, so it needs only a fresh window since the last change, not the cooldown."""
    p = m.period
    if p.rising <= 0 or not p.fresh or p.hpa_present or m.target < 1 or m.ratio > 1.0:
        return None
    seqs, reps = p.current.max_num_seqs, p.current.replicas
    per_replica = min(seqs, m.target)
    needed = p.current.replicas_for(p.forecast, per_replica)
    new_reps = min(needed, p.ceiling)
    if new_reps <= reps:
        return None
    return m.act(
        Action.ADD_REPLICAS,
        Reason.DEMAND_RISING,
        f"{m.head}; demand {p.demand:.0f} rising by {p.rising * 60:.1f}/min: about {p.forecast:.0f} in "
        f"{p.horizon_seconds:.0f}s (a replica's cold start and a window) needs {needed} at batch "
        f"{per_replica}; replicas {reps} -> {new_reps}; {m.detail}",
        new_reps=new_reps,
    )


def cooling_down(m: Measured) -> Decision | None:
    """No move that restarts pods or removes a replica within ``cooldown_seconds`` of the last change
    (when there is anything to change). Adding replicas disturbs nothing that runs, so an SLO miss or a
    queue still scales out once a fresh window has judged the last change."""
    p = m.period
    if not p.in_cooldown:
        return None
    short = m.ratio > 1.0 or _ttft_queueing(p) or p.queued
    if not (short or m.headroom_ratio < 1.0 - p.tuning.deadband):
        return None
    if short and p.fresh:
        reason = Reason.TPOT_ABOVE_SLO if m.ratio > 1.0 else Reason.REQUESTS_WAITING
        if m.ratio <= 1.0 and _ttft_queueing(p):
            reason = Reason.TTFT_ABOVE_SLO
        scaled = _scale_out(m, reason, at_least_one=m.ratio <= 1.0)
        if scaled is not None:
            return scaled
    assert p.history.last_change_time is not None
    left = p.tuning.cooldown_seconds - (p.now - p.history.last_change_time)
    return m.act(Action.KEEP, Reason.COOLDOWN, f"{m.head}; cooldown {left:.0f}s left; {m.detail}")


def _ttft_queueing(p: Period) -> bool:
    """TTFT above its SLO while requests wait: a queue that more engines would serve."""
    return (p.ttft_ratio or 0.0) > 1.0 and p.waiting >= 1.0


def _scale_out(m: Measured, reason: str, *, at_least_one: bool) -> Decision | None:
    """Add replicas and keep max-num-seqs (no pod restarts, no cold start of the running ones) when the
    GPU budget holds the demand at the target batch; None when it cannot, or nothing needs adding.
    ``at_least_one``: a queue or a TTFT miss asks for one more replica even when the demand, as
    measured, would fit."""
    p = m.period
    if p.hpa_present:
        return None  # an HPA owns the replica count: kvright's own lever is max-num-seqs
    seqs, reps, step = p.current.max_num_seqs, p.current.replicas, p.tuning.max_replicas_step
    if m.target >= 1:
        per_replica = min(seqs, m.target)
    elif at_least_one:
        per_replica = seqs
    else:
        return None
    needed = p.current.replicas_for(p.demand, per_replica) if p.demand > 0 else reps
    if needed > p.ceiling and not p.queued and not _ttft_queueing(p):
        return None  # the budget cannot hold the demand and nothing waits: a smaller batch or a re-plan
    # Sized for the demand the new pods will meet once started (the trend over their cold start).
    needed = max(needed, p.current.replicas_for(p.forecast, per_replica))
    # Adding replicas restarts nothing that runs, so the fleet goes to what the measured demand needs at
    # the target batch in one move (each move waits for its pods' cold start and a fresh window: steps
    # of max_replicas_step left a rising load above the SLO for several cold starts in a row).
    step = max(step, needed - reps)
    new_reps = min(max(needed, reps + 1) if at_least_one else needed, reps + step, p.ceiling)
    if new_reps <= reps:
        return None
    short = f", the budget holds {p.ceiling}" if needed > p.ceiling else ""
    return m.act(
        Action.ADD_REPLICAS,
        reason,
        f"{m.head}; replicas {reps} -> {new_reps} at max-num-seqs {seqs} (demand {p.demand:.0f} at batch "
        f"{per_replica} needs {needed}{short}; adding replicas restarts no pod); {m.detail}",
        new_reps=new_reps,
    )


def _replan(m: Measured, why: str) -> Decision:
    """The next cheaper re-plan: fp8 KV cache, then the next valid larger TP, else SLOUnattainable."""
    p = m.period
    c, b = p.current, p.bounds
    if b.fp8_kv_allowed and not c.kv_cache_dtype.startswith("fp8"):
        return m.act(
            Action.REPLAN,
            Reason.REPLAN_FP8_KV_CACHE,
            f"{m.head}; {why}; re-plan with fp8 KV cache; {m.detail}",
            kv_cache_dtype="fp8",
        )
    larger = b.larger_tensor_parallel_size
    if larger is not None and larger <= b.max_gpus:
        return m.act(
            Action.REPLAN,
            Reason.REPLAN_LARGER_TP,
            f"{m.head}; {why}; re-plan with tensor-parallel {c.tensor_parallel_size} -> {larger}; {m.detail}",
            tensor_parallel_size=larger,
        )
    return m.act(
        Action.KEEP,
        Reason.SLO_UNATTAINABLE,
        f"{m.head}; {why}; no cheaper move left (KV dtype {c.kv_cache_dtype}, TP {c.tensor_parallel_size}, "
        f"{p.ceiling} replica(s) max); {m.detail}",
    )


def tpot_above_slo(m: Measured) -> Decision | None:
    """Too slow: lower max-num-seqs towards the target batch (one bounded step) and add replicas for the
    demand that no longer fits; re-plan when the uncalibrated model says batch 1 misses or the budget
    cannot hold the demand."""
    if m.ratio <= 1.0:
        return None
    p = m.period
    seqs, reps, tuning = p.current.max_num_seqs, p.current.replicas, p.tuning
    floor = m.model.tpot_seconds(1)
    if floor > tuning.target_fraction * p.slo_tpot_seconds:
        # The model itself (no calibration) says one sequence is too slow: only a new plan helps.
        return _replan(m, f"even batch 1 is predicted at {_ms(floor)} by the serving model")
    scaled = _scale_out(m, Reason.TPOT_ABOVE_SLO, at_least_one=False)
    if scaled is not None:
        return scaled  # the cheaper move: the budget holds the demand at the target batch
    # When only the calibrated model says batch 1 misses, the calibration (learned at a large batch)
    # may overstate small batches: step down one bounded step and measure again.
    new_seqs, notes = m.min_step, []
    # The reading outranks the model: when the calibrated model still says the seats fit (it learns over
    # windows, and lags a miss at the edge of the SLO), the seats in use were just measured above it.
    lagging = m.target >= seqs
    met = p.recent_met
    if lagging and m.ratio <= 1.0 + tuning.deadband and met is not None and met >= m.seats_in_use:
        # One window a little above the SLO, at seats this plan has been measured serving within it and
        # that the calibrated model fits: one window's percentile moves by that much on its own (the real
        # engine read 24.2, 24.8, then 26.3 ms at the same 53 seats), and a step restarts the pods. The
        # miss is remembered and forgets the met batch (Measured.act), so a second such window moves.
        return m.act(
            Action.KEEP,
            Reason.TPOT_ABOVE_SLO,
            f"{m.head}; {m.seats_in_use} seats in use were measured within the SLO (batch {met}) and the "
            f"calibrated model fits them (target {m.target}): a miss inside the {tuning.deadband:.0%} "
            f"deadband waits for the next window to confirm it before restarting the pods; {m.detail}",
        )
    if lagging:
        new_seqs = math.floor(min(seqs, m.seats_in_use) * (1.0 - tuning.deadband))
        notes.append(
            f"measured above the SLO at {m.seats_in_use} seats in use, which the calibrated model still "
            f"fits (target {m.target}): a step out of the {tuning.deadband:.0%} deadband while it relearns"
        )
        new_seqs = max(new_seqs, m.min_step, 1)
    elif m.target >= 1:
        new_seqs = min(m.target, seqs)
        stepped = math.floor(seqs * (1.0 - tuning.deadband))
        if stepped < new_seqs:
            # A step smaller than the deadband moves TPOT by less than the noise the law judges it by: the
            # next window could as well miss again, and each step restarts the pods. Step out of it.
            new_seqs = stepped
            notes.append(f"a step out of the {tuning.deadband:.0%} deadband, not to the target {m.target}")
        if met is not None and new_seqs < min(met, stepped):
            # Bisect from below too: a batch measured within the SLO since is a floor the model, just
            # recalibrated on a miss, may not take the seats under (the real engine once went 24 met, 33
            # missed, then 17 on the model's word, and had to probe its way back up).
            new_seqs = min(met, stepped)
            notes.append(f"not below batch {met}, measured within the SLO, for the model's {m.target}")
        new_seqs = max(new_seqs, m.min_step, 1)
    needed = p.current.replicas_for(p.demand, new_seqs) if p.demand > 0 else reps
    new_reps = max(min(max(needed, reps), reps + tuning.max_replicas_step, p.ceiling), p.bounds.min_replicas)
    short = (
        f"demand {p.demand:.0f} needs {needed} replicas at batch {new_seqs}, the budget allows {p.ceiling}"
        if needed > p.ceiling
        else ""
    )
    if short:
        notes.append(short)
    note = f" ({'; '.join(notes)})" if notes else ""
    if new_reps > reps:
        return m.act(
            Action.ADD_REPLICAS,
            Reason.TPOT_ABOVE_SLO,
            f"{m.head}; max-num-seqs {seqs} -> {new_seqs}, replicas {reps} -> {new_reps}{note}; {m.detail}",
            new_seqs=new_seqs,
            new_reps=new_reps,
        )
    if short and (new_seqs >= seqs or lagging):
        # The demand does not fit the budget at the seats the model allows: a cheaper plan (fp8 KV cache, a
        # larger TP) serves more per GPU; without one, step the seats down as measured.
        replanned = _replan(m, short)
        if new_seqs >= seqs or replanned.action == Action.REPLAN:
            return replanned
    if new_seqs < seqs:
        return m.act(
            Action.SET_MAX_NUM_SEQS,
            Reason.TPOT_ABOVE_SLO,
            f"{m.head}; max-num-seqs {seqs} -> {new_seqs}{note}; {m.detail}",
            new_seqs=new_seqs,
        )
    return m.act(
        Action.KEEP,
        Reason.TPOT_ABOVE_SLO,
        f"{m.head}; the plan already fits the calibrated model (target batch {m.target}); "
        f"recalibrating before moving; {m.detail}",
    )


def kv_cache_preempting(m: Measured) -> Decision | None:
    """KV cache exhausted (preemptions while usage is near 1): lower max-num-seqs one step."""
    p = m.period
    obs, seqs = p.observation, p.current.max_num_seqs
    preempting = (
        obs.preemptions_per_second is not None
        and obs.preemptions_per_second >= p.tuning.preemption_threshold_per_second
        and obs.kv_cache_usage is not None
        and obs.kv_cache_usage >= 0.95
    )
    if not preempting or seqs <= 1 or p.in_cooldown:
        return None
    new_seqs = max(m.min_step, math.floor(seqs * 0.75), 1)
    return m.act(
        Action.SET_MAX_NUM_SEQS,
        Reason.KV_CACHE_PREEMPTING,
        f"{m.head}; {obs.preemptions_per_second:.2f} preemptions/s at KV usage "
        f"{(obs.kv_cache_usage or 0) * 100:.0f}%; max-num-seqs {seqs} -> {new_seqs}; {m.detail}",
        new_seqs=new_seqs,
    )


def ttft_above_slo(m: Measured) -> Decision | None:
    """TTFT above its SLO: with requests waiting, add replicas (else raise max-num-seqs within the TPOT
    target); without a queue the prefill itself is slow and nothing the loop moves helps, so keep (and
    never scale down)."""
    p = m.period
    ratio = p.ttft_ratio
    if ratio is None or ratio <= 1.0:
        return None
    ttft = p.observation.ttft_seconds or 0.0
    head = f"{m.head}; p{p.observation.percentile} TTFT {_ms(ttft)} vs SLO {_ms(p.slo_ttft_seconds or 0.0)}"
    if p.waiting < 1.0:
        return m.act(
            Action.KEEP,
            Reason.TTFT_ABOVE_SLO,
            f"{head}; nothing waits, so the prefill itself is slow: more replicas or seats would not "
            f"shorten it (a larger tensor-parallel degree or shorter prompts would); {m.detail}",
        )
    scaled = _scale_out(m, Reason.TTFT_ABOVE_SLO, at_least_one=True)
    if scaled is not None:
        return scaled
    raised = _more_seats(m)
    if raised is not None:
        return raised
    return m.act(
        Action.KEEP,
        Reason.REPLICA_CEILING,
        f"{head}; {p.waiting:.0f} waiting but replicas are at the ceiling {p.ceiling} and max-num-seqs at "
        f"the TPOT target; {m.detail}",
    )


def _bucket(seconds: float) -> int:
    """The index of vLLM's TPOT histogram bucket holding ``seconds`` (len(buckets) past the last)."""
    return next(
        (i for i, upper in enumerate(TPOT_HISTOGRAM_BUCKETS) if seconds <= upper), len(TPOT_HISTOGRAM_BUCKETS)
    )


def headroom(m: Measured) -> Decision | None:
    """TPOT below ``(1 - deadband) x SLO``: serve a queue with more seats or replicas; with nothing
    waiting, release one replica if the rest carry the demand at the target batch."""
    p = m.period
    if m.headroom_ratio >= 1.0 - p.tuning.deadband:
        return None
    seqs, reps = p.current.max_num_seqs, p.current.replicas
    if p.queued:
        return _serve_queue(m)
    ttft_room = p.ttft_ratio is None or p.ttft_ratio < 1.0 - p.tuning.deadband
    if reps > p.bounds.min_replicas and m.target >= 1 and p.waiting == 0 and ttft_room:
        # The batch each engine of the replicas left would serve (a replica has data_parallel_size), at the
        # larger of the demand now and the window's mean load: the gauges at one instant can dip far below
        # the load (a simulated fleet under 48 clients once read 14, and a release put 48 on one replica).
        carried = max(p.demand, p.load)
        per_replica_after = carried / ((reps - 1) * p.current.data_parallel_size)
        judged = m.release_calibration
        after = m.model.tpot_seconds(max(1, math.ceil(per_replica_after)), judged)
        # Hysteresis: the replicas left must run inside the deadband, not merely at the target, or the
        # next noisy window would add back what this one removed.
        calm = after < (1.0 - p.tuning.deadband) * p.slo_tpot_seconds
        need = max(1, math.ceil(per_replica_after))
        missed = p.recent_miss
        # Fewer seats than the replicas left need (a loop that stepped max-num-seqs down under a load that
        # has since fallen): release the replica and give the rest the seats in the same move, or the
        # fleet stays large forever (no queue raises the seats, and the seats block the release).
        new_seqs = max(seqs, need)
        # Or measured: half a batch served within the SLO (the model's spread can be learned wide from
        # windows that cannot show it, and would then hold every replica for good).
        met = p.recent_met
        proven = met is not None and need <= met // 2
        target = m.target
        if judged is not m.calibration:
            target = _target(p, m.model, judged)
        fits = (need <= target or proven) and (new_seqs == seqs or missed is None or new_seqs < missed)
        if fits and (calm or proven):
            seats = f", max-num-seqs {seqs} -> {new_seqs}" if new_seqs != seqs else ""
            return m.act(
                Action.REMOVE_REPLICAS,
                Reason.TPOT_WELL_BELOW_SLO,
                f"{m.head}; demand fits {reps - 1} replica(s) at batch {per_replica_after:.1f} "
                f"(predicted {_ms(after)}); "
                f"replicas {reps} -> {reps - 1}{seats}; {m.detail}",
                new_reps=reps - 1,
                new_seqs=new_seqs,
            )
    return m.act(Action.KEEP, Reason.SLO_MET, f"{m.head}; headroom but nothing to release; {m.detail}")


def _serve_queue(m: Measured) -> Decision:
    """Requests wait at full seats: more seats while the TPOT target allows (unless a replica serves the
    queue sooner than restarting every pod for them), else more replicas, else the ceiling says so."""
    p = m.period
    seqs, reps = p.current.max_num_seqs, p.current.replicas
    raised = _more_seats(m)
    if raised is not None and not _replica_serves_sooner(p):
        return raised
    needed = p.current.replicas_for(p.demand, seqs)
    new_reps = min(max(needed, reps + 1), reps + p.tuning.max_replicas_step, p.ceiling)
    if new_reps > reps:
        sooner = ""
        if raised is not None:
            sooner = (
                f" (sooner than max-num-seqs {seqs} -> {raised.max_num_seqs}, which restarts the "
                f"{reps} pods one after another, about {p.restart_seconds:.0f}s: a replica serves after "
                f"one cold start, about {p.cold_start_seconds:.0f}s)"
            )
        return m.act(
            Action.ADD_REPLICAS,
            Reason.REQUESTS_WAITING,
            f"{m.head}; {p.waiting:.0f} waiting at max-num-seqs {seqs}; replicas {reps} -> {new_reps}"
            f"{sooner}; {m.detail}",
            new_reps=new_reps,
        )
    if raised is not None:
        return raised
    return m.act(
        Action.KEEP,
        Reason.REPLICA_CEILING,
        f"{m.head}; {p.waiting:.0f} waiting but replicas are at the ceiling {p.ceiling}; {m.detail}",
    )


def _replica_serves_sooner(p: Period) -> bool:
    """The cold start counted as the cost of a restart: more seats reach a queue only when every pod has
    restarted, one after another (``restart_seconds``); a replica serves it after one cold start and
    restarts nothing. A replica is the sooner move when the restart takes longer than its start and a
    window; the seats come back when nothing waits, with the release of a replica (one rollout then,
    with no queue to serve). With one replica, or a start that is not known, both arrive together."""
    return p.restart_seconds > p.cold_start_seconds + p.observation.window_seconds


def _more_seats(m: Measured) -> Decision | None:
    """Raise max-num-seqs towards the target batch (one bounded step, within the memory limit)."""
    p = m.period
    seqs = p.current.max_num_seqs
    new_seqs = min(m.target, m.max_step, p.current.max_num_seqs_limit)
    missed, note = p.recent_miss, ""
    if missed is not None and new_seqs > (seqs + missed) // 2:
        new_seqs = (seqs + missed) // 2
        note = f" (halfway to batch {missed}, where TPOT was last measured above the SLO)"
    if new_seqs < seqs * (1.0 + p.tuning.deadband):
        return None  # no seats, or too few to tell from the noise: not worth restarting the pods for
    return m.act(
        Action.SET_MAX_NUM_SEQS,
        Reason.QUEUE_WITH_HEADROOM,
        f"{m.head}; {p.waiting:.0f} waiting; max-num-seqs {seqs} -> {new_seqs}{note}; {m.detail}",
        new_seqs=new_seqs,
    )


def queue_in_deadband(m: Measured) -> Decision | None:
    """Inside the deadband but queueing: loosen max-num-seqs only as far as the target allows, else add
    replicas (the seats are at the target, so only more engines serve a queue that persists)."""
    p = m.period
    if not p.queued or p.in_cooldown:
        return None
    return _serve_queue(m)


def within_deadband(m: Measured) -> Decision | None:
    """Otherwise keep: the SLO is met and nothing is worth a restart."""
    return m.act(Action.KEEP, Reason.SLO_MET, f"{m.head}; within the deadband; {m.detail}")


MEASURED: tuple[Callable[[Measured], Decision | None], ...] = (
    scale_out_while_adding,
    demand_rising,
    cooling_down,
    tpot_above_slo,
    kv_cache_preempting,
    ttft_above_slo,
    headroom,
    queue_in_deadband,
    within_deadband,
)


def served_batch(obs: Observation) -> int | None:
    """The batch the window's TPOT was served at, rounded, and at least 1 whenever anything ran: the batch
    its tokens were decoded at (``decode_batch``), else the mean number running per replica. The time
    average alone understates a window the load started or stopped in (idle half, 48 the other half reads
    24, while every token was decoded at 48): calibrating that TPOT at 24 teaches the model that the batch
    costs nothing. A mean below 1 is a replica idle part of the window (4 clients on 4 replicas read 0.93),
    not a fraction of a sequence: every token it decoded was decoded at batch 1 or more. Nothing running
    at all (or no gauge) is None."""
    for batch in (obs.decode_batch, obs.mean_batch):
        if batch is not None and math.isfinite(batch) and batch > 0:
            return max(1, round(batch))
    return None


def _target(p: Period, model: TPOTModel, calibration: Calibration) -> int:
    """The largest batch whose TPOT by ``model`` at ``calibration`` stays within ``target_fraction x SLO``
    and the memory limit on max-num-seqs."""
    return target_batch(
        lambda batch: model.tpot_seconds(batch, calibration),
        budget_seconds=p.tuning.target_fraction * p.slo_tpot_seconds,
        limit=p.current.max_num_seqs_limit,
    )


def measure(p: Period, model: TPOTModel) -> Measured:
    """Calibrate the serving model at the batch actually served (``capacity.learn``: the mean TPOT, exact
    from the histogram's ``_sum/_count``, against the predicted mean; the percentile's spread over the mean
    against the predicted spread) and size the target batch on the calibrated curve. Only a fresh window
    (:attr:`Period.fresh`) calibrates; one that a change fell in keeps the calibration it had."""
    obs = p.observation
    assert obs.tpot_seconds is not None
    served = served_batch(obs)
    mean = obs.tpot_mean_seconds if obs.tpot_mean_seconds is not None and obs.tpot_mean_seconds > 0 else None
    calibration = p.history.calibration
    # A window less than a window after the last change still holds the last plan's pods or their start
    # (a CPU engine's first steps after a restart read 72 ms at a batch of 7): it is judged, but it teaches
    # the model nothing, as it would put a point in the shape fit that no plan served.
    if served is not None and p.fresh:
        calibration = learn(
            p.history.calibration,
            predicted_mean_seconds=model.mean_seconds(served),
            fixed_seconds=model.fixed_seconds(served),
            percentile_at=lambda cal: model.measured_seconds(served, cal),
            observed_mean_seconds=mean,
            observed_percentile_seconds=obs.tpot_seconds,
            alpha=p.tuning.calibration_alpha,
            bounds=p.tuning.calibration_bounds,
        )
    target = _target(p, model, calibration)
    return Measured(
        period=p, observed_tpot_seconds=obs.tpot_seconds, calibration=calibration, model=model, target=target
    )


def decide(
    *,
    current: Current,
    observation: Observation,
    slo_tpot_seconds: float,
    model: TPOTModel,
    bounds: Bounds,
    tuning: Tuning,
    history: History,
    now: float,
    hpa_present: bool = False,
    rollout_in_progress: bool = False,
    scaling_out: bool = False,
    slo_ttft_seconds: float | None = None,
    restart_seconds: float = 0.0,
    cold_start_seconds: float = 0.0,
) -> Decision:
    """One period of the control law: the first of :data:`PRE_MEASUREMENT`, then of :data:`MEASURED`,
    that answers (see the module docstring). Pure and total: never raises on data."""
    period = Period(
        current=current,
        observation=observation,
        slo_tpot_seconds=slo_tpot_seconds,
        bounds=bounds,
        tuning=tuning,
        history=history,
        now=now,
        hpa_present=hpa_present,
        rollout_in_progress=rollout_in_progress,
        scaling_out=scaling_out,
        slo_ttft_seconds=slo_ttft_seconds,
        restart_seconds=restart_seconds,
        cold_start_seconds=cold_start_seconds,
    )
    for rule in PRE_MEASUREMENT:
        decision = rule(period)
        if decision is not None:
            return decision
    measured = measure(period, model)
    for measured_rule in MEASURED:
        decision = measured_rule(measured)
        if decision is not None:
            return decision
    raise AssertionError("within_deadband always answers")  # pragma: no cover
