"""The failure-stage rules (``tasks.metrics.stages``) branch by branch; whole runs are checked against hand labels
in ``tests/e2e/test_failure_stages.py`` and for every method by the methods matrix."""

from __future__ import annotations

import pytest

from tasks.metrics.families import family
from tasks.metrics.stages import (
    STAGES,
    Stage,
    alignment_stage,
    kgqa_stage,
    linking_stage,
    norm,
    textqa_stage,
)


def test_linking_takes_the_first_failing_stage_of_any_gold_entity():
    named = {"Q1", "Q2", "Q3"}
    assert linking_stage(["Q1", "Q9"], ["Q1"], {"Q1"}, named, False).stage == "gold_not_in_kb"
    assert linking_stage(["Q1", "Q2"], ["Q1"], {"Q1"}, named, False).stage == "not_retrieved"
    assert linking_stage(["Q1", "Q2"], ["Q1"], None, named, False).stage == "not_retrieved"  # never searched
    assert linking_stage(["Q1", "Q2"], ["Q1"], {"Q1", "Q2"}, named, False).stage == "not_chosen"
    s = linking_stage(["Q1"], ["Q1", "Q3"], {"Q1", "Q3"}, named, False)
    assert (s.stage, s.evidence["extra"]) == ("extra_entities", ["Q3"])
    assert linking_stage(["Q1"], ["Q1"], {"Q1"}, named, True).stage == "correct"


def test_textqa_retrieval_is_judged_only_for_methods_that_retrieve():
    docs = ["Oslo is the capital of Norway.", "Bergen is a city."]
    assert textqa_stage(["Oslo"], docs, False).stage == "not_answered"
    assert textqa_stage(["Oslo"], docs, False).evidence["containing"] == [0]
    assert textqa_stage(["Trondheim"], docs, False).stage == "answer_not_retrieved"
    s = textqa_stage(["Oslo"], [], False, why_none="no linked entity")  # ER with nothing to read
    assert (s.stage, s.evidence["why"]) == ("answer_not_retrieved", "no linked entity")
    assert textqa_stage(["Oslo"], None, False).stage == "not_answered"  # closed-book: no retrieval stage
    assert textqa_stage(["Oslo"], None, True).stage == "correct"


def test_alignment_separates_candidate_generation_from_the_pick():
    assert alignment_stage(["t7"], ["t1", "t2"], ["t1"], False).stage == "gold_not_candidate"
    s = alignment_stage(["t2"], ["t1", "t2"], ["t1"], False)
    assert (s.stage, s.evidence["gold_rank"]) == ("not_picked", 1)
    assert alignment_stage(["t1"], ["t1", "t2"], ["t1"], True).stage == "correct"


def test_kgqa_stages():
    kw = {"answer_text": "", "need_all": True, "linked": True, "correct": False}
    assert kgqa_stage(["Q1"], ["Q2"], ["A"], [], {"A"}, set(), **kw).stage == "topic_not_grounded"
    assert kgqa_stage([], ["Q2"], ["A"], [], {"A"}, set(), **kw).stage == "not_answered"  # no topic known
    assert kgqa_stage(["Q1"], ["Q1"], ["A", "B"], [], {"A"}, set(), **kw).stage == "answer_not_reachable"
    hit1 = {**kw, "need_all": False}
    assert kgqa_stage(["Q1"], ["Q1"], ["A", "B"], [], {"A"}, set(), **hit1).stage == "not_answered"
    named = {**kw, "answer_text": "It is  Bernhard RIEMANN."}
    s = kgqa_stage(["Q1"], ["Q1"], ["A"], ["Bernhard Riemann"], {"A"}, set(), **named)
    assert (s.stage, s.evidence["named_in_text"]) == ("answer_unlinked", ["Bernhard Riemann"])
    assert kgqa_stage(["Q1"], ["Q1"], [], ["709"], set(), {norm("709")}, **kw).stage == "not_answered"
    assert kgqa_stage(["Q1"], ["Q1"], [], ["709"], set(), set(), **kw).stage == "answer_not_reachable"
    counted = kgqa_stage(["Q1"], ["Q1"], [], ["8"], set(), set(), **kw, judge_reach=False)
    assert counted.stage == "not_answered" and "not judged" in counted.evidence["reachability"]
    assert kgqa_stage(["Q1"], None, ["A"], [], None, set(), **kw).stage == "not_answered"  # closed-book


def test_kgqa_blank_gold_alias_is_flagged_where_it_matches_every_answer():
    hit1 = {"answer_text": "", "need_all": False, "linked": False, "blank_matches_all": True}
    s = kgqa_stage(["Q1"], ["Q1"], [], ["", "Paris"], set(), set(), **hit1, correct=True)
    assert (s.stage, s.evidence["blank_gold_alias"]) == ("correct", True)
    # not correct (an errored item): any facts reach a blank alias, so the item is past retrieval
    s = kgqa_stage(["Q1"], ["Q1"], [], [" ", "Paris"], set(), set(), **hit1, correct=False)
    assert (s.stage, s.evidence["blank_gold_alias"]) == ("not_answered", True)
    s = kgqa_stage(["Q1"], ["Q2"], [], ["", "Paris"], set(), set(), **hit1, correct=False)
    assert (s.stage, s.evidence["blank_gold_alias"]) == ("topic_not_grounded", True)
    past_retrieval = kgqa_stage(["Q1"], ["Q1"], [], [""], set(), set(), **hit1, correct=False)
    assert family("tog").oracle_metrics([s, past_retrieval]) == [{"metric": "oracle_hit1_tog", "value": 0.5, "n": 2}]
    # no blank alias, or QALD's exact set (where "" is a literal answer like any other): no flag, no shortcut
    s = kgqa_stage(["Q1"], ["Q1"], [], ["Paris"], set(), set(), **hit1, correct=False)
    assert s.stage == "answer_not_reachable" and "blank_gold_alias" not in s.evidence
    s = kgqa_stage(["Q1"], ["Q1"], [], [""], set(), set(), answer_text="", need_all=True, linked=True, correct=False)
    assert s.stage == "answer_not_reachable" and "blank_gold_alias" not in s.evidence


@pytest.mark.parametrize("family", list(STAGES))
def test_every_family_ends_in_correct_and_ranks_follow_the_list(family):
    order = STAGES[family]
    assert order[-1] == "correct" and len(set(order)) == len(order)
    assert [Stage(family, s).rank for s in order] == list(range(len(order)))


def test_oracle_is_left_out_where_nothing_is_chosen_or_retrieved():
    linking = [Stage("linking", s) for s in ("gold_not_in_kb", "not_chosen", "extra_entities", "correct")]
    assert family("linking").oracle_metrics(linking) == [{"metric": "oracle_accuracy", "value": 0.75, "n": 4}]
    assert family("search").oracle_metrics(linking) == []  # search-recall: its headline is the oracle
    closed_book = [Stage("textqa", "not_answered", {}), Stage("textqa", "correct", {})]
    assert family("qa").oracle_metrics(closed_book) == []
    no_facts = [Stage("kgqa", "not_answered", {"grounded": None})]
    assert family("qald").oracle_metrics(no_facts) == []
    assert family("qald").oracle_metrics([]) == []


def test_the_sql_check_knows_the_oracle_stages():
    """``sql/checks/metrics_reproducible.sql`` recomputes ``oracle_*`` from the stage rows with the ranks of
    :data:`ORACLE_FROM`; both must name the same stages."""
    import re

    from storage.catalog import SQL_DIR
    from tasks.metrics.stages import ORACLE_FROM

    sql = (SQL_DIR / "checks" / "metrics_reproducible.sql").read_text()
    values = dict(re.findall(r"\('(\w+)', (\d+)\)", sql.split("oracle_from")[1].split(")\n")[0] + ")"))
    assert {f: int(r) for f, r in values.items()} == {f: STAGES[f].index(s) for f, s in ORACLE_FROM.items()}
