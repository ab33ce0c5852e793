"""kvright.operator.reconcile_once: the act step around the pure decision, with the API server faked at
the unit's edge (a recording Kube: applies, status patches, reads). What is checked is the acting:
apply order, stopping at a refused apply, writing status only when it changed, events, and leaving the
running Deployment alone when an edit is not feasible. The real API server is in tests/integration.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import pytest

from kvright.inventory import GPUNode
from kvright.operator import KubeError, PodsOnce, Runtime, _starting_pods, gather, reconcile_once
from kvright.resolve import HubClient
from kvright.settings import Settings
from tests.builders import llmd

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
H100 = "NVIDIA-H100-80GB-HBM3"


class FakeKube:
    """Records what the operator does to the API server; answers reads from dicts."""

    def __init__(
        self,
        *,
        refuse: str | None = None,
        deployment: dict[str, Any] | None = None,
        lws_api: bool = False,
        live: dict[str, dict[str, Any]] | None = None,
        refuse_delete: int | None = None,
    ) -> None:
        self.refuse = refuse
        self.live_deployment = deployment
        self.lws_api = lws_api
        self.live = dict(live or {})
        """Live workloads by kind, as get() answers them."""
        self.refuse_delete = refuse_delete
        self.applied: list[tuple[str, str]] = []
        self.deleted: list[tuple[str, str]] = []
        self.status_patches: list[dict[str, Any]] = []
        self.bound: list[dict[str, Any]] | KubeError = []
        """What a cluster-wide listing of bound pods answers (or raises)."""
        self.listings = 0

    # resolve.KubeReader
    def config_map_data(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return None

    def secret_data(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return None

    # feedback.Reader and the operator's reads
    def get(self, path: str) -> dict[str, Any] | None:
        kind = path.split("#", 1)[0]
        return self.live.get(kind)

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.live_deployment

    def child_path(self, kind: str, namespace: str, name: str) -> str:
        return f"{kind}#{namespace}/{name}"

    def workload(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.live_deployment if kind == "Deployment" else self.live.get(kind)

    def serves(self, path: str, resource: str) -> bool:
        return self.lws_api and resource == "leaderworkersets"

    def delete(self, path: str, *, uid: str) -> None:
        if self.refuse_delete is not None:
            raise KubeError(self.refuse_delete, f"DELETE {path}: {self.refuse_delete} forbidden")
        self.deleted.append((path, uid))

    def pods(self, namespace: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        return []

    def bound_pods(self) -> list[dict[str, Any]]:
        self.listings += 1
        if isinstance(self.bound, KubeError):
            raise self.bound
        return self.bound

    def has_crd(self, name: str) -> bool:
        return False

    # acting
    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        if obj["kind"] == self.refuse:
            raise KubeError(422, f"PATCH {obj['kind']}: 422 admission webhook said no")
        self.applied.append((obj["kind"], obj["metadata"]["name"]))
        return {**obj, "metadata": {**obj["metadata"], "generation": 1}, "status": {}}

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.status_patches.append(dict(status))


def runtime(kube: FakeKube) -> Runtime:
    return Runtime(
        settings=Settings(metrics_port=0),
        kube=kube,  # type: ignore[arg-type]
        hub=HubClient("http://127.0.0.1:9", attempts=1, sleep=lambda _: None),
        clock=lambda: NOW,
    )


def body(builder: Any, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = builder.obj()
    obj["metadata"].update({"uid": "u-1", "generation": 1})
    if status is not None:
        obj["status"] = status
    return dict(obj)


NODES = [GPUNode(name=f"h{i}", product=H100, allocatable_gpus=8, memory_mib=None) for i in range(2)]
SPEC = llmd("chat").model("llama-3.1-8b").gpu(H100).tpot_ms(50)


def cond(status: Mapping[str, Any], type_: str) -> tuple[str, str]:
    c = next(c for c in status["conditions"] if c["type"] == type_)
    return c["status"], c["reason"]


def test_applies_deployment_then_service_and_writes_status_once() -> None:
    kube = FakeKube()
    first = reconcile_once(body(SPEC), runtime(kube), NODES)
    assert kube.applied == [("Deployment", "chat"), ("Service", "chat"), ("PodDisruptionBudget", "chat")]
    assert len(kube.status_patches) == 1 and first.status_written
    assert cond(first.status, "PlanFeasible") == ("True", "Planned")
    assert cond(first.status, "Deployed") == ("False", "RollingOut")
    again = reconcile_once(body(SPEC, status=first.status), runtime(kube), NODES)
    assert kube.applied[3:] == [  # level-based: applied again
        ("Deployment", "chat"),
        ("Service", "chat"),
        ("PodDisruptionBudget", "chat"),
    ]
    assert not again.status_written and len(kube.status_patches) == 1  # nothing changed, nothing written


def test_a_refused_apply_stops_and_is_reported() -> None:
    kube = FakeKube(refuse="Deployment")
    out = reconcile_once(body(SPEC), runtime(kube), NODES)
    assert kube.applied == []
    assert cond(out.status, "Deployed") == ("False", "ApplyFailed")
    assert cond(out.status, "Ready") == ("False", "ApplyFailed")
    assert [(e.type, e.reason) for e in out.events] == [("Warning", "ApplyFailed")]
    assert "admission webhook said no" in out.events[0].message


@pytest.mark.parametrize(
    ("live", "deployed"),
    [
        (None, ("False", "NotPlanned")),
        (
            {
                "metadata": {"generation": 1},
                "spec": {"replicas": 1},
                "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1},
            },
            ("True", "KeptLastPlan"),
        ),
    ],
    ids=["nothing-running", "last-plan-keeps-serving"],
)
def test_an_infeasible_edit_applies_nothing(live: dict[str, Any] | None, deployed: tuple[str, str]) -> None:
    kube = FakeKube(deployment=live)
    out = reconcile_once(body(SPEC.tp(3)), runtime(kube), NODES)
    assert kube.applied == []
    assert cond(out.status, "PlanFeasible") == ("False", "TensorParallelInvalid")
    assert cond(out.status, "Deployed") == deployed
    assert out.status["replicas"] == (1 if live else 0)


def test_a_missing_config_map_is_unknown_and_retried() -> None:
    kube = FakeKube()
    out = reconcile_once(body(llmd("chat").config_map("cfg").gpu(H100)), runtime(kube), NODES)
    assert kube.applied == []
    assert cond(out.status, "PlanFeasible") == ("Unknown", "ConfigMapMissing")
    assert out.desired.retry_seconds is not None


# --- a replica across nodes: LeaderWorkerSet ------------------------------------------------------------

FOUR_H100 = [GPUNode(name=f"h{i}", product=H100, allocatable_gpus=8, memory_mib=None) for i in range(4)]
BIG = (
    llmd("big")
    .model("llama-3.1-405b")
    .gpu(H100, max_gpus=16)
    .context(8192, 2048, 256)
    .concurrency(16)
    .tpot_ms(60)
    .replicas(1, 1)
)
OWNED = {"metadata": {"uid": "old-1", "ownerReferences": [{"controller": True, "uid": "u-1"}]}}


def test_a_two_node_plan_applies_a_leader_worker_set_and_deletes_the_previous_deployment() -> None:
    kube = FakeKube(lws_api=True, live={"Deployment": OWNED})
    out = reconcile_once(body(BIG), runtime(kube), FOUR_H100)
    assert kube.applied == [("LeaderWorkerSet", "big"), ("Service", "big"), ("PodDisruptionBudget", "big")]
    assert kube.deleted == [("Deployment#default/big", "old-1")]
    plan = out.status["plan"]
    assert (plan["nodesPerReplica"], plan["layout"]) == (2, "TP 8 x PP 2")
    assert cond(out.status, "Deployed") == ("False", "RollingOut")


def test_a_workload_of_the_other_kind_not_owned_by_this_llmdeployment_is_left_alone() -> None:
    foreign = {"metadata": {"uid": "x", "ownerReferences": [{"controller": True, "uid": "someone-else"}]}}
    kube = FakeKube(lws_api=True, live={"Deployment": foreign})
    reconcile_once(body(BIG), runtime(kube), FOUR_H100)
    assert kube.deleted == []


def test_a_one_node_plan_deletes_the_previous_leader_worker_set() -> None:
    kube = FakeKube(lws_api=True, live={"LeaderWorkerSet": OWNED})
    reconcile_once(body(SPEC), runtime(kube), NODES)
    assert kube.applied == [("Deployment", "chat"), ("Service", "chat"), ("PodDisruptionBudget", "chat")]
    assert kube.deleted == [("LeaderWorkerSet#default/chat", "old-1")]


def test_a_refused_delete_of_the_previous_workload_is_reported_not_swallowed() -> None:
    kube = FakeKube(lws_api=True, live={"Deployment": OWNED}, refuse_delete=403)
    out = reconcile_once(body(BIG), runtime(kube), FOUR_H100)
    assert cond(out.status, "Deployed") == ("False", "ApplyFailed")
    assert [(e.type, e.reason) for e in out.events][-1] == ("Warning", "ApplyFailed")
    assert "deleting the Deployment big of the previous plan" in out.events[-1].message
    assert "403" in out.events[-1].message


def test_without_the_leader_worker_set_api_a_two_node_plan_names_what_to_install() -> None:
    kube = FakeKube(lws_api=False)
    out = reconcile_once(body(BIG), runtime(kube), FOUR_H100)
    assert kube.applied == [] and kube.deleted == []
    status, reason = cond(out.status, "PlanFeasible")
    assert (status, reason) == ("False", "LeaderWorkerSetMissing")
    message = next(c["message"] for c in out.status["conditions"] if c["type"] == "PlanFeasible")
    assert "LeaderWorkerSet" in message and "leaderworkerset.x-k8s.io/v1" in message


def test_a_leader_worker_set_is_up_to_date_only_when_its_pods_run_the_applied_template() -> None:
    class Answering(FakeKube):
        def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
            super().apply(obj)
            status = {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1}  # not yet seen the edit
            return {**obj, "status": status}

        def pods(self, namespace: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
            return self.pod_list

    kube = Answering(lws_api=True)
    stale_pod = {
        "metadata": {"name": "big-0", "labels": {"leaderworkerset.sigs.k8s.io/worker-index": "0"}},
        "spec": {"containers": [{"name": "vllm", "args": ["old"]}]},
    }
    kube.pod_list = [stale_pod]  # type: ignore[attr-defined]
    out = reconcile_once(body(BIG), runtime(kube), FOUR_H100)
    assert cond(out.status, "Deployed") == ("False", "RollingOut")


def test_the_same_event_about_one_object_is_posted_once_until_it_ages_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reconcile on a body older than the last status write would announce the same change again."""
    import kvright.operator as operator_module
    from kvright.reconcile import Event

    clock = [1000.0]
    monkeypatch.setattr(operator_module.time, "monotonic", lambda: clock[0])
    rt = runtime(FakeKube(lws_api=False))
    chosen = Event(type="Normal", reason="GPUProductChosen", message="NVIDIA-H200 chosen")
    assert rt.first_post("u-1", chosen)
    assert not rt.first_post("u-1", chosen)
    assert rt.first_post("u-2", chosen)  # another object
    assert rt.first_post("u-1", Event(type="Normal", reason="GPUProductChosen", message="NVIDIA-L4 chosen"))
    clock[0] += operator_module.EVENT_REPEAT_SECONDS
    assert rt.first_post("u-1", chosen)  # aged out
    rt.forget("u-1")
    assert rt.first_post("u-1", Event(type="Normal", reason="GPUProductChosen", message="NVIDIA-L4 chosen"))


def gpu_pod_obj(node: str, gpus: int, owner: str | None = None, namespace: str = "default") -> dict[str, Any]:
    labels = {"kvright.dev/llmdeployment": owner} if owner else {}
    return {
        "metadata": {"name": f"p-{node}", "namespace": namespace, "labels": labels},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
        },
        "status": {"phase": "Running"},
    }


def test_gpu_pods_are_listed_when_asked_once_per_sweep_pass_and_a_403_is_logged_not_read_as_room(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube = FakeKube()
    kube.bound = [gpu_pod_obj("h0", 8, owner="batch"), gpu_pod_obj("h1", 0)]
    rt = runtime(kube)
    pods = rt.gpu_pods()
    assert pods is not None and [(p.node, p.owner, p.gpus) for p in pods] == [("h0", "batch", 8)]
    assert rt.gpu_pods() == pods and kube.listings == 2  # a create or edit lists what is bound now
    once = PodsOnce(rt)
    assert once() == pods and once() == pods and kube.listings == 3  # a sweep pass shares one listing

    denied = FakeKube()
    denied.bound = KubeError(403, 'GET /api/v1/pods: 403 pods is forbidden: cannot list resource "pods"')
    with caplog.at_level("WARNING", logger="kvright.operator"):
        assert runtime(denied).gpu_pods() is None
    assert "the operator needs list on pods in every namespace" in caplog.text

    off = FakeKube()
    rt_off = Runtime(
        settings=Settings(metrics_port=0, gpu_occupancy=False),
        kube=off,  # type: ignore[arg-type]
        hub=HubClient("http://127.0.0.1:9", attempts=1, sleep=lambda _: None),
        clock=lambda: NOW,
    )
    assert rt_off.gpu_pods() is None and off.listings == 0


def test_a_chosen_product_weighs_other_workloads_pods_but_a_pinned_one_does_not_list_them() -> None:
    """Two products, the H200 priced lowest but its node full of another workload's pods: the reconcile
    runs on the H100s and status records the room it saw. A pinned spec never lists pods."""
    kube = FakeKube()
    kube.bound = [gpu_pod_obj("x0", 8, owner="batch"), gpu_pod_obj("h0", 8, owner="chat")]
    nodes = [*NODES, GPUNode(name="x0", product="NVIDIA-H200", allocatable_gpus=8, memory_mib=None)]
    rt = Runtime(
        settings=Settings(metrics_port=0, gpu_prices=(("h200", 0.01),)),
        kube=kube,  # type: ignore[arg-type]
        hub=HubClient("http://127.0.0.1:9", attempts=1, sleep=lambda _: None),
        clock=lambda: NOW,
    )
    chosen = llmd("chat").model("llama-3.1-8b").tpot_ms(50)
    out = reconcile_once(body(chosen), rt, nodes)
    assert out.status["plan"]["gpuProduct"] == H100
    # The H100 pod is this deployment's own: room for it, so all 16 H100 GPUs are free to it.
    assert out.status["gpu"]["freeGPUs"] == 16 and kube.listings == 1
    pinned = FakeKube()
    reconcile_once(body(SPEC), runtime(pinned), NODES)
    assert pinned.listings == 0


def test_a_body_read_before_the_last_status_write_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fresh-clone CI's real-engine run rolled its pods back: the sweep listed the object, a handler then
    moved max-num-seqs 1024 -> 12 and wrote the pins to status, and the sweep, reconciling its older body
    under the lock after it, re-planned from the spec (1024). A body that may predate the operator's own
    last status write is read again; one read after it, or of an object never written, is used as it is."""
    import asyncio

    import kvright.operator as operator_module

    clock = [1000.0]
    monkeypatch.setattr(operator_module.time, "monotonic", lambda: clock[0])
    kube = FakeKube()
    rt = runtime(kube)
    path = "/apis/kvright.dev/v1alpha1/namespaces/default/llmdeployments/chat"
    fresh = body(llmd("chat").model("llama-3.1-8b").gpu(H100).tpot_ms(25))
    fresh["metadata"]["generation"] = 2
    kube.live[path] = fresh

    def reconcile(obj: dict[str, Any], read_at: float | None) -> Any:
        return asyncio.run(operator_module._reconcile(obj, rt, NODES, read_at=read_at))

    listed_at = clock[0]
    first = reconcile(body(SPEC), None)  # a create: never written before, the event's body is used
    assert first is not None and first.status["observedGeneration"] == 1
    clock[0] += 1.0  # the write above came after the sweep's listing
    second = reconcile(body(SPEC), listed_at)
    assert second is not None and second.status["observedGeneration"] == 2  # the object as it is now
    clock[0] += 1.0
    third = reconcile(body(SPEC), clock[0])  # listed after the last write: used as it is
    assert third is not None and third.status["observedGeneration"] == 1
    kube.live[path] = body(SPEC) | {"metadata": {**fresh["metadata"], "uid": "another"}}
    applied = len(kube.applied)
    assert reconcile(body(SPEC), None) is None  # deleted and created again under the same name: skipped
    assert len(kube.applied) == applied


def test_pods_are_listed_for_their_starts_only_while_pods_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """A settled object (deployed, all Ready, Ready for three reconcile periods) costs no pod listing; a
    rollout, or one that just became Ready (the reconcile that saw the last pod Ready may have listed a
    moment before it was), lists them and counts their starts into status.coldStart."""
    listed: list[str] = []
    started = {
        "metadata": {"name": "chat-1"},
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-12-31T23:50:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2025-12-31T23:54:00Z"},
            ]
        },
    }

    def pods(self: FakeKube, namespace: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        listed.append(namespace)
        return [started]

    monkeypatch.setattr(FakeKube, "pods", pods)
    kube = FakeKube()
    first = reconcile_once(body(SPEC), runtime(kube), NODES)  # nothing deployed yet: listed
    assert listed and first.status["coldStart"]["observedStarts"] == 1
    assert first.status["coldStart"]["lastStartSeconds"] == 240.0

    def settled(ready_since: datetime.datetime) -> dict[str, Any]:
        stamp = ready_since.strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = [
            {"type": "Deployed", "status": "True", "reason": "RolledOut", "lastTransitionTime": stamp},
            {"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": stamp},
        ]
        replicas = first.status["plan"]["replicas"]
        return {**first.status, "conditions": conditions, "replicas": replicas, "readyReplicas": replicas}

    def starting(status: dict[str, Any]) -> Any:
        facts = gather(body(SPEC, status=status), runtime(kube), NODES)
        return _starting_pods(kube, facts, now=NOW, grace=180.0)  # type: ignore[arg-type]

    assert starting(settled(NOW - datetime.timedelta(seconds=10))) == (started,)  # Ready 10 s ago
    assert starting(settled(NOW - datetime.timedelta(hours=1))) is None  # settled: not listed
    assert starting({**settled(NOW - datetime.timedelta(hours=1)), "readyReplicas": 0}) == (started,)
