"""Ask real vLLM which attention backends take a KV-cache dtype on a GPU of a given compute capability.

Runs in the vLLM venv's python. The CPU build cannot import the CUDA platform (its kernels are not there),
but the backends' own ``validate_configuration`` is plain Python, so each backend is asked directly, as the
CUDA platform's ``get_valid_backends`` asks it. Reads ``[{"id", "backend", "capability": [major, minor],
"kv_cache_dtype", "use_mla", "head_size"}]`` from stdin; writes ``[{"id", "reasons": [str] or null,
"unavailable": str or null}]`` (no reasons: the backend takes the configuration; unavailable: it does not
import here, e.g. FlashInfer, which only CUDA builds ship). It also writes, as the last entry, the backends
``platforms/cuda.py``'s ``_get_backend_priorities`` lists, one per branch (read from its source, not
imported): ``{"id": "cuda-priorities", "lists": [[str]]}``.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import sys
from typing import Any


def ask(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.attention.selector import AttentionSelectorConfig

    wanted = {
        "head_size": case["head_size"],
        "dtype": torch.bfloat16,
        "kv_cache_dtype": case["kv_cache_dtype"],
        "block_size": 16,
        "use_mla": case["use_mla"],
        "has_sink": False,
        "use_sparse": False,
        "use_mm_prefix": False,
        "use_non_causal": False,
        "attn_type": "decoder",
    }
    config = {field: wanted.get(field) for field in AttentionSelectorConfig._fields}
    try:
        backend = AttentionBackendEnum[case["backend"]].get_class()
    except (ImportError, OSError) as exc:
        return {"reasons": None, "unavailable": f"{type(exc).__name__}: {exc}"[:300]}
    reasons = backend.validate_configuration(
        device_capability=DeviceCapability(*case["capability"]), **config
    )
    return {"reasons": [str(r) for r in reasons], "unavailable": None}


def cuda_priorities() -> list[list[str]]:
    """Each list of ``AttentionBackendEnum.NAME`` in ``_get_backend_priorities`` (one per capability branch),
    in source order."""
    spec = importlib.util.find_spec("vllm.platforms")
    assert spec is not None and spec.submodule_search_locations
    path = f"{next(iter(spec.submodule_search_locations))}/cuda.py"
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_get_backend_priorities":
            return [
                [
                    n.attr
                    for element in lst.elts
                    for n in ast.walk(element)
                    if isinstance(n, ast.Attribute)
                    and isinstance(n.value, ast.Name)
                    and n.value.id == "AttentionBackendEnum"
                ]
                for lst in ast.walk(node)
                if isinstance(lst, ast.List)
            ]
    raise AssertionError(f"_get_backend_priorities not found in {path}")


if __name__ == "__main__":
    out = []
    for case in json.load(sys.stdin):
        with contextlib.redirect_stdout(sys.stderr):  # vLLM logs must not corrupt the JSON answer
            out.append({"id": case["id"], **ask(case)})
    out.append({"id": "cuda-priorities", "lists": cuda_priorities()})
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
