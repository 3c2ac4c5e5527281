"""The default KG backend: a DuckDB triple store over the KB's Parquet tables (``DuckDBKG``).

Inputs: ``kb/<kb_version>/{claims,entities,properties}`` Parquet parts. Output (built once per KB version on
first use, then only read): ``indexes/<kb_version>/kg-duckdb.v1/`` holding the truthy claims
(``sql/kg/kg_claims.sql``) sorted by subject (``kg_by_subject``) and, item-valued ones, by object
(``kg_by_object``), English labels by id (``kg_labels``) and lower-cased labels+aliases by name (``kg_names``).
The folder is built under a temp name (``<name>.tmp-<pid>-<thread>``) and renamed, with its done marker
(``storage.done``: ``_done.json``, holding the row counts) written last inside it; an unfinished build is
invisible, and its temp folder is swept by the next build once its process is gone. Folders built before the
convention (marker ``meta.json``) still count as built (``storage.done.LEGACY_MARKERS``).

Lookups are the SQL files ``sql/kg/{outgoing,incoming,relations,neighbours,labels,search_label}.sql`` with list
parameters (one query per batch of entities); labels of subjects, properties and objects come from one more
``labels.sql`` call per batch (a join against the whole labels table would scan it).

Layout choice (``LAYOUTS``), measured with ``tests/bench/bench_kg.py --layouts`` on the sample KB (553k truthy
claims, 1,000 random subjects; 2-core machine with another job busy on one core, two runs): one lookup =
``outgoing`` + ``incoming`` of an entity with labels resolved (4 queries per call).

=========================================  =======  ==============  ==========  ===========  ============
layout                                     build    1 entity (p50)  batch 10    batch 100    batch 1000
=========================================  =======  ==============  ==========  ===========  ============
``parquet``: sorted, 8,192-row groups      1.4 s    12-15 ms        230-340/s   780-1,300/s  4,100-6,700/s
``duckdb``: sorted table + ART indexes     2.9 s    4.9-5.3 ms      850-920/s   2.1-2.3k/s   5,200-6,350/s
=========================================  =======  ==============  ==========  ===========  ============

``outgoing.sql`` alone, one thread: 1 id 1.2 ms (file) vs 2.5 ms (Parquet); 100 ids 9 ms vs 40 ms; 1,000 ids
22-30 ms vs 70-80 ms. The ART index scan fetches only the matching rows, while Parquet pruning still decodes a
whole row group of subject strings for every group a batch touches (100 random ids touch 56 of 68 groups).
So the default is ``duckdb``. Connections raise ``dynamic_or_filter_threshold`` from 50 to ``IN_FILTER_MAX_IDS``
so that batches of more than 50 ids still become an index scan (100 ids: 18 ms -> 9 ms); on a large KB a
batch above that bound would be a full scan. ``parquet`` needs no index build memory (ART building a
Wikidata-size key column does) and stays available as ``layout_name="parquet"``.

ART indexes must fit in memory while they are built (DuckDB's documentation, "Indexes"; an index past the limit
fails with "Out of Memory Error"), and they grow with the KB: measured on the sample KB's tables (DuckDB 2.0.0,
``duckdb_memory()``'s ``ART_INDEX`` after each ``CREATE INDEX``) at 19.4 bytes per claim for ``kg_by_subject``,
9.0 for ``kg_by_object``, 50.0 per label and 60.3 per name (:data:`ART_BYTES_PER_ROW`). The full dump's ~1.6 B
truthy claims would need ~31 GB for the subject index alone, twice the ``auto`` limit of a 64 GB machine. So
each index is built only when its estimate fits :data:`ART_SHARE` of the memory limit (an Out of Memory error is
also caught, and the index left out); a table without one is still sorted by its key, and a lookup reads the
row groups whose min/max hold its ids (zonemaps), as the ``parquet`` layout does. The done marker lists the
indexes built (``art``) and the ones left out with their estimate (``art_skipped``).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from storage import layout
from storage.catalog import duckdb_memory_limit, memory_limit_bytes, register_parquet_view, sql_literal
from storage.done import DONE, is_done, mark_done, read_done, sweep_temps
from storage.manifest import now_iso
from storage.parquet_io import part_files
from tasks.kg.base import (
    Fact,
    Relation,
    check_ids,
    check_limit,
    check_pairs,
    fact_sort_key,
    finish_facts,
    relation_sort_key,
)
from tasks.kg.truthy import create_truthy_claims, kg_sql

INDEX_NAME = layout.INDEX_KINDS["kg-duckdb"]
TABLES = ("kg_by_subject", "kg_by_object", "kg_labels", "kg_names")
LAYOUTS = ("parquet", "duckdb")
DEFAULT_LAYOUT = "duckdb"
ROW_GROUP_ROWS = 8_192
IN_FILTER_MAX_IDS = 10_000
#: The ART index of each table, by key column (``duckdb`` layout).
ART_KEYS = {"kg_by_subject": "subject", "kg_by_object": "object_qid", "kg_labels": "id", "kg_names": "name"}
#: Memory an ART index takes while it is built, per row of its table (measured: module docstring).
ART_BYTES_PER_ROW = {"kg_by_subject": 19.4, "kg_by_object": 9.0, "kg_labels": 50.0, "kg_names": 60.3}
#: Share of the DuckDB memory limit an index's estimate may take (the rest: the table's blocks being scanned).
ART_SHARE = 0.75
_BUILD_LOCK = threading.Lock()
#: Marker names of builds finished before the ``storage.done`` convention (accepted on read, never written).


def index_folder(kb_version: str, root: Path | None = None, layout_name: str = DEFAULT_LAYOUT) -> Path:
    """Folder of the KG index of a KB version (``indexes/<kb_version>/kg-duckdb.v1[-<layout>]``)."""
    suffix = "" if layout_name == DEFAULT_LAYOUT else f"-{layout_name}"
    return layout.index_dir(kb_version, INDEX_NAME + suffix, root)


def read_index_meta(kb_version: str, root: Path | None = None, layout_name: str = DEFAULT_LAYOUT) -> dict | None:
    """The done marker of a built KG index (row counts, layout, build time), or ``None`` when it is not built."""
    return read_done(index_folder(kb_version, root, layout_name), DONE, unit="index")


def art_plan(row_counts: dict[str, int], memory_limit: str, budget: int | None = None) -> dict[str, int | None]:
    """Which ART indexes to build: table -> its estimated build memory in bytes, ``None`` where it fits.

    An index fits when ``rows x ART_BYTES_PER_ROW`` is within ``budget`` (default: ``ART_SHARE`` of
    ``memory_limit``, a resolved DuckDB size such as ``6300MB``).
    """
    budget = int(memory_limit_bytes(memory_limit) * ART_SHARE) if budget is None else budget
    est = {t: int(row_counts.get(t, 0) * ART_BYTES_PER_ROW[t]) for t in ART_KEYS}
    return {t: (None if e <= budget else e) for t, e in est.items()}


def _out_of_memory(exc: duckdb.Error) -> bool:
    """Whether a DuckDB error is an Out of Memory one (raised as such, or wrapped, e.g. by a failed commit)."""
    return isinstance(exc, duckdb.OutOfMemoryException) or "Out of Memory" in str(exc)


def _create_art(con: duckdb.DuckDBPyConnection, table: str, skip: dict[str, int | None],
                log: Callable[[str], None]) -> bool:
    """Create ``table``'s ART index unless ``skip`` says it would not fit; False (and a log line) when left out.

    A built index is checkpointed at once, so that its memory is written out before the next one is built. An Out
    of Memory error leaves the index out; any other error, or one that left the database unusable, is raised.
    """
    key = ART_KEYS[table]
    if skip.get(table) is None:
        try:
            con.execute(f"CREATE INDEX {table}_{key} ON {table} ({key})")
            con.execute("CHECKPOINT")
            return True
        except duckdb.Error as exc:
            if not _out_of_memory(exc):
                raise
            con.execute(f"DROP INDEX IF EXISTS {table}_{key}")  # raises in turn if the database is invalidated
            log(f"  kg-duckdb: the ART index on {table}.{key} ran out of memory; left out (lookups read zonemaps)")
            return False
    log(f"  kg-duckdb: no ART index on {table}.{key}: it needs ~{skip[table] / 1e9:.1f} GB while it is built, "
        f"over {ART_SHARE:.0%} of the memory limit; lookups read the sorted table's zonemaps")
    return False


def _step_done(log: Callable[[str], None], what: str, t_step: float, rows: int | None = None) -> float:
    """Log one finished build step (its rows and seconds) and return its seconds, rounded for the done marker."""
    seconds = round(time.perf_counter() - t_step, 3)
    log(f"  kg-duckdb: {what}" + (f" {rows:,} rows" if rows is not None else "") + f" in {seconds:.1f}s")
    return seconds


def build_index(kb_version: str, root: Path | None = None, layout_name: str = DEFAULT_LAYOUT,
                memory_limit: str | None = None, row_group_rows: int = ROW_GROUP_ROWS,
                art_budget: int | None = None, log: Callable[[str], None] = print) -> Path:
    """The folder of :func:`ensure_built` (the index built first when it is not)."""
    return ensure_built(kb_version, root, layout_name, memory_limit, row_group_rows, art_budget, log)[0]


def ensure_built(kb_version: str, root: Path | None = None, layout_name: str = DEFAULT_LAYOUT,
                 memory_limit: str | None = None, row_group_rows: int = ROW_GROUP_ROWS,
                 art_budget: int | None = None, log: Callable[[str], None] = print) -> tuple[Path, bool]:
    """Build the sorted KG tables of a KB version once (atomic; a finished index is returned as is).

    The one place a KG index is decided built: the index step and the first lookup both come here.

    Args:
        kb_version: Published KB version.
        root: Data root (default ``LINKEDQA_HOME``).
        layout_name: ``"parquet"`` (sorted Parquet files, small row groups, min/max pruning) or ``"duckdb"``
            (a DuckDB database file with the same tables sorted and ART indexes on the lookup keys where they fit
            the memory limit, :func:`art_plan`).
        memory_limit: DuckDB memory limit for the sorts and index builds (spills to the temp folder beyond it;
            a size or ``auto``; default ``$LINKEDQA_DUCKDB_MEMORY``, else ``auto``: a quarter of the machine's
            memory; the done marker keeps the size it resolved to).
        row_group_rows: Parquet row-group size (the pruning unit).
        art_budget: Bytes an ART index may need while it is built (default: ``ART_SHARE`` of the memory limit);
            an index whose estimate is over it is left out (:func:`art_plan`).
        log: Progress printer: the preferred pairs of the truthy rule (``kg_preferred``, ``tasks.kg.truthy``),
            each table and ART index with its rows and seconds (also in the done marker's ``step_seconds``), and
            any index left out.

    Returns:
        The index folder (with its ``_done.json`` marker), and whether this call built it.

    Raises:
        FileNotFoundError: When the KB version has no claims.
    """
    if layout_name not in LAYOUTS:
        raise ValueError(f"unknown layout {layout_name!r}; known: {', '.join(LAYOUTS)}")
    root = root or layout.home()
    final = index_folder(kb_version, root, layout_name)
    if is_done(final, DONE, unit="index"):
        return final, False
    claims = part_files(layout.kb_table_dir(kb_version, "claims", root))
    if not claims:
        raise FileNotFoundError(f"KB version {kb_version!r}: no claims under {layout.kb_dir(kb_version, root)}")
    # temp folders of builders that died (a live one, or another thread of this process, keeps its own)
    sweep_temps(final.parent, (f"{final.name}.tmp-*",), recursive=False)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "_spill").mkdir(parents=True)
    memory_limit = duckdb_memory_limit(memory_limit)
    if layout_name == "duckdb" and art_budget is None:
        memory_limit_bytes(memory_limit)  # a limit the ART budget cannot read fails now, not after the sorts
    t0 = time.perf_counter()
    db_file = tmp / "kg.duckdb"
    con = duckdb.connect(str(db_file) if layout_name == "duckdb" else ":memory:")
    counts: dict[str, int] = {}
    art: list[str] = []
    skipped: dict[str, int] = {}
    steps: dict[str, float] = {}
    try:
        con.execute(f"SET memory_limit = {sql_literal(memory_limit)}")
        con.execute(f"SET temp_directory = {sql_literal(tmp / '_spill')}")
        con.execute("SET enable_progress_bar = false")
        for table in ("claims", "entities", "properties"):
            files = [(f, {}) for f in part_files(layout.kb_table_dir(kb_version, table, root))]
            register_parquet_view(con, f"kb_{table}", files, table, root)
        t_step = time.perf_counter()
        create_truthy_claims(con)
        steps["kg_preferred"] = _step_done(log, "kg_preferred", t_step, con.table("kg_preferred").shape[0])
        for name in TABLES:
            t_step = time.perf_counter()
            if layout_name == "parquet":
                out = tmp / f"{name}.parquet"
                con.execute(f"COPY ({kg_sql(name)}) TO {sql_literal(out)} "
                            f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {int(row_group_rows)})")
                counts[name] = pq.ParquetFile(out).metadata.num_rows
                written = f"read_parquet({sql_literal(out)})"
            else:
                con.execute(f"CREATE TABLE {name} AS {kg_sql(name)}")
                counts[name] = con.table(name).shape[0]
                written = name
            if name == "kg_by_subject":  # every truthy claim, once: kg_by_object reads them, not the KB again
                con.execute(f"CREATE OR REPLACE TEMP VIEW kg_claims AS SELECT * FROM {written}")
                con.execute("DROP TABLE kg_preferred")  # its memory is the ART builds' from here on
            steps[name] = _step_done(log, name, t_step, counts[name])
        if layout_name == "duckdb":
            plan = art_plan(counts, memory_limit, art_budget)
            for name in ART_KEYS:
                t_step = time.perf_counter()
                if _create_art(con, name, plan, log):
                    art.append(name)
                    steps[f"art {name}"] = _step_done(log, f"ART index on {name}.{ART_KEYS[name]}", t_step)
                else:
                    skipped[name] = plan[name] or int(counts[name] * ART_BYTES_PER_ROW[name])
            con.execute("CHECKPOINT")
    except BaseException:
        con.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    con.close()
    shutil.rmtree(tmp / "_spill", ignore_errors=True)
    meta = {"index": INDEX_NAME, "layout": layout_name, "kb_version": kb_version, "row_counts": counts,
            "row_group_rows": row_group_rows, "memory_limit": memory_limit,
            **({"art": art, "art_skipped": skipped} if layout_name == "duckdb" else {}),
            "build_seconds": round(time.perf_counter() - t0, 3), "step_seconds": steps,
            "built_at": now_iso()}
    mark_done(tmp, meta, DONE)  # last: the folder is complete once renamed
    try:
        os.replace(tmp, final)
    except OSError:
        # another process published the same index first; theirs is complete (its marker is written last)
        shutil.rmtree(tmp, ignore_errors=True)
        if not is_done(final, DONE, unit="index"):
            raise
        return final, False
    return final, True


class DuckDBKG:
    """``KGClient`` over a KB version's sorted claim tables (default backend; no server needed).

    Example:
        >>> kg = DuckDBKG("sample-f9e16776")  # doctest: +SKIP
        >>> [f.property_label for f in kg.outgoing(["Q1000"])["Q1000"]][:2]  # doctest: +SKIP
        ['country', 'continent']
    """

    def __init__(self, kb_version: str, root: Path | None = None, layout_name: str = DEFAULT_LAYOUT,
                 threads: int | None = None):
        """Bind to a KB version; the index is built (once) and opened on first use.

        Args:
            kb_version: Published KB version.
            root: Data root (default ``LINKEDQA_HOME``).
            layout_name: Index layout (``"parquet"`` or ``"duckdb"``).
            threads: DuckDB threads for lookups (default: DuckDB's, all cores).
        """
        self.kb_version = layout.safe_name(kb_version, "kb version")
        self.root = root or layout.home()
        self.layout_name = layout_name
        self.threads = threads
        self._con: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()
        self._sql = {n: kg_sql(n) for n in ("outgoing", "incoming", "relations", "neighbours", "labels",
                                          "search_label")}

    def _connect(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            with _BUILD_LOCK:
                folder = build_index(self.kb_version, self.root, self.layout_name)
            if self.layout_name == "duckdb":
                con = duckdb.connect(str(folder / "kg.duckdb"), read_only=True)
            else:
                con = duckdb.connect()
                con.execute("SET parquet_metadata_cache = true")
                for name in TABLES:
                    register_parquet_view(con, name, [(folder / f"{name}.parquet", {})], "claims", self.root)
            # push the batch's id list into the scan as an IN filter (ART index scan / row-group pruning) for
            # batches up to this many ids; DuckDB's default (50) falls back to a full scan above 50 ids
            con.execute(f"SET dynamic_or_filter_threshold = {IN_FILTER_MAX_IDS}")
            if self.threads:
                con.execute(f"SET threads = {int(self.threads)}")
            self._con = con
        return self._con

    def _query(self, name: str, **params: object) -> list[tuple]:
        with self._lock:
            return self._connect().execute(self._sql[name], params).fetchall()

    def close(self) -> None:
        """Close the DuckDB connection (reopened on next use)."""
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    def __enter__(self) -> DuckDBKG:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def labels(self, qids: Sequence[str]) -> dict[str, str | None]:
        """English labels of entities or properties (see ``KGClient.labels``)."""
        ids = check_ids(qids)
        out: dict[str, str | None] = dict.fromkeys(ids)
        if ids:
            out.update(self._query("labels", ids=ids))
        return out

    def search_label(self, texts: Sequence[str]) -> list[list[str]]:
        """Entities whose English label or alias equals each text (see ``KGClient.search_label``)."""
        texts = [t if isinstance(t, str) else "" for t in texts]
        out: list[list[str]] = [[] for _ in texts]
        if any(texts):
            for i, qid, _alias_only in self._query("search_label", texts=texts):
                if texts[i - 1]:
                    out[i - 1].append(qid)
        return out

    def _facts(self, rows: list[tuple]) -> list[Fact]:
        ids = {x for r in rows for x in (r[0], r[1], r[2]) if x is not None}
        names = self.labels(sorted(ids)) if ids else {}
        return [Fact(subject=s, property=p, property_label=names.get(p), object_qid=oq, object_value=ov,
                     object_label=names.get(oq) if oq else None, datatype=dt, subject_label=names.get(s))
                for s, p, oq, ov, dt in rows]

    def outgoing(self, qids: Sequence[str], limit_per_entity: int | None = None) -> dict[str, list[Fact]]:
        """Claims whose subject is each entity (see ``KGClient.outgoing``)."""
        ids, limit = check_ids(qids), check_limit(limit_per_entity)
        rows = self._query("outgoing", qids=ids, lim=limit) if ids else []
        return finish_facts(ids, self._facts(rows), "subject", limit)

    def incoming(self, qids: Sequence[str], limit_per_entity: int | None = None) -> dict[str, list[Fact]]:
        """Claims whose item object is each entity (see ``KGClient.incoming``)."""
        ids, limit = check_ids(qids), check_limit(limit_per_entity)
        rows = self._query("incoming", qids=ids, lim=limit) if ids else []
        return finish_facts(ids, self._facts(rows), "object_qid", limit)

    def relations(self, qids: Sequence[str]) -> dict[str, list[Relation]]:
        """Properties around each entity with claim counts (see ``KGClient.relations``)."""
        ids = check_ids(qids)
        rows = self._query("relations", qids=ids) if ids else []
        names = self.labels(sorted({r[1] for r in rows})) if rows else {}
        out: dict[str, list[Relation]] = {q: [] for q in ids}
        for q, pid, direction, n in rows:
            out[q].append(Relation(pid=pid, label=names.get(pid), direction=direction, count=int(n)))
        for rels in out.values():
            rels.sort(key=relation_sort_key)
        return out

    def neighbours(self, pairs: Sequence[tuple[str, str, str]]) -> list[list[Fact]]:
        """Facts linking each entity through one property in one direction (see ``KGClient.neighbours``)."""
        reqs = check_pairs(pairs)
        if not reqs:
            return []
        uniq = list(dict.fromkeys(reqs))
        rows = self._query("neighbours", qids=[r[0] for r in uniq], pids=[r[1] for r in uniq],
                           dirs=[r[2] for r in uniq])
        facts = self._facts([r[3:] for r in rows])
        grouped: dict[tuple[str, str, str], list[Fact]] = {}
        for r, f in zip(rows, facts, strict=True):
            grouped.setdefault((r[0], r[1], r[2]), []).append(f)
        return [sorted(grouped.get(r, []), key=fact_sort_key) for r in reqs]
