r"""ToG / AnchorRAG answer metrics (the ``tog`` family), computed from stored prediction rows.

Paper: ../shared/papers/anchorrag-open-world-kgqa.md (§4.1 "Hit@1" and "acc", Table 1, Fig. 3). The paper's
own evaluation script is the default reference:

* **AnchorRAG** — Jayson3831/AnchorRAG ``freebase_qa/eval.py`` (``eval_em``) with
  ``freebase_qa/utils/eval_utils.py`` (``clean_results``, ``exact_match``, ``eval_hit``, ``eval_acc``), commit
  ``2904493d974d73587e9b953bd32eaa35d24767da``.
* **ToG** — IDEA-FinAI/ToG ``eval/eval.py`` with ``eval/utils.py`` (``clean_results``, ``exact_match``), commit
  ``7ccbb92e17579f934bb778386230de47eca0ab67``; reproduced as ``hit1_tog_togeval``.

Reference rules (both scripts score every question of the dataset file: the denominator is all questions):

* **extraction** (:func:`anchorrag_extract`): a response without ``{`` is used whole; otherwise the contents of
  the ``\{(.*?)\}`` matches (no match across a line break): the first, except that a first match exactly
  ``Yes`` (case-sensitive, unstripped) gives the second (or the whole response when there is no second).
  ``{yes}``, ``{ Yes }`` and ``{No}. {X}`` therefore give ``yes``/`` Yes ``/``No``.
* **match** (:func:`ref_match`): lower-cased, stripped, every ASCII space removed; equal or contained either
  way. ``""`` is contained in everything: an empty extracted answer (``{}``) matches any gold answer, and a
  blank gold alias matches any answer.
* **``hit1_tog``**: 1 when any gold answer matches, else 0; a question with no gold answer scores 0
  (AnchorRAG ``eval_hit`` over an empty list; 55 of WebQSP's 1,639 test questions).
* **``acc_tog``**: matched gold answers / gold answers, the gold answers deduplicated as strings (both
  scripts' ``align`` returns ``list(set(...))``); 0 for a question with no gold answer (``eval_acc``).
* **``hit1_tog_togeval``** (ToG ``eval/eval.py``): the answer is ``s[s.find("{") + 1 : s.find("}")]`` when the
  response contains ``{`` (so always the first brace, no verdict rule; with no ``}`` the slice runs to the
  last character but one; a ``}`` before the ``{`` gives ``""``); a brace content equal to ``NULL`` is
  counted as neither right nor wrong (a miss in the denominator); then the same match.

linkedqa conventions around the references: a question whose ``gold_answers`` is ``None`` (not annotated) is
not scored; ``None`` entries of a gold list are ignored and other values compared as ``str``; a ``None``
response (no output: the registry passes ``None`` for items that failed with an error) is a miss — the
reference scripts only ever see a response string, and an errored item stored as ``""`` would otherwise match
everything.

Extra metrics (never instead of the reference ones):

* ``hit1_tog_answerable`` / ``acc_tog_answerable``: the reference rule over questions with at least one gold
  answer (the answerable-only denominator).
* ``hit1_tog_lenient`` / ``acc_tog_lenient``: a lenient ``hit1_tog``/``acc_tog`` —
  extraction :func:`tog_extract` (any case-insensitive, stripped ``yes``/``no`` first brace gives the second
  brace, contents stripped), :func:`tog_match` (an empty answer or gold never matches), blank gold aliases
  dropped, gold not deduplicated, answerable questions only.

linkedqa's own stricter views of the reference-extracted answer (no reference script; answerable questions
only):

* **``em_strict``**: SQuAD-normalised exact match with any gold answer.
* **``f1_set``**: F1 between the answer split into a set (on ``,`` ``;`` ``|`` and `` and ``; unsplit when the
  whole answer is a gold answer, e.g. ``Washington, D.C.``) and the gold set, both SQuAD-normalised (aliases
  of one answer count as separate gold entries: no alias grouping exists in the ToG files).
* **``anchor_acc``**: 1 when a gold topic QID is among the method's anchors (``predicted_entities``); only
  questions with gold topic entities are scored.
* **Fig. 3 split** (items whose agent logged ``{"kind": "note", "answered_by": "retrieval"|"cot"}``):
  ``hit1_tog_retrieval`` / ``hit1_tog_cot`` (``hit1_tog`` with the answer obtained from KG retrieval / from
  the CoT fallback; the two sum to ``hit1_tog`` over those items) and ``cot_rate`` (share answered by the
  fallback).

Example::

    >>> anchorrag_extract("{Yes}. Based on the triplets ... the answer is {Kenyan shilling}.")
    'Kenyan shilling'
    >>> ref_match("Kenyan shilling", "kenyan Shilling (KES)")
    True
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tasks.metrics.base import MetricError, MetricResult, item_ids, mean_result
from tasks.metrics.qa import normalize_answer

TOG_METRICS = ("hit1_tog", "acc_tog", "em_strict", "f1_set", "anchor_acc", "hit1_tog_retrieval", "hit1_tog_cot",
               "cot_rate", "hit1_tog_answerable", "acc_tog_answerable", "hit1_tog_lenient", "acc_tog_lenient",
               "hit1_tog_togeval")
ANSWER_SOURCES = ("retrieval", "cot")
_BRACES = re.compile(r"\{(.*?)\}")
_SPLIT = re.compile(r"\s*(?:[,;|]|\band\b)\s*")


def anchorrag_extract(response: str) -> str:
    """The answer the AnchorRAG script reads from a response (``clean_results``; see the module docstring)."""
    if "{" not in response:
        return response
    found = _BRACES.findall(response)
    if not found:
        return response
    if found[0] == "Yes":
        return found[1] if len(found) > 1 else response
    return found[0]


def togeval_extract(response: str) -> str | None:
    """The answer ToG's ``eval/eval.py`` reads from a response; ``None`` when it skips scoring (``{NULL}``)."""
    if "{" not in response:
        return response
    content = response[response.find("{") + 1:response.find("}")]
    return None if content == "NULL" else content


def _squash(text: str) -> str:
    return text.strip().replace(" ", "").lower()


def ref_match(answer: str, gold: str) -> bool:
    """Both scripts' ``exact_match`` for one gold answer: equal or contained either way after squashing."""
    a, g = _squash(answer), _squash(gold)
    return a == g or a in g or g in a


def tog_extract(response: str | None) -> str:
    """The lenient extraction; ``""`` for no response. Also used by the AnchorRAG agent."""
    text = response or ""
    matches = _BRACES.findall(text)
    if len(matches) >= 2 and matches[0].strip().lower() in ("yes", "no"):
        return matches[1].strip()
    if matches:
        return matches[0].strip()
    return text.strip()


def tog_match(answer: str, gold: str) -> bool:
    """The lenient match: :func:`ref_match`, except that an empty answer or gold never matches."""
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


def reference_hit_acc(response: str | None, golds: Sequence[str]) -> tuple[float, float]:
    """AnchorRAG ``eval_hit`` and ``eval_acc`` of one question (gold strings as stored; ``None``: a miss)."""
    unique = list(dict.fromkeys(golds))
    if response is None or not unique:
        return 0.0, 0.0
    answer = anchorrag_extract(response)
    matched = sum(ref_match(answer, g) for g in unique)
    return float(matched > 0), matched / len(unique)


def togeval_hit(response: str | None, golds: Sequence[str]) -> float:
    """ToG ``eval/eval.py``'s verdict for one question (1 right, 0 error or skipped)."""
    if response is None:
        return 0.0
    answer = togeval_extract(response)
    return float(answer is not None and any(ref_match(answer, g) for g in golds))


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
        responses: Final LLM responses (``predictions.answer``; ``None``: no output, a miss).
        gold_answers: Gold answer strings per question (``None``: not annotated, skipped; empty: scored, a miss
            for the reference metrics, skipped by the ``_answerable``/``_lenient`` ones and the strict views).
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
        if golds is not None:
            ref_golds = [str(g) for g in golds if g is not None]
            hit, acc = reference_hit_acc(resp, ref_golds)
            per["hit1_tog"][key], per["acc_tog"][key] = hit, acc
            per["hit1_tog_togeval"][key] = togeval_hit(resp, ref_golds)
            if ref_golds:
                per["hit1_tog_answerable"][key], per["acc_tog_answerable"][key] = hit, acc
            if source is not None:
                per["hit1_tog_retrieval"][key] = hit * (source == "retrieval")
                per["hit1_tog_cot"][key] = hit * (source == "cot")
            gold_list = [g for g in ref_golds if g.strip()]
            if gold_list:
                lenient = [tog_match(tog_extract(resp), g) for g in gold_list]
                per["hit1_tog_lenient"][key] = float(any(lenient))
                per["acc_tog_lenient"][key] = sum(lenient) / len(lenient)
                answer = anchorrag_extract(resp) if resp is not None else ""
                norm = normalize_answer(answer)
                per["em_strict"][key] = float(bool(norm) and any(norm == normalize_answer(g) for g in gold_list))
                gold_set = {normalize_answer(g) for g in gold_list} - {""}
                pred_set = {norm} if norm in gold_set else answer_set(answer)  # "{Washington, D.C.}" is one answer
                per["f1_set"][key] = _set_f1(pred_set, gold_set) if gold_set else 0.0
        if source is not None:
            per["cot_rate"][key] = float(source == "cot")
        gold_set_e = {str(q) for q in (gold_ents or []) if q}
        if gold_set_e:
            per["anchor_acc"][key] = float(bool(gold_set_e & {str(q) for q in (pred_ents or [])}))
    return {m: mean_result(m, per[m]) for m in TOG_METRICS}
