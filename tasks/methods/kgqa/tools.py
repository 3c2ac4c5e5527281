"""Tools of the KGQA methods and the indexes they read.

Paper: Cuellar, Allard and Payano, ../shared/papers/qald10-react-wikidata.md. ``kgqa_tools``: the KG tools
``kg_link``, ``kg_facts``, ``kg_relations``, ``kg_neighbours`` over ``kg=duckdb|sparql`` (``tasks.methods.kg_tools``),
``entity_search`` (BM25 over the KB's labels, for answer linking, §3.7) and ``kb_gold`` (``kb_gold=true``);
``closed_book_kg_tools``: only what answer linking needs, for the closed-book baseline (§4.2); ``_can_link``: whether
there is a KG to link answers against; ``kgqa_index_paths``: what a run keeps on disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storage import layout
from tasks.methods.base import MethodContext
from tasks.methods.kg_tools import kg_tools, open_kg
from tasks.methods.kgqa.kb_gold import kb_gold_tool
from tasks.methods.kgqa.settings import KgqaSettings, _opt
from tasks.methods.runtime import Tool
from tasks.search.kb_indexes import search_tool


def kgqa_tools(settings: Any, ctx: MethodContext) -> dict[str, Tool]:
    """KG tools over the configured backend plus ``entity_search`` (BM25) for answer linking."""
    d = KgqaSettings.model_fields
    kg = open_kg(_opt(settings, "kg", "duckdb"), ctx.kb_version, ctx.root, _opt(settings, "endpoint", None),
                 float(_opt(settings, "endpoint_timeout_s", d["endpoint_timeout_s"].default)),
                 int(_opt(settings, "endpoint_retries", d["endpoint_retries"].default)))
    tools = kg_tools(kg, int(_opt(settings, "max_candidates", d["max_candidates"].default)),
                     int(_opt(settings, "max_facts", d["max_facts"].default)))
    if int(_opt(settings, "link_search_k", d["link_search_k"].default)) > 0 and ctx.kb_version:

        tools["entity_search"] = search_tool(ctx.kb_version, ctx.root, "wikidata")
    if _opt(settings, "kb_gold", False) and ctx.kb_version:

        tools["kb_gold"] = kb_gold_tool(ctx.kb_version, ctx.root, float(_opt(settings, "kb_gold_timeout_s", 20.0)))
    return tools


def _can_link(settings: Any, ctx: MethodContext) -> bool:
    """Answer linking needs a KG: the run's KB version, or a SPARQL endpoint."""
    return bool(ctx.kb_version) or (_opt(settings, "kg", "duckdb") == "sparql" and bool(_opt(settings, "endpoint", "")))


def closed_book_kg_tools(settings: Any, ctx: MethodContext) -> dict[str, Tool]:
    """Tools of the KGQA closed-book baseline: only what answer linking needs (``kg_link``, ``entity_search``).

    Args:
        settings: ``closed-book``'s settings (``max_tokens`` (0: this module's default), ``temperature``,
            ``cot``; the KGQA options ``kg``, ``endpoint``, ``link_search_k``... are read when present).
        ctx: The method context. Without a KB version (and no SPARQL endpoint) there is nothing to link
            against: no tools, and the agent keeps text answers.
    """
    return kgqa_tools(settings, ctx) if _can_link(settings, ctx) else {}


def kgqa_index_paths(settings: KgqaSettings, ctx: MethodContext) -> list[Path]:
    """What the KGQA methods keep on disk for a run: the DuckDB KG index, the BM25 entity index, the gold store."""
    if not ctx.kb_version:
        return []
    wanted = {"kg-duckdb": settings.kg == "duckdb", "entity-bm25": settings.link_search_k > 0,
              "kg-oxigraph": settings.kb_gold}
    kinds = [kind for kind, used in wanted.items() if used]
    return [layout.index_kind_dir(ctx.kb_version, k, ctx.root) for k in kinds]
