"""A pytest stopped by SIGTERM (CI's stop, a timeout) or SIGKILL does not leave its Prefect test server behind.

The server of ``prefect_harness`` is started with the parent-death signal (``flows.cli.prefect_server``), so the
kernel stops it with pytest however pytest ends. Before, a SIGTERMed `make test` left uvicorn running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_pytest_takes_its_prefect_server_along(tmp_path: Path, sig):
    pid_file = tmp_path / "server.pid"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PROBE_PID_FILE=str(pid_file), LINKEDQA_HOME=str(tmp_path / "wh"))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=400",
                             str(ROOT / "tests" / "flows" / "harness_probe.py")], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    server = None
    try:
        deadline = time.monotonic() + 240
        while not pid_file.is_file() or not pid_file.read_text():
            assert proc.poll() is None, "the probe session ended before its server started"
            assert time.monotonic() < deadline, "the probe's Prefect server never started"
            time.sleep(0.2)
        server = psutil.Process(int(pid_file.read_text()))
        assert "uvicorn" in " ".join(server.cmdline())
        proc.send_signal(sig)  # pytest only, not its group
        proc.wait(timeout=30)
        gone, alive = psutil.wait_procs([server], timeout=10)
        assert not alive, f"Prefect test server outlived its {signal.Signals(sig).name}ed pytest"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if server is not None and server.is_running():
            server.kill()
        if proc.poll() is None:
            proc.wait(timeout=10)


def _probe(pid_file: Path) -> psutil.Process | None:
    """This test's own probe, by the pid its spawner wrote, while it runs; None once it is gone.

    Only this pid: another pytest on the machine (a second ``make test``) runs this test too, and matching every
    ``uvicorn-leak-probe`` command line would kill that session's probe before its guard looked.
    """
    if not pid_file.is_file() or not pid_file.read_text():
        return None
    try:
        p = psutil.Process(int(pid_file.read_text()))
        return p if "uvicorn-leak-probe" in " ".join(p.cmdline()) else None
    except psutil.Error:
        return None


def _describe(pid_file: Path) -> str:
    """What the session guard had to go on about the probe, for a failure message: its command line, parent and
    session tag (a probe the guard killed is gone)."""
    p = _probe(pid_file)
    if p is None:
        return "no probe running (the guard killed it, or it never started)"
    try:
        parent = psutil.Process(p.ppid())
        return (f"probe pid {p.pid} alive: cmdline={' '.join(p.cmdline())!r} ppid={parent.pid} "
                f"parent={' '.join(parent.cmdline())[:200]!r} tag={p.environ().get('LINKEDQA_TEST_SESSION')!r}")
    except psutil.Error as exc:
        return f"probe pid {p.pid}: {exc!r}"


def test_a_server_left_running_on_an_xdist_worker_fails_the_run(tmp_path: Path) -> None:
    """The session guard kills a server a test left behind and fails the run, under pytest-xdist too (a worker's
    own exit status is ignored by the controller: the worker hands its findings over)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    pid_file = tmp_path / "probe.pid"
    # the probe sleeps and never goes by itself: the guard's grace period for a leaked server would only add 30 s
    trace = tmp_path / "guard.log"
    env.update(LINKEDQA_HOME=str(tmp_path / "wh"), LINKEDQA_TEST_LEAK_GRACE_S="2", LEAK_PROBE_PID_FILE=str(pid_file),
               LINKEDQA_TEST_LEAK_TRACE=str(trace))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:cacheprovider",
                          "--timeout=120", str(ROOT / "tests" / "flows" / "leak_probe.py")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    try:
        guard = trace.read_text() if trace.is_file() else "no guard trace"
        seen = f"{_describe(pid_file)}\n{guard}\n{out.stdout[-3000:]}"
        assert out.returncode == 1, seen
        assert "1 passed" in out.stdout and "servers left running by the tests" in out.stdout, seen
        assert "uvicorn-leak-probe" in out.stdout
        assert _probe(pid_file) is None, "the guard did not kill the probe"
    finally:
        leftover = _probe(pid_file)
        if leftover is not None:
            leftover.kill()
