"""The approximate dense index (IVF-PQ) against exact search, on real MiniLM embeddings of real Wikidata entities.

Vectors: the dense entity index AnchorRAG builds for ``kbkit.build_tog_kb``'s KB (the run's ``tog_kb_template``:
3,194 real Wikidata entities, a name vector and a ``"name: description"`` vector each, real all-MiniLM-L6-v2),
read back from its flat FAISS file instead of encoded again. The name vectors of ``N_QUERIES`` entities are held
out as queries (a bare keyword, as AnchorRAG searches); the other 5,988 vectors are the indexed ones. FAISS is
real. Speed is measured in ``tests/bench/bench_dense.py``, not here.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import layout
from tasks.search import dense_ann
from tasks.search.dense_ann import ArraySource, DenseSpec, DenseSpecError, EncodedTexts, build_faiss, resolve_spec
from tasks.search.passages import DOCS_FILE, DenseIndex

N_QUERIES = 400
K = 20  # AnchorRAG: n_candidates = 10 entities per keyword, searched as 2 x 10 vectors (dense_entity_hits)
#: IVF-PQ at this size: 64 lists, 64 one-byte codes per vector, 16 lists probed.
SPEC = "ivfpq:nlist=64,m=64,nbits=8,nprobe=16"
#: Measured with SPEC on these vectors (two runs, same values; AMD EPYC 2 cores, FAISS 1.15.1): top-K overlap with
#: flat 0.813, top-1 agreement 0.897. The test asserts 0.1 below each. Lower than on the sample KB (bench_dense):
#: 5,988 training vectors under-train the 256-centroid PQ codebooks.
MEASURED_OVERLAP = 0.813
MEASURED_TOP1 = 0.897


@pytest.fixture(scope="module")
def real_vectors(tog_kb_template: tuple[Path, str]) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """``(ids, texts, vectors, query vectors)``: every vector of the template KB's dense entity index but the
    name vectors of N_QUERIES random entities, and those held-out name vectors as queries."""
    import faiss  # heavy: faiss (reads the template's flat index back)

    warehouse, version = tog_kb_template
    folder = layout.index_kind_dir(version, "entity-dense", warehouse)
    assert json.loads((folder / "_done.json").read_text())["ann"]["index"] == "flat", "exact vectors are read back"
    index = faiss.read_index(str(folder / "index.faiss"))
    assert index.metric_type == faiss.METRIC_INNER_PRODUCT and index.ntotal == 6388
    every = index.reconstruct_n(0, index.ntotal)
    ids = pq.read_table(folder / "ids.parquet", columns=["id"]).column("id").to_pylist()
    texts = pa.ipc.open_file(str(folder / DOCS_FILE)).read_all().column("text").to_pylist()
    names = [i for i, x in enumerate(ids) if "|" not in x]
    held = set(random.Random(7).sample(names, N_QUERIES))
    keep = [i for i in range(len(ids)) if i not in held]
    return ([ids[i] for i in keep], [texts[i] for i in keep], np.ascontiguousarray(every[keep]),
            np.ascontiguousarray(every[sorted(held)]))


def test_resolve_spec_chooses_by_size_and_reads_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(dense_ann.ENV, raising=False)
    small = resolve_spec(None, 232_666)
    assert small.exact and small.identity()["index"] == "flat"
    big = resolve_spec("auto", 230_000_000)
    ident = big.identity()
    assert not big.exact and ident["index"] == "ivf-pq"
    assert ident["nlist"] == 65_536 and ident["m"] == dense_ann.DEFAULT_M and ident["nbits"] == 8
    assert ident["nprobe"] == dense_ann.DEFAULT_NPROBE and ident["ef_search"] >= ident["nprobe"]
    assert ident["train_size"] == dense_ann.TRAIN_PER_LIST * 65_536  # bounded by nlist, not by the 230 M vectors
    assert big.search_parameters() == f"nprobe={ident['nprobe']},quantizer_efSearch={ident['ef_search']}"
    assert resolve_spec("auto", dense_ann.FLAT_MAX_VECTORS).exact
    assert not resolve_spec("auto", dense_ann.FLAT_MAX_VECTORS + 1).exact
    custom = resolve_spec("ivfpq:nlist=128,m=32,nprobe=8", 10_000).identity()
    assert (custom["nlist"], custom["m"], custom["nprobe"], custom["ef_search"]) == (128, 32, 8, 64)
    monkeypatch.setenv(dense_ann.ENV, "ivfpq")
    assert resolve_spec(None, 100_000).identity()["index"] == "ivf-pq"
    for bad in ("hnsw", "ivfpq:nlist=0", "ivfpq:q=3", "flat:nprobe=2", "ivfpq:m=x"):
        with pytest.raises(DenseSpecError):
            resolve_spec(bad, 1000)
    # a marker written before the spec existed is a flat index; identities round-trip through the marker
    assert DenseSpec.from_meta({"kind": DenseIndex.KIND}).identity() == DenseSpec().identity()
    assert DenseSpec.from_meta({"ann": big.identity()}) == big


def test_ivfpq_builds_persists_reopens_and_overlaps_flat(real_vectors, tmp_path: Path) -> None:
    ids, _texts, vectors, queries = real_vectors
    flat = DenseIndex.from_vectors(tmp_path / "flat", ids, vectors, index="flat")
    folder = tmp_path / "ivfpq"
    ann = DenseIndex.from_vectors(folder, ids, vectors, index=SPEC, chunk=1000)  # 6 chunks added one by one
    # persisted atomically, done-marked, the spec recorded
    assert {"index.faiss", "ids.parquet", "_done.json"} <= set(os.listdir(folder))
    assert not [p for p in tmp_path.iterdir() if ".building-" in p.name or ".stale-" in p.name]
    meta = json.loads((folder / "_done.json").read_text())
    assert meta["kind"] == DenseIndex.ANN_KIND and meta["doc_count"] == len(ids)
    assert meta["ann"] == resolve_spec(SPEC, len(ids)).identity()
    assert meta["ann"]["nlist"] == 64 and meta["ann"]["m"] == 64 and meta["ann"]["nprobe"] == 16
    assert meta["train_size"] == len(ids) and meta["train_s"] >= 0
    # on disk: 64 one-byte codes + an 8-byte id per vector, against 1,536 B of float32 for flat
    ann_bytes = (folder / "index.faiss").stat().st_size
    flat_bytes = (tmp_path / "flat" / "index.faiss").stat().st_size
    assert ann_bytes < flat_bytes / 8, (ann_bytes, flat_bytes)
    # reopened (memory-mapped where FAISS allows it), nprobe restored from the marker
    again = DenseIndex.open(folder)
    assert again.spec == ann.spec and len(again) == len(ids)
    import faiss  # heavy: faiss (the test reads the live parameter)

    assert faiss.extract_index_ivf(again._index).nprobe == 16
    # top-k overlap with exact search on label queries (MEASURED_* above)
    exact = flat.search_vectors(queries, K)
    approx = again.search_vectors(queries, K)
    overlap = np.mean([len({h.id for h in a} & {h.id for h in e}) / len(e) for a, e in zip(approx, exact, strict=True)])
    top1 = np.mean([a[0].id == e[0].id for a, e in zip(approx, exact, strict=True)])
    print(f"overlap@{K} {overlap:.3f} top-1 agreement {top1:.3f}")
    assert overlap >= MEASURED_OVERLAP - 0.1, overlap
    assert top1 >= MEASURED_TOP1 - 0.1, top1
    # the folder is current for its spec only; another one (nprobe) rebuilds it in place, the old folder replaced
    before = (folder / "_done.json").stat().st_mtime_ns
    assert DenseIndex.is_current(folder, SPEC) and DenseIndex.open(folder).spec == ann.spec
    assert not DenseIndex.is_current(folder, "ivfpq:nlist=64,m=64,nbits=8,nprobe=32")
    wider = DenseIndex.from_vectors(folder, ids, vectors, index="ivfpq:nlist=64,m=64,nbits=8,nprobe=32")
    assert wider.meta["ann"]["nprobe"] == 32 and (folder / "_done.json").stat().st_mtime_ns != before
    assert DenseIndex.open(folder).meta["ann"]["nprobe"] == 32
    assert not [p for p in tmp_path.iterdir() if ".building-" in p.name or ".stale-" in p.name]


def test_encoded_texts_encode_each_text_once(real_vectors) -> None:
    """Training on a sample, then adding in chunks, encodes every text exactly once and gives the same index
    as the same vectors from an array."""
    _ids, texts, vectors, queries = real_vectors
    texts = [f"{i}\t{t}" for i, t in enumerate(texts)]  # row number first: duplicate labels stay apart
    calls: list[int] = []

    def lookup(batch: list[str]) -> np.ndarray:  # the real embeddings, looked up instead of recomputed
        calls.append(len(batch))
        return vectors[[int(t.split("\t", 1)[0]) for t in batch]]

    spec = resolve_spec("ivfpq:nlist=32,m=32,nprobe=8", len(texts))
    spec = DenseSpec(spec.factory, spec.nprobe, spec.ef_search, train_size=2000, seed=3)
    reported: list[int] = []
    source = EncodedTexts(texts, lookup, vectors.shape[1], on_encoded=reported.append)
    from_texts, stats = build_faiss(source, spec, chunk=1500)
    assert source.encoded == len(texts) == sum(calls) and stats["train_size"] == 2000
    # encode is called on at most STEP texts, and each call is reported: the 2,000-text sample takes two
    assert reported == calls and max(calls) <= EncodedTexts.STEP and calls[:2] == [EncodedTexts.STEP, 976]
    from_array, _ = build_faiss(ArraySource(vectors), spec, chunk=1500)
    a, b = from_texts.search(queries, K)[1], from_array.search(queries, K)[1]
    # same training sample, same codes; only the coarse quantizer's HNSW graph, built by parallel threads, may
    # differ a little
    same = np.mean([len(set(x) & set(y)) / K for x, y in zip(a.tolist(), b.tolist(), strict=True)])
    assert same >= 0.98, same


def test_bad_dense_specs_fail_clearly(real_vectors, tmp_path: Path) -> None:
    ids, _texts, vectors, _ = real_vectors
    with pytest.raises(DenseSpecError, match="m=.*|dimension"):
        DenseIndex.from_vectors(tmp_path / "bad", ids[:500], vectors[:500], index="ivfpq:nlist=16,m=7")
    with pytest.raises(ValueError, match="differ in length"):
        DenseIndex.from_vectors(tmp_path / "bad2", ids[:10], vectors[:11], index="flat")
    assert not (tmp_path / "bad").exists() and not [p for p in tmp_path.iterdir() if ".building-" in p.name]


def test_a_build_from_texts_shows_progress_as_texts_are_encoded(real_vectors, tmp_path: Path, monkeypatch,
                                                                 capsys) -> None:
    """``DenseIndex.build``'s progress moves every ``EncodedTexts.STEP`` texts, not once per 8,192-text chunk (a
    chunk of passages takes minutes on 2 cores). The model is looked up instead of run (real vectors)."""
    from tasks import progress as P
    from tasks.search import passages

    _ids, texts, vectors, _ = real_vectors
    texts = [f"{i}\t{t}" for i, t in enumerate(texts)]
    monkeypatch.setattr(passages, "encode", lambda batch, **_: vectors[[int(t.split("\t", 1)[0]) for t in batch]])
    monkeypatch.setattr(P, "HEARTBEAT_S", 0)
    monkeypatch.setenv("LINKEDQA_PROGRESS", "plain")
    index = DenseIndex.build(tmp_path / "flat", [str(i) for i in range(len(texts))], texts, desc="held-out test")
    assert len(index) == len(texts) == 5988
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[encode held-out test")]
    counts = [int(m.replace(",", "")) for ln in lines for m in re.findall(r"\] ([\d,]+)/5,988 text", ln)]
    assert len(counts) >= 4 and counts == sorted(counts) and counts[0] <= 2 * EncodedTexts.STEP, lines
    assert "done: 5,988/5,988" in lines[-1], lines


def test_the_gpu_encoding_path_gives_the_index_s_vectors(real_vectors) -> None:
    """``passages._encode_pipelined`` (what ``encode`` runs on a GPU: the Rust tokenizer in a second thread, the
    model's own modules) gives the vectors sentence-transformers' ``encode`` gave the index, to float rounding.

    Run here on the CPU model (the path is device-agnostic but for pinned memory); rows come back in the input
    order, and a text over the model's 256 word pieces (the 40 longest joined) is cut as sentence-transformers
    cuts it."""
    from tasks.search import passages

    _ids, texts, vectors, _ = real_vectors
    by_len = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    pick = by_len[:40] + random.Random(5).sample(by_len[40:], 360)  # input order: longest first, then shuffled
    pick = pick[::-1]
    got = passages._encode_pipelined(passages.get_model("cpu"), [texts[i] for i in pick], 64)
    assert got.shape == (400, vectors.shape[1]) and got.dtype == np.float32
    assert np.abs(got - vectors[pick]).max() < 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    model = passages.get_model("cpu")
    long = " ".join(texts[i] for i in by_len[:40])
    assert len(passages._fast_tokenizer(model).encode(long).ids) == model.max_seq_length == 256
    pair = [long, texts[by_len[-1]]]
    assert np.abs(passages._encode_pipelined(model, pair, 64) - passages._encode_st(model, pair, 64)).max() < 1e-5
