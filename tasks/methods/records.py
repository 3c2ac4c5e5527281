"""The typed records between agents, the runtime and the run machinery.

What an agent may return, what the runtime hands back per item, and the trajectory events metrics read.

A method author reads this file to know the contract of an agent (docs/architecture.md#methods):

* an agent returns an :class:`AgentResult` or ``None`` (anything else, a ``dict`` included, is an item error);
* the runtime returns one :class:`ItemOutput` per item: the result's fields plus the runtime's bookkeeping, which
  ``tasks.runs.shard.execute_shard`` turns into one row of the ``predictions`` table;
* every tool declares its payload and result as typed dicts beside it: the entity search
  (``tasks.search.kb_indexes.SearchPayload`` / ``SearchCandidate``, ``DenseEntityHit``), the KG tools
  (``tasks.methods.kg_tools``: ``FactsResult``, ``NeighboursResult``, ``LinkResult``, ``FactRecord``, ...), passage
  retrieval and articles (``tasks.methods.qa.method``: ``RetrievePayload`` / ``PassageHit``, ``ArticlesPayload`` /
  ``Article``), AnchorRAG's relation similarity (``tasks.methods.anchorrag.tools``) and EA's candidates and
  selectors (``tasks.methods.ea.embed_method.CandidatesResult``, ``tasks.methods.ea.agent_method.SelectResult``);
* the trajectory is a JSON list of events (:data:`TrajectoryEvent`); the notes metrics read (documents retrieved,
  how an answer was obtained, why it fell back) are typed (:class:`RetrievedNote`, :class:`AnsweredByNote`,
  :class:`FallbackNote`), written with :func:`note_retrieved` / :func:`note_answered_by` / :func:`note_fallback`
  and read back with :func:`read_notes`, so both sides name the same fields; a note of theirs in another shape is
  the item's error (:func:`note_event`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from typing_extensions import TypedDict

from tasks.metrics.trajectory import (
    ANSWERED_BY,
    FALLBACK,
    RETRIEVED,
    AnsweredByNote,
    FallbackNote,
    RetrievedNote,
    TrajectoryNotes,
    checked_note,
    note_answered_by,
    note_fallback,
    note_retrieved,
    read_notes,
)


@dataclass(frozen=True)
class AgentResult:
    """What an agent returns for one item.

    Attributes:
        predicted_entities: QIDs (or KG ids) the item links or aligns to, best first.
        answer: The answer text (free-form QA, the KGQA answer line).
        answers: Answer ids or strings the metrics score (KGQA answers, EA candidates ranked).
        scores: Extra per-item scores stored beside the metric family's (e.g. ``parse_failures``); they win over a
            family score of the same name.
        side: A per-item record for the method's ``postprocess`` only (ELA's self-play SFT example, EA-Agent's
            query and rounds); never stored in the predictions table.
    """

    predicted_entities: Sequence[str] = ()
    answer: str = ""
    answers: Sequence[Any] = ()
    scores: Mapping[str, float] = field(default_factory=dict)
    side: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, value: Any) -> AgentResult:
        """What an agent returned as an AgentResult: itself, or ``None`` (an empty result).

        Raises:
            TypeError: Anything else (a dict included: an agent builds ``AgentResult(...)``).
        """
        if isinstance(value, AgentResult):
            return value
        if value is None:
            return cls()
        raise TypeError(f"agent returned {type(value).__name__}, expected AgentResult (fields "
                        f"{', '.join(sorted(RESULT_FIELDS))})")


RESULT_FIELDS = frozenset(f.name for f in fields(AgentResult))


class ItemOutput(TypedDict):
    """One item's output of the runtime (``run_agents`` / ``run_agents_continuous``), in input order.

    The answer fields come from the agent's :class:`AgentResult` (empty for an item that failed); ``trajectory``
    is the JSON text of its events; ``error`` is set when the item failed (the agent raised, the step bound was
    reached, an unknown tool or action was asked for).
    """

    question_id: str
    predicted_entities: list[str]
    answer: str
    answers: list[Any]
    scores: dict[str, float]
    side: dict[str, Any] | None
    trajectory: str
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    error: str | None


def item_output(item_id: str, result: AgentResult | None, trajectory: str, counters: Mapping[str, Any],
                error: str | None) -> ItemOutput:
    """The runtime's output row of one item (``counters``: llm_calls, prompt/completion tokens, latency_s)."""
    res = result or AgentResult()
    return ItemOutput(question_id=item_id, predicted_entities=list(res.predicted_entities), answer=res.answer or "",
                      answers=list(res.answers), scores=dict(res.scores),
                      side=dict(res.side) if res.side is not None else None, trajectory=trajectory,
                      llm_calls=counters["llm_calls"], prompt_tokens=counters["prompt_tokens"],
                      completion_tokens=counters["completion_tokens"], latency_s=counters["latency_s"], error=error)


# ------------------------------------------------------------------------------------------------ trajectory
class LlmEvent(TypedDict, total=False):
    """One LLM call: the prompt's hash, the raw output and its token counts (``error`` when it failed)."""

    kind: Literal["llm"]
    step: int
    prompt_hash: str
    raw_output: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    prefix_cached_tokens: int
    error: str


class ToolEvent(TypedDict):
    """One tool call: its payload and result (JSON, truncated to ``MAX_TOOL_RESULT_CHARS``)."""

    kind: Literal["tool"]
    step: int
    tool: str
    payload: Any
    result: Any


class ErrorEvent(TypedDict):
    """The item's failure."""

    kind: Literal["error"]
    error: str


class NoteEvent(TypedDict, extra_items=Any):
    """What an agent logs with ``ItemContext.log``: a note metrics read, or the method's own (its parsed action)."""

    kind: Literal["note"]


#: What an agent may log: a note metrics read, or the method's own fields (:func:`checked_note` says which).
Note = RetrievedNote | AnsweredByNote | FallbackNote | Mapping[str, Any]

TrajectoryEvent = LlmEvent | ToolEvent | ErrorEvent | NoteEvent


def note_event(note: Note) -> NoteEvent:
    """The trajectory event of a note an agent logs, once :func:`checked_note` accepted it.

    Raises:
        TypeError: The note is not one an agent may log (see :func:`checked_note`).
    """
    return NoteEvent(kind="note", **checked_note(note))


#: The notes metrics read are written and read through one module, so both sides name the same fields.
__all__ = ["ANSWERED_BY", "FALLBACK", "RETRIEVED", "AgentResult", "AnsweredByNote", "ErrorEvent", "FallbackNote",
           "ItemOutput", "LlmEvent", "Note", "NoteEvent", "RetrievedNote", "ToolEvent", "TrajectoryEvent",
           "TrajectoryNotes", "item_output", "note_answered_by", "note_event", "note_fallback", "note_retrieved",
           "read_notes"]
