"""Start real vLLM engines for tiny DeepSeek-V4 checkpoints and report the KV cache they allocate.

Runs in the vLLM venv's python. Reads a JSON list of cases from stdin, each
``{"id": str, "model": folder with config.json, "kv_cache_memory_bytes": int, "kv_cache_dtype": str,
"max_model_len": int, "max_num_batched_tokens": int}``, and writes one JSON list to stdout, one answer per
case:

    {"id", "started": bool, "error": one line or null, "cache_dtype": str or null, "num_blocks": int or null,
     "groups": [{"block_size", "sliding_window" or null, "spec", "layers"}],
     "block_strides": [distinct block strides of the KV-cache tensors, bytes],
     "max_concurrency": vLLM's requests of max_model_len the pool holds at once, or null}

Each engine is vLLM's own ``LLM`` (engine core in this process, ``VLLM_ENABLE_V1_MULTIPROCESSING=0``) with
dummy weights and no tokenizer (a DeepSeek-V4 checkpoint is a config.json alone here): its model, its
KV-cache specs, its grouping and its pool are vLLM's, read back from the scheduler's ``kv_cache_config``.
Nothing is generated (a forward pass needs Triton's CPU backend, which this build lacks). Engines are torn
down between cases (``cleanup_dist_env_and_memory``), so one import of vLLM serves them all.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

# The sibling script: this file runs as a script in vLLM's venv, its folder first on sys.path.
from vllm_probe import one_line


def start(case: dict[str, Any]) -> dict[str, Any]:
    from vllm import LLM
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config

    answer: dict[str, Any] = {
        "started": False,
        "error": None,
        "cache_dtype": None,
        "num_blocks": None,
        "groups": [],
        "block_strides": [],
        "max_concurrency": None,
    }
    llm = None
    try:
        llm = LLM(
            model=case["model"],
            load_format="dummy",
            skip_tokenizer_init=True,
            enforce_eager=True,
            kv_cache_memory_bytes=case["kv_cache_memory_bytes"],
            kv_cache_dtype=case["kv_cache_dtype"],
            max_model_len=case["max_model_len"],
            max_num_batched_tokens=case["max_num_batched_tokens"],
            max_num_seqs=4,
        )
    except Exception as exc:
        answer["error"] = one_line(f"{type(exc).__name__}: {exc}")
    else:
        core = llm.llm_engine.engine_core
        core = getattr(core, "engine_core", core)  # InprocClient wraps the EngineCore
        kcc = core.scheduler.kv_cache_config
        answer.update(
            started=True,
            cache_dtype=str(llm.llm_engine.vllm_config.cache_config.cache_dtype),
            num_blocks=kcc.num_blocks,
            groups=[
                {
                    "block_size": g.kv_cache_spec.block_size,
                    "sliding_window": getattr(g.kv_cache_spec, "sliding_window", None),
                    "spec": type(g.kv_cache_spec).__name__,
                    "layers": len(g.layer_names),
                }
                for g in kcc.kv_cache_groups
            ],
            block_strides=sorted({t.block_stride for t in kcc.kv_cache_tensors}),
            # What vLLM logs as "Maximum concurrency for max_model_len tokens per request".
            max_concurrency=get_max_concurrency_for_kv_cache_config(llm.llm_engine.vllm_config, kcc),
        )
    finally:
        del llm
        gc.collect()
        cleanup_dist_env_and_memory()
    return answer


def main() -> None:
    cases = json.load(sys.stdin)
    out = []
    for case in cases:
        with contextlib.redirect_stdout(sys.stderr):  # vLLM logs must not corrupt the JSON answer
            answer = start(case)
        out.append({"id": case["id"], **answer})
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
