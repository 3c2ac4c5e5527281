"""Tolerant parsing of the JSON objects the KGQA prompts ask for (paper: every LLM step answers in JSON).

Inputs: raw completion texts (possibly cut at the ``}`` stop sequence, wrapped in code fences or in the
one-shot's ``Example answer: [...]`` frame, with single quotes or trailing commas). Outputs: plain dicts and
typed fields; ``None`` when nothing usable is in the text (callers turn that into an ``AgentError``).

Example:
    >>> extract_json('Example answer: [{"reason": "x", "answers": ["Paris"]')
    {'reason': 'x', 'answers': ['Paris']}
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

_FENCE = re.compile(r"```(?:json)?", re.I)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_STRING_FIELD = r'["\']{key}["\']\s*:\s*"((?:[^"\\]|\\.)*)"'
_LIST_FIELD = r'["\']{key}["\']\s*:\s*\[(.*?)(?:\]|$)'
_QID = re.compile(r"\bQ[1-9][0-9]*\b")
_PID = re.compile(r"\bP[1-9][0-9]*\b")


def _close(text: str) -> str:
    """Append the closing brackets/braces a stop sequence or a length cut left open (outside strings)."""
    stack: list[str] = []
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    return text + ('"' if in_str else "") + "".join(reversed(stack))


def _balanced(text: str, start: int) -> str:
    """The object starting at ``text[start] == "{"`` up to its matching brace (or the end of the text)."""
    depth = 0
    in_str = esc = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start:]


def extract_json(text: str | None) -> dict[str, Any] | None:
    """The first JSON object in an LLM output, repaired where the intent is clear.

    Repairs: code fences, text around the object, a missing closing brace (the ``}`` stop sequence is
    stripped by the backend), trailing commas, Python-style single quotes / ``True``. Returns ``None`` when
    the text holds no ``{``, or nothing parseable.
    """
    if not text:
        return None
    t = _FENCE.sub("", text)
    start = t.find("{")
    if start < 0:
        return None
    body = _TRAILING_COMMA.sub(r"\1", _close(_balanced(t, start)))
    for attempt in (body, _TRAILING_COMMA.sub(r"\1", _close(body))):
        try:
            obj = json.loads(attempt)
        except json.JSONDecodeError:
            try:
                obj = ast.literal_eval(attempt)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
        if isinstance(obj, dict):
            return obj
    return None


def field_text(obj: dict[str, Any] | None, text: str, key: str) -> str | None:
    """A string field from the parsed object, else from a regex over the raw text (``"key": "value"``)."""
    if obj is not None and key in obj:
        v = obj[key]
        if isinstance(v, str):
            return v.strip()
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)
        if isinstance(v, list) and v and isinstance(v[0], str):
            return v[0].strip()
        return None
    m = re.search(_STRING_FIELD.format(key=re.escape(key)), text or "")
    if m:
        try:
            return json.loads(f'"{m.group(1)}"').strip()
        except json.JSONDecodeError:
            return m.group(1).strip()
    return None


def field_list(obj: dict[str, Any] | None, text: str, key: str) -> list[Any] | None:
    """A list field (a scalar becomes a one-element list); regex fallback over the raw text."""
    if obj is not None and key in obj:
        v = obj[key]
        if v is None:
            return []
        return list(v) if isinstance(v, (list, tuple)) else [v]
    m = re.search(_LIST_FIELD.format(key=re.escape(key)), text or "", re.S)
    if not m:
        return None
    return [s.strip() for s in re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))]


def parse_entity_label(text: str) -> str | None:
    """``main_entity_label`` of the identify-entity step (paper prompt ``identify_entities``)."""
    obj = extract_json(text)
    label = field_text(obj, text, "main_entity_label")
    if label is None and obj is not None:
        label = field_text(obj, text, "main_entity")
    if label:
        label = re.sub(r"\s*\((?:wd:)?Q\d+\)\s*$", "", label).strip().strip("[]'\" ")
    return label or None


def parse_item_choice(text: str, key: str, candidates: Sequence[str]) -> str | None:
    """A QID the LLM chose among ``candidates``.

    The ``key`` field (a bare id or a Wikidata URL) first, else the first candidate QID anywhere in the text;
    ``None`` when no candidate is named (positions such as "the first one" are not guessed).
    """
    obj = extract_json(text)
    value = field_text(obj, text, key) or ""
    allowed = set(candidates)
    for source in (value, text or ""):
        for q in _QID.findall(source):
            if q in allowed:
                return q
    return None


def parse_property_choice(text: str, allowed: dict[str, str | None]) -> tuple[str | None, str, str]:
    """The property the LLM chose (prompt ``choose_entity_property_content``).

    Args:
        text: Raw completion.
        allowed: ``{pid: label}`` of the properties that were listed.

    Returns:
        ``(pid or None, information_requested, reason)``: ``property_id`` when listed (a bare number gets its
        ``P``), else a listed label equal to ``property_name`` (case-insensitive), else the first listed
        ``P..`` id anywhere in the text.
    """
    obj = extract_json(text)
    info = field_text(obj, text, "information_requested") or ""
    reason = field_text(obj, text, "reason") or ""
    pid = (field_text(obj, text, "property_id") or "").strip()
    if pid.isdigit():
        pid = f"P{pid}"
    m = _PID.search(pid)
    if m and m.group(0) in allowed:
        return m.group(0), info, reason
    name = (field_text(obj, text, "property_name") or "").strip().lower()
    if name:
        for p, label in allowed.items():
            if label and label.lower() == name:
                return p, info, reason
    for p in _PID.findall(text or ""):
        if p in allowed:
            return p, info, reason
    return None, info, reason


ANSWER_STATUSES = ("correct", "require_more_details", "wrong")


def parse_answer_status(text: str) -> str | None:
    """``answer_status`` of the thought step (``correct`` / ``require_more_details`` / ``wrong``)."""
    obj = extract_json(text)
    status = (field_text(obj, text, "answer_status") or "").strip().lower().replace(" ", "_")
    for s in ANSWER_STATUSES:
        if status.startswith(s) or (s == "require_more_details" and status.startswith("require")):
            return s
    low = (text or "").lower()
    found = [s for s in ANSWER_STATUSES if s in low]
    return found[0] if len(found) == 1 else None


def parse_qa(text: str) -> dict[str, Any] | None:
    """The QA step's ``{"reason", "answers", "answers_datatype"}``; ``None`` when no answers field at all."""
    obj = extract_json(text)
    answers = field_list(obj, text, "answers")
    if answers is None:
        answers = field_list(obj, text, "answer")
    if answers is None:
        return None
    return {
        "answers": answers,
        "answers_datatype": (field_text(obj, text, "answers_datatype") or "").lower(),
        "reason": field_text(obj, text, "reason") or "",
    }
