"""Metric registry: metric names (docs/architecture.md#cli-contract) -> functions over joined prediction/question items.

Inputs: ``predictions`` rows and ``questions`` rows (dicts shaped like the tables in ``storage.schemas``, or a
pyarrow table / polars frame of them), joined on ``question_id``. Outputs: per-item scores (for the
``predictions.scores`` map) and summary rows ``{metric, value, n}`` (for the ``metrics`` table); or the
mergeable :class:`~tasks.metrics.base.MetricResult` objects themselves (:func:`compute_results`), which
combine across shards with :func:`~tasks.metrics.base.merge_results`.

Which columns each metric reads:

- ``precision``, ``recall``, ``accuracy``, ``micro_*``: ``predicted_entities`` vs ``gold_entities``.
- ``recall@k``, ``hit1``: ``ranked_entities`` if the row has it, else ``predicted_entities``, vs
  ``gold_entities``.
- ``em``, ``f1``, ``acc_sub``: ``answer`` vs ``gold_answers``.
- ``strategyqa_acc``, ``invalid_count``: ``answer`` vs ``gold_answers`` (one boolean).
- ``ndcg@k``, ``topk_acc@k``, ``mrr_retrieval`` (reference substring relevance) and the extra
  ``ndcg_token@k``, ``topk_acc_token@k``, ``mrr_retrieval_token`` (whole-token relevance): ``retrieved_texts``
  (required) vs ``gold_answers``; the evaluation depth is the longest ``retrieved_texts`` list among the items
  and an ``@k`` metric with k above it is not reported (value ``None``, ``n`` 0; see ``tasks.metrics.qa``).
- ``qald_*``: ``answers`` (else ``[answer]``; a bare QID there is an entity, any other value a literal unless it
  is a Wikidata IRI) vs the union of ``gold_answer_qids`` (entities) and the literal gold answers:
  ``meta.gold_literals`` when the question's ``meta`` (JSON object) has that key (the QALD and LC-QuAD loaders
  write it: their ``gold_answers`` also hold the entity answers' labels), else ``gold_answers`` (a literal spelled
  like an id, ``"L1"``, stays a literal); not scored when both columns are null. GERBIL's gold set is every value
  of the gold SPARQL result: see ``tasks.metrics.qald``.
- ``tog`` family (``hit1_tog``, ``acc_tog``, their ``_answerable``/``_lenient``/``_togeval`` variants,
  ``em_strict``, ``f1_set``: ``answer`` vs ``gold_answers``; a prediction row with a non-null ``error`` is
  scored as having no response), ``anchor_acc`` (``predicted_entities`` vs ``gold_entities``),
  ``hit1_tog_retrieval``, ``hit1_tog_cot``, ``cot_rate`` (also ``answer_source``, which callers add from the
  trajectory): see ``tasks.metrics.tog``.

A question whose gold column is null (not annotated) is not scored by that metric and not counted in ``n``.
``ranked_entities`` and ``retrieved_texts`` are not columns of the ``predictions`` table: callers that
have them (the ``search-recall`` and retrieval runs) add them to the rows they pass in. Any metric name of the
form ``recall@k``, ``ndcg@k``, ``topk_acc@k``, ``ndcg_token@k`` or ``topk_acc_token@k`` is accepted, not only the
pre-registered k.

Errors raise :class:`~tasks.metrics.base.MetricError`: unknown metric, a prediction whose question is missing,
repeated question ids, malformed gold values.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tasks.metrics.alignment import ALIGNMENT_METRICS, alignment_group
from tasks.metrics.base import MetricError, MetricResult, merge_results
from tasks.metrics.linking import DEFAULT_KS, LINKING_METRICS, hit_at_1, linking_metrics, recall_at_k
from tasks.metrics.qa import ANSWER_EXTRACTORS, RETRIEVAL_KS, acc_sub, em, f1, retrieval_metrics, strategyqa_metrics
from tasks.metrics.qald import QALD_METRICS, entity_iri, qald_metrics, qids_as_entities
from tasks.metrics.tog import TOG_METRICS, tog_metrics

__all__ = [
    "METRICS",
    "EvalItem",
    "MetricError",
    "compute",
    "compute_results",
    "get_metric",
    "join_items",
    "merge_results",
    "metric_names",
    "per_item_scores",
    "summarize",
]


@dataclass(frozen=True)
class EvalItem:
    """One prediction joined with its question: everything any metric reads.

    ``None`` in a gold field means "not annotated" (the item is skipped by metrics reading that field).
    """

    question_id: str
    predicted_entities: list[str] | None = None
    ranked_entities: list[Any] | None = None
    answer: str | None = None
    answers: list[str] | None = None
    retrieved_texts: list[str] | None = None
    has_retrieved: bool = False
    gold_entities: list[str] | None = None
    gold_answers: list[str] | None = None
    gold_answer_qids: list[str] | None = None
    answer_source: str | None = None
    gold_literals: list[str] | None = None
    error: str | None = None
    dataset: str | None = None


# ----------------------------------------------- metric groups (metrics one pass computes; not a run's family)
def _ids(items: Sequence[EvalItem]) -> list[str]:
    return [it.question_id for it in items]


def _group_linking(items: Sequence[EvalItem], _ks: tuple[int, ...]) -> dict[str, MetricResult]:
    sel = [it for it in items if it.gold_entities is not None]
    return linking_metrics([it.predicted_entities for it in sel], [it.gold_entities for it in sel], _ids(sel))


def _ranked(it: EvalItem) -> list[Any] | None:
    return it.ranked_entities if it.ranked_entities is not None else it.predicted_entities


def _group_recall(items: Sequence[EvalItem], ks: tuple[int, ...]) -> dict[str, MetricResult]:
    sel = [it for it in items if it.gold_entities is not None]
    return recall_at_k([_ranked(it) for it in sel], [it.gold_entities for it in sel], ks, _ids(sel))


def _group_hit1(items: Sequence[EvalItem], _ks: tuple[int, ...]) -> dict[str, MetricResult]:
    sel = [it for it in items if it.gold_entities is not None]
    return {"hit1": hit_at_1([_ranked(it) for it in sel], [it.gold_entities for it in sel], _ids(sel))}


def _extracted(it: EvalItem) -> str | None:
    """The item's answer after its dataset's reference answer extraction (``qa.ANSWER_EXTRACTORS``)."""
    extract = ANSWER_EXTRACTORS.get(it.dataset or "")
    return extract(it.answer) if extract else it.answer


def _group_answer(fn: Callable[..., MetricResult], items: Sequence[EvalItem], _ks: tuple[int, ...]):
    sel = [it for it in items if it.gold_answers is not None]
    res = fn([_extracted(it) for it in sel], [it.gold_answers for it in sel], _ids(sel))
    return {res.name: res}


def _group_strategyqa(items: Sequence[EvalItem], _ks: tuple[int, ...]) -> dict[str, MetricResult]:
    sel = [it for it in items if it.gold_answers]
    return strategyqa_metrics([it.answer for it in sel], [it.gold_answers for it in sel], _ids(sel))


def _group_retrieval(items: Sequence[EvalItem], ks: tuple[int, ...],
                     rule: str = "substring") -> dict[str, MetricResult]:
    missing = [it.question_id for it in items if not it.has_retrieved]
    if missing:
        raise MetricError(
            f"retrieval metrics need 'retrieved_texts' in the prediction rows; missing for {len(missing)} "
            f"items, e.g. {missing[:3]}"
        )
    sel = [it for it in items if it.gold_answers is not None]
    return retrieval_metrics(
        [it.retrieved_texts or [] for it in sel], [it.gold_answers for it in sel], ks, _ids(sel), rule=rule
    )


_group_retrieval_token = functools.partial(_group_retrieval, rule="token")


def _qald_pred(it: EvalItem) -> list[Any]:
    """The item's answers, typed: a bare QID is an entity (the ``answers`` column writes entity answers as QIDs)."""
    if it.answers is not None:
        return qids_as_entities(it.answers)
    return qids_as_entities([it.answer]) if it.answer else []


def _qald_gold(it: EvalItem) -> list[Any] | None:
    """The gold answer set: ``gold_answer_qids`` as entities, the literal answers as given."""
    literals = it.gold_literals if it.gold_literals is not None else it.gold_answers
    if it.gold_answer_qids is None and literals is None:
        return None
    try:
        entities = [None if q is None else entity_iri(q) for q in it.gold_answer_qids or []]
    except MetricError as exc:
        raise MetricError(f"{it.question_id}: gold_answer_qids: {exc}") from exc
    return [*entities, *(literals or [])]


def _group_qald(items: Sequence[EvalItem], _ks: tuple[int, ...]) -> dict[str, MetricResult]:
    sel = [it for it in items if _qald_gold(it) is not None]
    return qald_metrics([_qald_pred(it) for it in sel], [_qald_gold(it) for it in sel], _ids(sel))


def _group_tog(items: Sequence[EvalItem], _ks: tuple[int, ...]) -> dict[str, MetricResult]:
    return tog_metrics([None if it.error else it.answer for it in items], [it.gold_answers for it in items],
                       [it.predicted_entities for it in items], [it.gold_entities for it in items],
                       [it.answer_source for it in items], _ids(items))


_Group = Callable[[Sequence[EvalItem], tuple[int, ...]], dict[str, MetricResult]]

#: Fixed names -> the group that computes them.
_FIXED: dict[str, _Group] = {
    **dict.fromkeys(LINKING_METRICS, _group_linking),
    "hit1": _group_hit1,
    "em": functools.partial(_group_answer, em),
    "f1": functools.partial(_group_answer, f1),
    "acc_sub": functools.partial(_group_answer, acc_sub),
    "strategyqa_acc": _group_strategyqa,
    "invalid_count": _group_strategyqa,
    "mrr_retrieval": _group_retrieval,
    "mrr_retrieval_token": _group_retrieval_token,
    **dict.fromkeys(QALD_METRICS, _group_qald),
    **dict.fromkeys(ALIGNMENT_METRICS, alignment_group),
    **dict.fromkeys(TOG_METRICS, _group_tog),
}
#: ``prefix@k`` names -> the group that computes them.
_PER_K: dict[str, _Group] = {
    "recall": _group_recall,
    "ndcg": _group_retrieval,
    "topk_acc": _group_retrieval,
    "ndcg_token": _group_retrieval_token,
    "topk_acc_token": _group_retrieval_token,
}
_K_NAME = re.compile(r"^(recall|ndcg|topk_acc|ndcg_token|topk_acc_token)@([1-9][0-9]*)$")


def _resolve(name: str) -> tuple[_Group, int | None]:
    if name in _FIXED:
        return _FIXED[name], None
    m = _K_NAME.match(name)
    if m:
        return _PER_K[m.group(1)], int(m.group(2))
    raise MetricError(
        f"unknown metric {name!r}; known: {', '.join(metric_names())} "
        "(and any recall|ndcg|topk_acc|ndcg_token|topk_acc_token@k)"
    )


def _single(name: str, items: Sequence[EvalItem]) -> MetricResult:
    group, k = _resolve(name)
    return group(items, (k,) if k is not None else RETRIEVAL_KS)[name]


def get_metric(name: str) -> Callable[[Sequence[EvalItem]], MetricResult]:
    """The function computing metric ``name`` over joined items (any ``<prefix>@k`` of the docstring accepted).

    Raises:
        MetricError: Unknown name.
    """
    _resolve(name)
    return functools.partial(_single, name)


def metric_names() -> list[str]:
    """Pre-registered metric names."""
    return list(METRICS)


#: Registered metrics: name -> function(items) -> MetricResult.
METRICS: dict[str, Callable[[Sequence[EvalItem]], MetricResult]] = {
    name: functools.partial(_single, name)
    for name in [
        *_FIXED,
        *(f"recall@{k}" for k in DEFAULT_KS),
        *(f"ndcg@{k}" for k in RETRIEVAL_KS),
        *(f"topk_acc@{k}" for k in RETRIEVAL_KS),
        *(f"ndcg_token@{k}" for k in RETRIEVAL_KS),
        *(f"topk_acc_token@{k}" for k in RETRIEVAL_KS),
    ]
}


# ------------------------------------------------------------------------------------------------ rows
def _rows(data: Any) -> list[Mapping[str, Any]]:
    if hasattr(data, "to_pylist"):
        return data.to_pylist()
    if hasattr(data, "to_dicts"):
        return data.to_dicts()
    return list(data)


def _list(value: Any, field: str, qid: str) -> list[Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as exc:
                raise MetricError(f"{qid}: {field} is not a JSON list: {value[:80]!r}") from exc
            if isinstance(parsed, list):
                return parsed
        raise MetricError(f"{qid}: {field} must be a list, got the string {value[:80]!r}")
    return list(value)


def _gold_literals(meta: Any, qid: str) -> list[Any] | None:
    """``meta.gold_literals`` of a question row (``meta``: a JSON object string or a dict), else None."""
    if meta is None or meta == "":
        return None
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except json.JSONDecodeError as exc:
            raise MetricError(f"{qid}: meta is not JSON: {meta[:80]!r}") from exc
    if not isinstance(meta, Mapping) or meta.get("gold_literals") is None:
        return None
    return _list(meta["gold_literals"], "meta.gold_literals", qid)


def join_items(predictions: Any, questions: Any) -> list[EvalItem]:
    """Join prediction rows with question rows on ``question_id``.

    Args:
        predictions: Rows (dicts), a pyarrow table or a polars frame of predictions.
        questions: Rows of the questions those predictions answer (extra questions are ignored).

    Returns:
        One item per prediction, in prediction order.

    Raises:
        MetricError: Repeated question ids on either side, or a prediction whose question is missing.
    """
    qrows: dict[str, Mapping[str, Any]] = {}
    for q in _rows(questions):
        qid = str(q["question_id"])
        if qid in qrows:
            raise MetricError(f"question_id {qid!r} repeats in the questions")
        qrows[qid] = q
    items: list[EvalItem] = []
    seen: set[str] = set()
    for p in _rows(predictions):
        qid = str(p["question_id"])
        if qid in seen:
            raise MetricError(f"question_id {qid!r} repeats in the predictions")
        seen.add(qid)
        q = qrows.get(qid)
        if q is None:
            raise MetricError(f"prediction for unknown question {qid!r}")
        items.append(
            EvalItem(
                question_id=qid,
                predicted_entities=_list(p.get("predicted_entities"), "predicted_entities", qid),
                ranked_entities=_list(p.get("ranked_entities"), "ranked_entities", qid),
                answer=p.get("answer"),
                answers=_list(p.get("answers"), "answers", qid),
                retrieved_texts=_list(p.get("retrieved_texts"), "retrieved_texts", qid),
                has_retrieved="retrieved_texts" in p,
                gold_entities=_list(q.get("gold_entities"), "gold_entities", qid),
                gold_answers=_list(q.get("gold_answers"), "gold_answers", qid),
                gold_answer_qids=_list(q.get("gold_answer_qids"), "gold_answer_qids", qid),
                answer_source=p.get("answer_source"),
                gold_literals=_gold_literals(q.get("meta"), qid),
                error=p.get("error"),
                dataset=p.get("dataset") or q.get("dataset"),
            )
        )
    return items


def compute_results(names: Iterable[str], predictions: Any, questions: Any) -> dict[str, MetricResult]:
    """Compute metrics as mergeable results (each metric group is computed once).

    Args:
        names: Metric names.
        predictions: Prediction rows (see :func:`join_items`).
        questions: Question rows.

    Returns:
        ``{name: MetricResult}`` in the order of ``names``.

    Raises:
        MetricError: Unknown metric or bad inputs.
    """
    names = list(dict.fromkeys(names))
    plan: dict[_Group, set[int]] = {}
    for name in names:
        group, k = _resolve(name)
        plan.setdefault(group, set())
        if k is not None:
            plan[group].add(k)
    items = join_items(predictions, questions)
    computed: dict[str, MetricResult] = {}
    for group, ks in plan.items():
        computed.update(group(items, tuple(sorted(ks)) or RETRIEVAL_KS))
    return {name: computed[name] for name in names}


def per_item_scores(results: Mapping[str, MetricResult]) -> dict[str, dict[str, float]]:
    """Pivot results to ``{question_id: {metric: score}}`` (items a metric did not score are left out)."""
    out: dict[str, dict[str, float]] = {}
    for name, res in results.items():
        for qid, score in res.per_item.items():
            out.setdefault(qid, {})[name] = score
    return out


def summarize(results: Mapping[str, MetricResult]) -> list[dict[str, Any]]:
    """Summary rows ``{"metric", "value", "n"}`` in the order of ``results``."""
    return [{"metric": name, "value": res.value, "n": res.n} for name, res in results.items()]


def compute(
    names: Iterable[str], predictions: Any, questions: Any
) -> tuple[dict[str, dict[str, float]], list[dict[str, Any]]]:
    """Compute metrics over predictions joined with their questions.

    Args:
        names: Metric names (docs/architecture.md#cli-contract).
        predictions: Prediction rows (dicts, pyarrow table or polars frame).
        questions: Question rows.

    Returns:
        ``(per_item, summary)``: ``{question_id: {metric: score}}`` and ``[{"metric", "value", "n"}, ...]``.

    Raises:
        MetricError: Unknown metric or bad inputs.
    """
    results = compute_results(names, predictions, questions)
    return per_item_scores(results), summarize(results)
