"""A test session stopped with SIGTERM tears its fixtures down (tests/conftest.py), so the servers it started
in process groups of their own (control planes, Prometheus, vLLM) do not outlive it; and stopping a process
group stops all of it, not only its leader."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kvright_dev.procs import dev_environ, stop_processes, wait_until

SESSION = '''
import os
import subprocess
import time
from pathlib import Path

import pytest


@pytest.fixture
def server():
    # A stand-in for a launched server: its own session, as LoopbackServer starts them.
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    Path(os.environ["CHILD_PID_FILE"]).write_text(str(child.pid))
    yield child
    Path(os.environ["TEARDOWN_FILE"]).write_text("ran")
    child.terminate()
    child.wait(10)


def test_runs_until_stopped(server):
    time.sleep(120)
'''


def _alive(pid: int) -> bool:
    """True while ``pid`` is a process that has not exited (a zombie has exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_sigterm_ends_the_session_through_fixture_teardown(tmp_path: Path) -> None:
    (tmp_path / "test_session.py").write_text(SESSION)
    pid_file, teardown_file = tmp_path / "child.pid", tmp_path / "teardown"
    env = dev_environ({"CHILD_PID_FILE": str(pid_file), "TEARDOWN_FILE": str(teardown_file)})
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "--rootdir", str(tmp_path), str(tmp_path / "test_session.py")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    child = 0
    try:
        child = wait_until(lambda: pid_file.exists() and int(pid_file.read_text() or 0), 60,
                           what="the session's fixture to start its child", interval=0.05)
        session.send_signal(signal.SIGTERM)
        out, _ = session.communicate(timeout=60)
    finally:
        if session.poll() is None:
            session.kill()
            session.wait(10)
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)
    text = out.decode(errors="replace")
    assert session.returncode == 2, text  # pytest's "interrupted": a failure, not a pass
    assert "KeyboardInterrupt: signal SIGTERM" in text, text
    assert teardown_file.read_text() == "ran", text
    assert not _alive(child), f"the fixture's child {child} outlived the session"



# A leader that exits on SIGTERM and leaves a child that ignores it, as a vLLM API server leaves its engine
# core and worker when the leader goes first.
LEADER = """
import signal, subprocess, sys, time
IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
    "time.sleep(300)"
)
child = subprocess.Popen([sys.executable, "-c", IGNORES_TERM], stdout=subprocess.PIPE)
child.stdout.readline()
print(child.pid, flush=True)
time.sleep(300)
"""


def test_stopping_a_group_stops_what_its_leader_leaves_behind() -> None:
    leader = subprocess.Popen([sys.executable, "-c", LEADER], stdout=subprocess.PIPE, start_new_session=True)
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    try:
        assert _alive(child)
        stop_processes([leader], timeout=2, group=True)
        assert leader.poll() is not None
        assert wait_until(lambda: not _alive(child), 10, what="the left child to die", interval=0.05)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
