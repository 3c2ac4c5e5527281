"""Metrics: hand-computed values (empty sets included) and SQuAD EM/F1 against the official algorithm."""

from __future__ import annotations

import json
import math
import random
import re
import string
from collections import Counter
from pathlib import Path

import pytest

from tasks.metrics.base import MetricError, merge_results
from tasks.metrics.linking import (
    hit_at_1,
    linking_metrics,
    recall_at_k,
    set_accuracy,
    set_precision,
    set_recall,
)
from tasks.metrics.qa import (
    acc_sub,
    em,
    f1,
    f1_score,
    has_answer,
    has_answer_token,
    ndcg_at_k,
    normalize_answer,
    retrieval_metrics,
    strategyqa_metrics,
)
from tasks.metrics.qald import (
    qald_macro_f1_gerbil,
    qald_macro_f1_mean,
    qald_metrics,
    qald_prf,
    qids_as_entities,
)
from tasks.metrics.registry import METRICS, compute, compute_results, get_metric, join_items

approx = pytest.approx


# ------------------------------------------------------------------------------------------ linking
LINK_PRED = [["A", "B"], ["A"], [], [], ["D", "D"]]
LINK_GOLD = [["A"], ["A", "B"], [], ["C"], []]
LINK_IDS = ["q1", "q2", "q3", "q4", "q5"]


def test_set_metrics_empty_conventions() -> None:
    assert (set_precision([], []), set_recall([], []), set_accuracy([], [])) == (1.0, 1.0, 1.0)
    assert (set_precision([], ["C"]), set_recall([], ["C"]), set_accuracy([], ["C"])) == (0.0, 0.0, 0.0)
    assert (set_precision(["D"], []), set_recall(["D"], []), set_accuracy(["D"], [])) == (0.0, 0.0, 0.0)
    assert set_accuracy(["A", "B", "A"], ["B", "A"]) == 1.0
    with pytest.raises(MetricError):
        set_precision("Q42", ["Q42"])


def test_linking_five_question_hand_example() -> None:
    res = linking_metrics(LINK_PRED, LINK_GOLD, LINK_IDS)
    # per question P / R / Acc:
    # q1 .5/1/0  q2 1/.5/0  q3 (∅,∅) 1/1/1  q4 (∅,{C}) 0/0/0  q5 ({D},∅) 0/0/0
    assert res["precision"].per_item == {"q1": 0.5, "q2": 1.0, "q3": 1.0, "q4": 0.0, "q5": 0.0}
    assert res["recall"].per_item == {"q1": 1.0, "q2": 0.5, "q3": 1.0, "q4": 0.0, "q5": 0.0}
    assert res["accuracy"].per_item == {"q1": 0.0, "q2": 0.0, "q3": 1.0, "q4": 0.0, "q5": 0.0}
    assert res["precision"].value == approx(2.5 / 5)
    assert res["recall"].value == approx(2.5 / 5)
    assert res["accuracy"].value == approx(1 / 5)
    # pooled: |p∩g| = 1+1+0+0+0 = 2, |p| = 2+1+0+0+1 = 4, |g| = 1+2+0+1+0 = 4
    assert res["micro_precision"].value == approx(0.5)
    assert res["micro_recall"].value == approx(0.5)
    assert res["micro_f1"].value == approx(0.5)
    assert res["micro_f1"].per_item["q1"] == approx(2 * 0.5 * 1 / 1.5)
    assert all(r.n == 5 for r in res.values())


def test_micro_with_nothing_predicted_or_gold() -> None:
    res = linking_metrics([[], []], [[], []])
    assert (res["micro_precision"].value, res["micro_recall"].value, res["micro_f1"].value) == (1.0, 1.0, 1.0)
    res = linking_metrics([[], []], [["A"], []])
    assert (res["micro_precision"].value, res["micro_recall"].value, res["micro_f1"].value) == (0.0, 0.0, 0.0)
    empty = linking_metrics([], [])
    assert empty["precision"].value is None and empty["precision"].n == 0


def test_recall_at_k_and_hit1() -> None:
    ranked = [["X", "A", "Y", "B"], ["C"], ["Z"], [], [["A", "X"], ["Y", "B"]]]
    gold = [["A", "B"], ["C"], [], ["D"], ["A", "B"]]
    ids = ["q1", "q2", "q3", "q4", "q5"]
    res = recall_at_k(ranked, gold, ks=(1, 2, 4), ids=ids)
    # q3 has no gold entity: not counted
    assert res["recall@1"].per_item == {"q1": 0.0, "q2": 1.0, "q4": 0.0, "q5": 0.5}
    assert res["recall@2"].per_item == {"q1": 0.5, "q2": 1.0, "q4": 0.0, "q5": 1.0}
    assert res["recall@4"].value == approx((1 + 1 + 0 + 1) / 4)
    assert res["recall@1"].n == 4
    h = hit_at_1(ranked, gold, ids)
    assert h.per_item == {"q1": 0.0, "q2": 1.0, "q4": 0.0, "q5": 1.0}
    assert h.value == approx(0.5)


# ----------------------------------------------------------------------------------------------- QA
def test_em_f1_acc_sub_by_hand() -> None:
    preds = ["The Beatles!", "the big cat", "I think it is Paris, France.", None, "anything", "x"]
    golds = [["beatles"], ["a cat sat"], ["Lyon", "paris"], ["Rome"], ["the"], []]
    ids = [f"q{i}" for i in range(6)]
    e, f, s = em(preds, golds, ids), f1(preds, golds, ids), acc_sub(preds, golds, ids)
    assert e.per_item == {"q0": 1.0, "q1": 0.0, "q2": 0.0, "q3": 0.0, "q4": 0.0}  # q5: no gold, not scored
    # "big cat" vs "cat sat": 1 shared token, P = R = 1/2
    assert f.per_item["q1"] == approx(0.5)
    # "i think it is paris france" vs "paris": P = 1/6, R = 1 -> 2/7
    assert f.per_item["q2"] == approx(2 / 7)
    assert s.per_item == {
        "q0": 1.0,
        "q1": 0.0,
        "q2": 1.0,
        "q3": 0.0,
        "q4": 0.0,
    }  # gold "the" -> "" only matches ""
    assert acc_sub([""], [["the"]]).value == 1.0
    assert e.n == f.n == s.n == 5
    assert e.value == approx(1 / 5)
    assert em([], []).value is None


def test_strategyqa_accuracy_and_invalid_count() -> None:
    # reference rule (EntityRetrieval extract_strategy_qa_answer): strip + lower, then *starts with* yes / no
    preds = ["Yes", "no.", "Maybe", None, "YES!", "Yes, because", "  nope", "'yes'"]
    golds = [True, "false", True, ["no"], "yes", "yes", False, True]
    res = strategyqa_metrics(preds, golds, [f"q{i}" for i in range(8)])
    assert res["strategyqa_acc"].per_item == {
        "q0": 1.0,
        "q1": 1.0,
        "q2": 0.0,
        "q3": 0.0,
        "q4": 1.0,
        "q5": 1.0,
        "q6": 1.0,
        "q7": 0.0,
    }
    assert res["strategyqa_acc"].value == approx(5 / 8)
    assert res["invalid_count"].per_item == {f"q{i}": float(i in (2, 3, 7)) for i in range(8)}
    assert res["invalid_count"].value == 3.0 and res["invalid_count"].n == 8
    with pytest.raises(MetricError):
        strategyqa_metrics(["yes"], ["maybe"])


def test_retrieval_metrics_by_hand() -> None:
    docs = [
        [
            "Provo is a city in Utah",
            "The capital is Salt Lake City.",
            "salt lake",
            "SALT LAKE CITY, Utah",
        ],
        ["start of the game", "modern Art museum"],
        ["anything"],
        [],
    ]
    golds = [["Salt Lake City"], ["art"], ["the"], ["x"]]
    ids = ["q1", "q2", "q3", "q4"]
    res = retrieval_metrics(docs, golds, ks=(1, 2, 4, 5), ids=ids)
    # reference (EntityRetrieval text_has_answer) substring relevance: q1 [0, 1, 0, 1]; q2 [1, 1] ("art" is in
    # "start"); q3 gold normalises to "", which is in every text: [1]; q4 no document: []. All four are counted.
    assert res["mrr_retrieval"].per_item == {"q1": 0.5, "q2": 1.0, "q3": 1.0, "q4": 0.0}
    assert res["ndcg@1"].per_item == {"q1": 0.0, "q2": 1.0, "q3": 1.0, "q4": 0.0}
    # the ideal ranking holds every relevant document of the 4 evaluated, not only those in the top 2
    assert res["ndcg@2"].per_item["q1"] == approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    dcg4 = 1 / math.log2(3) + 1 / math.log2(5)
    idcg4 = 1 + 1 / math.log2(3)
    assert res["ndcg@4"].per_item["q1"] == approx(dcg4 / idcg4)
    assert res["topk_acc@1"].value == 0.5
    assert res["topk_acc@2"].per_item == {"q1": 1.0, "q2": 1.0, "q3": 1.0, "q4": 0.0}
    assert res["topk_acc@2"].value == approx(3 / 4)
    assert res["mrr_retrieval"].value == approx(2.5 / 4)
    assert res["ndcg@2"].n == 4
    # depth = 4 documents (the longest list): @5 is not reported
    assert (res["ndcg@5"].value, res["ndcg@5"].n, res["ndcg@5"].per_item) == (None, 0, {})
    assert res["topk_acc@5"].value is None
    # an explicit depth cuts the lists: only the first document of each question is evaluated
    cut = retrieval_metrics(docs, golds, ks=(1, 2), ids=ids, depth=1)
    assert cut["mrr_retrieval"].per_item == {"q1": 0.0, "q2": 1.0, "q3": 1.0, "q4": 0.0}
    assert cut["ndcg@2"].value is None and cut["ndcg@1"].n == 4
    # extra whole-token metrics (the token rule): q2 [0, 1] ("start" is not "art")
    tok = retrieval_metrics(docs, golds, ks=(1, 2), ids=ids, rule="token")
    assert set(tok) == {"ndcg_token@1", "ndcg_token@2", "topk_acc_token@1", "topk_acc_token@2", "mrr_retrieval_token"}
    assert tok["mrr_retrieval_token"].per_item == {"q1": 0.5, "q2": 0.5, "q3": 1.0, "q4": 0.0}
    assert tok["topk_acc_token@1"].per_item == {"q1": 0.0, "q2": 0.0, "q3": 1.0, "q4": 0.0}
    # not annotated (None) is not scored; an empty gold list is scored, with nothing relevant
    none = retrieval_metrics([["a b"], ["a b"]], [None, []], ks=(1,), ids=["n", "e"])
    assert none["mrr_retrieval"].per_item == {"e": 0.0}
    with pytest.raises(MetricError, match="rule"):
        retrieval_metrics(docs, golds, rule="exact")
    assert ndcg_at_k([1, 0, 0], 3) == 1.0 and ndcg_at_k([0, 0], 2) == 0.0
    assert ndcg_at_k([0, 1, 1], 2) == approx(0.387, abs=5e-4)
    assert has_answer("He was born in New York City.", ["new york"]) and has_answer("Yorkshire", ["york"])
    assert has_answer_token("He was born in New York City.", ["new york"])
    assert not has_answer_token("Yorkshire", ["york"])


# --------------------------------------------------------------------------------------------- QALD
def test_qald_gerbil_rules_hand_example() -> None:
    # entities given as such: bare QIDs typed as entities (qids_as_entities), or a Wikidata IRI
    preds = [qids_as_entities(p) for p in [["Q1", "Q2"], [], [], ["Q4"], ["http://www.wikidata.org/entity/Q5"]]]
    golds = [qids_as_entities(g) for g in [["Q1"], ["Q3"], [], [], ["Q5", "Q6"]]]
    assert qald_prf([], ["Q3"]) == (1.0, 0.0, 0.0)  # GERBIL calculateMeasuresQALD: "no answer" -> P = 1
    assert qald_prf([], []) == (1.0, 1.0, 1.0)
    assert qald_prf(["Q4"], []) == (0.0, 0.0, 0.0)
    assert qald_prf(["Q9"], ["Q3"]) == (0.0, 0.0, 0.0)
    res = qald_metrics(preds, golds, ["a", "b", "c", "d", "e"])
    m_p = (0.5 + 1 + 1 + 0 + 1) / 5
    m_r = (1 + 0 + 1 + 0 + 0.5) / 5
    assert res["qald_macro_precision_qald"].value == approx(m_p)
    # GERBIL's displayed "Macro Precision" (calculateMeasures): the unanswered b counts as P = 0
    assert res["qald_macro_precision_gerbil"].value == approx((0.5 + 0 + 1 + 0 + 1) / 5)
    assert res["qald_macro_recall"].value == approx(m_r)
    assert res["qald_macro_f1_gerbil"].value == approx(2 * m_p * m_r / (m_p + m_r))  # 0.58333
    assert res["qald_macro_f1_mean"].value == approx((2 / 3 + 0 + 1 + 0 + 2 / 3) / 5)  # 0.46667
    assert res["qald_macro_f1_gerbil"].per_item["e"] == approx(2 / 3)
    assert qald_macro_f1_gerbil(preds, golds).value == res["qald_macro_f1_gerbil"].value
    assert qald_macro_f1_mean(preds, golds).value == res["qald_macro_f1_mean"].value
    assert qald_metrics([["Q9"]], [["Q1"]])["qald_macro_f1_gerbil"].value == 0.0  # GERBIL: NaN


# ------------------------------------------------------------------- SQuAD v1.1 official algorithm
# Copy of the official evaluate-v1.1.py functions (the independent reference).
def _official_normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def _official_f1_score(prediction, ground_truth):
    prediction_tokens = _official_normalize_answer(prediction).split()
    ground_truth_tokens = _official_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def _official_exact_match_score(prediction, ground_truth):
    return _official_normalize_answer(prediction) == _official_normalize_answer(ground_truth)


def _official_metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


def _perturb(answer: str, other: str, i: int) -> str:
    variants = [
        answer,
        f"The {answer}.",
        answer.upper(),
        f"{answer}, an American {other}",
        f"a {answer}!",
        other,
        "",
        f"{answer} and {answer}",
        answer.split()[0] if answer.split() else answer,
        f"  {answer}\t(probably) ",
        f"the the {other} {answer}",
        "An answer with no overlap",
    ]
    return variants[i % len(variants)]


def test_squad_em_f1_match_official_on_entityquestions(data_root: Path) -> None:
    path = data_root / "entityquestions" / "test" / "P106.test.jsonl"
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh][:36]
    assert len(rows) == 36
    rng = random.Random(0)
    preds, golds = [], []
    for i, row in enumerate(rows):
        other = rng.choice(rows)["answers"][0]
        preds.append(_perturb(rng.choice(row["answers"]), other, i))
        golds.append(row["answers"])
    ids = [str(i) for i in range(len(rows))]
    e, f = em(preds, golds, ids), f1(preds, golds, ids)
    for i, (p, g) in enumerate(zip(preds, golds, strict=True)):
        assert e.per_item[str(i)] == float(
            _official_metric_max_over_ground_truths(_official_exact_match_score, p, g)
        )
        assert f.per_item[str(i)] == approx(_official_metric_max_over_ground_truths(_official_f1_score, p, g))
        assert normalize_answer(p) == _official_normalize_answer(p)
        assert f1_score(p, g[0]) == approx(_official_f1_score(p, g[0]))
    official_em = sum(
        _official_metric_max_over_ground_truths(_official_exact_match_score, p, g)
        for p, g in zip(preds, golds, strict=True)
    )
    assert e.value == approx(official_em / len(rows))
    assert 0 < e.value < 1 and 0 < f.value < 1  # the perturbations produce both hits and misses


# ----------------------------------------------------------------------------------------- registry
QUESTIONS = [
    # the QALD loaders' layout: gold_answers = literals + entity labels, meta.gold_literals = the literals alone
    {"question_id": "q1", "gold_entities": ["Q1"], "gold_answers": ["Paris"], "gold_answer_qids": ["Q90"],
     "meta": json.dumps({"gold_literals": []})},
    {
        "question_id": "q2",
        "gold_entities": ["Q2", "Q3"],
        "gold_answers": ["Rome", "Roma"],
        "gold_answer_qids": [],
    },
    {"question_id": "q3", "gold_entities": [], "gold_answers": ["yes"], "gold_answer_qids": None},
    {"question_id": "q4", "gold_entities": None, "gold_answers": None, "gold_answer_qids": None},
    {"question_id": "extra", "gold_entities": ["Q9"], "gold_answers": ["x"], "gold_answer_qids": ["Q9"]},
]
PREDICTIONS = [
    {"question_id": "q1", "predicted_entities": ["Q1", "Q5"], "answer": "Paris.", "answers": ["Q90"]},
    {"question_id": "q2", "predicted_entities": ["Q2"], "answer": "roma", "answers": ["Rome"]},
    {"question_id": "q3", "predicted_entities": [], "answer": "Yes", "answers": None},
    {"question_id": "q4", "predicted_entities": ["Q7"], "answer": "no idea", "answers": []},
]


def test_registry_compute_joins_and_scores() -> None:
    names = ["precision", "recall", "accuracy", "micro_f1", "em", "f1", "recall@1", "qald_macro_f1_gerbil"]
    per_item, summary = compute(names, PREDICTIONS, QUESTIONS)
    rows = {r["metric"]: r for r in summary}
    assert [r["metric"] for r in summary] == names
    # linking over q1..q3 (q4 not annotated): P = (.5 + 1 + 1)/3, R = (1 + .5 + 1)/3, Acc = 1/3
    assert rows["precision"]["value"] == approx(2.5 / 3) and rows["precision"]["n"] == 3
    assert rows["recall"]["value"] == approx(2.5 / 3)
    assert rows["accuracy"]["value"] == approx(1 / 3)
    assert rows["micro_f1"]["value"] == approx(2 / 3)  # |p∩g| = 2, |p| = 3, |g| = 3
    # answers: q1 "Paris." = "Paris"; q2 "roma" = alias "Roma"; q3 "Yes" = "yes"; q4 has no gold
    assert rows["em"]["value"] == 1.0 and rows["em"]["n"] == 3
    # recall@1 over questions with gold entities (q1, q2): (1 + .5)/2
    assert rows["recall@1"]["value"] == approx(0.75) and rows["recall@1"]["n"] == 2
    # QALD: q1 gold qids {Q90} + meta.gold_literals {} vs {Q90} -> 1/1/1; q2 gold answers {Rome, Roma} vs
    # {Rome} -> 1/.5;
    # q3 gold {yes} vs [answer] = {Yes} -> 0/0 (exact ids/values); q4 not annotated
    m_p, m_r = (1 + 1 + 0) / 3, (1 + 0.5 + 0) / 3
    assert rows["qald_macro_f1_gerbil"]["value"] == approx(2 * m_p * m_r / (m_p + m_r))
    assert per_item["q1"]["precision"] == 0.5 and per_item["q1"]["em"] == 1.0
    assert per_item.keys() == {"q1", "q2", "q3"}  # q4 has no gold at all: scored by nothing


def test_registry_strategyqa_and_retrieval_rows() -> None:
    questions = [
        {"question_id": "s1", "gold_answers": ["true"]},
        {"question_id": "s2", "gold_answers": ["false"]},
    ]
    preds = [
        {"question_id": "s1", "answer": "Yes.", "retrieved_texts": ["yes it is", "no"]},
        {"question_id": "s2", "answer": "I am not sure", "retrieved_texts": []},
    ]
    _, summary = compute(["strategyqa_acc", "invalid_count"], preds, questions)
    assert summary == [
        {"metric": "strategyqa_acc", "value": 0.5, "n": 2},
        {"metric": "invalid_count", "value": 1.0, "n": 2},
    ]
    retrieval_q = [{"question_id": "r1", "gold_answers": ["Bobigny"]}]
    retrieval_p = [{"question_id": "r1", "retrieved_texts": ["Paris", "Bobigny is the capital", "x"]}]
    _, summary = compute(["mrr_retrieval", "topk_acc@1", "topk_acc@2", "ndcg@3"], retrieval_p, retrieval_q)
    values = {r["metric"]: r["value"] for r in summary}
    assert values == {
        "mrr_retrieval": 0.5,
        "topk_acc@1": 0.0,
        "topk_acc@2": 1.0,
        "ndcg@3": approx(1 / math.log2(3)),
    }
    # 3 documents evaluated: an @k above 3 is not reported (None, n 0); the token variants are registered too
    _, summary = compute(["ndcg@4", "topk_acc@20", "ndcg_token@2", "mrr_retrieval_token"], retrieval_p, retrieval_q)
    assert summary == [
        {"metric": "ndcg@4", "value": None, "n": 0},
        {"metric": "topk_acc@20", "value": None, "n": 0},
        {"metric": "ndcg_token@2", "value": approx(1 / math.log2(3)), "n": 1},
        {"metric": "mrr_retrieval_token", "value": 0.5, "n": 1},
    ]
    with pytest.raises(MetricError, match="retrieved_texts"):
        compute(["ndcg@5"], [{"question_id": "r1", "answer": "x"}], retrieval_q)


def test_registry_errors() -> None:
    with pytest.raises(MetricError, match="unknown metric"):
        compute(["bleu"], PREDICTIONS, QUESTIONS)
    with pytest.raises(MetricError, match="unknown question"):
        compute(["em"], [{"question_id": "nope", "answer": "x"}], QUESTIONS)
    with pytest.raises(MetricError, match="repeats"):
        compute(["em"], PREDICTIONS + PREDICTIONS[:1], QUESTIONS)
    with pytest.raises(MetricError, match="must be a list"):
        compute(["precision"], [{"question_id": "q1", "predicted_entities": "Q1"}], QUESTIONS)


def test_registry_names_and_dynamic_k() -> None:
    for name in [
        "precision",
        "recall",
        "accuracy",
        "micro_f1",
        "recall@1",
        "recall@10",
        "recall@50",
        "em",
        "f1",
        "acc_sub",
        "hit1",
        "invalid_count",
        "qald_macro_f1_gerbil",
        "qald_macro_f1_mean",
        "mrr_retrieval",
        *(f"ndcg@{k}" for k in (1, 2, 3, 4, 5, 20, 100)),
        *(f"topk_acc@{k}" for k in (1, 2, 3, 4, 5, 20, 100)),
        "mrr_retrieval_token",
        *(f"ndcg_token@{k}" for k in (1, 2, 3, 4, 5, 20, 100)),
        *(f"topk_acc_token@{k}" for k in (1, 2, 3, 4, 5, 20, 100)),
    ]:
        assert name in METRICS
    items_res = get_metric("recall@7")
    assert items_res(join_items(PREDICTIONS, QUESTIONS)).name == "recall@7"
    assert METRICS["em"](join_items(PREDICTIONS, QUESTIONS)).value == 1.0


def test_shard_results_merge_to_the_whole() -> None:
    names = ["precision", "micro_f1", "em", "f1", "recall@1", "qald_macro_f1_gerbil", "qald_macro_f1_mean"]
    whole = compute_results(names, PREDICTIONS, QUESTIONS)
    parts = [
        compute_results(names, PREDICTIONS[:2], QUESTIONS),
        compute_results(names, PREDICTIONS[2:], QUESTIONS),
    ]
    merged = merge_results(parts)
    for name in names:
        assert merged[name].value == approx(whole[name].value), name
        assert merged[name].n == whole[name].n
        assert merged[name].per_item == whole[name].per_item
    with pytest.raises(MetricError):
        merge_results([parts[0], parts[0]])
