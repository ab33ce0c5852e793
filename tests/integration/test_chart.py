"""The Helm chart, rendered and linted by the real pinned helm (no cluster needed).

Covers: `helm lint` with the default and a non-default values file (charts/kvright/ci/), rendering both,
the schema rejecting a typo, secure pod defaults, RBAC without wildcards and without Secret or Node-delete
rights, namespaced mode (Roles per namespace, node inventory still a read-only ClusterRole), HA (kopf
peering object, and kopf's shared peering CRDs only then), the CRD behind crds.enabled with resource-policy
keep, names truncated to 63 characters, dashboards as sidecar-labelled ConfigMaps, the kubeVersion floor, an
unnamed existing ServiceAccount refused, podMonitor.labels as the operator's env var, operator.prometheusAuth
(env vars, read-only one-key Secret volumes or a CA ConfigMap's, the combinations refused at render time),
NetworkPolicies on kvright's vLLM pods only, and NOTES.txt's warnings and ServiceAccount-token hint (rendered
from a copy of the chart, since `helm template` leaves NOTES out). A missing helm fails with the reason.
tests/integration/test_chart_cluster.py installs the chart into the local control plane.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvright.render import labels as render_labels

pytestmark = pytest.mark.helm

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kvright"
NONDEFAULT = CHART / "ci" / "namespaced-ha-values.yaml"
KUBE_VERSION = "1.37.2"


def helm() -> str:
    tools_dir = Path(os.environ.get("KVRIGHT_TOOLS_DIR", Path.home() / ".cache" / "kvright" / "tools"))
    for candidate in (tools_dir / "helm", tools_dir / "bin" / "helm"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("helm")
    if found is None:
        pytest.fail(f"helm not found in {tools_dir} or on PATH: run `make tools` (deploy/cluster.sh build)")
    return found


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm(), *args], capture_output=True, text=True, timeout=180, check=False)


def render(*args: str, release: str = "kvright", namespace: str = "kvright-system") -> list[dict[str, Any]]:
    done = run_helm("template", release, str(CHART), "--namespace", namespace, "--kube-version", KUBE_VERSION,
                    *args)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"{len(found)} {kind}s"
    return found[0]


@pytest.fixture(scope="module")
def default() -> list[dict[str, Any]]:
    return render()


@pytest.fixture(scope="module")
def nondefault() -> list[dict[str, Any]]:
    return render("-f", str(NONDEFAULT))


@pytest.mark.parametrize("values", [None, NONDEFAULT], ids=["default-values", "namespaced-ha-values"])
def test_helm_lint_strict_passes(values: Path | None) -> None:
    extra = ["-f", str(values)] if values else []
    done = run_helm("lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION, *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--set", "prometheusRules.enabled=true"], "prometheusRules"),
        (["--set", "operator.watchNamespace={a}"], "watchNamespace"),
        (["--set", "prometheusRule.alerts.KVCacheSaturated.treshold=0.9"], "treshold"),
        (["--set", "prometheusRule.alerts.KVCacheSaturated.threshold=90"], "threshold"),
        (["--set", "prometheusRule.alerts.Preemptions.for=15 minutes"], "for"),
        (["--set", "replicaCount=2"], "replicaCount"),
    ],
    ids=["typo-top-level", "typo-nested", "typo-in-alert", "percent-not-fraction", "bad-duration",
         "two-replicas-without-ha"],
)
def test_schema_rejects_bad_values(args: list[str], complaint: str) -> None:
    done = run_helm("template", "kvright", str(CHART), "--kube-version", KUBE_VERSION, *args)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr
    assert complaint in done.stderr


def test_default_render_has_the_operator_pieces(default: list[dict[str, Any]]) -> None:
    kinds = sorted({d["kind"] for d in default})
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "CustomResourceDefinition",
                     "Deployment", "Service", "ServiceAccount"]


def test_pod_is_locked_down(default: list[dict[str, Any]]) -> None:
    pod = one(default, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert (sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"], sc["capabilities"]["drop"]) == (
        True, False, ["ALL"])
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/tmp"}


def test_operator_env_binds_metrics_on_all_interfaces_only_in_the_pod(default: list[dict[str, Any]]) -> None:
    env = {e["name"]: e.get("value") for e in one(default, "Deployment")["spec"]["template"]["spec"]
           ["containers"][0]["env"]}
    assert env["KVRIGHT_METRICS_ADDRESS"] == "0.0.0.0"
    assert (env["KVRIGHT_METRICS_PORT"], env["KVRIGHT_NAMESPACES"], env["KVRIGHT_PEERING"]) == (
        "8080", "", "")


def test_liveness_reads_healthz_on_its_own_port(default: list[dict[str, Any]]) -> None:
    """kopf's /healthz (on the event loop), not a TCP connect to the metrics thread, decides liveness."""
    container = one(default, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert (env["KVRIGHT_HEALTH_PORT"], ports) == ("8081", {"metrics": 8080, "health": 8081})
    probe = container["livenessProbe"]
    assert probe["httpGet"] == {"path": "/healthz", "port": "health"}
    moved = one(render("--set", "health.port=9001"), "Deployment")["spec"]["template"]["spec"]
    assert {"name": "health", "containerPort": 9001, "protocol": "TCP"} in moved["containers"][0]["ports"]


def test_a_health_port_that_is_the_metrics_port_fails_the_render() -> None:
    args = ("--kube-version", KUBE_VERSION, "--set", "health.port=8080")
    done = run_helm("template", "kvright", str(CHART), *args)
    assert done.returncode != 0
    assert "health.port 8080 is metrics.port too; set another port for the liveness endpoint" in done.stderr


def test_selector_labels_carry_no_chart_version(default: list[dict[str, Any]]) -> None:
    selector = one(default, "Deployment")["spec"]["selector"]["matchLabels"]
    assert selector == {"app.kubernetes.io/name": "kvright", "app.kubernetes.io/instance": "kvright"}
    assert one(default, "Service")["spec"]["selector"] == selector


def _rules(docs: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(d["kind"], d["metadata"].get("namespace", ""), rule) for d in docs
            if d["kind"] in ("ClusterRole", "Role") for rule in d["rules"]]


@pytest.mark.parametrize("which", ["default", "nondefault"])
def test_rbac_enumerates_resources_and_verbs(which: str, request: pytest.FixtureRequest) -> None:
    docs = request.getfixturevalue(which)
    for kind, _, rule in _rules(docs):
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"], (
            kind, rule)


@pytest.mark.parametrize("which", ["default", "nondefault"])
def test_no_cluster_wide_secret_access_and_nodes_read_only(
    which: str, request: pytest.FixtureRequest
) -> None:
    docs = request.getfixturevalue(which)
    for kind, namespace, rule in _rules(docs):
        if "secrets" in rule["resources"]:
            assert (kind, rule["verbs"]) == ("Role", ["get"]), rule
            assert namespace == "team-a"
        if "nodes" in rule["resources"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule


def test_namespaced_mode_uses_roles_per_namespace_and_keeps_node_inventory_cluster_wide(
    nondefault: list[dict[str, Any]],
) -> None:
    roles = by_kind(nondefault, "Role")
    workload = sorted(r["metadata"]["namespace"] for r in roles if r["metadata"]["name"] == "kv-workload")
    assert workload == ["team-a", "team-b"]
    cluster_roles = by_kind(nondefault, "ClusterRole")
    assert [r["metadata"]["name"] for r in cluster_roles] == ["kv-inventory"]
    cluster_resources = {res for r in cluster_roles for rule in r["rules"] for res in rule["resources"]}
    assert cluster_resources == {"nodes", "namespaces", "customresourcedefinitions", "pods"}
    # Pods cluster-wide are read for GPU occupancy only: list, nothing else.
    pod_verbs = [rule["verbs"] for r in cluster_roles for rule in r["rules"] if "pods" in rule["resources"]]
    assert pod_verbs == [["list"]]
    bindings = by_kind(nondefault, "RoleBinding")
    assert all(b["subjects"] == [{"kind": "ServiceAccount", "name": "kv", "namespace": "kvright-system"}]
               for b in bindings)
    env = {e["name"]: e.get("value") for e in one(nondefault, "Deployment")["spec"]["template"]["spec"]
           ["containers"][0]["env"]}
    assert env["KVRIGHT_NAMESPACES"] == "team-a,team-b"


def test_without_gpu_occupancy_no_pod_is_read_cluster_wide() -> None:
    docs = render("--set", "operator.gpuOccupancy=false")
    inventory = next(r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"] == "kvright-inventory")
    assert all("pods" not in rule["resources"] for rule in inventory["rules"])
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "KVRIGHT_GPU_OCCUPANCY", "value": "false"} in container["env"]
    default = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "KVRIGHT_GPU_OCCUPANCY" not in {e["name"] for e in default["env"]}


def test_cluster_mode_workload_is_a_cluster_role(default: list[dict[str, Any]]) -> None:
    names = sorted(r["metadata"]["name"] for r in by_kind(default, "ClusterRole"))
    assert names == ["kvright-inventory", "kvright-workload"]
    assert by_kind(default, "Role") == []


def test_ha_runs_peered_replicas_with_a_disruption_budget(nondefault: list[dict[str, Any]]) -> None:
    deployment = one(nondefault, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert "strategy" not in deployment["spec"]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KVRIGHT_PEERING"] == "kv-peers"
    peerings = by_kind(nondefault, "KopfPeering")
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["team-a", "team-b"]
    assert all(p["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade" for p in peerings)
    assert one(nondefault, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    crds = {c["metadata"]["name"] for c in by_kind(nondefault, "CustomResourceDefinition")}
    assert {"clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"} <= crds


def test_ha_cluster_wide_uses_a_cluster_peering() -> None:
    docs = render("--set", "ha.enabled=true")
    assert one(docs, "ClusterKopfPeering")["metadata"]["name"] == "kvright"
    assert one(docs, "Deployment")["spec"]["replicas"] == 2


def test_without_ha_one_replica_recreated(default: list[dict[str, Any]]) -> None:
    spec = one(default, "Deployment")["spec"]
    assert (spec["replicas"], spec["strategy"]) == (1, {"type": "Recreate"})


def test_crd_is_the_one_source_kept_on_uninstall(default: list[dict[str, Any]]) -> None:
    crd = next(c for c in by_kind(default, "CustomResourceDefinition")
               if c["metadata"]["name"] == "llmdeployments.kvright.dev")
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    source = yaml.safe_load((ROOT / "crds" / "llmdeployment.yaml").read_text(encoding="utf-8"))
    assert crd["spec"] == source["spec"]


def test_crds_off() -> None:
    assert by_kind(render("--set", "crds.enabled=false"), "CustomResourceDefinition") == []
    assert by_kind(render("--set", "crds.enabled=false", "--set", "ha.enabled=true"),
                   "CustomResourceDefinition") == []  # fmt: skip


@pytest.mark.parametrize(
    ("ha", "crds"),
    [
        (False, {"llmdeployments.kvright.dev"}),
        (True, {"llmdeployments.kvright.dev", "clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"}),
    ],
    ids=["standalone", "ha"],
)
def test_kopf_peering_crds_only_with_ha(ha: bool, crds: set[str]) -> None:
    """kopf's peering CRDs are shared by every kopf operator in the cluster: a release claims them only when
    its own HA needs them (the operator runs kopf standalone otherwise), and keeps them on uninstall."""
    found = by_kind(render("--set", f"ha.enabled={str(ha).lower()}"), "CustomResourceDefinition")
    assert {c["metadata"]["name"] for c in found} == crds
    assert all(c["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" for c in found)


def test_names_are_truncated_to_63_characters() -> None:
    docs = render("--set", "ha.enabled=true", "--set", "prometheusRule.enabled=true",
                  "--set", "serviceMonitor.enabled=true", release="a" * 53)
    too_long = [(d["kind"], d["metadata"]["name"]) for d in docs if len(d["metadata"]["name"]) > 63]
    assert too_long == []
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert len(names) == len(set(names))


def test_dashboards_are_sidecar_configmaps_with_valid_json(nondefault: list[dict[str, Any]]) -> None:
    maps = by_kind(nondefault, "ConfigMap")
    assert [m["metadata"]["name"] for m in maps] == ["kv-dashboard-capacity"]
    cm = maps[0]
    assert (cm["metadata"]["namespace"], cm["metadata"]["labels"]["grafana_dashboard"]) == ("monitoring", "1")
    assert cm["metadata"]["annotations"] == {"grafana_folder": "LLM serving"}
    board = json.loads(cm["data"]["kvright-capacity.json"])
    assert board["uid"] == "kvright-capacity"


def test_servicemonitor_honours_the_per_llmdeployment_namespace_label(
    nondefault: list[dict[str, Any]],
) -> None:
    monitor = one(nondefault, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    service = one(nondefault, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()


def test_nondefault_alert_tuning_is_rendered(nondefault: list[dict[str, Any]]) -> None:
    rules = {r["alert"]: r for g in one(nondefault, "PrometheusRule")["spec"]["groups"] for r in g["rules"]}
    assert "KVRightTPOTPredictionDrift" not in rules
    saturated = rules["KVRightKVCacheSaturated"]
    assert (saturated["for"], saturated["labels"]) == ("5m", {"severity": "critical", "team": "ml-platform"})
    assert "> 0.9" in saturated["expr"]
    assert "kvright_slo_percentile) == 50" not in rules["KVRightTPOTSLOBurn"]["expr"]
    assert 'job="kv-metrics"' in rules["KVRightOperatorDown"]["expr"]


def test_packaged_chart_carries_the_crd_and_dashboards(tmp_path: Path) -> None:
    done = run_helm("package", str(CHART), "--destination", str(tmp_path))
    assert done.returncode == 0, done.stderr
    (package,) = tmp_path.glob("kvright-*.tgz")
    packaged = run_helm("template", "kvright", str(package), "--kube-version", KUBE_VERSION)
    assert packaged.returncode == 0, packaged.stderr
    docs = [d for d in yaml.safe_load_all(packaged.stdout) if d]
    assert {c["metadata"]["name"] for c in by_kind(docs, "CustomResourceDefinition")} == {
        "llmdeployments.kvright.dev"}
    with_ha = run_helm("template", "kvright", str(package), "--kube-version", KUBE_VERSION,
                       "--set", "ha.enabled=true")  # fmt: skip
    assert with_ha.returncode == 0, with_ha.stderr
    assert {c["metadata"]["name"] for c in by_kind([d for d in yaml.safe_load_all(with_ha.stdout) if d],
                                                   "CustomResourceDefinition")} == {
        "llmdeployments.kvright.dev", "clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"}
    assert [m["metadata"]["name"] for m in by_kind(docs, "ConfigMap")] == ["kvright-dashboard-capacity"]


def test_network_policies_admit_only_the_listed_peers() -> None:
    """networkPolicy.enabled: the operator pod takes ingress on its metrics port from metricsFrom only;
    the vLLM pods of each watched namespace on port 8000 from vllmFrom, and any port from each other."""
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    gateway = {"podSelector": {"matchLabels": {"app": "gateway"}}}
    docs = render(
        "--set", "networkPolicy.enabled=true", "--set", "operator.watchNamespaces={team-a,team-b}",
        "--set-json", f"networkPolicy.metricsFrom=[{json.dumps(monitoring)}]",
        "--set-json", f"networkPolicy.vllmFrom=[{json.dumps(gateway)}]",
    )  # fmt: skip
    policies = {
        (p["metadata"].get("namespace", ""), p["metadata"]["name"]): p for p in by_kind(docs, "NetworkPolicy")
    }
    assert sorted(policies) == [
        ("", "kvright-operator"),
        ("team-a", "kvright-vllm"),
        ("team-b", "kvright-vllm"),
    ]
    operator = policies[("", "kvright-operator")]["spec"]
    assert operator["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "kvright"
    assert operator["ingress"] == [{"ports": [{"port": 8080, "protocol": "TCP"}], "from": [monitoring]}]
    vllm = policies[("team-a", "kvright-vllm")]["spec"]
    # kvright's own vLLM pods only (a vLLM pod someone else runs in the namespace is not locked down), and
    # every one of them whatever its LLMDeployment: the labels kvright.render puts on every vLLM pod.
    kvrights = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/managed-by": "kvright"}
    assert kvrights.items() <= render_labels("any").items()
    assert vllm["podSelector"] == {"matchLabels": kvrights}
    assert vllm["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": kvrights}}]},
        {"ports": [{"port": 8000, "protocol": "TCP"}], "from": [gateway]},
    ]
    # Without peers the operator takes no ingress at all; off by default.
    bare = render("--set", "networkPolicy.enabled=true", "--set", "networkPolicy.vllmNamespaces={ml}")
    assert next(p for p in by_kind(bare, "NetworkPolicy") if p["metadata"]["name"] == "kvright-operator")[
        "spec"
    ]["ingress"] == []
    assert by_kind(render(), "NetworkPolicy") == []


def test_network_policies_need_the_namespaces_of_the_vllm_pods() -> None:
    done = run_helm("template", "kvright", str(CHART), "--kube-version", KUBE_VERSION,
                    "--set", "networkPolicy.enabled=true")  # fmt: skip
    assert done.returncode != 0
    assert "needs networkPolicy.vllmNamespaces (or operator.watchNamespaces)" in done.stderr


def test_pod_monitor_labels_reach_the_operator_as_one_env_var() -> None:
    """podMonitor.labels (kube-prometheus-stack selects PodMonitors by its release label) become
    KVRIGHT_PODMONITOR_LABELS, KEY=VALUE pairs in key order; none by default."""
    docs = render("--set", "podMonitor.labels.release=kube-prometheus-stack",
                  "--set", r"podMonitor.labels.example\.com/team=ml")  # fmt: skip
    env = {e["name"]: e.get("value") for e in one(docs, "Deployment")["spec"]["template"]["spec"]
           ["containers"][0]["env"]}
    assert env["KVRIGHT_PODMONITOR_LABELS"] == "example.com/team=ml,release=kube-prometheus-stack"
    default = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "KVRIGHT_PODMONITOR_LABELS" not in {e["name"] for e in default["env"]}


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--set", r"podMonitor.labels.app\.kubernetes\.io/name=x"],
         'podMonitor.labels: "app.kubernetes.io/name" is a label kvright sets on its PodMonitors itself'),
        (["--set", "podMonitor.labels.Bad key=x"],
         'podMonitor.labels: "Bad key" is not a Kubernetes label key; accepted: [PREFIX/]NAME'),
        (["--set", r"podMonitor.labels.Example\.com/team=x"],
         '"Example.com/team" is not a Kubernetes label key'),
        (["--set", "podMonitor.labels.release=kube prometheus"], "/podMonitor/labels/release"),
        (["--set", "podMonitor.label.release=x"], "additional properties 'label' not allowed"),
    ],
    ids=["kvrights-own-key", "key-with-space", "upper-case-prefix", "value-with-space", "typo"],
)
def test_bad_pod_monitor_labels_fail_the_render(args: list[str], complaint: str) -> None:
    done = run_helm("template", "kvright", str(CHART), "--kube-version", KUBE_VERSION, *args)
    assert done.returncode != 0
    assert complaint in done.stderr


HTTPS_PROMETHEUS = "https://thanos-querier.openshift-monitoring.svc:9091"


def prometheus_auth(url: str = HTTPS_PROMETHEUS, **auth: str | bool) -> list[str]:
    """helm arguments for operator.prometheusURL and operator.prometheusAuth.<key>=<value>."""
    args = ["--set", f"operator.prometheusURL={url}"] if url else []
    for key, value in auth.items():
        args += ["--set", f"operator.prometheusAuth.{key}={str(value).lower() if value is True else value}"]
    return args


def prometheus_auth_parts(
    docs: list[dict[str, Any]],
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The operator pod's Prometheus credential env vars (KVRIGHT_PROMETHEUS_* but the URL, without their
    names), volume mounts and volumes (all but /tmp)."""
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    credentials = [e for e in container["env"] if e["name"].startswith("KVRIGHT_PROMETHEUS_")]
    credentials = [e for e in credentials if e["name"] != "KVRIGHT_PROMETHEUS_URL"]
    env = {e["name"]: {k: v for k, v in e.items() if k != "name"} for e in credentials}
    mounts = [m for m in container["volumeMounts"] if m["mountPath"] != "/tmp"]
    volumes = [v for v in pod["volumes"] if v["name"] != "tmp"]
    return env, mounts, volumes


def secret_volume(name: str, secret: str, key: str, path: str) -> dict[str, Any]:
    # 0o440: the default podSecurityContext has an fsGroup, which the kubelet gives the files to.
    return {"name": name, "secret": {"secretName": secret, "items": [{"key": key, "path": path}],
                                     "defaultMode": 0o440}}  # fmt: skip


def config_map_volume(name: str, config_map: str, key: str, path: str) -> dict[str, Any]:
    # 0o444 whatever the fsGroup: a CA bundle is public.
    return {"name": name, "configMap": {"name": config_map, "items": [{"key": key, "path": path}],
                                        "defaultMode": 0o444}}  # fmt: skip


def read_only_mount(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "mountPath": path, "readOnly": True}


SA_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
BASIC_AUTH_USERNAME = {"secretKeyRef": {"name": "prom-basic", "key": "username"}}
CA_ENV = {"KVRIGHT_PROMETHEUS_CA_FILE": {"value": "/etc/kvright/prometheus/ca/ca.crt"}}
CA_MOUNT = read_only_mount("prometheus-ca", "/etc/kvright/prometheus/ca")
CA_VOLUME = secret_volume("prometheus-ca", "thanos-ca", "service-ca.crt", "ca.crt")
OPENSHIFT_SERVICE_CA = {"caConfigMap": "openshift-service-ca.crt", "caKey": "service-ca.crt"}
CA_CONFIG_MAP_VOLUME = config_map_volume(
    "prometheus-ca", "openshift-service-ca.crt", "service-ca.crt", "ca.crt"
)


@pytest.mark.parametrize(
    ("args", "env", "mounts", "volumes"),
    [
        ([], {}, [], []),
        (prometheus_auth(), {}, [], []),
        (prometheus_auth(bearerTokenSecret="prom-token", bearerTokenKey="access-token"),
         {"KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE": {"value": "/etc/kvright/prometheus/bearer-token/token"}},
         [read_only_mount("prometheus-bearer-token", "/etc/kvright/prometheus/bearer-token")],
         [secret_volume("prometheus-bearer-token", "prom-token", "access-token", "token")]),
        (prometheus_auth(serviceAccountToken=True),
         {"KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE": {"value": SA_TOKEN}}, [], []),
        (prometheus_auth("https://prometheus.example.com", basicAuthSecret="prom-basic"),
         {"KVRIGHT_PROMETHEUS_USERNAME": {"valueFrom": BASIC_AUTH_USERNAME},
          "KVRIGHT_PROMETHEUS_PASSWORD_FILE": {"value": "/etc/kvright/prometheus/basic-auth/password"}},
         [read_only_mount("prometheus-basic-auth", "/etc/kvright/prometheus/basic-auth")],
         [secret_volume("prometheus-basic-auth", "prom-basic", "password", "password")]),
        (prometheus_auth(caSecret="thanos-ca", caKey="service-ca.crt"), CA_ENV, [CA_MOUNT], [CA_VOLUME]),
        (prometheus_auth(caSecret="thanos-ca", caKey="service-ca.crt", serviceAccountToken=True),
         {**CA_ENV, "KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE": {"value": SA_TOKEN}}, [CA_MOUNT], [CA_VOLUME]),
        (prometheus_auth(**OPENSHIFT_SERVICE_CA), CA_ENV, [CA_MOUNT], [CA_CONFIG_MAP_VOLUME]),
        (prometheus_auth(**OPENSHIFT_SERVICE_CA, serviceAccountToken=True),
         {**CA_ENV, "KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE": {"value": SA_TOKEN}}, [CA_MOUNT],
         [CA_CONFIG_MAP_VOLUME]),
    ],
    ids=["default", "url-without-auth", "bearer-token-secret", "service-account-token",
         "basic-auth-username-from-secret", "ca-only", "thanos-querier-ca-and-service-account-token",
         "ca-config-map-only", "thanos-querier-openshift-service-ca-config-map-and-service-account-token"],
)  # fmt: skip
def test_prometheus_auth_renders_exactly_its_env_vars_and_read_only_one_key_volumes(
    args: list[str], env: dict[str, Any], mounts: list[dict[str, Any]], volumes: list[dict[str, Any]]
) -> None:
    """Each credential source is the operator's env var(s) (a file path, or the user name as a secretKeyRef:
    no credential is ever a literal in the manifest) and, for a Secret or the CA's ConfigMap, a read-only
    volume of only the named key, under the file name the env var points at."""
    assert prometheus_auth_parts(render(*args)) == (env, mounts, volumes)
    for variable, source in env.items():
        if variable.endswith("_FILE") and source["value"] != SA_TOKEN:
            directory, _, filename = source["value"].rpartition("/")
            mount = next(m for m in mounts if m["mountPath"] == directory)
            volume = next(v for v in volumes if v["name"] == mount["name"])
            source_items = (volume.get("secret") or volume["configMap"])["items"]
            assert [i["path"] for i in source_items] == [filename]


def test_prometheus_credential_files_are_world_readable_only_without_an_fs_group() -> None:
    """Without an fsGroup in the values (fsGroup: null, e.g. left to an OpenShift SCC) the files may stay
    root's: 0444, or the non-root operator could not read them. The CA's ConfigMap is 0444 either way."""
    no_fs_group = ["--set", "podSecurityContext.fsGroup=null"]
    docs = render(*prometheus_auth(bearerTokenSecret="prom-token"), *no_fs_group)
    assert [v["secret"]["defaultMode"] for v in prometheus_auth_parts(docs)[2]] == [0o444]
    docs = render(*prometheus_auth(**OPENSHIFT_SERVICE_CA), *no_fs_group)
    assert prometheus_auth_parts(docs)[2] == [CA_CONFIG_MAP_VOLUME]


ONE_SOURCE = "accepted: at most one of bearerTokenSecret, serviceAccountToken and basicAuthSecret"
NEEDS_URL = "but operator.prometheusURL is empty"


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (prometheus_auth(bearerTokenSecret="t", serviceAccountToken=True),
         f"prometheusAuth: bearerTokenSecret and serviceAccountToken are set together; {ONE_SOURCE}"),
        (prometheus_auth(serviceAccountToken=True, basicAuthSecret="b"),
         "serviceAccountToken and basicAuthSecret are set together"),
        (prometheus_auth(bearerTokenSecret="t", serviceAccountToken=True, basicAuthSecret="b"),
         "bearerTokenSecret and serviceAccountToken and basicAuthSecret are set together"),
        (prometheus_auth("", serviceAccountToken=True),
         f"operator.prometheusAuth sets serviceAccountToken {NEEDS_URL}"),
        (prometheus_auth("", caSecret="c", basicAuthSecret="b"),
         f"operator.prometheusAuth sets caSecret and basicAuthSecret {NEEDS_URL}"),
        (prometheus_auth("http://prometheus.monitoring:9090", caSecret="c"),
         "operator.prometheusAuth.caSecret is set with an http:// operator.prometheusURL: a CA only "
         "verifies an https:// Prometheus's certificate; accepted: an https:// operator.prometheusURL, "
         "or caSecret empty"),
        (prometheus_auth(caSecret="c", caConfigMap="m"),
         "operator.prometheusAuth: caSecret and caConfigMap are set together; accepted: at most one of "
         "caSecret and caConfigMap"),
        (prometheus_auth("", caConfigMap="m", serviceAccountToken=True),
         f"operator.prometheusAuth sets caConfigMap and serviceAccountToken {NEEDS_URL}"),
        (prometheus_auth("http://prometheus.monitoring:9090", caConfigMap="m"),
         "operator.prometheusAuth.caConfigMap is set with an http:// operator.prometheusURL: a CA only "
         "verifies an https:// Prometheus's certificate; accepted: an https:// operator.prometheusURL, "
         "or caConfigMap empty"),
        (prometheus_auth("https://kvright:s3cret@prometheus.example.com/api/prom"),
         "operator.prometheusURL carries credentials (user:password@), which would sit in the Deployment's "
         "manifest; accepted: a URL without them, with operator.prometheusAuth.basicAuthSecret"),
        (prometheus_auth(bearerToken="t"), "additional properties 'bearerToken' not allowed"),
        (prometheus_auth(basicAuthSecret="Prom_Basic"), "/operator/prometheusAuth/basicAuthSecret"),
        (prometheus_auth(caConfigMap="Service_CA"), "/operator/prometheusAuth/caConfigMap"),
    ],
    ids=["bearer-and-service-account", "service-account-and-basic", "all-three", "no-url",
         "no-url-ca-and-basic", "ca-on-http", "ca-secret-and-ca-config-map", "no-url-ca-config-map-and-token",
         "ca-config-map-on-http", "credentials-in-url", "typo", "secret-name-not-dns",
         "config-map-name-not-dns"],
)  # fmt: skip
def test_bad_prometheus_auth_fails_the_render(args: list[str], complaint: str) -> None:
    """Each refusal names the values and what is accepted, and never echoes the URL (it may hold one)."""
    done = run_helm("template", "kvright", str(CHART), "--kube-version", KUBE_VERSION, *args)
    assert done.returncode != 0
    assert complaint in done.stderr
    assert "s3cret" not in done.stderr


@pytest.mark.parametrize(("version", "renders"), [("1.29.9", False), ("1.30.0", True)], ids=["1.29", "1.30"])
def test_the_chart_needs_kubernetes_1_30_for_the_prestop_sleep(version: str, renders: bool) -> None:
    """kvright's vLLM pods use lifecycle.preStop.sleep (PodLifecycleSleepAction, on by default from 1.30)."""
    done = run_helm("template", "kvright", str(CHART), "--kube-version", version)
    assert (done.returncode == 0) == renders, done.stderr
    if not renders:
        assert "chart requires kubeVersion: >=1.30.0-0" in done.stderr


def test_an_existing_service_account_must_be_named() -> None:
    """serviceAccount.create=false without a name would run the operator as, and bind its ClusterRoles to,
    the namespace's default ServiceAccount (every other pod there uses it): the render fails instead."""
    done = run_helm("template", "kvright", str(CHART), "--kube-version", KUBE_VERSION,
                    "--set", "serviceAccount.create=false")  # fmt: skip
    assert done.returncode != 0
    assert "serviceAccount.create=false needs serviceAccount.name" in done.stderr
    docs = render("--set", "serviceAccount.create=false", "--set", "serviceAccount.name=kvright-operator")
    assert by_kind(docs, "ServiceAccount") == []
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "kvright-operator"
    subjects = [s for b in by_kind(docs, "ClusterRoleBinding") for s in b["subjects"]]
    assert subjects and all(s["name"] == "kvright-operator" for s in subjects)


def notes(tmp_path: Path, *args: str) -> str:
    """NOTES.txt as helm renders it. `helm template` leaves NOTES out and `helm install --dry-run` needs an
    API server, so a copy of the chart carries NOTES.txt's text as a define inside a YAML template."""
    chart = tmp_path / "kvright"
    shutil.copytree(CHART, chart)
    text = (chart / "templates" / "NOTES.txt").read_text(encoding="utf-8")
    (chart / "templates" / "NOTES.txt").unlink()
    (chart / "templates" / "notes-under-test.yaml").write_text(
        '{{- define "notes-under-test" }}' + text + "{{- end }}\n"
        'notes: |\n{{ include "notes-under-test" . | indent 2 }}\n', encoding="utf-8")  # fmt: skip
    done = run_helm("template", "kvright", str(chart), "--kube-version", KUBE_VERSION,
                    "--show-only", "templates/notes-under-test.yaml", *args)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rendered: str = yaml.safe_load(done.stdout)["notes"]
    return rendered


NO_OPERATOR_SCRAPE = "prometheusRule.enabled=true but serviceMonitor.enabled=false"
NO_METRICS_INGRESS = "empty networkPolicy.metricsFrom"
NO_VLLM_INGRESS = "empty networkPolicy.vllmFrom"
NO_POD_MONITOR_LABELS = "podMonitor.labels is empty"
POLICY = ["--set", "networkPolicy.enabled=true", "--set", "networkPolicy.vllmNamespaces={ml}"]
MONITORING = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}


@pytest.mark.parametrize(
    ("args", "warnings"),
    [
        ([], set()),
        (["--set", "prometheusRule.enabled=true"], {NO_OPERATOR_SCRAPE}),
        (["--set", "prometheusRule.enabled=true", "--set", "serviceMonitor.enabled=true"], set()),
        (POLICY, {NO_METRICS_INGRESS, NO_VLLM_INGRESS}),
        ([*POLICY, "--set-json", f"networkPolicy.metricsFrom=[{json.dumps(MONITORING)}]",
          "--set-json", f"networkPolicy.vllmFrom=[{json.dumps(MONITORING)}]"], set()),
        (["--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=kps"],
         {NO_POD_MONITOR_LABELS}),
        (["--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=kps",
          "--set", "podMonitor.labels.release=kps"], set()),
    ],
    ids=["defaults", "rules-without-operator-scrape", "rules-with-operator-scrape", "policy-without-peers",
         "policy-with-peers", "monitor-labels-without-pod-monitor-labels", "all-labelled"],
)
def test_notes_warn_of_values_that_silently_break_alerting(
    tmp_path: Path, args: list[str], warnings: set[str]
) -> None:
    text = notes(tmp_path, *args)
    found = {w for w in (NO_OPERATOR_SCRAPE, NO_METRICS_INGRESS, NO_VLLM_INGRESS, NO_POD_MONITOR_LABELS)
             if w in text}  # fmt: skip
    assert found == warnings, text
    assert text.count("WARNING:") == len(warnings)


def test_notes_name_the_service_account_to_grant_prometheus_read_access(tmp_path: Path) -> None:
    """With serviceAccountToken the Prometheus side's RBAC is the cluster admin's: NOTES says which
    ServiceAccount to bind; it is no warning (the chart cannot see whether the binding exists)."""
    text = notes(tmp_path, *prometheus_auth(serviceAccountToken=True))
    assert "token of ServiceAccount default/kvright:" in text
    assert "WARNING:" not in text
    assert "token of ServiceAccount" not in notes(tmp_path / "default")
