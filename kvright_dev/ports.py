"""Loopback ports for the servers that tests, demos, benches and ``deploy/cluster.sh`` start: the one place
that picks a free port or asks whether one is.

Ports come from below the kernel's ephemeral range (``net.ipv4.ip_local_port_range``). A port the kernel
hands out (bind to port 0) is what it also gives every outgoing connection meanwhile (kubectl, kwok, the
controllers, a test's clients, the conformance lane beside this one), so a server that binds its port
seconds after the port was chosen can find it taken; one CI run lost the LWS manager's metrics port that
way ("bind: address already in use"). Where the range leaves fewer than ``MIN_POOL`` ports below it, the
kernel's own choice is the fallback.

Standard library only: ``deploy/cluster.sh`` runs it with the system Python, as
``python3 kvright_dev/ports.py free N [TAKEN...]``, ``... in-use PORT`` and ``... bindable PORT``.
"""

from __future__ import annotations

import random
import socket
import sys
from collections.abc import Iterable, Sequence

LOOPBACK = "127.0.0.1"
LOWEST = 16384
"""The lowest port handed out: above the well-known and most registered service ports."""
MIN_POOL = 4096
"""Fewer ports than this between LOWEST and the ephemeral range: use the kernel's choice instead."""
TRIES = 4096
"""How many candidates from the pool are tried before falling back."""
RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768, Linux's default, where it cannot be read)."""
    try:
        with open(RANGE_FILE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port: int, *, reuse: bool = False) -> bool:
    """No socket holds ``port`` on loopback. With ``reuse`` (SO_REUSEADDR, as Go servers bind), the closed
    connections of a server just stopped (TIME_WAIT) do not count, so it may bind the port again."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def _kernel_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def free_ports(n: int, taken: Iterable[int] = ()) -> list[int]:
    """``n`` distinct loopback ports that no socket holds and that are not in ``taken``."""
    if n < 0:
        raise ValueError(f"asked for {n} ports; expected 0 or more")
    avoid = set(taken)
    picked: list[int] = []
    low = ephemeral_low()
    if low - LOWEST >= MIN_POOL:
        pool = random.sample(range(LOWEST, low), min(TRIES, low - LOWEST))
        for port in pool:
            if len(picked) == n:
                break
            if port not in avoid and bindable(port):
                picked.append(port)
    while len(picked) < n:
        port = _kernel_port()
        if port not in avoid and port not in picked:
            picked.append(port)
    return picked


def free_port() -> int:
    """One free loopback port (see :func:`free_ports`)."""
    return free_ports(1)[0]


USAGE = "usage: ports.py free N [TAKEN...] | in-use PORT | bindable PORT"


def main(argv: Sequence[str]) -> int:
    """``free`` prints the ports one per line; ``in-use`` and ``bindable`` answer with the exit status."""
    command, args = (argv[0], argv[1:]) if argv else ("", [])
    try:
        numbers = [int(a) for a in args if a]
        if command == "free" and numbers:
            print("\n".join(str(p) for p in free_ports(numbers[0], numbers[1:])))
            return 0
        if command == "in-use" and len(numbers) == 1:
            return 0 if not bindable(numbers[0]) else 1
        if command == "bindable" and len(numbers) == 1:
            return 0 if bindable(numbers[0], reuse=True) else 1
    except ValueError as exc:
        print(f"ports.py: {exc}", file=sys.stderr)
        return 2
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
