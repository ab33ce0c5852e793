"""The simulator's timing is its own: no module of kvright_dev.sim uses capacity's model of time.

Static: every module's AST is read, nothing is imported or run. ``capacity`` stays allowed for data
(architecture facts, the GPU catalog, vLLM's memory accounting); its serving model, roofline, planner
and calibration are not. The checker itself is tested on snippets that break the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parents[2] / "kvright_dev" / "sim"
TIMING_MODULES = {"capacity.serving", "capacity.roofline", "capacity.planner"}
TIMING_NAMES = {
    "ServingModel",
    "ServingPoint",
    "Curve",
    "Shape",
    "Calibration",
    "UNCALIBRATED",
    "learn",
    "StepModel",
    "DecodeStep",
    "decode_step",
    "Efficiency",
    "DEFAULT_EFFICIENCY",
    "plan",
    "serving",
    "roofline",
    "planner",
    "largest_within",
    "percentile_z",
}


def timing_uses(source: str) -> list[str]:
    """Every use of capacity's timing in ``source``: imports of its modules or names, ``capacity.X``."""
    found = []
    aliases = {"capacity"}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in TIMING_MODULES:
                    found.append(f"import {alias.name}")
                if alias.name == "capacity" and alias.asname:
                    aliases.add(alias.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in TIMING_MODULES:
                found.append(f"from {node.module} import ...")
            elif node.module == "capacity":
                found += [f"from capacity import {a.name}" for a in node.names if a.name in TIMING_NAMES]
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr in TIMING_NAMES
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("import capacity\ncapacity.ServingModel(a, g, c).step_seconds(1, 2)", ["capacity.ServingModel"]),
        ("import capacity as c\nc.decode_step(a, g)", ["c.decode_step"]),
        ("from capacity import Curve, gpu_spec", ["from capacity import Curve"]),
        ("from capacity.roofline import StepModel", ["from capacity.roofline import ..."]),
        ("import capacity.serving", ["import capacity.serving"]),
        ("import capacity\ncapacity.weight_bytes_per_gpu(a, 1)\ncapacity.gpu_spec('h100')", []),
    ],
    ids=[
        "serving-model",
        "aliased-roofline",
        "from-import",
        "roofline-module",
        "serving-module",
        "facts-only",
    ],
)
def test_the_checker_finds_timing_uses(snippet: str, expected: list[str]) -> None:
    assert timing_uses(snippet) == expected


def test_no_sim_module_uses_capacitys_timing() -> None:
    modules = sorted(SIM.glob("*.py"))
    assert {p.name for p in modules} >= {"engine.py", "physics.py", "server.py", "workload.py"}
    uses = {p.name: timing_uses(p.read_text()) for p in modules}
    assert {name: u for name, u in uses.items() if u} == {}
