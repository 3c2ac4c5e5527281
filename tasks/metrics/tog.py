"""ToG / AnchorRAG answer metrics (the ``tog`` family), computed from stored prediction rows.

Paper: ../shared/papers/anchorrag-open-world-kgqa.md (§4.1 "Hit@1" and "acc", Fig. 3), which evaluates as
Think-on-Graph's released ``eval/`` scripts do:

* **answer extraction** (``tog_extract``): the final LLM response is kept as is in ``predictions.answer``; the
  answer is the content of its first ``{...}``, except that a sufficiency verdict ``{Yes}. ... {Germany}``
  gives the second brace (ToG's ``extract_content``); a response without braces is used whole.
* **``hit1_tog``**: lower-case, every space removed, then the extracted answer and a gold answer match when they
  are equal or one contains the other; 1 when any gold answer matches.
* **``acc_tog``**: the share of the question's gold answers matched that way. The paper does not define
  "acc"; this reading reproduces its tables' pattern (acc = Hit@1 on CWQ, whose questions have one answer; acc
  < Hit@1 on WebQSP/GrailQA, which have answer sets).

Next to them, stricter views of the same extracted answer:

* **``em_strict``**: SQuAD-normalised exact match with any gold answer.
* **``f1_set``**: F1 between the answer split into a set (on ``,`` ``;`` ``|`` and `` and ``; unsplit when the
  whole answer is a gold answer, e.g. ``Washington, D.C.``) and the gold set, both SQuAD-normalised (aliases
  of one answer count as separate gold entries: no alias grouping exists in the ToG files).
* **``anchor_acc``**: 1 when a gold topic QID is among the method's anchors (``predicted_entities``); only
  questions with gold topic entities are scored.
* **Fig. 3 split** (items whose agent logged ``{"kind": "note", "answered_by": "retrieval"|"cot"}``):
  ``hit1_tog_retrieval`` / ``hit1_tog_cot`` (hit with the answer obtained from KG retrieval / from the CoT
  fallback; the two sum to ``hit1_tog`` over those items) and ``cot_rate`` (share answered by the fallback).

One deliberate difference from ToG's script: an empty extracted answer never matches (in ToG's substring test
``"" in gold`` is true, which would count an empty ``{}`` as correct).

Example::

    >>> tog_extract("{Yes}. Based on the triplets ... the answer is {Kenyan shilling}.")
    'Kenyan shilling'
    >>> tog_match("Kenyan shilling", "kenyan Shilling (KES)")
    True
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tasks.metrics.base import MetricError, MetricResult, item_ids, mean_result
from tasks.metrics.qa import normalize_answer

TOG_METRICS = ("hit1_tog", "acc_tog", "em_strict", "f1_set", "anchor_acc", "hit1_tog_retrieval", "hit1_tog_cot",
               "cot_rate")
ANSWER_SOURCES = ("retrieval", "cot")
_BRACES = re.compile(r"\{(.*?)\}")
_SPLIT = re.compile(r"\s*(?:[,;|]|\band\b)\s*")


def tog_extract(response: str | None) -> str:
    """The answer inside a ToG-style response (see the module docstring); ``""`` for no response."""
    text = response or ""
    matches = _BRACES.findall(text)
    if len(matches) >= 2 and matches[0].strip().lower() in ("yes", "no"):
        return matches[1].strip()
    if matches:
        return matches[0].strip()
    return text.strip()


def _squash(text: str) -> str:
    return text.strip().replace(" ", "").lower()


def tog_match(answer: str, gold: str) -> bool:
    """ToG's ``exact_match`` for one gold answer.

    Equal or contained either way, after lower-casing and removing spaces; an empty answer or gold never matches.
    """
    a, g = _squash(answer), _squash(gold)
    if not a or not g:
        return False
    return a == g or a in g or g in a


def answer_set(text: str) -> set[str]:
    """The normalised answers of a comma/semicolon/"and"-separated answer text."""
    return {n for n in (normalize_answer(p) for p in _SPLIT.split(text or "")) if n}


def _set_f1(pred: set[str], gold: set[str]) -> float:
    inter = len(pred & gold)
    if not inter:
        return 0.0
    p, r = inter / len(pred), inter / len(gold)
    return 2 * p * r / (p + r)


def tog_metrics(
    responses: Sequence[str | None],
    gold_answers: Sequence[Iterable[str] | None],
    predicted_entities: Sequence[Iterable[str] | None],
    gold_entities: Sequence[Iterable[str] | None],
    answer_sources: Sequence[str | None],
    ids: Sequence[str] | None = None,
) -> dict[str, MetricResult]:
    """Every ``tog`` metric over aligned per-question lists.

    Args:
        responses: Final LLM responses (``predictions.answer``).
        gold_answers: Gold answer strings per question (``None``/empty: answer metrics skip the question).
        predicted_entities: The method's anchors (QIDs) per question.
        gold_entities: Gold topic QIDs per question (``None``/empty: ``anchor_acc`` skips the question).
        answer_sources: ``"retrieval"``, ``"cot"`` or ``None`` (not logged: the Fig. 3 metrics skip it).
        ids: Question ids (default: positions).

    Returns:
        ``{name: MetricResult}`` for every name in ``TOG_METRICS``.

    Raises:
        MetricError: Lists of different lengths, or an unknown answer source.
    """
    n = len(responses)
    if not (len(gold_answers) == len(predicted_entities) == len(gold_entities) == len(answer_sources) == n):
        raise MetricError("tog metrics: per-question lists differ in length")
    keys = item_ids(ids, n)
    per: dict[str, dict[str, float]] = {m: {} for m in TOG_METRICS}
    for key, resp, golds, pred_ents, gold_ents, source in zip(
            keys, responses, gold_answers, predicted_entities, gold_entities, answer_sources, strict=True):
        if source is not None and source not in ANSWER_SOURCES:
            raise MetricError(f"{key}: unknown answer source {source!r}; expected one of {ANSWER_SOURCES}")
        gold_list = [str(g) for g in (golds or []) if g is not None and str(g).strip()]
        answer = tog_extract(resp)
        if gold_list:
            matched = [tog_match(answer, g) for g in gold_list]
            hit = float(any(matched))
            per["hit1_tog"][key] = hit
            per["acc_tog"][key] = sum(matched) / len(matched)
            norm = normalize_answer(answer)
            per["em_strict"][key] = float(bool(norm) and any(norm == normalize_answer(g) for g in gold_list))
            gold_set = {normalize_answer(g) for g in gold_list} - {""}
            pred_set = {norm} if norm in gold_set else answer_set(answer)  # "{Washington, D.C.}" is one answer
            per["f1_set"][key] = _set_f1(pred_set, gold_set) if gold_set else 0.0
            if source is not None:
                per["hit1_tog_retrieval"][key] = hit * (source == "retrieval")
                per["hit1_tog_cot"][key] = hit * (source == "cot")
        if source is not None:
            per["cot_rate"][key] = float(source == "cot")
        gold_set_e = {str(q) for q in (gold_ents or []) if q}
        if gold_set_e:
            per["anchor_acc"][key] = float(bool(gold_set_e & {str(q) for q in (pred_ents or [])}))
    return {m: mean_result(m, per[m]) for m in TOG_METRICS}
