"""Ask vLLM's Marlin kernel whether it implements a row-parallel linear of a GPTQ/AWQ-style checkpoint
(integer weights in groups) at a TP degree.

Runs in the vLLM venv's python. Reads a JSON list of cases from stdin, each ``{"id", "input_size",
"output_size", "tp", "group_size"}``, and writes one JSON list to stdout: ``{"id", "accepted": bool,
"reason": str | null}``: ``MarlinLinearKernel.can_implement`` for the layer config ``AutoGPTQLinearMethod``
builds (``MPLinearLayerConfig``: the full shape, the row-parallel partition ``input_size // tp`` by
``output_size``, GPTQ's 4-bit weight type, fp16 activations, the group). Marlin is the kernel vLLM's
CUDA build picks for these checkpoints on every GPU from Ampere on (Machete, ahead of it on Hopper, does not
ask and would size the scales by ``input_size_per_partition // group_size``). Its first check is that the
platform is CUDA, which this CPU build is not: ``is_cuda`` answers True in this process only, so the shape
checks that follow are the ones a GPU runs.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any


def check(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from vllm.model_executor.kernels.linear.mixed_precision.marlin import MarlinLinearKernel
    from vllm.model_executor.kernels.linear.mixed_precision.MPLinearKernel import MPLinearLayerConfig
    from vllm.scalar_type import scalar_types

    full, tp = int(case["input_size"]), int(case["tp"])
    config = MPLinearLayerConfig(
        full_weight_shape=(full, int(case["output_size"])),
        partition_weight_shape=(full // tp, int(case["output_size"])),
        weight_type=scalar_types.uint4b8,
        act_type=torch.float16,
        group_size=int(case["group_size"]),
        zero_points=False,
    )
    accepted, reason = MarlinLinearKernel.can_implement(config)
    return {"id": case["id"], "accepted": bool(accepted), "reason": reason}


def main() -> None:
    cases = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):  # vLLM's logs stay off the answer
        from vllm.model_executor.kernels.linear.mixed_precision import marlin
        from vllm.platforms import current_platform

        # after vLLM's modules are imported (they pick their CPU ops by platform at import): this process only
        type(current_platform).is_cuda = lambda self: True  # type: ignore[method-assign]
        assert marlin.current_platform is current_platform
        answers = [check(case) for case in cases]
    json.dump(answers, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
