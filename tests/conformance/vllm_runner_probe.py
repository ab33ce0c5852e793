"""Ask real vLLM which runner ``vllm serve`` picks for a checkpoint: text generation or pooling.

Runs in the vLLM venv's python. Reads a JSON list ``[{"id": str, "config": {...}}]`` from stdin (a case may
add ``"files": {name: text}`` to write beside its config.json: a sentence-transformers ``modules.json``),
resolves each folder's model config as the engine does (``EngineArgs(...).create_model_config()``, with
``--runner auto``: ``ModelConfig._get_default_runner_type``) and writes one JSON list to stdout, one answer
per case: ``{"id", "runner": "generate" | "pooling" | "draft" or null, "error": one line or null}``.
No weights, tokenizer, model class or engine.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from typing import Any


def runner(config: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    from vllm.engine.arg_utils import EngineArgs

    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        for name, text in files.items():
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
        try:
            model_config = EngineArgs(model=folder, skip_tokenizer_init=True).create_model_config()
        except Exception as error:  # the engine refuses the file: say so, as it would
            return {"runner": None, "error": f"{type(error).__name__}: {error}".splitlines()[0][:300]}
        return {"runner": model_config.runner_type, "error": None}


def main() -> None:
    cases = json.load(sys.stdin)
    answers = []
    with contextlib.redirect_stdout(sys.stderr):  # vLLM's logs stay off the answer
        for case in cases:
            answers.append({"id": case["id"], **runner(case["config"], case.get("files", {}))})
    json.dump(answers, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
