"""The simulator speaks real vLLM's metrics dialect: families, types and label names match.

kvright's end-to-end tests run kvright_dev.sim instead of vLLM on fake GPU nodes; they prove something
only if the simulator's `/metrics` looks like vLLM's to Prometheus and to kvright.observe. This module
starts the simulator (kvright's venv, `python -m kvright_dev.sim serve`, the same tiny gqa config.json)
next to the real vLLM CPU server, sends both the same few requests, and diffs the two pages:
every `vllm:` family the simulator exports must exist in vLLM 0.32 with the same type, the same
sample suffixes (`_bucket`/`_count`/`_sum`/`_total`) and the same label names; `vllm:cache_config_info`
may carry fewer labels (vLLM exports every CacheConfig field) but only ones vLLM has. The families
kvright.observe queries must be exported by both. Nothing is faked.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from kvright import observe
from kvright_dev.procs import LoopbackServer, ServerFailed, dev_environ, free_port

from .harness import METRICS_SERVER, ServerPool, VllmServer

pytestmark = pytest.mark.conformance

PROMPT = "the kv cache block token head layer tensor parallel rank batch decode"
# Families kvright.observe queries (current names; the legacy aliases are vLLM < 0.11 and gone in 0.32).
OBSERVED = {
    observe.TPOT_METRICS[0],
    observe.TPOT_METRICS[1],
    observe.KV_USAGE_METRICS[0],
    observe.TTFT_METRIC,
    observe.RUNNING_METRIC,
    observe.WAITING_METRIC,
    observe.PREEMPTIONS_METRIC,
    observe.PROMPT_TOKENS_METRIC,
    observe.GENERATION_TOKENS_METRIC,
    observe.SUCCESS_METRIC,
    observe.CACHE_CONFIG_METRIC,
}
# Labels the histogram/summary machinery adds; not part of a family's own label set.
_MACHINERY_LABELS = {"le", "quantile"}


@dataclass(frozen=True)
class Family:
    type: str
    suffixes: frozenset[str]
    """Sample-name suffixes: "" (gauge), "_total" (counter), "_bucket"/"_count"/"_sum"; never "_created"."""
    labels: frozenset[str]


def dialect(metrics_text: str) -> dict[str, Family]:
    """`vllm:` families of a /metrics page, keyed by the name as exposed (counters with `_total`)."""
    out: dict[str, Family] = {}
    for fam in text_string_to_metric_families(metrics_text):
        if not fam.name.startswith("vllm:"):
            continue
        suffixes = {s.name[len(fam.name) :] for s in fam.samples} - {"_created"}
        labels = {k for s in fam.samples for k in s.labels} - _MACHINERY_LABELS
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        out[name] = Family(fam.type, frozenset(suffixes), frozenset(labels))
    return out


class SimProcess:
    """`python -m kvright_dev.sim serve` on 127.0.0.1, from kvright's own venv."""

    def __init__(self, config_json: Path, served_name: str, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.served_name = served_name
        self.log_path = log_path
        self.argv = [
            sys.executable, "-m", "kvright_dev.sim", "serve", served_name,
            "--served-model-name", served_name,
            "--architecture", str(config_json),
            "--max-model-len", "1024",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--time-scale", "50",
        ]  # fmt: skip
        self.server = LoopbackServer(
            self.argv,
            name="simulator",
            port=self.port,
            ready_path="/health",
            log_path=log_path,
            env=dev_environ(),
        )
        try:
            self.server.start(60)
        except ServerFailed as exc:
            pytest.fail(str(exc), pytrace=False)

    def complete(self, prompt: str, *, max_tokens: int) -> None:
        response = requests.post(
            f"{self.url}/v1/completions",
            json={"model": self.served_name, "prompt": prompt, "max_tokens": max_tokens},
            timeout=60,
        )
        response.raise_for_status()

    def metrics_text(self) -> str:
        response = requests.get(f"{self.url}/metrics", timeout=10)
        response.raise_for_status()
        return response.text

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="module")
def real(vllm_servers: ServerPool) -> dict[str, Family]:
    server: VllmServer = vllm_servers.get(METRICS_SERVER)
    for _ in range(2):
        server.complete(PROMPT, max_tokens=8)
    return dialect(server.metrics_text())


@pytest.fixture(scope="module")
def sim(
    tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Family]]:
    proc = SimProcess(
        tiny_models[METRICS_SERVER.shape] / "config.json",
        METRICS_SERVER.shape,
        tmp_path_factory.mktemp("sim") / "sim.log",
    )
    try:
        for _ in range(2):
            proc.complete(PROMPT, max_tokens=8)
        yield dialect(proc.metrics_text())
    finally:
        proc.stop()


def test_every_simulated_family_exists_in_vllm_with_the_same_type(
    real: dict[str, Family], sim: dict[str, Family]
) -> None:
    unknown = sorted(set(sim) - set(real))
    assert not unknown, f"the simulator exports families vLLM does not: {unknown}"
    wrong_type = {
        name: (sim[name].type, real[name].type) for name in sim if sim[name].type != real[name].type
    }
    assert not wrong_type, f"(simulator, vLLM) types differ: {wrong_type}"
    wrong_suffixes = {
        name: (sorted(sim[name].suffixes), sorted(real[name].suffixes))
        for name in sim
        if sim[name].suffixes != real[name].suffixes
    }
    assert not wrong_suffixes, f"(simulator, vLLM) sample suffixes differ: {wrong_suffixes}"


def test_every_simulated_family_has_vllms_label_names(
    real: dict[str, Family], sim: dict[str, Family]
) -> None:
    diffs = {}
    for name, fam in sim.items():
        if name not in real:
            continue  # reported by the test above
        theirs = real[name].labels
        ok = fam.labels <= theirs if name == observe.CACHE_CONFIG_METRIC else fam.labels == theirs
        if not ok:
            diffs[name] = {
                "simulator only": sorted(fam.labels - theirs),
                "vLLM only": sorted(theirs - fam.labels),
            }
    assert not diffs, f"label names differ: {diffs}"


def test_cache_config_info_carries_what_observe_reads(
    sim: dict[str, Family], real: dict[str, Family]
) -> None:
    needed = {"num_gpu_blocks", "block_size", "cache_dtype"}
    assert needed <= real[observe.CACHE_CONFIG_METRIC].labels
    assert needed <= sim[observe.CACHE_CONFIG_METRIC].labels


@pytest.mark.parametrize("name", sorted(OBSERVED))
def test_both_export_what_observe_queries(name: str, real: dict[str, Family], sim: dict[str, Family]) -> None:
    assert name in real, f"vLLM 0.32 does not export {name}"
    assert name in sim, f"the simulator does not export {name}"
