"""Flow ``render_reports``: refresh the catalog, execute the report notebooks, publish where the HTML went.

Inputs: the catalog of ``LINKEDQA_HOME`` and ``notebooks/*.py``. Outputs: ``<LINKEDQA_HOME>/reports/<name>.html``
(``tasks.reports.notebooks.execute_notebooks``) and a markdown artifact listing them. This is the on-demand
deployment ``render_reports/on-demand`` of ``prefect.yaml``; ``linkedqa report --notebooks`` does the same
without Prefect.
"""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from storage.catalog import refresh_catalog
from tasks.reports.notebooks import REPORT_NOTEBOOKS, execute_notebooks


@flow(name="render_reports")
def render_reports(notebooks: list[str] | None = None, timeout_s: int = 600) -> dict[str, str]:
    """Render the report notebooks against the current warehouse.

    Args:
        notebooks: Notebook names under ``notebooks/`` (default: overview, methods, errors).
        timeout_s: Per-cell execution timeout.

    Returns:
        ``{name: html path}``.

    Raises:
        RuntimeError: When a notebook failed (its HTML, with the traceback, is written anyway).
    """
    refresh_catalog()
    results = execute_notebooks(tuple(notebooks or REPORT_NOTEBOOKS), timeout_s=timeout_s)
    lines = ["# Report notebooks", "", "| notebook | result |", "|---|---|"]
    lines += [f"| {n} | {'FAILED: ' + type(r).__name__ if isinstance(r, Exception) else f'`{r}`'} |"
              for n, r in results.items()]
    create_markdown_artifact(markdown="\n".join(lines), key="report-notebooks", description="Rendered reports")
    failed = sorted(n for n, r in results.items() if isinstance(r, Exception))
    if failed:
        raise RuntimeError(f"notebook(s) failed: {', '.join(failed)} (see their HTML for the traceback)")
    return {n: str(r) for n, r in results.items()}
