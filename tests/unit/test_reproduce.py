"""The reproduction conditions (``tasks/reproduce/papers/*.yaml``): complete, exact, runnable as written.

A dry run: the conditions are checked against the method and dataset registries and the command line, and every
figure against the paper it is copied from (``../shared/papers``); nothing is loaded or run.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cli import build_parser
from tasks.reproduce.conditions import check_condition, load_papers

ROOT = Path(__file__).resolve().parents[2]
PAPERS = ROOT.parent / "shared" / "papers"
#: The tables of each paper whose results rows must all be conditions (the main tables and the ablations).
REQUIRED_TABLES = {"ela": {"Table 1", "Table 2"}, "er": {"Table 1", "Table 2", "Table 4", "Table 5"},
                   "ea-agent": {"Table 1", "Table 2", "Table 3"},
                   "anchorrag": {"Table 1", "Table 2", "Table 3", "Table 4"}, "qald-react": {"Table 3", "Table 5"}}
CONDITIONS = [(p, c) for p in load_papers().values() for c in p.conditions]


def test_every_paper_has_its_tables_and_runnable_rows():
    papers = load_papers()
    assert set(papers) == set(REQUIRED_TABLES)
    for pid, paper in papers.items():
        assert (PAPERS / paper.source).is_file(), paper.source
        assert REQUIRED_TABLES[pid] <= {c.table for c in paper.conditions}, pid
        assert any(c.runnable for c in paper.conditions), pid


@pytest.mark.parametrize(("paper", "condition"), CONDITIONS, ids=[f"{p.id}:{c.id}" for p, c in CONDITIONS])
def test_condition_is_exact_and_runs_as_written(paper, condition):
    text = (PAPERS / paper.source).read_text(encoding="utf-8")
    for f in condition.figures:
        assert f.printed in text, f"{condition.id}: {f.metric} {f.printed!r} is not printed in {paper.source}"
    check_condition(condition)  # method, --set keys, dataset, task kind and the metrics its runs store
    if condition.runnable:
        for line in condition.shell(limit=3, run_args=("--model", "m")).splitlines():
            argv = shlex.split(re.sub(r"^RUN=\$\(linkedqa (.*) \| tail -n 1\)$", r"\1", line).removeprefix("linkedqa "))
            with contextlib.redirect_stderr(io.StringIO()):
                ns = build_parser().parse_args(argv)
            assert ns.command == "run" and ns.limit == 3 and ns.model == "m"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flows.cli", "reproduce", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_list_json_has_one_record_per_condition():
    out = _cli("--list", "--json")
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(records) == len(CONDITIONS)
    keys = {"id", "paper", "table", "row", "paper_model", "dataset", "split", "paper_metrics", "linkedqa_metrics",
            "runnable", "reason", "needs_llm", "command"}
    assert all(keys <= set(r) for r in records)
    for r in records:
        assert (r["command"] is not None) == r["runnable"] and (r["reason"] is None) == r["runnable"], r["id"]
        assert all(set(m) == {"metric", "printed", "value"} for m in r["paper_metrics"])
        assert r["needs_llm"] in (True, False) or not r["runnable"]


def test_dry_run_prints_the_commands_and_refuses_unknown_ids():
    paper = load_papers()["ela"]
    out = _cli("ela", "--dry-run", "--limit", "7", "--model", "qwen-7b")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    skipped = [ln for ln in lines if ln.startswith("# ")]
    assert len(skipped) == sum(not c.runnable for c in paper.conditions)
    commands = [ln for ln in lines if not ln.startswith("# ")]
    assert commands == [ln for c in paper.conditions if c.runnable
                        for ln in c.shell(limit=7, run_args=("--model", "qwen-7b")).splitlines()]
    bad = _cli("ela", "--condition", "no-such-row", "--dry-run")
    assert bad.returncode == 2 and "paper ela has no condition 'no-such-row'" in bad.stderr
    bad = _cli("no-such-paper", "--dry-run")
    assert bad.returncode == 2 and "unknown paper 'no-such-paper'; papers:" in bad.stderr


def test_er_no_llm_note_holds_for_the_measured_rows():
    """The ER page's note on its retrieval-only rows: every measured MRR above the paper's, in the paper's order."""
    from tasks.reproduce.pages import measured

    paper = load_papers()["er"]
    rows = {r["condition"]: r for r in measured()["rows"] if r["paper"] == "er" and r["metric"] == "mrr_retrieval"}
    t1 = [c for c in paper.conditions if c.table == "Table 1" and c.runnable]
    assert t1 and all(c.id in rows for c in t1), "make reproduce measured every runnable Table 1 row"
    assert all(rows[c.id]["measured"] > rows[c.id]["paper_value"] for c in t1)
    by_paper = sorted(t1, key=lambda c: -rows[c.id]["paper_value"])
    by_measured = sorted(t1, key=lambda c: -rows[c.id]["measured"])
    assert [c.id for c in by_paper] == [c.id for c in by_measured]
    order = ", ".join(c.row.split(",")[0] for c in by_paper)
    assert f"keep the paper's order ({order})" in paper.no_llm_note


def test_ea_agent_no_llm_note_holds_for_the_measured_rows():
    """The EA-Agent page's note on ea-embed's TEA rows: FR-EN within a point of TEA on every metric, JA-EN and ZH-EN
    far short (over 10 Hits@1 points)."""
    from tasks.reproduce.pages import measured

    paper = load_papers()["ea-agent"]
    rows = {(r["condition"], r["metric"]): r for r in measured()["rows"] if r["paper"] == "ea-agent"}
    assert "FR-EN comes within a point of TEA on every metric; JA-EN and ZH-EN fall far short" in paper.no_llm_note
    fr = [r for (c, _), r in rows.items() if c == "t1-fr-en-tea"]
    assert len(fr) == 3 and all(abs(r["difference"]) < 0.01 for r in fr)
    for c in ("t1-ja-en-tea", "t1-zh-en-tea"):
        assert rows[(c, "hits@1")]["difference"] < -0.10
