"""Batching runtime and ELA control flow with the scripted backend (unit tests of agent logic only)."""

from __future__ import annotations

import json

from storage.side_files import write_side_outputs
from tasks.llm.scripted import ScriptedBackend
from tasks.llm.types import ChatRequest
from tasks.methods.ela.method import ElaSettings, ela_agent, format_candidates, parse_answer, parse_search
from tasks.methods.records import AgentResult
from tasks.methods.runtime import AgentError, LLMCall, ToolCall, run_agents

CANDS = {
    "paris": [{"qid": "Q90", "title": "Paris", "description": "capital of France", "score": 9.0},
              {"qid": "Q167646", "title": "Paris", "description": "son of Priam", "score": 8.0}],
    "france": [{"qid": "Q142", "title": "France", "description": "country in Europe", "score": 9.5}],
}


def search_tool(payloads):
    search_tool.calls.append(len(payloads))
    return [[CANDS.get(q.lower(), []) for q in p["queries"]] for p in payloads]


search_tool.calls = []


def test_parse_search_lenient():
    assert parse_search("<search> Search(Paris) Search(France) </search>") == ["Paris", "France"]
    assert parse_search("<search> Search([Paris])  Search(paris)") == ["Paris"]
    assert parse_search("I will call Search(Once A Gentleman (film)) now") == ["Once A Gentleman (film)"]
    assert parse_search("<search></search>") == []
    assert parse_search("The capital is Paris.") is None


def test_parse_answer():
    assert parse_answer("<think>x</think>\n\n<answer>[0][3]</answer>") == [0, 3]
    assert parse_answer("<answer>[ 2 ] [2]") == [2]
    assert parse_answer("<answer></answer>") == []
    assert parse_answer("no tags [1]") is None


def test_format_candidates_global_indexes():
    text, flat = format_candidates(["Paris", "France"], [CANDS["paris"], CANDS["france"]])
    assert "[0] Paris: capital of France" in text and "[2] France: country in Europe" in text
    assert [c["qid"] for c in flat] == ["Q90", "Q167646", "Q142"]


def _script(messages):
    last = messages[-1]["content"]
    if last.startswith("<link>"):
        q = last[6:-7]
        if "garbage" in q:
            return "I am not sure what to do."
        if "nothing" in q:
            return "<search></search>"
        if "crash" in q:
            return "!error:timeout"
        return "<search> Search(Paris) Search(France) </search>" if "France" in q else "<search> Search(Paris)"
    return "<think> [0] is the city </think>\n\n<answer>[0][2][9]</answer>"


def test_ela_batches_one_llm_call_per_step_and_one_tool_call():
    search_tool.calls.clear()
    backend = ScriptedBackend(_script)
    items = [{"question_id": f"q{i}", "question": q} for i, q in enumerate(
        ["where is Paris in France", "what is Paris", "garbage here", "nothing to link", "crash now"])]
    out, stats = run_agents(ela_agent(ElaSettings()), items, backend, {"entity_search": search_tool})
    # step 1: all 5 questions in one call; step 2: the 2 that searched; tool called once for both
    assert backend.batch_sizes == [5, 2]
    assert search_tool.calls == [2]
    by = {o["question_id"]: o for o in out}
    assert by["q0"]["predicted_entities"] == ["Q90", "Q142"]  # index 9 is out of range and ignored
    assert by["q1"]["predicted_entities"] == ["Q90"]  # lenient: missing </search>, index 2 out of range
    assert "no <search>" in by["q2"]["error"]
    assert by["q3"]["predicted_entities"] == [] and by["q3"]["error"] is None  # empty answer allowed
    assert "timeout" in by["q4"]["error"]
    traj = json.loads(by["q0"]["trajectory"])
    kinds = [t["kind"] for t in traj]
    assert kinds.count("llm") == 2 and kinds.count("tool") == 1
    assert all(len(t["prompt_hash"]) == 16 for t in traj if t["kind"] == "llm")
    assert by["q0"]["llm_calls"] == 2 and stats.llm_batches == 2


def test_backend_crash_becomes_item_errors():
    backend = ScriptedBackend(lambda m: "!raise:engine died")
    out, _ = run_agents(ela_agent(ElaSettings()), [{"question_id": "a", "question": "x"}], backend, {})
    assert "engine died" in out[0]["error"]


def test_parallel_subcalls_and_agent_exceptions():
    def agent(item, ctx):
        a, b = yield [LLMCall(ChatRequest(messages=[{"role": "user", "content": "one"}])),
                      LLMCall(ChatRequest(messages=[{"role": "user", "content": "two"}]))]
        if item["question_id"] == "bad":
            raise AgentError("cannot parse")
        r = yield ToolCall("echo", a.text + b.text)
        return AgentResult(answer=r)

    backend = ScriptedBackend({"one": "1", "two": "2"})
    out, stats = run_agents(agent, [{"question_id": "ok"}, {"question_id": "bad"}], backend,
                            {"echo": lambda ps: [p.upper() for p in ps]})
    assert backend.batch_sizes == [4]
    assert out[0]["answer"] == "12" and out[0]["error"] is None
    assert out[1]["error"] == "AgentError: cannot parse"


def test_export_sft_keeps_only_exact_matches(tmp_path):
    from tasks.methods.base import MethodContext
    from tasks.methods.ela.method import ElaMethod

    method = ElaMethod(ElaMethod.parse_settings({"export_sft": "true"}))
    items = [{"question_id": "q0", "question": "where is Paris in France"},
             {"question_id": "q1", "question": "what is Paris"}]
    out, _ = run_agents(ela_agent(method.settings), items, ScriptedBackend(_script), {"entity_search": search_tool})
    questions = [{**items[0], "gold_entities": ["Q90", "Q142"]}, {**items[1], "gold_entities": ["Q167646"]}]
    ctx = MethodContext(kb_version=None, root=tmp_path, run_dir=tmp_path / "run")
    write_side_outputs(ctx.run_dir, method.postprocess(out, questions, ctx, shard=0))
    lines = (tmp_path / "run/sft/part-00000.jsonl").read_text().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["question_id"] == "q0" and rec["answer"] == ["Q90", "Q142"] and rec["cot"] == "[0] is the city"
    assert rec["messages"][-1]["content"].endswith("</answer>") and rec["messages"][0]["role"] == "system"


def _cut_off_script(followup_reply: str):
    def script(messages):
        last = messages[-1]["content"]
        if last.startswith("<link>"):
            return "<search> Search(Paris) Search(France) </search>"
        if last.startswith("Your reasoning was cut off"):
            return followup_reply
        return "!length:<think> [0] is the city, and [2] is the country, but let me also consider"
    return script


def test_answer_cut_off_at_max_tokens_gets_one_bounded_follow_up():
    items = [{"question_id": "q0", "question": "where is Paris in France"}]
    backend = ScriptedBackend(_cut_off_script("<answer>[0][2]"))
    out, _ = run_agents(ela_agent(ElaSettings(answer_followup_tokens=24)), items, backend,
                        {"entity_search": search_tool})
    assert out[0]["error"] is None and out[0]["predicted_entities"] == ["Q90", "Q142"]
    assert out[0]["llm_calls"] == 3 and out[0]["side"] is None  # no self-play record from a cut-off reasoning
    follow = backend.requests[-1]
    assert follow.sampling.max_tokens == 24 and follow.messages[-2]["role"] == "assistant"
    steps = json.loads(out[0]["trajectory"])
    assert [s["kind"] for s in steps].count("llm") == 3
    assert any(s.get("step") == "answer-followup" for s in steps)
    # the follow-up's tokens are counted with the item's
    assert out[0]["completion_tokens"] == sum(s["completion_tokens"] for s in steps if s["kind"] == "llm")


def test_follow_up_off_or_useless_leaves_the_item_error():
    items = [{"question_id": "q0", "question": "where is Paris in France"}]
    off, _ = run_agents(ela_agent(ElaSettings(answer_followup_tokens=0)), items,
                        ScriptedBackend(_cut_off_script("<answer>[0]")), {"entity_search": search_tool})
    assert off[0]["error"] == "AgentError: no <answer> in output" and off[0]["llm_calls"] == 2
    useless, _ = run_agents(ela_agent(ElaSettings()), items, ScriptedBackend(_cut_off_script("I think Paris.")),
                            {"entity_search": search_tool})
    assert "also after the answer follow-up" in useless[0]["error"] and useless[0]["llm_calls"] == 3


def test_no_follow_up_when_the_model_stopped_on_its_own():
    items = [{"question_id": "q0", "question": "where is Paris in France"}]
    backend = ScriptedBackend(lambda m: "<search> Search(Paris) </search>" if m[-1]["content"].startswith("<link>")
                              else "I cannot decide.")
    out, _ = run_agents(ela_agent(ElaSettings()), items, backend, {"entity_search": search_tool})
    assert out[0]["error"] == "AgentError: no <answer> in output" and out[0]["llm_calls"] == 2
