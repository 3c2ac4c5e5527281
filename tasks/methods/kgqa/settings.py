"""Settings of the KGQA methods: the ``--set`` options of ``kg-1hop`` and ``react-kg``.

Paper: Cuellar, Allard and Payano, ../shared/papers/qald10-react-wikidata.md (§3.4-3.6 for the steps these
options bound, §3.7 for answer linking, §4.2 for the closed-book baseline).

``KgqaSettings`` (``kg-1hop``, and the defaults ``closed-book`` falls back to on KGQA data), ``ReactKgSettings``
(``react-kg``: plus the traversal bounds) and ``_opt``, which reads an option from any settings object (the
closed-book settings carry only some of the KGQA options).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator

from tasks.methods.base import MethodSettings


class KgqaSettings(MethodSettings):
    """``--set`` options of ``kg-1hop`` (and the base of ``react-kg``'s).

    Attributes:
        kg: KG backend: ``duckdb`` (the KB version's triple store) or ``sparql`` (``endpoint``).
        endpoint: SPARQL query URL for ``kg=sparql`` (local Oxigraph/Virtuoso, or the public WDQS).
        endpoint_timeout_s: Per-request timeout of the endpoint.
        endpoint_retries: Extra attempts after a failed request.
        temperature: Sampling temperature (0: greedy, reproducible; the paper used OpenAI's defaults).
        max_tokens: Completion bound of the answer step.
        max_tokens_step: Completion bound of the other steps (entity, property, status, disambiguation).
        cot: Reasoning fields in every JSON answer (the paper's chain of thought).
        one_shot: The paper's one-shot example in the identify and answer steps.
        context_tokens: Context window of the model (prompts are cut to fit it, with the completion bound).
        max_values: Values shown per property.
        max_facts: Outgoing facts fetched per entity.
        max_candidates: Exact-match candidates kept per entity name.
        link_answers: Link entity answers back to QIDs (paper §3.7).
        link_search_k: BM25 candidates for answers without an exact label match (0: exact matches only).
        current_date: The "Current date" of the system prompt (fixed so that runs are reproducible).
        seed: Sampling seed.
        kb_gold: Also run each question's gold SPARQL query on the local KB and store the outcome per question
            (``kgqa.kb_gold``: ``kb_gold_status``, ``kb_gold_n``, ``kb_gold_f1`` and ``kb_gold_answer_f1``,
            the answer's F1 against the local-KB answers, in ``predictions.scores``).
        kb_gold_timeout_s: Time bound of one gold query on the local KB.
        guided: Structured outputs (issue 19): every step's JSON object is constrained by a JSON Schema with the
            prompt's fields in the prompt's order (``tasks.methods.kgqa.agents.step_schema``); the chosen
            property id, the disambiguated QID and the answer status are enums over what was shown. False =
            the paper's free-form prompting.
    """

    kg: Literal["duckdb", "sparql"] = "duckdb"
    endpoint: str | None = None
    endpoint_timeout_s: float = 10.0
    endpoint_retries: int = 2
    temperature: float = 0.0
    max_tokens: int = 256
    max_tokens_step: int = 160
    cot: bool = True
    one_shot: bool = True
    context_tokens: int = 4096
    max_values: int = 10
    max_facts: int = 2000
    max_candidates: int = 8
    link_answers: bool = True
    link_search_k: int = 5
    current_date: str = "2024-04-11"
    seed: int = 0
    kb_gold: bool = False
    kb_gold_timeout_s: float = 20.0
    guided: bool = False

    @model_validator(mode="after")
    def _check(self) -> KgqaSettings:
        if self.kg == "sparql" and not self.endpoint:
            raise ValueError("kg=sparql needs endpoint=URL (a SPARQL query endpoint)")
        if self.context_tokens < 1024 or self.max_tokens < 16 or self.max_tokens_step < 16:
            raise ValueError("context_tokens must be >= 1024, max_tokens and max_tokens_step >= 16")
        if self.max_values < 1 or self.max_candidates < 1 or self.link_search_k < 0 or self.max_facts < 1:
            raise ValueError("max_values, max_candidates and max_facts must be >= 1, link_search_k >= 0")
        return self


class ReactKgSettings(KgqaSettings):
    """``--set`` options of ``react-kg``: those of ``kg-1hop`` plus the traversal bounds.

    Attributes:
        max_depth: Hops the traversal may go from the main entity (paper: 2 in practice; default 3).
        max_frontier: Entities kept as the current entities of the next hop.
    """

    max_depth: int = 3
    max_frontier: int = 10

    @model_validator(mode="after")
    def _check_depth(self) -> ReactKgSettings:
        if self.max_depth < 1 or self.max_frontier < 1:
            raise ValueError("max_depth and max_frontier must be >= 1")
        return self


def _opt(settings: Any, name: str, default: Any) -> Any:
    """A setting with a default (``closed-book``'s settings carry only some of the KGQA options)."""
    return getattr(settings, name, default) if getattr(settings, name, None) is not None else default
