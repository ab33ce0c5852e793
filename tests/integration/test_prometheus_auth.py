"""The operator's Prometheus client against Debian's real Prometheus serving TLS and basic auth
(``--web.config.file``), set up only through the operator's environment variables
(kvright.settings.from_env, then kvright.operator.prometheus_client, as the operator starts).

Real parts: Prometheus 2.x (TLS with a certificate this test's CA signed for 127.0.0.1, basic auth with a
bcrypt hash, as its web config wants), openssl for the certificates, the requests client kvright uses.
Prometheus has no bearer-token check of its own; the bearer path (a header from a file, read again for
every observation) is covered against the fake in tests/unit/test_observe.py, and here only as what Prometheus
refuses, to see what the operator then says.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
import requests

from kvright import settings as settings_mod
from kvright.observe import PrometheusClient, PrometheusError, observe
from kvright.operator import prometheus_client
from kvright.reasons import Reason
from kvright_dev.prometheus import Prometheus

pytestmark = pytest.mark.prometheus

USER = "kvright"


def openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"openssl {' '.join(args)}: {done.stderr[-1500:]}"


def certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, and a serving certificate it signs for 127.0.0.1: (ca.crt, server.crt, server.key)."""
    folder.mkdir(parents=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
            "-subj", "/CN=kvright test CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)  # fmt: skip
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=folder)
    (folder / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid\n",
        encoding="utf-8",
    )
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "1", "-extfile", "server.ext", cwd=folder)  # fmt: skip
    return folder / "ca.crt", folder / "server.crt", folder / "server.key"


def secret_file(path: Path, value: str) -> str:
    path.write_text(value + "\n", encoding="utf-8")
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A Prometheus behind TLS and basic auth, and the files an operator would be given for it."""
    ca, crt, key = certificates(tmp_path / "pki")
    password = secrets.token_urlsafe(24)
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    web = {
        "tls_server_config": {"cert_file": str(crt), "key_file": str(key)},
        "basic_auth_users": {USER: hashed},
    }

    def ready() -> bool:
        try:
            answer = requests.get(
                f"{prom.url}/-/ready", auth=(USER, password), verify=str(ca), timeout=2
            )  # fmt: skip
        except requests.RequestException:
            return False
        return answer.status_code == 200

    prom = Prometheus(tmp_path / "prometheus", web_config=web, ready=ready)
    with prom.start():
        yield {
            "url": prom.url,
            "ca": str(ca),
            "password": password,
            "password_file": secret_file(tmp_path / "password", password),
            "wrong_password_file": secret_file(tmp_path / "wrong-password", password + "x"),
            "token_file": secret_file(tmp_path / "token", secrets.token_urlsafe(24)),
        }


def client_from_env(**env: str) -> PrometheusClient:
    client = prometheus_client(settings_mod.from_env(env))
    assert client is not None
    return client


def test_the_ca_and_basic_auth_from_the_environment_reach_a_guarded_prometheus(
    guarded: dict[str, str],
) -> None:
    assert guarded["url"].startswith("https://127.0.0.1:")
    client = client_from_env(
        KVRIGHT_PROMETHEUS_URL=guarded["url"],
        KVRIGHT_PROMETHEUS_CA_FILE=guarded["ca"],
        KVRIGHT_PROMETHEUS_USERNAME=USER,
        KVRIGHT_PROMETHEUS_PASSWORD_FILE=guarded["password_file"],
    )
    [sample] = client.query("vector(42)", at=time.time())
    assert sample.value == 42.0
    # The whole observation path runs through it: Prometheus answers every query, and with no vLLM series
    # the window is "no metrics yet", not an HTTP or TLS failure.
    seen = observe(client, namespace="ns", name="chat", window_seconds=60, percentile=90, now=time.time())
    assert seen.reason == Reason.NO_SERIES, seen.message


@pytest.mark.parametrize(
    ("env", "reason", "says"),
    [
        (
            {"KVRIGHT_PROMETHEUS_PASSWORD_FILE": "wrong_password_file"},
            Reason.PROMETHEUS_QUERY_FAILED,
            f"HTTP 401: Prometheus refused basic auth as '{USER}'",
        ),
        (
            {
                "KVRIGHT_PROMETHEUS_USERNAME": "",
                "KVRIGHT_PROMETHEUS_PASSWORD_FILE": "",
                "KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE": "token_file",
            },
            Reason.PROMETHEUS_QUERY_FAILED,
            "HTTP 401: Prometheus refused the bearer token in ",
        ),
        (
            {"KVRIGHT_PROMETHEUS_CA_FILE": ""},
            Reason.PROMETHEUS_UNREACHABLE,
            "TLS: certificate verify failed: unable to get local issuer certificate (the certificate is "
            "checked against the system's CAs (KVRIGHT_PROMETHEUS_CA_FILE unset))",
        ),
    ],
    ids=["wrong-password", "bearer-token-prometheus-does-not-take", "no-ca"],
)
def test_what_a_guarded_prometheus_refuses_is_a_reason_that_names_no_secret(
    guarded: dict[str, str], env: dict[str, str], reason: str, says: str
) -> None:
    full = {
        "KVRIGHT_PROMETHEUS_URL": guarded["url"],
        "KVRIGHT_PROMETHEUS_CA_FILE": guarded["ca"],
        "KVRIGHT_PROMETHEUS_USERNAME": USER,
        "KVRIGHT_PROMETHEUS_PASSWORD_FILE": guarded["password_file"],
    }
    full.update({k: guarded.get(v, v) for k, v in env.items()})
    client = client_from_env(**full)
    with pytest.raises(PrometheusError) as refused:
        client.query("vector(1)", at=time.time())
    assert refused.value.reason == reason
    assert says in str(refused.value)
    seen = observe(client, namespace="ns", name="chat", window_seconds=60, percentile=90, now=time.time())
    assert not seen.available and seen.reason == reason and says in seen.message
    for secret in (guarded["password"], Path(guarded["token_file"]).read_text(encoding="utf-8").strip()):
        assert secret not in seen.message and secret not in str(refused.value)
