"""Search indexes built per KB version, and the batched ``entity_search`` tool the agents call.

Inputs: the published KB tables (``kb/<version>/entities``, ``articles``). Outputs:
``indexes/<kb_version>/entity-bm25`` (labels + aliases, description = Wikidata description) and
``indexes/<kb_version>/title-bm25`` (Wikipedia titles, description = lead paragraph),
``indexes/<kb_version>/passage-bm25`` and ``passage-dense`` (the KB's 100-word passages: BM25, and
all-MiniLM-L6-v2 + FAISS), ``indexes/<kb_version>/entity-dense`` ("label: description" of every named entity,
all-MiniLM-L6-v2 + FAISS: AnchorRAG's candidate-entity index). Folder names come from the one table of index
kinds, ``storage.layout.INDEX_KINDS``. Built once per version (atomic, idempotent; the explicit step is
:func:`ensure_index`, run by ``linkedqa kb index`` and by the run flow before its shards) and opened once per
process (the openers below build a missing index too, so a library caller never needs the step).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from storage import layout
from storage.catalog import register_parquet_view
from storage.layout import INDEX_FORMAT as INDEX_FORMAT  # re-exported: part of every run id (tasks.runs.config)
from storage.parquet_io import part_files
from tasks.progress import progress
from tasks.search.bm25 import is_built
from tasks.search.entity_index import EntityIndex
from tasks.search.passages import DenseIndex, PassageIndex, entity_texts
from tasks.search.title_index import TitleIndex

#: The kinds of :data:`storage.layout.INDEX_KINDS` this module builds (the KG store and the gold-answer store are
#: built by ``tasks.kg.duckdb_store`` and ``tasks.kg.oxigraph_store``).
SEARCH_KINDS = ("entity-bm25", "title-bm25", "passage-bm25", "passage-dense", "entity-dense")
_OPEN: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def _iter_rows(kb_version: str, table: str, columns: list[str], root: Path, desc: str | None = None) -> Iterator[dict]:
    """Rows of a KB table, streamed in batches; with ``desc``, a progress reporter counts them (per batch)."""
    files = part_files(layout.kb_table_dir(kb_version, table, root))
    if desc is None:
        for f in files:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=50_000, columns=columns):
                yield from batch.to_pylist()
        return
    total = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    with progress(desc, total=total, unit="row") as bar:
        for f in files:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=50_000, columns=columns):
                yield from batch.to_pylist()
                bar.update(batch.num_rows)


_DISAMBIG = re.compile(r"\s*\([^)]*\)\s*$")


def entity_doc(row: dict) -> dict:
    """Searchable names of an entity: label (else the Wikipedia title) and aliases plus the title.

    Without a label, the Wikipedia title minus a trailing "(...)" disambiguator is used: many sample-KB
    entities come from the title<->QID map only, and the title is their English name.
    """
    title = row.get("enwiki_title")
    label = row.get("label") or (_DISAMBIG.sub("", title) if title else None)
    aliases = list(row.get("aliases") or [])
    if title and title != label and title not in aliases:
        aliases.append(title)
    return {**row, "label": label, "aliases": aliases}


def entity_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the labels+aliases BM25 index of a KB version."""
    root = root or layout.home()
    key = (str(root), f"entity:{kb_version}")
    with _LOCK:
        if key not in _OPEN:
            _OPEN[key] = EntityIndex.open(_build_entity_bm25(kb_version, root))
        return _OPEN[key]


def _build_entity_bm25(kb_version: str, root: Path) -> Path:

    folder = layout.index_kind_dir(kb_version, "entity-bm25", root)
    if not index_is_built(folder):
        rows = _iter_rows(kb_version, "entities", ["qid", "label", "description", "aliases", "enwiki_title",
                                                   "sitelinks"], root, desc=f"entity BM25 index of {kb_version}")
        EntityIndex.build(folder, (d for d in map(entity_doc, rows) if d["label"] or d["aliases"]))
    return folder


def title_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the Wikipedia-title BM25 index of a KB version."""
    root = root or layout.home()
    key = (str(root), f"title:{kb_version}")
    with _LOCK:
        if key not in _OPEN:
            _OPEN[key] = TitleIndex.open(_build_title_bm25(kb_version, root))
        return _OPEN[key]


def _build_title_bm25(kb_version: str, root: Path) -> Path:

    folder = layout.index_kind_dir(kb_version, "title-bm25", root)
    if not index_is_built(folder):
        rows = _iter_rows(kb_version, "articles", ["page_id", "title", "qid", "lead"], root,
                          desc=f"title BM25 index of {kb_version}")
        TitleIndex.build(folder, rows)
    return folder


def passage_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the BM25 index over the KB's 100-word passages."""
    root = root or layout.home()
    key = (str(root), f"passage:{kb_version}")
    with _LOCK:
        if key not in _OPEN:
            _OPEN[key] = PassageIndex.open(_build_passage_bm25(kb_version, root))
        return _OPEN[key]


def _build_passage_bm25(kb_version: str, root: Path) -> Path:

    folder = layout.index_kind_dir(kb_version, "passage-bm25", root)
    if not index_is_built(folder):
        rows = _iter_rows(kb_version, "passages", ["passage_id", "page_id", "title", "qid", "text"], root,
                          desc=f"passage BM25 index of {kb_version}")
        PassageIndex.build(folder, rows)
    return folder


def passage_index_dir(kb_version: str, kind: str, root: Path | None = None) -> Path:
    """Folder of the ``bm25`` or ``dense`` passage index of a KB version."""
    return layout.index_kind_dir(kb_version, f"passage-{kind}", root or layout.home())


def dense_passage_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the dense (MiniLM + FAISS) index over the KB's passages, with a text lookup.

    Returns:
        ``(DenseIndex, {passage_id: (title, text, qid)})``.
    """
    root = root or layout.home()
    key = (str(root), f"dense:{kb_version}")
    with _LOCK:
        if key not in _OPEN:
            _OPEN[key] = _build_dense_passage(kb_version, root)
        return _OPEN[key]


def _build_dense_passage(kb_version: str, root: Path):
    """``(DenseIndex, lookup)``; the index is built when missing, else opened."""
    rows = list(_iter_rows(kb_version, "passages", ["passage_id", "title", "qid", "text"], root))
    lookup = {r["passage_id"]: (r["title"], r["text"], r["qid"]) for r in rows if r["text"]}
    folder = passage_index_dir(kb_version, "dense", root)
    ids = list(lookup)
    texts = [f"{lookup[i][0]}\n{lookup[i][1]}" if lookup[i][0] else lookup[i][1] for i in ids]
    index = DenseIndex.build(folder, ids, texts, extra_meta={"kb_version": kb_version},
                             desc=f"dense passage index of {kb_version} (once per KB version)")
    return index, lookup


def dense_entity_index_dir(kb_version: str, root: Path | None = None) -> Path:
    """Folder of the dense entity index of a KB version."""
    return layout.index_kind_dir(kb_version, "entity-dense", root or layout.home())


def dense_entity_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the dense index over the names and descriptions of the KG's entities.

    Each named entity that is a node of the graph (``sql/kg/kg_nodes.sql``: subject or item object of a claim;
    named by its label, else its Wikipedia title without a ``(...)`` disambiguator, ``entity_doc``) gets two
    all-MiniLM-L6-v2 vectors (AnchorRAG §4.2: "encode their name description into vectors using SBERT ... and
    index them in a vector database"): its name alone (id ``Q..``) and ``"name: description"`` (id
    ``Q..|d``). With the description vector only, a bare keyword loses to entities whose description
    mentions it (measured: "Germany" scores 0.49 against "Germany: federal parliamentary republic..." and 0.57
    against "Saarland: state of Germany"); searches take the better of the two per entity
    (``dense_entity_search``). Built once per KB version: about 200 texts/s on 2 CPU cores (measured
    ``encode_per_s`` in its done-marker).

    Returns:
        ``(DenseIndex, {qid: (label, description)})``.
    """
    root = root or layout.home()
    key = (str(root), f"dense-entity:{kb_version}")
    with _LOCK:
        if key not in _OPEN:
            _OPEN[key] = _build_dense_entity(kb_version, root)
        return _OPEN[key]


def _build_dense_entity(kb_version: str, root: Path):
    """``(DenseIndex, {qid: (label, description)})``; the index is built when missing, else opened."""
    rows = [entity_doc(r) for r in kg_node_rows(kb_version, root)]
    lookup = {r["qid"]: (r["label"], r.get("description")) for r in rows if r["label"]}
    folder = dense_entity_index_dir(kb_version, root)
    ids, texts = entity_texts(rows)
    names = [lookup[q][0] for q in ids]
    ids, texts = ids + [f"{q}|d" for q in ids], names + texts
    index = DenseIndex.build(folder, ids, texts, batch_size=128, extra_meta={"kb_version": kb_version},
                             desc=f"dense entity index of {kb_version} ({len(names):,} KG entities, "
                                  "once per KB version)")
    return index, lookup


def index_is_built(folder: Path) -> bool:
    """Whether an index folder holds a finished index (its done-marker, ``tasks.search.bm25.is_built``)."""
    return is_built(folder)


_BUILDERS = {
    "entity-bm25": _build_entity_bm25,
    "title-bm25": _build_title_bm25,
    "passage-bm25": _build_passage_bm25,
    "passage-dense": _build_dense_passage,
    "entity-dense": _build_dense_entity,
}


def ensure_index(kb_version: str, kind: str, root: Path | None = None) -> dict[str, Any]:
    """Build the ``kind`` search index of a KB version unless it is built (the explicit, resumable index step).

    A build happens in a temporary sibling folder renamed onto the index folder, its done-marker written last,
    so an interrupted build leaves no index (a re-run sweeps the temp and builds again); a finished index is
    left untouched. Nothing is kept open.

    Args:
        kb_version: Published KB version.
        kind: One of :data:`SEARCH_KINDS`.
        root: ``LINKEDQA_HOME``.

    Returns:
        ``{"kind", "folder", "built": bool (False: it already existed), "seconds"}``.

    Raises:
        storage.layout.LayoutError: An unknown kind.
    """
    root = root or layout.home()
    if kind not in _BUILDERS:
        raise layout.LayoutError(f"unknown search index kind {kind!r}; known: {', '.join(SEARCH_KINDS)}")
    folder = layout.index_kind_dir(kb_version, kind, root)
    if index_is_built(folder):
        return {"kind": kind, "folder": str(folder), "built": False, "seconds": 0.0}
    t0 = time.perf_counter()
    _BUILDERS[kind](kb_version, root)
    return {"kind": kind, "folder": str(folder), "built": True, "seconds": round(time.perf_counter() - t0, 3)}


def dense_entity_search(kb_version: str, root: Path, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
    """Top-``k`` KG entities per query from the dense entity index: ``[(qid, cosine)]``, best first.

    Each entity appears once, with the better of its name and name+description vectors.
    """
    index, _ = dense_entity_index(kb_version, root)
    out = []
    for hits in index.search_many(queries, k=2 * k):
        best: dict[str, float] = {}
        for h in hits:
            qid = h.id.split("|", 1)[0]
            best[qid] = max(best.get(qid, -1.0), h.score)
        out.append(sorted(best.items(), key=lambda kv: -kv[1])[:k])
    return out


def kg_node_rows(kb_version: str, root: Path) -> list[dict]:
    """Entity rows (qid, label, description, enwiki_title) of the KG's nodes (``sql/kg/kg_nodes.sql``)."""
    con = duckdb.connect()
    try:
        for table in ("claims", "entities"):
            files = [(f, {}) for f in part_files(layout.kb_table_dir(kb_version, table, root))]
            register_parquet_view(con, f"kb_{table}", files, table, root)
        cur = con.execute((layout.REPO_ROOT / "sql" / "kg" / "kg_nodes.sql").read_text())
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


def candidate_dict(c: Any) -> dict:
    """A search candidate as a plain dict (qid, title, description, score)."""
    return {"qid": c.qid, "title": c.title, "description": c.description, "score": round(float(c.score), 4)}


def search_tool(kb_version: str, root: Path, source: str = "wikidata"):
    """Batched tool: payloads ``{"queries": [...], "k": K}`` -> per payload, per query, candidate dicts.

    All queries of all payloads of one agent step go to the index in ONE ``search_many`` call.
    """
    return index_search_tool(entity_index(kb_version, root) if source == "wikidata" else title_index(kb_version, root))


def index_search_tool(index: Any):
    """The batched tool of :func:`search_tool` over any object with ``search_many(queries, k)``.

    An opened index; the benchmarks pass other rankings (a peer library) through the same tool.
    """

    def tool(payloads: list[dict]) -> list[list[list[dict]]]:
        flat: list[str] = []
        ks: list[int] = []
        for p in payloads:
            flat.extend(p["queries"])
            ks.append(int(p.get("k", 50)))
        kmax = max(ks) if ks else 50
        hits = index.search_many(flat, k=kmax) if flat else []
        out, pos = [], 0
        for p, k in zip(payloads, ks, strict=True):
            n = len(p["queries"])
            out.append([[candidate_dict(c) for c in h[:k]] for h in hits[pos : pos + n]])
            pos += n
        return out

    return tool
