"""Prefect tasks of metric recomputation (``linkedqa eval``): thin wrappers over ``tasks.runs.execute``.

``compare_run_metrics`` is the Prefect-free comparison both the ``evaluate_run`` flow and the read-only
``linkedqa eval RUN_ID`` (no ``--write``) use, so the two print the same table.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task

from storage import layout
from storage.manifest import read_manifest
from tasks.metrics.base import METRICS_FORMAT
from tasks.runs.execute import EFFICIENCY_METRICS, recompute_metrics, rewrite_metrics, stored_metrics_format


def _same(a: float | None, b: float | None) -> bool:
    return a is b is None or (None not in (a, b) and abs(a - b) < 1e-9)


def compare_run_metrics(run_id: str, root: Path | None = None) -> dict:
    """Recompute a finished run's metrics from its stored predictions and compare them with the stored values.

    Returns:
        ``{"run_id", "stored_format", "current_format", "rows": [{"metric", "recomputed", "stored", "status"}],
        "gone": [{"metric", "stored"}], "differ": int}``; ``status`` is ``same``, ``changed`` (stored under an
        older metrics format) or ``mismatch`` (same format, different value); ``differ`` counts rows that are not
        ``same`` plus the stored metrics no longer computed.

    Raises:
        LookupError: Unknown run id.
    """
    layout.safe_name(run_id, "run id")
    manifest = read_manifest(layout.run_dir(run_id, root)) or {}
    fmt = stored_metrics_format(manifest)
    recomputed, stored = recompute_metrics(run_id, root)
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
            "differ": differ}


@task(name="compare_metrics", task_run_name="compare {run_id}")
def compare_metrics_task(run_id: str, root: str) -> dict:
    """Recomputed vs stored metrics of one finished run (``compare_run_metrics``)."""
    return compare_run_metrics(run_id, Path(root))


@task(name="rewrite_metrics", task_run_name="rewrite {run_id}")
def rewrite_metrics_task(run_id: str, root: str) -> dict:
    """Store a run's metrics recomputed under the current rules (``tasks.runs.execute.rewrite_metrics``)."""
    return rewrite_metrics(run_id, Path(root))
