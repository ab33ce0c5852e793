"""The operator against the real control plane: kube-apiserver + etcd, the controller-manager (Deployment
controller, garbage collector), the scheduler, and kwok's fake GPU nodes (2 x 8 NVIDIA-H100-80GB-HBM3,
1 x 8 NVIDIA-H200, labelled as GPU Feature Discovery labels them).

The operator runs in this process (kopf.testing.KopfRunner) watching one namespace per test, with a
2-second level-reconcile period. Faked at the edge only: the Hugging Face hub, a loopback HTTP server
serving one config.json (KVRIGHT_HF_ENDPOINT points at it). The expected plans come from the pure
planner (capacity.plan) for the same inputs, so these tests check the wiring, the children and the
scheduling, not the planner's numbers.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

import capacity
from kvright.operator import FAULT_EXIT_CODE, Kube
from kvright_dev.cluster import apply
from kvright_dev.procs import free_port
from tests.builders import llama_8b_config, llmd
from tests.integration.kvright_cluster import (
    admin_with_crd,
    condition,
    create,
    events,
    llmd_path,
    namespace,
    operator,
    operator_namespace,
    patch_spec,
    poll,
    reconciled,
    spawn_operator,
)

pytestmark = pytest.mark.cluster

SAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "samples"
H100 = "NVIDIA-H100-80GB-HBM3"
H200 = "NVIDIA-H200"
PRODUCT_NODES = {H100: (4, 8), H200: (1, 8)}  # nodes, GPUs per node (deploy/kwok/gpu-nodes.conf)


@pytest.fixture(scope="module")
def kube() -> Kube:
    return admin_with_crd()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    with namespace(kube, "kvr-op") as name:
        yield name


@pytest.fixture
def running(kube: Kube) -> Iterator[str]:
    with operator_namespace(kube, "kvr-op") as ns:
        yield ns


def sample(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((SAMPLES / name).read_text(encoding="utf-8")))


def expected_plan(spec: dict[str, Any]) -> capacity.PlanResult:
    """What the planner says for a spec on the fake nodes (the operator must show exactly this)."""
    product = spec["gpu"]["product"]
    nodes, per_node = PRODUCT_NODES[product]
    w = spec.get("workload", {})
    tuning = spec.get("tuning", {})
    kv = {"Auto": None, "Model": "auto", "FP8": "fp8"}[tuning.get("kvCacheDtype", "Auto")]
    return capacity.plan(
        capacity.catalog_architecture(spec["model"]["architecture"]),
        capacity.gpu_spec(product),
        capacity.Workload(
            max_model_len=w.get("maxModelLen", 8192),
            prompt_tokens=w.get("promptTokens", 1024),
            output_tokens=w.get("outputTokens", 256),
            concurrency=w.get("concurrency", 32),
        ),
        capacity.SLO(
            tpot_seconds=spec["slo"]["tpotMilliseconds"] / 1000,
            ttft_seconds=spec["slo"]["ttftMilliseconds"] / 1000
            if "ttftMilliseconds" in spec["slo"]
            else None,
        ),
        capacity.Limits(
            gpus_per_node=per_node,
            max_gpus=min(spec["gpu"].get("maxGPUs", nodes * per_node), nodes * per_node),
            kv_cache_dtype=kv,
            gpu_memory_utilization=tuning.get("gpuMemoryUtilizationPercent", 90) / 100,
        ),
    )


def deployment(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    return kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}")


def pods(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    got = kube.request(
        "GET", f"/api/v1/namespaces/{ns}/pods", query=[("labelSelector", f"kvright.dev/llmdeployment={name}")]
    )
    return list(got.get("items") or [])


def node_product(kube: Kube, node: str) -> str:
    got = kube.get(f"/api/v1/nodes/{node}") or {}
    return str((got.get("metadata") or {}).get("labels", {}).get("nvidia.com/gpu.product", ""))


def ready(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    obj = reconciled(kube, ns, name)
    return obj if condition(obj, "Ready").get("status") == "True" else None


# --- samples -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "product"),
    [("llama-3.1-70b-h100.yaml", H100), ("deepseek-r1-h200.yaml", H200)],
    ids=["llama-70b-on-h100", "deepseek-r1-dp-ep-on-h200"],
)
def test_sample_reconciles_to_the_plan_and_pods_land_on_its_gpus(
    kube: Kube, running: str, file: str, product: str
) -> None:
    ns = running
    obj = sample(file)
    name = obj["metadata"]["name"]
    create(kube, obj, ns)
    got = poll(lambda: ready(kube, ns, name), what=f"{name} Ready")
    want = expected_plan(obj["spec"])
    assert want.feasible and want.plan is not None
    plan = got["status"]["plan"]
    assert plan["gpuProduct"] == product
    assert plan["tensorParallelSize"] == want.plan.tensor_parallel_size
    assert plan["layout"] == want.plan.layout.label and plan["nodesPerReplica"] == 1
    assert plan["maxNumSeqs"] == want.plan.max_num_seqs
    assert plan["kvCacheDtype"] == want.plan.kv_cache_dtype
    assert plan["maxModelLen"] == obj["spec"]["workload"]["maxModelLen"]
    assert plan["vllmArgs"] == want.plan.vllm_args()
    assert condition(got, "PlanFeasible")["reason"] == "Planned"
    assert condition(got, "Deployed")["status"] == "True"
    assert got["status"]["readyReplicas"] == plan["replicas"]

    dep = deployment(kube, ns, name)
    assert dep is not None
    owner = dep["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "LLMDeployment",
        name,
        got["metadata"]["uid"],
        True,
    )
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["vllm", "serve"]
    assert container["args"][0] == obj["spec"]["model"]["name"]
    assert container["args"][1 : 1 + len(plan["vllmArgs"])] == plan["vllmArgs"]
    svc = kube.get(f"/api/v1/namespaces/{ns}/services/{name}")
    assert svc is not None and svc["spec"]["ports"][0]["port"] == 8000

    running_pods = pods(kube, ns, name)
    assert len(running_pods) == plan["replicas"]
    for pod in running_pods:
        assert pod["status"]["phase"] == "Running"
        assert node_product(kube, pod["spec"]["nodeName"]) == product
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == str(plan["gpusPerReplica"])  # one pod holds a one-node replica

    # The disruption controller counts the vLLM pods under the budget: a drain may take one at a time.
    def budget() -> dict[str, Any] | None:
        pdb = kube.get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}")
        counted = (pdb or {}).get("status", {})
        healthy = counted.get("expectedPods") == plan["replicas"] == counted.get("currentHealthy")
        return pdb if healthy else None

    pdb = poll(budget, what=f"{name}'s PodDisruptionBudget to count its pods")
    assert pdb["metadata"]["ownerReferences"] == dep["metadata"]["ownerReferences"]
    assert (pdb["spec"]["maxUnavailable"], pdb["status"]["disruptionsAllowed"]) == (1, 1)

    # Each pod's start (scheduled to Ready: seconds under kwok) was counted once, and the predicted cold
    # start is now the pods' own: below the documented hub bandwidth's, never below vLLM's fixed costs.
    def learned() -> dict[str, Any] | None:
        o = reconciled(kube, ns, name) or {}
        counted = (o.get("status", {}).get("coldStart") or {}).get("observedStarts")
        return o if counted == plan["replicas"] else None

    status = poll(learned, what=f"{name}'s pod starts counted")["status"]
    assert status["coldStart"]["source"] == "hub" and status["coldStart"]["lastStartSeconds"] < 60
    arch = capacity.catalog_architecture(obj["spec"]["model"]["architecture"])
    default = capacity.plan_cold_starts(want, checkpoint_bytes=capacity.weight_bytes(arch))["hub"]
    assert default.engine_seconds < status["prediction"]["coldStartSeconds"] < default.seconds


def reconciles() -> float:
    """Reconciles the in-process operator has finished so far (its kvright_reconcile_total counter)."""
    from kvright import metrics

    total = 0.0
    for result in ("success", "error"):
        value = metrics.METRICS.registry.get_sample_value("kvright_reconcile_total", {"result": result})
        total += value or 0.0
    return total


def test_infeasible_sample_is_a_condition_and_one_event_not_a_crash_loop(kube: Kube, ns: str) -> None:
    with operator(ns, reconcile_seconds=0.5):
        _infeasible_sample_is_a_condition_and_one_event(kube, ns)


def _infeasible_sample_is_a_condition_and_one_event(kube: Kube, ns: str) -> None:
    obj = sample("infeasible-405b.yaml")
    name = obj["metadata"]["name"]
    create(kube, obj, ns)
    got = poll(lambda: reconciled(kube, ns, name), what=f"{name} reconciled")
    pf = condition(got, "PlanFeasible")
    assert (pf["status"], pf["reason"]) == ("False", "Infeasible")
    assert "needs" in pf["message"] and "quantized checkpoint" in pf["message"]
    assert "spec.tuning.quantization" in pf["message"]
    assert (condition(got, "Deployed")["reason"], condition(got, "Ready")["status"]) == (
        "NotPlanned",
        "False",
    )
    assert deployment(kube, ns, name) is None
    warnings = poll(
        lambda: [e for e in events(kube, ns, name) if e["reason"] == "Infeasible"],
        what="the Infeasible event",
    )
    first_time = pf["lastTransitionTime"]
    # An absence (no repeated event, no new children) can only be observed over time: three more
    # level reconciles of the only object in this namespace (0.5 s apart) finish first.
    before = reconciles()
    poll(lambda: reconciles() >= before + 3, what="three more reconciles", timeout=60)
    later = reconciled(kube, ns, name)
    assert condition(later, "PlanFeasible")["lastTransitionTime"] == first_time
    again = [e for e in events(kube, ns, name) if e["reason"] == "Infeasible"]
    assert len(again) == 1 == len(warnings)
    assert again[0].get("count", 1) == 1
    assert deployment(kube, ns, name) is None


# --- edits, scale, hand edits, delete ------------------------------------------------------------------

BASE = llmd("chat").model("llama-3.1-8b").gpu(H100).context(8192, 1024, 256).concurrency(16).tpot_ms(50)


def _args(kube: Kube, ns: str, name: str) -> list[str]:
    dep = deployment(kube, ns, name) or {}
    return list(dep["spec"]["template"]["spec"]["containers"][0]["args"])


def _flag(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.mark.parametrize(
    ("edit", "check"),
    [
        (
            {"tuning": {"tensorParallelSize": 2}},
            lambda p, a: p["tensorParallelSize"] == 2 == int(_flag(a, "--tensor-parallel-size")),
        ),
        (
            {"workload": {"maxModelLen": 32768}},
            lambda p, a: p["maxModelLen"] == 32768 == int(_flag(a, "--max-model-len")),
        ),
        ({"slo": {"tpotMilliseconds": 8}}, lambda p, a: int(_flag(a, "--max-num-seqs")) == p["maxNumSeqs"]),
    ],
    ids=["pinned-tp", "longer-context", "tighter-tpot"],
)
def test_editing_the_spec_changes_the_plan_and_rolls_the_deployment(
    kube: Kube, running: str, edit: dict[str, Any], check: Any
) -> None:
    ns = running
    create(kube, BASE.obj(), ns)
    before = poll(lambda: ready(kube, ns, "chat"), what="chat Ready")
    old_plan = before["status"]["plan"]
    old_template_gen = deployment(kube, ns, "chat")["metadata"]["generation"]  # type: ignore[index]
    patch_spec(kube, ns, "chat", edit)
    after = poll(
        lambda: (o := reconciled(kube, ns, "chat")) and o["status"]["plan"] != old_plan and o,
        what="a new plan",
    )
    plan = after["status"]["plan"]
    args = poll(
        lambda: (a := _args(kube, ns, "chat")) != before["status"]["plan"]["vllmArgs"] and a, what="new args"
    )
    assert check(plan, args)
    dep = deployment(kube, ns, "chat")
    assert dep is not None and dep["metadata"]["generation"] > old_template_gen
    # The rollout completes: new pods Ready on H100 nodes, old ones gone, status says Deployed.
    done = poll(
        lambda: (o := ready(kube, ns, "chat")) and condition(o, "Deployed")["reason"] == "Applied" and o,
        what="rollout to finish",
    )
    assert done["status"]["plan"] == plan
    for pod in pods(kube, ns, "chat"):
        assert pod["spec"]["containers"][0]["args"] == args
    changed = poll(
        lambda: [e for e in events(kube, ns, "chat") if e["reason"] == "PlanChanged"], what="PlanChanged"
    )
    assert "->" in changed[0]["message"]


def test_scale_subresource_pins_the_replica_count(kube: Kube, running: str) -> None:
    ns = running
    create(kube, BASE.obj(), ns)
    poll(lambda: ready(kube, ns, "chat"), what="chat Ready")
    # The API server serves /scale only once the spec path holds a value: hand the count over first.
    patch_spec(kube, ns, "chat", {"replicas": {"count": 1}})
    scale = kube.request("GET", llmd_path(ns, "chat") + "/scale")
    assert (scale["spec"]["replicas"], scale["status"]["replicas"]) == (1, 1)
    assert scale["status"]["selector"] == "app.kubernetes.io/name=vllm,kvright.dev/llmdeployment=chat"
    kube.request(
        "PATCH",
        llmd_path(ns, "chat") + "/scale",
        body={"spec": {"replicas": 2}},
        content_type="application/merge-patch+json",
    )
    got = poll(
        lambda: (o := ready(kube, ns, "chat")) and o["status"]["readyReplicas"] == 2 and o, what="2 Ready"
    )
    assert got["spec"]["replicas"]["count"] == 2
    assert got["status"]["plan"]["replicas"] == 2
    assert deployment(kube, ns, "chat")["spec"]["replicas"] == 2  # type: ignore[index]


def test_hand_edit_of_an_owned_field_is_reverted_and_a_foreign_field_is_kept(
    kube: Kube, running: str
) -> None:
    ns = running
    create(kube, BASE.obj(), ns)
    got = poll(lambda: ready(kube, ns, "chat"), what="chat Ready")
    owned_args = _args(kube, ns, "chat")
    tampered = [*owned_args[:-1], "9999"]  # --port 9999
    kube.request(
        "PATCH",
        "/apis/apps/v1/namespaces/" + ns + "/deployments/chat",
        query=[("fieldManager", "a-human")],
        body={
            "metadata": {"annotations": {"team.example.com/owner": "alice"}},
            "spec": {"template": {"spec": {"containers": [{"name": "vllm", "args": tampered}]}}},
        },
        content_type="application/strategic-merge-patch+json",
    )
    assert _args(kube, ns, "chat") == tampered
    poll(lambda: _args(kube, ns, "chat") == owned_args, what="kvright to restore the args", timeout=60)
    dep = deployment(kube, ns, "chat") or {}
    assert dep["metadata"]["annotations"]["team.example.com/owner"] == "alice"
    assert got["status"]["plan"]["vllmArgs"] == owned_args[1 : 1 + len(got["status"]["plan"]["vllmArgs"])]


def test_deleting_garbage_collects_the_children(kube: Kube, running: str) -> None:
    ns = running
    create(kube, BASE.obj(), ns)
    poll(lambda: deployment(kube, ns, "chat"), what="the Deployment")
    poll(lambda: kube.get(f"/api/v1/namespaces/{ns}/services/chat"), what="the Service")
    kube.request("DELETE", llmd_path(ns, "chat"))
    poll(
        lambda: kube.get(llmd_path(ns, "chat")) is None,
        what="the LLMDeployment to go (no finalizer holds it)",
    )
    poll(lambda: deployment(kube, ns, "chat") is None, what="the garbage collector to delete the Deployment")
    poll(lambda: kube.get(f"/api/v1/namespaces/{ns}/services/chat") is None, what="... and the Service")
    poll(
        lambda: kube.get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/chat") is None,
        what="... and the PodDisruptionBudget",
    )
    poll(lambda: not pods(kube, ns, "chat"), what="... and the pods")


# --- architecture sources ------------------------------------------------------------------------------

LLAMA_8B_CONFIG = llama_8b_config()


def _create_v1(kube: Kube, ns: str, kind: str, name: str, **content: Any) -> None:
    """Create a core (v1) object, a ConfigMap or a Secret, in ``ns``."""
    body = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, **content}
    kube.request("POST", f"/api/v1/namespaces/{ns}/{kind.lower()}s", body=body)


def test_config_map_source_waits_for_the_config_map_then_plans(kube: Kube, running: str) -> None:
    ns = running
    create(kube, llmd("custom").config_map("llama-config").gpu(H100).obj(), ns)
    waiting = poll(lambda: reconciled(kube, ns, "custom"), what="custom reconciled")
    pf = condition(waiting, "PlanFeasible")
    assert (pf["status"], pf["reason"]) == ("Unknown", "ConfigMapMissing")
    _create_v1(kube, ns, "ConfigMap", "llama-config", data={"config.json": json.dumps(LLAMA_8B_CONFIG)})
    got = poll(
        lambda: (
            (o := reconciled(kube, ns, "custom")) and condition(o, "PlanFeasible")["status"] == "True" and o
        ),
        what="a plan from the ConfigMap",
    )
    assert got["status"]["architecture"]["source"] == f"ConfigMap {ns}/llama-config[config.json]"
    assert got["status"]["architecture"]["numLayers"] == 32


def test_a_model_read_by_its_own_code_waits_for_trust_then_every_pod_gets_the_flag(
    kube: Kube, running: str
) -> None:
    """A fine-tune that renamed its model_type ships the config class vLLM must run (auto_map): refused
    with the field to set, no pods; once the spec trusts the code, vLLM is told to run it."""
    ns = running
    code = {"AutoConfig": "configuration_acme.AcmeConfig"}
    custom = {**LLAMA_8B_CONFIG, "model_type": "acme_llama", "auto_map": code}
    _create_v1(kube, ns, "ConfigMap", "acme-config", data={"config.json": json.dumps(custom)})
    create(kube, llmd("acme").config_map("acme-config").gpu(H100).obj(), ns)
    refused = poll(lambda: reconciled(kube, ns, "acme"), what="acme reconciled")
    pf = condition(refused, "PlanFeasible")
    assert (pf["status"], pf["reason"]) == ("False", "RemoteCodeNotTrusted"), pf
    assert "model.trustRemoteCode: true" in pf["message"]
    assert deployment(kube, ns, "acme") is None
    patch_spec(kube, ns, "acme", {"model": {"trustRemoteCode": True}})
    poll(lambda: deployment(kube, ns, "acme"), what="acme's Deployment once trusted")
    (container,) = (deployment(kube, ns, "acme") or {})["spec"]["template"]["spec"]["containers"]
    assert container["args"].count("--trust-remote-code") == 1


@pytest.fixture
def hub() -> Iterator[tuple[str, list[str | None]]]:
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            if self.path == "/acme/llama-8b/resolve/main/config.json" and seen[-1] == "Bearer t0ken":
                body, code = json.dumps(LLAMA_8B_CONFIG).encode(), 200
            else:
                body, code = b"no", 401
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_hub_source_with_a_token_secret(kube: Kube, ns: str, hub: tuple[str, list[str | None]]) -> None:
    endpoint, seen = hub
    _create_v1(kube, ns, "Secret", "hf", stringData={"token": "t0ken"})
    with operator(ns, env={"KVRIGHT_HF_ENDPOINT": endpoint}):
        create(kube, llmd("gated").hub("acme/llama-8b", token_secret="hf").gpu(H100).obj(), ns)
        got = poll(lambda: ready(kube, ns, "gated"), what="gated Ready")
        create(kube, llmd("denied").hub("acme/llama-8b").gpu(H100).obj(), ns)
        denied = poll(lambda: reconciled(kube, ns, "denied"), what="denied reconciled")
    assert got["status"]["architecture"]["source"] == "Hub acme/llama-8b@main"
    assert "Bearer t0ken" in seen
    env = (deployment(kube, ns, "gated") or {})["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}} in env
    assert all("t0ken" not in json.dumps(e) for e in env)
    pf = condition(denied, "PlanFeasible")
    assert (pf["status"], pf["reason"]) == ("False", "HubFetchFailed")
    assert "tokenSecretRef" in pf["message"]


# --- architecture-dependent checks and the GPU inventory -----------------------------------------------


@pytest.mark.parametrize(
    ("builder", "reason", "text"),
    [
        (BASE.tp(3), "TensorParallelInvalid", "valid here: 1, 2, 4, 8"),
        (BASE.tp(16), "Infeasible", "largest NVIDIA-H100-80GB-HBM3 node has 8"),
        (BASE.gpu("NVIDIA-A100-SXM4-80GB"), "NoGPUNodes", f"products present: {H100}, {H200}"),
        (
            llmd("chat").model("llama-3.1-8b").gpu_products("NVIDIA-L4", "NVIDIA-L40S"),
            "NoGPUNodes",
            f"any of gpu.products (NVIDIA-L4, NVIDIA-L40S); products present: {H100}, {H200}",
        ),
    ],
    ids=["tp-3-does-not-divide-heads", "tp-16-larger-than-a-node", "absent-product", "products-absent"],
)
def test_what_the_schema_cannot_know_is_a_condition(
    kube: Kube, running: str, builder: Any, reason: str, text: str
) -> None:
    ns = running
    create(kube, builder.obj(), ns)
    got = poll(lambda: reconciled(kube, ns, "chat"), what="chat reconciled")
    pf = condition(got, "PlanFeasible")
    assert (pf["status"], pf["reason"]) == ("False", reason)
    assert text in pf["message"]
    assert deployment(kube, ns, "chat") is None


def test_an_edit_the_architecture_cannot_take_is_a_condition_and_the_running_pods_stay(
    kube: Kube, running: str
) -> None:
    """The schema accepts TP 3 (an integer from 1 to 64); Llama-3.1-8B's 32 heads do not split in 3. An
    edit to it is reported and the Deployment of the last feasible plan keeps serving unchanged."""
    ns = running
    create(kube, BASE.obj(), ns)
    poll(lambda: ready(kube, ns, "chat"), what="chat Ready")
    before = deployment(kube, ns, "chat") or {}
    patch_spec(kube, ns, "chat", {"tuning": {"tensorParallelSize": 3}})
    edited = poll(
        lambda: (
            (o := reconciled(kube, ns, "chat")) and condition(o, "PlanFeasible")["status"] == "False" and o
        ),
        what="the edit reconciled",
    )
    pf = condition(edited, "PlanFeasible")
    assert pf["reason"] == "TensorParallelInvalid" and "valid here: 1, 2, 4, 8" in pf["message"], pf
    after = deployment(kube, ns, "chat") or {}
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["spec"]["template"] == before["spec"]["template"]


def test_a_status_written_by_another_actor_is_repaired_by_the_next_reconcile(
    kube: Kube, running: str
) -> None:
    """status is kvright's: a write through the status subresource (a stale controller, a hand edit) is
    overwritten by the next periodic reconcile (KVRIGHT_RECONCILE_SECONDS, 2 s here)."""
    ns = running
    create(kube, BASE.obj(), ns)
    good = poll(lambda: ready(kube, ns, "chat"), what="chat Ready")["status"]
    forged = {
        "plan": {"maxNumSeqs": 1},
        "conditions": [{**condition({"status": good}, "Ready"), "status": "False"}],
    }
    kube.request(
        "PATCH",
        llmd_path(ns, "chat") + "/status",
        body={"status": forged},
        content_type="application/merge-patch+json",
    )
    repaired = poll(
        lambda: (o := ready(kube, ns, "chat")) and o["status"]["plan"] == good["plan"] and o,
        what="status repaired",
    )
    assert condition(repaired, "Ready")["status"] == "True"


# --- restart ---------------------------------------------------------------------------------------------


def test_restart_mid_reconcile_resumes_without_duplicates_or_lost_status(kube: Kube, ns: str) -> None:
    names = [f"m{i:02d}" for i in range(24)]
    # The first operator is a process killed with SIGKILL while objects are still arriving and being
    # reconciled: no graceful shutdown, some reconciles cut between applying children and writing status.
    proc = spawn_operator(ns, reconcile_seconds=60)  # a sweep too slow to matter
    try:
        for name in names[:8]:
            create(kube, BASE.replicas(0, 1, count=0).obj() | {"metadata": {"name": name}}, ns)
        first = poll(lambda: reconciled(kube, ns, names[0]), what="the first one reconciled")
        for name in names[8:]:
            create(kube, BASE.replicas(0, 1, count=0).obj() | {"metadata": {"name": name}}, ns)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    before = {n: kube.get(llmd_path(ns, n)) for n in names}
    with operator(ns, reconcile_seconds=60):
        done = {
            n: poll(lambda n=n: reconciled(kube, ns, n), what=f"{n} reconciled after restart") for n in names
        }
    # One Deployment, one Service and one ReplicaSet per LLMDeployment, nothing else.
    deps = kube.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments")["items"]
    assert sorted(d["metadata"]["name"] for d in deps) == names
    svcs = kube.request("GET", f"/api/v1/namespaces/{ns}/services")["items"]
    assert sorted(s["metadata"]["name"] for s in svcs) == names
    rsets = poll(
        lambda: (
            (r := kube.request("GET", f"/apis/apps/v1/namespaces/{ns}/replicasets")["items"])
            and len(r) >= len(names)
            and r
        ),
        what="ReplicaSets",
    )
    assert len(rsets) == len(names)
    # Status written before the restart is kept: the first object's conditions did not move.
    for c in first["status"]["conditions"]:
        assert condition(done[names[0]], c["type"])["lastTransitionTime"] == c["lastTransitionTime"]
    for n in names:
        assert done[n]["status"]["plan"]["replicas"] == 0
        if (before[n] or {}).get("status", {}).get("observedGeneration"):
            assert done[n]["status"]["plan"] == before[n]["status"]["plan"]  # type: ignore[index]


@pytest.mark.parametrize("writes", [1, 2], ids=["cut-after-the-first-write", "cut-after-the-second-write"])
def test_a_reconcile_cut_between_two_writes_is_finished_by_the_next_operator(
    kube: Kube, ns: str, writes: int
) -> None:
    """The fault-injection seam (KVRIGHT_FAULT_EXIT_AFTER_WRITES) makes the first operator exit right after
    its first (or second) write of the first reconcile: a child applied, the rest and the status not.
    A restarted operator finishes the job: one of each child, status for the current generation with every
    condition, and no event posted twice."""
    proc = spawn_operator(ns, reconcile_seconds=60, KVRIGHT_FAULT_EXIT_AFTER_WRITES=str(writes))
    try:
        create(kube, BASE.obj(), ns)
        assert proc.wait(timeout=120) == FAULT_EXIT_CODE  # the reconcile was cut, not finished
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    cut = kube.get(llmd_path(ns, "chat")) or {}
    assert not (cut.get("status") or {}).get("observedGeneration"), cut.get("status")  # no status yet
    assert deployment(kube, ns, "chat") is not None  # the first write: the Deployment
    services = kube.request("GET", f"/api/v1/namespaces/{ns}/services")["items"]
    assert len(services) == writes - 1  # the second write: the Service
    with operator(ns, reconcile_seconds=60):
        done = poll(lambda: ready(kube, ns, "chat"), what="chat Ready after the restart")
    assert done["status"]["observedGeneration"] == done["metadata"]["generation"]
    assert {c["type"] for c in done["status"]["conditions"]} >= {"PlanFeasible", "Deployed", "Ready"}
    assert [
        d["metadata"]["name"]
        for d in kube.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments")["items"]
    ] == ["chat"]
    assert [
        s["metadata"]["name"] for s in kube.request("GET", f"/api/v1/namespaces/{ns}/services")["items"]
    ] == ["chat"]
    seen = [
        (e["type"], e["reason"], e["message"])
        for e in events(kube, ns, "chat")
        if e.get("source", {}).get("component") == "kvright" or e.get("reportingComponent") == "kvright"
    ]
    assert len(seen) == len(set(seen)), seen


# --- operator metrics ------------------------------------------------------------------------------------


def test_operator_metrics_show_the_plan(kube: Kube, ns: str) -> None:
    import urllib.request

    port = free_port()
    with operator(ns, env={"KVRIGHT_METRICS_PORT": str(port)}):
        create(kube, BASE.obj(), ns)
        got = poll(lambda: reconciled(kube, ns, "chat"), what="chat reconciled")

        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                return str(r.read().decode())

        labels = f'llmdeployment="chat",namespace="{ns}"'
        text = poll(
            lambda: (t := scrape()) and f"kvright_plan_tensor_parallel_size{{{labels}}}" in t and t,
            what="the plan gauges",
        )
    tp = got["status"]["plan"]["tensorParallelSize"]
    assert f"kvright_plan_tensor_parallel_size{{{labels}}} {float(tp)}" in text
    assert f"kvright_plan_feasible{{{labels}}} 1.0" in text
    assert 'kvright_reconcile_total{result="success"}' in text


# --- a rollout that needs GPUs the cluster does not have ---------------------------------------------


def test_rollout_needing_missing_gpus_keeps_the_old_pods_serving(kube: Kube, running: str) -> None:
    ns = running
    # One TP 1 replica on the only H200 node (8 GPUs); pinning TP 8 needs an 8-GPU surge pod, which
    # cannot fit beside the old pod's GPU, whatever else runs there.
    create(kube, BASE.gpu(H200).tp(1).replicas(1, 2, count=1).obj(), ns)
    before = poll(lambda: ready(kube, ns, "chat"), what="1 x TP 1 Ready on the H200 node", timeout=120)
    old_pods = {p["metadata"]["name"] for p in pods(kube, ns, "chat")}
    assert len(old_pods) == 1
    patch_spec(kube, ns, "chat", {"tuning": {"tensorParallelSize": 8}})
    stalled = poll(
        lambda: (
            (o := reconciled(kube, ns, "chat"))
            and condition(o, "Deployed")["reason"] == "RolloutStalled"
            and o
        ),
        what="Deployed=False RolloutStalled",
    )
    deployed = condition(stalled, "Deployed")
    assert deployed["status"] == "False"
    assert "Insufficient nvidia.com/gpu" in deployed["message"]
    assert (
        stalled["status"]["plan"]["tensorParallelSize"] == 8 != before["status"]["plan"]["tensorParallelSize"]
    )
    # maxSurge 1 / maxUnavailable 0: the old pod still runs and is Ready; the new one waits.
    now = pods(kube, ns, "chat")
    still = [p for p in now if p["metadata"]["name"] in old_pods]
    assert len(still) == 1 and still[0]["status"]["phase"] == "Running"
    waiting = [p for p in now if p["metadata"]["name"] not in old_pods]
    assert len(waiting) == 1 and waiting[0]["status"]["phase"] == "Pending"
    assert waiting[0]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert stalled["status"]["readyReplicas"] == 1


# --- PodMonitor only when its CRD exists ----------------------------------------------------------------

POD_MONITOR_CRD = {
    # A stand-in for prometheus-operator's CRD (same group, names and scope; schema left open): what
    # kvright looks for is that the API serves podmonitors.monitoring.coreos.com.
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podmonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "scope": "Namespaced",
        "names": {
            "kind": "PodMonitor",
            "listKind": "PodMonitorList",
            "plural": "podmonitors",
            "singular": "podmonitor",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


def test_pod_monitor_is_created_only_when_its_crd_exists(kube: Kube, ns: str) -> None:
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podmonitors.monitoring.coreos.com"
    pm_path = f"/apis/monitoring.coreos.com/v1/namespaces/{ns}/podmonitors/chat"
    existed = kube.get(crd_path) is not None
    if not existed:
        with operator(ns):
            create(kube, BASE.obj(), ns)
            poll(lambda: reconciled(kube, ns, "chat"), what="chat reconciled")
        assert deployment(kube, ns, "chat") is not None
        assert kube.get(pm_path) is None
        apply(kube, crd_path, POD_MONITOR_CRD, field_manager="kvright-tests")
    try:
        poll(
            lambda: any(
                c["type"] == "Established" and c["status"] == "True"
                for c in ((kube.get(crd_path) or {}).get("status") or {}).get("conditions") or []
            ),
            what="the PodMonitor CRD Established",
        )
        with operator(ns):
            if existed:
                create(kube, BASE.obj(), ns)
            pm = poll(lambda: kube.get(pm_path), what="the PodMonitor")
        assert pm["metadata"]["ownerReferences"][0]["kind"] == "LLMDeployment"
        assert pm["spec"]["selector"]["matchLabels"] == {
            "app.kubernetes.io/name": "vllm",
            "kvright.dev/llmdeployment": "chat",
        }
        endpoint = pm["spec"]["podMetricsEndpoints"][0]
        assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    finally:
        if not existed:
            kube.request("DELETE", crd_path)
