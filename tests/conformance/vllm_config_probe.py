"""Ask real vLLM how it reads a checkpoint's config.json: the text config its layers are built from.

Runs in the vLLM venv's python. Reads a JSON list ``[{"id": str, "config": {...}}]`` from stdin (a case
may add ``"files": {name: text}`` to write beside it, and ``"trust_remote_code": true``, as
``--trust-remote-code`` sets it), writes each config.json into a folder of its own, loads it as the engine
does (``get_config``, then
``get_hf_text_config``: transformers' config class for the model type, the language model's part of a
multimodal one), and writes one JSON list to stdout, one answer per case:

    {"id", "layer_types": [str] or null, "sliding_window": int or null, "num_hidden_layers": int,
     "error": one line or null}

No weights, tokenizer or engine: only the config classes, which derive ``layer_types`` and null or keep
``sliding_window`` by rules of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from typing import Any


def read(config: dict[str, Any], files: dict[str, str] | None = None, trust: bool = False) -> dict[str, Any]:
    from vllm.transformers_utils.config import get_config, get_hf_text_config

    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        for name, content in (files or {}).items():
            with open(os.path.join(folder, name), "w") as f:
                f.write(content)
        try:
            text = get_hf_text_config(get_config(folder, trust_remote_code=trust))
        except Exception as exc:  # the answer names the refusal; the test decides what it means
            return {
                "layer_types": None,
                "sliding_window": None,
                "num_hidden_layers": None,
                "sizes": None,
                "error": str(exc)[:300],
            }
    types = getattr(text, "layer_types", None)
    return {
        "layer_types": list(types) if types is not None else None,
        "sliding_window": getattr(text, "sliding_window", None),
        "num_hidden_layers": text.num_hidden_layers,
        # what the config class filled in where the file is silent counts as much as what it states
        "sizes": {name: _size(text, name) for name in SIZES},
        "error": None,
    }


#: The language model's sizes as its config class yields them.
SIZES = (
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
    "padded_vocab_size",
)


def _size(text: Any, name: str) -> Any:
    try:
        value = getattr(text, name, None)
    except Exception:  # transformers' per-layer attributes refuse a global read
        return None
    return value if isinstance(value, int | float) else None


if __name__ == "__main__":
    out = []
    for case in json.load(sys.stdin):
        with contextlib.redirect_stdout(sys.stderr):  # vLLM logs must not corrupt the JSON answer
            answer = read(case["config"], case.get("files"), bool(case.get("trust_remote_code", False)))
            out.append({"id": case["id"], **answer})
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
