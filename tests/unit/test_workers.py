"""Pool workers end with their parent process (``tasks.workers``), busy or not, SIGKILL included."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from storage import layout
from tasks.workers import POLL_S, pool_initializer

# The parent: a spawn pool of one worker made busy for 2 minutes (it writes its pid to a file first), then it
# waits to be killed.
_PARENT = textwrap.dedent("""
    import concurrent.futures as cf, multiprocessing as mp, os, sys, time
    from tasks.workers import exit_with_parent, pool_initializer

    def busy(path):
        with open(path + ".tmp", "w") as fh:
            fh.write(str(os.getpid()))
        os.replace(path + ".tmp", path)
        time.sleep(120)

    if __name__ == "__main__":
        kind, watched, path = sys.argv[1], sys.argv[2] == "watched", sys.argv[3]
        ctx = mp.get_context("spawn")
        if kind == "pool":  # tasks.kg.export_nt's pool
            pool = ctx.Pool(1, initializer=exit_with_parent if watched else None,
                            initargs=(os.getpid(),) if watched else ())
            pool.apply_async(busy, (path,))
        else:  # tasks.kb.pool's executor
            ex = cf.ProcessPoolExecutor(1, mp_context=ctx, initializer=pool_initializer if watched else None,
                                        initargs=("off", os.getpid()) if watched else ())
            ex.submit(busy, path)
        time.sleep(600)
""")


def _busy_worker_of_killed_parent(tmp_path: Path, kind: str, watched: bool) -> psutil.Process:
    """Start the parent, let its worker get busy, SIGKILL the parent; the worker's process handle."""
    script = tmp_path / "parent.py"
    script.write_text(_PARENT)
    env = {**os.environ, "PYTHONPATH": str(layout.REPO_ROOT)}
    busy = tmp_path / "busy.pid"
    parent = subprocess.Popen([sys.executable, str(script), kind, "watched" if watched else "bare", str(busy)],
                              cwd=layout.REPO_ROOT, env=env)
    try:
        deadline = time.monotonic() + 60
        while not busy.exists():
            assert parent.poll() is None and time.monotonic() < deadline, "the worker never got busy"
            time.sleep(0.1)
        worker = psutil.Process(int(busy.read_text()))
    finally:
        parent.kill()
        parent.wait(timeout=10)
    return worker


@pytest.mark.parametrize("kind", ["pool", "executor"])
def test_a_busy_worker_ends_within_seconds_of_its_sigkilled_parent(tmp_path: Path, kind: str) -> None:
    worker = _busy_worker_of_killed_parent(tmp_path, kind, watched=True)
    try:
        _, alive = psutil.wait_procs([worker], timeout=30)  # ~POLL_S; generous for a loaded CI machine
        assert not alive
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            worker.kill()


def test_the_kb_build_and_export_pools_start_their_workers_watched(monkeypatch) -> None:
    """The pools that run shards and export units use the initializer, with this process as the parent."""
    from tasks.kb import pool as kb_pool
    from tasks.kg import export_nt
    from tasks.workers import exit_with_parent

    try:
        pool = kb_pool.shard_pool(1)  # no worker starts before a submit
        assert pool._initializer is pool_initializer and pool._initargs[1] == os.getpid()
    finally:
        kb_pool.shutdown_pool()

    seen = {}

    def no_pool(self, processes, initializer=None, initargs=()):
        seen.update(initializer=initializer, initargs=initargs)
        raise RuntimeError("no pool in this test")

    monkeypatch.setattr(mp.context.SpawnContext, "Pool", no_pool)
    with pytest.raises(RuntimeError, match="no pool in this test"):
        export_nt._write_parts([], Path("unused"), False, [], Path("unused"), "1GB", Path("unused"), 2)
    assert seen == {"initializer": exit_with_parent, "initargs": (os.getpid(),)}


_PROBE = textwrap.dedent("""
    from tasks.kb.pool import shard_pool, shutdown_pool, warm_pool

    if __name__ == "__main__":
        warm_pool(2)
        probe = "sorted(m for m in __import__('sys').modules if m.split('.')[0] in ('prefect', 'tasks'))"
        seen = [shard_pool(2).submit(eval, probe).result() for _ in range(4)]
        shutdown_pool()
        print(repr(seen))
""")


def test_the_kb_shard_workers_import_staging_and_not_prefect(tmp_path: Path) -> None:
    """A shard worker imports what staging needs and never Prefect (~1.5 s of CPU per worker on 2 cores, when
    the warm-up function lived beside the Prefect tasks): every worker imports the module of what it unpickles."""
    script = tmp_path / "probe.py"
    script.write_text(_PROBE)
    env = {**os.environ, "PYTHONPATH": str(layout.REPO_ROOT)}
    out = subprocess.run([sys.executable, str(script)], cwd=layout.REPO_ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = eval(out.stdout.strip().splitlines()[-1])
    assert len(seen) == 4 and not [m for mods in seen for m in mods if m.split(".")[0] == "prefect"], seen
    assert any("tasks.kb.stage" in mods for mods in seen), seen


def test_without_the_watch_a_busy_worker_outlives_its_parent(tmp_path: Path) -> None:
    """The control: the same busy worker, no initializer, is still running its 2-minute unit."""
    worker = _busy_worker_of_killed_parent(tmp_path, "pool", watched=False)
    try:
        _, alive = psutil.wait_procs([worker], timeout=POLL_S + 4)
        assert alive == [worker]
    finally:
        worker.send_signal(signal.SIGKILL)
        psutil.wait_procs([worker], timeout=10)


def test_a_worker_outlives_the_thread_that_started_it() -> None:
    """A spawn executor starts workers in the submitting thread (a Prefect task-runner thread); that thread's end
    must not end them, as the parent-death signal would."""
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=pool_initializer,
                                initargs=("off",)) as ex:
        first: list[int] = []
        t = threading.Thread(target=lambda: first.append(ex.submit(os.getpid).result(timeout=60)))
        t.start()
        t.join()
        time.sleep(POLL_S + 1)
        assert ex.submit(os.getpid).result(timeout=60) == first[0]
