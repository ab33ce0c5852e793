"""The local control plane as tests, demos and benches reach it: where its kubeconfig and its API server's
audit log are, server-side apply, the LLMDeployment CRD installed and Established, and one of its servers
restarted, or stopped and started again (fault tests).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from kvright.operator import Kube
from kvright_dev.procs import ROOT, wait_until

__all__ = [
    "CRD",
    "apply",
    "audit_logs",
    "crd_established",
    "install_crd",
    "local_kubeconfig",
    "ports",
    "restart",
    "start_server",
    "stop_server",
]

CRD = ROOT / "crds" / "llmdeployment.yaml"
CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SCRIPT = ROOT / "deploy" / "cluster.sh"


def local_kubeconfig() -> Path:
    """``$KUBECONFIG``, else the one ``make cluster-up`` wrote (``$KVRIGHT_CLUSTER_DIR/kubeconfig``,
    by default under ~/.cache/kvright/cluster). It may not exist: callers say how to start one."""
    cluster_dir = Path(os.environ.get("KVRIGHT_CLUSTER_DIR", Path.home() / ".cache" / "kvright" / "cluster"))
    return Path(os.environ.get("KUBECONFIG") or cluster_dir / "kubeconfig")


def ports(cluster_dir: Path) -> dict[str, str]:
    """The ports ``deploy/cluster.sh up`` chose for the control plane in ``cluster_dir`` (its ``ports.env``:
    ``APISERVER_PORT``, ``ETCD_PORT``, ...); empty when that file is not there."""
    env = cluster_dir / "ports.env"
    if not env.is_file():
        return {}
    return dict(line.split("=", 1) for line in env.read_text().splitlines() if "=" in line)


def audit_logs(cluster_dir: Path) -> list[Path]:
    """The audit log files of the cluster.sh control plane in ``cluster_dir``, oldest first: the rotated
    backup (``audit-<time>.log``), if any, then ``audit.log``. Every request a ServiceAccount makes is one
    JSON line there (audit.k8s.io/v1 Event, Metadata level; deploy/cluster.sh writes the policy). Empty
    when the cluster was started without it (before cluster.sh logged audits, or kind)."""
    folder = cluster_dir / "audit"
    backups = sorted(p for p in folder.glob("audit-*.log"))
    current = folder / "audit.log"
    return [*backups, *([current] if current.is_file() else [])]


def apply(kube: Kube, path: str, obj: dict[str, Any], *, field_manager: str) -> Any:
    """Server-side apply ``obj`` at ``path`` (forcing conflicts: the caller owns these fields)."""
    return kube.request(
        "PATCH",
        path,
        query=[("fieldManager", field_manager), ("force", "true")],
        body=obj,
        content_type="application/apply-patch+yaml",
    )


def crd_established(kube: Kube, name: str) -> bool:
    got = kube.get(f"{CRDS_PATH}/{name}") or {}
    return any(
        c["type"] == "Established" and c["status"] == "True"
        for c in (got.get("status") or {}).get("conditions") or []
    )


def install_crd(kube: Kube, *, field_manager: str, timeout: float = 60) -> None:
    """Apply the repository's LLMDeployment CRD and wait until it is Established."""
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    name = crd["metadata"]["name"]
    apply(kube, f"{CRDS_PATH}/{name}", crd, field_manager=field_manager)
    wait_until(lambda: crd_established(kube, name), timeout, what=f"the CRD {name} to be Established")


def restart(component: str, cluster_dir: Path, *, kill: bool = False, timeout: float = 180) -> float:
    """Restart ``etcd`` or ``kube-apiserver`` of the cluster.sh control plane in ``cluster_dir``
    (``deploy/cluster.sh restart``: the same flags, ports and data; ``kill``: SIGKILL, a crash, rather than
    SIGTERM) and return, in seconds taken, once the API server's /readyz says ok again. Raises
    RuntimeError with the script's last lines when it fails or outlasts ``timeout``."""
    return _server("restart", component, cluster_dir, kill=kill, timeout=timeout)


def stop_server(component: str, cluster_dir: Path, *, kill: bool = False, timeout: float = 60) -> float:
    """The first half of :func:`restart`: the server stopped, its ports free (an outage until
    :func:`start_server`)."""
    return _server("stop-server", component, cluster_dir, kill=kill, timeout=timeout)


def start_server(component: str, cluster_dir: Path, *, timeout: float = 180) -> float:
    """The second half of :func:`restart`: the stopped server started, the API server's /readyz ok."""
    return _server("start-server", component, cluster_dir, kill=False, timeout=timeout)


def _server(action: str, component: str, cluster_dir: Path, *, kill: bool, timeout: float) -> float:
    env = {**os.environ, "KVRIGHT_CLUSTER_DIR": str(cluster_dir)}
    args = ["bash", str(SCRIPT), action, component, *(["--kill"] if kill else [])]
    what = " ".join(args[1:])
    started = time.monotonic()
    try:
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what} took over {timeout:g} s (logs in {cluster_dir}/logs)") from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return time.monotonic() - started
