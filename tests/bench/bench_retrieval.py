"""Benchmark: retrieval cost per method on the same questions (the Entity Retrieval paper's Table 5).

For BM25 passages (tantivy), dense passages (all-MiniLM-L6-v2 + FAISS, exact) and Entity Retrieval (gold
entities -> the first W words of their articles from the KB's ``articles`` table), each measured in a FRESH
process on the same ``--n`` FactoidQA questions (all 2,204 by default):

* build time of the index (first use; ER needs none) - reported, not part of the query time, as in the paper;
* retrieval time for all questions (top-4 documents; the ER documents of every question), with the index
  already open (the paper excludes index/model loading);
* peak RSS of the process (the retrieval method alone, no LLM engine);
* disk: the index folders (BM25, dense) or the articles table (ER).

Ratios are against BM25 measured in the same run. No LLM is involved: the QA quality of the methods is what the
``linkedqa run`` metrics measure.

Needs a published KB in ``LINKEDQA_HOME`` (``linkedqa kb build --sample``).

Run: ``.venv/bin/python -m tests.bench.bench_retrieval [--n 2204] [--words 100]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

METHODS = ("bm25", "dense", "er")


def _one(method: str, n: int, words: int) -> dict:
    """Measure one method in this process (called in a fresh subprocess by ``main``)."""
    from pathlib import Path

    from storage import layout
    from storage.catalog import latest_kb_version
    from tasks.methods.qa.method import ArticleStore, first_words, gold_entity_refs
    from tasks.runs.finalize import disk_bytes
    from tasks.runs.planning import load_questions
    from tasks.runs.shard import peak_rss_mb
    from tasks.search import kb_indexes

    root = layout.home()
    kb = latest_kb_version(root)
    if kb is None:
        raise SystemExit("no KB: run `linkedqa kb build --sample` first")
    questions, _, _ = load_questions("factoidqa", "test", root)
    questions = questions[:n]
    texts = [q["question"] for q in questions]
    t0 = time.perf_counter()
    if method == "bm25":
        index = kb_indexes.passage_index(kb, root)
        paths = [kb_indexes.passage_index_dir(kb, "bm25", root)]
    elif method == "dense":
        index = kb_indexes.dense_passage_index(kb, root)
        index.search_many(texts[:1], k=4)  # load the encoder (model loading is excluded, as in the paper)
        paths = [kb_indexes.passage_index_dir(kb, "dense", root)]
    else:
        store = ArticleStore(kb, root)
        paths = [layout.kb_table_dir(kb, "articles", root)]
    open_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    if method in ("bm25", "dense"):
        hits = index.search_many(texts, k=4)
        got = sum(1 for h in hits if h)
    else:
        reqs = []
        for q in questions:
            qids, titles, source = gold_entity_refs(q)
            reqs.append({"qids": qids, "titles": titles, "source": source})
        found = store.lookup(reqs)
        docs = [[first_words(a["text"], words) for a in arts if a] for arts in found]
        got = sum(1 for d in docs if d)
    retrieve_s = time.perf_counter() - t1
    return {"method": method, "n": len(questions), "with_docs": got, "open_or_build_s": round(open_s, 3),
            "retrieve_s": round(retrieve_s, 4), "peak_rss_mb": round(peak_rss_mb(), 1),
            "disk_mb": round(sum(disk_bytes(Path(p)) for p in paths) / 2**20, 2)}


def main() -> int:
    """Run each method in a fresh process twice (build, then measure) and print the table with ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="FactoidQA questions (default: all)")
    ap.add_argument("--words", type=int, default=100, help="ER document length W")
    ap.add_argument("--one", choices=METHODS, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(_one(a.one, a.n, a.words)))
        return 0
    rows = {}
    for m in METHODS:
        cmd = [sys.executable, "-m", "tests.bench.bench_retrieval", "--one", m, "--n", str(a.n),
               "--words", str(a.words)]
        first = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        again = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        rows[m] = {**again, "first_use_s": first["open_or_build_s"]}
    base = rows["bm25"]
    print(f"Retrieval on {base['n']} FactoidQA questions (top-4 passages; ER: first {a.words} words of the gold "
          f"entities' articles), each method in a fresh process:")
    print(f"{'method':8} {'docs for':>9} {'build/first use':>16} {'retrieve':>10} {'per q':>9} {'x BM25':>8} "
          f"{'peak RSS':>10} {'x BM25':>7} {'disk':>9} {'x BM25':>7}")
    for m, r in rows.items():
        print(f"{m:8} {r['with_docs']:>9} {r['first_use_s']:>15.2f}s {r['retrieve_s']:>9.3f}s "
              f"{r['retrieve_s'] * 1000 / r['n']:>7.2f}ms {r['retrieve_s'] / base['retrieve_s']:>8.2f} "
              f"{r['peak_rss_mb']:>8.0f}MB {r['peak_rss_mb'] / base['peak_rss_mb']:>7.2f} "
              f"{r['disk_mb']:>7.1f}MB {r['disk_mb'] / base['disk_mb']:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
