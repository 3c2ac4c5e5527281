"""The FAISS structure behind :class:`tasks.search.passages.DenseIndex`: exact below a size, IVF-PQ above it.

Exact inner-product search (``IndexFlatIP``) keeps 4 bytes per dimension per vector: 1,536 B for MiniLM, so
115 M entities x 2 vectors would need 353 GB. Above :data:`FLAT_MAX_VECTORS` vectors the index becomes an
inverted file with product-quantised codes (``IVF<nlist>_HNSW32,PQ<m>x<nbits>np``: an HNSW graph over the
``nlist`` centroids picks the ``nprobe`` lists a query visits; each vector is stored as ``m`` one-byte codes plus
its 8-byte id), about 72 B per vector at ``m = 64``. The choice and its parameters are a :class:`DenseSpec`,
recorded in the index's done-marker; ``DenseIndex.is_current`` compares it with the setting, so a changed setting
rebuilds (through ``kb_indexes.ensure_index``).

Inputs: a :class:`VectorSource` (texts encoded chunk by chunk, :class:`EncodedTexts`, or an array,
:class:`ArraySource`) and a spec. Outputs: a trained, filled FAISS index (:func:`build_faiss`), its search
parameters applied (:func:`apply_search_parameters`).

Memory is bounded: training reads a random sample of ``train_size`` vectors (``40 x nlist``, at least 65,536,
at most the whole set), then vectors are added ``chunk`` at a time; all float32 vectors are never held at once
(the flat index holds them by construction). Setting: ``$LINKEDQA_DENSE_INDEX`` = ``auto`` (default), ``flat``,
``ivfpq`` or ``ivfpq:nlist=N,m=M,nbits=B,nprobe=P,ef_search=E`` (any subset); see :func:`resolve_spec`.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tasks.openmp import prefer_passive_wait

# FAISS's OpenMP threads must sleep, not spin, while they wait (IVF-PQ training 8x slower spinning on a busy
# machine, tasks.openmp). Read when OpenMP starts, so set before the first ``import faiss``.
prefer_passive_wait()

#: Environment variable choosing the dense index structure (``auto`` when unset).
ENV = "LINKEDQA_DENSE_INDEX"
#: ``auto`` keeps exact search up to this many vectors (1.5 GB of float32 at 384 dimensions).
FLAT_MAX_VECTORS = 1_000_000
#: IVF-PQ defaults, chosen by ``tests/bench/bench_dense.py`` on the sample KB's entity vectors
#: (docs/benchmarks/search.md).
DEFAULT_M = 64
DEFAULT_NBITS = 8
DEFAULT_NPROBE = 32
HNSW_QUANTIZER_M = 32
TRAIN_PER_LIST = 40
TRAIN_MIN = 65_536
FLAT = "Flat"

_SETTING = re.compile(r"^(auto|flat|ivfpq)(?::(.*))?$")
_IVFPQ_KEYS = ("nlist", "m", "nbits", "nprobe", "ef_search")


class DenseSpecError(ValueError):
    """A dense-index setting that cannot be parsed or built."""


@dataclass(frozen=True, slots=True)
class DenseSpec:
    """One FAISS structure with its build and search parameters (all part of the index's identity).

    Attributes:
        factory: FAISS ``index_factory`` string: ``"Flat"`` (exact) or e.g. ``"IVF2048_HNSW32,PQ64x8"``.
        nprobe: Inverted lists visited per query (IVF indexes).
        ef_search: HNSW ``efSearch``: of the graph index itself, or of an IVF's HNSW coarse quantizer.
        train_size: Vectors sampled (uniformly, with ``seed``) to train; 0 for indexes that need no training.
        seed: Seed of the training sample.
    """

    factory: str = FLAT
    nprobe: int | None = None
    ef_search: int | None = None
    train_size: int = 0
    seed: int = 0

    @property
    def exact(self) -> bool:
        """Whether searches are exact (``Flat``)."""
        return self.factory == FLAT

    @property
    def kind(self) -> str:
        """Short name: ``flat``, ``ivf-pq``, ``ivf-sq``, ``hnsw``, ... (derived from the factory string)."""
        f = self.factory
        if self.exact:
            return "flat"
        base = "ivf" if "IVF" in f else "hnsw" if f.startswith("HNSW") else "other"
        code = "pq" if re.search(r"PQ\d", f) else "sq" if "SQ" in f else "flat"
        return f"opq-{base}-{code}" if f.startswith("OPQ") else f"{base}-{code}"

    def search_parameters(self) -> str:
        """FAISS ``ParameterSpace`` string of the search parameters (``""`` when there are none)."""
        parts = []
        if self.nprobe is not None:
            parts.append(f"nprobe={self.nprobe}")
        if self.ef_search is not None:
            hnsw_quantizer = "IVF" in self.factory and "_HNSW" in self.factory
            parts.append(f"{'quantizer_' if hnsw_quantizer else ''}efSearch={self.ef_search}")
        return ",".join(parts)

    def identity(self) -> dict[str, Any]:
        """The spec as done-marker metadata (two builds of different identities are different indexes).

        Holds the choice, its parameters (nlist, m, nbits parsed from the factory string) and the search
        parameters.
        """
        ivf = re.search(r"IVF(\d+)", self.factory)
        pq = re.search(r"PQ(\d+)(?:x(\d+))?", self.factory)
        return {
            "index": self.kind,
            "factory": self.factory,
            "nlist": int(ivf.group(1)) if ivf else None,
            "m": int(pq.group(1)) if pq else None,
            "nbits": (int(pq.group(2)) if pq.group(2) else 8) if pq else None,
            "nprobe": self.nprobe,
            "ef_search": self.ef_search,
            "train_size": self.train_size,
            "seed": self.seed,
        }

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> DenseSpec:
        """The spec recorded in a done-marker (``meta["ann"]``); a marker without one is a flat index."""
        ann = meta.get("ann")
        if not ann:
            return cls()
        return cls(factory=ann["factory"], nprobe=ann.get("nprobe"), ef_search=ann.get("ef_search"),
                   train_size=int(ann.get("train_size") or 0), seed=int(ann.get("seed") or 0))


def default_nlist(n: int) -> int:
    """Inverted lists for ``n`` vectors: the power of two nearest ``4 sqrt(n)``.

    Kept within ``[16, 262144]`` and small enough that every list gets 39 training vectors (FAISS's k-means
    minimum).
    """
    nlist = 2 ** round(math.log2(max(4 * math.sqrt(max(n, 1)), 1)))
    nlist = min(max(nlist, 16), 262_144)
    while nlist > 16 and nlist * 39 > n:
        nlist //= 2
    return nlist


def ivfpq_spec(n: int, *, nlist: int | None = None, m: int = DEFAULT_M, nbits: int = DEFAULT_NBITS,
               nprobe: int = DEFAULT_NPROBE, ef_search: int | None = None, seed: int = 0) -> DenseSpec:
    """The IVF-PQ spec for ``n`` vectors (HNSW coarse quantizer, ``m`` codes of ``nbits`` bits per vector).

    Args:
        n: Vectors to index.
        nlist: Inverted lists (default :func:`default_nlist`).
        m: PQ sub-quantizers (must divide the dimension: 384 = 64 x 6).
        nbits: Bits per code (8: one byte per sub-quantizer).
        nprobe: Lists visited per query.
        ef_search: The coarse quantizer's HNSW ``efSearch`` (default ``max(64, 2 nprobe)``).
        seed: Training-sample seed.
    """
    nlist = nlist or default_nlist(n)
    if min(nlist, m, nbits, nprobe) < 1:
        raise DenseSpecError(f"IVF-PQ parameters must be >= 1: nlist={nlist}, m={m}, nbits={nbits}, nprobe={nprobe}")
    return DenseSpec(
        # "np": no polysemous training (a Hamming-filter table for L2 search; slow, and unused for inner product)
        factory=f"IVF{nlist}_HNSW{HNSW_QUANTIZER_M},PQ{m}x{nbits}np",
        nprobe=min(nprobe, nlist),
        ef_search=ef_search or max(64, 2 * nprobe),
        train_size=min(n, max(TRAIN_MIN, TRAIN_PER_LIST * nlist)),
        seed=seed,
    )


def resolve_spec(setting: str | DenseSpec | None, n: int) -> DenseSpec:
    """The spec for ``n`` vectors from a setting (default ``$LINKEDQA_DENSE_INDEX``, else ``auto``).

    Settings: ``auto`` (exact up to :data:`FLAT_MAX_VECTORS` vectors, IVF-PQ above), ``flat``, ``ivfpq``, or
    ``ivfpq:`` / ``auto:`` followed by ``key=value`` pairs among ``nlist, m, nbits, nprobe, ef_search``
    (``auto:`` applies them only when it picks IVF-PQ). A :class:`DenseSpec` is returned as is.

    Raises:
        DenseSpecError: An unknown setting or key, or a value that is not a positive integer.
    """
    if isinstance(setting, DenseSpec):
        return setting
    raw = (setting if setting is not None else os.environ.get(ENV) or "auto").strip()
    m = _SETTING.match(raw.lower())
    if m is None:
        raise DenseSpecError(f"unknown dense index setting {raw!r} (${ENV}); use auto, flat, ivfpq or "
                             f"ivfpq:{','.join(f'{k}=N' for k in _IVFPQ_KEYS)}")
    choice, params = m.group(1), {}
    for item in filter(None, (m.group(2) or "").split(",")):
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in _IVFPQ_KEYS or not value.strip().isdigit() or int(value) < 1:
            raise DenseSpecError(f"bad dense index parameter {item!r} in {raw!r}: keys {', '.join(_IVFPQ_KEYS)}, "
                                 "values positive integers")
        params[key] = int(value)
    if choice == "flat":
        if params:
            raise DenseSpecError(f"{raw!r}: the flat index takes no parameters")
        return DenseSpec()
    if choice == "auto" and n <= FLAT_MAX_VECTORS:
        return DenseSpec()
    return ivfpq_spec(n, **params)


# ------------------------------------------------------------------------------------------- vector sources
class VectorSource:
    """``len(self)`` vectors of ``dim`` float32 values, read in order by ranges or sampled by position."""

    dim: int

    def __len__(self) -> int:
        raise NotImplementedError

    def chunk(self, start: int, stop: int) -> np.ndarray:
        """Vectors ``start:stop`` (float32, C-contiguous)."""
        raise NotImplementedError

    def take(self, positions: np.ndarray) -> np.ndarray:
        """Vectors at sorted ``positions`` (the training sample)."""
        raise NotImplementedError


class ArraySource(VectorSource):
    """Vectors already in an array (or a memory map): benchmarks and tests."""

    def __init__(self, vectors: np.ndarray):
        if vectors.ndim != 2:
            raise DenseSpecError(f"vectors must be 2-D, got shape {vectors.shape}")
        self._v = vectors
        self.dim = int(vectors.shape[1])

    def __len__(self) -> int:
        return int(self._v.shape[0])

    def chunk(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as float32."""
        return np.ascontiguousarray(self._v[start:stop], dtype=np.float32)

    def take(self, positions: np.ndarray) -> np.ndarray:
        """Rows at ``positions`` as float32."""
        return np.ascontiguousarray(self._v[positions], dtype=np.float32)


class EncodedTexts(VectorSource):
    """Texts embedded on demand by ``encode`` (a function of a list of texts).

    The training sample's vectors are kept (bounded by ``train_size``) and reused when their chunk is added, so
    no text is encoded twice. ``encode_s`` and ``encoded`` count the encoding work. ``encode`` is called on at
    most :attr:`STEP` texts at a time and ``on_encoded`` (when set) with the number each call encoded: a chunk of
    8,192 passages takes minutes on 2 cores, too long between two updates of a progress bar (``step`` overrides it:
    a GPU takes 16,384 texts in about a second).
    """

    #: Texts per call of ``encode`` (the step of ``on_encoded``).
    STEP = 1024

    def __init__(self, texts: Sequence[str], encode: Callable[[list[str]], np.ndarray], dim: int,
                 on_encoded: Callable[[int], None] | None = None, step: int | None = None):
        self.step = step or self.STEP
        self._texts = texts
        self._encode = encode
        self.dim = dim
        self.on_encoded = on_encoded
        self._pos = np.zeros(0, dtype=np.int64)
        self._vecs = np.zeros((0, dim), dtype=np.float32)
        self.encode_s = 0.0
        self.encoded = 0

    def __len__(self) -> int:
        return len(self._texts)

    def _run(self, texts: list[str]) -> np.ndarray:
        t0 = time.perf_counter()
        parts = []
        for i in range(0, max(len(texts), 1), self.step):  # one call for no text: ``encode`` gives its shape
            part = texts[i : i + self.step]
            parts.append(np.ascontiguousarray(self._encode(part), dtype=np.float32))
            if self.on_encoded is not None and part:
                self.on_encoded(len(part))
        out = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self.encode_s += time.perf_counter() - t0
        self.encoded += len(texts)
        return out

    def _texts_at(self, positions: np.ndarray) -> list[str]:
        take = getattr(self._texts, "take", None)  # ArrowTexts: one Arrow take instead of one slice per text
        return take(positions) if take is not None else [self._texts[int(i)] for i in positions]

    def take(self, positions: np.ndarray) -> np.ndarray:
        """Encode the texts at ``positions`` and keep their vectors for :meth:`chunk`."""
        self._pos = np.asarray(positions, dtype=np.int64)
        self._vecs = self._run(self._texts_at(self._pos))
        return self._vecs

    def chunk(self, start: int, stop: int) -> np.ndarray:
        """Vectors ``start:stop``: kept training vectors copied, the other texts encoded (:attr:`STEP` at a time)."""
        if len(self._pos) == 0:
            return self._run(list(self._texts[start:stop]))
        lo, hi = np.searchsorted(self._pos, [start, stop])
        kept = self._pos[lo:hi] - start
        todo = np.setdiff1d(np.arange(stop - start), kept, assume_unique=True)
        out = np.empty((stop - start, self.dim), dtype=np.float32)
        if len(todo):
            out[todo] = self._run(self._texts_at(start + todo))
        if len(kept):
            out[kept] = self._vecs[lo:hi]
        return out

    def release(self) -> None:
        """Drop the kept training vectors."""
        self._pos = np.zeros(0, dtype=np.int64)
        self._vecs = np.zeros((0, self.dim), dtype=np.float32)


# ---------------------------------------------------------------------------------------------------- build
def build_faiss(source: VectorSource, spec: DenseSpec, *, chunk: int = 8192,
                on_chunk: Callable[[int], None] | None = None) -> tuple[Any, dict[str, float]]:
    """Train (on a sample) and fill the FAISS index of ``spec`` from ``source``, ``chunk`` vectors at a time.

    Args:
        source: The vectors (L2-normalised: the metric is inner product).
        spec: The structure.
        chunk: Vectors read and added per step.
        on_chunk: Called with the number of vectors after each added chunk (progress).

    Returns:
        ``(index, {"train_s", "add_s", "train_size"})``, the search parameters of ``spec`` applied.

    Raises:
        DenseSpecError: FAISS rejects the factory string for this dimension (e.g. ``m`` does not divide it).
    """
    import faiss  # heavy: faiss

    try:
        index = faiss.index_factory(source.dim, spec.factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as e:
        raise DenseSpecError(f"FAISS cannot build {spec.factory!r} for dimension {source.dim}: "
                             f"{str(e).strip().splitlines()[-1]}") from e
    n = len(source)
    train_s, n_train = 0.0, 0
    if not index.is_trained:
        n_train = min(n, spec.train_size or n)
        if n_train < 1:
            raise DenseSpecError(f"{spec.factory} needs training vectors; the source is empty")
        positions = np.sort(np.random.default_rng(spec.seed).choice(n, n_train, replace=False))
        sample = source.take(positions)
        t0 = time.perf_counter()
        index.train(sample)
        train_s = time.perf_counter() - t0
        del sample
    add_s = 0.0
    for start in range(0, n, chunk):
        vecs = source.chunk(start, min(n, start + chunk))
        t1 = time.perf_counter()
        index.add(vecs)
        add_s += time.perf_counter() - t1
        if on_chunk is not None:
            on_chunk(len(vecs))
    if isinstance(source, EncodedTexts):
        source.release()
    apply_search_parameters(index, spec)
    return index, {"train_s": round(train_s, 3), "add_s": round(add_s, 3), "train_size": n_train}


def apply_search_parameters(index: Any, spec: DenseSpec) -> None:
    """Set ``spec``'s search parameters (``nprobe``, ``efSearch``) on an index (FAISS ``ParameterSpace``)."""
    params = spec.search_parameters()
    if params:
        import faiss  # heavy: faiss

        faiss.ParameterSpace().set_index_parameters(index, params)

