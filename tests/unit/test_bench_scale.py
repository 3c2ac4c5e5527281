"""``make bench-scale``: its input writer's memory, and how ``--resume`` joins an interrupted ``kb build`` and a
finished one into one step's figures.

The resume itself (interrupt by SIGTERM during ``kb build`` and during an index, run again, same rows) is exercised by
running the bench (docs/benchmarks/scale.md); these are the rules it applies to the figures.
"""

from __future__ import annotations

import bz2
import json
import tracemalloc
from pathlib import Path

from tasks.dumps.base import byte_shards
from tests.bench.bench_scale import (
    DRIVER,
    WikipediaWriter,
    _probe,
    join_attempts,
    markdown_table,
    report,
    restage_wikipedia,
    save_state,
    searchable_kb,
    split_merge,
    stage_steps,
)
from tests.bench.bench_wikipedia import real_pages, write_dump


class _Sink:
    """A binary file that keeps only the byte count and the largest traced Python memory seen at a write."""

    def __init__(self) -> None:
        self.size = self.peak = 0

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        self.peak = max(self.peak, tracemalloc.get_traced_memory()[0])


def test_the_wikipedia_dump_is_written_page_by_page(data_root: Path) -> None:
    """The copies of the real pages stream to the compressor: at 3 M entities the bench wrote 10 GB of XML, and a
    tuple of every copy held all of it (10.3 GB of RSS, killed by the OOM killer beside a test run)."""
    header, pages = real_pages(data_root)
    copies = 20
    sink = _Sink()
    tracemalloc.start()
    try:
        size, n = write_dump(sink, header, pages, copies)
    finally:
        tracemalloc.stop()
    assert n == copies * len(pages) and size == sink.size > 100e6
    assert sink.peak < 20e6  # a few pages at a time, not the 100+ MB written


def test_the_wikipedia_dump_is_wikimedia_s_multistream(data_root: Path, tmp_path: Path) -> None:
    """As ``pages-articles-multistream.xml.bz2``: the header alone in the first bzip2 stream, then 100 pages per
    stream; ``kb build`` cuts it at stream starts (no seek index)."""
    header, pages = real_pages(data_root)
    path = tmp_path / "enwiki-pages-articles-multistream.xml.bz2"
    n, size = WikipediaWriter(header, pages, 2, path).wait()
    assert n == 2 * len(pages)
    streams, rest = [], path.read_bytes()
    while rest:
        dec = bz2.BZ2Decompressor()
        streams.append(dec.decompress(rest))
        assert dec.eof
        rest = dec.unused_data
    assert streams[0] == header and len(streams) == 1 + -(-n // 100)
    assert len(b"".join(streams)) == size and streams[-1].endswith(b"</mediawiki>\n")
    assert all(s.startswith(b"  <page>") or s.startswith(b"<page>") for s in streams[1:])
    shards = byte_shards(path, 3, tmp_path / "idx")
    assert len(shards) == 3 and all(s.streams for s in shards) and not (tmp_path / "idx").exists()
    recs = [{**r, "compressed_range": [s.start, s.end]} for r, s in zip(_shards("wikipedia-xml", [1.0] * 3), shards,
                                                                            strict=True)]
    assert "3 stream shards (multistream)" in stage_steps(_shards("wikidata-json", [1.0]), recs, 2, 10, n, size)[
        "stage wikipedia"]["note"]


def test_a_continued_build_sums_its_attempts_and_counts_disk_from_the_first_start() -> None:
    earlier = [{"wall": 100.0, "rss": 5e9, "disk_peak": 3e9, "home0": 1e6}]
    last = {"wall": 400.0, "rss": 4e9, "disk": 2e9, "disk_peak": 2.5e9, "home0": 1e9 + 1e6, "rc": 0}
    r = join_attempts(last, earlier)
    assert r["wall"] == 500.0  # both attempts' time, start-up included
    assert r["rss"] == 5e9  # the larger peak, here the first attempt's
    assert r["disk"] == 3e9  # the staged shards the first attempt left count as the build's growth
    assert r["disk_peak"] == 3.5e9  # the last attempt's peak over the first attempt's start
    assert r["attempts"] == 2 and r["home0"] == 1e6 and r["rc"] == 0


def test_a_build_without_earlier_attempts_is_kept_as_measured() -> None:
    last = {"wall": 4.0, "rss": 1.0, "disk": 2.0, "disk_peak": 3.0, "home0": 0}
    assert join_attempts(last, []) is last


def test_the_state_is_replaced_whole(tmp_path) -> None:
    path = tmp_path / "state.json"
    save_state(path, 12.5, {"entity-dense": (400.0, 2.0)}, {10_000: {"steps": {}}}, {"args": {"seed": 18}})
    save_state(path, 13.0, {}, {100_000: {"steps": {}}})
    state = json.loads(path.read_text())
    assert state["startup"] == 13.0 and set(state["results"]) == {"100000"} and "args" not in state
    assert not list(tmp_path.glob("*.tmp"))  # written beside, then renamed


def test_the_merge_is_split_into_the_wikidata_and_the_wikipedia_tables() -> None:
    tables = {"passages": 59.7, "claims": 48.0, "articles": 17.2, "entities": 8.3, "aliases": 4.0}
    res = {"steps": {"kb build": {"wall": 1141.8}, "merge": {"wall": 137.2, "startup": 0.0, "rss": None,
                                                              "probe_s": 0.46, "tables": tables},
                     "index kg-duckdb": {"wall": 105.4}}}
    split_merge(res)
    steps = res["steps"]
    assert list(steps) == ["kb build", "merge", "merge wikipedia", "index kg-duckdb"]
    assert abs(steps["merge wikipedia"]["wall"] - 76.9) < 1e-9 and abs(steps["merge"]["wall"] - 60.3) < 1e-9
    assert set(steps["merge"]["tables"]) == {"claims", "entities", "aliases"}
    assert steps["merge wikipedia"]["probe_s"] == steps["merge"]["probe_s"] == 0.46
    assert DRIVER["merge wikipedia"] == "xml" and "merge" not in DRIVER  # the text's bytes; entities
    split_merge(res)  # already split: unchanged
    assert abs(steps["merge"]["wall"] - 60.3) < 1e-9 and list(res["steps"]) == list(steps)


def test_a_merge_saved_before_the_split_is_split_from_its_note() -> None:
    note = "manifest merge_seconds: passages 59.7, claims 48.0, articles 17.2, entities 8.3"
    res = {"steps": {"merge": {"wall": 137.195, "startup": 0.0, "rss": None, "note": note}}}
    split_merge(res)
    assert abs(res["steps"]["merge wikipedia"]["wall"] - 76.9) < 1e-9
    assert abs(res["steps"]["merge"]["wall"] - 60.295) < 1e-9  # the tables outside the note stay in merge
    old = {"steps": {"merge": {"wall": 0.4, "note": "manifest merge_seconds: claims 0.1, entities 0.0"}}}
    split_merge(old)  # no Wikipedia table known: nothing to split
    assert list(old["steps"]) == ["merge"] and old["steps"]["merge"]["wall"] == 0.4


def test_the_markdown_table_holds_each_measured_step_and_its_exponents() -> None:
    def size(n: int, wall: float, own: float) -> dict:
        return {"input": {"entities": n, "xml_plain": n * 1000}, "steps": {
            "index kg-duckdb": {"wall": wall, "own_s": own, "startup": wall - own, "rss": 1e9 * n / 1000,
                                "disk_peak": 3e6 * n, "disk": 1e6 * n},
            "index entity-dense": {"wall": None, "note": "not run"}}}
    table = markdown_table({1000: size(1000, 10.0, 4.0), 10_000: size(10_000, 46.0, 40.0),
                            100_000: size(100_000, 406.0, 400.0)}).splitlines()
    assert table[0] == "| step | 1,000 | 10,000 | 100,000 | exponent of wall (last two) / RSS |"
    assert len(table) == 4  # the step never run has no row
    assert table[2] == ("| index kg-duckdb | 10.0 s [4.0] / 1.0 GB | 46.0 s [40.0] / 10.0 GB | 6.8 min [400.0] / "
                        "100.0 GB | 1.00 (1.00) / 1.00 |")
    assert table[3] == ("| index kg-duckdb: disk peak (net growth) | 3.0 GB (1.0 GB) | 30.0 GB (10.0 GB) | "
                        "300.0 GB (100.0 GB) | |")


def test_one_step_s_probe_outlier_is_smoothed_by_its_neighbours() -> None:
    res = {"steps": {"merge": {"wall": 1.0, "probe_s": 0.458}, "index entity-bm25": {"wall": 2.0, "probe_s": 0.641},
                     "index title-bm25": {"wall": 3.0, "probe_s": 0.421}, "index x": {"wall": 4.0}}}
    assert _probe(res, "index entity-bm25") == 0.458  # median of 0.458, 0.641, 0.421
    assert _probe(res, "merge") == (0.458 + 0.641) / 2  # the first step has one neighbour
    assert _probe(res, "index x") is None  # a step without a probe stays without


def _shards(kind: str, seconds: list[float]) -> list[dict]:
    return [{"kind": kind, "seconds": s, "peak_rss_mb": 200} for s in seconds]


def test_both_stage_rows_are_core_seconds_over_the_one_pool_of_workers() -> None:
    """kb build stages every shard of both inputs in one pool of ``--workers`` processes: the Wikipedia row's wall
    was its longest shard (20.4 s at 10 M, exponent 0.17) while its shards took ~7 min of the pool at 3 M."""
    steps = stage_steps(_shards("wikidata-json", [100.0, 120.0]), _shards("wikipedia-xml", [300.0, 200.0, 100.0]),
                        2, 11_000_000_000, 3_000, 3_000_000_000)
    assert steps["stage wikidata"]["wall"] == 110.0 and steps["stage wikidata"]["core_s"] == 220.0
    wp = steps["stage wikipedia"]
    assert wp["wall"] == 300.0 and wp["core_s"] == 600.0 and wp["longest"] == 300.0 and wp["shards"] == 3
    assert "5.0 MB/s per core" in wp["note"]
    assert "stage wikipedia" not in stage_steps(_shards("wikidata-json", [1.0]), [], 2, 10, 0, 0)


def test_a_wikipedia_stage_saved_with_its_longest_shard_is_re_derived() -> None:
    note = "longest of 65 byte-range shards; 846.9 core-s; 346,038 pages, 10384 MB XML"
    res = {"steps": {"stage wikidata": {"wall": 223.09, "core_s": 446.18},
                     "stage wikipedia": {"wall": 18.6, "core_s": 846.88, "shards": 65, "note": note}}}
    restage_wikipedia(res)
    wp = res["steps"]["stage wikipedia"]
    assert abs(wp["wall"] - 423.44) < 1e-9 and wp["longest"] == 18.6 and wp["workers"] == 2
    assert wp["note"].endswith("346,038 pages, 10384 MB XML") and "longest 18.6 s" in wp["note"]
    restage_wikipedia(res)  # already re-derived: unchanged
    assert abs(wp["wall"] - 423.44) < 1e-9


def test_the_projection_adds_up_the_two_stage_rows(capsys) -> None:
    def size(n: int) -> dict:
        k = n / 1_000_000
        return {"input": {"entities": n, "xml_plain": int(1e9 * k), "statements": 14 * n, "pages": 100},
                "rows": {"articles": int(100 * k)},
                "steps": {"stage wikidata": {"wall": 100.0 * k, "core_s": 200.0 * k, "startup": 0.0},
                          "stage wikipedia": {"wall": 50.0 * k, "core_s": 100.0 * k, "startup": 0.0}}}
    report({1_000_000: size(1_000_000), 3_000_000: size(3_000_000)}, 7.0, {})
    lines = {ln.split()[1] if ln.split()[0] == "stage" else ln.split()[0]: ln
             for ln in capsys.readouterr().out.splitlines() if ln.startswith("  stage ") or "total (sequential)" in ln}
    # x(115 M / 3 M) entities and x(100 GB / 3 GB) XML bytes, core-seconds over 16 cores
    wd = 600.0 * 115 / 3 / 16
    wp = 300.0 * 100 / 3 / 16
    assert f"{wd / 60:.1f} min" in lines["wikidata"] and f"{wp / 60:.1f} min" in lines["wikipedia"]
    assert f"{(wd + wp) / 60:.1f} min" in lines["total"]


def test_the_searchable_kb_holds_the_kb_its_bm25_indexes_kg_duckdb_and_search_recall() -> None:
    projected = {"stage wikidata": 1.0, "stage wikipedia": 2.0, "seek index wikidata": 4.0, "merge": 8.0,
                 "merge wikipedia": 16.0, "index entity-bm25": 32.0, "index title-bm25": 64.0,
                 "index passage-bm25": 128.0, "index kg-duckdb": 256.0, "search-recall": 512.0,
                 "index kg-oxigraph": 1e4, "index passage-dense": 1e5, "export-nt": 1e6}
    assert searchable_kb(projected) == 1023.0
