"""Ask real vLLM, in-process, whether it accepts command lines: parser, serve checks, engine config.

Runs in the vLLM venv's python. Reads a JSON list of cases from stdin, each
``{"id": str, "argv": [str, ...]}`` (the arguments after ``python -m vllm.entrypoints.openai.api_server``),
and writes one JSON list to stdout, one verdict per case:

    {"id", "accepted": bool, "stage": "parse" | "serve-args" | "engine-config" | null,
     "error": one line or null, "config": {resolved fields} or null}

It does what the server's ``main`` does before it starts an engine (the parser from
``make_arg_parser``, ``validate_parsed_serve_args``) and then what the engine client does first
(``AsyncEngineArgs.from_cli_args(...).create_engine_config()``), which runs vLLM's config
validation (e.g. attention heads divisible by the TP size). It does not load weights, so checks
that vLLM only makes while building layers (KV heads split across ranks) are not covered here.
Importing vLLM takes seconds, so all cases go through one process.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable
from typing import Any


def one_line(text: str) -> str:
    """The line of a refusal that says what is wrong (vllm_layout_probe.py uses it too)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    # argparse ends with "prog: error: ..."; pydantic puts its sentence on a "Value error, ..." line.
    for ln in lines:
        low = ln.lower()
        if "error:" in low or "value error," in low:
            return ln[:500]
    return (lines[-1] if lines else "")[:500]


def probe(argv: list[str]) -> dict[str, Any]:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(description="kvright conformance probe"))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit:
        return {"accepted": False, "stage": "parse", "error": one_line(err.getvalue()), "config": None}
    try:
        validate_parsed_serve_args(args)
    except Exception as exc:
        return {"accepted": False, "stage": "serve-args", "error": one_line(str(exc)), "config": None}
    try:
        cfg = AsyncEngineArgs.from_cli_args(args).create_engine_config()
    except Exception as exc:
        return {"accepted": False, "stage": "engine-config", "error": one_line(str(exc)), "config": None}
    return {
        "accepted": True,
        "stage": None,
        "error": None,
        "config": {
            "tensor_parallel_size": cfg.parallel_config.tensor_parallel_size,
            "max_num_seqs": cfg.scheduler_config.max_num_seqs,
            "max_model_len": cfg.model_config.max_model_len,
            "cache_dtype": str(cfg.cache_config.cache_dtype),
            "block_size": cfg.cache_config.block_size,
            "kv_cache_memory_bytes": cfg.cache_config.kv_cache_memory_bytes,
            "gpu_memory_utilization": cfg.cache_config.gpu_memory_utilization,
            "num_attention_heads": cfg.model_config.get_num_attention_heads(cfg.parallel_config),
            "num_kv_heads_per_rank": cfg.model_config.get_num_kv_heads(cfg.parallel_config),
            "quantization": cfg.model_config.quantization,
        },
    }


def answer(judge: Callable[[list[str]], dict[str, Any]]) -> None:
    """Read ``[{"id", "argv"}]`` from stdin and write ``judge``'s verdict on each argv as one JSON list
    (vllm_layout_probe.py answers the same way)."""
    cases = json.load(sys.stdin)
    out = []
    for case in cases:
        with contextlib.redirect_stdout(sys.stderr):  # vLLM logs must not corrupt the JSON answer
            verdict = judge([str(a) for a in case["argv"]])
        out.append({"id": case["id"], **verdict})
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    answer(probe)
