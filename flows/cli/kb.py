"""``linkedqa kb ...``: build, export, index, list and download knowledge bases (each writing command runs a flow)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from flows.cli.args import parse_wiki_spec, with_memory_limit
from flows.cli.command_env import start_prefect
from storage import layout
from storage.catalog import done_kb_versions
from tasks.kb.plan import ALL_LANGUAGES
from tasks.kb.pool import shutdown_pool, warm_pool


@with_memory_limit
def cmd_kb_build(a: argparse.Namespace) -> int:
    """``linkedqa kb build``: the ``build_kb_from_inputs`` flow (plan from every input kind -> ``build_kb``)."""
    warm_pool(a.workers)  # the workers' start-up overlaps the Prefect server's boot and this Prefect import
    try:
        from flows.build_kb import build_kb_from_inputs  # heavy: pulls prefect

        start_prefect()
        t0 = time.perf_counter()
        ref = build_kb_from_inputs(sample=a.sample, name=a.name, wikidata=a.wikidata, truthy=a.truthy,
                                   kgtk=a.kgtk, triples=a.triples, wikipedia=a.wikipedia, properties=a.properties,
                                   title_maps=a.title_map, shards_per_file=a.shards, workers=a.workers,
                                   languages=a.languages)
    finally:
        shutdown_pool()  # also when the KB was already built and no shard used the warmed workers
    print(f"\nKB {ref.version} ready in {time.perf_counter() - t0:.1f}s  ({layout.kb_dir(ref.version)})")
    _print_counts(ref.extra)
    return 0


def _print_counts(counts: dict) -> None:
    for table in ("entities", "aliases", "labels", "claims", "properties", "articles", "passages", "redirects",
                  "rejects"):
        if table in counts:
            print(f"  {table:<11} {counts[table]:>10,}")


@with_memory_limit
def cmd_kb_export_nt(a: argparse.Namespace) -> int:
    """``linkedqa kb export-nt OUT``: the ``export_kb_ntriples`` flow (N-Triples in Wikidata's IRI scheme)."""
    from flows.export_kb import export_kb_ntriples  # heavy: pulls prefect

    start_prefect()
    t0 = time.perf_counter()
    res = export_kb_ntriples(out=str(Path(a.out).resolve()), kb=a.kb, workers=a.workers)
    print(f"wrote {a.out} from KB {res['kb_version']} in {time.perf_counter() - t0:.1f}s: "
          + ", ".join(f"{k}={v:,}" for k, v in res["counts"].items()))
    return 0


@with_memory_limit
def cmd_kb_index(a: argparse.Namespace) -> int:
    """``linkedqa kb index``: the ``build_indexes`` flow (requested kinds, default all; built ones are skipped)."""
    from flows.build_indexes import build_indexes  # heavy: pulls prefect

    start_prefect()
    t0 = time.perf_counter()
    results = build_indexes(kb=a.kb, kinds=a.kind or None, workers=a.workers)
    built = sum(r["built"] for r in results)
    print(f"{built} index(es) built, {len(results) - built} already present, in {time.perf_counter() - t0:.1f}s")
    return 0


def cmd_kb_list(a: argparse.Namespace) -> int:
    """``linkedqa kb list``."""
    versions = done_kb_versions()
    if not versions:
        print("no KB built yet (linkedqa kb build --sample)")
    for v, m in versions:
        c = m.get("row_counts", {})
        langs = (m.get("config") or {}).get("languages", ALL_LANGUAGES)  # absent = every language kept
        print(f"{v:<28} entities={c.get('entities', 0):,} claims={c.get('claims', 0):,} "
              f"articles={c.get('articles', 0):,} rejects={c.get('rejects', 0):,} languages={langs}  "
              f"built {m.get('written_at')}")
    return 0


def cmd_kb_download(a: argparse.Namespace) -> int:
    """``linkedqa kb download``: the ``download_dumps`` flow (resumable, checked against the published sums).

    The last stdout lines are the downloaded paths, one per line, to pass to ``linkedqa kb build``.
    """
    from flows.download_dumps import download_dumps  # heavy: pulls prefect

    if not a.wikidata and not a.wikipedia:
        raise ValueError("give --wikidata latest|YYYYMMDD and/or --wikipedia enwiki:latest|enwiki:YYYYMMDD")
    wiki = parse_wiki_spec(a.wikipedia) if a.wikipedia else None
    start_prefect()
    done = download_dumps(wikidata=a.wikidata, wikipedia=":".join(wiki) if wiki else None,
                          to=str(Path(a.to).resolve()) if a.to else None, mirror=a.mirror)
    for _, res in done:
        m = res.meta
        how = "already present, " if res.skipped else (f"resumed at byte {res.resumed_from:,}, "
                                                        if res.resumed_from else "")
        print(f"{m.get('dump')} {m.get('date')} (asked: {m.get('requested')}): {res.size:,} bytes, {how}"
              f"{'/'.join(res.verified)} verified against {m.get('sums_url')}")
    print("build the KB with: linkedqa kb build " + " ".join(f"{flag} {res.path}" for flag, res in done))
    for _, res in done:
        print(res.path)
    return 0
