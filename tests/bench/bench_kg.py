"""Benchmark: 1-hop neighbourhood lookups/s, DuckDB store vs SPARQL on a local Oxigraph, on the same entities.

A "lookup" is the full 1-hop neighbourhood of one entity: ``outgoing`` + ``incoming`` facts with labels. Figures,
all measured in this run on the same ``--n`` entities (sampled with a fixed seed from the KB's subjects):

* DuckDBKG, batched (``--batch`` entities per call) and one call per entity;
* SparqlKG on ``oxigraph serve`` loaded from ``linkedqa kb export-nt`` of the same KB, batched (``VALUES`` with
  ``--batch`` entities) and one query per entity;
* ratios DuckDB batched / each SPARQL variant, and how many entities got identical answers from both;
* N-Triples export time in one process and with ``--export-workers`` processes (the ratio, same triples),
  Oxigraph load time by ``oxigraph load`` (CLI bulk loader) vs chunked HTTP POST;
* with ``--layouts``: index build time and lookups/s by batch size for both DuckDB index layouts (sorted Parquet
  with small row groups vs a DuckDB database file with ART indexes);
* with ``--no-subject-art``: the same figures for the default layout with and without the ART index on
  ``kg_by_subject`` (what a full-dump build leaves out, ``duckdb_store.art_plan``: lookups by subject then read
  the sorted table's zonemaps), the second built in a temp folder over the same KB tables; then it stops.

Needs a published KB in ``LINKEDQA_HOME`` (``linkedqa kb build --sample``).

Run: ``.venv/bin/python -m tests.bench.bench_kg [--n 1000] [--batch 100] [--layouts | --no-subject-art]``
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path


def _lookups(kg, qids: list[str], batch: int) -> tuple[float, dict]:
    out: dict = {}
    t0 = time.perf_counter()
    for i in range(0, len(qids), batch):
        chunk = qids[i : i + batch]
        o, n = kg.outgoing(chunk), kg.incoming(chunk)
        for q in chunk:
            out[q] = (o[q], n[q])
    return time.perf_counter() - t0, out


def _untyped(answer: tuple) -> tuple:
    """One entity's (outgoing, incoming) facts without the datatype of string values."""
    return tuple([replace(f, datatype=None) if f.object_qid is None and f.datatype not in ("time", "quantity")
                   else f for f in facts] for facts in answer)


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:>10,.0f} lookups/s ({seconds * 1000 / n:7.2f} ms each)"


def _export_ratio(kb: str, root: Path, tmp: Path, workers: int) -> tuple[Path, dict]:
    """Export the KB in one process, then with ``workers`` processes; print both and the ratio."""
    from tasks.kg.export_nt import export_ntriples

    nt = tmp / "kb.nt.gz"
    t0 = time.perf_counter()
    counts = export_ntriples(kb, nt, root=root)
    t_export = time.perf_counter() - t0
    print(f"\nexport-nt: {counts['triples']:,} triples ({counts['claims']:,} claims) in {t_export:.2f}s "
          f"= {counts['triples'] / t_export:,.0f} triples/s, {nt.stat().st_size / 1e6:.1f} MB gz")
    par = tmp / "kb-parallel.nt.gz"
    t0 = time.perf_counter()
    counts_par = export_ntriples(kb, par, root=root, workers=workers)
    t_par = time.perf_counter() - t0
    assert counts_par == counts, (counts_par, counts)
    print(f"export-nt --workers {workers}: {t_par:.2f}s = {counts['triples'] / t_par:,.0f} triples/s, "
          f"{t_export / t_par:.2f}x one process (same counts; process start-up included)")
    par.unlink()
    return nt, counts


def _store_ratio(kb: str, root: Path, workers: int) -> None:
    """Build the kg-oxigraph store from one export file, then from ``workers`` parts loaded at once; print both.

    The store this KB already had is moved aside and put back afterwards.
    """
    import shutil

    from tasks.kg import oxigraph_store

    final = oxigraph_store.store_folder(kb, root)
    kept = final.with_name(f"{final.name}.bench-kept")
    if final.exists():
        final.rename(kept)
    try:
        seconds, sizes = [], []
        for w in (1, workers):
            oxigraph_store._OPEN.clear()
            t0 = time.perf_counter()
            store = oxigraph_store.open_store(kb, root, workers=w)
            seconds.append(time.perf_counter() - t0)
            sizes.append(len(store))
            del store
            oxigraph_store._OPEN.clear()
            shutil.rmtree(final)
        assert sizes[0] == sizes[1], sizes
        print(f"kg-oxigraph store (export + bulk load): one file {seconds[0]:.2f}s, {workers} parts loaded at once "
              f"{seconds[1]:.2f}s = {seconds[0] / seconds[1]:.2f}x ({sizes[0]:,} triples in both)")
    finally:
        if kept.exists():
            kept.rename(final)


def _layout_line(kg, qids: list[str], name: str, built: float) -> str:
    """Build seconds, the median single-entity lookup (of 200) and lookups/s at batches of 10, 100, 1,000."""
    _lookups(kg, qids[:20], 10)  # open + warm
    singles = []
    for q in qids[:200]:
        t1 = time.perf_counter()
        kg.outgoing([q])
        kg.incoming([q])
        singles.append(time.perf_counter() - t1)
    line = [f"{name:<16s} build {built:6.2f}s  1 entity p50 {statistics.median(singles) * 1000:6.2f} ms"]
    for b in (10, 100, 1000):
        dt, _ = _lookups(kg, qids, b)
        line.append(f"batch {b}: {len(qids) / dt:,.0f}/s")
    return "  " + "  ".join(line)


def _subject_art(kb: str, root: Path, qids: list[str], threads: int | None) -> None:
    """The default layout with every ART index that fits against the same without the subject's (same answers)."""
    from storage import layout
    from tasks.kg.duckdb_store import ART_BYTES_PER_ROW, DuckDBKG, build_index, index_folder, read_index_meta

    print("\n-- kg_by_subject with and without its ART index (outgoing+incoming with labels)")
    meta = read_index_meta(kb, root)
    counts = meta["row_counts"]
    est = {t: int(counts[t] * ART_BYTES_PER_ROW[t]) for t in ART_BYTES_PER_ROW}
    others = max(v for t, v in est.items() if t != "kg_by_subject")
    budget = others if others < est["kg_by_subject"] else est["kg_by_subject"] - 1  # else: others left out too
    with tempfile.TemporaryDirectory(prefix="bench-kg-art-", dir=root) as tmp:
        other = Path(tmp)
        (other / "kb").mkdir()
        (other / "kb" / kb).symlink_to(layout.kb_dir(kb, root))
        t0 = time.perf_counter()
        build_index(kb, other, art_budget=budget, log=lambda line: None)
        built = time.perf_counter() - t0
        print(f"  ({len(qids)} entities; ART indexes built without the subject's: {read_index_meta(kb, other)['art']})")
        for folder in (index_folder(kb, root), index_folder(kb, other)):  # both files in the page cache, so the
            with open(folder / "kg.duckdb", "rb") as f:  # figures compare the layouts, not a cold file against a
                while f.read(1 << 24):  # just-written one (on a 3 M KB the cold one's p50 was 55 ms, warm 11 ms)
                    pass
        with DuckDBKG(kb, root=root, threads=threads) as kg:
            print(_layout_line(kg, qids, "all ART", meta["build_seconds"]))
            _, with_art = _lookups(kg, qids, 100)
        with DuckDBKG(kb, root=other, threads=threads) as kg:
            print(_layout_line(kg, qids, "no subject ART", built))
            _, without = _lookups(kg, qids, 100)
    print(f"  identical answers: {sum(with_art[q] == without[q] for q in qids)}/{len(qids)}")


def main() -> int:
    """Run the benchmark and print the figures; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="entities")
    ap.add_argument("--batch", type=int, default=100, help="entities per batched call")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layouts", action="store_true", help="also compare the two DuckDB index layouts")
    ap.add_argument("--no-subject-art", action="store_true",
                    help="only compare lookups with and without kg_by_subject's ART index (as a full-dump build "
                         "leaves it out), e.g. on a bench-scale KB")
    ap.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: all cores)")
    ap.add_argument("--export-workers", type=int, default=2, help="processes of the parallel export (default 2)")
    ap.add_argument("--build-only", action="store_true",
                    help="only the N-Triples export and the kg-oxigraph store build, one process against "
                         "--export-workers (e.g. on a bench-scale KB)")
    a = ap.parse_args()

    import pyarrow.parquet as pq

    from storage import layout
    from storage.catalog import latest_kb_version
    from tasks.kg.duckdb_store import LAYOUTS, DuckDBKG, build_index
    from tasks.kg.oxigraph_server import OxigraphServer
    from tasks.kg.sparql import SparqlKG

    root = layout.home()
    kb = latest_kb_version(root)
    if kb is None:
        print(f"no published KB in LINKEDQA_HOME={root}: run `linkedqa kb build --sample` first", file=sys.stderr)
        return 2
    print(f"KB {kb} in {root}")

    if a.build_only:
        with tempfile.TemporaryDirectory(prefix="bench-kg-") as tmp:
            _export_ratio(kb, root, Path(tmp), a.export_workers)
        _store_ratio(kb, root, a.export_workers)
        return 0

    t0 = time.perf_counter()
    folder = build_index(kb, root)
    print(f"DuckDB KG index (default layout): ready in {time.perf_counter() - t0:.2f}s at {folder}")
    claims = pq.read_table(layout.kb_table_dir(kb, "claims", root), columns=["subject"])["subject"]
    subjects = sorted(s for s in set(claims.to_pylist()) if re.fullmatch(r"Q[1-9][0-9]*", s))
    qids = random.Random(a.seed).sample(subjects, min(a.n, len(subjects)))
    n = len(qids)
    print(f"{n} entities sampled (seed {a.seed}) from {len(subjects):,} subjects; batch {a.batch}")
    if a.no_subject_art:
        _subject_art(kb, root, qids, a.threads)
        return 0

    if a.layouts:
        print("\n-- DuckDB index layouts (outgoing+incoming with labels)")
        for name in LAYOUTS:
            t0 = time.perf_counter()
            build_index(kb, root, layout_name=name)
            built = time.perf_counter() - t0
            with DuckDBKG(kb, root=root, layout_name=name, threads=a.threads) as kg:
                print(_layout_line(kg, qids, name, built))

    with DuckDBKG(kb, root=root, threads=a.threads) as duck:
        _lookups(duck, qids[:20], 10)
        d_batched, d_res = _lookups(duck, qids, a.batch)
        d_single, _ = _lookups(duck, qids, 1)

    with tempfile.TemporaryDirectory(prefix="bench-kg-") as tmp:
        nt, counts = _export_ratio(kb, root, Path(tmp), a.export_workers)
        with OxigraphServer(Path(tmp) / "http-store") as srv:
            t_http = srv.load_ntriples(nt, method="http")
        with OxigraphServer(Path(tmp) / "store") as srv:
            t_cli = srv.load_ntriples(nt, method="cli")
            print(f"oxigraph load: CLI bulk loader {t_cli:.2f}s ({counts['triples'] / t_cli:,.0f} triples/s, incl. "
                  f"restart), chunked HTTP POST {t_http:.2f}s ({counts['triples'] / t_http:,.0f} triples/s)")
            kg = SparqlKG(srv.query_url, timeout_s=60, retries=0, batch_size=a.batch)
            _lookups(kg, qids[:20], 10)
            s_batched, s_res = _lookups(kg, qids, a.batch)
            s_single, _ = _lookups(kg, qids, 1)

    same = sum(1 for q in qids if d_res[q] == s_res[q])
    # SparqlKG derives a plain string's datatype from its property's declared type, DuckDBKG keeps the claim's
    # (tasks/kg/sparql.py's docstring): in the sample, 119 claims of 25 properties are "string" on what the
    # properties file declares "external-id" (older dump lines).
    same_but_type = sum(1 for q in qids if d_res[q] != s_res[q] and _untyped(d_res[q]) == _untyped(s_res[q]))
    print(f"\n1-hop neighbourhood (outgoing + incoming, labels resolved), {n} entities:")
    print(f"  DuckDBKG  batched ({a.batch}/call)   {_rate(n, d_batched)}")
    print(f"  DuckDBKG  one call per entity    {_rate(n, d_single)}")
    print(f"  SparqlKG  batched VALUES ({a.batch})  {_rate(n, s_batched)}")
    print(f"  SparqlKG  one query per entity   {_rate(n, s_single)}")
    print(f"  ratio DuckDB batched / SPARQL batched     = {s_batched / d_batched:6.1f}x")
    print(f"  ratio DuckDB batched / SPARQL per entity  = {s_single / d_batched:6.1f}x")
    print(f"  ratio DuckDB per entity / SPARQL per entity = {s_single / d_single:6.1f}x")
    print(f"  identical answers from both backends: {same}/{n}; {same_but_type} more differ only in the datatype "
          "of string values (claim's vs property's declared type)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
