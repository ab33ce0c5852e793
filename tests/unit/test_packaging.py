"""What the wheel ships: pyproject's package discovery, run the way setuptools runs it when it builds the
wheel (and the chart's image, which pip-installs the wheel), finds ``capacity`` and ``kvright`` with all
their subpackages and nothing of ``kvright_dev`` (simulator, load generator, pod runner, demos, test
helpers). Nothing is built: the rule that decides the wheel's contents is checked instead.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[2]


def discovered() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    find = config["tool"]["setuptools"]["packages"]["find"]
    return set(find_packages(where=str(ROOT), include=find["include"], exclude=find.get("exclude", ())))


def packages_under(top: str) -> set[str]:
    return {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def test_the_wheel_ships_every_product_package() -> None:
    assert packages_under("capacity") | packages_under("kvright") <= discovered()


def test_the_wheel_ships_no_development_tools() -> None:
    found = discovered()
    assert packages_under("kvright_dev"), "kvright_dev moved? update this test"
    assert not {p for p in found if p.split(".")[0] not in ("capacity", "kvright")}, found
