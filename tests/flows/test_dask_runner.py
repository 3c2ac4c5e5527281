"""Scale-out: a sharded run on a local Dask cluster (prefect-dask, 2 worker processes) equals the thread-runner run.

Real sample KB, real BM25 index, real WebQSP-EL questions, real Prefect flow; ``search-recall`` (no LLM) so the
comparison is exact. The two runs share a run id (the runner is not part of it): the first run's predictions
are kept in memory, its folder removed, and the same run is redone on Dask.
"""

from __future__ import annotations

import os
import shutil

import pytest

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import read_table


def _rows(run_id: str) -> dict[str, tuple]:
    preds = read_table(layout.run_dir(run_id) / "predictions", "predictions").to_pylist()
    return {p["question_id"]: (p["shard"], tuple(p["answers"]), tuple(p["predicted_entities"]),
                               tuple(sorted(dict(p["scores"]).items())), p["error"]) for p in preds}


def test_dask_runner_equals_thread_runner(kb_home, prefect_harness):
    from flows.run_method import run_method_on
    from tasks.runs.config import RunConfig

    cfg = RunConfig(method="search-recall", dataset="webqsp-el", split="test", limit=60, shards=3)
    run_id = run_method_on(cfg, "thread")
    threads = _rows(run_id)
    assert [q for q, row in threads.items() if row[-1] is not None] == []  # every item searched: rows to compare
    metrics = {r["metric"]: r["value"] for r in read_table(layout.run_dir(run_id) / "metrics", "metrics").to_pylist()
               if r["metric"] not in ("wall_s", "peak_rss_mb", "llm_seconds", "non_llm_seconds", "retrieval_s")}
    shutil.rmtree(layout.run_dir(run_id))

    assert run_method_on(cfg, "dask", workers=2) == run_id
    manifest = read_manifest(layout.run_dir(run_id))
    assert manifest["row_counts"]["predictions"] == 60
    assert _rows(run_id) == threads
    dask_metrics = {r["metric"]: r["value"] for r in
                    read_table(layout.run_dir(run_id) / "metrics", "metrics").to_pylist() if r["metric"] in metrics}
    assert dask_metrics == pytest.approx(metrics)
    # the shards ran in the Dask worker processes, not in this one
    shard_pids = {read_manifest_shard["pid"] for read_manifest_shard in _shard_records(run_id)}
    assert os.getpid() not in shard_pids and len(shard_pids) >= 1


def _shard_records(run_id: str) -> list[dict]:
    import json

    folder = layout.run_dir(run_id) / "shards"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("shard-*.json"))]


def test_unknown_runner_and_bad_worker_count_are_refused():
    from flows.run_method import run_method_on
    from tasks.runs.config import RunConfig

    cfg = RunConfig(method="search-recall", dataset="webqsp-el")
    with pytest.raises(ValueError, match="unknown runner 'ray'"):
        run_method_on(cfg, "ray")
    with pytest.raises(ValueError, match="workers must be >= 1"):
        run_method_on(cfg, "dask", workers=0)
