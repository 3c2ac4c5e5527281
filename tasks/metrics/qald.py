"""QALD answer-set metrics: GERBIL "Macro F1 QALD" and the mean of per-question F1.

Per-question P/R/F1 follow GERBIL QA's empty-answer rules.

Inputs: predicted and gold answer collections per question (QIDs, or literal values; Wikidata entity URIs are
reduced to their QIDs, other values are compared as stripped strings). Outputs:
:class:`~tasks.metrics.base.MetricResult` objects.

Per-question rule — GERBIL QA, ``FMeasureCalculator.calculateMeasuresQALD`` (the computation behind the
"Macro F1 QALD" column of gerbil-qa.aksw.org and the QALD-9/QALD-10 leaderboards), with tp = |p∩g|,
fp = |p - g|, fn = |g - p|:

============================  =====  =====  =====
case                            P      R      F
============================  =====  =====  =====
g = ∅ and p = ∅                 1      1      1
g ≠ ∅ and p = ∅ (no answer)     1      0      0
tp = 0 otherwise                0      0      0
tp > 0                          tp/|p| tp/|g| harmonic mean
============================  =====  =====  =====

(The NLIWOD/QALD-10 challenge page states P = 0 for "no answer"; GERBIL's code, which produced the published
numbers, uses P = 1. GERBIL's plain "Macro F1" columns use ``calculateMeasures``, where that case is 0/0/0.
F is 0 in that case under both rules, so only the macro precision and the GERBIL score depend on it.)

- ``qald_macro_f1_gerbil``: 2·mP·mR / (mP + mR), mP and mR the means of the per-question P and R above
  (GERBIL returns NaN when both are 0; 0.0 here).
- ``qald_macro_f1_mean``: the mean of the per-question F above.
- ``qald_macro_precision`` / ``qald_macro_recall``: mP and mR.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tasks.metrics.base import MetricError, MetricResult, item_ids, make_result, mean_result

QALD_METRICS = ("qald_macro_f1_gerbil", "qald_macro_f1_mean", "qald_macro_precision", "qald_macro_recall")
_WD_ENTITY = re.compile(r"^<?https?://(?:www\.)?wikidata\.org/(?:entity|wiki)/((?:Q|P|L)\d+)>?$")


_MIDNIGHT_DATE = re.compile(r"^(-?\d{4,}-\d\d-\d\d)T00:00:00Z$")
_SIGNED_NUMBER = re.compile(r"^\+(\d+(?:\.\d+)?)$")


def canonical_answer(value: object) -> str:
    """An answer value as compared: Wikidata entity URIs -> QID, everything else stripped text.

    Wikidata's serialisations of literals are written the way the QALD systems answer (the paper's
    post-processing): ``xsd:dateTime`` at midnight -> ``YYYY-MM-DD``, a leading ``+`` on a number dropped,
    ``True``/``False`` -> ``true``/``false``.
    """
    text = str(value).strip()
    m = _WD_ENTITY.match(text)
    if m:
        return m.group(1)
    m = _MIDNIGHT_DATE.match(text) or _SIGNED_NUMBER.match(text)
    if m:
        return m.group(1)
    return text.lower() if text in ("True", "False", "TRUE", "FALSE") else text


def answer_set(values: Iterable[object] | None) -> set[str]:
    """Canonical, non-empty answers as a set (``None`` -> empty).

    Raises:
        MetricError: A bare string (it would be split into characters).
    """
    if values is None:
        return set()
    if isinstance(values, str):
        raise MetricError(f"expected a collection of answers, got the string {values!r}")
    out = {canonical_answer(v) for v in values if v is not None}
    out.discard("")
    return out


def qald_prf(pred: Iterable[object] | None, gold: Iterable[object] | None) -> tuple[float, float, float]:
    """Per-question (P, R, F1) with GERBIL QA's ``calculateMeasuresQALD`` rules (see the module docstring)."""
    p, g = answer_set(pred), answer_set(gold)
    tp = len(p & g)
    if tp == 0:
        if not p and not g:
            return 1.0, 1.0, 1.0
        if not p:
            return 1.0, 0.0, 0.0
        return 0.0, 0.0, 0.0
    prec, rec = tp / len(p), tp / len(g)
    return prec, rec, 2 * prec * rec / (prec + rec)


def qald_metrics(
    preds: Sequence[Iterable[object] | None],
    golds: Sequence[Iterable[object] | None],
    ids: Sequence[str] | None = None,
) -> dict[str, MetricResult]:
    """All QALD aggregates at once.

    Args:
        preds: System answers per question.
        golds: Gold answers per question.
        ids: Question ids.

    Returns:
        ``qald_macro_f1_gerbil`` (per item: the question's F), ``qald_macro_f1_mean``,
        ``qald_macro_precision`` and ``qald_macro_recall``.
    """
    if len(preds) != len(golds):
        raise MetricError(f"{len(preds)} predictions for {len(golds)} gold answer sets")
    keys = item_ids(ids, len(preds))
    ps: dict[str, float] = {}
    rs: dict[str, float] = {}
    fs: dict[str, float] = {}
    for key, pred, gold in zip(keys, preds, golds, strict=True):
        ps[key], rs[key], fs[key] = qald_prf(pred, gold)
    state = (sum(ps.values()), sum(rs.values()), len(keys))
    return {
        "qald_macro_f1_gerbil": make_result("qald_macro_f1_gerbil", "harmonic_macro", state, fs),
        "qald_macro_f1_mean": mean_result("qald_macro_f1_mean", fs),
        "qald_macro_precision": mean_result("qald_macro_precision", ps),
        "qald_macro_recall": mean_result("qald_macro_recall", rs),
    }


def qald_macro_f1_gerbil(
    preds: Sequence[Iterable[object] | None],
    golds: Sequence[Iterable[object] | None],
    ids: Sequence[str] | None = None,
) -> MetricResult:
    """GERBIL "Macro F1 QALD": harmonic mean of macro precision and macro recall."""
    return qald_metrics(preds, golds, ids)["qald_macro_f1_gerbil"]


def qald_macro_f1_mean(
    preds: Sequence[Iterable[object] | None],
    golds: Sequence[Iterable[object] | None],
    ids: Sequence[str] | None = None,
) -> MetricResult:
    """Mean of per-question F1 (GERBIL QALD rules per question)."""
    return qald_metrics(preds, golds, ids)["qald_macro_f1_mean"]
