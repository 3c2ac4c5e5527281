"""QA answer metrics and retrieval metrics with answer-string relevance.

Answer metrics: SQuAD EM/F1, containment accuracy, StrategyQA; retrieval metrics: Entity Retrieval paper,
section 4.3.

Inputs: predicted answer strings, gold answer lists (aliases), retrieved document texts. Outputs:
:class:`~tasks.metrics.base.MetricResult` objects; values are fractions in [0, 1] (the official SQuAD script
prints them x100).

- ``em`` / ``f1``: SQuAD v1.1 ``evaluate-v1.1.py`` exactly: ``normalize_answer`` = lowercase, drop
  ``string.punctuation`` characters, drop the words a/an/the, collapse whitespace; F1 over the bag of
  normalised tokens (``Counter`` intersection), 0 when nothing is shared; both maxed over the gold aliases.
  A question with no gold answer cannot be scored and is not counted (``n`` says how many were).
  A missing prediction (``None``) is the empty string.
- ``acc_sub``: 1 if some normalised gold is a substring of the normalised prediction (max over golds; the
  lenient "answer contained in the generation" accuracy of PopQA-style evaluations). A gold that normalises
  to ``""`` matches only an empty normalised prediction.
- ``strategyqa_acc`` / ``invalid_count``: the prediction, after ``normalize_answer``, must be exactly ``yes``
  or ``no``; anything else is invalid (counted by ``invalid_count``, as the paper's "Inv #" column) and wrong.
  Gold: a boolean, or ``yes``/``no``/``true``/``false`` (any case).
- ``ndcg@k``, ``mrr_retrieval``, ``topk_acc@k``: a retrieved document is relevant (r_i = 1) when its
  normalised token sequence contains the normalised token sequence of some gold answer (whole tokens, so
  ``art`` does not match ``start``; the token-level ``has_answer`` test of DPR, which the EntityQuestions
  evaluation uses). nDCG@k = DCG@k / IDCG@k with gain 2^r - 1 and discount log2(i + 1); as defined in the
  paper, the ideal ranking is that of the relevant documents among the top k retrieved (|REL_k|), so a
  question with no relevant document in the top k scores 0. MRR = 1 / rank of the first relevant retrieved
  document (0 if none), top-k accuracy = 1 if a relevant document is in the top k. All are averaged over
  questions with at least one non-empty normalised gold answer.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tasks.metrics.base import MetricError, MetricResult, item_ids, make_result, mean_result

RETRIEVAL_KS = (1, 2, 3, 4, 5, 20, 100)
_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


# ----------------------------------------------------------------------------------------------- SQuAD
def normalize_answer(s: str) -> str:
    """SQuAD v1.1 normalisation: lower, remove punctuation, remove articles, fix whitespace (this order)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match_score(prediction: str, ground_truth: str) -> bool:
    """Whether the normalised strings are equal."""
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def f1_score(prediction: str, ground_truth: str) -> float:
    """Token F1 between normalised prediction and gold (0 when no token is shared)."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(ground_truth).split()
    common = Counter(pred_tokens) & Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def metric_max_over_ground_truths(
    metric_fn: Callable[[str, str], float | bool], prediction: str, ground_truths: Iterable[str]
) -> float:
    """Best score of ``prediction`` against any gold alias.

    Raises:
        MetricError: No gold answer.
    """
    scores = [float(metric_fn(prediction, gt)) for gt in ground_truths]
    if not scores:
        raise MetricError("no gold answer to compare with")
    return max(scores)


def substring_match_score(prediction: str, ground_truth: str) -> bool:
    """Whether the normalised gold is contained in the normalised prediction (empty gold: only in empty)."""
    gold = normalize_answer(ground_truth)
    pred = normalize_answer(prediction)
    if not gold:
        return not pred
    return gold in pred


def _golds(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value if v is not None]


def _answer_metric(
    name: str,
    fn: Callable[[str, str], float | bool],
    predictions: Sequence[str | None],
    gold_answers: Sequence[Iterable[str] | None],
    ids: Sequence[str] | None,
) -> MetricResult:
    if len(predictions) != len(gold_answers):
        raise MetricError(f"{len(predictions)} predictions for {len(gold_answers)} gold lists")
    keys = item_ids(ids, len(predictions))
    per: dict[str, float] = {}
    for key, pred, golds in zip(keys, predictions, gold_answers, strict=True):
        golds = _golds(golds)
        if golds:
            per[key] = metric_max_over_ground_truths(fn, pred or "", golds)
    return mean_result(name, per)


def em(
    predictions: Sequence[str | None],
    gold_answers: Sequence[Iterable[str] | None],
    ids: Sequence[str] | None = None,
) -> MetricResult:
    """``em``: SQuAD exact match, max over gold aliases, mean over questions with a gold answer."""
    return _answer_metric("em", exact_match_score, predictions, gold_answers, ids)


def f1(
    predictions: Sequence[str | None],
    gold_answers: Sequence[Iterable[str] | None],
    ids: Sequence[str] | None = None,
) -> MetricResult:
    """``f1``: SQuAD token F1, max over gold aliases, mean over questions with a gold answer."""
    return _answer_metric("f1", f1_score, predictions, gold_answers, ids)


def acc_sub(
    predictions: Sequence[str | None],
    gold_answers: Sequence[Iterable[str] | None],
    ids: Sequence[str] | None = None,
) -> MetricResult:
    """``acc_sub``: normalised gold contained in the normalised prediction, max over golds."""
    return _answer_metric("acc_sub", substring_match_score, predictions, gold_answers, ids)


# ------------------------------------------------------------------------------------------- StrategyQA
def parse_yes_no(prediction: str | None) -> bool | None:
    """``True`` for "yes", ``False`` for "no" (after ``normalize_answer``), ``None`` for anything else."""
    norm = normalize_answer(prediction or "")
    return {"yes": True, "no": False}.get(norm)


def gold_bool(value: Any) -> bool:
    """A StrategyQA gold answer as a boolean.

    Args:
        value: ``bool``, or a string ``yes``/``no``/``true``/``false`` (any case), or a one-element list of
            those (the ``gold_answers`` column).

    Raises:
        MetricError: Anything else.
    """
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        norm = value.strip().lower()
        if norm in ("yes", "true"):
            return True
        if norm in ("no", "false"):
            return False
    raise MetricError(f"not a boolean gold answer: {value!r}")


def strategyqa_metrics(
    predictions: Sequence[str | None],
    gold_answers: Sequence[Any],
    ids: Sequence[str] | None = None,
) -> dict[str, MetricResult]:
    """StrategyQA accuracy and invalid-answer count.

    Returns:
        ``strategyqa_acc`` (mean; an invalid answer is wrong) and ``invalid_count`` (number of predictions
        that are neither yes nor no; per item 1.0 for invalid, 0.0 otherwise).

    Raises:
        MetricError: A gold answer that is not a boolean.
    """
    if len(predictions) != len(gold_answers):
        raise MetricError(f"{len(predictions)} predictions for {len(gold_answers)} gold answers")
    keys = item_ids(ids, len(predictions))
    acc: dict[str, float] = {}
    inv: dict[str, float] = {}
    for key, pred, gold in zip(keys, predictions, gold_answers, strict=True):
        g = gold_bool(gold)
        p = parse_yes_no(pred)
        acc[key] = 1.0 if p is not None and p == g else 0.0
        inv[key] = 1.0 if p is None else 0.0
    return {
        "strategyqa_acc": mean_result("strategyqa_acc", acc),
        "invalid_count": make_result("invalid_count", "count", (sum(inv.values()), len(inv)), inv),
    }


# ------------------------------------------------------------------------------------------- retrieval
def _contains_tokens(doc_tokens: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    if n == 0 or n > len(doc_tokens):
        return False
    first = needle[0]
    for i, tok in enumerate(doc_tokens[: len(doc_tokens) - n + 1]):
        if tok == first and list(doc_tokens[i : i + n]) == list(needle):
            return True
    return False


def has_answer(text: str | None, gold_answers: Iterable[str]) -> bool:
    """Whether a document contains a normalised gold answer as a whole-token sequence."""
    doc = normalize_answer(text or "").split()
    return any(_contains_tokens(doc, normalize_answer(g).split()) for g in gold_answers)


def relevance(retrieved: Sequence[str | None], gold_answers: Iterable[str]) -> list[int]:
    """Binary relevance r_i of each retrieved document (answer-string relevance)."""
    needles = [t for t in (normalize_answer(g).split() for g in gold_answers) if t]
    out = []
    for text in retrieved:
        doc = normalize_answer(text or "").split()
        out.append(1 if any(_contains_tokens(doc, nd) for nd in needles) else 0)
    return out


def ndcg_at_k(rels: Sequence[int], k: int) -> float:
    """nDCG@k of a binary relevance list, ideal = the relevant documents of the top k moved to the top.

    Gain 2^r - 1, discount log2(i + 1) for rank i (1-based); 0 when no relevant document is in the top k.
    """
    top = list(rels[:k])
    dcg = sum((2**r - 1) / math.log2(i + 2) for i, r in enumerate(top))
    ideal = sorted(top, reverse=True)
    idcg = sum((2**r - 1) / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def reciprocal_rank(rels: Sequence[int]) -> float:
    """1 / rank of the first relevant document, 0 when none is relevant."""
    for i, r in enumerate(rels):
        if r:
            return 1.0 / (i + 1)
    return 0.0


def retrieval_metrics(
    retrieved: Sequence[Sequence[str | None] | None],
    gold_answers: Sequence[Iterable[str] | None],
    ks: Iterable[int] = RETRIEVAL_KS,
    ids: Sequence[str] | None = None,
) -> dict[str, MetricResult]:
    """nDCG@k, top-k accuracy and MRR with answer-string relevance.

    Args:
        retrieved: Retrieved document texts per question, in rank order.
        gold_answers: Gold answer aliases per question.
        ks: Cut-offs for ``ndcg@k`` and ``topk_acc@k``.
        ids: Question ids.

    Returns:
        ``ndcg@k`` and ``topk_acc@k`` for each k, and ``mrr_retrieval``; questions whose gold answers all
        normalise to nothing are not counted.
    """
    if len(retrieved) != len(gold_answers):
        raise MetricError(f"{len(retrieved)} retrieval lists for {len(gold_answers)} gold lists")
    keys = item_ids(ids, len(retrieved))
    ks = [int(k) for k in ks]
    if any(k < 1 for k in ks):
        raise MetricError(f"k must be >= 1, got {ks}")
    ndcg: dict[int, dict[str, float]] = {k: {} for k in ks}
    topk: dict[int, dict[str, float]] = {k: {} for k in ks}
    mrr: dict[str, float] = {}
    for key, docs, golds in zip(keys, retrieved, gold_answers, strict=True):
        golds = [g for g in _golds(golds) if normalize_answer(g)]
        if not golds:
            continue
        if isinstance(docs, str):
            raise MetricError(f"{key}: retrieved documents must be a list of texts, got one string")
        rels = relevance(list(docs or []), golds)
        mrr[key] = reciprocal_rank(rels)
        for k in ks:
            ndcg[k][key] = ndcg_at_k(rels, k)
            topk[k][key] = 1.0 if any(rels[:k]) else 0.0
    out = {f"ndcg@{k}": mean_result(f"ndcg@{k}", ndcg[k]) for k in ks}
    out.update({f"topk_acc@{k}": mean_result(f"topk_acc@{k}", topk[k]) for k in ks})
    out["mrr_retrieval"] = mean_result("mrr_retrieval", mrr)
    return out
