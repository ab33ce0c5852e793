"""Which GPU product: plan the workload on every allowed product and choose the cheapest that holds it.

The objective is the cost of the deployment, GPU-hours times the price of each product's GPU-hour, at
the SLO (without a stated concurrency, the cost per million output tokens at each plan's own load).
Each product is planned on its own (:func:`capacity.plan`: inside one product the planner already takes
the fewest GPUs), so the choice is the feasible plan with the lowest cost; ties go to more headroom (the
lower predicted TPOT against the SLO). Prices are the catalog's on-demand list prices (``gpus.json``,
each with its source) unless the caller gives its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from capacity.architecture import Architecture
from capacity.errors import CapacityError
from capacity.gpus import GPU, gpu_spec
from capacity.planner import SLO, Limits, PlanResult, Workload, plan
from capacity.serving import Calibration

__all__ = ["Alternative", "GPUChoice", "choose_gpu", "parse_price", "price_per_gpu_hour"]

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True, kw_only=True)
class Alternative:
    """One GPU product's plan (``result``) at the price the choice used for one of its GPU-hours, and
    ``why``: ``chosen``, why a feasible plan lost (its cost against the chosen one's) or why none fits."""

    gpu: GPU
    result: PlanResult
    usd_per_gpu_hour: float
    why: str = ""

    @property
    def feasible(self) -> bool:
        return self.result.feasible

    @property
    def gpus(self) -> int:
        """Every GPU of every replica (0 when nothing fits)."""
        return self.result.plan.gpus if self.result.plan else 0

    @property
    def usd_per_hour(self) -> float | None:
        """The deployment's cost per hour: every GPU of every replica."""
        return self.gpus * self.usd_per_gpu_hour if self.result.plan else None

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        """At the planned load (the prediction's output tokens per second over all replicas)."""
        pred, cost = self.result.prediction, self.usd_per_hour
        if pred is None or cost is None or pred.output_tokens_per_second <= 0:
            return None
        return cost / (pred.output_tokens_per_second * SECONDS_PER_HOUR) * 1e6

    def summary(self) -> str:
        """``TP 4 x 2 replicas, max-num-seqs 52, fp8 KV`` or the reason it does not fit."""
        p = self.result.plan
        if p is None:
            return self.result.reason
        kv = p.kv_cache_dtype
        return f"{p.layout.label} x {p.replicas} replica(s), max-num-seqs {p.max_num_seqs}, {kv} KV"

    def to_dict(self) -> dict[str, Any]:
        """One row of ``alternatives`` in ``kvright plan --json``."""
        per_hour, per_million = self.usd_per_hour, self.usd_per_million_output_tokens
        return {
            "gpu": self.gpu.id,
            "gpu_product": self.gpu.product_labels[0] if self.gpu.product_labels else self.gpu.id,
            "feasible": self.feasible,
            "plan": self.summary(),
            "gpus": self.gpus,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "usd_per_hour": round(per_hour, 4) if per_hour is not None else None,
            "usd_per_million_output_tokens": round(per_million, 4) if per_million is not None else None,
            "tpot_seconds": self.result.prediction.tpot_seconds if self.result.prediction else None,
            "why": self.why,
        }


@dataclass(frozen=True, kw_only=True)
class GPUChoice:
    """Every allowed product's plan, the chosen one first, then by cost (feasible ones before the rest)."""

    alternatives: tuple[Alternative, ...]

    @property
    def chosen(self) -> Alternative | None:
        first = self.alternatives[0] if self.alternatives else None
        return first if first is not None and first.feasible else None

    @property
    def feasible(self) -> bool:
        return self.chosen is not None

    def holds_it(self) -> str | None:
        """The chosen product in words, for a refusal elsewhere ("NVIDIA H200 141GB holds it: TP 4 x 1
        replica(s), ... at $16.00/h"); None when no product holds the workload."""
        best = self.chosen
        if best is None:
            return None
        return f"{best.gpu.name} holds it: {best.summary()} at ${best.usd_per_hour or 0.0:.2f}/h"


def parse_price(text: str) -> tuple[str, float]:
    """``PRODUCT=USD_PER_HOUR`` (a catalog id or a GPU Feature Discovery label) as (catalog id, price)."""
    product, sep, value = text.partition("=")
    if not sep or not product.strip():
        raise CapacityError(f"price {text!r} is not PRODUCT=USD_PER_HOUR (e.g. h100-sxm=2.50)")
    try:
        price = float(value)
    except ValueError:
        raise CapacityError(f"price {text!r}: {value!r} is not a number of US dollars per GPU-hour") from None
    if not price >= 0.0 or price == float("inf"):
        raise CapacityError(f"price {text!r}: expected a finite number of US dollars per GPU-hour >= 0")
    return gpu_spec(product).id, price


def price_per_gpu_hour(gpu: GPU, prices: Mapping[str, float] | None = None) -> float:
    """US dollars per GPU-hour of ``gpu``: ``prices`` (catalog id -> USD) where it names the product,
    else the catalog's list price."""
    return (prices or {}).get(gpu.id, gpu.price_usd_per_hour)


def _headroom(alt: Alternative, slo: SLO) -> float:
    """Predicted TPOT over the SLO (lower is more headroom); the TPOT itself without a TPOT SLO."""
    pred = alt.result.prediction
    if pred is None:
        return float("inf")
    return pred.tpot_seconds / slo.tpot_seconds if slo.tpot_seconds else pred.tpot_seconds


def choose_gpu(
    arch: Architecture,
    gpus: Sequence[GPU],
    workload: Workload,
    slo: SLO,
    limits: Limits,
    *,
    prices: Mapping[str, float] | None = None,
    calibration: Calibration | float = 1.0,
    limits_by_gpu: Mapping[str, Limits] | None = None,
) -> GPUChoice:
    """Plan ``workload`` on each of ``gpus`` and rank the plans by cost per hour (ties: more headroom).

    ``prices`` maps catalog ids to US dollars per GPU-hour and overrides the catalog's list prices;
    ``limits_by_gpu`` (catalog id -> limits) gives a product its own limits (its node size and GPU count
    in a cluster) in place of ``limits``. A
    product on which the request itself is invalid (say an fp8 KV cache pinned on a GPU without fp8) is
    listed as not feasible with the reason, not raised, so the other products still compete; when the
    request is invalid on every product, the first product's error is raised."""
    if not gpus:
        raise CapacityError("no GPU products to choose from; expected at least one")
    prices = prices or {}
    planned: list[Alternative] = []
    errors: list[CapacityError] = []
    for gpu in dict.fromkeys(gpus):  # each product once, in the caller's order
        price = price_per_gpu_hour(gpu, prices)
        try:
            own = (limits_by_gpu or {}).get(gpu.id, limits)
            result = plan(arch, gpu, workload, slo, own, calibration=calibration)
        except CapacityError as exc:
            errors.append(exc)
            result = PlanResult.refused(str(exc))
        planned.append(Alternative(gpu=gpu, result=result, usd_per_gpu_hour=price))
    if len(errors) == len(planned):
        raise errors[0]
    # With a stated load the deployment's cost per hour decides; without one (no concurrency) every plan
    # holds a different load, so the cost of the tokens it serves does.
    by_load = workload.concurrency is not None
    ranked = sorted(
        planned,
        key=lambda a: (
            not a.feasible,
            (a.usd_per_hour if by_load else a.usd_per_million_output_tokens) or 0.0,
            _headroom(a, slo),
            a.gpus,
        ),
    )
    best = ranked[0]
    out = []
    for alt in ranked:
        if alt is best and alt.feasible:
            why = "chosen"
        elif not alt.feasible:
            why = f"not feasible on {alt.gpu.id}: {alt.result.reason}"
        else:
            why = _why_lost(alt, best, by_load=by_load)
        out.append(replace(alt, why=why))
    return GPUChoice(alternatives=tuple(out))


def _why_lost(alt: Alternative, best: Alternative, *, by_load: bool) -> str:
    if not by_load:
        mine, theirs = alt.usd_per_million_output_tokens or 0.0, best.usd_per_million_output_tokens or 0.0
        head = f"${mine:.3f} per million output tokens against ${theirs:.3f} on {best.gpu.id} (no load given)"
        return f"costs more: {head}" if mine > theirs else f"same cost, less headroom: {head}"
    mine, theirs = alt.usd_per_hour or 0.0, best.usd_per_hour or 0.0
    head = (
        f"{alt.gpus} x {alt.gpu.id} at ${alt.usd_per_gpu_hour:.2f}/GPU-hour = ${mine:.2f}/h against "
        f"${theirs:.2f}/h for {best.gpus} x {best.gpu.id}"
    )
    if mine > theirs:
        return f"costs more: {head}"
    return f"same cost, less headroom (higher predicted TPOT): {head}"
