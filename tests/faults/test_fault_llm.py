"""LLM backend faults (scripted backend: this tests control flow, not a model).

Faults: a completion error for a too-long prompt (the vLLM backend's context-length pre-check message), a
timed-out request, empty text, garbage text, and a backend whose ``generate`` raises (an engine crash).
Guarantee: each fault becomes the affected items' ``error`` (never a run failure), every item is returned in
order, unaffected items are fine, and through the real run machinery the run completes with the error count
in its manifest, its ``runs`` row and its ``error_count`` metric.
"""

from __future__ import annotations

import json

import pytest

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import read_table
from tasks.llm.scripted import ScriptedBackend
from tasks.methods.base import MethodContext
from tasks.methods.ela.method import ElaSettings, ela_agent
from tasks.methods.qa.method import ClosedBookMethod
from tasks.methods.runtime import run_agents

CONTEXT_ERROR = "!error:context length exceeded: 5000 > 4095 (max_model_len=4096 minus 1 output)"
FAULTS = ["Paris", "", "\x00\ufffd}{<answer>]] ]]>", CONTEXT_ERROR, "!error:timeout: no answer within 60s", "Berlin"]


def _by_question(questions: list[dict], replies: list[str]) -> ScriptedBackend:
    table = dict(zip((q["question"] for q in questions), replies, strict=True))

    def reply(messages):
        last = messages[-1]["content"]
        return next(r for q, r in table.items() if q in last)

    return ScriptedBackend(reply)


@pytest.mark.timeout(120)
def test_faulty_completions_become_item_errors_in_a_real_run(home, data_root, monkeypatch):
    """closed-book on PopQA through plan/execute/finalize: 2 faulty items -> error_count 2, run complete."""
    import tasks.runs.shard as shard
    from tasks.datasets.entity_qa import POPQA
    from tasks.runs.config import RunConfig
    from tasks.runs.finalize import finalize_run
    from tasks.runs.planning import plan_questions, plan_run

    cfg = RunConfig(method="closed-book", dataset=POPQA, limit=len(FAULTS), shards=2)
    plan = plan_run(cfg, data_root=data_root)
    questions = plan_questions(plan)
    backend = _by_question(questions, FAULTS)
    monkeypatch.setattr(shard, "get_backend", lambda *a, **k: backend)
    for i in range(plan.n_shards):
        shard.execute_shard(plan, i, log=lambda m: None)
    metrics = {m["metric"]: m["value"] for m in finalize_run(plan, "2000-01-01T00:00:00+00:00", 1.0,
                                                             log=lambda m: None)}
    rdir = layout.run_dir(plan.run_id)
    preds = {p["question_id"]: p for p in read_table(rdir / "predictions", "predictions").to_pylist()}
    assert list(preds) == plan.question_ids  # all returned, plan order
    errs = [preds[q]["error"] for q in plan.question_ids]
    assert errs[:3] == [None, None, None] and errs[5] is None
    assert "context length exceeded" in errs[3] and "timeout" in errs[4]
    assert preds[plan.question_ids[0]]["answer"] == "Paris" and preds[plan.question_ids[1]]["answer"] == ""
    assert metrics["error_count"] == 2
    assert read_manifest(rdir)["n_errors"] == 2
    assert read_table(rdir / "runs", "runs").to_pylist()[0]["n_errors"] == 2
    traj = json.loads(preds[plan.question_ids[3]]["trajectory"])
    assert traj[0]["kind"] == "llm" and "context length" in traj[0]["error"]


@pytest.mark.timeout(60)
def test_crashing_backend_fails_only_the_items_of_its_batch(tmp_path):
    """ELA: step 1 mixes faults; step 2's ``generate`` raises -> the searching items get a backend error."""
    cands = {"paris": [{"qid": "Q90", "title": "Paris", "description": "capital of France", "score": 9.0}]}

    def search(payloads):
        return [[cands.get(q.lower(), []) for q in p["queries"]] for p in payloads]

    def script(messages):
        last = messages[-1]["content"]
        if not last.startswith("<link>"):
            return "!raise:CUDA error: an illegal memory access was encountered"
        q = last[6:-7]
        return {"ok": "<search> Search(Paris) </search>", "empty": "", "garbage": "\x00 ]] <<search",
                "long": CONTEXT_ERROR}[q.split()[0]]

    items = [{"question_id": f"q{i}", "question": f"{k} question {i}"}
             for i, k in enumerate(["ok", "empty", "garbage", "long", "ok"])]
    backend = ScriptedBackend(script)
    out, stats = run_agents(ela_agent(ElaSettings()), items, backend, {"entity_search": search})
    assert [o["question_id"] for o in out] == [it["question_id"] for it in items]
    by = {o["question_id"]: o for o in out}
    assert all(by[q]["error"] and "CUDA error" in by[q]["error"] for q in ("q0", "q4"))
    assert "no <search>" in by["q1"]["error"] and "no <search>" in by["q2"]["error"]
    assert "context length exceeded" in by["q3"]["error"]
    assert backend.batch_sizes == [5, 2] and stats.llm_batches == 2

    # closed-book, one step: a crash fails every item of the batch, each with the cause, none lost
    method = ClosedBookMethod(ClosedBookMethod.parse_settings({}))
    agent = method.agent(MethodContext(kb_version=None, root=tmp_path, task="qa"))
    out, _ = run_agents(agent, items, ScriptedBackend(lambda m: "!raise:engine died"), {})
    assert len(out) == len(items) and all("backend error" in o["error"] and "engine died" in o["error"] for o in out)
