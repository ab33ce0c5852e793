"""kvright.podstarts: the cold start learned from the vLLM pods' own starts, and how reconcile uses it."""

from __future__ import annotations

from typing import Any

import pytest

import capacity
from kvright.podstarts import learn, pod_starts
from kvright.reconcile import desire
from tests.builders import llmd, reconcile_facts

H100 = "NVIDIA-H100-80GB-HBM3"
BASE = llmd("chat").model("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct").gpu(H100).tpot_ms(50)
PVC = BASE.set("model.source", {"type": "PVC", "pvc": {"claimName": "llama-weights"}})


def pod(
    name: str, scheduled: str, ready: str | None, *, restarts: int = 0, ready_status: str = "True"
) -> dict[str, Any]:
    conditions = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready_status, "lastTransitionTime": ready})
    return {
        "metadata": {"name": name},
        "status": {
            "conditions": conditions,
            "containerStatuses": [{"name": "vllm", "restartCount": restarts}],
        },
    }


def test_a_start_is_scheduled_to_ready_of_a_pod_that_never_restarted() -> None:
    starts = pod_starts(
        [
            pod("b", "2026-12-01T10:00:00Z", "2026-12-01T10:04:00Z"),
            pod("a", "2026-12-01T10:00:00Z", "2026-12-01T10:02:30Z"),
            pod("crashed", "2026-12-01T10:00:00Z", "2026-12-01T10:09:00Z", restarts=2),
            pod("starting", "2026-12-01T10:00:00Z", None),
            pod("unready", "2026-12-01T10:00:00Z", "2026-12-01T10:01:00Z", ready_status="False"),
            pod("instant", "2026-12-01T10:00:00Z", "2026-12-01T10:00:00Z"),  # within the second
        ]
    )
    assert [(s.name, s.seconds) for s in starts] == [("instant", 0.5), ("a", 150.0), ("b", 240.0)]


def _predict(profiles: Any) -> dict[str, capacity.ColdStart]:
    # One pod of an 8B model on one GPU, 16 GB read from the source.
    return capacity.cold_starts(weight_bytes_per_gpu=16e9, profiles=profiles)


def test_slow_starts_lower_the_learned_bandwidth_and_each_pod_counts_once() -> None:
    default = capacity.cold_start("pvc", weight_bytes_per_gpu=16e9)
    slow = default.seconds + 300.0  # the volume is much slower than the documented 250 MB/s
    minutes, seconds = divmod(int(slow), 60)
    pods = [pod("a", "2026-12-01T10:00:00Z", f"2026-12-01T10:{minutes:02d}:{seconds:02d}Z")]
    first = learn(None, pods, source="pvc", predict=_predict)
    assert first.status is not None
    assert first.status["observedStarts"] == 1
    assert first.status["learnedBytesPerSecond"] < 250e6 == first.status["defaultBytesPerSecond"]
    predicted = _predict(first.profiles)["pvc"].seconds
    assert default.seconds < predicted < slow
    # The same pod listed again teaches nothing new; the memory is kept as it was.
    again = learn(first.status, pods, source="pvc", predict=_predict)
    assert again.status == first.status
    # Not listed this time: the memory is kept and still predicts.
    kept = learn(first.status, None, source="pvc", predict=_predict)
    assert kept.status == first.status and _predict(kept.profiles)["pvc"].seconds == pytest.approx(predicted)
    # Another source starts over from its defaults.
    other = learn(first.status, None, source="hub", predict=_predict)
    assert other.status is None and other.profiles["hub"] == capacity.DEFAULT_SOURCES["hub"]


def test_fast_starts_raise_it_but_never_below_the_engines_own_costs() -> None:
    # 100 s each, where the documented hub bandwidth predicts about 195 s for 16 GB.
    pods = [pod(f"p{i}", "2026-12-01T10:00:00Z", f"2026-12-01T10:01:4{i}Z") for i in range(5)]
    learned = learn(None, pods, source="hub", predict=_predict)
    assert learned.status is not None and learned.status["learnedPhase"] == "fetch"
    start = _predict(learned.profiles)["hub"]
    assert learned.status["learnedBytesPerSecond"] > 250e6
    assert start.seconds < capacity.cold_start("hub", weight_bytes_per_gpu=16e9).seconds
    assert start.seconds >= start.engine_seconds


def test_reconcile_predicts_with_what_the_pods_taught_but_renders_the_same_pods() -> None:
    """status.coldStart carries the learned bandwidth and prediction.coldStartSeconds follows it; the pod
    template (its startup budget) does not, or learning would roll every pod."""
    spec = PVC.spec()
    before = desire(reconcile_facts(spec, architecture=capacity.catalog_architecture("llama-3.1-8b")))
    slow = [pod("chat-1", "2026-12-01T10:00:00Z", "2026-12-01T10:20:00Z")]
    after = desire(
        reconcile_facts(spec, architecture=capacity.catalog_architecture("llama-3.1-8b"), pods=tuple(slow))
    )
    assert before.fields["coldStart"] is None
    assert after.fields["coldStart"]["observedStarts"] == 1
    assert after.fields["prediction"]["coldStartSeconds"] > before.fields["prediction"]["coldStartSeconds"]
    workload = [c for c in before.children if c["kind"] == "Deployment"]
    assert workload == [c for c in after.children if c["kind"] == "Deployment"]
