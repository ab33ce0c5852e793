"""The one local Prometheus for tests, demos and benches: Debian's binary on a free 127.0.0.1 port,
scraping every second what file service discovery lists, its TSDB and log in a work folder.

    with Prometheus(work).start() as prom:
        prom.add_targets("vllm", ["127.0.0.1:8000"], {"namespace": "ns", "llmdeployment": "x"})
        prom.wait_for_target_up("vllm")
        prom.query('up{job="vllm"}')

Targets come from ``<work>/sd/*.json``: ``add_targets`` writes one file per group (its targets carry
``job=<name>`` unless the labels set one), and the pod runner writes its own file there
(``prom.sd_dir / "pods.json"``). ``relabel_configs`` and ``metric_relabel_configs`` apply to that job
(for tests that break labels or names on purpose); ``extra_scrape_configs`` add jobs (static targets).
The config is checked with ``promtool check config`` when promtool is installed, so a bad config fails
with promtool's message. ``stop`` then ``start`` restarts on the same port and TSDB (the "Prometheus
goes away" test). A missing binary raises PrometheusMissing, saying how to install it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import requests
import yaml

from kvright_dev.procs import LOOPBACK, LoopbackServer, free_port, wait_until

__all__ = ["Prometheus", "PrometheusMissing"]

START_SECONDS = 60.0


class PrometheusMissing(RuntimeError):
    """The prometheus binary is not installed."""


class Prometheus:
    def __init__(
        self,
        work: Path,
        *,
        job: str = "file_sd",
        scrape_interval: str = "1s",
        relabel_configs: Sequence[Mapping[str, Any]] = (),
        metric_relabel_configs: Sequence[Mapping[str, Any]] = (),
        extra_scrape_configs: Sequence[Mapping[str, Any]] = (),
        web_config: Mapping[str, Any] | None = None,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        """``web_config`` is Prometheus's ``--web.config.file`` (``tls_server_config``, ``basic_auth_users``):
        with TLS the ``url`` is https. This class's own helpers (targets, query) send plain GETs, without
        the CA or the credentials, and ``ready`` (a query that has both) tells when it has started."""
        binary = shutil.which("prometheus")
        if binary is None:
            raise PrometheusMissing(
                "prometheus is not on PATH: run `make tools` (it installs Debian's prometheus package) or "
                "apt-get install prometheus"
            )
        self.work = Path(work)
        self.sd_dir = self.work / "sd"
        """File service discovery folder: every ``*.json`` in it is scraped."""
        self.sd_dir.mkdir(parents=True, exist_ok=True)
        file_sd: dict[str, Any] = {
            "job_name": job,
            "honor_labels": True,
            "file_sd_configs": [{"files": [str(self.sd_dir / "*.json")], "refresh_interval": "1s"}],
        }
        if relabel_configs:
            file_sd["relabel_configs"] = [dict(c) for c in relabel_configs]
        if metric_relabel_configs:
            file_sd["metric_relabel_configs"] = [dict(c) for c in metric_relabel_configs]
        config = {
            "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval,
                       "evaluation_interval": scrape_interval},
            "scrape_configs": [file_sd, *[dict(c) for c in extra_scrape_configs]],
        }
        self.config = self.work / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        self._check_config()
        port = free_port()
        web: list[str] = []
        if web_config:
            if ready is None:
                raise ValueError("with a web config, pass ready=: /-/ready wants its TLS and auth too")
            web_file = self.work / "web.yml"
            web_file.write_text(yaml.safe_dump(dict(web_config), sort_keys=False), encoding="utf-8")
            web = [f"--web.config.file={web_file}"]
        self.server = LoopbackServer(
            [binary, f"--config.file={self.config}", f"--storage.tsdb.path={self.work / 'tsdb'}",
             f"--web.listen-address={LOOPBACK}:{port}", "--web.enable-lifecycle",
             "--storage.tsdb.retention.time=2h", "--log.level=warn", *web],
            name="prometheus", port=port, ready_path="/-/ready", log_path=self.work / "prometheus.log",
            ready=ready,
        )
        tls = bool(web_config and web_config.get("tls_server_config"))
        self.url = f"https://{LOOPBACK}:{port}" if tls else self.server.url
        """Base URL, http://127.0.0.1:<port>."""

    def _check_config(self) -> None:
        promtool = shutil.which("promtool")
        if promtool is None:
            return
        checked = subprocess.run([promtool, "check", "config", str(self.config)], capture_output=True,
                                 text=True, timeout=60, check=False)
        if checked.returncode != 0:
            said = (checked.stdout + checked.stderr).strip()[-1500:]
            raise ValueError(f"promtool rejects {self.config}: {said}")

    # -- process --------------------------------------------------------------------------------------

    def start(self, timeout: float = START_SECONDS) -> Prometheus:
        """Start (or restart on the same port and TSDB) and wait until /-/ready answers."""
        self.server.start(timeout)
        return self

    def stop(self) -> None:
        self.server.stop()

    @property
    def running(self) -> bool:
        return self.server.running

    def log_tail(self, lines: int = 40) -> str:
        return self.server.log_tail(lines)

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- targets --------------------------------------------------------------------------------------

    def add_targets(self, name: str, targets: Sequence[str], labels: Mapping[str, str] | None = None) -> Path:
        """Write (or replace) the target group ``name``; Prometheus picks it up within a second."""
        path = self.sd_dir / f"{name}.json"
        tmp = path.with_suffix(".tmp")  # not *.json: Prometheus must never read half a file
        tmp.write_text(json.dumps([{"targets": list(targets), "labels": {"job": name, **(labels or {})}}]),
                       encoding="utf-8")
        tmp.replace(path)
        return path

    def remove_targets(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.sd_dir / f"{name}.json").unlink()

    def targets(self) -> list[dict[str, Any]]:
        resp = requests.get(f"{self.url}/api/v1/targets", params={"state": "active"}, timeout=10)
        return list(resp.json()["data"]["activeTargets"])

    def wait_for_target_up(self, job: str, timeout: float = 60) -> list[dict[str, Any]]:
        """Poll until every active target of ``job`` has been scraped successfully."""

        def up() -> list[dict[str, Any]]:
            mine = [t for t in self.targets() if t["labels"].get("job") == job]
            return mine if mine and all(t["health"] == "up" for t in mine) else []

        return wait_until(up, timeout, what=f"Prometheus targets of job {job!r} to be up")

    # -- queries --------------------------------------------------------------------------------------

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; returns the ``result`` vector (raises on an API error)."""
        resp = requests.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        body = resp.json()
        if body.get("status") != "success":
            raise AssertionError(f"query {expr!r} failed: {body.get('error', resp.text)[:500]}")
        return list(body["data"]["result"])

    def query_value(self, expr: str) -> float | None:
        """The value of the first series an instant query returns, or None when it returns none."""
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None
