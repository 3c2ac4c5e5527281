"""Run the real ``linkedqa`` command line in this process with a SIGKILL injected at a named point.

Usage (from the repository root)::

    python tests/faults/inject.py POINT [linkedqa arguments...]

The process kills itself with SIGKILL (no cleanup handlers, no ``finally``, exactly like the OOM killer or a
lost node) the moment it reaches POINT. POINT is one of:

* ``none``                   run normally;
* ``stage:N``                KB build: after the N-th staged shard has finished (its ``_done.json`` written);
* ``merge-after:TABLE``      KB build: after TABLE's parts were written, before its merge marker;
* ``kb-manifest``            KB build: every table merged, just before the version's ``manifest.json``;
* ``shard-torn:N``           run: the N-th predictions part is in its temp file, not yet renamed (mid-write);
* ``shard-written:N``        run: right after the N-th predictions part was published;
* ``finalize``               run: every shard done, at the start of ``finalize_run`` (before metrics);
* ``metrics-written``        run: metrics part published, before the ``runs`` part and the manifest;
* ``stall:stage:N``          KB build: after the N-th staged shard, that worker thread hangs for 10 min (like
                             a long C call: an LLM step, a DuckDB query) and prints ``STALLED``; the test then
                             sends a signal from outside.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

_LOCK = threading.Lock()
_COUNT = [0]


def die() -> None:
    """SIGKILL this process now."""
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _count_reached(n: int) -> bool:
    with _LOCK:
        _COUNT[0] += 1
        return _COUNT[0] >= n


def install(point: str) -> None:
    """Patch the library so that reaching ``point`` kills the process."""
    kind, _, arg = point.partition(":")
    if kind == "none":
        return
    if kind == "stall":
        sub, _, n = arg.partition(":")
        if sub != "stage":
            raise SystemExit(f"unknown fault point {point!r}")
        import time

        import tasks.kb_tasks as kt

        real_stage_ = kt.stage_shard

        def stalled(*a, **k):
            rec = real_stage_(*a, **k)
            if _count_reached(int(n)):
                print("STALLED", flush=True)
                time.sleep(600)
            return rec

        kt.stage_shard = stalled
    elif kind == "stage":
        import tasks.kb_tasks as kt

        real_stage = kt.stage_shard

        def stage(*a, **k):
            rec = real_stage(*a, **k)
            if _count_reached(int(arg)):
                die()
            return rec

        kt.stage_shard = stage
    elif kind == "merge-after":
        import tasks.kb.merge as merge

        real_parts = merge.write_query_parts

        def parts(con, sql, table, folder, *a, **k):
            n = real_parts(con, sql, table, folder, *a, **k)
            if table == arg:
                die()
            return n

        merge.write_query_parts = parts
    elif kind == "kb-manifest":
        import tasks.kb.merge as merge

        merge.write_manifest = lambda *a, **k: die()
    elif kind in ("shard-written", "metrics-written"):
        import storage.run_store as store  # every write of a run's tables

        real_write = store.write_table
        want = "predictions" if kind == "shard-written" else "metrics"

        def write(data, table, path):
            n = real_write(data, table, path)
            if table == want and _count_reached(int(arg or 1)):
                die()
            return n

        store.write_table = write
    elif kind == "shard-torn":
        import storage.run_store as store
        from storage import parquet_io

        real_write = store.write_table

        def torn(data, table, path):
            if table == "predictions" and _count_reached(int(arg or 1)):
                tmp = parquet_io._tmp_path(path)
                tmp.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_bytes(b"PAR1 half a part")  # what a kill in the middle of the write leaves
                die()
            return real_write(data, table, path)

        store.write_table = torn
    elif kind == "finalize":
        import tasks.run_tasks as rt

        rt.finalize_run = lambda *a, **k: die()
    else:
        raise SystemExit(f"unknown fault point {point!r}")


if __name__ == "__main__":
    # Installing a fault imports Prefect (tasks.*) before flows.cli.setup_env runs, so Prefect would read its own
    # 20 s start-up timeout for the temporary server instead of the CLI's 180 s, which a new PREFECT_HOME (its
    # database migrated) on a loaded 2-core machine can exceed: set it as the CLI does, before that import.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    install(sys.argv[1])
    from flows.cli import main

    sys.exit(main(sys.argv[2:]))
