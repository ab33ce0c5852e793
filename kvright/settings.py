"""Operator settings, read once from the environment at startup (docs/interfaces.md has the table).

:func:`from_env` takes the environment as a mapping so tests pass a dict instead of patching
``os.environ``; a bad value is one :class:`SettingsError` line naming the variable and what is accepted.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import capacity

__all__ = ["DEFAULT_VLLM_IMAGE", "KVRIGHT_LABEL_KEYS", "LOG_LEVELS", "Settings", "SettingsError", "from_env"]

# The vLLM release the flags kvright renders were checked against (docs/operator.md).
DEFAULT_VLLM_IMAGE: Final = "vllm/vllm-openai:v0.32.0"
# The upstream Gateway API Inference Extension's convention: the picker of pool NAME is Service NAME-epp,
# its ext-proc on gRPC port 9002.
DEFAULT_ENDPOINT_PICKER: Final = "{name}-epp"
DEFAULT_ENDPOINT_PICKER_PORT: Final = 9002
FAILURE_MODES: Final = ("FailClose", "FailOpen")
_SERVICE_NAME: Final = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")
"""The Python log levels LOG_LEVEL accepts (any case)."""
# Kubernetes label syntax (apimachinery's validation.IsQualifiedName and IsValidLabelValue): a name is at most
# 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit; a key may be
# prefixed by a DNS subdomain (lower case, at most 253 characters) and '/'; a value is a name or empty.
_LABEL_NAME: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
KVRIGHT_LABEL_KEYS: Final = frozenset(
    {
        "app.kubernetes.io/managed-by",
        "app.kubernetes.io/name",
        "app.kubernetes.io/instance",
        "kvright.dev/llmdeployment",
    }
)
"""The labels kvright puts on every child itself (kvright.render.labels; a unit test keeps the two equal):
KVRIGHT_PODMONITOR_LABELS may not set them, so a PodMonitor always says whose it is."""
_LABEL_ACCEPTED: Final = (
    "accepted: comma-separated KEY=VALUE Kubernetes labels (e.g. release=kube-prometheus-stack): KEY is "
    "[PREFIX/]NAME, NAME and VALUE at most 63 letters, digits, '-', '_' or '.', starting and ending with a "
    "letter or digit (VALUE may be empty), PREFIX a lower-case DNS subdomain"
)


#: The public Hugging Face hub: KVRIGHT_HF_ENDPOINT's default.
PUBLIC_HUB: Final = "https://huggingface.co"


class SettingsError(ValueError):
    """An environment variable holds a value the operator cannot use."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    prometheus_url: str = ""
    """Prometheus HTTP API base URL; empty turns feedback off."""
    prometheus_ca_file: str = ""
    """PEM bundle of the CAs that verify an https Prometheus (KVRIGHT_PROMETHEUS_CA_FILE); empty: the
    system's CAs."""
    prometheus_bearer_token_file: str = ""
    """File holding a bearer token for Prometheus (KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE), read again for
    every observation (each period) so that a rotated token (a projected service-account token) is sent."""
    prometheus_username: str = ""
    """HTTP basic auth user for Prometheus (KVRIGHT_PROMETHEUS_USERNAME), with the password in
    ``prometheus_password_file`` (KVRIGHT_PROMETHEUS_PASSWORD_FILE, read again for every observation)."""
    prometheus_password_file: str = ""
    metrics_port: int = 8080
    """Port of the operator's own /metrics; 0 disables it."""
    health_port: int = 8081
    """Port of the liveness endpoint ``/healthz`` (KVRIGHT_HEALTH_PORT), on the metrics address; 0 disables
    it. Served by kopf on the operator's event loop, so a wedged loop or a stopped periodic reconcile fails
    it (see ``kvright.operator.sweep_health``)."""
    namespaces: tuple[str, ...] = ()
    """Namespaces to watch; empty means cluster-wide."""
    hf_endpoint: str = PUBLIC_HUB
    """Where model config.json files are fetched from; a mirror other than the public hub is also given to
    the vLLM pods and the cache's download Job as HF_ENDPOINT, so the weights come from it too."""
    reconcile_seconds: float = 60.0
    """Period of the level-based reconcile timer."""
    vllm_image: str = DEFAULT_VLLM_IMAGE
    """The vLLM image when a spec names none."""
    hub_timeout_seconds: float = 10.0
    """Timeout of one hub request."""
    hub_attempts: int = 3
    """Tries of one hub fetch within a reconcile before it is reported and retried later."""
    peering: str = ""
    """kopf peering object name for HA (KVRIGHT_PEERING); empty: standalone."""
    endpoint_picker: str = DEFAULT_ENDPOINT_PICKER
    """The endpoint picker Service of an InferencePool whose LLMDeployment names none, ``{name}`` standing
    for the LLMDeployment's name (KVRIGHT_ENDPOINT_PICKER); empty: such pools have no endpointPickerRef
    (for gateways that pick endpoints themselves; InferencePool CRDs before v1.5.0 refuse that)."""
    endpoint_picker_port: int = DEFAULT_ENDPOINT_PICKER_PORT
    """Its ext-proc port (KVRIGHT_ENDPOINT_PICKER_PORT)."""
    endpoint_picker_failure_mode: str = "FailClose"
    """FailClose or FailOpen (KVRIGHT_ENDPOINT_PICKER_FAILURE_MODE)."""
    gpu_prices: tuple[tuple[str, float], ...] = ()
    """US dollars per GPU-hour by catalog id (KVRIGHT_GPU_PRICES, ``PRODUCT=USD`` pairs separated by commas,
    PRODUCT a catalog id or a GPU Feature Discovery label) for choosing the GPU product; products not
    listed cost the catalog's list price."""

    fault_exit_after_writes: int = 0
    """A test seam, off (0) in production: exit right after this many of the operator's own API writes
    (KVRIGHT_FAULT_EXIT_AFTER_WRITES), cutting a reconcile between two writes; logged when set."""
    fault_pause_after_writes: int = 0
    """A test seam, off (0) in production: stop the whole process (SIGSTOP) right after this many of the
    operator's own API writes (KVRIGHT_FAULT_PAUSE_AFTER_WRITES), in the middle of that reconcile, until
    a test sends SIGCONT (after restarting an API server or etcd, say); once only; logged when set."""
    gpu_occupancy: bool = True
    """Whether to list pods cluster-wide to weigh the free GPUs of each product when kvright chooses the
    product (KVRIGHT_GPU_OCCUPANCY; needs ``list`` on pods in every namespace); off: allocatable GPUs."""
    pod_monitor_labels: tuple[tuple[str, str], ...] = ()
    """Extra labels on every PodMonitor kvright renders, as (key, value) pairs in the given order
    (KVRIGHT_PODMONITOR_LABELS, ``KEY=VALUE`` pairs separated by commas): the label a Prometheus selects
    PodMonitors by (kube-prometheus-stack's default podMonitorSelector: ``release=<its release>``)."""
    log_level: str = "INFO"
    """The operator's Python log level (LOG_LEVEL, any case): DEBUG, INFO, WARNING or ERROR, upper-case."""

    def warnings(self) -> tuple[str, ...]:
        """What is allowed but probably not meant, one line each, for the operator to log at startup."""
        out = []
        if self.prometheus_url.startswith("http://") and (
            self.prometheus_bearer_token_file or self.prometheus_username
        ):
            out.append(
                "KVRIGHT_PROMETHEUS_URL is http://: the Prometheus credentials cross the network in clear "
                "text on every query; an https:// URL (with KVRIGHT_PROMETHEUS_CA_FILE for a private CA) "
                "keeps them private"
            )
        return tuple(out)

    def endpoint_picker_for(self, name: str) -> str:
        """The default picker's Service name for the LLMDeployment ``name`` ("" when there is none)."""
        return self.endpoint_picker.replace("{name}", name)


_TRUE: Final = ("1", "true", "yes", "on")
_FALSE: Final = ("0", "false", "no", "off")


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE or raw in _FALSE:
        return raw in _TRUE
    raise SettingsError(f"{name}={raw!r} is not a switch; accepted: {', '.join(_TRUE + _FALSE)}")


def _number(env: Mapping[str, str], name: str, default: float, lo: float, hi: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number; accepted: {lo:g} to {hi:g}") from None
    if not lo <= value <= hi:
        raise SettingsError(f"{name}={raw!r} is out of range; accepted: {lo:g} to {hi:g}")
    return value


def _port(env: Mapping[str, str], name: str, default: int, lowest: int) -> int:
    """A port number from ``name`` (``lowest`` to 65535; 0 is allowed where ``lowest`` is 0: off)."""
    value = _number(env, name, default, lowest, 65535)
    if value != int(value):
        raise SettingsError(f"{name}={value!r} is not an integer; accepted: {lowest} to 65535")
    return int(value)


def _label_error(name: str, what: str, text: str) -> SettingsError:
    return SettingsError(f"{name}: {what} {text!r} is not valid; {_LABEL_ACCEPTED}")


def _is_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not (len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None


def _labels(env: Mapping[str, str], name: str) -> tuple[tuple[str, str], ...]:
    """Comma-separated ``KEY=VALUE`` Kubernetes labels; none of kvright's own keys, no key twice."""
    pairs: dict[str, str] = {}
    for item in (part.strip() for part in env.get(name, "").split(",")):
        if not item:
            continue
        key, equals, value = (s.strip() for s in item.partition("="))
        if not equals:
            raise _label_error(name, "pair", item)
        if not _is_label_key(key):
            raise _label_error(name, "key", key)
        if value and not (len(value) <= 63 and _LABEL_NAME.fullmatch(value)):
            raise _label_error(name, "value", value)
        if key in KVRIGHT_LABEL_KEYS:
            raise SettingsError(
                f"{name}: {key!r} is a label kvright sets itself; accepted: any other key "
                f"(kvright's own: {', '.join(sorted(KVRIGHT_LABEL_KEYS))})"
            )
        if key in pairs:
            raise SettingsError(f"{name}: {key!r} is given twice; accepted: each key once")
        pairs[key] = value
    return tuple(pairs.items())


def _readable_file(env: Mapping[str, str], name: str) -> str:
    """A path that names a readable file now (a Secret mounted into the pod); empty when unset."""
    path = env.get(name, "").strip()
    if not path:
        return ""
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise SettingsError(
            f"{name}={path!r} cannot be read ({exc.strerror or type(exc).__name__}); accepted: the path of a "
            "readable file, e.g. a key of a Secret mounted into the operator's pod"
        ) from None
    return path


def _prometheus(env: Mapping[str, str]) -> dict[str, str]:
    """KVRIGHT_PROMETHEUS_URL and how to reach it: a CA bundle, and a bearer token or basic auth."""
    url = env.get("KVRIGHT_PROMETHEUS_URL", "").strip().rstrip("/")
    out = {
        "prometheus_url": url,
        "prometheus_ca_file": _readable_file(env, "KVRIGHT_PROMETHEUS_CA_FILE"),
        "prometheus_bearer_token_file": _readable_file(env, "KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE"),
        "prometheus_username": env.get("KVRIGHT_PROMETHEUS_USERNAME", "").strip(),
        "prometheus_password_file": _readable_file(env, "KVRIGHT_PROMETHEUS_PASSWORD_FILE"),
    }
    given = [f"KVRIGHT_{k.upper()}" for k, v in out.items() if v and k != "prometheus_url"]
    if not url:
        if given:
            raise SettingsError(
                f"{', '.join(given)} set but KVRIGHT_PROMETHEUS_URL is empty; accepted: the Prometheus URL "
                "with them, or none of them (feedback off)"
            )
        return out
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(
            f"KVRIGHT_PROMETHEUS_URL={url!r} is not an http(s) URL; accepted: e.g. http://prometheus:9090"
        )
    if "@" in parts.netloc:
        # The settings are logged at startup: a credential in the URL would be too.
        raise SettingsError(
            "KVRIGHT_PROMETHEUS_URL carries credentials (user:password@); accepted: a URL without them, "
            "with KVRIGHT_PROMETHEUS_USERNAME and KVRIGHT_PROMETHEUS_PASSWORD_FILE"
        )
    if out["prometheus_ca_file"] and parts.scheme != "https":
        raise SettingsError(
            f"KVRIGHT_PROMETHEUS_CA_FILE is set but KVRIGHT_PROMETHEUS_URL={url!r} is not https; accepted: "
            "an https:// URL with it (a CA verifies a TLS certificate), or no CA file"
        )
    if bool(out["prometheus_username"]) != bool(out["prometheus_password_file"]):
        raise SettingsError(
            "KVRIGHT_PROMETHEUS_USERNAME and KVRIGHT_PROMETHEUS_PASSWORD_FILE go together (basic auth); "
            "accepted: both, or neither"
        )
    if out["prometheus_bearer_token_file"] and out["prometheus_username"]:
        raise SettingsError(
            "KVRIGHT_PROMETHEUS_BEARER_TOKEN_FILE and basic auth (KVRIGHT_PROMETHEUS_USERNAME) are both set; "
            "accepted: one of them (a request carries one Authorization header)"
        )
    return out


def from_env(env: Mapping[str, str]) -> Settings:
    """Settings from environment variables; unset or empty variables take the defaults."""
    port = _port(env, "KVRIGHT_METRICS_PORT", 8080, 0)
    health = _port(env, "KVRIGHT_HEALTH_PORT", 8081, 0)
    if health and health == port:
        raise SettingsError(
            f"KVRIGHT_HEALTH_PORT={int(health)} is KVRIGHT_METRICS_PORT too; accepted: another port, "
            "or 0 (off)"
        )
    namespaces = tuple(ns.strip() for ns in env.get("KVRIGHT_NAMESPACES", "").split(",") if ns.strip())
    endpoint = env.get("KVRIGHT_HF_ENDPOINT", "").strip().rstrip("/") or PUBLIC_HUB
    if not endpoint.startswith(("http://", "https://")):
        raise SettingsError(f"KVRIGHT_HF_ENDPOINT={endpoint!r} is not a URL; accepted: http(s)://host[:port]")
    if "@" in urllib.parse.urlsplit(endpoint).netloc:
        # It goes into pod specs as HF_ENDPOINT: a credential there is readable by anyone who reads pods.
        raise SettingsError(
            "KVRIGHT_HF_ENDPOINT carries credentials (user:password@); accepted: a URL without them, with "
            "the token in the model's hub.tokenSecretRef Secret"
        )
    picker = env.get("KVRIGHT_ENDPOINT_PICKER", DEFAULT_ENDPOINT_PICKER).strip()
    if picker and not _SERVICE_NAME.fullmatch(picker.replace("{name}", "x")):
        raise SettingsError(
            f"KVRIGHT_ENDPOINT_PICKER={picker!r} is not a Service name; accepted: a DNS-1035 label in which "
            "{name} stands for the LLMDeployment's name (e.g. {name}-epp), or empty for no picker"
        )
    picker_port = _port(env, "KVRIGHT_ENDPOINT_PICKER_PORT", DEFAULT_ENDPOINT_PICKER_PORT, 1)
    failure_mode = env.get("KVRIGHT_ENDPOINT_PICKER_FAILURE_MODE", "").strip() or "FailClose"
    if failure_mode not in FAILURE_MODES:
        raise SettingsError(
            f"KVRIGHT_ENDPOINT_PICKER_FAILURE_MODE={failure_mode!r}; accepted: {', '.join(FAILURE_MODES)}"
        )
    try:
        pairs = [pair.strip() for pair in env.get("KVRIGHT_GPU_PRICES", "").split(",")]
        prices = tuple(capacity.parse_price(pair) for pair in pairs if pair)
    except capacity.CapacityError as exc:
        raise SettingsError(f"KVRIGHT_GPU_PRICES: {exc}") from None
    raw_level = env.get("LOG_LEVEL", "").strip()
    log_level = raw_level.upper() or "INFO"
    if log_level not in LOG_LEVELS:
        raise SettingsError(
            f"LOG_LEVEL={raw_level!r} is not a log level; accepted: {', '.join(LOG_LEVELS)}, any case"
        )
    return Settings(
        **_prometheus(env),
        metrics_port=port,
        health_port=health,
        namespaces=namespaces,
        hf_endpoint=endpoint.rstrip("/"),
        reconcile_seconds=_number(env, "KVRIGHT_RECONCILE_SECONDS", 60.0, 0.1, 86400),
        vllm_image=env.get("KVRIGHT_VLLM_IMAGE", "").strip() or DEFAULT_VLLM_IMAGE,
        hub_timeout_seconds=_number(env, "KVRIGHT_HUB_TIMEOUT_SECONDS", 10.0, 0.1, 600),
        hub_attempts=int(_number(env, "KVRIGHT_HUB_ATTEMPTS", 3, 1, 20)),
        peering=env.get("KVRIGHT_PEERING", "").strip(),
        endpoint_picker=picker,
        endpoint_picker_port=picker_port,
        endpoint_picker_failure_mode=failure_mode,
        gpu_prices=prices,
        gpu_occupancy=_flag(env, "KVRIGHT_GPU_OCCUPANCY", True),
        pod_monitor_labels=_labels(env, "KVRIGHT_PODMONITOR_LABELS"),
        log_level=log_level,
        fault_exit_after_writes=int(_number(env, "KVRIGHT_FAULT_EXIT_AFTER_WRITES", 0, 0, 1000)),
        fault_pause_after_writes=int(_number(env, "KVRIGHT_FAULT_PAUSE_AFTER_WRITES", 0, 0, 1000)),
    )
