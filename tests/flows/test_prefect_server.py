"""A command's temporary Prefect server: spawned early, found by Prefect's clients, never imported, stopped.

The CLI spawns the server right after parsing (``flows.cli.prefect_server.spawn_ephemeral_server``), so it boots
while the command imports its flow; the command process points ``PREFECT_API_URL`` at it and never imports the
server application itself. Here a real flow runs against it in a subprocess that is a user's shell (no
``PREFECT_*`` of the test session), without heartbeats (no one is left to read them), and the server is gone
once the process exits. Against a server the user runs, the heartbeats stay.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from flows.cli.prefect_server import bind_ephemeral_server
from storage import layout
from tests.procs import cmdline, prefect_free_env

SCRIPT = r'''
import os, sys
from flows.cli.prefect_server import bind_ephemeral_server, spawn_ephemeral_server
spawn_ephemeral_server()
url = os.environ["PREFECT_API_URL"]
from prefect import flow  # imported after the spawn: Prefect's settings read the URL
from prefect.settings import get_current_settings
@flow
def ping(x: int) -> tuple[int, int | None]:
    return x + 1, get_current_settings().flows.heartbeat_frequency
assert bind_ephemeral_server() == url
n, beat = ping(1)
assert n == 2 and beat is None, beat  # the flow run sends no heartbeats to a server that dies with it
from prefect.client.orchestration import get_client
with get_client(sync_client=True) as c:
    runs = c.read_flow_runs()
print("URL", url, "RUNS", len(runs), "SERVER_IMPORTED", "prefect.server.api.server" in sys.modules, flush=True)
'''

USER_SERVER = r'''
from flows.cli.prefect_server import bind_ephemeral_server
from prefect import flow
from prefect.settings import get_current_settings
@flow
def beat() -> int | None:
    return get_current_settings().flows.heartbeat_frequency
assert bind_ephemeral_server() is None  # PREFECT_API_URL set: the user's server, nothing started
print("HEARTBEAT", beat(), flush=True)
'''


def test_spawned_server_serves_the_flow_and_dies_with_the_command(tmp_path: Path):
    env = prefect_free_env(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_LOGGING_LEVEL="CRITICAL")
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=layout.REPO_ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        servers = []
        while proc.poll() is None and not servers:  # the uvicorn child, to check it is gone afterwards
            servers = [c for c in psutil.Process(proc.pid).children() if "uvicorn" in cmdline(c)]
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


def test_flows_keep_their_heartbeats_against_a_server_the_user_runs(tmp_path: Path, prefect_api: str):
    env = prefect_free_env(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_API_URL=prefect_api,
                           PREFECT_LOGGING_LEVEL="CRITICAL")
    out = subprocess.run([sys.executable, "-c", USER_SERVER], cwd=layout.REPO_ROOT, env=env, text=True,
                         capture_output=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    beat = next(ln for ln in out.stdout.splitlines() if ln.startswith("HEARTBEAT ")).split()[1]
    assert beat.isdigit() and int(beat) > 0  # Prefect's default (180 s): that server can act on them


def test_a_process_that_imported_prefect_uses_the_server_its_settings_name(prefect_harness, monkeypatch):
    """No ``PREFECT_API_URL`` in the environment, but Prefect's settings name a server (here the session's
    harness; for a user, a profile or ``prefect.toml``): that server is used and nothing is started (before,
    Prefect's own temporary server was started beside it, unused, and heartbeats were dropped)."""
    from prefect.settings import PREFECT_API_URL

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    assert PREFECT_API_URL.value()
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    assert bind_ephemeral_server() is None
    started = [c for c in psutil.Process().children(recursive=True) if c.pid not in before]
    assert not [c for c in started if "uvicorn" in cmdline(c)]
