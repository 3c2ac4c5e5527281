"""The DuckDB catalog: views (never tables) over every published Parquet table.

Inputs: the folders under ``LINKEDQA_HOME`` that have a manifest (unfinished versions and runs are invisible).
Outputs: ``catalog.duckdb`` with views ``entities, aliases, labels, claims, properties, articles, passages,
redirects, rejects, questions, predictions, metrics, runs, stages`` (union over all versions/runs, with a
``kb_version`` / ``dataset_version`` column) and ``latest_*`` views, plus the report views in ``sql/reports``.

The catalog is rebuilt into a temp file and renamed over the old one, so a reader never sees a half-built
catalog and a refresh never waits for a reader's lock. Paths are inlined as quoted literals here and only here
(DuckDB views cannot take parameters); everything else is in ``sql/``.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import duckdb

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import part_files, write_table
from storage.schemas import KB_TABLES, SCHEMAS

SQL_DIR = layout.REPO_ROOT / "sql"


def sql_literal(path: Path | str) -> str:
    """Quote a path or string as a SQL string literal (for the view definitions only)."""
    return "'" + str(path).replace("'", "''") + "'"


#: The environment variable that sets the DuckDB memory limit of every bounded-memory batch query (the KB merge, the
#: kg-duckdb build, the N-Triples export and kg-oxigraph's parts, the BM25 key checks), per process: a size, or
#: ``auto`` (the default when it is unset). ``--memory-limit`` of ``kb build``, ``kb index`` and ``kb export-nt``
#: sets it for the command and the workers it spawns.
MEMORY_LIMIT_ENV = "LINKEDQA_DUCKDB_MEMORY"
#: The memory limit that follows the machine: :data:`AUTO_MEMORY_SHARE` of :func:`machine_memory`, split between
#: the processes of a step that run DuckDB at once (see :func:`auto_memory_limit`).
AUTO_MEMORY = "auto"
#: The share of the machine's memory that ``auto`` gives a step's DuckDB queries. These steps run one at a time,
#: but tantivy, Oxigraph, the Python workers and the OS page cache need the rest (DuckDB's own default is 80 %). The
#: fixed 2 GB limit makes the kg-duckdb build at 3 M entities spill 6 GB it does not need to
#: (``make bench-scale``; README, "Scale rehearsal"), and DuckDB advises 1-4 GB per thread.
AUTO_MEMORY_SHARE = 0.25
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)", re.IGNORECASE | re.ASCII)
_UNIT = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
#: The smallest limit accepted: below it these queries fail for want of memory instead of spilling.
MIN_MEMORY_LIMIT = 100 * 10**6
_CGROUP = Path("/sys/fs/cgroup")


def memory_limit_bytes(size: str) -> int:
    """Bytes of a DuckDB memory size such as ``8GB`` or ``6300MB`` (``KB``..``TB`` decimal, ``KiB``..``TiB`` binary).

    ValueError for anything else, ``auto`` included: resolve it first with :func:`duckdb_memory_limit`.
    """
    m = _MEMORY.fullmatch(size.strip())
    if not m:
        raise ValueError(f"expected a memory size such as 8GB or 512MiB, got {size!r}")
    return int(float(m[1]) * _UNIT[m[2].lower()])


def parse_memory_limit(text: str) -> str:
    """A DuckDB memory size such as ``8GB`` or ``512MiB`` (stripped), or ``auto``; ValueError otherwise or < 100 MB."""
    value = text.strip()
    if value.lower() == AUTO_MEMORY:
        return AUTO_MEMORY
    if not _MEMORY.fullmatch(value):
        raise ValueError(f"expected a memory size such as 8GB or 512MiB, or auto, got {text!r}")
    if memory_limit_bytes(value) < MIN_MEMORY_LIMIT:
        raise ValueError(f"a memory size of at least 100MB is needed, got {text!r}")
    return value


def machine_memory(cgroup: Path = _CGROUP) -> int:
    """Bytes of memory this machine's processes may use: the physical memory, or the cgroup's limit when lower.

    A container's limit is what the kernel enforces (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``), and a
    DuckDB limit sized from the host's memory inside a smaller container would be killed instead of spilling.
    """
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for name in ("memory.max", "memory/memory.limit_in_bytes"):
        try:
            text = (cgroup / name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:  # "max", or v1's huge "no limit", leave the physical memory
            total = int(text)
    return total


def auto_memory_limit(processes: int = 1, memory: int | None = None) -> str:
    """The ``auto`` memory limit of each of ``processes`` DuckDB processes that run at once.

    :data:`AUTO_MEMORY_SHARE` of ``memory`` (default :func:`machine_memory`) divided by ``processes``, rounded down
    to 100 MB and at least :data:`MIN_MEMORY_LIMIT`, as a DuckDB size: 6GB for one process on 24 GB, 16GB on 64 GB,
    1GB for each of 16 export processes on 64 GB.
    """
    memory = machine_memory() if memory is None else memory
    mb = max(int(memory * AUTO_MEMORY_SHARE / max(1, processes)) // 10**8 * 100, MIN_MEMORY_LIMIT // 10**6)
    return f"{mb // 1000}GB" if mb % 1000 == 0 else f"{mb}MB"


def duckdb_memory_limit(value: str | None = None, processes: int = 1) -> str:
    """The DuckDB memory limit of a bounded-memory query run by each of ``processes`` processes at once.

    ``value`` when given, else :data:`MEMORY_LIMIT_ENV` when it is set (ValueError when it is not a size or
    ``auto``), else ``auto``; ``auto`` becomes :func:`auto_memory_limit` of ``processes``.
    """
    if not value:
        env = os.environ.get(MEMORY_LIMIT_ENV, "")
        try:
            value = parse_memory_limit(env) if env.strip() else AUTO_MEMORY
        except ValueError as exc:
            raise ValueError(f"{MEMORY_LIMIT_ENV}: {exc}") from None
    return auto_memory_limit(processes) if value.strip().lower() == AUTO_MEMORY else value


def spilling_connection(memory_limit: str, temp_dir: Path | str,
                        threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection for a bounded-memory batch query.

    It holds ``memory_limit``, spills to ``temp_dir``, keeps no insertion order, shows no progress bar, and runs
    ``threads`` threads when given (else DuckDB's default). DuckDB creates ``temp_dir`` only when it first spills,
    and only its last level, so its parent is created here: a query that spilled only at scale failed with
    "Failed to create directory" (kg-oxigraph's parts at 1 M entities in ``make bench-scale``).
    """
    Path(temp_dir).parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute(f"SET memory_limit = {sql_literal(memory_limit)}")
    con.execute(f"SET temp_directory = {sql_literal(temp_dir)}")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET enable_progress_bar = false")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    return con


@dataclass(frozen=True)
class _Source:
    files: list[Path]
    tag_col: str
    tag: str
    extra: dict[str, str]


def _empty_file(table: str, root: Path) -> Path:
    path = root / "_empty" / f"{table}.parquet"
    if not path.exists():
        write_table(SCHEMAS[table].empty_table(), table, path)
    return path


def _done_under(base: Path) -> list[tuple[str, dict]]:
    """(name, manifest) of the folders under ``base`` that have a manifest (are published), oldest first."""
    out = []
    if base.is_dir():
        for d in base.iterdir():
            m = read_manifest(d) if d.is_dir() else None
            if m is not None:
                out.append((d.name, m))
    return sorted(out, key=lambda nm: (nm[1].get("written_at", ""), nm[0]))


def done_kb_versions(root: Path | None = None) -> list[tuple[str, dict]]:
    """Done (published) KB versions, oldest first, with their manifests."""
    return _done_under(layout.kb_root(root))


def latest_kb_version(root: Path | None = None) -> str | None:
    """The newest published KB version, or None."""
    versions = done_kb_versions(root)
    return versions[-1][0] if versions else None


def done_dataset_versions(root: Path | None = None) -> list[tuple[str, str, dict]]:
    """Done (published) dataset versions as (dataset, version, manifest), oldest first."""
    base = layout.datasets_root(root)
    out = []
    if base.is_dir():
        for ds in sorted(p for p in base.iterdir() if p.is_dir()):
            out.extend((ds.name, version, m) for version, m in _done_under(ds))
    return sorted(out, key=lambda x: (x[2].get("written_at", ""), x[0], x[1]))


def done_runs(root: Path | None = None) -> list[tuple[str, dict]]:
    """Done runs (their manifest exists) as (run_id, manifest), oldest first."""
    return _done_under(layout.runs_root(root))


def _union_sql(table: str, sources: list[_Source], root: Path, tag_cols: tuple[str, ...]) -> str:
    parts = []
    for s in sources:
        if not s.files:
            continue
        files = "[" + ", ".join(sql_literal(f) for f in s.files) + "]"
        tags = {s.tag_col: s.tag, **s.extra}
        sel = ", ".join(f"{sql_literal(tags[c])} AS {c}" if c in tags else f"NULL::VARCHAR AS {c}" for c in tag_cols)
        parts.append(f"SELECT *, {sel} FROM read_parquet({files}, union_by_name=true)")
    if not parts:
        sel = ", ".join(f"NULL::VARCHAR AS {c}" for c in tag_cols)
        parts.append(f"SELECT *, {sel} FROM read_parquet({sql_literal(_empty_file(table, root))})")
    return "\nUNION ALL BY NAME\n".join(parts)


def register_parquet_view(con: duckdb.DuckDBPyConnection, view: str, files: list[tuple[Path, dict]],
                          empty_table: str, root: Path, empty_tags: dict | None = None) -> None:
    """Create ``view`` as the union (by name) of Parquet files, each with constant tag columns.

    Args:
        con: Connection.
        view: View name.
        files: ``(path, {column: constant})`` pairs; constants are ints or strings.
        empty_table: Declared table whose empty file stands in when ``files`` is empty.
        root: Data root (for the empty-file stand-in).
        empty_tags: Tag columns (with placeholder constants) for the empty stand-in.
    """

    def select(group: list[Path], tags: dict) -> str:
        cols = "".join(f", {int(v) if isinstance(v, int) else sql_literal(v)} AS {k}" for k, v in tags.items())
        paths = ", ".join(sql_literal(f) for f in group)
        return f"SELECT *{cols} FROM read_parquet([{paths}], union_by_name = true)"

    # One read_parquet per set of tags (e.g. every shard of one input), not one per file: a UNION ALL branch per
    # file multiplied a GROUP BY's memory, and the claims merge of 22 staged shards ran out of a 2 GB limit at
    # 1 M entities (make bench-scale) where one scan of the 22 files ran it in 600 MB.
    groups: dict[tuple, tuple[dict, list[Path]]] = {}
    for f, tags in files:
        groups.setdefault(tuple(sorted(tags.items())), (tags, []))[1].append(f)
    if groups:
        body = "\nUNION ALL BY NAME\n".join(select(group, tags) for tags, group in groups.values())
    else:
        body = select([_empty_file(empty_table, root)], empty_tags or {})
    con.execute(f"CREATE OR REPLACE VIEW {view} AS {body}")


def build_views(con: duckdb.DuckDBPyConnection, root: Path | None = None) -> dict[str, int]:
    """Create all catalog views on a connection (file-backed or in-memory).

    Args:
        con: Target connection.
        root: Data root (default ``LINKEDQA_HOME``).

    Returns:
        Number of sources (versions/runs) behind each base view.
    """
    root = root or layout.home()
    counts: dict[str, int] = {}
    kb_versions = done_kb_versions(root)
    latest_kb = kb_versions[-1][0] if kb_versions else ""
    for table in KB_TABLES:
        sources = [
            _Source(part_files(layout.kb_table_dir(v, table, root)), "kb_version", v, {}) for v, _ in kb_versions
        ]
        counts[table] = sum(1 for s in sources if s.files)
        con.execute(f"CREATE OR REPLACE VIEW {table} AS {_union_sql(table, sources, root, ('kb_version',))}")
        con.execute(
            f"CREATE OR REPLACE VIEW latest_{table} AS SELECT * FROM {table} "
            f"WHERE kb_version = {sql_literal(latest_kb)}"
        )

    ds_versions = done_dataset_versions(root)
    sources = [
        _Source(part_files(layout.dataset_dir(d, v, root) / "questions"), "dataset_version", v, {})
        for d, v, _ in ds_versions
    ]
    counts["questions"] = sum(1 for s in sources if s.files)
    con.execute(
        f"CREATE OR REPLACE VIEW questions AS {_union_sql('questions', sources, root, ('dataset_version',))}"
    )
    latest_ds: dict[str, str] = {}
    for d, v, _ in ds_versions:
        latest_ds[d] = v
    cond = " OR ".join(
        f"(dataset = {sql_literal(d)} AND dataset_version = {sql_literal(v)})" for d, v in latest_ds.items()
    )
    con.execute(f"CREATE OR REPLACE VIEW latest_questions AS SELECT * FROM questions WHERE {cond or 'false'}")

    runs = done_runs(root)
    for table in ("predictions", "metrics", "runs", "stages"):
        # metrics carry the version of the metric rules their values were computed with (manifest; 1 where the
        # manifest has none), so values of different rule versions never mix silently
        fmt = table == "metrics"
        sources = [_Source(part_files(layout.run_dir(r, root) / table), "_run", r,
                           {"metrics_format": str(m.get("metrics_format", 1))} if fmt else {}) for r, m in runs]
        counts[table] = sum(1 for s in sources if s.files)
        body = _union_sql(table, sources, root, ("_run", "metrics_format") if fmt else ("_run",))
        cols = "* EXCLUDE (_run, metrics_format), CAST(metrics_format AS INTEGER) AS metrics_format" if fmt else (
            "* EXCLUDE (_run)")
        con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT {cols} FROM ({body})")
    # latest run per (method, dataset, split); ties broken by run_id
    con.execute(
        "CREATE OR REPLACE VIEW latest_runs AS SELECT * FROM runs "
        "QUALIFY row_number() OVER (PARTITION BY method, dataset, split ORDER BY finished_at DESC, run_id DESC) = 1"
    )
    for table in ("predictions", "metrics"):
        con.execute(
            f"CREATE OR REPLACE VIEW latest_{table} AS SELECT t.* FROM {table} t "
            "JOIN latest_runs r USING (run_id)"
        )
    # the papers' figures beside measured ones (linkedqa reproduce): every stored file; reproduction_matrix keeps
    # the newest row of each (paper, condition, metric, model)
    repro = sorted(layout.reproductions_root(root).glob("*/*.parquet"))
    counts["reproductions"] = len(repro)
    register_parquet_view(con, "reproductions", [(f, {}) for f in repro], "reproductions", root)
    # report views may build on each other: create them in passes until no more succeed (no file-name order
    # contract); a broken report must not take the catalog (and every run's finalisation) down with it
    pending = sorted((SQL_DIR / "reports").glob("*.sql"))
    errors: dict[str, str] = {}
    while pending:
        left = []
        for sql_file in pending:
            try:
                con.execute(f"CREATE OR REPLACE VIEW {sql_file.stem} AS {sql_file.read_text()}")
            except duckdb.Error as exc:
                errors[sql_file.name] = str(exc).splitlines()[0]
                left.append(sql_file)
        if len(left) == len(pending):
            break
        pending = left
    for sql_file in pending:
        warnings.warn(f"report view {sql_file.name} skipped: {errors[sql_file.name]}", stacklevel=2)
    counts["_broken_reports"] = len(pending)
    return counts


#: On-disk format of ``catalog.duckdb`` (DuckDB's ``storage_compatibility_version``).
CATALOG_STORAGE_VERSION = "v1.5.0"


def refresh_catalog(root: Path | None = None) -> Path:
    """Rebuild ``catalog.duckdb`` atomically (temp file + rename).

    Args:
        root: Data root (default ``LINKEDQA_HOME``).

    Returns:
        Path of the catalog.
    """
    root = root or layout.home()
    root.mkdir(parents=True, exist_ok=True)
    final = layout.catalog_path(root)
    tmp = final.with_name(f"catalog.tmp-{os.getpid()}.duckdb")
    tmp.unlink(missing_ok=True)
    wal = tmp.with_name(tmp.name + ".wal")
    try:
        # readable by the DuckDB CLI of the venv (PyPI's duckdb-cli is 1.5.x; the Python package is 2.x), and by
        # any other DuckDB >= 1.5 a user has: the catalog holds only views over Parquet files
        con = duckdb.connect(str(tmp), config={"storage_compatibility_version": CATALOG_STORAGE_VERSION})
        try:
            build_views(con, root)
        finally:
            con.close()
        wal.unlink(missing_ok=True)
        os.replace(tmp, final)
    except BaseException:  # disk full...: the previous catalog stays, no temp database is left
        tmp.unlink(missing_ok=True)
        wal.unlink(missing_ok=True)
        raise
    return final


def connect(root: Path | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with all catalog views (no file lock; safe while others write)."""
    con = duckdb.connect()
    build_views(con, root)
    return con


def run_sql_file(con: duckdb.DuckDBPyConnection, path: Path, params: dict | None = None):
    """Execute one ``sql/**.sql`` SELECT and return a DuckDB relation result as Arrow."""
    sql = path.read_text()
    if params:
        return con.execute(sql, params).to_arrow_table()
    return con.sql(sql).to_arrow_table()
