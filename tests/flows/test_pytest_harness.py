"""A pytest stopped by SIGTERM (CI's stop, a timeout) or SIGKILL does not leave its Prefect test server behind.

The server of ``prefect_harness`` is started with the parent-death signal (``flows.prefect_server``), so the
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
