"""Flow ``evaluate_run``: recompute finished runs' metrics from their predictions, compare, store (``linkedqa eval``).

Runs whose stored values were computed under an older metrics format (manifest ``metrics_format``) get the
recomputed values stored when ``write`` is set; under the same format any difference is reported as a mismatch
(never overwritten). ``linkedqa eval RUN_ID`` without ``--write`` writes nothing and compares directly
(``tasks.runs.evaluate.compare_run_metrics``); with ``--write`` or ``--all`` it runs this flow.
"""

from __future__ import annotations

from prefect import flow

from storage import layout
from storage.catalog import done_runs
from tasks.eval_tasks import compare_metrics_task, rewrite_metrics_task
from tasks.kb_tasks import refresh_catalog_task


@flow(name="evaluate_run")
def evaluate_run(run_ids: list[str] | None = None, all_runs: bool = False, write: bool = False) -> list[dict]:
    """Compare (and with ``write`` store) the recomputed metrics of the given runs, or of every finished run.

    Args:
        run_ids: Run ids (ignored with ``all_runs``).
        all_runs: Every finished run of ``LINKEDQA_HOME``.
        write: Store the recomputed values of runs computed under an older metrics format, and the failure stages
            of runs whose stages are missing or stale.

    Returns:
        One comparison per run (``compare_run_metrics``), with ``written`` (``True`` when stored).

    Raises:
        ValueError: Neither run ids nor ``all_runs``.
    """
    root = layout.home()
    ids = [r for r, _ in done_runs(root)] if all_runs else [layout.safe_name(r, "run id") for r in run_ids or []]
    if not ids and not all_runs:
        raise ValueError("give one RUN_ID or --all")
    reports = []
    for run_id in ids:
        report = compare_metrics_task(run_id, str(root))
        report["written"] = False
        if write and (report["stored_format"] != report["current_format"] or report["stages"] in ("missing", "stale")):
            rewrite_metrics_task(run_id, str(root))
            report["written"] = True
        reports.append(report)
    if any(r["written"] for r in reports):
        refresh_catalog_task(str(root))
    return reports
