"""Read a class attribute of vLLM's model classes from vLLM's own source, without importing the model.

Runs in the vLLM venv's python. Reads a JSON object from stdin, ``{"classes": [str, ...], "attribute":
str}`` (architecture names as a checkpoint's ``architectures`` lists them), and writes one JSON object to
stdout: ``{class: {"module": str, "value": literal or null, "defined_in": str or null}}``.

Some model modules cannot be imported in the CPU venv (GLM-V's imports torchvision, which the venv does
not have), yet what kvright relies on is a plain class attribute (``supports_encoder_tp_data = True``).
The class is found through vLLM's registry (``_VLLM_MODELS``: name -> module, class) and the attribute by
parsing the module and walking the class's bases defined in that module (a subclass inherits it), as
Python's attribute lookup would; a value that is not a literal is reported as null.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from typing import Any


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _targets(stmt: ast.stmt) -> list[str]:
    """The names a class-level assignment binds (``x = ...``, ``x: T = ...``)."""
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def _own(node: ast.ClassDef, attribute: str) -> tuple[bool, Any]:
    for stmt in node.body:
        if attribute not in _targets(stmt):
            continue
        value = getattr(stmt, "value", None)
        try:
            return True, ast.literal_eval(value) if value is not None else None
        except ValueError:
            return True, None
    return False, None


def lookup(name: str, attribute: str) -> dict[str, Any]:
    from vllm.model_executor.models.registry import _VLLM_MODELS

    module_name, class_name = _VLLM_MODELS[name]
    spec = importlib.util.find_spec(f"vllm.model_executor.models.{module_name}")
    assert spec is not None and spec.origin is not None, module_name
    with open(spec.origin, encoding="utf-8") as f:
        classes = _classes(ast.parse(f.read()))
    todo, seen = [class_name], set()
    while todo:  # depth-first through the bases in this module, in their order (single inheritance here)
        current = todo.pop(0)
        if current in seen or current not in classes:
            continue
        seen.add(current)
        found, value = _own(classes[current], attribute)
        if found:
            return {"module": module_name, "value": value, "defined_in": current}
        todo[:0] = [base.id for base in classes[current].bases if isinstance(base, ast.Name)]
    return {"module": module_name, "value": None, "defined_in": None}


def main() -> None:
    request = json.load(sys.stdin)
    answer = {name: lookup(name, request["attribute"]) for name in request["classes"]}
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
