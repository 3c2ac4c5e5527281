"""Run one shard of a planned run: its agents, their per-item scores, its record and predictions part.

A SIGKILL at any point leaves either a finished part or none for each shard; re-running the same command skips
finished shards and replays cached LLM calls for the rest, so no question id is lost or duplicated.
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

from storage.manifest import now_iso
from storage.run_store import ITEM_COLUMNS, PredictionRow, RunStore, ShardRecord
from storage.side_files import write_side_outputs
from tasks.methods.records import ItemOutput
from tasks.methods.runtime import RunProgress, RuntimeStats, run_agents, run_agents_continuous
from tasks.methods.tool_types import checked_tools, checks_enabled
from tasks.metrics.runs import per_item_scores
from tasks.progress import progress
from tasks.runs.config import RunPlan
from tasks.runs.engine_pool import get_backend
from tasks.runs.planning import plan_questions
from tasks.runs.resolve import ResolvedRun, resolve_run

Log = Callable[[str], None]


def peak_rss_mb() -> float:
    """Peak resident memory of this process (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def shard_done(plan: RunPlan, i: int, root: Path | None = None) -> ShardRecord | None:
    """Shard ``i``'s record when the shard is done, else None (``storage.run_store.RunStore.shard_done``)."""
    return RunStore(plan.run_id, root).shard_done(i, plan.n_shards)


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


def score_shard(run: ResolvedRun, ran: ShardRun) -> list[PredictionRow]:
    """The shard's predictions rows: each item's output with its per-item scores.

    The metric family's scores first, then the agent's own, which win over a family score of the same name.
    """
    plan = run.plan
    rows = [PredictionRow(run_id=plan.run_id, method=plan.config.method, dataset=plan.config.dataset,
                          split=plan.split, shard=ran.shard, answers=[str(a) for a in o["answers"]], scores=None,
                          **{c: o[c] for c in ITEM_COLUMNS})
            for o in ran.outputs]
    scores = per_item_scores(run.family, rows, ran.questions, run.extra_metrics)
    for r, o in zip(rows, ran.outputs, strict=True):
        r["scores"] = {**scores.get(r["question_id"], {}), **o["scores"]}
    return rows


def write_shard(run: ResolvedRun, ran: ShardRun, rows: list[PredictionRow], log: Log = print) -> ShardRecord:
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
