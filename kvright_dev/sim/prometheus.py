"""A local Prometheus for tests and the demo: Debian's binary on loopback, scraping file_sd targets.

It scrapes every second from the pod runner's file_sd file (targets labelled ``namespace``,
``llmdeployment``, ``pod``), keeps its TSDB in a work folder, and can be stopped and started again
on the same port (the "Prometheus goes away" test). ``relabel_configs`` and
``metric_relabel_configs`` are passed through for tests that break labels or names on purpose.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import requests
import yaml

__all__ = ["LocalPrometheus", "PrometheusMissing"]


class PrometheusMissing(RuntimeError):
    """The prometheus binary is not installed."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalPrometheus:
    def __init__(
        self,
        work: Path,
        file_sd: Path,
        *,
        relabel_configs: list[dict[str, Any]] | None = None,
        metric_relabel_configs: list[dict[str, Any]] | None = None,
    ) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise PrometheusMissing(
                "prometheus not found on PATH: install Debian's prometheus package (apt-get install "
                "prometheus)"
            )
        self.binary = binary
        self.work = Path(work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        job: dict[str, Any] = {
            "job_name": "vllm",
            "file_sd_configs": [{"files": [str(file_sd)], "refresh_interval": "1s"}],
        }
        if relabel_configs:
            job["relabel_configs"] = relabel_configs
        if metric_relabel_configs:
            job["metric_relabel_configs"] = metric_relabel_configs
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [job],
        }
        (self.work / "prometheus.yml").write_text(yaml.safe_dump(config))

    @property
    def log(self) -> str:
        path = self.work / "prometheus.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def start(self, timeout: float = 60.0) -> None:
        """Start (or restart on the same port and TSDB) and wait until /-/ready answers."""
        log = open(self.work / "prometheus.log", "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.work / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.work / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=2h",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"Prometheus did not become ready on {self.url}; log tail:\n{self.log}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
