"""Ask vLLM's registry which model classes implement pipeline parallelism.

Runs in the vLLM venv's python. Reads a JSON list of class names (as a checkpoint's ``architectures`` lists
them) from stdin and writes one JSON object to stdout: ``{class: true | false | null}``, whether vLLM's
class implements ``SupportsPP`` (``ModelRegistry`` inspects each class as ``verify_with_parallel_config``
does before it refuses a pipeline-parallel size above 1 for one that does not), null where the class
cannot be inspected here (a wrapper whose module imports a library this CPU venv lacks) or is not
registered.
"""

from __future__ import annotations

import contextlib
import json
import sys


def main() -> None:
    names = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):  # vLLM's logs stay off the answer
        from vllm.model_executor.models.interfaces import supports_pp
        from vllm.model_executor.models.registry import ModelRegistry

        answers: dict[str, bool | None] = {}
        for name in names:
            model = ModelRegistry.models.get(name)
            try:  # imported here, in this one process (inspecting may start a process per class)
                answers[name] = bool(supports_pp(model.load_model_cls())) if model is not None else None
            except Exception:  # the class's module cannot be imported in this venv
                answers[name] = None
    json.dump(answers, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
