"""Entity-linking metrics: ELA's per-question set precision / recall / accuracy, micro P/R/F1, recall@k, hit1.

Inputs: predicted and gold entity collections per question (QIDs; order and repeats ignored for the set
metrics, order used for the ranked ones). Outputs: :class:`~tasks.metrics.base.MetricResult` objects.

Definitions (ELA paper, "Metrics": Prec = |p∩g|/|p|, Recall = |p∩g|/|g|, Acc = 1(p == g)), per question, then
averaged over questions (``precision``, ``recall``, ``accuracy``). The paper leaves empty sets undefined; the
convention here (chosen so that p == g always scores 1/1/1, as Acc does):

- precision with ``p = ∅``: 1.0 if ``g = ∅`` else 0.0;
- recall with ``g = ∅``: 1.0 if ``p = ∅`` else 0.0;
- accuracy: ``1.0 if set(p) == set(g) else 0.0`` (so ∅ == ∅ scores 1).

Pooled micro scores (``micro_precision``, ``micro_recall``, ``micro_f1``) use the sums of |p∩g|, |p| and |g|
over questions, with the same empty conventions on the sums; F1 = 0 when P + R = 0.

Ranked metrics: ``recall@k`` = |top_k ∩ g| / |g| per question, averaged over questions with a non-empty gold
(a question without gold entities cannot miss any and is not counted). A ranked "list" may also be a list of
lists (one ranking per mention); its top k is then the union of each ranking's first k. ``hit1`` = 1 if the
first ranked entity is gold (ELA Table 2's Hit@1), over questions with a non-empty gold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tasks.metrics.base import MetricError, MetricResult, item_ids, make_result, mean_result

LINKING_METRICS = ("precision", "recall", "accuracy", "micro_precision", "micro_recall", "micro_f1")
DEFAULT_KS = (1, 10, 50)


def as_set(values: Iterable[str] | None) -> set[str]:
    """A set of non-empty stripped strings (``None`` -> empty set).

    Raises:
        MetricError: When given a bare string (a likely bug: it would be split into characters).
    """
    if values is None:
        return set()
    if isinstance(values, str):
        raise MetricError(f"expected a collection of ids, got the string {values!r}")
    return {str(v).strip() for v in values if v is not None and str(v).strip()}


def set_precision(pred: Iterable[str] | None, gold: Iterable[str] | None) -> float:
    """|p∩g| / |p|; with p = ∅: 1.0 if g = ∅ else 0.0."""
    p, g = as_set(pred), as_set(gold)
    if not p:
        return 1.0 if not g else 0.0
    return len(p & g) / len(p)


def set_recall(pred: Iterable[str] | None, gold: Iterable[str] | None) -> float:
    """|p∩g| / |g|; with g = ∅: 1.0 if p = ∅ else 0.0."""
    p, g = as_set(pred), as_set(gold)
    if not g:
        return 1.0 if not p else 0.0
    return len(p & g) / len(g)


def set_accuracy(pred: Iterable[str] | None, gold: Iterable[str] | None) -> float:
    """1.0 if the sets are equal (∅ == ∅ included), else 0.0."""
    return 1.0 if as_set(pred) == as_set(gold) else 0.0


def _set_f1(p: set[str], g: set[str]) -> float:
    prec = (len(p & g) / len(p)) if p else (1.0 if not g else 0.0)
    rec = (len(p & g) / len(g)) if g else (1.0 if not p else 0.0)
    return 2 * prec * rec / (prec + rec) if prec + rec > 0 else 0.0


def linking_metrics(
    preds: Sequence[Iterable[str] | None],
    golds: Sequence[Iterable[str] | None],
    ids: Sequence[str] | None = None,
) -> dict[str, MetricResult]:
    """Per-question and pooled linking metrics.

    Args:
        preds: Predicted entities per question.
        golds: Gold entities per question (``None`` is treated as the empty set; leave unannotated questions
            out before calling).
        ids: Question ids (default ``"0".."n-1"``).

    Returns:
        ``precision``, ``recall``, ``accuracy`` (means over questions) and ``micro_precision``,
        ``micro_recall``, ``micro_f1`` (pooled), keyed by name. Per-item values of the micro metrics are the
        question's own precision, recall and F1.

    Raises:
        MetricError: ``preds`` and ``golds`` differ in length, or bad ids.
    """
    if len(preds) != len(golds):
        raise MetricError(f"{len(preds)} predictions for {len(golds)} gold sets")
    keys = item_ids(ids, len(preds))
    per = {name: {} for name in LINKING_METRICS}
    inter = npred = ngold = 0
    for key, pred, gold in zip(keys, preds, golds, strict=True):
        p, g = as_set(pred), as_set(gold)
        per["precision"][key] = set_precision(p, g)
        per["recall"][key] = set_recall(p, g)
        per["accuracy"][key] = set_accuracy(p, g)
        per["micro_precision"][key] = per["precision"][key]
        per["micro_recall"][key] = per["recall"][key]
        per["micro_f1"][key] = _set_f1(p, g)
        inter += len(p & g)
        npred += len(p)
        ngold += len(g)
    n = len(keys)
    out = {name: mean_result(name, per[name]) for name in ("precision", "recall", "accuracy")}
    for name in ("micro_precision", "micro_recall", "micro_f1"):
        out[name] = make_result(name, name, (inter, npred, ngold, n), per[name])
    return out


def top_k(ranked: Sequence[Any] | None, k: int) -> list[str]:
    """First ``k`` ids of a ranking, or the union of the first ``k`` of each ranking in a list of rankings."""
    if not ranked:
        return []
    if isinstance(ranked, str):
        raise MetricError(f"expected a ranked list of ids, got the string {ranked!r}")
    if all(isinstance(r, str) or r is None for r in ranked):
        return [str(r) for r in ranked[:k] if r]
    out: list[str] = []
    for sub in ranked:
        if isinstance(sub, str):
            raise MetricError("a ranking mixes ids and lists of ids")
        out.extend(str(r) for r in list(sub or [])[:k] if r)
    return out


def recall_at_k(
    ranked_lists: Sequence[Sequence[Any] | None],
    gold_sets: Sequence[Iterable[str] | None],
    ks: Iterable[int] = DEFAULT_KS,
    ids: Sequence[str] | None = None,
) -> dict[str, MetricResult]:
    """Candidate recall at each k: |top_k ∩ g| / |g|, averaged over questions with a non-empty gold.

    Args:
        ranked_lists: Candidates per question, best first (or one ranking per mention, see :func:`top_k`).
        gold_sets: Gold entities per question.
        ks: Cut-offs.
        ids: Question ids.

    Returns:
        ``{"recall@k": MetricResult}`` for each k.
    """
    if len(ranked_lists) != len(gold_sets):
        raise MetricError(f"{len(ranked_lists)} rankings for {len(gold_sets)} gold sets")
    keys = item_ids(ids, len(ranked_lists))
    out: dict[str, MetricResult] = {}
    for k in ks:
        if int(k) < 1:
            raise MetricError(f"k must be >= 1, got {k}")
        per: dict[str, float] = {}
        for key, ranked, gold in zip(keys, ranked_lists, gold_sets, strict=True):
            g = as_set(gold)
            if g:
                per[key] = len(set(top_k(ranked, int(k))) & g) / len(g)
        out[f"recall@{int(k)}"] = mean_result(f"recall@{int(k)}", per)
    return out


def hit_at_1(
    ranked_lists: Sequence[Sequence[Any] | None],
    gold_sets: Sequence[Iterable[str] | None],
    ids: Sequence[str] | None = None,
) -> MetricResult:
    """``hit1``: 1 if the first ranked entity is a gold entity, over questions with a non-empty gold."""
    if len(ranked_lists) != len(gold_sets):
        raise MetricError(f"{len(ranked_lists)} rankings for {len(gold_sets)} gold sets")
    keys = item_ids(ids, len(ranked_lists))
    per: dict[str, float] = {}
    for key, ranked, gold in zip(keys, ranked_lists, gold_sets, strict=True):
        g = as_set(gold)
        if g:
            first = top_k(ranked, 1)
            per[key] = 1.0 if first and first[0] in g else 0.0
    return mean_result("hit1", per)
