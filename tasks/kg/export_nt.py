"""Export one KB version as N-Triples in Wikidata's IRI scheme (``linkedqa kb export-nt``).

Inputs: ``kb/<version>/{claims,entities,properties}`` Parquet parts. Output: one ``.nt`` file (gzip when the
name ends with ``.gz``), written to ``<out>.tmp-<pid>`` and renamed when complete; parts and DuckDB's spill
files go to a ``.<out>.building-<pid>-*`` folder beside it. The next export of the same file removes what a
killed one left (its pid no longer runs). Memory is bounded: claims
stream out of DuckDB (``sql/kg/kg_claims.sql`` over the ``kg_preferred`` temp table, ``tasks.kg.truthy``: the same
truthy rule the DuckDB KG uses) under a memory limit,
entities and properties stream as Parquet batches.

With ``workers`` > 1 the export is cut into units (the claims by a hash of their subject, so that a subject's
preferred claims meet its other claims in the same unit; the entity and property tables by Parquet row groups),
each written by a worker process to a part file beside the output; the parts are then appended in unit order
(gzip members concatenate into one valid gzip stream, which gzip, Python and zlib-based readers read whole; a
reader that stops after the first member would see claims partition 0 only). The triples are the same as a
one-process export's; only their order differs. Each claims worker scans the whole claims table and keeps its
hash partition, so the scan work grows with the number of workers (the formatting work does not).

Triples written (prefixes as on the Wikidata Query Service):

* truthy claims ``wd:Q.. wdt:P.. wd:Q..`` or a literal: ``time`` values ``YYYY-MM-DD`` as
  ``"YYYY-MM-DDT00:00:00Z"^^xsd:dateTime`` and ``YYYY`` as ``xsd:gYear``; ``quantity`` values in canonical
  decimal form (no ``+``, no leading/trailing zeros) as ``xsd:decimal``; everything else (strings, ids, URLs,
  coordinates, non-canonical numbers) as a plain string. Non-canonical numbers stay strings on purpose: stores
  canonicalise typed values (``"+0.70"`` comes back as ``"0.7"``), which would change the value a SPARQL
  client reads back;
* ``rdfs:label``, ``schema:description`` (``@en``) and ``skos:altLabel`` (``@en``) of entities and properties;
* ``wikibase:directClaim`` and ``wikibase:propertyType`` of properties, as on WDQS: queries reach a property's
  label and type from its ``wdt:`` predicate, and recover the datatype of plain-string values.

Literals follow the N-Triples grammar (``STRING_LITERAL_QUOTE``): backslash, double quote, LF and CR are
escaped, plus tab, backspace and form feed; every other character is written as UTF-8.
"""

from __future__ import annotations

import gzip
import multiprocessing
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from storage import layout
from storage.catalog import duckdb_memory_limit, register_parquet_view, spilling_connection
from storage.done import sweep_temps
from storage.parquet_io import part_files
from tasks.kg.truthy import create_truthy_claims
from tasks.workers import exit_with_parent

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDFS_LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"
SCHEMA_DESCRIPTION = "<http://schema.org/description>"
SKOS_ALT_LABEL = "<http://www.w3.org/2004/02/skos/core#altLabel>"
WIKIBASE = "http://wikiba.se/ontology#"
PROPERTY_TYPE = f"<{WIKIBASE}propertyType>"
DIRECT_CLAIM = f"<{WIKIBASE}directClaim>"

# Wikidata datatype name <-> wikibase ontology class (as used by wikibase:propertyType on WDQS)
PROPERTY_TYPES = {
    "wikibase-item": "WikibaseItem",
    "wikibase-property": "WikibaseProperty",
    "wikibase-lexeme": "WikibaseLexeme",
    "wikibase-form": "WikibaseForm",
    "wikibase-sense": "WikibaseSense",
    "external-id": "ExternalId",
    "string": "String",
    "url": "Url",
    "commonsMedia": "CommonsMedia",
    "monolingualtext": "Monolingualtext",
    "time": "Time",
    "quantity": "Quantity",
    "globe-coordinate": "GlobeCoordinate",
    "math": "Math",
    "geo-shape": "GeoShape",
    "tabular-data": "TabularData",
    "musical-notation": "MusicalNotation",
    "entity-schema": "EntitySchema",
}

ID_RE = re.compile(r"[QP][1-9][0-9]*")
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9])?")
_YEAR = r"-?(?:[1-9][0-9]{3,}|0[0-9]{3})"
_DATE = re.compile(_YEAR + r"-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])")
_GYEAR = re.compile(_YEAR)
_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b",
                          "\f": "\\f"})
_BATCH = 50_000


def nt_string(text: str) -> str:
    """Quote a text as an N-Triples string literal (without language tag or datatype).

    Args:
        text: Any Unicode text.

    Returns:
        ``"..."`` with backslash, quote, LF, CR, tab, backspace and form feed escaped.
    """
    return '"' + text.translate(_ESCAPES) + '"'


def literal_term(value: str, datatype: str | None) -> str:
    """The N-Triples object term of a literal claim value.

    Args:
        value: The KB's ``object_value``.
        datatype: The claim's Wikidata datatype.

    Returns:
        A typed literal for ISO dates, years and canonical decimals; a plain string literal otherwise.
    """
    if datatype == "time":
        if _DATE.fullmatch(value):
            return f'"{value}T00:00:00Z"^^<{XSD}dateTime>'
        if _GYEAR.fullmatch(value):
            return f'"{value}"^^<{XSD}gYear>'
    elif datatype == "quantity" and value != "-0" and _DECIMAL.fullmatch(value):
        return f'"{value}"^^<{XSD}decimal>'
    return nt_string(value)


@dataclass(frozen=True)
class _Unit:
    """One independent piece of the export.

    ``table`` is ``claims`` (the truthy claims whose ``hash(subject) % parts == part``), ``entities`` or
    ``properties`` (row groups ``row_groups`` of Parquet file ``file``).
    """

    table: str
    part: int = 0
    parts: int = 1
    file: str = ""
    row_groups: tuple[int, ...] = ()


def _claims_files(kb_version: str, root: Path, workers: int) -> list[Path]:
    """The claims parts of a KB version, after checking ``workers``; the errors both exports document."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    claims = part_files(layout.kb_table_dir(kb_version, "claims", root))
    if not claims:
        raise FileNotFoundError(f"KB version {kb_version!r} has no claims under {layout.kb_dir(kb_version, root)}")
    return claims


def _units(kb_version: str, root: Path, workers: int) -> list[_Unit]:
    """The export's units in output order: claims first, then entities, then properties (see the module doc)."""
    units = [_Unit("claims", i, workers) for i in range(workers)]
    for table in ("entities", "properties"):
        for f in part_files(layout.kb_table_dir(kb_version, table, root)):
            groups = list(range(pq.ParquetFile(f).metadata.num_row_groups))
            step = max(1, -(-len(groups) // workers)) if table == "entities" else max(1, len(groups))
            units += [_Unit(table, file=str(f), row_groups=tuple(groups[j:j + step]))
                      for j in range(0, len(groups), step)]
    return units


def _claims_connection(claims: list[Path], root: Path, memory_limit: str, spill: str,
                       unit: _Unit | None, threads: int | None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with view ``kb_claims`` over the KB's claims (one hash partition of them for a unit)."""
    con = spilling_connection(memory_limit, spill, threads)
    if unit is None or unit.parts == 1:
        register_parquet_view(con, "kb_claims", [(f, {}) for f in claims], "claims", root)
    else:
        register_parquet_view(con, "kb_claims_all", [(f, {}) for f in claims], "claims", root)
        con.execute(f"CREATE VIEW kb_claims AS SELECT * FROM kb_claims_all "
                    f"WHERE hash(subject) % {int(unit.parts)} = {int(unit.part)}")
    return con


def _claim_lines(con: duckdb.DuckDBPyConnection, counts: dict[str, int]) -> Iterator[str]:
    create_truthy_claims(con)
    reader = con.table("kg_claims").to_arrow_reader(_BATCH)
    for batch in reader:
        cols = batch.to_pydict()
        lines = []
        for s, p, oq, ov, dt in zip(cols["subject"], cols["property"], cols["object_qid"], cols["object_value"],
                                    cols["datatype"], strict=True):
            obj = f"<{WD}{oq}>" if oq is not None else literal_term(ov, dt)
            lines.append(f"<{WD}{s}> <{WDT}{p}> {obj} .\n")
        counts["claims"] += len(lines)
        yield "".join(lines)


def _term_lines(unit: _Unit, counts: dict[str, int]) -> Iterator[str]:
    properties = unit.table == "properties"
    id_col = "pid" if properties else "qid"
    columns = [id_col, "label", "description", "aliases"] + (["datatype"] if properties else [])
    for batch in pq.ParquetFile(unit.file).iter_batches(batch_size=_BATCH, columns=columns,
                                                  row_groups=list(unit.row_groups)):
        cols = batch.to_pydict()
        lines = []
        for i, ident in enumerate(cols[id_col]):
            if ident is None or not ID_RE.fullmatch(ident):
                counts["skipped_ids"] += 1
                continue
            subj = f"<{WD}{ident}>"
            label, desc, aliases = cols["label"][i], cols["description"][i], cols["aliases"][i]
            if label:
                lines.append(f"{subj} {RDFS_LABEL} {nt_string(label)}@en .\n")
                counts["labels"] += 1
            if desc:
                lines.append(f"{subj} {SCHEMA_DESCRIPTION} {nt_string(desc)}@en .\n")
                counts["descriptions"] += 1
            for alias in dict.fromkeys(a for a in aliases or () if a):
                lines.append(f"{subj} {SKOS_ALT_LABEL} {nt_string(alias)}@en .\n")
                counts["aliases"] += 1
            if properties:
                kind = PROPERTY_TYPES.get(cols["datatype"][i] or "")
                if kind:
                    lines.append(f"{subj} {PROPERTY_TYPE} <{WIKIBASE}{kind}> .\n")
                lines.append(f"{subj} {DIRECT_CLAIM} <{WDT}{ident}> .\n")
                counts["properties"] += 1
        yield "".join(lines)


_COUNTS = ("claims", "labels", "descriptions", "aliases", "properties", "skipped_ids", "triples")


def _write_units(units: list[_Unit], fh, con: duckdb.DuckDBPyConnection | None) -> dict[str, int]:
    """Write the lines of ``units`` to the open text file ``fh`` (``con``: the claims connection); counts."""
    counts = dict.fromkeys(_COUNTS, 0)
    for unit in units:
        chunks = _claim_lines(con, counts) if unit.table == "claims" else _term_lines(unit, counts)
        for chunk in chunks:
            counts["triples"] += chunk.count("\n")  # one line per triple: literals escape LF
            fh.write(chunk)
    return counts


def _open_text(path: Path, gz: bool):
    return gzip.open(path, "wt", encoding="utf-8", compresslevel=3) if gz else open(path, "w", encoding="utf-8")


def _export_unit(unit: _Unit, part: str, gz: bool, claims: list[str], root: str, memory_limit: str,
                 spill: str) -> dict[str, int]:
    """Worker process: write one unit to the part file ``part`` (a whole gzip member when ``gz``); its counts."""
    con = None
    if unit.table == "claims":
        con = _claims_connection([Path(f) for f in claims], Path(root), memory_limit, spill, unit, threads=1)
    try:
        with _open_text(Path(part), gz) as fh:
            return _write_units([unit], fh, con)
    finally:
        if con is not None:
            con.close()


def export_ntriples(kb_version: str, out_path: Path | str, root: Path | None = None,
                    memory_limit: str | None = None, workers: int = 1) -> dict[str, int]:
    """Write a KB version as N-Triples (gzip when ``out_path`` ends with ``.gz``).

    Args:
        kb_version: Published KB version under ``<root>/kb``.
        out_path: Output file (an explicit path: the only write outside ``LINKEDQA_HOME`` allowed).
        root: Data root (default ``LINKEDQA_HOME``).
        memory_limit: DuckDB memory limit for the truthy-claims query, per process (spills to a temp folder
            beside the output; a size or ``auto``; default ``$LINKEDQA_DUCKDB_MEMORY``, else ``auto``: a quarter of
            the machine's memory shared by the ``workers`` processes).
        workers: Processes writing units in parallel (see the module doc); 1 writes in this process.

    Returns:
        Counts: ``claims``, ``labels``, ``descriptions``, ``aliases``, ``properties``, ``skipped_ids``, ``triples``.

    Raises:
        FileNotFoundError: When the KB version has no claims table.
        ValueError: When ``workers`` < 1.
    """
    root = root or layout.home()
    memory_limit = duckdb_memory_limit(memory_limit, processes=workers)
    out = Path(out_path)
    claims = _claims_files(kb_version, root, workers)
    out.parent.mkdir(parents=True, exist_ok=True)
    # what a killed export of the same file left (its temp output, its parts and spill folder), by dead pid
    sweep_temps(out.parent, (f"{out.name}.tmp-*", f".{out.name}.building-*"), recursive=False)
    gz = out.name.endswith(".gz")
    units = _units(kb_version, root, workers)
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.building-{os.getpid()}-", dir=out.parent) as spill:
        try:
            if workers == 1:
                con = _claims_connection(claims, root, memory_limit, spill, None, threads=None)
                try:
                    with _open_text(tmp, gz) as fh:
                        counts = _write_units(units, fh, con)
                finally:
                    con.close()
            else:
                counts = _export_in_parallel(units, tmp, gz, claims, root, memory_limit, spill, workers)
            os.replace(tmp, out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return counts


def _write_parts(units: list[_Unit], folder: Path, gz: bool, claims: list[Path], root: Path, memory_limit: str,
                 spill: Path, workers: int) -> tuple[list[Path], dict[str, int]]:
    """Write every unit to its own part file in ``folder`` with ``workers`` processes; (parts in unit order, counts)."""
    parts = [folder / f"part-{i:05d}.nt{'.gz' if gz else ''}" for i in range(len(units))]
    counts = dict.fromkeys(_COUNTS, 0)
    # spawn: this process may hold threads (DuckDB, Prefect's), which a forked child would inherit half-locked.
    # A Pool, not a ProcessPoolExecutor: its terminate() stops the workers at the first failed unit or on Ctrl-C,
    # where an executor would finish every submitted unit first (and its workers survive a KeyboardInterrupt).
    # Each worker ends within ~1 s of this process's death (SIGKILL included) instead of finishing its unit.
    pool = multiprocessing.get_context("spawn").Pool(workers, initializer=exit_with_parent, initargs=(os.getpid(),))
    try:
        pending = [pool.apply_async(_export_unit, (unit, str(part), gz, [str(f) for f in claims], str(root),
                                                   memory_limit, str(spill / f"duckdb-{i}")))
                   for i, (unit, part) in enumerate(zip(units, parts, strict=True))]
        while pending:  # in completion order, so a failure surfaces as soon as it happens
            done = [r for r in pending if r.ready()]
            for r in done:
                for k, v in r.get().items():  # re-raises a unit's exception here
                    counts[k] += v
                pending.remove(r)
            if pending and not done:
                pending[0].wait(0.2)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return parts, counts


def export_ntriples_parts(kb_version: str, folder: Path, root: Path | None = None, memory_limit: str | None = None,
                          workers: int = 2) -> tuple[list[Path], dict[str, int]]:
    """Write a KB version as plain N-Triples part files in ``folder`` (for loaders that read several files at once).

    The parts together hold exactly the triples of :func:`export_ntriples` (see the module doc for how the KB
    is cut); ``folder`` is created and the caller owns (and removes) it.

    Args:
        kb_version: Published KB version under ``<root>/kb``.
        folder: Where the parts go (``part-00000.nt``, ...).
        root: Data root (default ``LINKEDQA_HOME``).
        memory_limit: DuckDB memory limit of each claims process, a size or ``auto`` (default
            ``$LINKEDQA_DUCKDB_MEMORY``, else ``auto``: a quarter of the machine's memory shared by the ``workers``).
        workers: Processes writing parts (also the number of claims parts).

    Returns:
        (the part files in unit order, the counts of :func:`export_ntriples`).

    Raises:
        FileNotFoundError: When the KB version has no claims table.
        ValueError: When ``workers`` < 1.
    """
    root = root or layout.home()
    memory_limit = duckdb_memory_limit(memory_limit, processes=workers)
    claims = _claims_files(kb_version, root, workers)
    folder.mkdir(parents=True, exist_ok=True)
    spill = folder / ".spill"
    try:
        return _write_parts(_units(kb_version, root, workers), folder, False, claims, root, memory_limit, spill,
                            workers)
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def _export_in_parallel(units: list[_Unit], tmp: Path, gz: bool, claims: list[Path], root: Path,
                        memory_limit: str, spill: str, workers: int) -> dict[str, int]:
    """Write every unit to its own part file in ``workers`` processes, then append the parts to ``tmp`` in order."""
    parts, counts = _write_parts(units, Path(spill), gz, claims, root, memory_limit, Path(spill), workers)
    with open(tmp, "wb") as dst:
        for part in parts:  # gzip members concatenate into one valid gzip stream
            with open(part, "rb") as src:
                shutil.copyfileobj(src, dst, 1 << 20)
            part.unlink()
    return counts
