"""Operator scale benchmark: 1,000 LLMDeployments, in a burst and paced, then a soak, against the local
control plane.

Each of the two create runs (burst: as fast as the client can; paced: ``--rate`` per second) is measured
twice against the same real kube-apiserver, side by side:

* floor: with no operator running, the bench creates with the Kubernetes client what the kvright run
  ends with: each LLMDeployment, then its Deployment, Service and the optional children kvright renders
  on that cluster (an InferencePool where its API is served, a PodMonitor where its CRD exists), the
  bodies kvright renders, owned by the LLMDeployment, one POST each: the least any operator could take;
* kvright: the bench creates the LLMDeployments while ``python -m kvright.operator`` runs as a
  subprocess; a watch on Deployments records when each one appears, a watch on LLMDeployments when
  each status is written.

Reported per run: create -> Deployment latency p50/p99, total time to all Deployments (and to every
status), the operator's CPU seconds and peak RSS, the ratio of the two totals, and what the machine did
meanwhile (the evidence for what bounds a missed target): the API server's and etcd's CPU seconds, how
busy all the machine's cores were, and the writes the API server served (its own
``apiserver_request_total``). Then the soak (bench/operator_soak.py). Targets (issue 16): burst ratio
<= 1.5, paced p99 <= 1 s, peak RSS <= 300 MiB at 1,000 objects; a missed target is printed with what
bounds it. Every object pins ``replicas.count: 0`` so no pods are created: the scheduler's work is not
what is measured. Loops are bounded in count and in time.

    python -m bench.operator_scale [--count 1000] [--rate 10] [--soak-seconds 1200] [--timeout 600]

It uses ``$KUBECONFIG`` when set, else starts the local control plane in a temporary directory with
``deploy/cluster.sh`` and stops it afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import capacity
from kvright import api
from kvright.operator import INFERENCE_POOL_API, POD_MONITOR_CRD, Kube, KubeError, api_client
from kvright.render import Owner, VLLMWorkload, render_all
from kvright_dev.cluster import install_crd
from kvright_dev.operator_process import OperatorProcess, temp_log
from kvright_dev.procs import WaitFailed, sigterm_interrupts, wait_until

REPO = Path(__file__).resolve().parent.parent
MODEL_SPEC: dict[str, Any] = {
    "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama-3.1-8b"},
    "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
    "slo": {"tpotMilliseconds": 50},
    "replicas": {"min": 0, "max": 1, "count": 0},
    "feedback": {"mode": "Off"},
}
TARGET_BURST_RATIO = 1.5
TARGET_PACED_P99_SECONDS = 1.0
TARGET_RSS_BYTES = 300 * 2**20
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})
NAMESPACE_GONE_SECONDS = 300.0
RECONCILE_HISTOGRAM = "kvright_reconcile_duration_seconds"
CHILD_PATHS = {
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "Service": "/api/v1/namespaces/{ns}/services",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "PodMonitor": "/apis/monitoring.coreos.com/v1/namespaces/{ns}/podmonitors",
    "InferencePool": INFERENCE_POOL_API + "/namespaces/{ns}/inferencepools",
}
"""Where the floor POSTs each child kvright renders."""
OPERATOR_ENV: dict[str, str] = {}
"""Extra environment of every operator the bench starts (``--operator-env``: experiments such as an
allocator setting), reported with the results."""


def log(message: str) -> None:
    """Progress on stderr (the figures go to stdout)."""
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


# --- pure helpers ----------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; NaN for none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


_REQUEST_LINE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)")
_VERB = re.compile(r'(?:^|,)verb="([^"]*)"')
_RESOURCE = re.compile(r'(?:^|,)resource="([^"]*)"')


def apiserver_requests(metrics_text: str) -> dict[tuple[str, str], float]:
    """Requests served so far by (verb, resource), from the API server's ``/metrics`` text
    (``apiserver_request_total`` summed over every other label)."""
    totals: dict[tuple[str, str], float] = {}
    for line in metrics_text.splitlines():
        m = _REQUEST_LINE.match(line)
        if m is None:
            continue
        verb, resource = _VERB.search(m["labels"]), _RESOURCE.search(m["labels"])
        key = (verb.group(1) if verb else "?", resource.group(1) if resource else "")
        totals[key] = totals.get(key, 0.0) + float(m["value"])
    return totals


def writes_by_resource(counts: Mapping[tuple[str, str], float]) -> dict[str, float]:
    """Write requests (POST, PUT, PATCH, APPLY, DELETE) per resource, leases left out: they are the
    control plane's own heartbeats, the same with or without the operator."""
    out: dict[str, float] = {}
    for (verb, resource), value in counts.items():
        if verb in WRITE_VERBS and resource != "leases":
            out[resource] = out.get(resource, 0.0) + value
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Usage:
    """What the machine did during one run: the evidence for what bounds it."""

    wall_seconds: float
    """How long the run took (first create to the last Deployment)."""
    metered_seconds: float
    """Time between the two readings of the counters (the run and the wait after its last Deployment)."""
    cores: int
    """CPUs of the machine (shared with whatever else runs on it)."""
    machine_busy_cpu_seconds: float
    """CPU seconds all processes on the machine used (/proc/stat: all but idle and iowait)."""
    apiserver_cpu_seconds: float | None = None
    """CPU seconds kube-apiserver used (None: its pid is unknown, a cluster the bench did not start)."""
    etcd_cpu_seconds: float | None = None
    """CPU seconds etcd used."""
    controller_manager_cpu_seconds: float | None = None
    """CPU seconds kube-controller-manager used (it makes a ReplicaSet for every Deployment)."""
    operator_cpu_seconds: float | None = None
    """CPU seconds the operator used (None for the floor)."""
    bench_cpu_seconds: float | None = None
    """CPU seconds the bench itself used (its creates and watches)."""
    writes: float | None = None
    """Write requests the API server served (POST, PUT, PATCH, APPLY, DELETE), every client included,
    leases left out."""
    writes_by_resource: dict[str, float] = dataclasses.field(default_factory=dict)
    """The same, per resource."""

    @property
    def busy_fraction(self) -> float:
        """Share of all the cores' time that was busy: 1.0 means the machine had nothing left."""
        if not self.metered_seconds:
            return 0.0
        return self.machine_busy_cpu_seconds / (self.metered_seconds * self.cores)

    @property
    def others_cpu_seconds(self) -> float:
        """Busy CPU seconds of every process the bench did not measure by name (other work on the machine,
        the scheduler, kwok)."""
        known = (
            self.apiserver_cpu_seconds,
            self.etcd_cpu_seconds,
            self.controller_manager_cpu_seconds,
            self.operator_cpu_seconds,
            self.bench_cpu_seconds,
        )
        return max(0.0, self.machine_busy_cpu_seconds - sum(v for v in known if v is not None))


def cpu_split(u: Usage) -> str:
    """Where a run's busy CPU seconds went, by process."""
    parts = [
        (name, value)
        for name, value in (
            ("kube-apiserver", u.apiserver_cpu_seconds),
            ("etcd", u.etcd_cpu_seconds),
            ("kube-controller-manager", u.controller_manager_cpu_seconds),
            ("operator", u.operator_cpu_seconds),
            ("bench client", u.bench_cpu_seconds),
            ("other processes", u.others_cpu_seconds),
        )
        if value is not None
    ]
    return f"{u.machine_busy_cpu_seconds:.1f} CPU-s: " + ", ".join(f"{n} {v:.1f}" for n, v in parts)


def cpu_work(u: Usage) -> float | None:
    """CPU seconds of the processes a run is made of (kube-apiserver, etcd, kube-controller-manager, the
    operator, the bench client); None without the control plane's pids."""
    if u.apiserver_cpu_seconds is None:
        return None
    parts = (
        u.apiserver_cpu_seconds,
        u.etcd_cpu_seconds,
        u.controller_manager_cpu_seconds,
        u.operator_cpu_seconds,
        u.bench_cpu_seconds,
    )
    return sum(v for v in parts if v is not None)


def burst_bounds(*, ratio: float, floor: Usage, kvright: Usage, count: int) -> list[str]:
    """Why the burst ratio is what it is, from the measured usage of both runs (the lines printed under a
    missed target). Each line is one measured bound."""
    lines: list[str] = []
    if floor.writes and kvright.writes:
        per_floor, per_kvright = floor.writes / count, kvright.writes / count
        floor_rate = floor.writes / floor.wall_seconds if floor.wall_seconds else 0.0
        lines.append(
            f"API server writes: {per_kvright:.1f} per object in the kvright run against {per_floor:.1f} "
            f"in the floor (every client counted); at the floor's own write rate ({floor_rate:.0f}/s) "
            f"those writes alone take {per_kvright / per_floor:.2f}x the floor's time"
        )
    work_floor, work_kvright = cpu_work(floor), cpu_work(kvright)
    if work_floor and work_kvright:
        lines.append(
            f"CPU work: the control plane, the operator and the bench client used {work_kvright:.1f} "
            f"CPU-s in the kvright run against {work_floor:.1f} in the floor "
            f"({work_kvright / work_floor:.2f}x); "
            f"on a machine whose cores are all busy the ratio cannot fall much below that"
        )
    if kvright.busy_fraction >= 0.85:
        lines.append(
            f"CPU: the machine's {kvright.cores} cores were {kvright.busy_fraction:.0%} busy during the "
            f"kvright burst ({cpu_split(kvright)}); "
            f"during the floor {floor.busy_fraction:.0%} ({cpu_split(floor)})"
        )
    if kvright.operator_cpu_seconds is not None and kvright.wall_seconds:
        share = kvright.operator_cpu_seconds / kvright.wall_seconds
        lines.append(
            f"the operator used {share:.2f} of one core on average "
            f"({kvright.operator_cpu_seconds:.1f} CPU-s): "
            + (
                "it is not the bottleneck"
                if share < 0.6
                else "it is near one core (Python's GIL): it bounds the run"
            )
        )
    if not lines:
        lines.append(
            f"no bound measured (ratio {ratio:.2f}); the API server's pid or metrics were not available"
        )
    return lines


def paced_bounds(
    *, p99: float, floor_p99: float, kvright: Usage, rate: float, reconcile_p99: float | None
) -> list[str]:
    """Why the paced p99 is what it is (the lines printed under a missed target)."""
    lines = [f"the floor's own p99 at {rate:g}/s is {floor_p99:.2f} s (the API server alone, no operator)"]
    if reconcile_p99 is not None:
        lines.append(
            f"the operator's own reconcile takes p99 <= {reconcile_p99:.2f} s "
            "(kvright_reconcile_duration_seconds: gather, plan, two applies, the status); "
            f"the rest of the {p99:.2f} s is waiting: kopf's watch and "
            f"queue, the API server's answers"
        )
    lines.append(
        f"the machine's {kvright.cores} cores were {kvright.busy_fraction:.0%} busy during the paced "
        "kvright run "
        f"({cpu_split(kvright)})"
    )
    if kvright.operator_cpu_seconds is not None and kvright.wall_seconds:
        lines.append(
            f"the operator used {kvright.operator_cpu_seconds / kvright.wall_seconds:.2f} of one core "
            f"({kvright.operator_cpu_seconds:.1f} CPU-s)"
        )
    return lines


_BUCKET_LINE = re.compile(r'^(?P<name>[a-z_]+)_bucket\{(?:[^}]*,)?le="(?P<le>[^"]+)"[^}]*\} (?P<value>\S+)')


def histogram_quantile(metrics_text: str, name: str, q: float) -> float | None:
    """The upper bound of the first bucket of histogram ``name`` that holds the ``q`` (0..1) quantile of its
    observations (an upper bound, as Prometheus' bucket edges allow; +Inf when only the last one does);
    None when the histogram is absent or empty."""
    buckets: list[tuple[float, float]] = []
    for line in metrics_text.splitlines():
        m = _BUCKET_LINE.match(line)
        if m is not None and m["name"] == name:
            buckets.append((float(m["le"]), float(m["value"])))
    if not buckets or buckets[-1][1] <= 0:
        return None
    buckets.sort()
    total = buckets[-1][1]
    return next(le for le, cumulative in buckets if cumulative >= q * total)


# --- /proc --------------------------------------------------------------------------------------------


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def proc_status_bytes(pid: int, key: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM) in bytes; 0 when absent."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    return 0


def proc_peak_rss_bytes(pid: int) -> int:
    return proc_status_bytes(pid, "VmHWM")


def machine_busy_cpu_seconds() -> float:
    """CPU seconds all cores have been busy since boot (/proc/stat: user..steal, idle and iowait left out)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    busy = sum(fields[:8]) - idle
    return busy / os.sysconf("SC_CLK_TCK")


def cluster_pid(kubeconfig: str, component: str) -> int | None:
    """The pid of a component of the local control plane deploy/cluster.sh started next to ``kubeconfig``
    (its run/<component>.pid), or None."""
    path = Path(kubeconfig).parent / "run" / f"{component}.pid"
    try:
        pid = int(path.read_text().strip())
        Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    return pid


class Meter:
    """Before/after counters of one run: the machine's busy CPU, the CPU of the control plane's processes,
    the operator's and the bench's own, and the API server's writes by resource."""

    def __init__(self, kube: Kube, kubeconfig: str, operator_pid: int | None = None) -> None:
        self.kube = kube
        self.pids: dict[str, int | None] = {
            c: cluster_pid(kubeconfig, c) for c in ("kube-apiserver", "etcd", "kube-controller-manager")
        }
        self.pids["operator"] = operator_pid
        self.pids["bench"] = os.getpid()
        self._start: dict[str, float | None] = {}
        self._writes: dict[str, float] | None = None

    def _read(self) -> tuple[dict[str, float | None], dict[str, float] | None]:
        values: dict[str, float | None] = {"machine": machine_busy_cpu_seconds(), "t": time.monotonic()}
        for component, pid in self.pids.items():
            values[component] = _cpu_or_none(pid)
        try:
            text = self.kube.request("GET", "/metrics", accept="text/plain")
            writes = writes_by_resource(apiserver_requests(text if isinstance(text, str) else ""))
        except KubeError:
            writes = None
        return values, writes or None

    def start(self) -> None:
        self._start, self._writes = self._read()

    def stop(self, wall_seconds: float) -> Usage:
        end, writes = self._read()

        def delta(key: str) -> float | None:
            a, b = self._start.get(key), end.get(key)
            return None if a is None or b is None else b - a

        by_resource = (
            {r: v - self._writes.get(r, 0.0) for r, v in writes.items() if v - self._writes.get(r, 0.0) > 0}
            if writes is not None and self._writes is not None
            else None
        )
        return Usage(
            wall_seconds=wall_seconds,
            metered_seconds=delta("t") or wall_seconds,
            cores=os.cpu_count() or 1,
            machine_busy_cpu_seconds=delta("machine") or 0.0,
            apiserver_cpu_seconds=delta("kube-apiserver"),
            etcd_cpu_seconds=delta("etcd"),
            controller_manager_cpu_seconds=delta("kube-controller-manager"),
            operator_cpu_seconds=delta("operator"),
            bench_cpu_seconds=delta("bench"),
            writes=None if by_resource is None else sum(by_resource.values()),
            writes_by_resource=by_resource or {},
        )


def _cpu_or_none(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        return proc_cpu_seconds(pid)
    except OSError:
        return None


# --- watches ----------------------------------------------------------------------------------------


class Watch:
    """Calls ``on_object(obj, monotonic_time)`` for every object of a list, then every object a watch of
    ``path`` reports, from a thread; reconnects where the stream ended, and lists again after a 410 Gone.
    Bounded: at most ``max_reconnects`` streams (each ends after 300 s at most)."""

    def __init__(
        self,
        kube: Kube,
        path: str,
        on_object: Callable[[dict[str, Any], float], None],
        *,
        max_reconnects: int = 200,
    ) -> None:
        self.kube = kube
        self.path = path
        self.on_object = on_object
        self.max_reconnects = max_reconnects
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"watch {path}")

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()

    def _lines(self, resource_version: str) -> Iterator[bytes]:
        query = [
            ("watch", "1"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", "300"),
            ("allowWatchBookmarks", "true"),
        ]
        request = self.kube.api.param_serialize(
            "GET", self.path, query_params=query, auth_settings=["BearerToken"]
        )
        response = self.kube.api.call_api(*request, _request_timeout=(5, 330))
        buffer = b""
        for chunk in response.response.stream(65536):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield line

    def _list(self) -> str:
        listing = self.kube.request("GET", self.path)
        now = time.monotonic()
        for item in listing.get("items") or []:
            self.on_object(item, now)
        return str(listing["metadata"]["resourceVersion"])

    def _run(self) -> None:
        version: str | None = None
        for _ in range(self.max_reconnects):
            if self._stop.is_set():
                return
            try:
                if version is None:
                    version = self._list()
                for line in self._lines(version):
                    if self._stop.is_set():
                        return
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        version = None  # 410 Gone (or another error): list again
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.on_object(obj, time.monotonic())
            except Exception:  # a dropped stream: reconnect from the last version (bounded by the loop)
                self.errors += 1
                time.sleep(0.5)


class DeploymentWatcher(Watch):
    """The first time each Deployment name is seen."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.seen: dict[str, float] = {}
        super().__init__(kube, f"/apis/apps/v1/namespaces/{namespace}/deployments", self._record)

    def _record(self, obj: dict[str, Any], now: float) -> None:
        self.seen.setdefault(obj["metadata"]["name"], now)

    def wait_for(self, names: list[str], deadline: float) -> bool:
        return before(deadline, lambda: all(n in self.seen for n in names), what="every Deployment to appear")


class StatusWatcher(Watch):
    """Per LLMDeployment, when each new ``status.observedGeneration`` was first seen."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.observed: dict[str, list[tuple[int, float]]] = {}
        self._lock = threading.Lock()
        super().__init__(
            kube, f"/apis/{api.GROUP}/{api.VERSION}/namespaces/{namespace}/{api.PLURAL}", self._record
        )

    def _record(self, obj: dict[str, Any], now: float) -> None:
        generation = (obj.get("status") or {}).get("observedGeneration")
        if not isinstance(generation, int):
            return
        with self._lock:
            history = self.observed.setdefault(obj["metadata"]["name"], [])
            if not history or generation > history[-1][0]:
                history.append((generation, now))

    def first_at_least(self, name: str, generation: int) -> float | None:
        """When a status for ``generation`` (or a later one) of ``name`` was first seen, or None."""
        with self._lock:
            return next((t for g, t in self.observed.get(name, ()) if g >= generation), None)

    def with_status(self) -> int:
        with self._lock:
            return len(self.observed)


def before(deadline: float, predicate: Callable[[], bool], *, what: str, interval: float = 0.05) -> bool:
    """Whether ``predicate`` came true before the monotonic ``deadline`` (polling every ``interval``)."""
    try:
        return bool(
            wait_until(
                predicate, max(0.05, deadline - time.monotonic()), what=what, interval=interval, transient=()
            )
        )
    except WaitFailed:
        return False


def pace(start: float, i: int, rate: float) -> None:
    """Open-loop pacing: the i-th create is due at start + i / rate (rate 0: as fast as possible)."""
    if rate > 0:
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)


# --- API helpers ----------------------------------------------------------------------------------------


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


def delete_namespace(kube: Kube, name: str, *, wait_seconds: float = NAMESPACE_GONE_SECONDS) -> float | None:
    """Delete a namespace and wait (bounded) until it is gone, so its garbage collection does not load the
    next run; returns the seconds it took, or None when it was still there at the deadline."""
    start = time.monotonic()
    with contextlib.suppress(KubeError):
        kube.request("DELETE", f"/api/v1/namespaces/{name}")
    gone = before(
        start + wait_seconds,
        lambda: kube.get(f"/api/v1/namespaces/{name}") is None,
        what=f"namespace {name} to be gone",
        interval=1.0,
    )
    return time.monotonic() - start if gone else None


def llmd_base(namespace: str) -> str:
    return f"/apis/{api.GROUP}/{api.VERSION}/namespaces/{namespace}/{api.PLURAL}"


def create_paced(
    kube: Kube,
    base: str,
    *,
    count: int,
    rate: float,
    timeout: float,
    label: str,
    spec: Mapping[str, Any] = MODEL_SPEC,
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
        obj = {
            "apiVersion": api.API_VERSION,
            "kind": api.KIND,
            "metadata": {"name": name},
            "spec": dict(spec),
        }
        uid = kube.request("POST", base, body=obj)["metadata"]["uid"]
        if then is not None:
            then(name, uid)
        if time.monotonic() - start > timeout:
            raise RuntimeError(f"{label}: {i} creates took over {timeout:.0f} s")
    return start, created


class Operator(OperatorProcess):
    """``python -m kvright.operator`` (kvright_dev.operator_process) watching one namespace, its /metrics on
    loopback, its log in /tmp; ready once it has deployed a probe object (an empty-namespace operator has
    nothing else to show)."""

    namespace: str

    def __init__(self, kubeconfig: str, namespace: str, extra_env: Mapping[str, str] | None = None) -> None:
        super().__init__(
            kubeconfig=kubeconfig,
            namespace=namespace,
            reconcile_seconds=3600,  # level loop idle: only the create path is measured
            metrics=True,
            env={**OPERATOR_ENV, **(extra_env or {})},
            log=temp_log("kvright-bench-operator-"),
            cwd=REPO,
        )

    def wait_ready(self, kube: Kube, spec: Mapping[str, Any] = MODEL_SPEC) -> None:
        probe = {
            "apiVersion": api.API_VERSION,
            "kind": api.KIND,
            "metadata": {"name": "probe"},
            "spec": dict(spec),
        }
        kube.request("POST", llmd_base(self.namespace), body=probe)
        self.wait_for(
            lambda: kube.get(f"/apis/apps/v1/namespaces/{self.namespace}/deployments/probe") is not None,
            120,
            what="the operator to deploy the probe",
            interval=0.2,
            transient=(),
        )


# --- the runs ---------------------------------------------------------------------------------------


def floor_run(kube: Kube, kubeconfig: str, count: int, timeout: float, rate: float) -> dict[str, Any]:
    """Without the operator, the client creates what the operator run ends with: per object the
    LLMDeployment, then its Deployment and Service (the bodies kvright renders, owned by it)."""
    ns = make_namespace(kube, "bench-floor")

    # The same optional children the operator renders on this cluster (it asks the same way).
    pod_monitor = (
        kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{POD_MONITOR_CRD}") is not None
    )
    inference_pool = kube.serves(INFERENCE_POOL_API, "inferencepools")

    def children(name: str, uid: str) -> None:
        w = VLLMWorkload(
            owner=Owner(name=name, namespace=ns, uid=uid),
            model="meta-llama/Llama-3.1-8B-Instruct",
            served_model_name=name,
            image="vllm/vllm-openai:v0.32.0",
            gpu_product="NVIDIA-H100-80GB-HBM3",
            layout=capacity.Layout(tensor_parallel_size=1),
            replicas=0,
            vllm_args=("--tensor-parallel-size", "1"),
            endpoint_picker=api.EndpointPickerSpec.model_construct(
                name=f"{name}-epp", port=9002, failure_mode="FailClose"
            ),
        )
        for child in render_all(w, pod_monitor=pod_monitor, inference_pool=inference_pool):
            path = CHILD_PATHS[child["kind"]].format(ns=ns)
            kube.request("POST", path, body=child)

    meter = Meter(kube, kubeconfig)
    with DeploymentWatcher(kube, ns) as watcher:
        time.sleep(0.5)
        meter.start()
        start, created = create_paced(
            kube, llmd_base(ns), count=count, rate=rate, timeout=timeout, label="floor", then=children
        )
        watcher.wait_for(list(created), start + timeout)
        end = max(watcher.seen.get(n, time.monotonic()) for n in created)
        usage = meter.stop(end - start)
        latencies = [watcher.seen[n] - created[n] for n in created if n in watcher.seen]
    gone = delete_namespace(kube, ns)
    return {
        "total_seconds": end - start,
        "create_to_deployment_p50_seconds": percentile(latencies, 50),
        "create_to_deployment_p99_seconds": percentile(latencies, 99),
        "deployments": len(latencies),
        "usage": dataclasses.asdict(usage) | {"busy_fraction": usage.busy_fraction},
        "namespace_gone_seconds": gone,
        "_usage": usage,
    }


def operator_run(kube: Kube, count: int, timeout: float, kubeconfig: str, rate: float) -> dict[str, Any]:
    ns = make_namespace(kube, "bench-kvright")
    operator = Operator(kubeconfig, ns)
    try:
        operator.wait_ready(kube)
        meter = Meter(kube, kubeconfig, operator.pid)
        with DeploymentWatcher(kube, ns) as watcher, StatusWatcher(kube, ns) as statuses:
            time.sleep(0.5)
            meter.start()
            start, created = create_paced(
                kube, llmd_base(ns), count=count, rate=rate, timeout=timeout, label="kvright"
            )
            creates_done = time.monotonic()
            complete = watcher.wait_for(list(created), start + timeout)
            end = max(watcher.seen.get(n, time.monotonic()) for n in created)
            usage = meter.stop(end - start)
            latencies = [watcher.seen[n] - created[n] for n in created if n in watcher.seen]
            # Status written for all (observedGeneration set), the probe included.
            all_status = before(
                start + timeout,
                lambda: statuses.with_status() >= count + 1,
                what="every status written",
                interval=0.25,
            )
            status_times = [statuses.first_at_least(n, 1) for n in created]
            status_done = (
                max((t for t in status_times if t is not None), default=None) if all_status else None
            )
        rss = proc_peak_rss_bytes(operator.pid)
        cpu_total = proc_cpu_seconds(operator.pid)
        metrics_text = operator.metrics_text()
    finally:
        operator.stop()
    gone = delete_namespace(kube, ns)
    return {
        "total_seconds": end - start,
        "creates_seconds": creates_done - start,
        "status_all_seconds": None if status_done is None else status_done - start,
        "create_to_deployment_p50_seconds": percentile(latencies, 50),
        "create_to_deployment_p99_seconds": percentile(latencies, 99),
        "deployments": len(latencies),
        "complete": complete,
        "operator_cpu_seconds": usage.operator_cpu_seconds,
        "operator_cpu_seconds_with_startup": cpu_total,
        "operator_peak_rss_bytes": rss,
        "reconcile_p50_seconds_at_most": histogram_quantile(metrics_text, RECONCILE_HISTOGRAM, 0.5),
        "reconcile_p99_seconds_at_most": histogram_quantile(metrics_text, RECONCILE_HISTOGRAM, 0.99),
        "operator_log": operator.log_path,
        "usage": dataclasses.asdict(usage) | {"busy_fraction": usage.busy_fraction},
        "namespace_gone_seconds": gone,
        "_usage": usage,
    }


def pair(kube: Kube, kubeconfig: str, *, count: int, timeout: float, rate: float) -> dict[str, Any]:
    """The floor and then the kvright run, at one rate (0: burst)."""
    what = "burst" if rate <= 0 else f"paced at {rate:g}/s"
    log(f"{what}: floor, {count} objects")
    floor = floor_run(kube, kubeconfig, count, timeout, rate)
    log(f"{what}: kvright, {count} objects")
    kvright = operator_run(kube, count, timeout, kubeconfig, rate)
    ratio = kvright["total_seconds"] / floor["total_seconds"] if floor["total_seconds"] else float("nan")
    return {"rate_per_second": rate or "unpaced", "floor": floor, "kvright": kvright, "ratio_total": ratio}


def start_cluster() -> tuple[str, dict[str, str]]:
    # Always a fresh directory: KVRIGHT_CLUSTER_DIR (the Makefile exports one) may name a cluster someone
    # else started with `make cluster-up`, and the bench stops what it starts.
    cluster_dir = tempfile.mkdtemp(prefix="kvright-bench-cluster-")
    env = {**os.environ, "KVRIGHT_CLUSTER_DIR": cluster_dir}
    subprocess.run(
        ["bash", str(REPO / "deploy" / "cluster.sh"), "up"], env=env, check=True, stdout=subprocess.DEVNULL
    )
    return os.path.join(cluster_dir, "kubeconfig"), env


def _verdict(value: float, target_max: float, bounds: list[str]) -> dict[str, Any]:
    return {"value": value, "target_max": target_max, "met": value <= target_max, "bounds": bounds}


def verdicts(result: Mapping[str, Any]) -> dict[str, Any]:
    """Each target, met or not, with the measured bounds for a missed one."""
    out: dict[str, Any] = {}
    burst, paced = result.get("burst"), result.get("paced")
    rss: list[int] = []
    if burst is not None:
        ratio = burst["ratio_total"]
        out["burst_ratio"] = _verdict(
            ratio,
            TARGET_BURST_RATIO,
            burst_bounds(
                ratio=ratio,
                floor=burst["floor"]["_usage"],
                kvright=burst["kvright"]["_usage"],
                count=result["count"],
            ),
        )
        rss.append(burst["kvright"]["operator_peak_rss_bytes"])
    if paced is not None:
        p99 = paced["kvright"]["create_to_deployment_p99_seconds"]
        out["paced_p99"] = _verdict(
            p99,
            TARGET_PACED_P99_SECONDS,
            paced_bounds(
                p99=p99,
                floor_p99=paced["floor"]["create_to_deployment_p99_seconds"],
                kvright=paced["kvright"]["_usage"],
                rate=float(paced["rate_per_second"]),
                reconcile_p99=paced["kvright"]["reconcile_p99_seconds_at_most"],
            ),
        )
        rss.append(paced["kvright"]["operator_peak_rss_bytes"])
    soak = result.get("soak")
    if soak is not None and soak.get("rss_peak_bytes"):
        rss.append(soak["rss_peak_bytes"])
    if rss:
        out["peak_rss"] = _verdict(max(rss), TARGET_RSS_BYTES, [])
    return out


def report(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench --operator", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--count", type=int, default=1000, help="LLMDeployments per run (default 1000)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per run (default 600)")
    parser.add_argument(
        "--rate",
        type=float,
        default=10.0,
        help="creates per second of the paced run (default 10; 0 skips it)",
    )
    parser.add_argument("--no-burst", action="store_true", help="skip the burst run")
    parser.add_argument(
        "--soak-seconds", type=float, default=1200, help="length of the soak (default 1200; 0 skips it)"
    )
    parser.add_argument("--soak-count", type=int, default=None, help="objects in the soak (default: --count)")
    parser.add_argument(
        "--soak-sweep-seconds",
        type=float,
        default=60,
        help="the operator's KVRIGHT_RECONCILE_SECONDS in the soak (default 60, the chart's)",
    )
    parser.add_argument(
        "--soak-edit-seconds", type=float, default=15, help="soak: seconds between edits (15)"
    )
    parser.add_argument("--soak-edit-batch", type=int, default=10, help="soak: objects edited each time (10)")
    parser.add_argument(
        "--soak-flap-period",
        type=float,
        default=180,
        help="soak: Prometheus goes down once every this many seconds (180; 0: never)",
    )
    parser.add_argument(
        "--soak-flap-down", type=float, default=45, help="soak: seconds Prometheus stays down (45)"
    )
    parser.add_argument(
        "--soak-sample-seconds", type=float, default=10, help="soak: seconds between samples (10)"
    )
    parser.add_argument(
        "--operator-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for the operators the bench starts (repeatable), e.g. MALLOC_ARENA_MAX=2",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON object to this file")
    args = parser.parse_args(argv)
    if not 1 <= args.count <= 5000:
        parser.error(f"--count {args.count} is out of range; accepted: 1 to 5000")
    if not 0 <= args.soak_seconds <= 4 * 3600:
        parser.error(f"--soak-seconds {args.soak_seconds:g} is out of range; accepted: 0 to 14400")
    if not 0 <= args.rate <= 1000:
        parser.error(f"--rate {args.rate:g} is out of range; accepted: 0 to 1000")

    sigterm_interrupts()  # a stopped bench still stops its control plane, operators and Prometheus
    from bench import operator_soak  # after argument parsing: it imports the Prometheus helper

    for pair_text in args.operator_env:
        name, sep, value = pair_text.partition("=")
        if not sep or not name:
            parser.error(f"--operator-env {pair_text!r} is not NAME=VALUE")
        OPERATOR_ENV[name] = value

    started_env: dict[str, str] | None = None
    kubeconfig = os.environ.get("KUBECONFIG", "")
    if not kubeconfig:
        log("starting the local control plane")
        kubeconfig, started_env = start_cluster()
        os.environ["KUBECONFIG"] = kubeconfig
    result: dict[str, Any] = {
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "count": args.count,
        "operator_env": dict(OPERATOR_ENV),
    }
    try:
        kube = Kube(api_client())
        ensure_crd(kube)
        if not args.no_burst:
            result["burst"] = pair(kube, kubeconfig, count=args.count, timeout=args.timeout, rate=0)
        if args.rate > 0:
            result["paced"] = pair(kube, kubeconfig, count=args.count, timeout=args.timeout, rate=args.rate)
        if args.soak_seconds > 0:
            soak_count = args.soak_count or args.count
            log(f"soak: {soak_count} objects for {args.soak_seconds:g} s")
            result["soak"] = operator_soak.soak(
                kube,
                kubeconfig,
                count=soak_count,
                seconds=args.soak_seconds,
                sweep_seconds=args.soak_sweep_seconds,
                timeout=args.timeout,
                edit_seconds=args.soak_edit_seconds,
                edit_batch=args.soak_edit_batch,
                flap_period_seconds=args.soak_flap_period,
                flap_down_seconds=args.soak_flap_down,
                sample_seconds=args.soak_sample_seconds,
            )
    finally:
        if started_env is not None:
            subprocess.run(
                ["bash", str(REPO / "deploy" / "cluster.sh"), "down"],
                env=started_env,
                check=False,
                stdout=subprocess.DEVNULL,
            )
    result["targets"] = verdicts(result)
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(_public(result), indent=2, default=str), encoding="utf-8")
    if args.json:
        print(json.dumps(_public(result), indent=2, default=str))
    else:
        print_table(result)
    return 0


def _public(value: Any) -> Any:
    """``value`` without the private ``_``-keys (dataclasses kept for the verdicts)."""
    if isinstance(value, Mapping):
        return {k: _public(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, list):
        return [_public(v) for v in value]
    return value


def _fmt(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.3f} s"


def _cpu(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} s"


def print_pair(title: str, r: Mapping[str, Any]) -> None:
    f, k = r["floor"], r["kvright"]
    fu, ku = f["_usage"], k["_usage"]
    print(f"\n{title}")
    print(f"{'':34}{'client floor':>16}{'kvright':>16}")
    for label, key in (
        ("create -> Deployment p50", "create_to_deployment_p50_seconds"),
        ("create -> Deployment p99", "create_to_deployment_p99_seconds"),
        ("all Deployments exist", "total_seconds"),
    ):
        print(f"{label:34}{_fmt(f[key]):>16}{_fmt(k[key]):>16}")
    print(f"{'all statuses written':34}{'':>16}{_fmt(k['status_all_seconds']):>16}")
    print(f"{'operator CPU':34}{'':>16}{_cpu(k['operator_cpu_seconds']):>16}")
    print(f"{'operator peak RSS':34}{'':>16}{k['operator_peak_rss_bytes'] / 2**20:>12.0f} MiB")
    print(
        f"{'kube-apiserver CPU':34}{_cpu(fu.apiserver_cpu_seconds):>16}{_cpu(ku.apiserver_cpu_seconds):>16}"
    )
    print(f"{'etcd CPU':34}{_cpu(fu.etcd_cpu_seconds):>16}{_cpu(ku.etcd_cpu_seconds):>16}")
    print(f"{'machine busy (all cores)':34}{fu.busy_fraction:>15.0%} {ku.busy_fraction:>15.0%}")
    fw = "n/a" if fu.writes is None else f"{fu.writes:.0f}"
    kw = "n/a" if ku.writes is None else f"{ku.writes:.0f}"
    print(f"{'API server writes (all clients)':34}{fw:>16}{kw:>16}")
    print(f"ratio kvright / floor (all Deployments): {r['ratio_total']:.2f}")


def print_table(r: Mapping[str, Any]) -> None:
    print(f"operator scale: {r['count']} LLMDeployments on {r['machine']}")
    if r.get("operator_env"):
        print("operator environment: " + " ".join(f"{k}={v}" for k, v in r["operator_env"].items()))
    if "burst" in r:
        print_pair("burst (as fast as the client can)", r["burst"])
    if "paced" in r:
        print_pair(f"paced ({r['paced']['rate_per_second']:g} creates/s)", r["paced"])
    if "soak" in r:
        from bench.operator_soak import print_soak

        print_soak(r["soak"])
    print("\ntargets")
    names = {"burst_ratio": "burst ratio", "paced_p99": "paced p99", "peak_rss": "operator peak RSS"}
    for key, t in r["targets"].items():
        value = (
            f"{t['value'] / 2**20:.0f} MiB (<= {t['target_max'] / 2**20:.0f})"
            if key == "peak_rss"
            else (f"{t['value']:.2f} (<= {t['target_max']:g})")
        )
        print(f"  {names[key]:20} {value:24} {'met' if t['met'] else 'NOT met'}")
        if not t["met"]:
            for line in t["bounds"]:
                print(f"      bounded by: {line}")
    soak = r.get("soak")
    if soak is not None:
        v = soak["verdict"]
        print(f"  {'soak memory':20} {v['memory']:24} {'met' if v['memory_ok'] else 'NOT met'}")
        print(f"  {'soak lag':20} {v['lag']:24} {'met' if v['lag_ok'] else 'NOT met'}")


if __name__ == "__main__":
    raise SystemExit(report())
