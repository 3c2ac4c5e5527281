"""Settings of the open-world KGQA methods: the ``--set`` options of ``anchorrag``, ``tog`` and ``cot``.

Paper: Xu et al. (../shared/papers/anchorrag-open-world-kgqa.md): defaults from §4.2 (depth L = 3, width b = 3,
m = 3 anchors, k = 5 relations in the grounding score); ``grounding`` and ``filter`` switch off the ablations'
components (§4.6). ``OpenWorldKgSettings`` holds the options ``anchorrag`` and ``tog`` share (KG backend,
retrieval bounds, sampling); ``AnchorRagSettings``, ``TogSettings`` and ``CotSettings`` are each method's own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from tasks.methods.base import MethodSettings


class OpenWorldKgSettings(MethodSettings):
    """Options shared by ``anchorrag`` and ``tog``."""

    kg: Literal["duckdb", "sparql"] = "duckdb"
    """KG backend: ``duckdb`` (the KB version's triple store) or ``sparql`` (``endpoint``)."""
    endpoint: str | None = None
    """SPARQL query URL for ``kg=sparql``."""
    endpoint_timeout_s: float = 10.0
    """Per-request timeout of the endpoint, in seconds."""
    endpoint_retries: int = 2
    """Extra attempts after a failed request to the endpoint."""
    depth: int = 3
    """Maximum retrieval depth (paper: L = 3)."""
    width: int = 3
    """Relations kept per entity and entities kept per relation (paper: b = 3; ToG's beam width)."""
    max_keywords: int = 6
    """Keywords kept from the keyword prompt."""
    max_relations: int = 60
    """Candidate relations shown per entity (bounds the prompt)."""
    max_entities_shown: int = 20
    """Neighbours shown to the entity-pruning prompt per relation (ToG samples 20)."""
    max_triples: int = 60
    """Triples shown to one prompt (bounds the context)."""
    max_tokens: int = 192
    """Completion bound of the answer steps: sufficiency, answer, CoT (at least 16)."""
    max_tokens_step: int = 160
    """Completion bound of the other steps (at least 16)."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy, reproducible)."""
    seed: int = 0
    """Sampling seed."""
    guided: bool = False
    """Structured outputs: the keyword step is one line of 1 to ``max_keywords`` comma-separated keywords of at
    most 8 words each (``agents.keywords_regex``). False: the paper's free-form prompting."""

    @model_validator(mode="after")
    def _check(self) -> OpenWorldKgSettings:
        if self.kg == "sparql" and not self.endpoint:
            raise ValueError("kg=sparql needs endpoint=URL (a SPARQL query endpoint)")
        if min(self.depth, self.width, self.max_keywords, self.max_relations, self.max_entities_shown,
               self.max_triples) < 1:
            raise ValueError("depth, width, max_keywords, max_relations, max_entities_shown, max_triples must be >= 1")
        if self.max_tokens < 16 or self.max_tokens_step < 16:
            raise ValueError("max_tokens and max_tokens_step must be >= 16")
        return self


class AnchorRagSettings(OpenWorldKgSettings):
    """``--set`` options of ``anchorrag`` (defaults: the paper's §4.2)."""

    m: int = 3
    """Anchors, hence parallel retriever agents (paper: 3)."""
    k: int = 5
    """Relations averaged per candidate in the grounding score, Eq. 2 (paper: 5)."""
    n_candidates: int = 10
    """Dense-index candidates per keyword."""
    grounding: bool = True
    """Relation-aware grounding (False: anchors by name similarity only, the paper's "w/o Entity Grounding"
    ablation)."""
    filter: bool = True
    """Triple filtering prompt (False: every pruned triple is kept, "w/o Triples Fine Filtering")."""

    @model_validator(mode="after")
    def _check_ar(self) -> AnchorRagSettings:
        if min(self.m, self.k, self.n_candidates) < 1:
            raise ValueError("m, k and n_candidates must be >= 1")
        return self


class TogSettings(OpenWorldKgSettings):
    """``--set`` options of ``tog``."""

    search_k: int = 5
    """BM25 label-search hits per keyword shown to the anchor choice."""
    max_anchors: int = 3
    """Anchors the LLM may choose."""

    @model_validator(mode="after")
    def _check_tog(self) -> TogSettings:
        if self.search_k < 1 or self.max_anchors < 1:
            raise ValueError("search_k and max_anchors must be >= 1")
        return self


class CotSettings(MethodSettings):
    """``--set`` options of ``cot``: the prompt style and sampling."""

    style: Literal["cot", "io"] = "cot"
    """ToG's prompt: ``cot`` (six worked examples with reasoning) or ``io`` (the same questions, answers only)."""
    max_tokens: int = 192
    """Completion bound of the answer."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy, reproducible)."""
    seed: int = 0
    """Sampling seed."""
