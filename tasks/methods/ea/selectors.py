"""EA-Agent triple selectors (paper §4.3): Attribute Triple Selector (Eq. 1) and Relation Triple Selector (Eq. 2).

Inputs: an entity's triples and the statistics they are scored against. Outputs: :class:`Selection` — at most
``k`` triples (paper Appendix E: 5), their scores, and a note.

* Attribute selector: ``H(a) = -sum_v p(v) log p(v)`` over the values of attribute ``a`` among the candidate
  entities (natural log); lower entropy first, predefined important attributes always first. When the entity
  has no attribute triples (the case for every entity of this DBP15K copy), the selection is empty and its note
  says ``no attributes`` — nothing is invented.
* Relation selector: ``I(r) = log(N / (freq(r) + 1))`` with ``freq(r)`` the number of triples of ``r`` in the
  entity's graph and ``N`` the graph's number of relation triples; higher first (rare relations are more
  discriminative). Ties keep the entity's triple order (outgoing triples first, file order).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tasks.datasets.ea_kg import KG

MAX_TRIPLES = 5
#: Attributes always kept by the attribute selector when present (names, labels, dates that identify entities).
IMPORTANT_ATTRIBUTES: tuple[str, ...] = ("name", "label", "rdfs:label", "foaf:name", "birthDate", "birthName")
NO_ATTRIBUTES = "no attributes"

Triple = tuple[str, str, str]


@dataclass(frozen=True)
class Selection:
    """Triples kept by a selector.

    Attributes:
        triples: Kept ``(subject, predicate, object)`` triples, best first.
        scores: Score of each kept triple (entropy for attributes, inverse frequency for relations).
        total: Number of triples the entity had.
        note: ``""`` or why nothing was kept (``"no attributes"``, ``"no relation triples"``).
    """

    triples: list[Triple]
    scores: list[float]
    total: int
    note: str = ""


def entropy(values: Iterable[str]) -> float:
    """Shannon entropy (natural log) of the empirical distribution of ``values`` (Eq. 1); 0 for no values."""
    counts = Counter(values)
    n = sum(counts.values())
    if n == 0:
        return 0.0
    return -sum((c / n) * math.log(c / n) for c in counts.values())


def attribute_entropies(population: Iterable[Triple]) -> dict[str, float]:
    """``H(a)`` for every attribute ``a`` of ``population`` (``(entity, attribute, value)`` triples)."""
    by_attr: dict[str, list[str]] = {}
    for _, a, v in population:
        by_attr.setdefault(a, []).append(v)
    return {a: entropy(vs) for a, vs in by_attr.items()}


def select_attribute_triples(
    triples: Sequence[Triple],
    population: Sequence[Triple],
    k: int = MAX_TRIPLES,
    important: Sequence[str] = IMPORTANT_ATTRIBUTES,
) -> Selection:
    """Attribute Triple Selector: important attributes first, then the lowest-entropy ones (Eq. 1).

    Args:
        triples: The entity's ``(entity, attribute, value)`` triples.
        population: Attribute triples of the candidate entities the entropy is computed over (the entity's
            own triples are used for attributes absent from the population).
        k: Maximum number of triples kept.
        important: Attributes always preferred, in this order.

    Returns:
        The selection; empty with note ``"no attributes"`` when the entity has no attribute triples.
    """
    if not triples:
        return Selection([], [], 0, NO_ATTRIBUTES)
    h = attribute_entropies(population)
    own = attribute_entropies(triples)
    rank_imp = {a: i for i, a in enumerate(important)}

    def key(item: tuple[int, Triple]) -> tuple:
        pos, (_, a, _) = item
        ent = h.get(a, own[a])
        return (0, rank_imp[a], ent, pos) if a in rank_imp else (1, 0, ent, pos)

    ranked = sorted(enumerate(triples), key=key)[:k]
    return Selection([t for _, t in ranked], [h.get(t[1], own[t[1]]) for _, t in ranked], len(triples))


def inverse_frequency(freq: int, n_triples: int) -> float:
    """``I(r) = log(N / (freq(r) + 1))`` (Eq. 2)."""
    if n_triples <= 0:
        raise ValueError("the graph has no relation triples")
    return math.log(n_triples / (freq + 1))


def relation_scores(kg: KG) -> dict[int, float]:
    """``I(r)`` of every relation of a graph."""
    return {r: inverse_frequency(f, kg.n_triples) for r, f in kg.rel_freq.items()}


def select_relation_triples(kg: KG, row: int, k: int = MAX_TRIPLES,
                            scores: Mapping[int, float] | None = None) -> tuple[list[tuple[int, int, int]], Selection]:
    """Relation Triple Selector for entity ``row`` of ``kg`` (Eq. 2).

    Args:
        kg: The entity's graph.
        row: Entity row.
        k: Maximum number of triples kept.
        scores: Precomputed :func:`relation_scores` (computed when omitted).

    Returns:
        The kept ``(head row, relation, tail row)`` triples and the rendered :class:`Selection`
        (``(subject name, "r<id>", object name)``).
    """
    scores = scores if scores is not None else relation_scores(kg)
    triples = kg.entity_triples(row)
    if not triples:
        return [], Selection([], [], 0, "no relation triples")
    ranked = sorted(enumerate(triples), key=lambda it: (-scores[it[1][1]], it[0]))[:k]
    kept = [t for _, t in ranked]
    rendered = [(kg.names[h], f"r{r}", kg.names[t]) for h, r, t in kept]
    return kept, Selection(rendered, [scores[r] for _, r, _ in kept], len(triples))
