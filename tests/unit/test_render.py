"""kvright.render: the vLLM Deployment, Service, PodMonitor and InferencePool dicts, pure.

The plan is given as plain values (the renderer never sees capacity's Plan), so nothing is faked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

import capacity
from kvright.api import EndpointPickerSpec, SecretKeyRef
from kvright.render import (
    MIN_DRAIN_SECONDS,
    PRESTOP_SLEEP_SECONDS,
    Owner,
    VLLMWorkload,
    drain_seconds,
    labels,
    render_all,
    render_deployment,
    render_inference_pool,
    render_leader_worker_set,
    render_pod_monitor,
    render_service,
    startup_budget_seconds,
    termination_grace_seconds,
    worker_args,
)
from kvright.settings import KVRIGHT_LABEL_KEYS

ARGS = (
    "--tensor-parallel-size",
    "4",
    "--max-num-seqs",
    "64",
    "--kv-cache-dtype",
    "fp8",
    "--max-model-len",
    "8192",
    "--gpu-memory-utilization",
    "0.9",
)


def workload(**overrides: Any) -> VLLMWorkload:
    values: dict[str, Any] = {
        "owner": Owner(name="chat", namespace="ml", uid="u-1"),
        "model": "meta-llama/Llama-3.1-70B-Instruct",
        "served_model_name": "llama",
        "image": "vllm/vllm-openai:v0.32.0",
        "gpu_product": "NVIDIA-H100-80GB-HBM3",
        "layout": capacity.Layout(tensor_parallel_size=4),
        "replicas": 2,
        "vllm_args": ARGS,
        "weight_bytes": 141_000_000_000,
        "max_request_seconds": 60.0,
    }
    values.update(overrides)
    return VLLMWorkload(**values)


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    return c


def test_command_line_is_vllm_serve_model_plus_plan_args() -> None:
    c = container(render_deployment(workload()))
    assert c["command"] == ["vllm", "serve"]
    assert c["args"] == [
        "meta-llama/Llama-3.1-70B-Instruct",
        *ARGS,
        "--served-model-name",
        "llama",
        "--port",
        "8000",
        "--shutdown-timeout",
        "60",
    ]


@pytest.mark.parametrize(
    ("longest", "drain", "grace"),
    [(60.0, 60, 75), (0.0, 60, 75), (3.2, 60, 75), (200.4, 201, 216), (5000, 885, 900)],
)
def test_vllm_drains_what_it_admitted_within_the_grace_period(longest: float, drain: int, grace: int) -> None:
    """vLLM aborts requests in flight on SIGTERM unless --shutdown-timeout is above 0; the drain plus the
    preStop pause fits in the pod's grace period, so the kubelet's SIGKILL never cuts a drain short."""
    c = container(render_deployment(replace(workload(), max_request_seconds=longest)))
    assert c["args"][c["args"].index("--shutdown-timeout") + 1] == str(drain)
    assert drain_seconds(longest) == drain >= MIN_DRAIN_SECONDS
    pod = render_deployment(replace(workload(), max_request_seconds=longest))["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == grace
    assert PRESTOP_SLEEP_SECONDS + drain < grace


@pytest.mark.parametrize(
    ("layout", "gpus"),
    [
        (capacity.Layout(tensor_parallel_size=1), 1),
        (capacity.Layout(tensor_parallel_size=2), 2),
        (capacity.Layout(tensor_parallel_size=8), 8),
        (capacity.Layout(tensor_parallel_size=2, data_parallel_size=4, expert_parallel=True), 8),
    ],
    ids=["tp1", "tp2", "tp8", "tp2-dp4-ep"],
)
def test_gpu_limit_is_the_replica_on_one_node(layout: capacity.Layout, gpus: int) -> None:
    res = container(render_deployment(workload(layout=layout)))["resources"]
    assert res["limits"] == {"nvidia.com/gpu": str(gpus)}
    assert res["requests"]["nvidia.com/gpu"] == str(gpus)


def test_pod_placement_affinity_and_toleration() -> None:
    pod = render_deployment(workload())["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}
            ]
        }
    ]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


def test_shm_probes_lifecycle_and_security() -> None:
    d = render_deployment(workload())
    pod = d["spec"]["template"]["spec"]
    c = container(d)
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/health", "port": "http"}
    # 141 GB at 100 MB/s = 1410 s + 300 s, in 10 s periods.
    assert c["startupProbe"]["failureThreshold"] == 171
    assert c["lifecycle"]["preStop"] == {"sleep": {"seconds": 10}}
    assert pod["terminationGracePeriodSeconds"] == 75
    assert c["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_update_strategy_never_takes_capacity_down_first() -> None:
    spec = render_deployment(workload())["spec"]
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    assert spec["replicas"] == 2


def test_hf_token_only_as_secret_reference() -> None:
    c = container(render_deployment(workload(hf_token=SecretKeyRef(name="hf", key="token"))))
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}} in c["env"]
    assert all(e["name"] != "HF_TOKEN" or "value" not in e for e in c["env"])
    assert not any(e["name"] == "HF_TOKEN" for e in container(render_deployment(workload()))["env"])


def test_every_child_is_labelled_and_owned() -> None:
    children = render_all(workload(), pod_monitor=True)
    assert [c["kind"] for c in children] == ["Deployment", "Service", "PodDisruptionBudget", "PodMonitor"]
    for child in children:
        meta = child["metadata"]
        assert (meta["name"], meta["namespace"]) == ("chat", "ml")
        assert meta["labels"] == labels("chat")
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "kvright.dev/v1alpha1",
                "kind": "LLMDeployment",
                "name": "chat",
                "uid": "u-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    pod_labels = children[0]["spec"]["template"]["metadata"]["labels"]
    assert pod_labels == {
        "app.kubernetes.io/managed-by": "kvright",
        "app.kubernetes.io/name": "vllm",
        "app.kubernetes.io/instance": "chat",
        "kvright.dev/llmdeployment": "chat",
    }
    kinds = [c["kind"] for c in render_all(workload(), pod_monitor=False)]
    assert kinds == ["Deployment", "Service", "PodDisruptionBudget"]


def test_selectors_match_pod_labels() -> None:
    d = render_deployment(workload())
    pod_labels = d["spec"]["template"]["metadata"]["labels"]
    for sel in (
        d["spec"]["selector"]["matchLabels"],
        render_service(workload())["spec"]["selector"],
        render_pod_monitor(workload())["spec"]["selector"]["matchLabels"],
    ):
        assert sel.items() <= pod_labels.items()


def test_service_and_pod_monitor_ports() -> None:
    assert render_service(workload())["spec"]["ports"] == [
        {"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}
    ]
    (endpoint,) = render_pod_monitor(workload())["spec"]["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    assert endpoint["relabelings"][0]["targetLabel"] == "llmdeployment"
    assert endpoint["relabelings"][0]["sourceLabels"] == [
        "__meta_kubernetes_pod_label_kvright_dev_llmdeployment"
    ]


def test_only_the_pod_monitor_carries_the_pod_monitor_labels() -> None:
    """kube-prometheus-stack's Prometheus selects PodMonitors by its release label: the operator's
    KVRIGHT_PODMONITOR_LABELS go on the PodMonitor and nowhere else (a pod label change would restart vLLM),
    and cannot displace kvright's own labels."""
    extra = {"release": "kube-prometheus-stack", "team": "ml"}
    w = workload(pod_monitor_labels={**extra, "app.kubernetes.io/name": "other"})
    by_kind = {c["kind"]: c for c in render_all(w, pod_monitor=True, inference_pool=True)}
    assert by_kind["PodMonitor"]["metadata"]["labels"] == {**labels("chat"), **extra}
    for kind in ("Deployment", "Service", "InferencePool"):
        assert by_kind[kind]["metadata"]["labels"] == labels("chat"), kind
    assert by_kind["Deployment"]["spec"]["template"]["metadata"]["labels"] == labels("chat")
    lws = render_leader_worker_set(multi_node(pod_monitor_labels=extra))
    assert lws["metadata"]["labels"] == labels("chat")
    leader, worker = _templates(lws)
    assert leader["metadata"]["labels"] == worker["metadata"]["labels"] == labels("chat")
    assert render_pod_monitor(workload())["metadata"]["labels"] == labels("chat")


def test_the_settings_reserve_exactly_the_labels_kvright_sets() -> None:
    assert set(labels("chat")) == KVRIGHT_LABEL_KEYS


@pytest.mark.parametrize(
    ("budget", "given", "seconds"),
    [
        pytest.param(startup_budget_seconds, 0, 600, id="startup-no-weights-floor"),
        pytest.param(startup_budget_seconds, 16_000_000_000, 600, id="startup-8b-floor"),
        pytest.param(startup_budget_seconds, 141_000_000_000, 1710, id="startup-70b-scales"),
        pytest.param(startup_budget_seconds, 1_400_000_000_000, 3600, id="startup-huge-capped"),
        pytest.param(termination_grace_seconds, 0.0, 75, id="grace-floor"),
        pytest.param(termination_grace_seconds, 60.0, 75, id="grace-minute"),
        pytest.param(termination_grace_seconds, 100.5, 116, id="grace-rounds-up"),
        pytest.param(termination_grace_seconds, 5000.0, 900, id="grace-capped"),
    ],
)
def test_pod_time_budgets(budget: Callable[[float], int], given: float, seconds: int) -> None:
    """The startup probe's budget from the weights' bytes, and the termination grace from the longest
    request's seconds: each a floor, a part that grows, and a cap."""
    assert budget(given) == seconds


def test_render_is_pure() -> None:
    assert render_all(workload(), pod_monitor=True) == render_all(workload(), pod_monitor=True)


# --- a replica across nodes: a LeaderWorkerSet ---------------------------------------------------------


def _two_node_plan() -> capacity.Plan:
    """Llama-3.1-405B on two 8 x H100 nodes (TP 8 x PP 2), as the planner lays it out."""
    result = capacity.plan(
        capacity.catalog_architecture("llama-3.1-405b"),
        capacity.gpu_spec("h100-sxm"),
        capacity.Workload(max_model_len=8192, prompt_tokens=2048, output_tokens=256, concurrency=16),
        capacity.SLO(tpot_seconds=0.06),
        capacity.Limits(gpus_per_node=8, max_gpus=16),
    )
    assert result.plan is not None and result.plan.layout.spans_nodes, result.reason
    return result.plan


def multi_node(**overrides: Any) -> VLLMWorkload:
    plan = _two_node_plan()
    values: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-405B-Instruct",
        "layout": plan.layout,
        "replicas": 1,
        "vllm_args": tuple(plan.vllm_args()),
        "vllm_args_by_role": {role: tuple(a) for role, a in plan.vllm_args_by_role().items()},
        **overrides,
    }
    return workload(**values)


def _templates(lws: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    t = lws["spec"]["leaderWorkerTemplate"]
    return t["leaderTemplate"], t["workerTemplate"]


def test_a_replica_across_nodes_is_a_leader_worker_set_instead_of_a_deployment() -> None:
    w = multi_node()
    children = render_all(w, pod_monitor=True)
    kinds = [c["kind"] for c in children]
    assert kinds == ["LeaderWorkerSet", "Service", "PodDisruptionBudget", "PodMonitor"]
    lws = children[0]
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["metadata"] == render_deployment(w)["metadata"]  # name, labels, ownerReferences
    spec = lws["spec"]
    assert spec["replicas"] == 1
    assert spec["leaderWorkerTemplate"]["size"] == 2
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    # v0.8.0 rejects maxUnavailable 0 in its leader StatefulSet; no surge group strands GPUs
    assert spec["rolloutStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0},
    }
    # the per-group headless Services are named <name>-<group>, not <name> (kvright's Service)
    assert spec["networkConfig"] == {"subdomainPolicy": "UniquePerReplica"}
    assert "exclusive-topology" not in str(lws["metadata"])


def test_every_pod_of_a_group_takes_one_node_of_the_product_with_its_gpus() -> None:
    w = multi_node()
    assert w.gpus_per_pod == 8
    deployment_pod = render_deployment(w)["spec"]["template"]
    for template in _templates(render_leader_worker_set(w)):
        spec = template["spec"]
        assert template["metadata"] == deployment_pod["metadata"]
        (c,) = spec["containers"]
        assert c["resources"]["requests"]["nvidia.com/gpu"] == "8"
        assert c["resources"]["limits"] == {"nvidia.com/gpu": "8"}
        assert spec["affinity"]["nodeAffinity"] == deployment_pod["spec"]["affinity"]["nodeAffinity"]
        (apart,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert apart == {
            "labelSelector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "chat"}},
            "topologyKey": "kubernetes.io/hostname",
        }
        for key in ("tolerations", "securityContext", "volumes", "terminationGracePeriodSeconds"):
            assert spec[key] == deployment_pod["spec"][key], key
        assert c["securityContext"] == deployment_pod["spec"]["containers"][0]["securityContext"]
        assert c["volumeMounts"] == deployment_pod["spec"]["containers"][0]["volumeMounts"]


def test_the_leader_serves_and_the_workers_join_headless_with_their_worker_index() -> None:
    w = multi_node()
    roles = w.vllm_args_by_role
    leader_t, worker_t = _templates(render_leader_worker_set(w))
    (leader,) = leader_t["spec"]["containers"]
    (worker,) = worker_t["spec"]["containers"]
    assert leader["command"] == worker["command"] == ["vllm", "serve"]
    served = ["--served-model-name", "llama", "--port", "8000", "--shutdown-timeout", "60"]
    assert leader["args"] == [w.model, *roles["leader"], *served]
    assert leader["args"][leader["args"].index("--node-rank") + 1] == "0"
    assert leader["args"][leader["args"].index("--master-addr") + 1] == "$(LWS_LEADER_ADDRESS)"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert leader[probe]["httpGet"]["path"] == "/health"
        assert probe not in worker
    assert leader["ports"][0]["containerPort"] == 8000
    assert "ports" not in worker and "lifecycle" not in worker
    expected = list(roles["worker"])
    expected[expected.index("--node-rank") + 1] = "$(LWS_WORKER_INDEX)"
    assert worker["args"] == [w.model, *expected]
    assert worker["args"][-1] == "--headless"


def test_worker_args_replaces_only_the_node_rank_value() -> None:
    assert worker_args(["--nnodes", "4", "--node-rank", "1", "--headless"]) == [
        "--nnodes",
        "4",
        "--node-rank",
        "$(LWS_WORKER_INDEX)",
        "--headless",
    ]
    assert worker_args(["--max-num-seqs", "8"]) == ["--max-num-seqs", "8"]


def test_service_and_pod_monitor_select_only_the_leaders_of_a_multi_node_replica() -> None:
    leaders = {
        "app.kubernetes.io/name": "vllm",
        "kvright.dev/llmdeployment": "chat",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    w = multi_node()
    assert render_service(w)["spec"]["selector"] == leaders
    assert render_pod_monitor(w)["spec"]["selector"]["matchLabels"] == leaders
    single = workload()
    assert "leaderworkerset.sigs.k8s.io/worker-index" not in render_service(single)["spec"]["selector"]
    assert "leaderworkerset.sigs.k8s.io/worker-index" not in str(render_pod_monitor(single)["spec"])


def test_single_node_layouts_including_dp_with_ep_stay_a_deployment() -> None:
    dp_ep = capacity.Layout(data_parallel_size=8, expert_parallel=True, gpus_per_node=8)
    for layout in (capacity.Layout(tensor_parallel_size=4), dp_ep):
        w = workload(layout=layout, vllm_args_by_role={"server": ARGS})
        children = render_all(w, pod_monitor=False)
        assert [c["kind"] for c in children] == ["Deployment", "Service", "PodDisruptionBudget"]
        assert container(children[0])["resources"]["limits"] == {"nvidia.com/gpu": str(layout.gpus)}


# --- the InferencePool (Gateway API Inference Extension, inference.networking.k8s.io/v1) ------------------

PICKER = EndpointPickerSpec(name="chat-epp", port=9002, failure_mode="FailOpen")


@pytest.mark.parametrize("spans_nodes", [False, True], ids=["deployment", "leader-worker-set"])
def test_a_disruption_budget_lets_a_drain_take_one_vllm_pod_at_a_time(spans_nodes: bool) -> None:
    """Every vLLM pod of the LLMDeployment, workers included (evicting one restarts its whole group), and
    only those: the cache's download pod has other labels."""
    w = multi_node() if spans_nodes else workload()
    (pdb,) = [c for c in render_all(w, pod_monitor=False) if c["kind"] == "PodDisruptionBudget"]
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["metadata"] == render_service(w)["metadata"], "same name, labels and controller owner"
    assert pdb["spec"] == {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "vllm", "kvright.dev/llmdeployment": "chat"}},
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    pods = render_all(w, pod_monitor=False)[0]
    pod_templates = _templates(pods) if spans_nodes else (pods["spec"]["template"],)
    for template in pod_templates:
        assert pdb["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()


def test_the_inference_pool_is_rendered_only_when_its_api_is_served_and_last() -> None:
    w = workload(endpoint_picker=PICKER)
    kinds = [c["kind"] for c in render_all(w, pod_monitor=False)]
    assert kinds == ["Deployment", "Service", "PodDisruptionBudget"]
    assert [c["kind"] for c in render_all(w, pod_monitor=True, inference_pool=True)] == [
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "PodMonitor",
        "InferencePool",
    ]
    pool = render_all(w, pod_monitor=False, inference_pool=True)[-1]
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    assert pool["metadata"] == render_service(w)["metadata"], "same name, labels and controller owner"


@pytest.mark.parametrize(
    ("w", "selected"),
    [
        (workload(), {"app.kubernetes.io/name": "vllm", "kvright.dev/llmdeployment": "chat"}),
        (
            multi_node(),
            {
                "app.kubernetes.io/name": "vllm",
                "kvright.dev/llmdeployment": "chat",
                "leaderworkerset.sigs.k8s.io/worker-index": "0",
            },
        ),
    ],
    ids=["one-node-replica-every-vllm-pod", "multi-node-replica-only-the-leaders-that-serve"],
)
def test_the_pool_selects_the_pods_that_serve_on_the_vllm_port(
    w: VLLMWorkload, selected: dict[str, str]
) -> None:
    spec = render_inference_pool(w)["spec"]
    assert spec["selector"] == {"matchLabels": selected}
    assert spec["selector"]["matchLabels"] == render_service(w)["spec"]["selector"]
    assert spec["targetPorts"] == [{"number": 8000}]
    assert "appProtocol" not in spec, "left to the API's default, which pre-v1.5.0 CRDs do not have"


@pytest.mark.parametrize(
    ("picker", "ref"),
    [
        (
            PICKER,
            {"kind": "Service", "name": "chat-epp", "port": {"number": 9002}, "failureMode": "FailOpen"},
        ),
        (None, None),
    ],
    ids=["picker-as-a-service-with-port-and-failure-mode", "no-picker-no-reference"],
)
def test_the_endpoint_picker_reference(picker: EndpointPickerSpec | None, ref: dict[str, Any] | None) -> None:
    assert render_inference_pool(workload(endpoint_picker=picker))["spec"].get("endpointPickerRef") == ref
