"""The trajectory notes metrics read: documents retrieved, how an answer was obtained, why it fell back.

Agents write them through :func:`note_retrieved` / :func:`note_answered_by` / :func:`note_fallback` and metrics
(and the failure stages) read them back with
:func:`read_notes`, so one module names the fields for both sides (``tasks.methods.records`` holds the rest of the
agent contract).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: Note fields metrics read.
RETRIEVED, ANSWERED_BY, FALLBACK = "retrieved", "answered_by", "fallback"


def note_retrieved(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The note of the documents an item retrieved (``id``, ``title``, ``text`` each), for ``ItemContext.log``."""
    return {RETRIEVED: [{"id": str(d["id"]), "title": d["title"], "text": d["text"]} for d in docs]}


def note_answered_by(source: Literal["retrieval", "cot"]) -> dict[str, Any]:
    """The note of how an item's answer was obtained, for ``ItemContext.log``."""
    return {ANSWERED_BY: source}


def note_fallback(mode: str, reason: str) -> dict[str, Any]:
    """The note of an item that fell back to another mode (ER: closed-book) and why, for ``ItemContext.log``."""
    return {FALLBACK: mode, "reason": reason}


@dataclass(frozen=True)
class TrajectoryNotes:
    """What metrics read from a stored trajectory: the last note of each kind (``None`` when absent).

    ``fallback`` is the reason of the last fallback note ("no documents" when it gave none).
    """

    retrieved: list[dict[str, Any]] | None = None
    answered_by: str | None = None
    fallback: str | None = None

    @property
    def retrieved_texts(self) -> list[str] | None:
        """Texts of the retrieved documents, or ``None`` when the item logged none."""
        return None if self.retrieved is None else [d.get("text") or "" for d in self.retrieved]


def read_notes(trajectory: str | None) -> TrajectoryNotes:
    """The notes metrics read from a trajectory's JSON text (the last of each kind wins)."""
    retrieved = answered_by = fallback = None
    for event in json.loads(trajectory or "[]"):
        if event.get("kind") != "note":
            continue
        if RETRIEVED in event:
            retrieved = list(event[RETRIEVED])
        if ANSWERED_BY in event:
            answered_by = event[ANSWERED_BY]
        if FALLBACK in event:
            fallback = event.get("reason") or "no documents"
    return TrajectoryNotes(retrieved, answered_by, fallback)
