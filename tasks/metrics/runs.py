"""Metrics of a run by metric family (``tasks.metrics.families``), from stored prediction rows and questions.

Families: ``linking`` (ELA: set precision/recall/accuracy + pooled micro P/R/F1 against ``gold_entities``)
and ``search`` (search-recall: recall@1/10/50 of the gold mentions' QIDs, over all questions with a gold
mention and over the KB-covered ones, named ``recall@k_covered``), ``qa`` (SQuAD EM/F1 and ``acc_sub``
against ``gold_answers``), ``strategyqa`` (accuracy and ``invalid_count``) and ``qald`` (answer-set macro F1,
both conventions) and ``tog`` (ToG/AnchorRAG ``hit1_tog``/``acc_tog`` next to strict ``em_strict``/``f1_set``,
``anchor_acc`` and the retrieval-vs-CoT split read from ``answered_by`` trajectory notes; ``tasks.metrics.tog``).
Items with an error count as empty predictions: errors are never silently dropped from a
denominator.

Extras read from the stored predictions of the ``qa``/``strategyqa`` methods: when items logged retrieved
documents in their trajectory (``{"kind": "note", "retrieved": [{"text": ...}, ...]}``), the ``qa`` family adds
``ndcg@k``, ``topk_acc@k`` (k in ``RETRIEVAL_KS``) and ``mrr_retrieval`` with answer-string relevance; when
items carry ``predicted_entities`` (ER from a linking run), ``hit1`` of the first linked entity; and the
per-item flags ``scores.fallback`` / ``scores.missing_articles`` are summed into ``fallback_count`` /
``missing_articles``, and ``scores.parse_failures`` (AnchorRAG/ToG outputs no parser could read) into
``parse_failures``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tasks.metrics.families import FAMILIES as FAMILIES  # re-exported: a family's metrics are FAMILIES[name].metrics
from tasks.metrics.families import RETRIEVAL_METRICS as RETRIEVAL_METRICS
from tasks.metrics.families import SEARCH_KS as SEARCH_KS
from tasks.metrics.families import answer_source as answer_source
from tasks.metrics.families import family
from tasks.metrics.families import ranked_from_answers as ranked_from_answers
from tasks.metrics.families import retrieved_texts as retrieved_texts
from tasks.metrics.registry import compute

FLAG_SUMS = {"fallback": "fallback_count", "missing_articles": "missing_articles", "parse_failures": "parse_failures"}


def metric_names(family_name: str, preds: Sequence[Mapping[str, Any]],
                 extra: Sequence[str] | None = None) -> list[str]:
    """The metrics of a family plus the method's ``extra`` metrics (``MetricFamily.metric_names``)."""
    return family(family_name).metric_names(preds, extra)


def per_item_scores(family_name: str, preds: Sequence[Mapping[str, Any]], questions: Sequence[Mapping[str, Any]],
                    extra: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    """``{question_id: {metric: score}}`` for the family's metrics (stored in ``predictions.scores``)."""
    fam = family(family_name)
    p, q = fam.prepare(preds, questions)
    per_item, _ = compute(fam.metric_names(p, extra), p, q)
    return per_item


def summary_metrics(family_name: str, preds: Sequence[Mapping[str, Any]], questions: Sequence[Mapping[str, Any]],
                    extra: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Summary rows ``{metric, value, n}`` recomputed from the stored predictions."""
    fam = family(family_name)
    p, q = fam.prepare(preds, questions)
    _, summary = compute(fam.metric_names(p, extra), p, q)
    for flag, metric in FLAG_SUMS.items():
        vals = [dict(r.get("scores") or {}).get(flag) for r in preds]
        if any(v is not None for v in vals):
            summary.append({"metric": metric, "value": float(sum(v or 0.0 for v in vals)), "n": len(preds)})
    return summary + fam.summary_extras(preds, p, q)
