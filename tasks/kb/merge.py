"""Merge staged shards into the published KB tables with the SQL in ``sql/kb/`` (one SELECT per table).

Inputs: the staging parts of every shard of the plan. Outputs: ``kb/<version>/<table>/part-i-of-n.parquet``
for every KB table, then ``kb/<version>/manifest.json`` (last). DuckDB runs the merge out of core with a
memory limit, so the merge is bounded too; each finished table gets a done marker (``storage.done``:
``_staging/_merged/<table>.json``, written after its parts) and is skipped on re-run; a table without one is
rewritten from an emptied folder (which drops any ``_pending-*`` part of a killed attempt).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa

from storage import layout
from storage.catalog import duckdb_memory_limit, register_parquet_view, spilling_connection
from storage.done import is_done, mark_done, read_done
from storage.manifest import now_iso, write_manifest
from storage.parquet_io import PartWriter, part_files
from storage.schemas import KB_TABLES, schema_for
from tasks.kb.plan import SOURCE_PRIORITY, BuildPlan
from tasks.kb.stage import DONE, shard_dir

SQL_KB = layout.REPO_ROOT / "sql" / "kb"
# Order matters: entities reads kb_aliases and kb_claims; articles reads kb_title_map; passages reads kb_articles.
MERGE_ORDER = ("aliases", "claims", "labels", "title_map", "properties", "entities", "articles", "passages",
               "redirects", "rejects")
ROWS_PER_PART = 2_000_000
#: Rows per Arrow batch streamed out of DuckDB: ``BATCH_ROWS``, or fewer for tables of large rows. Article texts
#: (whole pages: ~30 kB each in the sample's pages) made 100,000-row batches of more than 2 GiB of strings at 3 M
#: entities (``make bench-scale``), which DuckDB could not export ("Arrow Appender: The maximum total string size
#: for regular string buffers is 2147483647") and which held gigabytes in this process.
BATCH_ROWS = 100_000
TABLE_BATCH_ROWS = {"articles": 2_000}
#: Largest slice of a batch conformed to the table's schema at once (its 32-bit string offsets hold 2 GiB).
MAX_SLICE_BYTES = 256 * 2**20


def _compact(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A copy of ``batch`` whose buffers hold its rows alone.

    A slice keeps its parent's 64-bit offsets: a string past the first 2 GiB of the parent's buffer cannot be cast
    to 32-bit offsets until it is copied.
    """
    return pa.RecordBatch.from_arrays([pa.concat_arrays([c]) for c in batch.columns], schema=batch.schema)


def _slices(batch: pa.RecordBatch, max_bytes: int | None = None) -> list[pa.RecordBatch]:
    """``batch`` cut into equal row slices of about ``max_bytes`` each (default ``MAX_SLICE_BYTES``).

    Each slice is copied into buffers of its own (:func:`_compact`) when there is more than one.
    """
    n = -(-batch.nbytes // (max_bytes or MAX_SLICE_BYTES)) if batch.num_rows > 1 else 1
    step = -(-batch.num_rows // n)
    return [_compact(batch.slice(i, step)) for i in range(0, batch.num_rows, step)] if n > 1 else [batch]


def _staged_files(plan: BuildPlan, root: Path) -> dict[str, list[tuple[Path, str]]]:
    out: dict[str, list[tuple[Path, str]]] = {t: [] for t in KB_TABLES}
    for spec in plan.inputs:
        for shard in spec.shards:
            d = shard_dir(plan.version, spec, shard, root)
            if not is_done(d, DONE):
                raise RuntimeError(f"shard not staged: {spec.path} shard {shard.index}/{shard.count}")
            for table in KB_TABLES:
                f = d / f"{table}.parquet"
                if f.is_file():
                    out[table].append((f, spec.source))
    return out


def _register_staging(con: duckdb.DuckDBPyConnection, files: dict[str, list[tuple[Path, str]]], root: Path):
    for table, items in files.items():
        tagged = [(f, {"prio": SOURCE_PRIORITY.get(src, 50), "_src": src}) for f, src in items]
        register_parquet_view(con, f"stg_{table}", tagged, table, root, empty_tags={"prio": 99, "_src": ""})
    if "claims" in files:
        pair_coordinate_halves(con)


def pair_coordinate_halves(con: duckdb.DuckDBPyConnection) -> None:
    """Make the view ``stg_claims_paired``: ``stg_claims`` with each coordinate's two halves joined into one claim.

    ``sql/kb/claims.sql`` reads it; the halves are the view ``stg_coordinate_halves``, whose lone halves
    ``sql/kb/rejects.sql`` lists (the rules: ``sql/kb/stg_coordinate_halves.sql``, ``sql/kb/stg_claims_paired.sql``).
    """
    for view in ("stg_coordinate_halves", "stg_claims_paired"):
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS {(SQL_KB / f'{view}.sql').read_text()}")


def _register_output(con: duckdb.DuckDBPyConnection, table: str, folder: Path, root: Path) -> None:
    register_parquet_view(con, f"kb_{table}", [(f, {}) for f in part_files(folder)], table, root)


def write_query_parts(con: duckdb.DuckDBPyConnection, sql: str, table: str, folder: Path,
                      rows_per_part: int = ROWS_PER_PART, batch_rows: int | None = None) -> int:
    """Stream a query's result into ``part-i-of-n.parquet`` files with the table's declared schema.

    Parts are written under temporary names and renamed once ``n`` is known; the folder is emptied first, so
    a re-run after a crash never mixes old and new parts. DuckDB exports strings with 64-bit offsets here (the
    connection's ``arrow_large_buffer_size`` is turned on), so no batch is too large to export, and each batch is
    conformed to the schema in slices of at most ``MAX_SLICE_BYTES``.

    Args:
        con: Connection holding the query's views.
        sql: The query.
        table: Declared table name (schema).
        folder: The table's folder (emptied first).
        rows_per_part: Rows per part file (a part is closed at the first batch boundary past it).
        batch_rows: Rows per Arrow batch (default: ``TABLE_BATCH_ROWS`` for the table, else ``BATCH_ROWS``).

    Returns:
        Rows written.
    """
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    schema = schema_for(table)
    con.execute("SET arrow_large_buffer_size = true")
    reader = con.sql(sql).to_arrow_reader(batch_rows or TABLE_BATCH_ROWS.get(table, BATCH_ROWS))
    tmp_names: list[Path] = []
    writer: PartWriter | None = None
    total = 0
    try:
        for batch in reader:
            if writer is None or writer.rows >= rows_per_part:
                if writer is not None:
                    writer.close()
                tmp = folder / f"_pending-{len(tmp_names):05d}.parquet"
                tmp_names.append(tmp)
                writer = PartWriter(table, tmp)
            for piece in _slices(batch):
                writer.write_batch(pa.Table.from_batches([piece]).select(schema.names))
            total += batch.num_rows
        if writer is not None:
            writer.close()
        if not tmp_names:
            tmp_names.append(folder / "_pending-00000.parquet")
            PartWriter(table, tmp_names[0]).close()
    except BaseException:  # disk full, DuckDB error...: no pending part may outlive the attempt
        if writer is not None:
            writer.abort()
        for tmp in tmp_names:
            tmp.unlink(missing_ok=True)
        raise
    n = len(tmp_names)
    for i, tmp in enumerate(tmp_names):
        os.replace(tmp, folder / layout.part_name(i, n))
    return total


def merge_and_publish(plan: BuildPlan, root: Path | None = None, memory_limit: str | None = None,
                      threads: int | None = None, extra_manifest: dict | None = None,
                      log: Callable[[str], None] = print) -> dict:
    """Run every merge SQL file, write the tables, then the manifest.

    Args:
        plan: The build plan (all shards must be staged).
        root: Data root.
        memory_limit: DuckDB memory limit, a size or ``auto`` (spills to the staging folder beyond it; default
            ``$LINKEDQA_DUCKDB_MEMORY``, else ``auto``: a quarter of the machine's memory, see
            :func:`storage.catalog.auto_memory_limit`; the manifest keeps the size it resolved to).
        threads: DuckDB threads (default: all cores).
        extra_manifest: More manifest fields (shard records, timings).
        log: Progress printer.

    Returns:
        Row counts per table.
    """
    root = root or layout.home()
    vdir = layout.kb_dir(plan.version, root)
    marks = layout.staging_dir(plan.version, "_merged", root=root)
    marks.mkdir(parents=True, exist_ok=True)
    tmpdir = layout.staging_dir(plan.version, "_duckdb_tmp", root=root)
    memory_limit = duckdb_memory_limit(memory_limit)
    con = spilling_connection(memory_limit, tmpdir, threads)
    _register_staging(con, _staged_files(plan, root), root)
    counts: dict[str, int] = {}
    timings: dict[str, float] = {}
    for table in MERGE_ORDER:
        sql = (SQL_KB / f"{table}.sql").read_text()
        if table == "title_map":
            con.execute(f"CREATE OR REPLACE TEMP TABLE kb_title_map AS {sql}")
            continue
        mark = f"{table}.json"
        out = layout.kb_table_dir(plan.version, table, root)
        done = read_done(marks, mark)
        if done is not None:  # merged by an earlier attempt: its rows and, when its marker has them, seconds
            counts[table] = done["rows"]
            if done.get("seconds") is not None:
                timings[table] = done["seconds"]
        else:
            t0 = time.perf_counter()
            counts[table] = write_query_parts(con, sql, table, out)
            timings[table] = round(time.perf_counter() - t0, 3)
            mark_done(marks, {"rows": counts[table], "seconds": timings[table]}, mark)
            log(f"  merged {table:<11} {counts[table]:>10,} rows in {timings[table]:.1f}s")
        _register_output(con, table, out, root)
    con.close()
    shutil.rmtree(tmpdir, ignore_errors=True)
    manifest = {
        "kind": "kb",
        "kb_version": plan.version,
        "name": plan.name,
        "config": plan.config,
        "inputs": [{"kind": s.kind, "path": s.path, "source": s.source, "shards": len(s.shards)}
                   for s in plan.inputs],
        "row_counts": counts,
        "merge_seconds": timings,
        "merge_memory_limit": memory_limit,
        "finished_at": now_iso(),
        **(extra_manifest or {}),
    }
    write_manifest(vdir, manifest)
    return counts
