"""Layouts: every node's command line `capacity.launch.node_args` renders is one real vLLM 0.32 accepts,
resolves as kvright means it, and a replica split over two "nodes" serves a request.

1. `test_every_node_of_each_layout_is_accepted_by_vllm`: for each layout, the common layout flags plus
   `node_args` for every node rank go through `vllm_layout_probe.py`, which runs vLLM's own `vllm serve`
   entry point (parser, `validate_parsed_serve_args`, `ServeSubcommand.cmd`'s headless / API-server /
   load-balancer decisions) and, in place of the launchers, `create_engine_config(headless=...)` plus
   `run_headless`'s checks. It checks vLLM's resolved `ParallelConfig` per node: world size, nodes,
   node rank within a data-parallel rank, local DP size and first DP rank (inferred by vLLM from
   `--nnodes` / `--node-rank`), rendezvous address and port, executor backend, what the node runs
   (API server, headless DP engines, or headless TP/PP workers) and, on the leader, vLLM's own
   refusal of a node rank outside the replica and the hybrid load balancer that
   `--data-parallel-start-rank` would switch on (why `node_args` never passes it).

   What can run without the hardware: all of the above. vLLM 0.32's CPU platform does not count devices
   (`ParallelConfig.__post_init__` compares the world size with the device count on CUDA only), so world
   sizes of 16 are validated on a 2-core machine; `--enable-expert-parallel` is accepted at config
   time for a MoE model (a tiny Qwen3-MoE with 16 experts, so EP 16 has an expert per rank). What
   needs the hardware and is not checked here: NCCL / all-to-all kernels, weight loading per rank, the
   expert map, and the network between nodes.

2. `test_pipeline_parallel_replica_across_two_nodes_serves_a_completion`: the real thing on loopback.
   A leader `vllm serve ... --pipeline-parallel-size 2 --nnodes 2 --node-rank 0 --master-addr 127.0.0.1`
   and a headless worker `--node-rank 1 --headless` (both exactly `node_args`' flags) start as two
   process groups on this machine, one CPU each; the worker's headless multiproc executor joins the
   leader's torch.distributed rendezvous (gloo) at the master port, the leader becomes healthy and one
   completion is served through both pipeline stages (the response's `system_fingerprint` names `pp2`).

   Run without `--enforce-eager`, on purpose: vLLM 0.32's CPU build cannot serve pipeline parallelism
   eagerly. With compilation mode NONE the CPU worker skips its warm-up (`cpu_model_runner.py:
   warming_up_model` returns at once; `cpu_worker.py: _should_warm_up_model` is False for eager with
   `--kv-cache-memory-bytes`), and the buffer a non-first pipeline stage receives its activations into
   is only allocated by the warm-up's dummy run (`gpu_model_runner.py: _dummy_run`), so the first
   request kills the engine: `AssertionError` at `assert self.intermediate_tensors is not None`
   (`sync_and_gather_intermediate_tensors`), HTTP 500 "EngineCore encountered an issue". Observed by
   hand with this very layout (and with `--gpu-memory-utilization` instead of the KV bytes); not
   re-run here (it costs a server start). GPU workers allocate that buffer in their profile run, and
   kvright's plans do not pass `--enforce-eager`.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

import capacity
from capacity.architecture import FAMILIES, NO_PIPELINE_PARALLEL
from capacity.launch import DATA_PARALLEL_RPC_PORT, MASTER_PORT, node_args, node_role
from capacity.layout import Layout
from kvright_dev.procs import LOOPBACK, LoopbackServer, ServerFailed, free_port, stop_processes

from .harness import (
    HERE,
    SERVER_START_TIMEOUT_SECONDS,
    SHAPES,
    VllmEnv,
    build_model,
    build_model_from_fields,
    omp_threads_bind,
    tail,
)

pytestmark = pytest.mark.conformance

# A tiny Qwen3-MoE: 4 layers (PP 2 and PP 2 x ...), 8 attention and KV heads (TP 8 divides them and the
# 512-token vocabulary), 16 experts (EP 16 places one per rank).
TINY_MOE: dict[str, Any] = {
    "model_type": "qwen3_moe",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "head_dim": 32,
    "hidden_size": 256,
    "intermediate_size": 256,
    "moe_intermediate_size": 128,
    "num_experts": 16,
    "num_experts_per_tok": 2,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "vocab_size": 512,
    "max_position_embeddings": 2048,
}
# What the kubelet makes of $(LWS_LEADER_ADDRESS): the leader pod's DNS name. Config validation does not
# resolve it.
LEADER = "llm-0.llm.default.svc"


@dataclass(frozen=True)
class Case:
    id: str
    layout: Layout


LAYOUTS = [
    Case("pp2", Layout(pipeline_parallel_size=2)),
    Case("tp2-pp2-2x2", Layout(tensor_parallel_size=2, pipeline_parallel_size=2, gpus_per_node=2)),
    Case("dp4-ep", Layout(data_parallel_size=4, expert_parallel=True)),
    Case("dp2-ep-2x1", Layout(data_parallel_size=2, expert_parallel=True, gpus_per_node=1)),
    Case("tp8-pp2-2x8", Layout(tensor_parallel_size=8, pipeline_parallel_size=2)),
    Case("dp16-ep-2x8", Layout(data_parallel_size=16, expert_parallel=True)),
    Case("tp2-dp8-ep-2x8", Layout(tensor_parallel_size=2, data_parallel_size=8, expert_parallel=True)),
    # A data-parallel rank (TP 2 x PP 2) larger than a node: 4 nodes, two per rank.
    Case(
        "tp2-pp2-dp2-ep-4x2",
        Layout(
            tensor_parallel_size=2,
            pipeline_parallel_size=2,
            data_parallel_size=2,
            expert_parallel=True,
            gpus_per_node=2,
        ),
    ),
]


def plan_of(layout: Layout) -> capacity.Plan:
    """A plan with ``layout`` for the tiny model: its flags are what kvright renders for that layout."""
    return capacity.Plan(
        tensor_parallel_size=layout.tensor_parallel_size,
        pipeline_parallel_size=layout.pipeline_parallel_size,
        data_parallel_size=layout.data_parallel_size,
        expert_parallel=layout.expert_parallel,
        gpus_per_node=layout.gpus_per_node,
        max_num_seqs=8,
        kv_cache_dtype="auto",
        max_model_len=1024,
        gpu_memory_utilization=0.9,
        max_num_batched_tokens=2048,
        replicas=1,
    )


def node_command_line(layout: Layout, rank: int) -> list[str]:
    """Node ``rank``'s flags as kvright renders them: ``Plan.vllm_args_by_role()`` for the leader and the
    first worker, the common flags plus ``node_args`` for the others (they differ only in the rank)."""
    plan = plan_of(layout)
    roles = plan.vllm_args_by_role(leader_address=LEADER)
    if not layout.spans_nodes:
        return roles["server"]
    if rank < 2:
        return roles["leader" if rank == 0 else "worker"]
    return [*plan.vllm_args(), *node_args(layout, node_rank=rank, leader_address=LEADER)]


def common_flags(layout: Layout) -> list[str]:
    """The flags every node of a replica carries (``Plan.vllm_args()``)."""
    return plan_of(layout).vllm_args()


def layout_probe(env: VllmEnv, cases: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """vLLM's verdict on each `vllm serve` command line (see vllm_layout_probe.py), by case id."""
    payload = json.dumps([{"id": cid, "argv": argv} for cid, argv in cases.items()])
    out = env.run([str(HERE / "vllm_layout_probe.py")], stdin=payload, timeout=600)
    return {v["id"]: v for v in json.loads(out.strip().splitlines()[-1])}


@pytest.fixture(scope="module")
def tiny_moe(vllm_env: VllmEnv) -> Path:
    return build_model_from_fields(vllm_env, "layout-moe", TINY_MOE)


@pytest.fixture(scope="module")
def verdicts(vllm_env: VllmEnv, tiny_moe: Path, pp2_launched: TwoNodeReplica) -> dict[str, dict[str, Any]]:
    """vLLM's verdicts on every layout case. Asks for ``pp2_launched`` first so that the two-node replica
    the last test uses starts while the probe runs (each is mostly one process importing vLLM)."""
    base = [str(tiny_moe), "--enforce-eager"]
    cases: dict[str, list[str]] = {}
    for case in LAYOUTS:
        for rank in range(case.layout.nodes):
            cases[f"{case.id}/{rank}"] = [*base, *node_command_line(case.layout, rank)]
    tp8pp2 = Layout(tensor_parallel_size=8, pipeline_parallel_size=2)
    leader = node_args(tp8pp2, node_rank=0, leader_address=LEADER)
    # vLLM's own refusal: a node rank outside the replica.
    bad_rank = [*leader[:3], "2", *leader[4:]]
    cases["refused/node-rank-2-of-2"] = [*base, *common_flags(tp8pp2), *bad_rank]
    # What --data-parallel-start-rank on the leader would do (hybrid load balancing).
    dp16 = Layout(data_parallel_size=16, expert_parallel=True)
    cases["leader-with-start-rank"] = [
        *base, *common_flags(dp16), *node_args(dp16, node_rank=0, leader_address=LEADER),
        "--data-parallel-start-rank", "0",
    ]  # fmt: skip
    return layout_probe(vllm_env, cases)


def test_the_classes_without_pipeline_parallelism_are_vllms(
    vllm_supports: dict[str, dict[str, bool]],
) -> None:
    """capacity.layout refuses a pipeline-parallel size above 1 for the classes NO_PIPELINE_PARALLEL names,
    as vLLM refuses it for a class without SupportsPP: the set is what vLLM's registry says of every class
    it registers (and every class kvright reads) that it can inspect here (wrappers whose modules import a
    library the CPU venv lacks are not, nor a class vLLM does not register)."""
    assert len(vllm_supports) >= 70, sorted(set(FAMILIES) - set(vllm_supports))
    assert {name for name, answer in vllm_supports.items() if not answer["pp"]} == NO_PIPELINE_PARALLEL
    assert set(vllm_supports) >= NO_PIPELINE_PARALLEL


@pytest.mark.parametrize("case", LAYOUTS, ids=[c.id for c in LAYOUTS])
def test_every_node_of_each_layout_is_accepted_by_vllm(
    case: Case, verdicts: dict[str, dict[str, Any]]
) -> None:
    layout = case.layout
    rank_gpus = layout.tensor_parallel_size * layout.pipeline_parallel_size
    gpus_per_node = min(layout.gpus, layout.gpus_per_node)
    for rank in range(layout.nodes):
        verdict = verdicts[f"{case.id}/{rank}"]
        assert verdict["accepted"], f"node {rank}: vLLM refused at {verdict['stage']}: {verdict['error']}"
        cfg = verdict["config"]
        assert verdict["role"] == node_role(layout, rank), (rank, verdict["role"])
        assert cfg["world_size"] == rank_gpus
        assert cfg["world_size_across_dp"] == layout.gpus
        assert cfg["nnodes"] == layout.nodes
        assert cfg["node_rank"] == rank
        assert cfg["enable_expert_parallel"] is layout.expert_parallel
        # Engines per node and this node's first DP rank, as vLLM infers them from --nnodes/--node-rank.
        assert cfg["data_parallel_size_local"] == max(gpus_per_node // rank_gpus, 1)
        assert cfg["data_parallel_rank"] == rank * gpus_per_node // rank_gpus
        assert cfg["nnodes_within_dp"] == max(rank_gpus // layout.gpus_per_node, 1)
        assert cfg["headless"] is (rank != 0)
        assert cfg["data_parallel_hybrid_lb"] is False
        if layout.spans_nodes:
            assert cfg["master_addr"] == LEADER
            assert cfg["master_port"] == MASTER_PORT
            assert cfg["distributed_executor_backend"] == "mp"
            if layout.data_parallel_size > 1:
                assert cfg["data_parallel_master_ip"] == LEADER
                assert cfg["data_parallel_rpc_port"] == DATA_PARALLEL_RPC_PORT
        if rank == 0 and layout.data_parallel_size > 1:
            # vLLM's default: one API server process per data-parallel rank, all on the leader.
            assert cfg["api_server_count"] == layout.data_parallel_size


def test_vllm_refuses_a_node_rank_outside_the_replica(verdicts: dict[str, dict[str, Any]]) -> None:
    verdict = verdicts["refused/node-rank-2-of-2"]
    assert not verdict["accepted"]
    assert verdict["stage"] == "engine-config"
    assert "`--node-rank` must be between 0 and 1" in verdict["error"]


def test_start_rank_on_the_leader_would_switch_on_the_hybrid_load_balancer(
    verdicts: dict[str, dict[str, Any]],
) -> None:
    """Why node_args leaves --data-parallel-start-rank to vLLM's inference: on the leader it switches on
    hybrid load balancing (arg_utils.py: a start rank without --headless), where each node's own API
    server fronts its own engines, and the leader's front end then refuses headless remote engines
    ("Remote engine N must not use --headless in external or hybrid dp lb mode", v1/engine/utils.py)."""
    verdict = verdicts["leader-with-start-rank"]
    assert verdict["accepted"], verdict["error"]
    assert verdict["config"]["data_parallel_hybrid_lb"] is True


# ---------------------------------------------------------------------------------------------------
# The real run: PP 2 split over two "nodes" (two process groups on loopback)


class TwoNodeReplica:
    """A leader `vllm serve` (API server) and one headless worker node, on 127.0.0.1."""

    def __init__(self, env: VllmEnv, model: Path, layout: Layout, logs: Path) -> None:
        assert layout.nodes == 2
        self.env = env
        self.http_port = free_port()
        master_port = free_port()
        cpus = omp_threads_bind(2).split("|")  # one CPU list per node
        common = [
            str(env.python), str(HERE / "vllm_cli.py"), "serve", str(model),
            "--served-model-name", "gqa",
            "--max-model-len", "1024",
            "--kv-cache-memory-bytes", str(2**20),
            *common_flags(layout),
        ]  # fmt: skip

        def node_env(rank: int) -> dict[str, str]:
            # VLLM_HOST_IP: the address the leader's message queues advertise to the worker (loopback).
            return env.environ({"VLLM_CPU_OMP_THREADS_BIND": cpus[rank], "VLLM_HOST_IP": LOOPBACK})

        self.leader_argv = [
            *common,
            *node_args(layout, node_rank=0, leader_address=LOOPBACK, port=master_port),
            "--host", LOOPBACK, "--port", str(self.http_port),
        ]  # fmt: skip
        self.worker_argv = [
            *common,
            *node_args(layout, node_rank=1, leader_address=LOOPBACK, port=master_port),
        ]
        self.worker_log = logs / "worker.log"
        self.worker_env = node_env(1)
        self.leader = LoopbackServer(
            self.leader_argv,
            name="vLLM PP 2 leader (node rank 0)",
            port=self.http_port,
            ready_path="/health",
            log_path=logs / "leader.log",
            env=node_env(0),
            cwd=env.scratch,
            own_group=True,
        )
        self.worker: subprocess.Popen[bytes] | None = None

    def launch(self) -> None:
        """Start both nodes and return at once (``wait_ready`` waits for the leader's /health)."""
        with open(self.worker_log, "ab") as log:
            self.worker = subprocess.Popen(
                self.worker_argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.worker_env, cwd=self.env.scratch, start_new_session=True,
            )  # fmt: skip
        self.leader.launch()

    def wait_ready(self) -> None:
        try:
            self.leader.wait_ready(SERVER_START_TIMEOUT_SECONDS, interval=0.25)
        except ServerFailed as exc:
            self.stop()
            pytest.fail(f"{exc}\nworker log (tail):\n{self.worker_log_tail()}", pytrace=False)

    def worker_log_tail(self, lines: int = 40) -> str:
        return tail(self.worker_log.read_text(errors="replace"), lines) if self.worker_log.exists() else ""

    def stop(self) -> None:
        self.leader.stop()
        if self.worker is not None:
            stop_processes([self.worker], group=True)


@pytest.fixture(scope="module")
def pp2_launched(vllm_env: VllmEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoNodeReplica]:
    """The PP 2 replica, launched (not yet ready); stopped when the module is done."""
    model = build_model(vllm_env, SHAPES["gqa"])  # 2 layers: one per stage
    replica = TwoNodeReplica(
        vllm_env,
        model,
        Layout(pipeline_parallel_size=2, gpus_per_node=1),
        tmp_path_factory.mktemp("vllm-layouts"),
    )
    replica.launch()
    yield replica
    replica.stop()


@pytest.fixture(scope="module")
def pp2_replica(pp2_launched: TwoNodeReplica) -> TwoNodeReplica:
    pp2_launched.wait_ready()
    return pp2_launched


def test_pipeline_parallel_replica_across_two_nodes_serves_a_completion(pp2_replica: TwoNodeReplica) -> None:
    worker_args = pp2_replica.worker_argv
    assert worker_args[worker_args.index("--node-rank") + 1] == "1" and worker_args[-1] == "--headless"
    response = requests.post(
        f"http://{LOOPBACK}:{pp2_replica.http_port}/v1/completions",
        json={
            "model": "gqa",
            "prompt": "the kv cache",
            "max_tokens": 8,
            "ignore_eos": True,
            "temperature": 0.0,
        },
        timeout=120,
    )
    assert response.status_code == 200, (
        f"{response.status_code} {response.text[:500]}\nworker log (tail):\n{pp2_replica.worker_log_tail()}"
    )
    body = response.json()
    assert body["usage"]["completion_tokens"] == 8
    assert "-pp2-" in body["system_fingerprint"]  # vLLM names the pipeline degree in it
    # The worker ran the second stage: its headless executor joined the leader's rendezvous.
    worker_log = pp2_replica.worker_log.read_text(errors="replace")
    assert "headless multiproc executor" in worker_log
    assert "world_size=2 rank=1" in worker_log
    leader_log = pp2_replica.leader.log_path.read_text(errors="replace")
    assert "world_size=2 rank=0" in leader_log
