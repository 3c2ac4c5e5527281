"""The batched KG tools of the KGQA agents, over any ``KGClient`` (DuckDB store or SPARQL endpoint).

Each tool takes the payloads of every item of one agent step and makes one batched KG call for all of them
(``tasks.methods.runtime``). A failing KG (endpoint down or slow, ``KGError``/``KGTimeout``) never fails the run:
every payload of that call gets ``{"error": "..."}``, which the agent turns into that item's error. Invalid
ids in one payload fail only that payload.

Tools and payloads (results are JSON-able dicts, stored in trajectories):

* ``kg_link``: ``{"texts": [...]}`` -> ``{"candidates": [[{"qid", "label", "types"}, ...] per text]}``: entities
  whose English label or alias equals the text (case-insensitive), label matches first, at most
  ``max_candidates``, Wikimedia disambiguation pages dropped, ``types`` = labels of their ``instance of``.
* ``kg_facts``: ``{"qids": [...]}`` -> ``{"facts": {qid: [fact]}, "labels": {qid: label}}`` (outgoing claims).
* ``kg_relations``: ``{"qids": [...]}`` -> ``{"relations": {qid: [[pid, label, direction, count]]}}``.
* ``kg_neighbours``: ``{"pairs": [[qid, pid, "out"|"in"], ...]}`` -> ``{"facts": [[fact] per pair]}``.

A fact is ``{"s", "sl", "p", "pl", "o", "ol", "ov", "dt"}`` (subject, its label, property, its label, object
QID, its label, literal value, datatype). The payloads and results are declared below as typed dicts
(:class:`FactRecord`, :class:`LinkResult`, :class:`FactsResult`, ...), the contract an agent reads them by.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

from tasks.kg.base import Fact, KGClient, KGError, check_ids, check_pairs
from tasks.kg.duckdb_store import DuckDBKG
from tasks.kg.sparql import SparqlKG

DISAMBIGUATION_PAGE = "Q4167410"
INSTANCE_OF = "P31"
Tool = Callable[[list[Any]], list[Any]]


def open_kg(kind: str, kb_version: str | None, root: Path, endpoint: str | None = None, timeout_s: float = 10.0,
            retries: int = 2) -> KGClient:
    """The KG client a run asked for.

    Args:
        kind: ``"duckdb"`` (the KB version's triple store, built on first use) or ``"sparql"``.
        kb_version: KB version (``duckdb``).
        root: ``LINKEDQA_HOME``.
        endpoint: SPARQL query URL (``sparql``).
        timeout_s: Per-request timeout (``sparql``).
        retries: Extra attempts after a failed request (``sparql``).

    Raises:
        ValueError: Unknown kind, or a missing KB version / endpoint.
    """
    if kind == "duckdb":
        if not kb_version:
            raise ValueError("kg=duckdb needs a KB version (build one with `linkedqa kb build --sample`)")

        return DuckDBKG(kb_version, root=root)
    if kind == "sparql":
        if not endpoint:
            raise ValueError("kg=sparql needs --set endpoint=URL (a SPARQL query endpoint)")

        return SparqlKG(endpoint, timeout_s=timeout_s, retries=retries)
    raise ValueError(f"unknown kg backend {kind!r}; use 'duckdb' or 'sparql'")


class FactRecord(TypedDict):
    """A fact as the tools return it (and trajectories store it)."""

    s: str
    sl: str | None
    p: str
    pl: str | None
    o: str | None
    ol: str | None
    ov: str | None
    dt: str | None


class ToolError(TypedDict):
    """What every payload of a failing KG call, or an invalid payload, gets instead of its result."""

    error: str


class LinkPayload(TypedDict):
    """``kg_link``'s payload."""

    texts: list[str]


class LinkCandidate(TypedDict):
    """An entity named by a ``kg_link`` text."""

    qid: str
    label: str | None
    types: list[str]


class LinkResult(TypedDict):
    """``kg_link``'s result: candidates per text."""

    candidates: list[list[LinkCandidate]]


class EntitiesPayload(TypedDict):
    """``kg_facts``'s and ``kg_relations``' payload."""

    qids: list[str]


class FactsResult(TypedDict):
    """``kg_facts``' result: each entity's outgoing facts and label."""

    facts: dict[str, list[FactRecord]]
    labels: dict[str, str | None]


class RelationsResult(TypedDict):
    """``kg_relations``' result: ``[pid, label, direction, count]`` per relation of each entity."""

    relations: dict[str, list[list[Any]]]
    labels: dict[str, str | None]


class NeighboursPayload(TypedDict):
    """``kg_neighbours``' payload: ``[qid, pid, "out"|"in"]`` pairs."""

    pairs: list[list[str]]


class NeighboursResult(TypedDict):
    """``kg_neighbours``' result: the facts of each pair."""

    facts: list[list[FactRecord]]


def fact_dict(f: Fact) -> FactRecord:
    """A ``Fact`` as the compact dict the agents and trajectories use."""
    return {"s": f.subject, "sl": f.subject_label, "p": f.property, "pl": f.property_label, "o": f.object_qid,
            "ol": f.object_label, "ov": f.object_value, "dt": f.datatype}


def _error(exc: Exception) -> ToolError:
    return {"error": f"{type(exc).__name__}: {exc}"}


def _valid(payloads: list[dict], key: str, check: Callable[[Any], Any]) -> tuple[list[int], list[Any]]:
    """Indexes of payloads whose ``key`` passes ``check``; the others get an error result."""
    ok: list[int] = []
    errs: list[Any] = [None] * len(payloads)
    for i, p in enumerate(payloads):
        try:
            check(p.get(key) if isinstance(p, dict) else None)
            ok.append(i)
        except (KGError, TypeError, ValueError) as exc:
            errs[i] = _error(exc)
    return ok, errs


def kg_tools(kg: KGClient, max_candidates: int = 8, max_facts: int = 2000) -> dict[str, Tool]:
    """The four batched KG tools over one client (see the module docstring).

    Args:
        kg: The KG client.
        max_candidates: Entities kept per ``kg_link`` text.
        max_facts: Outgoing facts fetched per entity (hubs such as countries have thousands).
    """

    def link(payloads: list[LinkPayload]) -> list[LinkResult | ToolError]:
        ok, out = _valid(payloads, "texts", lambda t: [str(x) for x in t])
        texts = [str(t) for i in ok for t in payloads[i]["texts"]]
        try:
            hits = kg.search_label(texts) if texts else []
            qids = sorted({q for h in hits for q in h[: max_candidates + 4]}, key=lambda q: int(q[1:]))
            labels = kg.labels(qids) if qids else {}
            types_facts = kg.neighbours([(q, INSTANCE_OF, "out") for q in qids]) if qids else []
        except KGError as exc:
            for i in ok:
                out[i] = _error(exc)
            return out
        types = {q: [f.object_label or f.object_qid for f in fs] for q, fs in zip(qids, types_facts, strict=True)}
        pages = {q for q, fs in zip(qids, types_facts, strict=True)
                 if any(f.object_qid == DISAMBIGUATION_PAGE for f in fs)}
        pos = 0
        for i in ok:
            per_text = []
            for _ in payloads[i]["texts"]:
                cands = [{"qid": q, "label": labels.get(q), "types": types.get(q, [])[:4]}
                         for q in hits[pos][: max_candidates + 4] if q not in pages]
                per_text.append(cands[:max_candidates])
                pos += 1
            out[i] = {"candidates": per_text}
        return out

    def per_entity(payloads: list[dict], key: str, fetch: Callable[[list[str]], dict], convert: Callable) -> list:
        """One KG call (plus one label lookup) for every QID of every payload; per payload ``{key, labels}``."""
        ok, out = _valid(payloads, "qids", lambda q: check_ids(q, "Q"))
        qids = list(dict.fromkeys(q for i in ok for q in payloads[i]["qids"]))
        try:
            got = fetch(qids) if qids else {}
            labels = kg.labels(qids) if qids else {}
        except KGError as exc:
            for i in ok:
                out[i] = _error(exc)
            return out
        for i in ok:
            qs = payloads[i]["qids"]
            out[i] = {key: {q: [convert(x) for x in got.get(q, [])] for q in qs},
                      "labels": {q: labels.get(q) for q in qs}}
        return out

    def facts(payloads: list[EntitiesPayload]) -> list[FactsResult | ToolError]:
        return per_entity(payloads, "facts", lambda qs: kg.outgoing(qs, limit_per_entity=max_facts), fact_dict)

    def relations(payloads: list[EntitiesPayload]) -> list[RelationsResult | ToolError]:
        return per_entity(payloads, "relations", kg.relations, list)

    def neighbours(payloads: list[NeighboursPayload]) -> list[NeighboursResult | ToolError]:
        ok, out = _valid(payloads, "pairs", lambda p: check_pairs([tuple(x) for x in p]))
        pairs = [tuple(x) for i in ok for x in payloads[i]["pairs"]]
        try:
            got = kg.neighbours(pairs) if pairs else []
        except KGError as exc:
            for i in ok:
                out[i] = _error(exc)
            return out
        pos = 0
        for i in ok:
            n = len(payloads[i]["pairs"])
            out[i] = {"facts": [[fact_dict(f) for f in fs] for fs in got[pos : pos + n]]}
            pos += n
        return out

    return {"kg_link": link, "kg_facts": facts, "kg_relations": relations, "kg_neighbours": neighbours}

