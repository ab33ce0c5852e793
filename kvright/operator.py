"""The kopf operator: thin IO around the pure reconcile decision.

One reconcile, three steps (kvright.reconcile has the decisions):

1. gather: the LLMDeployment, its architecture (kvright.resolve), the GPU inventory (a kopf index of
   Nodes), whether the PodMonitor CRD exists;
2. decide: :func:`kvright.reconcile.desire`, then :func:`kvright.reconcile.status` once the API
   server has answered the apply;
3. act: server-side apply of the children under the field manager ``kvright`` (force), a status
   patch only when something changed, events with specific reasons.

It runs on create, on spec update, on resume (operator start), and from one operator-wide sweep every
``KVRIGHT_RECONCILE_SECONDS`` (level-based: hand edits are reverted, nodes that joined are used,
transient failures are retried). One asyncio lock per object keeps these from overlapping. No
finalizer is needed: children are garbage-collected through their owner references.

Run it with ``kopf run -m kvright.operator --all-namespaces`` or ``python -m kvright.operator``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import ctypes
import dataclasses
import datetime
import json
import logging
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote

import kopf
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.api_client import RequestSerialized

from kvright import api, feedback, inventory, metrics, peering, podstarts, reconcile, weights
from kvright import conditions as cond
from kvright import settings as settings_mod
from kvright.conditions import Reason
from kvright.observe import Credentials, PrometheusClient
from kvright.render import INFERENCE_POOL_API_VERSION, LLMD_LABEL, LWS_API_VERSION, selector
from kvright.resolve import HubClient, ResolveError, resolve
from kvright.settings import PUBLIC_HUB

__all__ = ["FIELD_MANAGER", "Kube", "KubeError", "Runtime", "main", "reconcile_once"]

FIELD_MANAGER: Final = "kvright"
PREFIX: Final = "kvright.dev"
POD_MONITOR_CRD: Final = "podmonitors.monitoring.coreos.com"
#: The exit code of a process stopped by the fault-injection seam (Kube.exit_after_writes).
FAULT_EXIT_CODE: Final = 75
_WRITES: Final = ("POST", "PUT", "PATCH", "DELETE")
#: The same event (type, reason, message) about one object is posted at most once in this long.
EVENT_REPEAT_SECONDS: Final = 300.0
LWS_API: Final = "/apis/leaderworkerset.x-k8s.io/v1"
"""The LeaderWorkerSet API group version: served (its discovery document lists ``leaderworkersets``) when
LeaderWorkerSet is installed. Discovery needs no RBAC grant (system:discovery)."""
INFERENCE_POOL_API: Final = "/apis/inference.networking.k8s.io/v1"
"""The Gateway API Inference Extension's group version: served (listing ``inferencepools``) when its
InferencePool CRD is installed; asked through discovery like LeaderWorkerSet."""
MALLOC_ARENAS: Final = 2
"""glibc malloc arenas the operator process keeps (see :func:`cap_malloc_arenas`)."""
_M_ARENA_MAX: Final = -8  # mallopt's parameter number for M_ARENA_MAX (glibc malloc.h)
log = logging.getLogger("kvright.operator")


class KubeError(Exception):
    """An API request failed; ``status`` is the HTTP code (0: no answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_PLURALS: Final = {
    ("v1", "PersistentVolumeClaim"): "/api/v1/namespaces/{ns}/persistentvolumeclaims",
    ("batch/v1", "Job"): "/apis/batch/v1/namespaces/{ns}/jobs",
    ("apps/v1", "Deployment"): "/apis/apps/v1/namespaces/{ns}/deployments",
    ("v1", "Service"): "/api/v1/namespaces/{ns}/services",
    ("policy/v1", "PodDisruptionBudget"): "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    ("monitoring.coreos.com/v1", "PodMonitor"): "/apis/monitoring.coreos.com/v1/namespaces/{ns}/podmonitors",
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): LWS_API + "/namespaces/{ns}/leaderworkersets",
    (INFERENCE_POOL_API_VERSION, "InferencePool"): INFERENCE_POOL_API + "/namespaces/{ns}/inferencepools",
}
WORKLOAD_KINDS: Final = {
    "Deployment": ("apps/v1", "Deployment"),
    "LeaderWorkerSet": (LWS_API_VERSION, "LeaderWorkerSet"),
}
"""The two kinds the vLLM pods of an LLMDeployment run under (one at a time, named after it)."""


class Kube:
    """The operator's own API calls (kopf does the watching), as plain dicts over the kubernetes
    client's transport. Implements :class:`kvright.resolve.KubeReader`."""

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        *,
        timeout_seconds: float = 30.0,
        exit_after_writes: int = 0,
        pause_after_writes: int = 0,
    ) -> None:
        self.api = api_client
        self.timeout_seconds = timeout_seconds
        self.exit_after_writes = exit_after_writes
        """A fault-injection seam for tests, off (0) in production: the process exits at once, as if
        killed, right after this many writes (POST, PUT, PATCH, DELETE) have been answered, so a
        reconcile is cut between two of its writes (KVRIGHT_FAULT_EXIT_AFTER_WRITES)."""
        self.pause_after_writes = pause_after_writes
        """The same seam, pausing instead (KVRIGHT_FAULT_PAUSE_AFTER_WRITES): right after this write the
        process stops itself (SIGSTOP, every thread at once, its connections left open) until SIGCONT,
        then goes on with the same reconcile: a test restarts a server in between. Once only."""
        self._writes = 0
        self._writes_lock = threading.Lock()
        self._resumed = False

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> Any:
        headers = {"Accept": accept, "Content-Type": content_type}
        serialized = self.api.param_serialize(
            method,
            path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        if self._resumed and method in _WRITES:
            response, data = self._traced(method, path, serialized)
        else:
            response, data = self._call(method, path, serialized)
        if 200 <= response.status < 300:
            if (self.exit_after_writes or self.pause_after_writes) and method in _WRITES:
                self._count_write(method, path)
            if not data:
                return None
            try:
                return json.loads(data)
            except ValueError:  # /readyz and friends answer text
                return data.decode(errors="replace")
        try:
            message = json.loads(data).get("message", "")
        except (ValueError, AttributeError):
            message = data[:200].decode(errors="replace") if data else ""
        raise KubeError(response.status, f"{method} {path}: {response.status} {message}")

    def _call(self, method: str, path: str, serialized: RequestSerialized) -> tuple[Any, bytes]:
        try:
            response = self.api.call_api(*serialized, _request_timeout=self.timeout_seconds)
            return response, response.read()  # type: ignore[no-untyped-call]
        except k8s_client.ApiException as exc:  # transport-level failures
            raise KubeError(int(exc.status or 0), f"{method} {path}: {exc.reason}") from None
        except Exception as exc:  # urllib3 connection errors and the like
            raise KubeError(0, f"{method} {path}: {type(exc).__name__}: {exc}") from None

    def _traced(self, method: str, path: str, serialized: RequestSerialized) -> tuple[Any, bytes]:
        """The first write after a pause (pause_after_writes), logged with the time it was sent and the time
        it ended: a test that stops a server meanwhile shows from these lines that the write was in flight
        while the server was down."""
        self._resumed = False
        n = self._writes + 1
        log.error("fault injection: write %d (%s %s) sent at %.3f", n, method, path, time.time())
        try:
            response, data = self._call(method, path, serialized)
        except KubeError as exc:
            log.error("fault injection: write %d failed at %.3f: %s", n, time.time(), exc)
            raise
        log.error("fault injection: write %d answered %d at %.3f", n, response.status, time.time())
        return response, data

    def _count_write(self, method: str, path: str) -> None:
        with self._writes_lock:
            self._writes += 1
            if self.exit_after_writes and self._writes >= self.exit_after_writes:
                log.error("fault injection: exiting after write %d (%s %s)", self._writes, method, path)
                logging.shutdown()
                os._exit(FAULT_EXIT_CODE)
            if self._writes == self.pause_after_writes:
                log.error("fault injection: pausing after write %d (%s %s)", self._writes, method, path)
                for handler in logging.getLogger().handlers:
                    handler.flush()
                # To this thread: it stops before it returns (os.kill may let it run on a moment). Every
                # thread stops with it; a SIGCONT lets them all go on.
                signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
                log.error("fault injection: resumed after write %d", self._writes)
                self._resumed = True

    def get(self, path: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = self.request("GET", path)
            return result
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    # --- KubeReader ----------------------------------------------------------------------------------
    def config_map_data(self, namespace: str, name: str) -> Mapping[str, str] | None:
        cm = self.get(f"/api/v1/namespaces/{namespace}/configmaps/{quote(name)}")
        return None if cm is None else dict(cm.get("data") or {})

    def secret_data(self, namespace: str, name: str) -> Mapping[str, str] | None:
        import base64

        secret = self.get(f"/api/v1/namespaces/{namespace}/secrets/{quote(name)}")
        if secret is None:
            return None
        decoded = {
            k: base64.b64decode(v).decode(errors="replace") for k, v in (secret.get("data") or {}).items()
        }
        decoded.update(secret.get("stringData") or {})
        return decoded

    # --- children and status -----------------------------------------------------------------------
    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Server-side apply under kvright's field manager, taking ownership of conflicting fields."""
        meta = obj["metadata"]
        base = _PLURALS[(obj["apiVersion"], obj["kind"])].format(ns=meta["namespace"])
        result: dict[str, Any] = self.request(
            "PATCH",
            f"{base}/{quote(meta['name'])}",
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            body=obj,
            content_type="application/apply-patch+yaml",
        )
        return result

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{quote(name)}")

    def child_path(self, kind: str, namespace: str, name: str) -> str:
        return _PLURALS[WORKLOAD_KINDS[kind]].format(ns=namespace) + f"/{quote(name)}"

    def workload(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The live Deployment or LeaderWorkerSet named ``name``, or None."""
        return self.get(self.child_path(kind, namespace, name))

    def delete(self, path: str, *, uid: str) -> None:
        """Delete the object at ``path`` if it still has ``uid`` (a precondition: never another object
        of the same name), its pods in the background; gone already is fine."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background",
                "preconditions": {"uid": uid}}  # fmt: skip
        try:
            self.request("DELETE", path, body=body)
        except KubeError as exc:
            if exc.status != 404:
                raise

    def serves(self, group_version_path: str, resource: str) -> bool:
        """Whether the API server serves ``resource`` in the group version at ``group_version_path``
        (its discovery document); 404: not installed."""
        document = self.get(group_version_path)
        return document is not None and any(
            r.get("name") == resource for r in document.get("resources") or ()
        )

    def bound_pods(self) -> list[dict[str, Any]]:
        """Every pod bound to a node and not finished, in every namespace, in pages of 500."""
        items: list[dict[str, Any]] = []
        query = [
            ("fieldSelector", "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"),
            ("limit", "500"),
        ]
        while True:
            page = self.request("GET", "/api/v1/pods", query=query)
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            query = [*query[:2], ("continue", token)]

    def pods(self, namespace: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        sel = ",".join(f"{k}={v}" for k, v in labels.items())
        result = self.request("GET", f"/api/v1/namespaces/{namespace}/pods", query=[("labelSelector", sel)])
        return list(result.get("items") or [])

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        path = f"{_object_path(namespace, name)}/status"
        self.request("PATCH", path, body={"status": status}, content_type="application/merge-patch+json")

    def has_crd(self, name: str) -> bool:
        """Whether the CRD ``name`` exists (404: no). Any other error raises, a 403 included: a refusal
        is not an answer (the caller, ``Runtime._served``, logs it with its reason)."""
        return self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}") is not None


@dataclass
class Runtime:
    """What the handlers share, built once in the startup hook."""

    settings: settings_mod.Settings
    kube: Kube
    hub: HubClient
    clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)
    prometheus: PrometheusClient | None = None
    """The feedback loop's Prometheus (KVRIGHT_PROMETHEUS_URL); None turns feedback off."""
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    executor: concurrent.futures.ThreadPoolExecutor = field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(
            max_workers=16, thread_name_prefix="reconcile"
        )
    )
    _probes: dict[str, tuple[float, bool]] = field(default_factory=dict)
    _probe_lock: threading.Lock = field(default_factory=threading.Lock)
    _posted: dict[str, dict[tuple[str, str, str], float]] = field(default_factory=dict)
    _status_written: dict[str, float] = field(default_factory=dict)
    peering_priority: int = 0
    """This replica's kopf peering priority (set at startup when KVRIGHT_PEERING names a peering)."""
    last_sweep: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the periodic reconcile last began a pass (or the operator started)."""

    def wrote_status(self, uid: str) -> None:
        """Remember that this operator just wrote ``uid``'s status (see :meth:`stale`)."""
        self._status_written[uid] = time.monotonic()

    def stale(self, uid: str, read_at: float | None) -> bool:
        """Whether a body read at ``read_at`` (``time.monotonic()``; None: unknown, a watch event's body)
        may predate this operator's last status write for ``uid``. Such a body lacks the feedback loop's
        pins and calibration: reconciled as it is, it would re-plan from the spec and roll the pods back
        (the sweep's listing taken before a handler's move, then reconciled after it). Never written:
        not stale."""
        written = self._status_written.get(uid)
        return written is not None and (read_at is None or written >= read_at)

    def gpu_pods(self) -> list[inventory.GPUPod] | None:
        """The pods that hold GPUs on any node now (bound, not finished), for the room on each product
        when kvright chooses it: one cluster-wide listing, taken when asked (a create or edit asks itself;
        the sweep asks once per pass and shares it, see :class:`PodsOnce`). None when KVRIGHT_GPU_OCCUPANCY
        is off or the listing failed: the choice then weighs allocatable GPUs, and the failure (a 403
        names the missing grant) is logged, never read as an empty cluster."""
        if not self.settings.gpu_occupancy:
            return None
        try:
            return [
                pod
                for item in self.kube.bound_pods()
                if (pod := inventory.gpu_pod(item, owner_label=LLMD_LABEL)) is not None
            ]
        except KubeError as exc:
            grant = " (the operator needs list on pods in every namespace)" if exc.status == 403 else ""
            log.warning("cannot list pods to weigh free GPUs%s; choosing by allocatable: %s", grant, exc)
            return None

    def first_post(self, uid: str, event: reconcile.Event) -> bool:
        """Whether ``event`` was not already posted about this object within EVENT_REPEAT_SECONDS (and
        remember it). A reconcile can run on a body that predates the previous reconcile's status write
        (the create handler and a sweep, a watch event still in flight), and would announce the same
        change again; as client-go's event recorder aggregates repeats, the repeat is dropped here."""
        now = time.monotonic()
        seen = self._posted.setdefault(uid, {})
        for key in [k for k, at in seen.items() if now - at >= EVENT_REPEAT_SECONDS]:
            del seen[key]
        key = (event.type, event.reason, event.message)
        if key in seen:
            return False
        seen[key] = now
        return True

    def lock_for(self, uid: str) -> asyncio.Lock:
        lock = self.locks.get(uid)
        if lock is None:
            lock = self.locks[uid] = asyncio.Lock()
        return lock

    def forget(self, uid: str) -> None:
        self.locks.pop(uid, None)
        self._status_written.pop(uid, None)
        self._posted.pop(uid, None)

    def list_all(self) -> tuple[list[dict[str, Any]], list[inventory.GPUNode]]:
        """Every watched LLMDeployment and every GPU node, for the periodic sweep."""
        namespaces = self.settings.namespaces or ("",)
        bodies: list[dict[str, Any]] = []
        for ns in namespaces:
            where = f"/namespaces/{ns}" if ns else ""
            listing = self.kube.request("GET", f"/apis/{api.GROUP}/{api.VERSION}{where}/{api.PLURAL}")
            bodies.extend(listing.get("items") or [])
        node_list = self.kube.request("GET", "/api/v1/nodes").get("items") or []
        nodes = [n for n in (inventory.gpu_node(item) for item in node_list) if n is not None]
        return bodies, nodes

    def standing_by(self) -> str | None:
        """With peering, why this replica leaves the sweep to another (kvright.peering), or None when it is
        the one to work. The peering objects are read each time: kopf's pause is not exposed to the sweep,
        so the sweep applies kopf's rule to what kopf writes. No peering object: kopf cannot coordinate
        and works on every replica, and so does the sweep."""
        name = self.settings.peering
        select = [("fieldSelector", f"metadata.name={name}")]
        if self.settings.namespaces:
            paths = [f"/apis/kopf.dev/v1/namespaces/{ns}/kopfpeerings" for ns in self.settings.namespaces]
        else:
            paths = ["/apis/kopf.dev/v1/clusterkopfpeerings"]
        statuses: list[Any] = []
        for path in paths:
            items = self.kube.request("GET", path, query=select).get("items") or []
            statuses.extend(item.get("status") for item in items)
        if not statuses:
            return None
        return peering.standing_by(statuses, priority=self.peering_priority, now=self.clock())

    def pod_monitor_supported(self) -> bool:
        """Whether the PodMonitor CRD exists (see ``_served``)."""
        return self._served(POD_MONITOR_CRD, lambda: self.kube.has_crd(POD_MONITOR_CRD))

    def leader_worker_set_supported(self) -> bool:
        """Whether the LeaderWorkerSet API is served, by API discovery (see ``_served``)."""
        return self._served(LWS_API, lambda: self.kube.serves(LWS_API, "leaderworkersets"))

    def inference_pool_supported(self) -> bool:
        """Whether the InferencePool API is served, by API discovery (see ``_served``)."""
        return self._served(
            INFERENCE_POOL_API, lambda: self.kube.serves(INFERENCE_POOL_API, "inferencepools")
        )

    def endpoint_picker(self, name: str) -> api.EndpointPickerSpec | None:
        """The operator's default endpoint picker for the InferencePool of LLMDeployment ``name``."""
        s = self.settings
        service = s.endpoint_picker_for(name)
        if not service:
            return None
        # Not validated again: the settings checked the template, and a long LLMDeployment name may make a
        # name no Service can have (the pool still applies; its picker is then reported missing upstream).
        return api.EndpointPickerSpec.model_construct(
            name=service, port=s.endpoint_picker_port, failure_mode=s.endpoint_picker_failure_mode
        )

    def _served(self, what: str, probe: Callable[[], bool]) -> bool:
        """Whether an optional API is there, asked at most once a minute: an error keeps the last
        answer and is logged, and a first error counts as absent. A 403 is logged as an error that names
        the missing permission: it means the ServiceAccount's rules are short (the chart grants get on
        customresourcedefinitions), never that the API is absent."""
        with self._probe_lock:
            cached = self._probes.get(what)
        if cached is not None and time.monotonic() - cached[0] < 60:
            return cached[1]
        try:
            present = probe()
        except KubeError as exc:
            present = cached[1] if cached else False
            if exc.status == 403:
                log.error(
                    "cannot tell whether %s is served: forbidden (the operator's RBAC rules lack this "
                    "read; planning as if it were %s until it is granted): %s",
                    what,
                    "present" if present else "absent",
                    exc,
                )
            else:
                log.warning("cannot tell whether %s is served: %s", what, exc)
        with self._probe_lock:
            self._probes[what] = (time.monotonic(), present)
        return present


def api_client() -> k8s_client.ApiClient:
    """In-cluster credentials when running in a pod, else the kubeconfig (KUBECONFIG)."""
    configuration = k8s_client.Configuration()
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        # The path is read now, not at import (the client caches $KUBECONFIG when it is imported).
        path = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
        k8s_config.load_kube_config(config_file=path, client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = 32
    return k8s_client.ApiClient(configuration)


def runtime_from_env(env: Mapping[str, str]) -> Runtime:
    s = settings_mod.from_env(env)
    return Runtime(
        settings=s,
        kube=Kube(
            api_client(),
            exit_after_writes=s.fault_exit_after_writes,
            pause_after_writes=s.fault_pause_after_writes,
        ),
        hub=HubClient(s.hf_endpoint, timeout_seconds=s.hub_timeout_seconds, attempts=s.hub_attempts),
        prometheus=prometheus_client(s),
    )


def prometheus_client(s: settings_mod.Settings) -> PrometheusClient | None:
    """The feedback loop's Prometheus (None: feedback off), with its CA and credentials."""
    if not s.prometheus_url:
        return None
    return PrometheusClient(
        s.prometheus_url,
        ca_file=s.prometheus_ca_file,
        credentials=Credentials(
            bearer_token_file=s.prometheus_bearer_token_file,
            username=s.prometheus_username,
            password_file=s.prometheus_password_file,
        ),
    )


# --- gather, decide, act ---------------------------------------------------------------------------


GPUPods = Callable[[], "list[inventory.GPUPod] | None"]
"""What gather calls for the pods holding GPUs, only when the spec lets kvright choose the product."""


class PodsOnce:
    """One listing of GPU pods for a whole sweep pass, taken by the first reconcile that needs it (none
    when no object chooses its product); thread-safe, as the pass reconciles objects concurrently."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._lock = threading.Lock()
        self._listed = False
        self._pods: list[inventory.GPUPod] | None = None

    def __call__(self) -> list[inventory.GPUPod] | None:
        with self._lock:
            if not self._listed:
                self._pods, self._listed = self._runtime.gpu_pods(), True
            return self._pods


def gather(
    body: Mapping[str, Any],
    runtime: Runtime,
    nodes: Iterable[inventory.GPUNode],
    gpu_pods: GPUPods | None = None,
) -> reconcile.Facts:
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    parsed = reconcile.spec_or_error(spec)
    architecture: Any = None
    source = ""
    if not isinstance(parsed, api.SpecError):
        try:
            resolved = resolve(
                parsed.model.architecture,
                namespace=meta["namespace"],
                model_name=parsed.model.name,
                kube=runtime.kube,
                hub=runtime.hub,
            )
            architecture, source = resolved.architecture, f"{resolved.source} {resolved.detail}"
        except ResolveError as exc:
            architecture = reconcile.ResolveFailure(
                reason=exc.reason, message=str(exc), retryable=exc.retryable
            )
        except KubeError as exc:
            architecture = reconcile.ResolveFailure(
                reason=Reason.ARCHITECTURE_UNKNOWN,
                message=f"reading the API server failed: {exc}",
                retryable=True,
            )
    return reconcile.Facts(
        name=meta["name"],
        namespace=meta["namespace"],
        uid=meta.get("uid", ""),
        generation=int(meta.get("generation", 0) or 0),
        spec=spec,
        current_status=body.get("status") or {},
        architecture=architecture,
        architecture_source=source,
        inventory=inventory.summarize(
            nodes,
            # Room matters only where kvright chooses the product; a pinned product is the user's call.
            (gpu_pods or runtime.gpu_pods)()
            if not isinstance(parsed, api.SpecError) and parsed.gpu.product is None
            else None,
            exclude=(meta["namespace"], meta["name"]),
        ),
        default_image=runtime.settings.vllm_image,
        hub_endpoint=None if runtime.settings.hf_endpoint == PUBLIC_HUB else runtime.settings.hf_endpoint,
        prices=dict(runtime.settings.gpu_prices),
        pod_monitor=runtime.pod_monitor_supported(),
        pod_monitor_labels=dict(runtime.settings.pod_monitor_labels),
        leader_worker_set=runtime.leader_worker_set_supported(),
        inference_pool=runtime.inference_pool_supported(),
        endpoint_picker=runtime.endpoint_picker(meta["name"]),
        parsed=parsed,
    )


@dataclass(frozen=True, kw_only=True)
class Outcome:
    desired: reconcile.Desired
    status: dict[str, Any]
    events: tuple[reconcile.Event, ...]
    status_written: bool


def reconcile_once(
    body: Mapping[str, Any],
    runtime: Runtime,
    nodes: Iterable[inventory.GPUNode],
    gpu_pods: GPUPods | None = None,
) -> Outcome:
    """Gather, decide and act for one LLMDeployment (blocking IO: run it in a thread), counted and
    timed in the operator's metrics, whose per-object gauges then show the status just written."""
    with metrics.METRICS.reconcile():
        outcome = _decide_and_act(gather(body, runtime, nodes, gpu_pods), runtime)
    gauges = metrics.from_llmdeployment({**body, "status": outcome.status})
    if gauges is not None:
        metrics.METRICS.update(gauges)
    return outcome


def _decide_and_act(facts: reconcile.Facts, runtime: Runtime) -> Outcome:
    now = runtime.clock()
    starting = _starting_pods(runtime.kube, facts, now=now, grace=3 * runtime.settings.reconcile_seconds)
    facts = dataclasses.replace(facts, weights=_weights_observed(runtime.kube, facts), pods=starting)
    # The feedback loop (kvright.feedback): observe, decide, and feed its overrides into planning.
    loop = feedback.run(facts, kube=runtime.kube, prometheus=runtime.prometheus, now=now)
    facts = dataclasses.replace(facts, overrides=loop.overrides)
    desired = reconcile.desire(facts)
    apply_error: str | None = None
    live: dict[str, Any] | None = None
    for child in desired.children:
        try:
            answered = runtime.kube.apply(child)
        except KubeError as exc:
            apply_error = f"applying {child['kind']} {facts.name}: {exc}"
            break
        if child["kind"] in WORKLOAD_KINDS:
            live = answered
    kinds = ("Deployment", "LeaderWorkerSet") if facts.leader_worker_set else ("Deployment",)
    if live is None and apply_error is None:
        # No workload applied (no feasible plan, or its weights are not ready): the last applied workload,
        # of either kind, keeps serving.
        for kind in kinds:
            live = runtime.kube.workload(kind, facts.namespace, facts.name)
            if live is not None:
                break
    elif apply_error is None and live is not None:
        apply_error = _delete_stale_workload(runtime.kube, facts, live, kinds)
    rollout: reconcile.Rollout | None = None
    if live is not None:
        rollout = reconcile.rollout_from(live)
        want = desired.replicas if desired.replicas is not None else rollout.replicas
        if live.get("kind") == "LeaderWorkerSet" or not rollout.up_to_date or rollout.ready_replicas < want:
            # A LeaderWorkerSet's status has no observedGeneration: its pods say whether they run the
            # template just applied (and, as for a Deployment, why one cannot be scheduled).
            pods = runtime.kube.pods(facts.namespace, selector(facts.name))
            rollout = reconcile.rollout_from(live, pods)
    new_status = reconcile.status(facts, desired, rollout=rollout, apply_error=apply_error, now=now)
    new_status = loop.into_status(new_status, generation=facts.generation, now=now)
    written = False
    if reconcile.status_changed(facts.current_status, new_status):
        runtime.kube.patch_status(facts.namespace, facts.name, new_status)
        written = True
    events = desired.events + loop.events
    if apply_error is not None:
        events += (reconcile.Event(type="Warning", reason=Reason.APPLY_FAILED, message=apply_error),)
    return Outcome(desired=desired, status=new_status, events=events, status_written=written)


def _delete_stale_workload(
    kube: Kube, facts: reconcile.Facts, live: Mapping[str, Any], kinds: Iterable[str]
) -> str | None:
    """Delete the workload of the other kind once the new one is applied (a plan that moved between one
    node and several), or say why it could not be deleted (an authorization error included).

    Deleted, not scaled to 0: a Deployment's pods and a LeaderWorkerSet's groups cannot hand capacity
    over gradually (neither controller knows the other), and waiting for the new one to be Ready first
    would wait forever on a cluster without room for both, while the old pods keep their GPUs. A
    scaled-down object would also linger as a second workload under the same name. Only an object this
    LLMDeployment controls is deleted (its controller ownerReference), with its uid as a precondition."""
    for kind in kinds:
        if kind == live.get("kind"):
            continue
        path = kube.child_path(kind, facts.namespace, facts.name)
        try:
            stale = kube.get(path)
            if stale is None or not _controlled_by(stale, facts.uid):
                continue
            kube.delete(path, uid=str((stale.get("metadata") or {}).get("uid", "")))
        except KubeError as exc:
            return f"deleting the {kind} {facts.name} of the previous plan: {exc}"
        log.info("deleted %s %s/%s of the previous plan", kind, facts.namespace, facts.name)
    return None


def _weights_observed(kube: Kube, facts: reconcile.Facts) -> weights.Observed | None:
    """What the weights' decision reads (kvright.weights): a PVC source's claim; the cache's claim and
    download Job; an Image source's vLLM pods (their kubelets report a failed pull). None for the hub.
    A failed read is an Observed error (the decision is then Unknown and the workload waits)."""
    spec = facts.spec_or_error
    if isinstance(spec, api.SpecError) or spec.model.source is None or spec.model.source.type == "Hub":
        return None
    source, ns = spec.model.source, facts.namespace
    claims = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    try:
        if source.image is not None:
            return weights.Observed(pods=tuple(kube.pods(ns, selector(facts.name))))
        if source.pvc is not None:
            return weights.Observed(claim=kube.get(f"{claims}/{quote(source.pvc.claim_name)}"))
        job = weights.fill_job_name(facts.name, weights.cache_key(*weights.cache_target(spec.model)))
        return weights.Observed(
            claim=kube.get(f"{claims}/{quote(weights.cache_claim_name(facts.name))}"),
            job=kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{quote(job)}"),
        )
    except KubeError as exc:
        return weights.Observed(error=str(exc))


def _starting_pods(
    kube: Kube, facts: reconcile.Facts, *, now: datetime.datetime, grace: float
) -> tuple[dict[str, Any], ...] | None:
    """The vLLM pods, listed only while pods start: the last status saw fewer Ready than exist or are
    planned, or was not deployed, or became Ready less than ``grace`` ago (the reconcile that saw the last
    pod Ready may have listed the pods a moment before it was). Their starts teach the cold start
    (kvright.podstarts). None otherwise, or when the list fails (learning waits; nothing else needs it)."""
    last = facts.current_status
    planned = (last.get("plan") or {}).get("replicas")
    deployed = cond.find(last.get("conditions"), cond.DEPLOYED)
    ready = cond.find(last.get("conditions"), cond.READY) or {}
    since = podstarts.parse_time(ready.get("lastTransitionTime"))
    settled = (
        deployed is not None
        and deployed.get("status") == "True"
        and ready.get("status") == "True"
        and since is not None
        and (now - since).total_seconds() >= grace
        and last.get("readyReplicas") == last.get("replicas") == planned
    )
    if settled:
        return None
    try:
        return tuple(kube.pods(facts.namespace, selector(facts.name)))
    except KubeError as exc:
        log.debug("listing the vLLM pods of %s/%s for their starts: %s", facts.namespace, facts.name, exc)
        return None


def _controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return bool(uid) and any(r.get("controller") and r.get("uid") == uid for r in refs)


def _nodes(index: Any) -> list[inventory.GPUNode]:
    """All GPU nodes in the kopf index (product -> store of GPUNode)."""
    return [node for key in list(index) for node in list(index.get(key, ()))]


def _post_event(kube: Kube, ref: Mapping[str, Any], event: reconcile.Event, now: datetime.datetime) -> None:
    """A core/v1 Event about ``ref`` through the API (what kopf.event does inside handlers)."""
    meta = ref.get("metadata") or {}
    stamp = now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{meta.get('name', 'llmdeployment')}.",
            "namespace": meta.get("namespace"),
        },
        "involvedObject": {
            "apiVersion": ref.get("apiVersion"),
            "kind": ref.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        },
        "type": event.type,
        "reason": event.reason,
        "message": event.message[:1024],
        "source": {"component": "kvright"},
        "reportingComponent": "kvright",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    try:
        kube.request("POST", f"/api/v1/namespaces/{meta.get('namespace')}/events", body=body)
    except KubeError as exc:
        log.warning("posting event %s about %s failed: %s", event.reason, meta.get("name"), exc)


def _object_path(namespace: str, name: str) -> str:
    """The API path of one LLMDeployment."""
    return f"/apis/{api.GROUP}/{api.VERSION}/namespaces/{namespace}/{api.PLURAL}/{quote(name)}"


async def _reconcile(
    body: Any,
    runtime: Runtime,
    nodes: list[inventory.GPUNode],
    gpu_pods: GPUPods | None = None,
    *,
    read_at: float | None = None,
) -> Outcome | None:
    """Reconcile one object under its lock. ``read_at`` is when ``body`` was read (the sweep's listing);
    None for a watch event's body, whose age is unknown. A body that may predate this operator's last
    status write for the object is read again first; an object gone by then is skipped (None)."""
    meta = body.get("metadata") or {}
    uid = meta.get("uid", "")
    loop = asyncio.get_running_loop()
    async with runtime.lock_for(uid):
        if runtime.stale(uid, read_at):
            fresh = await loop.run_in_executor(
                runtime.executor,
                runtime.kube.get,
                _object_path(str(meta.get("namespace")), str(meta.get("name"))),
            )
            if fresh is None or (fresh.get("metadata") or {}).get("uid") != uid:
                return None
            body = fresh
        snapshot = copy.deepcopy(dict(body))
        outcome = await loop.run_in_executor(
            runtime.executor, reconcile_once, snapshot, runtime, nodes, gpu_pods
        )
        if outcome.status_written:
            runtime.wrote_status(uid)
    ref = {"apiVersion": api.API_VERSION, "kind": api.KIND, **snapshot}
    for event in outcome.events:
        if not runtime.first_post(meta.get("uid", ""), event):
            continue
        try:
            kopf.event(ref, type=event.type, reason=event.reason, message=event.message[:1024])
        except LookupError:
            # kopf.event only works inside kopf's handler context; the sweep task runs outside it.
            await loop.run_in_executor(
                runtime.executor, _post_event, runtime.kube, ref, event, runtime.clock()
            )
    cond = outcome.desired.plan_feasible
    namespace, name = meta.get("namespace"), meta.get("name")
    log.debug("reconciled %s/%s: %s %s (%s)", namespace, name, cond.type, cond.status, cond.reason)
    return outcome


# --- kopf wiring -------------------------------------------------------------------------------------


@kopf.on.startup()
async def configure(*, settings: kopf.OperatorSettings, memo: Any, logger: Any, **_: Any) -> None:
    """Settings in one place: our own prefixes, quiet kopf events, the shared runtime, the sweep."""
    settings.persistence.finalizer = f"{PREFIX}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    # kopf's own per-handler log lines are not worth an Event each; ours are posted explicitly.
    settings.posting.level = logging.WARNING
    # Events from handlers (kopf.event) name kvright as their source, as the sweep's own do, so that
    # `kubectl describe` and anything filtering on the reporting component sees one controller.
    settings.posting.reporting_component = "kvright"
    settings.posting.reporting_instance = os.environ.get("HOSTNAME", "kvright")
    settings.execution.max_workers = 16
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    if not hasattr(memo, "runtime"):
        memo.runtime = runtime_from_env(os.environ)
    if memo.runtime.settings.peering:
        # kopf's default priority is 0 for every replica, and kopf pauses all replicas that share the top
        # priority: each replica draws its own, so that exactly one works (kvright.peering). A priority
        # given to kopf (`kopf run --priority`) is kept.
        if not settings.peering.priority:
            settings.peering.priority = random.SystemRandom().randint(*peering.PRIORITY_RANGE)
        memo.runtime.peering_priority = settings.peering.priority
        logger.info(
            "peering %r with priority %d: the replica with the highest priority works, the others stand by",
            memo.runtime.settings.peering,
            settings.peering.priority,
        )
    logger.info("kvright settings: %s", memo.runtime.settings)
    for warning in memo.runtime.settings.warnings():
        logger.warning("%s", warning)
    if memo.runtime.settings.fault_exit_after_writes:
        logger.warning(
            "fault injection armed (a test seam): the operator exits after %d API writes",
            memo.runtime.settings.fault_exit_after_writes,
        )
    if memo.runtime.settings.fault_pause_after_writes:
        logger.warning(
            "fault injection armed (a test seam): the operator stops itself (SIGSTOP) after %d API writes",
            memo.runtime.settings.fault_pause_after_writes,
        )
    memo.sweeper = asyncio.get_running_loop().create_task(sweep(memo.runtime, logger=logger))
    port = memo.runtime.settings.metrics_port
    if port and getattr(memo, "metrics_server", None) is None:
        address = metrics.metrics_address_from_env(os.environ)
        memo.metrics_server = metrics.serve(port=port, address=address)
        logger.info("operator metrics on http://%s:%d/metrics", address, memo.metrics_server.port)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod, the ServiceAccount; else $KUBECONFIG, read when the operator starts (the kubernetes
    client's own default is fixed when it is imported, which breaks in-process test runners)."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return kopf.login_with_service_account(**kwargs)
    return kopf.login_with_kubeconfig(**kwargs)


@kopf.index("", "v1", "nodes")
def gpu_nodes(body: kopf.Body, **_: Any) -> dict[str, inventory.GPUNode] | None:
    """Nodes with GPUs, keyed by product (GFD label)."""
    node = inventory.gpu_node(body)
    return None if node is None else {node.product: node}


async def _changed(
    body: kopf.Body, memo: kopf.Memo, gpu_nodes: kopf.Index[Any, Any], logger: Any, retry: int
) -> None:
    if body.get("metadata", {}).get("deletionTimestamp"):
        return
    outcome = await _reconcile(body, memo.runtime, _nodes(gpu_nodes))
    if outcome is not None and outcome.desired.retry_seconds is not None:
        raise kopf.TemporaryError(outcome.desired.plan_feasible.message, delay=reconcile.retry_delay(retry))


@kopf.on.create(api.GROUP, api.VERSION, api.PLURAL)
async def created(
    *, body: kopf.Body, memo: Any, gpu_nodes: Any = None, logger: Any, retry: int, **_: Any
) -> None:
    await _changed(body, memo, gpu_nodes, logger, retry)


@kopf.on.update(api.GROUP, api.VERSION, api.PLURAL, field="spec")
async def updated(
    *, body: kopf.Body, memo: Any, gpu_nodes: Any = None, logger: Any, retry: int, **_: Any
) -> None:
    await _changed(body, memo, gpu_nodes, logger, retry)


@kopf.on.resume(api.GROUP, api.VERSION, api.PLURAL)
async def resumed(
    *, body: kopf.Body, memo: Any, gpu_nodes: Any = None, logger: Any, retry: int, **_: Any
) -> None:
    await _changed(body, memo, gpu_nodes, logger, retry)


async def sweep(runtime: Runtime, *, logger: Any) -> None:
    """Level-based reconciliation: every period, list the LLMDeployments and the Nodes and reconcile
    each object again (idempotent: SSA re-asserts owned fields, status is written only on change).

    One operator-wide loop rather than a kopf timer or daemon per object, because those need a
    finalizer on every LLMDeployment (a delete would then wait for the operator) and an extra write and
    round trip on every create."""
    limit = asyncio.Semaphore(8)

    async def one(
        body: dict[str, Any], nodes: list[inventory.GPUNode], pods: PodsOnce, read_at: float
    ) -> None:
        async with limit:
            try:
                await _reconcile(body, runtime, nodes, pods, read_at=read_at)
            except Exception as exc:  # one object's failure must not stop the others or the loop
                meta = body.get("metadata") or {}
                logger.warning(
                    "periodic reconcile of %s/%s failed: %s: %s",
                    meta.get("namespace"),
                    meta.get("name"),
                    type(exc).__name__,
                    exc,
                )

    standing: str | None = None
    while True:
        await asyncio.sleep(runtime.settings.reconcile_seconds)
        runtime.last_sweep = time.monotonic()  # the liveness probe's heartbeat, standing by included
        if runtime.settings.peering:
            try:
                why = await asyncio.get_running_loop().run_in_executor(runtime.executor, runtime.standing_by)
            except Exception as exc:  # no evidence this replica is the one to work: ask again next period
                logger.warning("periodic reconcile: reading the peering: %s: %s", type(exc).__name__, exc)
                continue
            if why != standing:
                logger.info("periodic reconcile: %s", f"standing by: {why}" if why else "this replica works")
                standing = why
            if why is not None:
                continue
        read_at = time.monotonic()
        try:
            bodies, nodes = await asyncio.get_running_loop().run_in_executor(
                runtime.executor, runtime.list_all
            )
        except Exception as exc:  # the API server away, or anything else: try again next period
            logger.warning("periodic reconcile: listing failed: %s: %s", type(exc).__name__, exc)
            continue
        live = [b for b in bodies if not (b.get("metadata") or {}).get("deletionTimestamp")]
        pods = PodsOnce(runtime)
        await asyncio.gather(*(one(b, nodes, pods, read_at) for b in live))


STALL_PERIODS = 10
"""A periodic reconcile that began no pass for this many periods (at least STALL_MIN_SECONDS) past its
own period is stuck; the liveness probe fails so that the kubelet restarts the operator."""
STALL_MIN_SECONDS = 600.0


def sweep_health(task: asyncio.Task[None] | None, last_pass: float, now: float, period: float) -> str | None:
    """Why the periodic reconcile (the sweep: level-based reconcile and the feedback loop) is not working,
    or None while it is. ``last_pass`` and ``now`` are ``time.monotonic()`` readings.

    A pass over many objects may take long, so only a pass that has not ended after
    ``max(STALL_PERIODS x period, STALL_MIN_SECONDS)`` counts as stuck."""
    if task is None:
        return "the periodic reconcile was never started"
    if task.done():
        error = None if task.cancelled() else task.exception()
        return f"the periodic reconcile stopped{f': {type(error).__name__}: {error}' if error else ''}"
    waited = now - last_pass
    allowed = period + max(STALL_PERIODS * period, STALL_MIN_SECONDS)
    if waited > allowed:
        return (
            f"the periodic reconcile began no pass for {waited:.0f} s (period {period:g} s, allowed "
            f"{allowed:.0f} s): a pass is stuck"
        )
    return None


@kopf.on.probe(id="periodicReconcile")
async def periodic_reconcile_alive(*, memo: Any, **_: Any) -> dict[str, Any]:
    """Part of ``/healthz`` (KVRIGHT_HEALTH_PORT): kopf answers it on the operator's event loop, so a
    blocked loop fails the probe by timing out; this handler fails it (HTTP 500) when the periodic
    reconcile has stopped or is stuck."""
    runtime = getattr(memo, "runtime", None)
    if runtime is None:
        return {"starting": True}
    now = time.monotonic()
    period = runtime.settings.reconcile_seconds
    why = sweep_health(getattr(memo, "sweeper", None), runtime.last_sweep, now, period)
    if why is not None:
        raise kopf.PermanentError(why)
    return {"lastPassSecondsAgo": round(now - runtime.last_sweep, 1)}


@kopf.on.cleanup()
async def stop_sweep(*, memo: Any, **_: Any) -> None:
    task = getattr(memo, "sweeper", None)
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    memo.runtime.executor.shutdown(wait=False, cancel_futures=True)
    server = getattr(memo, "metrics_server", None)
    if server is not None:
        server.close()
        memo.metrics_server = None


@kopf.on.delete(api.GROUP, api.VERSION, api.PLURAL, optional=True)
async def deleted(*, uid: str, name: str, namespace: str | None, memo: Any, **_: Any) -> None:
    """Forget the object's lock and metrics (optional: no finalizer; the garbage collector removes
    the children)."""
    memo.runtime.forget(uid)
    metrics.METRICS.remove(namespace or "", name)


def cap_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas (``mallopt(M_ARENA_MAX)``) before any thread starts; whether it was set.

    glibc gives each thread that allocates concurrently its own arena, up to 8 per core, and memory freed
    in one is seldom returned to the system: with 16 reconcile threads allocating at once (bodies, plans,
    API answers), the operator's RSS climbed step by step through bench-operator's soak (1,000 objects,
    20 minutes: 187 -> 266 MiB, first to last quarter mean); with two arenas it stayed lower (docs/operator.md
    "Scale"). A MALLOC_ARENA_MAX in the environment wins; not glibc (musl, macOS): a no-op."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False


def health_endpoint(port: int, address: str) -> str | None:
    """kopf's liveness endpoint URL for ``/healthz`` on ``address:port``; None when the port is 0 (off)."""
    if not port:
        return None
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{port}/healthz"


def main(argv: list[str] | None = None) -> int:
    """Run the operator (``python -m kvright.operator``): cluster-wide, or the KVRIGHT_NAMESPACES."""
    cap_malloc_arenas()
    try:
        s = settings_mod.from_env(os.environ)
    except settings_mod.SettingsError as exc:
        # One line, no traceback: the pod's last log line (kubectl logs --previous) says what to fix.
        print(f"kvright: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=s.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kopf.run(
        clusterwide=not s.namespaces,
        namespaces=list(s.namespaces),
        standalone=not s.peering,
        peering_name=s.peering or None,
        liveness_endpoint=health_endpoint(s.health_port, metrics.metrics_address_from_env(os.environ)),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
