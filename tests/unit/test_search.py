"""Search indexes on real data: LiterallyWikidata labels/aliases, vital-article titles, Wikipedia passages."""

from __future__ import annotations

import csv
import gzip
import json
import os
import random
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tasks.search import bm25
from tasks.search.bm25 import IndexKindMismatch, IndexNotFound, SearchIndexError, query_key, raw_key
from tasks.search.entity_index import Candidate, EntityIndex
from tasks.search.passages import DenseIndex, PassageIndex, entity_texts
from tasks.search.title_index import TitleIndex, base_title

N_ENTITIES = 59_724


def _read_tsv(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if "\t" in line:
                qid, value = line.split("\t", 1)
                out[qid] = value
    return out


@pytest.fixture(scope="module")
def entity_rows(data_root: Path) -> list[dict]:
    folder = data_root / "literallywikidata" / "Entities"
    labels = _read_tsv(folder / "entity_labels_en.txt")
    aliases = {q: [a for a in v.split(", ") if a] for q, v in _read_tsv(folder / "entity_aliases_en.txt").items()}
    descriptions = _read_tsv(folder / "entity_wikidata_descriptions_en.txt")
    return [
        {"qid": q, "label": label, "description": descriptions.get(q), "aliases": aliases.get(q, [])}
        for q, label in labels.items()
    ]


@pytest.fixture(scope="module")
def entity_index(entity_rows: list[dict], tmp_path_factory: pytest.TempPathFactory) -> EntityIndex:
    folder = tmp_path_factory.mktemp("idx") / "entities"
    return EntityIndex.build(folder, entity_rows)


@pytest.fixture(scope="module")
def vital_rows(data_root: Path) -> list[dict]:
    path = data_root / "wikipedia-vital-articles" / "vital_articles_entities_2019.csv.gz"
    with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
        return [{"qid": r[0], "title": r[1]} for r in csv.reader(fh, delimiter=";") if len(r) >= 2]


# ------------------------------------------------------------------------------------------ EntityIndex
def test_entity_index_build_is_atomic_and_refuses_a_finished_folder(entity_index: EntityIndex,
                                                                   entity_rows: list[dict]) -> None:
    folder = entity_index.folder
    meta = json.loads((folder / "_done.json").read_text())
    assert meta["doc_count"] == N_ENTITIES == len(entity_index)
    assert meta["stats"]["rows_in"] == N_ENTITIES and meta["stats"]["duplicates_skipped"] == 0
    assert meta["size_bytes"] > 1_000_000 and meta["build_s"] > 0
    assert not [p for p in folder.parent.iterdir() if ".building-" in p.name]
    # whether to build is the caller's decision (kb_indexes.ensure_index): a second build is refused, nothing
    # rewritten, and the folder opens as before
    before = (folder / "_done.json").stat().st_mtime_ns
    with pytest.raises(SearchIndexError, match="already holds a finished entity-bm25 index"):
        EntityIndex.build(folder, iter(()))
    assert (folder / "_done.json").stat().st_mtime_ns == before
    assert len(EntityIndex.open(folder)) == N_ENTITIES


def test_sampled_labels_come_back_at_rank_1(entity_index: EntityIndex, entity_rows: list[dict]) -> None:
    rng = random.Random(20240601)
    sample = rng.sample(entity_rows, 400)
    results = entity_index.search_many([r["label"] for r in sample], k=50)
    hit1 = sum(bool(res) and res[0].qid == r["qid"] for r, res in zip(sample, results, strict=True)) / 400
    hit50 = sum(any(c.qid == r["qid"] for c in res) for r, res in zip(sample, results, strict=True)) / 400
    # misses at rank 1 are labels shared by several entities (no popularity in this source)
    same_label = sum(bool(res) and res[0].title == r["label"] for r, res in zip(sample, results, strict=True)) / 400
    assert hit1 >= 0.95, hit1
    assert same_label >= 0.99, same_label
    assert hit50 >= 0.99, hit50
    assert all(len(res) <= 50 for res in results)


def test_alias_only_queries(entity_index: EntityIndex, entity_rows: list[dict]) -> None:
    labels = Counter(r["label"].casefold() for r in entity_rows)
    owners = Counter(a.casefold() for r in entity_rows for a in r["aliases"])
    pool = [
        (a, r["qid"])
        for r in entity_rows
        for a in r["aliases"]
        if len(a) > 3 and labels[a.casefold()] == 0 and owners[a.casefold()] == 1
    ]
    sample = random.Random(7).sample(pool, 300)
    results = entity_index.search_many([a for a, _ in sample], k=10)
    hit10 = sum(any(c.qid == q for c in res) for (_, q), res in zip(sample, results, strict=True)) / 300
    assert hit10 >= 0.88, hit10  # 0.91 measured; misses are mostly aliases the comma-separated file split
    assert entity_index.search("Beantown", 5)[0].qid == "Q100"


def test_label_match_outranks_alias_match(entity_index: EntityIndex) -> None:
    top = entity_index.search("Boston", 10)
    assert top[0] == Candidate("Q100", "Boston", top[0].description, top[0].score)
    assert top[0].description and "Massachusetts" in top[0].description
    assert entity_index.search("Gabon", 3)[0].qid == "Q1000"


def test_query_terms_add_up_across_label_and_aliases(entity_index: EntityIndex) -> None:
    # "kennedy" is in the label of Jacqueline Kennedy Onassis, "jackie" only in her aliases; scored per field
    # (one disjunction-max over the whole query), the entities labelled "Jackie ..." all outranked her
    top = [c.qid for c in entity_index.search("jackie kennedy", 10)]
    assert "Q165421" in top[:3], top
    # a one-term query ranks exactly as the whole-query disjunction-max did
    before = type("WholeQuery", (EntityIndex,), {"PER_TERM": False}).open(entity_index.folder)
    for query in ("Kennedy", "Boston", "jackie", "Beantown"):
        assert entity_index.search(query, 20) == before.search(query, 20)
    assert "Q165421" not in [c.qid for c in before.search("jackie kennedy", 10)]


@pytest.mark.parametrize(
    "query",
    [
        '"Boston"',
        "Star Wars: The (Clone) Wars",
        "AND OR NOT",
        "label:Boston)",
        "a*b?",
        "((",
        '"',
        "x AND",
        "-+~^",
    ],
)
def test_query_syntax_never_raises(entity_index: EntityIndex, query: str) -> None:
    hits = entity_index.search_many([query], k=5)[0]
    assert isinstance(hits, list) and len(hits) <= 5


def test_user_text_is_plain_text(entity_index: EntityIndex) -> None:
    assert entity_index.search('"Boston"', 1)[0].qid == "Q100"
    assert entity_index.search("Star Wars: The (Clone) Wars", 1)[0].title == "Star Wars: The Clone Wars"
    assert entity_index.search("label:Boston", 1)[0].qid == "Q100"


@pytest.mark.parametrize("query", ["", "   ", "!!!", "*", ":()", "—"])
def test_empty_or_punctuation_query_returns_nothing(entity_index: EntityIndex, query: str) -> None:
    assert entity_index.search_many([query], k=50) == [[]]
    assert query_key(query) == ""


def test_batched_equals_per_query(entity_index: EntityIndex, entity_rows: list[dict]) -> None:
    queries = [r["label"] for r in random.Random(3).sample(entity_rows, 60)] + ["", "Boston", "new york"]
    batched = entity_index.search_many(queries, k=20)
    assert batched == [entity_index.search(q, 20) for q in queries]
    assert entity_index.search_many([], k=5) == []
    assert entity_index.search_many(["Boston"], k=0) == [[]]


def test_popularity_breaks_ties_and_qids_are_deduplicated(entity_rows: list[dict], tmp_path: Path) -> None:
    by_label: dict[str, list[dict]] = {}
    for r in entity_rows:
        by_label.setdefault(r["label"], []).append(r)
    twins = by_label["Star Wars: The Clone Wars"]
    assert len(twins) == 2
    a, b = twins
    rows = [
        {**a, "aliases": [], "sitelinks": 3},
        {**b, "aliases": [], "sitelinks": 40},
        {**a, "label": "a duplicate QID row, skipped"},
    ]
    idx = EntityIndex.build(tmp_path / "twins", rows)
    assert len(idx) == 2 and idx.meta["stats"]["duplicates_skipped"] == 1
    hits = idx.search("Star Wars: The Clone Wars", 5)
    assert [h.qid for h in hits] == [b["qid"], a["qid"]]
    assert hits[0].score == hits[1].score


def test_a_bm25_index_published_by_a_concurrent_builder_counts_as_built(tmp_path: Path, entity_rows: list[dict],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``ensure_index`` decides once; when another process publishes the index while this one builds, this build's
    refusal to overwrite it is taken as built, and any other refusal is raised."""
    from storage import layout
    from tasks.search import kb_indexes

    folder = layout.index_kind_dir("v-00000000", "entity-bm25", tmp_path)

    def racing(kb_version: str, root: Path, threads: int) -> None:
        EntityIndex.build(folder, entity_rows[:200])  # the other process, finishing first
        EntityIndex.build(folder, entity_rows[:200])  # this one: refused

    monkeypatch.setitem(kb_indexes._BUILDERS, "entity-bm25", (racing, bm25.is_built))
    res = kb_indexes.ensure_index("v-00000000", "entity-bm25", tmp_path)
    assert res["built"] is False and len(EntityIndex.open(folder)) == 200

    junk = layout.index_kind_dir("w-00000000", "entity-bm25", tmp_path)

    def refused(kb_version: str, root: Path, threads: int) -> None:
        junk.mkdir(parents=True)
        (junk / "file.txt").write_text("not an index")
        EntityIndex.build(junk, entity_rows[:10])

    monkeypatch.setitem(kb_indexes._BUILDERS, "entity-bm25", (refused, bm25.is_built))
    with pytest.raises(SearchIndexError, match="not empty|no done-marker"):
        kb_indexes.ensure_index("w-00000000", "entity-bm25", tmp_path)


def test_open_and_build_errors(tmp_path: Path, vital_rows: list[dict]) -> None:
    with pytest.raises(IndexNotFound):
        EntityIndex.open(tmp_path / "missing")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file.txt").write_text("not an index")
    with pytest.raises(SearchIndexError):
        EntityIndex.build(tmp_path / "junk", [])
    assert (tmp_path / "junk" / "file.txt").exists()  # never deleted
    titles = TitleIndex.build(tmp_path / "titles", vital_rows[:50])
    with pytest.raises(IndexKindMismatch):
        EntityIndex.open(titles.folder)


def test_failed_build_leaves_nothing(tmp_path: Path, entity_rows: list[dict]) -> None:
    def rows():
        yield from entity_rows[:100]
        raise RuntimeError("input broke")

    with pytest.raises(RuntimeError):
        EntityIndex.build(tmp_path / "broken", rows())
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------- TitleIndex
def test_title_index_finds_each_title_at_rank_1(vital_rows: list[dict], tmp_path: Path) -> None:
    idx = TitleIndex.build(tmp_path / "titles", vital_rows)
    assert idx.meta["doc_count"] == len({r["title"] for r in vital_rows})
    sample = random.Random(11).sample(vital_rows, 500)
    results = idx.search_many([r["title"] for r in sample])
    assert all(len(res) <= 35 for res in results)  # ELA QA setup: k = 35 by default
    hit1 = sum(res[0].qid == r["qid"] for r, res in zip(sample, results, strict=True)) / len(sample)
    assert hit1 >= 0.99, hit1
    first = results[0][0]
    assert first.page_id is None and first.description is None  # this source has neither
    top = [c.title for c in idx.search("Mercury", 5)]
    assert {"Mercury (planet)", "Mercury (element)"} <= set(top[:3])
    assert idx.search("Oklahoma!", 1)[0].title == "Oklahoma!"
    assert idx.search("Oklahoma", 1)[0].title == "Oklahoma"
    assert base_title("Mercury (planet)") == "Mercury" and base_title("(Untitled)") == "(Untitled)"


def test_title_hits_do_not_depend_on_the_row_order(vital_rows: list[dict], tmp_path: Path) -> None:
    """The same titles indexed in order and reversed: the same hits in the same order (ties by title)."""
    forward = TitleIndex.build(tmp_path / "forward", vital_rows)
    backward = TitleIndex.build(tmp_path / "backward", vital_rows[::-1])
    queries = [r["title"].split()[0] for r in random.Random(3).sample(vital_rows, 300)] + ["List", "River"]
    one, other = forward.search_many(queries, 10), backward.search_many(queries, 10)
    assert sum(len({h.score for h in hits}) < len(hits) for hits in one) >= 50  # many lists hold ties
    assert [[(h.title, h.score) for h in hits] for hits in one] == [[(h.title, h.score) for h in hits]
                                                                    for hits in other]


def test_title_index_rows_without_qid(tmp_path: Path) -> None:
    rows = [
        {"title": "Anarchism", "page_id": 12, "qid": None, "lead": "Anarchism is a political philosophy."},
        {"title": "Albedo", "page_id": 39, "qid": "Q101038", "lead": "Albedo is the fraction of light."},
    ]
    idx = TitleIndex.build(tmp_path / "t", rows)
    hit = idx.search("anarchism", 3)[0]
    assert (hit.qid, hit.page_id, hit.title) == (None, 12, "Anarchism")
    assert hit.description == "Anarchism is a political philosophy."


# ----------------------------------------------------------------------------------------- PassageIndex
def _passages(data_root: Path) -> list[dict]:
    """100-word passages of real Wikipedia article chunks (QALD-10 RAG sample)."""
    out = []
    with open(data_root / "qald-10" / "wikipedia" / "wikipedia_short.csv", encoding="utf-8", newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            words = row["text"].split()
            for j in range(0, len(words), 100):
                out.append(
                    {
                        "passage_id": f"{i}-{j // 100}",
                        "title": row["title"],
                        "qid": row["id"],
                        "text": " ".join(words[j : j + 100]),
                    }
                )
    return out


def test_passage_index(data_root: Path, tmp_path: Path) -> None:
    passages = _passages(data_root)
    assert len(passages) > 80
    idx = PassageIndex.build(tmp_path / "passages", passages)
    assert len(idx) == len(passages)
    # a 12-word window of each passage retrieves that passage first
    rng = random.Random(5)
    queries, expected = [], []
    for p in passages:
        words = p["text"].split()
        if len(words) < 40:
            continue
        start = rng.randrange(0, len(words) - 12)
        queries.append(" ".join(words[start : start + 12]))
        expected.append(p["passage_id"])
    results = idx.search_many(queries)
    assert all(len(r) <= 4 for r in results)  # default k = 4 (Entity Retrieval baselines)
    hit1 = sum(r[0].passage_id == e for r, e in zip(results, expected, strict=True)) / len(expected)
    assert hit1 >= 0.9, hit1
    hit = idx.search("What is the capital of Utah?", 4)
    assert any(h.title == "Salt Lake City" for h in hit)
    assert hit[0].qid and hit[0].text and hit[0].score > 0
    assert idx.search_many(["", "?"], 4) == [[], []]


def _query_key_per_character(text: str | None) -> str:
    """The rule ``query_key`` implements, character by character (its implementation before the fast path)."""
    if not text:
        return ""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    chars = [" " if not c.isalnum() else c for c in decomposed if not unicodedata.combining(c)]
    return " ".join("".join(chars).split())


def test_query_key_equals_the_per_character_rule(entity_rows: list[dict]) -> None:
    """Every code point alone and between letters, and every LiterallyWikidata label and alias."""
    points = [chr(i) for i in range(sys.maxunicode + 1) if not 0xD800 <= i <= 0xDFFF]
    texts = points + [f"a{c}b" for c in points[::3]] + [f"Ab {c}\u0301x_y" for c in points[1::7]]
    texts += [r["label"] for r in entity_rows] + [a for r in entity_rows for a in r["aliases"]]
    texts += ["", "Crème Brûlée", "İstanbul", "ﬁve ½ Ⅻ", "straße", "snake_case", "Ǆemal", "x\u200by"]
    assert sum(not t.isascii() for t in texts) > 1_000_000
    assert [query_key(t) for t in texts] == [_query_key_per_character(t) for t in texts]


def test_entity_hits_do_not_depend_on_the_index_layout(entity_index: EntityIndex, entity_rows: list[dict],
                                                       tmp_path: Path) -> None:
    """Same documents, one segment against several (3 writer threads) built from the rows shuffled: the same
    hits, in the same order.

    tantivy breaks equal scores by (segment, doc id); ``search_many`` fetches the whole tie group at the k-th
    score and orders it by popularity and QID, so neither the layout nor the order of the input rows (a KB's
    tables come out of DuckDB's parallel merge in another order each build) can change which entities make the
    cut or their order. Ordered by row instead, the two indexes disagree (two cold builds of the sample KB: 1,261
    of the 1,603 WebQSP-EL test gold mentions got another top-50).
    """
    shuffled = random.Random(5).sample(entity_rows, len(entity_rows))
    threaded = EntityIndex.build(tmp_path / "threaded", shuffled, threads=3, heap_mb=45)
    assert entity_index.meta["segments"] == 1 and threaded.meta["segments"] > 1
    rng = random.Random(11)
    # first words of labels: short queries with large groups of equal scores (many "John ..." entities)
    queries = [r["label"].split()[0] for r in rng.sample(entity_rows, 400)] + ["John", "Paris", "river"]
    k = 10
    limit = bm25.first_fetch(k)
    straddling = 0
    for q in queries:
        raw = entity_index._searcher.search(entity_index._query(query_key(q), raw_key(q)), limit, count=False).hits
        straddling += len(raw) == limit and raw[-1][0] == raw[k - 1][0]
    assert straddling >= 10  # the tie group at the k-th score is longer than the first fetch: refetched
    one = [[(h.qid, h.score) for h in hits] for hits in entity_index.search_many(queries, k, threads=1)]
    many = [[(h.qid, h.score) for h in hits] for hits in threaded.search_many(queries, k, threads=4)]
    assert one == many


def test_entity_hits_do_not_depend_on_the_search_threads(entity_index: EntityIndex, entity_rows: list[dict],
                                                         monkeypatch) -> None:
    """A batch searched on 1, 2 or 5 threads (chunks of unequal size, ``$LINKEDQA_SEARCH_THREADS`` or the argument)
    gives the same hits in the same order, per query, as each query searched alone."""
    rng = random.Random(3)
    queries = [r["label"] for r in rng.sample(entity_rows, 150)] + ["", "John", "!!", "Paris"] * 3
    alone = [entity_index.search_many([q], k=7, threads=1)[0] for q in queries]
    assert entity_index.search_many(queries, k=7, threads=1) == alone
    assert entity_index.search_many(queries, k=7, threads=5) == alone
    monkeypatch.setenv(bm25.SEARCH_THREADS_ENV, "2")
    assert bm25.search_threads() == 2
    assert EntityIndex.open(entity_index.folder).search_many(queries, k=7) == alone
    for bad in ("0", "-1", "two"):
        monkeypatch.setenv(bm25.SEARCH_THREADS_ENV, bad)
        with pytest.raises(ValueError, match=bm25.SEARCH_THREADS_ENV):
            bm25.search_threads()


def test_tie_rank_is_built_and_rebuilt_at_open_when_missing(entity_rows: list[dict], tmp_path: Path) -> None:
    """The build writes each document's tie-break rank; an index without the file gets the same ranks at open, the
    file written back for the next process, and the same hits."""
    rows = entity_rows[:3000]
    idx = EntityIndex.build(tmp_path / "e", rows)
    built = np.array(np.load(idx.folder / bm25.TIE_RANK))
    assert sorted(built.tolist()) == list(range(len(idx)))
    queries = [r["label"] for r in rows[:200]]
    hits = idx.search_many(queries, k=5)
    (idx.folder / bm25.TIE_RANK).unlink()
    reopened = EntityIndex.open(idx.folder)
    assert reopened.search_many(queries, k=5) == hits
    assert np.array_equal(np.load(idx.folder / bm25.TIE_RANK), built)
    docs = reopened._docs.to_pylist()
    ordered = sorted(range(len(docs)),
                     key=lambda i: (-(docs[i]["popularity"] or 0), len(docs[i]["qid"]), docs[i]["qid"]))
    assert built[ordered].tolist() == list(range(len(docs)))


def test_passage_ties_are_cut_by_passage_id_whatever_the_layout(data_root: Path, tmp_path: Path) -> None:
    """40 identical copies of each real passage score alike: the lowest ids win, in one segment or several, from
    the rows in order or reversed."""
    passages = _passages(data_root)[:60]
    copies = [{**p, "passage_id": f"{p['passage_id']}#{c}"} for c in range(40) for p in passages]
    one = PassageIndex.build(tmp_path / "one", copies)
    many = PassageIndex.build(tmp_path / "many", copies[::-1], threads=3, heap_mb=45)
    assert one.meta["segments"] == 1 and many.meta["segments"] > 1
    queries = [" ".join(p["text"].split()[:12]) for p in passages]
    for idx in (one, many):
        for p, hits in zip(passages, idx.search_many(queries, 4), strict=True):
            assert [h.passage_id for h in hits] == [f"{p['passage_id']}#{c}" for c in range(4)]


def test_the_tie_group_fetch_stops_at_its_cap(data_root: Path, tmp_path: Path, monkeypatch) -> None:
    """A tie group longer than ``_MAX_FETCH`` is cut there (bounded work), still ordered by passage id within it."""
    passage = _passages(data_root)[0]
    idx = PassageIndex.build(tmp_path / "copies", [{**passage, "passage_id": f"p#{c}"} for c in range(300)],
                             threads=3, heap_mb=45)
    query = " ".join(passage["text"].split()[:12])
    assert [h.passage_id for h in idx.search(query, 5)] == [f"p#{c}" for c in range(5)]  # 300 fetched
    monkeypatch.setattr(bm25, "_MAX_FETCH", 40)
    hits = idx.search(query, 5)
    assert len(hits) == 5 and len({h.score for h in hits}) == 1
    assert [int(h.passage_id[2:]) for h in hits] == sorted(int(h.passage_id[2:]) for h in hits)


# ------------------------------------------------------------------------------------------- DenseIndex
def test_dense_index_self_retrieval(entity_rows: list[dict], tmp_path: Path) -> None:
    sample = random.Random(2).sample(entity_rows, 2000)
    ids, texts = [r["qid"] for r in sample], [r["label"] for r in sample]
    folder = tmp_path / "dense"
    idx = DenseIndex.build(folder, ids, texts)
    meta = idx.meta
    assert meta["doc_count"] == 2000 and meta["dim"] == 384 and meta["encode_per_s"] > 0
    assert {"index.faiss", "ids.parquet", "_done.json"} <= set(os.listdir(folder))
    # self-retrieval: each label, encoded as a query, finds its own entity first (misses = duplicate labels)
    hits = idx.search_many(texts[:500], k=1)
    hit1 = sum(h[0].id == i for h, i in zip(hits, ids[:500], strict=True)) / 500
    assert hit1 >= 0.95, hit1
    stored = idx.search_vectors(idx._index.reconstruct_n(0, len(idx)), 1)  # all 2000, one FAISS call
    assert sum(h[0].id == i for h, i in zip(stored, ids, strict=True)) / len(ids) >= 0.95
    # batched == per-query, blank -> []
    queries = texts[:5] + ["", "   "]
    batched = idx.search_many(queries, k=3)
    assert batched[-2:] == [[], []]
    single = [idx.search(q, 3) for q in queries[:5]]
    assert [[h.id for h in s] for s in single] == [[h.id for h in b] for b in batched[:5]]
    # a finished folder is current for its own spec and opens without rebuilding
    assert DenseIndex.is_current(folder) and not DenseIndex.is_current(folder, side_table=True)
    assert not DenseIndex.is_current(folder, "ivfpq:nlist=16,m=8") and not DenseIndex.is_current(tmp_path / "none")
    assert len(DenseIndex.open(folder)) == 2000
    with pytest.raises(ValueError):
        DenseIndex.build(tmp_path / "bad", ["a", "a"], ["x", "y"])


def test_entity_texts(entity_rows: list[dict]) -> None:
    rows = entity_rows[:3] + [{"qid": "Q0", "label": ""}, {"qid": None, "label": "x"}]
    ids, texts = entity_texts(rows)
    assert ids == [r["qid"] for r in entity_rows[:3]]
    assert texts[0] == "Boston: city in and state capital of Massachusetts, United States"


# ----------------------------------------------------------------------- DenseIndex with a side table
def test_dense_index_from_docs_equals_build_and_serves_payloads(entity_rows: list[dict], tmp_path: Path) -> None:
    """``build_from_docs`` (rows streamed into a memory-mapped side table) gives the same vectors and hits as
    ``build`` over the same texts, and each hit's payload row."""
    import pyarrow as pa

    from tasks.search.passages import ArrowTexts

    sample = random.Random(5).sample(entity_rows, 1200)
    ids, texts = entity_texts(sample)
    schema = pa.schema([("qid", pa.string()), ("label", pa.string()), ("description", pa.string())])
    rows = [{"qid": r["qid"], "label": r["label"], "description": r.get("description")} for r in sample
            if r["qid"] in set(ids)]

    def render(t: pa.Table) -> list[str]:
        return [f"{lab.strip()}: {d.strip()}" if (d or "").strip() else lab.strip()
                for lab, d in zip(t.column("label").to_pylist(), t.column("description").to_pylist(), strict=True)]

    def batches():
        for i in range(0, len(rows), 400):  # streamed in batches, as from a KB table
            yield pa.RecordBatch.from_pylist(rows[i:i + 400], schema=schema)

    streamed = DenseIndex.build_from_docs(tmp_path / "docs", batches(), schema, render, id_column="qid")
    listed = DenseIndex.build(tmp_path / "list", ids, texts)
    assert (tmp_path / "docs" / "docs.arrow").is_file() and not (tmp_path / "list" / "docs.arrow").exists()
    assert streamed._ids.to_pylist() == ids
    assert np.allclose(streamed._index.reconstruct_n(0, len(ids)), listed._index.reconstruct_n(0, len(ids)),
                       atol=1e-6)
    queries = [r["label"] for r in rows[:60]]
    a, b = streamed.search_many(queries, k=5), listed.search_many(queries, k=5)
    assert [[h.id for h in x] for x in a] == [[h.id for h in x] for x in b]
    for hits in a:  # the payload of a hit is its row of the side table
        assert [p["qid"] for p in streamed.payload(hits)] == [h.id for h in hits]
        assert all(0 <= h.row < len(ids) for h in hits)
    assert streamed.payload([]) == []
    with pytest.raises(SearchIndexError, match="no docs.arrow"):
        listed.payload(b[0])

    # reopened: the side table is memory-mapped (no copy of it in Arrow's allocator)
    assert DenseIndex.is_current(tmp_path / "docs", side_table=True)
    before = pa.total_allocated_bytes()
    again = DenseIndex.open(tmp_path / "docs")
    assert pa.total_allocated_bytes() - before < again._docs.nbytes / 4
    assert again.payload(a[0]) == streamed.payload(a[0])

    # texts are rendered by position, in slices or by take
    at = ArrowTexts(again._docs, render)
    assert len(at) == len(ids) and at[3] == texts[3] and at[-1] == texts[-1] and at[10:13] == texts[10:13]
    assert at.take(np.array([0, 7])) == [texts[0], texts[7]]
    with pytest.raises(IndexError):
        at[len(ids)]

    # repeated ids: a clear error, and no folder left behind
    dup = pa.RecordBatch.from_pylist(rows[:2] + rows[:1], schema=schema)
    with pytest.raises(ValueError, match="unique"):
        DenseIndex.build_from_docs(tmp_path / "dup", iter([dup]), schema, render, id_column="qid")
    assert not (tmp_path / "dup").exists() and not list(tmp_path.glob(".dup.building-*"))


def test_dense_passage_index_of_a_kb_streams_its_passages(data_root: Path, tmp_path: Path) -> None:
    """``kb_indexes.dense_passage_index`` over a KB's ``passages`` table: every non-empty passage once, its
    payload from the side table, its own text found first, and a second call opens the finished folder."""
    from storage import layout
    from storage.parquet_io import PartWriter
    from tasks.search import kb_indexes

    passages = _passages(data_root)  # 123 real passages
    passages[5] = {**passages[5], "text": ""}  # an empty passage is not embedded
    root, version = tmp_path / "wh", "dense-00000000"
    folder = layout.kb_table_dir(version, "passages", root)
    folder.mkdir(parents=True)
    writer = PartWriter("passages", folder / layout.part_name(0, 1))
    for i, p in enumerate(passages):
        writer.add({**p, "page_id": i})
    writer.close()
    index = kb_indexes.dense_passage_index(version, root)
    kept = [p for p in passages if p["text"]]
    assert len(index) == len(kept) == len(passages) - 1 and index._ids.to_pylist() == [p["passage_id"] for p in kept]
    some = range(0, len(kept), 10)
    hits = index.search_many([kept[i]["text"] for i in some], k=1)
    assert [h[0].id for h in hits] == [kept[i]["passage_id"] for i in some]
    got = index.payload([h[0] for h in hits])
    assert [(g["title"], g["text"], g["qid"]) for g in got] == [
        (kept[i]["title"], kept[i]["text"], kept[i]["qid"]) for i in some]
    kb_indexes._OPEN.clear()
    stamp = (index.folder / "_done.json").stat().st_mtime_ns
    assert len(kb_indexes.dense_passage_index(version, root)) == len(kept)
    assert (index.folder / "_done.json").stat().st_mtime_ns == stamp


def test_search_pauses_the_collector_and_restores_it(entity_index: EntityIndex, monkeypatch) -> None:
    """search_many runs with the cyclic collector off, then leaves it as it found it (on, or off by the caller)."""
    import gc

    seen: list[bool] = []
    real = entity_index._order_and_cut

    def spy(fetched, k):
        seen.append(gc.isenabled())
        return real(fetched, k)

    monkeypatch.setattr(entity_index, "_order_and_cut", spy)
    assert gc.isenabled()
    hits = entity_index.search_many(["Boston"], k=3)
    assert hits[0][0].qid == "Q100" and seen == [False] and gc.isenabled()
    gc.disable()
    try:
        entity_index.search_many(["Boston"], k=3)
        assert seen == [False, False] and not gc.isenabled()
    finally:
        gc.enable()
