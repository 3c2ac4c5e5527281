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
    """Options shared by ``anchorrag`` and ``tog``.

    Attributes:
        kg: KG backend: ``duckdb`` (the KB version's triple store) or ``sparql`` (``endpoint``).
        endpoint: SPARQL query URL for ``kg=sparql``.
        endpoint_timeout_s: Per-request timeout of the endpoint.
        endpoint_retries: Extra attempts after a failed request.
        depth: Maximum retrieval depth (paper: L = 3).
        width: Relations kept per entity and entities kept per relation (paper: b = 3; ToG's beam width).
        max_keywords: Keywords kept from the keyword prompt.
        max_relations: Candidate relations shown per entity (bounds the prompt).
        max_entities_shown: Neighbours shown to the entity-pruning prompt per relation (ToG samples 20).
        max_triples: Triples shown to one prompt (bounds the context).
        max_tokens: Completion bound of answer steps (sufficiency, answer, CoT).
        max_tokens_step: Completion bound of the other steps.
        temperature: Sampling temperature (0: greedy, reproducible).
        seed: Sampling seed.
        guided: Structured outputs: the keyword step is constrained to one line of 1 to
            ``max_keywords`` comma-separated keywords of at most 8 words each (``agents.keywords_regex``).
            False = the paper's free-form prompting.
    """

    kg: Literal["duckdb", "sparql"] = "duckdb"
    endpoint: str | None = None
    endpoint_timeout_s: float = 10.0
    endpoint_retries: int = 2
    depth: int = 3
    width: int = 3
    max_keywords: int = 6
    max_relations: int = 60
    max_entities_shown: int = 20
    max_triples: int = 60
    max_tokens: int = 192
    max_tokens_step: int = 160
    temperature: float = 0.0
    seed: int = 0
    guided: bool = False

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
    """``--set`` options of ``anchorrag`` (defaults: the paper's §4.2).

    Attributes:
        m: Anchors, hence parallel retriever agents (paper: 3).
        k: Relations averaged per candidate in the grounding score, Eq. 2 (paper: 5).
        n_candidates: Dense-index candidates per keyword.
        grounding: Relation-aware grounding (False: anchors by name similarity only, the paper's
            "w/o Entity Grounding" ablation).
        filter: Triple filtering prompt (False: every pruned triple is kept, "w/o Triples Fine Filtering").
    """

    m: int = 3
    k: int = 5
    n_candidates: int = 10
    grounding: bool = True
    filter: bool = True

    @model_validator(mode="after")
    def _check_ar(self) -> AnchorRagSettings:
        if min(self.m, self.k, self.n_candidates) < 1:
            raise ValueError("m, k and n_candidates must be >= 1")
        return self


class TogSettings(OpenWorldKgSettings):
    """``--set`` options of ``tog``.

    Attributes:
        search_k: BM25 label-search hits per keyword shown to the anchor choice.
        max_anchors: Anchors the LLM may choose.
    """

    search_k: int = 5
    max_anchors: int = 3

    @model_validator(mode="after")
    def _check_tog(self) -> TogSettings:
        if self.search_k < 1 or self.max_anchors < 1:
            raise ValueError("search_k and max_anchors must be >= 1")
        return self


class CotSettings(MethodSettings):
    """``--set`` options of ``cot``: ``style`` (``cot``: worked examples, ``io``: answers only) and sampling."""

    style: Literal["cot", "io"] = "cot"
    max_tokens: int = 192
    temperature: float = 0.0
    seed: int = 0
