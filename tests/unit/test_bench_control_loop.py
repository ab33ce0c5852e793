"""bench.control_loop: the JSON contract of ``python -m bench control-loop --json`` and the fairness
of its runs (same first plan, same arrivals, baselines never touch --max-num-seqs).

Runs the real bench, in process and on one worker, with two seeds and two-minute traces (the full bench
is 10 seeds of four 20-minute traces; its speed is measured by running it, not here). Nothing is faked.
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
from typing import Any

import pytest

from bench import control_loop
from bench.control_loop import KEYS, POLICIES, Scenario, simulate


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = control_loop.main(
            ["--seeds", "2", "--minutes", "2", "--traces", "ramp,bursty", "--json", "--workers", "1"]
        )
    assert rc == 0
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("}\n")  # exactly one JSON object on one line
    return dict(json.loads(text))


def test_json_has_the_contracts_keys(doc: dict[str, Any]) -> None:
    assert doc["seeds"] == [1, 2]
    assert list(doc["policies"]) == ["kvright", "hpa-tpot", "queue-length", "kv-usage"]
    for summary in doc["policies"].values():
        assert set(summary) == {*KEYS, "per_seed"}
        assert [e["seed"] for e in summary["per_seed"]] == [1, 2]
        for entry in summary["per_seed"]:
            assert set(KEYS) <= set(entry)
            assert set(entry["traces"]) == {"ramp", "bursty"}


def test_policy_values_are_the_medians_of_the_seeds(doc: dict[str, Any]) -> None:
    for summary in doc["policies"].values():
        for key in KEYS:
            values = [e[key] for e in summary["per_seed"] if e[key] is not None]
            assert summary[key] == pytest.approx(statistics.median(values), abs=1e-4), key
        assert 0.0 <= summary["slo_attainment"] <= 1.0
        assert summary["gpu_hours"] > 0


def test_every_policy_starts_from_the_same_plan_and_baselines_keep_max_num_seqs() -> None:
    s = Scenario(trace="spike", minutes=2, seed=3)
    results = {p: simulate(s, p, keep_timeline=True) for p in POLICIES}
    firsts = {r.events[0] for r in results.values()}
    assert len(firsts) == 1, firsts
    assert len({r.arrived for r in results.values()}) == 1  # the same arrivals
    for name in ("hpa-tpot", "queue-length", "kv-usage"):
        assert {x[2] for x in results[name].timeline} == {results[name].timeline[0][2]}
        assert results[name].restarts == 0


def test_a_seed_replays_exactly() -> None:
    s = Scenario(trace="bursty", minutes=2, seed=5)
    assert simulate(s, "hpa-tpot").summary() == simulate(s, "hpa-tpot").summary()
