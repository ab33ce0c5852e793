"""`helm install` into the local control plane, then the operator runs as the chart's ServiceAccount.

Real parts: the pinned helm, kube-apiserver with RBAC, etcd, controller-manager, kwok GPU nodes, and the
kvright operator itself (in-process with kopf.testing.KopfRunner). The operator authenticates with a token
the API server issued for the chart's ServiceAccount (TokenRequest, `kubectl create token`): a real SA
identity rather than impersonation, which neither the kubernetes client nor kopf read from a kubeconfig.
Access checks are SelfSubjectAccessReviews made with that token (`kubectl auth can-i`).
Faked at the edge: the Hugging Face hub, a loopback HTTP server that serves one config.json only to a
request bearing the test's token, so the test can prove the token went through the operator's Secret
reader Role and nowhere else.

Every object is named with a random suffix: the control plane is shared with other tests. The CRD is
cluster-wide and may already exist (applied by other tests), so the install takes ownership of it; its
resource-policy keep leaves it in place on uninstall.
"""

from __future__ import annotations

import contextlib
import functools
import json
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

from kvright_dev.procs import WaitFailed, wait_until
from tests.builders import llmd
from tests.integration.kvright_cluster import FakeHub, kubeconfig

pytestmark = [pytest.mark.helm, pytest.mark.cluster]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kvright"
SUFFIX = secrets.token_hex(3)
SYSTEM_NS, TEAM_NS, OTHER_NS = f"kvr-sys-{SUFFIX}", f"kvr-team-{SUFFIX}", f"kvr-other-{SUFFIX}"
RELEASE = f"kvr-{SUFFIX}"
SA = f"{RELEASE}-kvright"  # the chart's ServiceAccount: its full name, <release>-kvright
TOKEN_VALUE = f"hf_never_log_me_{secrets.token_hex(12)}"
REPOSITORY = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_31_8B = {  # the public config.json facts of Llama 3.1 8B that capacity reads
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16", "head_dim": 128, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
}
WAIT_SECONDS = 120.0
ENFORCE = "pod-security.kubernetes.io/enforce"


def tool(name: str) -> str:
    tools_dir = Path(os.environ.get("KVRIGHT_TOOLS_DIR", Path.home() / ".cache" / "kvright" / "tools"))
    for candidate in (tools_dir / name, tools_dir / "bin" / name):
        if candidate.is_file():
            return str(candidate)
    pytest.fail(f"{name} not found in {tools_dir}: run `make tools`")


@functools.cache
def admin_kubeconfig() -> str:
    """The admin kubeconfig, resolved once (before the operator's run points KUBECONFIG at the SA's)."""
    return kubeconfig()


def run(cmd: list[str], *, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, input=stdin, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd[:4])}... failed: {done.stderr.strip()}")
    return done


def kubectl(*args: str, kubeconfig: str | None = None, check: bool = True,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run(["kubectl", "--kubeconfig", kubeconfig or admin_kubeconfig(), *args], check=check, stdin=stdin)


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run([tool("helm"), "--kubeconfig", admin_kubeconfig(), *args], check=check)


def sa_kubeconfig(tmp: Path, namespace: str, service_account: str) -> str:
    """A kubeconfig for the ServiceAccount: the admin one's cluster, a token the API server issued."""
    token = kubectl("create", "token", service_account, "-n", namespace, "--duration", "1h").stdout.strip()
    admin = yaml.safe_load(Path(admin_kubeconfig()).read_text(encoding="utf-8"))
    current = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
    cluster = next(c for c in admin["clusters"] if c["name"] == current["context"]["cluster"])
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [cluster],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": cluster["name"], "user": "sa"}}],
    }
    path = tmp / f"{service_account}.kubeconfig"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(path)


def can_i(kubeconfig: str, verb: str, resource: str, *scope: str) -> bool:
    done = kubectl("auth", "can-i", verb, resource, *scope, kubeconfig=kubeconfig, check=False)
    assert done.stdout.strip() in ("yes", "no"), done.stderr
    return done.stdout.strip() == "yes"


@pytest.fixture(scope="module")
def cluster_ready() -> None:
    done = kubectl("get", "--raw", "/readyz", check=False)
    if done.returncode != 0:
        pytest.fail(f"the local control plane does not answer ({done.stderr.strip()}): run `make cluster-up`")


@pytest.fixture(scope="module")
def namespaced_release(cluster_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The chart in namespaced mode for TEAM_NS, allowed to read Secrets there; yields the SA kubeconfig.
    Its own namespace enforces the restricted Pod Security Standard, as a cluster operator's would."""
    for ns in (TEAM_NS, OTHER_NS, SYSTEM_NS):
        kubectl("create", "namespace", ns)
    kubectl("label", "namespace", SYSTEM_NS, f"{ENFORCE}=restricted")
    try:
        helm("install", RELEASE, str(CHART), "--namespace", SYSTEM_NS, "--create-namespace",
             "--take-ownership",
             "--set", f"operator.watchNamespaces={{{TEAM_NS}}}",
             "--set", f"rbac.secretReaderNamespaces={{{TEAM_NS}}}",
             # HA objects are installed (peering CRDs, KopfPeering hook, PDB); the Deployment's pods are
             # kwok fakes, so the in-process operator below is the only one that runs.
             "--set", "ha.enabled=true", "--set", "ha.peeringName=kvright-test")
        yield sa_kubeconfig(tmp_path_factory.mktemp("sa"), SYSTEM_NS, SA)
    finally:
        helm("uninstall", RELEASE, "--namespace", SYSTEM_NS, "--wait", "--timeout", "2m", check=False)
        for ns in (TEAM_NS, OTHER_NS, SYSTEM_NS):
            kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture(scope="module")
def clusterwide_release(cluster_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The chart in its default cluster-wide mode (CRDs already installed by the other release)."""
    release, namespace = f"kvr-cw-{SUFFIX}", f"kvr-cwsys-{SUFFIX}"
    try:
        helm("install", release, str(CHART), "--namespace", namespace, "--create-namespace",
             "--set", "crds.enabled=false", "--set", "replicaCount=0")
        yield sa_kubeconfig(tmp_path_factory.mktemp("sa-cw"), namespace, f"{release}-kvright")
    finally:
        helm("uninstall", release, "--namespace", namespace, "--wait", "--timeout", "2m", check=False)
        kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_install_is_deployed_with_the_crd_kept_and_owned(namespaced_release: str) -> None:
    status = json.loads(helm("status", RELEASE, "-n", SYSTEM_NS, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"
    crd = json.loads(kubectl("get", "crd", "llmdeployments.kvright.dev", "-o", "json").stdout)
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert kubectl("get", "crd", "kopfpeerings.kopf.dev", check=False).returncode == 0


def test_the_operator_pods_are_admitted_where_restricted_is_enforced(namespaced_release: str) -> None:
    """Pod Security admission refuses a pod when it is created, so a refused pod never exists and its
    ReplicaSet records FailedCreate: the operator's pods existing, with no such refusal, is the pass."""
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/name=kvright"

    def listed(*args: str) -> list[dict[str, Any]]:
        return list(json.loads(kubectl("get", *args, "-n", SYSTEM_NS, "-o", "json").stdout)["items"])

    deployments = listed("deployments", "-l", selector)
    assert len(deployments) == 1, deployments
    want = int(deployments[0]["spec"]["replicas"])
    assert want >= 1

    def admitted() -> list[dict[str, Any]] | None:
        pods = listed("pods", "-l", selector)
        return pods if len(pods) >= want else None

    def refused() -> list[str]:
        events = listed("events", "--field-selector", "reason=FailedCreate")
        return [str(e.get("message")) for e in events if "PodSecurity" in str(e.get("message"))]

    try:
        pods = wait_until(admitted, WAIT_SECONDS, what="the operator's pods to be created", interval=1)
    except WaitFailed as exc:
        raise AssertionError(f"{exc}; Pod Security refusals: {refused()}") from exc
    assert not refused()
    labels = json.loads(kubectl("get", "namespace", SYSTEM_NS, "-o", "json").stdout)["metadata"]["labels"]
    assert labels.get(ENFORCE) == "restricted"
    assert all(p["spec"]["securityContext"].get("runAsNonRoot") for p in pods), pods


def test_the_network_policies_are_valid_for_the_api_server(namespaced_release: str) -> None:
    """networkPolicy.enabled renders policies the real API server accepts (server-side dry run). Whether
    traffic is then limited depends on the CNI, which the local control plane does not run."""
    rendered = helm(
        "template", "np", str(CHART), "--namespace", SYSTEM_NS, "--show-only", "templates/networkpolicy.yaml",
        "--set", "networkPolicy.enabled=true", "--set", f"networkPolicy.vllmNamespaces={{{TEAM_NS}}}",
        "--set-json", 'networkPolicy.vllmFrom=[{"namespaceSelector":{}}]',
    ).stdout  # fmt: skip
    done = kubectl("apply", "--dry-run=server", "-f", "-", stdin=rendered)
    assert done.stdout.count("networkpolicy.networking.k8s.io/") == 2, done.stdout


def test_ha_peering_object_exists_in_each_watched_namespace(namespaced_release: str) -> None:
    got = kubectl("get", "kopfpeerings.kopf.dev", "kvright-test", "-n", TEAM_NS, "-o", "json")
    peering = json.loads(got.stdout)
    assert peering["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE
    assert can_i(namespaced_release, "patch", "kopfpeerings.kopf.dev", "-n", TEAM_NS)
    assert not can_i(namespaced_release, "patch", "kopfpeerings.kopf.dev", "-n", OTHER_NS)


NAMESPACED_ACCESS = [
    ("list", "llmdeployments.kvright.dev", ("-n", TEAM_NS), True),
    ("patch", "llmdeployments.kvright.dev/status", ("-n", TEAM_NS), True),
    ("create", "deployments.apps", ("-n", TEAM_NS), True),
    ("patch", "services", ("-n", TEAM_NS), True),
    ("create", "events", ("-n", TEAM_NS), True),
    ("get", "secrets", ("-n", TEAM_NS), True),
    ("list", "nodes", (), True),
    ("list", "secrets", ("-n", TEAM_NS), False),
    ("get", "secrets", ("-n", OTHER_NS), False),
    ("list", "secrets", ("--all-namespaces",), False),
    ("create", "deployments.apps", ("-n", OTHER_NS), False),
    ("list", "llmdeployments.kvright.dev", ("-n", OTHER_NS), False),
    ("delete", "nodes", (), False),
    ("patch", "nodes", (), False),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", (), False),
    ("delete", "pods", ("-n", TEAM_NS), False),
    # InferencePools are only server-side applied: create and patch, nothing else.
    ("create", "inferencepools.inference.networking.k8s.io", ("-n", TEAM_NS), True),
    ("patch", "inferencepools.inference.networking.k8s.io", ("-n", TEAM_NS), True),
    ("get", "inferencepools.inference.networking.k8s.io", ("-n", TEAM_NS), False),
    ("delete", "inferencepools.inference.networking.k8s.io", ("-n", TEAM_NS), False),
]


@pytest.mark.parametrize(
    ("verb", "resource", "scope", "allowed"), NAMESPACED_ACCESS,
    ids=[f"{v}-{r.split('.')[0]}-{'in-' + s[-1] if s else 'cluster'}-{'yes' if a else 'no'}"
         for v, r, s, a in NAMESPACED_ACCESS],
)
def test_namespaced_service_account_can_do_exactly_its_job(
    namespaced_release: str, verb: str, resource: str, scope: tuple[str, ...], allowed: bool
) -> None:
    assert can_i(namespaced_release, verb, resource, *scope) is allowed


CLUSTERWIDE_ACCESS = [
    ("list", "llmdeployments.kvright.dev", ("--all-namespaces",), True),
    ("create", "deployments.apps", ("-n", "default"), True),
    ("list", "nodes", (), True),
    ("get", "secrets", ("-n", "default"), False),
    ("list", "secrets", ("--all-namespaces",), False),
    ("delete", "nodes", (), False),
    ("create", "pods", ("-n", "default"), False),
]


@pytest.mark.parametrize(
    ("verb", "resource", "scope", "allowed"), CLUSTERWIDE_ACCESS,
    ids=[f"{v}-{r.split('.')[0]}-{'yes' if a else 'no'}" for v, r, _, a in CLUSTERWIDE_ACCESS],
)
def test_clusterwide_service_account_reads_no_secret_and_deletes_no_node(
    clusterwide_release: str, verb: str, resource: str, scope: tuple[str, ...], allowed: bool
) -> None:
    assert can_i(clusterwide_release, verb, resource, *scope) is allowed


@pytest.fixture(scope="module")
def reconciled(namespaced_release: str) -> Iterator[dict[str, Any]]:
    """Run the operator as the ServiceAccount until it has reconciled a gated hub model; collect what a
    user or an attacker could read afterwards."""
    from kopf.testing import KopfRunner

    hub = FakeHub(TOKEN_VALUE, LLAMA_31_8B)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    kubectl("create", "secret", "generic", "hf-token", "-n", TEAM_NS, f"--from-literal=token={TOKEN_VALUE}")
    sample = (llmd("gated", TEAM_NS).hub(REPOSITORY, token_secret="hf-token")
              .gpu("NVIDIA-H100-80GB-HBM3", 8).tpot_ms(50).obj())
    env = {
        "KUBECONFIG": namespaced_release, "KVRIGHT_NAMESPACES": TEAM_NS, "KVRIGHT_METRICS_PORT": "0",
        "KVRIGHT_HF_ENDPOINT": f"http://127.0.0.1:{hub.server_address[1]}", "KVRIGHT_RECONCILE_SECONDS": "5",
        "KVRIGHT_PROMETHEUS_URL": "",
    }
    collected: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        with KopfRunner(["run", "--standalone", "--namespace", TEAM_NS, "-m", "kvright.operator"],
                        timeout=60) as runner:
            kubectl("apply", "-f", "-", stdin=json.dumps(sample))

            def deployed() -> bool:
                obj = json.loads(kubectl("get", "llmdeployment", "gated", "-n", TEAM_NS, "-o", "json").stdout)
                collected["status"] = obj.get("status") or {}
                collected["deployments"] = json.loads(kubectl(
                    "get", "deployments", "-n", TEAM_NS, "-l", "kvright.dev/llmdeployment=gated", "-o", "json"
                ).stdout)["items"]
                return bool(collected["status"].get("conditions") and collected["deployments"])

            # On a timeout the tests below say what is missing, with the operator's log.
            with contextlib.suppress(WaitFailed):
                wait_until(deployed, WAIT_SECONDS, what="gated to have conditions and a Deployment",
                           interval=1, transient=())
            collected["events"] = kubectl("get", "events", "-n", TEAM_NS, "-o", "json").stdout
            collected["object"] = kubectl("get", "llmdeployment", "gated", "-n", TEAM_NS, "-o", "json").stdout
            # Deleted while the operator is still up, so its delete handler runs as the ServiceAccount too.
            kubectl("delete", "llmdeployment", "gated", "-n", TEAM_NS, "--wait=false")
            gone = ("get", "llmdeployment", "gated", "-n", TEAM_NS)
            with contextlib.suppress(WaitFailed):
                wait_until(
                    lambda: kubectl(*gone, check=False).returncode != 0,
                    WAIT_SECONDS, what="gated to be gone", interval=0.5, transient=(),
                )  # fmt: skip
        collected["logs"] = runner.output
        collected["exception"] = runner.exception
    hub.shutdown()
    collected["hub"] = hub
    yield collected


def test_operator_as_the_service_account_reconciles_the_sample(reconciled: dict[str, Any]) -> None:
    conditions = {c["type"]: c for c in reconciled["status"].get("conditions", [])}
    assert conditions, f"no status written; operator log tail:\n{reconciled['logs'][-3000:]}"
    assert conditions["PlanFeasible"]["status"] == "True", conditions["PlanFeasible"]
    assert len(reconciled["deployments"]) == 1
    assert reconciled["exception"] is None


def test_rbac_was_sufficient(reconciled: dict[str, Any]) -> None:
    """No status 403 and no "forbidden" in the operator's log. The status is a whole number read after
    the line's timestamp: a port such as 127.0.0.1:40327 in the logged settings is not one, nor are the
    milliseconds of "[... 20:32:04,403]" (CI runs once read each as a refusal)."""
    logs = reconciled["logs"]
    stamp = re.compile(r"^\[[^\]]*\]")
    refused = re.compile(r"(?<![\d.:,])403(?!\d)|forbidden", re.IGNORECASE)
    forbidden = [line for line in logs.splitlines() if refused.search(stamp.sub("", line))]
    assert forbidden == []


def test_the_hub_token_was_read_through_the_secret_reader_role(reconciled: dict[str, Any]) -> None:
    hub: FakeHub = reconciled["hub"]
    assert hub.authorized and hub.authorized[0].startswith(f"/{REPOSITORY}/resolve/")
    assert hub.refused == []


def test_the_token_reaches_vllm_only_as_a_secret_reference(reconciled: dict[str, Any]) -> None:
    container = reconciled["deployments"][0]["spec"]["template"]["spec"]["containers"][0]
    hf = [e for e in container.get("env", []) if e["name"] == "HF_TOKEN"]
    assert hf == [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]


@pytest.mark.parametrize("where", ["logs", "events", "object", "deployments"], ids=str)
def test_no_secret_value_in_logs_events_status_or_children(reconciled: dict[str, Any], where: str) -> None:
    text = reconciled[where] if isinstance(reconciled[where], str) else json.dumps(reconciled[where])
    assert TOKEN_VALUE not in text
