"""The chart's RBAC rules, proven from the API server's own audit log (issue 16): least privilege and
sufficiency, in both of the chart's modes (cluster-wide, and namespaced to one watched namespace).

For each mode the chart is rendered (`helm template`, HA on so the peering rules are in, a Secret reader
namespace so that Role is in), its ServiceAccount, roles, bindings and peering object are applied, and the
operator runs in-process (kopf.testing.KopfRunner) with a token the API server issued for that ServiceAccount,
with Prometheus configured (feedback on). Then every operator path in PATHS runs, one after the other; the
kube-apiserver of deploy/cluster.sh writes every request a ServiceAccount makes to its audit log (Metadata
level), and kvright_dev.rbac_audit compares the requests recorded for this ServiceAccount with the rendered
rules: every granted verb on every resource was used by some path, every request was granted by those rules,
and the authorizer refused nothing. The same comparison, run on copies of the rules with one rule dropped or
one needless verb added, must fail: that shows it can tell.

Real: kube-apiserver with RBAC and its audit log, etcd, controller-manager, scheduler, the LeaderWorkerSet
controller and CRD, the InferencePool CRD, Prometheus (Debian's binary, scraping nothing: the loop reads it
and finds no samples, which is enough to walk the feedback path that reads the HPAs and the rollout).
Faked: the GPU nodes (kwok), the PodMonitor CRD (a stand-in with prometheus-operator's names, installed for
the test when absent), the Hugging Face hub (a loopback server that wants the test's token).

Adding a path is one line in PATHS; a rule a new feature adds to the chart is then checked automatically (it
fails as unused until some path exercises it). In cluster-wide mode the operator also sees other tests'
leftover objects; only requests in this test's namespace (and cluster-scoped ones) count as uses, while an
authorizer refusal anywhere fails the test.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import secrets
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvright.operator import Kube, KubeError
from kvright_dev import rbac_audit
from kvright_dev.cluster import apply, audit_logs
from kvright_dev.prometheus import Prometheus
from kvright_dev.rbac_audit import Grant, Request
from tests.builders import llmd
from tests.fixtures.cluster import Cluster, tool
from tests.integration.kvright_cluster import (
    FakeHub,
    admin_with_crd,
    condition,
    create,
    llmd_path,
    namespace,
    namespace_named,
    patch_spec,
    poll,
    reconciled,
)
from tests.integration.test_operator import POD_MONITOR_CRD

pytestmark = [pytest.mark.cluster, pytest.mark.helm, pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kvright"
PEERING_CRDS = CHART / "files" / "crds" / "kopf-peering.yaml"
CONFIG = json.loads((ROOT / "tests/data/configs/phi-4/config.json").read_text(encoding="utf-8"))
H100, H200 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
LWS = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets/{name}"
POOL = "/apis/inference.networking.k8s.io/v1/namespaces/{ns}/inferencepools/{name}"
PODMONITOR = "/apis/monitoring.coreos.com/v1/namespaces/{ns}/podmonitors/{name}"
DEPLOYMENT = "/apis/apps/v1/namespaces/{ns}/deployments/{name}"
WAIT = 60.0
RENDERED_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                  "ClusterKopfPeering", "KopfPeering"}

EXEMPT = {
    Grant(group="kvright.dev", resource="llmdeployments/finalizers", verb="update"): (
        "children carry ownerReferences with blockOwnerDeletion; where the "
        "OwnerReferencesPermissionEnforcement admission plugin runs (OpenShift, hardened clusters) it "
        "authorizes update on the owner's finalizers inside the child's request, which the audit log "
        "records as that request, never as its own"
    ),
}
"""Grants no request can show (kvright_dev.rbac_audit's ``exempt``), each with the reason."""

VERBS = ("get", "list", "watch", "create", "patch", "update", "delete", "deletecollection")


# --- the scenario every path acts on ------------------------------------------------------------------


@dataclass
class Run:
    """One mode's run: the admin client, the watched namespace, and what happened."""

    kube: Kube
    ns: str
    hub_token: str
    marks: list[tuple[str, datetime.datetime]] = field(default_factory=list)
    """(path name, when it started), in order; requests are attributed to the path running then."""


def settled(run: Run, name: str, **waits: str) -> dict[str, Any]:
    """Poll until ``name`` is reconciled for its generation and every path in ``waits`` exists."""

    def ready() -> dict[str, Any] | None:
        obj = reconciled(run.kube, run.ns, name)
        if obj is None or any(run.kube.get(p.format(ns=run.ns, name=name)) is None for p in waits.values()):
            return None
        return obj

    return poll(ready, what=f"{name} reconciled with {', '.join(waits) or 'its status'}", timeout=WAIT)


CHAT = (llmd("chat").model("llama-3.1-8b").gpu(H200).context(4096, 1024, 256).replicas(1, 2)
        .feedback("Adjust", window_s=30))
TWO_NODES = yaml.safe_load((ROOT / "deploy/samples/llama-3.1-405b-2x-h100.yaml").read_text("utf-8"))["spec"]
"""Llama-3.1-405B at maxGPUs 16: TP 8 x PP 2, one LeaderWorkerSet group over two H100 nodes."""


def one_node_with_feedback_and_an_hpa(run: Run) -> None:
    """Create: a Deployment, its Service, InferencePool and PodMonitor applied, status and events written;
    feedback Adjust reads Prometheus, lists the HPAs (one targets the Deployment) and reads the rollout."""
    run.kube.request("POST", f"/apis/autoscaling/v2/namespaces/{run.ns}/horizontalpodautoscalers", body={
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "chat-hpa"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"},
                 "minReplicas": 1, "maxReplicas": 2}})
    create(run.kube, CHAT.obj(), run.ns)
    settled(run, "chat", deployment=DEPLOYMENT, pool=POOL, podmonitor=PODMONITOR)

    def metrics_judged() -> dict[str, Any] | None:
        got = condition(run.kube.get(llmd_path(run.ns, "chat")), "MetricsAvailable")
        return got if got.get("status") in ("True", "False", "Unknown") else None

    judged = poll(metrics_judged, what="chat's MetricsAvailable condition", timeout=WAIT)
    # FeedbackFailed would mean a read in the feedback path failed (a 403 surfaces there, issue 16).
    assert judged["reason"] != "FeedbackFailed", judged


def config_map_model(run: Run) -> None:
    """The architecture from a ConfigMap (spec.model.configMapRef)."""
    run.kube.request("POST", f"/api/v1/namespaces/{run.ns}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "phi-4"},
        "data": {"config.json": json.dumps(CONFIG)}})
    create(run.kube, llmd("custom").config_map("phi-4", model_name="microsoft/phi-4").gpu(H200).obj(), run.ns)
    obj = settled(run, "custom", deployment=DEPLOYMENT)
    assert condition(obj, "PlanFeasible")["status"] == "True", obj["status"]


def gated_hub_model(run: Run) -> None:
    """The architecture from the hub, with a token the operator reads from a Secret (secret-reader Role)."""
    run.kube.request("POST", f"/api/v1/namespaces/{run.ns}/secrets", body={
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token"},
        "stringData": {"token": run.hub_token}})
    create(run.kube, llmd("gated").hub("microsoft/phi-4", token_secret="hf-token").gpu(H200).obj(), run.ns)
    obj = settled(run, "gated", deployment=DEPLOYMENT)
    assert condition(obj, "PlanFeasible")["status"] == "True", obj["status"]


def to_two_nodes(run: Run) -> None:
    """Edit: the plan spans two nodes, so a LeaderWorkerSet is applied and the Deployment deleted."""
    patch_spec(run.kube, run.ns, "chat", TWO_NODES)
    settled(run, "chat", leaderworkerset=LWS)
    poll(lambda: run.kube.get(DEPLOYMENT.format(ns=run.ns, name="chat")) is None,
         what="the one-node Deployment of chat deleted", timeout=WAIT)


def back_to_one_node(run: Run) -> None:
    """Edit back: a Deployment again, and the LeaderWorkerSet of the previous plan deleted."""
    patch_spec(run.kube, run.ns, "chat", CHAT.spec())
    settled(run, "chat", deployment=DEPLOYMENT)
    poll(lambda: run.kube.get(LWS.format(ns=run.ns, name="chat")) is None,
         what="the LeaderWorkerSet of chat deleted", timeout=WAIT)


def chosen_gpu(run: Run) -> None:
    """No product pinned: kvright chooses among the products present, weighing the GPUs pods hold."""
    create(run.kube, llmd("any").model("llama-3.1-8b").gpu_products(H100, H200).obj(), run.ns)
    obj = settled(run, "any", deployment=DEPLOYMENT)
    assert obj["status"].get("gpu"), obj["status"]


def cached_weights(run: Run) -> None:
    """Weights from the shared cache (model.source Cache): the claim <name>-weights and the download Job,
    read by name and server-side applied once (filling it needs no more of the operator)."""
    spec = llmd("cached").model("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct").gpu(H200)
    create(run.kube, spec.set("model.source", {"type": "Cache"}).obj(), run.ns)
    poll(lambda: run.kube.get(f"/api/v1/namespaces/{run.ns}/persistentvolumeclaims/cached-weights")
         and (run.kube.get(f"/apis/batch/v1/namespaces/{run.ns}/jobs") or {}).get("items"),
         what="the cache's claim and download Job", timeout=WAIT)
    obj = settled(run, "cached")
    assert condition(obj, "WeightsReady")["status"] in ("True", "False"), obj["status"]


def deleted(run: Run) -> None:
    """Delete every LLMDeployment; the operator forgets them (its children go by garbage collection)."""
    for name in ("chat", "custom", "gated", "any", "cached"):
        run.kube.request("DELETE", llmd_path(run.ns, name))
    poll(lambda: not (run.kube.get(llmd_path(run.ns)) or {}).get("items"), what="every LLMDeployment gone",
         timeout=WAIT)
    time.sleep(2)  # a sweep period: the operator lists again and finds nothing to do


PATHS: list[tuple[str, Callable[[Run], None]]] = [
    ("one node, feedback Adjust with Prometheus and an HPA", one_node_with_feedback_and_an_hpa),
    ("architecture from a ConfigMap", config_map_model),
    ("gated hub model, token from a Secret", gated_hub_model),
    ("edit to two nodes (LeaderWorkerSet)", to_two_nodes),
    ("edit back to one node", back_to_one_node),
    ("GPU product chosen by kvright", chosen_gpu),
    ("weights from the shared cache (claim and download Job)", cached_weights),
    ("delete", deleted),
]
"""Every operator path, in order (each waits for its own outcome). Start-up (kopf's watches, peering, the
CRD and namespace observers) is attributed to "operator start"."""


# --- rendering, the ServiceAccount, the operator --------------------------------------------------------


def kubectl(*args: str, kubeconfig: Path, stdin: str | None = None) -> str:
    done = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          input=stdin, timeout=120, check=False)
    if done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args[:3])} failed: {done.stderr.strip()}")
    return done.stdout


def render(release: str, system_ns: str, ns: str, peering: str, *, namespaced: bool) -> list[dict[str, Any]]:
    args = [tool("helm"), "template", release, str(CHART), "--namespace", system_ns,
            "--set", "crds.enabled=false", "--set", "ha.enabled=true", "--set", f"ha.peeringName={peering}",
            "--set", f"rbac.secretReaderNamespaces={{{ns}}}"]
    if namespaced:
        args += ["--set", f"operator.watchNamespaces={{{ns}}}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def sa_kubeconfig(admin: Path, folder: Path, system_ns: str, sa: str) -> Path:
    """A kubeconfig for the ServiceAccount: the admin one's cluster, a token the API server issued."""
    token = kubectl("create", "token", sa, "-n", system_ns, "--duration", "1h", kubeconfig=admin).strip()
    config = yaml.safe_load(admin.read_text(encoding="utf-8"))
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    server = next(c for c in config["clusters"] if c["name"] == current["context"]["cluster"])
    path = folder / f"{sa}.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa", "clusters": [server],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": server["name"], "user": "sa"}}],
    }), encoding="utf-8")
    return path


@contextlib.contextmanager
def optional_crd(kube: Kube, crd: dict[str, Any]) -> Iterator[None]:
    """The CRD installed for the block when absent (removed afterwards), left alone when present."""
    path = f"{CRDS}/{crd['metadata']['name']}"
    existed = kube.get(path) is not None
    if not existed:
        apply(kube, path, crd, field_manager="kvright-tests")
    try:
        poll(lambda: any(c["type"] == "Established" and c["status"] == "True"
                         for c in ((kube.get(path) or {}).get("status") or {}).get("conditions") or []),
             what=f"the CRD {crd['metadata']['name']} Established")
        yield
    finally:
        if not existed:
            with contextlib.suppress(KubeError):
                kube.request("DELETE", path)


@dataclass(frozen=True)
class Outcome:
    docs: list[dict[str, Any]]
    service_account: tuple[str, str]
    ns: str
    requests: list[Request]
    """Every request of the ServiceAccount the audit log recorded, in any namespace."""
    marks: list[tuple[str, datetime.datetime]]
    operator_log: str


def audit_lines(cluster_dir: Path) -> list[str]:
    return [line for path in audit_logs(cluster_dir)
            for line in path.read_text(encoding="utf-8").splitlines()]


def watching(cluster_dir: Path, user: str) -> bool:
    """Whether the operator started: its watch on LLMDeployments is in the audit log."""
    return any(r.verb == "watch" and r.resource == "llmdeployments"
               for r in rbac_audit.parse_audit(audit_lines(cluster_dir), user=user))


def run_mode(cluster: Cluster, folder: Path, *, namespaced: bool) -> Outcome:
    from kopf.testing import KopfRunner

    assert cluster.cluster_dir is not None
    if not audit_logs(cluster.cluster_dir):
        pytest.fail(f"no audit log in {cluster.cluster_dir / 'audit'}: this control plane was started "
                    "without one (before deploy/cluster.sh wrote audit logs); restart it: "
                    "make cluster-down cluster-up")
    kube = admin_with_crd()
    suffix = secrets.token_hex(3)
    release, system_ns, peering = f"kvr-audit-{suffix}", f"kvr-audit-sys-{suffix}", f"kvr-audit-{suffix}"
    apply_kinds = {"ClusterKopfPeering", "KopfPeering"}
    with contextlib.ExitStack() as stack:
        ns = stack.enter_context(namespace(kube, "kvr-audit"))
        stack.enter_context(namespace_named(kube, system_ns))
        stack.enter_context(optional_crd(kube, POD_MONITOR_CRD))
        kubectl("apply", "--server-side", "--field-manager=kvright-tests", "-f", str(PEERING_CRDS),
                kubeconfig=cluster.kubeconfig)
        kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(PEERING_CRDS),
                kubeconfig=cluster.kubeconfig)
        docs = render(release, system_ns, ns, peering, namespaced=namespaced)
        mine = [d for d in docs if d["kind"] in RENDERED_KINDS]
        first = [d for d in mine if d["kind"] not in apply_kinds]
        manifest = yaml.safe_dump_all(first) + "---\n" + yaml.safe_dump_all(
            [d for d in mine if d["kind"] in apply_kinds])
        kubectl("apply", "--server-side", "--field-manager=kvright-tests", "-f", "-", stdin=manifest,
                kubeconfig=cluster.kubeconfig)
        stack.callback(lambda: subprocess.run(
            ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "delete", "--ignore-not-found",
             "--wait=false", "-f", "-"],
            input=manifest, capture_output=True, text=True, timeout=120, check=False))
        (sa,) = [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"]
        sa_config = sa_kubeconfig(cluster.kubeconfig, folder, system_ns, sa)
        user = rbac_audit.service_account_user(system_ns, sa)
        token = f"hf_{secrets.token_hex(12)}"
        hub = FakeHub(token, CONFIG)
        threading.Thread(target=hub.serve_forever, daemon=True).start()
        stack.callback(hub.shutdown)
        prometheus = stack.enter_context(Prometheus(folder / "prometheus").start())
        run = Run(kube=kube, ns=ns, hub_token=token)
        env = {
            "KUBECONFIG": str(sa_config), "KVRIGHT_NAMESPACES": ns if namespaced else "",
            "KVRIGHT_RECONCILE_SECONDS": "2", "KVRIGHT_METRICS_PORT": "0",
            # The sweep reads the peering objects too (kvright.peering), as the chart's HA mode runs it.
            "KVRIGHT_PEERING": peering,
            "KVRIGHT_PROMETHEUS_URL": prometheus.url,
            "KVRIGHT_HF_ENDPOINT": f"http://127.0.0.1:{hub.server_address[1]}",
        }
        scope = ["--namespace", ns] if namespaced else ["--all-namespaces"]
        with pytest.MonkeyPatch.context() as mp:
            for key, value in env.items():
                mp.setenv(key, value)
            run.marks.append(("operator start", now()))
            args = ["run", "--peering", peering, *scope, "-m", "kvright.operator"]
            with KopfRunner(args, timeout=60) as runner:
                poll(lambda: watching(cluster.cluster_dir, user), what="the operator to watch LLMDeployments",
                     timeout=WAIT)
                for name, path in PATHS:
                    run.marks.append((name, now()))
                    path(run)
        assert runner.exception is None, runner.output[-4000:]
        marker = f"/version?kvright-audit-marker={suffix}"
        kubectl("get", "--raw", marker, kubeconfig=sa_config)
        poll(lambda: any(marker in line and user in line for line in audit_lines(cluster.cluster_dir)),
             what="the audit log to record the end marker", timeout=30)
        requests = rbac_audit.parse_audit(audit_lines(cluster.cluster_dir), user=user)
        return Outcome(docs=docs, service_account=(system_ns, sa), ns=ns, requests=requests, marks=run.marks,
                       operator_log=runner.output)


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


MODES = {"cluster-wide": False, "namespaced": True}


@pytest.fixture(scope="module", params=list(MODES), ids=list(MODES))
def outcome(request: pytest.FixtureRequest, cluster: Cluster,
            tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    return run_mode(cluster, tmp_path_factory.mktemp("rbac-audit"), namespaced=MODES[request.param])


def in_scope(outcome: Outcome) -> list[Request]:
    """The requests that count as uses: in the test's namespace, or cluster-scoped."""
    return [r for r in outcome.requests if r.namespace in (None, outcome.ns)]


def verdict(outcome: Outcome, docs: list[dict[str, Any]] | None = None) -> rbac_audit.Verdict:
    grants = rbac_audit.granted(docs if docs is not None else outcome.docs,
                                service_account=outcome.service_account)
    return rbac_audit.compare(grants, in_scope(outcome), exempt=EXEMPT)


def path_of(request: Request, marks: list[tuple[str, datetime.datetime]]) -> str:
    name = marks[0][0]
    for label, started in marks:
        if request.received is not None and request.received >= started:
            name = label
    return name


def report(outcome: Outcome, found: rbac_audit.Verdict) -> str:
    lines = [f"{'grant':60} first used by"]
    for grant, uses in sorted(found.used.items(), key=lambda item: item[0].sort_key):
        first = min(uses, key=lambda r: r.received or datetime.datetime.max.replace(tzinfo=datetime.UTC))
        lines.append(f"{grant!s:60} {path_of(first, outcome.marks)} ({first})")
    lines += [f"{g!s:60} exempt: {reason[:60]}..." for g, reason in EXEMPT.items()]
    return "\n".join(lines)


# --- the tests ------------------------------------------------------------------------------------------


def test_the_audit_log_shows_every_granted_verb_used_and_nothing_refused(outcome: Outcome) -> None:
    found = verdict(outcome)
    print(f"\n{report(outcome, found)}")
    assert found.ok, f"{found.explain()}\n\noperator log tail:\n{outcome.operator_log[-3000:]}"


def test_the_authorizer_refused_nothing_in_any_namespace(outcome: Outcome) -> None:
    """In cluster-wide mode the operator also reconciles other tests' leftovers, and RBAC must allow that
    too. Two refusals there are by design, not gaps: a Secret read outside rbac.secretReaderNamespaces (a
    leftover's tokenSecretRef), and admission's 403 for writes into a namespace being deleted (not RBAC)."""
    refused = sorted({
        str(r) for r in outcome.requests
        if r.decision == "forbid" and not (r.namespace != outcome.ns and r.resource == "secrets")
    })
    assert refused == []


def rule_edits(
    docs: list[dict[str, Any]], service_account: tuple[str, str]
) -> Iterator[tuple[str, list[Any] | None]]:
    """(what, edited copy of docs) for each rule of each role bound to the ServiceAccount: the rule dropped,
    then the rule given one verb it lacks. A rule that others imply entirely (dropping it changes nothing the
    API server allows, e.g. the workload Role's pods list beside a cluster-wide one) comes as (what, None)."""
    bindings = [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    exempt = {(g.group, g.resource, g.verb) for g in EXEMPT}
    for i, doc in enumerate(docs):
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for j, rule in enumerate(doc.get("rules") or []):
            label = f"{doc['kind']} {doc['metadata']['name']}: {rule['resources']} {rule['verbs']}"
            alone = [{**d, "rules": [rule] if k == i else []} for k, d in enumerate(docs)
                     if d["kind"] in ("ClusterRole", "Role")]
            its = rbac_audit.granted([*alone, *bindings], service_account=service_account)
            if not its or {(g.group, g.resource, g.verb) for g in its} <= exempt:
                continue  # not bound to this ServiceAccount, or shown by no request (EXEMPT)
            dropped = copy.deepcopy(docs)
            del dropped[i]["rules"][j]
            left = rbac_audit.granted(dropped, service_account=service_account)
            redundant = all(rbac_audit.implied(g, left) for g in its)
            yield f"drop {label}", None if redundant else dropped
            needless = next(v for v in VERBS if v not in rule["verbs"])
            added = copy.deepcopy(docs)
            added[i]["rules"][j]["verbs"] = [*rule["verbs"], needless]
            yield f"add {needless} to {label}", added


def test_the_comparison_fails_when_a_rule_is_dropped_or_a_needless_verb_added(outcome: Outcome) -> None:
    """Run on edited copies of the rendered rules against the same audit log: every edit must be caught,
    a dropped rule as requests no rule grants, an added verb as a grant never used."""
    assert verdict(outcome).ok
    edits = list(rule_edits(outcome.docs, outcome.service_account))
    print("\nredundant (implied by other rules): " + "; ".join(w for w, d in edits if d is None))
    checked = [(what, docs) for what, docs in edits if docs is not None]
    assert len(checked) >= 2 * 10, [what for what, _ in edits]
    missed = [what for what, docs in checked if verdict(outcome, docs).ok]
    print(f"{len(checked)} edited copies of the rules, {len(checked) - len(missed)} caught")
    assert missed == []
