"""Stage one shard of one input: run its streaming reader and write one Parquet part per table.

Inputs: an ``InputSpec`` and one of its ``Shard``s. Outputs: ``kb/<version>/_staging/<input key>/s<i>of<n>/``
holding ``<table>.parquet`` for every table the reader emitted, then ``_done.json`` (written last, with row
counts: the ``storage.done`` convention). A shard with ``_done.json`` is skipped on re-run; a shard without it
has the temp files of a killed writer swept and is recomputed from scratch (its parts are replaced atomically),
so a killed build resumes without duplicating rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

from storage import layout
from storage.done import DONE, mark_done, read_done, sweep_temps
from storage.parquet_io import PartWriter
from tasks.dumps.base import RowBlock, Shard, TableRow
from tasks.dumps.bounded_writer import BoundedPartWriter
from tasks.dumps.cmu_articles import read_cmu_articles
from tasks.dumps.properties import read_properties_json
from tasks.dumps.triples import read_codex_json, read_kgtk, read_label_file, read_ntriples, read_title_map, read_triples
from tasks.dumps.wikidata_json import read_entity_file, read_wikidata_json
from tasks.dumps.wikipedia_xml import read_wikipedia_xml
from tasks.kb.plan import InputSpec
from tasks.progress import Progress, count_reads
from tasks.progress import progress as reporter

#: Rows between two progress reports of a staging shard (the hot loop only compares a counter).
REPORT_ROWS = 10_000


def shard_bytes(spec: InputSpec, shard: Shard) -> int | None:
    """Bytes a shard reads from disk: its byte range, or the whole (compressed) file; ``None`` for folders."""
    path = Path(spec.path)
    if not path.is_file():
        return None
    size = path.stat().st_size
    if shard.by_lines:
        return size  # compressed: every line shard decompresses from the start (an upper bound)
    if shard.seek_index is not None:
        return (shard.end or 0) - shard.start or None  # compressed, read by decompressed range: counts those bytes
    # a stream-boundary shard (.bz2) counts the compressed bytes it reads: its range (the last stream it
    # finishes past it is not counted in the total)
    return max(0, (size if shard.end is None else min(shard.end, size)) - shard.start) or None


def _report(bar: Progress, nbytes: int, rows: int, entities: int) -> None:
    bar.set(min(nbytes, bar.total) if bar.total else nbytes, rows=rows, entities=entities)


def _reader(spec: InputSpec, shard: Shard) -> Iterator[TableRow]:
    path = Path(spec.path)
    kind = spec.kind
    langs = spec.languages  # the build's label languages (None = all): every reader that emits labels gets them
    if kind == "wikidata-json":

        return read_wikidata_json(path, shard, source=spec.source, blocks=True, languages=langs)
    if kind == "entity-file":

        return read_entity_file(path, source=spec.source, languages=langs)
    if kind == "kgtk":

        return read_kgtk(path, shard, source=spec.source, languages=langs)
    if kind == "triples":

        return read_triples(path, shard, source=spec.source)
    if kind == "ntriples":

        return read_ntriples(path, shard, source=spec.source, languages=langs)
    if kind in ("litwd-labels", "litwd-aliases", "litwd-descriptions"):

        return read_label_file(path, shard, source=spec.source, kind=kind.split("-", 1)[1], languages=langs)
    if kind == "codex-json":

        return read_codex_json(path, source=spec.source, languages=langs)
    if kind == "title-map":

        return read_title_map(path, source=spec.source)
    if kind == "properties-json":

        return read_properties_json(path, source=spec.source)
    if kind == "wikipedia":

        return read_wikipedia_xml(path, shard, source=spec.source)
    if kind == "cmu-articles":

        return read_cmu_articles(path, shard)
    raise ValueError(f"no reader for input kind {kind!r}")


def _locate_rejects(rows: Iterator[TableRow], shard: Shard) -> Iterator[TableRow]:
    """A stream-boundary shard's offsets count from its first bzip2 stream: each reject's reason says which."""
    where = f" [offset in the bzip2 streams from compressed byte {shard.start}]"
    for table, row in rows:
        if table == "rejects":
            row = {**row, "reason": row["reason"] + where}
        yield table, row


def shard_dir(version: str, spec: InputSpec, shard: Shard, root: Path | None = None) -> Path:
    """Staging folder of one shard: ``s<i>of<n>``.

    ``.streams`` is added for a shard cut at bzip2 stream starts: its range is not the decompressed byte range
    that a build before such shards staged under the same numbers.
    """
    name = f"s{shard.index}of{shard.count}" + (".streams" if shard.streams else "")
    return layout.staging_dir(version, spec.key, name, root=root)


def stage_shard(
    version: str,
    spec: InputSpec,
    shard: Shard,
    root: Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict:
    """Read one shard and write its staging parts (skip if already done).

    Args:
        version: KB version being built.
        spec: The input.
        shard: Which slice of it.
        root: Data root (default ``LINKEDQA_HOME``).
        progress: Optional callback receiving the number of records read so far (every 10,000).

    Progress: a :func:`tasks.progress.progress` reporter per shard (bytes read from disk against the shard's
    size, with ``rows`` and ``entities`` staged), updated every :data:`REPORT_ROWS` rows.

    Returns:
        The shard's done record: ``{"rows": {table: n}, "seconds": s, "skipped": bool, "peak_rss_mb": m}``.

    Raises:
        tasks.dumps.base.DumpError: Unreadable input (truncated stream); nothing is marked done.
    """
    out = shard_dir(version, spec, shard, root)
    done = read_done(out, DONE)
    if done is not None:
        return {**done, "skipped": True}
    sweep_temps(out)  # parts of a killed attempt (their writer is gone): they are rewritten below
    t0 = time.perf_counter()
    writers: dict[str, PartWriter] = {}
    adders: dict[str, Callable[[dict], None]] = {}
    n = n_ent = 0
    report_at = REPORT_ROWS
    desc = f"stage {Path(spec.path).name} [{shard.index + 1}/{shard.count}]"
    rows_in = _reader(spec, shard)
    if shard.streams:
        rows_in = _locate_rejects(rows_in, shard)
    with count_reads() as read, reporter(desc, total=shard_bytes(spec, shard), unit="B") as bar:
        try:
            for table, row in rows_in:
                add = adders.get(table)
                if add is None:
                    w = writers[table] = BoundedPartWriter(table, out / f"{table}.parquet", batch_rows=20_000)
                    add = adders[table] = w.add
                if type(row) is RowBlock:
                    writers[table].add_columns(row.columns)
                    k = len(row)
                else:
                    add(row)
                    k = 1
                n += k
                if table == "entities":
                    n_ent += k
                if n >= report_at:  # one check per row; the report itself once per REPORT_ROWS rows
                    if progress is not None:
                        progress(n)
                    _report(bar, read.bytes, n, n_ent)
                    report_at = (n // REPORT_ROWS + 1) * REPORT_ROWS
            _report(bar, read.bytes, n, n_ent)
            rows = {t: w.close() for t, w in writers.items()}
        except BaseException:
            for w in writers.values():
                w.abort()
            raise
    record = {
        "input": spec.path,
        "kind": spec.kind,
        "shard": [shard.index, shard.count],
        **({"compressed_range": [shard.start, shard.end]} if shard.streams else {}),
        "rows": rows,
        "seconds": round(time.perf_counter() - t0, 3),
        "peak_rss_mb": round(psutil.Process().memory_info().rss / 2**20, 1),
    }
    mark_done(out, record, DONE)
    return {**record, "skipped": False}
