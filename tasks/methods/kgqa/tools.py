"""Tools of the KGQA methods and the indexes they read.

Paper: Cuellar, Allard and Payano, ../shared/papers/qald10-react-wikidata.md. ``kgqa_tools``: the KG tools
``kg_link``, ``kg_facts``, ``kg_relations``, ``kg_neighbours`` over ``kg=duckdb|sparql`` (``tasks.methods.kg_tools``),
``entity_search`` (BM25 over the KB's labels, for answer linking, §3.7) and ``kb_gold`` (``kb_gold=true``);
``closed_book_kg_tools``: only what answer linking needs, for the closed-book baseline (§4.2); ``_can_link``: whether
there is a KG to link answers against; ``kgqa_index_paths``: what a run keeps on disk.
"""

from __future__ import annotations

from pathlib import Path

from storage import layout
from tasks.methods.base import MethodContext
from tasks.methods.kg_tools import kg_tools, open_kg
from tasks.methods.kgqa.kb_gold import kb_gold_tool
from tasks.methods.kgqa.settings import KgAccessSettings, KgqaSettings
from tasks.methods.runtime import Tool
from tasks.search.kb_indexes import search_tool


def kgqa_tools(settings: KgqaSettings, ctx: MethodContext) -> dict[str, Tool]:
    """KG tools over the configured backend plus ``entity_search`` (BM25) for answer linking."""
    kg = open_kg(settings.kg, ctx.kb_version, ctx.root, settings.endpoint, settings.endpoint_timeout_s,
                 settings.endpoint_retries)
    tools = kg_tools(kg, settings.max_candidates, settings.max_facts)
    if settings.link_search_k > 0 and ctx.kb_version:
        tools["entity_search"] = search_tool(ctx.kb_version, ctx.root, "wikidata")
    if settings.kb_gold and ctx.kb_version:
        tools["kb_gold"] = kb_gold_tool(ctx.kb_version, ctx.root, settings.kb_gold_timeout_s)
    return tools


def _can_link(settings: KgAccessSettings, ctx: MethodContext) -> bool:
    """Answer linking needs a KG: the run's KB version, or a SPARQL endpoint."""
    return bool(ctx.kb_version) or (settings.kg == "sparql" and bool(settings.endpoint))


def closed_book_kg_tools(settings: KgqaSettings, ctx: MethodContext) -> dict[str, Tool]:
    """Tools of the KGQA closed-book baseline: only what answer linking needs (``kg_link``, ``entity_search``).

    Args:
        settings: ``closed-book``'s options as KGQA settings (``ClosedBookSettings.kgqa``).
        ctx: The method context. Without a KB version (and no SPARQL endpoint) there is nothing to link
            against: no tools, and the agent keeps text answers.
    """
    return kgqa_tools(settings, ctx) if _can_link(settings, ctx) else {}


def kgqa_index_paths(settings: KgAccessSettings, ctx: MethodContext) -> list[Path]:
    """What the KGQA methods keep on disk for a run: the DuckDB KG index, the BM25 entity index, the gold store."""
    if not ctx.kb_version:
        return []
    wanted = {"kg-duckdb": settings.kg == "duckdb", "entity-bm25": settings.link_search_k > 0,
              "kg-oxigraph": settings.kb_gold}
    kinds = [kind for kind, used in wanted.items() if used]
    return [layout.index_kind_dir(ctx.kb_version, k, ctx.root) for k in kinds]
