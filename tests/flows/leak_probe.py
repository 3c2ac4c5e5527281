"""Run by ``test_pytest_harness.py`` in a pytest of its own (not collected here: no ``test_`` prefix).

Leaves a process that looks like a server this session started (this venv's python, ``uvicorn`` in its command
line, this session's ``LINKEDQA_TEST_SESSION``) whose parent is gone: the session guard in ``tests/conftest.py``
must kill it and fail the run, also when the test ran on a pytest-xdist worker.
"""

from __future__ import annotations

import os
import subprocess
import sys


def test_leaves_an_orphaned_server_behind() -> None:
    """The orphan's pid goes to ``$LEAK_PROBE_PID_FILE`` (when set), so that the test that runs this session can
    say what the guard saw of it."""
    spawn = ("import os, subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', "
             "'uvicorn-leak-probe'], start_new_session=True); f = os.environ.get('LEAK_PROBE_PID_FILE'); "
             "f and open(f, 'w').write(str(p.pid))")
    # the tag this test's process gives the probe (the session guard compares it with its own)
    print(f"test pid {os.getpid()} tag {os.environ.get('LINKEDQA_TEST_SESSION')}")
    subprocess.run([sys.executable, "-c", spawn], check=True)  # its parent exits at once: an orphan
    assert os.environ.get("LEAK_PROBE_PID_FILE") is None or os.path.getsize(os.environ["LEAK_PROBE_PID_FILE"])
