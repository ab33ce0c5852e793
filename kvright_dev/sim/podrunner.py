"""The pod runner: a kubelet stand-in that runs a vLLM simulator for each vLLM pod kwok "runs".

Level-based: every period it lists pods labelled ``kvright.dev/llmdeployment``. For each one that is
scheduled on a node labelled ``nvidia.com/gpu.product``, Running and not being deleted, it starts
``python -m kvright_dev.sim serve <the pod's vllm args> --gpu <node's product>`` on a free loopback port
(the architecture comes from the owning LLMDeployment's ``spec.model.architecture`` when set), and
writes all live simulators to a Prometheus file_sd file with the labels ``namespace``,
``llmdeployment`` and ``pod`` (docs/interfaces.md). A pod that is deleted or being deleted gets
SIGTERM: the simulator drains (503 to new requests, admitted ones finish) and exits; its target
leaves the file once it has.

With a :class:`RealEngine` it runs the real vLLM engine (the CPU build, a local checkpoint per
LLMDeployment) instead of the simulator, on the pod's own flags, and then stands in for the kubelet
more closely: a pod is not Ready (in its status, as a kubelet reports a readiness probe) and its engine
takes no traffic until the engine's ``/health`` answers; an engine whose ``/health`` has not answered
within the pod's startup probe budget (at most :attr:`RealEngine.startup_seconds`) is killed and started
again, as a kubelet restarts a container that fails its startup probe; and a deleted pod leaves the
endpoints, waits out its ``preStop`` sleep, gets SIGTERM (vLLM drains for its ``--shutdown-timeout``) and
SIGKILL after its ``terminationGracePeriodSeconds``.

Run it in-process (:class:`PodRunner`, tests call :meth:`PodRunner.sync` or start :meth:`run` in a
thread) or as ``python -m kvright_dev.sim.podrunner --kubeconfig K --file-sd F``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvright_dev.procs import answers_200, dev_environ, free_port, stop_processes

__all__ = ["PodRunner", "RealEngine", "SimOptions", "main"]

LLMD_LABEL = "kvright.dev/llmdeployment"
PRODUCT_LABEL = "nvidia.com/gpu.product"


@dataclass(frozen=True, kw_only=True)
class SimOptions:
    """Simulator flags the runner adds to every pod's command line."""

    efficiency: float = 1.0
    """--efficiency: the simulated GPU runs at this fraction of its nominal speed."""
    noise: float = 0.0
    """--noise: relative standard deviation of a step's duration."""
    time_scale: float = 1.0
    """--time-scale: virtual seconds per wall second."""
    seed: int = 0
    """The first simulator's --seed; each further one gets the next."""
    drain_timeout: float = 60.0
    """--drain-timeout: how long a SIGTERM'd simulator lets admitted requests finish."""
    extra_args: tuple[str, ...] = ()
    """Any other simulator flags, as written."""


@dataclass(frozen=True, kw_only=True)
class RealEngine:
    """Run the real vLLM engine for each pod (``python -m vllm.entrypoints.openai.api_server``)."""

    python: Path
    """The vLLM venv's python (deploy/vllm-env.sh)."""
    models: Mapping[str, Path]
    """A local checkpoint folder per ``namespace/llmdeployment`` (the hub is not reachable)."""
    environ: Mapping[str, str]
    """The engine's whole environment (offline flags, TMPDIR, CPU thread binding)."""
    kv_cache_memory_bytes: int
    """--kv-cache-memory-bytes: a CPU has no GPU memory to take a fraction of."""
    extra_args: tuple[str, ...] = ("--enforce-eager",)
    """Flags added after the pod's (--enforce-eager: a start in about half the time)."""
    dropped_flags: frozenset[str] = frozenset({"--host", "--port", "--gpu-memory-utilization"})
    """Pod flags (with their values) the runner replaces: it binds the loopback port it chose."""
    startup_seconds: float | None = None
    """The most a start may take before the engine is restarted, when shorter than the pod's startup probe
    budget (kvright sizes that for real weights on a GPU: 10 minutes or more); None: the pod's budget."""

    def command(self, key: str, vllm_args: Sequence[str], port: int) -> list[str]:
        """The engine's command line for the pod's ``serve MODEL <flags>``."""
        model = self.models.get(key)
        if model is None:
            raise KeyError(f"no local checkpoint for {key} (RealEngine.models has {sorted(self.models)})")
        flags: list[str] = []
        rest = list(vllm_args[2:])
        i = 0
        while i < len(rest):
            if rest[i] in self.dropped_flags:
                i += 2
                continue
            flags.append(rest[i])
            i += 1
        return [
            str(self.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), *flags,
            "--host", "127.0.0.1", "--port", str(port),
            "--kv-cache-memory-bytes", str(self.kv_cache_memory_bytes), *self.extra_args,
        ]  # fmt: skip


@dataclass
class _Sim:
    namespace: str
    llmdeployment: str
    pod: str
    uid: str
    port: int
    process: subprocess.Popen[bytes]
    args: list[str]
    draining: bool = False
    ready: bool = True
    """Takes traffic (a real engine: once /health answers)."""
    prestop_seconds: float = 0.0
    grace_seconds: float = 30.0
    term_at: float | None = None
    """A real engine's pod is gone: SIGTERM at this monotonic time (after its preStop)."""
    signalled: bool = False
    started_at: float = 0.0
    """Monotonic time the process was (re)started."""
    startup_seconds: float | None = None
    """A real engine not ready this long after its start is restarted; None: never."""
    restarts: int = 0
    log_path: Path | None = None
    """Where its output goes (None: nowhere)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _last_line(path: Path | None, limit: int = 240) -> str:
    """The last non-blank line of an engine's log (what a hung start last said), cut to ``limit``."""
    if path is None or not path.exists():
        return ""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - 8192))
        lines = [line for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    return lines[-1][:limit] if lines else ""


_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def vllm_command_line(pod: Any) -> list[str]:
    """``serve MODEL <flags>`` from the pod's vllm container, with ``$(VAR)`` references expanded from
    the container's literal env values as the kubelet expands them (``--node-rank $(LWS_WORKER_INDEX)``,
    ``--master-addr $(LWS_LEADER_ADDRESS)``, injected by the LeaderWorkerSet webhook); an unknown
    reference stays as written, as in Kubernetes."""
    container = next((c for c in pod.spec.containers if c.name == "vllm"), pod.spec.containers[0])
    env = {e.name: e.value for e in getattr(container, "env", None) or () if e.value is not None}
    command = list(container.command or [])
    args = list(container.args or [])
    vllm_args = [*command[1:], *args] if command[:1] == ["vllm"] else args
    if not vllm_args or vllm_args[0] != "serve":
        vllm_args = ["serve", *vllm_args]
    return [_VAR_REF.sub(lambda m: env.get(m.group(1), m.group(0)), str(a)) for a in vllm_args]


def _startup_probe_seconds(container: Any) -> float | None:
    """How long the container's startup probe lets a start take (its delay plus period x failures), as a
    kubelet counts it; None without a probe."""
    probe = getattr(container, "startup_probe", None)
    if probe is None:
        return None
    period = probe.period_seconds or 10
    return float((probe.initial_delay_seconds or 0) + period * (probe.failure_threshold or 3))


class PodRunner:
    """See the module docstring. `core` is a kubernetes CoreV1Api, `custom` a CustomObjectsApi."""

    def __init__(
        self,
        *,
        core: Any,
        custom: Any,
        file_sd_path: Path,
        options: SimOptions | None = None,
        namespace: str | None = None,
        log_dir: Path | None = None,
        efficiency_by_llmdeployment: dict[str, float] | None = None,
        extra_args_by_llmdeployment: dict[str, tuple[str, ...]] | None = None,
        engine: RealEngine | None = None,
    ) -> None:
        self.core = core
        self.custom = custom
        self.file_sd_path = Path(file_sd_path)
        self.options = options or SimOptions()
        self.namespace = namespace
        self.log_dir = log_dir
        self.efficiency_by_llmdeployment = dict(efficiency_by_llmdeployment or {})
        self.extra_args_by_llmdeployment = dict(extra_args_by_llmdeployment or {})
        self.engine = engine
        self.sims: dict[str, _Sim] = {}  # by pod uid
        self.lock = threading.Lock()
        self.problems: list[str] = []
        self.restarts: list[str] = []
        """One line per engine restarted for a failed startup probe (a kubelet's event, not a fault here)."""
        self._stop = threading.Event()
        self._seed = self.options.seed
        self._file_sd_text = ""
        self._write_file_sd()

    # -- what tests and the load generator read -------------------------------------------------
    def endpoints(self, namespace: str, llmdeployment: str) -> list[str]:
        """Base URLs of the simulators serving this LLMDeployment that accept requests now."""
        with self.lock:
            return [
                s.url
                for s in self.sims.values()
                if s.namespace == namespace
                and s.llmdeployment == llmdeployment
                and s.ready
                and not s.draining
            ]

    def running(self, namespace: str, llmdeployment: str) -> list[_Sim]:
        with self.lock:
            return [
                s for s in self.sims.values() if s.namespace == namespace and s.llmdeployment == llmdeployment
            ]

    def describe(self, namespace: str, llmdeployment: str, tail: int = 6) -> str:
        """Each engine or simulator of this LLMDeployment, a line each (pod, ready, draining, restarts,
        seconds since its start, exit code) with the last ``tail`` lines of its log: a failing test's
        evidence, since pytest prunes the folder the logs are in a few runs later."""
        out = []
        now = time.monotonic()
        for sim in sorted(self.running(namespace, llmdeployment), key=lambda s: s.pod):
            state = "ready" if sim.ready else "not ready"
            age = f", started {now - sim.started_at:.0f} s ago"
            out.append(
                f"{sim.pod}: {state}{', draining' if sim.draining else ''}, {sim.restarts} restart(s){age}, "
                f"exit code {sim.process.poll()}"
            )
            if sim.log_path is not None and sim.log_path.is_file():
                text = sim.log_path.read_text(errors="replace").splitlines()
                kept = [line for line in text if "leaked" not in line][-tail:]  # nanobind's exit noise
                out += [f"    {line[:300]}" for line in kept]
        return "\n".join(out) or "(none)"

    # -- the loop -------------------------------------------------------------------------------
    def run(self, period: float = 0.5) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as exc:  # a flaky API server must not kill the kubelet stand-in
                self._problem(f"sync failed: {type(exc).__name__}: {exc}")
            self._stop.wait(period)

    def start(self, period: float = 0.5) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(period,), daemon=True, name="pod-runner")
        thread.start()
        return thread

    def close(self) -> None:
        """Stop the loop and every simulator (drain first, then kill what is left)."""
        self._stop.set()
        with self.lock:
            sims = list(self.sims.values())
        stop_processes([sim.process for sim in sims], timeout=10, group=True)  # an engine and its workers
        with self.lock:
            self.sims.clear()
        self._write_file_sd()

    def sync(self) -> None:
        """One level-based pass: start, drain and reap simulators to match the pods."""
        selector = LLMD_LABEL
        if self.namespace:
            pods = self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        else:
            pods = self.core.list_pod_for_all_namespaces(label_selector=selector).items
        products: dict[str, str | None] = {}
        wanted: set[str] = set()
        for pod in pods:
            meta, spec, status = pod.metadata, pod.spec, pod.status
            uid = meta.uid
            if meta.deletion_timestamp is not None:
                continue
            if not spec.node_name or (status is None or status.phase != "Running"):
                continue
            if spec.node_name not in products:
                products[spec.node_name] = self._product(spec.node_name)
            product = products[spec.node_name]
            if product is None or "--headless" in vllm_command_line(pod):
                # A multi-node replica's worker runs --headless (no API): its leader's simulator serves
                # the whole replica.
                continue
            wanted.add(uid)
            if uid not in self.sims:
                self._start(pod, product)
        with self.lock:
            sims = list(self.sims.items())
        changed = False
        for uid, sim in sims:
            if uid in wanted and not sim.ready and answers_200(f"{sim.url}/health", timeout=1.0):
                with self.lock:
                    sim.ready = True
                self._report_ready(sim.namespace, sim.pod, True)
            if uid in wanted and self._startup_failed(sim):
                self._restart(sim)
            if uid not in wanted and not sim.draining and sim.process.poll() is None:
                with self.lock:
                    sim.draining = True
                if self.engine is None:
                    sim.process.send_signal(signal.SIGTERM)  # the simulator pauses and drains itself
                else:
                    sim.term_at = time.monotonic() + sim.prestop_seconds
            if sim.term_at is not None and sim.process.poll() is None:
                now = time.monotonic()
                if not sim.signalled and now >= sim.term_at:
                    sim.process.send_signal(signal.SIGTERM)
                    sim.signalled = True
                elif now >= sim.term_at + sim.grace_seconds:
                    self._problem(f"engine for {sim.namespace}/{sim.pod} outlived its grace period: SIGKILL")
                    os.killpg(sim.process.pid, signal.SIGKILL)
            if sim.process.poll() is not None:
                if uid in wanted and not sim.draining:
                    self._problem(
                        f"simulator for {sim.namespace}/{sim.pod} exited with {sim.process.returncode}"
                    )
                with self.lock:
                    del self.sims[uid]
                changed = True
        if changed:
            self._write_file_sd()

    # -- internals ------------------------------------------------------------------------------
    def _product(self, node_name: str) -> str | None:
        try:
            node = self.core.read_node(node_name)
        except Exception as exc:
            self._problem(f"node {node_name}: {type(exc).__name__}")
            return None
        labels = node.metadata.labels or {}
        product = labels.get(PRODUCT_LABEL)
        return str(product) if product else None

    def _architecture(self, namespace: str, name: str) -> str | None:
        if self.custom is None:
            return None
        try:
            obj = self.custom.get_namespaced_custom_object(
                "kvright.dev", "v1alpha1", namespace, "llmdeployments", name
            )
        except Exception:
            return None
        arch = obj.get("spec", {}).get("model", {}).get("architecture")
        return str(arch) if arch else None

    def _start(self, pod: Any, product: str) -> None:
        meta = pod.metadata
        llmd = (meta.labels or {}).get(LLMD_LABEL, "")
        vllm_args = vllm_command_line(pod)
        port = free_port()
        if self.engine is not None:
            self._start_engine(pod, llmd, vllm_args, port)
            return
        self._seed += 1
        opts = self.options
        efficiency = self.efficiency_by_llmdeployment.get(f"{meta.namespace}/{llmd}", opts.efficiency)
        cmd = [
            sys.executable,
            "-m",
            "kvright_dev.sim",
            *vllm_args,
            "--gpu",
            product,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--efficiency",
            str(efficiency),
            "--noise",
            str(opts.noise),
            "--time-scale",
            str(opts.time_scale),
            "--seed",
            str(self._seed),
            "--drain-timeout",
            str(opts.drain_timeout),
            *opts.extra_args,
            *self.extra_args_by_llmdeployment.get(f"{meta.namespace}/{llmd}", ()),
        ]
        arch = self._architecture(meta.namespace, llmd)
        if arch:
            cmd += ["--architecture", arch]
        self._track(meta, llmd, port, self._spawn(cmd, meta.namespace, meta.name, dev_environ()), cmd)

    def _start_engine(self, pod: Any, llmd: str, vllm_args: list[str], port: int) -> None:
        """The real engine for this pod, not ready until /health answers."""
        assert self.engine is not None
        meta = pod.metadata
        try:
            cmd = self.engine.command(f"{meta.namespace}/{llmd}", vllm_args, port)
        except KeyError as exc:
            self._problem(str(exc))
            return
        container = next((c for c in pod.spec.containers if c.name == "vllm"), pod.spec.containers[0])
        prestop = getattr(getattr(getattr(container, "lifecycle", None), "pre_stop", None), "sleep", None)
        probe_budget = _startup_probe_seconds(container)
        budgets = [b for b in (probe_budget, self.engine.startup_seconds) if b is not None]
        process = self._spawn(cmd, meta.namespace, meta.name, dict(self.engine.environ))
        self._report_ready(meta.namespace, meta.name, False)
        self._track(
            meta, llmd, port, process, cmd,
            ready=False,
            prestop_seconds=float(prestop.seconds) if prestop is not None else 0.0,
            grace_seconds=float(pod.spec.termination_grace_period_seconds or 30),
            startup_seconds=min(budgets) if budgets else None,
        )  # fmt: skip

    @staticmethod
    def _startup_failed(sim: _Sim) -> bool:
        """A real engine still starting past its budget, alive (one that exited is reported as such)."""
        if sim.ready or sim.draining or sim.startup_seconds is None or sim.process.poll() is not None:
            return False
        return time.monotonic() - sim.started_at > sim.startup_seconds

    def _restart(self, sim: _Sim) -> None:
        """Kill a start that hung (SIGTERM to the engine and its workers, SIGKILL after 10 s) and start
        the same command again on the same port: the pod, its target and its log stay."""
        assert self.engine is not None
        stop_processes([sim.process], timeout=10, group=True)
        sim.restarts += 1
        note = (
            f"engine for {sim.namespace}/{sim.pod} did not answer /health within {sim.startup_seconds:g} s "
            f"of its start: restarted ({sim.restarts}); its log ended: {_last_line(sim.log_path)!r}"
        )
        with self.lock:
            self.restarts.append(note)
            sim.process = self._spawn(sim.args, sim.namespace, sim.pod, dict(self.engine.environ))
            sim.started_at = time.monotonic()

    def _track(
        self, meta: Any, llmd: str, port: int, process: subprocess.Popen[bytes], cmd: list[str], **kw: Any
    ) -> None:
        """Remember a started engine or simulator and publish its scrape target."""
        kw.setdefault("started_at", time.monotonic())
        sim = _Sim(
            namespace=meta.namespace, llmdeployment=llmd, pod=meta.name, uid=meta.uid, port=port,
            process=process, args=cmd, log_path=self._log_path(meta.namespace, meta.name), **kw,
        )  # fmt: skip
        with self.lock:
            self.sims[meta.uid] = sim
        self._write_file_sd()

    def _report_ready(self, namespace: str, pod: str, ready: bool) -> None:
        """The readiness probe's verdict in the pod's status, as a kubelet writes it: kwok marks a pod
        Ready the moment it runs, but a real engine is not ready until its /health answers, and the
        Deployment (and kvright, which waits for a rollout) must see that."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = "True" if ready else "False"
        why = {} if ready else {"reason": "ReadinessProbe", "message": "the engine's /health does not answer"}
        conditions = [
            {"type": kind, "status": status, "lastTransitionTime": now, **why}
            for kind in ("Ready", "ContainersReady")
        ]
        try:
            self.core.patch_namespaced_pod_status(pod, namespace, {"status": {"conditions": conditions}})
        except Exception as exc:  # the pod may be gone already: its engine is being drained anyway
            self._problem(f"readiness of {namespace}/{pod}: {type(exc).__name__}: {str(exc)[:160]}")

    def _log_path(self, namespace: str, pod: str) -> Path | None:
        if self.log_dir is None:
            return None
        return self.log_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", f"{namespace}_{pod}") + ".log")

    def _spawn(
        self, cmd: list[str], namespace: str, pod: str, env: dict[str, str]
    ) -> subprocess.Popen[bytes]:
        out: Any = subprocess.DEVNULL
        path = self._log_path(namespace, pod)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            out = open(path, "ab")  # noqa: SIM115 - owned by the child
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def _write_file_sd(self) -> None:
        with self.lock:
            groups = [
                {
                    "targets": [f"127.0.0.1:{s.port}"],
                    "labels": {"namespace": s.namespace, "llmdeployment": s.llmdeployment, "pod": s.pod},
                }
                for s in sorted(self.sims.values(), key=lambda s: (s.namespace, s.pod))
            ]
        text = json.dumps(groups, indent=1)
        if text == self._file_sd_text and self.file_sd_path.exists():
            return
        self._file_sd_text = text
        self.file_sd_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.file_sd_path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.file_sd_path)  # Prometheus must never read half a file

    def _problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)
            del self.problems[:-50]


def main(argv: Sequence[str] | None = None) -> int:
    from kubernetes import client, config

    p = argparse.ArgumentParser(
        prog="python -m kvright_dev.sim.podrunner", description=__doc__.split("\n")[0]
    )
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    p.add_argument("--file-sd", required=True, type=Path, help="Prometheus file_sd JSON file to write")
    p.add_argument("--namespace", default=None)
    p.add_argument("--efficiency", type=float, default=1.0)
    p.add_argument("--noise", type=float, default=0.0)
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--period", type=float, default=0.5)
    p.add_argument("--log-dir", type=Path, default=None)
    ns = p.parse_args(argv)
    config.load_kube_config(config_file=ns.kubeconfig)  # type: ignore[no-untyped-call]
    runner = PodRunner(
        core=client.CoreV1Api(),
        custom=client.CustomObjectsApi(),
        file_sd_path=ns.file_sd,
        namespace=ns.namespace,
        log_dir=ns.log_dir,
        options=SimOptions(efficiency=ns.efficiency, noise=ns.noise, time_scale=ns.time_scale),
    )

    def on_term(signum: int, frame: object) -> None:
        runner._stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        runner.run(ns.period)
    finally:
        runner.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
