"""Retrieval without an LLM (``--set answer=false``), and a reproduction condition that needs none, end to end.

Real sample KB, real FactoidQA questions, real BM25 and article lookups, real Prefect flow; no engine is started
(the method asks none: ``Method.uses_llm``). The ER paper's Table 1 rows (retrieval MRR) are such conditions:
``linkedqa reproduce`` stores their rows with no model beside the paper's figure.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from storage import layout
from storage.catalog import refresh_catalog
from storage.parquet_io import read_table


def _metrics(run_id: str) -> dict[str, float]:
    return {r["metric"]: r["value"] for r in read_table(layout.run_dir(run_id) / "metrics", "metrics").to_pylist()}


@pytest.mark.parametrize("method", ["bm25-rag", "er"])
def test_answer_false_retrieves_without_an_llm(kb_home, prefect_harness, method):
    from flows.run_method import run_method_on
    from tasks.runs.config import RunConfig
    from tasks.runs.engine_pool import _BACKENDS

    cfg = RunConfig(method=method, dataset="factoidqa", limit=12, settings={"answer": "false"})
    run_id = run_method_on(cfg, "thread")
    assert _BACKENDS == {}  # no engine, no HTTP client: nothing asked an LLM
    preds = read_table(layout.run_dir(run_id) / "predictions", "predictions").to_pylist()
    assert len(preds) == 12 and all(p["answers"] in ([], [""]) and p["error"] is None for p in preds)
    steps = [json.loads(p["trajectory"]) for p in preds]
    assert not any(s.get("kind") == "llm" for t in steps for s in t)
    m = _metrics(run_id)
    assert m["llm_calls"] == 0 and m["mrr_retrieval"] is not None
    from tasks.metrics.runs import retrieved_texts

    assert all(retrieved_texts(p["trajectory"]) for p in preds)  # every item retrieved, and stored, documents
    (run_row,) = read_table(layout.run_dir(run_id) / "runs", "runs").to_pylist()
    assert run_row["model"] is None and run_row["backend"] is None


def test_a_condition_without_an_llm_lands_in_the_matrix(kb_home, prefect_harness, session_home):
    from flows.run_method import run_method_on
    from tasks.reproduce.conditions import get_paper, needs_llm
    from tasks.reproduce.matrix import measured_rows, write_rows
    from tasks.runs.config import RunConfig

    paper = get_paper("er")
    c = paper.condition("t1-factoidqa-er100w")
    assert not needs_llm(c)
    run_id = run_method_on(RunConfig(method=c.method, dataset=c.dataset, split=c.split, settings=c.settings,
                                     limit=20), "thread")
    path = write_rows(paper.id, measured_rows(paper, c, run_id))
    assert path.parent == layout.reproductions_root() / "er"
    refresh_catalog()
    con = duckdb.connect(str(layout.catalog_path()), read_only=True)
    (row,) = con.execute("SELECT paper_printed, paper_value, measured, difference, n, model, question_limit "
                         "FROM reproduction_matrix WHERE condition = ? AND run_id = ?", [c.id, run_id]).fetchall()
    con.close()
    (fig,) = c.metrics()
    assert row[0] == fig.printed and row[1] == pytest.approx(fig.value)
    assert row[2] == pytest.approx(_metrics(run_id)["mrr_retrieval"]) and row[3] == pytest.approx(row[2] - row[1])
    assert row[4] == 20 and row[5] is None and row[6] == 20
