"""EA-Agent selectors (Eq. 1-2) and reward (Eq. 3-6) against hand-computed values on real DBP15K FR-EN."""

from __future__ import annotations

import gzip
import math
from collections import Counter
from pathlib import Path

import pytest

from tasks.datasets.ea_kg import read_pair
from tasks.methods.ea.reward import compute_reward, reflector_term
from tasks.methods.ea.selectors import (
    NO_ATTRIBUTES,
    attribute_entropies,
    entropy,
    inverse_frequency,
    select_attribute_triples,
    select_relation_triples,
)


@pytest.fixture(scope="module")
def fr_en(data_root: Path):
    return read_pair(data_root, "fr_en")


def test_inverse_frequency_matches_counts_taken_from_the_raw_file(fr_en, data_root: Path):
    # independent count straight from triples_1.gz
    with gzip.open(data_root / "dbp15k" / "fr_en" / "triples_1.gz", "rt") as fh:
        rels = Counter(int(line.split("\t")[1]) for line in fh if line.strip())
    n = sum(rels.values())
    assert n == fr_en.kg1.n_triples == 105998
    assert inverse_frequency(rels[833], n) == pytest.approx(math.log(105998 / 634))


def test_relation_selector_ranks_rare_relations_first_on_saint_joseph_de_coleraine(fr_en):
    kg = fr_en.kg1
    row = kg.index["fr:0"]
    assert kg.names[row] == "Saint-Joseph-de-Coleraine"
    kept, sel = select_relation_triples(kg, row)
    # its 12 triples use relations with frequencies r833:633, r531:731, r493:748, r228:796 (twice: out and in),
    # r110:839, r737:851, r79:884, r389:894 -> the five rarest, the outgoing r228 before the incoming one
    assert [r for _, r, _ in kept] == [833, 531, 493, 228, 228]
    assert sel.triples[0] == ("Saint-Joseph-de-Coleraine", "r833", "Les Appalaches")
    assert sel.triples[3:] == [("Saint-Joseph-de-Coleraine", "r228", "Irlande (Québec)"),
                               ("Sainte-Praxède", "r228", "Saint-Joseph-de-Coleraine")]
    assert sel.scores == pytest.approx([math.log(105998 / 634), math.log(105998 / 732), math.log(105998 / 749),
                                        math.log(105998 / 797), math.log(105998 / 797)])
    assert sel.total == 12 and len(sel.triples) == 5


def test_entropy_ranking_on_a_real_neighbourhood(fr_en):
    """Eq. 1 over the (entity, relation, neighbour) triples of 'Part II (On the Run)', computed by hand."""
    kg = fr_en.kg1
    row = kg.index["fr:5"]
    triples = [(kg.names[h], f"r{r}", kg.names[t] if h == row else kg.names[h])
               for h, r, t in kg.entity_triples(row)]
    h = attribute_entropies(triples)
    assert h["r683"] == pytest.approx(math.log(2))  # Timbaland, Jerome "J-Roc" Harmon
    assert h["r21"] == pytest.approx(math.log(3))  # Roc Nation, Universal Music Group, Roc-A-Fella Records
    assert h["r224"] == pytest.approx(math.log(4))  # Timbaland, James Fauntleroy II, J-Roc, Jay Z
    assert h["r282"] == h["r129"] == h["r74"] == h["r22"] == h["r4"] == 0.0
    sel = select_attribute_triples(triples, triples, k=7, important=())
    assert [t[1] for t in sel.triples] == ["r282", "r129", "r74", "r22", "r4", "r683", "r683"]
    assert sel.scores == pytest.approx([0, 0, 0, 0, 0, math.log(2), math.log(2)])


def test_important_attributes_are_kept_first():
    triples = [("e", "population", "1200"), ("e", "name", "Paris"), ("e", "country", "France")]
    population = [("c1", "country", "France"), ("c2", "country", "France"), ("c1", "population", "10"),
                  ("c2", "population", "20"), ("c1", "name", "A"), ("c2", "name", "B")]
    sel = select_attribute_triples(triples, population, k=2)
    assert [t[1] for t in sel.triples] == ["name", "country"]  # name is important; country H=0 < population log 2
    assert entropy(["a", "a", "b", "b"]) == pytest.approx(math.log(2))


def test_attribute_selector_reports_no_attributes_on_dbp15k(fr_en):
    # this copy of DBP15K has no attribute triples: nothing is invented
    sel = select_attribute_triples([], [])
    assert sel.triples == [] and sel.note == NO_ATTRIBUTES and sel.total == 0


@pytest.mark.parametrize(
    ("final", "initial", "reflected", "path", "expected"),
    [
        ("en:1", None, False, ["RelationTripleSelector", "EntityAlignmentTool"], 1 + math.exp(-0.4)),
        ("en:2", None, False, ["EntityAlignmentTool"], 0 + math.exp(-0.2)),
        # wrong -> corrected by the Reflector: 1 + 1 + e^{-0.2*3}
        ("en:1", "en:2", True, ["RelationTripleSelector", "EntityAlignmentTool", "Reflector"], 2 + math.exp(-0.6)),
        # right -> right: unneeded reflection, -alpha
        ("en:1", "en:1", True, ["EntityAlignmentTool", "Reflector"], 1 - 0.5 + math.exp(-0.4)),
        # right -> wrong: -1
        ("en:2", "en:1", True, ["EntityAlignmentTool", "Reflector"], 0 - 1 + math.exp(-0.4)),
        # wrong -> wrong: Eq. 5 undefined, 0 here
        ("en:3", "en:2", True, ["AttributeTripleSelector", "RelationTripleSelector", "EntityAlignmentTool",
                                "Reflector"], 0 + math.exp(-0.8)),
    ],
)
def test_reward_cases(final, initial, reflected, path, expected):
    r = compute_reward(final, "en:1", path, initial, reflected)
    assert r.total == pytest.approx(expected)
    assert r.c == int(reflected)


def test_reflector_term_alpha_and_no_prediction():
    assert reflector_term("g", "g", "g", alpha=0.3) == -0.3
    assert compute_reward(None, "g", []).total == pytest.approx(1.0)  # nothing predicted, empty path: e^0
