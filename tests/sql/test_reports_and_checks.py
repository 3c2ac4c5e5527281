"""Report views and SQL checks against a real small warehouse (no Prefect, no LLM).

The warehouse is built once per module with the library functions: a KB from real inputs (LitWD labels and
aliases, CoDEx-S triples, the Wikipedia title map, a Wikidata JSON sample with sitelinks), then the no-LLM
``search-recall`` method on 200 real WebQSP-EL test questions (2 shards) and on 30 SimpleQuestions-WD test
questions (which carry a relation in ``meta.property`` and no gold mention, so none of them is scored).
No linking-family run is made here: the only linking method (``ela``) needs an LLM, and predictions are never
faked; ``metrics_reproducible`` is exercised on the search family (recall@k, recall@k_covered, kb_coverage,
efficiency counts) instead.
"""

from __future__ import annotations

import io
import shutil
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from storage import layout
from storage.catalog import SQL_DIR, refresh_catalog
from storage.manifest import now_iso
from storage.parquet_io import part_files, read_table, write_table
from tasks.kb.merge import merge_and_publish
from tasks.kb.plan import _spec, make_plan
from tasks.kb.stage import stage_shard
from tasks.reports.views import print_report, report_view_names
from tasks.runs.config import RunConfig
from tasks.runs.finalize import finalize_run
from tasks.runs.planning import plan_run
from tasks.runs.shard import execute_shard

CHECKS = sorted((SQL_DIR / "checks").glob("*.sql"))
RUN_TABLES = ("predictions", "metrics", "runs")


def _quiet(_msg: str) -> None:
    pass


def _run(cfg: RunConfig, root: Path, data_root: Path) -> str:
    plan = plan_run(cfg, root, data_root)
    started, t0 = now_iso(), time.perf_counter()
    for i in range(plan.n_shards):
        execute_shard(plan, i, root, data_root, log=_quiet)
    finalize_run(plan, started, time.perf_counter() - t0, root, log=_quiet)
    return plan.run_id


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory, data_root: Path):
    root = tmp_path_factory.mktemp("reports") / "warehouse"
    mp = pytest.MonkeyPatch()
    mp.setenv("LINKEDQA_HOME", str(root))
    try:
        lw = data_root / "literallywikidata/Entities"
        specs = [
            _spec("litwd-labels", lw / "entity_labels_en.txt", "literallywikidata", 1),
            _spec("litwd-aliases", lw / "entity_aliases_en.txt", "literallywikidata", 1),
            _spec("triples", data_root / "codex/triples/codex-s/valid.txt", "codex", 1),
            _spec("title-map", data_root / "wikipedia-vital-articles/vital_articles_entities_2019.csv.gz",
                  "title-map", 1),
            _spec("wikidata-json", data_root / "wikidata-entities/wikibase-dump-filter/entities.gz",
                  "wikidata-json", 1),
        ]
        plan = make_plan("reports", specs)
        for spec in specs:
            for shard in spec.shards:
                stage_shard(plan.version, spec, shard, root)
        kb_counts = merge_and_publish(plan, root, threads=2, log=_quiet)
        webqsp = _run(RunConfig(method="search-recall", dataset="webqsp-el", split="test", limit=200, shards=2),
                      root, data_root)
        simpleq = _run(RunConfig(method="search-recall", dataset="simplequestions-wd", split="test", limit=30),
                       root, data_root)
        catalog = refresh_catalog(root)
        con = duckdb.connect(str(catalog), read_only=True)
        yield {"root": root, "con": con, "kb": plan.version, "kb_counts": kb_counts,
               "webqsp": webqsp, "simpleq": simpleq}
        con.close()
    finally:
        mp.undo()


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict]:
    rel = con.sql(sql)
    return [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]


def _view(con: duckdb.DuckDBPyConnection, name: str) -> list[dict]:
    rel = con.table(name)
    return [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]


# ------------------------------------------------------------------------------------------------ checks
@pytest.mark.parametrize("check", CHECKS, ids=[c.stem for c in CHECKS])
def test_check_returns_no_rows_on_real_runs(warehouse, check: Path):
    assert _rows(warehouse["con"], check.read_text()) == []


def test_every_check_and_report_is_one_select_with_a_leading_comment():
    files = [*CHECKS, *sorted((SQL_DIR / "reports").glob("*.sql"))]
    assert {c.stem for c in CHECKS} >= {"unique_question_ids_per_run", "no_orphan_predictions",
                                         "metrics_reproducible", "run_counts_match", "metrics_in_range"}
    for f in files:
        text = f.read_text()
        assert text.startswith("-- "), f.name
        statements = duckdb.extract_statements(text)
        assert len(statements) == 1 and statements[0].type == duckdb.StatementType.SELECT, f.name


# ----------------------------------------------------------------------------------------------- reports
def test_question_comparison_has_one_row_per_question_and_method(warehouse):
    con, run = warehouse["con"], warehouse["webqsp"]
    rows = [r for r in _view(con, "question_comparison") if r["run_id"] == run]
    assert len(rows) == 200 == len({r["question_id"] for r in rows})
    assert {(r["dataset"], r["split"], r["method"], r["score_name"]) for r in rows} == {
        ("webqsp-el", "test", "search-recall", "recall@50")}
    assert all(r["question"] for r in rows)
    assert all(r["correct"] == (r["score"] == 1.0) for r in rows if r["score"] is not None)
    assert all(r["n_methods_right"] == int(bool(r["correct"])) for r in rows)
    assert len(_view(con, "question_comparison")) == 230

    wide = {r["question_id"]: r for r in _view(con, "question_comparison_wide") if r["dataset"] == "webqsp-el"}
    assert len(wide) == 200
    for r in rows:
        w = wide[r["question_id"]]
        assert w["search-recall"] == r["correct"] and w["ela"] is None and w["n_methods"] == 1
        assert w["correct_by_method"] == {"search-recall": r["correct"]}
        assert (w["methods_right"] == ["search-recall"]) == bool(r["correct"])


def test_error_slices_partition_the_items_and_agree_with_the_metrics(warehouse):
    con = warehouse["con"]
    slices = _view(con, "error_slices")
    web = [s for s in slices if s["run_id"] == warehouse["webqsp"]]
    by_kind: dict[str, list[dict]] = {}
    for s in web:
        by_kind.setdefault(s["slice_kind"], []).append(s)
    assert set(by_kind) == {"all", "question_length", "popularity"}  # WebQSP-EL has no relation in meta
    for kind in ("question_length", "popularity"):
        assert sum(s["n_items"] for s in by_kind[kind]) == 200
        assert sum(s["n_right"] for s in by_kind[kind]) == by_kind["all"][0]["n_right"]
    assert {s["slice"] for s in by_kind["question_length"]} <= {"1-5", "6-10", "11+"}
    assert {s["slice"] for s in by_kind["popularity"]} <= {"0-10", "11-50", "51+", "unknown"}
    metric = _rows(con, f"SELECT value, n FROM metrics WHERE run_id = '{warehouse['webqsp']}' "
                        "AND metric = 'recall@50'")[0]
    (overall,) = by_kind["all"]
    # one gold mention per WebQSP-EL question: recall@50 per item is 0 or 1, so its mean is the accuracy
    assert overall["n_scored"] == metric["n"] and overall["accuracy"] == pytest.approx(metric["value"])
    assert overall["error_rate"] == pytest.approx(1 - metric["value"]) and overall["failure_rate"] == 0.0
    right = sum(1 for r in _view(con, "question_comparison") if r["run_id"] == warehouse["webqsp"] and r["correct"])
    assert overall["n_right"] == right

    sq = [s for s in slices if s["run_id"] == warehouse["simpleq"]]
    relations = [s for s in sq if s["slice_kind"] == "relation"]
    questions = _rows(con, "SELECT json_extract_string(meta, '$.property') AS p FROM latest_questions "
                           "WHERE dataset = 'simplequestions-wd' AND split = 'test' ORDER BY question_id LIMIT 30")
    assert sorted(s["slice"] for s in relations) == sorted({q["p"] for q in questions})
    assert sum(s["n_items"] for s in relations) == 30
    assert all(s["n_scored"] == 0 and s["accuracy"] is None for s in sq)  # no gold mentions: nothing scored


def test_efficiency_and_metrics_by_method(warehouse):
    con = warehouse["con"]
    eff = {r["run_id"]: r for r in _view(con, "efficiency")}
    assert set(eff) == {warehouse["webqsp"], warehouse["simpleq"]}
    web = eff[warehouse["webqsp"]]
    assert web["n_questions"] == 200 and web["n_shards"] == 2 and web["kb_version"] == warehouse["kb"]
    assert web["wall_s"] > 0 and web["questions_per_s"] == pytest.approx(200 / web["wall_s"])
    assert web["llm_calls"] == 0 and web["prompt_tokens"] == 0 and web["error_count"] == 0
    assert web["peak_rss_mb"] > 0 and web["index_disk_mb"] > 0
    assert len(_view(con, "metrics_by_method")) == 2


def test_kb_summary_counts_match_the_published_kb(warehouse):
    (row,) = _view(warehouse["con"], "kb_summary")
    assert row["kb_version"] == warehouse["kb"] and row["is_latest"]
    for table, n in warehouse["kb_counts"].items():
        if table in row:
            assert row[table] == n, table
    assert row["entities"] > 0 and row["claims"] > 0
    assert sum(row["rejects_by_reason"].values()) == row["rejects"]


def test_print_report_prints_every_view(warehouse):
    out = io.StringIO()
    print_report(warehouse["con"], None, max_rows=5, out=out)
    text = out.getvalue()
    for name in report_view_names():
        assert f"== {name} (" in text
    assert "== question_comparison (230 rows) ==" in text
    assert "... 225 more row(s): SELECT * FROM question_comparison\n" in text
    lines = text.splitlines()
    top = lines.index("== efficiency (2 rows) ==") + 1
    header, rule, *body = lines[top : top + 4]
    starts = [i for i, ch in enumerate(rule) if ch == "-" and (i == 0 or rule[i - 1] == " ")]
    assert len(starts) == len(_view(warehouse["con"], "efficiency")[0])
    for line in (header, *body):  # every column starts where its rule segment starts: cells never overflow
        assert all(s == 0 or s > len(line) or line[s - 1] == " " for s in starts), line
    with pytest.raises(LookupError, match="unknown report view"):
        print_report(warehouse["con"], ["no_such_view"], out=io.StringIO())


# ------------------------------------------------------------------------------------------- corruptions
def _copy_run(src_root: Path, dst_root: Path, run_id: str, new_id: str, edit=None) -> None:
    """Copy a finished run under a new run id (rewriting the run_id column), optionally editing its tables."""
    src, dst = layout.run_dir(run_id, src_root), layout.run_dir(new_id, dst_root)
    shutil.copytree(src, dst)
    for table in RUN_TABLES:
        for part in part_files(dst / table):
            tbl = read_table(part, table)
            tbl = tbl.set_column(tbl.schema.get_field_index("run_id"), "run_id",
                                 pa.array([new_id] * tbl.num_rows, pa.string()))
            write_table(tbl, table, part)
    if edit is not None:
        edit(dst)


def _set_metric(folder: Path, metric: str, delta: float) -> None:
    part = part_files(folder / "metrics")[0]
    tbl = read_table(part, "metrics")
    hit = pc.equal(tbl["metric"], metric)
    assert pc.any(hit).as_py()
    values = pc.if_else(hit, pc.add(tbl["value"], delta), tbl["value"])
    write_table(tbl.set_column(tbl.schema.get_field_index("value"), "value", values), "metrics", part)


def _duplicate_rows(folder: Path) -> None:
    first = part_files(folder / "predictions")[0]
    dup = folder / "predictions" / "part-99999-dup.parquet"
    write_table(read_table(first, "predictions").slice(0, 5), "predictions", dup)


def _orphan(folder: Path) -> None:
    part = part_files(folder / "predictions")[0]
    tbl = read_table(part, "predictions")
    ids = tbl["question_id"].to_pylist()
    ids[0] = "no-such-question"
    write_table(tbl.set_column(tbl.schema.get_field_index("question_id"), "question_id", pa.array(ids)),
                "predictions", part)


def test_checks_catch_corrupted_copies(warehouse, tmp_path: Path):
    src, run = warehouse["root"], warehouse["webqsp"]
    root = tmp_path / "corrupt"
    shutil.copytree(layout.datasets_root(src), layout.datasets_root(root))
    for run_id in (warehouse["webqsp"], warehouse["simpleq"]):
        shutil.copytree(layout.run_dir(run_id, src), layout.run_dir(run_id, root))
    _copy_run(src, root, run, "dup", _duplicate_rows)
    _copy_run(src, root, run, "edited", lambda d: _set_metric(d, "recall@10", 0.01))
    _copy_run(src, root, run, "out-of-range", lambda d: _set_metric(d, "kb_coverage", 1.5))
    _copy_run(src, root, run, "orphan", _orphan)
    _copy_run(src, root, run, "clean-copy")
    con = duckdb.connect(str(refresh_catalog(root)), read_only=True)
    found = {c.stem: _rows(con, c.read_text()) for c in CHECKS}
    con.close()

    def runs_of(check: str) -> set[str]:
        return {r["run_id"] for r in found[check]}

    assert runs_of("unique_question_ids_per_run") == {"dup"} and len(found["unique_question_ids_per_run"]) == 5
    assert runs_of("run_counts_match") == {"dup"}
    assert runs_of("no_orphan_predictions") == {"orphan"} and len(found["no_orphan_predictions"]) == 1
    assert runs_of("metrics_in_range") == {"out-of-range"}
    assert [r["metric"] for r in found["metrics_in_range"]] == ["kb_coverage"]
    assert runs_of("metrics_reproducible") == {"dup", "edited", "out-of-range"}
    edited = [r for r in found["metrics_reproducible"] if r["run_id"] == "edited"]
    assert [(r["metric"], r["stored_n"] == r["recomputed_n"]) for r in edited] == [("recall@10", True)]
    assert edited[0]["stored_value"] - edited[0]["recomputed_value"] == pytest.approx(0.01)
    dup = {r["metric"] for r in found["metrics_reproducible"] if r["run_id"] == "dup"}
    assert {"kb_coverage", "llm_calls", "tokens_per_item", "error_count"} <= dup  # n is 205, not 200


# ------------------------------------------------------------------------------------------ metrics format
def test_eval_write_recomputes_a_run_of_an_older_metrics_format(warehouse, prefect_harness, tmp_path: Path,
                                                                 monkeypatch, capsys):
    """A run stored under older metric rules is listed as such, recomputed by `eval --write`, and the catalog's
    metric views say which rules each value was computed with.

    ``eval --write`` and ``eval --all`` run a flow in this process: on the session's Prefect API (the harness),
    never on a server of their own that would outlive the test in the worker.
    """
    import json

    from flows.cli import main
    from storage.manifest import read_manifest, write_manifest
    from tasks.metrics.base import METRICS_FORMAT
    from tasks.runs.evaluate import recompute_metrics

    root = tmp_path / "warehouse"
    shutil.copytree(warehouse["root"], root, ignore=shutil.ignore_patterns("catalog*.duckdb*"))
    monkeypatch.setenv("LINKEDQA_HOME", str(root))
    run_id = warehouse["webqsp"]
    rdir = layout.run_dir(run_id, root)
    assert read_manifest(rdir)["metrics_format"] == METRICS_FORMAT  # new runs record the current rules

    def fmt_in_catalog() -> set[int]:
        con = duckdb.connect(str(refresh_catalog(root)), read_only=True)
        try:
            return {r[0] for r in con.execute("select distinct metrics_format from latest_metrics where run_id = ?",
                                              [run_id]).fetchall()}
        finally:
            con.close()

    # make it an old run: no recorded version (= 1) and a value that the current rules do not give
    man = read_manifest(rdir)
    write_manifest(rdir, {k: v for k, v in man.items() if k != "metrics_format"})
    part = part_files(rdir / "metrics")[0]
    rows = read_table(part, "metrics").to_pylist()
    for r in rows:
        if r["metric"] == "recall@50":
            r["value"] = 0.123
    write_table(rows, "metrics", part)
    assert fmt_in_catalog() == {1}

    assert main(["eval", run_id]) == 0  # an older format differs as expected: listed, not an error
    out = capsys.readouterr().out
    assert f"stored with metrics format 1, current format {METRICS_FORMAT}" in out and "changed" in out
    assert f"linkedqa eval {run_id} --write" in out
    assert main(["eval", run_id, "--write"]) == 0
    recomputed, stored = recompute_metrics(run_id, root)
    stored_by = {r["metric"]: r["value"] for r in stored}
    assert all(stored_by[r["metric"]] == pytest.approx(r["value"]) for r in recomputed)
    assert stored_by["recall@50"] != 0.123 and stored_by["wall_s"] > 0  # cost rows kept
    man = read_manifest(rdir)
    assert man["metrics_format"] == METRICS_FORMAT and man["metrics_history"][0]["metrics_format"] == 1
    assert fmt_in_catalog() == {METRICS_FORMAT}
    assert main(["eval", "--all"]) == 0  # every run current: nothing differs
    capsys.readouterr()

    # under the same rules a difference is an error
    rows = read_table(part, "metrics").to_pylist()
    rows[0]["value"] = (rows[0]["value"] or 0) + 1
    write_table(rows, "metrics", part)
    assert main(["eval", run_id]) == 1
    assert "MISMATCH" in capsys.readouterr().out
    assert main(["eval"]) == 2 and "give one RUN_ID or --all" in capsys.readouterr().err
    assert json.loads((rdir / "manifest.json").read_text())["metrics_format"] == METRICS_FORMAT
