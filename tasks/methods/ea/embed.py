"""Embedding candidate generator for entity alignment (``ea-embed``; the paper used TEA for this role).

Inputs: the two graphs (:class:`tasks.datasets.ea_kg.AlignmentPair`), the candidate space (source and target entities of
one split: the OpenEA convention ranks each test source against the test targets), and the seed links
(the ``train`` split) used as structural anchors. Outputs: ranked target candidates with scores.

The similarity of a source ``s`` and a target ``t`` is a weighted sum of four cosines, divided by the weight
total (so it stays in [-1, 1]):

* ``name``: all-MiniLM-L6-v2 embeddings of the names (the model of ``tasks.search.passages``);
* ``char``: TF-IDF character 1-3-grams (word-bounded) of normalised names (:mod:`tasks.methods.ea.translit`: NFKC,
  accents stripped, kana romanised) — MiniLM is English-only, this is what keeps JA/ZH names usable;
* ``neighbour``: mean MiniLM embedding of the entity's neighbours' names;
* ``anchor``: shared seed-aligned neighbours (a neighbour that is the source side of a seed link and one that
  is the target side of the same link count as the same feature).

Optional CSLS (Lample et al. 2018): ``2 cos(s, t) - r_s - r_t`` with ``r`` the mean similarity of the
``csls_k`` nearest neighbours on the other side, which demotes hub targets. Scoring is exact, in blocks of
``chunk`` sources (memory: ``chunk x |targets|`` floats per signal): at DBP15K size (10,500 x 10,500) exact
blocked scoring costs seconds, so no approximate index is used. MiniLM name vectors are cached as ``.npy``
files keyed by the content hash of the names (encoding is the slow part on CPU).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from storage.side_files import ArtifactCache
from tasks.datasets.ea_kg import KG, AlignmentPair
from tasks.methods.ea.translit import normalize_name
from tasks.search.passages import MODEL_NAME, encode

SIGNALS = ("name", "char", "neighbour", "anchor")


@dataclass(frozen=True)
class EmbedConfig:
    """Weights and options of the candidate generator (a weight of 0 disables that signal entirely)."""

    w_name: float = 1.0
    w_char: float = 1.0
    w_neighbour: float = 1.0
    w_anchor: float = 1.0
    csls: bool = True
    csls_k: int = 10
    transliterate: bool = True
    chunk: int = 1024

    def weights(self) -> dict[str, float]:
        """Signal -> weight, for the signals with a positive weight."""
        w = {"name": self.w_name, "char": self.w_char, "neighbour": self.w_neighbour, "anchor": self.w_anchor}
        return {k: v for k, v in w.items() if v > 0}


@dataclass(frozen=True)
class Candidate:
    """One ranked target: its id, the ranking score (CSLS when enabled) and the plain similarity."""

    id: str
    score: float
    similarity: float


def _l2_rows(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32)


def _l2_sparse(m: sp.csr_matrix) -> sp.csr_matrix:
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ m, dtype=np.float32)


def name_embeddings(names: Sequence[str], cache_dir: Path | ArtifactCache | None = None) -> np.ndarray:
    """L2-normalised MiniLM vectors of ``names`` (cached under ``cache_dir`` by content hash).

    Args:
        names: Entity names.
        cache_dir: Artifact cache (or its folder) holding ``minilm-<hash>.npy`` (no caching when None).

    Returns:
        ``(len(names), 384)`` float32.
    """
    key = hashlib.sha256(("\n".join(names) + "\0" + MODEL_NAME).encode()).hexdigest()[:16]
    cache = cache_dir if isinstance(cache_dir, ArtifactCache) else ArtifactCache(cache_dir)
    return cache.array(f"minilm-{key}", lambda: encode(list(names), batch_size=256))


def neighbour_embeddings(kg: KG, emb: np.ndarray, rows: Sequence[int]) -> np.ndarray:
    """Normalised mean of the neighbours' name vectors for ``rows`` (zero vector for isolated entities)."""
    r, c = [], []
    for i, row in enumerate(rows):
        nb = kg.neighbours(row)
        r.extend([i] * len(nb))
        c.extend(nb)
    adj = sp.csr_matrix((np.ones(len(r), dtype=np.float32), (r, c)), shape=(len(rows), len(kg)))
    return _l2_rows(np.asarray(adj @ emb))


def anchor_features(kg: KG, rows: Sequence[int], anchor_of: dict[int, int], n_anchors: int) -> sp.csr_matrix:
    """Normalised bag of seed-aligned neighbours of ``rows`` (column = seed link index)."""
    r, c = [], []
    for i, row in enumerate(rows):
        for nb in kg.neighbours(row):
            a = anchor_of.get(nb)
            if a is not None:
                r.append(i)
                c.append(a)
    m = sp.csr_matrix((np.ones(len(r), dtype=np.float32), (r, c)), shape=(len(rows), max(1, n_anchors)))
    return _l2_sparse(m)


def char_features(left: Sequence[str], right: Sequence[str], transliterate: bool = True
                  ) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """TF-IDF character 1-3-gram vectors of two name lists (vocabulary and IDF fitted on both)."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # heavy: sklearn

    ln = [normalize_name(x, transliterate) for x in left]
    rn = [normalize_name(x, transliterate) for x in right]
    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), sublinear_tf=True, lowercase=False,
                          dtype=np.float32)
    vec.fit(ln + rn)
    return sp.csr_matrix(vec.transform(ln)), sp.csr_matrix(vec.transform(rn))


class AlignmentScorer:
    """Exact blocked similarity between a source space and a target space (see the module docstring).

    Args:
        ap: The two graphs.
        sources: Source entity ids (KG1) of the candidate space.
        targets: Target entity ids (KG2) of the candidate space.
        anchors: Seed links ``(kg1 id, kg2 id)`` (the ``train`` split).
        cfg: Weights and options.
        cache_dir: Where MiniLM vectors are cached.
    """

    def __init__(self, ap: AlignmentPair, sources: Sequence[str], targets: Sequence[str],
                 anchors: Sequence[tuple[str, str]], cfg: EmbedConfig | None = None, cache_dir: Path | None = None):
        self.cfg = cfg or EmbedConfig()
        self.weights = self.cfg.weights()
        if not self.weights:
            raise ValueError("every similarity weight is 0: enable at least one of name, char, neighbour, anchor")
        self.sources = list(sources)
        self.targets = list(targets)
        self.source_pos = {e: i for i, e in enumerate(self.sources)}
        s_rows = [ap.kg1.index[e] for e in self.sources]
        t_rows = [ap.kg2.index[e] for e in self.targets]
        self._dense: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._sparse: dict[str, tuple[sp.csr_matrix, sp.csr_matrix]] = {}
        if "name" in self.weights or "neighbour" in self.weights:
            e1 = name_embeddings(ap.kg1.names, cache_dir)
            e2 = name_embeddings(ap.kg2.names, cache_dir)
            if "name" in self.weights:
                self._dense["name"] = (e1[s_rows], e2[t_rows])
            if "neighbour" in self.weights:
                self._dense["neighbour"] = (neighbour_embeddings(ap.kg1, e1, s_rows),
                                            neighbour_embeddings(ap.kg2, e2, t_rows))
        if "char" in self.weights:
            self._sparse["char"] = char_features([ap.kg1.names[r] for r in s_rows],
                                                 [ap.kg2.names[r] for r in t_rows], self.cfg.transliterate)
        if "anchor" in self.weights:
            a1 = {ap.kg1.index[a]: i for i, (a, _) in enumerate(anchors)}
            a2 = {ap.kg2.index[b]: i for i, (_, b) in enumerate(anchors)}
            self._sparse["anchor"] = (anchor_features(ap.kg1, s_rows, a1, len(anchors)),
                                      anchor_features(ap.kg2, t_rows, a2, len(anchors)))
        self._total = float(sum(self.weights.values()))
        self._r_s: np.ndarray | None = None
        self._r_t: np.ndarray | None = None
        if self.cfg.csls:
            self._r_s, self._r_t = self._csls_radii()

    def signal_similarities(self, s_pos: np.ndarray) -> dict[str, np.ndarray]:
        """Per-signal cosine of the sources at positions ``s_pos`` with every target (float32, unweighted)."""
        out = {name: left[s_pos] @ right.T for name, (left, right) in self._dense.items()}
        out.update({name: (left[s_pos] @ right.T).toarray() for name, (left, right) in self._sparse.items()})
        return out

    def similarity(self, s_pos: np.ndarray) -> np.ndarray:
        """Weighted mean cosine of the sources at positions ``s_pos`` with every target (float32)."""
        out = np.zeros((len(s_pos), len(self.targets)), dtype=np.float32)
        for name, sim in self.signal_similarities(s_pos).items():
            out += self.weights[name] * sim
        out /= self._total
        return out

    def _blocks(self, n: int):
        step = max(1, self.cfg.chunk)
        for start in range(0, n, step):
            yield np.arange(start, min(n, start + step))

    def _csls_radii(self) -> tuple[np.ndarray, np.ndarray]:
        k_s = min(self.cfg.csls_k, len(self.targets))
        k_t = min(self.cfg.csls_k, len(self.sources))
        r_s = np.zeros(len(self.sources), dtype=np.float32)
        top_t = np.full((k_t, len(self.targets)), -np.inf, dtype=np.float32)
        for pos in self._blocks(len(self.sources)):
            sim = self.similarity(pos)
            r_s[pos] = np.partition(sim, -k_s, axis=1)[:, -k_s:].mean(axis=1)
            top_t = np.partition(np.vstack([top_t, sim]), -k_t, axis=0)[-k_t:]
        return r_s, top_t.mean(axis=0)

    def rank(self, source_ids: Sequence[str], k: int) -> list[list[Candidate]]:
        """Top-``k`` targets of each source id (CSLS order when enabled; ties by target order).

        Raises:
            KeyError: A source outside the candidate space.
        """
        missing = [s for s in source_ids if s not in self.source_pos]
        if missing:
            raise KeyError(f"source(s) outside the candidate space: {missing[:5]}")
        pos_all = np.array([self.source_pos[s] for s in source_ids], dtype=np.int64)
        k = min(k, len(self.targets))
        out: list[list[Candidate]] = []
        for block in self._blocks(len(pos_all)):
            pos = pos_all[block]
            sim = self.similarity(pos)
            score = sim
            if self._r_s is not None and self._r_t is not None:
                score = 2 * sim - self._r_s[pos][:, None] - self._r_t[None, :]
            top = np.argpartition(-score, k - 1, axis=1)[:, :k]
            for i in range(len(pos)):
                # argpartition keeps an arbitrary subset of the targets tied with the k-th score: keep the
                # lowest positions among them, so the top k is that of a stable sort (OpenEA's order)
                row, kth = score[i], score[i, top[i]].min()
                above = np.flatnonzero(row > kth)
                tied = np.flatnonzero(row == kth)[: k - len(above)]
                top_i = top[i] if np.isnan(kth) else np.concatenate([above, tied])
                idx = top_i[np.lexsort((top_i, -row[top_i]))]
                out.append([Candidate(self.targets[j], float(score[i, j]), float(sim[i, j])) for j in idx])
        return out


#: Grid searched by :func:`tune_config` (weights are relative: the score is a weighted mean).
TUNE_GRID: dict[str, tuple] = {
    "w_name": (0.0, 0.5, 1.0),
    "w_char": (0.0, 0.5, 1.0),
    "w_neighbour": (0.0, 0.5, 1.0),
    "w_anchor": (0.5, 1.0, 2.0),
    "csls": (False, True),
}


def csls_adjust(sim: np.ndarray, k: int) -> np.ndarray:
    """CSLS of a full square-or-rectangular similarity matrix (radii from its own rows and columns)."""
    k_s, k_t = min(k, sim.shape[1]), min(k, sim.shape[0])
    r_s = np.partition(sim, -k_s, axis=1)[:, -k_s:].mean(axis=1)
    r_t = np.partition(sim, -k_t, axis=0)[-k_t:, :].mean(axis=0)
    return 2 * sim - r_s[:, None] - r_t[None, :]


def diagonal_ranks(score: np.ndarray) -> np.ndarray:
    """0-based rank of the diagonal entry of each row (row ``i``'s gold is column ``i``).

    Ties are broken as :meth:`AlignmentScorer.rank` breaks them (lower target position first), so a signal
    with many ties (an entity without anchored neighbours scores 0 against everything) is not credited with
    ranks it would not get.
    """
    gold = np.diag(score)[:, None]
    cols = np.arange(score.shape[1])[None, :]
    rows = np.arange(score.shape[0])[:, None]
    return (score > gold).sum(axis=1) + ((score == gold) & (cols < rows)).sum(axis=1)


def tune_config(ap: AlignmentPair, links: Sequence[tuple[str, str]], base: EmbedConfig | None = None,
                cache_dir: Path | None = None, grid: dict[str, tuple] | None = None) -> tuple[EmbedConfig, list[dict]]:
    """Pick signal weights and CSLS on the seed links only (never on test links).

    Every source of ``links`` is ranked against every target of ``links`` (with the same links as anchors:
    an entity's own link never enters its own features, only its neighbours' links do, at the same density
    as for test entities); the grid point with the best Hits@1 (then MRR) wins.

    Args:
        ap: The two graphs.
        links: Seed links (the ``train`` split).
        base: Options kept from the user's config (``csls_k``, ``transliterate``, ``chunk``).
        cache_dir: MiniLM cache folder.
        grid: Values to search per field (default :data:`TUNE_GRID`).

    Returns:
        The chosen config and every grid point's ``{config..., hits@1, hits@10, mrr}``.
    """
    base = base or EmbedConfig()
    grid = grid or TUNE_GRID
    # only the signals some grid point uses are computed (MiniLM is skipped when every name weight is 0)
    full = replace(base, csls=False, **{w: 1.0 if max(grid[w]) > 0 else 0.0
                                        for w in ("w_name", "w_char", "w_neighbour", "w_anchor")})
    scorer = AlignmentScorer(ap, [s for s, _ in links], [t for _, t in links], links, full, cache_dir)
    sims = scorer.signal_similarities(np.arange(len(links)))
    results: list[dict] = []
    keys = list(grid)
    for values in itertools.product(*(grid[k] for k in keys)):
        point = dict(zip(keys, values, strict=True))
        weights = {"name": point["w_name"], "char": point["w_char"], "neighbour": point["w_neighbour"],
                   "anchor": point["w_anchor"]}
        if sum(weights.values()) <= 0:
            continue
        m = sum(w * sims[name] for name, w in weights.items() if w > 0) / sum(weights.values())
        m = np.asarray(m, dtype=np.float32)
        if point["csls"]:
            m = csls_adjust(m, base.csls_k)
        rank = diagonal_ranks(m)
        results.append({**point, "hits@1": float(np.mean(rank < 1)), "hits@10": float(np.mean(rank < 10)),
                        "mrr": float(np.mean(1.0 / (rank + 1)))})
    best = max(results, key=lambda r: (r["hits@1"], r["mrr"]))
    return replace(base, **{k: best[k] for k in keys}), results
