"""The feedback loop end to end: control plane, operator, pod runner, simulators, real Prometheus.

Real parts: the local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok GPU
nodes; the session's ``cluster`` fixture), the kvright operator in-process (kopf.testing.KopfRunner) with
KVRIGHT_PROMETHEUS_URL set, Debian's Prometheus scraping through file service discovery, the pod
runner (kvright_dev.sim.podrunner) running one vLLM simulator per pod kwok "runs", and the load
generator sending OpenAI completions to those simulators.

Faked (by design, these are the test's subject): the GPUs. Each simulator times its engine steps with
physics of its own (kvright_dev/sim/physics.py: a GPU profile with its own weight-read, KV-read and
prefill efficiencies and a fixed step overhead, not capacity's model) scaled by a speed this test
chooses, so a first plan can be made too aggressive on purpose. Windows are 30 s (the CRD's minimum),
the cooldown 30 s and the reconcile period 3 s, so the loop acts in seconds where production acts in
minutes.

Waits poll the LLMDeployment's status with deadlines; nothing asserts on elapsed time.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kvright_dev.procs import WaitFailed, wait_until
from kvright_dev.prometheus import Prometheus, PrometheusMissing
from kvright_dev.sim.loadgen import LoadGenerator
from kvright_dev.sim.podrunner import PodRunner, SimOptions
from tests.builders import llmd
from tests.e2e.operator_run import OperatorLog, move_events, operator_in

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.prometheus]

H100 = "NVIDIA-H100-80GB-HBM3"
RENAMED_REGEX = "renamed;vllm:(request_time_per_output_token|inter_token_latency)_seconds(.*)"
SUFFIX = secrets.token_hex(3)
NS = f"kvr-fb-{SUFFIX}"
RECONCILE_SECONDS = "3"
TIME_SCALE = 2.0
# Llama-3.1-8B, 1024-token prompts, 128-token outputs, 25 ms p90 TPOT (a bucket bound of vLLM's histogram).
BASE = (
    llmd("x", NS)
    .model("llama-3.1-8b")
    .gpu(H100, 16)
    .context(4096, 1024, 128)
    .concurrency(48)
    .tpot_ms(25)
    .replicas(min=1, max=4)
    .feedback("Adjust", 30, 30)
)


def kubeconfig() -> str:
    """The session's cluster (tests/fixtures/cluster.py exports KUBECONFIG for it)."""
    path = os.environ.get("KUBECONFIG", "")
    if not Path(path).is_file():
        pytest.fail(f"no kubeconfig at {path!r}: the cluster fixture did not provide one")
    return path


def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig(), *args],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args[:3])} failed: {done.stderr.strip()}")
    return done.stdout


def prometheus_for(work: Path) -> Prometheus:
    """Prometheus with two deliberate breakages for the wrong-metrics test: the "nolabel" deployment's
    targets lose their llmdeployment label, and the "renamed" one's TPOT histograms get a new name (as
    a vLLM upgrade once did to dashboards)."""
    try:
        return Prometheus(
            work,
            job="vllm",
            relabel_configs=[
                {
                    "source_labels": ["llmdeployment"],
                    "regex": "nolabel",
                    "target_label": "llmdeployment",
                    "replacement": "",
                }
            ],
            metric_relabel_configs=[
                {
                    "source_labels": ["llmdeployment", "__name__"],
                    "separator": ";",
                    "regex": RENAMED_REGEX,
                    "target_label": "__name__",
                    "replacement": "vllm:tpot_v2_seconds$2",
                }
            ],
        )
    except PrometheusMissing as exc:
        pytest.fail(str(exc))


class Loop:
    """The running system, as the tests drive it."""

    def __init__(self, runner: PodRunner, prometheus: Prometheus, operator_output: OperatorLog) -> None:
        self.runner = runner
        self.prometheus = prometheus
        self.operator_output = operator_output

    def reconciles(self, name: str) -> int:
        """The reconciles of ``name`` the operator has finished."""
        return self.operator_output.reconciles(NS, name)

    def wait_reconciles(self, name: str, count: int, *, since: int) -> None:
        """Wait for ``count`` more finished reconciles of ``name`` than ``since``: the positive signal before
        asserting that they did nothing (an absence cannot be waited for)."""
        self.wait(
            f"{count} reconciles of {name}",
            lambda: self.reconciles(name) >= since + count,
            timeout=count * float(RECONCILE_SECONDS) + 60,
        )

    def create(self, name: str, builder: Any = BASE) -> None:
        obj = builder.obj()
        obj["metadata"]["name"] = name
        obj["spec"]["model"]["servedModelName"] = name
        kubectl("apply", "-f", "-", stdin=json.dumps(obj))

    def delete(self, name: str) -> None:
        kubectl("delete", "llmdeployment", name, "-n", NS, "--wait=false", check=False)

    def get(self, name: str) -> dict[str, Any]:
        return dict(json.loads(kubectl("get", "llmdeployment", name, "-n", NS, "-o", "json")))

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.get(name).get("status") or {})

    def condition(self, name: str, type_: str) -> dict[str, Any]:
        for c in self.status(name).get("conditions") or []:
            if c.get("type") == type_:
                return dict(c)
        return {}

    def events(self, name: str) -> list[dict[str, Any]]:
        out = kubectl(
            "get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}", "-o", "json"
        )
        return list(json.loads(out).get("items") or [])

    def wait(
        self, what: str, predicate: Callable[[], Any], timeout: float = 300.0, every: float = 2.0
    ) -> Any:
        try:
            return wait_until(predicate, timeout, what=what, interval=every, transient=(AssertionError,))
        except WaitFailed as exc:
            failed = str(exc)
        names = [n for n in ("tight", "elastic", "steady", "renamed", "nolabel", "nan") if self._exists(n)]
        dump = {n: self.status(n) for n in names}
        raise AssertionError(
            f"{failed}\nstatus: {json.dumps(dump, indent=1)[-4000:]}\n"
            f"pod runner problems: {self.runner.problems}\n"
            f"operator log tail:\n{self.operator_output()[-3000:]}"
        )

    def wait_condition(self, name: str, type_: str, status: str, timeout: float, what: str = "") -> Any:
        """Until ``name``'s condition ``type_`` has ``status``; returns that condition."""
        return self.wait(
            what or f"{type_}={status}",
            lambda: (c := self.condition(name, type_)).get("status") == status and c,
            timeout=timeout,
        )

    def _exists(self, name: str) -> bool:
        return bool(
            kubectl("get", "llmdeployment", name, "-n", NS, "--ignore-not-found", "-o", "name", check=False)
        )

    def load(self, name: str, concurrency: int, **kw: Any) -> LoadGenerator:
        return LoadGenerator(
            lambda: self.runner.endpoints(NS, name),
            model=name,
            concurrency=concurrency,
            prompt_tokens=1024,
            output_tokens=128,
            max_seconds=900,
            max_concurrency=160,
            **kw,
        ).start()


@pytest.fixture(scope="module")
def loop(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    from kubernetes import client, config

    path = str(cluster.kubeconfig)
    work = tmp_path_factory.mktemp("feedback")
    kubectl("apply", "-f", str(Path(__file__).resolve().parents[2] / "crds" / "llmdeployment.yaml"))
    kubectl("create", "namespace", NS)
    api = config.new_client_from_config(config_file=path)  # type: ignore[no-untyped-call]
    prometheus = prometheus_for(work / "prometheus")
    runner = PodRunner(
        core=client.CoreV1Api(api),
        custom=client.CustomObjectsApi(api),
        file_sd_path=prometheus.sd_dir / "pods.json",
        namespace=NS,
        options=SimOptions(time_scale=TIME_SCALE, noise=0.1, drain_timeout=120.0),
        log_dir=work / "sims",
        # "tight" runs on GPUs slower than kvright predicts: its first plan is too aggressive.
        efficiency_by_llmdeployment={f"{NS}/tight": 0.6, f"{NS}/elastic": 0.8},
        extra_args_by_llmdeployment={f"{NS}/nan": ("--fault", "nan")},
    )
    runner.start(period=0.5)
    prometheus.start()
    try:
        with operator_in(path, NS, prometheus.url, reconcile_seconds=RECONCILE_SECONDS) as operator_output:
            yield Loop(runner, prometheus, operator_output)
    finally:
        runner.close()
        prometheus.stop()
        kubectl("delete", "namespace", NS, "--wait=false", check=False)


def plan_of(status: dict[str, Any]) -> tuple[int, int] | None:
    plan = status.get("plan") or {}
    if "maxNumSeqs" not in plan:
        return None
    return int(plan["maxNumSeqs"]), int(plan["replicas"])


def replicas_of(status: dict[str, Any]) -> int:
    plan = plan_of(status)
    return -1 if plan is None else plan[1]


def feedback_events(loop: Loop, name: str) -> list[str]:
    return move_events(kubeconfig(), NS, name)


@pytest.mark.timeout(1200)
def test_too_aggressive_first_plan_is_brought_within_the_slo_and_stays(loop: Loop) -> None:
    loop.create("tight")
    first = loop.wait("a first plan", lambda: plan_of(loop.status("tight")), timeout=120)
    plans = [first]

    def slo_is(value: str) -> bool:
        status = loop.status("tight")
        plan = plan_of(status)
        if plan is not None and plan != plans[-1]:
            plans.append(plan)
        return any(c["type"] == "SLOMet" and c["status"] == value for c in status.get("conditions") or [])

    load = loop.load("tight", 48)
    try:
        # Violated first (the GPUs are 60 % as fast as predicted), then met within a few control periods.
        loop.wait("SLOMet=False", lambda: slo_is("False"), timeout=240)
        loop.wait("SLOMet=True", lambda: slo_is("True"), timeout=600)
        settled = plans[-1]
        # And it stays: for three more windows TPOT keeps within the SLO. The plan may still loosen towards
        # the target batch while requests queue (QueueWithHeadroom), but never back over the SLO.
        with contextlib.suppress(WaitFailed):  # 90 s of SLOMet never False is the pass
            wait_until(lambda: slo_is("False"), 90, what="SLOMet=False again", interval=5, transient=())
            raise AssertionError(f"SLOMet fell back to False: {loop.status('tight')}")
        status = loop.status("tight")  # read under the load: once it stops, the law rightly releases replicas
    finally:
        stats = load.stop()
    assert settled[0] < first[0] or settled[1] > first[1], plans
    assert 2 <= len(plans) <= 7, plans  # a bounded number of moves (noise 10 %, deadband, cooldown)
    # The engine runs at 60 % of the model's speed: the calibration says slower, in its fixed part, its
    # per-batch part, or both (it learns the shape: docs/feedback.md).
    cal = status["calibration"]
    assert max(cal["factor"], cal["factor"] * cal.get("batchScale", 1.0)) > 1.2, cal
    assert status["observed"]["tpotMilliseconds"] <= 25.0, status["observed"]
    # Settled: the last decision holds the SLO. A step down leaves the replicas below the deadband, so the
    # law may also be releasing one (TPOTWellBelowSLO) or probing a batch halfway to the miss.
    settled_reasons = ("SLOMet", "Cooldown", "RolloutInProgress", "TPOTWellBelowSLO", "QueueWithHeadroom")
    assert status["calibration"]["lastDecision"]["reason"] in settled_reasons, (
        plans,
        status["calibration"]["lastDecision"],
        feedback_events(loop, "tight"),
    )
    assert stats.dropped == 0, stats.errors
    # Every move was an event with the numbers behind it.
    events = feedback_events(loop, "tight")
    assert len(events) == len(plans) - 1, (
        f"{len(plans) - 1} plan change(s) but events {events}; operator warnings:\n"
        + "\n".join(line for line in loop.operator_output().splitlines() if "WARNING" in line)[-2000:]
    )
    assert all("TPOT" in e and "ms vs SLO 25.0 ms" in e for e in events), events
    loop.delete("tight")


@pytest.mark.timeout(900)
def assert_calibrated_near_one(calibration: dict[str, Any]) -> None:
    """The engine ran as the model priced it: over the windows learned from, the observed mean TPOT is within
    0.8..1.25 of the uncalibrated model on average, and the calibrated curve is within that of it at every
    batch those windows ran at.

    The fit's two terms are not judged apart: windows at nearby batches cannot tell a larger fixed cost from
    a smaller per-sequence one, and the fit may trade one for the other (a scale of 1.77 with a batch scale
    of 0.15 once) while predicting the same step time where the engine runs. Nor is one window: a window's
    mean moves with the simulator's noise and the load's phase (one read 0.79 of the model while the fit
    over all of them read 0.96)."""
    points = calibration.get("points") or []
    assert points, calibration
    scale, batch_scale = float(calibration["factor"]), float(calibration["batchScale"])
    observed = [seen / (fixed + variable) for fixed, variable, seen in points]
    assert 0.8 <= sum(observed) / len(observed) <= 1.25, (observed, calibration)
    for fixed, variable, _ in points:
        calibrated = scale * (fixed + batch_scale * variable) / (fixed + variable)
        assert 0.8 <= calibrated <= 1.25, (fixed, variable, calibration)


def test_a_first_plan_that_runs_exactly_as_predicted_is_not_changed(loop: Loop) -> None:
    """GPUs exactly as fast as kvright predicts (efficiency 1) under the planned concurrency: the loop
    measures, calibrates near 1 and leaves the first plan alone for several windows."""
    loop.create("exact")
    first = loop.wait("a first plan", lambda: plan_of(loop.status("exact")), timeout=120)
    load = loop.load("exact", 48)
    try:
        loop.wait(
            "SLOMet=True", lambda: loop.condition("exact", "SLOMet").get("status") == "True", timeout=300
        )
        seen: set[str] = set()

        def decided_several_windows() -> bool:
            last = (loop.status("exact").get("calibration") or {}).get("lastDecision") or {}
            if last.get("message"):
                seen.add(str(last["message"]))
            return len(seen) >= 4

        loop.wait("four decisions on measured windows", decided_several_windows, timeout=300)
        status = loop.status("exact")
        assert feedback_events(loop, "exact") == []  # a move's event says which rule moved, and why
        assert plan_of(status) == first, (first, status.get("calibration"))
        calibration = status.get("calibration") or {}
        assert_calibrated_near_one(calibration)
        assert calibration.get("lastDecision", {}).get("applied") is False, calibration
    finally:
        load.stop()


# Its waits add up to 1800 s (120 + 300 + 600 + 600 + 180); the rest is room for the load to stop.
@pytest.mark.timeout(2100)
def test_load_up_adds_capacity_and_load_down_removes_it_without_dropping_a_request(loop: Loop) -> None:
    loop.create("elastic", BASE.replicas(min=1, max=4))
    loop.wait("a first plan", lambda: plan_of(loop.status("elastic")), timeout=120)
    load = loop.load("elastic", 16)
    try:
        loop.wait_condition("elastic", "SLOMet", "True", 300, what="SLOMet=True at low load")
        low = plan_of(loop.status("elastic"))
        assert low is not None
        load.set(concurrency=150)
        # At least 3 replicas before the load falls to 4: the loop may add them in more than one move, and
        # 2 replicas carrying 4 requests run inside the SLO's deadband (a TPOT within 15 % of it), where the
        # law rightly keeps them; one CI run dropped the load the moment the first replica came.
        high = loop.wait(
            "replicas added under load",
            lambda: (p := plan_of(loop.status("elastic"))) and p[1] >= max(3, low[1] + 1) and p,
            timeout=600,
        )
        load.set(concurrency=4)
        loop.wait(
            "replicas removed after the load fell",
            lambda: (p := plan_of(loop.status("elastic"))) and p[1] < high[1] and p,
            timeout=600,
        )
        # Every pod that left drained: its simulator exited on its own, no request was lost on the way.
        loop.wait(
            "scaled-down simulators to exit",
            lambda: len(loop.runner.running(NS, "elastic")) == replicas_of(loop.status("elastic")),
            timeout=180,
        )
    finally:
        stats = load.stop()
    assert stats.completed > 100
    assert stats.dropped == 0, stats.errors
    loop.delete("elastic")


# Its waits add up to 612 s (120 + 180 + 120 + 12 + 180), over the default 600.
@pytest.mark.timeout(900)
def test_prometheus_gone_means_metrics_unavailable_no_action_and_recovery(loop: Loop) -> None:
    loop.create("steady", BASE.feedback("Adjust", 30, 30))
    loop.wait("a first plan", lambda: plan_of(loop.status("steady")), timeout=120)
    load = loop.load("steady", 8)
    try:
        loop.wait_condition("steady", "MetricsAvailable", "True", 180)
        loop.prometheus.stop()
        down = loop.wait_condition("steady", "MetricsAvailable", "False", 120)
        assert down["reason"] == "PrometheusUnreachable", down
        before = plan_of(loop.status("steady"))
        loop.wait_reconciles("steady", 4, since=loop.reconciles("steady"))  # reconciles without metrics
        assert plan_of(loop.status("steady")) == before
        assert loop.condition("steady", "MetricsAvailable")["status"] == "False"
        assert any(e.get("reason") == "PrometheusUnreachable" for e in loop.events("steady"))
        loop.prometheus.start()
        loop.wait_condition("steady", "MetricsAvailable", "True", 180, what="MetricsAvailable=True again")
    finally:
        if not loop.prometheus.running:
            loop.prometheus.start()
        stats = load.stop()
    assert stats.dropped == 0, stats.errors
    loop.delete("steady")


WRONG_METRICS = {
    "renamed": ("False", "TPOTMetricMissing"),
    "nolabel": ("False", "NoSeries"),
    "nan": ("True", "MetricsFound"),
}


class WrongMetrics:
    """The three wrong-metrics deployments, created and loaded together so that their windows overlap
    instead of queueing. Each poll looks at all three and keeps when each first showed its expected
    MetricsAvailable reason, so a later test knows how long its condition has held without waiting again."""

    def __init__(self, loop: Loop) -> None:
        self.loop = loop
        self.first: dict[str, tuple[int, int]] = {}
        self.loads: dict[str, LoadGenerator] = {}
        self.seen: dict[str, tuple[int, dict[str, Any]]] = {}
        """Per case: the operator's reconciles of it when its expected reason was first seen, and the
        condition."""

    def start(self) -> None:
        for name in WRONG_METRICS:
            self.loop.create(name, BASE.feedback("Adjust", 30, 30).concurrency(8))
        for name in WRONG_METRICS:
            self.first[name] = self.loop.wait(
                "a first plan", lambda n=name: plan_of(self.loop.status(n)), 120
            )
        for name in WRONG_METRICS:
            self.loads[name] = self.loop.load(name, 8)

    def poll(self, name: str) -> tuple[int, dict[str, Any]] | None:
        for other, (_, reason) in WRONG_METRICS.items():
            if other not in self.seen:
                reconciles = self.loop.reconciles(other)
                c = self.loop.condition(other, "MetricsAvailable")
                if c.get("reason") == reason:
                    self.seen[other] = (reconciles, c)
        return self.seen.get(name)

    def close(self) -> None:
        for name, load in self.loads.items():
            load.stop()
            self.loop.delete(name)


@pytest.fixture(scope="module")
def wrong_metrics(loop: Loop) -> Iterator[WrongMetrics]:
    cases = WrongMetrics(loop)
    try:
        cases.start()
        yield cases
    finally:
        cases.close()


@pytest.mark.parametrize(
    "name", list(WRONG_METRICS), ids=["renamed-tpot-metric", "missing-llmdeployment-label", "nan-values"]
)
def test_wrong_or_empty_metrics_are_ignored_with_a_condition(
    loop: Loop, wrong_metrics: WrongMetrics, name: str
) -> None:
    status, reason = WRONG_METRICS[name]
    first, load = wrong_metrics.first[name], wrong_metrics.loads[name]
    try:
        seen_at, cond = loop.wait(
            f"MetricsAvailable={status} ({reason})", lambda: wrong_metrics.poll(name), timeout=180
        )
        assert cond["status"] == status
        # An absence of action is judged after several reconciles since the reason was first seen (for the
        # later cases, the earlier cases' waits have usually let them pass already).
        loop.wait_reconciles(name, 4, since=seen_at)
        current = loop.status(name)
        observed = current.get("observed") or {}
        if name == "nan":
            # NaN KV usage and a NaN TPOT sum are dropped and named; TPOT itself still comes from the buckets.
            # The simulator's gauges turn NaN with its first step and its first finished request: a window
            # read before them (the first MetricsFound can be) has nothing to name yet, so the condition is
            # judged once the load has been served (a fresh-clone CI read "0 request(s) in 30s" first).
            def names_the_nan() -> dict[str, Any] | None:
                now = loop.condition(name, "MetricsAvailable")
                text = now.get("message", "")
                return now if "kv_cache_usage_perc" in text or "no finite mean" in text else None

            named = loop.wait("MetricsAvailable to name the NaN readings", names_the_nan, timeout=120)
            assert named["status"] == "True", named
            observed = loop.status(name).get("observed") or {}
            assert "kvCacheUsagePercent" not in observed, observed
            assert "tpotMeanMilliseconds" not in observed, observed
        else:
            # No wild action on metrics kvright cannot read: the plan is the planner's.
            assert plan_of(current) == first
            assert not feedback_events(loop, name)
    finally:
        stats = load.stop()
    assert stats.dropped == 0, stats.errors
