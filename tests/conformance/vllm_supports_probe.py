"""Ask vLLM's registry which model classes implement pipeline parallelism and LoRA.

Runs in the vLLM venv's python. Reads a JSON list of class names (as a checkpoint's ``architectures`` lists
them) from stdin and writes one JSON object to stdout: ``{class: {"pp": true | false | null, "lora": ...}}``,
whether vLLM's class implements ``SupportsPP`` and ``SupportsLoRA`` (``ModelRegistry`` inspects each class as
``verify_with_parallel_config`` does before it refuses a pipeline-parallel size above 1 for one that does
not, and as the model loader does before it refuses ``--enable-lora`` for one that does not), null where
the class cannot be inspected here (a wrapper whose module imports a library this CPU venv lacks) or is not
registered. MiniMax-M3's classes are imported with the stand-ins vllm_weights_probe.py gives them.
"""

from __future__ import annotations

import contextlib
import json
import sys

from vllm_weights_probe import _minimax_m3_on_cpu


def main() -> None:
    names = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):  # vLLM's logs stay off the answer
        from vllm.model_executor.models.interfaces import supports_lora, supports_pp
        from vllm.model_executor.models.registry import ModelRegistry

        answers: dict[str, dict[str, bool | None]] = {}
        for name in names:
            model = ModelRegistry.models.get(name)
            shims = _minimax_m3_on_cpu() if name.startswith("MiniMaxM3") else contextlib.nullcontext()
            try:  # imported here, in this one process (inspecting may start a process per class)
                with shims:
                    cls = model.load_model_cls() if model is not None else None
            except Exception:  # the class's module cannot be imported in this venv
                cls = None
            answers[name] = {
                "pp": None if cls is None else bool(supports_pp(cls)),
                "lora": None if cls is None else bool(supports_lora(cls)),
            }
    json.dump(answers, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
