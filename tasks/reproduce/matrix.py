"""A paper's figure beside the measured one: the rows ``linkedqa reproduce`` stores after its runs.

Input: a paper, its conditions and the finished run of each (``runs/<run_id>/``: manifest and metrics). Output: one
``reproductions`` row per (condition, linkedqa metric) -- the paper's value as printed and on linkedqa's scale, the
measured value, their difference, n, the model and backend, the run id, KB version, ``--limit`` and code version --
written as one Parquet file per invocation under ``LINKEDQA_HOME/reproductions/<paper>/`` (atomic; nothing is
overwritten; the catalog's ``reproduction_matrix`` view keeps the newest row of each condition, metric and model).
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

from storage import layout
from storage.manifest import config_hash
from storage.parquet_io import write_table
from storage.run_store import RunStore
from tasks.llm.models import model_label
from tasks.reproduce.conditions import Condition, Paper


def measured_rows(paper: Paper, condition: Condition, run_id: str, root: Path | None = None) -> list[dict[str, Any]]:
    """The rows of one finished run of a condition.

    Raises:
        LookupError: The run is not finished (no manifest).
    """
    store = RunStore(run_id, root)
    manifest = store.read_manifest()
    if manifest is None:
        raise LookupError(f"run {run_id} is not finished: re-run `linkedqa reproduce {paper.id} --condition "
                          f"{condition.id}` to resume it")
    stored = {r["metric"]: r for r in store.read_table("metrics").to_pylist()}
    (run_row,) = store.read_table("runs").to_pylist()
    model = None if run_row["model"] is None else model_label(str(run_row["model"]))  # None: the run asked no LLM
    recorded = _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")  # orders two invocations a second apart
    rows = []
    for fig in condition.metrics():
        m = stored.get(fig.linkedqa)
        measured = None if m is None else m["value"]
        paper_value = fig.value
        rows.append({
            "paper": paper.id, "condition": condition.id, "paper_table": condition.table,
            "paper_row": condition.row, "paper_model": condition.paper_model, "paper_metric": fig.metric,
            "metric": fig.linkedqa, "paper_value": paper_value, "paper_printed": fig.printed,
            "measured": measured,
            "difference": None if measured is None or paper_value is None else measured - paper_value,
            "n": None if m is None else m["n"], "model": model, "backend": run_row["backend"],
            "run_id": run_id, "kb_version": manifest.kb_version, "question_limit": manifest.config.get("limit"),
            "git_sha": manifest.git_sha, "recorded_at": recorded,
        })
    return rows


def write_rows(paper_id: str, rows: list[dict[str, Any]], root: Path | None = None) -> Path | None:
    """Store rows as one new Parquet file of the paper (None when there are no rows)."""
    if not rows:
        return None
    name = f"{rows[0]['recorded_at'].replace(':', '').replace('-', '')}-{config_hash(json.dumps(rows, default=str))}"
    path = layout.reproductions_root(root) / layout.safe_name(paper_id, "paper") / f"{name}.parquet"
    write_table(rows, "reproductions", path)
    return path
