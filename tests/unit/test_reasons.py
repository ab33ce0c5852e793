"""Every condition and event reason is declared once, in kvright.reasons.

Reads the product package's source (AST): no module outside kvright/reasons.py passes a string literal
as a reason, constructs a reason-carrying error from one, or binds a module-level ``REASON_*`` name; and
every reason the rules can emit is a declared one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kvright.reasons import Reason

PACKAGE = Path(__file__).resolve().parents[2] / "kvright"
MODULES = sorted(p for p in PACKAGE.glob("*.py") if p.name != "reasons.py")
REASON_ERRORS = {"InventoryError", "ResolveError", "PrometheusError"}
DECLARED = {v for k, v in vars(Reason).items() if k.isupper()}


def _literal_reasons(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if (
                    kw.arg == "reason"
                    and isinstance(kw.value, ast.Constant)
                    and isinstance(kw.value.value, str)
                ):
                    found.append(f"line {node.lineno}: reason={kw.value.value!r}")
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in REASON_ERRORS and node.args and isinstance(node.args[0], ast.Constant):
                found.append(f"line {node.lineno}: {name}({node.args[0].value!r}, ...)")
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.startswith("REASON"):
                    found.append(f"line {node.lineno}: {target.id} = {node.value.value!r}")
    return found


@pytest.mark.parametrize("module", MODULES, ids=[p.stem for p in MODULES])
def test_no_module_spells_a_reason_of_its_own(module: Path) -> None:
    assert _literal_reasons(ast.parse(module.read_text(encoding="utf-8"))) == []


def test_reasons_are_unique_camel_case() -> None:
    values = [v for k, v in vars(Reason).items() if k.isupper()]
    assert len(values) == len(set(values))
    assert all(v[0].isupper() and v.isalnum() for v in values)


def test_every_reason_a_rule_can_emit_is_declared() -> None:
    """The control law's rules name their reasons through Reason.X attributes only."""
    source = (PACKAGE / "control.py").read_text(encoding="utf-8")
    used = {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Reason"
    }
    assert used and used <= {k for k in vars(Reason) if k.isupper()}
    assert {getattr(Reason, name) for name in used} <= DECLARED
