"""Processes the tests and benchmarks start: a free loopback port, a user's shell, stopping a process group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from socketserver import BaseServer

import psutil


def free_port() -> int:
    """A loopback TCP port free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cmdline(proc: psutil.Process) -> str:
    """A process's command line as one string; "" for one that exited (or turned zombie) while it was read."""
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def prefect_free_env(**extra: str) -> dict[str, str]:
    """This process's environment minus every ``PREFECT_*`` (a test session's API URL must not leak in),
    analytics off (no network here), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", **extra)
    return env


def stop_group(proc: subprocess.Popen | None) -> None:
    """terminate -> wait -> kill, for the whole process group of a process started with ``start_new_session``."""
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(proc.pid, signal.SIGKILL)  # the leader if it ignored SIGTERM, or children left in its group
    except ProcessLookupError:
        pass
    proc.wait(10)


@contextmanager
def serving(server: BaseServer) -> Iterator[BaseServer]:
    """Serve ``server`` (bound already: no port race) in a thread for the duration of the block, then close it."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
