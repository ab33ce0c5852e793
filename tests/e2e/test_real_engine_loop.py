"""The feedback loop against the real vLLM engine: no simulator, no model of kvright's own in the loop.

Real parts: the local control plane (etcd, kube-apiserver, scheduler, controller-manager, kwok GPU
nodes), the kvright operator in-process (kopf's KopfRunner) in Adjust mode with the CRD's default
tuning apart from the window, cooldown and reconcile period (so it acts in minutes, not hours), real
Prometheus scraping the engines' own ``/metrics``, and for every vLLM pod kwok "runs", the real vLLM
CPU engine (the conformance suite's cached venv) serving a tiny local Llama on the pod's own flags
(kvright_dev.sim.podrunner.RealEngine: readiness from /health, preStop, SIGTERM, the pod's grace
period).

The first plan is kvright's roofline for an H100 (kwok's node says so), which is wrong by construction
on a CPU: a step of the tiny model costs milliseconds of fixed overhead and grows with the batch far
faster than an H100's would. The run's SLO is chosen from the engine itself, since CPUs (and their
other tenants) differ: the first engine's mean TPOT one request at a time and with all the load's
clients at once, and the largest bound of vLLM's TPOT histogram between them with a margin on both
sides (:func:`run_slo_seconds`; on the 2-core AMD test machine about 9 ms alone and 50 ms or more at
96, so 25 ms; on the Intel one 5.2 ms alone and 25 ms at 96, so 192 clients, 39 ms, and 25 ms). Where 96
clients leave no bound between, the load is 192 clients (:data:`LOADS`). The loop must measure, move,
settle within the SLO, and stay there for the observation window, with no request dropped.

The scenario's log (first plan, each window's TPOT and TTFT, each move with its reason, the settled
plan) is printed to the terminal as it happens, so a passing CI run shows it too.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import secrets
import statistics
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from capacity import TPOT_HISTOGRAM_BUCKETS
from kvright_dev.procs import WaitFailed, wait_until
from kvright_dev.prometheus import Prometheus, PrometheusMissing
from kvright_dev.sim.loadgen import LoadGenerator
from kvright_dev.sim.podrunner import PodRunner, RealEngine
from tests.builders import llmd
from tests.conformance.harness import SHAPES, build_model, make_vllm_env, omp_threads_bind
from tests.e2e.operator_run import move_events, operator_in

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.prometheus, pytest.mark.conformance]

H100 = "NVIDIA-H100-80GB-HBM3"
NS = f"kvr-real-{secrets.token_hex(3)}"
NAME = "tiny"
SHAPE = SHAPES["gqa12-wide"]
PROMPT, OUTPUT, CLIENTS = 256, 64, 96
SETTLE_SECONDS = 30  # SLOMet=True for one whole 30 s window of the loop's, with no move
STAY_SECONDS = 60  # the observation window after that: two more windows
WINDOW_SECONDS = 30  # the loop's window (and cooldown)
SPEC = (
    llmd(NAME, NS)
    .config_map("tiny-config", model_name="kvright-tests/tiny-gqa12")
    .served_as(NAME)
    .gpu(H100, 1)
    .context(2048, PROMPT, OUTPUT)
    .concurrency(CLIENTS)
    .tpot_ms(25)  # replaced by the SLO measured for the run before the load starts
    .kv_dtype("Model")  # a CPU without AVX-512 has no fp8 KV cache; the loop is what is tested here
    .replicas(min=1, max=1)
    # Adjust once a window of the run's load has run: the loop must not act on the measuring.
    .feedback("Observe", WINDOW_SECONDS, WINDOW_SECONDS)
)


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args],
        capture_output=True, text=True, timeout=120, input=stdin, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args[:3])} failed: {done.stderr.strip()}")
    return done.stdout


class Journal:
    """The scenario's log: lines to the terminal as they happen (past pytest's capture) and to a file."""

    def __init__(self, path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.path = path
        self.capsys = capsys
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        stamped = f"[real-engine {time.strftime('%H:%M:%S')}] {line}"
        self.lines.append(stamped)
        with self.path.open("a") as f:
            f.write(stamped + "\n")
        with self.capsys.disabled():
            print(stamped, flush=True)


@pytest.fixture(scope="module")
def system(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from kubernetes import client, config

    env = make_vllm_env()
    model = build_model(env, SHAPE)
    path = str(cluster.kubeconfig)
    work = tmp_path_factory.mktemp("real-engine")
    kubectl(path, "apply", "-f", str(Path(__file__).resolve().parents[2] / "crds" / "llmdeployment.yaml"))
    kubectl(path, "create", "namespace", NS)
    kubectl(
        path,
        "create",
        "configmap",
        "tiny-config",
        "-n",
        NS,
        f"--from-file=config.json={model / 'config.json'}",
    )
    api = config.new_client_from_config(config_file=path)  # type: ignore[no-untyped-call]
    try:
        prometheus = Prometheus(work / "prometheus", job="vllm")
    except PrometheusMissing as exc:
        pytest.fail(str(exc))
    engine = RealEngine(
        python=env.python,
        models={f"{NS}/{NAME}": model},
        # Unbound (omp_threads_bind(1)): a rollout starts the new engine beside the loaded old one.
        environ=env.environ({"VLLM_CPU_OMP_THREADS_BIND": omp_threads_bind(1)}),
        kv_cache_memory_bytes=256 * 2**20,
        # The pod's probe allows 10 minutes (real weights on a GPU); a kubelet restarts a start past it.
        # 180 s leaves a slower machine's start room, and a restart plus a start inside the load
        # generator's 240 s of retries.
        startup_seconds=180,
    )
    runner = PodRunner(
        core=client.CoreV1Api(api),
        custom=client.CustomObjectsApi(api),
        file_sd_path=prometheus.sd_dir / "pods.json",
        namespace=NS,
        log_dir=work / "engines",
        engine=engine,
    )
    runner.start(period=0.5)
    prometheus.start()
    try:
        with operator_in(path, NS, prometheus.url):
            yield {"kubeconfig": path, "runner": runner, "work": work}
    finally:
        runner.close()
        prometheus.stop()
        with contextlib.suppress(AssertionError):
            kubectl(path, "delete", "namespace", NS, "--wait=false")


def engine_tpot_seconds(url: str, concurrency: int) -> float:
    """The engine's mean TPOT over one round of ``concurrency`` requests sent together (one at a time, three
    rounds, for 1), from its own histogram."""

    def tpot_sum_count() -> tuple[float, float]:
        text = requests.get(f"{url}/metrics", timeout=10).text
        found = {
            sample.name: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name.startswith("vllm:request_time_per_output_token_seconds_")
        }
        return found["vllm:request_time_per_output_token_seconds_sum"], found[
            "vllm:request_time_per_output_token_seconds_count"
        ]

    def one(_: int) -> None:
        body = {"model": NAME, "prompt": [1] * PROMPT, "max_tokens": OUTPUT, "ignore_eos": True}
        requests.post(f"{url}/v1/completions", json=body, timeout=300).raise_for_status()

    before = tpot_sum_count()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(one, range(3 if concurrency == 1 else concurrency)))
    after = tpot_sum_count()
    return (after[0] - before[0]) / (after[1] - before[1])


ROOM_ALONE = 2.5
"""The SLO is at least this multiple of one request's TPOT. Under the run's load every few steps carries a
new prompt's chunk, so a window's p90 sits about 1.6x above a lone request's mean even at a handful of
seats: with 1.3x allowed (an SLO of 10 ms against 5.7 ms alone on the Intel machine) the p90 read 9 to
12.6 ms from 5 to 11 seats alike, the seats barely moved it, every window the machine's other tenants
slowed stepped the plan down, and one CI run moved eleven times without settling. With 2.5x the SLO lies
where the batch, not the noise, decides the reading (that machine: 25 ms, 192 clients, settled at 63 seats
in three moves); 2x was not enough there (4.8 ms alone in one run: 10 ms again). Nor, once, was 2.6x (3.8 ms
alone: 10 ms, whose p90 then read 9.3 to 13 ms from 5 to 15 seats; nine moves): :data:`ROOM_PREFERRED` is
asked of every load first."""

ROOM_PREFERRED = 3.0
"""The room a load's SLO is first asked to leave a single request (every load in turn); :data:`ROOM_ALONE`
only where no load leaves as much (a machine 9-10 ms alone reading 18 ms at 96 clients and 36 at 192)."""


def run_slo_seconds(alone: float, loaded: float, room: float = ROOM_ALONE) -> float | None:
    """The smallest bound of vLLM's TPOT buckets (what the histogram reads exactly) that leaves a single
    request room under it (>= ``room`` x) and lies below the mean TPOT at the planned batch (<= 0.95 x: its
    p90 reading, above the mean, misses it); None when no bound lies between. The smallest, not the
    largest: the load is measured in a burst (every client's prompt at once), which can read well above the
    run's steady p90 (72.9 ms against 44-47 ms at 96 clients in one CI run, whose 50 ms SLO the first plan
    then never missed). Never the lowest bound (10 ms): ``histogram_quantile`` reads a p90 inside the first
    bucket by interpolating from zero, so a reading under it says only that 90 % of the tokens took under
    10 ms, and the seats barely move it (two CI runs chose 10 ms, 2.6x and 3.8x a lone request, and stepped
    the plan down nine times without settling)."""
    fitting = [b for b in TPOT_HISTOGRAM_BUCKETS[1:] if room * alone <= b <= 0.95 * loaded]
    return fitting[0] if fitting else None


@pytest.mark.parametrize(
    ("alone_ms", "loaded_ms", "slo_ms"),
    [
        (9.0, 50.0, 25),  # the AMD machine at 96 clients
        (5.7, 21.8, None),  # the Intel machine at 96: 10 ms would be 1.75x a lone request, inside the noise
        (5.2, 39.1, 25),  # ... and at 192
        (4.8, 20.5, None),  # 10 ms is 2.1x a lone request: not room enough
        (3.8, 18.0, None),  # 10 ms is 2.6x a lone request, below 0.95x of the load, but the lowest bound
        (2.6, 26.7, 25),  # 10 ms would leave 3.8x: the lowest bound is never the SLO
        (9.0, 18.0, None),  # 10 ms is 1.1x a lone request, 25 ms above the load
    ],
)
def test_the_runs_slo_is_a_bucket_bound_with_room_on_both_sides(
    alone_ms: float, loaded_ms: float, slo_ms: int | None
) -> None:
    slo = run_slo_seconds(alone_ms / 1000, loaded_ms / 1000)
    assert (None if slo is None else round(slo * 1000)) == slo_ms


@pytest.mark.parametrize(
    ("alone_ms", "loads_ms", "chosen"),
    [
        (3.8, (24.3, 36.5), (192, 25)),  # 10 ms at 96 is 2.6x a lone request: 192 leaves 3x under 25 ms
        (3.2, (18.0, 36.0), (192, 25)),  # 10 ms would be 3.1x at 96: the lowest bound is never the SLO
        (9.0, (18.0, 36.0), (192, 25)),  # no load leaves 3x: 2.5x at the heavier one
        (9.0, (50.0, 100.0), (192, 50)),
        (5.2, (72.9, 100.0), (96, 25)),  # 3x leaves 25 ms at 96, far under the burst's 72.9 ms
    ],
)
def test_every_load_is_asked_for_the_preferred_room_before_the_least(
    alone_ms: float, loads_ms: tuple[float, float], chosen: tuple[int, int]
) -> None:
    clients, slo = choose_load(alone_ms / 1000, [(c, t / 1000) for c, t in zip(LOADS, loads_ms, strict=True)])
    assert (clients, round(slo * 1000)) == chosen


LOADS = (CLIENTS, 2 * CLIENTS)
"""Client counts to try for the run's load, each measured twice (the slower round counts): a machine whose
engine runs 96 together fast (one CI run read 18 ms, another 51 ms, 9-10 ms alone; the Intel machine 25 ms,
5.2 ms alone), or a round whose clients started out of step, leaves no bucket bound between; twice the
clients does (the KV cache holds 192 of these sequences)."""


def choose_load(alone: float, measured: list[tuple[int, float]]) -> tuple[int, float] | None:
    """(clients, SLO) for the first load that leaves a single request :data:`ROOM_PREFERRED`, else the
    heaviest that leaves :data:`ROOM_ALONE`; None when none does. ``measured``: (clients, mean TPOT) in
    :data:`LOADS` order, as far as they were measured."""
    for clients, loaded in measured:
        slo = run_slo_seconds(alone, loaded, ROOM_PREFERRED)
        if slo is not None:
            return clients, slo
    if len(measured) < len(LOADS):
        return None  # a heavier load may leave the preferred room yet
    for clients, loaded in reversed(measured):
        slo = run_slo_seconds(alone, loaded)
        if slo is not None:
            return clients, slo
    return None


def run_load(url: str, log: Any) -> tuple[int, float]:
    """The clients the run's load has and its SLO (seconds), both chosen from the engine itself."""
    alone = engine_tpot_seconds(url, 1)
    readings = []
    measured: list[tuple[int, float]] = []
    for clients in LOADS:
        loaded = max(engine_tpot_seconds(url, clients) for _ in range(2))
        readings.append(f"{loaded * 1000:.1f} ms at {clients}")
        measured.append((clients, loaded))
        chosen = choose_load(alone, measured)
        found = f"SLO {chosen[1] * 1000:g} ms at {chosen[0]}" if chosen else "no TPOT bucket bound between"
        log(f"engine: mean TPOT {alone * 1000:.1f} ms one request at a time, {loaded * 1000:.1f} ms at "
            f"{clients} together: {found}")  # fmt: skip
        if chosen is not None:
            return chosen
    pytest.fail(
        f"this machine's engine shows no SLO to converge to: {alone * 1000:.1f} ms per token alone and "
        f"{', '.join(readings)} leave no TPOT bucket bound between {ROOM_ALONE:g}x and 0.95x of them"
    )


def engines_told(runner: PodRunner, failed: WaitFailed) -> str:
    """A wait's timeout with what the engines were doing and their logs' last lines: the logs live in a
    pytest folder that later runs prune, so a CI failure must carry them (one run's rollout hung on an
    engine whose start had stalled, and its log was gone before anyone read the failure)."""
    return f"{failed}\nthe engines of {NS}/{NAME}:\n{runner.describe(NS, NAME)}"


def plan_of(status: dict[str, Any]) -> tuple[int, int] | None:
    plan = status.get("plan") or {}
    return (int(plan["maxNumSeqs"]), int(plan["replicas"])) if "maxNumSeqs" in plan else None


def probes_with_miss(seats: list[int]) -> list[tuple[int, int, int]]:
    """Each upward move of max-num-seqs as ``(from, to, above)``, ``above`` being the seats the loop last
    stepped down from: the batch its bisection probes towards. An upward move before any step down has
    nothing to bisect towards and is not listed."""
    probes, above = [], None
    for a, b in itertools.pairwise(seats):
        if b < a:
            above = a
        elif b > a and above is not None:
            probes.append((a, b, above))
    return probes


@pytest.mark.parametrize(
    ("seats", "bisects"),
    [
        ([1024, 48, 25, 32, 40, 34], True),  # capped by the target at 32, then halfway from 32 to 48
        ([1024, 48, 25, 36, 42, 45], True),  # each probe halfway to 48
        ([1024, 48, 25, 40], False),  # past halfway (36) to the 48 that missed
        ([1024, 48, 25, 36, 30, 33], True),  # 36 missed in its turn: halfway from 30 to 36
        ([1024, 48, 25, 36, 30, 39], False),  # halfway to the 48 of before, past the 36 that missed since
    ],
)
def test_a_probe_goes_at_most_halfway_to_the_seats_last_stepped_down_from(
    seats: list[int], bisects: bool
) -> None:
    assert all(b <= (a + above) // 2 for a, b, above in probes_with_miss(seats)) is bisects


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((dict(c) for c in status.get("conditions") or [] if c.get("type") == type_), {})


# The waits below add up to at most 120 + 240 + 240 + 900 s (first plan, engine start, the first miss,
# settling, staying); a passing run takes about 5 minutes.
@pytest.mark.timeout(1620)
def test_the_loop_brings_the_real_engine_within_its_slo_and_keeps_it_there(
    system: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig, runner = system["kubeconfig"], system["runner"]
    log = Journal(system["work"] / "scenario.log", capsys)

    def status() -> dict[str, Any]:
        out = kubectl(kubeconfig, "get", "llmdeployment", NAME, "-n", NS, "-o", "json")
        return dict(json.loads(out).get("status") or {})

    kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(SPEC.obj()))
    first = wait_until(lambda: plan_of(status()), 120, what="a first plan", interval=1)
    plan = status()["plan"]
    log(f"first plan (roofline, H100): max-num-seqs {first[0]}, replicas {first[1]}, "
        f"vllm args {' '.join(plan.get('vllmArgs') or [])}")  # fmt: skip
    try:
        (engine,) = wait_until(
            lambda: runner.endpoints(NS, NAME), 240, what="the engine's /health", interval=1
        )
    except WaitFailed as exc:
        raise AssertionError(engines_told(runner, exc)) from exc
    clients, slo = run_load(engine, log)
    slo_ms = round(slo * 1000)
    run = {"spec": {"slo": {"tpotMilliseconds": slo_ms}, "workload": {"concurrency": clients}}}
    kubectl(kubeconfig, "patch", "llmdeployment", NAME, "-n", NS, "--type", "merge", "-p", json.dumps(run))
    log(
        f"the run's SLO is p90 TPOT {slo_ms} ms; load: {clients} clients, {PROMPT}-token prompts, {OUTPUT} "
        "tokens out"
    )
    load = LoadGenerator(
        lambda: runner.endpoints(NS, NAME),
        model=NAME,
        concurrency=clients,
        prompt_tokens=PROMPT,
        output_tokens=OUTPUT,
        max_seconds=1100,
        max_concurrency=clients,
        retry_seconds=240,  # a restart of the one replica: the new engine's start (kwok reports it Ready)
        extra_body={"ignore_eos": True},  # random weights: every request runs to max_tokens
    ).start()
    # The loop acts only on windows of the run's load: a window holding the measuring's bursts, judged with
    # the queue gauges read between them (0 running, 0 waiting), sized the first move without the demand
    # (1024 -> 16 rather than 48) and cost the run moves its bound does not allow.
    loaded = time.monotonic()
    wait_until(
        lambda: time.monotonic() - loaded >= WINDOW_SECONDS,
        WINDOW_SECONDS + 10,
        what="a window of the run's load before the loop adjusts",
        interval=1,
    )
    adjust = {"spec": {"feedback": {"mode": "Adjust"}}}
    kubectl(kubeconfig, "patch", "llmdeployment", NAME, "-n", NS, "--type", "merge", "-p", json.dumps(adjust))
    log(f"the loop adjusts from now on, after {WINDOW_SECONDS} s of the run's load")
    seen: list[tuple[str, float]] = []
    restarts_seen: list[str] = []
    plans = [first]

    def follow() -> dict[str, Any]:
        """Log the loop's decision (with the window's TPOT and TTFT) whenever its reason changes, it moves,
        or a window's length has passed since the last line; and each plan change."""
        s = status()
        last = (s.get("calibration") or {}).get("lastDecision") or {}
        observed = s.get("observed") or {}
        reason = f"{last.get('reason')}|{last.get('applied')}"
        fresh = not seen or seen[-1][0] != reason or time.monotonic() - seen[-1][1] >= 30
        if last.get("message") and fresh:
            seen.append((reason, time.monotonic()))
            log(
                f"window: TPOT p90 {observed.get('tpotMilliseconds')} ms, TTFT p90 "
                f"{observed.get('ttftMilliseconds')} ms, mean batch {observed.get('meanBatch')}; "
                f"decision {last.get('reason')} (applied {last.get('applied')}): {last.get('message')}"
            )
        for line in runner.restarts[len(restarts_seen) :]:
            restarts_seen.append(line)
            log(line)
        now = plan_of(s)
        if now is not None and now != plans[-1]:
            plans.append(now)
            log(f"move: max-num-seqs {plans[-2][0]} -> {now[0]}, replicas {plans[-2][1]} -> {now[1]}")
        return s

    try:
        wait_until(
            lambda: condition(follow(), "SLOMet").get("status") == "False", 240,
            what="the roofline plan to miss the SLO on the CPU", interval=2,
        )  # fmt: skip
        # Settled: SLOMet True for a whole window with no move (a first reading after a restart can meet the
        # SLO while the engine is still filling its seats); then it stays: no move for the observation window.
        # The engine shares two cores with everything else the test runs, so one window's reading may blip
        # over a bucket bound (the p90 of a histogram reads the fraction of requests past 25 ms, not their
        # distance): at least 80 % of the observing polls must see SLOMet=True and their median p90 reading
        # must be within the SLO. A move while observing is the law answering a window that missed (its
        # bisection probes halfway towards a batch that missed, and may find the edge a window later): the
        # plan it moved to must settle and stay in its turn, within the same deadline; how often the loop may
        # move, and turn, is bounded below, which is what tells converging from flapping.
        since: list[float] = []
        since_plan: list[tuple[int, int]] = [plans[-1]]
        polls: list[tuple[bool, float]] = []

        def settled_and_stayed() -> bool:
            s = follow()
            met = condition(s, "SLOMet").get("status") == "True"
            now = time.monotonic()
            if plans[-1] != since_plan[-1]:
                if polls:
                    log(f"moved while observing: {since_plan[-1]} -> {plans[-1]}; settling again")
                since[:], polls[:], since_plan[:] = [], [], [plans[-1]]
            if not polls and not met:
                since[:] = []
                return False
            if not since:
                since[:] = [now]
            if now - since[0] < SETTLE_SECONDS:
                return False
            if not polls:
                seqs, reps = plans[-1]
                log(f"SLO met for {SETTLE_SECONDS} s at max-num-seqs {seqs}, replicas {reps}; "
                    f"observing {STAY_SECONDS} s")  # fmt: skip
            tpot = float((s.get("observed") or {}).get("tpotMilliseconds") or 1e9)
            polls.append((met, tpot))
            return now - since[0] >= SETTLE_SECONDS + STAY_SECONDS

        wait_until(settled_and_stayed, 900, what="a plan met for a window that stays", interval=2)
        met_share = sum(met for met, _ in polls) / len(polls)
        median = statistics.median(t for _, t in polls)
        log(f"observed {len(polls)} polls: SLOMet=True in {met_share:.0%}, median p90 TPOT {median:.1f} ms")
        assert met_share >= 0.8 and median <= slo_ms, polls
    except WaitFailed as exc:
        raise AssertionError(engines_told(runner, exc)) from exc
    finally:
        stats = load.stop(timeout=120)
    # The loop goes on deciding after the observation ends: a window that closes while the load stops may
    # move the plan once more (one CI run's engine, sharing its cores with the conformance suite, read p90
    # 32 ms against an SLO of 25 ms just then, and moved 36 -> 30 seats). That move is part of the history
    # the bounds below judge, and, like every move, has its event: follow the status until the events and
    # the moves seen agree (the operator posts a reconcile's events after its status write).
    events: list[str] = []

    def events_match_moves() -> bool:
        follow()
        events[:] = move_events(kubeconfig, NS, NAME)
        return len(events) == len(plans) - 1

    with contextlib.suppress(WaitFailed):  # the assertion below says what differs
        wait_until(events_match_moves, 60, what="one event per move of the plan", interval=2)
    final = status()
    learned = {k: v for k, v in (final.get("calibration") or {}).items() if k != "lastDecision"}
    log(f"settled plan: max-num-seqs {plans[-1][0]}, replicas {plans[-1][1]}; moves {len(plans) - 1}; "
        f"calibration {json.dumps(learned)[:400]}")  # fmt: skip
    log(f"load: {stats.completed} completed, {stats.retried} retried, {stats.dropped} dropped")
    assert plans[-1][0] < first[0], plans  # the roofline's batch was too large for this engine
    # A bounded number of moves: the first, demand-sized one, then a few toward the seats the engine holds
    # the SLO at (two or three here, at 63 to 74 seats of a 25 ms SLO; up to 8 held on the slower AMD
    # machine). A miss the calibrated model still fits steps down by the deadband (15 %) alone, so an SLO in
    # the noise, where the seats barely move the reading, costs many moves: :data:`ROOM_ALONE` keeps it out.
    # The turns and the bisection below keep it from oscillating.
    assert 2 <= len(plans) <= 8, plans
    # Converging, not flapping. The law steps down past the SLO by at least its deadband, probes back up at
    # most halfway to the batch that missed (and only by a gain outside the noise), and after a probe that
    # misses steps back no lower than the batch that met: it bisects between the two, and the deadband ends
    # the bisection once the halfway point is within 15 % of what met. Every probe is two turns; an engine
    # whose speed changes under it (this one shares two cores: one CI's engine ran 96 requests at 40.7 ms
    # where others ran them at 27-29 ms) may take two probes. More turns than that is flapping; so is a
    # probe past halfway to the seats the loop last stepped down from. (A probe the calibrated target caps
    # short of halfway may be followed by a longer one that goes halfway: one run went 48 -> 25 -> 32 -> 40,
    # 32 capped by the target, 40 halfway from 32 to 48; that is bisection, not a growing reach.)
    seats = [p[0] for p in plans]
    steps = [b - a for a, b in itertools.pairwise(seats) if b != a]
    turns = sum((x > 0) != (y > 0) for x, y in itertools.pairwise(steps))
    assert turns <= 4, plans
    assert all(b <= (a + above) // 2 for a, b, above in probes_with_miss(seats)), plans
    # Every move was an event with the numbers behind it.
    assert len(events) == len(plans) - 1, (events, plans)
    assert all("TPOT" in e and f"vs SLO {slo_ms:.1f} ms" in e for e in events), events
    assert stats.completed > 200, stats
    assert stats.dropped == 0, stats.errors
    assert not runner.problems, runner.problems
