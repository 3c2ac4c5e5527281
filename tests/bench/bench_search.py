"""Benchmark: entity search ranking and speed against bm25s, and at the sample KB's size vs synthetic copies.

First the ranking, all on the sample KB's entities in this run: the entity index as linkedqa ranks (per query
term, the best of label and aliases, terms added up), the same index ranked per field (one disjunction-max over
the fields, each scoring the whole query), and bm25s (numba backend, label + aliases as one text; the ``bench``
extra's pin): recall@1/10/50 of the gold QID for every gold mention of the WebQSP-EL test questions whose gold
entity the KB can name (the ``search-recall`` agent through the agents' batched search tool), the rank of
Q165421 for "jackie kennedy", and on the same queries (batches of the distinct gold mention texts, each batch
shuffled, to about ``--queries`` in all, k=50, one batched ``search_many`` per batch, the three taking turns in
every pass): q/s per core on one thread (queries / CPU seconds of this process) and q/s with one thread per core.

The Nx sets are every searchable entity of the sample KB copied N times (``--scale``), copy ``c`` with its id
rewritten (``Q42`` -> ``Q<42 + c * 10^10>``), labels, aliases, descriptions and popularity kept. It is the
hard case for BM25: every posting list is N times longer and every match has N tied twins. For 1x and each N,
on the same queries:

* build time and docs/s (tantivy writer, 1 thread, 256 MB heap), index size on disk, bytes per entity;
* q/s per thread (queries / CPU seconds on 1 thread, best of ``--passes`` passes after a warm-up), the Nx / 1x
  ratios, and q/s on one thread per core (wall clock);
* resident memory added by opening the index and a 500-query warm-up (``VmRSS`` delta; the index files are
  memory-mapped, so the page cache holds them, not this process);
* the check that the 1x index finds the same top-1 entity at Nx for every query (as one of its copies).

Then the projection to the full Wikidata dump (~115 M entities): size, memory and build time linear in entities
from the largest N; search speed two ways (latency linear in entities, and a power law through 1x and Nx).

Needs the sample KB (``linkedqa kb build --sample``) in ``LINKEDQA_HOME``.

Run: ``.venv/bin/python -m tests.bench.bench_search [--scale 3 10 30] [--queries 20000]
[--skip-scale | --skip-ranking]``
"""

from __future__ import annotations

import argparse
import math
import random
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

FULL_WIKIDATA = 115_000_000
OFFSET = 10**10
_ID = re.compile(r"^([A-Z])(\d+)$")


def rss_mb() -> float:
    """Resident set size of this process in MiB (``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rewrite(qid: str, copy: int) -> str:
    """``Q42`` -> ``Q<42 + copy * 10^10>`` (copy 0 keeps the id)."""
    m = _ID.match(qid)
    if copy == 0 or m is None:
        return qid if copy == 0 else f"{qid}-{copy}"
    return f"{m.group(1)}{int(m.group(2)) + copy * OFFSET}"


def original(qid: str) -> str:
    """Inverse of :func:`rewrite` for ``Q<digits>`` ids."""
    m = _ID.match(qid)
    return f"{m.group(1)}{int(m.group(2)) % OFFSET}" if m else qid.split("-")[0]


def copies(rows: list[dict], scale: int) -> Iterator[dict]:
    """``scale`` copies of ``rows``, ids rewritten per copy."""
    for c in range(scale):
        for r in rows:
            yield {**r, "qid": rewrite(r["qid"], c)}


def search_batches(index, batches: list[list[str]], threads: int) -> list[list]:
    """Every batch through ``index.search_many`` (k=50), the hits of all batches in one list."""
    return [hits for batch in batches for hits in index.search_many(batch, k=50, threads=threads)]


def measure(name: str, folder: Path, rows_iter, batches: list[list[str]], passes: int) -> dict:
    """Build, open, search; return the figures."""
    from tasks.search.bm25 import folder_size
    from tasks.search.entity_index import EntityIndex
    from tasks.workers import cpu_count

    t0 = time.perf_counter()
    EntityIndex.build(folder, rows_iter)
    build_s = time.perf_counter() - t0
    rss0 = rss_mb()
    index = EntityIndex.open(folder)
    index.search_many(batches[0][:500], k=50, threads=1)  # warm the memory map
    rss_open = rss_mb() - rss0  # before the timed passes, whose 1 M hit objects would dominate
    best = float("inf")
    hits = None
    for _ in range(passes):
        t0 = time.process_time()
        hits = search_batches(index, batches, threads=1)
        best = min(best, time.process_time() - t0)
    cores = cpu_count()
    wall = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        search_batches(index, batches, threads=cores)
        wall = min(wall, time.perf_counter() - t0)
    out = {"name": name, "docs": len(index), "build_s": build_s, "size": folder_size(folder),
           "qps": len(hits) / best, "qps_all": len(hits) / wall, "rss_mb": rss_open,
           "top1": [h[0].qid if h else None for h in hits[: len(batches[0])]]}
    print(f"  {name:>4}: {out['docs']:>10,} entities  build {build_s:6.1f}s ({out['docs'] / build_s:8,.0f} docs/s)  "
          f"index {out['size'] / 2**20:7.1f} MiB ({out['size'] / out['docs']:5.0f} B/entity)  "
          f"{out['qps']:7,.0f} q/s per thread, {out['qps_all']:7,.0f} q/s on {cores} threads  "
          f"+{out['rss_mb']:.0f} MiB RSS", flush=True)
    del index
    return out


def legacy_entity_index():
    """The entity index ranked the alternative way (same documents): one disjunction-max over the label and
    aliases fields, each scoring the whole query, so terms found in different fields do not add up."""
    from tasks.search.entity_index import EntityIndex

    class LegacyEntityIndex(EntityIndex):
        PER_TERM = False

    return LegacyEntityIndex


class Bm25sPeer:
    """bm25s (numba backend, 1 thread) over the same entities, behind the ``search_many`` of the tantivy index.

    One document per QID: its label and aliases as one text, normalised by ``query_key`` (casefolded, accents
    stripped) and split on spaces, queries likewise; no stopwords, no stemming, Lucene BM25 with k1=1.2, b=0.75
    (tantivy's); hits with score 0 (no query term) are dropped. No label boost, no exact-name bonus.
    """

    def __init__(self, rows: list[dict]):
        try:
            import bm25s  # optional: the bench extra's peer (pyproject [bench])
        except ImportError as exc:
            raise SystemExit("bench_search: bm25s is not installed; `make bench` installs the bench extra's pins "
                             "from requirements/lock.txt (or pass --skip-ranking)") from exc

        from tasks.search.bm25 import query_key
        from tasks.search.entity_index import Candidate

        self._key, self._candidate = query_key, Candidate
        seen: set[str] = set()
        keep = [r for r in rows if not (r["qid"] in seen or seen.add(r["qid"]))]
        self.payload = [(r["qid"], r["label"] or r["aliases"][0], r.get("description")) for r in keep]
        corpus = [query_key(" ".join([r["label"] or "", *r["aliases"]])).split() for r in keep]
        self.bm25 = bm25s.BM25(k1=1.2, b=0.75, method="lucene", backend="numba")
        self.bm25.index(corpus, show_progress=False)

    def __len__(self) -> int:
        return len(self.payload)

    def search_many(self, queries: list[str], k: int = 50, threads: int = 1) -> list[list]:
        """Top-``k`` candidates per query, best first (``threads`` > 1: bm25s's numba-parallel retrieval)."""
        tokens = [self._key(q).split() for q in queries]
        docs, scores = self.bm25.retrieve(tokens, k=k, n_threads=threads, show_progress=False)
        out = []
        for toks, row_docs, row_scores in zip(tokens, docs.tolist(), scores.tolist(), strict=True):
            out.append([self._candidate(*self.payload[d], s) for d, s in zip(row_docs, row_scores, strict=True)
                        if s > 0] if toks else [])
        return out


def throughput(indexes: dict[str, object], batches: list[list[str]], passes: int, threads: int) -> dict[str, tuple]:
    """Per index: (queries per CPU second of this process, queries per wall second), each the best of ``passes``
    batched passes (k=50) on ``threads`` threads after a warm-up; the indexes take turns in every pass, so a
    change of machine load reaches all of them alike."""
    best = {name: [math.inf, math.inf] for name in indexes}
    for index in indexes.values():
        index.search_many(batches[0][:500], k=50, threads=threads)
    for _ in range(passes):
        for name, index in indexes.items():
            c0, w0 = time.process_time(), time.perf_counter()
            search_batches(index, batches, threads)
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            best[name] = [min(best[name][0], cpu), min(best[name][1], wall)]
    n = sum(map(len, batches))
    return {name: (n / cpu, n / wall) for name, (cpu, wall) in best.items()}


def compare_rankings(rows: list[dict], batches: list[list[str]], folder: Path, passes: int) -> None:
    """Recall@1/10/50 on KB-covered WebQSP-EL gold mentions and q/s per core of each ranking, same run."""
    import numba  # heavy: the bm25s peer's backend

    numba.set_num_threads(1)
    from storage import layout
    from storage.catalog import latest_kb_version
    from tasks.methods.base import MethodContext
    from tasks.methods.runtime import run_agents
    from tasks.methods.search_recall.method import SearchRecallMethod
    from tasks.metrics.runs import summary_metrics
    from tasks.runs.planning import load_questions
    from tasks.search.entity_index import EntityIndex
    from tasks.search.kb_indexes import index_search_tool
    from tasks.workers import cpu_count

    questions, _, _ = load_questions("webqsp-el", "test")
    method = SearchRecallMethod(SearchRecallMethod.Settings())
    ctx = MethodContext(kb_version=latest_kb_version(), root=layout.home())
    method.build_tools(ctx)  # the KB's nameable QIDs: "covered"

    def build(name: str, make):
        t0 = time.perf_counter()
        index = make()
        return name, index, time.perf_counter() - t0

    rankings = [
        build("linkedqa", lambda: EntityIndex.build(folder / "now", iter(rows))),
        build("per-field", lambda: legacy_entity_index().open(folder / "now")),  # same documents
        build("bm25s", lambda: Bm25sPeer(rows)),
    ]
    cores = cpu_count()
    indexes = {name: index for name, index, _ in rankings}
    one = throughput(indexes, batches, passes, 1)
    every = throughput(indexes, batches, passes, cores)
    print(f"ranking, same run: recall@k of the gold QID among the top k for each gold mention of the WebQSP-EL test "
          f"questions whose gold entity the KB can name; {sum(map(len, batches)):,} queries, k=50, best of {passes} "
          f"passes "
          f"taken in turn; q/s per core = queries / CPU seconds of this process; all cores = {cores} threads")
    print(f"  {'ranking':10} {'recall@1':>8} {'@10':>6} {'@50':>6} {'n':>6} | {'1 thread: q/s per core':>22} | "
          f"{'all cores: q/s':>14} {'q/s per core':>12} | build/open | 'jackie kennedy' -> Q165421")
    for name, index, build_s in rankings:
        outs, _ = run_agents(method.agent(ctx), questions, None, {"entity_search": index_search_tool(index)})
        summ = {m["metric"]: m for m in summary_metrics("search", outs, questions)}
        rec = [summ[f"recall@{k}_covered"]["value"] for k in (1, 10, 50)]
        hits = [c.qid for c in index.search_many(["jackie kennedy"], k=50)[0]]
        rank = hits.index("Q165421") + 1 if "Q165421" in hits else "-"
        print(f"  {name:10} {rec[0]:8.3f} {rec[1]:6.3f} {rec[2]:6.3f} {summ['recall@50_covered']['n']:6,} | "
              f"{one[name][0]:22,.0f} | {every[name][1]:14,.0f} {every[name][0]:12,.0f} | {build_s:8.1f}s | "
              f"rank {rank}", flush=True)
    print(f"  linkedqa / bm25s: q/s per core on 1 thread {one['linkedqa'][0] / one['bm25s'][0]:.2f}, "
          f"q/s on {cores} threads {every['linkedqa'][1] / every['bm25s'][1]:.2f}; linkedqa {cores} threads / 1 "
          f"thread: q/s {every['linkedqa'][1] / one['linkedqa'][1]:.2f}; linkedqa / per-field on 1 thread "
          f"{one['linkedqa'][0] / one['per-field'][0]:.2f}")


def query_batches(mentions: list[str], total: int) -> list[list[str]]:
    """Batches of the distinct mention texts (one per query key: ``search_many`` searches a repeated key once),
    each batch shuffled with its own seed, as many as make ``total`` queries (at least one)."""
    from tasks.search.bm25 import query_key, raw_key

    distinct = list({(query_key(m), raw_key(m)): m for m in reversed(mentions) if query_key(m)}.values())[::-1]
    return [random.Random(seed).sample(distinct, len(distinct)) for seed in range(max(1, round(total / len(distinct))))]


def sample_kb_entities() -> tuple[str, Path, list[dict], list[str]]:
    """(KB version, LINKEDQA_HOME, its searchable entity rows as the entity index reads them, WebQSP-EL test gold
    mention texts), after the CLI's environment set-up; exits when there is no KB."""
    from flows.cli.command_env import setup_env

    setup_env()
    from storage import layout
    from storage.catalog import latest_kb_version
    from tasks.runs.planning import load_questions
    from tasks.search.kb_indexes import _iter_rows, entity_doc

    kb = latest_kb_version()
    if kb is None:
        raise SystemExit("no KB: run `linkedqa kb build --sample` first")
    root = layout.home()
    cols = ["qid", "label", "description", "aliases", "enwiki_title", "sitelinks"]
    rows = [d for d in map(entity_doc, _iter_rows(kb, "entities", cols, root)) if d["label"] or d["aliases"]]
    questions, _, _ = load_questions("webqsp-el", "test")
    return kb, root, rows, [m["text"] for q in questions for m in (q["gold_mentions"] or []) if m.get("text")]


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, nargs="+", default=[10], help="synthetic sizes to compare with 1x")
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--skip-scale", action="store_true", help="only the ranking comparison (recall, q/s per core)")
    ap.add_argument("--skip-ranking", action="store_true", help="only the 1x / synthetic-scale figures")
    a = ap.parse_args()

    kb, root, rows, mentions = sample_kb_entities()
    batches = query_batches(mentions, a.queries)
    print(f"entity search (BM25 labels+aliases, tantivy), KB {kb}: {len(rows):,} searchable entities; "
          f"{sum(map(len, batches)):,} queries in {len(batches)} batches, each the {len(batches[0]):,} distinct gold "
          f"mention texts shuffled (a batch searches a repeated query once), k=50")
    if not a.skip_ranking:
        with tempfile.TemporaryDirectory(prefix="bench-search-", dir=root) as tmp:
            compare_rankings(rows, batches, Path(tmp), a.passes)
    if a.skip_scale:
        return
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-search-", dir=root) as tmp:
        one = measure("1x", Path(tmp) / "x1", iter(rows), batches, a.passes)
        for scale in a.scale:
            big = measure(f"{scale}x", Path(tmp) / f"x{scale}", copies(rows, scale), batches, a.passes)
            shutil.rmtree(Path(tmp) / f"x{scale}")
            results.append((scale, big))
    found = sum(x is not None for x in one["top1"])
    for scale, big in results:
        same = sum(original(b) == x for b, x in zip(big["top1"], one["top1"], strict=True) if x is not None)
        print(f"  ratios {scale}x / 1x: entities {big['docs'] / one['docs']:.2f}, build time "
              f"{big['build_s'] / one['build_s']:.2f}, index size {big['size'] / one['size']:.2f}, "
              f"q/s {big['qps'] / one['qps']:.2f} (latency x{one['qps'] / big['qps']:.2f}); top-1 is the 1x top-1 "
              f"entity (or a copy) for {same:,}/{found:,} queries")
    scale, big = results[-1]
    n_full = FULL_WIKIDATA / one["docs"]
    # latency model through the 1x and largest points: linear in entities (upper bound) and a power law
    t1, tb = 1 / one["qps"], 1 / big["qps"]
    slope = (tb - t1) / (scale - 1)
    lin = t1 + slope * (n_full - 1)
    expo = math.log(tb / t1) / math.log(scale)
    power = t1 * n_full**expo
    print(f"  projection to full Wikidata ({FULL_WIKIDATA / 1e6:.0f} M entities = {n_full:,.0f}x this KB), linear "
          f"in entities from the {scale}x point: index {big['size'] / big['docs'] * FULL_WIKIDATA / 2**30:,.0f} GiB "
          f"(memory-mapped: the page cache holds it for these speeds), resident memory of the searching process "
          f"+{big['rss_mb'] / big['docs'] * FULL_WIKIDATA / 1024:,.1f} GiB, build "
          f"{big['build_s'] / big['docs'] * FULL_WIKIDATA / 3600:,.1f} h on 1 thread; per-thread search "
          f"{1 / lin:,.0f} q/s if latency grows linearly with entities, {1 / power:,.0f} q/s on the power law "
          f"latency ~ entities^{expo:.2f} fitted to 1x and {scale}x")


if __name__ == "__main__":
    main()
