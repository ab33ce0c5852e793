"""Ask vLLM's own FP8 block-quantization shape checks whether a TP / EP layout loads.

Runs in the vLLM venv's python. Reads a JSON list of cases from stdin, each
``{"id", "kind": "moe" | "dense", "tp": int, "ep": bool, ...sizes}``, and writes one JSON list to
stdout: ``{"id", "accepted": bool, "error": str | null, "per_partition": int}``.

The checks are the ones vLLM runs while creating weights, called with vLLM's own sharding:

- "moe" (``intermediate_size``, ``weight_block_size``): ``FusedMoEParallelConfig.make`` decides the
  MoE's TP size (1 with ``--enable-expert-parallel``: experts are spread, not split by width), the
  per-partition width is ``intermediate_size // tp`` as in ``FusedMoEConfig``, and
  ``fp8_utils.validate_fp8_block_shape_moe`` is what ``Fp8MoEMethod.create_weights`` calls.
- "qkv" (``input_size``, ``heads``, ``kv_heads``, ``head_dim``, optional ``v_head_dim``):
  QKVParallelLinear's per-rank q/k/v widths (KV heads replicated when tp >= kv_heads) through
  ``validate_fp8_block_shape``.
- "dense" (``input_size``, ``output_sizes``, ``parallel``: "column" | "row"): the per-rank shapes a
  (Merged)ColumnParallelLinear or RowParallelLinear gives ``Fp8LinearMethod.create_weights``, checked
  by ``fp8_utils.validate_fp8_block_shape``.

A column-parallel layer first runs vLLM's own ``ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch``
on its block and per-rank parts, as its ``__init__`` does before creating weights: a merged layer whose parts
are not all whole blocks is let through unchecked.

The TP world size those functions read from vLLM's process groups is supplied by patching
``get_tensor_model_parallel_world_size`` (and the TP rank, 0): no process group is started.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any


def check(case: dict[str, Any]) -> dict[str, Any]:
    import types

    import torch
    import vllm.distributed as dist
    import vllm.distributed.parallel_state as ps
    from vllm.config import ParallelConfig
    from vllm.model_executor.layers.fused_moe import config as moe_config
    from vllm.model_executor.layers.linear import ColumnParallelLinear
    from vllm.model_executor.layers.quantization.utils import fp8_utils

    tp = int(case["tp"])
    for module in (dist, ps, moe_config):
        if hasattr(module, "get_tensor_model_parallel_world_size"):
            module.get_tensor_model_parallel_world_size = lambda: tp  # type: ignore[attr-defined]
        if hasattr(module, "get_tensor_model_parallel_rank"):
            module.get_tensor_model_parallel_rank = lambda: 0  # type: ignore[attr-defined]
    block = [int(b) for b in case.get("weight_block_size", (128, 128))]

    def column_layer(parts: list[int]) -> torch.nn.Module:
        layer = torch.nn.Module()
        layer.quant_config = types.SimpleNamespace(weight_block_size=block)
        layer.output_partition_sizes = parts
        layer.allow_fp8_block_shape_mismatch = False
        ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch(layer)  # type: ignore[arg-type]
        return layer
    try:
        if case["kind"] == "moe":
            parallel = moe_config.FusedMoEParallelConfig.make(
                tp_size_=tp,
                pcp_size_=1,
                dp_size_=1,
                sp_size_=1,
                vllm_parallel_config=ParallelConfig(
                    tensor_parallel_size=tp, enable_expert_parallel=bool(case["ep"])
                ),
            )
            per_partition = int(case["intermediate_size"]) // parallel.tp_size
            fp8_utils.validate_fp8_block_shape_moe(per_partition, block)
        elif case["kind"] == "qkv":
            # QKVParallelLinear: heads split over TP; KV heads split, or one per rank (replicated) when
            # tp >= kv_heads; output_size is the sum over ranks, as the layer passes it.
            heads, kv, head_dim = int(case["heads"]), int(case["kv_heads"]), int(case["head_dim"])
            v_head_dim = int(case.get("v_head_dim", head_dim))
            q_per_rank = heads // tp
            kv_per_rank = 1 if tp >= kv else kv // tp
            parts = [q_per_rank * head_dim, kv_per_rank * head_dim, kv_per_rank * v_head_dim]
            hidden = int(case["input_size"])
            per_partition = sum(parts)
            fp8_utils.validate_fp8_block_shape(
                column_layer(parts), hidden, per_partition * tp, hidden, parts, block
            )
        else:
            input_size = int(case["input_size"])
            outputs = [int(o) for o in case["output_sizes"]]
            if case["parallel"] == "column":
                partition_in, partition_outs = input_size, [o // tp for o in outputs]
                layer = column_layer(partition_outs)
            else:
                partition_in, partition_outs = input_size // tp, outputs
                layer = torch.nn.Module()
            per_partition = partition_in if case["parallel"] == "row" else sum(partition_outs)
            fp8_utils.validate_fp8_block_shape(
                layer, input_size, sum(outputs), partition_in, partition_outs, block
            )
    except ValueError as exc:
        return {"accepted": False, "error": str(exc), "per_partition": per_partition}
    return {"accepted": True, "error": None, "per_partition": per_partition}


def main() -> None:
    cases = json.load(sys.stdin)
    out = []
    for case in cases:
        with contextlib.redirect_stdout(sys.stderr):  # vLLM logs must not corrupt the JSON answer
            out.append({"id": case["id"], **check(case)})
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
