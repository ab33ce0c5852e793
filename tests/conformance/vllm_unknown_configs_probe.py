"""The config.json a checkpoint of each text-generation architecture vLLM registers holds, as its config class
writes it.

Runs in the vLLM venv's python. Reads ``{"skip": [class names], "fields": {...}, "plain": {...}}`` from
stdin. For every class in vLLM 0.32's text-generation registry (and every ``...ForCausalLM`` it serves through
its Transformers backend) that is not skipped, finds the config class a
checkpoint of it is read with, in the order vLLM's own loading would meet one:

1. transformers' class for the model type transformers files that class under (its ``MODEL_*_MAPPING_NAMES``:
   GPT-J's ``gptj``, where vLLM's module is ``gpt_j``), else for the name of vLLM's module;
2. vLLM's own config class for that model type (``transformers_utils.config._CONFIG_REGISTRY``: ChatGLM,
   Step 3, DeepSeek-V4, ...; a plugin module ``vllm.models.X`` is model type ``X``);
3. none: the checkpoint's own code (``auto_map``) would be. Then the config is ``fields`` and ``plain`` as
   they are, ``"source": "plain"``: what a file that states only the standard fields says, which vLLM's
   class reads through a plain ``PretrainedConfig`` (``vllm_weights_probe.py`` registers one for a case
   marked ``plain_config``) and capacity reads as it would the real file's standard fields.

For 1 and 2 the config holds those of ``fields`` the class has (a family's own at the class's defaults) and
what ``to_dict`` writes. Writes one JSON list to stdout:

    [{"id": class name, "model_type": str, "source": "transformers" | "vllm" | "plain",
      "config": {...} or null, "error": one line or null}, ...]

No weights, no engine; ``config`` is null where the config class refuses the fields.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any


def _transformers_types() -> dict[str, str]:
    """Model class name -> the model type transformers files it under (first mapping that names it)."""
    from transformers.models.auto import modeling_auto

    types: dict[str, str] = {}
    for name in sorted(dir(modeling_auto)):
        mapping = getattr(modeling_auto, name)
        if not (name.startswith("MODEL_") and name.endswith("_MAPPING_NAMES") and isinstance(mapping, dict)):
            continue
        for model_type, classes in mapping.items():
            for cls in classes if isinstance(classes, (list, tuple)) else [classes]:
                types.setdefault(cls, model_type)
    return types


def _config(architecture: str, module: str, request: dict[str, Any], types: dict[str, str]) -> dict[str, Any]:
    from transformers import AutoConfig
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    fields: dict[str, Any] = request["fields"]
    own = module.rsplit(".", 1)[-1] if module.startswith("vllm.models.") else module
    for model_type in dict.fromkeys([types.get(architecture), own]):
        if model_type is None:
            continue
        try:
            default = AutoConfig.for_model(model_type)
        except ValueError:  # transformers has no class for this type
            continue
        # Only the fields the class has (by its own name or its attribute_map's): one it does not know
        # would be kept as an extra attribute, which no real file of the family holds.
        known = {k: v for k, v in fields.items() if hasattr(default, k)}
        config = AutoConfig.for_model(model_type, **known).to_dict()
        return {"model_type": model_type, "source": "transformers", "config": config}
    if own in _CONFIG_REGISTRY:
        cls = _CONFIG_REGISTRY[own]
        default = cls()
        known = {k: v for k, v in fields.items() if hasattr(default, k)}
        return {"model_type": own, "source": "vllm", "config": cls(**known).to_dict()}
    return {"model_type": own, "source": "plain", "config": fields | request["plain"]}


def main() -> None:
    request = json.load(sys.stdin)
    skip = set(request["skip"])
    with contextlib.redirect_stdout(sys.stderr):
        from vllm.model_executor.models.registry import (
            _TEXT_GENERATION_MODELS,
            _TRANSFORMERS_SUPPORTED_MODELS,
        )

        types = _transformers_types()
    # And the decoders vLLM serves through its Transformers backend (GPT-NeoX, Phi, OLMo, ...): their
    # config is transformers' by the type transformers files the class under.
    served = dict(_TEXT_GENERATION_MODELS)
    for architecture, (module, backend) in _TRANSFORMERS_SUPPORTED_MODELS.items():
        if architecture.endswith("ForCausalLM") and backend.endswith("ForCausalLM"):
            served.setdefault(architecture, (types.get(architecture, module), backend))
    answers = []
    for architecture, (module, _) in sorted(served.items()):
        if architecture in skip:
            continue
        answer: dict[str, Any] = {"id": architecture, "model_type": module, "source": None, "config": None}
        answer["error"] = None
        try:
            with contextlib.redirect_stdout(sys.stderr):
                found = _config(architecture, module, request, types)
            config = {k: v for k, v in found.pop("config").items() if not k.startswith("_")}
            answer |= found
            answer["config"] = config | {"architectures": [architecture], "model_type": found["model_type"]}
        except Exception as error:  # each answer says why its class was not made
            answer["error"] = f"{type(error).__name__}: {error}".splitlines()[0][:300]
        answers.append(answer)
    print(json.dumps(answers))


if __name__ == "__main__":
    main()
