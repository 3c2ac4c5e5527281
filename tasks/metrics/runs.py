"""Metrics of a run by method family, computed from stored prediction rows and their questions.

Families: ``linking`` (ELA: set precision/recall/accuracy + pooled micro P/R/F1 against ``gold_entities``)
and ``search`` (search-recall: recall@1/10/50 of the gold mentions' QIDs, over all questions with a gold
mention and over the KB-covered ones, named ``recall@k_covered``). Items with an error count as empty
predictions: errors are never silently dropped from a denominator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tasks.metrics.qald import QALD_METRICS
from tasks.metrics.registry import compute

SEARCH_KS = (1, 10, 50)
FAMILIES: dict[str, list[str]] = {
    "linking": ["precision", "recall", "accuracy", "micro_precision", "micro_recall", "micro_f1"],
    "search": [f"recall@{k}" for k in SEARCH_KS],
    "qa": ["em", "f1", "acc_sub"],
    "strategyqa": ["strategyqa_acc", "invalid_count"],
    "qald": list(QALD_METRICS),
}


def ranked_from_answers(answers: Sequence[str] | None) -> list[list[str]]:
    """Per-mention rankings from search-recall's ``"<mention index>:<QID>"`` answers (rank order kept)."""
    per: dict[int, list[str]] = {}
    for a in answers or []:
        idx, _, qid = a.partition(":")
        per.setdefault(int(idx), []).append(qid)
    return [per[i] for i in sorted(per)]


def _prepare(family: str, preds: Sequence[Mapping[str, Any]], questions: Sequence[Mapping[str, Any]]):
    if family != "search":
        return list(preds), list(questions)
    p2 = [{**p, "ranked_entities": ranked_from_answers(p.get("answers"))} for p in preds]
    q2 = []
    for q in questions:
        mention_qids = [m["qid"] for m in (q.get("gold_mentions") or []) if m.get("qid") and m.get("text")]
        q2.append({**q, "gold_entities": mention_qids or None})
    return p2, q2


def per_item_scores(family: str, preds: Sequence[Mapping[str, Any]],
                    questions: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``{question_id: {metric: score}}`` for the family's metrics (stored in ``predictions.scores``)."""
    p, q = _prepare(family, preds, questions)
    per_item, _ = compute(FAMILIES[family], p, q)
    return per_item


def summary_metrics(family: str, preds: Sequence[Mapping[str, Any]],
                    questions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Summary rows ``{metric, value, n}`` recomputed from the stored predictions."""
    p, q = _prepare(family, preds, questions)
    _, summary = compute(FAMILIES[family], p, q)
    if family == "search":
        covered = {r["question_id"] for r in preds if dict(r.get("scores") or {}).get("gold_in_kb") == 1.0}
        pc = [r for r in p if r["question_id"] in covered]
        _, cov = compute(FAMILIES[family], pc, q) if pc else (None, [])
        summary += [{**m, "metric": m["metric"] + "_covered"} for m in cov]
        summary.append({"metric": "kb_coverage", "value": len(covered) / len(preds) if preds else 0.0,
                        "n": len(preds)})
    return summary
