"""Relation-aware entity grounding (AnchorRAG Eq. 1-2) and the graph views the retriever prompts show.

Inputs: relation rows from the ``kg_relations`` tool (``[pid, label, direction, count]``), fact dicts from
``kg_neighbours`` (``tasks.methods.kg_tools.fact_dict``) and SBERT similarities. Outputs: grounding scores, candidate
relation names, neighbour candidates and triple texts.

* **Grounding** (§3.3): ``s(r, q) = <SBERT(r), SBERT(q)>`` for every 1-hop relation ``r`` of a candidate entity
  (Eq. 1; all-MiniLM-L6-v2 vectors are L2-normalised, so the inner product is the cosine), and
  ``Score(e, q) = 1/k * sum of the top-k s(r, q)`` (Eq. 2, literally: an entity with fewer than ``k`` relations
  sums fewer terms but still divides by ``k``; an entity without relations scores 0). Candidates are ranked by
  ``Score``, ties by their dense name similarity.
* **Relations shown** (§3.4 "filter out trivial or schema-level relations ... as well as previously visited
  relations"): identifier, media and skip-listed properties are dropped with the KGQA rule
  (``tasks.methods.kg_context.keep_property``), visited (property, direction) pairs too. An incoming relation is
  named ``"<label> (reverse)"``.
* **Triples** read ``subject, relation, object`` in the KG's direction (the prompts' example format); an
  entity without an English label shows as ``UnName_Entity`` (ToG's convention), a literal as its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tasks.methods.kg_context import keep_property

UNNAMED = "UnName_Entity"
REVERSE = " (reverse)"


def grounding_score(similarities: Iterable[float], k: int) -> float:
    """Eq. 2: the sum of the ``k`` largest relation similarities divided by ``k``."""
    if k < 1:
        raise ValueError("k must be >= 1")
    top = sorted((float(s) for s in similarities), reverse=True)[:k]
    return sum(top) / k


def rank_anchors(candidates: Sequence[tuple[str, float]], relation_sims: dict[str, list[float]], k: int,
                 m: int) -> list[tuple[str, float]]:
    """The top-``m`` anchors by grounding score.

    Args:
        candidates: ``(qid, dense similarity)`` of the candidate entities (first occurrence kept).
        relation_sims: ``{qid: [s(r, q) for each 1-hop relation]}``.
        k: Relations averaged per entity (paper: 5).
        m: Anchors kept (paper: 3).

    Returns:
        ``[(qid, Score(e, q))]``, best first; ties broken by dense similarity, then input order.
    """
    seen: dict[str, tuple[float, float, int]] = {}
    for pos, (qid, dense) in enumerate(candidates):
        if qid not in seen:
            seen[qid] = (grounding_score(relation_sims.get(qid, []), k), float(dense), pos)
    ranked = sorted(seen.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[1][2]))
    return [(q, s[0]) for q, s in ranked[:m]]


@dataclass(frozen=True)
class RelationChoice:
    """One candidate relation of an entity: property, direction and the name the prompt shows."""

    pid: str
    direction: str
    name: str
    label: str


def relation_choices(rows: Iterable[Sequence], visited: set[tuple[str, str]] = frozenset(),
                     limit: int = 60) -> list[RelationChoice]:
    """Candidate relations of an entity from ``kg_relations`` rows, filtered (see the module docstring).

    Args:
        rows: ``[pid, label, direction, count]`` rows (outgoing first, then incoming).
        visited: ``(pid, direction)`` pairs the agent already followed.
        limit: At most this many, in row order (keeps the prompt inside the context window).
    """
    out: list[RelationChoice] = []
    names: set[str] = set()
    for pid, label, direction, _count in rows:
        if (pid, direction) in visited or not keep_property(pid, label):
            continue
        base = label or pid
        name = base + (REVERSE if direction == "in" else "")
        if name in names:
            continue
        names.add(name)
        out.append(RelationChoice(pid, direction, name, base))
        if len(out) >= limit:
            break
    return out


def entity_name(qid: str | None, label: str | None) -> str:
    """How an entity appears in prompts: its label, else ``UnName_Entity``."""
    return label or (UNNAMED if qid else "")


@dataclass(frozen=True)
class Neighbour:
    """An entity or literal reached from ``source`` through one relation, and the triple that says so."""

    source: str
    qid: str | None
    name: str
    triple: str


def neighbours_of(source: str, source_name: str, rel: RelationChoice, facts: Iterable[dict],
                  limit: int) -> list[Neighbour]:
    """The far ends of ``rel`` from ``source`` (de-duplicated, KG order, at most ``limit``) with triple texts."""
    out: list[Neighbour] = []
    seen: set[str] = set()
    for f in facts:
        if rel.direction == "out":
            qid, name = f.get("o"), entity_name(f.get("o"), f.get("ol")) if f.get("o") else str(f.get("ov") or "")
            triple = f"{source_name}, {rel.label}, {name}"
        else:
            qid, name = f.get("s"), entity_name(f.get("s"), f.get("sl"))
            triple = f"{name}, {rel.label}, {source_name}"
        key = qid or name
        if not name or key in seen:
            continue
        seen.add(key)
        out.append(Neighbour(source, qid, name, triple))
        if len(out) >= limit:
            break
    return out
