"""Ask vLLM which model classes implement pipeline parallelism and LoRA, and which can run their vision
tower whole on every rank, as a GPU build serves them.

Runs in the vLLM venv's python. Reads a JSON list of class names (as a checkpoint's ``architectures`` lists
them) from stdin, adds every text-generation and multimodal class vLLM registers, and writes one JSON object
to stdout: ``{class: {"pp": true | false | null, "lora": ..., "encoder_tp_data": ...}}``,
whether vLLM's class implements ``SupportsPP`` and ``SupportsLoRA`` (``ModelRegistry`` inspects each class as
``verify_with_parallel_config`` does before it refuses a pipeline-parallel size above 1 for one that does
not, and as the model loader does before it refuses ``--enable-lora`` for one that does not), and whether it
sets ``supports_encoder_tp_data`` (without it, vLLM turns ``--mm-encoder-tp-mode data`` back into
``weights`` with a warning and shards the tower by TP), null where
the class cannot be inspected here (its module imports a library this CPU venv lacks; torchvision, which the
wrappers import to process images alone, is stood in by vllm_weights_probe's ``_torchvision_stand_in``) or is
not registered.

kvright's pods run vLLM's CUDA build. A hardware-isolated model package (``vllm.models.<name>``: DeepSeek-V3.2
and V4, Kimi-K3, MiniMax-M3) picks its implementation by platform, and this CPU build's can differ from the
GPU's (DeepSeek-V4's CPU class has no LoRA; its CUDA class has). For those the class asked about is the one
the package imports from its ``nvidia/model.py`` on CUDA (under the name the package gives it: GLM-5's
``GlmMoeDsaForCausalLM`` is DeepSeek-V3.2's class), imported here directly; MiniMax-M3's with the stand-ins
vllm_weights_probe.py gives it.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import json
import sys
from typing import Any

from vllm_weights_probe import _minimax_m3_on_cpu, _torchvision_stand_in

#: The module of a hardware-isolated package that holds its CUDA implementation.
CUDA_MODULE = "nvidia.model"


def _cuda_class(package: str, name: str) -> Any:
    """The class ``package`` (``vllm.models.<name>``) serves as ``name`` on CUDA: what its ``__init__``
    imports from ``.nvidia.model`` under that name, else that module's attribute of the name."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None, package
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    imported = name
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module == CUDA_MODULE:
            imported = next((a.name for a in node.names if (a.asname or a.name) == name), imported)
    shims = _minimax_m3_on_cpu() if name.startswith("MiniMaxM3") else contextlib.nullcontext()
    with shims:
        return getattr(importlib.import_module(f"{package}.{CUDA_MODULE}"), imported)


def main() -> None:
    asked = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):  # vLLM's logs stay off the answer
        from vllm.model_executor.models.interfaces import (
            supports_lora,
            supports_multimodal_encoder_tp_data,
            supports_pp,
        )
        from vllm.model_executor.models.registry import (
            _MULTIMODAL_MODELS,
            _TEXT_GENERATION_MODELS,
            _VLLM_MODELS,
            ModelRegistry,
        )

        names = sorted({*asked, *_TEXT_GENERATION_MODELS, *_MULTIMODAL_MODELS})
        answers: dict[str, dict[str, bool | None]] = {}
        with _torchvision_stand_in():  # the wrappers' modules import it to process images alone
            for name in names:
                model = ModelRegistry.models.get(name)
                package = _VLLM_MODELS.get(name, ("", ""))[0]
                try:  # imported here, in this one process (inspecting may start a process per class)
                    if package.startswith("vllm.models."):
                        cls = _cuda_class(package, name)
                    else:
                        cls = model.load_model_cls() if model is not None else None
                except Exception:  # the class's module cannot be imported in this venv
                    cls = None
                answers[name] = {
                    "pp": None if cls is None else bool(supports_pp(cls)),
                    "lora": None if cls is None else bool(supports_lora(cls)),
                    "encoder_tp_data": None if cls is None else supports_multimodal_encoder_tp_data(cls),
                }
    json.dump(answers, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
