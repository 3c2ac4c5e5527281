"""`make serve PREFECT_PORT=<any port>`: the UI served on that port talks to the API on that same port (moving
only `--port` would leave /ui-settings answering http://127.0.0.1:4200/api, and the UI could not connect).

Runs the real target (own session, temporary LINKEDQA_HOME, so PREFECT_HOME and the server's SQLite database are
temporary too), then stops it the way a user does, with SIGINT to its process group (Ctrl-C), and checks that the
schedules were paused and the server it started is gone."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.flows.test_deployments import EXPECTED, ROOT, _tail
from tests.procs import free_port, prefect_free_env, stop_group

STAMP = ".venv/.linkedqa-installed"  # the Makefile's $(STAMP); `-o` keeps make serve from reinstalling the venv


def _get_json(url: str, body: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def _default_sigint() -> None:
    # a background job of a non-interactive shell inherits SIGINT ignored; Ctrl-C must reach `make serve` here
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(what: str, check, proc: subprocess.Popen, log: Path, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if got := check():
                return got
        except OSError:  # connection refused / reset while the server starts
            pass
        if proc.poll() is not None:
            pytest.fail(f"make serve exited with {proc.returncode} before {what}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {timeout_s:.0f}s:\n{_tail(log)}")
        time.sleep(0.5)


def _stop_server(pid: int | None, port: int) -> None:
    """Stop the `prefect server start` of this test if it is still running (it is in its own session, so stopping
    make's process group does not reach it); checks the command line first, in case the pid was reused."""
    if pid is None:
        return
    try:
        p = psutil.Process(pid)
        cmd = " ".join(p.cmdline())
        if "server" not in cmd or str(port) not in cmd:
            return
        p.terminate()
        try:
            p.wait(20)
        except psutil.TimeoutExpired:
            p.kill()
            p.wait(10)
    except psutil.NoSuchProcess:
        pass


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.slow
def test_make_serve_ui_talks_to_the_api_on_its_own_port(tmp_path: Path):
    make = shutil.which("make")
    assert make, "make not found on PATH"
    assert (ROOT / ".venv" / "bin" / "prefect").is_file(), "no .venv at the repo root: run `make venv` first"
    port = free_port()
    while port == 4200:  # the default would hide the bug
        port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "make-serve.log"
    env = {k: v for k, v in prefect_free_env(LINKEDQA_HOME=str(tmp_path / "warehouse")).items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # not a sub-make of a `make test`
    cmd = [make, "--no-print-directory", "-o", STAMP, "serve", f"PREFECT_PORT={port}"]
    proc = None
    server_pid = None
    try:
        with open(log, "wb") as fh:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=_default_sigint)
        # the target prints this once /api/health answers
        started = re.compile(rf"prefect server \(pid (\d+)\) at {re.escape(url)}, log (\S+)")
        m = _wait_for("healthy server", lambda: started.search(log.read_text(errors="replace")), proc, log, 90)
        server_pid = int(m.group(1))
        assert Path(m.group(2)).is_relative_to(tmp_path), m.group(2)  # PREFECT_HOME under the temporary home

        ui = _get_json(f"{url}/ui-settings")
        assert ui["api_url"] == f"{url}/api", ui
        settings = _get_json(f"{url}/api/admin/settings")
        assert settings["ui_url"] == url and settings["server"]["ui"]["api_url"] == f"{url}/api"
        with urllib.request.urlopen(f"{url}/", timeout=5) as r:
            assert r.status == 200 and b"<html" in r.read(4096).lower()

        # flows.cli.serve registered every deployment of prefect.yaml with this server, its links on the same port ...
        ready = f"trigger your deployments via the Prefect UI: {url}/deployments"
        _wait_for("served deployments", lambda: ready in log.read_text(errors="replace"), proc, log, 60)

        # ... and its runner polls them (status READY): only from then on does Ctrl-C pause the schedules (Prefect
        # prints the message above before the runner starts; a Ctrl-C in between just stops serving)
        def polled():
            deps = _get_json(f"{url}/api/deployments/filter", {})
            return {d["name"] for d in deps if d["status"] == "READY"} == set(EXPECTED) == {d["name"] for d in deps}
        _wait_for("deployments polled by the runner", polled, proc, log, 60)

        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: reaches make and flows.cli.serve, not the server's session
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"make serve still running 60 s after SIGINT:\n{_tail(log)}")
        out = log.read_text(errors="replace")
        assert "All deployments have been paused!" in out, _tail(log)
        assert f"prefect server (pid {server_pid}) stopped" in out, _tail(log)
        assert _gone(server_pid), f"prefect server {server_pid} still running after make serve exited"
    finally:
        stop_group(proc)
        _stop_server(server_pid, port)
