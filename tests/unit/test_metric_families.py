"""One object per metric family: its metrics, headline, stage family and oracle; every method's family exists."""

from __future__ import annotations

import pytest

from tasks.methods.base import TASK_FAMILIES
from tasks.methods.registry import METHODS
from tasks.metrics.families import FAMILIES, MetricFamily, family
from tasks.metrics.registry import compute
from tasks.metrics.stages import ORACLE_FROM, STAGES


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_family_names_its_stage_rule_and_headline(name: str) -> None:
    fam = FAMILIES[name]
    assert isinstance(fam, MetricFamily) and fam.name == name and family(name) is fam
    assert fam.stage_family in STAGES and fam.stage_family in ORACLE_FROM
    assert fam.headline in fam.metrics  # the per-item score that says "correct" is one the family stores


def test_every_method_and_task_kind_has_a_family() -> None:
    named = {cls.family_for(task) for cls in METHODS.values()
             for task in (cls.tasks if cls.tasks is not None else TASK_FAMILIES)}
    assert named <= set(FAMILIES) and set(TASK_FAMILIES.values()) <= set(FAMILIES)
    with pytest.raises(KeyError, match="no metric family 'nope'; families: linking"):
        family("nope")


def test_the_qa_family_infers_its_extras_only_when_the_method_is_unknown() -> None:
    rows = [{"question_id": "q1", "retrieved_texts": ["a"], "predicted_entities": ["Q1"]}]
    qa = family("qa")
    assert qa.metric_names(rows)[:3] == ["em", "f1", "acc_sub"] and "mrr_retrieval" in qa.metric_names(rows)
    assert qa.metric_names(rows)[-1] == "hit1" and qa.metric_names(rows, extra=[]) == ["em", "f1", "acc_sub"]
    assert family("linking").metric_names(rows, ["accuracy", "x"]) == [*FAMILIES["linking"].metrics, "x"]


def test_the_search_family_scores_covered_questions_apart() -> None:
    preds = [{"question_id": "q1", "answers": ["0:Q1", "0:Q2"], "scores": {"gold_in_kb": 1.0}, "error": None,
              "predicted_entities": []},
             {"question_id": "q2", "answers": ["0:Q9"], "scores": {"gold_in_kb": 0.0}, "error": None,
              "predicted_entities": []}]
    questions = [{"question_id": "q1", "gold_mentions": [{"qid": "Q2", "text": "b"}]},
                 {"question_id": "q2", "gold_mentions": [{"qid": "Q5", "text": "e"}]}]
    fam = family("search")
    p, q = fam.prepare(preds, questions)
    assert p[0]["ranked_entities"] == [["Q1", "Q2"]] and q[1]["gold_entities"] == ["Q5"]
    _, summary = compute(list(fam.metrics), p, q)
    extras = {m["metric"]: m["value"] for m in fam.summary_extras(preds, p, q)}
    assert {m["metric"]: m["value"] for m in summary}["recall@10"] == 0.5
    assert extras["recall@10_covered"] == 1.0 and extras["kb_coverage"] == 0.5
