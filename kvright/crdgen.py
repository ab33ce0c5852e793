"""Writes the LLMDeployment CRD from the models in :mod:`kvright.api`: ``make crd``.

``python -m kvright.crdgen [PATH ...]`` writes the CRD to each PATH (``make crd`` names
``crds/llmdeployment.yaml`` and the chart's copy), or to stdout when none is named. The output is a
function of the models alone, so a test compares the files on disk with :func:`render` byte for byte.

The ``openAPIV3Schema`` is pydantic's JSON Schema of :class:`kvright.api.LLMDeployment`, made structural
the way the API server wants it: references inlined, ``X | None`` as an optional X, titles dropped, an open
``dict`` as ``x-kubernetes-preserve-unknown-fields``, ``None`` left out of defaults. Two kinds of CEL rule
follow from a field's type and are added here, with a message naming the field and what is accepted: an
``Auto``-or-integer field (an int-or-string in the CRD, which cannot bound the integer by itself) and an
integer enum (``slo.percentile``). Cross-field rules come from each model's ``rules``. The rest of the
CRD (names, the version, subresources, printer columns) is stated below.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from kvright import api

__all__ = ["crd", "main", "openapi_schema", "render"]

HEADER: Final = """\
# LLMDeployment: what to serve and the latency it must meet; kvright works out how to serve it.
# Generated from the models in kvright/api.py by `make crd` (python -m kvright.crdgen); do not edit.
# The Helm chart, the tests and `make demo` all read this file. Field reference: docs/operator.md.
# The scale subresource: `kubectl scale` and an HPA write spec.replicas.count; kvright then plans each
# replica (TP, max seqs, KV dtype) and leaves the count alone. See docs/operator.md "Replicas".
"""

_READY = '.status.conditions[?(@.type=="Ready")]'


def _column(name: str, kind: str, path: str, priority: int | None = None) -> dict[str, Any]:
    column: dict[str, Any] = {"name": name, "type": kind, "jsonPath": path}
    if priority is not None:
        column["priority"] = priority
    return column


PRINTER_COLUMNS: Final = (
    _column("Model", "string", ".spec.model.name", priority=0),
    _column("GPU", "string", ".status.plan.gpuProduct"),
    _column("TP", "integer", ".status.plan.tensorParallelSize"),
    _column("Layout", "string", ".status.plan.layout"),
    _column("Nodes", "integer", ".status.plan.nodesPerReplica", priority=1),
    _column("MaxSeqs", "integer", ".status.plan.maxNumSeqs"),
    _column("KV", "string", ".status.plan.kvCacheDtype"),
    _column("Replicas", "integer", ".status.plan.replicas"),
    _column("TPOT-Target-ms", "integer", ".spec.slo.tpotMilliseconds"),
    _column("TPOT-Predicted-ms", "number", ".status.prediction.tpotMilliseconds", priority=1),
    _column("TPOT-Observed-ms", "number", ".status.observed.tpotMilliseconds"),
    _column("Ready", "string", f"{_READY}.status"),
    _column("Reason", "string", f"{_READY}.reason", priority=1),
    _column("Routing", "string", ".status.routing.mode", priority=1),
    _column("Age", "date", ".metadata.creationTimestamp"),
)

# The order keys are written in: what a field is, then its bounds, then what it holds, then CEL.
_KEY_ORDER: Final = (
    "type",
    api.INT_OR_STRING,
    "format",
    "description",
    "required",
    "enum",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "items",
    "additionalProperties",
    "properties",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-preserve-unknown-fields",
    api.VALIDATIONS,
)
_COPIED: Final = frozenset(_KEY_ORDER) - {"description", "default", "items", "properties", api.VALIDATIONS}


def _without_nulls(value: Any) -> Any:
    """A default as the API server should apply it: ``None`` means "left out"."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _is_auto(node: Mapping[str, Any]) -> bool:
    """An ``Auto``-or-integer field (kvright.api.AUTO): an int-or-string that is a union."""
    return bool(node.get(api.INT_OR_STRING)) and "anyOf" in node


def _generated_rules(node: Mapping[str, Any], field: str) -> list[dict[str, str]]:
    """The CEL rules a field's type implies; ``field`` is its path below spec (``tuning.maxNumSeqs``)."""
    if _is_auto(node):
        bounded = next(m for m in node["anyOf"] if m.get("type") == "integer")
        lo, hi = bounded["minimum"], bounded["maximum"]
        return [
            {
                "rule": f'type(self) == string ? self == "Auto" : (self >= {lo} && self <= {hi})',
                "message": f"{field} must be {api.accepted(node)}",
            }
        ]
    if node.get("type") == "integer" and "enum" in node:
        values = ", ".join(str(v) for v in node["enum"])
        return [{"rule": f"self in [{values}]", "message": f"{field} must be one of {values}"}]
    return []


def _structural(node: Mapping[str, Any], defs: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """One node of pydantic's JSON Schema as a structural OpenAPI v3 schema."""
    node = api.resolve_schema(node, defs)
    out: dict[str, Any] = {k: node[k] for k in _COPIED if k in node}
    if node.get(api.INT_OR_STRING):
        out.pop("type", None)
    elif "const" in node:
        out["enum"] = [node["const"]]
    if "description" in node:
        out["description"] = " ".join(node["description"].split())
    if node.get("default") is not None:
        out["default"] = _without_nulls(node["default"])
    elif _is_auto(node) and "default" in node:
        out["default"] = "Auto"  # None is how Python spells Auto (kvright.api._AutoOrInt)
    if node.get("type") == "integer" and "enum" in node:
        del out["enum"]  # an integer enum is a CEL rule, whose message names the values (below)
    out.pop("additionalProperties", None)  # only a map's item schema (below) is structural
    if node.get("additionalProperties") is True:
        out["x-kubernetes-preserve-unknown-fields"] = True
    elif isinstance(node.get("additionalProperties"), Mapping):  # a map (dict[str, list[str]])
        out["additionalProperties"] = _structural(node["additionalProperties"], defs, path)
    if "items" in node:
        out["items"] = _structural(node["items"], defs, path)
    if "properties" in node:
        out["properties"] = {
            name: _structural(child, defs, (*path, name)) for name, child in node["properties"].items()
        }
    rules = [*node.get(api.VALIDATIONS, ()), *_generated_rules(node, ".".join(path[1:]))]
    if rules:
        out[api.VALIDATIONS] = [{"rule": r["rule"], "message": r["message"]} for r in rules]
    return {k: out[k] for k in _KEY_ORDER if k in out}


def openapi_schema() -> dict[str, Any]:
    """The CRD's ``openAPIV3Schema``, from :class:`kvright.api.LLMDeployment`."""
    schema = api.LLMDeployment.model_json_schema(by_alias=True)
    return _structural(schema, schema.get("$defs", {}), ())


def crd() -> dict[str, Any]:
    """The whole CustomResourceDefinition."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{api.PLURAL}.{api.GROUP}",
            "labels": {"app.kubernetes.io/name": "kvright", "app.kubernetes.io/part-of": "kvright"},
        },
        "spec": {
            "group": api.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": api.KIND,
                "listKind": f"{api.KIND}List",
                "plural": api.PLURAL,
                "singular": api.KIND.lower(),
                "shortNames": ["llmd"],
                "categories": ["kvright"],
            },
            "versions": [
                {
                    "name": api.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas.count",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": [dict(c) for c in PRINTER_COLUMNS],
                    "schema": {"openAPIV3Schema": openapi_schema()},
                }
            ],
        },
    }


def render() -> str:
    """The CRD file's text: the header comment, then the YAML."""
    return HEADER + yaml.safe_dump(crd(), sort_keys=False, width=4096, allow_unicode=True)


def main(argv: Sequence[str] | None = None) -> int:
    paths = list(sys.argv[1:] if argv is None else argv)
    text = render()
    if not paths:
        sys.stdout.write(text)
    for path in paths:
        Path(path).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
