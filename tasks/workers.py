"""Worker processes of linkedqa's process pools: they end when the process that started them dies.

Inputs: none (called as a pool's ``initializer`` in each spawned worker). Outputs: a daemon thread per worker.

A pool's idle workers leave when their parent dies (their task queue reaches end of file), but a busy one ran its
unit to the end first: after a SIGKILLed ``kb build`` or ``kb export-nt`` (OOM killer, ``kill -9``, a lost
node), a staging shard or an export unit went on for up to its full length (hours at full scale), holding
memory, CPU and temp files that the re-run then competed with. :func:`exit_with_parent` ends the worker within
about a second of its parent's death instead.

Why not the parent-death signal (``prctl(PR_SET_PDEATHSIG)``, as the Prefect server child has it): Linux sends
it when the *thread* that created the child ends, and a ``ProcessPoolExecutor`` with spawn starts its workers
on demand in whichever thread submits work (a Prefect task-runner thread), which may end while the pool lives.
The parent *process* is what matters, so each worker watches its parent pid instead.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from tasks.progress import worker_init

#: Seconds between two looks at the parent pid.
POLL_S = 1.0


def cpu_count() -> int:
    """Cores this process may run on (the affinity mask, not the machine's total)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def exit_with_parent(parent_pid: int | None = None, poll_s: float = POLL_S) -> None:
    """End this process (exit status 1, no clean-up) within ``poll_s`` of its parent process's death.

    A daemon thread compares ``os.getppid()`` with the parent's pid: an orphan is re-parented (to init or a
    subreaper), so a change means the parent died. Temp files a killed worker leaves carry a dead pid in their
    names (``.building-<pid>``), and the next run sweeps them. Idempotent per process.

    Args:
        parent_pid: The pid of the process that started this one, passed by it (``initargs``), so a parent that
            died before this runs is seen too; ``None``: ``os.getppid()`` now.
        poll_s: Seconds between two checks.
    """
    global _WATCHING
    if _WATCHING:
        return
    parent = os.getppid() if parent_pid is None else parent_pid

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(poll_s)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
    _WATCHING = True


def pool_initializer(progress_mode: str | None = None, parent_pid: int | None = None,
                     ignore_sigint: bool = False) -> None:
    """A pool's ``initializer``: :func:`exit_with_parent`, then the progress set-up.

    Args:
        progress_mode: The parent's :func:`tasks.progress.resolve_mode`; given, ``tasks.progress.worker_init``
            runs with it.
        parent_pid: The parent's ``os.getpid()`` (see :func:`exit_with_parent`).
        ignore_sigint: Ignore Ctrl-C (the terminal sends it to the whole process group): the parent handles it
            and stops the pool, instead of every worker printing a ``KeyboardInterrupt`` traceback.
    """
    exit_with_parent(parent_pid)
    if ignore_sigint:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if progress_mode is not None:
        worker_init(progress_mode)


_WATCHING = False
