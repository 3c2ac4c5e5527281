"""Finalize a run whose shards are done.

Metrics from the stored predictions, failure stages, the ``runs`` row, efficiency accounting, and the manifest last.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc

from storage.manifest import git_sha, now_iso
from storage.run_store import RunManifest, RunStore, ShardRecord
from storage.schemas import PREDICTIONS
from tasks.metrics.base import METRICS_FORMAT
from tasks.runs.config import RunPlan
from tasks.runs.failure_stages import scored, write_stages
from tasks.runs.planning import plan_questions
from tasks.runs.resolve import ResolvedRun, resolve_run
from tasks.runs.shard import Log, peak_rss_mb


def read_predictions(run_id: str, root: Path | None = None):
    """All prediction parts of a run as one Arrow table."""
    return RunStore(run_id, root).read_table("predictions")


def finalize_run(plan: RunPlan | ResolvedRun, started_at: str, wall_s: float, root: Path | None = None,
                 log: Log = print) -> list[dict]:
    """Check shards, compute metrics from the stored predictions, write metrics/runs parts and the manifest.

    Called for a run that is not complete: whether it is (its manifest) is decided once, by the ``run_method`` flow
    (:func:`tasks.runs.config.run_is_done`).

    Returns:
        The summary metric rows.

    Raises:
        RuntimeError: Missing shards, duplicated or missing question ids.
    """
    run = resolve_run(plan, root)
    plan, root, store = run.plan, run.root, run.store
    records = [store.shard_done(i, plan.n_shards) for i in range(plan.n_shards)]
    missing = [str(i) for i, rec in enumerate(records) if rec is None]
    if missing:
        raise RuntimeError(f"run {plan.run_id}: {plan.n_shards - len(missing)} of {plan.n_shards} shards finished "
                           f"(not shard {', '.join(missing)})")
    preds = read_predictions(plan.run_id, root)
    ids = preds["question_id"].to_pylist()
    if len(ids) != len(set(ids)):
        raise RuntimeError(f"run {plan.run_id}: duplicated question ids in predictions")
    if sorted(ids) != sorted(plan.question_ids):
        raise RuntimeError(f"run {plan.run_id}: predictions do not cover exactly the planned questions")
    stale = store.remove_temp_files()  # every shard is done: any temp file is a killed writer's
    if stale:
        log(f"removed {len(stale)} temp file(s) left by killed writers: {', '.join(p.name for p in stale)}")
    questions = plan_questions(plan, root)
    shard_recs = [rec for rec in records if rec is not None]  # shard order
    # a resumed run also spent the wall time of the shards finished by earlier attempts
    wall_s += sum(r.wall_s for r in shard_recs if r.finished_at < started_at)
    summary, stage_rows = scored(run, preds.to_pylist(), questions)
    write_stages(run, stage_rows)
    summary += efficiency_metrics(preds, shard_recs, wall_s, run)
    metric_rows = [
        {"run_id": plan.run_id, "method": plan.config.method, "dataset": plan.config.dataset, "split": plan.split,
         "metric": m["metric"], "value": m["value"], "n": m["n"]}
        for m in summary
    ]
    store.write_table("metrics", metric_rows)
    n_err = sum(1 for e in preds["error"].to_pylist() if e)
    cfg = plan.config
    store.write_table("runs", [{
        "run_id": plan.run_id, "method": cfg.method, "dataset": cfg.dataset, "split": plan.split,
        "kb_version": plan.kb_version, "backend": cfg.backend if run.method.uses_llm else None,
        "model": cfg.model if run.method.uses_llm else None,
        "config": json.dumps({"config": cfg.model_dump(mode="json", exclude={"base_url"}),
                              "settings": plan.method_settings}, sort_keys=True),
        "n_questions": len(ids), "n_shards": plan.n_shards, "n_errors": n_err,
        "git_sha": git_sha(), "started_at": started_at, "finished_at": now_iso(), "wall_s": round(wall_s, 3),
    }])
    store.write_manifest(RunManifest(
        kind="run",
        run_id=plan.run_id,
        config=cfg.model_dump(mode="json", exclude={"base_url"}),
        method_settings=plan.method_settings,
        dataset_version=plan.dataset_version,
        kb_version=plan.kb_version,
        prompt_hashes=plan.prompt_hashes,
        row_counts={"predictions": len(ids), "metrics": len(metric_rows)},
        n_errors=n_err,
        shards=shard_recs,
        started_at=started_at,
        wall_s=round(wall_s, 3),
        metrics_format=METRICS_FORMAT,
        table_schema={"predictions": [f.name for f in PREDICTIONS]},
    ))
    return metric_rows


#: Names of the cost metrics :func:`efficiency_metrics` stores (every other metric row is a quality metric).
EFFICIENCY_METRICS = frozenset({"wall_s", "llm_calls", "prompt_tokens", "completion_tokens", "tokens_per_item",
                                "peak_rss_mb", "error_count", "llm_seconds", "non_llm_seconds", "retrieval_s",
                                "index_disk_mb", "prefix_cache_share"})


def efficiency_metrics(preds, shard_recs: list[ShardRecord], wall_s: float, run: ResolvedRun) -> list[dict]:
    """Efficiency accounting stored as metric rows (wall time, calls, tokens, memory, index size)."""
    n = preds.num_rows
    calls = int(pc.sum(preds["llm_calls"]).as_py() or 0)
    pt = int(pc.sum(preds["prompt_tokens"]).as_py() or 0)
    ct = int(pc.sum(preds["completion_tokens"]).as_py() or 0)
    n_err = sum(1 for e in preds["error"].to_pylist() if e)
    rss = max([r.peak_rss_mb for r in shard_recs] + [peak_rss_mb()])
    out = [
        {"metric": "wall_s", "value": float(wall_s), "n": n},
        {"metric": "llm_calls", "value": float(calls), "n": n},
        {"metric": "prompt_tokens", "value": float(pt), "n": n},
        {"metric": "completion_tokens", "value": float(ct), "n": n},
        {"metric": "tokens_per_item", "value": (pt + ct) / n if n else 0.0, "n": n},
        {"metric": "peak_rss_mb", "value": float(rss), "n": n},
        {"metric": "error_count", "value": float(n_err), "n": n},
        {"metric": "llm_seconds", "value": float(sum(r.llm_seconds for r in shard_recs)), "n": n},
        {"metric": "non_llm_seconds", "value": float(sum(r.non_llm_seconds for r in shard_recs)), "n": n},
    ]
    out.append({"metric": "retrieval_s", "value": float(sum(r.tool_seconds for r in shard_recs)), "n": n})
    share = prefix_cache_share(preds["trajectory"].to_pylist())
    if share is not None:
        out.append({"metric": "prefix_cache_share", "value": share, "n": n})
    paths = run.index_paths()
    if paths is not None:
        out.append({"metric": "index_disk_mb", "value": sum(disk_bytes(p) for p in paths) / 2**20, "n": n})
    return out


def prefix_cache_share(trajectories: list[str | None]) -> float | None:
    """Share of the prompt tokens the engine served from its prefix cache, over the calls it answered.

    Read from the stored trajectories (``prefix_cached_tokens`` of every LLM step the engine ran; replays from
    the response cache and failed calls are left out). None when no engine-answered call reported the count.
    """
    cached = prompt = 0
    for text in trajectories:
        for step in json.loads(text or "[]"):
            if step.get("kind") == "llm" and not step.get("cached") and "prefix_cached_tokens" in step \
                    and not step.get("error"):
                cached += int(step["prefix_cached_tokens"])
                prompt += int(step.get("prompt_tokens") or 0)
    return cached / prompt if prompt else None


def disk_bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a folder (0 when absent)."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0
