"""Entity-alignment metrics (docs/architecture.md#evaluation, OpenEA convention): Hits@k and MRR, candidate recall@k.

Inputs: per item, the final alignment (``predicted_entities``: the chosen target first), the candidate
generator's ranked list (``answers``, rank order) and the gold target (``gold_entities``). Outputs:
:class:`~tasks.metrics.base.MetricResult` per metric (mean over items, mergeable across shards).

* The ranking scored by ``hits@k`` / ``mrr`` is the prediction followed by the remaining candidates in their
  generator order: for ``ea-embed`` that is the generator's list itself; for ``ea-agent`` the agent's choice
  is moved to rank 1 (so Hits@10 is bounded by the top-10 candidates, as in the paper's Table 1 note).
  ``mrr`` is ``1 / rank`` of the gold target and 0 when it is not in the stored list (lists are truncated at
  the stored length, e.g. 50: a gold target ranked lower would add less than 1/50 per item).
* ``candidate_recall@k``: whether the gold target is among the first ``k`` candidates of the generator,
  whatever the final choice was.

Errored items have empty lists and score 0 (never dropped from the denominator); items whose gold is null are
not scored.

Per-item floats the EA methods store in ``predictions.scores`` (timings, tokens, per-round rewards) are
summarised by :func:`score_summaries` (paper Tables 4-7).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tasks.metrics.base import MetricError, MetricResult, item_ids, mean_result

HITS_KS = (1, 10)
CANDIDATE_KS = (10, 20)
ALIGNMENT_METRICS: tuple[str, ...] = (*(f"hits@{k}" for k in HITS_KS), "mrr",
                                      *(f"candidate_recall@{k}" for k in CANDIDATE_KS))


def alignment_ranking(predicted: Sequence[str] | None, candidates: Sequence[str] | None) -> list[str]:
    """The prediction first, then the candidates not already predicted (generator order kept)."""
    out: list[str] = []
    for e in list(predicted or []) + list(candidates or []):
        if e not in out:
            out.append(e)
    return out


def gold_rank(ranking: Sequence[str], gold: Sequence[str]) -> int | None:
    """0-based position of the first gold entity in ``ranking``, or None."""
    golds = set(gold)
    for i, e in enumerate(ranking):
        if e in golds:
            return i
    return None


def alignment_metrics(
    predicted: Sequence[Sequence[str] | None],
    candidates: Sequence[Sequence[str] | None],
    golds: Sequence[Sequence[str]],
    ids: Sequence[str] | None = None,
    hits_ks: Sequence[int] = HITS_KS,
    candidate_ks: Sequence[int] = CANDIDATE_KS,
) -> dict[str, MetricResult]:
    """Hits@k, MRR and candidate recall@k over aligned items.

    Args:
        predicted: Final alignment per item (first element = the chosen target; may be empty).
        candidates: Generator ranking per item.
        golds: Gold target ids per item (non-empty).
        ids: Item ids.
        hits_ks: ``k`` of ``hits@k``.
        candidate_ks: ``k`` of ``candidate_recall@k``.

    Returns:
        ``{"hits@1": ..., "mrr": ..., "candidate_recall@10": ...}``.

    Raises:
        MetricError: Lengths differ or a gold list is empty.
    """
    n = len(golds)
    if len(predicted) != n or len(candidates) != n:
        raise MetricError(f"{len(predicted)} predictions / {len(candidates)} candidate lists for {n} gold items")
    keys = item_ids(ids, n)
    hits: dict[int, dict[str, float]] = {k: {} for k in hits_ks}
    cand: dict[int, dict[str, float]] = {k: {} for k in candidate_ks}
    mrr: dict[str, float] = {}
    for key, pred, cands, gold in zip(keys, predicted, candidates, golds, strict=True):
        if not gold:
            raise MetricError(f"{key}: empty gold target list")
        rank = gold_rank(alignment_ranking(pred, cands), gold)
        for k in hits_ks:
            hits[k][key] = 1.0 if rank is not None and rank < k else 0.0
        mrr[key] = 1.0 / (rank + 1) if rank is not None else 0.0
        crank = gold_rank(list(cands or []), gold)
        for k in candidate_ks:
            cand[k][key] = 1.0 if crank is not None and crank < k else 0.0
    out = {f"hits@{k}": mean_result(f"hits@{k}", hits[k]) for k in hits_ks}
    out["mrr"] = mean_result("mrr", mrr)
    out.update({f"candidate_recall@{k}": mean_result(f"candidate_recall@{k}", cand[k]) for k in candidate_ks})
    return out


def alignment_group(items: Sequence[Any], _ks: tuple[int, ...] = ()) -> dict[str, MetricResult]:
    """Metric-registry adapter: items with ``predicted_entities``, ``answers``, ``gold_entities``, ``question_id``."""
    sel = [it for it in items if it.gold_entities is not None]
    return alignment_metrics([it.predicted_entities for it in sel], [it.answers for it in sel],
                             [it.gold_entities for it in sel], [it.question_id for it in sel])


def _mean(values: list[float]) -> tuple[float | None, int]:
    return (sum(values) / len(values) if values else None), len(values)


def score_summaries(preds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Summary rows from the per-item ``scores`` the EA methods store (only keys that are present).

    * ``<key>_per_entity`` for ``planning_s``, ``alignment_s``, ``planning_tokens``, ``alignment_tokens``,
      ``rewrite_tokens`` (paper Tables 4-5; seconds are each item's share of its batched LLM calls);
    * per optimisation round ``r``: ``hits@1_round<r>``, ``reward_round<r>``, ``avg_path_length_round<r>``
      (Table 7), ``reflector_rate_round<r>`` (share of entities whose path ran the Reflector) and
      ``reflector_recall_round<r>`` (share of entities whose first alignment was wrong for which the Reflector
      ran; Table 6), over the items that finished (``n`` says how many).
    """
    scores = [dict(p.get("scores") or {}) for p in preds if not p.get("error")]
    rows: list[dict[str, Any]] = []
    for key in ("planning_s", "alignment_s", "planning_tokens", "alignment_tokens", "rewrite_tokens"):
        value, n = _mean([s[key] for s in scores if key in s])
        if n:
            rows.append({"metric": f"{key}_per_entity", "value": value, "n": n})
    rounds = sorted({int(k[1:].split("_", 1)[0]) for s in scores for k in s
                     if k.startswith("r") and k[1:].split("_", 1)[0].isdigit()})
    for r in rounds:
        p = f"r{r}_"
        for src, name in (("correct", "hits@1"), ("reward", "reward"), ("path_length", "avg_path_length"),
                          ("reflected", "reflector_rate")):
            value, n = _mean([s[p + src] for s in scores if p + src in s])
            if n:
                rows.append({"metric": f"{name}_round{r}", "value": value, "n": n})
        wrong = [s for s in scores if s.get(p + "initial_correct") == 0.0 and p + "reflected" in s]
        value, n = _mean([s[p + "reflected"] for s in wrong])
        if n:  # undefined when no first alignment was wrong (a None value would not be a number downstream)
            rows.append({"metric": f"reflector_recall_round{r}", "value": value, "n": n})
    return rows
