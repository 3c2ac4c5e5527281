"""Shared machinery of the on-disk BM25 indexes (tantivy): atomic build, open, batched search.

Inputs: an iterable of row dicts (streamed, never held in memory as a whole), or :class:`ParquetRows` (Parquet
files read by row group, which ``workers`` processes can read and turn into documents in parallel). Outputs: an
index folder::

    <folder>/tantivy/        tantivy index (memory-mapped by tantivy's MmapDirectory)
    <folder>/docs.arrow      Arrow IPC file, one row per indexed document (memory-mapped on open); the fast
                             read path for candidates: a hit's ``row`` fast field is its row number here
    <folder>/tie_rank.npy    int32 per docs.arrow row: its place in the tie-break order of equal scores
                             (popularity, then the document's key); an index built without it gets it at
                             its first open
    <folder>/_done.json      the done-marker (``storage.done``), written last: doc count, build time, size,
                             parameters (folders built before the convention hold ``meta.json``, still read)

A folder is complete when its done-marker exists. Builds happen in a hidden sibling folder
(``.<name>.building-<pid>-<hex>``) that is renamed onto ``<folder>`` at the end, so a crash never leaves a
half-built index under the final name (the next build sweeps the temp of a dead builder, ``storage.done.sweep_temps``).
Whether a KB's index is built is decided by its caller (``kb_indexes.ensure_index``); ``build`` refuses a finished
folder rather than deciding again.

User text never reaches tantivy's query grammar raw: :func:`query_key` keeps letters and digits only
(casefolded, accents stripped), so quotes, colons, parentheses, ``AND``/``OR``/``NOT``, ``*``, ``-`` and
``field:value`` are plain text; ``parse_query_lenient`` is still used so that nothing can make a search raise.
Exact matches of the whole key against a name or alias get a constant bonus on top of BM25 (the behaviour of
Wikidata's own entity search, where the exact label wins).

Subclasses (``EntityIndex``, ``TitleIndex``, ``PassageIndex``) declare fields and turn rows into documents.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import contextlib
import functools
import gc
import itertools
import json
import multiprocessing
import os
import re
import shutil
import sys
import threading
import time
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import tantivy

from storage.done import DONE, is_done, mark_done, read_done, sweep_temps
from storage.manifest import now_iso
from storage.side_files import save_npy_atomic
from tasks.progress import phase, progress
from tasks.workers import cpu_count, pool_initializer

#: The done-marker of an index folder (``storage.done.DONE``), and the name it had before the convention.
META = DONE
DOCS = "docs.arrow"
TANTIVY_DIR = "tantivy"
ANALYZER = "lq_text"
STORE_ONLY = "lq_store_only"
FORMAT_VERSION = 1
_BATCH_ROWS = 8192
#: Hits fetched at first: ``_FIRST_FETCH`` times k, at least k + ``_TIE_MARGIN``, so most tie groups at the k-th
#: score need no second search (a second search costs as much as the first; on the sample KB's WebQSP-EL mentions
#: 2k fetched at first served 11% more queries per CPU second than k + 16, and 3k or 5k fewer).
_FIRST_FETCH = 2
_TIE_MARGIN = 16
#: Most hits fetched for one query while completing the tie group at the k-th score (bounds time and memory on
#: huge groups, e.g. thousands of scholarly articles titled "Editorial"); past it the order inside the group
#: may depend on the segments again.
_MAX_FETCH = 20_000
#: Decimals of a hit's score. tantivy adds a query's term scores in float32 in an order that can depend on the
#: segments (block-WAND), so the same document can score one ulp apart in two layouts; rounded, it cannot
#: (except across a rounding boundary). The runs' stored candidates kept 4 decimals already.
SCORE_DECIMALS = 4


class NoKeys:
    """Stands in for the set of seen keys when the input's keys are known unique: remembers nothing."""

    def __contains__(self, key: object) -> bool:
        return False

    def add(self, key: object) -> None:
        """Nothing to remember."""


class SearchIndexError(RuntimeError):
    """Base error of the search indexes."""


class IndexNotFound(SearchIndexError, FileNotFoundError):
    """The folder holds no finished index (no done-marker)."""


class IndexKindMismatch(SearchIndexError):
    """The folder holds an index of another kind (e.g. a TitleIndex opened as EntityIndex)."""


def query_key(text: str | None) -> str:
    """Normalise text for exact matching and safe query parsing.

    Casefolds, strips accents (NFKD, combining marks dropped), replaces every character that is not a
    letter or digit by a space and collapses spaces. ``"Boston, MA"`` and ``"boston  ma"`` give the same key.

    It runs for every name the entity and title indexes hold (hundreds of millions at full scale), so ASCII
    text, ~90% of the names, takes one ``str.translate``; other text is decomposed and its combining marks
    deleted by ``str.translate`` and its non-alphanumeric runs replaced by one regex. Same keys as the
    per-character rule (differential test over every code point).

    Args:
        text: Any user or KB text (``None`` is treated as empty).

    Returns:
        The key; ``""`` for empty or all-punctuation text.
    """
    if not text:
        return ""
    if text.isascii():
        return " ".join(text.translate(_ASCII_KEY).split())
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    if not decomposed.isascii():
        decomposed = decomposed.translate(_combining_marks())
    return " ".join(_NOT_ALNUM.sub(" ", decomposed).split())


#: ASCII casefolded, every non-alphanumeric character a space (``str.isalnum``; casefold is lower on ASCII).
_ASCII_KEY = str.maketrans({chr(i): chr(i).lower() if chr(i).isalnum() else " " for i in range(128)})
#: Runs of characters that are not ``str.isalnum`` (re's ``\w`` is ``str.isalnum`` plus the underscore).
_NOT_ALNUM = re.compile(r"[\W_]+")


@functools.cache
def _combining_marks() -> dict[int, None]:
    """``str.translate`` table deleting every code point with a non-zero combining class (~80 ms, once)."""
    return {i: None for i in range(sys.maxunicode + 1) if unicodedata.combining(chr(i))}


def raw_key(text: str | None) -> str:
    """Casefolded text with whitespace collapsed, punctuation kept: ``"Oklahoma!"`` stays ``"oklahoma!"``."""
    return " ".join(text.casefold().split()) if text else ""


def text_analyzer() -> tantivy.TextAnalyzer:
    """The analyzer of every tokenized field.

    Splits on non-alphanumerics, drops tokens over 40 bytes, lowercases and ASCII-folds (so ``Moșanu`` and
    ``Mosanu`` match).
    """
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )


def store_only_analyzer() -> tantivy.TextAnalyzer:
    """An analyzer that emits no token: a text field using it is stored but not indexed."""
    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(r"a^")).build()


def register_analyzers(index: tantivy.Index) -> None:
    """Register the analyzers every index of this package uses (needed at build and at every open)."""
    index.register_tokenizer(ANALYZER, text_analyzer())
    index.register_tokenizer(STORE_ONLY, store_only_analyzer())


def folder_size(path: Path) -> int:
    """Total size in bytes of the regular files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def read_meta(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The done-marker of a finished index folder (``_done.json``, or a legacy ``meta.json``), else ``None``."""
    return read_done(Path(folder), META, unit="index")


def is_built(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a finished index (its done-marker, or a legacy ``meta.json``, present)."""
    return is_done(Path(folder), META, unit="index")


def prepare_build_folder(folder: Path, kind: str) -> Path:
    """Check the target of a build and create its temporary sibling.

    Args:
        folder: Final index folder (must not exist, or be an empty folder).
        kind: Index kind, used in error messages.

    Returns:
        The temporary build folder (created, empty).

    Raises:
        SearchIndexError: When ``folder`` exists and is not empty (a finished index, or anything else: it is
            never deleted).
    """
    if is_built(folder):
        raise SearchIndexError(f"{folder} already holds a finished {kind} index: open it, or remove the folder to "
                               "build it again")
    if folder.exists():
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        else:
            raise SearchIndexError(
                f"cannot build {kind} into {folder}: it exists and holds no done-marker ({META}) "
                "(not a finished index); remove it or choose another folder"
            )
    folder.parent.mkdir(parents=True, exist_ok=True)
    sweep_temps(folder.parent, (f".{folder.name}.building-*",), recursive=False)  # builders that died
    tmp = folder.parent / f".{folder.name}.building-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp


def publish_build(tmp: Path, folder: Path, meta: dict[str, Any]) -> bool:
    """Write the done-marker last inside ``tmp`` (``storage.done.mark_done``) and rename ``tmp`` onto ``folder``.

    Args:
        tmp: Finished temporary build folder.
        folder: Final folder.
        meta: Metadata; ``size_bytes`` and ``built_at`` are added.

    Returns:
        ``True`` when this call published the index, ``False`` when a concurrent builder published first (the
        temporary folder is then removed and the other build is kept).
    """
    meta = dict(meta)
    meta["size_bytes"] = folder_size(tmp)
    meta["built_at"] = now_iso()
    mark_done(tmp, meta, META)
    try:
        os.rename(tmp, folder)
    except OSError:
        if is_built(folder):
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return True


class BM25Index:
    """Base class: a tantivy BM25 index plus an Arrow side table of the payload returned with each hit.

    Subclasses set the class variables and implement :meth:`_tantivy_schema`, :meth:`_documents` and
    :meth:`_make_hits`. Instances are read-only and cheap to share between threads of one process.
    """

    KIND: ClassVar[str] = "bm25"
    #: Arrow schema of ``docs.arrow`` (payload returned with hits).
    DOCS_SCHEMA: ClassVar[pa.Schema]
    #: Tokenized fields searched by BM25, with their boosts; combined with a disjunction-max.
    SEARCH_FIELDS: ClassVar[dict[str, float]]
    #: Tie-breaker of the disjunction-max (0 = pure max of the fields' scores).
    TIE_BREAKER: ClassVar[float] = 0.1
    #: ``False``: one disjunction-max over the fields, each scoring the whole query (an entity is scored by its
    #: best field). ``True``: one disjunction-max over the fields per distinct query term, and the terms' scores
    #: added up, so terms found in different fields (one in the label, one in an alias) count together.
    PER_TERM: ClassVar[bool] = False
    #: Raw (untokenized) fields holding :func:`query_key` of names, with the constant bonus of an exact match.
    EXACT_FIELDS: ClassVar[dict[str, float]] = {}
    #: Raw fields holding :func:`raw_key` of names (punctuation kept), with their bonus: separates
    #: ``Oklahoma!`` from ``Oklahoma``, whose :func:`query_key` is the same.
    RAW_EXACT_FIELDS: ClassVar[dict[str, float]] = {}
    #: Default number of hits.
    DEFAULT_K: ClassVar[int] = 50
    #: Column of ``docs.arrow`` holding the document's unique key (one document per key), the last tie-break of
    #: :meth:`search_many`: shorter first, then by value (numeric order of ``Q...`` ids of equal length).
    TIE_KEY: ClassVar[str]

    def __init__(self, folder: Path, meta: dict[str, Any]):
        self.folder = folder
        self.meta = meta
        self._index = tantivy.Index.open(str(folder / TANTIVY_DIR))
        register_analyzers(self._index)
        self._schema = self._index.schema
        self._searcher = self._index.searcher()
        self._docs: pa.Table = pa.ipc.open_file(pa.memory_map(str(folder / DOCS), "r")).read_all()
        self._search_pool: tuple[cf.ThreadPoolExecutor, int] | None = None

    # ----------------------------------------------------------------------------------------- subclass API
    @classmethod
    def _tantivy_schema(cls) -> tantivy.Schema:
        raise NotImplementedError

    @classmethod
    def _documents(
        cls, rows: Iterable[dict[str, Any]], stats: dict[str, int], seen: set[str] | NoKeys
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """Yield ``(the document's fields without the row field, docs.arrow row)`` per kept input row.

        The fields map a schema field to its value or list of values (:func:`add_texts`): plain data, so they can
        be built in another process and reach tantivy as JSON (``IndexWriter.add_json``), or here through
        ``Document.from_dict`` (same documents; the tests compare both builds). ``seen`` holds the keys
        already indexed (a later row with one is skipped), or is a :class:`NoKeys` when the caller knows the
        keys are unique.
        """
        raise NotImplementedError

    @classmethod
    def _chunks(
        cls, rows: Iterable[dict[str, Any]], stats: dict[str, int], seen: set[str] | NoKeys
    ) -> Iterator[tuple[list[dict[str, Any]], pa.RecordBatch]]:
        """The kept rows' documents (:meth:`_documents`) in chunks: (their fields, their docs.arrow rows)."""
        docs: list[dict[str, Any]] = []
        payloads: list[dict[str, Any]] = []
        for fields, payload in cls._documents(rows, stats, seen):
            docs.append(fields)
            payloads.append(payload)
            if len(docs) >= _BATCH_ROWS:
                yield docs, pa.RecordBatch.from_pylist(payloads, schema=cls.DOCS_SCHEMA)
                docs, payloads = [], []
        if docs:
            yield docs, pa.RecordBatch.from_pylist(payloads, schema=cls.DOCS_SCHEMA)

    @classmethod
    def _encoded(
        cls, rows: Iterable[dict[str, Any]], stats: dict[str, int], seen: set[str] | NoKeys
    ) -> Iterator[tuple[list[str], pa.RecordBatch]]:
        """:meth:`_chunks` with each document as JSON without its row: what a worker process sends back.

        ``IndexWriter.add_json`` parses it in tantivy: the writing process does no more than number the rows.
        """
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        for docs, batch in cls._chunks(rows, stats, seen):
            for fields in docs:
                if not fields or "row" in fields:  # the writing process numbers the row: '{"row":N,' + ...
                    raise SearchIndexError(f"{cls.KIND}: a document needs fields, and no 'row' field: {fields!r}")
            yield [dumps(fields) for fields in docs], batch

    @classmethod
    def _add_rows(cls, writer: tantivy.IndexWriter, out: pa.ipc.RecordBatchFileWriter, schema: tantivy.Schema,
                  rows: Iterable[dict[str, Any]], stats: dict[str, int], seen: set[str] | NoKeys) -> None:
        """Turn ``rows`` into documents here and add them, and their docs.arrow rows to ``out``.

        ``Document.from_dict`` with the schema: in one process ~20% less CPU than JSON (measured on the sample
        KB's entities).
        """
        from_dict = tantivy.Document.from_dict
        for docs, batch in cls._chunks(rows, stats, seen):
            for fields in docs:
                fields["row"] = stats["docs"]
                writer.add_document(from_dict(fields, schema))
                stats["docs"] += 1
            out.write_batch(batch)

    @staticmethod
    def _add_encoded(writer: tantivy.IndexWriter, out: pa.ipc.RecordBatchFileWriter,
                     chunks: Iterator[tuple[list[str], pa.RecordBatch]], stats: dict[str, int]) -> None:
        """Add documents encoded elsewhere (:meth:`_encoded`), numbering their rows here; their rows to ``out``.

        ``chunks`` is closed on the way out: on an error, its worker processes stop now, not when it is collected.
        """
        add = writer.add_json
        with contextlib.closing(chunks):
            for docs, batch in chunks:
                row = stats["docs"]
                for doc in docs:  # the row goes first: '{"row":7,' + the rest of '{...}'
                    add(f'{{"row":{row},{doc[1:]}')
                    row += 1
                stats["docs"] = row
                out.write_batch(batch)

    @classmethod
    def _encode_unit(cls, source: ParquetRows, unit: tuple[str, int]
                     ) -> tuple[list[tuple[list[str], pa.RecordBatch]], dict[str, int]]:
        """(The chunks of :meth:`_encoded`, the counters) of one row group of ``source``, in a worker process."""
        stats = dict.fromkeys(_STATS, 0)
        return list(cls._encoded(source.read(unit), stats, NoKeys())), stats

    @classmethod
    def _encoded_in_processes(cls, source: ParquetRows, units: list[tuple[str, int, int]], workers: int,
                              stats: dict[str, int]) -> Iterator[tuple[list[str], pa.RecordBatch]]:
        """:meth:`_encoded` of ``source``'s row groups (``units``) by ``workers`` processes, in input order.

        At most ``workers + 1`` row groups are in flight, so memory stays bounded when the writer is the slower
        side (a row group's documents and docs.arrow rows: ~40 MB for 122,880 entities, ~170 MB for as many
        passages). The workers are spawned (this process may hold tantivy's and DuckDB's threads), ignore
        Ctrl-C (this process handles it) and end within about a second of this process's death. A worker's
        error is raised here, a worker that dies (OOM killer, ``kill -9``) raises ``BrokenProcessPool``; then,
        or when the caller leaves early, the queued row groups are cancelled and the running ones finish first.
        """
        total = sum(n for _, _, n in units)
        pool = cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                      initializer=pool_initializer, initargs=(None, os.getpid(), True))
        try:
            with progress(source.desc or f"{cls.KIND} documents", total=total, unit="row") as bar:
                pending: collections.deque = collections.deque()
                todo = iter(units)
                while True:
                    while len(pending) <= workers:
                        unit = next(todo, None)
                        if unit is None:
                            break
                        pending.append((unit[2], pool.submit(cls._encode_unit, source, unit[:2])))
                    if not pending:
                        break
                    n, future = pending.popleft()
                    chunks, part = future.result()  # re-raises a worker's exception here
                    del future  # so that at most workers + 1 row groups are held, this one included
                    for key, value in part.items():
                        stats[key] += value
                    yield from chunks
                    del chunks
                    bar.update(n)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _make_hits(self, columns: dict[str, list[Any]], scores: list[float]) -> list[Any]:
        """Build hit objects column-wise from ``docs.arrow`` columns (taken in hit order) and scores."""
        raise NotImplementedError

    # ----------------------------------------------------------------------------------------- build / open
    @classmethod
    def build(
        cls,
        folder: str | os.PathLike[str],
        rows: Iterable[dict[str, Any]],
        *,
        heap_mb: int = 256,
        threads: int = 1,
        workers: int = 1,
        extra_meta: dict[str, Any] | None = None,
        keys_unique: bool = False,
    ) -> Self:
        """Build the index atomically into ``folder`` and open it.

        Args:
            folder: Target folder (usually ``storage.layout.index_dir(kb_version, name)``).
            rows: Input rows (streamed once), or :class:`ParquetRows`.
            heap_mb: Indexing memory budget of tantivy's writer, in MB (at least 15 MB per thread).
            threads: Indexing threads (1 keeps one segment on small inputs; more helps on large ones).
            workers: Processes turning rows into documents, when ``rows`` is :class:`ParquetRows` with at least
                :data:`MIN_UNITS_PER_WORKER` row groups per worker and ``keys_unique`` (each worker reads its own
                row groups); this process then only hands the documents to tantivy (``add_json``). Otherwise,
                or with 1, this process does it all (the done marker's ``workers`` says which). The index is
                the same either way: same documents, same rows, same order.
            extra_meta: More keys for the done-marker (e.g. the KB version and input hashes).
            keys_unique: The caller checked that no two rows share a key (the KB's builders do, with DuckDB):
                then no set of seen keys is kept, whose memory grows with the input (~10 GB for 115 M QIDs).

        Returns:
            The opened index.

        Raises:
            SearchIndexError: When ``folder`` exists and is not empty (a finished index included).
        """
        folder = Path(folder)
        tmp = prepare_build_folder(folder, cls.KIND)
        t0 = time.perf_counter()
        writer = None
        try:
            stats = dict.fromkeys(_STATS, 0)
            index = tantivy.Index(cls._tantivy_schema(), path=str(_mkdir(tmp / TANTIVY_DIR)))
            register_analyzers(index)
            writer = index.writer(max(heap_mb, 15 * threads) * 1_000_000, threads)
            units = rows.units() if isinstance(rows, ParquetRows) else []
            parallel = workers > 1 and keys_unique and len(units) >= MIN_UNITS_PER_WORKER * workers
            with pa.OSFile(str(tmp / DOCS), "wb") as sink, pa.ipc.new_file(sink, cls.DOCS_SCHEMA) as out:
                if parallel:
                    chunks = cls._encoded_in_processes(rows, units, workers, stats)
                    cls._add_encoded(writer, out, chunks, stats)
                else:
                    cls._add_rows(writer, out, index.schema, rows, stats, NoKeys() if keys_unique else set())
            with phase(f"{cls.KIND}: tie-break order -> {folder.name}/{TIE_RANK}"):
                docs = pa.ipc.open_file(pa.memory_map(str(tmp / DOCS), "r")).read_all()
                np.save(tmp / TIE_RANK, tie_rank(docs, cls.TIE_KEY))
                del docs
            with phase(f"{cls.KIND}: commit + merge segments -> {folder.name}"):
                writer.commit()
                writer.wait_merging_threads()
            index.reload()
            searcher = index.searcher()
            if searcher.num_docs != stats["docs"]:
                raise SearchIndexError(
                    f"{cls.KIND}: tantivy holds {searcher.num_docs} docs, expected {stats['docs']}"
                )
            meta = {
                "kind": cls.KIND,
                "format_version": FORMAT_VERSION,
                "doc_count": stats["docs"],
                "segments": searcher.num_segments,
                "threads": threads,
                "workers": workers if parallel else 1,
                "build_s": round(time.perf_counter() - t0, 3),
                "stats": stats,
                "search_fields": cls.SEARCH_FIELDS,
                "exact_fields": cls.EXACT_FIELDS,
                "raw_exact_fields": cls.RAW_EXACT_FIELDS,
                "tie_breaker": cls.TIE_BREAKER,
                "per_term": cls.PER_TERM,
                "dedupe": "keys checked unique by the caller" if keys_unique else "set of seen keys",
                "tantivy": getattr(tantivy, "__version__", "?"),
                **(extra_meta or {}),
            }
            del searcher, index, writer
            writer = None
            publish_build(tmp, folder, meta)
        except BaseException:
            if writer is not None:  # stop tantivy's threads before deleting their files
                with contextlib.suppress(Exception):  # best effort: the folder is deleted anyway
                    writer.rollback()
                del writer
                gc.collect()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return cls.open(folder)

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> Self:
        """Open a finished index (memory-mapped).

        Raises:
            IndexNotFound: No done-marker in ``folder``.
            IndexKindMismatch: The folder holds another kind of index.
        """
        folder = Path(folder)
        meta = read_meta(folder)
        if meta is None:
            raise IndexNotFound(f"no finished {cls.KIND} index in {folder} (missing {META}); build it first")
        if meta.get("kind") != cls.KIND:
            raise IndexKindMismatch(f"{folder} holds a {meta.get('kind')!r} index, not {cls.KIND!r}")
        return cls(folder, meta)

    def __len__(self) -> int:
        return int(self.meta["doc_count"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.folder)!r}, docs={len(self)})"

    # ----------------------------------------------------------------------------------------------- search
    def _term_query(self, field: str, text: str) -> tantivy.Query:
        """BM25 of ``text`` on one tokenized field.

        A term query when the analyzer makes one token of it (twice as fast to build as parsing, same scores), else
        the lenient parser's query.
        """
        tokens = self._analyzer.analyze(text)
        if len(tokens) == 1:
            return tantivy.Query.term_query(self._schema, field, tokens[0], index_option="freq")
        return self._index.parse_query_lenient(text, [field])[0]

    def _fields_query(self, text: str) -> tantivy.Query:
        """BM25 of ``text`` (plain words) on each search field, boosted, combined by the disjunction-max."""
        per_field = []
        for field, boost in self.SEARCH_FIELDS.items():
            q = self._term_query(field, text)
            per_field.append(q if boost == 1.0 else tantivy.Query.boost_query(q, boost))
        if len(per_field) == 1:
            return per_field[0]
        return tantivy.Query.disjunction_max_query(per_field, self.TIE_BREAKER)

    def _query(self, key: str, raw: str = "") -> tantivy.Query:
        if self.PER_TERM and len(self.SEARCH_FIELDS) > 1:
            clauses = [(tantivy.Occur.Should, self._fields_query(term)) for term in dict.fromkeys(key.split())]
        else:
            clauses = [(tantivy.Occur.Should, self._fields_query(key))]
        if not self.EXACT_FIELDS and not self.RAW_EXACT_FIELDS:
            return clauses[0][1] if len(clauses) == 1 else tantivy.Query.boolean_query(clauses)
        exact = [(f, b, key) for f, b in self.EXACT_FIELDS.items()]
        exact += [(f, b, raw) for f, b in self.RAW_EXACT_FIELDS.items() if raw]
        for field, bonus, value in exact:
            term = tantivy.Query.term_query(self._schema, field, value)
            clauses.append((tantivy.Occur.Should, tantivy.Query.const_score_query(term, bonus)))
        return tantivy.Query.boolean_query(clauses)

    @functools.cached_property
    def _analyzer(self) -> tantivy.TextAnalyzer:
        return text_analyzer()

    @functools.cached_property
    def _tie_rank(self) -> np.ndarray:
        """Each document's place in the tie-break order, one int32 per document.

        The order: popularity, more first; then ``TIE_KEY``, shorter first, then by value. A batch orders its hits
        with one sort of (run of equal scores, this rank).

        Read from the index folder's ``tie_rank.npy`` (memory-mapped); an index without it gets it computed here
        (~0.1 s per million documents) and written beside the done-marker for the next process, atomically.
        """
        path = self.folder / TIE_RANK
        if path.is_file():
            return np.load(path, mmap_mode="r")
        rank = tie_rank(self._docs, self.TIE_KEY)
        with contextlib.suppress(OSError):  # a read-only index folder: this process keeps it in memory
            save_npy_atomic(path, rank)
        return rank

    @functools.cached_property
    def _payload(self) -> pa.Table:
        """The side table's columns a hit carries (all but ``popularity``, which only orders ties)."""
        return self._docs.select([c for c in self._docs.column_names if c != "popularity"])

    def search_many(self, queries: Sequence[str], k: int | None = None, threads: int | None = None) -> list[list[Any]]:
        """Top-``k`` hits for each query, in one batched call.

        Queries with the same key (:func:`query_key` and :func:`raw_key`) are searched once (a shard's batch
        repeats mentions: the 1,603 WebQSP-EL test gold mentions hold 1,093 texts). Each distinct query is one
        tantivy search on a shared searcher (on ``threads`` threads: tantivy releases the GIL while it searches);
        then the whole batch is ordered and cut with NumPy, the hits' row numbers read from a fast field in one
        call and their payload taken from the memory-mapped side table in one ``take``. Empty or all-punctuation
        queries give ``[]``.

        The order is total and depends neither on how the index is cut into segments (writer threads, heap
        size, merges), nor on the order of its input rows (a KB's tables come out of DuckDB's parallel merge in
        an order that differs between two builds of the same KB version), nor on the number of threads: score
        (rounded to ``SCORE_DECIMALS``), then popularity (more sitelinks first) when the index has it (entities,
        titles), then the document's key (``TIE_KEY``: shorter first, then by value, so ``Q113375`` before
        ``Q372648``), the last two as one precomputed rank per document (:attr:`_tie_rank`). tantivy breaks equal
        scores by segment and doc id, so the hits are fetched until the group of scores equal to the k-th is
        whole (:meth:`_whole_ties`, at most ``_MAX_FETCH`` hits) and only then ordered and cut at ``k``.

        The cyclic garbage collector is paused during the call: it makes k tuples and hits per query, none of them
        in a cycle, and the collections their allocations trigger cost about a quarter of its CPU time (sample KB,
        k=50).

        Args:
            queries: Query strings (any user text).
            k: Hits per query (default ``DEFAULT_K``).
            threads: Search threads (default :attr:`threads`: ``$LINKEDQA_SEARCH_THREADS``, else every core this
                process may use). The hits are the same for any number.

        Returns:
            One list of hits per query, best first.
        """
        k = self.DEFAULT_K if k is None else int(k)
        keys = [(query_key(text), raw_key(text)) for text in queries]
        distinct = {key: i for i, key in enumerate(dict.fromkeys(key for key in keys if key[0]))}
        if k <= 0 or not distinct:
            return [[] for _ in queries]
        with _gc_paused():
            fetched = self._fetch_all(list(distinct), k, self.threads if threads is None else max(1, int(threads)))
            lists = self._order_and_cut(fetched, k)
            # dropped before the collector resumes: its first pass then scans the hits returned, not also the
            # (score, address) pairs tantivy gave (about twice as many: k=50 hits kept of 2k fetched per query)
            del fetched
            out: list[list[Any]] = []
            given = [False] * len(lists)
            for key in keys:
                i = distinct.get(key)
                if i is None:
                    out.append([])
                else:  # a query that repeats an earlier one's key gets a copy of its list
                    out.append(list(lists[i]) if given[i] else lists[i])
                    given[i] = True
            return out

    @functools.cached_property
    def threads(self) -> int:
        """Default search threads of :meth:`search_many`: ``$LINKEDQA_SEARCH_THREADS``, else every usable core."""
        return search_threads()

    def _fetch_all(self, queries: list[tuple[str, str]], k: int, threads: int) -> list[list[tuple[float, Any]]]:
        """Each query's hits as tantivy returns them (score, address), the tie group at the k-th score whole.

        ``queries``: (:func:`query_key`, :func:`raw_key`) of each query, the first not empty.
        """

        def fetch(keys: list[tuple[str, str]]) -> list[list[tuple[float, Any]]]:
            return [self._whole_ties(self._query(key, raw), k) for key, raw in keys]

        chunks = min(threads, len(queries) // _MIN_QUERIES_PER_THREAD)
        if chunks <= 1:
            return fetch(queries)
        size = -(-len(queries) // chunks)
        parts = [queries[i : i + size] for i in range(0, len(queries), size)]
        return [hits for part in self._pool(chunks).map(fetch, parts) for hits in part]

    def _pool(self, threads: int) -> cf.ThreadPoolExecutor:
        """This index's search threads (made on first use; remade larger when more are asked for)."""
        with _POOL_LOCK:
            if self._search_pool is None or self._search_pool[1] < threads:
                if self._search_pool is not None:
                    self._search_pool[0].shutdown(wait=False)
                self._search_pool = (cf.ThreadPoolExecutor(threads, thread_name_prefix=f"{self.KIND}-search"),
                                     threads)
            return self._search_pool[0]

    def _order_and_cut(self, fetched: list[list[tuple[float, Any]]], k: int) -> list[list[Any]]:
        """The hits of every query ordered (rounded score, then :attr:`_tie_rank`), cut at ``k``, made objects."""
        counts = np.fromiter(map(len, fetched), dtype=np.int64, count=len(fetched))
        total = int(counts.sum())
        if total == 0:
            return [[] for _ in fetched]
        scores = np.empty(total, dtype=np.float64)
        addresses: list[Any] = []
        pos = 0
        for hits in fetched:
            if hits:
                sc, ad = zip(*hits, strict=True)
                scores[pos : pos + len(sc)] = sc
                addresses.extend(ad)
                pos += len(sc)
        # tantivy's scores are float32: times 10^4 they are exact in float64, so this rounds as round(x, 4) does
        scores = np.round(scores, SCORE_DECIMALS)
        rows = np.asarray(self._searcher.fast_field_values("row", addresses), dtype=np.int64)
        query = np.repeat(np.arange(len(fetched)), counts)
        starts = np.cumsum(counts) - counts
        # the k-th score of each query with more than k hits; the hits below it go
        kth = np.full(len(fetched), -np.inf)
        over = counts > k
        kth[over] = scores[starts[over] + k - 1]
        keep = scores >= kth[query]
        query, scores, rows = query[keep], scores[keep], rows[keep]
        # each query's hits come best first: only runs of equal (query, rounded score) need ordering, by tie rank,
        # which a stable sort of (run, rank) does in about one pass over the nearly sorted keys
        new_run = np.empty(len(query), dtype=bool)
        new_run[0] = True
        np.not_equal(scores[1:], scores[:-1], out=new_run[1:])
        new_run[1:] |= query[1:] != query[:-1]
        order = np.argsort((np.cumsum(new_run) << 32) | self._tie_rank[rows], kind="stable")
        kept_counts = np.bincount(query, minlength=len(fetched))
        place = np.arange(len(query)) - np.repeat(np.cumsum(kept_counts) - kept_counts, kept_counts)
        order = order[place < k]
        scores, rows = scores[order], rows[order]
        counts = np.minimum(kept_counts, k)
        taken = self._payload.take(pa.array(rows))
        hits_flat = self._make_hits({name: taken.column(name).to_pylist() for name in taken.column_names},
                                    scores.tolist())
        out: list[list[Any]] = []
        start = 0
        for n in counts.tolist():
            out.append(hits_flat[start : start + n])
            start += n
        return out

    def _whole_ties(self, query: tantivy.Query, k: int) -> list[tuple[float, Any]]:
        """The best hits of ``query`` as tantivy returns them, (score, address), with the k-th's tie group whole.

        The tie group: the hits whose rounded score equals the k-th's.

        tantivy returns the top ``limit`` by score and breaks equal scores by (segment, doc id), which depend
        on the index's layout. A rounded score is the same whatever the layout (the statistics are the whole
        index's), so while the last fetched hit ties with the k-th, more hits are fetched (4x each time, at
        most ``_MAX_FETCH``) until the tie group is whole. Hits below the k-th score are dropped later
        (:meth:`_order_and_cut`).
        """
        limit = first_fetch(k)
        while True:
            hits = self._searcher.search(query, limit, count=False).hits
            if (len(hits) < limit or len(hits) <= k or limit >= _MAX_FETCH
                    or round(hits[-1][0], SCORE_DECIMALS) != round(hits[k - 1][0], SCORE_DECIMALS)):
                return hits
            limit = min(4 * limit, _MAX_FETCH)

    def search(self, query: str, k: int | None = None) -> list[Any]:
        """Hits of one query (``search_many`` with one query)."""
        return self.search_many([query], k)[0]


def first_fetch(k: int) -> int:
    """Hits a search fetches at first for a top-``k`` (:meth:`BM25Index._whole_ties` fetches more on a tie)."""
    return max(_FIRST_FETCH * k, k + _TIE_MARGIN)


#: Queries per thread below which a batch is searched on the calling thread alone.
_MIN_QUERIES_PER_THREAD = 8
_POOL_LOCK = threading.Lock()
#: The tie-break rank file of an index folder (:attr:`BM25Index._tie_rank`).
TIE_RANK = "tie_rank.npy"
#: Environment variable: search threads of a BM25 index's batched search.
SEARCH_THREADS_ENV = "LINKEDQA_SEARCH_THREADS"


def search_threads() -> int:
    """Search threads of a batched BM25 search: ``$LINKEDQA_SEARCH_THREADS``, else every core this process may use.

    Raises:
        ValueError: The variable is set to something other than a positive integer.
    """
    env = os.environ.get(SEARCH_THREADS_ENV, "").strip()
    if not env:
        return cpu_count()
    if not env.isdigit() or int(env) < 1:
        raise ValueError(f"{SEARCH_THREADS_ENV}={env!r}: expected a positive number of threads")
    return int(env)


def tie_rank(docs: pa.Table, key: str) -> np.ndarray:
    """Each row's place in the tie-break order: int32, one per row of ``docs``.

    The order: popularity (more first, none as 0), then ``key`` (shorter first, then by value). Keys are unique, so
    the order is total.
    """
    columns = {"key_length": pc.utf8_length(docs.column(key)), "key": docs.column(key)}
    sort_keys = [("key_length", "ascending"), ("key", "ascending")]
    if "popularity" in docs.column_names:
        columns = {"popularity": pc.fill_null(docs.column("popularity"), 0), **columns}
        sort_keys.insert(0, ("popularity", "descending"))
    order = pc.sort_indices(pa.table(columns), sort_keys=sort_keys).to_numpy()
    rank = np.empty(len(docs), dtype=np.int32)
    rank[order] = np.arange(len(docs), dtype=np.int32)
    return rank


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block, if it runs (a collector paused by the caller stays so).

    The collector's switch is the process's: a block on another thread that starts while this one runs sees it
    paused and leaves it to this one to restart, so it never stays off after every block has ended.
    """
    running = gc.isenabled()
    if running:
        gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()


def hit_tuples(cls: type[tuple], *columns: Iterable[Any]) -> list[Any]:
    """Named tuples of ``cls`` from its fields' columns, built by ``tuple.__new__``.

    A named tuple's own ``__new__`` is a Python function: 1.6x slower for the 50 hits per query of a search.
    """
    return list(map(tuple.__new__, itertools.repeat(cls), zip(*columns, strict=True)))


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def add_texts(fields: dict[str, Any], field: str, values: Iterable[str | None]) -> None:
    """Add each non-empty value to the (multi-valued) text field ``field`` of a document's fields."""
    kept = [v for v in values if v]
    if kept:
        if field in fields:
            fields[field].extend(kept)
        else:
            fields[field] = kept


#: Row groups per worker process below which a build turns rows into documents itself: a spawned worker costs
#: ~2 s of start-up (imports) and a row group of 122,880 entities ~3 s of producer CPU, so with fewer row groups
#: the processes do not pay (a 100k-entity KB has one row group: ``bench_scale`` at 100k went 10.6 -> 17.6 s).
MIN_UNITS_PER_WORKER = 2
#: Rows converted to Python at once when a row group is read (:meth:`ParquetRows.read`).
_READ_ROWS = 50_000
#: The counters of a build (its done marker's ``stats``).
_STATS = ("rows_in", "docs", "duplicates_skipped", "rows_skipped")


@dataclass(frozen=True)
class ParquetRows:
    """Rows of Parquet files read row group by row group: an input that worker processes can share out.

    Iterating it reads every row here (with a progress line when ``desc`` is set); a build with ``workers``
    gives each worker whole row groups to read instead (:meth:`units`, :meth:`read`).

    Attributes:
        files: The Parquet files, in order.
        columns: The columns read.
        transform: Applied to the rows of each row group (a module-level function, so workers can import it),
            e.g. derived names; ``None``: the rows as read.
        desc: The progress line's label.
    """

    files: tuple[str, ...]
    columns: tuple[str, ...]
    transform: Callable[[Iterable[dict[str, Any]]], Iterable[dict[str, Any]]] | None = None
    desc: str | None = None

    def units(self) -> list[tuple[str, int, int]]:
        """``(file, row group, rows)`` of every row group, in order."""
        out = []
        for f in self.files:
            meta = pq.ParquetFile(f).metadata
            out.extend((f, g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups))
        return out

    def read(self, unit: tuple[str, int]) -> Iterable[dict[str, Any]]:
        """The (transformed) rows of one row group, streamed in batches of :data:`_READ_ROWS`.

        A whole row group of passages would be ~300 MB of Python objects at once.
        """
        f, group = unit
        batches = pq.ParquetFile(f).iter_batches(batch_size=_READ_ROWS, row_groups=[group],
                                                 columns=list(self.columns))
        rows = (row for batch in batches for row in batch.to_pylist())
        return self.transform(rows) if self.transform else rows

    def __iter__(self) -> Iterator[dict[str, Any]]:
        units = self.units()
        with progress(self.desc, total=sum(n for _, _, n in units), unit="row") if self.desc else \
                contextlib.nullcontext() as bar:
            for f, group, n in units:
                yield from self.read((f, group))
                if bar is not None:
                    bar.update(n)


def clean_list(value: Any) -> list[str]:
    """A list of non-empty, de-duplicated strings from ``None``, a string or any iterable of strings."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    seen: dict[str, None] = {}
    for v in value:
        if v is None:
            continue
        s = str(v).strip()
        if s:
            seen.setdefault(s, None)
    return list(seen)
