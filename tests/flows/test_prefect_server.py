"""A command's temporary Prefect server: spawned early, found by Prefect's clients, never imported, stopped.

The CLI spawns the server right after parsing (``flows.prefect_server.spawn_ephemeral_server``), so it boots
while the command imports its flow; the command process points ``PREFECT_API_URL`` at it and never imports the
server application itself. Here a real flow runs against it in a subprocess that is a user's shell (no
``PREFECT_*`` of the test session), and the server is gone once the process exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from storage import layout

SCRIPT = r'''
import os, sys
from flows.prefect_server import bind_ephemeral_server, spawn_ephemeral_server
spawn_ephemeral_server()
url = os.environ["PREFECT_API_URL"]
from prefect import flow  # imported after the spawn: Prefect's settings read the URL
@flow
def ping(x: int) -> int:
    return x + 1
assert bind_ephemeral_server() == url
assert ping(1) == 2
from prefect.client.orchestration import get_client
with get_client(sync_client=True) as c:
    runs = c.read_flow_runs()
print("URL", url, "RUNS", len(runs), "SERVER_IMPORTED", "prefect.server.api.server" in sys.modules, flush=True)
'''


def test_spawned_server_serves_the_flow_and_dies_with_the_command(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_LOGGING_LEVEL="CRITICAL")
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=layout.REPO_ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        servers = []
        while proc.poll() is None and not servers:  # the uvicorn child, to check it is gone afterwards
            servers = [c for c in psutil.Process(proc.pid).children() if "uvicorn" in " ".join(c.cmdline())]
            time.sleep(0.05)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    line = next(ln for ln in out.splitlines() if ln.startswith("URL "))
    _, url, _, runs, _, imported = line.split()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/api")
    assert int(runs) == 1 and imported == "False"  # the flow ran on it; the command never imported the app
    assert servers, "no uvicorn child was seen"
    _, alive = psutil.wait_procs(servers, timeout=10)
    assert not alive, "the temporary server outlived its command"
