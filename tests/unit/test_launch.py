"""capacity.launch: each node's own `vllm serve` flags for a replica that spans nodes (vLLM 0.32)."""

from __future__ import annotations

import pytest

from capacity.errors import CapacityError
from capacity.launch import (
    DATA_PARALLEL_RPC_PORT,
    MASTER_PORT,
    is_leader,
    node_args,
    node_role,
)
from capacity.layout import Layout

LWS = "$(LWS_LEADER_ADDRESS)"


def test_a_replica_on_one_node_adds_nothing() -> None:
    for layout in (
        Layout(),
        Layout(tensor_parallel_size=8),
        Layout(tensor_parallel_size=4, pipeline_parallel_size=2),
        Layout(data_parallel_size=8, expert_parallel=True),
        Layout(tensor_parallel_size=2, pipeline_parallel_size=2, gpus_per_node=4),
    ):
        assert node_args(layout, node_rank=0, leader_address=LWS) == []
        assert node_role(layout, 0) == "api-server"


def test_tp8_pp2_on_two_nodes_of_eight() -> None:
    layout = Layout(tensor_parallel_size=8, pipeline_parallel_size=2)
    common = ["--nnodes", "2"]
    rendezvous = ["--master-addr", LWS, "--master-port", "29501", "--distributed-executor-backend", "mp"]
    assert node_args(layout, node_rank=0, leader_address=LWS) == [*common, "--node-rank", "0", *rendezvous]
    assert node_args(layout, node_rank=1, leader_address=LWS) == [
        *common, "--node-rank", "1", *rendezvous, "--headless"
    ]  # fmt: skip
    assert [node_role(layout, r) for r in range(2)] == ["api-server", "headless-executor"]


def test_dp16_ep_on_two_nodes_of_eight() -> None:
    layout = Layout(data_parallel_size=16, expert_parallel=True)
    leader = node_args(layout, node_rank=0, leader_address="10.0.0.7")
    worker = node_args(layout, node_rank=1, leader_address="10.0.0.7")
    assert leader == [
        "--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.7", "--master-port", "29501",
        "--distributed-executor-backend", "mp",
        "--data-parallel-address", "10.0.0.7", "--data-parallel-rpc-port", "29550",
    ]  # fmt: skip
    assert worker == [*leader[:3], "1", *leader[4:], "--headless"]
    # vLLM infers the local DP size and start rank from --nnodes / --node-rank; kvright must not pass
    # --data-parallel-start-rank (on the leader it would switch on vLLM's hybrid load balancer).
    assert "--data-parallel-start-rank" not in leader + worker
    assert "--data-parallel-size-local" not in leader + worker
    assert [node_role(layout, r) for r in range(2)] == ["api-server", "headless-engines"]


def test_tp2_dp8_ep_on_two_nodes() -> None:
    layout = Layout(tensor_parallel_size=2, data_parallel_size=8, expert_parallel=True)
    worker = node_args(layout, node_rank=1, leader_address="leader.lws.svc")
    assert worker[:4] == ["--nnodes", "2", "--node-rank", "1"]
    assert worker[-1] == "--headless"
    assert node_role(layout, 1) == "headless-engines"


def test_flags_common_to_every_replica_are_not_repeated() -> None:
    layout = Layout(
        tensor_parallel_size=2, pipeline_parallel_size=2, data_parallel_size=4, expert_parallel=True
    )
    for rank in range(layout.nodes):
        args = node_args(layout, node_rank=rank, leader_address=LWS)
        for common in (
            "--tensor-parallel-size",
            "--pipeline-parallel-size",
            "--data-parallel-size",
            "--enable-expert-parallel",
        ):
            assert common not in args


def test_a_data_parallel_rank_that_spans_nodes_has_executor_workers() -> None:
    # TP 8 x PP 2 per engine on nodes of 8, two engines: nodes 0-1 are engine 0, nodes 2-3 engine 1.
    layout = Layout(
        tensor_parallel_size=8, pipeline_parallel_size=2, data_parallel_size=2, expert_parallel=True
    )
    assert layout.nodes == 4
    assert [node_role(layout, r) for r in range(4)] == [
        "api-server",
        "headless-executor",
        "headless-engines",
        "headless-executor",
    ]
    assert all(node_args(layout, node_rank=r, leader_address=LWS)[-1] == "--headless" for r in (1, 2, 3))


def test_ports_are_vllms_defaults_unless_given() -> None:
    assert (MASTER_PORT, DATA_PARALLEL_RPC_PORT) == (29501, 29550)
    layout = Layout(data_parallel_size=4, expert_parallel=True, gpus_per_node=2)
    args = node_args(layout, node_rank=1, leader_address="127.0.0.1", port=31000, rpc_port=31001)
    assert args[args.index("--master-port") + 1] == "31000"
    assert args[args.index("--data-parallel-rpc-port") + 1] == "31001"
    # Without data parallelism the RPC port is not used and not passed.
    pp = Layout(pipeline_parallel_size=2, gpus_per_node=1)
    assert "--data-parallel-rpc-port" not in node_args(pp, node_rank=1, leader_address="127.0.0.1")


def test_is_leader() -> None:
    assert is_leader(0)
    assert not is_leader(1)
    assert not is_leader(7)
    with pytest.raises(CapacityError, match="expected an integer >= 0"):
        is_leader(-1)


PP2 = Layout(pipeline_parallel_size=2, gpus_per_node=1)
DP2 = Layout(data_parallel_size=2, expert_parallel=True, gpus_per_node=1)
REFUSALS: list[tuple[Layout, dict[str, object], str]] = [
    (PP2, {"node_rank": 2}, "node rank 2 is not valid; expected an integer from 0 to 1"),
    (PP2, {"node_rank": -1}, "expected an integer from 0 to 1"),
    (PP2, {"node_rank": True}, "node rank True is not valid"),
    (Layout(), {"node_rank": 1}, "node rank 1 is not valid; expected an integer from 0 to 0"),
    (
        PP2,
        {"node_rank": 1, "leader_address": ""},
        r"leader address '' is not valid; expected a host name, an IP address or a \$\(VAR\)",
    ),
    (PP2, {"node_rank": 1, "leader_address": "a b"}, "leader address 'a b' is not valid"),
    (PP2, {"node_rank": 1, "leader_address": "$LWS_LEADER_ADDRESS"}, "is not valid"),
    (PP2, {"node_rank": 1, "port": 0}, "master port 0 is not valid; expected an integer from 1 to 65535"),
    (PP2, {"node_rank": 1, "port": 70000}, "master port 70000"),
    (DP2, {"node_rank": 1, "rpc_port": 0}, "data parallel RPC port 0 is not valid"),
    (DP2, {"node_rank": 1, "port": 29501, "rpc_port": 29501}, "is the master port; expected two different"),
    (
        Layout(tensor_parallel_size=16),
        {"node_rank": 1},
        "tensor parallel size 16 spans nodes of 8 GPUs; accepted: a TP group inside one node",
    ),
    (
        Layout(tensor_parallel_size=4, pipeline_parallel_size=3),
        {"node_rank": 1},
        r"a replica of 12 GPUs \(TP 4 x PP 3\) spans nodes of 8 GPUs without filling them; accepted: a "
        "multi-node replica of whole nodes",
    ),
    (
        Layout(tensor_parallel_size=4, pipeline_parallel_size=3, data_parallel_size=2, expert_parallel=True),
        {"node_rank": 1},
        "a data-parallel rank of TP x PP = 12 GPUs straddles nodes of 8 GPUs",
    ),
    (
        Layout(tensor_parallel_size=4, data_parallel_size=3, expert_parallel=True, gpus_per_node=6),
        {"node_rank": 1},
        "TP x PP = 4 GPUs straddles nodes of 6",
    ),
]


@pytest.mark.parametrize(("layout", "kwargs", "message"), REFUSALS)
def test_refusals_say_what_is_accepted(layout: Layout, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"leader_address": LWS, **kwargs}
    with pytest.raises(CapacityError, match=message):
        node_args(layout, **args)  # type: ignore[arg-type]
