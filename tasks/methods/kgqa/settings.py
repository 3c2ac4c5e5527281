"""Settings of the KGQA methods: the ``--set`` options of ``kg-1hop`` and ``react-kg``.

Paper: Cuellar, Allard and Payano, ../shared/papers/qald10-react-wikidata.md (§3.4-3.6 for the steps these
options bound, §3.7 for answer linking, §4.2 for the closed-book baseline).

``KgAccessSettings`` (KG backend and answer linking) and ``KgPromptSettings`` (the prompts' options) are the two
groups of options; ``KgqaSettings`` (``kg-1hop``) has both plus sampling, ``ReactKgSettings`` (``react-kg``) adds the
traversal bounds. ``closed-book`` declares both groups too, for its KGQA branch, and hands the KGQA code a
``KgqaSettings`` of its own values (``ClosedBookSettings.kgqa``): the KGQA code reads typed fields only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from tasks.methods.base import MethodSettings


class KgAccessSettings(MethodSettings):
    """The KG and answer-linking options: what every method that reads the KG of a KGQA run declares.

    ``kg-1hop`` and ``react-kg`` have them (through :class:`KgqaSettings`), and so does ``closed-book``, which links
    its answers to QIDs on KGQA datasets (``tasks.methods.qa.method.ClosedBookSettings``).
    """

    kg: Literal["duckdb", "sparql"] = "duckdb"
    """KG backend: ``duckdb`` (the KB version's triple store) or ``sparql`` (``endpoint``)."""
    endpoint: str | None = None
    """SPARQL query URL for ``kg=sparql`` (local Oxigraph/Virtuoso, or the public WDQS)."""
    endpoint_timeout_s: float = 10.0
    """Per-request timeout of the endpoint, in seconds."""
    endpoint_retries: int = 2
    """Extra attempts after a failed request to the endpoint."""
    max_facts: int = 2000
    """Outgoing facts fetched per entity."""
    max_candidates: int = 8
    """Exact label/alias matches kept per entity name."""
    link_answers: bool = True
    """Link entity answers back to QIDs (paper §3.7)."""
    link_search_k: int = 5
    """BM25 candidates for answers without an exact label match (0: exact matches only)."""
    kb_gold: bool = False
    """Also run each question's gold SPARQL query on the local KB and store the outcome per question
    (``kb_gold_status``, ``kb_gold_n``, ``kb_gold_f1``, ``kb_gold_answer_f1`` in ``predictions.scores``)."""
    kb_gold_timeout_s: float = 20.0
    """Time bound of one gold query on the local KB, in seconds."""

    @model_validator(mode="after")
    def _check_access(self) -> KgAccessSettings:
        if self.kg == "sparql" and not self.endpoint:
            raise ValueError("kg=sparql needs endpoint=URL (a SPARQL query endpoint)")
        if self.max_candidates < 1 or self.link_search_k < 0 or self.max_facts < 1:
            raise ValueError("max_candidates and max_facts must be >= 1, link_search_k >= 0")
        return self


class KgPromptSettings(MethodSettings):
    """The options of the KGQA paper's prompts (shared with ``closed-book`` on KGQA datasets)."""

    one_shot: bool = True
    """The paper's one-shot example in the identify and answer steps."""
    context_tokens: int = 4096
    """Context window of the model: prompts are cut to fit it with the completion bound (at least 1024)."""
    max_values: int = 10
    """Values shown per property."""
    current_date: str = "2024-04-11"
    """The "Current date" of the system prompt (fixed so that runs are reproducible)."""

    @model_validator(mode="after")
    def _check_prompt(self) -> KgPromptSettings:
        if self.context_tokens < 1024:
            raise ValueError("context_tokens must be >= 1024")
        if self.max_values < 1:
            raise ValueError("max_values must be >= 1")
        return self


class KgqaSettings(KgAccessSettings, KgPromptSettings):
    """``--set`` options of ``kg-1hop`` (and the base of ``react-kg``'s): sampling, then KG access and prompts.

    The KG access and prompt options of the two bases, plus sampling.
    """

    temperature: float = 0.0
    """Sampling temperature (0: greedy, reproducible; the paper used OpenAI's defaults)."""
    max_tokens: int = 256
    """Completion bound of the answer step (at least 16)."""
    max_tokens_step: int = 160
    """Completion bound of the other steps: entity, property, status, disambiguation (at least 16)."""
    cot: bool = True
    """Reasoning fields in every JSON answer (the paper's chain of thought)."""
    seed: int = 0
    """Sampling seed."""
    guided: bool = False
    """Structured outputs: every step's JSON object follows a JSON Schema of the prompt's fields
    (``tasks.methods.kgqa.agents.step_schema``); property id, QID and answer status are enums of what was shown.
    False: the paper's free-form prompting."""

    @model_validator(mode="after")
    def _check(self) -> KgqaSettings:
        if self.max_tokens < 16 or self.max_tokens_step < 16:
            raise ValueError("max_tokens and max_tokens_step must be >= 16")
        return self


class ReactKgSettings(KgqaSettings):
    """``--set`` options of ``react-kg``: those of ``kg-1hop`` plus the traversal bounds."""

    max_depth: int = 3
    """Hops the traversal may go from the main entity (paper: 2 in practice)."""
    max_frontier: int = 10
    """Entities kept as the current entities of the next hop."""

    @model_validator(mode="after")
    def _check_depth(self) -> ReactKgSettings:
        if self.max_depth < 1 or self.max_frontier < 1:
            raise ValueError("max_depth and max_frontier must be >= 1")
        return self
