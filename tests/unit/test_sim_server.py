"""kvright_dev.sim.server: the OpenAI-compatible endpoint, /metrics with vLLM's names, and draining.

Real HTTP on 127.0.0.1 with a real engine thread; the in-process tests use a linear step model so
numbers are checkable, and one test runs the real CLI (`python -m kvright_dev.sim serve ...`) with
the simulator's own physics as a subprocess and drains it with SIGTERM. Nothing is faked.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client import generate_latest

from kvright_dev.sim.engine import Engine
from kvright_dev.sim.metrics import TPOT_BUCKETS, VLLMMetrics
from kvright_dev.sim.server import SimServer, parse_command_line

ROOT = Path(__file__).resolve().parents[2]


def make_server(*, max_num_seqs: int = 8, time_scale: float = 20.0) -> SimServer:
    engine = Engine(
        step_seconds=lambda w: 0.020 + 0.001 * w.decode_seqs + w.prefill_tokens / 100_000.0,
        max_num_seqs=max_num_seqs,
        num_gpu_blocks=2000,
        max_model_len=4096,
    )
    metrics = VLLMMetrics(
        model_name="tiny",
        cache_config={"block_size": "16", "num_gpu_blocks": "2000", "cache_dtype": "auto"},
    )
    return SimServer(engine=engine, metrics=metrics, served_model_name="tiny", time_scale=time_scale)


@pytest.fixture
def sim() -> Iterator[SimServer]:
    server = make_server()
    server.start()
    yield server
    server.stop()


def url(server: SimServer, path: str) -> str:
    return f"http://127.0.0.1:{server.port}{path}"


def complete(server: SimServer, prompt: object, max_tokens: int, model: str = "tiny") -> requests.Response:
    return requests.post(
        url(server, "/v1/completions"),
        json={"model": model, "prompt": prompt, "max_tokens": max_tokens},
        timeout=30,
    )


def test_completion_is_openai_shaped_with_virtual_latencies(sim: SimServer) -> None:
    response = complete(sim, list(range(300)), 10)
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "text_completion"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": 300, "completion_tokens": 10, "total_tokens": 310}
    # Alone in the batch: every decode step is 21 ms of virtual time.
    assert body["kvright_sim"]["tpot_seconds"] == pytest.approx(0.021)


def test_string_prompts_count_four_characters_per_token(sim: SimServer) -> None:
    assert complete(sim, "x" * 400, 2).json()["usage"]["prompt_tokens"] == 100


@pytest.mark.parametrize(
    ("prompt", "max_tokens", "model", "status", "fragment"),
    [
        ([1] * 4000, 200, "tiny", 400, "maximum context length is 4096"),
        ({"not": "a prompt"}, 5, "tiny", 400, "prompt must be a string or a list of token ids"),
        ("hi", 5, "other", 404, "The model `other` does not exist."),
    ],
    ids=["too-long", "bad-prompt", "unknown-model"],
)
def test_bad_requests_are_refused_like_vllm(
    sim: SimServer, prompt: object, max_tokens: int, model: str, status: int, fragment: str
) -> None:
    response = complete(sim, prompt, max_tokens, model)
    assert response.status_code == status
    assert fragment in response.json()["message"]


def parse_metrics(text: str) -> tuple[dict[str, str], dict[str, float]]:
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.M))
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            values[key] = float(value)
    return types, values


def test_metrics_have_vllm_names_types_labels_and_buckets(sim: SimServer) -> None:
    threads = [threading.Thread(target=complete, args=(sim, [1] * 100, 20)) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text = requests.get(url(sim, "/metrics"), timeout=5).text
    types, values = parse_metrics(text)
    for name, kind in {
        "vllm:request_time_per_output_token_seconds": "histogram",
        "vllm:inter_token_latency_seconds": "histogram",
        "vllm:time_to_first_token_seconds": "histogram",
        "vllm:e2e_request_latency_seconds": "histogram",
        "vllm:kv_cache_usage_perc": "gauge",
        "vllm:num_requests_running": "gauge",
        "vllm:num_requests_waiting": "gauge",
        "vllm:num_preemptions_total": "counter",
        "vllm:prompt_tokens_total": "counter",
        "vllm:generation_tokens_total": "counter",
        "vllm:request_success_total": "counter",
        "vllm:cache_config_info": "gauge",
    }.items():
        assert types.get(name) == kind, name
    labels = '{engine="0",model_name="tiny"}'
    assert values[f"vllm:request_time_per_output_token_seconds_count{labels}"] == 12
    assert values[f"vllm:generation_tokens_total{labels}"] == 12 * 20
    assert values[f"vllm:prompt_tokens_total{labels}"] == 12 * 100
    assert values['vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"}'] == 12
    buckets = re.findall(r'vllm:request_time_per_output_token_seconds_bucket\{engine="0",le="([^"]+)"', text)
    assert [float(b) for b in buckets if b != "+Inf"] == list(TPOT_BUCKETS)
    assert 'vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="2000"} 1.0' in text
    # 8 seats for 12 requests: 4 waited, so the batch peaked at max-num-seqs.
    assert values[f"vllm:request_queue_time_seconds_count{labels}"] == 12


def test_queueing_shows_in_the_waiting_gauge() -> None:
    server = make_server(max_num_seqs=2, time_scale=1.0)
    server.start()
    try:
        threads = [threading.Thread(target=complete, args=(server, [1] * 10, 30)) for _ in range(5)]
        for t in threads:
            t.start()
        seen = set()
        for _ in range(100):
            _, values = parse_metrics(requests.get(url(server, "/metrics"), timeout=5).text)
            seen.add(
                (
                    values['vllm:num_requests_running{engine="0",model_name="tiny"}'],
                    values['vllm:num_requests_waiting{engine="0",model_name="tiny"}'],
                )
            )
            if (2.0, 3.0) in seen:
                break
            time.sleep(0.02)
        assert (2.0, 3.0) in seen, seen
        for t in threads:
            t.join()
    finally:
        server.stop()


def test_draining_refuses_new_work_but_finishes_admitted_requests(sim: SimServer) -> None:
    results: list[int] = []
    first = threading.Thread(target=lambda: results.append(complete(sim, [1] * 10, 400).status_code))
    first.start()
    while not sim.pending:
        time.sleep(0.01)
    sim.drain()
    assert requests.get(url(sim, "/health"), timeout=5).status_code == 503
    refused = complete(sim, [1] * 10, 5)
    assert refused.status_code == 503
    assert "shutting down" in refused.json()["message"]
    first.join(timeout=30)
    assert results == [200]


def test_command_line_is_vllm_serves() -> None:
    args = parse_command_line(
        shlex.split(
            "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2 --max-num-seqs 48 "
            "--kv-cache-dtype fp8 --max-model-len 8192 --gpu-memory-utilization 0.92 "
            "--served-model-name chat --port 8000 --enable-chunked-prefill --gpu NVIDIA-H100-80GB-HBM3 "
            "--architecture llama-3.1-8b"
        )
    )
    assert (args.model, args.served_model_name, args.tensor_parallel_size, args.max_num_seqs) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        "chat",
        2,
        48,
    )
    assert (args.kv_cache_dtype, args.max_model_len, args.gpu_memory_utilization) == ("fp8", 8192, 0.92)
    assert (args.gpu, args.architecture, args.host) == ("NVIDIA-H100-80GB-HBM3", "llama-3.1-8b", "127.0.0.1")
    assert args.ignored == ("--enable-chunked-prefill",)


def test_bad_simulator_flags_are_one_line() -> None:
    with pytest.raises(SystemExit, match=r"--efficiency 0.0 \(accepted: 0 < e <= 10\)"):
        parse_command_line(["serve", "m", "--efficiency", "0"])


def test_cli_serves_with_the_sims_own_physics_and_drains_on_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            *shlex.split(
                "-m kvright_dev.sim serve llama-3.1-8b --max-num-seqs 16 --max-model-len 4096 "
                "--gpu NVIDIA-H100-80GB-HBM3 --port 0 --time-scale 20 --efficiency 0.5"
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        match = re.search(r"http://127.0.0.1:(\d+)", banner)
        assert match, (banner, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        base = f"http://127.0.0.1:{match.group(1)}"
        assert "blocks=" in banner and "max-num-seqs=16" in banner
        body = requests.post(
            f"{base}/v1/completions",
            json={"model": "llama-3.1-8b", "prompt": [1] * 500, "max_tokens": 8},
            timeout=30,
        ).json()
        slow = body["kvright_sim"]["tpot_seconds"]
        # Llama-3.1-8B reads ~16 GB of weights per step; at half kvright's predicted speed that is > 8 ms.
        assert 0.008 < slow < 0.05, slow
        metrics = requests.get(f"{base}/metrics", timeout=5).text
        blocks = re.search(r'num_gpu_blocks="(\d+)"', metrics)
        assert blocks and int(blocks.group(1)) > 1000
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_nan_fault_poisons_kv_usage_and_the_tpot_sum() -> None:
    metrics = VLLMMetrics(model_name="tiny", cache_config={"block_size": "16"}, fault="nan")
    metrics.set_state(running=1, waiting=0, kv_cache_usage=0.5)
    engine = Engine(step_seconds=lambda w: 0.02, max_num_seqs=1,
                    num_gpu_blocks=100, max_model_len=1024)  # fmt: skip
    engine.submit(prompt_tokens=4, max_tokens=3)
    while engine.busy:
        metrics.record_step(engine.step(), prompt_tokens=0)
    _, values = parse_metrics(generate_latest(metrics.registry).decode())
    labels = '{engine="0",model_name="tiny"}'
    assert values[f"vllm:kv_cache_usage_perc{labels}"] != values[f"vllm:kv_cache_usage_perc{labels}"]  # NaN
    # prometheus_client puts a NaN observation in no bucket (so not in _count) but adds it to _sum.
    assert values[f"vllm:request_time_per_output_token_seconds_count{labels}"] == 1
    total = values[f"vllm:request_time_per_output_token_seconds_sum{labels}"]
    assert total != total  # NaN


def test_a_burst_of_connections_is_not_reset(sim: SimServer) -> None:
    """socketserver's default listen backlog (5) resets bursts; the simulator listens like uvicorn."""
    errors: list[str] = []

    def one() -> None:
        try:
            complete(sim, [1] * 16, 2)
        except requests.RequestException as exc:
            errors.append(repr(exc)[:120])

    threads = [threading.Thread(target=one) for _ in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
