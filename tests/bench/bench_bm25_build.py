"""Benchmark: the KB's BM25 index builds with 1 tantivy indexing thread against N, and with the documents built
by N processes (``linkedqa kb index --workers N``), same run, same documents.

Synthetic inputs built from the real sample KB (``linkedqa kb build --sample`` in ``LINKEDQA_HOME``), said so:

* entity-bm25: every searchable entity copied ``--entity-scale`` times, copy ``c`` with its QID rewritten
  (``Q42`` -> ``Q<42 + c * 10^10>``, as ``bench_search`` does), names, descriptions and popularity kept;
* passage-bm25: every passage copied ``--passage-scale`` times, ``#c`` appended to its id.

The copies are written to Parquet files in row groups of 122,880 rows (DuckDB's, as the KB's tables have), and
each index is built from them as ``kb_indexes._build_bm25`` builds it (``tasks.search.bm25.ParquetRows``; keys
known unique), alternating over ``--rounds`` rounds, in three set-ups per N of ``--threads``:

* ``1 thr 1 proc``: one indexing thread, documents built by this process (``kb index --workers 1``);
* ``N thr 1 proc``: N indexing threads (256 MB each, ``kb_indexes._writer``), documents built here;
* ``N thr N proc``: N indexing threads and N worker processes reading row groups and building the documents
  (as JSON), this process only handing them to tantivy (``kb index --workers N``).

Printed per build: wall, docs/s, segments, and CPU seconds: this process's main thread (the producer: rows
read, names normalised, documents built, or with worker processes only ``add_json``), tantivy's indexing
threads (both read from ``/proc/self/task``), and the worker processes (``RUSAGE_CHILDREN``). Then each set-up's
speed-up over the first (best wall of each) and its bound on a machine with enough cores: a build is never
faster than its main thread, so ``wall(baseline) / main-thread CPU``.

The hits of 2,000 queries (WebQSP-EL test gold mentions for entities, passage openings for passages) are
compared across set-ups: they must be identical (same documents in the same rows; ``BM25Index.search_many``
orders ties by popularity, then the document's key).

Run: ``.venv/bin/python -m tests.bench.bench_bm25_build [--threads 2] [--entity-scale 5] [--passage-scale 40]``
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
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


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's ended and waited-for children."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def build_once(make: Callable[[Path, int, int], object], folder: Path, threads: int, workers: int) -> dict:
    """Build one index with ``threads`` indexing threads and ``workers`` document processes; its figures."""
    shutil.rmtree(folder, ignore_errors=True)
    children0 = children_cpu()
    with ThreadCpu() as cpu:
        t0 = time.perf_counter()
        index = make(folder, threads, workers)
        wall = time.perf_counter() - t0
    producer, indexers = cpu.split()
    return {"wall": wall, "docs": len(index), "segments": index.meta["segments"], "procs": index.meta["workers"],
            "producer": producer,
            "indexers": indexers, "workers_cpu": children_cpu() - children0, "index": index}


def setups(thread_counts: list[int]) -> list[tuple[int, int]]:
    """(threads, processes): the one-thread baseline, then N threads with 1 and with N processes per N."""
    out = [(1, 1)]
    for n in thread_counts:
        out += [(n, 1), (n, n)] if n > 1 else []
    return out


def compare(name: str, make: Callable[[Path, int, int], object], queries: list[str], k: int,
            thread_counts: list[int], rounds: int, tmp: Path) -> None:
    """Build ``name`` in each set-up ``rounds`` times (alternating); print the figures and the ratios."""
    best: dict[tuple[int, int], dict] = {}
    hits: dict[tuple[int, int], list] = {}
    todo = setups(thread_counts)
    for r in range(rounds):
        for n, w in todo:
            res = build_once(make, tmp / f"{name}-{n}-{w}", n, w)
            if res["procs"] != w:  # too few row groups (bm25.MIN_UNITS_PER_WORKER): this is not the set-up asked
                raise SystemExit(f"{name}: {w} processes asked, {res['procs']} used: raise the scale or lower "
                                 "--group-rows")
            print(f"  {name:12} round {r + 1}  {n:>2} thr {w:>2} proc: wall {res['wall']:6.1f} s  "
                  f"{res['docs'] / res['wall']:9,.0f} docs/s  {res['segments']:>2} segment(s)  CPU: main "
                  f"{res['producer']:5.1f} s, tantivy {res['indexers']:5.1f} s, workers "
                  f"{res['workers_cpu']:5.1f} s", flush=True)
            if (n, w) not in best or res["wall"] < best[(n, w)]["wall"]:
                best[(n, w)] = res
            if (n, w) not in hits:
                hits[(n, w)] = res["index"].search_many(queries, k)  # hit objects compare by value
            del res["index"]
            shutil.rmtree(tmp / f"{name}-{n}-{w}", ignore_errors=True)
    base = best[todo[0]]
    for n, w in todo:
        res = best[(n, w)]
        print(f"  {name}: {n} thr {w} proc: {base['wall'] / res['wall']:.2f}x of 1 thr 1 proc (best wall "
              f"{base['wall']:.1f} -> {res['wall']:.1f} s); bound on enough cores (wall of 1 thr 1 proc / "
              f"main-thread CPU {res['producer']:.1f} s): {base['wall'] / res['producer']:.1f}x")
    same = all(hits[s] == hits[todo[0]] for s in todo)
    print(f"  {name}: hits of {len(queries):,} queries (k={k}) identical across set-ups: "
          f"{'yes' if same else 'NO'}", flush=True)


def to_parquet(rows: Iterable[dict], path: Path, group_rows: int = 122_880) -> list[str]:
    """Write ``rows`` to one Parquet file in row groups of ``group_rows`` (DuckDB's default); its path, listed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    buf: list[dict] = []

    def flush() -> None:
        nonlocal writer
        table = pa.Table.from_pylist(buf)
        if writer is None:
            writer = pq.ParquetWriter(str(path), table.schema)
        writer.write_table(table, row_group_size=group_rows)
        buf.clear()

    for row in rows:
        buf.append(row)
        if len(buf) == group_rows:
            flush()
    if buf:
        flush()
    if writer is not None:
        writer.close()
    return [str(path)]


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[2],
                    help="N: thread and process counts compared with 1 thread, 1 process")
    ap.add_argument("--entity-scale", type=int, default=5)
    ap.add_argument("--passage-scale", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--group-rows", type=int, default=122_880,
                    help="rows per Parquet row group, the unit a worker process takes (default DuckDB's, the KB's)")
    a = ap.parse_args()

    from tests.bench.bench_search import copies, sample_kb_entities

    kb, root, entities, mentions = sample_kb_entities()
    mentions = mentions[:2000]
    from tasks.search.bm25 import ParquetRows
    from tasks.search.entity_index import EntityIndex
    from tasks.search.kb_indexes import _iter_rows, _writer, entity_docs
    from tasks.search.passages import PassageIndex

    passage_cols = ["passage_id", "page_id", "title", "qid", "text"]
    passages = list(_iter_rows(kb, "passages", passage_cols, root))
    openings = [" ".join(p["text"].split()[:10]) for p in passages[:: max(1, len(passages) // 2000)]][:2000]

    def passage_copies() -> Iterator[dict]:
        for c in range(a.passage_scale):
            for p in passages:
                yield {**p, "passage_id": f"{p['passage_id']}#{c}"}

    def build(cls, source: ParquetRows) -> Callable[[Path, int, int], object]:
        def make(folder: Path, n: int, w: int) -> object:
            return cls.build(folder, source, **{**_writer(n), "workers": w}, keys_unique=True)
        return make

    print(f"BM25 index builds, KB {kb}, CPU threads available: {len(os.sched_getaffinity(0))}; synthetic inputs: "
          f"{len(entities):,} entities x {a.entity_scale}, {len(passages):,} passages x {a.passage_scale} "
          f"(ids rewritten per copy), row groups of {a.group_rows:,} rows; best of {a.rounds} rounds")
    entity_cols = ("qid", "label", "description", "aliases", "enwiki_title", "sitelinks")
    with tempfile.TemporaryDirectory(prefix="bench-bm25-build-", dir=root) as tmp:
        t = Path(tmp)
        rows = ({c: r.get(c) for c in entity_cols} for r in copies(entities, a.entity_scale))
        source = ParquetRows(tuple(to_parquet(rows, t / "entities.parquet", a.group_rows)), entity_cols, entity_docs)
        compare("entity-bm25", build(EntityIndex, source), mentions, 10, a.threads, a.rounds, t)
        source = ParquetRows(tuple(to_parquet(passage_copies(), t / "passages.parquet", a.group_rows)),
                             tuple(passage_cols))
        compare("passage-bm25", build(PassageIndex, source), openings, 4, a.threads, a.rounds, t)


if __name__ == "__main__":
    main()
