"""Benchmark: AnchorRAG's dense entity index, exact FAISS flat against approximate structures, same run.

Vectors: the sample KB's ``entity-dense`` index (every named KG node's name and ``"name: description"``,
all-MiniLM-L6-v2; built by ``linkedqa kb index --kind entity-dense`` or here when missing: about 20 min on 2
cores), read back from its flat FAISS index, so every candidate indexes the real vectors. Queries: the WebQSP-EL
test gold mention texts, embedded with the same model. Searches follow ``kb_indexes.dense_entity_hits``: 2k
vectors per query, each entity once (the better of its two vectors), top k = 10 entities (AnchorRAG's
``n_candidates``).

Structures: flat; HNSW32 over SQ8 codes; IVF with an HNSW32 coarse quantizer over SQ8, PQ32x8, PQ64x4 fast-scan,
PQ64x8 (the code's choice) and PQ96x8 codes; ``nlist`` from ``dense_ann.default_nlist``. OPQ is left out: its
rotation training took over 90 s on 12,000 vectors on this 2-core machine.

Figures per structure, all measured in this run: candidate recall@k (the gold entity among the top k, over the
mentions whose gold entity is a KG node), its ratio to flat's, overlap@k with flat's top-k entities, bytes per
vector (the written index file / vectors), build time (training + adding, all cores) and queries/s on one core
(best of ``--passes``). The structure the code picks above ``FLAT_MAX_VECTORS`` (``dense_ann.ivfpq_spec``) is
marked and must reach 0.95 of flat's candidate recall (exit code 1 otherwise).

Then a SYNTHETIC scale point: ``--synthetic`` vectors (default 1.2 M) made from the real ones (copy 0 the real
vectors, copy c >= 1 each real vector plus Gaussian noise of ``--noise`` per dimension, re-normalised, its id
rewritten ``Q42`` -> ``Q<42 + c 10^10>``), generated chunk by chunk (never all held), indexed with the spec
``auto`` picks at that size; printed: training and adding time, index bytes per vector, resident memory added
(peak and after), q/s, and the projection to full Wikidata (115 M entities x 2 vectors).

Needs the sample KB (``linkedqa kb build --sample``) in ``LINKEDQA_HOME``.

Run: ``.venv/bin/python -m tests.bench.bench_dense [--synthetic 1200000] [--passes 3]``
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import numpy as np

K = 10  # AnchorRAG n_candidates (tasks/methods/anchorrag/settings.py)
FULL_WIKIDATA = 115_000_000
VECTORS_PER_ENTITY = 2
OFFSET = 10**10
_ID = re.compile(r"^Q(\d+)(\|d)?$")


def rss_mb(field: str = "VmRSS") -> float:
    """``VmRSS`` (or ``VmHWM``, the peak) of this process in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak() -> None:
    """Reset ``VmHWM`` to the current RSS (Linux ``clear_refs`` 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def entity_top(idx: np.ndarray, scores: np.ndarray, entity_of: np.ndarray, k: int) -> list[list[int]]:
    """Per query, the top-``k`` entities (numbers) from a 2k-vector search, each entity once with its better
    vector (``kb_indexes.dense_entity_hits``)."""
    out = []
    for irow, srow in zip(idx.tolist(), scores.tolist(), strict=True):
        best: dict[int, float] = {}
        for j, s in zip(irow, srow, strict=True):
            if j >= 0:
                e = int(entity_of[j])
                best[e] = max(best.get(e, -2.0), s)
        out.append([e for e, _ in sorted(best.items(), key=lambda kv: -kv[1])[:k]])
    return out


def gold_mentions() -> dict[str, str | None]:
    """The distinct WebQSP-EL test gold mention texts, each with its gold QID (the first one seen)."""
    from tasks.runs.planning import load_questions

    questions, _, _ = load_questions("webqsp-el", "test")
    mentions: dict[str, str | None] = {}
    for q in questions:
        for m in q["gold_mentions"] or []:
            if m.get("text"):
                mentions.setdefault(m["text"], m.get("qid"))
    return mentions


def evaluate(index, queries: np.ndarray, entity_of: np.ndarray, gold: list[int | None], exact: list[list[int]] | None,
             passes: int) -> dict:
    """Search all queries on one core (best of ``passes``) and score the top-k entities."""
    import faiss  # heavy: faiss

    faiss.omp_set_num_threads(1)
    best, res = float("inf"), None
    for _ in range(passes):
        t0 = time.perf_counter()
        res = index.search(queries, VECTORS_PER_ENTITY * K)
        best = min(best, time.perf_counter() - t0)
    faiss.omp_set_num_threads(_CORES)
    top = entity_top(res[1], res[0], entity_of, K)
    has = [i for i, g in enumerate(gold) if g is not None]
    recall = sum(gold[i] in top[i] for i in has) / len(has)
    overlap = (np.mean([len(set(t) & set(e)) / max(1, len(e)) for t, e in zip(top, exact, strict=True)])
               if exact is not None else 1.0)
    return {"qps": len(queries) / best, "recall": recall, "overlap": float(overlap), "top": top}


_CORES = 1


def main() -> int:
    """Run the benchmark, print the figures; 1 when the chosen structure misses 0.95 of flat's recall."""
    global _CORES
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", type=int, default=1_200_000,
                    help="vectors at the synthetic point (0: skip; at most FLAT_MAX_VECTORS = 1 M: auto stays flat)")
    ap.add_argument("--noise", type=float, default=0.01, help="per-dimension noise of the synthetic copies")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--only-chosen", action="store_true", help="measure flat and the chosen structure only")
    a = ap.parse_args()

    from flows.cli.command_env import setup_env

    setup_env()
    import faiss  # heavy: faiss

    from storage import layout
    from storage.catalog import latest_kb_version
    from tasks.search import dense_ann, kb_indexes
    from tasks.search.dense_ann import ArraySource, DenseSpec, build_faiss
    from tasks.search.passages import encode

    _CORES = faiss.omp_get_max_threads()
    kb = latest_kb_version()
    if kb is None:
        raise SystemExit("no KB: run `linkedqa kb build --sample` first")
    root = layout.home()
    t0 = time.perf_counter()
    dense = kb_indexes.dense_entity_index(kb, root)
    if not dense.spec.exact:
        raise SystemExit(f"{dense.folder} is not a flat index ({dense.spec.factory}); its vectors cannot be read "
                         "back exactly: rebuild it with LINKEDQA_DENSE_INDEX=flat")
    n = len(dense)
    vectors = dense._index.reconstruct_n(0, n)
    ids = dense._ids.to_pylist()
    ent_ids = sorted({i.split("|", 1)[0] for i in ids})
    ent_no = {q: i for i, q in enumerate(ent_ids)}
    entity_of = np.array([ent_no[i.split("|", 1)[0]] for i in ids], dtype=np.int64)
    print(f"dense entity index of {kb}: {n:,} vectors of {len(ent_ids):,} KG entities (dim {vectors.shape[1]}), "
          f"opened in {time.perf_counter() - t0:.1f}s; {dense.meta.get('encode_per_s')} texts/s when it was encoded")

    mentions = gold_mentions()
    texts = list(mentions)
    gold = [ent_no.get(mentions[t]) for t in texts]
    t0 = time.perf_counter()
    queries = encode(texts, batch_size=128)
    print(f"queries: {len(texts):,} distinct WebQSP-EL test gold mention texts ({sum(g is not None for g in gold):,} "
          f"with a gold entity among the KG nodes), encoded in {time.perf_counter() - t0:.1f}s; k = {K} entities "
          f"from {VECTORS_PER_ENTITY * K} vectors; q/s on 1 core, builds on {_CORES} cores")

    nlist = dense_ann.default_nlist(n)
    chosen = dense_ann.ivfpq_spec(n)
    train = chosen.train_size

    def spec(factory: str, **kw) -> DenseSpec:
        return DenseSpec(factory=factory, train_size=0 if factory.startswith("HNSW") else train, **kw)

    ivf = f"IVF{nlist}_HNSW32"
    candidates: list[tuple[str, DenseSpec, list[dict]]] = [
        ("flat", DenseSpec(), [{}]),
        ("ivf-pq64 (code's choice)", chosen, [{"nprobe": p, "ef_search": max(64, 2 * p)} for p in (8, 16, 32, 64)]),
    ]
    if not a.only_chosen:
        candidates += [
            ("ivf-pq32", spec(f"{ivf},PQ32x8np"), [{"nprobe": 32, "ef_search": 64}, {"nprobe": 64, "ef_search": 128}]),
            ("ivf-pq96", spec(f"{ivf},PQ96x8np"), [{"nprobe": 16, "ef_search": 64}, {"nprobe": 32, "ef_search": 64}]),
            ("ivf-pq64x4fs", spec(f"{ivf},PQ64x4fsr"), [{"nprobe": 32, "ef_search": 64}]),
            ("ivf-sq8", spec(f"{ivf},SQ8"), [{"nprobe": 16, "ef_search": 64}, {"nprobe": 32, "ef_search": 64}]),
            ("hnsw-sq8", spec("HNSW32,SQ8"), [{"ef_search": 64}, {"ef_search": 128}]),
        ]

    print(f"\n{'structure':<26} {'search':<26} {'B/vec':>6} {'build s':>8} {'q/s/core':>9} {'recall@10':>9} "
          f"{'x flat':>7} {'overlap@10':>10}")
    flat_res, ok = None, True
    with tempfile.TemporaryDirectory(prefix="bench-dense-", dir=root) as tmp:
        for name, sp, variants in candidates:
            t0 = time.perf_counter()
            index, stats = build_faiss(ArraySource(vectors), sp, chunk=65_536)
            build_s = time.perf_counter() - t0
            path = Path(tmp) / "index.faiss"
            faiss.write_index(index, str(path))
            bpv = path.stat().st_size / n
            for v in variants:
                vs = DenseSpec(sp.factory, v.get("nprobe"), v.get("ef_search"), sp.train_size, sp.seed)
                dense_ann.apply_search_parameters(index, vs)
                r = evaluate(index, queries, entity_of, gold, flat_res["top"] if flat_res else None, a.passes)
                flat_res = flat_res or r
                ratio = r["recall"] / flat_res["recall"]
                mark = ""
                if sp == chosen and vs.nprobe == chosen.nprobe:
                    mark = "  <- default" + ("" if ratio >= 0.95 else "  BELOW 0.95 x flat")
                    ok = ratio >= 0.95
                print(f"{name:<26} {vs.search_parameters() or 'exact':<26} {bpv:6.0f} {build_s:8.1f} "
                      f"{r['qps']:9,.0f} {r['recall']:9.3f} {ratio:7.3f} {r['overlap']:10.3f}{mark}", flush=True)
            del index

        if a.synthetic:
            ok &= synthetic(a, vectors, ids, queries, gold, ent_ids, Path(tmp), dense.meta.get("encode_per_s"))
    return 0 if ok else 1


def rewrite(vid: str, copy: int) -> str:
    """``Q42`` / ``Q42|d`` -> ``Q<42 + copy 10^10>`` (same suffix); copy 0 keeps the id."""
    m = _ID.match(vid)
    if copy == 0 or m is None:
        return vid if copy == 0 else f"{vid}-{copy}"
    return f"Q{int(m.group(1)) + copy * OFFSET}{m.group(2) or ''}"


def original_entity(vid: str) -> str:
    """The real QID behind a (rewritten) vector id."""
    m = _ID.match(vid)
    return f"Q{int(m.group(1)) % OFFSET}" if m else vid.split("|", 1)[0]


def synthetic(a, vectors: np.ndarray, ids: list[str], queries: np.ndarray, gold: list[int | None],
              ent_ids: list[str], tmp: Path, encode_per_s: float | None) -> bool:
    """The synthetic scale point (real vectors + noise, ids rewritten), built, persisted and reopened through
    ``DenseIndex`` with the structure ``auto`` picks at that size."""
    import faiss  # heavy: faiss

    from tasks.search.dense_ann import VectorSource, resolve_spec
    from tasks.search.passages import DenseIndex

    n = len(vectors)
    total = a.synthetic
    copies = -(-total // n)

    class Noisy(VectorSource):
        """Copy 0: the real vectors; copy c: real + noise (seeded per chunk), re-normalised."""

        dim = vectors.shape[1]

        def __len__(self) -> int:
            return total

        def _rows(self, positions: np.ndarray) -> np.ndarray:
            out = vectors[positions % n].astype(np.float32, copy=True)
            noisy = positions >= n
            if noisy.any():
                rng = np.random.default_rng(int(positions[0]))
                out[noisy] += rng.normal(0, a.noise, size=(int(noisy.sum()), self.dim)).astype(np.float32)
                out[noisy] /= np.linalg.norm(out[noisy], axis=1, keepdims=True)
            return out

        def chunk(self, start: int, stop: int) -> np.ndarray:
            return self._rows(np.arange(start, stop))

        def take(self, positions: np.ndarray) -> np.ndarray:
            return self._rows(np.asarray(positions))

    sp = resolve_spec("auto", total)
    syn_ids = [rewrite(i, c) for c in range(copies) for i in ids][:total]
    print(f"\nSYNTHETIC scale point: {total:,} vectors = the {n:,} real ones and {copies - 1} noisy copies "
          f"(noise {a.noise}/dim, re-normalised; ids rewritten Q42 -> Q<42 + c 10^10>); `auto` picks "
          f"{sp.factory} ({sp.search_parameters()}), trained on {sp.train_size:,}")
    folder = tmp / "synthetic"
    reset_peak()
    rss0 = rss_mb()
    t0 = time.perf_counter()
    built = DenseIndex.from_vectors(folder, syn_ids, Noisy(), index="auto", chunk=65_536)
    build_s = time.perf_counter() - t0
    peak = rss_mb("VmHWM") - rss0
    meta = built.meta
    del built
    size = (folder / "index.faiss").stat().st_size
    ids_size = (folder / "ids.parquet").stat().st_size
    rss1 = rss_mb()
    index = DenseIndex.open(folder)
    index.search_vectors(queries, VECTORS_PER_ENTITY * K)  # warm-up
    opened = rss_mb() - rss1
    faiss.omp_set_num_threads(1)
    best, hits = float("inf"), None
    for _ in range(a.passes):
        t1 = time.perf_counter()
        hits = index.search_vectors(queries, VECTORS_PER_ENTITY * K)
        best = min(best, time.perf_counter() - t1)
    faiss.omp_set_num_threads(_CORES)
    ent_no = {q: i for i, q in enumerate(ent_ids)}
    recall_hits, has = 0, 0
    for g, hs in zip(gold, hits, strict=True):
        if g is None:
            continue
        has += 1
        seen: list[int] = []
        for h in hs:  # best first: distinct real entities, any copy counts for its entity
            e = ent_no.get(original_entity(h.id))
            if e not in seen:
                seen.append(e)
        recall_hits += g in seen[:K]
    full = FULL_WIKIDATA * VECTORS_PER_ENTITY
    print(f"  train {meta['train_s']:.1f}s on {meta['train_size']:,} vectors, add {meta['add_s']:.1f}s "
          f"({total / meta['add_s']:,.0f} vectors/s on {_CORES} cores), build and write {build_s:.1f}s in all")
    print(f"  index.faiss {size / 2**20:,.1f} MiB = {size / total:.1f} B/vector, ids.parquet {ids_size / total:.1f} "
          f"B/vector; resident memory added during the build: peak {peak:,.0f} MiB; opening it + one search pass: "
          f"{opened:,.0f} MiB ({opened * 2**20 / total:.1f} B/vector, ids included)")
    print(f"  {len(queries) / best:,.0f} q/s on 1 core (DenseIndex.search_vectors, ids included); candidate "
          f"recall@{K} {recall_hits / has:.3f} (copies compete: synthetic, not comparable with the real figures)")
    nlist_full = resolve_spec("auto", full).identity()["nlist"]
    print(f"  projection to full Wikidata ({FULL_WIKIDATA / 1e6:.0f} M entities x {VECTORS_PER_ENTITY} = "
          f"{full / 1e6:.0f} M vectors, linear in vectors): index {size / total * full / 2**30:,.1f} GiB + ids "
          f"{ids_size / total * full / 2**30:,.1f} GiB on disk, ~{opened * 2**20 / total * full / 2**30:,.1f} GiB "
          f"resident (flat float32: {full * vectors.shape[1] * 4 / 2**30:,.0f} GiB); adding "
          f"{meta['add_s'] / total * full / 3600:,.1f} h on {_CORES} cores; training at nlist {nlist_full:,} on "
          f"{resolve_spec('auto', full).train_size:,} vectors not measured here")
    if encode_per_s:
        print(f"  MiniLM encoding of {full / 1e6:.0f} M texts: {full / encode_per_s / 3600 / 24:,.1f} days at this "
              f"index's measured {encode_per_s:,.0f} texts/s (its done-marker): a GPU job")
    return True


if __name__ == "__main__":
    raise SystemExit(main())
