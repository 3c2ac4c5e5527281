"""docs/howto/sql-cookbook.md works as written, on a catalog of real runs (no LLM).

The catalog is the warehouse of ``tests/sql/test_reports_and_checks.py`` (the same module fixture: a KB from real
inputs, ``search-recall`` on 200 WebQSP-EL and 30 SimpleQuestions-WD test questions). Every ``sql`` block of the
page runs in DuckDB's Python package and in the venv's DuckDB command line (another DuckDB version), and returns
exactly the columns of the ``Columns:`` line under it; a block whose line does not say "rows only" returns rows.
The Python and shell examples run as printed, and the trajectory shown is the one stored.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from storage.layout import REPO_ROOT
from tests.sql import test_reports_and_checks as reports

PAGE = REPO_ROOT / "docs" / "howto" / "sql-cookbook.md"
DUCKDB_CLI = Path(sys.executable).parent / "duckdb"

#: The warehouse of the report tests: a real KB and two real search-recall runs (built once per module).
warehouse = reports.warehouse


@dataclass(frozen=True)
class Recipe:
    """One ``sql`` block of the page and what its ``Columns:`` line promises."""

    heading: str
    sql: str
    columns: list[str]
    rows_only: bool


def _fenced(text: str, lang: str) -> list[tuple[int, str]]:
    """``(end offset, body)`` of every fenced block of ``lang``."""
    return [(m.end(), m.group(1)) for m in re.finditer(rf"^```{lang}\n(.*?)^```$", text, flags=re.S | re.M)]


def recipes(text: str) -> list[Recipe]:
    """Every ``sql`` block with the ``Columns:`` paragraph after it and the heading above it."""
    out = []
    for end, sql in _fenced(text, "sql"):
        after = text[end:].lstrip("\n")
        para = after.split("\n\n", 1)[0]
        if not para.startswith("Columns:"):
            raise AssertionError(f"no 'Columns:' line after the SQL block {sql[:60]!r}")
        promised, _, remark = para.partition("(")
        heading = re.findall(r"^#+ (.*)$", text[:end], flags=re.M)[-1]
        out.append(Recipe(heading, sql, re.findall(r"`([^`]+)`", promised), "rows only" in remark))
    return out


def _cli_rows(catalog: Path, sql: str) -> list[list[str]]:
    """The CSV rows (header first) of ``sql`` run by the venv's DuckDB command line on ``catalog``."""
    res = subprocess.run([str(DUCKDB_CLI), "-readonly", "-csv", str(catalog)], input=sql, capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 0 and not res.stderr.strip(), res.stderr
    return list(csv.reader(io.StringIO(res.stdout)))


def test_page_has_recipes_for_what_researchers_ask():
    found = recipes(PAGE.read_text())
    assert len(found) >= 10 and all(r.columns for r in found)
    assert len({r.heading for r in found}) == len(found), "one SQL block per recipe heading"


def test_every_recipe_runs_in_python_and_the_cli_with_the_promised_columns(warehouse):
    catalog = warehouse["root"] / "catalog.duckdb"
    bad = []
    with_rows = 0
    for r in recipes(PAGE.read_text()):
        rel = warehouse["con"].sql(r.sql)
        rows = rel.fetchall()
        cli = _cli_rows(catalog, r.sql)
        if rel.columns != r.columns:
            bad.append(f"{r.heading}: Python columns {rel.columns}, promised {r.columns}")
        if cli[0] != r.columns:
            bad.append(f"{r.heading}: CLI columns {cli[0]}, promised {r.columns}")
        if len(cli) - 1 != len(rows):
            bad.append(f"{r.heading}: {len(rows)} rows in Python, {len(cli) - 1} in the CLI")
        if not rows and not r.rows_only:
            bad.append(f"{r.heading}: no rows on real runs, and the page does not say 'rows only'")
        with_rows += bool(rows)
    assert bad == []
    assert with_rows >= 8


def test_python_and_shell_examples_run_as_printed(warehouse, monkeypatch: pytest.MonkeyPatch):
    """The examples name ``warehouse/catalog.duckdb`` and ``.venv/bin/duckdb`` relative to where they run: here,
    the folder above the test warehouse, with the venv linked in."""
    text = PAGE.read_text()
    where = warehouse["root"].parent
    if not (where / ".venv").exists():
        (where / ".venv").symlink_to(Path(sys.executable).parent.parent)
    monkeypatch.chdir(where)
    (code,) = [body for _, body in _fenced(text, "python")]
    scope: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(PAGE), "exec"), scope)  # noqa: S102 - the page's own example
    assert out.getvalue().strip() == re.search(r"print\(rel\.columns\)\s+# (\[.*\])", code).group(1)
    assert len(scope["rows"]) == len(warehouse["con"].sql("SELECT * FROM latest_metrics").fetchall()) > 0

    (shell,) = [body for _, body in _fenced(text, "bash") if "duckdb" in body]
    first = recipes(text)[0].sql
    (where / "recipe.sql").write_text(first)
    expected = len(warehouse["con"].sql(first).fetchall())
    for line in shell.splitlines():
        command = line.split(" #")[0].strip()
        res = subprocess.run(["bash", "-c", command], input=first, capture_output=True, text=True, timeout=120,
                             check=False)
        assert res.returncode == 0 and not res.stderr.strip(), (command, res.stderr)
        if "-csv" not in command:
            assert "recall@50" in res.stdout, command  # the recipe's rows, in DuckDB's box format
    rows = list(csv.reader((where / "runs.csv").open()))
    assert rows[0][0] == "run_id" and len(rows) == 1 + 2
    assert expected > 0


def test_the_trajectory_shown_is_the_stored_one(warehouse):
    text = PAGE.read_text()
    (shown,) = [json.loads(body) for _, body in _fenced(text, "json")]
    con = warehouse["con"]
    stored, stage = con.execute(
        "SELECT p.trajectory, s.stage FROM predictions AS p JOIN stages AS s USING (run_id, question_id) "
        "WHERE p.run_id = ? AND p.question_id = 'WebQTest-0'", [warehouse["webqsp"]]).fetchone()
    assert json.loads(stored) == shown
    assert stage == "not_retrieved" and "the stage `not_retrieved` says so" in " ".join(text.split())
    (gold,) = con.execute("SELECT gold_entities FROM latest_questions WHERE dataset = 'webqsp-el' "
                          "AND question_id = 'WebQTest-0'").fetchone()
    assert gold == ["Q766"] and "gold `Q766`" in text


def test_the_cost_rows_left_out_of_the_quality_metrics_are_the_runs_own():
    from tasks.runs.finalize import EFFICIENCY_METRICS

    first = recipes(PAGE.read_text())[0].sql
    listed = re.search(r"metric NOT IN \((.*?)\)", first, flags=re.S).group(1)
    assert set(re.findall(r"'([^']+)'", listed)) == EFFICIENCY_METRICS


def test_the_truncation_the_page_states_is_the_runtime_s():
    from tasks.methods import runtime

    text = " ".join(PAGE.read_text().split())
    assert f"up to {runtime.MAX_TOOL_RESULT_CHARS:,} characters" in text
    assert runtime._truncate("x" * (runtime.MAX_TOOL_RESULT_CHARS + 1)).endswith("...(truncated)")
    assert "`...(truncated)`" in text
    cut = json.dumps(runtime._truncate("x" * (runtime.MAX_TOOL_RESULT_CHARS + 1)))  # as the trajectory stores it
    assert duckdb.connect().execute("SELECT json_type(?::JSON)", [cut]).fetchone() == ("VARCHAR",)
