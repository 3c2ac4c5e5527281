"""SIGTERM and Ctrl-C (SIGINT) stop a real `linkedqa kb build` within 10 s, with the guarantees of SIGKILL.

The build is held in a worker thread that does not return (``stall:stage:2``: like a long LLM step or DuckDB
query, where Python's own signal handling alone would wait for the thread, > 120 s). The signal comes from outside,
to the process only, as Prefect workers, Kubernetes and systemd send it. Then: exit code 128+signal within
10 s, no child process left (Prefect's temporary server included, when the command started one), nothing
published, and the re-run of the same command finishes the build with tables equal to an uninterrupted one.

SIGKILL runs no handler at all; the command's temporary Prefect server must still die with it.
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
from faultkit import INJECT, kb_args, leftovers, read_json, table_digest

from storage import layout
from storage.catalog import done_kb_versions
from storage.schemas import KB_TABLES
from tests.procs import cmdline


def _start(env: dict, log: Path, point: str, args: list[str]) -> subprocess.Popen:
    with open(log, "wb") as fh:
        return subprocess.Popen([sys.executable, str(INJECT), point, *args], cwd=layout.REPO_ROOT, env=env,
                                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _own_server_env(cli, tmp_path: Path) -> dict:
    """The fault CLI's environment as a user's shell has it: no PREFECT_API_URL, so the command starts its own
    temporary Prefect server (which must die with it)."""
    env = {k: v for k, v in cli.env.items() if k != "PREFECT_API_URL"}
    env.update(LINKEDQA_HOME=str(tmp_path / "warehouse"), PREFECT_HOME=str(tmp_path / "prefect"))
    return env


def _stalled_with_own_server(proc: subprocess.Popen, log: Path) -> list[psutil.Process]:
    """Wait until the build stalls in its second staged shard; return its child processes (its server among them)."""
    deadline = time.monotonic() + 240
    while "STALLED" not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "the build never reached its second staged shard"
        time.sleep(0.2)
    children = psutil.Process(proc.pid).children(recursive=True)
    assert any("uvicorn" in cmdline(c) for c in children), "the command's Prefect server"
    return children


@pytest.mark.timeout(400)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_kb_build_stops_on_a_signal_within_10_s_and_resumes(cli, ref_kb, data_root, tmp_path, sig):
    ref_home, version = ref_kb
    home = tmp_path / "warehouse"
    vdir = layout.kb_dir(version, home)
    env = _own_server_env(cli, tmp_path)
    log = tmp_path / "build.log"
    proc = _start(env, log, "stall:stage:2", kb_args(data_root))
    try:
        children = _stalled_with_own_server(proc, log)
        t0 = time.monotonic()
        proc.send_signal(sig)
        rc = proc.wait(timeout=15)
        took = time.monotonic() - t0
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # safety net (the group is empty when the test passes)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.wait(timeout=10)
    out = log.read_text(errors="replace")
    assert rc == 128 + sig and took < 10, (rc, took, out[-2000:])
    assert f"stopped by {signal.Signals(sig).name}" in out and "re-run the same command to resume" in out
    _, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, f"left running after {signal.Signals(sig).name}: {alive}"
    assert not (vdir / "manifest.json").exists() and done_kb_versions(home) == []
    assert len(list((vdir / "_staging").glob("*/s*of*/_done.json"))) >= 2  # finished work is kept

    rc, out = cli(home, "none", kb_args(data_root))
    assert rc == 0, out[-3000:]
    assert [v for v, _ in done_kb_versions(home)] == [version]
    for table in KB_TABLES:
        assert table_digest(vdir / table, table) == table_digest(layout.kb_dir(version, ref_home) / table, table)
    assert read_json(vdir / "manifest.json")["row_counts"] == read_json(
        layout.kb_dir(version, ref_home) / "manifest.json")["row_counts"]
    assert leftovers(vdir) == []


@pytest.mark.timeout(300)
def test_sigkilled_command_takes_its_own_prefect_server_along(cli, data_root, tmp_path):
    """SIGKILL (the OOM killer) runs no handler: the command's temporary Prefect server must still die with it
    (its parent-death signal, ``flows.cli.prefect_server``), not linger as an orphan holding a port and a database.
    The resume after a SIGKILL is tested on builds in ``test_fault_kb_build.py`` and on runs in
    ``test_fault_run.py``."""
    log = tmp_path / "build.log"
    proc = _start(_own_server_env(cli, tmp_path), log, "stall:stage:2", kb_args(data_root))
    try:
        children = _stalled_with_own_server(proc, log)
        proc.send_signal(signal.SIGKILL)  # the command's process only, as the OOM killer does
        assert proc.wait(timeout=15) == -signal.SIGKILL
        _, alive = psutil.wait_procs(children, timeout=15)
        assert not alive, f"outlived their SIGKILLed command: {[cmdline(p)[:120] for p in alive]}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.wait(timeout=10)
