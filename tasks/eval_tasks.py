"""Prefect tasks of metric recomputation (``linkedqa eval``): thin wrappers over ``tasks.runs.evaluate``.

``tasks.runs.evaluate.compare_run_metrics`` is the Prefect-free comparison both the ``evaluate_run`` flow and the
read-only ``linkedqa eval RUN_ID`` (no ``--write``) use, so the two print the same table.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tasks.runs.evaluate import compare_run_metrics, rewrite_metrics


@task(name="compare_run_metrics", task_run_name="compare {run_id}")
def compare_metrics_task(run_id: str, root: str) -> dict:
    """Recomputed vs stored metrics of one finished run (``compare_run_metrics``)."""
    return compare_run_metrics(run_id, Path(root))


@task(name="rewrite_metrics", task_run_name="rewrite {run_id}")
def rewrite_metrics_task(run_id: str, root: str) -> dict:
    """Store a run's metrics recomputed under the current rules (``tasks.runs.evaluate.rewrite_metrics``)."""
    return rewrite_metrics(run_id, Path(root))
