"""Start real vLLM engines for tiny DeepSeek-V4 checkpoints and report the KV cache they allocate.

Runs in the vLLM venv's python. Reads a JSON list of cases from stdin, each
``{"id": str, "model": folder with config.json, "kv_cache_memory_bytes": int, "kv_cache_dtype": str,
"max_model_len": int, "max_num_batched_tokens": int}``, and writes one JSON list to stdout, one answer per
case:

    {"id", "started": bool, "error": one line or null, "cache_dtype": str or null, "num_blocks": int or null,
     "groups": [{"block_size", "sliding_window" or null, "spec", "layers"}],
     "block_strides": [distinct block strides of the KV-cache tensors, bytes],
     "max_concurrency": vLLM's requests of max_model_len the pool holds at once, or null}

Each engine is vLLM's own (vllm_offline_engine.py: dummy weights, no tokenizer; a DeepSeek-V4 checkpoint
is a config.json alone here): its model, its KV-cache specs, its grouping and its pool are vLLM's, read
back from the scheduler's ``kv_cache_config``. Nothing is generated (a forward pass needs Triton's CPU
backend, which this build lacks).
"""

from __future__ import annotations

from typing import Any

# Sibling scripts: this file runs as a script in vLLM's venv, its folder first on sys.path.
from vllm_offline_engine import answer_cases, core_of


def read(llm: Any, case: dict[str, Any]) -> dict[str, Any]:
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config

    kcc = core_of(llm).scheduler.kv_cache_config
    return {
        "cache_dtype": str(llm.llm_engine.vllm_config.cache_config.cache_dtype),
        "num_blocks": kcc.num_blocks,
        "groups": [
            {
                "block_size": g.kv_cache_spec.block_size,
                "sliding_window": getattr(g.kv_cache_spec, "sliding_window", None),
                "spec": type(g.kv_cache_spec).__name__,
                "layers": len(g.layer_names),
            }
            for g in kcc.kv_cache_groups
        ],
        "block_strides": sorted({t.block_stride for t in kcc.kv_cache_tensors}),
        # What vLLM logs as "Maximum concurrency for max_model_len tokens per request".
        "max_concurrency": get_max_concurrency_for_kv_cache_config(llm.llm_engine.vllm_config, kcc),
    }


if __name__ == "__main__":
    answer_cases(read)
