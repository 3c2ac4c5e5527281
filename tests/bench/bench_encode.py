"""Benchmark: MiniLM encoding of the dense entity index's texts on the CPU and on a GPU, fp32 against fp16/bf16.

The full-size dense entity index needs 230 M texts encoded (115 M entities x 2 texts, ``kb_indexes``); at the
413 texts/s of this project's 2-core machine that is 6.4 days, so it is a GPU job. This measures what a GPU
gives on the real texts, through the product's own path (``passages.encode`` driven by
``dense_ann.EncodedTexts``, as ``DenseIndex.build_from_docs`` drives it), against the CPU of the same machine in
the same run.

Texts: the sample KB's dense entity index rows (``kb_indexes.dense_entity_docs``: every KG node's name, then
its ``"name: description"``), in index order. Queries: the distinct WebQSP-EL test gold mention texts and their
gold QIDs. ``--export DIR`` writes both as Parquet (``texts.parquet``, ``queries.parquet``) for a machine that
has torch and sentence-transformers but not the whole stack (a lent GPU machine); ``--texts DIR`` reads them.

Configurations (texts/s, one warm-up call each first, excluded):

* ``cpu``: fp32, the entity index's settings (``EncodedTexts.STEP`` texts per call, batch 128), all cores, on a
  seeded sample of ``--cpu-n`` texts; the GPU's product path is timed on the same sample for the ratio;
* ``cuda fp32 product``: the same settings on the GPU, every text (what ``kb index --kind entity-dense`` does
  on a GPU machine today: ``passages.default_device`` picks CUDA);
* ``cuda fp32 / fp16 / bf16 large``: 16,384 texts per call, batch 512; fp16 and bf16 cast the model's weights.

Agreement, every text: the cosine between each reduced-precision vector and its fp32 vector (min, mean), and
exact search as ``kb_indexes.dense_entity_hits`` does it (2k vectors per query, each entity once, k = 10
entities): candidate recall@10 of the gold entity and overlap@10 with the fp32 top 10, queries encoded at the
same precision. CPU against GPU fp32 vectors on the sample: the same cosines. Projection: 230 M texts at the
product path's and the best configuration's rate, hours on one GPU.

Run here: ``.venv/bin/python -m tests.bench.bench_encode [--export DIR]`` (needs ``linkedqa kb build --sample``);
on a GPU machine: ``python -m tests.bench.bench_encode --texts DIR [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FULL_TEXTS = 230_000_000  # 115 M Wikidata entities x 2 texts (name; "name: description")
K = 10  # AnchorRAG n_candidates (tasks/methods/anchorrag/settings.py)
ENTITY_BATCH = 128  # kb_indexes._build_dense_entity's encoding batch


def export(folder: Path) -> None:
    """Write the sample KB's dense entity texts and the WebQSP-EL test gold mentions under ``folder``."""
    from flows.cli.command_env import setup_env

    setup_env()
    from storage import layout
    from storage.catalog import latest_kb_version
    from tasks.search.kb_indexes import dense_entity_docs
    from tests.bench.bench_dense import gold_mentions

    kb = latest_kb_version()
    if kb is None:
        raise SystemExit("no KB: run `linkedqa kb build --sample` first")
    folder.mkdir(parents=True, exist_ok=True)
    docs = pa.Table.from_batches(list(dense_entity_docs(kb, layout.home()))).select(["id", "qid", "text"])
    pq.write_table(docs.replace_schema_metadata({"kb_version": kb}), folder / "texts.parquet")
    mentions = gold_mentions()
    pq.write_table(pa.table({"text": list(mentions), "gold": list(mentions.values())}), folder / "queries.parquet")
    print(f"{folder}: {docs.num_rows:,} texts of {kb}, {len(mentions):,} queries")


def load(folder: Path | None) -> tuple[pa.Table, pa.Table]:
    """The texts and queries tables: read from ``folder`` or exported from the current KB into a temp folder."""
    if folder is None:
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="bench-encode-"))
        export(folder)
    return pq.read_table(folder / "texts.parquet"), pq.read_table(folder / "queries.parquet")


def timed_encode(texts: list[str], device: str, path: str, batch: int, step: int) -> tuple[np.ndarray, float]:
    """Vectors of ``texts`` through ``EncodedTexts`` (``step`` texts per call) and the seconds taken.

    ``path``: ``st`` (sentence-transformers' ``encode``, ``passages._encode_st``) or ``pipelined``
    (``passages._encode_pipelined``, what ``passages.encode`` does on a GPU).
    """
    from tasks.search import passages
    from tasks.search.dense_ann import EncodedTexts

    model = passages.get_model(device)
    fn = passages._encode_st if path == "st" else passages._encode_pipelined
    fn(model, texts[:step], batch)  # warm-up: model load, kernels, allocator
    source = EncodedTexts(texts, lambda t: fn(model, t, batch), passages.embedding_dim(model), step=step)
    t0 = time.perf_counter()
    vecs = source.chunk(0, len(texts))
    return vecs, time.perf_counter() - t0


def tokenize_rate(texts: list[str], device: str) -> dict[str, float]:
    """Texts/s of tokenizing alone, batches of ``GPU_BATCH`` sorted by length: sentence-transformers'
    ``preprocess`` (the Python wrapper) and the Rust tokenizer that ``_encode_pipelined`` uses."""
    from tasks.search import passages
    from tasks.search.passages import GPU_BATCH

    model = passages.get_model(device)
    ordered = [texts[i] for i in np.argsort([-len(t) for t in texts], kind="stable")]
    tok = passages._fast_tokenizer(model)
    out = {}
    for name, fn in (("st_preprocess", model.preprocess), ("rust", tok.encode_batch_fast)):
        t0 = time.perf_counter()
        for lo in range(0, len(ordered), GPU_BATCH):
            fn(ordered[lo : lo + GPU_BATCH])
        out[name] = len(ordered) / (time.perf_counter() - t0)
    return out


def cosines(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Min and mean cosine between matching rows of two sets of L2-normalised vectors."""
    c = np.einsum("ij,ij->i", a.astype(np.float64), b.astype(np.float64))
    return {"min_cosine": float(c.min()), "mean_cosine": float(c.mean())}


def entity_top(vectors: np.ndarray, queries: np.ndarray, entity_of: np.ndarray) -> list[list[int]]:
    """Per query, the top ``K`` entities of an exact search of ``2K`` vectors, each entity once (its best vector:
    ``bench_dense.entity_top``, as ``kb_indexes.dense_entity_hits`` searches)."""
    from tests.bench import bench_dense

    out: list[list[int]] = []
    for lo in range(0, len(queries), 256):
        scores = queries[lo : lo + 256] @ vectors.T
        idx = np.argpartition(-scores, 2 * K, axis=1)[:, : 2 * K]
        out += bench_dense.entity_top(idx, np.take_along_axis(scores, idx, axis=1), entity_of, K)
    return out


def search_figures(top: list[list[int]], gold: list[int | None], ref: list[list[int]]) -> dict[str, float]:
    """Candidate recall@K over queries with a gold entity, and overlap@K with the reference top K."""
    has = [i for i, g in enumerate(gold) if g is not None]
    return {"recall_at_10": sum(gold[i] in top[i] for i in has) / len(has),
            "overlap_at_10": float(np.mean([len(set(t) & set(r)) / max(1, len(r)) for t, r in zip(top, ref,
                                                                                                strict=True)]))}


def main() -> int:
    """Measure and print the figures (and write them to ``--json``)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", type=Path, help="write texts.parquet and queries.parquet here and stop")
    ap.add_argument("--texts", type=Path, help="read texts.parquet and queries.parquet from here")
    ap.add_argument("--cpu-n", type=int, default=20_000, help="texts in the CPU sample")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--limit", type=int, help="only the first N texts (a quick check)")
    ap.add_argument("--device", default="cuda", help="the accelerator (cpu: a dry run of the GPU part)")
    a = ap.parse_args()
    if a.export:
        export(a.export)
        return 0

    import torch  # heavy: torch

    from tasks.search.passages import get_model, torch_threads

    docs, queries = load(a.texts)
    docs = docs.slice(0, a.limit) if a.limit else docs
    texts = docs.column("text").to_pylist()
    qids = [i.split("|", 1)[0] for i in docs.column("id").to_pylist()]
    ent_no = {q: i for i, q in enumerate(sorted(set(qids)))}
    entity_of = np.array([ent_no[q] for q in qids], dtype=np.int64)
    qtexts = queries.column("text").to_pylist()
    gold = [ent_no.get(g) for g in queries.column("gold").to_pylist()]
    rng = np.random.default_rng(0)
    sample = [texts[i] for i in sorted(rng.choice(len(texts), min(a.cpu_n, len(texts)), replace=False))]
    dev = a.device
    accel = dev != "cuda" or torch.cuda.is_available()
    res: dict = {"texts": len(texts), "queries": len(qtexts), "cpu_sample": len(sample),
                 "kb_version": (docs.schema.metadata or {}).get(b"kb_version", b"").decode(),
                 "torch": torch.__version__, "cpu_threads": torch_threads(), "os_cpus": os.cpu_count(),
                 "gpu": torch.cuda.get_device_name(0) if dev == "cuda" and accel else dev, "runs": {}}
    print(f"{len(texts):,} texts ({res['kb_version']}), {len(qtexts):,} queries; torch {torch.__version__}, "
          f"{res['cpu_threads']} CPU threads, GPU: {res['gpu']}", flush=True)

    def run(name: str, items: list[str], device: str, path: str, batch: int, step: int) -> np.ndarray:
        vecs, secs = timed_encode(items, device, path, batch, step)
        res["runs"][name] = {"n": len(items), "seconds": secs, "texts_per_s": len(items) / secs,
                             "device": device, "path": path, "batch": batch, "step": step}
        print(f"{name:<34} {len(items):>9,} texts {secs:8.1f} s {len(items) / secs:10,.0f} texts/s", flush=True)
        return vecs

    from tasks.search.dense_ann import EncodedTexts
    from tasks.search.passages import GPU_BATCH, GPU_STEP, encode

    old = (ENTITY_BATCH, EncodedTexts.STEP)  # the entity index's settings before GPU_BATCH / GPU_STEP
    cpu_vecs = run("cpu st 128/1024 (sample)", sample, "cpu", "st", *old)
    if not accel:
        print("no CUDA device: CPU figures only")
    else:
        gpu_sample = run(f"{dev} st 128/1024 (sample)", sample, dev, "st", *old)
        res["cpu_vs_gpu_fp32"] = cosines(cpu_vecs, gpu_sample)
        res["gpu_over_cpu_st"] = (res["runs"][f"{dev} st 128/1024 (sample)"]["texts_per_s"]
                                  / res["runs"]["cpu st 128/1024 (sample)"]["texts_per_s"])
        res["tokenize_per_s"] = tokenize_rate(texts, dev)
        print("tokenizing alone, texts/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in res["tokenize_per_s"].items()))
        ref = run(f"{dev} st 128/1024", texts, dev, "st", *old)
        run(f"{dev} st 512/16384", texts, dev, "st", GPU_BATCH, GPU_STEP)
        product = run(f"{dev} pipelined 512/16384 (product)", texts, dev, "pipelined", GPU_BATCH, GPU_STEP)
        run(f"{dev} pipelined 2048/65536", texts, dev, "pipelined", 2048, 65_536)
        ref_top = entity_top(ref, encode(qtexts, batch_size=GPU_BATCH, device=dev), entity_of)
        res["search"] = {"st fp32": search_figures(ref_top, gold, ref_top)}
        top = entity_top(product, encode(qtexts, batch_size=GPU_BATCH, device=dev), entity_of)
        res["search"]["pipelined fp32"] = {**search_figures(top, gold, ref_top), **cosines(ref, product)}
        model = get_model(dev)
        for dtype, name in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
            model.to(dtype)
            vecs = run(f"{dev} pipelined {name} 512/16384", texts, dev, "pipelined", GPU_BATCH, GPU_STEP)
            top = entity_top(vecs, encode(qtexts, batch_size=GPU_BATCH, device=dev), entity_of)
            res["search"][f"pipelined {name}"] = {**search_figures(top, gold, ref_top), **cosines(ref, vecs)}
        model.to(torch.float32)
        for name, fig in res["search"].items():
            print(f"search {name}: " + ", ".join(f"{k} {v:.4f}" for k, v in fig.items()))
        print(f"cpu vs {dev} fp32 vectors (sample): " + ", ".join(f"{k} {v:.6f}" for k, v in
                                                                res["cpu_vs_gpu_fp32"].items()))
        print(f"{dev} / cpu, sentence-transformers at 128/1024 on the sample: {res['gpu_over_cpu_st']:.1f}x")
        base = res["runs"][f"{dev} st 128/1024"]["texts_per_s"]
        for name, r in res["runs"].items():
            if r["n"] == len(texts):
                r["full_wikidata_hours"] = FULL_TEXTS / r["texts_per_s"] / 3600
                print(f"{name:<34} {r['texts_per_s'] / base:5.2f}x st 128/1024; 230 M texts in "
                      f"{r['full_wikidata_hours']:.1f} h on one {res['gpu']}")
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
