"""Smoke test of the local control plane: each part is the real thing.

Real: kube-scheduler binding a GPU pod to a kwok GPU node by its nvidia.com/gpu capacity and taint, kwok
reporting the pod Ready, the controller-manager (Deployment -> ReplicaSet -> Pod, default
ServiceAccounts), kube-apiserver's CEL validation, RBAC and service-account tokens, the pinned helm
installing and uninstalling a chart, Debian's Prometheus scraping a loopback target. Also the script's
own fault handling: a port in use, a bad node row, a stale pid file, an idempotent down, a killed etcd, a
half-built tools cache, and a private cluster whose test session died.

Faked (by design): the GPU nodes (kwok), and the scrape target (a tiny HTTP server in this process).
"""

from __future__ import annotations

import http.server
import os
import re
import secrets
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvright_dev.cluster import ports as cluster_ports
from kvright_dev.procs import wait_until
from kvright_dev.prometheus import Prometheus
from tests.fixtures.cluster import (
    OWNER_FILE,
    SCRIPT,
    Cluster,
    reap_orphaned_clusters,
    tool,
    tools_dir,
)

GPU_PRODUCTS = {"NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
WAIT = 90.0


def gpu_deployment(name: str, gpus: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "tolerations": [GPU_TOLERATION],
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.32.0",
                            "resources": {
                                "requests": {"nvidia.com/gpu": str(gpus)},
                                "limits": {"nvidia.com/gpu": str(gpus)},
                            },
                        }
                    ],
                },
            },
        },
    }


def pods_of(kube: Any, ns: str, app: str) -> list[Any]:
    from kubernetes import client

    core: Any = client.CoreV1Api(kube)
    return list(core.list_namespaced_pod(ns, label_selector=f"app={app}").items)


def condition(pod: Any, kind: str) -> Any:
    return next((c for c in pod.status.conditions or [] if c.type == kind), None)


@pytest.mark.cluster
def test_gpu_pod_is_bound_by_the_scheduler_to_a_gpu_node_and_kwok_makes_it_ready(
    kube: Any, namespace: str
) -> None:
    from kubernetes import client

    apps: Any = client.AppsV1Api(kube)
    apps.create_namespaced_deployment(namespace, gpu_deployment("gpu4", 4))

    def ready_pod() -> Any:
        pods = pods_of(kube, namespace, "gpu4")
        ready = condition(pods[0], "Ready") if pods else None
        return pods[0] if ready is not None and ready.status == "True" else None

    pod = wait_until(ready_pod, WAIT, what="the 4-GPU pod to be Ready")
    assert pod.status.phase == "Running"
    assert condition(pod, "PodScheduled").status == "True"
    core: Any = client.CoreV1Api(kube)
    node = core.read_node(pod.spec.node_name)
    labels = node.metadata.labels
    assert labels["nvidia.com/gpu.product"] in GPU_PRODUCTS
    assert labels["nvidia.com/gpu.count"] == "8"
    assert int(labels["nvidia.com/gpu.memory"]) > 80_000
    assert node.status.allocatable["nvidia.com/gpu"] == "8"


@pytest.mark.cluster
def test_scheduler_refuses_more_gpus_than_a_node_has(kube: Any, namespace: str) -> None:
    from kubernetes import client

    apps: Any = client.AppsV1Api(kube)
    apps.create_namespaced_deployment(namespace, gpu_deployment("gpu9", 9))

    def unschedulable() -> str:
        pods = pods_of(kube, namespace, "gpu9")
        scheduled = condition(pods[0], "PodScheduled") if pods else None
        if scheduled is not None and scheduled.status == "False" and scheduled.reason == "Unschedulable":
            return str(scheduled.message)
        return ""

    message = wait_until(unschedulable, WAIT, what="the 9-GPU pod to be reported Unschedulable")
    assert "Insufficient nvidia.com/gpu" in message
    assert pods_of(kube, namespace, "gpu9")[0].spec.node_name is None


@pytest.fixture
def cel_crd(kube: Any) -> Iterator[tuple[str, str]]:
    """A throwaway CRD (unique group) whose CEL rule ties two fields; deleted afterwards."""
    from kubernetes import client

    group = f"smoke{secrets.token_hex(3)}.kvright.dev"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "minReplicas": {"type": "integer"},
                                        "maxReplicas": {"type": "integer"},
                                    },
                                    "x-kubernetes-validations": [
                                        {
                                            "rule": "self.minReplicas <= self.maxReplicas",
                                            "message": "minReplicas must not exceed maxReplicas",
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    ext: Any = client.ApiextensionsV1Api(kube)
    ext.create_custom_resource_definition(crd)
    try:

        def established() -> bool:
            got = ext.read_custom_resource_definition(f"widgets.{group}")
            return any(c.type == "Established" and c.status == "True" for c in got.status.conditions or [])

        wait_until(established, WAIT, what=f"CRD widgets.{group} to be Established")
        yield group, "widgets"
    finally:
        ext.delete_custom_resource_definition(f"widgets.{group}")


@pytest.mark.cluster
def test_crd_cel_rule_rejects_a_violating_object_with_its_message(
    kube: Any, namespace: str, cel_crd: tuple[str, str]
) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    group, plural = cel_crd
    api: Any = client.CustomObjectsApi(kube)

    def widget(name: str, lo: int, hi: int) -> dict[str, Any]:
        return {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": name},
            "spec": {"minReplicas": lo, "maxReplicas": hi},
        }

    # The first create may race the CRD's discovery; poll until the valid object is accepted.
    wait_until(
        lambda: api.create_namespaced_custom_object(group, "v1", namespace, plural, widget("ok", 1, 3)),
        WAIT,
        what="a valid Widget to be accepted",
    )
    with pytest.raises(ApiException) as rejected:
        api.create_namespaced_custom_object(group, "v1", namespace, plural, widget("bad", 5, 2))
    assert rejected.value.status == 422
    assert "minReplicas must not exceed maxReplicas" in str(rejected.value.body)


@pytest.mark.cluster
def test_rbac_is_on_and_service_account_tokens_authenticate(
    kube: Any, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core: Any = client.CoreV1Api(kube)
    token = core.create_namespaced_service_account_token(
        "default", namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token
    config = client.Configuration()
    config.host = cluster.server
    config.ssl_ca_cert = _ca_file(cluster, tmp_path)
    config.api_key = {"authorization": str(token)}
    config.api_key_prefix = {"authorization": "Bearer"}
    with client.ApiClient(config) as sa_client:
        authn: Any = client.AuthenticationV1Api(sa_client)
        review = authn.create_self_subject_review({})
        assert review.status.user_info.username == f"system:serviceaccount:{namespace}:default"
        with pytest.raises(ApiException) as denied:
            client.CoreV1Api(sa_client).list_node()
        assert denied.value.status == 403


def _ca_file(cluster: Cluster, directory: Path) -> str:
    """The cluster CA from the kubeconfig, written to a file the client can read (in the test's own
    temporary directory, which pytest removes: not a file left in /tmp by every run)."""
    import base64

    config = yaml.safe_load(cluster.kubeconfig.read_text(encoding="utf-8"))
    path = directory / "ca.crt"
    path.write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
    return str(path)


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([tool("helm"), *args], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"helm {' '.join(args[:2])} failed: {done.stderr.strip()[-1500:]}"
    return done


@pytest.mark.cluster
@pytest.mark.helm
def test_helm_installs_and_uninstalls_a_chart(kube: Any, namespace: str, tmp_path: Path) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    chart = tmp_path / "smoke"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(
        "apiVersion: v2\nname: smoke\nversion: 0.1.0\nkubeVersion: '>=1.37.0-0'\n", encoding="utf-8"
    )
    (chart / "values.yaml").write_text("greeting: hello\n", encoding="utf-8")
    (chart / "templates" / "configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-greeting\n"
        "data:\n  greeting: {{ .Values.greeting | quote }}\n"
        "  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n",
        encoding="utf-8",
    )
    kubeconfig = os.environ["KUBECONFIG"]
    helm(
        "install",
        "smoke",
        str(chart),
        "--namespace",
        namespace,
        "--kubeconfig",
        kubeconfig,
        "--set",
        "greeting=bonjour",
        "--wait",
        "--timeout",
        "2m",
    )
    core: Any = client.CoreV1Api(kube)
    cm = core.read_namespaced_config_map("smoke-greeting", namespace)
    assert cm.data == {"greeting": "bonjour", "kube": "v1.37.2"}
    listed = helm("list", "--namespace", namespace, "--kubeconfig", kubeconfig, "-o", "json").stdout
    assert [(r["name"], r["status"]) for r in yaml.safe_load(listed)] == [("smoke", "deployed")]
    helm("uninstall", "smoke", "--namespace", namespace, "--kubeconfig", kubeconfig, "--wait")
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("smoke-greeting", namespace)
    assert gone.value.status == 404


class _Metrics(http.server.BaseHTTPRequestHandler):
    body = b'# TYPE kvright_smoke_value gauge\nkvright_smoke_value{side="left"} 42\n'

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        if self.path == "/metrics":
            self.wfile.write(self.body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def metrics_target() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.prometheus
def test_prometheus_scrapes_a_local_target_and_answers_a_query(
    prometheus: Prometheus, metrics_target: str
) -> None:
    prometheus.add_targets("smoke", [metrics_target], {"namespace": "ns1", "llmdeployment": "demo"})
    prometheus.wait_for_target_up("smoke")

    def scraped() -> list[dict[str, Any]]:
        return prometheus.query('kvright_smoke_value{job="smoke"}')

    [series] = wait_until(scraped, 60, what="kvright_smoke_value in Prometheus")
    assert series["value"][1] == "42"
    assert series["metric"]["namespace"] == "ns1"
    assert series["metric"]["llmdeployment"] == "demo"
    assert series["metric"]["instance"] == metrics_target
    prometheus.remove_targets("smoke")
    wait_until(
        lambda: not [t for t in prometheus.targets() if t["labels"].get("job") == "smoke"],
        30,
        what="the removed target to disappear",
    )


# -- the script's fault handling, each in its own cluster directory (nothing shared with the session) --


def script(cluster_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "KVRIGHT_CLUSTER_DIR": str(cluster_dir),
        "KVRIGHT_TOOLS_DIR": str(tools_dir()),
        **env,
    }
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env=full, capture_output=True, text=True, timeout=300, check=False
    )


def our_processes(cluster_dir: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(cluster_dir) in cmdline and str(tools_dir()) in cmdline:
                found.append(int(entry.name))
    return found


@pytest.fixture
def held_port() -> Iterator[int]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"KVRIGHT_APISERVER_PORT": "HELD"}, "is already in use on 127.0.0.1"),
        ({"KVRIGHT_APISERVER_PORT": "99999"}, "is not a port; want 1-65535"),
        ({"KVRIGHT_GPU_NODES": "h100 two NVIDIA-H100-80GB-HBM3 8 81559"}, "bad GPU node row"),
    ],
    ids=["apiserver-port-in-use", "apiserver-port-out-of-range", "node-row-count-not-a-number"],
)
def test_up_refuses_bad_input_with_one_line_and_leaves_nothing_running(
    tmp_path: Path, held_port: int, env: dict[str, str], expected: str
) -> None:
    env = {k: v.replace("HELD", str(held_port)) for k, v in env.items()}
    done = script(tmp_path, "up", **env)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("cluster: error:")]
    assert len(errors) == 1 and expected in errors[0], done.stderr[-2000:]
    assert our_processes(tmp_path) == []


def test_down_is_idempotent_and_never_signals_a_process_it_did_not_start(tmp_path: Path) -> None:
    assert script(tmp_path, "down").returncode == 0  # nothing was ever started
    run = tmp_path / "run"
    run.mkdir(parents=True)
    (run / "etcd.pid").write_text(str(os.getpid()))  # a recycled pid: this very test process
    (run / "kwok.pid").write_text("2147483646")  # a pid that is not running
    done = script(tmp_path, "down")
    assert done.returncode == 0, done.stderr
    assert "etcd: stale pid file" in done.stderr and "is now another process" in done.stderr
    assert "kwok: stale pid file (pid 2147483646 is not running" in done.stderr
    assert not (run / "etcd.pid").exists()
    assert script(tmp_path, "down").returncode == 0


@pytest.mark.cluster
def test_a_killed_etcd_is_reported_up_recovers_a_dead_sessions_cluster_is_reaped_then_down_leaves_nothing(
    tmp_path: Path,
) -> None:
    """Also the reaper of a private cluster whose test session died: the recovered cluster here serves as
    the one whose session is still alive (one start fewer than a cluster of its own)."""
    alive = tmp_path / "pytest-8" / "cluster0"
    alive.mkdir(parents=True)
    try:
        first = script(alive, "up")
        assert first.returncode == 0, first.stderr[-2000:]
        # Every server port comes from below the ephemeral range, where no outgoing connection can take it
        # between `up` choosing it and the server binding it.
        ports = cluster_ports(alive)
        servers = [int(v) for k, v in ports.items() if k.endswith("_PORT")]
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
        assert len(servers) == len(set(servers)) == 6 and all(16384 <= p < low for p in servers), ports
        etcd_pid = int((alive / "run" / "etcd.pid").read_text())
        os.kill(etcd_pid, 9)
        wait_until(lambda: etcd_pid not in our_processes(alive), 30, what="etcd to die")

        status = script(alive, "status")
        assert status.returncode == 1
        assert f"DEAD (pid {etcd_pid} is gone" in status.stdout

        again = script(alive, "up")
        assert again.returncode == 0, again.stderr[-2000:]
        assert f"etcd (pid {etcd_pid}) is not running: it died or was killed" in again.stderr
        assert "stopping what is left and starting fresh" in again.stderr
        assert script(alive, "status").returncode == 0

        a_private_cluster_whose_test_session_died_is_stopped_by_the_next_session(tmp_path, alive)

        assert script(alive, "down").returncode == 0
        assert our_processes(alive) == []
        assert not (alive / "etcd-data").exists()
    finally:
        script(alive, "down")


def a_private_cluster_whose_test_session_died_is_stopped_by_the_next_session(
    tmp_path: Path, alive: Path
) -> None:
    """``alive`` is a running cluster below ``tmp_path`` (pytest-N/clusterM) of a session still running."""
    private = tmp_path / "pytest-7" / "cluster0"
    private.mkdir(parents=True)
    try:
        started = script(private, "up")
        assert started.returncode == 0, started.stderr[-3000:]
        gone = subprocess.Popen(["true"])
        gone.wait()
        (private / OWNER_FILE).write_text(str(gone.pid))  # a session that was killed before its teardown
        (alive / OWNER_FILE).write_text(str(os.getppid()))  # a session still running
        assert reap_orphaned_clusters(tmp_path) == [private]
        assert our_processes(private) == []
        assert len(our_processes(alive)) == 6  # etcd, apiserver, KCM, scheduler, kwok, LWS
    finally:
        script(private, "down")


@pytest.mark.cluster
def test_build_skips_a_stamped_binary_and_rebuilds_one_without_its_stamp(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "etcd").write_bytes(b"#!/bin/sh\nexit 1\n")  # what an interrupted build leaves: no stamp
    (tools / "etcd").chmod(0o755)
    env = {"KVRIGHT_TOOLS_DIR": str(tools)}

    def build_etcd(timeout: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT), "build", "etcd"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    first = build_etcd(1800)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "etcd: binary without stamp (interrupted build?), rebuilding" in first.stderr
    version = subprocess.run([str(tools / "etcd"), "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("etcd Version: 3.")
    again = build_etcd(300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert re.search(r"etcd v3\.[0-9.]+: cached in ", again.stderr), again.stderr[-2000:]
