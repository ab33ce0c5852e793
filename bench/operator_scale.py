"""Operator scale benchmark: 500 LLMDeployments against the local control plane.

Two runs against the same real kube-apiserver, side by side:

* floor: with no operator running, the bench creates with the Kubernetes client what the kvright run
  ends with: each LLMDeployment, then its Deployment and Service (the bodies kvright renders, owned by
  the LLMDeployment), one request each, so this is the least any operator could take;
* kvright: the bench creates 500 LLMDeployments while ``python -m kvright.operator`` runs as a
  subprocess; a watch on Deployments records when each one appears.

Reported: create -> Deployment latency p50/p99 for both, total time to all Deployments (and to every
LLMDeployment's status being written), the operator's CPU seconds and peak RSS, and the ratio of the two
totals. Targets (issue 4): ratio <= 2, p99 <= 2 s. Every object pins ``replicas.count: 0`` so no pods
are created: the scheduler's work is not what is measured. Loops are bounded in count and in time.

    python -m bench.operator_scale [--count 500] [--timeout 600]

It uses ``$KUBECONFIG`` when set, else starts the local control plane in a temporary directory with
``deploy/cluster.sh`` and stops it afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kvright import api
from kvright.operator import Kube, KubeError, api_client
from kvright.render import Owner, VLLMWorkload, render_deployment, render_service
from kvright_dev.cluster import install_crd
from kvright_dev.procs import WaitFailed, stop_processes, wait_until

REPO = Path(__file__).resolve().parent.parent
MODEL_SPEC: dict[str, Any] = {
    "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama-3.1-8b"},
    "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
    "slo": {"tpotMilliseconds": 50},
    "replicas": {"min": 0, "max": 1, "count": 0},
    "feedback": {"mode": "Off"},
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


class Watcher:
    """Records the first time each Deployment name is seen, from a watch stream in a thread."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="deployment-watch")

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()

    def _lines(self, resource_version: str) -> Iterator[bytes]:
        path = f"/apis/apps/v1/namespaces/{self.namespace}/deployments"
        query = [("watch", "1"), ("resourceVersion", resource_version), ("timeoutSeconds", "600")]
        request = self.kube.api.param_serialize(
            "GET", path, query_params=query, auth_settings=["BearerToken"]
        )
        response = self.kube.api.call_api(*request, _request_timeout=(5, 700))
        buffer = b""
        for chunk in response.response.stream(4096):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield line

    def _run(self) -> None:
        listing = self.kube.request("GET", f"/apis/apps/v1/namespaces/{self.namespace}/deployments")
        for item in listing.get("items") or []:
            self.seen.setdefault(item["metadata"]["name"], time.monotonic())
        for line in self._lines(listing["metadata"]["resourceVersion"]):
            if self._stop.is_set():
                return
            event = json.loads(line)
            if event.get("type") == "ADDED":
                self.seen.setdefault(event["object"]["metadata"]["name"], time.monotonic())

    def wait_for(self, names: list[str], deadline: float) -> bool:
        return before(deadline, lambda: all(n in self.seen for n in names), what="every Deployment to appear")


def before(deadline: float, predicate: Callable[[], bool], *, what: str, interval: float = 0.05) -> bool:
    """Whether ``predicate`` came true before the monotonic ``deadline`` (polling every ``interval``)."""
    try:
        return bool(wait_until(predicate, max(0.05, deadline - time.monotonic()), what=what,
                               interval=interval, transient=()))
    except WaitFailed:
        return False


def pace(start: float, i: int, rate: float) -> None:
    """Open-loop pacing: the i-th create is due at start + i / rate (rate 0: as fast as possible)."""
    if rate > 0:
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def proc_peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def ensure_crd(kube: Kube) -> None:
    install_crd(kube, field_manager="kvright-bench")


def make_namespace(kube: Kube, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.request(
        "POST",
        "/api/v1/namespaces",
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    return name


def create_paced(
    kube: Kube,
    base: str,
    *,
    count: int,
    rate: float,
    timeout: float,
    label: str,
    then: Callable[[str, str], None] | None = None,
) -> tuple[float, dict[str, float]]:
    """POST ``count`` LLMDeployments m0000.. at ``rate`` per second (0: as fast as possible); ``then(name,
    uid)`` runs after each. Returns the start time and each object's create time (monotonic)."""
    start = time.monotonic()
    created: dict[str, float] = {}
    for i in range(count):
        pace(start, i, rate)
        name = f"m{i:04d}"
        created[name] = time.monotonic()
        obj = {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": name},
               "spec": MODEL_SPEC}
        uid = kube.request("POST", base, body=obj)["metadata"]["uid"]
        if then is not None:
            then(name, uid)
        if time.monotonic() - start > timeout:
            raise RuntimeError(f"{label}: {i} creates took over {timeout:.0f} s")
    return start, created


def floor_run(kube: Kube, count: int, timeout: float, rate: float) -> dict[str, Any]:
    """Without the operator, the client creates what the operator run ends with: per object the
    LLMDeployment, then its Deployment and Service (the bodies kvright renders, owned by it)."""
    ns = make_namespace(kube, "bench-floor")
    base = f"/apis/{api.GROUP}/{api.VERSION}/namespaces/{ns}/{api.PLURAL}"

    def children(name: str, uid: str) -> None:
        w = VLLMWorkload(
            owner=Owner(name=name, namespace=ns, uid=uid),
            model="meta-llama/Llama-3.1-8B-Instruct",
            served_model_name=name,
            image="vllm/vllm-openai:v0.32.0",
            gpu_product="NVIDIA-H100-80GB-HBM3",
            tensor_parallel_size=1,
            replicas=0,
            vllm_args=("--tensor-parallel-size", "1"),
        )
        kube.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=render_deployment(w))
        kube.request("POST", f"/api/v1/namespaces/{ns}/services", body=render_service(w))

    with Watcher(kube, ns) as watcher:
        time.sleep(0.5)
        start, created = create_paced(
            kube, base, count=count, rate=rate, timeout=timeout, label="floor", then=children
        )
        watcher.wait_for(list(created), start + timeout)
        end = max(watcher.seen.get(n, time.monotonic()) for n in created)
        latencies = [watcher.seen[n] - created[n] for n in created if n in watcher.seen]
    kube.request("DELETE", f"/api/v1/namespaces/{ns}")
    return {
        "total_seconds": end - start,
        "create_to_deployment_p50_seconds": percentile(latencies, 50),
        "create_to_deployment_p99_seconds": percentile(latencies, 99),
        "deployments": len(latencies),
    }


def operator_run(kube: Kube, count: int, timeout: float, kubeconfig: str, rate: float) -> dict[str, Any]:
    ns = make_namespace(kube, "bench-kvright")
    env = {
        **os.environ,
        "KUBECONFIG": kubeconfig,
        "KVRIGHT_NAMESPACES": ns,
        "KVRIGHT_RECONCILE_SECONDS": "3600",  # level loop idle: only the create path is measured
        "KVRIGHT_METRICS_PORT": "0",
    }
    log_fd, log_name = tempfile.mkstemp(prefix="kvright-bench-operator-", suffix=".log")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvright.operator"], env=env, stdout=log_fd, stderr=subprocess.STDOUT, cwd=REPO
    )
    os.close(log_fd)
    try:
        # Ready when it reconciles a probe object (an empty-namespace operator has nothing else to show).
        base = f"/apis/{api.GROUP}/{api.VERSION}/namespaces/{ns}/{api.PLURAL}"
        probe = {
            "apiVersion": api.API_VERSION,
            "kind": api.KIND,
            "metadata": {"name": "probe"},
            "spec": MODEL_SPEC,
        }
        kube.request("POST", base, body=probe)

        def exited() -> str | None:
            code = proc.poll()
            return None if code is None else f"the operator exited with {code}; log: {log_name}"

        wait_until(lambda: kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/probe") is not None, 120,
                   what="the operator to deploy the probe", interval=0.2, transient=(), give_up=exited)
        cpu_before = proc_cpu_seconds(proc.pid)
        with Watcher(kube, ns) as watcher:
            time.sleep(0.5)
            start, created = create_paced(
                kube, base, count=count, rate=rate, timeout=timeout, label="kvright"
            )
            creates_done = time.monotonic()
            complete = watcher.wait_for(list(created), start + timeout)
            end = max(watcher.seen.get(n, time.monotonic()) for n in created)
            latencies = [watcher.seen[n] - created[n] for n in created if n in watcher.seen]
        # Status written for all (observedGeneration set and the PlanFeasible condition present).
        def all_have_status() -> bool:
            items = kube.request("GET", base).get("items") or []
            return sum(1 for o in items if (o.get("status") or {}).get("observedGeneration")) >= count + 1

        status_done = (
            time.monotonic()
            if before(start + timeout, all_have_status, what="every status written", interval=0.25)
            else None
        )
        cpu = proc_cpu_seconds(proc.pid) - cpu_before
        rss = proc_peak_rss_bytes(proc.pid)
    finally:
        stop_processes([proc], timeout=20)
    with contextlib.suppress(KubeError):  # children go with their owners
        kube.request("DELETE", f"/api/v1/namespaces/{ns}")
    return {
        "total_seconds": end - start,
        "creates_seconds": creates_done - start,
        "status_all_seconds": None if status_done is None else status_done - start,
        "create_to_deployment_p50_seconds": percentile(latencies, 50),
        "create_to_deployment_p99_seconds": percentile(latencies, 99),
        "deployments": len(latencies),
        "complete": complete,
        "operator_cpu_seconds": cpu,
        "operator_peak_rss_bytes": rss,
        "operator_log": log_name,
    }


def start_cluster() -> tuple[str, dict[str, str]]:
    cluster_dir = tempfile.mkdtemp(prefix="kvright-bench-cluster-")
    env = {**os.environ, "KVRIGHT_CLUSTER_DIR": cluster_dir}
    subprocess.run(
        ["bash", str(REPO / "deploy" / "cluster.sh"), "up"], env=env, check=True, stdout=subprocess.DEVNULL
    )
    return os.path.join(cluster_dir, "kubeconfig"), env


def report(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.operator_scale", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--count", type=int, default=500, help="LLMDeployments to create (default 500)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per run (default 600)")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="creates per second (default 0: as fast as the client can)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if not 1 <= args.count <= 5000:
        parser.error(f"--count {args.count} is out of range; accepted: 1 to 5000")

    started_env: dict[str, str] | None = None
    kubeconfig = os.environ.get("KUBECONFIG", "")
    if not kubeconfig:
        kubeconfig, started_env = start_cluster()
        os.environ["KUBECONFIG"] = kubeconfig
    try:
        kube = Kube(api_client())
        ensure_crd(kube)
        floor = floor_run(kube, args.count, args.timeout, args.rate)
        kvright = operator_run(kube, args.count, args.timeout, kubeconfig, args.rate)
    finally:
        if started_env is not None:
            subprocess.run(
                ["bash", str(REPO / "deploy" / "cluster.sh"), "down"], env=started_env, check=False
            )
    ratio = kvright["total_seconds"] / floor["total_seconds"] if floor["total_seconds"] else float("nan")
    result = {
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "count": args.count,
        "rate_per_second": args.rate or "unpaced",
        "floor": floor,
        "kvright": kvright,
        "ratio_total": ratio,
        "targets": {"ratio_total_max": 2.0, "p99_seconds_max": 2.0},
        "targets_met": ratio <= 2.0 and kvright["create_to_deployment_p99_seconds"] <= 2.0,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


def _fmt(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.3f} s"


def print_table(r: Mapping[str, Any]) -> None:
    f, k = r["floor"], r["kvright"]
    print(f"operator scale: {r['count']} LLMDeployments ({r['rate_per_second']} creates/s) on {r['machine']}")
    print(f"{'':34}{'client floor':>16}{'kvright':>16}")
    print(
        f"{'create -> Deployment p50':34}{_fmt(f['create_to_deployment_p50_seconds']):>16}"
        f"{_fmt(k['create_to_deployment_p50_seconds']):>16}"
    )
    print(
        f"{'create -> Deployment p99':34}{_fmt(f['create_to_deployment_p99_seconds']):>16}"
        f"{_fmt(k['create_to_deployment_p99_seconds']):>16}"
    )
    print(f"{'all Deployments exist':34}{_fmt(f['total_seconds']):>16}{_fmt(k['total_seconds']):>16}")
    print(f"{'all statuses written':34}{'':>16}{_fmt(k['status_all_seconds']):>16}")
    print(f"{'operator CPU':34}{'':>16}{k['operator_cpu_seconds']:>14.2f} s")
    print(f"{'operator peak RSS':34}{'':>16}{k['operator_peak_rss_bytes'] / 2**20:>13.0f} MiB")
    print(
        f"ratio kvright / floor (all Deployments): {r['ratio_total']:.2f} (target <= 2); "
        f"p99 target <= 2 s; {'met' if r['targets_met'] else 'NOT met'}"
    )


if __name__ == "__main__":
    raise SystemExit(report())
