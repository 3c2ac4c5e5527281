"""The temporary Prefect API server of a `linkedqa` command, started early and bound to the command's life.

Without ``PREFECT_API_URL`` a command that runs a flow needs Prefect's temporary API server (a ``uvicorn`` child
process running ``prefect.server.api.server:create_app``, the command line of Prefect's own
``SubprocessASGIServer``). Two things are done differently from Prefect's lazy start:

* **Bound to the command** (the parent-death signal, ``prctl(PR_SET_PDEATHSIG, SIGTERM)``, set in the child):
  a command that is SIGKILLed (OOM killer, a lost node, ``kill -9``) never reaches an exit hook, so without it
  the server would live on as an orphan holding a port and ~250 MB. The signal is tied to the thread that forked the
  child, so the spawn happens on the main thread.
* **Started early, without importing the server** (:func:`spawn_ephemeral_server`, called by the CLI right
  after parsing): the server boots (~9 s of imports on 2 cores) while the command imports its flows and plans,
  and the command process never imports ``prefect.server.api.server`` (another ~5 s) because Prefect's clients
  find the server through ``PREFECT_API_URL``, set in this process before Prefect is imported.
  :func:`bind_ephemeral_server` then waits until it answers ``/api/health``. In a process that imported Prefect
  before (a test, a script calling the CLI's ``main``), the server its settings name (a profile,
  ``prefect.toml``, the tests' harness) is used; without one, Prefect's own ``SubprocessASGIServer`` is
  started instead, with the same parent-death signal.

* **Without flow-run heartbeats** (:func:`drop_flow_heartbeats`, once the server answers): a flow run sends a
  heartbeat event every 180 s so that a lasting server can tell a crashed run (Prefect's zombie-flow automation),
  and at its end it joins the heartbeat thread, which sleeps in 1-s steps: ~0.5 s per flow run on average, ~1 s
  of ``linkedqa kb build``'s wall (two flow runs). This server stops with the command, so no one could act on
  them.

With ``PREFECT_API_URL`` already set (a real server, or the tests' harness), elsewhere than Linux, or off the main
thread, nothing is started and the heartbeats stay.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

PR_SET_PDEATHSIG = 1


def _die_with_parent_fn():
    """A ``preexec_fn`` setting the parent-death signal (libc resolved here, in the parent, not after fork)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    return preexec


#: Seconds to wait for the server's ``/api/health`` unless ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` says
#: (a cold start on a loaded 2-core machine takes ~15 s).
STARTUP_TIMEOUT_S = 120.0


class _Server:
    """The uvicorn child this process spawned (at most one)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None
        self.ready = False
        self.settings: contextlib.ExitStack | None = None  # Prefect settings without heartbeats, once bound

    def spawn(self) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}/api"
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env.update(PREFECT_UI_ENABLED="0", PREFECT__SERVER_EPHEMERAL="1", PREFECT__SERVER_FINAL="1")
        argv = [sys.executable, "-m", "uvicorn", "--app-dir", _prefect_parent_dir(), "--factory",
                "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port),
                "--log-level", "error", "--lifespan", "on"]
        with uvicorn_dies_with_this_process():
            self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
        os.environ["PREFECT_API_URL"] = self.url  # Prefect's clients (imported after this) use it

    def wait(self) -> str:
        assert self.proc is not None and self.url is not None
        timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS") or STARTUP_TIMEOUT_S)
        deadline = time.monotonic() + timeout
        while not self.ready:
            code = self.proc.poll()
            if code is not None:
                raise RuntimeError(f"the temporary Prefect server exited with code {code} before it answered on "
                                   f"{self.url} (its output is above); re-run the command, or start one with "
                                   "`make serve` and export PREFECT_API_URL")
            try:  # loopback: never through an HTTP(S)_PROXY of the environment
                with _NO_PROXY.open(f"{self.url}/health", timeout=2) as resp:
                    self.ready = resp.status == 200
            except (urllib.error.URLError, OSError):
                pass
            if not self.ready:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the temporary Prefect server did not answer on {self.url} within "
                                       f"{timeout:.0f} s (PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)")
                time.sleep(0.1)
        return self.url

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_SERVER = _Server()
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _prefect_parent_dir() -> str:
    """The folder holding the ``prefect`` package (uvicorn's ``--app-dir``), found without importing Prefect."""
    spec = importlib.util.find_spec("prefect")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the prefect package is not installed in this environment")
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


def _can_start() -> bool:
    return (not os.environ.get("PREFECT_API_URL") and sys.platform.startswith("linux")
            and threading.current_thread() is threading.main_thread())


def spawn_ephemeral_server() -> None:
    """Start this command's temporary Prefect server without waiting for it.

    A no-op when it cannot be started, ``PREFECT_API_URL`` is set, or Prefect is already imported in this process
    (its settings were read then, so it would not see the URL: :func:`bind_ephemeral_server` then starts
    Prefect's own ``SubprocessASGIServer``). The server is stopped at exit, and by the kernel if this process
    dies.
    """
    if _SERVER.proc is not None or not _can_start() or "prefect" in sys.modules:
        return
    _SERVER.spawn()
    atexit.register(_SERVER.stop)


def _bind_prefects_own_server() -> str:
    """Prefect's lazily started ``SubprocessASGIServer`` singleton, started now with the parent-death signal."""
    from prefect.server.api.server import SubprocessASGIServer  # heavy: prefect's server application

    server = SubprocessASGIServer()  # the process-wide singleton Prefect's clients use
    if not server.running:
        with uvicorn_dies_with_this_process():
            server.start()  # also registers Prefect's own atexit stop() for a normal exit
    return server.api_url


def bind_ephemeral_server() -> str | None:
    """Make sure this command's temporary Prefect server runs and answers; return its API URL.

    Spawns it first if :func:`spawn_ephemeral_server` did not.

    Returns:
        The API URL, or ``None`` when nothing was started (``PREFECT_API_URL`` set by the user, or, once Prefect
        is imported, in its settings from a profile or ``prefect.toml``; not Linux; not the main thread).

    Raises:
        RuntimeError: The server exited or did not answer within :data:`STARTUP_TIMEOUT_S`.
    """
    if _SERVER.proc is not None:
        url = _SERVER.wait()
    elif not _can_start():
        return None
    elif "prefect" in sys.modules:  # too late for PREFECT_API_URL: Prefect's clients use its own singleton
        if _configured_api_url():  # a profile, prefect.toml or the tests' harness names a server: the user's
            return None
        url = _bind_prefects_own_server()
    else:
        spawn_ephemeral_server()
        url = _SERVER.wait()
    if _SERVER.settings is None and threading.current_thread() is threading.main_thread():
        _SERVER.settings = contextlib.ExitStack()  # entered once, in the main thread's context, never left
        _SERVER.settings.enter_context(drop_flow_heartbeats())
    return url


def _configured_api_url() -> str | None:
    """The API URL Prefect's settings hold in this process (which imported Prefect), from any source."""
    from prefect.settings import PREFECT_API_URL  # heavy: prefect (already imported when this is called)

    return PREFECT_API_URL.value()


def drop_flow_heartbeats() -> contextlib.AbstractContextManager:
    """Prefect settings, entered in this thread's context, under which flow runs send no heartbeats.

    For an API server that lives only as long as this process (a command's temporary server, the tests'
    harness): heartbeats let a lasting server mark a run whose process died as crashed, and each flow run's end
    waits for the heartbeat thread's current 1-s sleep. Threads that Prefect starts copy the context.
    """
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings  # heavy: prefect

    return temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})


@contextlib.contextmanager
def uvicorn_dies_with_this_process() -> Iterator[None]:
    """Within the block, a ``uvicorn`` child started from this thread gets the parent-death signal (Linux).

    Used by :func:`bind_ephemeral_server` and by the tests' Prefect harness (a pytest stopped by SIGTERM or
    SIGKILL must not leave its server behind either). Call it from the main thread: the signal is tied to the
    thread that forked the child. Only ``subprocess.Popen`` calls whose command contains ``uvicorn`` change.
    """
    if not sys.platform.startswith("linux"):
        yield
        return
    real_popen = subprocess.Popen
    preexec = _die_with_parent_fn()

    class _PopenDyingWithParent(real_popen):  # in place only during the block; touches only the uvicorn command
        def __init__(self, *args, **kwargs):
            argv = kwargs.get("args", args[0] if args else ())
            if "uvicorn" in list(argv if isinstance(argv, list | tuple) else [argv]):
                kwargs.setdefault("preexec_fn", preexec)
            super().__init__(*args, **kwargs)

    subprocess.Popen = _PopenDyingWithParent
    try:
        yield
    finally:
        subprocess.Popen = real_popen
