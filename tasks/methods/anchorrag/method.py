"""The open-world KGQA methods ``anchorrag``, ``tog`` and ``cot``: their wiring (settings, tools, step machine).

Paper: Xu et al. (../shared/papers/anchorrag-open-world-kgqa.md): ``anchorrag`` §3.3-3.5, the ``tog`` and
``cot`` baselines §4.3. The family: ``settings`` (``--set`` options), ``agents`` (prompts and the step
machines), ``tools`` (KG tools, entity search, index paths), ``parsing``, ``graph`` and ``prompts/``. The Method
classes stay in this module: a run id hashes the files of the ``prompts/`` folder beside the module that defines
the class (``Method.prompt_files_for``).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from tasks.methods.anchorrag.agents import Prompts, _final, _text, anchorrag_agent, tog_agent
from tasks.methods.anchorrag.settings import AnchorRagSettings, CotSettings, TogSettings
from tasks.methods.anchorrag.tools import _index_paths, open_world_tools
from tasks.methods.base import Method, MethodContext
from tasks.methods.runtime import AgentFn, ItemContext, Tool

OPEN_TASKS = ("kgqa", "kgqa-open")


class _OpenWorldKgMethod(Method):
    """Shared wiring of ``anchorrag`` and ``tog``: KG tools plus dense (``dense``) or BM25 entity search."""

    dense: ClassVar[bool] = True
    metric_family = "tog"
    tasks = OPEN_TASKS

    def build_tools(self, ctx: MethodContext) -> dict[str, Tool]:
        """KG tools and the method's entity search (dense index + SBERT relation similarity, or BM25)."""
        return open_world_tools(self.settings, ctx, dense=self.dense)

    def index_paths(self, ctx: MethodContext) -> list[Path]:
        """The DuckDB KG index and the entity index the method searches."""
        return _index_paths(self.settings, ctx, dense=self.dense)


class AnchorRagMethod(_OpenWorldKgMethod):
    """``linkedqa run anchorrag``: predictor -> m parallel retrievers -> supervisor (open world, no given anchor)."""

    name = "anchorrag"
    description = ("open-world KGQA (AnchorRAG): keywords -> dense candidates -> relation-aware grounding -> "
                   "m parallel retriever agents -> supervisor; CoT fallback")
    Settings = AnchorRagSettings
    dense = True

    def agent(self, ctx: MethodContext) -> AgentFn:
        """The AnchorRAG step machine."""
        return anchorrag_agent(self.settings)


class TogMethod(_OpenWorldKgMethod):
    """``linkedqa run tog``: LLM-chosen anchors from label search, then Think-on-Graph beam search."""

    name = "tog"
    description = "Think-on-Graph baseline: LLM picks anchors from BM25 label search -> beam search width 3, depth 3"
    Settings = TogSettings
    dense = False

    def agent(self, ctx: MethodContext) -> AgentFn:
        """The ToG step machine."""
        return tog_agent(self.settings)


class CotMethod(Method):
    """``linkedqa run cot``: ToG's CoT (``style=cot``) or IO (``style=io``) prompt, no retrieval."""

    name = "cot"
    description = "CoT / IO prompting baseline of ToG and AnchorRAG (answer in {braces}); no KG"
    Settings = CotSettings
    needs_kb = False
    metric_family = "tog"
    tasks = OPEN_TASKS

    def index_paths(self, ctx: MethodContext) -> list[Path]:
        """No index."""
        return []

    def agent(self, ctx: MethodContext) -> AgentFn:
        """One call per question."""
        p = Prompts(self.settings)
        style = self.settings.style

        def agent(item: dict, ictx: ItemContext):
            out = _text((yield p.cot(item["question"], style)), style)
            return _final(out, "cot", [], ictx, 0)

        return agent
