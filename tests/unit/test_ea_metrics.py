"""Alignment metrics (Hits@k, MRR, candidate recall@k) and their summaries, on hand-computed cases."""

from __future__ import annotations

import pytest

from tasks.metrics.alignment import alignment_metrics, alignment_ranking, score_summaries
from tasks.metrics.base import MetricError, merge_results
from tasks.metrics.registry import compute
from tasks.metrics.runs import summary_metrics


def test_ranking_puts_the_choice_first():
    assert alignment_ranking(["c"], ["a", "b", "c", "d"]) == ["c", "a", "b", "d"]
    assert alignment_ranking([], ["a", "b"]) == ["a", "b"]


def test_hits_mrr_candidate_recall_by_hand():
    cands = [[f"t{i}" for i in range(20)]] * 4
    predicted = [["t0"], ["t3"], [], ["t0"]]
    golds = [["t0"], ["t0"], ["t12"], ["missing"]]
    res = alignment_metrics(predicted, cands, golds, ["a", "b", "c", "d"])
    # a: rank 1; b: choice t3 first, gold t0 second -> rank 2; c: empty prediction, gold at 13; d: absent
    assert res["hits@1"].value == pytest.approx(1 / 4)
    assert res["hits@10"].value == pytest.approx(2 / 4)
    assert res["mrr"].value == pytest.approx((1 + 1 / 2 + 1 / 13 + 0) / 4)
    assert res["candidate_recall@10"].value == pytest.approx(2 / 4)
    assert res["candidate_recall@20"].value == pytest.approx(3 / 4)
    assert res["mrr"].per_item["c"] == pytest.approx(1 / 13)


def test_shards_merge_exactly_and_bad_gold_fails():
    a = alignment_metrics([["x"]], [["x", "y"]], [["y"]], ["1"])
    b = alignment_metrics([["y"]], [["x", "y"]], [["y"]], ["2"])
    m = merge_results([a, b])
    assert m["hits@1"].value == 0.5 and m["mrr"].value == pytest.approx((0.5 + 1) / 2)
    with pytest.raises(MetricError):
        alignment_metrics([["x"]], [["x"]], [[]], ["1"])


def test_registry_and_family_from_prediction_rows():
    preds = [
        {"question_id": "fr:1", "predicted_entities": ["en:2"], "answers": ["en:2", "en:1"], "error": None,
         "scores": {"planning_s": 1.0, "alignment_s": 2.0, "r0_path_length": 3.0, "r0_reflected": 1.0,
                    "r0_initial_correct": 0.0, "r0_correct": 0.0, "r0_reward": 0.5}},
        {"question_id": "fr:3", "predicted_entities": [], "answers": [], "error": "AgentError: garbage",
         "scores": {}},
        {"question_id": "fr:4", "predicted_entities": ["en:4"], "answers": ["en:5", "en:4"], "error": None,
         "scores": {"planning_s": 3.0, "alignment_s": 4.0, "r0_path_length": 2.0, "r0_reflected": 0.0,
                    "r0_initial_correct": 1.0, "r0_correct": 1.0, "r0_reward": 1.67}},
    ]
    questions = [{"question_id": q, "gold_entities": [g]} for q, g in
                 (("fr:1", "en:1"), ("fr:3", "en:3"), ("fr:4", "en:4"))]
    per_item, summary = compute(["hits@1", "hits@10", "mrr"], preds, questions)
    assert per_item["fr:1"] == {"hits@1": 0.0, "hits@10": 1.0, "mrr": 0.5}
    got = {r["metric"]: (r["value"], r["n"]) for r in summary_metrics("alignment", preds, questions)}
    assert got["hits@1"] == (pytest.approx(1 / 3), 3)  # the errored item counts as a miss
    assert got["candidate_recall@10"] == (pytest.approx(2 / 3), 3)
    assert got["planning_s_per_entity"] == (2.0, 2) and got["alignment_s_per_entity"] == (3.0, 2)
    assert got["avg_path_length_round0"] == (2.5, 2)
    assert got["reflector_rate_round0"] == (0.5, 2)
    assert got["reflector_recall_round0"] == (1.0, 1)  # the one wrong first alignment was reflected on
    assert got["hits@1_round0"] == (0.5, 2)


def test_score_summaries_without_rounds():
    assert score_summaries([{"scores": {"top1_similarity": 0.9}, "error": None}]) == []


def test_reflector_recall_is_left_out_when_no_first_alignment_was_wrong():
    preds = [{"error": None, "scores": {"r0_reflected": 1.0, "r0_initial_correct": 1.0, "r0_correct": 1.0}}]
    rows = {r["metric"]: r for r in score_summaries(preds)}
    assert "reflector_recall_round0" not in rows and rows["reflector_rate_round0"]["value"] == 1.0
    assert all(r["value"] is not None for r in rows.values())
