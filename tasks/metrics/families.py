"""Metric families: what a run of each family stores and how its rows are prepared, its stage rule and headline.

A run's metric family is ``Method.metric_family``, or its dataset task's ``TASK_FAMILIES`` entry. One object per
family holds everything that depends on it: the metrics every run of the family stores, the rows it prepares from
the stored predictions and questions before scoring, the summary rows it adds, its failure-stage family
(``tasks.metrics.stages``) with the per-item headline score that says ``correct``, and its ``oracle_*`` metric.
``tasks.metrics.runs`` and ``tasks.runs.failure_stages`` read these objects; no code branches on a family's name.

Adding a family: one subclass of :class:`MetricFamily` here and its entry in :data:`FAMILIES` (plus its metrics
in ``tasks.metrics.registry`` and, for a new stage family, its stage rule in ``tasks.metrics.stages``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tasks.metrics.alignment import ALIGNMENT_METRICS, score_summaries
from tasks.metrics.qa import RETRIEVAL_KS
from tasks.metrics.qald import QALD_METRICS
from tasks.metrics.registry import compute
from tasks.metrics.stages import ORACLE_FROM, STAGES, Stage
from tasks.metrics.tog import TOG_METRICS
from tasks.metrics.trajectory import read_notes

Rows = list[dict[str, Any]]
SEARCH_KS = (1, 10, 50)
# the reference script's rule (substring relevance) under the paper's names, then linkedqa's whole-token variant
RETRIEVAL_METRICS = [*(f"ndcg@{k}" for k in RETRIEVAL_KS), *(f"topk_acc@{k}" for k in RETRIEVAL_KS), "mrr_retrieval",
                     *(f"ndcg_token@{k}" for k in RETRIEVAL_KS), *(f"topk_acc_token@{k}" for k in RETRIEVAL_KS),
                     "mrr_retrieval_token"]


def ranked_from_answers(answers: Sequence[str] | None) -> list[list[str]]:
    """Per-mention rankings from search-recall's ``"<mention index>:<QID>"`` answers (rank order kept)."""
    per: dict[int, list[str]] = {}
    for a in answers or []:
        idx, _, qid = a.partition(":")
        per.setdefault(int(idx), []).append(qid)
    return [per[i] for i in sorted(per)]


def retrieved_texts(trajectory: str | None) -> list[str] | None:
    """Texts of the documents an item logged as retrieved (the last ``retrieved`` note), or None."""
    return read_notes(trajectory).retrieved_texts


def answer_source(trajectory: str | None) -> str | None:
    """How an item's answer was obtained (the last ``answered_by`` note: ``retrieval`` or ``cot``), or None."""
    return read_notes(trajectory).answered_by


@dataclass(frozen=True)
class MetricFamily:
    """One metric family (the base behaviour: rows scored as stored).

    Attributes:
        name: The family's name (``Method.metric_family``, ``TASK_FAMILIES`` values).
        metrics: The metrics every run of the family stores.
        stage_family: Its failure-stage family (``tasks.metrics.stages.STAGES`` key), None without a stage rule.
        headline: The per-item score that says an item is ``correct`` (its stage rule's last stage).
    """

    name: str
    metrics: tuple[str, ...]
    stage_family: str | None = None
    headline: str | None = None
    #: Whether ``oracle_<headline>`` is stored: the headline a perfect choice among what was retrieved would reach.
    HAS_ORACLE: ClassVar[bool] = True
    #: Linking stages: the candidates are read from the answers (``<mention>:<QID>``) and the gold from the gold
    #: mentions, not from the search calls replayed and ``gold_entities``.
    STAGES_FROM_ANSWERS: ClassVar[bool] = False
    #: Text QA stages: whether retrieval is judged (the retrieved documents against the gold answers).
    STAGES_JUDGE_RETRIEVAL: ClassVar[bool] = True
    #: KGQA stages: QALD's exact answer set (every gold answer reached, linked answers scored) instead of Hit@1.
    STAGES_EXACT_SET: ClassVar[bool] = False

    def metric_names(self, preds: Sequence[Mapping[str, Any]], extra: Sequence[str] | None = None) -> list[str]:
        """The family's metrics plus the method's ``extra`` metrics (None: callers that do not know the method)."""
        names = list(self.metrics)
        return names + [m for m in extra or [] if m not in names]

    def prepare(self, preds: Sequence[Mapping[str, Any]],
                questions: Sequence[Mapping[str, Any]]) -> tuple[Rows, Rows]:
        """The rows the family's metrics read (derived fields added), from the stored predictions and questions."""
        return list(preds), list(questions)

    def summary_extras(self, preds: Sequence[Mapping[str, Any]], prepared: Rows, questions: Rows) -> Rows:
        """Summary rows the family adds to its metrics' (none by default)."""
        return []

    def oracle_metrics(self, stages: Sequence[Stage]) -> Rows:
        """``oracle_<headline>``: the share of items at or past the stage family's ``ORACLE_FROM`` stage.

        That is the headline score a perfect choice among what the method retrieved would reach (every item whose
        gold was among its candidates, documents or facts counted correct), so ``oracle - headline`` is what the LLM
        lost and ``1 - oracle`` what retrieval lost. None for a run without stages or whose items retrieved nothing
        (:meth:`retrieved_anything`).
        """
        if not self.HAS_ORACLE or self.stage_family is None or not stages or not self.retrieved_anything(stages):
            return []
        first = STAGES[self.stage_family].index(ORACLE_FROM[self.stage_family])
        value = sum(1 for s in stages if s.rank >= first) / len(stages)
        return [{"metric": f"oracle_{self.headline}", "value": value, "n": len(stages)}]

    def retrieved_anything(self, stages: Sequence[Stage]) -> bool:
        """Whether the run's items retrieved something to choose from (an oracle is defined)."""
        return True


class LinkingFamily(MetricFamily):
    """ELA: set precision/recall/accuracy and pooled micro P/R/F1 against ``gold_entities``."""


class SearchFamily(MetricFamily):
    """search-recall: recall@1/10/50 of the gold mentions' QIDs.

    Over every question with a gold mention, and over the KB-covered ones (``recall@k_covered``), with the covered
    share (``kb_coverage``).
    """

    #: search-recall chooses nothing: its headline is the oracle.
    HAS_ORACLE: ClassVar[bool] = False
    STAGES_FROM_ANSWERS: ClassVar[bool] = True

    def prepare(self, preds, questions):
        """Each row's per-mention rankings (``ranked_entities``); the gold: the gold mentions' QIDs."""
        p2 = [{**p, "ranked_entities": ranked_from_answers(p.get("answers"))} for p in preds]
        q2 = []
        for q in questions:
            mention_qids = [m["qid"] for m in (q.get("gold_mentions") or []) if m.get("qid") and m.get("text")]
            q2.append({**q, "gold_entities": mention_qids or None})
        return p2, q2

    def summary_extras(self, preds, prepared, questions):
        """``recall@k_covered`` over the questions whose gold entity the KB names, and ``kb_coverage``."""
        covered = {r["question_id"] for r in preds if dict(r.get("scores") or {}).get("gold_in_kb") == 1.0}
        pc = [r for r in prepared if r["question_id"] in covered]
        _, cov = compute(list(self.metrics), pc, questions) if pc else (None, [])
        return [*({**m, "metric": m["metric"] + "_covered"} for m in cov),
                {"metric": "kb_coverage", "value": len(covered) / len(preds) if preds else 0.0, "n": len(preds)}]


class TextQAFamily(MetricFamily):
    """Text QA stage family: an oracle only when some item retrieved documents (not closed-book)."""

    def retrieved_anything(self, stages):
        """Whether some item logged retrieved documents."""
        return any("retrieved" in s.evidence for s in stages)


class QAFamily(TextQAFamily):
    """SQuAD EM/F1 and ``acc_sub`` against ``gold_answers``.

    Retrieval metrics (answer-string relevance) when items logged retrieved documents, ``hit1`` of the first linked
    entity when they carry predicted entities.
    """

    def metric_names(self, preds, extra=None):
        """The family's metrics and the method's extras; with the method unknown, the extras the rows imply."""
        if extra is not None:
            return super().metric_names(preds, extra)
        names = list(self.metrics)  # the method unknown: its extras inferred from the rows
        if any(p.get("retrieved_texts") is not None for p in preds):
            names += RETRIEVAL_METRICS
        if any(p.get("predicted_entities") for p in preds):
            names.append("hit1")
        return names

    def prepare(self, preds, questions):
        """Each row's retrieved documents' texts (``retrieved_texts``), on every row once one has them."""
        p2 = []
        for p in preds:
            texts = retrieved_texts(p.get("trajectory"))
            p2.append({**p, "retrieved_texts": texts} if texts is not None else dict(p))
        if any("retrieved_texts" in p for p in p2):  # every row needs the key once one has it
            p2 = [{**p, "retrieved_texts": p.get("retrieved_texts") or []} for p in p2]
        return p2, list(questions)


class StrategyQAFamily(TextQAFamily):
    """StrategyQA: accuracy and ``invalid_count``; a yes/no answer is in no document, so no retrieval stage."""

    STAGES_JUDGE_RETRIEVAL: ClassVar[bool] = False


class AlignmentFamily(MetricFamily):
    """Entity alignment: Hits@k and MRR, plus the candidate-score summaries."""

    def summary_extras(self, preds, prepared, questions):
        """The candidate-score summaries (``tasks.metrics.alignment.score_summaries``)."""
        return score_summaries(preds)


class KGQAFamily(MetricFamily):
    """KGQA stage family: an oracle only when some item grounded the question (a method that retrieves facts)."""

    def retrieved_anything(self, stages):
        """Whether some item grounded its question (a method that retrieves facts)."""
        return not all(s.evidence.get("grounded") is None for s in stages)


class QaldFamily(KGQAFamily):
    """QALD: answer-set macro F1, both conventions."""

    STAGES_EXACT_SET: ClassVar[bool] = True


class TogFamily(KGQAFamily):
    """ToG/AnchorRAG: ``hit1_tog``/``acc_tog`` next to strict ``em_strict``/``f1_set``.

    Also ``anchor_acc`` and the retrieval-vs-CoT split read from ``answered_by`` trajectory notes
    (``tasks.metrics.tog``).
    """

    def prepare(self, preds, questions):
        """Each row's answer source (``answer_source``: retrieval or CoT)."""
        return [{**p, "answer_source": answer_source(p.get("trajectory"))} for p in preds], list(questions)


#: Every metric family by name.
FAMILIES: dict[str, MetricFamily] = {f.name: f for f in (
    LinkingFamily("linking", ("precision", "recall", "accuracy", "micro_precision", "micro_recall", "micro_f1"),
                  "linking", "accuracy"),
    SearchFamily("search", tuple(f"recall@{k}" for k in SEARCH_KS), "linking", "recall@50"),
    QAFamily("qa", ("em", "f1", "acc_sub"), "textqa", "em"),
    StrategyQAFamily("strategyqa", ("strategyqa_acc", "invalid_count"), "textqa", "strategyqa_acc"),
    QaldFamily("qald", tuple(QALD_METRICS), "kgqa", "qald_macro_f1_mean"),
    AlignmentFamily("alignment", tuple(ALIGNMENT_METRICS), "alignment", "hits@1"),
    TogFamily("tog", tuple(TOG_METRICS), "kgqa", "hit1_tog"),
)}


def family(name: str) -> MetricFamily:
    """The metric family of that name.

    Raises:
        KeyError: No such family (the known ones listed).
    """
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"no metric family {name!r}; families: {', '.join(FAMILIES)}") from None
