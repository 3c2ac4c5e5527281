"""The KB's BM25 builders keep no set of seen keys when DuckDB finds the keys unique (flat memory at scale).

A set of 115 M QID strings is ~10 GB of Python objects; ``keys_unique`` (``sql/search/duplicate_keys.sql``)
groups the keys in DuckDB under a memory limit instead, and a table with a duplicated key falls back to the set.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import layout
from storage.parquet_io import part_files, write_table
from tasks.search.bm25 import DOCS, read_meta
from tasks.search.entity_index import EntityIndex
from tasks.search.kb_indexes import _writer, ensure_index, keys_unique


def test_sample_kb_keys_are_unique_and_the_entity_index_keeps_no_set(kb_home: str, tmp_path: Path) -> None:
    root = layout.home()
    assert keys_unique(kb_home, "entities", "qid", root, tmp_path)
    assert keys_unique(kb_home, "passages", "passage_id", root, tmp_path)
    assert not list(tmp_path.iterdir())  # the spill folder is gone
    res = ensure_index(kb_home, "entity-bm25", root)
    meta = read_meta(Path(res["folder"]))
    assert meta["dedupe"] == "keys checked unique by the caller" and meta["doc_count"] > 100_000


def test_a_duplicated_key_is_found_after_trimming_and_empty_keys_do_not_count(home: Path, tmp_path: Path) -> None:
    part = layout.kb_table_dir("dup-00000000", "entities", home) / "part-00000-of-00001.parquet"
    write_table([_row(q) for q in ("Q1", "Q2", "", "", " ")], "entities", part)
    assert keys_unique("dup-00000000", "entities", "qid", home, tmp_path)
    write_table([_row(q) for q in ("Q1", "Q2", " Q1")], "entities", part)
    assert not keys_unique("dup-00000000", "entities", "qid", home, tmp_path)


def test_the_sql_trims_exactly_what_python_strips(home: Path, tmp_path: Path) -> None:
    """Differential: for every character ``str.isspace()`` accepts (and two it does not), "Q1" padded with it on
    both sides is a duplicate of "Q1" in SQL exactly when ``str.strip()`` makes them equal."""
    part = layout.kb_table_dir("pad-00000000", "entities", home) / "part-00000-of-00001.parquet"
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    for ch in [*spaces, "\u200b", "x"]:  # zero-width space is not whitespace to Python
        write_table([_row("Q1"), _row(f"{ch}{ch}Q1{ch}")], "entities", part)
        same = f"{ch}{ch}Q1{ch}".strip() == "Q1"
        assert keys_unique("pad-00000000", "entities", "qid", home, tmp_path) is not same, repr(ch)
    assert len(spaces) == 29


def _row(qid: str) -> dict:
    return {"qid": qid, "label": "x", "description": None, "aliases": [], "enwiki_title": None, "instance_of": [],
            "sitelinks": 0, "source": "test"}


def test_without_the_check_the_builder_remembers_keys(tmp_path: Path) -> None:
    rows = [{"qid": "Q1", "label": "one"}, {"qid": "Q1", "label": "again"}, {"qid": "Q2", "label": "two"}]
    idx = EntityIndex.build(tmp_path / "set", rows)
    assert len(idx) == 2 and idx.meta["stats"]["duplicates_skipped"] == 1
    assert idx.meta["dedupe"] == "set of seen keys"


def _other_home(kb_version: str, tmp_path: Path) -> Path:
    """A second LINKEDQA_HOME that sees the same KB tables (and none of the first one's indexes)."""
    other = tmp_path / "home"
    (other / "kb").mkdir(parents=True)
    (other / "kb" / kb_version).symlink_to(layout.home() / "kb" / kb_version)
    return other


def _docs_table(folder: str) -> pa.Table:
    return pa.ipc.open_file(pa.memory_map(str(Path(folder) / DOCS), "r")).read_all()


def test_kb_index_workers_are_tantivy_threads_and_change_no_hit(kb_home: str, tmp_path: Path) -> None:
    """``kb index --workers 4`` (``build_kb_index``) builds passage-bm25 with 4 indexing threads; same documents,
    rows and hits as 1. The sample's passages are one row group, too few for worker processes (built here)."""
    from tasks.index_tasks import build_kb_index
    from tasks.search.passages import PassageIndex

    one = PassageIndex.open(ensure_index(kb_home, "passage-bm25", layout.home())["folder"])
    res = build_kb_index(kb_home, "passage-bm25", _other_home(kb_home, tmp_path), workers=4)
    many = PassageIndex.open(res["folder"])
    assert res["built"] and many.meta["threads"] == 4 and many.meta["segments"] > 1
    assert many.meta["workers"] == 1 == one.meta["workers"]  # 1 row group < MIN_UNITS_PER_WORKER x 4
    assert _writer(3, processes_from=4)["workers"] == 1 and _writer(3)["workers"] == 3
    assert len(many) == len(one) > 10_000 and many.meta["stats"] == one.meta["stats"]
    assert _docs_table(res["folder"]).equals(_docs_table(one.folder))
    texts = [h.text for h in one.search_many(["Barack Obama", "river in France"], 50)[0]]
    queries = [" ".join(t.split()[:8]) for t in texts] + ["the", "Barack Obama", "capital of Utah"]
    assert one.search_many(queries, 10) == many.search_many(queries, 10)


_KINDS = {  # index class, KB table, columns, row transform, rows per regrouped row group, query column
    "entity-bm25": ("EntityIndex", "entities", ("qid", "label", "description", "aliases", "enwiki_title",
                                                "sitelinks"), "entity_docs", 20_000, "label"),
    "title-bm25": ("TitleIndex", "articles", ("page_id", "title", "qid", "lead"), None, 50, "title"),
    "passage-bm25": ("PassageIndex", "passages", ("passage_id", "page_id", "title", "qid", "text"), None, 2_000,
                     "text"),
}


@pytest.mark.parametrize("kind", list(_KINDS))
def test_documents_built_by_processes_are_those_of_one_process(kb_home: str, tmp_path: Path, kind: str) -> None:
    """A KB table's real rows in >= 5 row groups, turned into documents by 2 worker processes: the documents
    come back in input order (same docs.arrow rows, same counters) and every hit is the one-process index's.
    title-bm25 has an integer field (page_id), entity-bm25 a row transform run in the workers."""
    from tasks.search import entity_index, kb_indexes, passages, title_index
    from tasks.search.bm25 import MIN_UNITS_PER_WORKER, ParquetRows

    cls_name, table, cols, transform, group_rows, query_col = _KINDS[kind]
    cls = next(getattr(m, cls_name) for m in (entity_index, passages, title_index) if hasattr(m, cls_name))
    rows = pq.read_table(part_files(layout.kb_table_dir(kb_home, table, layout.home())), columns=list(cols))
    part = tmp_path / f"{table}.parquet"
    pq.write_table(rows, part, row_group_size=group_rows)
    source = ParquetRows((str(part),), cols, getattr(kb_indexes, transform) if transform else None)
    assert len(source.units()) >= max(5, MIN_UNITS_PER_WORKER * 2)  # so the order is at stake
    one = cls.build(tmp_path / "one", source, keys_unique=True)
    two = cls.build(tmp_path / "two", source, workers=2, keys_unique=True)
    assert (one.meta["workers"], two.meta["workers"]) == (1, 2)
    assert two.meta["stats"] == one.meta["stats"] and len(one) > 200
    docs = _docs_table(str(one.folder))
    assert _docs_table(str(two.folder)).equals(docs)
    queries = [" ".join((t or "").split()[:8]) for t in docs.column(query_col).to_pylist()[::max(1, len(docs) // 1500)]]
    assert one.search_many(queries, 10) == two.search_many(queries, 10)


def _fail_on(rows: Iterable[dict], qid: str) -> list[dict]:
    """A row transform that fails on the row group holding ``qid`` (run in a worker process)."""
    rows = list(rows)
    if any(r["qid"] == qid for r in rows):
        raise RuntimeError(f"row group with {qid} refused")
    return rows


def _die_on(rows: Iterable[dict], qid: str) -> list[dict]:
    """A row transform whose worker process is killed (as by the OOM killer) on the row group holding ``qid``."""
    rows = list(rows)
    if any(r["qid"] == qid for r in rows):
        os.kill(os.getpid(), signal.SIGKILL)
    return rows


@pytest.mark.parametrize("transform, error", [(_fail_on, "refused"), (_die_on, "terminated abruptly")])
def test_a_failed_row_group_fails_the_build_and_leaves_no_worker_or_folder(kb_home: str, tmp_path: Path,
                                                                           transform, error: str) -> None:
    """A worker's error, or its death, reaches the caller (no hang); the pool is gone and no (temporary) index
    folder is left; the same rows then build with 2 processes."""
    import functools
    import multiprocessing.resource_tracker

    import psutil

    from tasks.search.bm25 import ParquetRows

    rows = pq.read_table(part_files(layout.kb_table_dir(kb_home, "entities", layout.home()))[0],
                         columns=["qid", "label", "aliases"]).slice(0, 600).to_pylist()
    part = tmp_path / "entities.parquet"
    pq.write_table(pa.Table.from_pylist(rows), part, row_group_size=100)  # 6 row groups of real rows
    cols = ("qid", "label", "aliases")
    source = ParquetRows((str(part),), cols, functools.partial(transform, qid=rows[350]["qid"]))
    folder = tmp_path / "index"
    multiprocessing.resource_tracker.ensure_running()  # a child of the first spawn pool, which stays
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(Exception, match=error) as exc:
        EntityIndex.build(folder, source, workers=2, keys_unique=True)
    assert exc.type is BrokenProcessPool or type(exc.value.__cause__).__name__ == "_RemoteTraceback"  # a worker's
    assert not folder.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["entities.parquet"]
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
    idx = EntityIndex.build(folder, ParquetRows((str(part),), cols), workers=2, keys_unique=True)
    assert idx.meta["workers"] == 2 and len(idx) == sum(1 for r in rows if r["label"] or r["aliases"])
