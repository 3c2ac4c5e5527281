"""The ea-embed candidate generator on real DBP15K slices: transliteration, signals, CSLS, tuning, caching."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tasks.datasets.dbp15k import split_of
from tasks.datasets.ea_kg import read_pair_cached
from tasks.methods.ea.embed import (
    AlignmentScorer,
    EmbedConfig,
    csls_adjust,
    diagonal_ranks,
    name_embeddings,
    tune_config,
)
from tasks.methods.ea.translit import kana_to_romaji, normalize_name

NO_MINILM = {"w_name": 0.0, "w_neighbour": 0.0}


@pytest.fixture(scope="module")
def fr_en(data_root: Path):
    ap = read_pair_cached(data_root, "fr_en")
    labels = split_of(len(ap.links))
    train = [lk for lk, s in zip(ap.links, labels, strict=True) if s == "train"]
    test = [lk for lk, s in zip(ap.links, labels, strict=True) if s == "test"]
    return ap, train, test


def test_transliteration():
    assert kana_to_romaji("アリアンツ・リヴィエラ") == "ariantsu riviera"
    assert kana_to_romaji("ベッカム") == "bekkamu" and kana_to_romaji("キャッシュ") == "kyasshu"
    assert normalize_name("2014年ＦＩＦＡワールドカップ") == "2014年fifawaarudokappu"
    assert normalize_name("Alliance des libéraux") == "alliance des liberaux"
    assert normalize_name("ファイナル", transliterate=False) == "ファイナル"


def test_char_and_anchor_signals_rank_a_real_slice(fr_en):
    ap, train, test = fr_en
    links = test[:400]
    scorer = AlignmentScorer(ap, [s for s, _ in links], [t for _, t in links], train,
                             EmbedConfig(**NO_MINILM, csls=True))
    ranked = scorer.rank([s for s, _ in links], 10)
    assert all(len(r) == 10 for r in ranked)
    hits1 = np.mean([r[0].id == t for r, (_, t) in zip(ranked, links, strict=True)])
    hits10 = np.mean([t in {c.id for c in r} for r, (_, t) in zip(ranked, links, strict=True)])
    assert hits1 > 0.8 and hits10 > 0.9  # FR and EN names share most character n-grams
    first = ranked[0]
    assert [c.score for c in first] == sorted((c.score for c in first), reverse=True)
    assert all(-1.0 <= c.similarity <= 1.0 for c in first)
    # each signal alone is a cosine in [0, 1] (non-negative features)
    sims = scorer.signal_similarities(np.arange(5))
    assert set(sims) == {"char", "anchor"} and all(0 <= m.min() and m.max() <= 1.0 + 1e-5 for m in sims.values())
    with pytest.raises(KeyError):
        scorer.rank(["fr:not-in-space"], 3)


def test_csls_and_diagonal_ranks_by_hand():
    sim = np.array([[0.9, 0.8], [0.85, 0.1]], dtype=np.float32)
    assert list(diagonal_ranks(sim)) == [0, 1]
    # ties go to the lower target position, as in AlignmentScorer.rank: row 1's gold (column 1) ties column 0
    assert list(diagonal_ranks(np.zeros((3, 3), dtype=np.float32))) == [0, 1, 2]
    c = csls_adjust(sim, 1)
    # r_s = [0.9, 0.85], r_t = [0.9, 0.8]: 2*0.85 - 0.85 - 0.9 = -0.05 vs 2*0.1 - 0.85 - 0.8 = -1.45
    assert c[1, 0] == pytest.approx(-0.05) and c[1, 1] == pytest.approx(-1.45)


def test_tuning_uses_only_the_seed_links(fr_en):
    ap, train, _ = fr_en
    grid = {"w_name": (0.0,), "w_char": (0.5, 1.0), "w_neighbour": (0.0,), "w_anchor": (0.0, 1.0), "csls": (False,)}
    cfg, results = tune_config(ap, train[:600], EmbedConfig(**NO_MINILM), grid=grid)
    assert len(results) == 4
    best = max(results, key=lambda r: (r["hits@1"], r["mrr"]))
    assert (cfg.w_char, cfg.w_anchor, cfg.csls) == (best["w_char"], best["w_anchor"], False)
    assert best["hits@1"] > 0.7


def test_name_embeddings_are_cached(tmp_path: Path):
    names = ["Paris", "Paris", "Berlin"]
    v = name_embeddings(names, tmp_path)
    assert v.shape == (3, 384) and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-4)
    assert np.allclose(v[0], v[1], atol=1e-5)
    files = list(tmp_path.glob("minilm-*.npy"))
    assert len(files) == 1
    assert np.array_equal(name_embeddings(names, tmp_path), v)
