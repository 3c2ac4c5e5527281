"""Storage contracts: schemas, atomic schema-enforced writes, layout paths, manifests, catalog views."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import layout
from storage.catalog import build_views, refresh_catalog, register_parquet_view, spilling_connection
from storage.manifest import read_manifest, redact, write_manifest
from storage.parquet_io import PartWriter, SchemaMismatch, part_files, read_table, write_table
from storage.schemas import KB_TABLES, SCHEMAS

ENTITY = {"qid": "Q42", "label": "Douglas Adams", "description": "English writer", "aliases": ["DNA"],
          "enwiki_title": "Douglas Adams", "sitelinks": 120, "instance_of": ["Q5"], "source": "test"}


def test_every_catalog_table_has_one_schema():
    expected = {"entities", "aliases", "labels", "claims", "properties", "articles", "passages", "redirects",
                "rejects", "questions", "predictions", "metrics", "runs"}
    assert expected <= set(SCHEMAS)
    # docs/architecture.md#storage-contracts minimum columns are a contract
    assert {"qid", "label", "description", "aliases", "enwiki_title", "sitelinks", "instance_of"} <= set(
        SCHEMAS["entities"].names)
    assert {"subject", "property", "object_qid", "object_value", "datatype", "rank"} <= set(SCHEMAS["claims"].names)
    assert {"run_id", "method", "dataset", "split", "question_id", "predicted_entities", "answer", "answers",
            "trajectory", "llm_calls", "prompt_tokens", "completion_tokens", "latency_s", "error"} <= set(
        SCHEMAS["predictions"].names)
    assert SCHEMAS["metrics"].names[:7] == ["run_id", "method", "dataset", "split", "metric", "value", "n"]


def test_write_enforces_columns_exactly(tmp_path: Path):
    path = tmp_path / "entities" / "part-00000-of-00001.parquet"
    assert write_table([ENTITY], "entities", path) == 1
    back = read_table(path.parent, "entities")
    assert back.schema.equals(SCHEMAS["entities"]) and back.to_pylist() == [ENTITY]
    with pytest.raises(SchemaMismatch, match="extra columns"):
        write_table([{**ENTITY, "bogus": 1}], "entities", path)
    missing = dict(ENTITY)
    del missing["label"]
    with pytest.raises(SchemaMismatch, match="missing"):
        write_table([missing], "entities", path)
    with pytest.raises(SchemaMismatch):
        write_table(pa.table({"qid": ["Q1"]}), "entities", path)
    with pytest.raises(SchemaMismatch):
        write_table([{**ENTITY, "sitelinks": "many"}], "entities", path)
    # the failed writes left the good file untouched and no temp files behind
    assert read_table(path.parent, "entities").num_rows == 1
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_kill_between_temp_and_rename_leaves_no_visible_part(tmp_path: Path):
    """SIGKILL a writer after its temp file is complete but before the rename: readers see nothing."""
    target = tmp_path / "claims" / "part-00000-of-00001.parquet"
    code = textwrap.dedent(f"""
        import os, signal
        import storage.parquet_io as pio
        real_replace = os.replace
        def die(src, dst):
            os.kill(os.getpid(), signal.SIGKILL)
        pio.os.replace = die
        rows = [{{"subject": "Q1", "property": "P31", "object_qid": "Q5", "object_value": None,
                  "datatype": "wikibase-item", "rank": "normal", "source": "t"}}] * 1000
        from pathlib import Path
        pio.write_table(rows, "claims", Path({str(target)!r}))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    leftovers = list(target.parent.iterdir())
    assert leftovers and all(".tmp-" in p.name for p in leftovers)  # the temp file was written...
    assert part_files(target.parent) == []  # ...but no part is visible
    assert read_table(target.parent, "claims").num_rows == 0
    write_table([], "claims", target)  # a re-run publishes normally
    assert part_files(target.parent) == [target]


def test_part_writer_streams_and_aborts(tmp_path: Path):
    path = tmp_path / "aliases" / layout.part_name(0, 1)
    with PartWriter("aliases", path, batch_rows=10) as w:
        for i in range(95):
            w.add({"qid": f"Q{i}", "alias": f"a{i}", "lang": "en"})
    assert read_table(path).num_rows == 95
    bad = tmp_path / "aliases2" / layout.part_name(0, 1)
    with pytest.raises(RuntimeError):
        with PartWriter("aliases", bad, batch_rows=10) as w:
            for i in range(25):
                w.add({"qid": f"Q{i}", "alias": "x", "lang": "en"})
            raise RuntimeError("boom")
    assert not bad.exists() and not any(bad.parent.iterdir())


def test_layout_paths_and_names(home: Path):
    assert layout.home() == home.resolve()
    assert layout.kb_table_dir("sample-1a2b3c4d", "entities") == home / "kb" / "sample-1a2b3c4d" / "entities"
    assert layout.part_name(3, 8) == "part-00003-of-00008.parquet"
    assert layout.run_dir("ela-webqsp-el-test-0011aabb") == home / "runs" / "ela-webqsp-el-test-0011aabb"
    for bad in ("../etc", "a/b", "", "..", "x" * 300, "a b", "/abs"):
        with pytest.raises(layout.LayoutError):
            layout.safe_name(bad)
    assert not layout.inside_home(home / ".." / "x")
    assert layout.inside_home(home / "kb" / "v")


def test_manifest_redacts_secrets(tmp_path: Path):
    write_manifest(tmp_path, {"config": {"api_key": "sk-planted", "model": "m", "nested": [{"token": "t"}]}})
    m = read_manifest(tmp_path)
    assert m["config"]["api_key"] == "***" and m["config"]["nested"][0]["token"] == "***"
    assert "sk-planted" not in (tmp_path / "manifest.json").read_text()
    assert redact({"password": None}) == {"password": None}


def test_catalog_views_only_over_published_versions(home: Path):
    v1 = layout.kb_dir("v1")
    write_table([ENTITY], "entities", v1 / "entities" / layout.part_name(0, 1))
    refresh_catalog()
    con = duckdb.connect(str(layout.catalog_path()), read_only=True)
    names = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
    for t in (*KB_TABLES, "questions", "predictions", "metrics", "runs"):
        assert t in names
        if t != "runs":
            assert f"latest_{t}" in names
    # v1 has no manifest yet: it is unfinished, so invisible
    assert con.execute("select count(*) from entities").fetchone()[0] == 0
    con.close()
    write_manifest(v1, {"kind": "kb"})
    v2_part = layout.kb_dir("v2") / "entities" / layout.part_name(0, 1)
    write_table([{**ENTITY, "qid": "Q1"}, ENTITY], "entities", v2_part)
    write_manifest(layout.kb_dir("v2"), {"kind": "kb"})
    refresh_catalog()
    con = duckdb.connect(str(layout.catalog_path()), read_only=True)
    assert con.execute("select count(*) from entities").fetchone()[0] == 3
    assert con.execute("select kb_version, count(*) from latest_entities group by 1").fetchall() == [("v2", 2)]
    assert con.execute("select count(*) from claims").fetchone()[0] == 0
    con.close()
    # an in-memory connection gives the same views without touching the file lock
    mem = duckdb.connect()
    build_views(mem)
    assert mem.execute("select count(*) from latest_entities").fetchone()[0] == 2


def test_catalog_refresh_is_atomic_while_a_reader_holds_it(home: Path):
    refresh_catalog()
    reader = duckdb.connect(str(layout.catalog_path()), read_only=True)
    try:
        refresh_catalog()  # renames a new file over the old one; the reader keeps its snapshot
        assert reader.execute("select count(*) from entities").fetchone()[0] == 0
    finally:
        reader.close()
    assert not [p for p in home.iterdir() if p.name.startswith("catalog.tmp")]
    assert os.path.getsize(layout.catalog_path()) > 0


def test_a_spilling_query_creates_the_parent_of_its_spill_folder(tmp_path: Path):
    """DuckDB creates ``temp_directory`` only when it first spills, and only its last level: a spill folder under a
    folder nobody created failed with "Failed to create directory" (kg-oxigraph at 1 M entities). Grouping 3 M
    distinct strings under 64 MB spills (without the parent it fails with that error); it must run."""
    spill = tmp_path / "not-yet" / "duckdb-0"
    con = spilling_connection("64MB", spill, threads=1)
    try:
        rows = con.sql("SELECT count(*), sum(n) FROM (SELECT s, count(*) AS n FROM "
                       "(SELECT md5(range::VARCHAR) AS s FROM range(3000000)) GROUP BY s)").fetchall()
    finally:
        con.close()
    assert rows == [(3_000_000, 3_000_000)]
    assert (tmp_path / "not-yet").is_dir()


def test_a_view_scans_the_files_of_one_source_together(tmp_path: Path):
    """``register_parquet_view`` reads the files that share their tags (every shard of one input) with one
    ``read_parquet`` and unions only the tag groups: a UNION ALL branch per file multiplied a GROUP BY's memory
    (the claims merge of 22 staged shards ran out of 2 GB at 1 M entities in make bench-scale). Rows and tags are
    those of the files, including a group whose files list their columns in another order."""
    files = []
    for i in range(5):
        f = tmp_path / f"s{i}.parquet"
        cols = {"qid": [f"Q{i}1", f"Q{i}2"], "n": [i, i]}
        pq.write_table(pa.table(cols if i % 2 else dict(reversed(cols.items()))), f)
        files.append((f, {"prio": 0 if i < 3 else 1, "_src": "dump" if i < 3 else "triples"}))
    con = duckdb.connect()
    register_parquet_view(con, "stg", files, "entities", tmp_path)
    plan = "\n".join(str(r[1]) for r in con.sql("EXPLAIN SELECT * FROM stg").fetchall())
    assert plan.count("READ_PARQUET") == 2 or plan.count("PARQUET_SCAN") == 2, plan
    rows = con.sql("SELECT qid, n, prio, _src FROM stg ORDER BY qid").fetchall()
    assert rows == [(f"Q{i}{j}", i, 0 if i < 3 else 1, "dump" if i < 3 else "triples") for i in range(5)
                    for j in (1, 2)]
