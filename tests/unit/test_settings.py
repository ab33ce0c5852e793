"""kvright.settings: operator settings from an environment mapping (no os.environ patching)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvright.settings import DEFAULT_VLLM_IMAGE, Settings, SettingsError, from_env


def test_defaults() -> None:
    assert from_env({}) == Settings()
    assert from_env({}).vllm_image == DEFAULT_VLLM_IMAGE


def test_values() -> None:
    s = from_env(
        {
            "KVRIGHT_PROMETHEUS_URL": "http://127.0.0.1:9090/",
            "KVRIGHT_METRICS_PORT": "0",
            "KVRIGHT_NAMESPACES": " a, b ,,",
            "KVRIGHT_HF_ENDPOINT": "http://127.0.0.1:8080/",
            "KVRIGHT_RECONCILE_SECONDS": "2.5",
            "KVRIGHT_VLLM_IMAGE": "registry.local/vllm:1",
            "KVRIGHT_HUB_ATTEMPTS": "5",
            "KVRIGHT_PEERING": "kvright",
            "KVRIGHT_GPU_PRICES": " NVIDIA-L4=0.45, h100-sxm=2.1 ,",
            "KVRIGHT_GPU_OCCUPANCY": " False",
        }
    )
    assert s.gpu_occupancy is False and from_env({}).gpu_occupancy is True
    # The fault-injection seam is off unless asked for.
    assert from_env({}).fault_exit_after_writes == 0
    assert from_env({"KVRIGHT_FAULT_EXIT_AFTER_WRITES": "2"}).fault_exit_after_writes == 2
    assert from_env({}).fault_pause_after_writes == 0
    assert from_env({"KVRIGHT_FAULT_PAUSE_AFTER_WRITES": "1"}).fault_pause_after_writes == 1
    assert (s.prometheus_url, s.metrics_port, s.namespaces) == ("http://127.0.0.1:9090", 0, ("a", "b"))
    assert (s.hf_endpoint, s.reconcile_seconds, s.vllm_image) == (
        "http://127.0.0.1:8080",
        2.5,
        "registry.local/vllm:1",
    )
    assert (s.hub_attempts, s.peering) == (5, "kvright")
    assert (from_env({}).health_port, from_env({"KVRIGHT_HEALTH_PORT": "0"}).health_port) == (8081, 0)
    # off for metrics, the health port may be anything, the metrics default included
    assert from_env({"KVRIGHT_METRICS_PORT": "0", "KVRIGHT_HEALTH_PORT": "8080"}).health_port == 8080
    assert s.gpu_prices == (("l4", 0.45), ("h100-sxm", 2.1))


LABELS_ACCEPTED = "accepted: comma-separated KEY=VALUE Kubernetes labels (e.g. release=kube-prometheus-stack)"


@pytest.mark.parametrize(
    ("env", "text"),
    [
        (
            {"KVRIGHT_RECONCILE_SECONDS": "soon"},
            "KVRIGHT_RECONCILE_SECONDS='soon' is not a number; accepted: 0.1 to 86400",
        ),
        ({"KVRIGHT_RECONCILE_SECONDS": "0"}, "is out of range; accepted: 0.1 to 86400"),
        (
            {"KVRIGHT_METRICS_PORT": "70000"},
            "KVRIGHT_METRICS_PORT='70000' is out of range; accepted: 0 to 65535",
        ),
        ({"KVRIGHT_METRICS_PORT": "80.5"}, "is not an integer; accepted: 0 to 65535"),
        ({"KVRIGHT_HEALTH_PORT": "-1"}, "KVRIGHT_HEALTH_PORT='-1' is out of range; accepted: 0 to 65535"),
        ({"KVRIGHT_HEALTH_PORT": "8081.5"}, "KVRIGHT_HEALTH_PORT=8081.5 is not an integer"),
        (
            {"KVRIGHT_HEALTH_PORT": "9000", "KVRIGHT_METRICS_PORT": "9000"},
            "KVRIGHT_HEALTH_PORT=9000 is KVRIGHT_METRICS_PORT too; accepted: another port, or 0 (off)",
        ),
        ({"KVRIGHT_HF_ENDPOINT": "huggingface.co"}, "is not a URL; accepted: http(s)://host[:port]"),
        (
            {"KVRIGHT_HF_ENDPOINT": "https://me:pw@mirror.internal"},
            "KVRIGHT_HF_ENDPOINT carries credentials (user:password@); accepted: a URL without them",
        ),
        ({"KVRIGHT_HUB_ATTEMPTS": "0"}, "KVRIGHT_HUB_ATTEMPTS='0' is out of range; accepted: 1 to 20"),
        ({"KVRIGHT_GPU_PRICES": "l4"}, "KVRIGHT_GPU_PRICES: price 'l4' is not PRODUCT=USD_PER_HOUR"),
        ({"KVRIGHT_GPU_PRICES": "tpu=1"}, "KVRIGHT_GPU_PRICES: unknown GPU 'tpu'"),
        (
            {"KVRIGHT_GPU_OCCUPANCY": "maybe"},
            "KVRIGHT_GPU_OCCUPANCY='maybe' is not a switch; accepted: 1, true",
        ),
        ({"KVRIGHT_PODMONITOR_LABELS": "release"}, f"pair 'release' is not valid; {LABELS_ACCEPTED}"),
        ({"KVRIGHT_PODMONITOR_LABELS": "rel ease=x"}, f"key 'rel ease' is not valid; {LABELS_ACCEPTED}"),
        ({"KVRIGHT_PODMONITOR_LABELS": "=x"}, f"key '' is not valid; {LABELS_ACCEPTED}"),
        ({"KVRIGHT_PODMONITOR_LABELS": "Example.com/team=x"}, "key 'Example.com/team' is not valid"),
        ({"KVRIGHT_PODMONITOR_LABELS": f"{'k' * 64}=x"}, f"key '{'k' * 64}' is not valid"),
        ({"KVRIGHT_PODMONITOR_LABELS": "release=kube prometheus"}, "value 'kube prometheus' is not valid"),
        ({"KVRIGHT_PODMONITOR_LABELS": "release=-stack"}, "value '-stack' is not valid"),
        ({"KVRIGHT_PODMONITOR_LABELS": f"release={'v' * 64}"}, f"value '{'v' * 64}' is not valid"),
        (
            {"KVRIGHT_PODMONITOR_LABELS": "app.kubernetes.io/name=x"},
            "KVRIGHT_PODMONITOR_LABELS: 'app.kubernetes.io/name' is a label kvright sets itself; "
            "accepted: any other key",
        ),
        (
            {"LOG_LEVEL": "verbose"},
            "LOG_LEVEL='verbose' is not a log level; accepted: DEBUG, INFO, WARNING, ERROR",
        ),
        (
            {"LOG_LEVEL": "CRITICAL"},
            "LOG_LEVEL='CRITICAL' is not a log level; accepted: DEBUG, INFO, WARNING",
        ),
        (
            {"KVRIGHT_PODMONITOR_LABELS": "release=a,release=b"},
            "KVRIGHT_PODMONITOR_LABELS: 'release' is given twice; accepted: each key once",
        ),
    ],
    ids=[
        "period-not-a-number",
        "period-zero",
        "port-too-big",
        "port-fraction",
        "health-port-negative",
        "health-port-fraction",
        "health-port-is-the-metrics-port",
        "endpoint-no-scheme",
        "endpoint-with-credentials",
        "no-attempts",
        "price-without-value",
        "price-of-an-unknown-gpu",
        "occupancy-not-a-switch",
        "without-equals",
        "key-with-space",
        "key-empty",
        "prefix-upper-case",
        "name-too-long",
        "value-with-space",
        "value-starts-with-dash",
        "value-too-long",
        "key-kvright-sets",
        "log-level-unknown",
        "log-level-not-offered",
        "key-twice",
    ],
)
def test_bad_values_are_one_line_errors(env: dict[str, str], text: str) -> None:
    with pytest.raises(SettingsError) as info:
        from_env(env)
    assert text in str(info.value)
    assert "\n" not in str(info.value)


def test_log_level() -> None:
    assert from_env({}).log_level == "INFO"
    assert from_env({"LOG_LEVEL": " debug"}).log_level == "DEBUG"
    assert from_env({"LOG_LEVEL": "Warning"}).log_level == "WARNING"


def test_pod_monitor_labels() -> None:
    s = from_env(
        {"KVRIGHT_PODMONITOR_LABELS": " release=kube-prometheus-stack, example.com/team = ml ,empty=,"}
    )
    assert s.pod_monitor_labels == (
        ("release", "kube-prometheus-stack"),
        ("example.com/team", "ml"),
        ("empty", ""),
    )
    assert from_env({}).pod_monitor_labels == ()


def test_prometheus_credentials_and_ca_are_files(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("t0ken\n", encoding="utf-8")
    bearer = from_env(
        {
            "KVRIGHT_PROMETHEUS_URL": "https://thanos-querier.openshift-monitoring.svc:9091",
            "KVRIGHT_PROMETHEUS_CA_FILE": str(secret),
            "KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE": str(secret),
        }
    )
    assert (bearer.prometheus_ca_file, bearer.prometheus_bearer_token_file) == (str(secret), str(secret))
    basic = from_env(
        {
            "KVRIGHT_PROMETHEUS_URL": "http://prometheus:9090",
            "KVRIGHT_PROMETHEUS_USERNAME": "kvright",
            "KVRIGHT_PROMETHEUS_PASSWORD_FILE": str(secret),
        }
    )
    assert (basic.prometheus_username, basic.prometheus_password_file) == ("kvright", str(secret))
    # The settings are logged at startup: paths and a user name, never a file's content.
    assert "t0ken" not in repr(bearer) + repr(basic)
    # Credentials over plain http are allowed (a mesh may encrypt the hop) but said at startup.
    assert bearer.warnings() == ()
    [clear_text] = basic.warnings()
    assert clear_text.startswith("KVRIGHT_PROMETHEUS_URL is http://: the Prometheus credentials cross")
    assert from_env({"KVRIGHT_PROMETHEUS_URL": "http://prometheus:9090"}).warnings() == ()


@pytest.mark.parametrize(
    ("env", "text"),
    [
        (
            {"KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE": "FILE"},
            "KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE set but KVRIGHT_PROMETHEUS_URL is empty; accepted: the "
            "Prometheus URL with them, or none of them",
        ),
        (
            {"KVRIGHT_PROMETHEUS_URL": "prometheus:9090"},
            "KVRIGHT_PROMETHEUS_URL='prometheus:9090' is not an http(s) URL; accepted: e.g. http://",
        ),
        (
            {"KVRIGHT_PROMETHEUS_URL": "https://me:pw@prometheus:9090"},
            "KVRIGHT_PROMETHEUS_URL carries credentials (user:password@); accepted: a URL without them, with "
            "KVRIGHT_PROMETHEUS_USERNAME and KVRIGHT_PROMETHEUS_PASSWORD_FILE",
        ),
        (
            {"KVRIGHT_PROMETHEUS_URL": "http://prometheus:9090", "KVRIGHT_PROMETHEUS_CA_FILE": "FILE"},
            "KVRIGHT_PROMETHEUS_CA_FILE is set but KVRIGHT_PROMETHEUS_URL='http://prometheus:9090' is not "
            "https; accepted: an https:// URL with it",
        ),
        (
            {"KVRIGHT_PROMETHEUS_URL": "https://p", "KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE": "MISSING"},
            "KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE='MISSING' cannot be read (No such file or directory); "
            "accepted: the path of a readable file",
        ),
        (
            {"KVRIGHT_PROMETHEUS_URL": "https://p", "KVRIGHT_PROMETHEUS_USERNAME": "kvright"},
            "KVRIGHT_PROMETHEUS_USERNAME and KVRIGHT_PROMETHEUS_PASSWORD_FILE go together (basic auth); "
            "accepted: both, or neither",
        ),
        (
            {
                "KVRIGHT_PROMETHEUS_URL": "https://p",
                "KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE": "FILE",
                "KVRIGHT_PROMETHEUS_USERNAME": "kvright",
                "KVRIGHT_PROMETHEUS_PASSWORD_FILE": "FILE",
            },
            "KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE and basic auth (KVRIGHT_PROMETHEUS_USERNAME) are both set; "
            "accepted: one of them",
        ),
    ],
    ids=[
        "auth-without-url",
        "url-without-scheme",
        "url-with-credentials",
        "ca-for-http",
        "unreadable-file",
        "user-without-password",
        "bearer-and-basic",
    ],
)
def test_bad_prometheus_settings_are_one_line_errors(tmp_path: Path, env: dict[str, str], text: str) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n", encoding="utf-8")
    paths = {"FILE": str(secret), "MISSING": str(tmp_path / "missing")}
    with pytest.raises(SettingsError) as info:
        from_env({k: paths.get(v, v) for k, v in env.items()})
    said = str(info.value).replace(str(tmp_path / "missing"), "MISSING")
    assert text in said and "\n" not in said and "s3cret" not in said


def test_the_operator_refuses_bad_settings_with_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kvright import operator

    monkeypatch.setenv("KVRIGHT_PROMETHEUS_URL", "https://prometheus:9090")
    monkeypatch.setenv("KVRIGHT_PROMETHEUS_USERNAME", "kvright")
    assert operator.main([]) == 2  # before kopf starts: nothing runs on settings it cannot use
    err = capsys.readouterr().err
    assert err == (
        "kvright: KVRIGHT_PROMETHEUS_USERNAME and KVRIGHT_PROMETHEUS_PASSWORD_FILE go together (basic auth); "
        "accepted: both, or neither\n"
    )
