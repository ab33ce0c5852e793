"""kvright.reconcile: the pure decision from gathered facts to children, status and events.

Nothing is faked: the real capacity planner and catalog run on facts built here (an inventory of GPU
nodes, a spec from tests.builders). The property test draws specs the CRD admits (bounds, enums and
CEL rules) and holds the decision to never raise on any of them.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import capacity
from kvright.api import EndpointPickerSpec
from kvright.conditions import Reason
from kvright.inventory import GPUNode, GPUPod, summarize
from kvright.reconcile import (
    Facts,
    Overrides,
    ResolveFailure,
    Rollout,
    deployed_condition,
    desire,
    memory_request,
    rollout_from,
    status,
    status_changed,
)
from tests.builders import QWEN3_8_FLASH_NEXT_TEXT, gpu_nodes, llmd, reconcile_facts

H100 = "NVIDIA-H100-80GB-HBM3"
H200 = "NVIDIA-H200"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


nodes = gpu_nodes
CLUSTER = nodes((H100, 2, 8), (H200, 1, 8))


def facts(spec: dict[str, Any], **overrides: Any) -> Facts:
    return reconcile_facts(spec, **{"inventory": CLUSTER, **overrides})


LLAMA70 = llmd("chat").model("llama-3.1-70b").gpu(H100).context(8192, 2048, 256).concurrency(64).tpot_ms(50)


def test_feasible_plan_renders_children_and_status() -> None:
    d = desire(facts(LLAMA70.spec()))
    assert (d.plan_feasible.status, d.plan_feasible.reason) == ("True", Reason.PLANNED)
    assert [c["kind"] for c in d.children] == ["Deployment", "Service", "PodDisruptionBudget"]
    plan = d.fields["plan"]
    assert plan["gpuProduct"] == H100
    assert plan["gpus"] == plan["tensorParallelSize"] * plan["replicas"]
    container = d.children[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": str(plan["tensorParallelSize"])}
    assert container["args"][0] == "org/llama-3.1-70b"
    assert container["args"][1 : container["args"].index("--served-model-name")] == plan["vllmArgs"]
    assert container["image"] == "vllm/vllm-openai:test"
    assert d.fields["selector"] == "app.kubernetes.io/name=vllm,kvright.dev/llmdeployment=chat"
    assert d.fields["gpu"] == {"product": H100, "gpusPerNode": 8, "nodes": 2, "allocatableGPUs": 16}
    assert d.fields["architecture"]["numLayers"] == 80
    assert d.fields["prediction"]["tpotMilliseconds"] <= 50
    assert d.events == ()


def test_pod_monitor_only_when_its_crd_exists() -> None:
    d = desire(facts(LLAMA70.spec(), pod_monitor=True))
    assert [c["kind"] for c in d.children] == ["Deployment", "Service", "PodDisruptionBudget", "PodMonitor"]


def test_the_operators_pod_monitor_labels_reach_the_pod_monitor_only() -> None:
    """KVRIGHT_PODMONITOR_LABELS (``Facts.pod_monitor_labels``) selects the PodMonitor for a Prometheus;
    on the pods they would change the template and restart vLLM."""
    d = desire(facts(LLAMA70.spec(), pod_monitor=True, pod_monitor_labels={"release": "kps"}))
    by_kind = {c["kind"]: c for c in d.children}
    assert by_kind["PodMonitor"]["metadata"]["labels"]["release"] == "kps"
    assert "release" not in by_kind["Deployment"]["metadata"]["labels"]
    assert "release" not in by_kind["Deployment"]["spec"]["template"]["metadata"]["labels"]


GPU_CHOICE = llmd("chat").model("llama-3.1-70b").context(8192, 2048, 256).concurrency(64).tpot_ms(50)


def cost(alternative: dict[str, Any]) -> float:
    return float(alternative["usdPerHour"])


def test_without_a_product_the_cheapest_product_that_holds_the_workload_is_chosen() -> None:
    d = desire(facts(GPU_CHOICE.spec()))
    assert (d.plan_feasible.status, d.plan_feasible.reason) == ("True", Reason.PLANNED)
    alternatives = d.fields["alternatives"]
    assert {a["product"] for a in alternatives} == {H100, H200}
    chosen, other = alternatives
    assert chosen["why"] == "chosen" and chosen["product"] == d.fields["plan"]["gpuProduct"]
    assert other["feasible"] and cost(chosen) <= cost(other)
    assert other["why"].startswith(("costs more", "same cost"))
    assert d.fields["gpu"]["product"] == chosen["product"]
    assert [e.reason for e in d.events] == [Reason.GPU_PRODUCT_CHOSEN]
    assert chosen["product"] in d.events[0].message
    # The same choice again posts nothing.
    again = desire(facts(GPU_CHOICE.spec(), current_status={"plan": d.fields["plan"]}))
    assert Reason.GPU_PRODUCT_CHOSEN not in [e.reason for e in again.events]


def test_prices_move_the_choice() -> None:
    first = desire(facts(GPU_CHOICE.spec())).fields["plan"]["gpuProduct"]
    other = H200 if first == H100 else H100
    prices = {capacity.gpu_spec(first).id: 100.0, capacity.gpu_spec(other).id: 0.5}
    assert desire(facts(GPU_CHOICE.spec(), prices=prices)).fields["plan"]["gpuProduct"] == other


def test_the_listed_products_are_the_only_candidates() -> None:
    spec = GPU_CHOICE.spec() | {"gpu": {"products": [H200.lower()]}}
    d = desire(facts(spec, prices={"h200": 1000.0}))
    assert d.fields["plan"]["gpuProduct"] == H200
    assert [a["product"] for a in d.fields["alternatives"]] == [H200]


def test_a_cheaper_product_without_room_loses_to_the_next_and_the_event_says_why() -> None:
    """The H200 node has one GPU left to allocate, too little for Llama-3.1-70B's weights: however cheap its
    price, the H100 nodes win."""
    inventory = nodes((H100, 2, 8), (H200, 1, 1))
    d = desire(facts(GPU_CHOICE.spec(), inventory=inventory, prices={"h200": 0.01}))
    assert d.plan_feasible.status == "True", d.plan_feasible.message
    assert d.fields["plan"]["gpuProduct"] == H100
    h200 = next(a for a in d.fields["alternatives"] if a["product"] == H200)
    assert not h200["feasible"] and h200["why"].startswith("not feasible on h200")
    [event] = [e for e in d.events if e.reason == Reason.GPU_PRODUCT_CHOSEN]
    assert "cheaper products cannot: NVIDIA-H200" in event.message


def room(inventory: dict[str, Any], held: dict[str, int]) -> dict[str, Any]:
    """The inventory with ``held`` GPUs taken by other workloads' pods on each named node."""
    pods = [GPUPod(node=n, namespace="other", owner=None, gpus=g) for n, g in held.items()]
    listed = [
        GPUNode(
            name=f"{p.product}-{i}", product=p.product, allocatable_gpus=p.max_gpus_per_node, memory_mib=None
        )
        for p in inventory.values()
        for i in range(p.nodes)
    ]
    return summarize(listed, pods)


def test_the_cheapest_product_with_full_nodes_is_passed_over_for_the_next_and_status_says_so() -> None:
    """The H200 is the cheapest and would hold the workload, but another workload's pods hold all its GPUs:
    kvright takes the H100 nodes, and status, the alternatives row and the event say why."""
    prices = {"h200": 0.01}
    free = desire(facts(GPU_CHOICE.spec(), inventory=room(CLUSTER, {}), prices=prices))
    assert free.fields["plan"]["gpuProduct"] == H200 and free.fields["gpu"]["freeGPUs"] == 8
    full = desire(facts(GPU_CHOICE.spec(), inventory=room(CLUSTER, {f"{H200}-0": 8}), prices=prices))
    assert full.plan_feasible.status == "True", full.plan_feasible.message
    assert full.fields["plan"]["gpuProduct"] == H100
    assert full.fields["gpu"]["freeGPUs"] == 16
    h200 = next(a for a in full.fields["alternatives"] if a["product"] == H200)
    assert (
        not h200["feasible"]
        and h200["why"] == "no room: 0 of 8 GPUs free, other workloads' pods hold the rest"
    )
    [event] = [e for e in full.events if e.reason == Reason.GPU_PRODUCT_CHOSEN]
    assert f"cheaper products cannot: {H200} (no room: 0 of 8 GPUs free" in event.message


def test_free_gpus_spread_thin_are_no_room_for_the_plans_pods() -> None:
    """Six H200 GPUs are free, but three on each of two nodes: no room for a TP 4 pod of Llama-3.1-70B."""
    inventory = room(nodes((H100, 2, 8), (H200, 2, 8)), {f"{H200}-0": 5, f"{H200}-1": 5})
    d = desire(facts(GPU_CHOICE.spec(), inventory=inventory, prices={"h200": 0.01}))
    assert d.fields["plan"]["gpuProduct"] == H100, d.plan_feasible.message
    h200 = next(a for a in d.fields["alternatives"] if a["product"] == H200)
    assert not h200["feasible"]
    assert "6 of 16 GPUs free" in h200["why"] and "per node 3, 3" in h200["why"]


def test_every_product_full_is_infeasible_naming_the_room_of_each() -> None:
    inventory = room(CLUSTER, {f"{H100}-0": 8, f"{H100}-1": 8, f"{H200}-0": 8})
    d = desire(facts(GPU_CHOICE.spec(), inventory=inventory))
    assert (d.plan_feasible.status, d.plan_feasible.reason) == ("False", Reason.INFEASIBLE)
    assert f"{H100}: no room: 0 of 16 GPUs free" in d.plan_feasible.message
    assert f"{H200}: no room: 0 of 8 GPUs free" in d.plan_feasible.message


def test_a_pinned_product_ignores_room() -> None:
    """Pinned, the product is the user's call: its pods may wait for room; kvright plans as before."""
    pinned = GPU_CHOICE.spec() | {"gpu": {"product": H200}}
    d = desire(facts(pinned, inventory=room(CLUSTER, {f"{H200}-0": 8})))
    assert d.plan_feasible.status == "True" and d.fields["plan"]["gpuProduct"] == H200
    assert "freeGPUs" not in d.fields["gpu"]


def test_a_refusal_on_the_pinned_product_names_another_product_in_the_cluster_that_holds_it() -> None:
    """Llama-3.1-405B pinned to one 8 x H100 node: the H200 node beside it holds it."""
    big = llmd("chat").model("llama-3.1-405b").gpu(H100).context(8192, 2048, 256).concurrency(16).tpot_ms(100)
    d = desire(facts(big.spec(), inventory=nodes((H100, 1, 8), (H200, 1, 8))))
    assert (d.plan_feasible.status, d.plan_feasible.reason) == ("False", Reason.INFEASIBLE)
    assert "in this cluster NVIDIA H200 141GB holds it: " in d.plan_feasible.message
    assert "leave gpu.product out and kvright chooses" in d.plan_feasible.message
    alone = desire(facts(big.spec(), inventory=nodes((H100, 1, 8))))
    assert "holds it" not in alone.plan_feasible.message


def test_no_product_holds_it_is_infeasible_with_each_products_reason() -> None:
    huge = llmd("chat").model("llama-3.1-405b").context(8192, 2048, 256).concurrency(512).tpot_ms(20)
    d = desire(facts(huge.spec()))
    assert (d.plan_feasible.status, d.plan_feasible.reason) == ("False", Reason.INFEASIBLE)
    assert d.plan_feasible.message.startswith("no GPU product holds the workload: ")
    assert H100 in d.plan_feasible.message and H200 in d.plan_feasible.message


def test_single_gpu_type_needs_no_product() -> None:
    d = desire(facts(llmd("a").model("llama-3.1-8b").spec(), inventory=nodes((H200, 1, 8))))
    assert d.fields["plan"]["gpuProduct"] == H200


@pytest.mark.parametrize(
    ("spec", "extra", "status_", "reason", "text"),
    [
        (llmd("a").tpot_ms(0).spec(), {}, "False", Reason.INVALID_SPEC, "spec.slo.tpotMilliseconds"),
        (
            LLAMA70.spec(),
            {"architecture": ResolveFailure(reason=Reason.HUB_FETCH_FAILED, message="503", retryable=True)},
            "Unknown",
            Reason.HUB_FETCH_FAILED,
            "503",
        ),
        (
            LLAMA70.spec(),
            {
                "architecture": ResolveFailure(
                    reason=Reason.ARCHITECTURE_INVALID, message="bad", retryable=False
                )
            },
            "False",
            Reason.ARCHITECTURE_INVALID,
            "bad",
        ),
        (LLAMA70.spec(), {"inventory": {}}, "False", Reason.NO_GPU_NODES, "products present: none"),
        (
            GPU_CHOICE.spec() | {"gpu": {"products": ["NVIDIA-L4", "AMD-Instinct-MI300X"]}},
            {},
            "False",
            Reason.NO_GPU_NODES,
            "no schedulable node has any of gpu.products (NVIDIA-L4, AMD-Instinct-MI300X)",
        ),
        (LLAMA70.tp(3).spec(), {}, "False", Reason.TENSOR_PARALLEL_INVALID, "valid here: 1, 2, 4, 8"),
        (LLAMA70.tp(16).spec(), {}, "False", Reason.INFEASIBLE, "largest NVIDIA-H100-80GB-HBM3 node has 8"),
        (
            llmd("a").model("llama-3.1-8b").gpu("NVIDIA-FANCY-1").spec(),
            {"inventory": nodes(("NVIDIA-FANCY-1", 1, 8))},
            "False",
            Reason.GPU_PRODUCT_UNKNOWN,
            "NVIDIA-FANCY-1",
        ),
        (
            llmd("a").model("llama-3.1-405b").gpu(H100).tpot_ms(5).spec(),
            {},
            "False",
            Reason.INFEASIBLE,
            "needs",
        ),
        (
            llmd("a").model("llama-2-7b").gpu(H100).context(8192).spec(),
            {},
            "False",
            Reason.PLAN_INPUT_INVALID,
            "4096 positions",
        ),
    ],
    ids=[
        "invalid-spec",
        "hub-down-is-unknown-and-retried",
        "bad-config-is-false",
        "no-gpu-nodes",
        "none-of-the-listed-products-present",
        "tp-not-dividing-heads",
        "tp-larger-than-any-node",
        "gpu-not-in-catalog",
        "405b-at-5ms-infeasible",
        "context-beyond-positions",
    ],
)
def test_not_planned(
    spec: dict[str, Any], extra: dict[str, Any], status_: str, reason: str, text: str
) -> None:
    d = desire(facts(spec, **extra))
    assert (d.plan_feasible.status, d.plan_feasible.reason) == (status_, reason)
    assert text in d.plan_feasible.message
    assert d.children == ()
    assert [(e.type, e.reason) for e in d.events] == [("Warning", reason)]
    assert (d.retry_seconds is not None) == (status_ == "Unknown")


def test_warning_not_repeated_when_condition_already_says_it() -> None:
    first = desire(facts(LLAMA70.tp(3).spec()))
    current = status(facts(LLAMA70.tp(3).spec()), first, rollout=None, apply_error=None, now=NOW)
    again = desire(facts(LLAMA70.tp(3).spec(), current_status=current))
    assert again.plan_feasible == first.plan_feasible
    assert again.events == ()


@pytest.mark.parametrize(
    ("builder", "replicas"),
    [
        (LLAMA70.replicas(1, 4, count=3), 3),
        (LLAMA70.replicas(2, 4), 2),
        (LLAMA70.replicas(0, 4, count=0), 0),
    ],
    ids=["pinned-count-wins", "min-raises-plan", "scaled-to-zero"],
)
def test_replicas(builder: Any, replicas: int) -> None:
    d = desire(facts(builder.spec()))
    assert d.replicas == replicas
    assert d.children[0]["spec"]["replicas"] == replicas
    assert d.fields["plan"]["replicas"] == replicas


def test_replicas_capped_warns_once() -> None:
    spec = llmd("a").model("llama-3.1-8b").gpu(H100).concurrency(4000).replicas(1, 2).spec()
    d = desire(facts(spec))
    assert d.replicas == 2
    assert d.fields["prediction"]["plannedReplicas"] > 2
    assert [e.reason for e in d.events] == [Reason.REPLICAS_CAPPED]
    again = desire(facts(spec, current_status={"plan": d.fields["plan"]}))
    assert again.events == ()


def test_capped_replicas_add_the_wait_for_a_seat_to_the_predicted_ttft() -> None:
    """Concurrency 4000 on 2 replicas: most requests wait for a seat, and the TTFT in status says so
    (Little's law over the seats); with the planned replicas nobody waits."""
    load = llmd("a").model("llama-3.1-8b").gpu(H100).concurrency(4000)
    capped = desire(facts(load.replicas(1, 2).spec())).fields["prediction"]
    free = desire(facts(load.replicas(1, 64).spec())).fields["prediction"]
    assert free["plannedReplicas"] <= 64
    assert capped["ttftMilliseconds"] > 10 * free["ttftMilliseconds"]


def test_feedback_overrides_feed_the_planner() -> None:
    base = desire(facts(LLAMA70.spec()))
    slower = capacity.Calibration(scale=1.5, tail=1.1)
    overrides = Overrides(calibration=slower, max_num_seqs=16, replicas=3)
    tuned = desire(facts(LLAMA70.spec(), overrides=overrides))
    assert tuned.fields["plan"]["maxNumSeqs"] == 16
    assert tuned.fields["plan"]["replicas"] == 3
    assert tuned.fields["prediction"]["calibration"] == 1.5
    assert tuned.fields["prediction"]["calibrationTail"] == 1.1
    assert base.fields["plan"]["maxNumSeqs"] != 16


def test_the_loops_measured_pin_is_planned_even_where_the_model_predicts_it_too_slow() -> None:
    """The loop lowers max-num-seqs one bounded step at a time from what the engine measured; its
    calibration (committed with the move) may already say the step is not enough. The planner must
    deploy the step (the measurement outranks the model) rather than refuse it and keep the old plan,
    which would leave the loop stuck. A user's own pin is still checked against the model."""
    steep = capacity.Calibration(scale=4.0, batch_scale=200.0, tail=4.0)
    spec = LLAMA70.tpot_ms(25).spec()
    looped = desire(facts(spec, overrides=Overrides(calibration=steep, max_num_seqs=24, replicas=1)))
    assert looped.plan_feasible.status == "True", looped.plan_feasible.message
    assert looped.fields["plan"]["maxNumSeqs"] == 24
    assert looped.fields["prediction"]["maxNumSeqsBoundBy"] == "pinned"
    # A budget that cannot seat the spec's concurrency at the loop's batch: the loop weighed the queue.
    queued = LLAMA70.tpot_ms(25).concurrency(400).gpu(H100, 8).spec()
    over = desire(facts(queued, overrides=Overrides(calibration=steep, max_num_seqs=24, replicas=1)))
    assert over.plan_feasible.status == "True", over.plan_feasible.message
    assert over.fields["plan"]["maxNumSeqs"] == 24
    user = LLAMA70.tpot_ms(25).max_num_seqs(24).spec()
    pinned = desire(facts(user, overrides=Overrides(calibration=steep)))
    assert pinned.plan_feasible.status == "False"
    assert "pinned max-num-seqs 24 breaks the tpot limit" in pinned.plan_feasible.message


def test_the_drain_budget_covers_what_the_loop_measured_not_only_the_prediction() -> None:
    """A pod is restarted because it is slower than predicted: the requests it holds when it stops take
    what was measured. With status.observed far above the prediction, --shutdown-timeout and the grace
    period grow to twice the measured request (TTFT + outputs x TPOT)."""

    def drain(status: dict[str, Any]) -> int:
        d = desire(facts(LLAMA70.spec(), current_status=status))
        args = d.children[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        return int(args[args.index("--shutdown-timeout") + 1])

    planned = drain({})
    slow = drain({"observed": {"tpotMilliseconds": 400.0, "ttftMilliseconds": 30_000.0}})
    output = LLAMA70.spec()["workload"]["outputTokens"]
    assert slow >= 2 * (30.0 + output * 0.4) > planned
    assert drain({"observed": {"tpotMilliseconds": "nan?", "ttftMilliseconds": -1}}) == planned


def test_a_new_measurement_alone_never_changes_the_pod_template() -> None:
    """The drain budget is in the pod template: following every window's TTFT would restart the pods each
    time it moved (a real engine queueing through a rollout read 33 s, then 2 s: nine rollouts in 40 s).
    The pods keep the budget they run with while the plan's flags stay; a change of flags, which restarts
    them anyway, takes what was measured."""
    first = desire(facts(LLAMA70.spec()))
    plan = first.fields["plan"]
    assert plan["drainSeconds"] == 60  # the floor: the predicted request is short
    slow = {"observed": {"tpotMilliseconds": 400.0, "ttftMilliseconds": 30_000.0}}
    again = desire(facts(LLAMA70.spec(), current_status={"plan": plan, **slow}))
    assert again.children[0]["spec"]["template"] == first.children[0]["spec"]["template"]
    assert again.fields["plan"]["drainSeconds"] == 60
    # The next change of flags takes the measured request (twice TTFT + outputs x TPOT).
    moved = desire(facts(LLAMA70.max_num_seqs(16).spec(), current_status={"plan": plan, **slow}))
    output = LLAMA70.spec()["workload"]["outputTokens"]
    assert moved.fields["plan"]["drainSeconds"] >= 2 * (30.0 + output * 0.4)
    args = moved.children[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--shutdown-timeout") + 1] == str(moved.fields["plan"]["drainSeconds"])
    # A status without the field (written before it existed) or with nonsense in it: the wanted budget.
    for stale in ({k: v for k, v in plan.items() if k != "drainSeconds"}, plan | {"drainSeconds": True}):
        again = desire(facts(LLAMA70.spec(), current_status={"plan": stale, **slow}))
        assert again.fields["plan"]["drainSeconds"] == moved.fields["plan"]["drainSeconds"]


def test_plan_change_is_an_event() -> None:
    old = desire(facts(LLAMA70.spec()))
    new = desire(facts(LLAMA70.tp(8).spec(), current_status={"plan": old.fields["plan"]}))
    (event,) = new.events
    assert (event.type, event.reason) == ("Normal", Reason.PLAN_CHANGED)
    assert "-> TP 8" in event.message


def test_hub_token_reaches_the_pod_as_secret_ref() -> None:
    spec = llmd("a").hub("meta-llama/Llama-3.1-8B", token_secret="hf").gpu(H100).spec()
    d = desire(facts(spec, architecture=capacity.catalog_architecture("llama-3.1-8b")))
    env = d.children[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}} in env


def deployment(
    *,
    replicas: int = 2,
    generation: int = 2,
    observed: int = 2,
    updated: int = 2,
    ready: int = 2,
    total: int = 2,
) -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "spec": {"replicas": replicas},
        "status": {
            "observedGeneration": observed,
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": ready,
        },
    }


UNSCHEDULABLE = {
    "metadata": {"name": "chat-abc"},
    "status": {
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            }
        ]
    },
}


@pytest.mark.parametrize(
    ("dep", "pods", "up_to_date", "stalled"),
    [
        (deployment(), [], True, None),
        (deployment(observed=1), [], False, None),
        (deployment(updated=1, total=3), [], False, None),
        (
            deployment(updated=1, total=3),
            [UNSCHEDULABLE],
            False,
            "pod chat-abc cannot be scheduled: 0/3 nodes",
        ),
        (
            {
                **deployment(updated=1),
                "status": {
                    **deployment(updated=1)["status"],
                    "conditions": [
                        {"type": "Progressing", "reason": "ProgressDeadlineExceeded", "message": "late"}
                    ],
                },
            },
            [],
            False,
            "rollout passed its progress deadline: late",
        ),
    ],
    ids=["done", "controller-not-caught-up", "surging", "new-pod-unschedulable", "deadline-exceeded"],
)
def test_rollout_from(
    dep: dict[str, Any], pods: list[dict[str, Any]], up_to_date: bool, stalled: str | None
) -> None:
    r = rollout_from(dep, pods)
    assert r.up_to_date is up_to_date
    if stalled is None:
        assert r.stalled is None
    else:
        assert r.stalled is not None and r.stalled.startswith(stalled)


PLANNED = desire(facts(LLAMA70.replicas(2, 4).spec()))
NOT_PLANNED = desire(facts(LLAMA70.tp(3).spec()))


@pytest.mark.parametrize(
    ("desired", "rollout", "error", "expected"),
    [
        (
            PLANNED,
            Rollout(replicas=2, ready_replicas=2, updated_replicas=2, up_to_date=True),
            None,
            ("True", "Applied"),
        ),
        (
            PLANNED,
            Rollout(replicas=3, ready_replicas=2, updated_replicas=1, up_to_date=False),
            None,
            ("False", "RollingOut"),
        ),
        (
            PLANNED,
            Rollout(replicas=3, ready_replicas=2, updated_replicas=1, up_to_date=False, stalled="no GPUs"),
            None,
            ("False", "RolloutStalled"),
        ),
        (PLANNED, None, "422 invalid", ("False", "ApplyFailed")),
        (NOT_PLANNED, None, None, ("False", "NotPlanned")),
        (
            NOT_PLANNED,
            Rollout(replicas=2, ready_replicas=2, updated_replicas=2, up_to_date=True),
            None,
            ("True", "KeptLastPlan"),
        ),
    ],
    ids=[
        "rolled-out",
        "rolling",
        "stalled-keeps-old-pods",
        "apply-failed",
        "nothing-to-apply",
        "infeasible-edit-keeps-old",
    ],
)
def test_deployed_condition(
    desired: Any, rollout: Rollout | None, error: str | None, expected: tuple[str, str]
) -> None:
    c = deployed_condition(desired, rollout, error)
    assert (c.status, c.reason) == expected


def test_status_keeps_feedback_conditions_and_last_plan() -> None:
    foreign = {"type": "SLOMet", "status": "True", "reason": "TPOTWithinTarget", "message": "ok"}
    current = {
        "plan": {"tensorParallelSize": 4},
        "observed": {"tpotMilliseconds": 40.0},
        "conditions": [foreign],
    }
    new = status(
        facts(LLAMA70.tp(3).spec(), current_status=current),
        NOT_PLANNED,
        rollout=Rollout(replicas=2, ready_replicas=2, updated_replicas=2, up_to_date=True),
        apply_error=None,
        now=NOW,
    )
    assert "plan" not in new  # not overwritten: the running plan stays described
    assert new["conditions"][0] == foreign
    assert [c["type"] for c in new["conditions"]] == ["SLOMet", "PlanFeasible", "Deployed", "Ready"]
    assert all(c["observedGeneration"] == 3 for c in new["conditions"][1:])
    assert (new["replicas"], new["readyReplicas"], new["observedGeneration"]) == (2, 2, 3)
    ready = new["conditions"][3]
    assert (ready["status"], ready["reason"]) == ("False", Reason.TENSOR_PARALLEL_INVALID)


def test_status_ready_when_rolled_out_and_unchanged_status_not_rewritten() -> None:
    f = facts(LLAMA70.replicas(2, 4).spec())
    rollout = Rollout(replicas=2, ready_replicas=2, updated_replicas=2, up_to_date=True)
    first = status(f, PLANNED, rollout=rollout, apply_error=None, now=NOW)
    ready = first["conditions"][2]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", Reason.REPLICAS_READY)
    later = NOW + datetime.timedelta(minutes=10)
    second = status(
        facts(LLAMA70.replicas(2, 4).spec(), current_status=first),
        PLANNED,
        rollout=rollout,
        apply_error=None,
        now=later,
    )
    assert second == first
    assert not status_changed(first, second)
    assert status_changed({}, second)


# --- property: no spec the CRD admits crashes the decision ----------------------------------------

PRODUCTS = [H100, H200, "NVIDIA-A100-SXM4-80GB", "NVIDIA-L4", "Tesla-T4", "NVIDIA-UNKNOWN-9000"]


@st.composite
def crd_valid_specs(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.text(min_size=1, max_size=40).filter(lambda s: s.strip() == s and s != ""))
    source = draw(st.sampled_from(["architecture", "configMapRef", "hub"]))
    model: dict[str, Any] = {"name": name}
    if source == "architecture":
        model["architecture"] = draw(st.sampled_from([*capacity.catalog_ids(), "not-a-model"]))
    elif source == "configMapRef":
        model["configMapRef"] = {"name": "cfg", "key": "config.json"}
    else:
        model["hub"] = {"repository": "org/model", "revision": "main"}
    max_len = draw(st.integers(128, 1_048_576))
    prompt = draw(st.integers(1, max_len - 1))
    output = draw(st.integers(1, max_len - prompt))
    spec: dict[str, Any] = {
        "model": model,
        "workload": {
            "maxModelLen": max_len,
            "promptTokens": prompt,
            "outputTokens": output,
            "concurrency": draw(st.integers(1, 1_000_000)),
        },
        "slo": {
            "tpotMilliseconds": draw(st.integers(1, 10_000)),
            "percentile": draw(st.sampled_from([50, 90, 95, 99])),
        },
    }
    if draw(st.booleans()):
        spec["slo"]["ttftMilliseconds"] = draw(st.integers(1, 600_000))
    gpu: dict[str, Any] = {}
    if draw(st.booleans()):
        gpu["product"] = draw(st.sampled_from(PRODUCTS))
    max_gpus = draw(st.none() | st.integers(1, 4096))
    if max_gpus is not None:
        gpu["maxGPUs"] = max_gpus
    spec["gpu"] = gpu
    tp = draw(st.sampled_from(["Auto"]) | st.integers(1, min(64, max_gpus or 64)))
    spec["tuning"] = {
        "tensorParallelSize": tp,
        "maxNumSeqs": draw(st.sampled_from(["Auto"]) | st.integers(1, 4096)),
        "kvCacheDtype": draw(st.sampled_from(["Auto", "Model", "FP8"])),
        "gpuMemoryUtilizationPercent": draw(st.integers(50, 98)),
    }
    lo = draw(st.integers(0, 1000))
    hi = draw(st.integers(max(1, lo), 1000))
    replicas: dict[str, Any] = {"min": lo, "max": hi}
    if draw(st.booleans()):
        replicas["count"] = draw(st.integers(lo, hi))
    spec["replicas"] = replicas
    spec["feedback"] = {
        "mode": draw(st.sampled_from(["Off", "Observe", "Adjust"])),
        "windowSeconds": 300,
        "cooldownSeconds": 0,
    }
    return spec


@st.composite
def inventories(draw: st.DrawFn) -> dict[str, Any]:
    groups = draw(
        st.lists(st.tuples(st.sampled_from(PRODUCTS), st.integers(1, 3), st.integers(1, 16)), max_size=3)
    )
    return nodes(*groups)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=crd_valid_specs(), inventory=inventories(), calibration=st.floats(0.5, 4.0), resolved=st.booleans()
)
def test_no_crd_valid_spec_crashes_the_decision(
    spec: dict[str, Any], inventory: dict[str, Any], calibration: float, resolved: bool
) -> None:
    arch_id = spec["model"].get("architecture")
    if arch_id in capacity.catalog_ids():
        arch: Any = capacity.catalog_architecture(arch_id)
    elif resolved:
        arch = capacity.catalog_architecture("llama-3.1-8b")
    else:
        arch = ResolveFailure(reason=Reason.ARCHITECTURE_UNKNOWN, message="unknown", retryable=False)
    overrides = Overrides(calibration=capacity.Calibration(scale=calibration))
    f = facts(spec, architecture=arch, inventory=inventory, overrides=overrides)
    d = desire(f)
    new = status(f, d, rollout=None, apply_error=None, now=NOW)
    assert [c["type"] for c in new["conditions"]] == ["PlanFeasible", "Deployed", "Ready"]
    if d.children:
        plan = d.fields["plan"]
        limits = d.children[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        # Without LeaderWorkerSet (these facts) a replica is one pod on one node, with all its GPUs.
        assert plan["nodesPerReplica"] == 1
        assert limits == {"nvidia.com/gpu": str(plan["gpusPerReplica"])}
        assert plan["gpusPerReplica"] == (
            plan["tensorParallelSize"] * plan["pipelineParallelSize"] * plan["dataParallelSize"]
        )
        product = inventory[plan["gpuProduct"]]
        assert plan["gpusPerReplica"] <= product.max_gpus_per_node
        r = spec["replicas"]
        assert r["min"] <= plan["replicas"] <= r["max"]
    else:
        assert d.plan_feasible.status in ("False", "Unknown")


# --- LeaderWorkerSet rollouts (groups) -----------------------------------------------------------------


def _lws(status: dict[str, Any], *, replicas: int = 1) -> dict[str, Any]:
    def template(args: list[str]) -> dict[str, Any]:
        return {"spec": {"containers": [{"name": "vllm", "args": args}]}}

    return {
        "kind": "LeaderWorkerSet",
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "leaderTemplate": template(["m", "lead"]),
                "workerTemplate": template(["m", "work"]),
            },
        },
        "status": status,
    }


def _pod(name: str, index: str, args: list[str], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"leaderworkerset.sigs.k8s.io/worker-index": index}},
        "spec": {"containers": [{"name": "vllm", "args": args}]},
        "status": status,
    }


def _lws_status(**conditions: str) -> dict[str, Any]:
    """A LeaderWorkerSet's status: its one group ready and on the template, and these conditions."""
    return {
        "replicas": 1,
        "readyReplicas": 1,
        "updatedReplicas": 1,
        "conditions": [{"type": kind, "status": status} for kind, status in conditions.items()],
    }


AVAILABLE = _lws_status(Available="True", UpdateInProgress="False")


def test_a_leader_worker_set_counts_groups_and_is_up_to_date_when_its_pods_run_the_template() -> None:
    pods = [_pod("x-0", "0", ["m", "lead"]), _pod("x-0-1", "1", ["m", "work"])]
    r = rollout_from(_lws(AVAILABLE), pods)
    assert (r.replicas, r.ready_replicas, r.updated_replicas, r.up_to_date, r.stalled) == (
        1,
        1,
        1,
        True,
        None,
    )


def test_a_leader_worker_set_whose_pods_run_an_older_template_is_rolling_out() -> None:
    pods = [_pod("x-0", "0", ["m", "lead"]), _pod("x-0-1", "1", ["m", "old"])]
    assert not rollout_from(_lws(AVAILABLE), pods).up_to_date


def test_a_leader_worker_set_updating_or_short_of_groups_is_not_up_to_date() -> None:
    updating = _lws_status(UpdateInProgress="True")
    assert not rollout_from(_lws(updating)).up_to_date
    assert not rollout_from(_lws({**AVAILABLE, "updatedReplicas": 1}, replicas=2)).up_to_date


def test_a_leader_worker_set_with_an_unschedulable_worker_is_stalled() -> None:
    pending = _pod(
        "x-0-1",
        "1",
        ["m", "work"],
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "Insufficient nvidia.com/gpu",
            }
        ],
    )
    r = rollout_from(_lws(AVAILABLE), [_pod("x-0", "0", ["m", "lead"]), pending])
    assert r.stalled == "pod x-0-1 cannot be scheduled: Insufficient nvidia.com/gpu"


# --- routing: an InferencePool when the cluster serves its API, else the Service ----------------------

DEFAULT_PICKER = EndpointPickerSpec(name="chat-epp", port=9002, failure_mode="FailClose")
OWN_PICKER = {"name": "my-picker", "port": 9100, "failureMode": "FailOpen"}


@pytest.mark.parametrize(
    ("served", "spec_picker", "default", "ref", "routing"),
    [
        (
            False,
            OWN_PICKER,
            DEFAULT_PICKER,
            None,
            {"mode": "Service", "inferencePool": None, "endpointPicker": None, "service": "chat"},
        ),
        (
            True,
            None,
            DEFAULT_PICKER,
            {"kind": "Service", "name": "chat-epp", "port": {"number": 9002}, "failureMode": "FailClose"},
            {
                "mode": "InferencePool",
                "inferencePool": "chat",
                "endpointPicker": "chat-epp:9002",
                "service": "chat",
            },
        ),
        (
            True,
            OWN_PICKER,
            DEFAULT_PICKER,
            {"kind": "Service", "name": "my-picker", "port": {"number": 9100}, "failureMode": "FailOpen"},
            {
                "mode": "InferencePool",
                "inferencePool": "chat",
                "endpointPicker": "my-picker:9100",
                "service": "chat",
            },
        ),
        (
            True,
            None,
            None,
            None,
            {"mode": "InferencePool", "inferencePool": "chat", "endpointPicker": None, "service": "chat"},
        ),
    ],
    ids=[
        "api-not-served-no-pool-routing-by-service",
        "served-the-operators-default-picker",
        "served-the-specs-picker-wins",
        "served-no-picker-anywhere-a-pool-without-reference",
    ],
)
def test_routing_by_pool_or_service(
    served: bool,
    spec_picker: dict[str, Any] | None,
    default: EndpointPickerSpec | None,
    ref: dict[str, Any] | None,
    routing: dict[str, Any],
) -> None:
    spec = {**LLAMA70.spec(), **({"routing": {"endpointPicker": spec_picker}} if spec_picker else {})}
    d = desire(facts(spec, inference_pool=served, endpoint_picker=default))
    pools = [c for c in d.children if c["kind"] == "InferencePool"]
    assert len(pools) == int(served)
    if served:
        assert pools[0]["spec"].get("endpointPickerRef") == ref
    got = dict(d.fields["routing"])
    assert got.pop("message")
    assert got == routing


def test_a_refused_pool_apply_does_not_claim_routing_by_pool() -> None:
    d = desire(facts(LLAMA70.spec(), inference_pool=True, endpoint_picker=DEFAULT_PICKER))
    refused = "applying InferencePool chat: 422 spec.endpointPickerRef: Required value"
    fresh = status(facts(LLAMA70.spec()), d, rollout=None, apply_error=refused, now=NOW)
    assert fresh["routing"]["mode"] == "Service" and Reason.APPLY_FAILED in fresh["routing"]["message"]
    before = {
        "routing": {"mode": "InferencePool", "inferencePool": "chat", "service": "chat", "message": "m"}
    }
    kept = status(facts(LLAMA70.spec(), current_status=before), d, rollout=None, apply_error=refused, now=NOW)
    assert kept["routing"] == before["routing"], "what routes now is what the last applied pool routes"
    applied = status(facts(LLAMA70.spec()), d, rollout=None, apply_error=None, now=NOW)
    assert applied["routing"]["mode"] == "InferencePool"


def test_a_null_in_the_new_status_equals_an_absent_key() -> None:
    """A merge patch removes a key sent as null: the status written once is not rewritten every period."""
    assert not status_changed(
        {"routing": {"mode": "Service"}}, {"routing": {"mode": "Service", "inferencePool": None}}
    )
    assert status_changed(
        {"routing": {"mode": "InferencePool", "inferencePool": "chat"}},
        {"routing": {"mode": "Service", "inferencePool": None}},
    )


def test_a_data_parallel_replica_seats_every_engine_so_the_planned_load_waits_for_none() -> None:
    """DeepSeek-R1 on eight H200s plans data-parallel attention engines, each with max-num-seqs seats: at
    the planned replicas the load fits the replica's seats (all its engines'), and the TTFT in status is
    the planner's, with no wait for a seat."""
    spec = llmd("r1").model("deepseek-r1").gpu(H200).context(65536, 2048, 256).concurrency(64).tpot_ms(100)
    d = desire(facts(spec.spec()))
    plan, prediction = d.fields["plan"], d.fields["prediction"]
    assert plan["dataParallelSize"] > 1, plan
    planned = capacity.plan(
        capacity.catalog_architecture("deepseek-r1"),
        capacity.gpu_spec("h200"),
        capacity.Workload(max_model_len=65536, prompt_tokens=2048, output_tokens=256, concurrency=64),
        capacity.SLO(tpot_seconds=0.1),
        capacity.Limits(max_gpus=8),
    )
    assert planned.plan is not None and planned.prediction is not None
    assert (planned.plan.data_parallel_size, planned.plan.max_num_seqs) == (
        plan["dataParallelSize"],
        plan["maxNumSeqs"],
    )
    assert prediction["ttftMilliseconds"] == pytest.approx(planned.prediction.ttft_seconds * 1000, abs=1e-3)


def test_a_model_with_host_tables_asks_its_pods_for_that_host_memory_too() -> None:
    """Qwen3.8-Flash-Next keeps 102.4 GB of n-gram tables in pinned host memory (vLLM's default): the pod
    requests them beside spec.resources.memory, so it lands on a node that holds them."""
    arch = capacity.architecture_from_config(QWEN3_8_FLASH_NEXT_TEXT)
    spec = llmd("chat").model("qwen3.8").gpu(H200).context(8192, 2048, 256).concurrency(8).tpot_ms(50).spec()
    d = desire(facts(spec, architecture=arch, architecture_source="ConfigMap"))
    assert d.plan_feasible.status == "True", d.plan_feasible
    container = d.children[0]["spec"]["template"]["spec"]["containers"][0]
    host = arch.weight_groups.host_tables
    assert container["resources"]["requests"]["memory"] == f"{math.ceil((32 * 2**30 + host) / 2**30)}Gi"
    assert memory_request("32Gi", 0.0) == "32Gi"
    assert memory_request("64G", 2**30) == f"{math.ceil((64e9 + 2**30) / 2**30)}Gi"
