"""The config.json that transformers' own class writes for each text-generation architecture vLLM registers.

Runs in the vLLM venv's python. Reads ``{"skip": [class names], "fields": {...}}`` from stdin; for every
class in vLLM 0.32's text-generation registry that is not skipped, builds the config class of the model type
vLLM's module is named for (``AutoConfig.for_model``) from those of ``fields`` the class has and writes what
``to_dict`` gives: the
file a checkpoint of that class holds, with every field its class states (a family's own, such as an MoE's
expert count or a recurrent model's stacks, at their defaults). Writes one JSON list to stdout:

    [{"id": class name, "model_type": str, "config": {...} or null, "error": one line or null}, ...]

No weights, no engine; ``config`` is null where transformers has no config class for the type (the
repository's own code is needed) or the class refuses the fields.
"""

from __future__ import annotations

import contextlib
import json
import sys


def main() -> None:
    request = json.load(sys.stdin)
    skip = set(request["skip"])
    with contextlib.redirect_stdout(sys.stderr):
        from transformers import AutoConfig
        from vllm.model_executor.models.registry import _TEXT_GENERATION_MODELS

    answers = []
    for architecture, (module, _) in sorted(_TEXT_GENERATION_MODELS.items()):
        if architecture in skip:
            continue
        answer = {"id": architecture, "model_type": module, "config": None, "error": None}
        try:
            with contextlib.redirect_stdout(sys.stderr):
                # Only the fields the class has (by its own name or its attribute_map's): one it does not
                # know would be kept as an extra attribute, which no real file of the family holds.
                default = AutoConfig.for_model(module)
                known = {k: v for k, v in request["fields"].items() if hasattr(default, k)}
                config = AutoConfig.for_model(module, **known).to_dict()
            config = {k: v for k, v in config.items() if not k.startswith("_")}
            answer["config"] = config | {"architectures": [architecture], "model_type": module}
        except Exception as error:  # each answer says why its class was not made
            answer["error"] = f"{type(error).__name__}: {error}".splitlines()[0][:300]
        answers.append(answer)
    print(json.dumps(answers))


if __name__ == "__main__":
    main()
