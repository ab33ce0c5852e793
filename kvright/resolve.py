"""Architecture resolution: a catalog id, a config.json in a ConfigMap, or one fetched from the hub.

An IO edge: it gathers a ``config.json`` and hands it to :func:`capacity.architecture_from_config`.
Reading Kubernetes objects goes through the small :class:`KubeReader` protocol (the operator passes
its API client; unit tests a dict), fetching goes through :class:`HubClient` (``requests``, base URL
from ``KVRIGHT_HF_ENDPOINT``, optional bearer token, retries with exponential backoff on connection
errors, 429 and 5xx). Every failure is a :class:`ResolveError` with a condition reason, a one-line
message with the fix, and whether trying again later may help.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import requests

from capacity import Architecture, CapacityError, architecture_from_config, catalog_architecture, catalog_ids
from capacity.quantization import LEGACY_QUANT_FILES
from kvright.api import ArchitectureRef
from kvright.conditions import Reason

__all__ = ["HubClient", "KubeReader", "ResolveError", "Resolved", "resolve"]

MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""A config.json is a few KB; anything this large is not one."""


class ResolveError(Exception):
    """The architecture could not be had. ``reason`` is a condition reason; ``retryable`` says whether
    the same spec may succeed later (a hub outage, a ConfigMap not created yet)."""

    def __init__(self, reason: str, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.reason = reason
        self.retryable = retryable


@dataclass(frozen=True, kw_only=True)
class Resolved:
    architecture: Architecture
    source: str
    """Catalog, ConfigMap or Hub."""
    detail: str
    """Where exactly: the catalog id, namespace/name[key], or repository@revision."""


class KubeReader(Protocol):
    """What resolution reads from the API server; None means the object does not exist."""

    def config_map_data(self, namespace: str, name: str) -> Mapping[str, str] | None: ...

    def secret_data(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """The Secret's data, base64-decoded."""
        ...


QUANT_CONFIG = "hf_quant_config.json"
"""NVIDIA ModelOpt (0.29 and before) keeps the quantization beside config.json, in this file; vLLM reads it
when config.json has no ``quantization_config``, and so does kvright (the hub's, or a ConfigMap's key of
this name)."""


MODULES = "modules.json"
"""sentence-transformers' list of modules: where it holds a pooling module, vLLM serves the checkpoint with
its pooling runner (an embedding model, whatever class config.json names), which kvright does not size;
read from the hub, or a ConfigMap's key of this name, as vLLM reads it."""


class HubClient:
    """Fetches ``{endpoint}/{repository}/resolve/{revision}/{file}`` (``config.json``; where vLLM reads them,
    ``hf_quant_config.json`` or a legacy ``quantize_config.json`` / ``quant_config.json``; ``modules.json``)
    with retries, and caches successful answers, a file
    that is not there included, for ``cache_seconds`` (an architecture does not change under a revision)."""

    def __init__(
        self,
        endpoint: str,
        *,
        timeout_seconds: float = 10.0,
        attempts: int = 3,
        backoff_seconds: float = 0.5,
        cache_seconds: float = 3600.0,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self.attempts = max(1, attempts)
        self.backoff_seconds = backoff_seconds
        self.cache_seconds = cache_seconds
        self._session = session or requests.Session()
        self._sleep = sleep
        self._clock = clock
        self._cache: dict[tuple[str, str, str, str], tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def url(self, repository: str, revision: str, filename: str = "config.json") -> str:
        return f"{self.endpoint}/{repository}/resolve/{quote(revision, safe='')}/{filename}"

    def fetch_config(self, repository: str, revision: str, token: str | None = None) -> Mapping[str, Any]:
        """The repository's config.json; a ResolveError when it cannot be had."""
        config = self.fetch_file(repository, revision, "config.json", token)
        assert isinstance(config, dict)  # not optional (a 404 raised), and an object (_parse_config)
        return config

    def fetch_file(
        self,
        repository: str,
        revision: str,
        filename: str,
        token: str | None = None,
        *,
        optional: bool = False,
    ) -> Any:
        """A JSON file of the repository (an object; a list for :data:`MODULES`); None when ``optional`` and
        the hub answers that it is not there (404, or 401/403 as object-storage mirrors answer a missing
        file)."""
        # The token is part of the key: a gated config fetched with one namespace's token must not be
        # served to a spec that has none.
        key = (repository, revision, filename, hashlib.sha256((token or "").encode()).hexdigest())
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and self._clock() - cached[0] < self.cache_seconds:
            return cached[1]
        found = self._fetch(repository, revision, filename, token, optional)
        with self._lock:
            self._cache[key] = (self._clock(), found)
        return found

    def _fetch(self, repository: str, revision: str, filename: str, token: str | None, optional: bool) -> Any:
        url = self.url(repository, revision, filename)
        headers = {"Accept": "application/json", "User-Agent": "kvright"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        last = ""
        for attempt in range(self.attempts):
            if attempt:
                self._sleep(self.backoff_seconds * 2 ** (attempt - 1))
            try:
                response = self._session.get(url, headers=headers, timeout=self.timeout_seconds)
            except requests.RequestException as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            status = response.status_code
            if status == 200:
                return _parse_config(response.content, url, filename)
            if optional and status in (401, 403, 404):
                # config.json came with the same token; a mirror backed by object storage answers a
                # missing file 403 (or 401), not 404
                return None
            if status in (401, 403):
                raise ResolveError(
                    Reason.HUB_FETCH_FAILED,
                    f"GET {url} answered {status}: the repository is gated or private; "
                    "set model.hub.tokenSecretRef to a Secret holding a token with access",
                    retryable=False,
                )
            if status == 404:
                raise ResolveError(
                    Reason.HUB_FETCH_FAILED,
                    f"GET {url} answered 404: no {filename} for {repository} at revision {revision}; "
                    "check model.hub.repository and revision",
                    retryable=False,
                )
            last = f"HTTP {status}"
            if status != 429 and status < 500:
                break
        raise ResolveError(
            Reason.HUB_FETCH_FAILED,
            f"GET {url} failed after {self.attempts} attempt(s) ({last}); kvright retries with backoff",
            retryable=True,
        )


def _parse_config(content: bytes, where: str, filename: str = "config.json") -> Any:
    """The file's JSON: an object (a list for :data:`MODULES`)."""
    if len(content) > MAX_CONFIG_BYTES:
        raise ResolveError(
            Reason.ARCHITECTURE_INVALID,
            f"{where} is {len(content)} bytes, not a {filename} (accepted: up to {MAX_CONFIG_BYTES})",
            retryable=False,
        )
    try:
        config = json.loads(content)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ResolveError(
            Reason.ARCHITECTURE_INVALID,
            f"{where} is not JSON ({exc}); accepted: a Hugging Face {filename}",
            retryable=False,
        ) from None
    expected = list if filename == MODULES else dict
    if not isinstance(config, expected):
        raise ResolveError(
            Reason.ARCHITECTURE_INVALID,
            f"{where} holds a JSON {type(config).__name__}; accepted: a {filename} "
            f"{'list' if expected is list else 'object'}",
            retryable=False,
        )
    return config


def _convert(
    config: Mapping[str, Any],
    name: str,
    where: str,
    quant: Mapping[str, Any] | None = None,
    modules: list[Any] | None = None,
    legacy: tuple[str, Mapping[str, Any]] | None = None,
) -> Architecture:
    try:
        return architecture_from_config(
            config, name=name, hf_quant_config=quant, modules=modules, legacy_quant_config=legacy
        )
    except CapacityError as exc:
        raise ResolveError(Reason.ARCHITECTURE_INVALID, f"{where}: {exc}", retryable=False) from None


def _needs_quant_config(config: Mapping[str, Any]) -> bool:
    """vLLM looks for hf_quant_config.json only when config.json has no ``quantization_config``."""
    return config.get("quantization_config") is None


def resolve(
    ref: ArchitectureRef, *, namespace: str, model_name: str, kube: KubeReader, hub: HubClient
) -> Resolved:
    """The architecture ``ref`` names. Raises :class:`ResolveError`."""
    if ref.source == "Catalog":
        assert ref.catalog_id is not None
        try:
            arch = catalog_architecture(ref.catalog_id)
        except (CapacityError, KeyError):
            raise ResolveError(
                Reason.ARCHITECTURE_UNKNOWN,
                f"model.architecture {ref.catalog_id!r} is not in the catalog; accepted: "
                f"{', '.join(catalog_ids())}, or use configMapRef or hub",
                retryable=False,
            ) from None
        return Resolved(architecture=arch, source="Catalog", detail=ref.catalog_id)

    if ref.source == "ConfigMap":
        assert ref.config_map is not None
        cm = ref.config_map
        where = f"ConfigMap {namespace}/{cm.name} key {cm.key}"
        data = kube.config_map_data(namespace, cm.name)
        if data is None:
            raise ResolveError(
                Reason.CONFIG_MAP_MISSING,
                f"{where}: the ConfigMap does not exist; create it with the model's config.json",
                retryable=True,
            )
        if cm.key not in data:
            raise ResolveError(
                Reason.CONFIG_MAP_MISSING,
                f"{where}: no such key (keys: {', '.join(sorted(data)) or 'none'}); "
                "set model.configMapRef.key",
                retryable=True,
            )
        config = _parse_config(data[cm.key].encode(), where)
        quant = None
        if _needs_quant_config(config) and cm.key != QUANT_CONFIG and QUANT_CONFIG in data:
            beside = f"ConfigMap {namespace}/{cm.name} key {QUANT_CONFIG}"
            quant = _parse_config(data[QUANT_CONFIG].encode(), beside, QUANT_CONFIG)
        legacy = None
        if _needs_quant_config(config) and quant is None:
            legacy_name = next((n for n in LEGACY_QUANT_FILES if n in data and n != cm.key), None)
            if legacy_name is not None:
                beside = f"ConfigMap {namespace}/{cm.name} key {legacy_name}"
                legacy = (legacy_name, _parse_config(data[legacy_name].encode(), beside, legacy_name))
        modules = None
        if cm.key != MODULES and MODULES in data:
            beside = f"ConfigMap {namespace}/{cm.name} key {MODULES}"
            modules = _parse_config(data[MODULES].encode(), beside, MODULES)
        beside_files = ((QUANT_CONFIG, quant), (legacy[0] if legacy else "", legacy), (MODULES, modules))
        read = [cm.key, *(name for name, got in beside_files if got is not None)]
        return Resolved(
            architecture=_convert(config, model_name, where, quant, modules, legacy),
            source="ConfigMap",
            detail=f"{namespace}/{cm.name}[{', '.join(read)}]",
        )

    assert ref.hub_repository is not None
    token: str | None = None
    if ref.hub_token is not None:
        secret = kube.secret_data(namespace, ref.hub_token.name)
        if secret is None or ref.hub_token.key not in secret:
            raise ResolveError(
                Reason.TOKEN_SECRET_MISSING,
                f"Secret {namespace}/{ref.hub_token.name} key {ref.hub_token.key} does not exist; "
                "create it or drop model.hub.tokenSecretRef",
                retryable=True,
            )
        token = secret[ref.hub_token.key].strip()
    config = hub.fetch_config(ref.hub_repository, ref.hub_revision, token)
    quant = None
    if _needs_quant_config(config):
        quant = hub.fetch_file(ref.hub_repository, ref.hub_revision, QUANT_CONFIG, token, optional=True)
    legacy = None
    for legacy_name in LEGACY_QUANT_FILES if _needs_quant_config(config) and quant is None else ():
        found = hub.fetch_file(ref.hub_repository, ref.hub_revision, legacy_name, token, optional=True)
        if found is not None:
            legacy = (legacy_name, found)
            break
    modules = hub.fetch_file(ref.hub_repository, ref.hub_revision, MODULES, token, optional=True)
    where = f"{ref.hub_repository}@{ref.hub_revision}"
    return Resolved(
        architecture=_convert(config, ref.hub_repository, where, quant, modules, legacy),
        source="Hub",
        detail=where,
    )
