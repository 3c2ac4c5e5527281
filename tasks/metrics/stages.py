"""Failure stages: where each item of a run failed, one ordered list of stages per family of methods.

The papers split a method's errors by hand (ELA: candidate retrieval against the choice among candidates; Entity
Retrieval: finding the salient entity's article against answering from it; EA-Agent: candidate generation against
the pick). These rules make that split for every item of every run, from what the run stored: its predictions and
their per-item scores, the trajectories, the questions and the KB (never the LLM again). An item's stage is the
first stage of its family's list that it fails; ``correct`` is decided by the run's own headline score, so the
``correct`` count of a run equals that metric's hits and the stages of a run add up to the metric's ``n``.

Families (docs/metrics.md#failure-stages states each rule next to the metric it refines):

* ``linking`` (``ela``; ``search-recall``, which retrieves and chooses nothing): ``gold_not_in_kb`` (a gold
  entity has no name in the run's KB, so no search can find it) -> ``not_retrieved`` (a gold entity is not among
  the candidates the method was shown) -> ``not_chosen`` (shown, not chosen) -> ``extra_entities`` (every gold
  entity chosen, plus wrong ones) -> ``correct`` (headline: ``accuracy``, the exact set; search-recall:
  ``recall@50``, every gold mention's entity among its candidates);
* ``textqa`` (``bm25-rag``, ``dense-rag``, ``er``, ``closed-book`` on QA datasets): ``answer_not_retrieved`` (no
  retrieved document contains a gold answer, the reference scripts' substring relevance; ER: also no entity linked
  or its article missing, said in the evidence) -> ``not_answered`` -> ``correct`` (headline: ``em``;
  StrategyQA: ``strategyqa_acc``); a method that retrieves nothing (closed-book) has no retrieval stage;
* ``alignment`` (``ea-embed``, ``ea-agent``): ``gold_not_candidate`` (the gold target is not in the generator's
  stored candidate list) -> ``not_picked`` -> ``correct`` (headline: ``hits@1``).

* ``kgqa`` (``kg-1hop``, ``react-kg``, ``anchorrag``, ``tog``, ``cot``, closed-book on KGQA): ``topic_not_grounded``
  (none of the entities the method grounded the question in, its main entity or anchors, is a gold topic entity)
  -> ``answer_not_reachable`` (the gold answers are not among the facts the method retrieved: every one for QALD's
  exact set, one for ToG's Hit@1) -> ``not_answered`` -> ``answer_unlinked`` (QALD: a gold answer is named in the
  answer text but not among the linked answers that are scored) -> ``correct`` (headline: ``qald_macro_f1_mean``
  = 1, the exact answer set; ToG family: ``hit1_tog``); a method that retrieves no facts (closed-book, cot) has
  neither a grounding nor a reachability stage, a question without gold topic entities no grounding stage, and a
  count or yes/no question (QALD's ``aggregation`` or boolean answers, no gold QIDs) no reachability stage: no
  single fact states such an answer. Under ToG's Hit@1 a blank gold alias matches every answer (the reference
  scripts' substring test), so an item whose gold has one is reached by whatever facts it retrieved, and every
  stage of such an item says ``blank_gold_alias: true`` in its evidence: its ``correct`` needs no right answer.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tasks.metrics.qa import relevance

#: Version of the stage rules, stored in every stage row (``linkedqa eval --write`` recomputes rows of other rules).
#: The ``oracle_*`` metrics follow from the stages: a new version comes with a new ``METRICS_FORMAT``.
STAGES_FORMAT = 2

#: Stage family -> its stages, in the order an item passes them (the last is ``correct``).
STAGES: dict[str, tuple[str, ...]] = {
    "linking": ("gold_not_in_kb", "not_retrieved", "not_chosen", "extra_entities", "correct"),
    "textqa": ("answer_not_retrieved", "not_answered", "correct"),
    "alignment": ("gold_not_candidate", "not_picked", "correct"),
    "kgqa": ("topic_not_grounded", "answer_not_reachable", "not_answered", "answer_unlinked", "correct"),
}
#: Stage family -> the first stage an item reaches with what it needed retrieved: the share of items at or past it
#: is the score a perfect choice among the retrieved candidates, documents or facts would reach (``oracle_*``).
ORACLE_FROM: dict[str, str] = {"linking": "not_chosen", "textqa": "not_answered", "alignment": "not_picked",
                               "kgqa": "not_answered"}


@dataclass(frozen=True)
class Stage:
    """An item's stage in its family's list, and the evidence that decided it."""

    family: str
    stage: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        """Position of the stage in its family's list (0 = the earliest failure)."""
        return STAGES[self.family].index(self.stage)


def linking_stage(gold: Sequence[str], chosen: Sequence[str], shown: Collection[str] | None,
                  named_in_kb: Collection[str], correct: bool) -> Stage:
    """The linking stage of one item.

    Args:
        gold: The gold entities.
        chosen: The entities the method predicted.
        shown: The candidates the method was shown (``None``: the item never searched).
        named_in_kb: The QIDs the run's KB names (label, alias or Wikipedia title).
        correct: The item's headline hit (``accuracy`` / ``recall@1`` is 1).
    """
    gold, chosen, shown_set = list(dict.fromkeys(gold)), list(dict.fromkeys(chosen)), set(shown or ())
    ev: dict[str, Any] = {"gold": gold, "chosen": chosen}
    if correct:
        return Stage("linking", "correct", ev)
    missing = [g for g in gold if g not in named_in_kb]
    if missing:
        return Stage("linking", "gold_not_in_kb", {**ev, "not_in_kb": missing})
    unseen = [g for g in gold if g not in shown_set]
    if unseen:
        return Stage("linking", "not_retrieved", {**ev, "not_shown": unseen, "shown": len(shown_set)})
    unchosen = [g for g in gold if g not in chosen]
    if unchosen:
        return Stage("linking", "not_chosen", {**ev, "not_chosen": unchosen})
    return Stage("linking", "extra_entities", {**ev, "extra": [c for c in chosen if c not in gold]})


def textqa_stage(gold_answers: Sequence[str], retrieved: Sequence[str] | None, correct: bool,
                 why_none: str | None = None) -> Stage:
    """The text-QA stage of one item.

    Args:
        gold_answers: The gold answer strings.
        retrieved: Texts of the documents the method retrieved (``None``: a method without retrieval).
        correct: The item's headline hit.
        why_none: Why nothing was retrieved, when the method says (ER: no entity linked, article missing).
    """
    ev: dict[str, Any] = {}
    if retrieved is not None:
        hits = [i for i, r in enumerate(relevance(list(retrieved), list(gold_answers))) if r]
        ev = {"retrieved": len(retrieved), "containing": hits[:10], **({"why": why_none} if why_none else {})}
    if correct:
        return Stage("textqa", "correct", ev)
    if retrieved is not None and not ev["containing"]:
        return Stage("textqa", "answer_not_retrieved", ev)
    return Stage("textqa", "not_answered", ev)


def alignment_stage(gold: Sequence[str], candidates: Sequence[str], chosen: Sequence[str], correct: bool) -> Stage:
    """The alignment stage of one item: the gold target among the generator's candidates, then the pick."""
    rank = next((i for i, c in enumerate(candidates) if c in set(gold)), None)
    ev = {"gold": list(gold), "gold_rank": rank, "candidates": len(candidates), "picked": chosen[0] if chosen else None}
    if correct:
        return Stage("alignment", "correct", ev)
    if rank is None:
        return Stage("alignment", "gold_not_candidate", ev)
    return Stage("alignment", "not_picked", ev)


def stage_counts(family: str, stages: Sequence[str]) -> dict[str, int]:
    """Items per stage of ``family``, in the family's order (every stage listed, 0 included)."""
    return {s: sum(1 for x in stages if x == s) for s in STAGES[family]}


def kgqa_stage(topic: Sequence[str], grounded: Sequence[str] | None, gold_ids: Sequence[str],
               gold_texts: Sequence[str], reached_ids: Collection[str] | None, reached_texts: Collection[str],
               answer_text: str, need_all: bool, linked: bool, correct: bool, judge_reach: bool = True,
               blank_matches_all: bool = False) -> Stage:
    """The KGQA stage of one item.

    Args:
        topic: The question's gold topic entities (empty: not known, the grounding stage is skipped).
        grounded: The entities the method grounded the question in (main entity, anchors); ``None``: a method
            that retrieves nothing (closed-book, cot), which has no grounding and no reachability stage.
        gold_ids: Gold answer QIDs (empty for text-only gold).
        gold_texts: Gold answer labels and literal values.
        reached_ids: QIDs among the facts the method retrieved (subjects and objects).
        reached_texts: Normalised labels and values of those facts (:func:`norm`).
        answer_text: The method's answer text.
        need_all: Whether the headline needs every gold answer (QALD's exact set) or one (ToG's Hit@1).
        linked: Whether the headline scores linked answers (QALD: QIDs), so a gold answer named in the text but
            not linked is an ``answer_unlinked``.
        correct: The item's headline hit.
        judge_reach: False when no fact can state the gold answer (a count or a yes/no computed over facts): the
            reachability stage is skipped for the item.
        blank_matches_all: Whether the headline counts a blank gold label as matching every answer (ToG's Hit@1);
            then a gold with one is reachable from any facts and the evidence says ``blank_gold_alias``.
    """
    ev: dict[str, Any] = {"topic": list(topic), "grounded": None if grounded is None else list(grounded)}
    blank = blank_matches_all and any(not norm(g) for g in gold_texts)
    if blank:
        ev["blank_gold_alias"] = True
    if correct:
        return Stage("kgqa", "correct", ev)
    if grounded is not None:
        if topic and not set(grounded) & set(topic):
            return Stage("kgqa", "topic_not_grounded", ev)
        ids_hit = [g for g in gold_ids if g in (reached_ids or ())]
        texts_hit = [g for g in gold_texts if norm(g) in reached_texts]
        # gold labels include aliases: a text-only gold is reached by any of its labels
        reachable = (len(ids_hit) == len(gold_ids) if need_all else bool(ids_hit)) if gold_ids else bool(texts_hit)
        reachable = reachable or blank
        ev.update({"reached": len(reached_ids or ()), "gold_reached": ids_hit or texts_hit})
        if not judge_reach:
            ev["reachability"] = "not judged: the answer is computed over facts (a count or yes/no)"
        elif not reachable:
            return Stage("kgqa", "answer_not_reachable", ev)
    said = [g for g in gold_texts if norm(g) and norm(g) in norm(answer_text)]
    if linked and said:
        return Stage("kgqa", "answer_unlinked", {**ev, "named_in_text": said[:5]})
    return Stage("kgqa", "not_answered", ev)


def norm(text: str | None) -> str:
    """Case-folded, whitespace-collapsed text, for matching gold labels against facts and answers."""
    return " ".join(str(text or "").casefold().split())
