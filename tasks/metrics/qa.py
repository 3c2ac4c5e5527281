"""QA answer metrics and retrieval metrics with answer-string relevance.

Answer metrics: SQuAD EM/F1, containment accuracy, StrategyQA; retrieval metrics: Entity Retrieval paper,
section 4.3.

Inputs: predicted answer strings, gold answer lists (aliases), retrieved document texts. Outputs:
:class:`~tasks.metrics.base.MetricResult` objects; values are fractions in [0, 1] (the official SQuAD script
and the Entity Retrieval scripts print them x100).

Reference for the StrategyQA and retrieval metrics (``ER`` below): repository ``shavarani/EntityRetrieval``,
commit ``198cdeea24a263b17bac7067bab9a364dae70516``.

- ``em`` / ``f1``: SQuAD v1.1 ``evaluate-v1.1.py`` exactly: ``normalize_answer`` = lowercase, drop
  ``string.punctuation`` characters, drop the words a/an/the, collapse whitespace; F1 over the bag of
  normalised tokens (``Counter`` intersection), 0 when nothing is shared; both maxed over the gold aliases.
  A question with no gold answer cannot be scored and is not counted (``n`` says how many were).
  A missing prediction (``None``) is the empty string.
- ``acc_sub``: 1 if some normalised gold is a substring of the normalised prediction (max over golds; the
  lenient "answer contained in the generation" accuracy of PopQA-style evaluations). A gold that normalises
  to ``""`` matches only an empty normalised prediction.
- ``strategyqa_acc`` / ``invalid_count``: ER ``src/eval.py`` ``QAEvaluate.extract_strategy_qa_answer`` (the
  same function is repeated in ``src/generate_table_2.py`` and ``src/generate_table_3.py``, which print the
  paper's tables): the prediction is stripped (``str.strip``) and lower-cased (``str.lower``); it is "yes" when
  it *starts with* ``yes``, else "no" when it starts with ``no``, else invalid ("Wrong!"). Accuracy is
  sklearn ``accuracy_score`` against the gold (an invalid answer is wrong), ``invalid_count`` the number of
  invalid answers (the paper's "Inv #" column). So ``"Not"`` is "no" and ``"'yes'"`` is invalid. A missing
  prediction (``None``; the reference has none) is the empty string, hence invalid. Gold: a boolean, or
  ``yes``/``no``/``true``/``false`` (any case).
- ``ndcg@k``, ``topk_acc@k``, ``mrr_retrieval``: ER ``src/model/retrievers/analyze_prefetched_documents.py``
  (``NDCG``, ``first_non_zero_index``, ``calculate_mrr``, ``create_plot``) over the ``has_answer`` flags that
  ER ``src/model/retrievers/prefetch_retrieval_pyserini.py`` ``text_has_answer`` stored with each document
  (identical copies in ``prefetch_retrieval_entity_linking.py`` and ``prefetch_retrieval_oracle_entities.py``):

  * relevance: r_i = 1 when the SQuAD-normalised text of some gold answer is a *substring* of the
    SQuAD-normalised document text (so ``start`` matches ``started`` and ``york`` matches ``yorkshire``; a gold
    that normalises to ``""`` is a substring of every document, so all its documents are relevant);
  * depth: the reference evaluates the first ``max_k`` documents of every question (its retrieval depth,
    shorter lists padded with non-relevant documents) and reports k in ``[1, 2, 3, 4, 5, 20, max_k]``: it never
    reports a k above its depth. Here the depth is the ``depth`` argument, by default the longest retrieved list
    among the scored questions (``eval_k`` of a RAG run); lists are cut to it and shorter ones count as padded
    with non-relevant documents. A metric @k with k > depth is *not reported*: its result has ``n == 0``,
    value ``None`` and no per-item scores (so an ``@100`` metric of a run that kept 20 passages is ``None``,
    never a value computed over 20 documents);
  * nDCG@k = DCG@k / IDCG@k, gain 2^r - 1, discount log2(i + 1) for rank i (1-based); the ideal ranking sorts
    *all* evaluated documents (every relevant document up to the depth, not only those in the top k) and is
    cut at k; 0 when no evaluated document is relevant;
  * MRR = 1 / rank of the first relevant document within the depth (0 if none); top-k accuracy ("RAcc@k") =
    1 if that rank is <= k;
  * every question with gold annotations is counted (the reference divides by the dataset length), including
    one whose gold answers normalise to ``""`` (all documents relevant) or that has an empty gold list (no
    document relevant). Questions whose gold is ``None`` (not annotated) are not scored.

- ``ndcg_token@k``, ``topk_acc_token@k``, ``mrr_retrieval_token``: extra metrics, not in the reference; the
  same rules except relevance, which requires whole tokens: the normalised token sequence of a gold answer
  must occur in the normalised token sequence of the document (``art`` does not match ``start``; the
  token-level ``has_answer`` idea of DPR). An empty gold token sequence occurs in every document.
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


def extract_factoid_qa_answer(prediction: str | None) -> str:
    """FactoidQA's answer extraction before EM/F1 (Entity Retrieval paper's scripts).

    Rule of ``extract_factoid_qa_answer`` in ``src/eval.py`` and ``src/generate_table_2.py`` of
    ``shavarani/EntityRetrieval`` at commit ``198cdeea24a263b17bac7067bab9a364dae70516``: strip and lower-case
    a copy; when it starts with "yes" the answer is "Yes", when it starts with "no" it is "No" (so "Norway"
    becomes "No"), an empty answer is "N/A"; anything else is kept as it was (unstripped, original case).
    A missing prediction (``None``, an item that failed) is the empty answer.
    """
    text = prediction or ""
    low = text.strip().lower()
    if low[:3] == "yes":
        return "Yes"
    if low[:2] == "no":
        return "No"
    return text if text else "N/A"


#: Per-dataset answer extraction applied before ``em``/``f1``/``acc_sub`` (the reference scripts' extractors;
#: EntityQuestions' strip + lower-case is a no-op under SQuAD normalisation, so it needs none here).
ANSWER_EXTRACTORS: dict[str, Callable[[str | None], str]] = {"factoidqa": extract_factoid_qa_answer}


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
    """The yes/no answer of a prediction, ``None`` when invalid.

    Rule of ``extract_strategy_qa_answer`` in ``src/eval.py`` of ``shavarani/EntityRetrieval`` at commit
    ``198cdeea24a263b17bac7067bab9a364dae70516``: ``prediction.strip().lower()``; ``True`` when that starts
    with ``yes``, else ``False`` when it starts with ``no``, else ``None`` ("Wrong!"). ``None`` input is ``""``.
    """
    text = (prediction or "").strip().lower()
    if text.startswith("yes"):
        return True
    if text.startswith("no"):
        return False
    return None


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
    """StrategyQA accuracy and invalid-answer count, as the Entity Retrieval paper's tables.

    Reference: ``shavarani/EntityRetrieval`` commit ``198cdeea24a263b17bac7067bab9a364dae70516``,
    ``src/generate_table_3.py`` ``evaluate`` (``accuracy_score`` and ``model_answers.count('Wrong!')``) over
    ``extract_strategy_qa_answer`` (see :func:`parse_yes_no`: starts with yes / no after strip + lower).

    Returns:
        ``strategyqa_acc`` (mean; an invalid answer is wrong) and ``invalid_count`` (number of predictions
        that start with neither yes nor no; per item 1.0 for invalid, 0.0 otherwise).

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
#: Relevance rules: ``substring`` (the reference's ``text_has_answer``) and ``token`` (whole tokens, extra).
RELEVANCE_RULES = ("substring", "token")
#: Metric-name stems per rule: (nDCG, top-k accuracy, MRR); ``@k`` follows the first two.
RETRIEVAL_NAMES = {
    "substring": ("ndcg", "topk_acc", "mrr_retrieval"),
    "token": ("ndcg_token", "topk_acc_token", "mrr_retrieval_token"),
}


def _contains_tokens(doc_tokens: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    if n == 0:
        return True
    if n > len(doc_tokens):
        return False
    first = needle[0]
    for i, tok in enumerate(doc_tokens[: len(doc_tokens) - n + 1]):
        if tok == first and list(doc_tokens[i : i + n]) == list(needle):
            return True
    return False


def has_answer(text: str | None, gold_answers: Iterable[str] | str) -> bool:
    """Whether the normalised text of some gold answer is a substring of the normalised document text.

    ``text_has_answer`` of ``src/model/retrievers/prefetch_retrieval_pyserini.py`` in ``shavarani/EntityRetrieval``
    at commit ``198cdeea24a263b17bac7067bab9a364dae70516``: SQuAD ``normalize_answer`` on both sides, then
    Python ``in`` (a gold normalising to ``""`` is in every text; a single string is one gold answer; no gold
    answer: ``False``).
    """
    golds = [gold_answers] if isinstance(gold_answers, str) else gold_answers
    doc = normalize_answer(text or "")
    return any(normalize_answer(g) in doc for g in golds)


def has_answer_token(text: str | None, gold_answers: Iterable[str] | str) -> bool:
    """Whether the normalised tokens of some gold answer occur, as whole consecutive tokens, in the document.

    Not the reference rule (see :func:`has_answer`); the relevance of the extra ``*_token`` metrics. A gold
    normalising to no token occurs in every document.
    """
    golds = [gold_answers] if isinstance(gold_answers, str) else gold_answers
    doc = normalize_answer(text or "").split()
    return any(_contains_tokens(doc, normalize_answer(g).split()) for g in golds)


def relevance(
    retrieved: Sequence[str | None], gold_answers: Iterable[str] | str, rule: str = "substring"
) -> list[int]:
    """Binary relevance r_i of each retrieved document.

    ``rule``: ``substring`` (:func:`has_answer`, the reference's ``text_has_answer``) or ``token``
    (:func:`has_answer_token`, whole tokens).

    Raises:
        MetricError: Unknown rule.
    """
    golds = [gold_answers] if isinstance(gold_answers, str) else list(gold_answers)
    if rule == "substring":
        needles = [normalize_answer(g) for g in golds]
        docs = (normalize_answer(t or "") for t in retrieved)
        return [1 if any(nd in d for nd in needles) else 0 for d in docs]
    if rule == "token":
        tneedles = [normalize_answer(g).split() for g in golds]
        tdocs = (normalize_answer(t or "").split() for t in retrieved)
        return [1 if any(_contains_tokens(d, nd) for nd in tneedles) else 0 for d in tdocs]
    raise MetricError(f"unknown relevance rule {rule!r}; known: {', '.join(RELEVANCE_RULES)}")


def _dcg(rels: Sequence[int]) -> float:
    return sum((2**r - 1) / math.log2(i + 2) for i, r in enumerate(rels))


def ndcg_at_k(rels: Sequence[int], k: int) -> float:
    """nDCG@k of the binary relevance list of all evaluated documents (rank order).

    ``NDCG.ndcg_at_k`` of ``src/model/retrievers/analyze_prefetched_documents.py`` in
    ``shavarani/EntityRetrieval`` at commit ``198cdeea24a263b17bac7067bab9a364dae70516``: gain 2^r - 1,
    discount log2(i + 1) for rank i (1-based); DCG of the top k divided by the DCG of the top k of *all*
    ``rels`` sorted by relevance (the ideal counts relevant documents below rank k too); 0 when no document of
    ``rels`` is relevant. ``ndcg_at_k([0, 1, 1], 2)`` = (1/log2 3) / (1 + 1/log2 3) = 0.387.
    """
    ideal = _dcg(sorted(rels, reverse=True)[:k])
    return _dcg(list(rels[:k])) / ideal if ideal > 0 else 0.0


def first_relevant_rank(rels: Sequence[int]) -> int:
    """1-based rank of the first relevant document, 0 when none is (reference ``first_non_zero_index`` + 1)."""
    for i, r in enumerate(rels):
        if r:
            return i + 1
    return 0


def reciprocal_rank(rels: Sequence[int]) -> float:
    """1 / rank of the first relevant document, 0 when none is relevant (one term of reference ``calculate_mrr``)."""
    rank = first_relevant_rank(rels)
    return 1.0 / rank if rank else 0.0


def retrieval_metrics(
    retrieved: Sequence[Sequence[str | None] | None],
    gold_answers: Sequence[Iterable[str] | str | None],
    ks: Iterable[int] = RETRIEVAL_KS,
    ids: Sequence[str] | None = None,
    depth: int | None = None,
    rule: str = "substring",
) -> dict[str, MetricResult]:
    """nDCG@k, top-k accuracy and MRR with answer-string relevance (module docstring: the reference rules).

    Args:
        retrieved: Retrieved document texts per question, in rank order.
        gold_answers: Gold answer aliases per question; ``None``: not annotated, the question is not scored.
        ks: Cut-offs for the ``@k`` metrics.
        ids: Question ids.
        depth: Number of documents evaluated per question (the reference's ``max_k``); default: the longest
            retrieved list among the scored questions. Longer lists are cut to it, shorter ones count as
            padded with non-relevant documents.
        rule: ``substring`` (the reference's relevance; names ``ndcg@k``, ``topk_acc@k``, ``mrr_retrieval``)
            or ``token`` (whole tokens; names ``ndcg_token@k``, ``topk_acc_token@k``, ``mrr_retrieval_token``).

    Returns:
        The ``@k`` metrics for each k and the MRR. An ``@k`` metric with k > depth is not reported: ``n == 0``,
        value ``None``, no per-item score.

    Raises:
        MetricError: Mismatched lengths, k < 1, negative depth, unknown rule, one string instead of a list.
    """
    if rule not in RETRIEVAL_NAMES:
        raise MetricError(f"unknown relevance rule {rule!r}; known: {', '.join(RELEVANCE_RULES)}")
    if len(retrieved) != len(gold_answers):
        raise MetricError(f"{len(retrieved)} retrieval lists for {len(gold_answers)} gold lists")
    keys = item_ids(ids, len(retrieved))
    ks = [int(k) for k in ks]
    if any(k < 1 for k in ks):
        raise MetricError(f"k must be >= 1, got {ks}")
    if depth is not None and depth < 0:
        raise MetricError(f"depth must be >= 0, got {depth}")
    scored: list[tuple[str, list[str | None], list[str]]] = []
    for key, docs, golds in zip(keys, retrieved, gold_answers, strict=True):
        if golds is None:
            continue
        if isinstance(docs, str):
            raise MetricError(f"{key}: retrieved documents must be a list of texts, got one string")
        scored.append((key, list(docs or []), _golds(golds)))
    if depth is None:
        depth = max((len(d) for _, d, _ in scored), default=0)
    ndcg_name, topk_name, mrr_name = RETRIEVAL_NAMES[rule]
    ndcg: dict[int, dict[str, float]] = {k: {} for k in ks}
    topk: dict[int, dict[str, float]] = {k: {} for k in ks}
    mrr: dict[str, float] = {}
    reported = [k for k in ks if k <= depth]
    for key, docs, golds in scored:
        rels = relevance(docs[:depth], golds, rule)
        rank = first_relevant_rank(rels)
        mrr[key] = 1.0 / rank if rank else 0.0
        for k in reported:
            ndcg[k][key] = ndcg_at_k(rels, k)
            topk[k][key] = 1.0 if 0 < rank <= k else 0.0
    out = {f"{ndcg_name}@{k}": mean_result(f"{ndcg_name}@{k}", ndcg[k]) for k in ks}
    out.update({f"{topk_name}@{k}": mean_result(f"{topk_name}@{k}", topk[k]) for k in ks})
    out[mrr_name] = mean_result(mrr_name, mrr)
    return out
