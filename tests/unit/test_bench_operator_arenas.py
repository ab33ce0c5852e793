"""kvright.operator.cap_malloc_arenas, the allocator setting bench-operator's soak motivated: it defers to a
MALLOC_ARENA_MAX the environment sets, and sets the cap through glibc's mallopt otherwise. The memory
effect itself is measured by the soak (``make bench-operator``), not here.
"""

from __future__ import annotations

import ctypes

import pytest

from kvright import operator


def test_an_environment_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert operator.cap_malloc_arenas() is False


def test_sets_the_cap_through_mallopt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    calls: list[tuple[int, int]] = []

    class FakeLibc:
        def mallopt(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeLibc())
    assert operator.cap_malloc_arenas() is True
    assert calls == [(-8, 2)]  # M_ARENA_MAX, two arenas


def test_without_glibc_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)

    def missing(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert operator.cap_malloc_arenas() is False
