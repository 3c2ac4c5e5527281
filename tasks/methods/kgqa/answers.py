"""Answer post-processing to the QALD datasets' formats.

Paper §3.2: "all dates needs to be in a YYYY-MM-DD format, all yes or no questions need to be answered with
booleans". Inputs: the ``answers`` list of a QA step (strings, numbers, booleans) and its ``answers_datatype``. Outputs:
answer strings as the gold files write them after ``tasks.metrics.qald.canonical_answer``: booleans
``true``/``false``, numbers without thousands separators or a leading ``+``, dates ``YYYY-MM-DD``, entity
answers as text (linked to QIDs later, ``tasks.methods.kgqa.agents``) or as a QID when the LLM copied one from its
context (``Paris (Q90)``).

Example:
    >>> format_answers(["Yes"], "boolean"), format_answers(["1,234 m"], "quantity")
    (['true'], ['1234'])
    >>> format_answers(["March 5, 1990", "Paris (capital)"], "string")
    ['1990-03-05', 'Paris']
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable
from datetime import date
from typing import Any

MONTHS = {m: i + 1 for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                           "september", "october", "november", "december"))}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})
MONTHS["sept"] = 9
_YES = {"yes", "true", "y"}
_NO = {"no", "false", "n"}
_QID = re.compile(r"^Q[1-9][0-9]*$")
_QID_IN_PARENS = re.compile(r"\((?:wd:)?(Q[1-9][0-9]*)\)")
_PARENS = re.compile(r"\([^)]*\)")
_NUMBER = re.compile(r"^[+-]?(?:\d{1,3}(?:[,\s]\d{3})+|\d+)(?:\.\d+)?$")
_LEADING_NUMBER = re.compile(
    r"^(?:about|approximately|approx\.?|around|~)?\s*([+-]?(?:\d{1,3}(?:[,\s]\d{3})+|\d+)(?:\.\d+)?)", re.I)
_ISO = re.compile(r"^[+]?(-?\d{1,4})-(\d{1,2})-(\d{1,2})(?:[T ]\d\d:\d\d(?::\d\d)?Z?)?$")
_YMD_SLASH = re.compile(r"^(\d{4})/(\d{1,2})/(\d{1,2})$")
_MDY = re.compile(r"^([A-Za-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{1,4})$")
_DMY = re.compile(r"^(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([A-Za-z]+)\.?,?\s+(\d{1,4})$")
_MY = re.compile(r"^([A-Za-z]+)\.?,?\s+(\d{3,4})$")


def _ymd(y: int, m: int, d: int) -> str | None:
    try:
        date(max(y, 1), m, d)
    except ValueError:
        return None
    return f"{y:04d}-{m:02d}-{d:02d}"


def to_iso_date(text: str) -> str | None:
    """A date in any common English/ISO form as ``YYYY-MM-DD`` (month-only precision gives day 01); else None.

    A bare year is not a date here (it stays a number: the gold files write year answers both ways).
    """
    t = text.strip().rstrip(".")
    m = _ISO.match(t)
    if m:
        return _ymd(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    m = _YMD_SLASH.match(t)
    if m:
        return _ymd(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    m = _MDY.match(t)
    if m and m.group(1).lower() in MONTHS:
        return _ymd(int(m.group(3)), MONTHS[m.group(1).lower()], int(m.group(2)))
    m = _DMY.match(t)
    if m and m.group(2).lower() in MONTHS:
        return _ymd(int(m.group(3)), MONTHS[m.group(2).lower()], int(m.group(1)))
    m = _MY.match(t)
    if m and m.group(1).lower() in MONTHS:
        return _ymd(int(m.group(2)), MONTHS[m.group(1).lower()], 1)
    return None


def clean_number(text: str) -> str:
    """``"+1,234.50"`` -> ``"1234.50"``: no separators, no leading ``+``."""
    return re.sub(r"[,\s]", "", text).lstrip("+")


def as_boolean(value: Any) -> str | None:
    """``"true"``/``"false"`` for booleans and yes/no/true/false texts, else None."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        t = value.strip().strip(".!").lower()
        if t in _YES:
            return "true"
        if t in _NO:
            return "false"
    return None


def format_answer(value: Any, datatype: str = "", known_qids: Container[str] = ()) -> str | None:
    """One answer in the dataset's format (see the module docstring); None for an empty answer."""
    if value is None:
        return None
    b = as_boolean(value)
    if b is not None and (isinstance(value, bool) or datatype in ("", "boolean", "bool", "string")):
        return b
    if isinstance(value, (int, float)):
        return clean_number(repr(value) if isinstance(value, float) else str(value))
    text = str(value).strip().strip("\"'").strip()
    if not text:
        return None
    if _QID.match(text):
        return text
    m = _QID_IN_PARENS.search(text)
    if m and m.group(1) in known_qids:
        return m.group(1)
    text = _PARENS.sub("", text).strip().strip(",;").strip() or text
    iso = to_iso_date(text)
    if iso is not None:
        return iso
    if _NUMBER.match(text):
        return clean_number(text)
    if datatype in ("quantity", "number", "integer", "int", "float", "numeric", "count"):
        m2 = _LEADING_NUMBER.match(text)
        if m2:
            return clean_number(m2.group(1))
    return text


def format_answers(values: Iterable[Any] | Any, datatype: str = "", known_qids: Container[str] = ()) -> list[str]:
    """All answers of a QA step, formatted, empty ones dropped, duplicates removed (first kept)."""
    if values is None:
        return []
    if isinstance(values, (str, bool, int, float)):
        values = [values]
    out: list[str] = []
    for v in values:
        if isinstance(v, (list, tuple, dict)):
            continue
        a = format_answer(v, (datatype or "").lower(), known_qids)
        if a and a not in out:
            out.append(a)
    return out


def is_literal_answer(answer: str) -> bool:
    """True for answers that are never linked to an entity: booleans, numbers, dates, QIDs (paper §3.7)."""
    return (answer in ("true", "false") or bool(_NUMBER.match(answer)) or to_iso_date(answer) is not None
            or bool(_QID.match(answer)))
