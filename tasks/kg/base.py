"""The KG access interface shared by every backend (DuckDB store, SPARQL endpoints).

Inputs: entity/property ids (``"Q42"``, ``"P31"``) and label texts. Outputs: ``Fact`` and ``Relation`` records.
Every method is batched over a list of entities so an agent step issues one call for all its items; results
come back keyed by (or aligned with) the inputs, in a backend-independent order (``fact_sort_key``), so the
DuckDB store and a SPARQL endpoint over the same KB return equal lists.

Which claims a backend sees (``sql/kg/kg_claims.sql`` over ``sql/kg/kg_preferred.sql``, both made by
``tasks.kg.truthy``, also used by the N-Triples export): Wikidata's
"truthy" rule (best rank per subject and property: preferred claims hide normal ones, deprecated claims are
dropped), claims whose subject, property and item object are well-formed ids, and no ``<somevalue>`` /
``<novalue>`` placeholders.

Example payload (``outgoing(["Q1000"])``)::

    {"Q1000": [Fact(subject="Q1000", property="P17", property_label="country", object_qid="Q1000",
                    object_value=None, object_label="Gabon", datatype="wikibase-item", subject_label="Gabon"),
               ...]}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol, runtime_checkable

ID_RE = re.compile(r"^[QP][1-9][0-9]*\Z")  # \Z, not $: "Q1\n" must not pass
Direction = Literal["out", "in"]
DIRECTIONS: tuple[str, ...] = ("out", "in")


class KGError(RuntimeError):
    """A KG lookup failed (endpoint down, bad answer, invalid id); the message names the cause."""


class KGTimeout(KGError):
    """A KG endpoint did not answer within the timeout (after the configured retries)."""


@dataclass(frozen=True, order=True)
class Fact:
    """One (truthy) claim, with labels resolved.

    Attributes:
        subject: Subject id (``Q..``; ``P..`` for statements about properties).
        property: Property id (``P..``).
        property_label: English label of the property, or None.
        object_qid: Object id for item-valued claims, else None.
        object_value: Literal value as text (dates ISO ``YYYY-MM-DD`` / ``YYYY``, quantities decimal), else None.
        object_label: English label of ``object_qid``, or None.
        datatype: Wikidata datatype (``wikibase-item``, ``time``, ``quantity``, ``string``, ...).
        subject_label: English label of the subject (the neighbour, for incoming facts), or None.
    """

    subject: str
    property: str
    property_label: str | None
    object_qid: str | None
    object_value: str | None
    object_label: str | None
    datatype: str | None
    subject_label: str | None = None


class Relation(NamedTuple):
    """A property that links an entity to others, with the number of claims in that direction.

    A named tuple: ``(pid, label, direction, count)`` unpacks like a plain tuple.

    Attributes:
        pid: Property id.
        label: English label of the property, or None.
        direction: ``"out"`` (entity is the subject) or ``"in"`` (entity is the object).
        count: Number of truthy claims.
    """

    pid: str
    label: str | None
    direction: str
    count: int


@runtime_checkable
class KGClient(Protocol):
    """Batched read access to a knowledge graph (DuckDB store or SPARQL endpoint)."""

    def labels(self, qids: Sequence[str]) -> dict[str, str | None]:
        """English labels of entities or properties.

        Args:
            qids: Ids (``Q..`` or ``P..``).

        Returns:
            ``{id: label or None}`` for every input id.
        """
        ...

    def search_label(self, texts: Sequence[str]) -> list[list[str]]:
        """Entities whose English label or alias equals each text (case-insensitive, exact).

        Args:
            texts: Free texts (any characters; never interpreted as query syntax).

        Returns:
            One list of QIDs per text: label matches before alias-only matches, then by numeric id.
        """
        ...

    def outgoing(self, qids: Sequence[str], limit_per_entity: int | None = None) -> dict[str, list[Fact]]:
        """Claims whose subject is each entity.

        Args:
            qids: Subject ids.
            limit_per_entity: Keep at most this many facts per entity (None: all).

        Returns:
            ``{qid: [Fact, ...]}`` for every input id, sorted by ``fact_sort_key``.
        """
        ...

    def incoming(self, qids: Sequence[str], limit_per_entity: int | None = None) -> dict[str, list[Fact]]:
        """Claims whose item object is each entity.

        Args:
            qids: Object ids.
            limit_per_entity: Keep at most this many facts per entity (None: all).

        Returns:
            ``{qid: [Fact, ...]}`` for every input id, sorted by ``fact_sort_key``.
        """
        ...

    def relations(self, qids: Sequence[str]) -> dict[str, list[Relation]]:
        """Properties around each entity (1-hop, both directions) with claim counts.

        Args:
            qids: Entity ids.

        Returns:
            ``{qid: [Relation, ...]}``: outgoing first, then incoming, each by numeric property id.
        """
        ...

    def neighbours(self, pairs: Sequence[tuple[str, str, str]]) -> list[list[Fact]]:
        """Facts that link each entity through one property in one direction.

        Args:
            pairs: ``(qid, pid, direction)`` with direction ``"out"`` or ``"in"``.

        Returns:
            One fact list per pair (in ``"in"`` direction the neighbour is ``Fact.subject``).
        """
        ...


def check_id(value: object) -> str:
    """Validate one Wikidata entity/property id.

    Args:
        value: Candidate id.

    Returns:
        The id unchanged.

    Raises:
        KGError: When it is not a string matching ``^[QP][1-9][0-9]*$``.
    """
    if not isinstance(value, str) or not ID_RE.match(value):
        raise KGError(f"invalid Wikidata id {value!r}: expected Q<digits> or P<digits>")
    return value


def check_ids(values: Iterable[object], prefix: str | None = None) -> list[str]:
    """Validate ids (optionally only ``Q`` or only ``P``), keeping order and dropping duplicates."""
    out: list[str] = []
    seen: set[str] = set()
    for v in values:
        check_id(v)
        if prefix and not v.startswith(prefix):
            raise KGError(f"invalid id {v!r}: expected a {prefix}-id")
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def check_limit(limit: int | None) -> int | None:
    """Validate a per-entity limit (None or a positive int)."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise KGError(f"invalid limit {limit!r}: expected a positive integer or None")
    return limit


def check_pairs(pairs: Iterable[Sequence[str]]) -> list[tuple[str, str, str]]:
    """Validate ``(qid, pid, direction)`` triples for ``neighbours``."""
    out = []
    for p in pairs:
        if len(p) != 3:
            raise KGError(f"invalid neighbour request {p!r}: expected (qid, pid, direction)")
        qid, pid, direction = p
        check_id(qid)
        check_id(pid)
        if not pid.startswith("P"):
            raise KGError(f"invalid property {pid!r} in neighbour request")
        if direction not in DIRECTIONS:
            raise KGError(f"invalid direction {direction!r}: expected 'out' or 'in'")
        out.append((qid, pid, direction))
    return out


def id_number(value: str | None) -> int:
    """Numeric part of an id (``"Q42"`` -> 42) for natural ordering; -1 for None."""
    return int(value[1:]) if value else -1


def fact_sort_key(f: Fact) -> tuple:
    """Backend-independent fact order: subject, property, item objects by id, then literal values."""
    return (id_number(f.subject), id_number(f.property), f.object_qid is None, id_number(f.object_qid),
            f.object_value or "")


def relation_sort_key(r: Relation) -> tuple:
    """Outgoing before incoming, then numeric property id."""
    return (r.direction != "out", id_number(r.pid))


def finish_facts(qids: Sequence[str], facts: Iterable[Fact], key: str, limit: int | None) -> dict[str, list[Fact]]:
    """Group facts by ``key`` (``subject`` or ``object_qid``), sort each group and apply the per-entity limit."""
    out: dict[str, list[Fact]] = {q: [] for q in qids}
    for f in facts:
        bucket = out.get(getattr(f, key))
        if bucket is not None:
            bucket.append(f)
    for fs in out.values():
        fs.sort(key=fact_sort_key)
        if limit is not None:
            del fs[limit:]
    return out


def name_key(text: str) -> str:
    """Case-folded form used for exact label/alias matching."""
    return text.lower()
