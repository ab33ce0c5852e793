"""``python -m kvright_dev.sim.demo``: watch the feedback loop correct a plan on the local control plane.

Needs the local control plane (``make cluster-up``; KUBECONFIG or ~/.cache/kvright/cluster/kubeconfig)
and Debian's ``prometheus``. It starts Prometheus, the pod runner (one vLLM simulator per pod, on GPUs
that are 60 % as fast as kvright predicts) and the operator (``python -m kvright.operator`` with
KVRIGHT_PROMETHEUS_URL), creates an LLMDeployment whose first plan is therefore too aggressive for its
25 ms p90 TPOT SLO, puts load on it, and prints the status before and after and the events. Everything
it started is stopped and its namespace deleted at the end.
"""

from __future__ import annotations

import argparse
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kvright_dev.cluster import local_kubeconfig
from kvright_dev.operator_process import OperatorProcess
from kvright_dev.procs import WaitFailed, sigterm_interrupts, wait_until
from kvright_dev.prometheus import Prometheus, PrometheusMissing
from kvright_dev.sim.loadgen import LoadGenerator
from kvright_dev.sim.podrunner import PodRunner, SimOptions

ROOT = Path(__file__).resolve().parents[2]
GROUP, VERSION, PLURAL = "kvright.dev", "v1alpha1", "llmdeployments"


def _kubeconfig() -> str:
    path = local_kubeconfig()
    if not path.is_file():
        raise SystemExit(f"demo: no kubeconfig at {path}; start the control plane with `make cluster-up`")
    return str(path)


def _summary(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    plan = status.get("plan") or {}
    observed = status.get("observed") or {}
    calibration = status.get("calibration") or {}
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    lines = [
        f"  plan:        max-num-seqs {plan.get('maxNumSeqs')}, replicas {plan.get('replicas')}, "
        f"TP {plan.get('tensorParallelSize')}, KV {plan.get('kvCacheDtype')}",
        f"  predicted:   TPOT {(status.get('prediction') or {}).get('tpotMilliseconds')} ms",
        f"  observed:    p90 TPOT {observed.get('tpotMilliseconds')} ms, "
        f"mean {observed.get('tpotMeanMilliseconds')} ms,"
        f" {observed.get('sampleCount')} requests in {observed.get('windowSeconds')} s, "
        f"KV {observed.get('kvCacheTokens')} tokens (predicted {observed.get('kvCacheTokensPredicted')})",
        f"  calibration: {calibration.get('factor')}",
    ]
    decision = calibration.get("lastDecision") or {}
    if decision:
        applied = "applied" if decision.get("applied") else "not applied"
        lines.append(f"  decision:    {decision.get('action')} ({decision.get('reason')}, {applied})")
    for kind in ("MetricsAvailable", "SLOMet"):
        c = conditions.get(kind, {})
        lines.append(f"  {kind + ':':<13}{c.get('status')} {c.get('reason')}: {c.get('message')}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from kubernetes import client, config

    p = argparse.ArgumentParser(prog="python -m kvright_dev.sim.demo", description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=8.0, help="give up after this long")
    p.add_argument(
        "--efficiency", type=float, default=0.6, help="simulated GPU speed vs kvright's prediction"
    )
    ns = p.parse_args(argv)
    sigterm_interrupts()  # a stopped demo still stops its simulators, operator and Prometheus
    path = _kubeconfig()
    api = config.new_client_from_config(config_file=path)  # type: ignore[no-untyped-call]
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    namespace = f"kvright-demo-{secrets.token_hex(2)}"
    work = Path(tempfile.mkdtemp(prefix="kvright-demo-"))
    subprocess.run(
        ["kubectl", "--kubeconfig", path, "apply", "-f", str(ROOT / "crds" / "llmdeployment.yaml")],
        check=True,
        capture_output=True,
    )
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    runner = PodRunner(
        core=core,
        custom=custom,
        file_sd_path=work / "prometheus" / "sd" / "pods.json",
        namespace=namespace,
        options=SimOptions(efficiency=ns.efficiency, noise=0.1, time_scale=2.0),
        log_dir=work / "sims",
    )
    operator: OperatorProcess | None = None
    load: LoadGenerator | None = None
    try:
        prometheus = Prometheus(work / "prometheus", job="vllm")
    except PrometheusMissing as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    try:
        runner.start()
        prometheus.start()
        operator = OperatorProcess(
            kubeconfig=path,
            namespace=namespace,
            reconcile_seconds=3,
            health=False,
            env={"KVRIGHT_PROMETHEUS_URL": prometheus.url},
            checkout_on_path=True,
            log=work / "operator.log",
        )
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "LLMDeployment",
            "metadata": {"name": "chat", "namespace": namespace},
            "spec": {
                "model": {
                    "name": "meta-llama/Llama-3.1-8B-Instruct",
                    "architecture": "llama-3.1-8b",
                    "servedModelName": "chat",
                },
                "gpu": {"product": "NVIDIA-H100-80GB-HBM3", "maxGPUs": 16},
                "workload": {
                    "maxModelLen": 4096,
                    "promptTokens": 1024,
                    "outputTokens": 128,
                    "concurrency": 48,
                },
                "slo": {"tpotMilliseconds": 25, "percentile": 90},
                "replicas": {"min": 1, "max": 4},
                "feedback": {"mode": "Adjust", "windowSeconds": 30, "cooldownSeconds": 30},
            },
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
        print(
            f"demo: LLMDeployment {namespace}/chat created; "
            f"GPUs run at {ns.efficiency:.0%} of kvright's prediction"
        )
        end = time.monotonic() + ns.minutes * 60

        def until(what: str, predicate: Callable[[], object], interval: float) -> None:
            """Wait for ``predicate`` within the demo's time; on a timeout say so and go on."""
            try:
                wait_until(
                    predicate, max(1.0, end - time.monotonic()), what=what, interval=interval, transient=()
                )
            except WaitFailed as exc:
                print(f"demo: {exc}", file=sys.stderr)

        def get() -> dict[str, Any]:
            obj: Any = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "chat")
            return dict(obj)

        def slo(obj: dict[str, Any]) -> str | None:
            for c in (obj.get("status") or {}).get("conditions") or []:
                if c.get("type") == "SLOMet":
                    return str(c.get("status"))
            return None

        until("a first plan", lambda: (get().get("status") or {}).get("plan"), 1)
        print("\nfirst plan (from the serving model, before any measurement):")
        print(_summary(get()).split("\n")[0])
        load = LoadGenerator(
            lambda: runner.endpoints(namespace, "chat"),
            model="chat",
            concurrency=48,
            prompt_tokens=1024,
            output_tokens=128,
            max_seconds=ns.minutes * 60,
        ).start()
        until("SLOMet=False", lambda: slo(get()) == "False", 2)
        # The status update that first reports the miss carries the loop's answer to it, so ``plan`` here is
        # already the corrected one and ``decision`` says what changed.
        print("\nbefore (SLO first seen violated, with the loop's answer to it):")
        print(_summary(get()))
        until("SLOMet=True", lambda: slo(get()) == "True", 2)
        time.sleep(10)
        print("\nafter (corrected by the feedback loop):")
        print(_summary(get()))
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=chat").items
        print("\nevents:")
        for e in sorted(events, key=lambda e: str(e.last_timestamp or e.event_time or "")):
            print(f"  {e.type:<8}{e.reason}: {e.message}")
        if not events:
            print("  (none)")
        stats = load.stop()
        load = None
        print(f"\nload: {stats.completed} completed, {stats.retried} retried, {stats.dropped} dropped")
        return 0 if slo(get()) == "True" else 1
    finally:
        if load is not None:
            load.stop(timeout=10)
        if operator is not None:
            operator.stop()
        runner.close()
        prometheus.stop()
        try:
            core.delete_namespace(namespace)
        except Exception as exc:  # best effort: the namespace may be gone already
            print(f"demo: deleting namespace {namespace}: {exc}", file=sys.stderr)
        print(f"demo: logs in {work}")


if __name__ == "__main__":
    raise SystemExit(main())
