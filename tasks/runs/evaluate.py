"""Recompute a finished run's metrics from its stored predictions.

Compare them with the stored values (``linkedqa eval RUN_ID``) or store them under the current rules
(``linkedqa eval --write``).
"""

from __future__ import annotations

from pathlib import Path

from storage import layout
from storage.manifest import now_iso
from storage.parquet_io import read_table, write_table
from storage.run_store import RunManifest
from tasks.metrics.base import METRICS_FORMAT
from tasks.metrics.runs import per_item_scores
from tasks.runs.failure_stages import scored, stages_status, write_stages
from tasks.runs.finalize import EFFICIENCY_METRICS, read_predictions
from tasks.runs.planning import plan_questions
from tasks.runs.resolve import ResolvedRun, resolve_run


def recompute_metrics(run_id: str, root: Path | None = None) -> tuple[list[dict], list[dict]]:
    """``linkedqa eval``: recompute summary metrics from stored predictions; return (recomputed, stored).

    Only the metrics computed from predictions are recomputed; the cost rows (:data:`EFFICIENCY_METRICS`:
    wall time, tokens, memory...) describe the original execution and are not in ``recomputed``.
    """
    run, _ = _done_run(run_id, root)
    recomputed, _stages, stored = _recompute(run)
    return recomputed, stored


def _recompute(run: ResolvedRun) -> tuple[list[dict], list[dict], list[dict]]:
    """(recomputed summary metrics, recomputed stage rows, stored metrics) of a finished run."""
    preds = read_predictions(run.run_id, run.root).to_pylist()
    recomputed, stage_rows = scored(run, preds, plan_questions(run.plan, run.root))
    return recomputed, stage_rows, run.store.read_table("metrics").to_pylist()


def _done_run(run_id: str, root: Path | None) -> tuple[ResolvedRun, RunManifest]:
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
    run, manifest = _done_run(run_id, root)
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
        stages' :func:`tasks.runs.failure_stages.stages_status`.

    Raises:
        LookupError: Unknown run id.
    """
    layout.safe_name(run_id, "run id")
    run, manifest = _done_run(run_id, root)
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
