"""Helpers shared by the operator's integration tests: the admin client, namespaces, the CRD, the
operator in-process (kopf.testing.KopfRunner) or as a process, and polling for a state instead of sleeping.

The control plane is the real one from ``deploy/cluster.sh`` (kube-apiserver, etcd, controller-manager,
scheduler, kwok GPU nodes). Its kubeconfig is ``$KUBECONFIG`` or ``$KVRIGHT_CLUSTER_DIR/kubeconfig``; a
test fails (never skips) when it does not answer, saying how to start it.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import secrets
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kopf.testing import KopfRunner

from kvright import api
from kvright.operator import Kube, KubeError, api_client
from kvright_dev import cluster
from kvright_dev.cluster import local_kubeconfig
from kvright_dev.operator_process import OperatorProcess, operator_settings
from kvright_dev.procs import wait_until

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "llmdeployment.yaml"
T = TypeVar("T")


def kubeconfig() -> str:
    path = local_kubeconfig()
    if not path.is_file():
        pytest.fail(f"no kubeconfig at {path}: start the local control plane with `make cluster-up`")
    return str(path)


def admin() -> Kube:
    """The admin client; fails the test when the API server does not answer /readyz."""
    os.environ["KUBECONFIG"] = kubeconfig()
    kube = Kube(api_client(), timeout_seconds=30)
    try:
        kube.request("GET", "/readyz")
    except (KubeError, ValueError) as exc:
        pytest.fail(f"the local control plane does not answer ({exc}): run `make cluster-up`")
    return kube


def install_crd(kube: Kube) -> None:
    """Server-side apply the CRD and wait until it is Established."""
    cluster.install_crd(kube, field_manager="kvright-tests")


def admin_with_crd() -> Kube:
    """The admin client with the LLMDeployment CRD installed: the setup of every operator test module."""
    kube = admin()
    install_crd(kube)
    return kube


def poll(predicate: Callable[[], T], *, what: str, timeout: float = 90.0) -> T:
    """Poll until ``predicate`` returns something truthy (kvright_dev.procs.wait_until)."""
    return wait_until(predicate, timeout, what=what)


@contextlib.contextmanager
def namespace(kube: Kube, prefix: str) -> Iterator[str]:
    """A fresh namespace named ``prefix-<random>``, deleted afterwards (see :func:`namespace_named`)."""
    with namespace_named(kube, f"{prefix}-{secrets.token_hex(3)}") as name:
        yield name


@contextlib.contextmanager
def namespace_named(kube: Kube, name: str) -> Iterator[str]:
    """The namespace ``name``, created, ready for pods (its default ServiceAccount exists), deleted after."""
    kube.request(
        "POST",
        "/api/v1/namespaces",
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    # The ServiceAccount admission plugin rejects pods until the namespace's default SA exists.
    poll(lambda: kube.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"), what=f"{name}/default SA")
    try:
        yield name
    finally:
        with contextlib.suppress(KubeError):
            kube.request("DELETE", f"/api/v1/namespaces/{name}")


class FakeHub(http.server.ThreadingHTTPServer):
    """A loopback stand-in for the model hub: serves ``config`` as every ``config.json`` to requests bearing
    ``token`` (any other file is not there: 404), 401 to the rest, and remembers which paths it served and
    refused."""

    def __init__(self, token: str, config: Mapping[str, Any]) -> None:
        self.token = token
        self.authorized: list[str] = []
        self.refused: list[str] = []
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                ok = self.headers.get("Authorization") == f"Bearer {hub.token}"
                (hub.authorized if ok else hub.refused).append(self.path)
                found = ok and self.path.endswith("/config.json")
                body = json.dumps(dict(config)).encode() if found else b"{}"
                self.send_response(200 if found else 404 if ok else 401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


@contextlib.contextmanager
def operator(
    ns: str, *, reconcile_seconds: float = 2.0, env: dict[str, str] | None = None
) -> Iterator[KopfRunner]:
    """The kvright operator in this process (kopf.testing.KopfRunner), watching one namespace."""
    values = {**operator_settings(namespace=ns, reconcile_seconds=reconcile_seconds), **(env or {})}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in values.items():
            mp.setenv(key, value)
        args = ["run", "--standalone", "--namespace", ns, "-m", "kvright.operator"]
        with KopfRunner(args, timeout=60) as runner:
            yield runner
    assert runner.exception is None, runner.output[-4000:]


@contextlib.contextmanager
def operator_namespace(kube: Kube, prefix: str, **options: Any) -> Iterator[str]:
    """A fresh namespace (see ``namespace``) with the operator running on it (see ``operator``, which
    takes ``options``); the operator stops before the namespace is deleted."""
    with namespace(kube, prefix) as ns, operator(ns, **options):
        yield ns


def spawn_operator(
    ns: str,
    *,
    log: Path | None = None,
    reconcile_seconds: float = 2.0,
    debug: Sequence[str] = (),
    **env: str,
) -> subprocess.Popen[bytes]:
    """The operator as a process of its own (kvright_dev.operator_process, running ``kvright.operator.main``:
    so that it can be killed, paused or made to exit), watching ``ns`` with its sweep every
    ``reconcile_seconds``, with ``env`` on top. Its log goes to ``log`` (None: discarded) at INFO, and at
    DEBUG for the ``debug`` loggers. Its liveness endpoint is on a free loopback port (``KVRIGHT_HEALTH_PORT``
    in ``env`` names one), so that operators run side by side, as in production, each serve their own."""
    return OperatorProcess(
        namespace=ns, reconcile_seconds=reconcile_seconds, log=log, debug=debug, env=env
    ).proc


@contextlib.contextmanager
def operator_process(
    ns: str, log: Path, *, debug: Sequence[str] = (), **env: str
) -> Iterator[subprocess.Popen[bytes]]:
    """:func:`spawn_operator` for the duration of a block; stopped at the end (continued first, should it
    be paused; killed after 20 s)."""
    with OperatorProcess(namespace=ns, reconcile_seconds=2.0, log=log, debug=debug, env=env) as operator:
        yield operator.proc


def llmd_path(ns: str, name: str = "") -> str:
    base = f"/apis/{api.GROUP}/{api.VERSION}/namespaces/{ns}/{api.PLURAL}"
    return f"{base}/{name}" if name else base


def patch_spec(kube: Kube, ns: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """An edit of the LLMDeployment ``ns/name``: ``spec`` merged into its spec (a JSON merge patch, as
    ``kubectl patch --type merge``); returns the object as patched."""
    patched: dict[str, Any] = kube.request(
        "PATCH", llmd_path(ns, name), body={"spec": spec}, content_type="application/merge-patch+json"
    )
    return patched


def create(kube: Kube, obj: dict[str, Any], ns: str) -> dict[str, Any]:
    obj = {**obj, "metadata": {**obj["metadata"], "namespace": ns}}
    result: dict[str, Any] = kube.request("POST", llmd_path(ns), body=obj)
    return result


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}


def reconciled(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    """The LLMDeployment once its status describes its current generation, else None."""
    obj = kube.get(llmd_path(ns, name))
    if obj is None:
        return None
    gen = obj["metadata"].get("generation")
    pf = condition(obj, "PlanFeasible")
    if (obj.get("status") or {}).get("observedGeneration") == gen and pf.get("observedGeneration") == gen:
        return obj
    return None


def events(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    got = kube.request(
        "GET", f"/api/v1/namespaces/{ns}/events", query=[("fieldSelector", f"involvedObject.name={name}")]
    )
    return list(got.get("items") or [])
