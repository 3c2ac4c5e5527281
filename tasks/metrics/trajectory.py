"""The trajectory notes metrics read: documents retrieved, how an answer was obtained, why it fell back.

Agents write them through :func:`note_retrieved` / :func:`note_answered_by` / :func:`note_fallback` (typed:
:class:`RetrievedNote`, :class:`AnsweredByNote`, :class:`FallbackNote`) and metrics (and the failure stages) read
them back with :func:`read_notes`, so one module names the fields for both sides (``tasks.methods.records`` holds
the rest of the agent contract). :func:`checked_note` refuses, before it is stored, a note that uses one of their
fields in another shape, so what metrics read is always what these types say.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_type_hints

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

#: Note fields metrics read.
RETRIEVED, ANSWERED_BY, FALLBACK = "retrieved", "answered_by", "fallback"


@with_config(ConfigDict(extra="forbid"))
class RetrievedDoc(TypedDict):
    """One retrieved document as a note keeps it."""

    id: str
    title: str | None
    text: str


class RetrievedNote(TypedDict):
    """The documents an item retrieved, best first (the retrieval metrics read their texts)."""

    retrieved: list[RetrievedDoc]


class AnsweredByNote(TypedDict):
    """How an item's answer was obtained (AnchorRAG/ToG's Fig. 3 split)."""

    answered_by: Literal["retrieval", "cot"]


class FallbackNote(TypedDict):
    """An item that fell back to another mode (ER: closed-book) and why (its failure stage reads the reason)."""

    fallback: str
    reason: str


#: A note metrics read, by the field that names it.
READ_NOTES: dict[str, type] = {RETRIEVED: RetrievedNote, ANSWERED_BY: AnsweredByNote, FALLBACK: FallbackNote}
_ADAPTERS = {name: TypeAdapter(cls) for name, cls in READ_NOTES.items()}
_KEYS = {name: frozenset(get_type_hints(cls)) for name, cls in READ_NOTES.items()}


def note_retrieved(docs: Sequence[Mapping[str, Any]]) -> RetrievedNote:
    """The note of the documents an item retrieved (``id``, ``title``, ``text`` each), for ``ItemContext.log``."""
    return RetrievedNote(retrieved=[RetrievedDoc(id=str(d["id"]), title=d["title"], text=d["text"]) for d in docs])


def note_answered_by(source: Literal["retrieval", "cot"]) -> AnsweredByNote:
    """The note of how an item's answer was obtained, for ``ItemContext.log``."""
    return AnsweredByNote(answered_by=source)


def note_fallback(mode: str, reason: str) -> FallbackNote:
    """The note of an item that fell back to another mode (ER: closed-book) and why, for ``ItemContext.log``."""
    return FallbackNote(fallback=mode, reason=reason)


def checked_note(note: Mapping[str, Any]) -> dict[str, Any]:
    """``note`` as a plain dict, once checked: a note metrics read is exactly its type, any other is the method's own.

    A method's own note (its parsed action, a step's counts) has string keys, none of them ``kind`` (the event's)
    nor a field of a note metrics read.

    Raises:
        TypeError: Not a mapping with string keys, a ``kind`` key, more than one read note's field, or a read
            note's field in another shape (a missing or extra key, a wrong type). Inside an agent this is the
            item's error, and the note is not stored.
    """
    if not isinstance(note, Mapping):
        raise TypeError(f"a trajectory note is a mapping with string keys, not {type(note).__name__}")
    if other := [key for key in note if not isinstance(key, str)]:
        raise TypeError(f"a trajectory note has string keys only, not {other!r}")
    if "kind" in note:
        raise TypeError("a trajectory note has no 'kind' key (the runtime sets the event's kind)")
    named = [name for name in READ_NOTES if name in note]
    if not named:
        return dict(note)
    if len(named) > 1:
        raise TypeError(f"one read note per entry, got the fields {named}")
    (name,) = named
    if set(note) != _KEYS[name]:
        raise TypeError(f"the {name!r} note has exactly the keys {sorted(_KEYS[name])}, got {sorted(note)} "
                        f"(build it with note_{name}())")
    try:
        _ADAPTERS[name].validate_python(note, strict=True)
    except ValidationError as exc:
        raise TypeError(f"the {name!r} note in the wrong shape: {exc.errors()[0]['loc']}: "
                        f"{exc.errors()[0]['msg']}") from None
    return dict(note)


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
