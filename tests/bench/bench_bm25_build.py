"""Benchmark: the KB's BM25 index builds with 1 tantivy indexing thread against N, same run, same documents.

Synthetic inputs built from the real sample KB (``linkedqa kb build --sample`` in ``LINKEDQA_HOME``), said so:

* entity-bm25: every searchable entity copied ``--entity-scale`` times, copy ``c`` with its QID rewritten
  (``Q42`` -> ``Q<42 + c * 10^10>``, as ``bench_search`` does), names, descriptions and popularity kept;
* passage-bm25: every passage copied ``--passage-scale`` times, ``#c`` appended to its id.

Each index is built the way ``linkedqa kb index --workers N`` builds it (``kb_indexes._writer``: N threads,
256 MB per thread; keys known unique), once per thread count, alternating over ``--rounds`` rounds. Printed per
build: wall, docs/s, segments, and the CPU seconds of this process's threads read from ``/proc/self/task``:
the Python producer (rows read, names normalised, tantivy documents built, on the main thread) and tantivy's
indexing threads. Then the speed-up of N threads over 1 (best wall of each) and its bound on a machine with
enough cores: a build cannot be faster than its producer, so ``wall(1 thread) / producer CPU`` (the least
producer CPU of the builds: with one indexing thread the producer also spends CPU waiting on the full queue).

The hits of 2,000 queries (WebQSP-EL test gold mentions for entities, passage openings for passages) are
compared across thread counts: they must be identical (``BM25Index.search_many`` orders ties by row).

Run: ``.venv/bin/python -m tests.bench.bench_bm25_build [--threads 1 2] [--entity-scale 5] [--passage-scale 20]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[tuple[int, str], float]:
    """CPU seconds (user + system) of each live thread of this process, by (thread id, name)."""
    out: dict[tuple[int, str], float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except FileNotFoundError:  # the thread ended between listdir and read
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[(int(tid), name)] = (int(fields[11]) + int(fields[12])) / _TICK
    return out


class ThreadCpu:
    """Polls :func:`thread_cpu` while a block runs: threads that end inside it keep their last reading."""

    def __init__(self, every_s: float = 0.05):
        self.every_s = every_s
        self.seen: dict[tuple[int, str], float] = {}
        self._stop = threading.Event()

    def __enter__(self) -> ThreadCpu:
        self.before = thread_cpu()
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.seen.update(thread_cpu())
            self._stop.wait(self.every_s)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._poller.join()
        self.seen.update(thread_cpu())

    def split(self) -> tuple[float, float]:
        """(CPU s of the main thread, CPU s of tantivy's indexing threads) spent inside the block."""
        main = threading.main_thread().native_id
        used = {key: cpu - self.before.get(key, 0.0) for key, cpu in self.seen.items()}
        producer = sum(c for (tid, _), c in used.items() if tid == main)
        indexers = sum(c for (_, name), c in used.items() if name.startswith("thrd-tantivy-in"))
        return producer, indexers


def build_once(make: Callable[[Path, int], object], folder: Path, threads: int) -> dict:
    """Build one index with ``threads`` indexing threads; its figures."""
    shutil.rmtree(folder, ignore_errors=True)
    with ThreadCpu() as cpu:
        t0 = time.perf_counter()
        index = make(folder, threads)
        wall = time.perf_counter() - t0
    producer, indexers = cpu.split()
    return {"threads": threads, "wall": wall, "docs": len(index), "segments": index.meta["segments"],
            "producer": producer, "indexers": indexers, "index": index}


def compare(name: str, make: Callable[[Path, int], object], queries: list[str], k: int, thread_counts: list[int],
            rounds: int, tmp: Path) -> None:
    """Build ``name`` with each thread count ``rounds`` times (alternating); print the figures and the ratio."""
    best: dict[int, dict] = {}
    hits: dict[int, list] = {}
    for r in range(rounds):
        for n in thread_counts:
            res = build_once(make, tmp / f"{name}-{n}", n)
            print(f"  {name:12} round {r + 1}  {n:>2} thread(s): wall {res['wall']:6.1f} s  "
                  f"{res['docs'] / res['wall']:9,.0f} docs/s  {res['segments']:>2} segment(s)  CPU: producer "
                  f"{res['producer']:6.1f} s, tantivy indexing {res['indexers']:6.1f} s", flush=True)
            if n not in best or res["wall"] < best[n]["wall"]:
                best[n] = res
            if n not in hits:
                hits[n] = res["index"].search_many(queries, k)  # hit objects compare by value
            del res["index"]
            shutil.rmtree(tmp / f"{name}-{n}", ignore_errors=True)
    base = best[thread_counts[0]]
    same = all(hits[n] == hits[thread_counts[0]] for n in thread_counts)
    for n in thread_counts[1:]:
        print(f"  {name}: {n} threads / {thread_counts[0]}: {base['wall'] / best[n]['wall']:.2f}x "
              f"(best wall {base['wall']:.1f} -> {best[n]['wall']:.1f} s)")
    producer = min(res["producer"] for res in best.values())
    print(f"  {name}: bound on enough cores = wall({thread_counts[0]} thread) / least producer CPU = "
          f"{base['wall'] / producer:.2f}x; hits of {len(queries):,} queries (k={k}) identical across "
          f"thread counts: {'yes' if same else 'NO'}", flush=True)


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread counts; the first is the baseline")
    ap.add_argument("--entity-scale", type=int, default=5)
    ap.add_argument("--passage-scale", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()

    from tests.bench.bench_search import copies, sample_kb_entities

    kb, root, entities, mentions = sample_kb_entities()
    mentions = mentions[:2000]
    from tasks.search.entity_index import EntityIndex
    from tasks.search.kb_indexes import _iter_rows, _writer
    from tasks.search.passages import PassageIndex

    passages = list(_iter_rows(kb, "passages", ["passage_id", "page_id", "title", "qid", "text"], root))
    openings = [" ".join(p["text"].split()[:10]) for p in passages[:: max(1, len(passages) // 2000)]][:2000]

    def passage_copies() -> Iterator[dict]:
        for c in range(a.passage_scale):
            for p in passages:
                yield {**p, "passage_id": f"{p['passage_id']}#{c}"}

    print(f"BM25 index builds, KB {kb}, CPU threads available: {len(os.sched_getaffinity(0))}; synthetic inputs: "
          f"{len(entities):,} entities x {a.entity_scale}, {len(passages):,} passages x {a.passage_scale} "
          f"(ids rewritten per copy); best of {a.rounds} rounds")
    with tempfile.TemporaryDirectory(prefix="bench-bm25-build-", dir=root) as tmp:
        compare("entity-bm25",
                lambda f, n: EntityIndex.build(f, copies(entities, a.entity_scale), **_writer(n), keys_unique=True),
                mentions, 10, a.threads, a.rounds, Path(tmp))
        compare("passage-bm25",
                lambda f, n: PassageIndex.build(f, passage_copies(), **_writer(n), keys_unique=True),
                openings, 4, a.threads, a.rounds, Path(tmp))


if __name__ == "__main__":
    main()
