"""``search-recall``: gold mention -> entity search -> is the gold entity in the top k? (no LLM).

Measures the candidate generator the agents depend on. Each gold mention ``{text, qid}`` is searched (all
mentions of all questions in ONE batched call); the prediction stores, per mention, the ranked candidate
QIDs as ``answers`` entries ``"<mention index>:<QID>"`` in rank order, so ``recall@k`` can be recomputed from
stored predictions. ``scores['gold_in_kb']`` records whether every gold QID is findable by name in the KB
(it has a label, an alias or a Wikipedia title there): the coverage of the KB, not of the search.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from tasks.methods.base import Method, MethodContext, MethodSettings, source_index_paths
from tasks.methods.records import AgentResult
from tasks.methods.runtime import ItemContext, ToolCall
from tasks.search.kb_indexes import named_qids, search_tool


class SearchRecallSettings(MethodSettings):
    """``--set`` options of ``search-recall``."""

    source: Literal["wikidata", "wikipedia"] = "wikidata"
    """Index searched: ``wikidata`` (BM25 over labels and aliases) or ``wikipedia`` (BM25 over article titles)."""
    k: int = 50
    """Candidates kept per mention (``recall@1/10/50`` read the first 1, 10 and 50 of them)."""


def search_recall_agent(settings: SearchRecallSettings, kb_qids: set[str]):
    """Step machine: one batched search for the gold mentions of the question."""

    def agent(item: dict, ctx: ItemContext):
        mentions = [m for m in (item.get("gold_mentions") or []) if m.get("text")]
        gold = [m["qid"] for m in mentions if m.get("qid")]
        covered = float(bool(gold) and all(q in kb_qids for q in gold))
        if not mentions:
            ctx.log({"note": "no gold mentions"})
            return AgentResult(scores={"gold_in_kb": covered})
        results = yield ToolCall("entity_search", {"queries": [m["text"] for m in mentions], "k": settings.k})
        answers = [f"{j}:{c['qid']}" for j, cands in enumerate(results) for c in cands if c.get("qid")]
        top1 = [cands[0]["qid"] for cands in results if cands and cands[0].get("qid")]
        return AgentResult(predicted_entities=top1, answers=answers, scores={"gold_in_kb": covered})

    return agent


class SearchRecallMethod(Method):
    """``linkedqa run search-recall``."""

    prompt_files = ()  # no prompts
    name = "search-recall"
    description = "gold mention -> BM25 entity search -> recall@1/10/50 (all questions, and KB-covered ones)"
    Settings = SearchRecallSettings
    needs_llm = False
    metric_family = "search"
    tasks = ("el", "kgqa", "qa")

    def build_tools(self, ctx: MethodContext) -> dict[str, Any]:
        """Entity search tool and the KB's QID set (for coverage)."""
        # covered = the gold entity is findable by name in this KB (label, alias or Wikipedia title)
        ctx.extra["kb_qids"] = named_qids(ctx.kb_version, ctx.root)
        return {"entity_search": search_tool(ctx.kb_version, ctx.root, self.settings.source)}

    def index_paths(self, ctx: MethodContext) -> list[Path]:
        """The entity-search index of the ``source`` setting (built before the shards by the run flow)."""
        return source_index_paths(self.settings.source, ctx)

    def agent(self, ctx: MethodContext):
        """The step machine bound to the KB's QID set (filled by ``build_tools``)."""
        return search_recall_agent(self.settings, ctx.extra.get("kb_qids", set()))
