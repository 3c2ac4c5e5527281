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

import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from typing_extensions import TypedDict

from storage import layout
from storage.catalog import duckdb_memory_limit, register_parquet_view, spilling_connection
from storage.done import sweep_temps
from storage.layout import INDEX_FORMAT as INDEX_FORMAT  # re-exported: part of every run id (tasks.runs.config)
from storage.parquet_io import part_files, read_table
from tasks.search.bm25 import BM25Index, ParquetRows, SearchIndexError, is_built
from tasks.search.entity_index import EntityIndex
from tasks.search.passages import DenseHit, DenseIndex, PassageIndex, entity_texts
from tasks.search.title_index import TitleIndex

_OPEN: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def _table_rows(kb_version: str, table: str, columns: list[str], root: Path,
                transform: Callable[[Iterable[dict]], Iterable[dict]] | None = None,
                desc: str | None = None) -> ParquetRows:
    """The rows of a KB table's ``columns``, streamed or shared out by row group (``bm25.ParquetRows``).

    With ``desc``, a progress line counts them while they are read in this process.
    """
    files = tuple(str(f) for f in part_files(layout.kb_table_dir(kb_version, table, root)))
    return ParquetRows(files, tuple(columns), transform, desc)


def _iter_rows(kb_version: str, table: str, columns: list[str], root: Path) -> Iterator[dict]:
    """Rows of a KB table, streamed in batches."""
    return iter(_table_rows(kb_version, table, columns, root))


def _iter_batches(kb_version: str, table: str, columns: list[str], root: Path,
                  batch_rows: int = 50_000) -> Iterator[pa.RecordBatch]:
    """Arrow batches of a KB table's columns, part by part (bounded memory)."""
    for f in part_files(layout.kb_table_dir(kb_version, table, root)):
        yield from pq.ParquetFile(f).iter_batches(batch_size=batch_rows, columns=columns)


SQL_SEARCH = layout.REPO_ROOT / "sql" / "search"


def keys_unique(kb_version: str, table: str, key: str, root: Path, spill_parent: Path) -> bool:
    """Whether no two rows of a KB table share a non-empty (trimmed) ``key`` (``sql/search/duplicate_keys.sql``).

    DuckDB groups the keys under its memory limit (``$LINKEDQA_DUCKDB_MEMORY``, else ``auto``), spilling to a temporary
    folder in ``spill_parent``, so the check's memory stays flat where a Python set of the keys would not. The merge
    makes ``entities.qid`` and ``passages.passage_id`` unique, and a Wikipedia dump has one page per title; a table
    where the check fails makes the BM25 builder fall back to remembering the keys it has seen.
    """
    files = part_files(layout.kb_table_dir(kb_version, table, root))
    spill_parent.mkdir(parents=True, exist_ok=True)
    name = f".{table}-keys.building"
    sweep_temps(spill_parent, (f"{name}-*",), recursive=False)  # a killed check's spill (its pid is gone)
    with tempfile.TemporaryDirectory(prefix=f"{name}-{os.getpid()}-", dir=spill_parent) as spill:
        con = spilling_connection(duckdb_memory_limit(), spill)
        try:
            register_parquet_view(con, "kb_table", [(f, {}) for f in files], table, root)
            sql = (SQL_SEARCH / "duplicate_keys.sql").read_text().replace("{key}", key)
            (duplicated,) = con.execute(sql).fetchone()
        finally:
            con.close()
    return duplicated == 0


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


def _opened(kb_version: str, kind: str, root: Path | None, open_index: Callable[[str], Any]) -> Any:
    """The ``kind`` index of a KB version, opened once per process (built first when it is not: ensure_index)."""
    root = root or layout.home()
    key = (str(root), f"{kind}:{kb_version}")
    with _LOCK:
        if key not in _OPEN:
            _OPEN[key] = open_index(ensure_index(kb_version, kind, root)["folder"])
        return _OPEN[key]


def entity_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the labels+aliases BM25 index of a KB version."""
    return _opened(kb_version, "entity-bm25", root, EntityIndex.open)


def entity_docs(rows: Iterable[dict]) -> Iterator[dict]:
    """:func:`entity_doc` of each row that has a name (the entity-bm25 builder's row transform)."""
    return (d for d in map(entity_doc, rows) if d["label"] or d["aliases"])


def _build_entity_bm25(kb_version: str, root: Path, threads: int = 1) -> Path:
    return _build_bm25(EntityIndex, "entity-bm25", "entities", "qid", kb_version, root, threads,
                       ["qid", "label", "description", "aliases", "enwiki_title", "sitelinks"], "entity",
                       entity_docs)


def title_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the Wikipedia-title BM25 index of a KB version."""
    return _opened(kb_version, "title-bm25", root, TitleIndex.open)


def _build_title_bm25(kb_version: str, root: Path, threads: int = 1) -> Path:
    return _build_bm25(TitleIndex, "title-bm25", "articles", "title", kb_version, root, threads,
                       ["page_id", "title", "qid", "lead"], "title")


def passage_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the BM25 index over the KB's 100-word passages."""
    return _opened(kb_version, "passage-bm25", root, PassageIndex.open)


def _build_passage_bm25(kb_version: str, root: Path, threads: int = 1) -> Path:
    return _build_bm25(PassageIndex, "passage-bm25", "passages", "passage_id", kb_version, root, threads,
                       ["passage_id", "page_id", "title", "qid", "text"], "passage", processes_from=4)


def _build_bm25(index_cls: type[BM25Index], kind: str, table: str, key: str, kb_version: str, root: Path,
                threads: int, columns: list[str], what: str,
                docs: Callable[[Iterable[dict]], Iterable[dict]] | None = None, processes_from: int = 2) -> Path:
    """Build the ``kind`` BM25 index of a KB version from ``table``; its folder (built or not: ensure_index).

    The rows (``columns``, passed through ``docs`` when given: a module-level function, which worker processes
    import) are read by row group with a progress line; ``key`` is the column checked unique first
    (:func:`keys_unique`); the writer gets ``threads`` threads, and from ``processes_from`` threads on as many
    processes building documents (:func:`_writer`).
    """
    folder = layout.index_kind_dir(kb_version, kind, root)
    rows = _table_rows(kb_version, table, columns, root, docs, desc=f"{what} BM25 index of {kb_version}")
    index_cls.build(folder, rows, **_writer(threads, processes_from),
                    keys_unique=keys_unique(kb_version, table, key, root, folder.parent))
    return folder


def passage_index_dir(kb_version: str, kind: str, root: Path | None = None) -> Path:
    """Folder of the ``bm25`` or ``dense`` passage index of a KB version."""
    return layout.index_kind_dir(kb_version, f"passage-{kind}", root or layout.home())


def dense_passage_index(kb_version: str, root: Path | None = None) -> DenseIndex:
    """Open (building if needed) the dense (MiniLM + FAISS) index over the KB's passages.

    Its side table holds ``passage_id``, ``title``, ``text`` and ``qid`` of each vector (``DenseIndex.payload``),
    memory-mapped: opening it loads no passage text into Python memory.
    """
    return _opened(kb_version, "passage-dense", root, DenseIndex.open)


_PASSAGE_DOCS = pa.schema([("passage_id", pa.string()), ("title", pa.string()), ("text", pa.string()),
                           ("qid", pa.string())])


def _passage_texts(t: pa.Table) -> list[str]:
    """Title, newline, text (the text alone without a title) of passage rows: what is embedded."""
    return [f"{ti}\n{tx}" if ti else tx
            for ti, tx in zip(t.column("title").to_pylist(), t.column("text").to_pylist(), strict=True)]


def _build_dense_passage(kb_version: str, root: Path, threads: int = 1) -> DenseIndex:
    """Build the dense passage index (passages streamed batch by batch; built or not: ensure_index).

    ``threads`` is not used: the encoder takes every core torch may use (``torch_threads``).
    """

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in _iter_batches(kb_version, "passages", _PASSAGE_DOCS.names, root):
            text = batch.column("text")
            keep = pc.and_(pc.is_valid(text), pc.not_equal(text, ""))
            yield batch.filter(keep).cast(_PASSAGE_DOCS)

    return DenseIndex.build_from_docs(
        passage_index_dir(kb_version, "dense", root), batches(), _PASSAGE_DOCS, _passage_texts,
        id_column="passage_id", extra_meta={"kb_version": kb_version},
        desc=f"dense passage index of {kb_version} (once per KB version)")


def dense_entity_index_dir(kb_version: str, root: Path | None = None) -> Path:
    """Folder of the dense entity index of a KB version."""
    return layout.index_kind_dir(kb_version, "entity-dense", root or layout.home())


def dense_entity_index(kb_version: str, root: Path | None = None) -> DenseIndex:
    """Open (building if needed) the dense index over the names and descriptions of the KG's entities.

    Each named entity that is a node of the graph (``sql/kg/kg_nodes.sql``: subject or item object of a claim;
    named by its label, else its Wikipedia title without a ``(...)`` disambiguator, ``entity_doc``) gets two
    all-MiniLM-L6-v2 vectors (AnchorRAG §4.2: "encode their name description into vectors using SBERT ... and
    index them in a vector database"): its name alone (id ``Q..``) and ``"name: description"`` (id
    ``Q..|d``). With the description vector only, a bare keyword loses to entities whose description
    mentions it (measured: "Germany" scores 0.49 against "Germany: federal parliamentary republic..." and 0.57
    against "Saarland: state of Germany"); searches take the better of the two per entity
    (``dense_entity_hits``). Built once per KB version: about 200 texts/s on 2 CPU cores (measured
    ``encode_per_s`` in its done-marker). The side table holds ``id``, ``qid``, ``label``, ``description`` and
    the embedded ``text`` of each vector, memory-mapped.
    """
    return _opened(kb_version, "entity-dense", root, DenseIndex.open)


_ENTITY_DOCS = pa.schema([("id", pa.string()), ("qid", pa.string()), ("label", pa.string()),
                          ("description", pa.string()), ("text", pa.string())])


def dense_entity_docs(kb_version: str, root: Path) -> Iterator[pa.RecordBatch]:
    """The dense entity index's rows in index order (``_ENTITY_DOCS``), one batch of KG nodes at a time.

    Every name vector first (id ``Q..``, text the name), then every name-and-description vector (id ``Q..|d``,
    text ``"name: description"``, the name alone without one); KG nodes ordered by QID, unnamed ones skipped.
    """
    for with_description in (False, True):
        for rows in kg_node_batches(kb_version, root):
            docs = [d for d in map(entity_doc, rows) if d.get("qid") and (d.get("label") or "").strip()]
            if not docs:
                continue
            ids, texts = entity_texts(docs)  # "label: description" (the label alone without one)
            names = [d["label"] for d in docs]
            yield pa.RecordBatch.from_pydict({
                "id": [f"{q}|d" for q in ids] if with_description else ids,
                "qid": ids,
                "label": names,
                "description": [d.get("description") for d in docs],
                "text": texts if with_description else names,
            }, schema=_ENTITY_DOCS)


def _build_dense_entity(kb_version: str, root: Path, threads: int = 1) -> DenseIndex:
    """Build the dense entity index (built or not: ensure_index).

    Rows come from :func:`dense_entity_docs` (the KG-node query streamed twice), so memory holds one batch of
    entities, not the KG's. ``threads`` is not used (as for :func:`_build_dense_passage`).
    """
    return DenseIndex.build_from_docs(
        dense_entity_index_dir(kb_version, root), dense_entity_docs(kb_version, root), _ENTITY_DOCS,
        lambda t: t.column("text").to_pylist(),
        batch_size=128, extra_meta={"kb_version": kb_version},
        desc=f"dense entity index of {kb_version} (KG entities, once per KB version)")


def _dense_current(folder: Path) -> bool:
    """A dense kind is built when its folder is finished, of the configured spec, with its side table."""
    return DenseIndex.is_current(folder, side_table=True)


def index_is_built(folder: Path, kind: str) -> bool:
    """Whether the ``kind`` index folder is built (the one rule ``ensure_index`` applies, from :data:`_BUILDERS`).

    A BM25 kind: a finished index (``tasks.search.bm25.is_built``). A dense kind: a finished index of the
    configured spec with its side table (``DenseIndex.is_current``), so a changed ``$LINKEDQA_DENSE_INDEX`` rebuilds.
    """
    return _BUILDERS[kind][1](folder)


def _writer(threads: int, processes_from: int = 2) -> dict[str, int]:
    """A BM25 build's settings for ``kb index --workers threads``: threads, heap and document processes.

    tantivy gets ``threads`` indexing threads (256 MB each) and, from ``processes_from`` threads on, as many
    processes turn rows into documents (``BM25Index.build``'s ``workers``).

    Measured with ``tests/bench/bench_bm25_build.py`` (synthetic copies of the sample KB's rows, 2 cores): with
    the documents built here, this process's Python producer (rows read, names normalised, documents built)
    bounds entity-bm25 at ~1.2x whatever the threads; with 2 document processes it does only tantivy's
    ``add_json`` (2.4-3.2 s of CPU for 702k entities instead of 17-21 s), 1.3-1.6x on 2 cores. passage-bm25 is the
    other way round: its producer is light and tantivy's indexing heavy, so on 2 cores the worker processes
    (their start-up and the transfer of the texts) only compete with tantivy's threads (0.69-0.84x of 2 threads
    alone); by the CPU split they pay from ~4 cores on, hence ``processes_from=4`` for it (not measured here).
    Hits do not depend on the thread or process count (same documents, same rows; ``BM25Index.search_many``
    orders tied scores by popularity, where the index has it, then key, whatever the segments); the done
    marker records both.
    """
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return {"threads": threads, "heap_mb": 256 * threads, "workers": threads if threads >= processes_from else 1}


#: Every search index kind -> (its builder, its "is it built?" rule).
_BUILDERS: dict[str, tuple[Callable[[str, Path, int], Any], Callable[[Path], bool]]] = {
    "entity-bm25": (_build_entity_bm25, is_built),
    "title-bm25": (_build_title_bm25, is_built),
    "passage-bm25": (_build_passage_bm25, is_built),
    "passage-dense": (_build_dense_passage, _dense_current),
    "entity-dense": (_build_dense_entity, _dense_current),
}
#: The kinds of :data:`storage.layout.INDEX_KINDS` this module builds (the KG store and the gold-answer store are
#: built by ``tasks.kg.duckdb_store`` and ``tasks.kg.oxigraph_store``).
SEARCH_KINDS = tuple(_BUILDERS)


def ensure_index(kb_version: str, kind: str, root: Path | None = None, threads: int = 1) -> dict[str, Any]:
    """Build the ``kind`` search index of a KB version unless it is built (the explicit, resumable index step).

    The one place a KB's search index is decided built (:func:`index_is_built`): the index step and the first
    search that opens an index (:func:`_opened`) both come here.

    A build happens in a temporary sibling folder renamed onto the index folder, its done-marker written last,
    so an interrupted build leaves no index (a re-run sweeps the temp and builds again); a built index is left
    untouched (a dense one of another structure than ``$LINKEDQA_DENSE_INDEX`` asks for is not built: it is
    replaced). When another process publishes the same BM25 index while this one builds, this build's refusal to
    overwrite it is taken as "built". Nothing is kept open.

    Args:
        kb_version: Published KB version.
        kind: One of :data:`SEARCH_KINDS`.
        root: ``LINKEDQA_HOME``.
        threads: tantivy's indexing threads and processes building documents for the ``*-bm25`` kinds
            (:func:`_writer`); the dense kinds encode on every core torch may use whatever it is.

    Returns:
        ``{"kind", "folder", "built": bool (False: it was built already), "seconds"}``.

    Raises:
        storage.layout.LayoutError: An unknown kind.
    """
    root = root or layout.home()
    if kind not in _BUILDERS:
        raise layout.LayoutError(f"unknown search index kind {kind!r}; known: {', '.join(SEARCH_KINDS)}")
    folder = layout.index_kind_dir(kb_version, kind, root)
    if index_is_built(folder, kind):
        return {"kind": kind, "folder": str(folder), "built": False, "seconds": 0.0}
    t0 = time.perf_counter()
    try:
        _BUILDERS[kind][0](kb_version, root, threads)
    except SearchIndexError:
        if not index_is_built(folder, kind):  # not a concurrent builder's finished index: a real error
            raise
        return {"kind": kind, "folder": str(folder), "built": False, "seconds": 0.0}
    return {"kind": kind, "folder": str(folder), "built": True, "seconds": round(time.perf_counter() - t0, 3)}


class DenseEntityHit(TypedDict):
    """One entity of a dense entity search (``score``: cosine of its better vector)."""

    qid: str
    label: str | None
    description: str | None
    score: float


def dense_entity_hits(kb_version: str, root: Path, queries: list[str], k: int) -> list[list[DenseEntityHit]]:
    """Top-``k`` KG entities per query from the dense entity index, best first.

    Each hit is ``{"qid", "label", "description", "score"}`` (cosine), the names read from the index's
    memory-mapped side table. Each entity appears once, with the better of its name and name+description vectors
    (ids ``Q..`` and ``Q..|d``).
    """
    index = dense_entity_index(kb_version, root)
    out = []
    for hits in index.search_many(queries, k=2 * k):
        best: dict[str, DenseHit] = {}
        for h in hits:
            qid = h.id.split("|", 1)[0]
            if qid not in best or h.score > best[qid].score:
                best[qid] = h
        top = sorted(best.values(), key=lambda h: -h.score)[:k]
        out.append([{"qid": r["qid"], "label": r["label"], "description": r["description"], "score": h.score}
                    for r, h in zip(index.payload(top), top, strict=True)])
    return out


def kg_node_batches(kb_version: str, root: Path, batch_rows: int = 100_000) -> Iterator[list[dict]]:
    """Entity rows (qid, label, description, enwiki_title) of the KG's nodes, ordered by QID, in lists.

    ``sql/kg/kg_nodes.sql``, streamed in lists of at most ``batch_rows`` rows (DuckDB sorts out of core).
    """
    con = duckdb.connect()
    try:
        for table in ("claims", "entities"):
            files = [(f, {}) for f in part_files(layout.kb_table_dir(kb_version, table, root))]
            register_parquet_view(con, f"kb_{table}", files, table, root)
        reader = con.sql((layout.REPO_ROOT / "sql" / "kg" / "kg_nodes.sql").read_text()).to_arrow_reader(batch_rows)
        for batch in reader:
            yield batch.to_pylist()
    finally:
        con.close()


class SearchPayload(TypedDict):
    """The entity-search tool's payload: mentions to search, candidates per mention."""

    queries: list[str]
    k: int


class SearchCandidate(TypedDict):
    """One candidate of an entity search."""

    qid: str | None  # None: a Wikipedia title with no known QID (``source="wikipedia"``)
    title: str | None
    description: str | None
    score: float


def candidate_dict(c: Any) -> SearchCandidate:
    """A search candidate as a plain dict (qid, title, description, score)."""
    return {"qid": c.qid, "title": c.title, "description": c.description, "score": round(float(c.score), 4)}


def named_qids(kb_version: str, root: Path | None = None) -> set[str]:
    """The QIDs a name search of a KB version can find: entities with a label, an alias or a Wikipedia title."""
    ents = read_table(layout.kb_table_dir(kb_version, "entities", root or layout.home()), "entities",
                      ["qid", "label", "aliases", "enwiki_title"])
    named = pc.or_(pc.or_(pc.is_valid(ents["label"]), pc.is_valid(ents["enwiki_title"])),
                   pc.greater(pc.list_value_length(ents["aliases"]), 0))
    return set(ents.filter(named)["qid"].to_pylist())


def search_tool(kb_version: str, root: Path, source: str = "wikidata"):
    """Batched tool: payloads ``{"queries": [...], "k": K}`` -> per payload, per query, candidate dicts.

    All queries of all payloads of one agent step go to the index in ONE ``search_many`` call.
    """
    return index_search_tool(entity_index(kb_version, root) if source == "wikidata" else title_index(kb_version, root))


def index_search_tool(index: Any):
    """The batched tool of :func:`search_tool` over any object with ``search_many(queries, k)``.

    An opened index; the benchmarks pass other rankings (a peer library) through the same tool.
    """

    def tool(payloads: list[SearchPayload]) -> list[list[list[SearchCandidate]]]:
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
