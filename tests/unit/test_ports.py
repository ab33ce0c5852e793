"""kvright_dev/ports.py: the one place tests, demos, benches and deploy/cluster.sh pick loopback ports.

Real sockets on 127.0.0.1; the kernel's range is read from /proc and, for the fallback, replaced."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from kvright_dev import ports


@pytest.fixture
def listening() -> Iterator[int]:
    """A port a socket listens on for the test's length."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((ports.LOOPBACK, ports.free_port()))
        s.listen()
        yield int(s.getsockname()[1])


def test_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    low = ports.ephemeral_low()
    picked = ports.free_ports(8)
    assert len(set(picked)) == 8
    assert all(ports.bindable(p) for p in picked)
    if low - ports.LOWEST >= ports.MIN_POOL:
        assert all(ports.LOWEST <= p < low for p in picked), (picked, low)


def test_taken_ports_are_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # A pool of exactly MIN_POOL ports, all but 3 of them taken: the 3 left are the answer.
    monkeypatch.setattr(ports, "ephemeral_low", lambda: ports.LOWEST + ports.MIN_POOL)
    keep = {ports.LOWEST + 5, ports.LOWEST + 77, ports.LOWEST + 4000}
    taken = [p for p in range(ports.LOWEST, ports.LOWEST + ports.MIN_POOL) if p not in keep]
    free = {p for p in keep if ports.bindable(p)}
    picked = ports.free_ports(len(free), taken)
    assert set(picked) == free


def test_a_held_port_is_in_use_and_not_bindable(listening: int) -> None:
    assert not ports.bindable(listening)
    assert not ports.bindable(listening, reuse=True)
    assert listening not in ports.free_ports(50)


def test_without_room_below_the_ephemeral_range_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "ephemeral_low", lambda: ports.LOWEST + ports.MIN_POOL - 1)
    picked = ports.free_ports(3)
    assert len(set(picked)) == 3 and all(ports.bindable(p) for p in picked)


def test_an_unreadable_range_is_linuxs_default(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(ports, "RANGE_FILE", str(tmp_path / "missing"))
    assert ports.ephemeral_low() == 32768
    (tmp_path / "range").write_text("40000\t60999\n")
    monkeypatch.setattr(ports, "RANGE_FILE", str(tmp_path / "range"))
    assert ports.ephemeral_low() == 40000


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The way deploy/cluster.sh runs it: the file, with a Python that has no project on its path."""
    return subprocess.run(
        [sys.executable, "-I", ports.__file__, *args], capture_output=True, text=True, timeout=30, check=False
    )


def test_the_command_line_cluster_sh_uses(listening: int) -> None:
    free = _cli("free", "3", str(listening))
    assert free.returncode == 0, free.stderr
    picked = [int(line) for line in free.stdout.split()]
    assert len(set(picked)) == 3 and listening not in picked
    assert _cli("in-use", str(listening)).returncode == 0
    assert _cli("bindable", str(listening)).returncode == 1
    assert _cli("in-use", str(picked[0])).returncode == 1
    assert _cli("bindable", str(picked[0])).returncode == 0


@pytest.mark.parametrize("args", [(), ("free",), ("free", "x"), ("in-use",), ("frobnicate", "1")])
def test_bad_command_lines_exit_2_with_one_line(args: tuple[str, ...]) -> None:
    result = _cli(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(("usage:", "ports.py:"))
