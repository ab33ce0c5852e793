"""kvright_dev.sim.podrunner: one simulator per running vLLM pod on a GPU node, file_sd kept in step.

Faked: the Kubernetes API (a small in-memory stand-in for CoreV1Api/CustomObjectsApi list/read
calls, the unit's edge). Real: the simulator subprocesses it starts, their HTTP endpoints, the
file_sd file and the SIGTERM drain. The cluster version of this runs in tests/e2e.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests

from kvright_dev.procs import answers_200, wait_until
from kvright_dev.sim.podrunner import PodRunner, RealEngine, SimOptions


def pod(name: str, *, node: str | None = "gpu-0", phase: str = "Running", deleting: bool = False) -> Any:
    return SimpleNamespace(
        metadata=SimpleNamespace(
            name=name, namespace="team", uid=f"uid-{name}", labels={"kvright.dev/llmdeployment": "chat"},
            deletion_timestamp="2026-01-01T00:00:00Z" if deleting else None,
        ),
        spec=SimpleNamespace(
            node_name=node,
            containers=[
                SimpleNamespace(
                    name="vllm", command=["vllm", "serve"],
                    args=["meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "1",
                          "--max-num-seqs", "24", "--max-model-len", "4096", "--served-model-name", "chat",
                          "--port", "8000"],
                )
            ],
        ),
        status=SimpleNamespace(phase=phase),
    )  # fmt: skip


class FakeAPI:
    def __init__(self) -> None:
        self.pods: list[Any] = []
        self.nodes = {
            "gpu-0": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "cpu-0": {"kubernetes.io/os": "linux"},
        }

    def list_pod_for_all_namespaces(self, label_selector: str) -> Any:
        assert label_selector == "kvright.dev/llmdeployment"
        return SimpleNamespace(items=list(self.pods))

    def read_node(self, name: str) -> Any:
        return SimpleNamespace(metadata=SimpleNamespace(labels=self.nodes[name]))

    def get_namespaced_custom_object(self, group: str, version: str, ns: str, plural: str, name: str) -> Any:
        assert (group, version, plural, name) == ("kvright.dev", "v1alpha1", "llmdeployments", "chat")
        return {
            "spec": {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama-3.1-8b"}}
        }


def test_runs_a_simulator_per_gpu_pod_and_stops_it_with_the_pod(tmp_path: Path) -> None:
    api = FakeAPI()
    api.pods = [pod("a"), pod("pending", node=None, phase="Pending"), pod("cpu", node="cpu-0")]
    sd = tmp_path / "sd" / "vllm.json"
    runner = PodRunner(core=api, custom=api, file_sd_path=sd, options=SimOptions(time_scale=10.0),
                       log_dir=tmp_path / "logs")  # fmt: skip
    try:
        assert json.loads(sd.read_text()) == []
        runner.sync()
        [sim] = runner.running("team", "chat")
        assert sim.pod == "a"
        # The pod's own args, its node's product, the LLMDeployment's architecture, a loopback port.
        assert sim.args[3:6] == ["serve", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size"]
        assert sim.args[sim.args.index("--gpu") + 1] == "NVIDIA-H100-80GB-HBM3"
        assert sim.args[sim.args.index("--architecture") + 1] == "llama-3.1-8b"
        assert sim.args[sim.args.index("--host") + 1] == "127.0.0.1"
        assert json.loads(sd.read_text()) == [
            {
                "targets": [f"127.0.0.1:{sim.port}"],
                "labels": {"namespace": "team", "llmdeployment": "chat", "pod": "a"},
            }
        ]
        wait_until(lambda: answers_200(f"{sim.url}/health"), 60, what="the simulator to answer /health")
        request = {"model": "chat", "prompt": [1] * 10, "max_tokens": 3}
        body = requests.post(f"{sim.url}/v1/completions", json=request, timeout=30).json()
        assert body["usage"]["completion_tokens"] == 3
        assert "max_num_seqs" not in body
        assert runner.endpoints("team", "chat") == [sim.url]

        api.pods = [pod("a", deleting=True)]
        runner.sync()
        assert runner.endpoints("team", "chat") == []  # draining: no new traffic
        wait_until(lambda: sim.process.poll() is not None, 60, what="the simulator to drain and exit")
        assert sim.process.returncode == 0
        runner.sync()
        assert runner.running("team", "chat") == []
        assert json.loads(sd.read_text()) == []
        assert runner.problems == []
    finally:
        runner.close()


def test_the_real_engine_runs_the_pods_own_flags_on_a_loopback_port_and_a_local_checkpoint() -> None:
    """RealEngine.command: the pod's ``serve MODEL <flags>`` becomes vLLM's API server on the checkpoint
    kept for that LLMDeployment, with the runner's port on 127.0.0.1 and a CPU KV budget; the pod's port,
    host and GPU memory share (meaningless on a CPU) are replaced, everything else is passed as written."""
    engine = RealEngine(
        python=Path("/venv/bin/python"),
        models={"team/chat": Path("/models/tiny")},
        environ={},
        kv_cache_memory_bytes=1 << 28,
    )
    args = ["serve", "org/model", "--max-num-seqs", "24", "--gpu-memory-utilization", "0.9",
            "--served-model-name", "chat", "--port", "8000", "--shutdown-timeout", "60"]  # fmt: skip
    cmd = engine.command("team/chat", args, 18080)
    assert cmd[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert cmd[3:5] == ["--model", "/models/tiny"]
    flags = cmd[5:]
    assert flags[:6] == ["--max-num-seqs", "24", "--served-model-name", "chat", "--shutdown-timeout", "60"]
    assert flags[flags.index("--host") + 1] == "127.0.0.1" and flags[flags.index("--port") + 1] == "18080"
    assert flags.count("--port") == 1 and "--gpu-memory-utilization" not in flags
    assert flags[flags.index("--kv-cache-memory-bytes") + 1] == str(1 << 28) and "--enforce-eager" in flags
    with pytest.raises(KeyError, match="no local checkpoint for team/other"):
        engine.command("team/other", args, 18080)


def test_a_real_engine_that_never_answers_health_is_restarted_after_its_startup_probe(tmp_path: Path) -> None:
    """An engine start that hangs (CI runs: vLLM's spawned worker starved of CPU for 150 s) is killed
    and started again once the pod's startup probe budget, capped by ``RealEngine.startup_seconds``, has
    passed, as a kubelet restarts a container that fails its startup probe; the pod stays unready and
    its target stays. The "engine" is a real process that ignores its flags and never listens."""
    hung = tmp_path / "python"
    hung.write_text("#!/bin/sh\necho loading the model\nexec sleep 120\n")
    hung.chmod(0o755)
    api = FakeAPI()
    statuses: list[Any] = []
    api.patch_namespaced_pod_status = lambda name, ns, body: statuses.append(body)  # type: ignore[attr-defined]
    slow = pod("a")
    slow.spec.termination_grace_period_seconds = 30
    probe = SimpleNamespace(initial_delay_seconds=0, period_seconds=10, failure_threshold=60)
    slow.spec.containers[0].startup_probe = probe  # a budget of 600 s: the engine's cap binds
    api.pods = [slow]
    engine = RealEngine(
        python=hung, models={"team/chat": tmp_path}, environ={}, kv_cache_memory_bytes=1 << 28,
        startup_seconds=1.0,
    )  # fmt: skip
    runner = PodRunner(
        core=api, custom=api, file_sd_path=tmp_path / "sd.json", engine=engine, log_dir=tmp_path / "logs"
    )
    try:
        runner.sync()
        [sim] = runner.running("team", "chat")
        first = sim.process
        assert sim.startup_seconds == 1.0 and runner.restarts == []
        runner.sync()  # within its budget: left alone
        assert sim.process is first and first.poll() is None
        wait_until(lambda: runner.sync() or runner.restarts, 30, what="the hung start to be restarted")
        assert first.poll() is not None, "the hung process was left running"
        assert sim.process is not first and sim.process.poll() is None and sim.restarts == 1
        assert runner.restarts == [
            "engine for team/a did not answer /health within 1 s of its start: restarted (1); its log ended: "
            "'loading the model'"
        ]
        assert not sim.ready and runner.endpoints("team", "chat") == []
        assert json.loads((tmp_path / "sd.json").read_text())[0]["targets"] == [f"127.0.0.1:{sim.port}"]
        assert statuses and all(s["status"]["conditions"][0]["status"] == "False" for s in statuses)
        assert runner.problems == []
        # What a failing test prints: the pod's state and its log (both starts write to it).
        def both_starts_logged() -> bool:
            return runner.describe("team", "chat").count("loading") == 2

        wait_until(both_starts_logged, 10, what="the second start's line")
        described = runner.describe("team", "chat").splitlines()
        assert described[0].startswith("a: not ready, 1 restart(s), started ")
        assert described[0].endswith("exit code None")
        assert described[1:] == ["    loading the model", "    loading the model"]
    finally:
        runner.close()
    # Without a cap, the pod's own probe budget is the one that counts.
    uncapped = PodRunner(core=api, custom=api, file_sd_path=tmp_path / "sd2.json",
                         engine=RealEngine(python=hung, models={"team/chat": tmp_path}, environ={},
                                           kv_cache_memory_bytes=1 << 28))  # fmt: skip
    try:
        uncapped.sync()
        [sim] = uncapped.running("team", "chat")
        assert sim.startup_seconds == 600.0
    finally:
        uncapped.close()
