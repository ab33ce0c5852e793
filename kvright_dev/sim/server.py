"""The simulator process: `vllm serve MODEL <args>` on the outside, :class:`Engine` on the inside.

Serves, on 127.0.0.1 by default:
- ``POST /v1/completions`` (OpenAI-compatible, non-streaming; ``prompt`` is a string, counted as one
  token per 4 characters, or a list of token ids; the completion always runs to ``max_tokens``),
- ``GET /v1/models``, ``GET /health`` (503 while draining), ``GET /metrics`` (vLLM's names).

A time-scale knob runs the virtual clock faster than the wall clock so tests take seconds: latencies
in responses and metrics are virtual (what a real GPU would show); only the pacing is scaled.

SIGTERM drains like a Kubernetes pod should: /health turns 503, new requests get 503 (a client or a
Service retries elsewhere), admitted requests finish, then the process exits (bounded by
``--drain-timeout`` wall seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kvright_dev.procs import WaitFailed, wait_until
from kvright_dev.sim.engine import Engine, Finished, SimRequest
from kvright_dev.sim.metrics import VLLMMetrics

__all__ = ["SimServer", "build_parser", "main", "parse_command_line"]


def build_parser() -> argparse.ArgumentParser:
    """The `vllm serve` flags the simulator understands, plus its own (marked "simulator:")."""
    p = argparse.ArgumentParser(
        prog="vllm-sim serve", description="vLLM simulator (kvright test and demo tool)"
    )
    p.add_argument("model")
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    p.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    p.add_argument("--enable-expert-parallel", "-ep", action="store_true")
    # A replica across nodes (kvright's LeaderWorkerSet): the leader (node rank 0) serves the API; the
    # others run --headless. The simulator serves the whole replica from its leader.
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--master-addr", default=None)
    p.add_argument("--master-port", type=int, default=None)
    p.add_argument("--distributed-executor-backend", default=None)
    p.add_argument("--data-parallel-address", default=None)
    p.add_argument("--data-parallel-rpc-port", type=int, default=None)
    p.add_argument("--headless", action="store_true")
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--max-num-batched-tokens", type=int, default=None)
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--num-gpu-blocks-override", type=int, default=None)
    p.add_argument("--served-model-name", nargs="+", default=None)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--gpu", default="H100-SXM", help="simulator: GPU product (catalog id or GFD label)")
    p.add_argument("--architecture", default=None, help="simulator: capacity catalog id or config.json path")
    p.add_argument(
        "--efficiency",
        type=float,
        default=1.0,
        help="simulator: speed relative to the nominal GPU profile, which is close to kvright's prediction "
        "(0.7 = steps take 1/0.7 as long; kvright_dev.sim.physics)",
    )
    p.add_argument(
        "--noise", type=float, default=0.0, help="simulator: relative std-dev of a step's duration"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--fault",
        choices=("none", "nan"),
        default="none",
        help="simulator: 'nan' exports NaN KV usage and poisons the TPOT histogram's sum (tests)",
    )
    p.add_argument("--time-scale", type=float, default=1.0, help="simulator: virtual seconds per wall second")
    p.add_argument(
        "--drain-timeout", type=float, default=60.0, help="simulator: wall seconds to drain on SIGTERM"
    )
    return p


@dataclass(frozen=True, kw_only=True)
class ServeArgs:
    model: str
    served_model_name: str
    tensor_parallel_size: int
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    expert_parallel: bool = False
    nnodes: int = 1
    """Nodes the replica spans (--nnodes); its GPUs are spread evenly over them."""
    node_rank: int = 0
    headless: bool = False
    """A worker node of a multi-node replica (--headless): no API server, nothing to simulate."""
    max_num_seqs: int
    max_model_len: int | None
    max_num_batched_tokens: int | None
    kv_cache_dtype: str
    gpu_memory_utilization: float
    block_size: int
    num_gpu_blocks_override: int | None
    host: str
    port: int
    gpu: str
    architecture: str | None
    efficiency: float
    noise: float
    seed: int
    time_scale: float
    drain_timeout: float
    fault: str
    ignored: tuple[str, ...]


def parse_command_line(argv: Sequence[str]) -> ServeArgs:
    """Accept `[vllm] serve MODEL <flags>`; unknown vLLM flags are kept in `ignored`, not fatal."""
    args = list(argv)
    if args and args[0] == "vllm":
        args = args[1:]
    if args and args[0] == "serve":
        args = args[1:]
    ns, unknown = build_parser().parse_known_args(args)
    problems = []
    if ns.efficiency <= 0 or ns.efficiency > 10:
        problems.append(f"--efficiency {ns.efficiency} (accepted: 0 < e <= 10)")
    if not 0 <= ns.noise < 1:
        problems.append(f"--noise {ns.noise} (accepted: 0 <= noise < 1)")
    if ns.time_scale <= 0:
        problems.append(f"--time-scale {ns.time_scale} (accepted: > 0)")
    for flag in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "nnodes"):
        if getattr(ns, flag) < 1:
            problems.append(f"--{flag.replace('_', '-')} {getattr(ns, flag)} (accepted: >= 1)")
    if not 0 <= ns.node_rank < max(1, ns.nnodes):
        problems.append(f"--node-rank {ns.node_rank} (accepted: 0 .. --nnodes - 1)")
    if problems:
        raise SystemExit("vllm-sim: " + "; ".join(problems))
    return ServeArgs(
        model=ns.model,
        served_model_name=(ns.served_model_name or [ns.model])[0],
        tensor_parallel_size=ns.tensor_parallel_size,
        pipeline_parallel_size=ns.pipeline_parallel_size,
        data_parallel_size=ns.data_parallel_size,
        expert_parallel=ns.enable_expert_parallel,
        nnodes=ns.nnodes,
        node_rank=ns.node_rank,
        headless=ns.headless,
        max_num_seqs=ns.max_num_seqs if ns.max_num_seqs is not None else 256,
        max_model_len=ns.max_model_len,
        max_num_batched_tokens=ns.max_num_batched_tokens,
        kv_cache_dtype=ns.kv_cache_dtype,
        gpu_memory_utilization=ns.gpu_memory_utilization,
        block_size=ns.block_size,
        num_gpu_blocks_override=ns.num_gpu_blocks_override,
        host=ns.host,
        port=ns.port,
        gpu=ns.gpu,
        architecture=ns.architecture,
        efficiency=ns.efficiency,
        noise=ns.noise,
        seed=ns.seed,
        time_scale=ns.time_scale,
        drain_timeout=ns.drain_timeout,
        fault=ns.fault,
        ignored=tuple(unknown),
    )


class _Server(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: a burst of clients (a load generator, a Service after a
    # rollout) overflows it and connections get reset. uvicorn, which serves vLLM, listens with 2048.
    request_queue_size = 2048
    daemon_threads = True


@dataclass
class _Pending:
    request: SimRequest
    done: threading.Event
    result: Finished | None = None


class SimServer:
    """The engine thread plus the HTTP front end. `start()` returns once it listens."""

    def __init__(
        self,
        *,
        engine: Engine,
        metrics: VLLMMetrics,
        served_model_name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        time_scale: float = 1.0,
        drain_timeout: float = 60.0,
    ) -> None:
        self.engine = engine
        self.metrics = metrics
        self.served_model_name = served_model_name
        self.time_scale = time_scale
        self.drain_timeout = drain_timeout
        self.lock = threading.Condition()
        self.pending: dict[int, _Pending] = {}
        self.inflight = 0
        """Completion requests whose HTTP answer is not written yet."""
        self.last_request = time.monotonic()
        self.draining = False
        self.stopped = threading.Event()
        self.httpd = _Server((host, port), self._handler())
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._wall0 = time.monotonic()
        self._threads: list[threading.Thread] = []

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        for target in (self._run_engine, lambda: self.httpd.serve_forever(0.1)):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)

    def drain(self) -> None:
        """Stop taking requests; finish the admitted ones; then stop (see module docstring)."""
        with self.lock:
            self.draining = True
            self.lock.notify_all()

    def stop(self) -> None:
        self.stopped.set()
        with self.lock:
            self.lock.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    def wait_drained(self, quiet_seconds: float = 1.0) -> None:
        """Until every admitted request has been answered (written to its client) and no request has
        arrived for ``quiet_seconds``, or the drain timeout. The quiet period is the simulator's preStop:
        a client that picked this endpoint just before it was withdrawn still gets its 503 (and retries
        elsewhere) instead of a reset from a process that already exited."""

        def drained() -> bool:
            with self.lock:
                idle = time.monotonic() - self.last_request >= quiet_seconds
                return not self.pending and self.inflight == 0 and idle

        if self.drain_timeout > 0:
            with contextlib.suppress(WaitFailed):  # out of drain time: stop anyway, as vLLM does
                wait_until(
                    drained, self.drain_timeout, what="the simulator to drain", interval=0.05, transient=()
                )

    def _virtual_now(self) -> float:
        return (time.monotonic() - self._wall0) * self.time_scale

    # -- engine loop ----------------------------------------------------------------------------
    def _run_engine(self) -> None:
        while not self.stopped.is_set():
            with self.lock:
                while not self.engine.busy and not self.stopped.is_set():
                    self.metrics.set_state(running=0, waiting=0, kv_cache_usage=self.engine.kv_cache_usage)
                    self.lock.wait(0.2)
                    self.engine.advance_idle(self._virtual_now())
                if self.stopped.is_set():
                    return
                before = self.engine.prompt_tokens_total
                step = self.engine.step()
                self.metrics.record_step(step, prompt_tokens=self.engine.prompt_tokens_total - before)
                self.metrics.set_state(
                    running=len(self.engine.running),
                    waiting=len(self.engine.waiting),
                    kv_cache_usage=self.engine.kv_cache_usage,
                )
                for done in step.finished:
                    pending = self.pending.pop(done.request_id, None)
                    if pending is not None:
                        pending.result = done
                        pending.done.set()
                target = self.engine.now
            # Pace: never let the virtual clock run ahead of scaled wall time.
            ahead = (target - self._virtual_now()) / self.time_scale
            if ahead > 0:
                time.sleep(min(ahead, 1.0))

    def submit(self, *, prompt_tokens: int, max_tokens: int) -> _Pending | str:
        """Queue a request; return the pending handle, or why it was refused (HTTP 400/503)."""
        with self.lock:
            if self.draining:
                return "draining"
            problem = self.engine.validate(prompt_tokens, max_tokens)
            if problem is not None:
                return problem
            self.engine.advance_idle(self._virtual_now())
            request = self.engine.submit(prompt_tokens=prompt_tokens, max_tokens=max_tokens)
            pending = _Pending(request=request, done=threading.Event())
            self.pending[request.request_id] = pending
            self.lock.notify_all()
            return pending

    # -- HTTP -----------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                if server.draining:
                    # No keep-alive into a server that is about to exit: the client reconnects elsewhere.
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def _json(self, status: int, obj: Any) -> None:
                self._send(status, json.dumps(obj).encode())

            def _error(self, status: int, message: str, kind: str) -> None:
                self._json(status, {"object": "error", "message": message, "type": kind, "code": status})

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/health":
                    self._send(503 if server.draining else 200, b"")
                elif path == "/metrics":
                    self._send(200, generate_latest(server.metrics.registry), CONTENT_TYPE_LATEST)
                elif path == "/v1/models":
                    self._json(
                        200,
                        {"object": "list", "data": [{"id": server.served_model_name, "object": "model"}]},
                    )
                else:
                    self._error(404, f"no route {path}", "NotFound")

            def do_POST(self) -> None:
                with server.lock:
                    server.inflight += 1
                    server.last_request = time.monotonic()
                try:
                    self._post()
                finally:
                    with server.lock:
                        server.inflight -= 1

            def _post(self) -> None:
                path = self.path.split("?", 1)[0]
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if path != "/v1/completions":
                    self._error(404, f"no route {path}", "NotFound")
                    return
                try:
                    body = json.loads(raw or b"{}")
                    if not isinstance(body, dict):
                        raise ValueError("body is not a JSON object")
                    prompt = body.get("prompt", "")
                    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
                        prompt_tokens = len(prompt)
                    elif isinstance(prompt, str):
                        prompt_tokens = max(1, len(prompt) // 4)
                    else:
                        raise ValueError("prompt must be a string or a list of token ids")
                    max_tokens = int(body.get("max_tokens", 16))
                    model = body.get("model", server.served_model_name)
                except (ValueError, TypeError) as exc:
                    self._error(400, f"invalid request: {exc}", "BadRequestError")
                    return
                if model != server.served_model_name:
                    self._error(404, f"The model `{model}` does not exist.", "NotFoundError")
                    return
                outcome = server.submit(prompt_tokens=prompt_tokens, max_tokens=max_tokens)
                if outcome == "draining":
                    self._error(503, "server is shutting down", "ServiceUnavailableError")
                    return
                if isinstance(outcome, str):
                    self._error(400, outcome, "BadRequestError")
                    return
                while not outcome.done.wait(0.5):
                    if server.stopped.is_set():
                        self._error(500, "engine stopped", "InternalServerError")
                        return
                done = outcome.result
                assert done is not None
                self._json(
                    200,
                    {
                        "id": f"cmpl-{done.request_id}",
                        "object": "text_completion",
                        "created": int(time.time()),
                        "model": server.served_model_name,
                        "choices": [
                            {
                                "index": 0,
                                "text": " x" * done.output_tokens,
                                "finish_reason": "length",
                                "logprobs": None,
                            }
                        ],
                        "usage": {
                            "prompt_tokens": done.prompt_tokens,
                            "completion_tokens": done.output_tokens,
                            "total_tokens": done.prompt_tokens + done.output_tokens,
                        },
                        # Virtual latencies, for tests and the load generator's report.
                        "kvright_sim": {
                            "ttft_seconds": done.ttft_seconds,
                            "tpot_seconds": done.tpot_seconds,
                            "e2e_seconds": done.e2e_seconds,
                        },
                    },
                )

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: `python -m kvright_dev.sim serve MODEL <vllm flags> [--gpu ...]`."""
    # Reads capacity's catalog; imported here to keep tests light.
    from kvright_dev.sim.physics import build_engine

    args = parse_command_line(sys.argv[1:] if argv is None else argv)
    if args.headless:
        # vLLM's headless node serves no HTTP; the simulator models the replica on its leader.
        print(f"vllm-sim: headless node {args.node_rank} of {args.nnodes}: nothing to serve", flush=True)
        return 0
    try:
        engine, cache_config = build_engine(args)
    except ValueError as exc:
        print(f"vllm-sim: {exc}", file=sys.stderr)
        return 2
    metrics = VLLMMetrics(model_name=args.served_model_name, cache_config=cache_config, fault=args.fault)
    server = SimServer(
        engine=engine,
        metrics=metrics,
        served_model_name=args.served_model_name,
        host=args.host,
        port=args.port,
        time_scale=args.time_scale,
        drain_timeout=args.drain_timeout,
    )
    stop = threading.Event()

    def on_term(signum: int, frame: object) -> None:
        server.drain()
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    server.start()
    print(
        f"vllm-sim: serving {args.served_model_name} on http://{args.host}:{server.port} "
        f"(tp={args.tensor_parallel_size}, max-num-seqs={args.max_num_seqs}, blocks={engine.num_gpu_blocks}"
        f"x{engine.block_size}, time-scale={args.time_scale})"
        + (f"; ignored flags: {' '.join(args.ignored)}" if args.ignored else ""),
        flush=True,
    )
    while not stop.wait(0.5):
        pass
    print(f"vllm-sim: draining {len(server.pending)} admitted request(s)", flush=True)
    server.wait_drained()
    with server.lock:
        left = (len(server.pending), server.inflight)
    print(f"vllm-sim: drained; {left[0]} pending and {left[1]} unanswered at exit", flush=True)
    server.stop()
    return 0
