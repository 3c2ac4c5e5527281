"""The shard worker processes of a KB build: one spawn pool per command, started early, Prefect-free.

Inputs: the worker count. Outputs: a ``ProcessPoolExecutor`` whose workers run :func:`tasks.kb.stage.stage_shard`.

Why here and not beside the Prefect task that submits to it (``tasks/kb_tasks.py``): a spawned worker imports the
module of every function it unpickles. A warm-up function in ``tasks.kb_tasks`` would make every worker import
Prefect (~1.5 s of CPU each on 2 cores, against ~2.7 s of staging for the bench's 510 MB input); from this
module a worker imports only what staging needs, and the command can start its workers before it imports
Prefect itself.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os

import tasks.kb.stage  # noqa: F401 - what a worker runs: imported by a worker when it unpickles _ready
from tasks.progress import resolve_mode
from tasks.workers import pool_initializer

_POOL: cf.ProcessPoolExecutor | None = None


def shard_pool(workers: int) -> cf.ProcessPoolExecutor:
    """This process's pool of ``workers`` spawned shard workers (created on first use, then reused)."""
    global _POOL
    if _POOL is None:
        _POOL = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                                       initializer=pool_initializer, initargs=(resolve_mode(), os.getpid()))
    return _POOL


def _ready() -> bool:
    """Run in a worker: unpickling it imported this module, and so ``tasks.kb.stage``, what a shard needs."""
    return True


def warm_pool(workers: int) -> None:
    """Start the shard worker processes now (``workers > 1``); the flow's stage tasks reuse them.

    Their start-up and imports (~0.7 s each on 2 cores) then overlap the command's own start-up (its Prefect
    import, the Prefect server's boot) instead of delaying the first shard.
    """
    if workers > 1:
        pool = shard_pool(workers)
        for _ in range(workers):
            pool.submit(_ready)


def shutdown_pool(wait: bool = True) -> None:
    """Stop the shard workers; pending shards are cancelled.

    Args:
        wait: Block until the workers have exited. ``False`` once every shard is done: their exit (~0.4 s)
            overlaps the merge, and the interpreter joins them at the latest when the command ends.
    """
    global _POOL
    if _POOL is not None:
        pool, _POOL = _POOL, None
        pool.shutdown(wait=wait, cancel_futures=True)
