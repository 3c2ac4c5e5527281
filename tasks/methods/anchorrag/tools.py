"""Tools of the open-world KGQA methods and the indexes they read.

Paper: Xu et al. (../shared/papers/anchorrag-open-world-kgqa.md). ``open_world_tools``: the KG tools
``kg_relations`` and ``kg_neighbours`` (``tasks.methods.kg_tools``) plus the method's entity search:
``dense_entity_search_tool`` (dense index of entity names and descriptions, the predictor's candidates, §3.3) and
``relation_similarity_tool`` (SBERT relation/question similarity, Eq. 1) for ``anchorrag``, BM25 label search for
``tog`` (§4.3). ``_index_paths``: the indexes a run reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from typing_extensions import TypedDict

from storage import layout
from tasks.methods.anchorrag.settings import OpenWorldKgSettings
from tasks.methods.base import MethodContext
from tasks.methods.kg_tools import kg_tools, open_kg
from tasks.methods.runtime import Tool
from tasks.search.kb_indexes import DenseEntityHit, SearchPayload, dense_entity_hits, dense_entity_index, search_tool
from tasks.search.passages import encode


def open_world_tools(s: OpenWorldKgSettings, ctx: MethodContext, dense: bool) -> dict[str, Tool]:
    """KG tools (``kg_relations``, ``kg_neighbours``) plus the entity search the method anchors with.

    ``dense``: ``entity_dense_search`` (dense index of names+descriptions) and ``relation_similarity`` (SBERT
    Eq. 1) for ``anchorrag``; otherwise BM25 ``entity_search`` for ``tog``.
    """
    if not ctx.kb_version:
        raise ValueError("anchorrag/tog need a KB version (build one with `linkedqa kb build --sample`)")
    kg = open_kg(s.kg, ctx.kb_version, ctx.root, s.endpoint, s.endpoint_timeout_s, s.endpoint_retries)
    tools = {k: v for k, v in kg_tools(kg).items() if k in ("kg_relations", "kg_neighbours")}
    if dense:
        tools["entity_dense_search"] = dense_entity_search_tool(ctx.kb_version, ctx.root)
        tools["relation_similarity"] = relation_similarity_tool()
    else:

        tools["entity_search"] = search_tool(ctx.kb_version, ctx.root, "wikidata")
    return tools


def dense_entity_search_tool(kb_version: str, root: Path) -> Tool:
    """Batched dense entity search: ``{"queries": [...], "k": K}`` -> per query ``[{"qid", "label", ...}]``.

    Every query of every payload of a step is encoded and searched in one call; hits carry ``qid``, ``label``,
    ``description`` and ``score`` (cosine).
    """
    dense_entity_index(kb_version, root)  # built (or opened) when the tools are made, not in the first step

    def tool(payloads: list[SearchPayload]) -> list[list[list[DenseEntityHit]]]:
        flat = [str(x) for pl in payloads for x in pl["queries"]]
        kmax = max((int(pl.get("k", 10)) for pl in payloads), default=10)
        hits = dense_entity_hits(kb_version, root, flat, kmax) if flat else []
        out, pos = [], 0
        for pl in payloads:
            n, k = len(pl["queries"]), int(pl.get("k", 10))
            out.append([[{**d, "score": round(d["score"], 4)} for d in per[:k]] for per in hits[pos : pos + n]])
            pos += n
        return out

    return tool


class RelationSimilarityPayload(TypedDict):
    """The ``relation_similarity`` payload: the question, and the relation labels of each candidate entity."""

    query: str
    texts: dict[str, list[str]]


#: The ``relation_similarity`` result of one payload: entity QID -> s(r, q) of each of its labels, in order.
RelationSimilarities = dict[str, list[float]]


def relation_similarity_tool() -> Tool:
    """Batched tool for Eq. 1: ``{"query": q, "texts": {qid: [relation label, ...]}}`` -> ``{qid: [s(r, q)]}``.

    All texts of all payloads are encoded in one SBERT call; relation-label vectors are cached for the process
    (Wikidata has ~12k properties, so the cache stays small).
    """
    cache: dict[str, Any] = {}

    def tool(payloads: list[RelationSimilarityPayload]) -> list[RelationSimilarities]:
        labels = {t for pl in payloads for ts in pl["texts"].values() for t in ts if t not in cache}
        queries = [pl["query"] for pl in payloads]
        new = sorted(labels)
        vecs = encode(new + queries) if (new or queries) else np.zeros((0, 0))
        for t, v in zip(new, vecs[: len(new)], strict=True):
            cache[t] = v
        out = []
        for pl, qv in zip(payloads, vecs[len(new):], strict=True):
            out.append({qid: [round(float(np.dot(cache[t], qv)), 6) for t in ts] for qid, ts in pl["texts"].items()})
        return out

    return tool


def _index_paths(s: OpenWorldKgSettings, ctx: MethodContext, dense: bool) -> list[Path]:
    if not ctx.kb_version:
        return []
    kinds = (["kg-duckdb"] if s.kg == "duckdb" else []) + ["entity-dense" if dense else "entity-bm25"]
    return [layout.index_kind_dir(ctx.kb_version, k, ctx.root) for k in kinds]
