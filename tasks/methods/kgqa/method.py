"""The KGQA methods ``kg-1hop`` and ``react-kg``: their wiring (settings, tools, indexes, step machine).

Paper: Cuellar, Allard and Payano, ../shared/papers/qald10-react-wikidata.md (§3.4-3.5 ``kg-1hop``, §3.6
``react-kg``). The family: ``settings`` (``--set`` options), ``agents`` (prompt building and the step machines,
including the KGQA branch of ``closed-book``, §4.2), ``tools`` (KG tools, answer-linking search, index paths),
``parsing``, ``answers``, ``kb_gold`` and ``prompts/``. The Method classes stay in this module: a run id hashes the
files of the ``prompts/`` folder beside the module that defines the class (``Method.prompt_files_for``).
"""

from __future__ import annotations

from pathlib import Path

from tasks.methods.base import Method, MethodContext
from tasks.methods.kgqa.agents import kg_one_hop_agent, react_kg_agent
from tasks.methods.kgqa.settings import KgqaSettings, ReactKgSettings
from tasks.methods.kgqa.tools import kgqa_index_paths, kgqa_tools
from tasks.methods.runtime import AgentFn, Tool


class _KgqaMethod(Method):
    """Shared wiring of ``kg-1hop`` and ``react-kg``: KG tools, answer-linking search, their index paths."""

    metric_family = None  # qald on kgqa datasets, tog on kgqa-open ones (TASK_FAMILIES)
    tasks = ("kgqa", "kgqa-open")

    def build_tools(self, ctx: MethodContext) -> dict[str, Tool]:
        """KG tools over ``kg=duckdb|sparql`` and BM25 entity search for answer linking."""
        return kgqa_tools(self.settings, ctx)

    def index_paths(self, ctx: MethodContext) -> list[Path]:
        """Indexes this method reads (for ``index_disk_mb``)."""
        return kgqa_index_paths(self.settings, ctx)


class KgOneHopMethod(_KgqaMethod):
    """``linkedqa run kg-1hop``: main entity -> all its 1-hop properties -> answer -> answer linking."""

    name = "kg-1hop"
    description = "KGQA: LLM names the main entity -> exact KG match -> all 1-hop properties in context -> answer"
    Settings = KgqaSettings

    def agent(self, ctx: MethodContext) -> AgentFn:
        """The kg-1hop step machine."""
        return kg_one_hop_agent(self.settings)


class ReactKgMethod(_KgqaMethod):
    """``linkedqa run react-kg``: ReAct traversal of the KG from the main entity (max ``max_depth`` hops)."""

    name = "react-kg"
    description = "KGQA: ReAct over the KG (list properties -> LLM picks one -> answer now or one hop deeper)"
    Settings = ReactKgSettings

    def agent(self, ctx: MethodContext) -> AgentFn:
        """The react-kg step machine."""
        return react_kg_agent(self.settings)
