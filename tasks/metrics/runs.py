"""Metrics of a run by method family, computed from stored prediction rows and their questions.

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

from tasks.metrics.alignment import ALIGNMENT_METRICS, score_summaries
from tasks.metrics.qa import RETRIEVAL_KS
from tasks.metrics.qald import QALD_METRICS
from tasks.metrics.registry import compute
from tasks.metrics.tog import TOG_METRICS
from tasks.metrics.trajectory import read_notes

SEARCH_KS = (1, 10, 50)
#: A run's metric family (``Method.metric_family``, or the dataset task's ``TASK_FAMILIES`` entry) -> the
#: metrics every run of that family stores. "Family" means only this; the registry's per-pass "groups" differ.
FAMILIES: dict[str, list[str]] = {
    "linking": ["precision", "recall", "accuracy", "micro_precision", "micro_recall", "micro_f1"],
    "search": [f"recall@{k}" for k in SEARCH_KS],
    "qa": ["em", "f1", "acc_sub"],
    "strategyqa": ["strategyqa_acc", "invalid_count"],
    "qald": list(QALD_METRICS),
    "alignment": list(ALIGNMENT_METRICS),
    "tog": list(TOG_METRICS),
}


def ranked_from_answers(answers: Sequence[str] | None) -> list[list[str]]:
    """Per-mention rankings from search-recall's ``"<mention index>:<QID>"`` answers (rank order kept)."""
    per: dict[int, list[str]] = {}
    for a in answers or []:
        idx, _, qid = a.partition(":")
        per.setdefault(int(idx), []).append(qid)
    return [per[i] for i in sorted(per)]


# the reference script's rule (substring relevance) under the paper's names, then linkedqa's whole-token variant
RETRIEVAL_METRICS = [*(f"ndcg@{k}" for k in RETRIEVAL_KS), *(f"topk_acc@{k}" for k in RETRIEVAL_KS), "mrr_retrieval",
                     *(f"ndcg_token@{k}" for k in RETRIEVAL_KS), *(f"topk_acc_token@{k}" for k in RETRIEVAL_KS),
                     "mrr_retrieval_token"]
FLAG_SUMS = {"fallback": "fallback_count", "missing_articles": "missing_articles", "parse_failures": "parse_failures"}


def retrieved_texts(trajectory: str | None) -> list[str] | None:
    """Texts of the documents an item logged as retrieved (the last ``retrieved`` note), or None."""
    return read_notes(trajectory).retrieved_texts


def answer_source(trajectory: str | None) -> str | None:
    """How an item's answer was obtained (the last ``answered_by`` note: ``retrieval`` or ``cot``), or None."""
    return read_notes(trajectory).answered_by


def metric_names(family: str, preds: Sequence[Mapping[str, Any]], extra: Sequence[str] | None = None) -> list[str]:
    """The metrics of ``family`` plus the method's ``extra`` metrics.

    With ``extra=None`` (callers that do not know the method) the ``qa`` extras are inferred from the rows:
    retrieval metrics when items logged retrieved documents, ``hit1`` when they carry predicted entities.
    """
    names = list(FAMILIES[family])
    if extra is not None:
        return names + [m for m in extra if m not in names]
    if family == "qa":
        if any(p.get("retrieved_texts") is not None for p in preds):
            names += RETRIEVAL_METRICS
        if any(p.get("predicted_entities") for p in preds):
            names.append("hit1")
    return names


def _prepare(family: str, preds: Sequence[Mapping[str, Any]], questions: Sequence[Mapping[str, Any]]):
    if family == "qa":
        p2 = []
        for p in preds:
            texts = retrieved_texts(p.get("trajectory"))
            p2.append({**p, "retrieved_texts": texts} if texts is not None else dict(p))
        if any("retrieved_texts" in p for p in p2):  # every row needs the key once one has it
            p2 = [{**p, "retrieved_texts": p.get("retrieved_texts") or []} for p in p2]
        return p2, list(questions)
    if family == "tog":
        return [{**p, "answer_source": answer_source(p.get("trajectory"))} for p in preds], list(questions)
    if family != "search":
        return list(preds), list(questions)
    p2 = [{**p, "ranked_entities": ranked_from_answers(p.get("answers"))} for p in preds]
    q2 = []
    for q in questions:
        mention_qids = [m["qid"] for m in (q.get("gold_mentions") or []) if m.get("qid") and m.get("text")]
        q2.append({**q, "gold_entities": mention_qids or None})
    return p2, q2


def per_item_scores(family: str, preds: Sequence[Mapping[str, Any]], questions: Sequence[Mapping[str, Any]],
                    extra: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    """``{question_id: {metric: score}}`` for the family's metrics (stored in ``predictions.scores``)."""
    p, q = _prepare(family, preds, questions)
    per_item, _ = compute(metric_names(family, p, extra), p, q)
    return per_item


def summary_metrics(family: str, preds: Sequence[Mapping[str, Any]], questions: Sequence[Mapping[str, Any]],
                    extra: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Summary rows ``{metric, value, n}`` recomputed from the stored predictions."""
    p, q = _prepare(family, preds, questions)
    _, summary = compute(metric_names(family, p, extra), p, q)
    for flag, metric in FLAG_SUMS.items():
        vals = [dict(r.get("scores") or {}).get(flag) for r in preds]
        if any(v is not None for v in vals):
            summary.append({"metric": metric, "value": float(sum(v or 0.0 for v in vals)), "n": len(preds)})
    if family == "alignment":
        summary += score_summaries(preds)
    if family == "search":
        covered = {r["question_id"] for r in preds if dict(r.get("scores") or {}).get("gold_in_kb") == 1.0}
        pc = [r for r in p if r["question_id"] in covered]
        _, cov = compute(FAMILIES[family], pc, q) if pc else (None, [])
        summary += [{**m, "metric": m["metric"] + "_covered"} for m in cov]
        summary.append({"metric": "kb_coverage", "value": len(covered) / len(preds) if preds else 0.0,
                        "n": len(preds)})
    return summary
