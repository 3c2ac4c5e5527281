"""Plan, execute one shard, and finalize a run (Prefect-free; the flow only sequences these).

The run folder, its records and its done rules are ``storage.run_store.RunStore``'s: this module computes and
hands it typed records (``RunPlan``, ``ShardRecord``, ``RunManifest``) and rows.

A SIGKILL at any point leaves either a finished part or none for each shard; re-running the same command
skips finished shards and replays cached LLM calls for the rest, so no question id is lost or duplicated.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from storage import layout
from storage.manifest import git_sha, now_iso, read_manifest
from storage.parquet_io import read_table, write_table
from storage.run_store import RunManifest, RunStore, ShardRecord
from storage.schemas import PREDICTIONS
from storage.side_files import write_side_outputs
from tasks.datasets.store import latest_dataset_folder, store_dataset
from tasks.methods.records import ItemOutput
from tasks.methods.runtime import RunProgress, RuntimeStats, run_agents, run_agents_continuous
from tasks.methods.tool_types import checked_tools, checks_enabled
from tasks.metrics.base import METRICS_FORMAT
from tasks.metrics.runs import per_item_scores
from tasks.progress import progress
from tasks.runs.backends import get_backend
from tasks.runs.checks import check_run_api, check_run_config
from tasks.runs.config import (
    OPERATIONAL_FIELDS,
    RunConfig,
    RunPlan,
    contiguous_shards,
    make_run_id,
    resolve_kb,
)
from tasks.runs.resolve import ResolvedRun, resolve_run
from tasks.runs.stages import scored, stages_status, write_stages

Log = Callable[[str], None]


def peak_rss_mb() -> float:
    """Peak resident memory of this process (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def load_questions(dataset: str, split: str | None, root: Path | None = None,
                   data_root: Path | None = None) -> tuple[list[dict], str, str]:
    """Questions of a dataset split, sorted by id (loading the dataset into the warehouse if needed).

    Returns:
        (rows, dataset_version, split)
    """
    folder = latest_dataset_folder(dataset, root)
    if folder is None:
        store_dataset(dataset, data_root or layout.data_root(), root=root)
        folder = latest_dataset_folder(dataset, root)
    manifest = read_manifest(folder) or {}
    splits = manifest.get("splits", {})
    if split is None:
        split = "test" if "test" in splits else sorted(splits)[0]
    if split not in splits:
        raise LookupError(f"dataset {dataset!r} has no split {split!r}; splits: {', '.join(sorted(splits))}")
    tbl = read_table(folder / "questions", "questions")
    tbl = tbl.filter(pc.equal(tbl["split"], split))
    rows = sorted(tbl.to_pylist(), key=lambda r: r["question_id"])
    return rows, folder.name, split


def plan_run(cfg: RunConfig, root: Path | None = None, data_root: Path | None = None) -> RunPlan:
    """Resolve a run config into a plan and persist ``plan.json`` (idempotent).

    Raises:
        tasks.methods.registry.UnknownMethod, tasks.methods.base.UnknownSetting, LookupError: Bad inputs
            (:func:`tasks.runs.checks.check_run_config`; no KB, no questions).
    """
    method_cls, settings, task = check_run_config(cfg, root)
    cfg, api_applied = check_run_api(cfg, settings)
    needs_kb = method_cls.needs_kb_for(task)
    kb_version = resolve_kb(cfg.kb, root) if needs_kb else None
    if needs_kb and kb_version is None:
        raise LookupError("no KB built yet: run `linkedqa kb build --sample` first")
    rows, ds_version, split = load_questions(cfg.dataset, cfg.split, root, data_root)
    if cfg.limit is not None:
        rows = rows[: cfg.limit]
    if not rows:
        raise LookupError(f"no questions in {cfg.dataset}/{split}")
    hashes = method_cls.prompt_hashes(task)
    settings_dump = settings.model_dump(mode="json")
    run_id = make_run_id(cfg, settings_dump, ds_version, split, kb_version, hashes, api_applied)
    ids = [r["question_id"] for r in rows]
    plan = RunPlan(run_id=run_id, config=cfg, method_settings=settings_dump, dataset_version=ds_version,
                   split=split, kb_version=kb_version, question_ids=ids,
                   shard_bounds=contiguous_shards(len(ids), cfg.shards), prompt_hashes=hashes,
                   api_applied=api_applied)
    store = RunStore(run_id, root)
    old = store.read_plan()
    if old is not None:
        if old.question_ids != plan.question_ids:
            raise RuntimeError(f"run {run_id}: stored plan has different questions; remove {store.folder} to "
                               "restart")
        current = {k: getattr(cfg, k) for k in OPERATIONAL_FIELDS}
        return old.model_copy(update={"config": old.config.model_copy(update=current)})
    store.write_plan(plan)
    return plan


def shard_done(plan: RunPlan, i: int, root: Path | None = None) -> ShardRecord | None:
    """Shard ``i``'s record when the shard is done, else None (``storage.run_store.RunStore.shard_done``)."""
    return RunStore(plan.run_id, root).shard_done(i, plan.n_shards)


def plan_questions(plan: RunPlan, root: Path | None = None, start: int = 0, end: int | None = None) -> list[dict]:
    """The plan's questions ``question_ids[start:end]`` (a shard, or all of them), in plan order."""
    folder = layout.dataset_dir(plan.config.dataset, plan.dataset_version, root)
    tbl = read_table(folder / "questions", "questions")
    by_id = {r["question_id"]: r for r in tbl.filter(pc.equal(tbl["split"], plan.split)).to_pylist()}
    return [by_id[q] for q in plan.question_ids[start:end]]


class MixedDtypeError(RuntimeError):
    """A shard would run in another engine dtype than the run's finished shards."""


def check_engine_dtype(plan: RunPlan, dtype: str | None, root: Path | None = None) -> None:
    """Refuse to add a shard computed in ``dtype`` to a run whose finished shards ran in another dtype.

    The dtype is an operational field (not in the run id: ``auto`` resolves per machine), and bfloat16 and float32
    engines sample different answers from the same prompts (docs/concepts.md#engine-dtype-and-reproducibility). A run
    resumed on a machine of the other kind would otherwise hold predictions of both numerics under one run id. Only
    shards whose predictions part exists count (a record without its part is a shard killed before it finished); shards
    and backends without a dtype (a remote endpoint) are not checked, nor records of ``auto`` (GPU shards before the
    engine's own dtype was recorded: ``tasks.llm.vllm_backend.engine_dtype``). Shards started at the same time on
    machines of both kinds are not caught: only finished shards are compared.

    Raises:
        MixedDtypeError: With the dtype of the finished shards, and how to resume in it or start over.
    """
    if dtype is None or dtype == "auto":
        return
    seen: dict[str, list[int]] = {}
    for i in range(plan.n_shards):
        record = shard_done(plan, i, root)
        done = record.engine_dtype if record is not None else None
        if done and done not in (dtype, "auto"):
            seen.setdefault(done, []).append(i)
    if seen:
        old = ", ".join(f"{d} (shard{'s' if len(v) > 1 else ''} {', '.join(str(i) for i in v)})"
                        for d, v in sorted(seen.items()))
        raise MixedDtypeError(
            f"run {plan.run_id}: finished shards ran with engine dtype {old}, this engine runs {dtype}; "
            f"bfloat16 and float32 sample different answers, so one run must not hold both. Resume with "
            f"--dtype {next(iter(sorted(seen)))} to finish it in the same dtype, or remove "
            f"{RunStore(plan.run_id, root).folder} to run it again "
            f"in {dtype}")


def execute_shard(plan: RunPlan | ResolvedRun, i: int, root: Path | None = None, data_root: Path | None = None,
                  log: Log = print) -> ShardRecord:
    """Run one shard of a method and write its predictions part (skip when the part exists).

    ``plan`` may be the persisted plan or the run already resolved (:func:`tasks.runs.resolve.resolve_run`). The
    shard's "done" is decided here alone (:func:`shard_done`); otherwise :func:`run_shard` -> :func:`score_shard` ->
    :func:`write_shard`.

    Returns:
        The shard record (rows, errors, timings, LLM and tool statistics); ``skipped`` when an earlier attempt
        had finished the shard.
    """
    run = resolve_run(plan, root)
    if (record := shard_done(run.plan, i, run.root)) is not None:
        return record.model_copy(update={"skipped": True})
    ran = run_shard(run, i)
    return write_shard(run, ran, score_shard(run, ran), log)


@dataclass
class ShardRun:
    """What running one shard's agents produced, before scoring and writing."""

    shard: int
    questions: list[dict]
    outputs: list[ItemOutput]
    stats: RuntimeStats
    side_outputs: dict[str, Any] | None
    engine_dtype: str | None
    t0: float
    setup_s: float


def run_shard(run: ResolvedRun, i: int) -> ShardRun:
    """Run shard ``i``'s agents: tools and backend set up, the runtime the plan names, the method's side outputs.

    Progress: one :func:`tasks.progress.progress` reporter per shard (items finished / total, step, active
    items, requests answered in the running step, generated tokens per second of LLM time, ETA).
    """
    plan, root = run.plan, run.root
    t0 = time.perf_counter()
    questions = plan_questions(plan, root, *plan.shard_bounds[i])
    method = run.method
    ctx = run.context()
    tools = method.build_tools(ctx)
    if checks_enabled():
        tools = checked_tools(tools)
    write_side_outputs(run.store.folder, ctx.side_outputs)
    backend = get_backend(plan.config, root) if run.method.uses_llm else None
    check_engine_dtype(plan, getattr(backend, "dtype", None), root)
    setup_s = time.perf_counter() - t0

    with progress(f"{plan.config.method} shard {i + 1}/{plan.n_shards}", total=len(questions), unit="item") as bar:

        def on_progress(p: RunProgress) -> None:
            bar.set(p.done_items, {
                "step": p.step,
                "active": p.active_items,
                "req": f"{p.batch_done}/{p.batch_total}" if p.batch_total else None,
                "tok/s": round(p.tokens_per_s, 1) if p.llm_seconds > 0 else None,
            })

        runtime = run_agents_continuous if plan.config.scheduler == "continuous" else run_agents
        outputs, stats = runtime(method.agent(ctx), questions, backend, tools, on_progress=on_progress)
    return ShardRun(i, questions, outputs, stats, method.postprocess(outputs, questions, ctx, i),
                    getattr(backend, "dtype", None), t0, setup_s)


def score_shard(run: ResolvedRun, ran: ShardRun) -> list[dict]:
    """The shard's predictions rows: each item's output with its per-item scores.

    The metric family's scores first, then the agent's own, which win over a family score of the same name.
    """
    plan = run.plan
    rows = [{
        "run_id": plan.run_id, "method": plan.config.method, "dataset": plan.config.dataset, "split": plan.split,
        "question_id": o["question_id"], "shard": ran.shard, "predicted_entities": o["predicted_entities"],
        "answer": o["answer"], "answers": [str(a) for a in o["answers"]], "trajectory": o["trajectory"],
        "llm_calls": o["llm_calls"], "prompt_tokens": o["prompt_tokens"], "completion_tokens": o["completion_tokens"],
        "latency_s": o["latency_s"], "error": o["error"], "scores": None,
    } for o in ran.outputs]
    scores = per_item_scores(run.family, rows, ran.questions, run.extra_metrics)
    for r, o in zip(rows, ran.outputs, strict=True):
        r["scores"] = {**scores.get(r["question_id"], {}), **o["scores"]}
    return rows


def write_shard(run: ResolvedRun, ran: ShardRun, rows: list[dict], log: Log = print) -> ShardRecord:
    """Write the shard's side outputs, its record and, last, its predictions part (each atomically); the record."""
    plan, i, stats = run.plan, ran.shard, ran.stats
    write_side_outputs(run.store.folder, ran.side_outputs)
    rec = ShardRecord(
        shard=i,
        rows=len(rows),
        errors=sum(1 for r in rows if r["error"]),
        setup_s=round(ran.setup_s, 3),
        wall_s=round(time.perf_counter() - ran.t0, 3),
        llm_seconds=round(stats.llm_seconds, 3),
        tool_seconds=round(stats.tool_seconds, 3),
        non_llm_seconds=round(stats.non_llm_seconds, 3),
        steps=stats.steps,
        llm_batches=stats.llm_batches,
        llm_requests=stats.llm_requests,
        cached_calls=sum(
            1 for r in rows for t in json.loads(r["trajectory"]) if t.get("kind") == "llm" and t.get("cached")
        ),
        peak_rss_mb=round(peak_rss_mb(), 1),
        engine_dtype=ran.engine_dtype,
        scheduler=plan.config.scheduler if run.method.uses_llm else None,
        pid=os.getpid(),
        finished_at=now_iso(),
    )
    run.store.write_shard(i, plan.n_shards, rec, rows)
    log(f"  shard {i + 1}/{plan.n_shards} done: {len(rows)} rows, {rec.errors} error(s), {rec.wall_s:.1f}s "
        f"({rec.llm_batches} LLM batch(es), {rec.llm_seconds:.1f}s in the LLM)")
    return rec


def read_predictions(run_id: str, root: Path | None = None):
    """All prediction parts of a run as one Arrow table."""
    return RunStore(run_id, root).read_table("predictions")


def finalize_run(plan: RunPlan | ResolvedRun, started_at: str, wall_s: float, root: Path | None = None,
                 log: Log = print) -> list[dict]:
    """Check shards, compute metrics from the stored predictions, write metrics/runs parts and the manifest.

    Called for a run that is not complete: whether it is (its manifest) is decided once, by the ``run_method`` flow
    (:func:`tasks.runs.config.run_is_complete`).

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


def recompute_metrics(run_id: str, root: Path | None = None) -> tuple[list[dict], list[dict]]:
    """``linkedqa eval``: recompute summary metrics from stored predictions; return (recomputed, stored).

    Only the metrics computed from predictions are recomputed; the cost rows (:data:`EFFICIENCY_METRICS`:
    wall time, tokens, memory...) describe the original execution and are not in ``recomputed``.
    """
    run, _ = _finished_run(run_id, root)
    recomputed, _stages, stored = _recompute(run)
    return recomputed, stored


def _recompute(run: ResolvedRun) -> tuple[list[dict], list[dict], list[dict]]:
    """(recomputed summary metrics, recomputed stage rows, stored metrics) of a finished run."""
    preds = read_predictions(run.run_id, run.root).to_pylist()
    recomputed, stage_rows = scored(run, preds, plan_questions(run.plan, run.root))
    return recomputed, stage_rows, run.store.read_table("metrics").to_pylist()


def _finished_run(run_id: str, root: Path | None) -> tuple[ResolvedRun, RunManifest]:
    run = resolve_run(run_id, root)
    manifest = run.store.read_manifest()
    if manifest is None:
        raise RuntimeError(f"run {run_id} is unfinished (no manifest); re-run its command to resume it")
    return run, manifest


def rewrite_metrics(run_id: str, root: Path | None = None) -> dict:
    """Recompute a finished run's metrics under the current rules and store them (``linkedqa eval --write``).

    Rewrites, each atomically: every predictions part (its per-item ``scores``: the metrics' item scores are
    replaced, method-specific extra scores kept), the metrics part (recomputed rows plus the stored cost rows),
    and last the manifest (``metrics_format`` set to :data:`METRICS_FORMAT`, the previous version and the time
    kept under ``metrics_history``). A crash in between leaves the run readable; re-running finishes it.

    Returns:
        ``{"from": old version, "to": new version, "changed": {metric: (old, new)}}``.
    """
    run, manifest = _finished_run(run_id, root)
    plan, store = run.plan, run.store
    questions = plan_questions(plan, run.root)
    for part in store.prediction_parts():
        rows = read_table(part, "predictions").to_pylist()
        scores = per_item_scores(run.family, rows, questions, run.extra_metrics)
        for r in rows:
            r["scores"] = {**dict(r["scores"] or {}), **scores.get(r["question_id"], {})}
        write_table(rows, "predictions", part)
    recomputed, stage_rows, stored = _recompute(run)
    write_stages(run, stage_rows)
    old = {r["metric"]: r["value"] for r in stored}
    base = {k: stored[0][k] for k in ("run_id", "method", "dataset", "split")} if stored else {
        "run_id": run_id, "method": plan.config.method, "dataset": plan.config.dataset, "split": plan.split}
    rows = [{**base, "metric": m["metric"], "value": m["value"], "n": m["n"]} for m in recomputed]
    rows += [r for r in stored if r["metric"] in EFFICIENCY_METRICS]
    store.write_table("metrics", rows)
    before = manifest.metrics_format
    history = [*manifest.metrics_history, {"metrics_format": before, "replaced_at": now_iso()}]
    store.write_manifest(manifest.model_copy(update={
        "metrics_format": METRICS_FORMAT, "metrics_history": history,
        "row_counts": {**manifest.row_counts, "metrics": len(rows)}}))
    new = {r["metric"]: r["value"] for r in rows}
    changed = {m: (old.get(m), v) for m, v in new.items() if old.get(m) is None or v is None
               or abs(old[m] - v) > 1e-12}
    changed.update({m: (v, None) for m, v in old.items() if m not in new})
    return {"from": before, "to": METRICS_FORMAT, "changed": changed}


def _same(a: float | None, b: float | None) -> bool:
    return a is b is None or (None not in (a, b) and abs(a - b) < 1e-9)


def compare_run_metrics(run_id: str, root: Path | None = None) -> dict:
    """Recompute a finished run's metrics from its stored predictions and compare them with the stored values.

    Returns:
        ``{"run_id", "stored_format", "current_format", "rows": [{"metric", "recomputed", "stored", "status"}],
        "gone": [{"metric", "stored"}], "differ": int, "stages": str}``; ``status`` is ``same``, ``changed``
        (stored under an older metrics format) or ``mismatch`` (same format, different value); ``differ`` counts
        rows that are not ``same`` plus the stored metrics no longer computed; ``stages`` is the stored failure
        stages' :func:`tasks.runs.stages.stages_status`.

    Raises:
        LookupError: Unknown run id.
    """
    layout.safe_name(run_id, "run id")
    run, manifest = _finished_run(run_id, root)
    fmt = manifest.metrics_format
    recomputed, stage_rows, stored = _recompute(run)
    stored_by = {r["metric"]: r["value"] for r in stored}
    rows = []
    for r in recomputed:
        s = stored_by.get(r["metric"])
        same = r["metric"] in stored_by and _same(s, r["value"])
        rows.append({"metric": r["metric"], "recomputed": r["value"], "stored": s,
                     "status": "same" if same else ("changed" if fmt != METRICS_FORMAT else "mismatch")})
    names = {r["metric"] for r in recomputed}
    gone = [{"metric": m, "stored": v} for m, v in stored_by.items() if m not in EFFICIENCY_METRICS and m not in names]
    differ = sum(r["status"] != "same" for r in rows) + len(gone)
    return {"run_id": run_id, "stored_format": fmt, "current_format": METRICS_FORMAT, "rows": rows, "gone": gone,
            "differ": differ, "stages": stages_status(run, stage_rows)}
