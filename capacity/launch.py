"""What each node of a multi-node replica adds to the ``vllm serve`` command line (vLLM 0.32).

A replica larger than a node runs as one LeaderWorkerSet group: node rank 0 is the leader and serves the
OpenAI API, the others are headless workers. kvright starts every node the same way, with vLLM's own
multiprocessing launcher (not Ray): ``--nnodes N --node-rank R --master-addr LEADER --master-port P``,
and ``--headless`` on ranks > 0. The common layout flags (``--tensor-parallel-size``,
``--pipeline-parallel-size``, ``--data-parallel-size``, ``--enable-expert-parallel``) are
:meth:`capacity.Plan.vllm_args`'s, identical on every node; :func:`node_args` gives the rest.

What vLLM 0.32 does with these flags (read from its source):

- ``vllm/engine/arg_utils.py`` (``add_cli_args``): ``--master-addr``, ``--master-port``, ``--nnodes``
  (``-n``), ``--node-rank`` (``-r``), ``--distributed-executor-backend``, ``--data-parallel-address``
  (``-dpa``), ``--data-parallel-rpc-port`` (``-dpp``), ``--data-parallel-size-local`` (``-dpl``),
  ``--data-parallel-start-rank`` (``-dpr``); ``vllm/entrypoints/launchers/cli_args.py``
  (``make_arg_parser``): ``--headless``, ``--api-server-count``.
- ``AsyncEngineArgs.create_engine_config`` (``arg_utils.py``): with ``--nnodes > 1`` it requires
  ``--data-parallel-backend mp`` (the default), ``nnodes`` dividing the world size ``TP x PP x DP``, and
  ``0 <= node_rank < nnodes``; it infers ``--data-parallel-size-local`` as ``(world // nnodes) // (TP x
  PP)`` (at least 1) and this node's first data-parallel rank as ``node_rank x (world // nnodes) // (TP
  x PP)``, and defaults ``--data-parallel-address`` to ``--master-addr`` and ``--data-parallel-rpc-port``
  to 29550. So the explicit multi-node DP flags (``--data-parallel-size-local``,
  ``--data-parallel-start-rank``) are not needed and are not emitted; ``--data-parallel-start-rank`` on
  the leader would even switch on the hybrid load balancer (one API server per node).
- ``vllm/config/parallel.py`` (``ParallelConfig``): ``master_addr`` / ``master_port`` (default 29501)
  are the ``torch.distributed`` rendezvous of every rank of the replica (``init_distributed_environment``
  in ``vllm/distributed/parallel_state.py`` uses them whenever ``nnodes > 1``); ``nnodes > 1`` needs the
  ``mp``, ``uni`` or ``external_launcher`` executor backend (``mp`` is the default without Ray; kvright
  passes it so an ambient Ray placement group cannot turn it into ``ray``); ``nnodes_within_dp`` (nodes
  one data-parallel rank spans) and ``node_rank_within_dp``.
- ``vllm/entrypoints/cli/serve.py``: ``--headless`` sets ``--api-server-count 0`` and runs
  ``run_headless``: a node with ``node_rank_within_dp > 0`` starts a headless ``MultiprocExecutor`` (the
  TP/PP workers of a rank led from another node, rendezvous at ``--master-addr:--master-port``); otherwise
  it starts its ``data_parallel_size_local`` engine cores, which handshake with the leader at
  ``--data-parallel-address:--data-parallel-rpc-port`` (``vllm/v1/engine/utils.py``,
  ``CoreEngineProcManager`` / ``launch_core_engines``). Without ``--headless`` the leader runs the API
  server(s): one, or ``--data-parallel-size`` of them with data parallelism (vLLM's default).
"""

from __future__ import annotations

import re
from typing import Literal

from capacity.errors import CapacityError
from capacity.layout import Layout

__all__ = [
    "DATA_PARALLEL_RPC_PORT",
    "LEADER_RANK",
    "MASTER_PORT",
    "NodeRole",
    "is_leader",
    "node_args",
    "node_role",
]

LEADER_RANK = 0
"""The node rank of a replica's leader (LeaderWorkerSet's ``LWS_WORKER_INDEX`` 0)."""
MASTER_PORT = 29501
"""``--master-port``: the leader's ``torch.distributed`` rendezvous port (vLLM's own default,
``ParallelConfig.master_port`` in ``vllm/config/parallel.py``)."""
DATA_PARALLEL_RPC_PORT = 29550
"""``--data-parallel-rpc-port``: where a worker node's data-parallel engines reach the leader's front end
(vLLM's own default, ``ParallelConfig.data_parallel_rpc_port``)."""

NodeRole = Literal["api-server", "headless-engines", "headless-executor"]
"""``"api-server"`` (the leader), ``"headless-engines"`` (a worker node that runs whole data-parallel
engines) or ``"headless-executor"`` (a worker node that runs the TP/PP workers of an engine led from
another node), as ``vllm serve`` decides in ``vllm/entrypoints/cli/serve.py``."""

# A host name or IP address, or a Kubernetes `$(VAR)` reference the kubelet expands in container args
# (the operator passes `$(LWS_LEADER_ADDRESS)`).
_ADDRESS = re.compile(
    r"^(\$\([A-Za-z_][A-Za-z0-9_]*\)|[A-Za-z0-9]([A-Za-z0-9.\-]*[A-Za-z0-9])?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)$"
)


def is_leader(node_rank: int) -> bool:
    """Whether ``node_rank`` is the node that serves the API (rank 0; the others run ``--headless``)."""
    _check_int("node rank", node_rank, minimum=0)
    return node_rank == LEADER_RANK


def _check_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        accepted = (
            f"an integer from {minimum} to {maximum}" if maximum is not None else f"an integer >= {minimum}"
        )
        raise CapacityError(f"{name} {value!r} is not valid; expected {accepted}")
    return value


def _ranks_per_node(layout: Layout) -> int:
    """GPUs one data-parallel rank (engine) takes: ``TP x PP``; checked to pack whole onto nodes."""
    rank_gpus = layout.tensor_parallel_size * layout.pipeline_parallel_size
    gpn = layout.gpus_per_node
    if layout.tensor_parallel_size > gpn:
        raise CapacityError(
            f"tensor parallel size {layout.tensor_parallel_size} spans nodes of {gpn} GPUs; accepted: a TP "
            "group inside one node (use pipeline or data parallelism across nodes)"
        )
    if layout.gpus % gpn:
        raise CapacityError(
            f"a replica of {layout.gpus} GPUs ({layout.label}) spans nodes of {gpn} GPUs without filling "
            "them; accepted: a multi-node replica of whole nodes"
        )
    if layout.data_parallel_size > 1 and (gpn % rank_gpus if rank_gpus <= gpn else rank_gpus % gpn):
        raise CapacityError(
            f"a data-parallel rank of TP x PP = {rank_gpus} GPUs straddles nodes of {gpn} GPUs; accepted: "
            "TP x PP dividing the node's GPUs, or a whole number of nodes per rank"
        )
    return rank_gpus


def node_role(layout: Layout, node_rank: int) -> NodeRole:
    """What ``vllm serve`` runs on ``node_rank`` of one replica of ``layout`` (see :data:`NodeRole`)."""
    _check_int("node rank", node_rank, minimum=0, maximum=layout.nodes - 1)
    if node_rank == LEADER_RANK:
        return "api-server"
    rank_gpus = _ranks_per_node(layout)
    nodes_per_rank = max(rank_gpus // layout.gpus_per_node, 1)
    return "headless-executor" if node_rank % nodes_per_rank else "headless-engines"


def node_args(
    layout: Layout,
    *,
    node_rank: int,
    leader_address: str,
    port: int = MASTER_PORT,
    rpc_port: int = DATA_PARALLEL_RPC_PORT,
) -> list[str]:
    """The flags node ``node_rank`` of one replica of ``layout`` adds to the common ``vllm serve`` flags.

    ``[]`` when the replica fits one node. Otherwise every node gets ``--nnodes``, ``--node-rank``,
    ``--master-addr leader_address``, ``--master-port port`` and ``--distributed-executor-backend mp``;
    with data parallelism also ``--data-parallel-address leader_address`` and ``--data-parallel-rpc-port
    rpc_port``; every node but the leader (rank 0) ``--headless``. ``leader_address`` is a host name, an IP
    address, or a ``$(VAR)`` reference the kubelet expands (``$(LWS_LEADER_ADDRESS)``). Raises
    :class:`CapacityError` for a node rank outside the replica, a bad address or port, or a layout vLLM's
    multi-node launcher cannot place (a TP group across nodes, nodes not filled, a data-parallel rank
    straddling a node boundary).
    """
    if layout.nodes == 1:
        _check_int("node rank", node_rank, minimum=0, maximum=0)
        return []
    _check_int("node rank", node_rank, minimum=0, maximum=layout.nodes - 1)
    _ranks_per_node(layout)
    if not isinstance(leader_address, str) or not _ADDRESS.match(leader_address):
        raise CapacityError(
            f"leader address {leader_address!r} is not valid; expected a host name, an IP address or a "
            "$(VAR) reference such as $(LWS_LEADER_ADDRESS)"
        )
    _check_int("master port", port, minimum=1, maximum=65535)
    args = [
        "--nnodes", str(layout.nodes),
        "--node-rank", str(node_rank),
        "--master-addr", leader_address,
        "--master-port", str(port),
        "--distributed-executor-backend", "mp",
    ]  # fmt: skip
    if layout.data_parallel_size > 1:
        _check_int("data parallel RPC port", rpc_port, minimum=1, maximum=65535)
        if rpc_port == port:
            raise CapacityError(
                f"data parallel RPC port {rpc_port} is the master port; expected two different ports"
            )
        args += ["--data-parallel-address", leader_address, "--data-parallel-rpc-port", str(rpc_port)]
    if not is_leader(node_rank):
        args.append("--headless")
    return args
