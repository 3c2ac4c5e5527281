"""The failure stages of a run's items, from what the run stored: the ``stages`` table beside its predictions.

Evidence per family (rules: ``tasks.metrics.stages``):

* ``linking``: the gold entities (``gold_entities``; search-recall: the gold mentions' QIDs, as its metrics use),
  the KB's named QIDs (label, alias or Wikipedia title: what a name search can find), the candidates the method
  was shown and what it chose. ELA's shown candidates are its entity-search calls replayed from the trajectory's
  payloads with the run's own tools (:func:`_replayed`); search-recall's are its stored ``answers``.
* ``textqa``: the documents of the last ``retrieved`` note and the last ``fallback`` note's reason (ER: no entity
  linked, no article; ``tasks.metrics.trajectory``), and the gold answers.
* ``alignment``: the generator's stored candidate list (``answers``), the pick and the gold target.
* ``kgqa``: the gold topic entities (``gold_entities``) against what the method grounded (``predicted_entities``:
  kg-1hop's and react-kg's main entity, AnchorRAG's and ToG's anchors); the facts its ``kg_facts`` and
  ``kg_neighbours`` calls returned, replayed like ELA's searches with the run's own KG tools, against the gold
  answers (QIDs, else labels and literal values); the answer text against the gold labels; under ToG's Hit@1, a
  blank gold label (it matches every answer: flagged ``blank_gold_alias`` in the evidence).

An item gets a stage when the run's headline metric scored it (``predictions.scores``); so the stages of a run add
up to that metric's ``n``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from storage.run_store import RunStore
from tasks.metrics.families import MetricFamily, family
from tasks.metrics.runs import summary_metrics
from tasks.metrics.stages import STAGES_FORMAT, Stage, alignment_stage, kgqa_stage, linking_stage, norm, textqa_stage
from tasks.metrics.trajectory import read_notes
from tasks.runs.resolve import ResolvedRun
from tasks.search.kb_indexes import named_qids


def _replayed(run: ResolvedRun, preds: Sequence[Mapping[str, Any]],
              names: Sequence[str]) -> dict[str, list[tuple[str, Any]]] | None:
    """question_id -> ``(tool, result)`` of each of its calls to the tools ``names``, in trajectory order.

    The calls are replayed from the trajectory's payloads with the run's own tools, one batched call per tool (the
    trajectory keeps a truncated copy of each result; searches and KG lookups are deterministic for a KB version
    and index format, both part of the run id). ``None`` when no item called one of them.
    """
    calls = [(p["question_id"], e["tool"], e["payload"]) for p in preds for e in json.loads(p.get("trajectory") or "[]")
             if e.get("kind") == "tool" and e.get("tool") in names and isinstance(e.get("payload"), dict)]
    if not calls:
        return None
    tools = run.method.build_tools(run.context(with_run_dir=False))
    out: dict[str, list[tuple[str, Any]]] = {p["question_id"]: [] for p in preds}
    for name in names:
        made = [(qid, payload) for qid, tool, payload in calls if tool == name]
        if made:
            for (qid, _), res in zip(made, tools[name]([payload for _, payload in made]), strict=True):
                out[qid].append((name, res))
    return out


def _shown_by_search(run: ResolvedRun, preds: Sequence[Mapping[str, Any]]) -> dict[str, set[str] | None]:
    """question_id -> the QIDs its entity-search calls returned (``None``: the item never searched)."""
    replayed = _replayed(run, preds, ("entity_search",)) or {}
    return {p["question_id"]: ({c["qid"] for _, per_query in replayed[p["question_id"]] for cands in per_query
                                for c in cands if c.get("qid")} if replayed.get(p["question_id"]) else None)
            for p in preds}


def _gold_mentions(q: Mapping[str, Any]) -> list[str]:
    return [m["qid"] for m in (q.get("gold_mentions") or []) if m.get("qid") and m.get("text")]


def item_stages(run: ResolvedRun, preds: Sequence[Mapping[str, Any]],
                questions: Sequence[Mapping[str, Any]]) -> dict[str, Stage]:
    """question_id -> its :class:`~tasks.metrics.stages.Stage`, for the items the headline metric scored.

    Empty for a run whose metric family has no stage rule.
    """
    fam = family(run.family)
    if fam.stage_family is None:
        return {}
    qs = {q["question_id"]: q for q in questions}
    hit = {p["question_id"]: dict(p.get("scores") or {}).get(fam.headline) for p in preds}  # Arrow maps: pairs
    scored = [p for p in preds if hit[p["question_id"]] is not None]
    return _STAGE_RULES[fam.stage_family](run, fam, scored, qs, hit)


Hits = dict[str, float | None]


def _linking_stages(run: ResolvedRun, fam: MetricFamily, scored: list, qs: dict, hit: Hits) -> dict[str, Stage]:
    named = named_qids(run.kb_version, run.root) if run.kb_version else set()
    shown = {} if fam.STAGES_FROM_ANSWERS else _shown_by_search(run, scored)
    out: dict[str, Stage] = {}
    for p in scored:
        qid, q = p["question_id"], qs[p["question_id"]]
        if fam.STAGES_FROM_ANSWERS:
            gold = _gold_mentions(q)
            seen: set[str] | None = {a.partition(":")[2] for a in p.get("answers") or []}
        else:
            gold, seen = list(q.get("gold_entities") or []), shown[qid]
        out[qid] = linking_stage(gold, list(p.get("predicted_entities") or []), seen, named, hit[qid] == 1.0)
    return out


def _textqa_stages(run: ResolvedRun, fam: MetricFamily, scored: list, qs: dict, hit: Hits) -> dict[str, Stage]:
    out: dict[str, Stage] = {}
    for p in scored:
        q = qs[p["question_id"]]
        retrieved, why = None, None
        if fam.STAGES_JUDGE_RETRIEVAL:
            notes = read_notes(p.get("trajectory"))
            retrieved, why = notes.retrieved_texts, notes.fallback
            if retrieved is None and why is not None:  # ER found nothing to read
                retrieved = []
        out[p["question_id"]] = textqa_stage(list(q.get("gold_answers") or []), retrieved,
                                             hit[p["question_id"]] == 1.0, why)
    return out


def _kgqa_stages(run: ResolvedRun, fam: MetricFamily, scored: list, qs: dict, hit: Hits) -> dict[str, Stage]:
    reached = _reached(run, scored)
    exact = fam.STAGES_EXACT_SET
    out: dict[str, Stage] = {}
    for p in scored:
        q, qid = qs[p["question_id"]], p["question_id"]
        ids, texts = reached[qid] if reached is not None else (None, set())
        grounded = None if reached is None else list(p.get("predicted_entities") or [])
        gold_ids = list(q.get("gold_answer_qids") or [])
        meta = json.loads(q.get("meta") or "{}")
        computed = not gold_ids and (bool(meta.get("aggregation")) or meta.get("answer_type") == "boolean")
        out[qid] = kgqa_stage(list(q.get("gold_entities") or []), grounded, gold_ids,
                              list(q.get("gold_answers") or []), ids, texts, p.get("answer") or "",
                              need_all=exact, linked=exact, correct=hit[qid] == 1.0, judge_reach=not computed,
                              blank_matches_all=not exact)
    return out


def _alignment_stages(run: ResolvedRun, fam: MetricFamily, scored: list, qs: dict, hit: Hits) -> dict[str, Stage]:
    out: dict[str, Stage] = {}
    for p in scored:
        q = qs[p["question_id"]]
        out[p["question_id"]] = alignment_stage(list(q.get("gold_entities") or []), list(p.get("answers") or []),
                                                list(p.get("predicted_entities") or []),
                                                hit[p["question_id"]] == 1.0)
    return out


#: Stage family (``tasks.metrics.stages.STAGES``) -> how a run's scored items get their stages.
_STAGE_RULES = {"linking": _linking_stages, "textqa": _textqa_stages, "kgqa": _kgqa_stages,
                "alignment": _alignment_stages}


def stage_rows(run: ResolvedRun, stages: Mapping[str, Stage]) -> list[dict[str, Any]]:
    """The ``stages`` table's rows of a run's item stages (``storage.schemas.STAGES``), in question-id order."""
    plan = run.plan
    return [{"run_id": plan.run_id, "method": plan.config.method, "dataset": plan.config.dataset,
             "split": plan.split, "question_id": qid, "family": s.family, "stage": s.stage, "stage_rank": s.rank,
             "evidence": json.dumps(s.evidence, ensure_ascii=False, sort_keys=True), "stages_format": STAGES_FORMAT}
            for qid, s in sorted(stages.items())]


def scored(run: ResolvedRun, preds: Sequence[Mapping[str, Any]],
           questions: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A run's summary metrics and its ``stages`` rows, computed from its stored predictions.

    The summary includes the ``oracle_*`` metrics of the failure stages: what ``finalize_run`` stores and
    ``linkedqa eval`` recomputes.
    """
    summary = summary_metrics(run.family, preds, questions, run.extra_metrics)
    stages = item_stages(run, preds, questions)
    summary += family(run.family).oracle_metrics(list(stages.values()))
    return summary, stage_rows(run, stages)


def write_stages(run: ResolvedRun, rows: Sequence[Mapping[str, Any]]) -> int:
    """Write a run's ``stages`` table (one part, atomically, replacing an older one); its row count."""
    if not rows:
        return 0
    run.store.write_table("stages", list(rows))
    return len(rows)


def read_stages(run_id: str, root: Path | None = None) -> list[dict[str, Any]]:
    """A run's stored stage rows (empty when it has none)."""
    store = RunStore(run_id, root)
    return store.read_table("stages").to_pylist() if store.has_table("stages") else []


def stages_status(run: ResolvedRun, recomputed: Sequence[Mapping[str, Any]]) -> str:
    """The state of a run's stored failure stages against ``recomputed``.

    ``current`` (equal), ``missing``, ``stale`` (other rules or stages) or ``none`` (no stage rule for its family).
    """
    if family(run.family).stage_family is None:
        return "none"
    stored = read_stages(run.run_id, run.root)
    if not stored:
        return "missing" if recomputed else "current"

    def key(rows: Sequence[Mapping[str, Any]]) -> list[tuple]:
        return sorted((r["question_id"], r["stage"], r["stages_format"]) for r in rows)

    return "current" if key(stored) == key(recomputed) else "stale"


#: The KG tools whose results are facts (``tasks.methods.kg_tools``): replayed to learn what an item retrieved.
FACT_TOOLS = ("kg_facts", "kg_neighbours")


def _reached(run: ResolvedRun, preds: Sequence[Mapping[str, Any]]) -> dict[str, tuple[set[str], set[str]]] | None:
    """question_id -> (QIDs, normalised labels and values) of the facts its KG calls returned (:func:`_replayed`).

    ``None`` when no item of the run called a fact tool: a method that retrieves nothing.
    """
    replayed = _replayed(run, preds, FACT_TOOLS)
    if replayed is None:
        return None
    out: dict[str, tuple[set[str], set[str]]] = {}
    for qid, results in replayed.items():
        ids, texts = out[qid] = (set(), set())
        for name, res in results:
            if not isinstance(res, dict) or "error" in res:
                continue
            groups = res["facts"].values() if name == "kg_facts" else res["facts"]
            for f in (f for group in groups for f in group):
                ids.update(x for x in (f.get("s"), f.get("o")) if x)
                texts.update(norm(x) for x in (f.get("sl"), f.get("ol"), f.get("ov")) if x)
    return out
