"""Start real vLLM engines in this process, one case after another, and answer what each was asked.

Runs in the vLLM venv's python, imported by the scripts that need an engine's own objects rather than its
server (vllm_deepseek_v4_engine.py, vllm_scheduler_probe.py). Each case is a JSON object with ``id``,
``model`` (a folder with a config.json), ``kv_cache_memory_bytes``, ``max_model_len`` and
``max_num_batched_tokens``, and optionally ``kv_cache_dtype`` and ``max_num_seqs``. The engine is vLLM's own
``LLM`` (engine core in this process, ``VLLM_ENABLE_V1_MULTIPROCESSING=0``) with dummy weights and no
tokenizer, so a checkpoint is a config.json alone; it is torn down after its case
(``cleanup_dist_env_and_memory``), so one import of vLLM serves every case.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from collections.abc import Callable
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

# The sibling script: this file runs in vLLM's venv, its folder first on sys.path.
from vllm_probe import one_line


def core_of(llm: Any) -> Any:
    """The engine core behind an ``LLM`` (the in-process client wraps it)."""
    core = llm.llm_engine.engine_core
    return getattr(core, "engine_core", core)


def _answer(case: dict[str, Any], read: Callable[[Any, dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    from vllm import LLM
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    answer: dict[str, Any] = {"started": False, "error": None}
    llm = None
    try:
        llm = LLM(
            model=case["model"],
            load_format="dummy",
            skip_tokenizer_init=True,
            enforce_eager=True,
            kv_cache_memory_bytes=case["kv_cache_memory_bytes"],
            kv_cache_dtype=case.get("kv_cache_dtype", "auto"),
            max_model_len=case["max_model_len"],
            max_num_batched_tokens=case["max_num_batched_tokens"],
            max_num_seqs=case.get("max_num_seqs", 4),
        )
        answer["started"] = True
        answer.update(read(llm, case))
    except Exception as exc:
        answer["error"] = one_line(f"{type(exc).__name__}: {exc}")
    finally:
        del llm
        gc.collect()
        cleanup_dist_env_and_memory()
    return answer


def answer_cases(read: Callable[[Any, dict[str, Any]], dict[str, Any]]) -> None:
    """Read the cases from stdin, start each one's engine and write ``[{"id", "started", "error", **read(llm,
    case)}]`` as one JSON line to stdout (``started`` false and ``error`` one line when vLLM refused)."""
    out = []
    for case in json.load(sys.stdin):
        with contextlib.redirect_stdout(sys.stderr):  # vLLM logs must not corrupt the JSON answer
            answer = _answer(case, read)
        out.append({"id": case["id"], **answer})
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
