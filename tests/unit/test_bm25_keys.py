"""The KB's BM25 builders keep no set of seen keys when DuckDB finds the keys unique (flat memory at scale).

A set of 115 M QID strings is ~10 GB of Python objects; ``keys_unique`` (``sql/search/duplicate_keys.sql``)
groups the keys in DuckDB under a memory limit instead, and a table with a duplicated key falls back to the set.
"""

from __future__ import annotations

from pathlib import Path

from storage import layout
from storage.parquet_io import write_table
from tasks.search.bm25 import read_meta
from tasks.search.entity_index import EntityIndex
from tasks.search.kb_indexes import ensure_index, keys_unique


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


def test_kb_index_workers_are_tantivy_threads_and_change_no_hit(kb_home: str, tmp_path: Path) -> None:
    """``kb index --workers 3`` (``build_kb_index``) builds passage-bm25 with 3 indexing threads; same hits as 1."""
    from tasks.index_tasks import build_kb_index
    from tasks.search.passages import PassageIndex

    root = layout.home()
    other = tmp_path / "home"  # a second LINKEDQA_HOME that sees the same KB tables
    (other / "kb").mkdir(parents=True)
    (other / "kb" / kb_home).symlink_to(root / "kb" / kb_home)
    one = PassageIndex.open(ensure_index(kb_home, "passage-bm25", root)["folder"])
    res = build_kb_index(kb_home, "passage-bm25", other, workers=3)
    three = PassageIndex.open(res["folder"])
    assert res["built"] and three.meta["threads"] == 3 and three.meta["segments"] > 1
    assert len(three) == len(one) > 10_000
    texts = [h.text for h in one.search_many(["Barack Obama", "river in France"], 50)[0]]
    queries = [" ".join(t.split()[:8]) for t in texts] + ["the", "Barack Obama", "capital of Utah"]
    assert one.search_many(queries, 10) == three.search_many(queries, 10)
