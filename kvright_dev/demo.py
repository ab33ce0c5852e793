"""``python -m kvright_dev.demo``: the operator on the local control plane, end to end, in one command.

Expects the chart installed (``make chart-install``: the CRD, the ServiceAccount and its RBAC, the
alert rules and dashboards). The chart's own operator Deployment is scaled to 0 here, because kwok
runs no containers; instead the demo starts the operator from this checkout (``python -m
kvright.operator`` watching the ``kvright-demo`` namespace) with a token the API server issues for the
chart's ServiceAccount, so it works with exactly the chart's permissions. It then applies
``deploy/samples/*.yaml``, waits until each is reconciled (and the
feasible ones Ready: their pods scheduled on kwok's fake GPU nodes), prints the LLMDeployments the way
``kubectl get llmdeployments`` does (the API server's own Table, with the CRD's printer columns), one
status in full and the infeasible one's event, then stops the operator. The cluster stays up
(``make cluster-down`` stops it). Re-running is safe: everything is applied server-side.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kvright import api
from kvright.operator import Kube, KubeError, api_client
from kvright_dev.cluster import CRD, apply, crd_established, local_kubeconfig
from kvright_dev.operator_process import OperatorProcess, temp_log
from kvright_dev.procs import WaitFailed, sigterm_interrupts, wait_until

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "kvright-demo"
SHOWN = "llama-70b-chat"
"""The sample whose status is printed in full."""
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
SERVICE_ACCOUNT = os.environ.get("KVRIGHT_DEMO_SERVICE_ACCOUNT", "kvright-system/kvright")
"""namespace/name of the chart's ServiceAccount, whose identity the demo's operator runs with."""
T = TypeVar("T")


def _service_account_kubeconfig(kube: Kube, admin_kubeconfig: str, namespace: str, name: str) -> Path:
    """A private kubeconfig: the admin one's cluster and a one-hour token issued for the ServiceAccount.

    The token goes only into this 0600 file (deleted when the demo ends), never to the terminal.
    """
    review = kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    admin = yaml.safe_load(Path(admin_kubeconfig).read_text(encoding="utf-8"))
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    cluster = next(c for c in admin["clusters"] if c["name"] == context["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": name, "user": {"token": review["status"]["token"]}}],
        "contexts": [{"name": name, "context": {"cluster": cluster["name"], "user": name}}],
        "current-context": name,
    }
    fd, path = tempfile.mkstemp(prefix="kvright-demo-sa-", suffix=".kubeconfig")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)
    return Path(path)


def _apply(kube: Kube, path: str, obj: dict[str, Any]) -> None:
    apply(kube, path, obj, field_manager="kvright-demo")


def _cache_volume(kube: Kube, obj: dict[str, Any]) -> None:
    """For a sample whose weights come from the shared cache (spec.model.source.type Cache): the
    PersistentVolume a storage provisioner would make for its claim (the local control plane has none),
    bound in advance to ``<name>-weights``. Nothing is written there: kwok runs no containers."""
    source = obj["spec"]["model"].get("source") or {}
    if source.get("type") != "Cache":
        return
    claim = f"{obj['metadata']['name']}-weights"
    size = (source.get("cache") or {}).get("size", "50Gi")
    name = f"{NAMESPACE}-{claim}"
    _apply(kube, f"/api/v1/persistentvolumes/{name}", {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"/tmp/{name}"},
            "claimRef": {"namespace": NAMESPACE, "name": claim},
        },
    })  # fmt: skip


def print_cache(kube: Kube, name: str) -> None:
    """The shared cache of one sample: its claim, its download Job and what the vLLM pods load."""
    claim = kube.get(f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/{name}-weights") or {}
    selector = f"app.kubernetes.io/component=model-cache,kvright.dev/llmdeployment={name}"
    jobs = kube.request(
        "GET", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", query=[("labelSelector", selector)]
    ).get("items") or []  # fmt: skip
    print(f"\n{name} loads from the shared cache:")
    print(f"  PersistentVolumeClaim {name}-weights   {(claim.get('status') or {}).get('phase', '?')}")
    for job in jobs:
        st = job.get("status") or {}
        finished = [c["type"] for c in st.get("conditions") or () if c.get("status") == "True"]
        print(f"  Job {job['metadata']['name']}   {', '.join(finished) or 'running'}, "
              f"{st.get('succeeded', 0)} download pod succeeded")  # fmt: skip
    obj = kube.get(f"/apis/{api.GROUP}/{api.VERSION}/namespaces/{NAMESPACE}/{api.PLURAL}/{name}") or {}
    ready = _condition(obj, "WeightsReady")
    print(f"  WeightsReady={ready.get('status')} ({ready.get('reason')}): {ready.get('message')}")


def _wait(
    what: str, check: Callable[[], T | None], timeout: float, *, operator: OperatorProcess | None = None
) -> T:
    """``check()`` until truthy (an API error counts as not yet); SystemExit naming ``what`` on a timeout
    or when ``operator`` exits first."""
    give_up = operator.exited if operator is not None else None
    try:
        return wait_until(check, timeout, what=what, interval=0.5, transient=(KubeError,), give_up=give_up)
    except WaitFailed as exc:
        raise SystemExit(f"demo: {exc}") from None


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}


def _done(kube: Kube, name: str) -> dict[str, Any] | None:
    obj = kube.get(f"/apis/{api.GROUP}/{api.VERSION}/namespaces/{NAMESPACE}/{api.PLURAL}/{name}")
    if obj is None or (obj.get("status") or {}).get("observedGeneration") != obj["metadata"]["generation"]:
        return None
    feasible = _condition(obj, "PlanFeasible").get("status") == "True"
    if feasible and _condition(obj, "Ready").get("status") != "True":
        return None
    return obj


def print_table(kube: Kube) -> None:
    table = kube.request(
        "GET", f"/apis/{api.GROUP}/{api.VERSION}/namespaces/{NAMESPACE}/{api.PLURAL}", accept=TABLE
    )
    columns = [
        (i, c["name"].upper()) for i, c in enumerate(table["columnDefinitions"]) if c.get("priority", 0) == 0
    ]
    rows = [
        [str(r["cells"][i]) if r["cells"][i] is not None else "" for i, _ in columns] for r in table["rows"]
    ]
    widths = [max(len(h), *(len(row[j]) for row in rows)) for j, (_, h) in enumerate(columns)]
    print("   ".join(h.ljust(w) for (_, h), w in zip(columns, widths, strict=True)).rstrip())
    for row in rows:
        print("   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def main() -> int:
    sigterm_interrupts()  # a stopped demo still stops its operator
    kubeconfig = str(local_kubeconfig())
    os.environ["KUBECONFIG"] = kubeconfig
    kube = Kube(api_client())
    crd_name = yaml.safe_load(CRD.read_text(encoding="utf-8"))["metadata"]["name"]
    _wait(
        "the chart's CRD to be Established (install the chart first: make chart-install)",
        lambda: crd_established(kube, crd_name),
        60,
    )
    _apply(
        kube,
        f"/api/v1/namespaces/{NAMESPACE}",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    )
    _wait(
        "the namespace's default ServiceAccount",
        lambda: kube.get(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"),
        60,
    )

    sa_namespace, _, sa_name = SERVICE_ACCOUNT.partition("/")
    operator_kubeconfig = _service_account_kubeconfig(kube, kubeconfig, sa_namespace, sa_name)
    log = temp_log("kvright-demo-operator-")
    print(
        f"demo: operator starting as the chart's ServiceAccount {SERVICE_ACCOUNT} "
        f"(python -m kvright.operator, log {log})",
        flush=True,
    )
    # Cluster-wide, as the chart installed it: a namespaced operator (KVRIGHT_NAMESPACES) follows its
    # namespaces through a namespaces listing that only the chart's namespaced mode grants. /healthz on a
    # free port, as the chart's liveness probe reads it.
    operator = OperatorProcess(kubeconfig=operator_kubeconfig, reconcile_seconds=5, log=log)
    try:
        names = []
        for path in sorted((ROOT / "deploy" / "samples").glob("*.yaml")):
            obj = yaml.safe_load(path.read_text(encoding="utf-8"))
            name = obj["metadata"]["name"]
            names.append(name)
            obj["metadata"]["namespace"] = NAMESPACE
            _cache_volume(kube, obj)
            _apply(kube, f"/apis/{api.GROUP}/{api.VERSION}/namespaces/{NAMESPACE}/{api.PLURAL}/{name}", obj)
            print(f"demo: applied {path.relative_to(ROOT)}", flush=True)
        done = {}
        for name in names:
            done[name] = _wait(
                f"{name} to be reconciled", functools.partial(_done, kube, name), 180, operator=operator
            )
        print("\n$ kubectl get llmdeployments -n kvright-demo")
        print_table(kube)
        full = done.get(SHOWN) or done[names[0]]
        print(f"\n$ kubectl get llmdeployment {full['metadata']['name']} -n kvright-demo -o yaml   # status")
        print(yaml.safe_dump({"status": full["status"]}, sort_keys=False, width=120).rstrip())
        for name in names:
            pf = _condition(done[name], "PlanFeasible")
            if pf.get("status") != "True":
                print(f"\n{name}: PlanFeasible={pf.get('status')} ({pf.get('reason')}): {pf.get('message')}")
        cached = [n for n in names if _condition(done[n], "WeightsReady").get("reason")]
        for name in cached:
            print_cache(kube, name)
        vllm = [("labelSelector", "app.kubernetes.io/name=vllm")]
        pods = kube.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", query=vllm).get("items") or []
        print("\nvLLM pods on the fake GPU nodes:")
        for pod in pods:
            limits = pod["spec"]["containers"][0]["resources"]["limits"]
            print(
                f"  {pod['metadata']['name']:<40} {pod['spec'].get('nodeName', '-'):<14} "
                f"{pod['status'].get('phase', '?'):<8} nvidia.com/gpu={limits.get('nvidia.com/gpu')}"
            )
    finally:
        operator.stop()
        operator_kubeconfig.unlink(missing_ok=True)
    print("\ndemo: operator stopped. The cluster is still up: `make cluster-down` stops it;")
    print(f"      `export KUBECONFIG={kubeconfig}` to look around (objects are in namespace {NAMESPACE}).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
