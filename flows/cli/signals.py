"""SIGTERM and Ctrl-C stop a ``linkedqa`` command within seconds, with the guarantees of SIGKILL.

Why not Python's default: an LLM step runs inside a shard thread (Prefect's task runner) for minutes, and a
KB merge runs inside DuckDB; Python delivers a signal to its handler only between bytecodes of the *main*
thread, and after ``KeyboardInterrupt`` the interpreter still joins the busy worker threads before it exits.
Measured before this module: SIGINT and SIGTERM ignored for more than 120 s during an ELA step.

How: :func:`stop_on_signals` (main thread, around the command)

1. points Python's C-level signal wake-up fd at a pipe read by a watcher thread. The C handler writes the
   signal number there the moment the signal arrives, whatever the main thread is doing, so the watcher sees
   it at once (the Python-level handler, which may be deferred, does the same when it runs);
2. on the first SIGINT/SIGTERM the watcher prints one line, sets :data:`STOP` (cooperative code may look at
   it) and gives the main thread ``grace_s`` seconds to unwind through ``KeyboardInterrupt`` (Prefect marks its
   run as crashed, context managers close); a second signal skips the wait;
3. then it stops every child process of the command (Prefect's temporary API server, Oxigraph, Dask workers,
   KB build workers: SIGTERM, SIGKILL after ``kill_wait_s``) and ends the process with ``os._exit(128+sig)``.

Nothing is lost by ending this way: every persisted file is written to a temp name and renamed when complete
(``storage.parquet_io``), finished shards are kept and a re-run of the same command resumes from them; the
temp files of a writer stopped mid-write are swept when the run or build is finalised. That is the same
contract the SIGKILL tests check, so a stop by signal is tested the same way (``tests/faults``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

import psutil

#: Set once a stop signal arrived (long loops may check it to stop early; nothing has to).
STOP = threading.Event()
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_state: dict = {"installed": False, "first": None, "at": None, "deadline": None}
_lock = threading.Lock()


def _children() -> list:

    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def stop_children(wait_s: float = 3.0) -> int:
    """SIGTERM every descendant process, SIGKILL those still alive after ``wait_s``; returns how many."""
    procs = _children()
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=wait_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=1.0)
    return len(procs)


def _finish(signum: int, kill_wait_s: float) -> None:
    """Stop the children and end the process now (never returns)."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    n = 0
    with contextlib.suppress(Exception):
        n = stop_children(kill_wait_s)
    with contextlib.suppress(Exception):
        name = signal.Signals(signum).name
        sys.stderr.write(f"stopped by {name}{f' ({n} child process(es) stopped)' if n else ''}; finished work "
                         "is kept: re-run the same command to resume\n")
        sys.stderr.flush()
    os._exit(128 + signum)


def _on_stop_signal(signum: int, grace_s: float, kill_wait_s: float) -> None:
    """Record a stop signal and arm the hard stop; a signal coming 0.3 s or more after the first fires it now.

    (The watcher and the Python-level handler may both report the same delivery; 0.3 s apart is a new one.)
    """
    now = time.monotonic()
    with _lock:
        first = _state["first"] is None
        if first:
            _state["first"], _state["at"], _state["deadline"] = signum, now, now + grace_s
    if first:
        STOP.set()
        with contextlib.suppress(Exception):
            sys.stderr.write(f"\n{signal.Signals(signum).name}: stopping within {grace_s + kill_wait_s:.0f} s "
                             "(again to stop at once)...\n")
            sys.stderr.flush()
        threading.Thread(target=_expire, args=(signum, kill_wait_s), name="linkedqa-stop", daemon=True).start()
    elif now - _state["at"] >= 0.3:
        _finish(_state["first"], kill_wait_s)


def _expire(signum: int, kill_wait_s: float) -> None:
    while time.monotonic() < _state["deadline"]:
        time.sleep(0.05)
    _finish(signum, kill_wait_s)


@contextlib.contextmanager
def stop_on_signals(grace_s: float = 3.0, kill_wait_s: float = 3.0):
    """Within the block, SIGINT/SIGTERM stop the process within ``grace_s + kill_wait_s + 1`` s (module doc).

    Only from the main thread (elsewhere, and when nested, it does nothing). On leaving the block the previous
    handlers and wake-up fd are restored (the CLI is also called in-process by tests). After a stop signal the
    main thread sees ``KeyboardInterrupt``; the command's top then calls :func:`exit_after_interrupt`.
    """
    if threading.current_thread() is not threading.main_thread() or _state["installed"]:
        yield False
        return
    _state.update(installed=True, first=None, at=None, deadline=None)
    STOP.clear()
    r, w = os.pipe()
    os.set_blocking(w, False)

    def python_handler(signum, frame):  # runs in the main thread, possibly late
        _on_stop_signal(signum, grace_s, kill_wait_s)
        raise KeyboardInterrupt

    def watcher() -> None:
        while True:
            try:
                data = os.read(r, 64)
            except OSError:
                return
            if not data or 0 in data:  # closed, or the sentinel written on leaving the block
                return
            for b in data:
                if b in (int(s) for s in STOP_SIGNALS):
                    _on_stop_signal(b, grace_s, kill_wait_s)

    old = {s: signal.signal(s, python_handler) for s in STOP_SIGNALS}
    old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    thread = threading.Thread(target=watcher, name="linkedqa-signals", daemon=True)
    thread.start()
    try:
        yield True
    finally:
        signal.set_wakeup_fd(old_fd)
        for s, h in old.items():
            signal.signal(s, h)
        with contextlib.suppress(OSError):
            os.write(w, b"\0")
        thread.join(timeout=1.0)
        for fd in (r, w):
            with contextlib.suppress(OSError):
                os.close(fd)
        _state["installed"] = False


def exit_after_interrupt(code: int) -> None:
    """End the process after ``KeyboardInterrupt`` reached the command's top (never returns).

    Stops the children and exits without joining the worker threads that may still be busy (an LLM step, a
    DuckDB query). ``code`` is used when no stop signal was seen.
    """
    _finish(int(_state["first"]) if _state["first"] else code - 128, kill_wait_s=3.0)
