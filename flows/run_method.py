"""Flow ``run_method``: plan -> the method's indexes (``build_indexes``) -> one task per shard -> metrics -> manifest.

Shards run on the flow's task runner: threads in this process by default (one engine per process), or on a Dask
cluster (``run_method_on(cfg, "dask", workers=N)`` / ``linkedqa run --runner dask --workers N``): each Dask worker
process runs whole shards with its own engine, writing its predictions part atomically under ``LINKEDQA_HOME``;
planning, metrics and the manifest stay in the flow process. The run id never depends on the runner, so a run
started on threads can be finished on Dask and vice versa.
"""

from __future__ import annotations

import time

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows.build_indexes import build_indexes
from storage import layout
from storage.manifest import now_iso
from tasks.index_tasks import run_index_kinds_task
from tasks.run_tasks import execute_shard_task, finalize_run_task, plan_run_task, publish_run_artifact
from tasks.runs.config import RunConfig, run_is_done


@flow(name="run_method", task_runner=ThreadPoolTaskRunner(max_workers=1))
def run_method(cfg: RunConfig) -> str:
    """Run a method over a dataset split; resumes an unfinished run and is a no-op for a finished one.

    Shards run one at a time in this process (one engine per process; scale-out runs shards in several
    worker processes, see docs/scaling.md).

    Args:
        cfg: Run configuration.

    Returns:
        The run id.
    """
    root, data = str(layout.home()), str(layout.data_root())
    plan = plan_run_task(cfg, root, data)
    if run_is_done(plan.run_id):
        print(f"run {plan.run_id} already done: nothing to do")
        return plan.run_id
    kinds = run_index_kinds_task(plan, root)
    if kinds:  # the method's indexes as their own step (a no-op when built), not lazily inside a shard
        build_indexes(kb=plan.kb_version, kinds=kinds)
    started, t0 = now_iso(), time.perf_counter()
    print(f"run {plan.run_id}: {len(plan.question_ids)} questions in {plan.n_shards} shard(s)")
    futures = [execute_shard_task.submit(plan, i, root, data) for i in range(plan.n_shards)]
    records = [f.result() for f in futures]
    print(f"{sum(1 for r in records if r.skipped)} shard(s) reused from an earlier attempt")
    ref = finalize_run_task(plan, started, time.perf_counter() - t0, root)
    publish_run_artifact(plan, ref)
    return plan.run_id


RUNNERS = ("thread", "dask")


def run_method_on(cfg: RunConfig, runner: str = "thread", workers: int = 2, address: str | None = None) -> str:
    """``run_method`` with its shards on the chosen task runner.

    Args:
        cfg: Run configuration.
        runner: ``thread`` (this process) or ``dask`` (a local ``distributed`` cluster of ``workers`` processes
            with one thread each, or the running scheduler at ``address``).
        workers: Dask worker processes (ignored for ``thread``).
        address: Dask scheduler address (``tcp://host:8786``) of an existing cluster.

    Returns:
        The run id.

    Raises:
        ValueError: Unknown runner or a worker count below 1.
    """
    if runner == "thread":
        return run_method(cfg)
    if runner != "dask":
        raise ValueError(f"unknown runner {runner!r}; use one of {', '.join(RUNNERS)}")
    if workers < 1:
        raise ValueError("workers must be >= 1")
    from prefect_dask import DaskTaskRunner  # heavy: prefect_dask

    kwargs = ({"address": address} if address else
              {"cluster_kwargs": {"n_workers": workers, "threads_per_worker": 1, "processes": True,
                                  "dashboard_address": None}})
    return run_method.with_options(task_runner=DaskTaskRunner(**kwargs))(cfg)
