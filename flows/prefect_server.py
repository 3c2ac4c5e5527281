"""The ephemeral Prefect API server of a `linkedqa` command, bound to the command's life.

Without ``PREFECT_API_URL`` Prefect starts a temporary API server (a ``uvicorn`` child process) on first use and
stops it at exit. A command that is SIGKILLed (OOM killer, a lost node, ``kill -9``) never reaches that exit
hook, so the server used to live on as an orphan: a port and ~250 MB held until reboot.

``bind_ephemeral_server()`` starts that same server (Prefect's ``SubprocessASGIServer`` singleton, same command
line) from the main thread *before* any flow runs, with the Linux parent-death signal set in the child
(``prctl(PR_SET_PDEATHSIG, SIGTERM)``): when the command dies, however it dies, the kernel sends the server
SIGTERM. The signal is tied to the thread that forked the child, which is why the start happens on the main
thread (it lives as long as the process); Prefect's clients then find the running singleton and reuse it. With
``PREFECT_API_URL`` set (a real server), elsewhere than Linux, or off the main thread, it does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

PR_SET_PDEATHSIG = 1


def _die_with_parent_fn():
    """A ``preexec_fn`` setting the parent-death signal (libc resolved here, in the parent, not after fork)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    return preexec


def bind_ephemeral_server() -> str | None:
    """Start the command's ephemeral Prefect server tied to this process; return its API URL.

    Returns:
        The API URL, or ``None`` when nothing was started (``PREFECT_API_URL`` set, not Linux, not the main
        thread).
    """
    if os.environ.get("PREFECT_API_URL") or not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    from prefect.server.api.server import SubprocessASGIServer  # heavy: prefect

    server = SubprocessASGIServer()  # the process-wide singleton Prefect's clients use
    if server.running:
        return server.api_url
    with uvicorn_dies_with_this_process():
        server.start()  # also registers Prefect's own atexit stop() for a normal exit
    return server.api_url


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
